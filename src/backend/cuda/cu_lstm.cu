/* cu_lstm.cu — one LSTM step of the prediction network on CUDA (PyTorch gate order i, f, g, o) for B rows
 * (the hypotheses of a batch): a block per hidden unit j, a warp per gate row q*P + j sweeping its In + P
 * weights for LSTM_ROWS rows at once (each weight load serves them all); a shuffle tree adds the lanes'
 * sums, then one thread per row updates the unit's cell and output; c_out may replace c element-wise.
 * A row whose gate is closed is left alone. The lanes' partition and the tree depend on In and P only,
 * so a row's arithmetic does not depend on B. Quantized w_ih / w_hh (one block type) are read as blocks,
 * 8-weight pieces dequantized as they are used (cu_dequant.cuh: the host's f32 values); f16 ones are
 * widened exactly, x and h used as they are. */
#include "cu_dequant.cuh"

#define LSTM_ROWS 4 /* rows of B per pass of a block */

static __device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* acc[r] += w . x_r over K for rows r < rows of x (row stride K). f32 w: float4 pieces (VEC: K % 4 == 0,
 * w and x 16-byte aligned: k = 4 lane + 128 i) or single weights (k = lane + 32 i); f16 w: 8-weight pieces
 * with VEC (K % 8 == 0), else single weights; block types: 8-weight pieces (k = 8 lane + 256 i, dq_w8), x
 * read as two float4 when VEC. */
template <int WT, bool VEC>
static __device__ __forceinline__ void lstm_dot(const unsigned char *w, const float *x, int64_t K, int rows,
                                                int lane, float acc[LSTM_ROWS]) {
    if (WT == BE_F32 && VEC) {
        const float *wf = (const float *)w;
        for (int64_t k = 4 * lane; k < K; k += 128) {
            const float4 wv = *(const float4 *)(wf + k);
#pragma unroll
            for (int r = 0; r < LSTM_ROWS; r++)
                if (r < rows) {
                    const float4 xv = *(const float4 *)(x + r * K + k);
                    acc[r] = fmaf(wv.x, xv.x, acc[r]);
                    acc[r] = fmaf(wv.y, xv.y, acc[r]);
                    acc[r] = fmaf(wv.z, xv.z, acc[r]);
                    acc[r] = fmaf(wv.w, xv.w, acc[r]);
                }
        }
    } else if (WT == BE_F32 || (WT == BE_F16 && !VEC)) { /* single weights */
        for (int64_t k = lane; k < K; k += 32) {
            const float wv = WT == BE_F16 ? __half2float(((const __half *)w)[k]) : ((const float *)w)[k];
#pragma unroll
            for (int r = 0; r < LSTM_ROWS; r++)
                if (r < rows)
                    acc[r] = fmaf(wv, x[r * K + k], acc[r]);
        }
    } else { /* 8-weight pieces: block types, and f16 with VEC (K % 8 == 0 then) */
        for (int64_t k = 8 * lane; k < K; k += 256) {
            float wv[8];
            dq_w8<WT>(w, k, wv);
#pragma unroll
            for (int r = 0; r < LSTM_ROWS; r++)
                if (r < rows) {
                    const float *xr = x + r * K + k;
                    float xv[8];
                    if (VEC) {
                        dq_load8(xr, xv);
                    } else {
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            xv[i] = xr[i];
                    }
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[r] = fmaf(wv[i], xv[i], acc[r]);
                }
        }
    }
}

/* Blocks of 128 threads (warp q: gate q) loop grid-stride over units (x) and blocks of LSTM_ROWS rows (y). */
template <int WT, bool VEC>
static __global__ void __launch_bounds__(128)
    lstm_kernel(const float *x, const float *h, const float *c, const unsigned char *wi, const unsigned char *wh,
                uint64_t rb_i, uint64_t rb_h, const float *bias, float *ho, float *co, int64_t In, int64_t P,
                int64_t B, const int32_t *gate, int64_t gate_stride) {
    __shared__ float gs[4][LSTM_ROWS];
    const int q = threadIdx.x / 32, lane = threadIdx.x & 31;
    for (int64_t j = blockIdx.x; j < P; j += gridDim.x) {
        for (int64_t r0 = (int64_t)blockIdx.y * LSTM_ROWS; r0 < B; r0 += (int64_t)gridDim.y * LSTM_ROWS) {
            const int rows = (int)(B - r0 < LSTM_ROWS ? B - r0 : LSTM_ROWS);
            bool open = !gate; /* op_lstm_step's gate: a closed row is not written; all closed, no work */
            for (int r = 0; r < rows && !open; r++)
                open = gate[(r0 + r) * gate_stride] != 0;
            if (!open) /* the same for the whole block */
                continue;
            const int64_t row = q * P + j;
            float acc[LSTM_ROWS];
#pragma unroll
            for (int r = 0; r < LSTM_ROWS; r++)
                acc[r] = 0.0f;
            lstm_dot<WT, VEC>(wi + (uint64_t)row * rb_i, x + r0 * In, In, rows, lane, acc);
            lstm_dot<WT, VEC>(wh + (uint64_t)row * rb_h, h + r0 * P, P, rows, lane, acc);
#pragma unroll
            for (int r = 0; r < LSTM_ROWS; r++) {
                const float s = cu_warp_sum(acc[r]);
                if (lane == 0)
                    gs[q][r] = s + bias[row];
            }
            __syncthreads();
            const int r = threadIdx.x;
            if (r < rows && (!gate || gate[(r0 + r) * gate_stride] != 0)) {
                const int64_t o = (r0 + r) * P + j;
                float cn = sigmoidf_(gs[1][r]) * c[o] + sigmoidf_(gs[0][r]) * tanhf(gs[2][r]);
                co[o] = cn;
                ho[o] = sigmoidf_(gs[3][r]) * tanhf(cn);
            }
            __syncthreads(); /* the next pass overwrites gs */
        }
    }
}

template <int WT, bool VEC>
static void lstm_launch(struct cu_backend *b, const struct op_lstm_step *a, uint64_t rb_i, uint64_t rb_h, int64_t In,
                        int64_t P, int64_t B) {
    dim3 grid(cu_grid(b, (uint64_t)P, 1), (unsigned)((B + LSTM_ROWS - 1) / LSTM_ROWS < 65535
                                                          ? (B + LSTM_ROWS - 1) / LSTM_ROWS : 65535));
    lstm_kernel<WT, VEC><<<grid, 128, 0, b->stream>>>(
        cu_ptr<float>(a->x), cu_ptr<float>(a->h), cu_ptr<float>(a->c), cu_ptr<unsigned char>(a->w_ih),
        cu_ptr<unsigned char>(a->w_hh), rb_i, rb_h, cu_ptr<float>(a->b), cu_ptr<float>(a->h_out),
        cu_ptr<float>(a->c_out), In, P, B, a->gate.addr ? cu_ptr<int32_t>(a->gate) : (const int32_t *)NULL,
        B > 1 ? a->gate_stride : 0);
}

template <int WT>
static void lstm_vec(struct cu_backend *b, const struct op_lstm_step *a, uint64_t rb_i, uint64_t rb_h, int64_t In,
                     int64_t P, int64_t B, bool vec) {
    if (vec)
        lstm_launch<WT, true>(b, a, rb_i, rb_h, In, P, B);
    else
        lstm_launch<WT, false>(b, a, rb_i, rb_h, In, P, B);
}

static bool al16(uint64_t addr) { return addr % 16 == 0; }

vkasr_status cu_op_lstm_step(struct cu_backend *b, const struct op_lstm_step *a) {
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1], In = a->x.ne[a->x.nd - 1];
    if (P == 0)
        return VKASR_OK;
    /* row strides in bytes: f32 rows, or rows of blocks (w_ih and w_hh share a type: the argument rules) */
    const be_dtype wt = a->w_ih.type;
    const uint64_t rb_i = wt == BE_F32 || wt == BE_F16 ? (uint64_t)In * be_dtype_size(wt) : dq_row_bytes(wt, In);
    const uint64_t rb_h = wt == BE_F32 || wt == BE_F16 ? (uint64_t)P * be_dtype_size(wt) : dq_row_bytes(wt, P);
    /* vector loads: every row of x, h (and of an f32 or f16 w) 16-byte aligned; depends on the pointers,
     * In and P only */
    const int64_t kv = wt == BE_F16 ? 8 : 4;
    const bool vec = In % kv == 0 && P % kv == 0 && al16(a->x.addr) && al16(a->h.addr) &&
                     (!(wt == BE_F32 || wt == BE_F16) || (al16(a->w_ih.addr) && al16(a->w_hh.addr)));
    switch (wt) {
    case BE_F32: lstm_vec<BE_F32>(b, a, rb_i, rb_h, In, P, B, vec); break;
    case BE_F16: lstm_vec<BE_F16>(b, a, rb_i, rb_h, In, P, B, vec); break;
    case BE_Q8_0: lstm_vec<BE_Q8_0>(b, a, rb_i, rb_h, In, P, B, vec); break;
    case BE_Q4_K: lstm_vec<BE_Q4_K>(b, a, rb_i, rb_h, In, P, B, vec); break;
    case BE_Q5_K: lstm_vec<BE_Q5_K>(b, a, rb_i, rb_h, In, P, B, vec); break;
    case BE_Q6_K: lstm_vec<BE_Q6_K>(b, a, rb_i, rb_h, In, P, B, vec); break;
    default:
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "lstm_step: w_ih of type %d has no CUDA kernel", (int)wt);
    }
    CU_LAUNCHED(b);
    return VKASR_OK;
}
