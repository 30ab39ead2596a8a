/* ref_linear.c — reference matrix ops: linear (x w^T + b with epilogue) and the LSTM step. */
#include <math.h>
#include <stdlib.h>

#include "ref_internal.h"

/* Element i of an F32 or F16 tensor, widened to double. */
static double ref_elem(const be_tensor *t, uint64_t i) {
    return t->type == BE_F16 ? (double)half_to_float(ref_u16(t)[i]) : (double)ref_f32(t)[i];
}

vkasr_status ref_linear(struct backend *b, const struct op_linear *a) {
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    const float *bias = a->bias.addr ? ref_f32(&a->bias) : NULL;
    /* with f16 weights the product takes x rounded to f16 (the tensor-core path's input); an f16 x
     * is exact already */
    bool round_x = a->w.type == BE_F16 && a->x.type == BE_F32;
    double *xr = malloc((size_t)(K > 0 ? K : 1) * sizeof *xr);
    if (!xr)
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++) {
            uint64_t i = (uint64_t)(m * K + k);
            xr[k] = round_x ? (double)half_to_float(float_to_half(ref_f32(&a->x)[i])) : ref_elem(&a->x, i);
        }
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += xr[k] * ref_weight(&a->w, (uint64_t)n * (uint64_t)K + (uint64_t)k);
            if (bias)
                acc += bias[n];
            double v = (double)a->alpha * ref_act(acc, a->act);
            uint64_t o = (uint64_t)(m * N + n);
            if (a->res.addr)
                v += ref_elem(&a->res, o); /* res may be y: read before the write */
            if (a->y.type == BE_F16)
                ref_u16(&a->y)[o] = float_to_half((float)v);
            else
                ref_f32(&a->y)[o] = (float)v;
        }
    }
    free(xr);
    return VKASR_OK;
}

vkasr_status ref_lstm_step(struct backend *b, const struct op_lstm_step *a) {
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1], In = a->x.ne[a->x.nd - 1];
    const float *wi = ref_f32(&a->w_ih), *wh = ref_f32(&a->w_hh), *bias = ref_f32(&a->b);
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
                    acc += (double)wi[row * In + k] * x[k];
                for (int64_t k = 0; k < P; k++)
                    acc += (double)wh[row * P + k] * h[k];
                g[q] = acc;
            }
            double i = 1 / (1 + exp(-g[0])), f = 1 / (1 + exp(-g[1])), gg = tanh(g[2]), o = 1 / (1 + exp(-g[3]));
            double cn = f * c[j] + i * gg;
            co[j] = (float)cn;
            ho[j] = (float)(o * tanh(cn));
        }
    }
    return VKASR_OK;
}
