#!/bin/bash
# GPU machine: the CPU backend's figures on its cores (docs/cpu.md), with the GPU left alone — the same
# table and per-stage times as on the CI machine (tools/cpu_bench.sh), lavapipe through Mesa's ICD.
# About 5 minutes. Output in $OUT (default gpu-out/cpu).
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}/cpu; mkdir -p "$OUT"
tools/cpu_bench.sh "$PWD/build-gpu/tools/vkasr" "$OUT" | tee "$OUT.log"
