#!/bin/bash
# GPU machine: .nemo loading against GGUF. Builds a 0.6B-shaped TDT and a 110M-shaped hybrid TDT-CTC
# random .nemo (tools/fixtures/make_nemo.py --random, torch), converts each to f16 GGUF, then for each
# file loads it and transcribes a clip, reporting the process's wall time and peak host memory
# (/usr/bin/time -v), and checks that .nemo and its f32 GGUF give the same transcript. The hybrid also
# runs with --decoder ctc. Output in $OUT (default gpu-out/): nemo.txt (the table) and the logs.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
W=${TMPDIR:-/tmp}/vkasr-nemo; mkdir -p "$W"
CLIP=tests/data/audio/parity/us_fox.wav
R="$OUT/nemo.txt"; : >"$R"
# measure NAME MODEL [ARGS...]: wall seconds, peak RSS (MiB) and exit code of one transcription
measure() {
    local name=$1 model=$2; shift 2
    /usr/bin/time -v timeout 300 "$V" transcribe -np -m "$model" "$@" "$CLIP" >"$W/$name.txt" 2>"$W/$name.log"
    local rc=$?
    local wall=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$W/$name.log")
    local rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$W/$name.log")
    printf "%-24s wall %-9s peak_rss_mib %-7s rc %s\n" "$name" "$wall" "$((${rss:-0} / 1024))" "$rc" | tee -a "$R"
    [ "$rc" -eq 0 ] || tail -3 "$W/$name.log" | tee -a "$R"
}
for shape in 0.6b 110m; do
    N=$W/$shape.nemo
    if [ ! -s "$N" ]; then
        timeout 500 python3 tools/fixtures/make_nemo.py --random "$shape" "$N" >"$W/make-$shape.log" 2>&1 ||
            { echo "make_nemo.py --random $shape failed:" | tee -a "$R"; tail -5 "$W/make-$shape.log" | tee -a "$R"; continue; }
    fi
    echo "$shape: $(du -h "$N" | cut -f1) .nemo" | tee -a "$R"
    timeout 300 "$V" convert "$N" -o "$W/$shape.f16.gguf" --type f16 >>"$W/convert.log" 2>&1 || echo "convert f16 failed" | tee -a "$R"
    timeout 300 "$V" convert "$N" -o "$W/$shape.f32.gguf" --type f32 >>"$W/convert.log" 2>&1 || echo "convert f32 failed" | tee -a "$R"
    measure "$shape.nemo" "$N"
    measure "$shape.nemo-again" "$N"          # page cache warm
    measure "$shape.f16.gguf" "$W/$shape.f16.gguf"
    measure "$shape.nemo-f32" "$N" -p f32
    measure "$shape.f32.gguf" "$W/$shape.f32.gguf" -p f32
    cmp -s "$W/$shape.nemo-f32.txt" "$W/$shape.f32.gguf.txt" && echo "$shape: .nemo and GGUF (f32): same transcript" | tee -a "$R" ||
        echo "$shape: .nemo and GGUF (f32) transcripts DIFFER" | tee -a "$R"
    if [ "$shape" = 110m ]; then
        measure "$shape.nemo-ctc" "$N" --decoder ctc
        timeout 300 "$V" convert "$N" --decoder ctc -o "$W/$shape.ctc.gguf" --type f16 >>"$W/convert.log" 2>&1 &&
            measure "$shape.ctc.gguf" "$W/$shape.ctc.gguf"
    fi
done
cp "$W"/*.log "$OUT/" 2>/dev/null
echo "table in $R"
