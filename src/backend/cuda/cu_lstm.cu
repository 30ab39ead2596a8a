/* cu_lstm.cu — one LSTM step of the prediction network on CUDA (PyTorch gate order i, f, g, o): a warp
 * per hidden unit computes its four gate rows (lanes split the In + P products, a shuffle reduction
 * adds them) and updates the unit's cell and output; c_out may replace c element-wise. */
#include "cu_internal.h"

#define LSTM_WARPS 8

static __device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

static __global__ void lstm_kernel(const float *x, const float *h, const float *c, const float *wi, const float *wh,
                                   const float *bias, float *ho, float *co, int64_t In, int64_t P,
                                   const int32_t *gate) {
    if (gate && *gate == 0) /* op_lstm_step's gate: closed, the step writes nothing */
        return;
    int lane = threadIdx.x & 31;
    for (int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; j < P;
         j += (int64_t)gridDim.x * blockDim.x / 32) {
        float g[4];
        for (int q = 0; q < 4; q++) {
            int64_t row = q * P + j;
            float acc = 0;
            for (int64_t k = lane; k < In; k += 32)
                acc = fmaf(wi[row * In + k], x[k], acc);
            for (int64_t k = lane; k < P; k += 32)
                acc = fmaf(wh[row * P + k], h[k], acc);
            g[q] = cu_warp_sum(acc) + bias[row];
        }
        if (lane == 0) {
            float cn = sigmoidf_(g[1]) * c[j] + sigmoidf_(g[0]) * tanhf(g[2]);
            co[j] = cn;
            ho[j] = sigmoidf_(g[3]) * tanhf(cn);
        }
    }
}

vkasr_status cu_op_lstm_step(struct cu_backend *b, const struct op_lstm_step *a) {
    int64_t P = a->h.ne[0], In = a->x.ne[0];
    if (P == 0)
        return VKASR_OK;
    lstm_kernel<<<cu_grid(b, (uint64_t)P, LSTM_WARPS), 32 * LSTM_WARPS, 0, b->stream>>>(
        cu_ptr<float>(a->x), cu_ptr<float>(a->h), cu_ptr<float>(a->c), cu_ptr<float>(a->w_ih), cu_ptr<float>(a->w_hh),
        cu_ptr<float>(a->b), cu_ptr<float>(a->h_out), cu_ptr<float>(a->c_out), In, P,
        a->gate.addr ? cu_ptr<int32_t>(a->gate) : (const int32_t *)NULL);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
