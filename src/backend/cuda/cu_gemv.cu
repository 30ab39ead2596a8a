/* cu_gemv.cu — the linear op with the matvec hint on CUDA (the decoder's joint and projection: a few rows,
 * bound by reading w once), as shaders/gemv.comp: a warp per output column n sweeps w's row n for MR rows
 * of x at once, the lanes' partial sums are added by a fixed shuffle tree, and the op's epilogue follows.
 * w f32, f16 (an f32 x rounded to f16, as the op defines) or a block type (8-weight pieces dequantized to
 * the host's f32 values); x and y f32 or f16. */
#include "cu_dequant.cuh"

#define GEMV_THREADS 256
#define GEMV_COLS (GEMV_THREADS / 32) /* output columns per tile: a warp each */

/* x[i] as the product takes it: rounded to f16 when w is f16 and x is f32 (ops.h). */
template <int WT, typename TX> static __device__ __forceinline__ float gv_x(float v) {
    if (WT == BE_F16 && sizeof(TX) == 4)
        return __half2float(__float2half_rn(v));
    return v;
}

/* y [M, N] = res + alpha * act(x w^T + bias). Tiles of MR rows x GEMV_COLS columns, grid-stride. A lane
 * sweeps k = 8 lane + 256 i (vec: K % 8 == 0, x and an f32 / f16 w 16-byte aligned; block types always
 * take pieces, x then loaded element-wise if not vec) or k = lane + 32 i (scalar, f32 / f16 w only), so
 * a row's sum depends on K and vec only, never on MR or M. */
template <int WT, typename TX, typename TY, int MR>
static __global__ void __launch_bounds__(GEMV_THREADS)
    gemv_kernel(const TX *x, const unsigned char *w, uint64_t row_bytes, const float *bias, const TY *res, TY *y,
                int64_t M, int64_t N, int64_t K, int act, float alpha, bool vec) {
    const int lane = threadIdx.x & 31, grp = threadIdx.x / 32;
    const int64_t tiles_n = (N + GEMV_COLS - 1) / GEMV_COLS, ntiles = ((M + MR - 1) / MR) * tiles_n;
    for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const int64_t m0 = (tile / tiles_n) * MR, n = (tile % tiles_n) * GEMV_COLS + grp;
        const int rows = (int)(M - m0 < MR ? M - m0 : MR);
        float acc[MR];
#pragma unroll
        for (int r = 0; r < MR; r++)
            acc[r] = 0.0f;
        if (n < N) { /* the same for the whole warp */
            const unsigned char *wr = w + (uint64_t)n * row_bytes;
            if (vec || (WT != BE_F32 && WT != BE_F16)) {
                for (int64_t k = 8 * lane; k < K; k += 256) {
                    float wv[8];
                    dq_w8<WT>(wr, k, wv);
#pragma unroll
                    for (int r = 0; r < MR; r++) {
                        if (r < rows) {
                            const TX *xr = x + (m0 + r) * K + k;
                            float xv[8];
                            if (vec) {
                                dq_load8(xr, xv);
                            } else {
#pragma unroll
                                for (int i = 0; i < 8; i++)
                                    xv[i] = cu_get(xr, i);
                            }
#pragma unroll
                            for (int i = 0; i < 8; i++)
                                acc[r] = fmaf(gv_x<WT, TX>(xv[i]), wv[i], acc[r]);
                        }
                    }
                }
            } else {
                for (int64_t k = lane; k < K; k += 32) {
                    const float wv = WT == BE_F32 ? ((const float *)wr)[k] : __half2float(((const __half *)wr)[k]);
#pragma unroll
                    for (int r = 0; r < MR; r++)
                        if (r < rows)
                            acc[r] = fmaf(gv_x<WT, TX>(cu_get(x, (m0 + r) * K + k)), wv, acc[r]);
                }
            }
        }
        /* Lane r keeps row r's sum (the same shuffle tree for every row) and applies the epilogue in
         * epilogue_kernel's order (cu_linear.cu). */
        float mine = 0.0f;
#pragma unroll
        for (int r = 0; r < MR; r++) {
            const float s = cu_warp_sum(acc[r]);
            if (lane == r)
                mine = s;
        }
        if (lane < rows && n < N) {
            const int64_t i = (m0 + lane) * N + n;
            float v = mine;
            if (bias)
                v += bias[n];
            v = alpha * cu_act(v, act);
            if (res)
                v += cu_get(res, i);
            cu_put(y, i, v);
        }
    }
}

template <int WT, typename TX, typename TY>
static void gemv_launch(struct cu_backend *b, const struct op_linear *a, uint64_t row_bytes, bool vec) {
    const int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    const float *bias = a->bias.addr ? cu_ptr<float>(a->bias) : (const float *)NULL;
    const TY *res = a->res.addr ? cu_ptr<TY>(a->res) : (const TY *)NULL;
    const uint64_t tiles_n = (uint64_t)((N + GEMV_COLS - 1) / GEMV_COLS);
    /* 32-row tiles from 32 rows on (each weight load serves 4x as many rows), else 8: the same sums */
    if (M >= 32)
        gemv_kernel<WT, TX, TY, 32><<<cu_grid(b, (uint64_t)((M + 31) / 32) * tiles_n, 1), GEMV_THREADS, 0, b->stream>>>(
            cu_ptr<TX>(a->x), cu_ptr<unsigned char>(a->w), row_bytes, bias, res, cu_ptr<TY>(a->y), M, N, K, a->act,
            a->alpha, vec);
    else
        gemv_kernel<WT, TX, TY, 8><<<cu_grid(b, (uint64_t)((M + 7) / 8) * tiles_n, 1), GEMV_THREADS, 0, b->stream>>>(
            cu_ptr<TX>(a->x), cu_ptr<unsigned char>(a->w), row_bytes, bias, res, cu_ptr<TY>(a->y), M, N, K, a->act,
            a->alpha, vec);
}

/* gemv_launch for w's type (a template constant) and the op's x, y types. */
template <int WT> static void gemv_types(struct cu_backend *b, const struct op_linear *a, uint64_t row_bytes, bool vec) {
#define GEMV_LAUNCH(TX, TY) gemv_launch<WT, TX, TY>(b, a, row_bytes, vec)
    CU_IO_TYPES(a->x.type, a->y.type, GEMV_LAUNCH);
#undef GEMV_LAUNCH
}

static bool gv_aligned(uint64_t addr) { return addr % 16 == 0; }

vkasr_status cu_gemv(struct cu_backend *b, const struct op_linear *a) {
    const int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    const be_dtype wt = a->w.type;
    if (a->act == ACT_GLU)
        return err_set(&b->base.err, VKASR_ERR_INTERNAL, "linear: the matrix-vector kernel has no GLU epilogue");
    if (M == 0 || N == 0)
        return VKASR_OK;
    b->op_label = "linear_gemv";
    const bool quant = be_dtype_is_quant(wt);
    const uint64_t row_bytes = quant ? dq_row_bytes(wt, K) : (uint64_t)K * be_dtype_size(wt);
    /* vector loads: whole 8-element pieces, every row 16-byte aligned (K % 8 == 0 and aligned bases) */
    const bool vec = K % 8 == 0 && gv_aligned(a->x.addr) && (quant || gv_aligned(a->w.addr));
    switch (wt) {
    case BE_F32: gemv_types<BE_F32>(b, a, row_bytes, vec); break;
    case BE_F16: gemv_types<BE_F16>(b, a, row_bytes, vec); break;
    case BE_Q8_0: gemv_types<BE_Q8_0>(b, a, row_bytes, vec); break;
    case BE_Q4_K: gemv_types<BE_Q4_K>(b, a, row_bytes, vec); break;
    case BE_Q5_K: gemv_types<BE_Q5_K>(b, a, row_bytes, vec); break;
    case BE_Q6_K: gemv_types<BE_Q6_K>(b, a, row_bytes, vec); break;
    default:
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "linear: w of type %d has no matrix-vector kernel", (int)wt);
    }
    CU_LAUNCHED(b);
    return VKASR_OK;
}
