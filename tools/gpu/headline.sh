#!/bin/bash
# GPU machine, idle GPU: the table that opens docs/gpu-results.md, from one call (or two back to back,
# PART below) — vkasr on Vulkan, vkasr's CUDA backend and PyTorch (transformers, bf16) on the
# 0.6B-shaped random TDT model (model06.sh): encoder at 60 s and 10 min, decoder and end to end at 60 s
# (`vkasr bench`, f16, median of 5), attention per layer at T = 7500 (bench_attention, the chosen
# kernel and ATT_CONFIGS), the GEMM 7500 x 4096 x 1024 (bench_ops), packed batches over N (1000) inputs
# of 2-20 s (vkasr --batch 256 three times and 64 after a warm-up run at 256, and 256 with one session; PyTorch's padded
# batches of 256, encoder only and end to end), the per-op GPU profiles at 10 min (Vulkan and CUDA) and
# PyTorch's encoder by module (bench_pytorch.py --breakdown).
# About 3 minutes on an H100 (half a minute of it making the model and the inputs). In
# $OUT: table.md (made by headline_table.py) and every log and JSON it is made from.
# PART=1 runs everything up to the GEMM, PART=2 the rest and the table (default: both), for machines
# that limit one command's time more tightly: run both on the same machine with the same OUT.
set -u
PART=${PART:-all}
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
B=$PWD/build-gpu/tests
SET=${SET:-${TMPDIR:-/tmp}/batchset}
N=${N:-1000}
ATT_CONFIGS=${ATT_CONFIGS:-cms8xqmb_dk128}
. tools/gpu/model06.sh
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
model06 || exit 1
[ -f "$SET/manifest.jsonl" ] || python3 tools/gpu/make_batch_set.py "$N" "$SET" >/dev/null
python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav >/dev/null
echo "setup: $(( $(date +%s) - t0 )) s"

if [ "$PART" != 2 ]; then
# PyTorch's encoder: bf16 (and fp32) at 60 s and 10 min
timeout 300 python3 tools/fixtures/bench_pytorch.py --no-generate --out "$OUT/pytorch" >"$OUT/bench-pytorch.log" 2>&1
echo "pytorch rc=$?"
# the same encoder by module (attention, its projections, feed-forwards, ...), bf16
timeout 200 python3 tools/fixtures/bench_pytorch.py --breakdown --out "$OUT/pytorch" >"$OUT/breakdown-pytorch.log" 2>&1
echo "pytorch breakdown rc=$?"
# vkasr bench, f16: Vulkan, then the CUDA backend (-v: the logs give the decoder's iterations, by which
# headline_table.py divides its time: the random model's transcript sets how many there are)
# (a warm-up at 10 min first: 60 s runs straight after PyTorch can be 2.6x slow in every stage;
# docs/gpu-results.md, "The machine and how to measure")
timeout 100 $V bench -m "$G06" -p f16 --seconds 600 --runs 3 >/dev/null 2>&1
timeout 200 $V bench -v -m "$G06" -p f16 --seconds 60,600 --runs 5 --json >"$OUT/vulkan.json" 2>"$OUT/vulkan.log"
echo "vulkan rc=$?"
timeout 200 $V bench -v -m "$G06" -d cuda -p f16 --seconds 60,600 --runs 5 --json >"$OUT/cuda.json" 2>"$OUT/cuda.log"
echo "cuda rc=$?"
# kernels: attention per layer (T = 7500, 8 heads of 128, f16 tensors) and the GEMM
for c in $(echo "$ATT_CONFIGS" | tr , ' '); do
    timeout 60 $B/bench_attention 7500 1024 8 0 5 h16 "$c" 2>&1 | grep -E "^attention|rror" >>"$OUT/attention.txt"
done
timeout 60 $B/bench_ops -x f16 -i 10 --warmup 3 2>&1 | grep -E "^gemm|rror" >"$OUT/gemm.txt"
cat "$OUT/attention.txt" "$OUT/gemm.txt"
fi
[ "$PART" != 1 ] || exit 0
# packed batches: vkasr at 256 and 64 (pipelines made first), PyTorch's padded batches of 256
# (the warm-up is a whole run at batch 256: pipelines are made on first use and kept in the pipeline
# cache, and a batch of 256 inputs takes tiles that 16 do not, so a first run pays for them)
$V transcribe -np -m "$G06" --manifest "$SET/warm.jsonl" --batch 16 >/dev/null 2>&1
$V transcribe -np -m "$G06" --manifest "$SET/manifest.jsonl" --batch 256 >/dev/null 2>&1
# (two sessions on the GPU, --sessions auto, three runs: batch256.log, batch256r2.log, batch256r3.log, the
# table takes their median, since one run's RTFx varies by up to 10 % from call to call; then batch 64
# and batch 256 with one session, batch256s1.log)
for run in 256 256r2 256r3 64 256s1; do
    b=${run%%[rs]*}
    timeout 120 $V transcribe -v -m "$G06" --manifest "$SET/manifest.jsonl" --batch $b \
        $([ "$run" = 256s1 ] && echo --sessions 1) --output-manifest "$OUT/vkasr-batch$run.jsonl" >/dev/null 2>"$OUT/batch$run.log"
    echo "vkasr batch $run rc=$?: $(grep -E 'inputs, .* RTFx' "$OUT/batch$run.log")"
done
for run in 256r2 256r3 256s1; do
    cmp -s "$OUT/vkasr-batch256.jsonl" "$OUT/vkasr-batch$run.jsonl" && echo "batch $run: manifest identical to batch 256's" ||
        echo "batch $run: manifest DIFFERS from batch 256's"
done
timeout 150 python3 tools/fixtures/batch_pytorch.py --model "$P06" --manifest "$SET/manifest.jsonl" --batches 256 \
    --budget 40 --out "$OUT/pytorch-batch" >"$OUT/batch-pytorch.log" 2>&1
echo "pytorch batch rc=$?"
# per-op GPU time at 10 min (the second file of each process: pipelines already made)
timeout 100 $V transcribe -m "$G06" --profile /tmp/a600.wav /tmp/a600.wav >/dev/null 2>"$OUT/profile-vulkan.log"
timeout 100 $V transcribe -m "$G06" -d cuda --profile /tmp/a600.wav /tmp/a600.wav >/dev/null 2>"$OUT/profile-cuda.log"
python3 tools/gpu/headline_table.py "$OUT" | tee "$OUT/table.md"
