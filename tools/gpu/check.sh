#!/bin/bash
# GPU machine, correctness: the whole test suite on the NVIDIA driver (validation layer on; the
# tensor-core attention and GEMM kernels are tested there against the C reference; f16 parity with
# transformers), the attention kernels' timings, and the default model's WER on the held-out set.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu --format=csv | tee "$OUT/gpu.txt"
build-gpu/tools/vkasr devices 2>&1 | tee -a "$OUT/gpu.txt" | grep -E "device|usable"
(cd build-gpu && ctest -j8 --output-on-failure --timeout 300 -E "test_big_tensor|test_install") >"$OUT/ctest-all.log" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|\(Failed\)" "$OUT/ctest-all.log"
grep -E "worst nmse|largest nmse" "$OUT/ctest-all.log"
grep -E "encoder .*relative" "$OUT/ctest-all.log" | sort -t' ' -k1,1 | awk '{print $0}' | sort -u | tail -4
# attention (T = 7500: 10 min of audio; 750: 60 s): the scalar f32 kernel, then the tensor-core kernel
# on f32 tensors rounded while staged (f16) and on f16 tensors (h16: the network's f16 precision, the
# mode headline.sh times)
for T in 750 7500; do
    for c in "f32 scalar" "f16 cms8xqmb_dk128" "h16 cms8xqmb_dk128"; do build-gpu/tests/bench_attention $T 1024 8 0 5 $c; done
done 2>&1 | grep -E "^attention|rror" | tee "$OUT/bench-attention.log"
. tools/train/espeak_env.sh >/dev/null && python3 tools/train/corpus.py heldout --out /tmp/heldout >/dev/null 2>&1
echo "heldout rc=$? $(ls /tmp/heldout | wc -l) files"
tools/train/eval_wer.sh -b build-gpu/tools/vkasr --details "$OUT/wer-details.txt" /tmp/heldout 2>&1 | tee "$OUT/wer.txt"
