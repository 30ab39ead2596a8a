/* cu_rows.cu — row and column reductions on CUDA: layernorm (y f32 or f16), softmax and argmax take one warp
 * per row (rows grid-stride over the warps of a capped grid; a row is read completely before the same warp
 * writes it, so y may alias x), feature_norm one block per group of 32 columns with double-precision
 * sums (constant columns come out exactly 0, as in the reference). */
#include <math.h>

#include "cu_internal.h"

#define ROW_WARPS 8 /* warps per block */

/* Warp w of the grid handles rows w, w + total warps, ... */
#define ROWS_OF_WARP(r, R)                                                                             \
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < (R);                    \
         r += (int64_t)gridDim.x * blockDim.x / 32)

template <typename TY>
static __global__ void layernorm_kernel(const float *x, const float *g, const float *be, TY *y, int64_t R, int64_t C,
                                        float eps) {
    int lane = threadIdx.x & 31;
    ROWS_OF_WARP(r, R) {
        const float *xr = x + r * C;
        /* the mean as x0 + mean(x - x0), x0 the row's first element, as rows.comp computes it: the sum
         * stays near the row's spread, not its magnitude */
        const float x0 = xr[0];
        float s = 0;
        for (int64_t c = lane; c < C; c += 32)
            s += xr[c] - x0;
        float mean = x0 + cu_warp_sum(s) / (float)C;
        float v = 0; /* two passes: a large mean with a small spread keeps its precision */
        for (int64_t c = lane; c < C; c += 32) {
            float d = xr[c] - mean;
            v += d * d;
        }
        float inv = 1.0f / sqrtf(cu_warp_sum(v) / (float)C + eps);
        for (int64_t c = lane; c < C; c += 32)
            cu_put(y, r * C + c, (xr[c] - mean) * inv * g[c] + be[c]);
    }
}

vkasr_status cu_op_layernorm(struct cu_backend *b, const struct op_layernorm *a) {
    int64_t R = a->x.ne[0], C = a->x.ne[1];
    if (R == 0 || C == 0)
        return VKASR_OK;
    if (a->y.type == BE_F16)
        layernorm_kernel<__half><<<cu_grid(b, (uint64_t)R, ROW_WARPS), 32 * ROW_WARPS, 0, b->stream>>>(
            cu_ptr<float>(a->x), cu_ptr<float>(a->gamma), cu_ptr<float>(a->beta), cu_ptr<__half>(a->y), R, C, a->eps);
    else
        layernorm_kernel<float><<<cu_grid(b, (uint64_t)R, ROW_WARPS), 32 * ROW_WARPS, 0, b->stream>>>(
            cu_ptr<float>(a->x), cu_ptr<float>(a->gamma), cu_ptr<float>(a->beta), cu_ptr<float>(a->y), R, C, a->eps);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

static __global__ void softmax_kernel(const float *x, float *y, int64_t R, int64_t C, float scale) {
    int lane = threadIdx.x & 31;
    ROWS_OF_WARP(r, R) {
        const float *xr = x + r * C;
        float m = -INFINITY;
        for (int64_t c = lane; c < C; c += 32)
            m = fmaxf(m, scale * xr[c]);
        m = cu_warp_max(m);
        float s = 0;
        for (int64_t c = lane; c < C; c += 32)
            s += expf(scale * xr[c] - m);
        float inv = 1.0f / cu_warp_sum(s);
        for (int64_t c = lane; c < C; c += 32)
            y[r * C + c] = expf(scale * xr[c] - m) * inv;
    }
}

vkasr_status cu_op_softmax(struct cu_backend *b, const struct op_softmax *a) {
    int64_t R = a->x.ne[0], C = a->x.ne[1];
    if (R == 0 || C == 0)
        return VKASR_OK;
    softmax_kernel<<<cu_grid(b, (uint64_t)R, ROW_WARPS), 32 * ROW_WARPS, 0, b->stream>>>(cu_ptr<float>(a->x),
                                                                                         cu_ptr<float>(a->y), R, C, a->scale);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* (v, i) beats (w, j): a valid index, not NaN, larger, or equal and earlier (ties pick the first). */
static __device__ __forceinline__ bool argmax_better(float v, int64_t i, float w, int64_t j) {
    if (i < 0 || isnan(v))
        return false;
    if (j < 0)
        return true;
    return v > w || (v == w && i < j);
}

static __global__ void argmax_kernel(const float *x, int32_t *y, int64_t R, int64_t C, int64_t c0, int64_t c1) {
    int lane = threadIdx.x & 31;
    ROWS_OF_WARP(r, R) {
        const float *xr = x + r * C;
        float best = 0;
        int64_t bi = -1;
        for (int64_t c = c0 + lane; c < c1; c += 32) {
            float v = xr[c];
            if (argmax_better(v, c, best, bi)) {
                best = v;
                bi = c;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, o);
            int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (argmax_better(ov, oi, best, bi)) {
                best = ov;
                bi = oi;
            }
        }
        if (lane == 0)
            y[r] = bi < 0 ? 0 : (int32_t)(bi - c0);
    }
}

vkasr_status cu_op_argmax(struct cu_backend *b, const struct op_argmax *a) {
    int64_t R = a->x.ne[0], C = a->x.ne[1];
    if (R == 0)
        return VKASR_OK;
    argmax_kernel<<<cu_grid(b, (uint64_t)R, ROW_WARPS), 32 * ROW_WARPS, 0, b->stream>>>(
        cu_ptr<float>(a->x), cu_ptr<int32_t>(a->y), R, C, a->c0, a->c1);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* feature_norm: a block of 32 x FN_ROWS threads per 32 columns (column groups grid-stride); lanes read
 * consecutive columns of a row (coalesced), the FN_ROWS rows of threads split the time axis. Sums in
 * double: L copies of one f32 value add up exactly, so a constant column has mean == value and
 * normalises to exactly 0 (digital silence must not turn into features). */
#define FN_ROWS 32

static __device__ double fn_block_sum(double v, double *sh) {
    int tx = threadIdx.x, ty = threadIdx.y;
    sh[ty * 32 + tx] = v;
    __syncthreads();
    for (int s = FN_ROWS / 2; s > 0; s >>= 1) {
        if (ty < s)
            sh[ty * 32 + tx] += sh[(ty + s) * 32 + tx];
        __syncthreads();
    }
    double r = sh[tx];
    __syncthreads();
    return r;
}

static __global__ void feature_norm_kernel(const float *x, float *y, int64_t L, int64_t M, float eps) {
    __shared__ double sh[FN_ROWS * 32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int64_t groups = (M + 31) / 32;
    for (int64_t gidx = blockIdx.x; gidx < groups; gidx += gridDim.x) {
        int64_t m = gidx * 32 + tx;
        bool col = m < M;
        double s = 0;
        for (int64_t t = ty; col && t < L; t += FN_ROWS)
            s += x[t * M + m];
        double mean = fn_block_sum(s, sh) / (double)(L > 0 ? L : 1);
        double v = 0;
        for (int64_t t = ty; col && t < L; t += FN_ROWS) {
            double d = x[t * M + m] - mean;
            v += d * d;
        }
        double var = fn_block_sum(v, sh);
        double sd = L > 1 ? sqrt(var / (double)(L - 1)) : 0.0;
        double den = sd + (double)eps;
        /* the block's reads of its columns are done (fn_block_sum ended with a barrier): y may alias x */
        for (int64_t t = ty; col && t < L; t += FN_ROWS)
            y[t * M + m] = (float)((x[t * M + m] - mean) / den);
    }
}

vkasr_status cu_op_feature_norm(struct cu_backend *b, const struct op_feature_norm *a) {
    int64_t L = a->x.ne[0], M = a->x.ne[1];
    if (L == 0 || M == 0)
        return VKASR_OK;
    feature_norm_kernel<<<cu_grid(b, (uint64_t)M, 32), dim3(32, FN_ROWS), 0, b->stream>>>(cu_ptr<float>(a->x),
                                                                                         cu_ptr<float>(a->y), L, M, a->eps);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
