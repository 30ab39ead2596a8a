/* ref_rows.c — reference row reductions: layernorm, softmax, argmax, per-feature normalisation. */
#include <math.h>

#include "ref_internal.h"

vkasr_status ref_layernorm(struct backend *b, const struct op_layernorm *a) {
    int64_t R = a->x.ne[0], C = a->x.ne[1];
    const float *x = ref_f32(&a->x), *g = ref_f32(&a->gamma), *be = ref_f32(&a->beta);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < C; c++)
            mean += xr[c];
        mean /= (double)C;
        for (int64_t c = 0; c < C; c++)
            var += (xr[c] - mean) * (xr[c] - mean);
        var /= (double)C;
        double inv = 1.0 / sqrt(var + (double)a->eps);
        for (int64_t c = 0; c < C; c++)
            ref_put(&a->y, (uint64_t)(r * C + c), (xr[c] - mean) * inv * g[c] + be[c]);
    }
    return VKASR_OK;
}

vkasr_status ref_softmax(struct backend *b, const struct op_softmax *a) {
    int64_t R = a->x.ne[0], C = a->x.ne[1];
    const float *x = ref_f32(&a->x);
    float *y = ref_f32(&a->y);
    for (int64_t r = 0; r < R; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; c++)
            mx = fmax(mx, (double)a->scale * x[r * C + c]);
        for (int64_t c = 0; c < C; c++)
            sum += exp((double)a->scale * x[r * C + c] - mx);
        for (int64_t c = 0; c < C; c++)
            y[r * C + c] = (float)(exp((double)a->scale * x[r * C + c] - mx) / sum);
    }
    return VKASR_OK;
}

vkasr_status ref_argmax(struct backend *b, const struct op_argmax *a) {
    int64_t R = a->x.ne[0], C = a->x.ne[1];
    const float *x = ref_f32(&a->x);
    int32_t *y = ref_i32(&a->y);
    for (int64_t r = 0; r < R; r++) {
        int64_t best = -1;
        for (int64_t c = a->c0; c < a->c1; c++) {
            float v = x[r * C + c];
            if (!isnan(v) && (best < 0 || v > x[r * C + best]))
                best = c;
        }
        y[r] = best < 0 ? 0 : (int32_t)(best - a->c0);
    }
    return VKASR_OK;
}

vkasr_status ref_feature_norm(struct backend *b, const struct op_feature_norm *a) {
    int64_t L = a->x.ne[0], M = a->x.ne[1];
    const float *x = ref_f32(&a->x);
    float *y = ref_f32(&a->y);
    for (int64_t m = 0; m < M; m++) {
        double mean = 0, var = 0;
        for (int64_t t = 0; t < L; t++)
            mean += x[t * M + m];
        mean = L ? mean / (double)L : 0;
        for (int64_t t = 0; t < L; t++)
            var += (x[t * M + m] - mean) * (x[t * M + m] - mean);
        double sd = L > 1 ? sqrt(var / (double)(L - 1)) : 0.0;
        for (int64_t t = 0; t < L; t++)
            y[t * M + m] = (float)((x[t * M + m] - mean) / (sd + (double)a->eps));
    }
    return VKASR_OK;
}
