#!/bin/bash
# GPU machine, idle GPU: the transducer decoder's two paths — the device-resident search (the default)
# and the host walk it replaced (VKASR_DECODER=host) — on the 0.6B-shaped random TDT model at 60 s and
# the default model on an hour of audio. For each: decoder ms of both paths (three processes each, the
# second file of each process, whose pipelines exist), the device loop's iterations and round trips,
# whether the two paths' tokens (ids, frames, durations) are identical, and a per-op profile of 60 s.
# Run from the repository root (tools/gpu/README.md: Build); about 3 minutes, most of it making the
# 0.6B-shaped model (tools/gpu/model06.sh: made once per machine).
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
V=build-gpu/tools/vkasr
W=${VKASR_BENCH_DIR:-/tmp/vkasr-decoder}
mkdir -p "$W"
[ -f "$W/a60.wav" ] || python3 tools/gpu/make_long_wav.py 60 "$W/a60.wav"
[ -f "$W/a3600.wav" ] || python3 tools/gpu/make_long_wav.py 3600 "$W/a3600.wav"
. tools/gpu/model06.sh
model06 || exit 1
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader

# bench LABEL MODEL WAV
bench() {
    local label=$1 model=$2 wav=$3 path i ms
    for path in host device; do
        ms=""
        for i in 1 2 3; do
            VKASR_DECODER=$path timeout 600 $V transcribe -m "$model" -v --format json "$wav" "$wav" \
                >"$W/$label-$path.json" 2>"$W/$label-$path.log"
            ms="$ms $(grep -o 'decoder [0-9.]* ms' "$W/$label-$path.log" | tail -1 | cut -d' ' -f2)"
        done
        echo "$label: decoder ms, $path path:$ms"
        cat "$W/$label-$path.log" >>"$OUT/decoder.log"
    done
    grep -o 'device decoder: .*' "$W/$label-device.log" | tail -1 | sed "s/^/$label: /"
    if cmp -s "$W/$label-host.json" "$W/$label-device.json"; then
        echo "$label: tokens identical ($(grep -o '"id":' "$W/$label-device.json" | wc -l) over both files)"
    else
        echo "$label: TOKENS DIFFER between the paths: $W/$label-host.json, $W/$label-device.json"
    fi
}
bench p06-60s "$G06" "$W/a60.wav"
bench default-1h "$VKASR_MODEL" "$W/a3600.wav"
# Per-op GPU time at 60 s (while profiling the device path records no graphs: its ops run directly).
for path in host device; do
    VKASR_DECODER=$path timeout 300 $V transcribe -m "$G06" --profile "$W/a60.wav" "$W/a60.wav" \
        >/dev/null 2>"$W/profile-$path.log"
    echo "profile, $path path, second file:"
    awk '/audio in/ {n++} n == 2 && /profile/' "$W/profile-$path.log" | grep -E "search|lstm|gemv|argmax|binary|all ops" 
done
