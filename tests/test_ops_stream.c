/* test_ops_stream.c — the streaming session's op forms on the device under test vs the C reference:
 * copy_rows (gathers with repeated sources, scatters into a tensor that keeps its other rows, pairs
 * outside the rows skipped, moves within one tensor; f32, f16 and i32 rows) and relpos_attention with
 * the queries' positions from a table (q_pos): several streams' segments of [cache | chunk] keys with
 * gaps between them, each stream's queries its segment's last rows, under the chunked mask. */
#include <stdio.h>
#include <stdlib.h>

#include "op_harness.h"

static void gather_case(struct th *h, be_dtype ty, int64_t rows, int64_t W, int64_t n) {
    th_case(h, "copy_rows gather %s x=[%lld, %lld] n=%lld", ty == BE_F16 ? "f16" : ty == BE_I32 ? "i32" : "f32",
            (long long)rows, (long long)W, (long long)n);
    int64_t *src = malloc((size_t)n * sizeof *src);
    for (int64_t r = 0; r < n; r++)
        src[r] = (r * 7 + 3) % rows; /* repeats when n > rows */
    struct th_tensor *x = th_input(h, ty, 2, TH_SHAPE(rows, W), -4.0f, 4.0f);
    struct th_tensor *s = th_input_data(h, BE_I64, 1, TH_SHAPE(n), src);
    struct th_tensor *y = th_output(h, ty, 2, TH_SHAPE(n, W));
    struct op_copy_rows a[2];
    for (int k = 0; k < 2; k++)
        a[k] = (struct op_copy_rows){.x = TH_T(x, k), .y = TH_T(y, k), .src = TH_T(s, k), .n = n};
    if (th_run(h, OP_copy_rows, &a[0], &a[1]))
        th_check(h, y, 0);
    free(src);
}

/* Scatter x's n rows into rows dst of y (an input: its other rows must stay), some pairs outside y. */
static void scatter_case(struct th *h, be_dtype ty, int64_t n, int64_t W, int64_t ry) {
    th_case(h, "copy_rows scatter %s n=%lld W=%lld into %lld rows", ty == BE_F16 ? "f16" : "f32", (long long)n,
            (long long)W, (long long)ry);
    int64_t *dst = malloc((size_t)n * sizeof *dst);
    for (int64_t r = 0; r < n; r++)
        dst[r] = r % 5 == 4 ? (r % 2 ? -1 : ry + r) : (r * 3) % ry; /* distinct for n <= ry / 3 */
    struct th_tensor *x = th_input(h, ty, 2, TH_SHAPE(n, W), -4.0f, 4.0f);
    struct th_tensor *d = th_input_data(h, BE_I64, 1, TH_SHAPE(n), dst);
    struct th_tensor *y = th_input(h, ty, 2, TH_SHAPE(ry, W), -4.0f, 4.0f);
    struct op_copy_rows a[2];
    for (int k = 0; k < 2; k++)
        a[k] = (struct op_copy_rows){.x = TH_T(x, k), .y = TH_T(y, k), .dst = TH_T(d, k), .n = n};
    if (th_run(h, OP_copy_rows, &a[0], &a[1]))
        th_check(h, y, 0);
    free(dst);
}

/* Rows [w, w+L) of every block of B rows moved to the block's start, within one tensor. */
static void move_case(struct th *h, int64_t blocks, int64_t B, int64_t w, int64_t L, int64_t W) {
    th_case(h, "copy_rows within one tensor: %lld blocks of %lld rows, rows %lld.. -> 0..", (long long)blocks,
            (long long)B, (long long)w);
    int64_t *m = malloc((size_t)(2 * blocks * L) * sizeof *m);
    for (int64_t b = 0, i = 0; b < blocks; b++)
        for (int64_t j = 0; j < L; j++, i++) {
            m[i] = b * B + w + j;
            m[blocks * L + i] = b * B + j;
        }
    struct th_tensor *s = th_input_data(h, BE_I64, 1, TH_SHAPE(blocks * L), m);
    struct th_tensor *d = th_input_data(h, BE_I64, 1, TH_SHAPE(blocks * L), m + blocks * L);
    struct th_tensor *y = th_input(h, BE_F32, 2, TH_SHAPE(blocks * B, W), -4.0f, 4.0f);
    struct op_copy_rows a[2];
    for (int k = 0; k < 2; k++)
        a[k] = (struct op_copy_rows){.x = TH_T(y, k), .y = TH_T(y, k), .src = TH_T(s, k), .dst = TH_T(d, k),
                                     .n = blocks * L};
    if (th_run(h, OP_copy_rows, &a[0], &a[1]))
        th_check(h, y, 0);
    free(m);
}

/* S streams: stream s's keys are a segment [start_s, start_s + fill_s + C) of k (gaps between the
 * segments are junk segments without queries), its C queries at the segment's last positions. */
static void qpos_case(struct th *h, int S, int64_t L, int64_t C, int heads, int64_t dk, bool f16) {
    th_case(h, "relpos_attention q_pos: %d streams, L=%lld, chunk %lld, %d heads of %lld%s", S, (long long)L,
            (long long)C, heads, (long long)dk, f16 ? ", f16" : "");
    const int64_t D = heads * dk, Wn = 2 * (L + C), Tk = S * Wn, Tq = S * C, P = 2 * (L + C) - 1;
    int64_t *seg = malloc((size_t)(2 * S + 2) * sizeof *seg), *qp = malloc((size_t)Tq * sizeof *qp);
    seg[0] = 0;
    for (int s = 0; s < S; s++) {
        const int64_t fill = (s * C) % (L + C), start = s * Wn + (s % 3) * C; /* fills 0 .. L, windows moved */
        seg[1 + 2 * s] = start;
        seg[2 + 2 * s] = start + fill + C;
        for (int64_t i = 0; i < C; i++)
            qp[s * C + i] = start + fill + i;
    }
    seg[2 * S + 1] = Tk;
    const be_dtype t = f16 ? BE_F16 : BE_F32;
    struct th_tensor *q = th_input(h, t, 2, TH_SHAPE(Tq, D), -1.0f, 1.0f);
    struct th_tensor *k = th_input(h, t, 2, TH_SHAPE(Tk, D), -1.0f, 1.0f);
    struct th_tensor *v = th_input(h, t, 2, TH_SHAPE(Tk, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, t, 2, TH_SHAPE(P, D), -1.0f, 1.0f);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -0.5f, 0.5f);
    struct th_tensor *bv = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -0.5f, 0.5f);
    struct th_tensor *sg = th_input_data(h, BE_I64, 1, TH_SHAPE(2 * S + 2), seg);
    struct th_tensor *qt = th_input_data(h, BE_I64, 1, TH_SHAPE(Tq), qp);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(Tq, D));
    struct op_relpos_attention a[2];
    for (int j = 0; j < 2; j++)
        a[j] = (struct op_relpos_attention){.q = TH_T(q, j), .k = TH_T(k, j), .v = TH_T(v, j), .p = TH_T(p, j),
                                            .bias_u = TH_T(bu, j), .bias_v = TH_T(bv, j), .y = TH_T(y, j),
                                            .heads = heads, .n_valid = Tk, .chunk = C, .left_chunks = L / C,
                                            .seg = TH_T(sg, j), .seg_max = L + C, .q_pos = TH_T(qt, j), .f16 = f16};
    if (th_run(h, OP_relpos_attention, &a[0], &a[1]))
        th_check(h, y, f16 ? 5e-4 : 1e-6);
    free(seg);
    free(qp);
}

int main(void) {
    struct th h;
    th_open(&h, true);
    gather_case(&h, BE_F32, 37, 12, 23);
    gather_case(&h, BE_F32, 5, 1, 64);
    gather_case(&h, BE_F16, 19, 6, 40);
    gather_case(&h, BE_I32, 1025, 3, 7);
    scatter_case(&h, BE_F32, 20, 16, 64);
    scatter_case(&h, BE_F16, 11, 2, 40);
    move_case(&h, 5, 36, 20, 14, 8);
    qpos_case(&h, 1, 8, 2, 4, 16, false);
    qpos_case(&h, 7, 8, 2, 4, 16, false);
    qpos_case(&h, 5, 70, 2, 8, 32, false);
    qpos_case(&h, 3, 12, 4, 2, 12, false);
    qpos_case(&h, 6, 8, 1, 4, 16, false);
    qpos_case(&h, 4, 8, 2, 4, 16, true);
    qpos_case(&h, 3, 70, 2, 8, 128, true); /* the 0.6B streaming shape at 160 ms */
    qpos_case(&h, 2, 40, 8, 3, 100, false); /* a head width not a multiple of 32: idle lanes */
    return th_close(&h);
}
