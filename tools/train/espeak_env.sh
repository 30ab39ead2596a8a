# Source this (bash) on the GPU machine, from the repository root, with .espeak carried:
#     . tools/train/espeak_env.sh
# Unpacks the Debian packages fetched by tools/train/fetch_espeak.sh into a private prefix (default
# /tmp/espeak; never into /) and exports what espeak-ng 1.51 and tools/train/corpus.py read:
#   PATH               the prefix's usr/bin first (the espeak-ng program, for checks)
#   LD_LIBRARY_PATH    the stub libpcaudio.so.0, then the prefix's libespeak-ng.so.1 / libsonic.so.0
#   ESPEAK_DATA_PATH   the directory that HOLDS espeak-ng-data (libespeak-ng appends /espeak-ng-data;
#                      Debian installs it in /usr/lib/x86_64-linux-gnu)
#   VKASR_ESPEAK_LIB   the library corpus.py loads with ctypes
# Then checks that the program runs, reports the data path it uses, and makes sound.
_vk_src="${VKASR_ESPEAK_DEBS:-$(pwd)/.espeak}"
_vk_pre="${VKASR_ESPEAK_PREFIX:-/tmp/espeak}"
if ! ls "$_vk_src"/*.deb >/dev/null 2>&1; then
    echo "espeak_env.sh: no .deb files in $_vk_src (run tools/train/fetch_espeak.sh on a machine with apt-get and copy .espeak/ here)" >&2
    return 1 2>/dev/null || exit 1
fi
mkdir -p "$_vk_pre"
for _vk_deb in "$_vk_src"/*.deb; do
    case "$(basename "$_vk_deb")" in libpcaudio0_*) continue ;; esac  # replaced by the stub
    dpkg -x "$_vk_deb" "$_vk_pre" || { echo "espeak_env.sh: dpkg -x $_vk_deb failed" >&2; return 1 2>/dev/null || exit 1; }
done
_vk_lib="$_vk_pre/usr/lib/x86_64-linux-gnu"
export PATH="$_vk_pre/usr/bin:$PATH"
export LD_LIBRARY_PATH="$_vk_src/stub:$_vk_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ESPEAK_DATA_PATH="$_vk_lib"
export VKASR_ESPEAK_LIB="$_vk_lib/libespeak-ng.so.1"
if ! _vk_ver="$("$_vk_pre/usr/bin/espeak-ng" --version 2>&1)"; then
    echo "espeak_env.sh: $_vk_pre/usr/bin/espeak-ng does not run: $_vk_ver" >&2
    ldd "$_vk_pre/usr/bin/espeak-ng" >&2 || true
    return 1 2>/dev/null || exit 1
fi
case "$_vk_ver" in
    *"Data at: $_vk_lib/espeak-ng-data"*) ;;
    *) echo "espeak_env.sh: espeak-ng does not use the unpacked data: $_vk_ver" >&2; return 1 2>/dev/null || exit 1 ;;
esac
_vk_bytes="$("$_vk_pre/usr/bin/espeak-ng" -v en-us --stdout "testing one two three" | wc -c)"
if [ "$_vk_bytes" -lt 20000 ]; then
    echo "espeak_env.sh: espeak-ng produced only $_vk_bytes bytes of audio" >&2
    return 1 2>/dev/null || exit 1
fi
echo "espeak_env.sh: $_vk_ver ($_vk_bytes bytes of test audio)"
unset _vk_src _vk_pre _vk_lib _vk_deb _vk_ver _vk_bytes
