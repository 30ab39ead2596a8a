#!/bin/bash
# GPU machine: long audio in one call (issue 12) with the 0.6B-shaped random TDT model in f16 —
# 10, 60 and 180 minutes with auto attention, 60 and 180 minutes under --max-memory 3G (and 180 under
# 2.5G, where the plan must shrink its chunks; transcripts compared with the uncapped runs), the 51-minute
# input whose first subsampling convolution would hold 2,521,890,816 elements (-v shows its tiles), and
# 180 minutes with full attention last (the slowest). Each file runs in its own process after a 5 s
# warm-up file (pipelines are created on first use); -v gives wall, encoder, decoder, planned and peak
# device memory and the process's peak host memory. Writes $OUT/longaudio-*.log and
# $OUT/longaudio.md (the table of docs/long-audio.md). About 5-7 minutes, most of it making the model
# (tools/gpu/model06.sh) unless $LONGAUDIO_MODEL names a GGUF of it already.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=build-gpu/tools/vkasr
TMP=${TMPDIR:-/tmp}
. tools/gpu/model06.sh
M=${LONGAUDIO_MODEL:-$G06}
nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv,noheader
[ -f "$M" ] || model06 || exit 1
# 51 min 18.48 s: 307,848 mel frames, L1 = 153,924 rows of the first conv: 153,924 x 64 x 256 = 2,521,890,816
for s in 5 600 3078.48 3600 10800; do
    [ -f "$TMP/la_$s.wav" ] || python3 tools/gpu/make_long_wav.py "$s" "$TMP/la_$s.wav"
done

# run NAME SECONDS [OPTIONS...]: one process, the warm-up file then the long one
run() {
    name=$1 secs=$2; shift 2
    local t0=$SECONDS
    timeout 400 $V transcribe -m "$M" -v "$@" "$TMP/la_5.wav" "$TMP/la_$secs.wav" >"$OUT/longaudio-$name.txt" \
        2>"$OUT/longaudio-$name.log"
    echo "$name: rc=$? in $((SECONDS - t0)) s"
    grep -E "attention:|memory plan:|subsampling:" "$OUT/longaudio-$name.log" | tail -3 | cut -c1-400
    grep -F "la_$secs.wav:" "$OUT/longaudio-$name.log" | grep -E "RTF|not enough|failed"
}
run 10min-auto 600
run 51min-auto 3078.48
run 60min-auto 3600
run 60min-3G 3600 --max-memory 3G
run 180min-auto 10800
run 180min-3G 10800 --max-memory 3G
# tight enough that the subsampling tiles shrink: the transcript must not change
run 180min-2.5G 10800 --max-memory 2.5G
run 180min-full 10800 --attention full
for pair in "60min-3G 60min-auto" "180min-3G 180min-auto" "180min-2.5G 180min-auto"; do
    set -- $pair
    if cmp -s "$OUT/longaudio-$1.txt" "$OUT/longaudio-$2.txt"; then echo "$1: transcript identical to $2"
    else echo "$1: transcript DIFFERS from $2"; fi
done | tee "$OUT/longaudio-compare.txt"

# the table: one row per run from its -v lines
{
    echo "| run | attention | wall s | features ms | encoder ms | decoder ms | device planned MiB | device peak MiB | host peak MiB |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for name in 10min-auto 51min-auto 60min-auto 60min-3G 180min-auto 180min-3G 180min-2.5G 180min-full; do
        f="$OUT/longaudio-$name.log"
        att=$(grep -E "info: attention:" "$f" | tail -1 | sed -E 's/.*attention: ([a-z]+( \[[0-9]+, [0-9]+\])?).*/\1/')
        line=$(grep -E "s audio in .* ms \(RTF" "$f" | tail -1)
        if [ -z "$line" ]; then
            echo "| $name | $att | failed: $(grep -E "vkasr: .*la_" "$f" | tail -1 | cut -c1-200) | | | | | | |"
            continue
        fi
        echo "$line" | sed -E "s/.* audio in ([0-9.]+) ms \(RTF [0-9.]+\): load [0-9.]+, features ([0-9.]+), encoder ([0-9.]+), decoder ([0-9.]+) ms; device memory planned ([0-9.]+) MiB, peak ([0-9.]+) MiB; host peak ([0-9.]+) MiB/| $name | $att | \1 | \2 | \3 | \4 | \5 | \6 | \7 |/" |
            awk -F'|' 'BEGIN{OFS="|"} {$4 = sprintf(" %.2f ", $4 / 1000); print}'
    done
} >"$OUT/longaudio.md"
cat "$OUT/longaudio.md"
