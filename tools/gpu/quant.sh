#!/bin/bash
# GPU machine, idle GPU: quantized weights on the 0.6B-shaped random TDT model (model06.sh's, made once
# per machine) — the f16 GGUF converted to q8_0, q6_k, q5_k and q4_k; per type: the file size, `vkasr
# bench` (encoder, decoder and wall time, RTFx and peak device memory at 60 s and 10 min; f16
# precision), the same on the CUDA backend when this build has it, and the packed-batch RTFx of
# `vkasr transcribe --manifest --batch 64` over tools/gpu/make_batch_set.py's inputs. The figures go to
# $OUT/quant.md (a table for docs/model-format.md) next to the JSON and logs. About 10 minutes.
# First the accuracy (about a minute, tools/gpu/quant_acc.sh): each type's encoder output and tokens on one
# 60 s input against the f16 file's, f16 precision, $OUT/quant-accuracy.md; ACC_ONLY=1 stops after it.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=${V:-$PWD/build-gpu/tools/vkasr}
SET=${SET:-${TMPDIR:-/tmp}/batchset}
N=${N:-300}
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv,noheader
. tools/gpu/model06.sh
model06 || exit 1
CUDA=0
$V bench -m "$G06" -d cuda --seconds 1 --runs 1 --json >/dev/null 2>"$OUT/cuda-probe.log" && CUDA=1
CUDA_BENCH=${CUDA_BENCH:-$CUDA} # 0: the CUDA backend only in the accuracy table (saves ~2 minutes)

# qfile T: prints the model file of type T (f16: G06; the others converted from it once per machine).
qfile() {
    local m=${TMPDIR:-/tmp}/p06-$1.gguf
    [ $1 = f16 ] && m=$G06
    if [ ! -f "$m" ]; then
        timeout 300 $V convert "$G06" -o "$m.part" --type $1 >"$OUT/convert-$1.log" 2>&1 && mv "$m.part" "$m" ||
            { rm -f "$m.part"; echo "convert $1 failed: $(tail -n 1 "$OUT/convert-$1.log")" >&2; return 1; }
    fi
    echo "$m"
}

ACC_WAV=${TMPDIR:-/tmp}/quant-acc-60s.wav
[ -f "$ACC_WAV" ] || python3 tools/gpu/make_long_wav.py 60 "$ACC_WAV"
acc_models=()
for t in q8_0 q6_k q5_k q4_k; do m=$(qfile $t) && acc_models+=("$m"); done
BACKENDS="vulkan$([ $CUDA = 1 ] && echo ' cuda')" V=$V tools/gpu/quant_acc.sh "$OUT" "$ACC_WAV" "$G06" \
    ${acc_models[@]+"${acc_models[@]}"}
[ "${ACC_ONLY:-0}" = 1 ] && exit 0

[ -f "$SET/manifest.jsonl" ] || python3 tools/gpu/make_batch_set.py "$N" "$SET"

for t in f16 q8_0 q6_k q5_k q4_k; do
    m=$(qfile $t) || continue
    echo "$t: $(du -m "$m" | cut -f1) MiB"
    timeout 400 $V bench -m "$m" -p f16 --seconds 60,600 --runs 3 --json >"$OUT/quant-$t-vulkan.json"
    echo "$t vulkan bench rc=$?"
    if [ $CUDA = 1 ] && [ "$CUDA_BENCH" = 1 ]; then
        timeout 400 $V bench -m "$m" -d cuda -p f16 --seconds 60,600 --runs 3 --json >"$OUT/quant-$t-cuda.json"
        echo "$t cuda bench rc=$?"
    fi
    $V transcribe -np -m "$m" --manifest "$SET/warm.jsonl" --batch 16 >/dev/null 2>&1 # pipelines made once
    timeout 300 $V transcribe -m "$m" --manifest "$SET/manifest.jsonl" --batch 64 \
        --output-manifest "$OUT/quant-$t-batch64.jsonl" >/dev/null 2>"$OUT/quant-$t-batch64.log"
    echo "$t batch 64 rc=$?: $(grep -E 'inputs, .* RTFx' "$OUT/quant-$t-batch64.log")"
done

python3 - "$OUT" "${TMPDIR:-/tmp}" "$G06" <<'PY' | tee "$OUT/quant.md"
import json, os, re, sys
out, tmp, g06 = sys.argv[1:4]
print("| type | backend | file MiB | peak MiB 60 s | peak MiB 10 min | encoder ms 60 s | encoder ms 10 min "
      "| decoder ms 60 s | decoder ms 10 min | e2e ms 60 s | e2e ms 10 min | batch-64 RTFx |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for t in ("f16", "q8_0", "q6_k", "q5_k", "q4_k"):
    model = g06 if t == "f16" else f"{tmp}/p06-{t}.gguf"
    size = f"{os.path.getsize(model) / 2**20:.0f}" if os.path.exists(model) else "-"
    rtfx = "-"
    try:
        m = re.search(r"RTFx ([0-9.]+) after it", open(f"{out}/quant-{t}-batch64.log").read())
        rtfx = m.group(1) if m else "-"
    except OSError:
        pass
    for be in ("vulkan", "cuda"):
        try:
            j = json.load(open(f"{out}/quant-{t}-{be}.json"))
        except (OSError, ValueError):
            continue
        L = {round(l["seconds"]): l for l in j["lengths"]}
        f = lambda s, k: f"{L[s][k]['median']:.1f}" if s in L else "-"
        p = lambda s: f"{L[s]['peak_device_mib']:.0f}" if s in L else "-"
        print(f"| {t} | {be} | {size} | {p(60)} | {p(600)} | {f(60, 'encoder_ms')} | {f(600, 'encoder_ms')} | "
              f"{f(60, 'decoder_ms')} | {f(600, 'decoder_ms')} | {f(60, 'wall_ms')} | {f(600, 'wall_ms')} | "
              f"{rtfx if be == 'vulkan' else '-'} |")
PY
