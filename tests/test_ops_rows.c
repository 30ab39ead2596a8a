/* test_ops_rows.c — row and column reductions (layernorm, softmax, argmax, feature_norm) on Vulkan
 * vs the C reference (double accumulation): rows narrower and wider than a workgroup, many rows,
 * aliasing, argmax ties and NaNs, feature_norm on long log-mel-like inputs with a large offset, and
 * layernorm's f16 output (rounded once, to nearest: th_check_f16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "op_harness.h"

/* An f16 output differs from the reference's only where the f32 and double results fall on either
 * side of a rounding boundary (th_check_f16): 1 % of the elements allowed, and NMSE 1e-8 (a rounding
 * other than to nearest shows as differences on about half the elements, a wrong value as NMSE). Rows
 * of mean 100 and spread 1 lose 7 bits of the f32 result to the mean's subtraction: 2.2 % of them
 * measured on the other side of a boundary, 10 % allowed there. */
#define F16_TOL 1e-8
#define F16_DIFFER 0.01
#define F16_DIFFER_OFFSET 0.1

static void layernorm_case(struct th *h, int64_t R, int64_t C, float lo, float hi, float eps, be_dtype yt) {
    th_case(h, "layernorm [%lld, %lld] x in [%g, %g) eps=%g y=%s", (long long)R, (long long)C, lo, hi, eps,
            yt == BE_F16 ? "f16" : "f32");
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(R, C), lo, hi);
    struct th_tensor *g = th_input(h, BE_F32, 1, TH_SHAPE(C), 0.5f, 1.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(C), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, yt, 2, TH_SHAPE(R, C));
    struct op_layernorm a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_layernorm){
            .x = TH_T(x, s), .gamma = TH_T(g, s), .beta = TH_T(b, s), .y = TH_T(y, s), .eps = eps};
    if (th_run(h, OP_layernorm, &a[0], &a[1])) {
        if (yt == BE_F16)
            th_check_f16(h, y, F16_TOL, lo > 50.0f ? F16_DIFFER_OFFSET : F16_DIFFER);
        else
            th_check(h, y, 1e-7);
    }
}

static void softmax_case(struct th *h, int64_t R, int64_t C, float scale, bool alias) {
    th_case(h, "softmax [%lld, %lld] scale=%g%s", (long long)R, (long long)C, scale, alias ? " y=x" : "");
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(R, C), -10.0f, 10.0f);
    struct th_tensor *y = alias ? x : th_output(h, BE_F32, 2, TH_SHAPE(R, C));
    struct op_softmax a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_softmax){.x = TH_T(x, s), .y = TH_T(y, s), .scale = scale};
    if (th_run(h, OP_softmax, &a[0], &a[1]))
        th_check(h, y, 1e-6);
}

/* Argmax over [c0, c1): values from a small integer set (many ties), a fraction of NaNs, some rows
 * all NaN (index 0) and, with inf_rows, +inf and -inf entries. */
static void argmax_case(struct th *h, int64_t R, int64_t C, int64_t c0, int64_t c1, int levels, double nan_frac) {
    th_case(h, "argmax [%lld, %lld] cols [%lld, %lld) levels=%d nan=%g", (long long)R, (long long)C,
            (long long)c0, (long long)c1, levels, nan_frac);
    size_t cells = (size_t)(R * C);
    float *d = malloc((cells ? cells : 1) * sizeof *d);
    if (!d)
        exit(1);
    for (int64_t r = 0; r < R; r++) {
        bool all_nan = r % 13 == 5;
        for (int64_t c = 0; c < C; c++) {
            float u = th_uniform(h, 0.0f, 1.0f);
            float v = (float)(th_rand(h) % (uint64_t)levels) - (float)levels / 2;
            if (all_nan || u < nan_frac)
                v = NAN;
            else if (r % 7 == 3 && u > 0.999f)
                v = INFINITY;
            else if (r % 7 == 4 && u > 0.99f)
                v = -INFINITY;
            else if (u > 0.995f)
                v = -0.0f; /* equal to +0: a tie, not a win */
            d[r * C + c] = v;
        }
    }
    struct th_tensor *x = th_input_data(h, BE_F32, 2, TH_SHAPE(R, C), d);
    free(d);
    struct th_tensor *y = th_output(h, BE_I32, 1, TH_SHAPE(R));
    struct op_argmax a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_argmax){.x = TH_T(x, s), .y = TH_T(y, s), .c0 = c0, .c1 = c1};
    if (th_run(h, OP_argmax, &a[0], &a[1]))
        th_check(h, y, 0);
}

static void feature_norm_case(struct th *h, int64_t L, int64_t M, float center, float spread, float eps,
                              bool alias) {
    th_case(h, "feature_norm [%lld, %lld] x in %g +- %g eps=%g%s", (long long)L, (long long)M, center, spread, eps,
            alias ? " y=x" : "");
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(L, M), center - spread, center + spread);
    struct th_tensor *y = alias ? x : th_output(h, BE_F32, 2, TH_SHAPE(L, M));
    struct op_feature_norm a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_feature_norm){.x = TH_T(x, s), .y = TH_T(y, s), .eps = eps};
    if (th_run(h, OP_feature_norm, &a[0], &a[1]))
        th_check(h, y, spread == 0.0f ? 0.0 : 1e-7); /* constant columns: exactly 0, as in double */
}

int main(void) {
    struct th h;
    th_open(&h, true);
    const bool f16 = h.dev[TH_DEV]->info.f16;
    if (!f16)
        printf("the device has no f16: layernorm's f16 output is not tested\n");

    const int64_t widths[] = {1, 7, 33, 1024, 4097};
    for (unsigned i = 0; i < sizeof widths / sizeof *widths; i++) {
        int64_t C = widths[i], R = C >= 1024 ? 5 : 301;
        layernorm_case(&h, R, C, -3.0f, 5.0f, 1e-5f, BE_F32);
        if (f16)
            layernorm_case(&h, R, C, -3.0f, 5.0f, 1e-5f, BE_F16);
        softmax_case(&h, R, C, 1.0f, false);
        softmax_case(&h, R, C, 0.125f, i % 2 == 1);
        argmax_case(&h, R, C, 0, C, 7, 0.05);
        if (C > 2)
            argmax_case(&h, R, C, 1, C - 1, 3, 0.3);
    }
    layernorm_case(&h, 0, 8, -1.0f, 1.0f, 1e-5f, BE_F32);
    layernorm_case(&h, 5, 0, -1.0f, 1.0f, 1e-5f, BE_F32); /* empty rows: nothing to write, nothing read */
    layernorm_case(&h, 0, 0, -1.0f, 1.0f, 1e-5f, BE_F32);
    layernorm_case(&h, 70001, 3, -1.0f, 1.0f, 1e-5f, BE_F32);
    layernorm_case(&h, 17, 512, 99.0f, 101.0f, 1e-5f, BE_F32); /* large mean, small variance: needs two passes */
    layernorm_case(&h, 3, 20000, -2.0f, 2.0f, 0.0f, BE_F32);
    if (f16) { /* the conformer's widths (176, 1024), odd widths (f16 rows ending mid-word), many rows */
        layernorm_case(&h, 301, 176, -3.0f, 5.0f, 1e-5f, BE_F16);
        layernorm_case(&h, 70001, 3, -1.0f, 1.0f, 1e-5f, BE_F16);
        layernorm_case(&h, 17, 512, 99.0f, 101.0f, 1e-5f, BE_F16);
        layernorm_case(&h, 0, 8, -1.0f, 1.0f, 1e-5f, BE_F16);
    }
    softmax_case(&h, 0, 8, 1.0f, false);
    softmax_case(&h, 5, 0, 1.0f, false);
    softmax_case(&h, 0, 0, 1.0f, true);
    softmax_case(&h, 70001, 3, 1.0f, true);
    softmax_case(&h, 9, 333, -2.0f, false);
    argmax_case(&h, 70001, 3, 0, 3, 2, 0.2);
    argmax_case(&h, 3, 20000, 5, 19999, 50, 0.01);
    argmax_case(&h, 64, 1025, 1024, 1025, 4, 0.1);
    argmax_case(&h, 0, 4, 0, 4, 2, 0.0);

    const int64_t lens[] = {1, 2, 3, 65, 1025};
    const int64_t bins[] = {1, 3, 80, 128};
    for (unsigned i = 0; i < sizeof lens / sizeof *lens; i++)
        for (unsigned j = 0; j < sizeof bins / sizeof *bins; j++)
            feature_norm_case(&h, lens[i], bins[j], -10.0f, 3.0f, 1e-5f, (i + j) % 2 == 1);
    feature_norm_case(&h, 0, 128, 0.0f, 1.0f, 1e-5f, false);
    feature_norm_case(&h, 5, 0, 0.0f, 1.0f, 1e-5f, false);
    feature_norm_case(&h, 20000, 128, -10.0f, 3.0f, 1e-5f, false); /* the required precision case */
    feature_norm_case(&h, 100003, 7, -10.0f, 3.0f, 1e-5f, true);   /* many chunks per column */
    feature_norm_case(&h, 70001, 3, 1000.0f, 0.5f, 1e-5f, false); /* offset 2000x the spread */
    /* Digital silence: every column constant (log of the mel guard). The mean must be exact, or
     * (x - mean) / (0 + eps) turns one ulp into a feature of ~0.2 (and the model hears words). */
    feature_norm_case(&h, 3001, 128, -16.635532f, 0.0f, 1e-5f, false);
    feature_norm_case(&h, 100003, 3, -16.635532f, 0.0f, 1e-5f, true);
    return th_close(&h);
}
