#!/bin/bash
# GPU machine, idle GPU: vkasr next to PyTorch on the 0.6B-shaped random TDT model, in one run —
# PyTorch's encoder in bf16 and fp32 (tools/fixtures/bench_pytorch.py, which also saves the model as an
# HF directory), `vkasr bench` in f16 and f32 at 60 s and 10 min (and the CUDA backend, -d cuda, when
# this build has it), the ratios; the cold start (process wall of a 60 s transcription with the
# driver's shader cache and vkasr's pipeline cache both emptied, with vkasr's only, with the driver's
# only, and warm); the per-op GPU profile at 10 min. About 5 minutes. The GEMM configurations are
# gemm_sweep.sh's. Logs and JSON in $OUT (default gpu-out/).
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
. tools/gpu/model06.sh          # P06, G06: the 0.6B-shaped HF directory and its f16 GGUF
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv,noheader

# PyTorch: the encoder in fp32, fp32+TF32 and bf16 at 60 s and 10 min
SAVE=""; [ -f "$P06/config.json" ] || SAVE="--save $P06"
timeout 500 python3 tools/fixtures/bench_pytorch.py $SAVE --no-generate --out "$OUT/pytorch" >"$OUT/bench-pytorch.log" 2>&1
echo "pytorch rc=$?"; grep -E "^\|" "$OUT/bench-pytorch.log"
model06 || exit 1

# vkasr bench: f16 (the GGUF), f32 (the HF directory); the CUDA backend when built in
timeout 300 $V bench -m "$G06" -p f16 --seconds 60,600 --runs 5 --json >"$OUT/bench-vkasr-f16.json"; echo "vkasr f16 rc=$?"
timeout 300 $V bench -m "$P06" -p f32 --seconds 60,600 --runs 3 --json >"$OUT/bench-vkasr-f32.json"; echo "vkasr f32 rc=$?"
if $V bench -m "$G06" -d cuda --seconds 1 --runs 1 --json >/dev/null 2>"$OUT/cuda-probe.log"; then
    timeout 300 $V bench -m "$G06" -d cuda -p f16 --seconds 60,600 --runs 5 --json >"$OUT/bench-cuda-f16.json"
    timeout 300 $V bench -m "$P06" -d cuda -p f32 --seconds 60,600 --runs 3 --json >"$OUT/bench-cuda-f32.json"
else
    echo "CUDA backend: not run ($(head -n 1 "$OUT/cuda-probe.log"))"
fi

# the table and the ratios (encoder against PyTorch's encoder; end to end for vkasr only)
python3 tools/gpu/bench_table.py "$OUT" "vkasr|f16|bench-vkasr-f16.json" "vkasr|f32|bench-vkasr-f32.json" \
    "vkasr cuda|f16|bench-cuda-f16.json" "vkasr cuda|f32|bench-cuda-f32.json"

# cold start: process wall of one 60 s transcription; fresh HOME (so the driver's cache, ~/.cache/nvidia
# or __GL_SHADER_DISK_CACHE_PATH, starts empty) and VKASR_CACHE_DIR per state
python3 tools/gpu/make_long_wav.py 60 /tmp/a60.wav && python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav
VC=$(mktemp -d); H1=$(mktemp -d); H2=$(mktemp -d); H3=$(mktemp -d)
. tools/gpu/cold_start.sh                # run60
run60 cold "$H1"                                     # nothing cached
run60 vkasr_cache_only "$H2"                         # vkasr's cache from the run above, the driver's empty
run60 warm "$H2"                                     # both
run60 driver_cache_only "$H3" VKASR_NO_PIPELINE_CACHE=1   # today's behaviour without vkasr's cache: twice
run60 driver_cache_only_2 "$H3" VKASR_NO_PIPELINE_CACHE=1
rm -rf "$VC" "$H1" "$H2" "$H3"

# per-op GPU time at 10 min (the second file of the process: pipelines already made)
timeout 200 $V transcribe -m "$G06" --profile /tmp/a600.wav /tmp/a600.wav >/dev/null 2>"$OUT/vkasr-profile.log"
grep -E "profile|RTF" "$OUT/vkasr-profile.log" | tail -n 25
