#!/bin/bash
# GPU machine, idle GPU: the whole test suite on the NVIDIA driver, then the figures of
# docs/gpu-results.md — GEMM and attention kernels, the 0.6B-shaped TDT model through vkasr (60 s, 10 min;
# f16 and f32) with per-op profile, and PyTorch on the same GPU.
set -u
. tools/gpu/env.sh
V=build-gpu/tools/vkasr
(cd build-gpu && ctest -j4 --output-on-failure --timeout 300 -E test_big_tensor) >"$OUT/ctest-all.log" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" "$OUT/ctest-all.log"
{ build-gpu/tests/bench_ops; for c in cm64x64 cm128x128; do build-gpu/tests/bench_ops --cfg $c; done; } 2>&1 |
    grep -E "kernel|gpu \(" | tee "$OUT/bench-ops.log"
for a in "" VKASR_DISABLE_COOPMAT=1; do env $a build-gpu/tests/bench_attention 7500 1024 8 0 5; done 2>&1 | tee "$OUT/bench-attention.log"
python3 tools/gpu/make_long_wav.py 60 /tmp/a60.wav && python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav
python3 tools/fixtures/bench_pytorch.py --save /tmp/p06 --no-generate --out /tmp/pt >"$OUT/bench-pytorch.log" 2>&1
$V convert /tmp/p06 -o /tmp/p06.gguf --type f16 2>&1 | tail -1
for f in /tmp/a60.wav /tmp/a600.wav; do $V transcribe -m /tmp/p06.gguf -v $f $f >/dev/null 2>>"$OUT/vkasr-bench.log"; done
for f in /tmp/a60.wav /tmp/a600.wav; do $V transcribe -m /tmp/p06 -p f32 -v $f $f >/dev/null 2>>"$OUT/vkasr-bench.log"; done
$V transcribe -m /tmp/p06.gguf --profile /tmp/a60.wav /tmp/a600.wav >/dev/null 2>"$OUT/vkasr-profile.log"
# an hour in one call: the default model, then the 0.6B-shaped one
python3 tools/gpu/make_long_wav.py 3600 /tmp/a3600.wav
$V transcribe -v /tmp/a3600.wav >/tmp/a3600.txt 2>>"$OUT/vkasr-bench.log"; wc -w /tmp/a3600.txt
timeout 240 $V transcribe -m /tmp/p06.gguf -v /tmp/a3600.wav >/dev/null 2>>"$OUT/vkasr-bench.log"
grep -E "RTF" "$OUT/vkasr-bench.log"; grep -E "relpos|linear|RTF" "$OUT/vkasr-profile.log"
grep -E "^\|" "$OUT/bench-pytorch.log"
