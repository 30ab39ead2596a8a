#!/bin/bash
# GPU machine, second call (training still runs beside it, so no timings here): the 0.6B-shaped random
# TDT model as an HF directory and GGUF, vkasr transcribing 60 s and 10 min with it (does it work, how much
# memory), the coopmat GEMM configurations.
set -u
. tools/gpu/env.sh
V=build-gpu/tools/vkasr
python3 tools/gpu/make_long_wav.py 60 /tmp/a60.wav && python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav
[ -d /tmp/p06 ] || python3 tools/fixtures/bench_pytorch.py --save /tmp/p06 --no-generate --out /tmp/ptdry >"$OUT/p06-save.log" 2>&1
echo "save rc=$?"; tail -5 "$OUT/p06-save.log"
[ -f /tmp/p06.gguf ] || $V convert /tmp/p06 -o /tmp/p06.gguf --type f16; ls -l /tmp/p06.gguf
for f in /tmp/a60.wav /tmp/a600.wav; do
    timeout 240 $V transcribe -m /tmp/p06.gguf -v -np --format json $f >"/tmp/$(basename $f).json" 2>>"$OUT/p06-dry.log"
    echo "transcribe $f rc=$?"; head -c 300 "/tmp/$(basename $f).json"; echo
done
tail -6 "$OUT/p06-dry.log"
build-gpu/tests/bench_ops --cfg list 2>&1 | head -20
echo "== training"; tail -8 /tmp/train.log
bash tools/gpu/hold.sh 530
