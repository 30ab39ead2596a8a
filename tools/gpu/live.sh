#!/bin/bash
# GPU machine, idle GPU: the live-transcription figures of docs/live.md with the default stream settings
# (target: finalisation latency at most 1 s). bench_live feeds held-out clips at real time through a
# stream and prints the live WER next to the offline transcript's WER of the same audio, the
# finalisation latency (median, 95th percentile, max) and the compute per audio second. About 7 minutes:
# the audio is fed at real time.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
B=build-gpu/tests/bench_live
M=models/vkasr-tdt-tiny-en.gguf
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader
# 1) the committed held-out clips, three passes in different orders with pauses (~1.5 min), real time
$B $M tests/data/audio/heldout --rounds 3 2>&1 | tee "$OUT/live-heldout.log"
# 2) more voices: the held-out set synthesised again (needs .espeak/, as check.sh), 3 clips per voice
if [ -d .espeak ] && . tools/train/espeak_env.sh >/dev/null 2>&1 &&
    python3 tools/train/corpus.py heldout --out /tmp/heldout-live --per-voice 3 >/dev/null 2>&1; then
    $B $M /tmp/heldout-live --rounds 1 2>&1 | tee "$OUT/live-heldout-voices.log"
else
    echo "no .espeak/: the synthesised held-out set is skipped"
fi
# 3) as fast as possible, catch-up off: compute per audio second with the GPU never waiting for audio
$B $M tests/data/audio/heldout --rounds 3 --speed 0 --no-catch-up 2>&1 | tee "$OUT/live-fast.log"
# 4) the CLI on the README sample at real time
build-gpu/tools/vkasr live -v --timestamps --simulate samples/sample.wav 2>&1 | tee "$OUT/live-cli.log"
# 5) a 0.6B-shaped model (random weights: its words are noise, its cost is real), made by bench.sh
V=build-gpu/tools/vkasr
. tools/gpu/model06.sh
if model06; then
    $B "$G06" tests/data/audio/heldout --rounds 2 2>&1 | tee "$OUT/live-0.6b.log"
fi
grep -hE "^(model|audio|offline|live WER|windows|finalisation)" "$OUT"/live-*.log
