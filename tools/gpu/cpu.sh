#!/bin/bash
# GPU machine: the CPU backend's figures on its cores (docs/cpu.md), with the GPU left alone — the same
# table and per-stage times as on the CI machine (tools/cpu_bench.sh), on the 0.6B shape as an f16 GGUF
# as there (made once: tools/make_shaped_model.py, then `vkasr convert --type f16`). Lavapipe through
# Mesa's ICD where the machine has it (LAVAPIPE=0 skips it). About 4 minutes. Output in $OUT (default
# gpu-out/cpu).
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}/cpu; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
if [ -z "${P06:-}" ]; then
    P06=$OUT/p06.gguf
    [ -f "$P06" ] || { python3 tools/make_shaped_model.py "$OUT/p06" >/dev/null &&
        "$V" convert "$OUT/p06" -o "$P06" --type f16 >/dev/null && rm -rf "$OUT/p06"; } || exit 1
fi
P06=$P06 tools/cpu_bench.sh "$V" "$OUT" | tee "$OUT.log"
