#!/bin/bash
# GPU machine, idle GPU: packed batches (issue 13) on the 0.6B-shaped random TDT model (model06.sh's, made
# once per machine) over 1000 synthetic inputs of 2-20 s (tools/gpu/make_batch_set.py: lengths drawn like
# a read-speech corpus's, speech cut from the parity clips): vkasr transcribe --manifest at --batch 1, 16,
# 64 and 256 (f16; RTFx and peak device memory from its summary line), whether every batch size gives
# every input batch 1's transcript, whether the encoder output of 24 inputs in one batch is bit-identical
# to each input alone (f16 on tensor cores, and f32), --devices 0,1 when the machine has two GPUs (else
# 0,0: two sessions on one GPU) at batch 64 and 256, a -v run at batch 64 (each packed batch's stage
# times; the breakdown in $OUT/batch-breakdown.txt), and PyTorch's padded batches at the same sizes on
# the same inputs (tools/fixtures/batch_pytorch.py:
# transformers, bf16, end to end and encoder only; PYTORCH=0 skips it). About 6-8 minutes (2 more the
# first time, making the model). In $OUT: vkasr.log (every vkasr run's stderr, each under a header),
# batch.md (the table), PyTorch's log and JSON; the output manifests stay in $SET.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
V=$PWD/build-gpu/tools/vkasr
SET=${SET:-${TMPDIR:-/tmp}/batchset} # the inputs and their manifest
N=${N:-1000}
nvidia-smi --query-gpu=index,name,driver_version,memory.used,utilization.gpu --format=csv,noheader

# P06 (the 0.6B-shaped HF directory) and G06 (its f16 GGUF), made once per machine
. tools/gpu/model06.sh
model06 || exit 1
[ -f "$SET/manifest.jsonl" ] || python3 tools/gpu/make_batch_set.py "$N" "$SET"

# pipelines made once (the pipeline cache keeps them), so no size pays for them
$V transcribe -np -m "$G06" --manifest "$SET/warm.jsonl" --batch 16 >/dev/null
$V transcribe -np -m "$G06" --manifest "$SET/warm.jsonl" --batch 1 >/dev/null
$V transcribe -np -m "$G06" --manifest "$SET/manifest.jsonl" --batch 256 >/dev/null # its tiles too

for b in 1 16 64 256; do
    timeout 300 $V transcribe -m "$G06" --manifest "$SET/manifest.jsonl" --batch $b \
        --output-manifest "$SET/vkasr-batch$b.jsonl" >/dev/null 2>"$SET/vkasr-batch$b.log"
    echo "vkasr batch $b rc=$?: $(grep -E 'inputs, .* RTFx' "$SET/vkasr-batch$b.log")"
done
python3 - "$SET" <<'EOF'
import json, sys
out = sys.argv[1]
read = lambda b: [json.loads(l)["pred_text"] for l in open(f"{out}/vkasr-batch{b}.jsonl")]  # out: $SET
one = read(1)
for b in (16, 64, 256):
    other = read(b)
    same = sum(x == y for x, y in zip(one, other))
    print(f"transcripts: batch {b}: {same} of {len(one)} equal to batch 1{'' if same == len(one) == len(other) else '  <-- DIFFER'}")
EOF

# the encoder output of 24 inputs in one batch against each alone, bit for bit
head -n 24 "$SET/manifest.jsonl" >"$SET/dump.jsonl"
for p in f16 f32; do
    m=$G06; [ $p = f32 ] && m=$P06
    rm -rf "$SET/dump-$p-1" "$SET/dump-$p-24"
    $V transcribe -np -m "$m" -p $p --manifest "$SET/dump.jsonl" --batch 1 --dump "$SET/dump-$p-1" >/dev/null
    $V transcribe -np -m "$m" -p $p --manifest "$SET/dump.jsonl" --batch 24 --dump "$SET/dump-$p-24" >/dev/null
    python3 - "$SET/dump-$p-1" "$SET/dump-$p-24" $p <<'EOF'
import glob, os, sys
import numpy as np
a, b, p = sys.argv[1:4]
files = sorted(glob.glob(f"{a}/*/encoder.npy"))
worst, same = 0.0, 0
for f in files:
    x, y = np.load(f), np.load(f.replace(a, b, 1))
    same += x.shape == y.shape and x.tobytes() == y.tobytes()
    if x.shape == y.shape:
        worst = max(worst, float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-30)))
print(f"encoder {p}: {same} of {len(files)} inputs bit-identical in a batch of 24 and alone"
      f" (largest difference {worst:.3g} of the largest value)")
EOF
    rm -rf "$SET/dump-$p-1" "$SET/dump-$p-24"
done

# several GPUs in one process: a session per GPU, each taking the next window of inputs
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then DEVS=0,1; else DEVS=0,0; fi
for b in 64 256; do
    timeout 300 $V transcribe -v -m "$G06" --manifest "$SET/manifest.jsonl" --batch $b --devices $DEVS \
        --output-manifest "$SET/vkasr-devices$b.jsonl" >/dev/null 2>"$SET/vkasr-devices$b.log"
    echo "vkasr --devices $DEVS --batch $b rc=$?: $(grep -E 'inputs, .* RTFx' "$SET/vkasr-devices$b.log")"
    cmp -s "$SET/vkasr-devices$b.jsonl" "$SET/vkasr-batch$b.jsonl" && echo "--devices $DEVS: batch $b's output manifest"
done
# where a batch-64 run's time goes: each window, each packed batch's stages, the GPU time per op
timeout 300 $V transcribe -v --profile -m "$G06" --manifest "$SET/manifest.jsonl" --batch 64 >/dev/null \
    2>"$SET/vkasr-batch64-v.log"
# its stage breakdown (docs/batch.md, "Where the time goes"): each window's and call's, the whole run's
grep -E "window of|inputs in [0-9]+ batches|stages:|inputs, .* RTFx" "$SET/vkasr-batch64-v.log" >"$OUT/batch-breakdown.txt"
for f in "$SET"/vkasr-*.log; do echo "=== $(basename "$f")"; cat "$f"; done >"$OUT/vkasr.log"
[ "${PYTORCH:-1}" = 0 ] && PT=skip || PT=run

# PyTorch's padded batches on the same inputs (45 s of end-to-end time per size at most)
[ $PT = skip ] || timeout 480 python3 tools/fixtures/batch_pytorch.py --model "$P06" --manifest "$SET/manifest.jsonl" \
    --batches 1,16,64,256 --budget 45 --out "$OUT" >"$OUT/batch-pytorch.log" 2>&1
ptrc=$?
[ $PT = skip ] || { echo "pytorch rc=$ptrc"; grep -E "^batch|failed" "$OUT/batch-pytorch.log"; }

python3 - "$OUT" "$SET" <<'EOF' | tee "$OUT/batch.md"
import json, re, sys
out, logs = sys.argv[1:3]
def vk(name):
    try:
        m = re.search(r"(\d+) inputs, ([\d.]+) s of audio in ([\d.]+) s on (\d+) worker\(s\): RTFx ([\d.]+), "
                      r"peak device memory ([\d.]+) MiB.*loading the models? ([\d.]+) s, RTFx ([\d.]+) after it",
                      open(f"{logs}/{name}").read())
    except OSError:
        return None
    return m and dict(inputs=int(m[1]), audio=float(m[2]), secs=float(m[3]), rtfx=float(m[5]), mib=float(m[6]),
                      load=float(m[7]), rtfx_loaded=float(m[8]))
try:
    pt = json.load(open(f"{out}/batch_pytorch.json"))["sizes"]
except (OSError, ValueError, KeyError):
    pt = {}
print("| batch | vkasr f16 RTFx (after loading the model) | vkasr peak MiB | PyTorch bf16 end-to-end RTFx | peak MiB | "
      "encoder-only RTFx | padding | vkasr / PyTorch (after loading) |")
print("|---|---|---|---|---|---|---|---|")
for b in (1, 16, 64, 256):
    v, p = vk(f"vkasr-batch{b}.log"), pt.get(str(b), {})
    e2e = p.get("e2e_rtfx")
    f = lambda x, d=0: "n/a" if x is None else f"{x:.{d}f}"
    done = f" ({p['e2e_inputs']} inputs)" if "e2e_inputs" in p else ""
    print(f"| {b} | {f(v and v['rtfx'])} ({f(v and v['rtfx_loaded'])}) | {f(v and v['mib'])} | {f(e2e)}{done} | "
          f"{f(p.get('e2e_peak_gib') and p['e2e_peak_gib'] * 1024)} | "
          f"{f(p.get('encoder_rtfx'))} | {f(p.get('padded_share') and 100 * p['padded_share'], 1)} % | "
          f"{f(v and e2e and v['rtfx'] / e2e, 2)} ({f(v and e2e and v['rtfx_loaded'] / e2e, 2)}) |")
for b in (64, 256):
    d, one = vk(f"vkasr-devices{b}.log"), vk(f"vkasr-batch{b}.log")
    if d and one:
        print(f"\n--devices, batch {b} ({d['inputs']} inputs): RTFx {d['rtfx']:.0f} ({d['rtfx_loaded']:.0f} after loading "
              f"the models in {d['load']:.2f} s), {d['rtfx'] / one['rtfx']:.2f}x one GPU's "
              f"({d['rtfx_loaded'] / one['rtfx_loaded']:.2f}x after loading)")
EOF
