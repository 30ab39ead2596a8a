/* cu_conv.cu — convolutions on CUDA (channels-last): the subsampling's 3x3 stride-2 convs (conv2d_s2 on
 * one input channel, dwconv2d_s2 depthwise) with global row coordinates for halo tiles, and the
 * conformer's depthwise time conv; x and y each f32 or f16 (kernels templated on both). One thread per
 * output element (channel fastest: coalesced), a fixed tap order, so a tile computes exactly what the
 * untiled run computes. */
#include "cu_internal.h"

#define CONV_THREADS 256

/* Input row g of a tile holding global rows row0.., or NULL outside the valid rows [0, len). */
template <typename TX>
static __device__ __forceinline__ const TX *tile_row(const TX *x, int64_t row0, int64_t len, int64_t g,
                                                      int64_t row_elems) {
    return g < 0 || g >= len ? nullptr : x + (g - row0) * row_elems;
}

template <typename TX, typename TY>
static __global__ void conv2d_s2_kernel(const TX *x, const float *w, const float *bias, TY *y, int64_t Hy, int64_t Wo,
                                        int64_t C, int64_t W, int64_t x_row0, int64_t x_len, int64_t y_row0, int act) {
    CU_GRID_STRIDE(i, Hy * Wo * C) {
        int64_t c = i % C, o = (i / C) % Wo, r = i / (C * Wo), R = y_row0 + r;
        float acc = bias[c];
        for (int ki = 0; ki < 3; ki++) {
            const TX *xr = tile_row(x, x_row0, x_len, 2 * R - 1 + ki, W);
            if (!xr)
                continue;
            for (int kj = 0; kj < 3; kj++) {
                int64_t col = 2 * o - 1 + kj;
                if (col >= 0 && col < W)
                    acc = fmaf(w[c * 9 + ki * 3 + kj], cu_get(xr, col), acc);
            }
        }
        cu_put(y, i, cu_act(acc, act));
    }
}

vkasr_status cu_op_conv2d_s2(struct cu_backend *b, const struct op_conv2d_s2 *a) {
    int64_t Hy = a->y.ne[0], Wo = a->y.ne[1], C = a->y.ne[2], n = Hy * Wo * C;
    if (n == 0)
        return VKASR_OK;
#define LAUNCH(TX, TY)                                                                                 \
    conv2d_s2_kernel<TX, TY><<<cu_grid(b, (uint64_t)n, CONV_THREADS), CONV_THREADS, 0, b->stream>>>(            \
        cu_ptr<TX>(a->x), cu_ptr<float>(a->w), cu_ptr<float>(a->b), cu_ptr<TY>(a->y), Hy, Wo, C, a->x.ne[1],    \
        a->x_row0, a->x_len, a->y_row0, a->act)
    CU_IO_TYPES(a->x.type, a->y.type, LAUNCH);
#undef LAUNCH
    CU_LAUNCHED(b);
    return VKASR_OK;
}

template <typename TX, typename TY>
static __global__ void dwconv2d_s2_kernel(const TX *x, const float *w, const float *bias, TY *y, int64_t Hy, int64_t Wo,
                                          int64_t C, int64_t W, int64_t x_row0, int64_t x_len, int64_t y_row0,
                                          int act) {
    CU_GRID_STRIDE(i, Hy * Wo * C) {
        int64_t c = i % C, o = (i / C) % Wo, r = i / (C * Wo), R = y_row0 + r;
        float acc = bias[c];
        for (int ki = 0; ki < 3; ki++) {
            const TX *xr = tile_row(x, x_row0, x_len, 2 * R - 1 + ki, W * C);
            if (!xr)
                continue;
            for (int kj = 0; kj < 3; kj++) {
                int64_t col = 2 * o - 1 + kj;
                if (col >= 0 && col < W)
                    acc = fmaf(w[c * 9 + ki * 3 + kj], cu_get(xr, col * C + c), acc);
            }
        }
        cu_put(y, i, cu_act(acc, act));
    }
}

vkasr_status cu_op_dwconv2d_s2(struct cu_backend *b, const struct op_dwconv2d_s2 *a) {
    int64_t Hy = a->y.ne[0], Wo = a->y.ne[1], C = a->y.ne[2], n = Hy * Wo * C;
    if (n == 0)
        return VKASR_OK;
#define LAUNCH(TX, TY)                                                                                 \
    dwconv2d_s2_kernel<TX, TY><<<cu_grid(b, (uint64_t)n, CONV_THREADS), CONV_THREADS, 0, b->stream>>>(          \
        cu_ptr<TX>(a->x), cu_ptr<float>(a->w), cu_ptr<float>(a->b), cu_ptr<TY>(a->y), Hy, Wo, C, a->x.ne[1],    \
        a->x_row0, a->x_len, a->y_row0, a->act)
    CU_IO_TYPES(a->x.type, a->y.type, LAUNCH);
#undef LAUNCH
    CU_LAUNCHED(b);
    return VKASR_OK;
}

template <typename TX, typename TY>
static __global__ void dwconv1d_kernel(const TX *x, const float *w, const float *bias, TY *y, int64_t T, int64_t C,
                                       int64_t K, int act) {
    int64_t half = K / 2;
    CU_GRID_STRIDE(i, T * C) {
        int64_t c = i % C, t = i / C;
        float acc = bias[c];
        for (int64_t k = 0; k < K; k++) {
            int64_t s = t - half + k;
            if (s >= 0 && s < T)
                acc = fmaf(w[c * K + k], cu_get(x, s * C + c), acc);
        }
        cu_put(y, i, cu_act(acc, act));
    }
}

vkasr_status cu_op_dwconv1d(struct cu_backend *b, const struct op_dwconv1d *a) {
    int64_t T = a->x.ne[0], C = a->x.ne[1];
    if (T * C == 0)
        return VKASR_OK;
#define LAUNCH(TX, TY)                                                                                 \
    dwconv1d_kernel<TX, TY><<<cu_grid(b, (uint64_t)(T * C), CONV_THREADS), CONV_THREADS, 0, b->stream>>>(       \
        cu_ptr<TX>(a->x), cu_ptr<float>(a->w), cu_ptr<float>(a->b), cu_ptr<TY>(a->y), T, C, a->w.ne[1], a->act)
    CU_IO_TYPES(a->x.type, a->y.type, LAUNCH);
#undef LAUNCH
    CU_LAUNCHED(b);
    return VKASR_OK;
}
