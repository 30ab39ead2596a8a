/* cu_lstm.cu — one LSTM step of the prediction network on CUDA (PyTorch gate order i, f, g, o) for B rows
 * (the hypotheses of a batch): a warp per hidden unit and row computes its four gate rows (lanes split
 * the In + P products, a shuffle reduction adds them) and updates the unit's cell and output; c_out may
 * replace c element-wise. A row whose gate is closed is left alone; a row's arithmetic does not depend
 * on B. Quantized w_ih / w_hh (one block type) are read as blocks, each weight dequantized as it is
 * used (cu_dequant.cuh: the host's f32 values), with no dequantized copy. */
#include "cu_dequant.cuh"

#define LSTM_WARPS 8

static __device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Weight k of the row at byte address row: f32, or wtype's blocks dequantized. */
static __device__ __forceinline__ float lstm_w(int wtype, const unsigned char *row, int64_t k) {
    return wtype == BE_F32 ? ((const float *)row)[k] : dq_weight(wtype, row, k);
}

static __global__ void lstm_kernel(const float *x, const float *h, const float *c, const unsigned char *wi,
                                   const unsigned char *wh, int wtype, uint64_t rb_i, uint64_t rb_h,
                                   const float *bias, float *ho, float *co, int64_t In, int64_t P, int64_t B,
                                   const int32_t *gate, int64_t gate_stride) {
    int lane = threadIdx.x & 31;
    for (int64_t r = blockIdx.y; r < B; r += gridDim.y) {
        if (gate && gate[r * gate_stride] == 0) /* op_lstm_step's gate: closed, nothing is written */
            continue;
        const float *xr = x + r * In, *hr = h + r * P, *cr = c + r * P;
        for (int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; j < P;
             j += (int64_t)gridDim.x * blockDim.x / 32) {
            float g[4];
            for (int q = 0; q < 4; q++) {
                int64_t row = q * P + j;
                const unsigned char *wir = wi + (uint64_t)row * rb_i, *whr = wh + (uint64_t)row * rb_h;
                float acc = 0;
                for (int64_t k = lane; k < In; k += 32)
                    acc = fmaf(lstm_w(wtype, wir, k), xr[k], acc);
                for (int64_t k = lane; k < P; k += 32)
                    acc = fmaf(lstm_w(wtype, whr, k), hr[k], acc);
                g[q] = cu_warp_sum(acc) + bias[row];
            }
            if (lane == 0) {
                float cn = sigmoidf_(g[1]) * cr[j] + sigmoidf_(g[0]) * tanhf(g[2]);
                co[r * P + j] = cn;
                ho[r * P + j] = sigmoidf_(g[3]) * tanhf(cn);
            }
        }
    }
}

vkasr_status cu_op_lstm_step(struct cu_backend *b, const struct op_lstm_step *a) {
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1], In = a->x.ne[a->x.nd - 1];
    if (P == 0)
        return VKASR_OK;
    dim3 grid(cu_grid(b, (uint64_t)P, LSTM_WARPS), (unsigned)(B < 65535 ? B : 65535));
    /* row strides in bytes: f32 rows, or rows of blocks (w_ih and w_hh share a type: the argument rules) */
    const be_dtype wt = a->w_ih.type;
    const uint64_t rb_i = wt == BE_F32 ? (uint64_t)In * 4 : dq_row_bytes(wt, In);
    const uint64_t rb_h = wt == BE_F32 ? (uint64_t)P * 4 : dq_row_bytes(wt, P);
    lstm_kernel<<<grid, 32 * LSTM_WARPS, 0, b->stream>>>(
        cu_ptr<float>(a->x), cu_ptr<float>(a->h), cu_ptr<float>(a->c), cu_ptr<unsigned char>(a->w_ih),
        cu_ptr<unsigned char>(a->w_hh), (int)wt, rb_i, rb_h, cu_ptr<float>(a->b), cu_ptr<float>(a->h_out),
        cu_ptr<float>(a->c_out), In, P, B,
        a->gate.addr ? cu_ptr<int32_t>(a->gate) : (const int32_t *)NULL, B > 1 ? a->gate_stride : 0);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
