/* ref_conv.c — reference convolutions: the subsampling's strided 3x3 convs (channels-last, global
 * row coordinates for halo tiles) and the conformer's depthwise time convolution. */
#include "ref_internal.h"

/* Element offset of input row g of an image whose rows are global rows base .. base+len-1, in a tile
 * of rows rows holding global rows row0 ..: -1 when g lies outside [0, len) (or, for bad offsets,
 * outside the tile). */
static int64_t tile_row(int64_t rows, int64_t row0, int64_t base, int64_t len, int64_t g, int64_t row_elems) {
    if (g < 0 || g >= len || base + g < row0 || base + g >= row0 + rows)
        return -1;
    return (base + g - row0) * row_elems;
}

/* Where output row R's inputs come from: row 2r-pad+i of the image is global input row base + 2r-1+i,
 * valid inside [0, len) of the image (packed batches: the segment of R; else the one image). */
static void conv_source(const be_tensor *x_seg, const be_tensor *y_seg, int64_t x_len, int64_t R, int64_t *r,
                        int64_t *base, int64_t *len) {
    if (!x_seg->addr) {
        *r = R;
        *base = 0;
        *len = x_len;
        return;
    }
    const int64_t s = ref_seg_find(y_seg, R), *xo = ref_i64(x_seg);
    *r = R - ref_i64(y_seg)[s];
    *base = xo[s];
    *len = xo[s + 1] - xo[s];
}

vkasr_status ref_conv2d_s2(struct backend *b, const struct op_conv2d_s2 *a) {
    int64_t Hy = a->y.ne[0], Wo = a->y.ne[1], C = a->y.ne[2], W = a->x.ne[1];
    const float *w = ref_f32(&a->w), *bias = ref_f32(&a->b);
    const int64_t pad = a->causal ? 2 : 1; /* rows and columns before the image */
    for (int64_t r = 0; r < Hy; r++) {
        int64_t R, base, len;
        conv_source(&a->x_seg, &a->y_seg, a->x_len, a->y_row0 + r, &R, &base, &len);
        for (int64_t o = 0; o < Wo; o++)
            for (int64_t c = 0; c < C; c++) {
                double acc = bias[c];
                for (int i = 0; i < 3; i++) {
                    int64_t xr = tile_row(a->x.ne[0], a->x_row0, base, len, 2 * R - pad + i, W);
                    if (xr < 0)
                        continue;
                    for (int j = 0; j < 3; j++) {
                        int64_t col = 2 * o - pad + j;
                        if (col >= 0 && col < W)
                            acc += (double)w[c * 9 + i * 3 + j] * ref_get(&a->x, (uint64_t)(xr + col));
                    }
                }
                ref_put(&a->y, (uint64_t)((r * Wo + o) * C + c), ref_act(acc, a->act));
            }
    }
    return VKASR_OK;
}

vkasr_status ref_dwconv2d_s2(struct backend *b, const struct op_dwconv2d_s2 *a) {
    int64_t Hy = a->y.ne[0], Wo = a->y.ne[1], C = a->y.ne[2], W = a->x.ne[1];
    const float *w = ref_f32(&a->w), *bias = ref_f32(&a->b);
    const int64_t pad = a->causal ? 2 : 1; /* rows and columns before the image */
    for (int64_t r = 0; r < Hy; r++) {
        int64_t R, base, len;
        conv_source(&a->x_seg, &a->y_seg, a->x_len, a->y_row0 + r, &R, &base, &len);
        for (int64_t o = 0; o < Wo; o++)
            for (int64_t c = 0; c < C; c++) {
                double acc = bias[c];
                for (int i = 0; i < 3; i++) {
                    int64_t xr = tile_row(a->x.ne[0], a->x_row0, base, len, 2 * R - pad + i, W * C);
                    if (xr < 0)
                        continue;
                    for (int j = 0; j < 3; j++) {
                        int64_t col = 2 * o - pad + j;
                        if (col >= 0 && col < W)
                            acc += (double)w[c * 9 + i * 3 + j] * ref_get(&a->x, (uint64_t)(xr + col * C + c));
                    }
                }
                ref_put(&a->y, (uint64_t)((r * Wo + o) * C + c), ref_act(acc, a->act));
            }
    }
    return VKASR_OK;
}

vkasr_status ref_dwconv1d(struct backend *b, const struct op_dwconv1d *a) {
    int64_t T = a->x.ne[0], C = a->x.ne[1], K = a->w.ne[1], half = a->causal ? K - 1 : K / 2;
    const float *w = ref_f32(&a->w), *bias = ref_f32(&a->b);
    for (int64_t t = 0; t < T; t++) {
        /* the rows of x a tap may read: all of them, or those of t's segment */
        int64_t lo = 0, hi = T;
        if (a->seg.addr) {
            const int64_t sg = ref_seg_find(&a->seg, a->row0 + t), *o = ref_i64(&a->seg);
            lo = o[sg] - a->row0 > 0 ? o[sg] - a->row0 : 0;
            hi = o[sg + 1] - a->row0 < T ? o[sg + 1] - a->row0 : T;
        }
        for (int64_t c = 0; c < C; c++) {
            double acc = bias[c];
            for (int64_t k = 0; k < K; k++) {
                int64_t s = t - half + k;
                if (s >= lo && s < hi)
                    acc += (double)w[c * K + k] * ref_get(&a->x, (uint64_t)(s * C + c));
            }
            ref_put(&a->y, (uint64_t)(t * C + c), ref_act(acc, a->act));
        }
    }
    return VKASR_OK;
}
