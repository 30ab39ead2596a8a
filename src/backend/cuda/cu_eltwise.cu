/* cu_eltwise.cu — element-wise and layout ops on CUDA: unary, binary (cyclic broadcast of b), glu (x and y
 * f32 or f16), pad and permute (any element type, up to 4 dimensions), posenc (the positional rows).
 * 64-bit indices, grid-stride loops over 1-D grids capped by cu_grid: no tensor size can break a
 * launch. */
#include <string.h>

#include "cu_internal.h"
extern "C" {
#include "common/half.h"
}

#define EW_THREADS 256

static __global__ void unary_kernel(const float *x, float *y, int64_t n, int act, float alpha) {
    CU_GRID_STRIDE(i, n) { y[i] = cu_act(alpha * x[i], act); }
}

vkasr_status cu_op_unary(struct cu_backend *b, const struct op_unary *a) {
    int64_t n = (int64_t)be_numel(&a->x);
    if (n == 0)
        return VKASR_OK;
    unary_kernel<<<cu_grid(b, (uint64_t)n, EW_THREADS), EW_THREADS, 0, b->stream>>>(cu_ptr<float>(a->x),
                                                                                   cu_ptr<float>(a->y), n, a->act, a->alpha);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* nb == n: b is read element by element; otherwise cyclically (i % nb). */
static __global__ void binary_kernel(const float *x, const float *z, float *y, int64_t n, int64_t nb, int kind,
                                     int act, float alpha, float beta) {
    CU_GRID_STRIDE(i, n) {
        float u = x[i], v = z[nb == n ? i : (int64_t)((uint64_t)i % (uint64_t)nb)];
        float r = kind == BINARY_ADD ? alpha * u + beta * v : alpha * (u * v);
        y[i] = cu_act(r, act);
    }
}

vkasr_status cu_op_binary(struct cu_backend *b, const struct op_binary *a) {
    int64_t n = (int64_t)be_numel(&a->a), nb = (int64_t)be_numel(&a->b);
    if (n == 0)
        return VKASR_OK;
    binary_kernel<<<cu_grid(b, (uint64_t)n, EW_THREADS), EW_THREADS, 0, b->stream>>>(
        cu_ptr<float>(a->a), cu_ptr<float>(a->b), cu_ptr<float>(a->y), n, nb, a->kind, a->act, a->alpha, a->beta);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

template <typename TX, typename TY> static __global__ void glu_kernel(const TX *x, TY *y, int64_t R, int64_t C) {
    CU_GRID_STRIDE(i, R * C) {
        int64_t r = i / C, c = i - r * C;
        cu_put(y, i, cu_glu(cu_get(x, r * 2 * C + c), cu_get(x, r * 2 * C + C + c)));
    }
}

vkasr_status cu_op_glu(struct cu_backend *b, const struct op_glu *a) {
    int64_t R = a->y.ne[0], C = a->y.ne[1];
    if (R * C == 0)
        return VKASR_OK;
#define LAUNCH(TX, TY)                                                                                 \
    glu_kernel<TX, TY><<<cu_grid(b, (uint64_t)(R * C), EW_THREADS), EW_THREADS, 0, b->stream>>>(                \
        cu_ptr<TX>(a->x), cu_ptr<TY>(a->y), R, C)
    CU_IO_TYPES(a->x.type, a->y.type, LAUNCH);
#undef LAUNCH
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* Shapes and strides of a layout op, padded to 4 dimensions (leading dimensions of size 1). */
struct layout4 {
    int64_t yne[4];     /* y's shape                                      */
    int64_t xne[4];     /* pad: x's shape                                 */
    int64_t before[4];  /* pad: x's offset in y                           */
    int64_t xstride[4]; /* permute: x's stride for y's dimension d        */
};

/* pad: y element i is x's element at (coords(i) - before) when inside x, else the fill value. */
template <typename T>
static __global__ void pad_kernel(const T *x, T *y, struct layout4 L, int64_t n, T fill) {
    CU_GRID_STRIDE(i, n) {
        int64_t rem = i, xi = 0, stride = 1;
        bool inside = true;
        for (int d = 3; d >= 0; d--) {
            int64_t c = rem % L.yne[d], xc = c - L.before[d];
            rem /= L.yne[d];
            inside = inside && xc >= 0 && xc < L.xne[d];
            xi += xc * stride;
            stride *= L.xne[d];
        }
        y[i] = inside ? x[xi] : fill;
    }
}

/* The common 1-D case (and any pad of the outermost dimension alone): a contiguous copy with fills. */
template <typename T> static __global__ void pad1_kernel(const T *x, T *y, int64_t before, int64_t nx, int64_t n, T fill) {
    CU_GRID_STRIDE(i, n) {
        int64_t j = i - before;
        y[i] = j >= 0 && j < nx ? x[j] : fill;
    }
}

template <typename T>
static vkasr_status pad_launch(struct cu_backend *b, const struct op_pad *a, const struct layout4 &L, int64_t n,
                               T fill) {
    unsigned grid = cu_grid(b, (uint64_t)n, EW_THREADS);
    /* Only the outermost dimension of extent > 1 padded (every 1-D pad): x is one contiguous run of y. */
    int k = 0;
    while (k < 3 && L.yne[k] == 1)
        k++;
    bool contiguous = true;
    int64_t inner = 1, outer = 1;
    for (int d = k + 1; d < 4; d++) {
        contiguous = contiguous && L.before[d] == 0 && L.xne[d] == L.yne[d];
        inner *= L.yne[d];
    }
    for (int d = 0; d <= k; d++)
        outer *= L.xne[d]; /* dimensions before k have extent 1 (or 0: x empty) */
    if (contiguous) {
        pad1_kernel<T><<<grid, EW_THREADS, 0, b->stream>>>(cu_ptr<T>(a->x), cu_ptr<T>(a->y), L.before[k] * inner,
                                                           outer * inner, n, fill);
    } else {
        pad_kernel<T><<<grid, EW_THREADS, 0, b->stream>>>(cu_ptr<T>(a->x), cu_ptr<T>(a->y), L, n, fill);
    }
    CU_LAUNCHED(b);
    return VKASR_OK;
}

vkasr_status cu_op_pad(struct cu_backend *b, const struct op_pad *a) {
    int64_t n = (int64_t)be_numel(&a->y);
    if (n == 0)
        return VKASR_OK;
    struct layout4 L;
    memset(&L, 0, sizeof L);
    int nd = a->y.nd, lead = 4 - nd;
    for (int d = 0; d < 4; d++) {
        L.yne[d] = d < lead ? 1 : a->y.ne[d - lead];
        L.xne[d] = d < lead ? 1 : a->x.ne[d - lead];
        L.before[d] = d < lead ? 0 : a->before[d - lead];
    }
    switch (a->y.type) {
    case BE_F32: {
        uint32_t bits;
        memcpy(&bits, &a->value, 4);
        return pad_launch<uint32_t>(b, a, L, n, bits);
    }
    case BE_I32: return pad_launch<uint32_t>(b, a, L, n, (uint32_t)(int32_t)a->value);
    case BE_F16: return pad_launch<uint16_t>(b, a, L, n, float_to_half(a->value));
    default: break; /* I64 and the block types: ops.c rejects them */
    }
    return err_set(&b->base.err, VKASR_ERR_INTERNAL, "op pad: unknown element type %d", (int)a->y.type);
}

/* permute: y element i (coordinates c[d] in y) reads x at sum c[d] * xstride[d]. */
template <typename T> static __global__ void permute_kernel(const T *x, T *y, struct layout4 L, int64_t n) {
    CU_GRID_STRIDE(i, n) {
        int64_t rem = i, xi = 0;
        for (int d = 3; d >= 0; d--) {
            int64_t c = rem % L.yne[d];
            rem /= L.yne[d];
            xi += c * L.xstride[d];
        }
        y[i] = x[xi];
    }
}

vkasr_status cu_op_permute(struct cu_backend *b, const struct op_permute *a) {
    int64_t n = (int64_t)be_numel(&a->y);
    if (n == 0)
        return VKASR_OK;
    int nd = a->x.nd, lead = 4 - nd;
    int64_t xs[BE_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xs[d] = s;
        s *= a->x.ne[d];
    }
    struct layout4 L;
    memset(&L, 0, sizeof L);
    for (int d = 0; d < 4; d++) {
        L.yne[d] = d < lead ? 1 : a->y.ne[d - lead];
        L.xstride[d] = d < lead ? 0 : xs[a->perm[d - lead]];
    }
    unsigned grid = cu_grid(b, (uint64_t)n, EW_THREADS);
    if (be_dtype_size(a->y.type) == 2)
        permute_kernel<uint16_t><<<grid, EW_THREADS, 0, b->stream>>>(cu_ptr<uint16_t>(a->x), cu_ptr<uint16_t>(a->y), L, n);
    else
        permute_kernel<uint32_t><<<grid, EW_THREADS, 0, b->stream>>>(cu_ptr<uint32_t>(a->x), cu_ptr<uint32_t>(a->y), L, n);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* copy_rows: one thread per 32-bit word of a pair's row; pairs outside x's or y's rows skipped. */
static __global__ void copy_rows_kernel(const uint32_t *x, uint32_t *y, const int64_t *src, const int64_t *dst,
                                        int64_t n, int64_t rx, int64_t ry, int64_t wpr) {
    CU_GRID_STRIDE(i, n * wpr) {
        int64_t r = i / wpr, w = i - r * wpr, s = src ? src[r] : r, d = dst ? dst[r] : r;
        if (s >= 0 && d >= 0 && s < rx && d < ry)
            y[d * wpr + w] = x[s * wpr + w];
    }
}

vkasr_status cu_op_copy_rows(struct cu_backend *b, const struct op_copy_rows *a) {
    const int64_t wpr = a->x.ne[1] * (int64_t)be_dtype_size(a->x.type) / 4;
    if (a->n == 0 || wpr == 0)
        return VKASR_OK;
    copy_rows_kernel<<<cu_grid(b, (uint64_t)(a->n * wpr), EW_THREADS), EW_THREADS, 0, b->stream>>>(
        cu_ptr<uint32_t>(a->x), cu_ptr<uint32_t>(a->y), a->src.addr ? cu_ptr<int64_t>(a->src) : NULL,
        a->dst.addr ? cu_ptr<int64_t>(a->dst) : NULL, a->n, a->x.ne[0], a->y.ne[0], wpr);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* posenc: one thread per (row, pair); sin and cos of the float argument in double, rounded once, as the
 * reference does. */
static __global__ void posenc_kernel(const float *w, float *y, int64_t half, int64_t pairs, int64_t r0) {
    CU_GRID_STRIDE(i, pairs) {
        int64_t row = i / half, j = i - row * half, r = r0 - row;
        float x = __fmul_rn((float)(r < 0 ? -r : r), w[j]); /* the references' float32 product */
        double s, c;
        sincos((double)x, &s, &c);
        y[2 * i] = (float)(r < 0 ? -s : s);
        y[2 * i + 1] = (float)c;
    }
}

vkasr_status cu_op_posenc(struct cu_backend *b, const struct op_posenc *a) {
    int64_t half = a->y.ne[1] / 2, pairs = a->y.ne[0] * half;
    if (pairs == 0)
        return VKASR_OK;
    posenc_kernel<<<cu_grid(b, (uint64_t)pairs, EW_THREADS), EW_THREADS, 0, b->stream>>>(
        cu_ptr<float>(a->inv_freq), cu_ptr<float>(a->y), half, pairs, a->r0);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
