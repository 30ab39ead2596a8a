/* ref_conv.c — reference convolutions: the subsampling's strided 3x3 convs (channels-last, global
 * row coordinates for halo tiles) and the conformer's depthwise time convolution. */
#include "ref_internal.h"

/* Element offset of input row g (global) of a tile, or -1 when g lies outside the valid rows [0, len). */
static int64_t tile_row(int64_t row0, int64_t len, int64_t g, int64_t row_elems) {
    if (g < 0 || g >= len)
        return -1;
    return (g - row0) * row_elems;
}

vkasr_status ref_conv2d_s2(struct backend *b, const struct op_conv2d_s2 *a) {
    int64_t Hy = a->y.ne[0], Wo = a->y.ne[1], C = a->y.ne[2], W = a->x.ne[1];
    const float *w = ref_f32(&a->w), *bias = ref_f32(&a->b);
    for (int64_t r = 0; r < Hy; r++) {
        int64_t R = a->y_row0 + r;
        for (int64_t o = 0; o < Wo; o++)
            for (int64_t c = 0; c < C; c++) {
                double acc = bias[c];
                for (int i = 0; i < 3; i++) {
                    int64_t xr = tile_row(a->x_row0, a->x_len, 2 * R - 1 + i, W);
                    if (xr < 0)
                        continue;
                    for (int j = 0; j < 3; j++) {
                        int64_t col = 2 * o - 1 + j;
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
    for (int64_t r = 0; r < Hy; r++) {
        int64_t R = a->y_row0 + r;
        for (int64_t o = 0; o < Wo; o++)
            for (int64_t c = 0; c < C; c++) {
                double acc = bias[c];
                for (int i = 0; i < 3; i++) {
                    int64_t xr = tile_row(a->x_row0, a->x_len, 2 * R - 1 + i, W * C);
                    if (xr < 0)
                        continue;
                    for (int j = 0; j < 3; j++) {
                        int64_t col = 2 * o - 1 + j;
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
    int64_t T = a->x.ne[0], C = a->x.ne[1], K = a->w.ne[1], half = K / 2;
    const float *w = ref_f32(&a->w), *bias = ref_f32(&a->b);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            double acc = bias[c];
            for (int64_t k = 0; k < K; k++) {
                int64_t s = t - half + k;
                if (s >= 0 && s < T)
                    acc += (double)w[c * K + k] * ref_get(&a->x, (uint64_t)(s * C + c));
            }
            ref_put(&a->y, (uint64_t)(t * C + c), ref_act(acc, a->act));
        }
    return VKASR_OK;
}
