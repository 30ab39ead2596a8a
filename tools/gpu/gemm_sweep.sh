#!/bin/bash
# GPU machine, idle GPU: every tensor-core GEMM configuration on the 0.6B encoder's real products
# (bench_ops --shapes encoder: T = 750 and 7500 rows, the subsampling's pointwise convs and linear and
# its last tile, the joint), with f16 x (splits of K 1, 2, 4) and, with the op's own choice, f32 x,
# next to PyTorch's torch.matmul in f16 and bf16 (cuBLAS) on the same shapes in the same run. First
# the linear op tests on this GPU (every real configuration against the reference, and the tiles'
# bit-for-bit agreement that the choice table's M classes rely on). About 6 minutes: each (shape,
# configuration) pair runs in a process of its own.
#
# Output ($OUT/gemm-sweep.log, and on stdout), one line each:
#   gemm shape=NAME M= N= K= x=f16 w=f16 y=f32 cfg=NAME split=S ms= tflops= check=ok    (vkasr)
#   torch shape=NAME M= N= K= dtype=bf16 ms= tflops=                                       (cuBLAS)
#   best shape=NAME cfg=NAME split=S tflops= cublas_bf16= cublas_f16= ratio_bf16=         (per shape)
# The "best" lines are what the choice table in src/backend/vulkan/vk_gemm_configs.c is filled from.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
B=build-gpu/tests
LOG=$OUT/gemm-sweep.log
: >"$LOG"
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader | tee -a "$LOG"

# correctness first: a configuration that is wrong on this GPU must not be timed as if it were right
timeout 300 $B/test_ops_linear >"$OUT/test-ops-linear.log" 2>&1
echo "test_ops_linear rc=$? $(tail -n 1 "$OUT/test-ops-linear.log")" | tee -a "$LOG"
grep -E "^FAIL" "$OUT/test-ops-linear.log" | head -20 | tee -a "$LOG"

$B/bench_ops --cfg list | tee -a "$LOG"
# One (shape, configuration) per process: within one process the pairs after the first can run 2-5x
# slower (docs/gpu-results.md, "The machine and how to measure"). The tensor-core configurations are the cm* ones.
CFGS=$($B/bench_ops --cfg list | awk '$1 ~ /^cm/ { print $1 }')
SHAPES=$($B/bench_ops --shapes list | awk '{ print $1 }')
for shape in $SHAPES; do
    for cfg in $CFGS; do
        timeout 60 $B/bench_ops --shapes "$shape" --cfg "$cfg" -x f16 --split 1,2,4 -i 10 --warmup 3 2>&1 |
            grep -E "^gemm|rror" | tee -a "$LOG"
    done
    # f32 x (rounded to f16 while staged): the configuration the op chooses
    timeout 60 $B/bench_ops --shapes "$shape" -x f32 -i 10 --warmup 3 2>&1 | grep -E "^gemm|rror" | tee -a "$LOG"
done

# cuBLAS on the same shapes (taken from the lines above)
grep "^gemm shape=" "$LOG" | sed -E 's/^gemm shape=([^ ]+) M=([0-9]+) N=([0-9]+) K=([0-9]+).*/\1 \2 \3 \4/' | sort -u |
    timeout 200 python3 -c '
import sys, torch
for line in sys.stdin:
    name, M, N, K = line.split(); M, N, K = int(M), int(N), int(K)
    for dt, dn in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        x = torch.randn(M, K, device="cuda", dtype=dt); w = torch.randn(N, K, device="cuda", dtype=dt)
        for _ in range(3): y = x @ w.t()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); a.record()
        for _ in range(20): y = x @ w.t()
        b.record(); torch.cuda.synchronize()
        ms = a.elapsed_time(b) / 20
        print(f"torch shape={name} M={M} N={N} K={K} dtype={dn} ms={ms:.4f} tflops={2.0 * M * N * K / (ms * 1e9):.2f}", flush=True)
' 2>&1 | tee -a "$LOG"

# per shape: the fastest correct configuration with f16 x, against cuBLAS bf16 and f16
awk '
/^gemm / && / x=f16 / && /check=ok/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    if (!(v["shape"] in best) || v["tflops"] + 0 > best[v["shape"]] + 0) {
        best[v["shape"]] = v["tflops"]; cfg[v["shape"]] = v["cfg"]; sp[v["shape"]] = v["split"]
        dims[v["shape"]] = "M=" v["M"] " N=" v["N"] " K=" v["K"]
    }
}
/^torch / {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    t[v["shape"] " " v["dtype"]] = v["tflops"]
}
END {
    for (s in best) {
        bf = t[s " bf16"] + 0; hf = t[s " f16"] + 0
        printf "best shape=%s %s cfg=%s split=%s tflops=%s cublas_bf16=%s cublas_f16=%s ratio_bf16=%.2f\n",
               s, dims[s], cfg[s], sp[s], best[s], bf, hf, (bf > 0 ? best[s] / bf : 0)
    }
}' "$LOG" | sort | tee -a "$OUT/gemm-sweep-best.log"
cat "$OUT/gemm-sweep-best.log" >>"$LOG"
