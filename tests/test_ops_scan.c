/* test_ops_scan.c — the packed batch's offsets scan (op offsets_scan) on the device under test vs the C
 * reference, bit for bit (integers): N = 1, 2, 1000 and 100,000 lengths (one chunk, several, hundreds),
 * all five outputs of one launch with and without a leading zero, divisions, halvings (rounding up, or
 * floor(n/2)+1 per stage for causal subsampling, checked stage by stage on the reference's total) and
 * strides (a row width), lengths of zero, and totals far above 2^32 (lengths up to 2^40, so the 64-bit
 * sums and the carries between chunks are exercised); guards around every output. The host planner's
 * side of the same offsets (asr_batch_layout) is tested in test_planner. */
#include <stdio.h>
#include <stdlib.h>

#include "op_harness.h"

/* lengths: random in [0, maxlen), every 17th zero */
static void scan_case(struct th *h, int64_t N, int64_t maxlen, const struct op_offsets_scan_out *outs, int nout) {
    th_case(h, "offsets_scan N=%lld lengths < %lld, %d outputs", (long long)N, (long long)maxlen, nout);
    int64_t *len = malloc((size_t)(N ? N : 1) * sizeof *len);
    if (!len)
        exit(1);
    for (int64_t i = 0; i < N; i++)
        len[i] = i % 17 == 16 ? 0 : (int64_t)(th_rand(h) % (uint64_t)maxlen);
    struct th_tensor *x = th_input_data(h, BE_I64, 1, TH_SHAPE(N), len);
    struct th_tensor *y[SCAN_MAX_OUT];
    struct op_offsets_scan a[2] = {{.nout = nout}, {.nout = nout}};
    for (int k = 0; k < nout; k++)
        y[k] = th_output(h, BE_I64, 1, TH_SHAPE(N + (outs[k].lead ? 1 : 0)));
    for (int s = 0; s < 2; s++) {
        a[s].x = TH_T(x, s);
        for (int k = 0; k < nout; k++) {
            a[s].out[k] = outs[k];
            a[s].out[k].y = TH_T(y[k], s);
        }
    }
    if (th_run(h, OP_offsets_scan, &a[0], &a[1])) {
        for (int k = 0; k < nout; k++)
            th_check(h, y[k], 0);
        th_check_guards(h);
        /* the reference itself, on the first output's total: the sum of the transformed lengths */
        uint64_t want = 0;
        const struct op_offsets_scan_out *o = &outs[0];
        for (int64_t i = 0; i < N; i++) {
            const uint64_t l = (uint64_t)len[i] / o->div, d = 1ull << o->halvings;
            uint64_t c = l; /* causal: floor(n/2)+1 per stage, stage by stage */
            for (uint32_t s = 0; o->causal && s < o->halvings; s++)
                c = c / 2 + 1;
            want += (o->causal ? c : (l + d - 1) / d) * o->stride;
        }
        const int64_t *ref = y[0]->host;
        h->checks++;
        if (N > 0 && (uint64_t)ref[N - 1 + (o->lead ? 1 : 0)] != want) {
            printf("FAIL [%s]: reference total %lld, want %llu\n", h->name, (long long)ref[N - 1 + (o->lead ? 1 : 0)],
                   (unsigned long long)want);
            h->failures++;
        }
        printf("ok   %s: total %llu\n", h->name, (unsigned long long)want);
    }
    free(len);
}

int main(void) {
    struct th h;
    th_open(&h, false);
    /* what a batch asks for (src/asr/batch.c): samples, mel frames (hop 160) and the three x2 stages */
    const struct op_offsets_scan_out batch[5] = {
        {.div = 1, .stride = 1, .lead = true},   {.div = 160, .stride = 1, .lead = true},
        {.div = 160, .halvings = 1, .stride = 1, .lead = true}, {.div = 160, .halvings = 2, .stride = 1, .lead = true},
        {.div = 160, .halvings = 3, .stride = 1, .lead = true}};
    /* element offsets of rows of width 1024 and 640 without a leading zero, an odd divisor */
    const struct op_offsets_scan_out misc[3] = {
        {.div = 160, .halvings = 3, .stride = 1024}, {.div = 7, .halvings = 0, .stride = 640, .lead = true},
        {.div = 1, .halvings = 62, .stride = 1}};
    /* a causal subsampling's batch (floor(n/2)+1 per stage), and causal lengths with strides */
    const struct op_offsets_scan_out causal[5] = {
        {.div = 160, .halvings = 1, .stride = 1, .lead = true, .causal = true},
        {.div = 160, .halvings = 2, .stride = 1, .lead = true, .causal = true},
        {.div = 160, .halvings = 3, .stride = 1, .lead = true, .causal = true},
        {.div = 1, .halvings = 3, .stride = 640, .causal = true},
        {.div = 7, .halvings = 0, .stride = 3, .lead = true, .causal = true}};
    const int64_t Ns[] = {1, 2, 3, 255, 256, 257, 1000, 100000};
    for (size_t i = 0; i < sizeof Ns / sizeof *Ns; i++) {
        scan_case(&h, Ns[i], 20 * 16000, batch, 5);  /* up to 20 s of audio per input */
        scan_case(&h, Ns[i], 1000, misc, 3);
        scan_case(&h, Ns[i], 20 * 16000, causal, 5);
    }
    scan_case(&h, 1000, (int64_t)1 << 40, causal, 5);
    /* totals above 2^32: lengths up to 2^40 (the sum of 100,000 reaches ~5.5e16) */
    scan_case(&h, 1000, (int64_t)1 << 40, batch, 5);
    scan_case(&h, 100000, (int64_t)1 << 40, misc, 3);
    scan_case(&h, 2, (int64_t)1 << 40, misc, 2);
    scan_case(&h, 0, 10, batch, 2); /* no inputs: the leading zeros only */
    return th_close(&h);
}
