#!/bin/bash
# quant_acc.sh OUTDIR AUDIO BASE MODEL...: the encoder output and tokens of each MODEL (quantized files) on
# AUDIO against BASE's (the f16 file), same binary ($V), precision ($PREC, default f16) and backend(s)
# ($BACKENDS, default vulkan); BASE also in f32 precision (the f16 arithmetic's own share). Tables in
# OUTDIR/quant-accuracy.md (tools/gpu/quant_acc.py), runs in OUTDIR/acc/. Used by quant.sh.
set -u
[ $# -ge 3 ] || { echo "usage: quant_acc.sh OUTDIR AUDIO BASE.gguf [MODEL.gguf ...]" >&2; exit 2; }
out=$1 audio=$2 base=$3
shift 3
V=${V:-$PWD/build-gpu/tools/vkasr}
PREC=${PREC:-f16}
here=$(dirname "$0")
mkdir -p "$out/acc"
: >"$out/quant-accuracy.md"
for be in ${BACKENDS:-vulkan}; do
    names=()
    # run NAME MODEL PRECISION: one transcription with the encoder dumped; a failure leaves no NAME.json
    run() {
        rm -rf "$out/acc/$1" "$out/acc/$1.json"
        if timeout 300 "$V" transcribe -np -m "$2" -d "$be" -p "$3" --format json --dump "$out/acc/$1" "$audio" \
            >"$out/acc/$1.json.part" 2>"$out/acc/$1.log"; then
            mv "$out/acc/$1.json.part" "$out/acc/$1.json"
        else
            echo "$1: rc=$? $(tail -n 1 "$out/acc/$1.log")"
            rm -f "$out/acc/$1.json.part"
        fi
    }
    run "$be-base" "$base" "$PREC"
    if [ "$PREC" != f32 ]; then
        run "$be-base-f32" "$base" f32
        names+=("$be-base-f32")
    fi
    for m in "$@"; do
        n=$be-$(basename "$m" .gguf)
        run "$n" "$m" "$PREC"
        names+=("$n")
    done
    { echo "$be, precision $PREC, $(basename "$audio"); base $(basename "$base")"; echo
      python3 "$here/quant_acc.py" "$out/acc" "$be-base" ${names[@]+"${names[@]}"}; echo; } | tee -a "$out/quant-accuracy.md"
done
