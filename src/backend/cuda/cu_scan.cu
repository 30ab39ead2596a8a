/* cu_scan.cu — the packed batch's offsets scan on CUDA (ops.h op_offsets_scan), the function of
 * shaders/scan.comp: a block per output (grid-stride over outputs) walks the lengths in chunks of the
 * block's size, scans each chunk in shared memory and carries its total into the next; 64-bit sums. */
#include "cu_internal.h"

#define SCAN_THREADS 256

struct scan_out {
    int64_t *y;
    uint32_t div, halvings, stride;
    bool lead, causal;
};
struct scan_args {
    const int64_t *x;
    int64_t n;
    int nout;
    scan_out out[SCAN_MAX_OUT];
};

static __global__ void __launch_bounds__(SCAN_THREADS) scan_kernel(scan_args a) {
    __shared__ uint64_t part[SCAN_THREADS];
    const int tid = threadIdx.x;
    for (int k = blockIdx.x; k < a.nout; k += gridDim.x) {
        const scan_out o = a.out[k];
        const uint64_t mask = (1ull << o.halvings) - 1;
        int64_t *y = o.y + (o.lead ? 1 : 0);
        if (o.lead && tid == 0)
            o.y[0] = 0;
        uint64_t carry = 0;
        for (int64_t base = 0; base < a.n; base += SCAN_THREADS) {
            const int64_t i = base + tid;
            uint64_t v = 0;
            if (i < a.n) {
                const uint64_t l = (uint64_t)a.x[i] / o.div;
                v = (o.causal ? (l + (2ull << o.halvings) - 2) >> o.halvings : (l >> o.halvings) + ((l & mask) != 0)) *
                    o.stride;
            }
            part[tid] = v;
            __syncthreads();
            for (int s = 1; s < SCAN_THREADS; s <<= 1) {
                const uint64_t add = tid >= s ? part[tid - s] : 0;
                __syncthreads();
                part[tid] += add;
                __syncthreads();
            }
            if (i < a.n)
                y[i] = (int64_t)(carry + part[tid]);
            carry += part[SCAN_THREADS - 1];
            __syncthreads();
        }
    }
}

vkasr_status cu_op_offsets_scan(struct cu_backend *b, const struct op_offsets_scan *a) {
    scan_args args;
    args.x = cu_ptr<int64_t>(a->x);
    args.n = a->x.ne[0];
    args.nout = a->nout;
    for (int k = 0; k < a->nout; k++)
        args.out[k] = scan_out{cu_ptr<int64_t>(a->out[k].y), a->out[k].div, a->out[k].halvings, a->out[k].stride,
                               a->out[k].lead, a->out[k].causal};
    scan_kernel<<<cu_grid(b, (uint64_t)a->nout, 1), SCAN_THREADS, 0, b->stream>>>(args);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
