/* ref_linear.c — reference matrix ops: linear (x w^T + b with epilogue) and the LSTM step. */
#include <math.h>
#include <stdlib.h>

#include "common/qblock.h"
#include "ref_internal.h"

/* A quantized w [N, K] dequantized to f32 (qblock_dequant_row, row by row): the weights the op
 * defines. NULL when out of memory. */
static float *dequant_w(const be_tensor *w) {
    const int64_t N = w->ne[0], K = w->ne[1];
    const uint64_t rb = (uint64_t)(K / be_dtype_block(w->type)) * (uint64_t)be_dtype_block_bytes(w->type);
    float *f = malloc((size_t)(N * K > 0 ? N * K : 1) * sizeof *f);
    if (!f)
        return NULL;
    for (int64_t n = 0; n < N; n++)
        qblock_dequant_row(be_dtype_ggml(w->type), (const uint8_t *)(uintptr_t)w->addr + (uint64_t)n * rb,
                           f + (uint64_t)n * (uint64_t)K, K);
    return f;
}

vkasr_status ref_linear(struct backend *b, const struct op_linear *a) {
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    const float *bias = a->bias.addr ? ref_f32(&a->bias) : NULL;
    /* with f16 weights the product takes x rounded to f16 (the tensor-core path's input) unless the
     * session is f32 (x_f32); an f16 x is exact already */
    bool round_x = a->w.type == BE_F16 && a->x.type == BE_F32 && !a->x_f32;
    /* ACT_GLU: y has the value half's columns, each gated by its column of the other half */
    const bool glu = a->act == ACT_GLU;
    const int64_t Ny = glu ? N / 2 : N;
    double *xr = malloc((size_t)(K > 0 ? K : 1) * sizeof *xr), *v = malloc((size_t)(N > 0 ? N : 1) * sizeof *v);
    float *wq = be_dtype_is_quant(a->w.type) ? dequant_w(&a->w) : NULL;
    const be_tensor w = wq ? be_tensor_2d((uint64_t)(uintptr_t)wq, BE_F32, N, K) : a->w;
    if (!xr || !v || (be_dtype_is_quant(a->w.type) && !wq)) {
        free(xr);
        free(v);
        free(wq);
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++) {
            uint64_t i = (uint64_t)(m * K + k);
            xr[k] = round_x ? (double)half_to_float(float_to_half(ref_f32(&a->x)[i])) : ref_get(&a->x, i);
        }
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += xr[k] * ref_weight(&w, (uint64_t)n * (uint64_t)K + (uint64_t)k);
            v[n] = bias ? acc + bias[n] : acc;
        }
        for (int64_t n = 0; n < Ny; n++) {
            double r = glu ? v[n] / (1.0 + exp(-v[Ny + n])) : ref_act(v[n], a->act);
            r *= (double)a->alpha;
            uint64_t o = (uint64_t)(m * Ny + n);
            if (a->res.addr)
                r += ref_get(&a->res, o); /* res may be y: read before the write */
            ref_put(&a->y, o, r);
        }
    }
    free(xr);
    free(v);
    free(wq);
    return VKASR_OK;
}

vkasr_status ref_lstm_step(struct backend *b, const struct op_lstm_step *a) {
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1], In = a->x.ne[a->x.nd - 1];
    /* quantized w_ih / w_hh: their dequantized f32 values, as for linear */
    float *qi = be_dtype_is_quant(a->w_ih.type) ? dequant_w(&a->w_ih) : NULL;
    float *qh = be_dtype_is_quant(a->w_hh.type) ? dequant_w(&a->w_hh) : NULL;
    if ((be_dtype_is_quant(a->w_ih.type) && !qi) || (be_dtype_is_quant(a->w_hh.type) && !qh)) {
        free(qi);
        free(qh);
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    /* f16 weights widened exactly (ref_weight); f32 and dequantized ones read directly */
    const float *wi = qi ? qi : a->w_ih.type == BE_F32 ? ref_f32(&a->w_ih) : NULL;
    const float *wh = qh ? qh : a->w_hh.type == BE_F32 ? ref_f32(&a->w_hh) : NULL, *bias = ref_f32(&a->b);
    for (int64_t r = 0; r < B; r++) {
        if (a->gate.addr && ref_i32(&a->gate)[r * a->gate_stride] == 0)
            continue;
        const float *x = ref_f32(&a->x) + r * In, *h = ref_f32(&a->h) + r * P, *c = ref_f32(&a->c) + r * P;
        float *ho = ref_f32(&a->h_out) + r * P, *co = ref_f32(&a->c_out) + r * P;
        for (int64_t j = 0; j < P; j++) {
            double g[4];
            for (int q = 0; q < 4; q++) {
                int64_t row = q * P + j;
                double acc = bias[row];
                for (int64_t k = 0; k < In; k++)
                    acc += (wi ? (double)wi[row * In + k] : ref_weight(&a->w_ih, (uint64_t)(row * In + k))) * x[k];
                for (int64_t k = 0; k < P; k++)
                    acc += (wh ? (double)wh[row * P + k] : ref_weight(&a->w_hh, (uint64_t)(row * P + k))) * h[k];
                g[q] = acc;
            }
            double i = 1 / (1 + exp(-g[0])), f = 1 / (1 + exp(-g[1])), gg = tanh(g[2]), o = 1 / (1 + exp(-g[3]));
            double cn = f * c[j] + i * gg;
            co[j] = (float)cn;
            ho[j] = (float)(o * tanh(cn));
        }
    }
    free(qi);
    free(qh);
    return VKASR_OK;
}
