/* cu_conv.cu — convolutions on CUDA (channels-last): the subsampling's 3x3 stride-2 convs (conv2d_s2 on
 * one input channel, dwconv2d_s2 depthwise) with global row coordinates for halo tiles, and the
 * conformer's depthwise time conv ('same' or causal padding); x and y each f32 or f16 (kernels templated
 * on both), and all take
 * the segments of a packed batch (ops.h), each image or segment computed as alone. One thread per
 * output element (channel fastest: coalesced), a fixed tap order, so a tile computes exactly what the
 * untiled run computes. */
#include "cu_internal.h"

#define CONV_THREADS 256

/* The segments of a packed batch (ops.h): x_seg, y_seg [n + 1], or n = 0 for one image. */
struct conv_seg {
    const int64_t *x, *y;
    int64_t n;
};

static conv_seg segs(const be_tensor &x_seg, const be_tensor &y_seg) {
    conv_seg s = {cu_ptr<int64_t>(x_seg), cu_ptr<int64_t>(y_seg), x_seg.addr ? x_seg.ne[0] - 1 : 0};
    return s;
}

/* Output row R (global): its row r within its image, the image's first global input row and its
 * number of input rows. */
static __device__ __forceinline__ void conv_source(const conv_seg &sg, int64_t x_len, int64_t R, int64_t *r,
                                                   int64_t *base, int64_t *len) {
    if (!sg.n) {
        *r = R;
        *base = 0;
        *len = x_len;
        return;
    }
    const int64_t s = cu_seg_find(sg.y, sg.n, R);
    *r = R - sg.y[s];
    *base = sg.x[s];
    *len = sg.x[s + 1] - sg.x[s];
}

/* Input row g of an image whose rows are global rows base.., in a tile x [rows] holding global rows
 * row0..: NULL outside the image's rows [0, len) (or, for bad offsets, outside the tile). */
template <typename TX>
static __device__ __forceinline__ const TX *tile_row(const TX *x, int64_t rows, int64_t row0, int64_t base,
                                                      int64_t len, int64_t g, int64_t row_elems) {
    return g < 0 || g >= len || base + g < row0 || base + g >= row0 + rows ? nullptr
                                                                              : x + (base + g - row0) * row_elems;
}

/* DEPTHWISE: x [Hx, W, C] (channel c reads channel c), else x [Hx, W] (one input channel). */
template <bool DEPTHWISE, typename TX, typename TY>
static __global__ void conv2d_kernel(const TX *x, const float *w, const float *bias, TY *y, int64_t Hx, int64_t Hy,
                                     int64_t Wo, int64_t C, int64_t W, int64_t x_row0, int64_t x_len, int64_t y_row0,
                                     conv_seg sg, int act, int pad) {
    CU_GRID_STRIDE(i, Hy * Wo * C) {
        int64_t c = i % C, o = (i / C) % Wo, R, base, len;
        conv_source(sg, x_len, y_row0 + i / (C * Wo), &R, &base, &len);
        float acc = bias[c];
        for (int ki = 0; ki < 3; ki++) {
            const TX *xr = tile_row(x, Hx, x_row0, base, len, 2 * R - pad + ki, DEPTHWISE ? W * C : W);
            if (!xr)
                continue;
            for (int kj = 0; kj < 3; kj++) {
                int64_t col = 2 * o - pad + kj;
                if (col >= 0 && col < W)
                    acc = fmaf(w[c * 9 + ki * 3 + kj], cu_get(xr, DEPTHWISE ? col * C + c : col), acc);
            }
        }
        cu_put(y, i, cu_act(acc, act));
    }
}

template <bool DEPTHWISE>
static vkasr_status conv2d(struct cu_backend *b, const be_tensor &x, const be_tensor &w, const be_tensor &bias,
                           const be_tensor &y, int64_t x_row0, int64_t x_len, int64_t y_row0, const be_tensor &x_seg,
                           const be_tensor &y_seg, int act, bool causal) {
    int64_t Hy = y.ne[0], Wo = y.ne[1], C = y.ne[2], n = Hy * Wo * C;
    if (n == 0)
        return VKASR_OK;
#define LAUNCH(TX, TY)                                                                                 \
    conv2d_kernel<DEPTHWISE, TX, TY><<<cu_grid(b, (uint64_t)n, CONV_THREADS), CONV_THREADS, 0, b->stream>>>(   \
        cu_ptr<TX>(x), cu_ptr<float>(w), cu_ptr<float>(bias), cu_ptr<TY>(y), x.ne[0], Hy, Wo, C, x.ne[1], x_row0, \
        x_len, y_row0, segs(x_seg, y_seg), act, causal ? 2 : 1)
    CU_IO_TYPES(x.type, y.type, LAUNCH);
#undef LAUNCH
    CU_LAUNCHED(b);
    return VKASR_OK;
}

vkasr_status cu_op_conv2d_s2(struct cu_backend *b, const struct op_conv2d_s2 *a) {
    return conv2d<false>(b, a->x, a->w, a->b, a->y, a->x_row0, a->x_len, a->y_row0, a->x_seg, a->y_seg, a->act, a->causal);
}

vkasr_status cu_op_dwconv2d_s2(struct cu_backend *b, const struct op_dwconv2d_s2 *a) {
    return conv2d<true>(b, a->x, a->w, a->b, a->y, a->x_row0, a->x_len, a->y_row0, a->x_seg, a->y_seg, a->act, a->causal);
}

template <typename TX, typename TY>
static __global__ void dwconv1d_kernel(const TX *x, const float *w, const float *bias, TY *y, int64_t T, int64_t C,
                                       int64_t K, const int64_t *seg, int64_t nseg, int64_t row0, int act,
                                       int64_t half) { /* half: rows before t the first tap reads */
    CU_GRID_STRIDE(i, T * C) {
        int64_t c = i % C, t = i / C, lo = 0, hi = T; /* the rows a tap may read: x's, or t's segment's */
        if (nseg) {
            const int64_t s = cu_seg_find(seg, nseg, row0 + t);
            lo = seg[s] - row0 > 0 ? seg[s] - row0 : 0;
            hi = seg[s + 1] - row0 < T ? seg[s + 1] - row0 : T;
        }
        float acc = bias[c];
        for (int64_t k = 0; k < K; k++) {
            int64_t s = t - half + k;
            if (s >= lo && s < hi)
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
        cu_ptr<TX>(a->x), cu_ptr<float>(a->w), cu_ptr<float>(a->b), cu_ptr<TY>(a->y), T, C, a->w.ne[1],         \
        cu_ptr<int64_t>(a->seg), a->seg.addr ? a->seg.ne[0] - 1 : 0, a->row0, a->act,    \
        a->causal ? a->w.ne[1] - 1 : a->w.ne[1] / 2)
    CU_IO_TYPES(a->x.type, a->y.type, LAUNCH);
#undef LAUNCH
    CU_LAUNCHED(b);
    return VKASR_OK;
}
