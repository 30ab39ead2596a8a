#!/bin/sh
# glslc_reuse.sh — glslc for scripts/test.sh's extra builds (ASan, TSan, CUDA; -DVKASR_GLSLC=this): a
# shader variant the main build already compiled (in $VKASR_REUSE_SHADERS, its shaders/ directory) is
# copied from there when no file it was compiled from is newer; anything else goes to glslc. A variant's
# SPIR-V depends on its source and defines only, not on the build's C flags or compiler.
set -u
out="" dep="" prev=""
for a in "$@"; do
    case $prev in
    -o) out=$a ;;
    -MF) dep=$a ;;
    esac
    prev=$a
done
cache=${VKASR_REUSE_SHADERS:-}
if [ -n "$cache" ] && [ -n "$out" ] && [ -n "$dep" ]; then
    spv=$cache/$(basename "$out")
    if [ -f "$spv" ] && [ -f "$spv.d" ]; then
        fresh=1
        # the dependency file: "TARGET: SRC INC ... \" lines
        for f in $(sed -e '1s/^[^:]*://' -e 's/\\$//' "$spv.d"); do
            if [ ! -f "$f" ] || [ "$f" -nt "$spv" ]; then
                fresh=0
                break
            fi
        done
        if [ $fresh -eq 1 ] && cp "$spv" "$out" &&
            { printf '%s:' "$out"; sed '1s/^[^:]*://' "$spv.d"; } >"$dep"; then
            exit 0
        fi
    fi
fi
exec glslc "$@"
