#!/bin/bash
# GPU machine, idle GPU: the figures of docs/gpu-results.md — GEMM configurations, the 0.6B-shaped TDT
# model through vkasr (60 s, 10 min; f16 and f32) with per-op profile, PyTorch on the same GPU, and an
# hour of audio in one call.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=build-gpu/tools/vkasr
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
{ build-gpu/tests/bench_ops; for c in cm64x64 cm128x128; do build-gpu/tests/bench_ops --cfg $c; done; } 2>&1 |
    grep -E "kernel|gpu \(" | tee "$OUT/bench-ops.log"
python3 tools/gpu/make_long_wav.py 60 /tmp/a60.wav && python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav
python3 tools/gpu/make_long_wav.py 3600 /tmp/a3600.wav
timeout 200 python3 tools/fixtures/bench_pytorch.py --save /tmp/p06 --no-generate --out /tmp/pt >"$OUT/bench-pytorch.log" 2>&1
echo "pytorch rc=$?"; grep -E "^\|" "$OUT/bench-pytorch.log"
$V convert /tmp/p06 -o /tmp/p06.gguf --type f16 2>&1 | tail -1
for f in /tmp/a60.wav /tmp/a600.wav; do timeout 120 $V transcribe -m /tmp/p06.gguf -v $f $f >/dev/null 2>>"$OUT/vkasr-bench.log"; done
for f in /tmp/a60.wav /tmp/a600.wav; do timeout 120 $V transcribe -m /tmp/p06 -p f32 -v $f $f >/dev/null 2>>"$OUT/vkasr-bench.log"; done
timeout 120 $V transcribe -m /tmp/p06.gguf --profile /tmp/a60.wav /tmp/a600.wav >/dev/null 2>"$OUT/vkasr-profile.log"
# an hour in one call: the default model, then the 0.6B-shaped one
timeout 120 $V transcribe -v /tmp/a3600.wav >/tmp/a3600.txt 2>>"$OUT/vkasr-bench.log"; echo "hour default rc=$? words $(wc -w </tmp/a3600.txt)"
timeout 200 $V transcribe -m /tmp/p06.gguf -v /tmp/a3600.wav >/dev/null 2>>"$OUT/vkasr-bench.log"; echo "hour 0.6B rc=$?"
grep -E "RTF|peak|encoder" "$OUT/vkasr-bench.log" | tail -20; grep -E "relpos|linear|RTF|peak" "$OUT/vkasr-profile.log"
