#!/bin/bash
# The CPU figures of docs/cpu.md: process wall and CPU time (user + system; medians of RUNS) of
# `vkasr transcribe` on the CPU backend (-d cpu), on lavapipe (-d vulkan with Mesa's lavapipe ICD) and
# on the reference backend (-d ref, the shipped model only), for the shipped tiny model and a
# 0.6B-shaped random TDT model (tools/make_shaped_model.py, python3 with numpy; or $P06, a directory or
# .gguf of that shape), on samples/sample.wav (16.6 s) and on 60 s of it repeated; then `vkasr bench`'s
# per-stage times (encoder, decoder) on the CPU backend, with its own kernel and with the AVX2 one where
# the CPU has AVX-512. The load average is printed before and after: other work on the machine shows
# in the wall times first.
# usage: tools/cpu_bench.sh [VKASR_BINARY] [OUT_DIR]     (defaults: build/tools/vkasr, cpu-out)
# RUNS (default 3), THREADS (default: every CPU), LAVAPIPE=0 (skip lavapipe: minutes at the 0.6B shape)
# and REF=0 from the environment. Runs from any directory (a carried Release build: pass its vkasr).
set -u
V=$(realpath "${1:-build/tools/vkasr}") || exit 1
OUT=$(realpath -m "${2:-cpu-out}"); mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1
RUNS=${RUNS:-3}
[ -z "${THREADS:-}" ] || export VKASR_THREADS=$THREADS
LVP=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
[ "${LAVAPIPE:-1}" = 0 ] && LVP=
TINY=models/vkasr-tdt-tiny-en.gguf
P06=${P06:-$OUT/p06}
[ -f "$P06" ] || [ -f "$P06/model.safetensors" ] || python3 tools/make_shaped_model.py "$P06" >/dev/null || exit 1
S17=samples/sample.wav
S60=$OUT/sample60.wav
[ -f "$S60" ] || python3 tools/gpu/make_long_wav.py 60 "$S60" $S17 || exit 1
echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); kernel: $("$V" devices 2>/dev/null |
    grep -m1 -o '[A-Za-z0-9+-]* products' || echo '?')"
echo "before: $(uptime)"

# run MODEL AUDIO DEVICE [ENV...]: "wall cpu" (seconds; cpu = user + system) of RUNS transcriptions, the
# median of each
run() {
    local model=$1 audio=$2 dev=$3 t; shift 3
    t=$(for _ in $(seq "$RUNS"); do
        /usr/bin/time -f '%e %U %S' env "$@" "$V" transcribe -np -d "$dev" -m "$model" "$audio" 2>&1 >/dev/null |
            tail -n 1
    done)
    local mid=$(((RUNS + 1) / 2))
    printf '%s (%s)' "$(awk '{print $1}' <<<"$t" | sort -n | sed -n "${mid}p")" \
        "$(awk '{printf "%.2f\n", $2 + $3}' <<<"$t" | sort -n | sed -n "${mid}p")"
}

printf '| model | audio | cpu | lavapipe | ref |\n| --- | --- | --- | --- | --- |\n'
for m in tiny 06; do
    model=$TINY; [ $m = 06 ] && model=$P06
    for a in 17 60; do
        audio=$S17; [ $a = 60 ] && audio=$S60
        c=$(run "$model" "$audio" cpu)
        l=-; [ -n "$LVP" ] && l=$(run "$model" "$audio" vulkan VK_DRIVER_FILES="$LVP" VK_ICD_FILENAMES="$LVP")
        r=-; [ $m = tiny ] && [ "${REF:-1}" != 0 ] && r=$(run "$model" "$audio" ref)
        printf '| %s | %s s | %s s | %s s | %s s |\n' "$m" "$a" "$c" "$l" "$r"
    done
done
# per stage on the CPU backend: vkasr bench (synthetic audio; encoder, decoder, wall medians)
"$V" bench -d cpu -m "$TINY" --seconds 17,60 --runs "$RUNS" --json >"$OUT/bench-tiny.json" && echo "bench tiny: $OUT/bench-tiny.json"
"$V" bench -d cpu -m "$P06" --seconds 17,60 --runs "$RUNS" --warmup-ms 0 --json >"$OUT/bench-06.json" &&
    echo "bench 0.6B: $OUT/bench-06.json"
"$V" bench -d cpu -m "$TINY" --seconds 17,60 --runs "$RUNS" 2>/dev/null | tail -n 3
"$V" bench -d cpu -m "$P06" --seconds 17,60 --runs "$RUNS" --warmup-ms 0 2>/dev/null | tail -n 3
if grep -qw avx512f /proc/cpuinfo; then
    echo "the same with the AVX2 kernel (VKASR_CPU_ISA=avx2):"
    VKASR_CPU_ISA=avx2 "$V" bench -d cpu -m "$P06" --seconds 17 --runs "$RUNS" --warmup-ms 0 2>/dev/null | tail -n 2
fi
echo "after: $(uptime)"
