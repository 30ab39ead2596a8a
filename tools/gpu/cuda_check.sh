#!/bin/bash
# GPU machine, the CUDA backend (issue 10): builds the -DVKASR_CUDA=ON tree where the machine can (else
# uses build-gpu carried from a Debian 12 machine, tools/gpu/README.md), runs the CUDA tests
# (`ctest -L cuda`: every op test and its tiny-grid twin on CUDA against the C reference, relu and pad
# over > 2^31 elements, transformers parity in f32 and f16, the network's chunking and stage taps, the
# memory plan and 30 minutes in one call: test_asr_cuda, test_long_audio*_cuda), the Vulkan suite of the
# same tree on the NVIDIA driver, then the 0.6B-shaped random TDT model on `-d cuda` and on Vulkan at
# 60 s, 10 min and 1 hour (wall, features, encoder, decoder, peak device memory; f16, and f32 up to
# 10 min), with PyTorch's encoder (bf16, fp32) on the same GPU from bench_pytorch.py. About 6 minutes on
# an H100.
# Seven files go to $OUT (default gpu-out/): summary.txt (read it first), devices.txt, ctest-cuda.log
# (every CUDA test's output), ops-cuda.txt (its report lines), ctest-vulkan.log, bench-pytorch.log,
# speed.log; scratch files to $W.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
W=${TMPDIR:-/tmp}/vkasr-cuda-check; mkdir -p "$W"
B=${VKASR_CUDA_TREE:-build-gpu}
S="$OUT/summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu --format=csv | tee -a "$S"
if [ ! -x "$B/tools/vkasr" ]; then
    say "== building $B (-DVKASR_CUDA=ON) on this machine"
    { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DVKASR_TEST_SYSTEM_DRIVER=ON -DVKASR_GPU_TESTS=ON -DVKASR_CUDA=ON &&
      cmake --build "$B" -j "$(nproc)"; } >"$W/build.log" 2>&1 || { tail -30 "$W/build.log" | tee -a "$S"; say "build failed"; exit 1; }
fi
V=$B/tools/vkasr
grep -q "VKASR_CUDA:BOOL=ON" "$B/CMakeCache.txt" || { say "$B was not configured with -DVKASR_CUDA=ON"; exit 1; }
"$V" devices >"$OUT/devices.txt" 2>&1; say "vkasr devices rc=$?"; grep -E "^device|usable" "$OUT/devices.txt" | tee -a "$S"

# 1. correctness on CUDA: expect "100% tests passed"; per op the worst NMSE, and no SKIP counted as a pass
# (-V: every test's own report lines, "NN: ..." with NN the test number of its "Start NN: name" line)
(cd "$B" && timeout 300 ctest -L cuda -j 6 -V --timeout 280) >"$OUT/ctest-cuda.log" 2>&1
say "ctest -L cuda rc=$?"
grep -E "tests passed|\*\*\*Failed|Timeout|\(Failed\)|Not Run" "$OUT/ctest-cuda.log" | tee -a "$S"
grep -E "Start +[0-9]+: |^[0-9]+: (device|SKIP|FAIL|largest|worst|.*check\(s\)|.*relative error|.*GB/s|PASS|.*token ids)" \
    "$OUT/ctest-cuda.log" >"$OUT/ops-cuda.txt"
grep -E "^[0-9]+: (SKIP|FAIL|largest|worst|.*GB/s|PASS|.*token ids)" "$OUT/ops-cuda.txt" | sort -u | tee -a "$S"
awk '/Start +[0-9]+: / {k = $2; sub(":", "", k); name[k] = $3}
     /^[0-9]+: .*encoder .*relative error/ {k = $1; sub(":", "", k); for (i = 1; i < NF; i++) if ($i == "error") v = $(i + 1)
                                           if (v + 0 > worst[k] + 0) worst[k] = v}
     END {for (k in worst) printf "%-28s worst encoder relative error vs transformers %s\n", name[k], worst[k]}' \
    "$OUT/ops-cuda.txt" | sort | tee -a "$S"

# 2. the Vulkan suite of the same tree on the NVIDIA driver (validation on)
(cd "$B" && timeout 240 ctest -LE cuda -j 8 --output-on-failure --timeout 200 -E "test_big_tensor|test_install") \
    >"$OUT/ctest-vulkan.log" 2>&1
say "ctest (Vulkan suite) rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|\(Failed\)" "$OUT/ctest-vulkan.log" | tee -a "$S"

# 3. speed: the 0.6B-shaped TDT model, Vulkan vs CUDA, same GPU, same files
python3 tools/gpu/make_long_wav.py 60 /tmp/a60.wav && python3 tools/gpu/make_long_wav.py 600 /tmp/a600.wav &&
    python3 tools/gpu/make_long_wav.py 3600 /tmp/a3600.wav
[ -d /tmp/p06 ] || timeout 240 python3 tools/fixtures/bench_pytorch.py --save /tmp/p06 --no-generate --out "$W" \
    >"$OUT/bench-pytorch.log" 2>&1
say "pytorch rc=$? (encoder only, same GPU):"; grep -E "^\|" "$OUT/bench-pytorch.log" | tee -a "$S"
[ -f /tmp/p06.gguf ] || timeout 120 "$V" convert /tmp/p06 -o /tmp/p06.gguf --type f16 >"$W/convert.log" 2>&1 ||
    { tail -3 "$W/convert.log" | tee -a "$S"; }
# Each file twice in one process, the second run counted (the first pays for pipeline creation / cuBLASLt
# heuristics); the hour once.
run() { # DEVICE PRECISION FILES...
    local dev=$1 prec=$2; shift 2
    timeout 150 "$V" transcribe -m /tmp/p06.gguf -d "$dev" -p "$prec" -v "$@" >/dev/null 2>"$W/t.err"
    echo "rc=$?" >>"$W/t.err"; sed "s/^/$dev $prec: /" "$W/t.err" >>"$OUT/speed.log"
}
: >"$OUT/speed.log"
for dev in vulkan cuda; do
    run $dev f16 /tmp/a60.wav /tmp/a60.wav /tmp/a600.wav /tmp/a600.wav
    run $dev f32 /tmp/a60.wav /tmp/a60.wav /tmp/a600.wav /tmp/a600.wav
    run $dev f16 /tmp/a3600.wav
done
# per-op GPU time on each device (f16, the second 10-minute file): the per-stage ratio
for dev in vulkan cuda; do
    timeout 60 "$V" transcribe -m /tmp/p06.gguf -d $dev --profile /tmp/a600.wav /tmp/a600.wav 2>&1 >/dev/null |
        awk '/RTF/ {n++} n == 2 && /profile/' >"$W/profile-$dev.txt"
done
say "per-op GPU ms, 10 min f16 (op: vulkan | cuda):"
awk 'FNR == 1 {f++} /profile/ {name=$3; ms=$(NF-1); if (f == 1) v[name]=ms; else c[name]=ms; seen[name]=1}
     END {for (k in seen) printf "  %-22s %10s | %10s\n", k, v[k], c[k]}' "$W/profile-vulkan.txt" "$W/profile-cuda.txt" |
    sort | tee -a "$S"
# the same transcript on both devices (f16, 10 min)
for dev in vulkan cuda; do timeout 60 "$V" transcribe -m /tmp/p06.gguf -d $dev /tmp/a600.wav >"$W/text-$dev.txt" 2>/dev/null; done
cmp -s "$W/text-vulkan.txt" "$W/text-cuda.txt" && say "10 min f16 transcripts: identical ($(wc -w <"$W/text-cuda.txt") words)" ||
    say "10 min f16 transcripts: differ ($(wc -w <"$W/text-vulkan.txt") / $(wc -w <"$W/text-cuda.txt") words)"
say ""
say "device precision audio: wall ms | features | encoder | decoder | peak MiB (second run of each file)"
awk '/RTF/ {
    dev=$1; prec=$2; sub(":", "", prec); file=$4; sub(":", "", file)
    match($0, /in [0-9.]+ ms/); wall=substr($0, RSTART+3, RLENGTH-6)
    match($0, /features [0-9.]+/); feat=substr($0, RSTART+9, RLENGTH-9)
    match($0, /encoder [0-9.]+/); enc=substr($0, RSTART+8, RLENGTH-8)
    match($0, /decoder [0-9.]+/); dec=substr($0, RSTART+8, RLENGTH-8)
    match($0, /memory [0-9.]+/); peak=substr($0, RSTART+7, RLENGTH-7)
    key=dev" "prec" "file; n[key]++
    if (n[key] == 2 || file ~ /3600/) printf "%-6s %-4s %-16s %9s | %7s | %8s | %8s | %7s\n", dev, prec, file, wall, feat, enc, dec, peak
}' "$OUT/speed.log" | tee -a "$S"
grep -E "rc=[1-9]|error|vkasr: [A-Z]" "$OUT/speed.log" | head -5 | tee -a "$S"
say "summary in $S; logs: devices.txt, ctest-cuda.log, ops-cuda.txt, ctest-vulkan.log, bench-pytorch.log, speed.log"
