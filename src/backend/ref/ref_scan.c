/* ref_scan.c — reference of the packed batch's offsets scan (ops.h op_offsets_scan): each output's
 * length transform and inclusive running sum, sequentially in 64-bit integers. */
#include "ref_internal.h"

vkasr_status ref_offsets_scan(struct backend *b, const struct op_offsets_scan *a) {
    (void)b;
    const int64_t N = a->x.ne[0], *x = ref_i64(&a->x);
    for (int k = 0; k < a->nout; k++) {
        const struct op_offsets_scan_out *o = &a->out[k];
        int64_t *y = ref_i64(&o->y), sum = 0;
        if (o->lead)
            *y++ = 0;
        for (int64_t i = 0; i < N; i++) {
            /* ceil(l / 2^h) of the floor division, then the stride */
            const uint64_t l = (uint64_t)x[i] / o->div, h = o->halvings;
            const uint64_t up = o->causal ? (l + (2ull << h) - 2) >> h : h ? (l >> h) + ((l & ((1ull << h) - 1)) != 0) : l;
            sum += (int64_t)(up * o->stride);
            y[i] = sum;
        }
    }
    return VKASR_OK;
}
