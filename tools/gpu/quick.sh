#!/bin/bash
# GPU machine, idle GPU: the release check in one call of about 10 minutes, for when GPU time is short.
# In order of importance, each step bounded, so that a cut-off run still returns the earlier ones:
#   1. the test suite on the NVIDIA driver, Vulkan and CUDA (validation on; not the > 2^31-element
#      and 30-minute tests: check.sh and cuda_check.sh run those);
#   2. every relpos_attention configuration on the 0.6B encoder's shape at 10 min (T = 7500, 8 heads
#      of 128, f16 tensors): what the tensor-core choice table (tc_choice, vk_op_attention.c) is
#      filled from, and transformers parity in f16 with the fastest of them;
#   3. PyTorch's encoder (bf16, fp32) next to `vkasr bench` f16 at 60 s and 10 min: Vulkan with the
#      choice table, Vulkan with the fastest configuration of step 2 (VKASR_ATTENTION_KERNEL), CUDA;
#   4. the cold start (a 60 s transcription's process wall: nothing cached, vkasr's pipeline cache
#      only, warm) and the per-op profile at 10 min.
# Output in $OUT (default gpu-out/): ctest.log, attention.log, bench-*.json, bench.md, cold.txt,
# profile.log; the summary on stdout. STEPS (default "1 2 3 4") picks steps, to split the check over
# two calls of at most 10 minutes each: STEPS="1 2", then STEPS="3 4" (step 3 then uses the
# choice table only, as step 2's fastest configuration is unknown).
set -u
STEPS=" ${STEPS:-1 2 3 4} "
step() { case "$STEPS" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
BEST=""
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
. tools/gpu/model06.sh
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv,noheader | tee "$OUT/gpu.txt"

# 1. tests
if step 1; then
(cd build-gpu && timeout 420 ctest -j8 --timeout 400 --output-on-failure -E "test_big_tensor|test_install|30min") \
    >"$OUT/ctest.log" 2>&1
echo "ctest rc=$? $(grep -E 'tests passed' "$OUT/ctest.log")"
grep -E "\*\*\*Failed|Timeout|\(Failed\)" "$OUT/ctest.log"
fi

# 2. attention configurations at 10 min
if step 2; then
timeout 120 build-gpu/tests/bench_attention 7500 1024 8 0 5 h16 all 2>&1 | grep -E "^attention|rror" >"$OUT/attention.log"
BEST=$(grep "check=ok" "$OUT/attention.log" | sed -n 's/.*cfg=\([^ ]*\) ms=\([0-9.]*\).*/\2 \1/p' | sort -n | head -n 1 | cut -d' ' -f2)
awk '{ l = "   "; for (i = 1; i <= NF; i++) if ($i ~ /^(cfg|ms|tflops|check)=/) l = l " " $i; print l }' "$OUT/attention.log"
echo "fastest attention configuration at T=7500: ${BEST:-none}"
# the network with it: transformers parity in f16 (tokens exact, encoder within tolerance)
if [ -n "$BEST" ]; then
    (cd build-gpu && VKASR_ATTENTION_KERNEL=$BEST timeout 120 ctest -j8 -R "^parity_.*_f16$" --output-on-failure) \
        >"$OUT/ctest-parity-best.log" 2>&1
    echo "parity f16 with $BEST: rc=$? $(grep -E 'tests passed' "$OUT/ctest-parity-best.log")"
fi
fi

# 3. PyTorch and vkasr
if step 3; then
SAVE=""; [ -f "$P06/config.json" ] || SAVE="--save $P06"
timeout 300 python3 tools/fixtures/bench_pytorch.py $SAVE --no-generate --out "$OUT/pytorch" >"$OUT/bench-pytorch.log" 2>&1
echo "pytorch rc=$?"
model06 || exit 1
timeout 120 $V bench -m "$G06" -p f16 --seconds 60,600 --runs 5 --json >"$OUT/bench-vulkan.json"; echo "vulkan rc=$?"
if [ -n "$BEST" ]; then
    VKASR_ATTENTION_KERNEL=$BEST timeout 120 $V bench -m "$G06" -p f16 --seconds 60,600 --runs 5 --json \
        >"$OUT/bench-vulkan-best.json"; echo "vulkan $BEST rc=$?"
fi
timeout 120 $V bench -m "$G06" -d cuda -p f16 --seconds 60,600 --runs 5 --json >"$OUT/bench-cuda.json" 2>"$OUT/cuda.err"
echo "cuda rc=$? $(head -n 1 "$OUT/cuda.err")"
python3 tools/gpu/bench_table.py "$OUT" "vkasr Vulkan|f16|bench-vulkan.json" "vkasr Vulkan, ${BEST:-none}|f16|bench-vulkan-best.json" \
    "vkasr CUDA|f16|bench-cuda.json" | tee "$OUT/bench.md"

fi

# 4. cold start and profile
if step 4; then
python3 tools/gpu/make_long_wav.py 60 /tmp/a60.wav && python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav
VC=$(mktemp -d); H1=$(mktemp -d); H2=$(mktemp -d)
. tools/gpu/cold_start.sh # run60
{
    run60 cold "$H1"             # nothing cached
    run60 vkasr_cache_only "$H2" # vkasr's cache from the run above, the driver's empty
    run60 warm "$H2"             # both
} | tee "$OUT/cold.txt"
rm -rf "$VC" "$H1" "$H2"
timeout 60 $V transcribe -m "$G06" --profile /tmp/a600.wav /tmp/a600.wav >/dev/null 2>"$OUT/profile.log"
grep -E "profile|RTF" "$OUT/profile.log" | tail -n 25
fi
