#!/bin/bash
# GPU machine, idle GPU: two builds of vkasr against each other (before and after a change) on the
# 0.6B-shaped random TDT model: `vkasr bench` in f16 at 60 s and 10 min, alternating between the builds
# round by round (ROUNDS, default 3, of --runs 3 each: drift of the machine hits both alike), and on
# the CUDA backend when both builds have it; then each build's per-op GPU profile at 10 min (the
# second file of the process: its pipelines exist). Prints the medians, B / A, and the profiles side by
# side. About 5 minutes once the model exists (made as in bench.sh, kept in $P06 / $G06).
# usage: tools/gpu/ab.sh BUILD_A BUILD_B   (build trees, e.g. build-gpu-before build-gpu)
set -u
[ $# -eq 2 ] && [ -x "$1/tools/vkasr" ] && [ -x "$2/tools/vkasr" ] ||
    { echo "usage: tools/gpu/ab.sh BUILD_A BUILD_B (two build trees with tools/vkasr)"; exit 2; }
A=$(cd "$1" && pwd) B=$(cd "$2" && pwd)
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/ab"
P06=${P06:-/tmp/p06}          # the 0.6B-shaped HF directory (made here when missing)
G06=${G06:-/tmp/p06.gguf}     # ... converted to f16
ROUNDS=${ROUNDS:-3}
nvidia-smi --query-gpu=name,driver_version,memory.used,utilization.gpu --format=csv,noheader
if [ ! -f "$G06" ]; then
    [ -f "$P06/config.json" ] || timeout 500 python3 tools/fixtures/bench_pytorch.py --save "$P06" --no-generate \
        --out "$OUT/ab/pytorch" >"$OUT/ab/model.log" 2>&1
    "$B/tools/vkasr" convert "$P06" -o "$G06" --type f16 >>"$OUT/ab/model.log" 2>&1 ||
        { echo "no 0.6B-shaped model: see $OUT/ab/model.log"; exit 1; }
fi
echo "A = $A"; echo "B = $B"

cuda=yes
for t in "$A" "$B"; do
    "$t/tools/vkasr" bench -m "$G06" -d cuda --seconds 1 --runs 1 --json >/dev/null 2>&1 || cuda=no
done
for r in $(seq "$ROUNDS"); do
    for side in A B; do
        t=$A; [ $side = B ] && t=$B
        timeout 300 "$t/tools/vkasr" bench -m "$G06" -p f16 --seconds 60,600 --runs 3 --json \
            >"$OUT/ab/$side-vulkan-$r.json" || echo "$side vulkan round $r failed"
        [ $cuda = no ] || timeout 300 "$t/tools/vkasr" bench -m "$G06" -d cuda -p f16 --seconds 60,600 --runs 3 \
            --json >"$OUT/ab/$side-cuda-$r.json" || echo "$side cuda round $r failed"
    done
done
[ $cuda = yes ] || echo "CUDA backend: not in both builds, not compared"

python3 - "$OUT/ab" "$ROUNDS" <<'EOF'
import json, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def runs(side, dev):
    out = []
    for r in range(1, rounds + 1):
        try:
            out.append(json.load(open(os.path.join(d, f"{side}-{dev}-{r}.json"))))
        except (OSError, ValueError):
            pass
    return out
print("| backend | audio | what | A (median of rounds) | B | B / A |")
print("|---|---|---|---|---|---|")
for dev in ("vulkan", "cuda"):
    a, b = runs("A", dev), runs("B", dev)
    if not a or not b:
        continue
    for li, L in enumerate(a[0]["lengths"]):
        for key in ("encoder_ms", "decoder_ms", "wall_ms"):
            va = statistics.median(x["lengths"][li][key]["median"] for x in a)
            vb = statistics.median(x["lengths"][li][key]["median"] for x in b)
            print(f"| {dev} | {L['seconds']:g} s | {key} | {va:.1f} | {vb:.1f} | {vb / va:.3f} |")
        fa = statistics.median(x["lengths"][li]["first_ms"] for x in a)
        fb = statistics.median(x["lengths"][li]["first_ms"] for x in b)
        print(f"| {dev} | {L['seconds']:g} s | first run ms (pipelines) | {fa:.1f} | {fb:.1f} | {fb / fa:.3f} |")
        pa = max(x["lengths"][li]["peak_device_mib"] for x in a)
        pb = max(x["lengths"][li]["peak_device_mib"] for x in b)
        print(f"| {dev} | {L['seconds']:g} s | peak device MiB | {pa:.0f} | {pb:.0f} | {pb / pa:.3f} |")
EOF

# per-op GPU time at 10 min, second file of each process
python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav >/dev/null
for side in A B; do
    t=$A; [ $side = B ] && t=$B
    timeout 200 "$t/tools/vkasr" transcribe -m "$G06" --profile /tmp/a600.wav /tmp/a600.wav >/dev/null \
        2>"$OUT/ab/profile-$side.log"
    awk '/audio in/ {n++} n == 2 && /profile/' "$OUT/ab/profile-$side.log" >"$OUT/ab/profile-$side.txt"
done
echo "per-op GPU ms at 10 min (second file), A | B:"
ops() { # the profile's lines as "name ms", sorted by name
    awk '/profile/ { n = ""; for (i = 3; i <= NF - 4; i++) n = n (n == "" ? "" : "_") $i; print n, $(NF - 1) }' "$1" | sort
}
join -a1 -a2 -e - -o 0,1.2,2.2 <(ops "$OUT/ab/profile-A.txt") <(ops "$OUT/ab/profile-B.txt") |
    awk '{ printf "%-28s %10s %10s\n", $1, $2, $3 }' # (no column(1) on every GPU image)
