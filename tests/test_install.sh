#!/bin/sh
# test_install.sh BUILD_DIR SOURCE_DIR WORK_DIR — installs the build into WORK_DIR/prefix and builds
# examples/transcribe.c against it three ways, as applications would: pkg-config (shared), CMake
# find_package with vkasr::vkasr and with vkasr::vkasr_static. Then runs each on the shipped sample with
# the installed default model.
set -eu
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/vkasr.h share/vkasr/vkasr-tdt-tiny-en.gguf bin/vkasr; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
# the debugging hooks are for the source tree's own tools (docs/architecture.md, "Public API")
[ ! -e "$prefix/include/vkasr_debug.h" ] || { echo "FAIL: include/vkasr_debug.h installed"; exit 1; }
libdir=$(dirname "$(find "$prefix" -name vkasr.pc | head -1)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -Wall -Wextra -Werror "$src/examples/transcribe.c" $(pkg-config --cflags --libs vkasr) \
    -o "$work/transcribe_pc"
cmake -S "$src/tests/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
    -DEXAMPLE="$src/examples/transcribe.c" >"$work/consumer.log"
cmake --build "$work/consumer" >>"$work/consumer.log"
model="$prefix/share/vkasr/vkasr-tdt-tiny-en.gguf"
for exe in "$work/transcribe_pc" "$work/consumer/transcribe_shared" "$work/consumer/transcribe_static"; do
    out=$(LD_LIBRARY_PATH="$libdir" "$exe" "$model" "$src/samples/sample.wav" | head -1)
    case "$out" in
        *"mighty customer"*"skis cap") echo "ok: $(basename "$exe")" ;;
        *) echo "FAIL: $(basename "$exe") printed: $out"; exit 1 ;;
    esac
done
# The installed CLI finds the installed model by itself only when installed to its configured prefix;
# here it is given explicitly.
"$prefix/bin/vkasr" transcribe -np -m "$model" "$src/samples/sample.wav" | grep -q "skis cap" || {
    echo "FAIL: installed vkasr CLI"; exit 1; }
echo "ok: installed vkasr CLI"
