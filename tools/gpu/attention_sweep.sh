#!/bin/bash
# GPU machine, idle GPU: every relpos_attention kernel configuration on the 0.6B encoder's shape (8
# heads of 128) — T = 750 and 7500 frames (60 s and 10 min) with full attention, T = 135000 (3 hours)
# with local attention (window 128) — next to PyTorch's scaled_dot_product_attention on the same
# shapes. First the attention op tests on this GPU (every real configuration against the C reference,
# row chunks bit-identical): a configuration that is wrong here must not be timed as if it were right.
# About 3-4 minutes.
#
# Output ($OUT/attention-sweep.log, and on stdout), one line each:
#   attention T= D= H= dk= window= keys= prec=h16 cfg=NAME ms= tflops= tflops_bd= timer=gpu check=ok err=
#       (vkasr, bench_attention; prec h16: q, k, v, p, y f16 with f16 products, what the f16-activation
#       network feeds; f16: f32 tensors with f16 products, the network today; f32: f32 throughout)
#   torch T= D= H= window= dtype=bf16 method=flash ms= tflops=
#       (PyTorch SDPA, flash backend, WITHOUT the relative-position term: plain softmax(q k^T) v; local
#       attention as chunks of 128 queries over their 384 surrounding keys, unmasked, so it does at least
#       the band's work; tflops counted like vkasr's: 4*T*keys*D)
#   best T= window= prec= cfg= ms= tflops= torch_bf16_ms= vs_torch=
#       (per shape and precision: the fastest configuration whose check passed)
# ms is per call: one layer's attention over all heads. The "best" lines are what the tensor-core
# choice table (tc_choice in src/backend/vulkan/vk_op_attention.c; the expected names in
# test_ops_attention's choice cases) is filled from: one configuration per head width for every length
# (row chunks of a sequence must take the same kernel), so the one best at T=7500 unless it is much
# worse at 750 or 135000.
set -u
. tools/gpu/env.sh
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
B=build-gpu/tests
LOG=$OUT/attention-sweep.log
: >"$LOG"
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader | tee -a "$LOG"

# correctness first, with the tree's test environment (validation layer on)
(cd build-gpu && timeout 600 ctest -R "^test_ops_attention" --output-on-failure) >"$OUT/test-ops-attention.log" 2>&1
echo "test_ops_attention rc=$? $(grep -E 'tests passed|tests failed' "$OUT/test-ops-attention.log")" | tee -a "$LOG"
grep -E "^FAIL|worst nmse|not usable" "$OUT/test-ops-attention.log" | sort -u | head -30 | tee -a "$LOG"

# vkasr: every configuration (bench_attention ... all), h16 and f16; the scalar f32 kernel as the baseline
for shape in "750 0" "7500 0" "135000 128"; do
    set -- $shape
    T=$1; W=$2
    for prec in h16 f16; do
        timeout 300 $B/bench_attention "$T" 1024 8 "$W" 10 $prec all 2>&1 | grep -E "^attention|rror" | tee -a "$LOG"
    done
    [ "$T" -le 7500 ] && timeout 120 $B/bench_attention "$T" 1024 8 "$W" 3 f32 scalar 2>&1 | grep -E "^attention|rror" |
        tee -a "$LOG"
done

# PyTorch SDPA (flash) on the same shapes, without the position term
timeout 300 python3 - <<'EOF' 2>&1 | tee -a "$LOG"
import torch
import torch.nn.functional as F
try:
    from torch.nn.attention import sdpa_kernel, SDPBackend
    def flash():
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    method = "flash"
except Exception:  # older torch: whatever SDPA picks
    import contextlib
    def flash():
        return contextlib.nullcontext()
    method = "sdpa"
H, dk = 8, 128
for T, W in ((750, 0), (7500, 0), (135000, 128)):
    for dt, dn in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        try:
            if W == 0:
                q, k, v = (torch.randn(1, H, T, dk, device="cuda", dtype=dt) for _ in range(3))
                keys = T
                def call():
                    return F.scaled_dot_product_attention(q, k, v)
                how = method
            else:
                # local attention: chunks of C queries over their C + 2W surrounding keys (padded at the
                # ends), one batched SDPA call without a mask: at least the band's work
                C = 128
                n = (T + C - 1) // C
                q = torch.randn(n, H, C, dk, device="cuda", dtype=dt)
                k = torch.randn(n, H, C + 2 * W, dk, device="cuda", dtype=dt)
                v = torch.randn(n, H, C + 2 * W, dk, device="cuda", dtype=dt)
                keys = 2 * W + 1
                def call():
                    return F.scaled_dot_product_attention(q, k, v)
                how = method + "_chunks%d_keys%d" % (C, C + 2 * W)
            with flash():
                for _ in range(3):
                    call()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                a.record()
                for _ in range(20):
                    call()
                b.record()
                torch.cuda.synchronize()
            ms = a.elapsed_time(b) / 20
            fl = 4.0 * T * keys * H * dk
            print(f"torch T={T} D={H * dk} H={H} window={W} dtype={dn} method={how} ms={ms:.4f} "
                  f"tflops={fl / (ms * 1e9):.2f}", flush=True)
        except Exception as e:
            print(f"torch T={T} D={H * dk} H={H} window={W} dtype={dn} error=\"{type(e).__name__}: {e}\"", flush=True)
        torch.cuda.empty_cache()
EOF

# per shape and precision: the fastest configuration whose check passed, against torch bf16
awk '
function kv(s,   i, p) { delete v; for (i = 2; i <= NF; i++) { split($i, p, "="); v[p[1]] = p[2] } }
/^attention / && /check=ok/ {
    kv(); key = v["T"] " " v["window"] " " v["prec"]
    if (!(key in best) || v["ms"] + 0 < best[key] + 0) { best[key] = v["ms"]; cfg[key] = v["cfg"]; tf[key] = v["tflops"] }
}
/^torch / && /ms=/ { kv(); if (v["dtype"] == "bf16") tb[v["T"] " " v["window"]] = v["ms"] }
END {
    for (key in best) {
        split(key, k, " "); t = tb[k[1] " " k[2]] + 0
        printf "best T=%s window=%s prec=%s cfg=%s ms=%s tflops=%s torch_bf16_ms=%s vs_torch=%.2f\n",
               k[1], k[2], k[3], cfg[key], best[key], tf[key], t, (t > 0 ? t / best[key] : 0)
    }
}' "$LOG" | sort -t= -k2,2n | tee "$OUT/attention-sweep-best.log"
cat "$OUT/attention-sweep-best.log" >>"$LOG"
