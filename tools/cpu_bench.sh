#!/bin/bash
# The CPU figures of docs/cpu.md: process wall (median of RUNS) of `vkasr transcribe` on the CPU backend
# (-d cpu), on lavapipe (-d vulkan with Mesa's lavapipe ICD) and on the reference backend (-d ref, short
# and small only), for the shipped tiny model and a 0.6B-shaped random TDT model
# (tools/make_shaped_model.py, python3 with numpy), on samples/sample.wav (16.6 s) and on 60 s of it
# repeated; then `vkasr bench`'s per-stage times (encoder, decoder) on the CPU backend.
# usage: tools/cpu_bench.sh [VKASR_BINARY] [OUT_DIR]     (defaults: build/tools/vkasr, cpu-out)
# RUNS (default 3) and THREADS (default: every CPU) from the environment.
set -u
V=${1:-build/tools/vkasr}
OUT=${2:-cpu-out}; mkdir -p "$OUT"
RUNS=${RUNS:-3}
[ -z "${THREADS:-}" ] || export VKASR_THREADS=$THREADS
LVP=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
TINY=models/vkasr-tdt-tiny-en.gguf
P06=${P06:-$OUT/p06}
[ -f "$P06/model.safetensors" ] || python3 tools/make_shaped_model.py "$P06" >/dev/null || exit 1
S17=samples/sample.wav
S60=$OUT/sample60.wav
[ -f "$S60" ] || python3 tools/gpu/make_long_wav.py 60 "$S60" $S17 || exit 1
echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"

# wall MODEL AUDIO DEVICE [ENV...]: the median process wall in seconds of RUNS transcriptions
wall() {
    local model=$1 audio=$2 dev=$3; shift 3
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f %e env "$@" "$V" transcribe -np -d "$dev" -m "$model" "$audio" 2>&1 >/dev/null | tail -n 1
    done | sort -n | sed -n "$(((RUNS + 1) / 2))p"
}

printf '| model | audio | cpu | lavapipe | ref |\n| --- | --- | --- | --- | --- |\n'
for m in tiny 06; do
    model=$TINY; [ $m = 06 ] && model=$P06
    for a in 17 60; do
        audio=$S17; [ $a = 60 ] && audio=$S60
        c=$(wall "$model" "$audio" cpu)
        l=-; [ -n "$LVP" ] && l=$(wall "$model" "$audio" vulkan VK_DRIVER_FILES="$LVP" VK_ICD_FILENAMES="$LVP")
        r=-; [ $m = tiny ] && r=$(wall "$model" "$audio" ref)
        printf '| %s | %s s | %s s | %s s | %s s |\n' "$m" "$a" "$c" "$l" "$r"
    done
done
# per stage on the CPU backend: vkasr bench (synthetic audio; encoder, decoder, wall medians)
"$V" bench -d cpu -m "$TINY" --seconds 17,60 --runs "$RUNS" --json >"$OUT/bench-tiny.json" && echo "bench tiny: $OUT/bench-tiny.json"
"$V" bench -d cpu -m "$P06" --seconds 17,60 --runs "$RUNS" --warmup-ms 0 --json >"$OUT/bench-06.json" &&
    echo "bench 0.6B: $OUT/bench-06.json"
"$V" bench -d cpu -m "$TINY" --seconds 17,60 --runs "$RUNS" 2>/dev/null | tail -n 3
"$V" bench -d cpu -m "$P06" --seconds 17,60 --runs "$RUNS" --warmup-ms 0 2>/dev/null | tail -n 3
