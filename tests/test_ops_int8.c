/* test_ops_int8.c — the int8 path of quantized linear products (q8_0, q4_k, q5_k, q6_k weights) on Vulkan
 * (vk_op_gemm_i8.c): the rows' quantization (f32 and f16 x; a weight's int8 form, its blocks dequantized
 * by qblock.c then requantized per row) against the host's rule, and the int8 GEMM (the
 * emulated twin on any f16 device, the real kernel where the device has int8 cooperative matrices)
 * against a C W8A8 reference on the device's own int8 operands: the int32 dot products exact, then the
 * kernel's f32 operations in its order, so outputs compare bit for bit (activations that call exp: a
 * bound, exp is not correctly rounded on GPUs). The accuracy of W8A8 itself is checked against the C
 * reference backend's f32 product of the dequantized weights. The int8 rows a layernorm makes for its
 * products (op_layernorm.y8, read as op_linear.x8) are checked bit for bit against the products' own
 * quantization of the layernorm's output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_gemm.h"
#include "common/half.h"
#include "common/qblock.h"
#include "model/quant.h"
#include "op_harness.h"

/* W8A8 against the f32 product of the dequantized weights: each int8 value is within half a step of
 * its row's absmax / 127, a relative error of up to 0.4 % per value that partly cancels in the sums. */
#define TOL_W8A8 3e-4
/* Outputs whose epilogue calls exp (sigmoid, SiLU, tanh, GLU): f32 relative bound. */
#define TOL_EXP 1e-5

/* The block types with an int8 form. */
static const be_dtype WTYPES[] = {BE_Q8_0, BE_Q4_K, BE_Q5_K, BE_Q6_K};

/* Host values of an f32 or f16 tensor's data. */
static float *as_floats(be_dtype t, const void *data, int64_t n) {
    float *f = malloc((size_t)n * sizeof *f);
    if (!f)
        exit(1);
    if (t == BE_F16)
        half_to_float_row(data, f, (uint64_t)n);
    else
        memcpy(f, data, (size_t)n * sizeof *f);
    return f;
}

/* Random values in [-1, 1) with row `zero_row` all zeros (the zero-scale case; -1: none). */
static float *rand_rows(struct th *h, int64_t rows, int64_t K, int64_t zero_row) {
    float *f = malloc((size_t)(rows * K) * sizeof *f);
    if (!f)
        exit(1);
    for (int64_t i = 0; i < rows * K; i++)
        f[i] = i / K == zero_row ? 0.0f : th_uniform(h, -1.0f, 1.0f);
    return f;
}

/* A w [N, K] of block type wt quantized by the converter from rand_rows (row 1 zeros). */
static struct th_tensor *q_input(struct th *h, be_dtype wt, int64_t N, int64_t K) {
    const uint32_t g = be_dtype_ggml(wt);
    float *f = rand_rows(h, N, K, N > 1 ? 1 : -1);
    uint8_t *q = malloc((size_t)(quant_row_bytes(g, K) * (uint64_t)N));
    if (!q || quant_rows(g, f, false, N, K, q, 1) != 0)
        exit(1);
    struct th_tensor *w = th_input_data(h, wt, 2, TH_SHAPE(N, K), q);
    free(f);
    free(q);
    return w;
}

/* The host's rule for one row (quantize_rows.comp): s = absmax / 127, q = clamp(rint(v * (127 /
 * absmax))); *inv receives the multiplier (0 for a zero row). */
static void quant_row_ref(const float *v, int64_t K, int8_t *q, float *s, float *inv) {
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++)
        amax = fmaxf(amax, fabsf(v[k]));
    *s = amax / 127.0f;
    *inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t k = 0; k < K; k++) {
        float r = amax > 0.0f ? rintf(v[k] * *inv) : 0.0f;
        q[k] = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
    }
}

/* Checks a device int8 form (rows x K int8, then rows f32 scales) of host values v against the rule.
 * A CPU driver divides exactly, so everything must match; a GPU's division may be an ulp off, which
 * moves a value only where v * inv lies at a rounding tie (within 1e-3 of one: a step of 1 there). */
static void check_form(struct th *h, const char *what, const float *v, int64_t rows, int64_t K, const uint8_t *dev,
                       bool exact) {
    h->checks++;
    int8_t *q = malloc((size_t)K);
    if (!q)
        exit(1);
    const float *ds = (const float *)(const void *)(dev + rows * K);
    uint64_t ties = 0;
    for (int64_t m = 0; m < rows; m++) {
        float s, inv;
        quant_row_ref(v + m * K, K, q, &s, &inv);
        float sd = ds[m];
        if (exact ? memcmp(&sd, &s, 4) != 0 : fabsf(sd - s) > 2.5e-7f * s) {
            printf("FAIL [%s]: %s row %lld: scale %.9g, host %.9g\n", h->name, what, (long long)m, sd, s);
            h->failures++;
            break;
        }
        for (int64_t k = 0; k < K; k++) {
            int qd = (int8_t)dev[m * K + k];
            if (qd == q[k])
                continue;
            float t = fabsf(v[m * K + k] * inv);
            if (!exact && abs(qd - q[k]) == 1 && fabsf(t - floorf(t) - 0.5f) < 1e-3f) {
                ties++;
                continue;
            }
            printf("FAIL [%s]: %s [%lld, %lld] = %d, host %d (value %.9g, scale %.9g)\n", h->name, what, (long long)m,
                   (long long)k, qd, q[k], v[m * K + k], s);
            h->failures++;
            m = rows;
            break;
        }
    }
    if (ties)
        printf("  %s: %llu values at a rounding tie took the other side\n", what, (unsigned long long)ties);
    free(q);
}

static struct vk_backend *vkb(struct th *h) { return (struct vk_backend *)h->be[TH_DEV]; }

/* Downloads `bytes` at device address a. */
static uint8_t *fetch(struct th *h, uint64_t a, uint64_t bytes) {
    uint8_t *p = malloc(bytes);
    if (!p)
        exit(1);
    if (be_sync(h->be[TH_DEV]) != VKASR_OK || be_download(h->be[TH_DEV], p, a, bytes) != VKASR_OK) {
        printf("FAIL [%s]: download: %s\n", h->name, h->be[TH_DEV]->err.msg);
        exit(1);
    }
    return p;
}

/* The device's int8 form of x (quantize_rows.comp into scratch); NULL after a failure. */
static uint8_t *device_x8(struct th *h, struct th_tensor *x) {
    const int64_t M = x->ne[0], K = x->ne[1];
    uint64_t a = 0, bytes = (uint64_t)(M * K + 4 * M);
    if (be_alloc(h->be[TH_DEV], BE_POOL_SCRATCH, bytes, &a) != VKASR_OK ||
        vk_i8_quantize_rows(vkb(h), &TH_T(x, TH_DEV), a) != VKASR_OK) {
        printf("FAIL [%s]: rows to int8: %s\n", h->name, h->be[TH_DEV]->err.msg);
        h->failures++;
        return NULL;
    }
    return fetch(h, a, bytes);
}

/* The device's int8 form of quantized weight w (vk_i8_weight: a model weight's made once, any other's into
 * scratch); NULL after a failure. */
static uint8_t *device_w8(struct th *h, const be_tensor *w) {
    const int64_t N = w->ne[0], K = w->ne[1];
    uint64_t a = 0;
    if (vk_i8_weight(vkb(h), w, &a) != VKASR_OK) {
        printf("FAIL [%s]: int8 weight form: %s\n", h->name, h->be[TH_DEV]->err.msg);
        h->failures++;
        return NULL;
    }
    return fetch(h, a, (uint64_t)(N * K + 4 * N));
}

/* w's device tensor, or with `model` a copy of it in the weights arena (where the model's weights live:
 * their int8 forms are made once and kept). */
static be_tensor weight_tensor(struct th *h, struct th_tensor *w, bool model) {
    be_tensor t = TH_T(w, TH_DEV);
    if (model) {
        const uint64_t bytes = be_nbytes(&t);
        if (be_alloc(h->be[TH_DEV], BE_POOL_WEIGHTS, bytes, &t.addr) != VKASR_OK ||
            be_upload(h->be[TH_DEV], t.addr, w->host, bytes) != VKASR_OK) {
            printf("FAIL [%s]: a weight in the weights arena: %s\n", h->name, h->be[TH_DEV]->err.msg);
            exit(1);
        }
    }
    return t;
}

/* The weight's dequantized values (qblock.c: the values the kernels dequantize to). */
static float *dequant(const struct th_tensor *w) {
    const int64_t N = w->ne[0], K = w->ne[1];
    float *f = malloc((size_t)(N * K) * sizeof *f);
    if (!f)
        exit(1);
    const uint32_t g = be_dtype_ggml(w->type);
    const uint64_t rb = quant_row_bytes(g, K);
    for (int64_t n = 0; n < N; n++)
        qblock_dequant_row(g, (const uint8_t *)w->host + n * rb, f + n * K, K);
    return f;
}

static void quantize_case(struct th *h, int64_t M, int64_t K, be_dtype xt, bool exact) {
    th_case(h, "rows to int8: x=%s M=%lld K=%lld", be_dtype_name(xt), (long long)M, (long long)K);
    float *f = rand_rows(h, M, K, M > 2 ? 2 : -1);
    if (xt == BE_F16) { /* the f16 values the device reads */
        uint16_t *hx = malloc((size_t)(M * K) * 2);
        if (!hx)
            exit(1);
        for (int64_t i = 0; i < M * K; i++)
            hx[i] = float_to_half(f[i]);
        half_to_float_row(hx, f, (uint64_t)(M * K));
        struct th_tensor *x = th_input_data(h, xt, 2, TH_SHAPE(M, K), hx);
        free(hx);
        uint8_t *d = device_x8(h, x);
        if (d)
            check_form(h, "x8", f, M, K, d, exact);
        free(d);
    } else {
        struct th_tensor *x = th_input_data(h, xt, 2, TH_SHAPE(M, K), f);
        uint8_t *d = device_x8(h, x);
        if (d)
            check_form(h, "x8", f, M, K, d, exact);
        free(d);
    }
    free(f);
    th_check_guards(h);
}

/* A weight's int8 form against qblock.c's values requantized by the host's rule. */
static void weight_case(struct th *h, be_dtype type, int64_t N, int64_t K, bool model, bool exact) {
    th_case(h, "%s weight to int8: N=%lld K=%lld%s", be_dtype_name(type), (long long)N, (long long)K,
            model ? " (model weight)" : "");
    struct th_tensor *w = q_input(h, type, N, K);
    const be_tensor wt = weight_tensor(h, w, model);
    float *f = dequant(w);
    uint8_t *d = device_w8(h, &wt);
    if (d)
        check_form(h, "w8", f, N, K, d, exact);
    free(d);
    if (model) { /* the second use finds the form made by the first */
        uint64_t a1 = 0, a2 = 0;
        h->checks++;
        if (vk_i8_weight(vkb(h), &wt, &a1) != VKASR_OK || vk_i8_weight(vkb(h), &wt, &a2) != VKASR_OK || a1 != a2 ||
            be_arena_find(&h->be[TH_DEV]->scratch, a1, 1, &(struct be_arena_block){0})) {
            printf("FAIL [%s]: a model weight's int8 form is not made once (0x%llx, 0x%llx)\n", h->name,
                   (unsigned long long)a1, (unsigned long long)a2);
            h->failures++;
        }
    }
    free(f);
    th_check_guards(h);
}

static float act_ref(float v, int act) {
    switch (act) {
    case ACT_RELU: return v > 0.0f ? v : 0.0f;
    case ACT_SILU: return v / (1.0f + expf(-v));
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case ACT_TANH: return tanhf(v);
    default: return v;
    }
}

static vkasr_status record_linear(struct backend *vk, const void *args, const void *plan) {
    return vk_gemm_record((struct vk_backend *)vk, args, plan);
}

/* One product with weights of type wt and configuration cfg (NULL: the backend's choice, which must be an
 * int8 kernel). */
static void gemm_case(struct th *h, be_dtype wt, const struct th_linear_case *c, const struct vk_gemm_cfg *cfg,
                      bool model, bool exact_div) {
    th_case(h, "int8 linear %s w=%s M=%lld N=%lld K=%lld x=%s y=%s bias=%d res=%d glu=%d act=%d alpha=%g%s",
            cfg ? cfg->name : "auto", be_dtype_name(wt), (long long)c->M, (long long)c->N, (long long)c->K,
            be_dtype_name(c->xt), be_dtype_name(c->yt), c->bias, c->res, c->glu, c->act, c->alpha,
            model ? " (model weight)" : "");
    const int64_t M = c->M, N = c->N, K = c->K, Ny = c->glu ? N / 2 : N;
    struct th_linear l;
    th_linear_setup(h, c, q_input(h, wt, N, K), &l);
    struct th_tensor *x = l.x, *w = l.w, *b = l.b, *r = l.r, *y = l.y;
    struct op_linear *a = l.a;
    a[TH_DEV].w = weight_tensor(h, w, model);
    if (!cfg) {
        struct vk_gemm_plan p = vk_gemm_choose(&vkb(h)->d->caps, M, N, K, wt, false);
        h->checks++;
        if (!p.cfg || (p.cfg->kind != VK_GEMM_I8 && p.cfg->kind != VK_GEMM_I8_EMU)) {
            printf("FAIL [%s]: the choice took %s, not an int8 kernel\n", h->name, p.cfg ? p.cfg->name : "nothing");
            h->failures++;
            return;
        }
    }
    struct vk_gemm_plan plan = {cfg, 1};
    if (!th_run_forced(h, OP_linear, &a[0], &a[1], cfg ? record_linear : NULL, &plan))
        return;
    /* W8A8 against the f32 product of the dequantized weights (the reference backend's output) */
    th_check(h, y, c->yt == BE_F16 ? 2 * TOL_W8A8 : TOL_W8A8);

    /* the exact W8A8 reference on the device's operands (checked against the host's rule first) */
    float *xf = as_floats(c->xt, x->host, M * K), *wf = dequant(w);
    uint8_t *x8 = device_x8(h, x), *w8 = device_w8(h, &a[TH_DEV].w);
    uint8_t *yd = fetch(h, TH_T(y, TH_DEV).addr, be_nbytes(&TH_T(y, TH_DEV)));
    if (!x8 || !w8)
        goto out;
    check_form(h, "x8", xf, M, K, x8, exact_div);
    check_form(h, "w8", wf, N, K, w8, exact_div);
    const float *sx = (const float *)(const void *)(x8 + M * K), *sw = (const float *)(const void *)(w8 + N * K);
    const float *bias = b ? b->host : NULL;
    float *res = r ? as_floats(c->yt, r->host, M * Ny) : NULL;
    const bool exact = !c->glu && (c->act == ACT_NONE || c->act == ACT_RELU);
    h->checks++;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < Ny; j++) {
            float sums[2];
            for (int g = 0; g < (c->glu ? 2 : 1); g++) {
                const int64_t n = j + g * Ny; /* GLU: the value row j and the gate row N/2 + j */
                int32_t acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (int32_t)(int8_t)x8[m * K + k] * (int32_t)(int8_t)w8[n * K + k];
                float v = (float)acc * sx[m];
                v = v * sw[n];
                if (bias)
                    v += bias[n];
                sums[g] = v;
            }
            float v = c->glu ? c->alpha * (sums[0] * (1.0f / (1.0f + expf(-sums[1]))))
                             : c->alpha * act_ref(sums[0], c->act);
            if (res)
                v += res[m * Ny + j];
            float got;
            if (c->yt == BE_F16) {
                uint16_t hd;
                memcpy(&hd, yd + 2 * (m * Ny + j), 2);
                uint16_t hr = float_to_half(v);
                half_to_float_row(&hd, &got, 1);
                half_to_float_row(&hr, &v, 1);
            } else {
                memcpy(&got, yd + 4 * (m * Ny + j), 4);
            }
            const bool ok = exact ? got == v : fabsf(got - v) <= TOL_EXP * fmaxf(1.0f, fabsf(v)) +
                                                                 (c->yt == BE_F16 ? ldexpf(fabsf(v), -10) : 0.0f);
            if (!ok) {
                printf("FAIL [%s]: y[%lld, %lld] = %.9g, W8A8 reference %.9g\n", h->name, (long long)m, (long long)j,
                       got, v);
                h->failures++;
                m = M;
                break;
            }
        }
    free(res);
out:
    free(xf);
    free(wf);
    free(x8);
    free(w8);
    free(yd);
    th_check_guards(h);
}

/* A layernorm's int8 rows (op_layernorm.y8) for y [R, C] of type yt: bit for bit what the int8 path's
 * own pass (quantize_rows.comp) makes of the stored y, and within the host's rule (check_form); y
 * itself unchanged by making them; and a product of a q8_0 w [N, C] reading them (op_linear.x8) bit for
 * bit the product that quantizes y itself. Row 1 is constant with beta 0 (zero_row): a row of zeros. */
static void rows8_case(struct th *h, int64_t R, int64_t C, be_dtype yt, int64_t N, bool zero_row, bool exact) {
    th_case(h, "layernorm's int8 rows: y=%s R=%lld C=%lld N=%lld%s", be_dtype_name(yt), (long long)R, (long long)C,
            (long long)N, zero_row ? ", a zero row" : "");
    struct backend *be = h->be[TH_DEV];
    float *xf = malloc((size_t)(R * C) * sizeof *xf), *beta = malloc((size_t)C * sizeof *beta);
    if (!xf || !beta)
        exit(1);
    for (int64_t i = 0; i < R * C; i++) /* rows far from zero: the statistics' own care (rows.comp) */
        xf[i] = zero_row && i / C == 1 ? 7.0f : 3.0f + 2.0f * th_uniform(h, -1.0f, 1.0f);
    for (int64_t c = 0; c < C; c++)
        beta[c] = zero_row ? 0.0f : th_uniform(h, -0.2f, 0.2f);
    struct th_tensor *x = th_input_data(h, BE_F32, 2, TH_SHAPE(R, C), xf);
    struct th_tensor *b = th_input_data(h, BE_F32, 1, TH_SHAPE(C), beta);
    struct th_tensor *g = th_input(h, BE_F32, 1, TH_SHAPE(C), 0.5f, 1.5f), *w = q_input(h, BE_Q8_0, N, C);
    free(xf);
    free(beta);
    be_tensor y, y2, o, o2;
    uint64_t y8 = 0, q8 = 0;
    const uint64_t bytes8 = be_rows8_bytes(R, C);
    bool ok = be_alloc_tensor(be, BE_POOL_SCRATCH, yt, 2, TH_SHAPE(R, C), &y) == VKASR_OK &&
              be_alloc_tensor(be, BE_POOL_SCRATCH, yt, 2, TH_SHAPE(R, C), &y2) == VKASR_OK &&
              be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, TH_SHAPE(R, N), &o) == VKASR_OK &&
              be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, TH_SHAPE(R, N), &o2) == VKASR_OK &&
              be_alloc(be, BE_POOL_SCRATCH, bytes8, &y8) == VKASR_OK &&
              be_alloc(be, BE_POOL_SCRATCH, bytes8, &q8) == VKASR_OK;
    const struct op_layernorm ln = {.x = TH_T(x, TH_DEV), .gamma = TH_T(g, TH_DEV), .beta = TH_T(b, TH_DEV),
                                    .y = y, .eps = 1e-5f, .y8 = y8};
    struct op_layernorm ln2 = ln;
    ln2.y = y2;
    ln2.y8 = 0;
    const struct op_linear lin = {.x = y, .w = TH_T(w, TH_DEV), .y = o, .act = ACT_NONE, .alpha = 1.0f, .x8 = y8};
    struct op_linear lin2 = lin;
    lin2.y = o2;
    lin2.x8 = 0;
    ok = ok && be_layernorm(be, &ln) == VKASR_OK && be_layernorm(be, &ln2) == VKASR_OK &&
         vk_i8_quantize_rows(vkb(h), &y, q8) == VKASR_OK && be_linear(be, &lin) == VKASR_OK &&
         be_linear(be, &lin2) == VKASR_OK;
    h->checks++;
    if (!ok) {
        printf("FAIL [%s]: %s\n", h->name, be->err.msg);
        h->failures++;
        return;
    }
    const uint64_t ybytes = be_nbytes(&y), obytes = be_nbytes(&o);
    uint8_t *yd = fetch(h, y.addr, ybytes), *y2d = fetch(h, y2.addr, ybytes), *d8 = fetch(h, y8, bytes8);
    uint8_t *dq = fetch(h, q8, bytes8), *od = fetch(h, o.addr, obytes), *o2d = fetch(h, o2.addr, obytes);
    static const char *const what[3] = {"y (with its int8 rows against without)",
                                        "int8 rows (against the product's pass)",
                                        "product (x8 against quantizing y itself)"};
    const uint8_t *got[3] = {yd, d8, od}, *want[3] = {y2d, dq, o2d};
    const uint64_t len[3] = {ybytes, bytes8, obytes};
    for (int i = 0; i < 3; i++) {
        h->checks++;
        uint64_t n = 0, first = 0;
        for (uint64_t k = 0; k < len[i]; k++)
            if (got[i][k] != want[i][k] && n++ == 0)
                first = k;
        if (n) {
            printf("FAIL [%s]: %s differ (%llu of %llu bytes, the first at byte %llu: %u against %u)\n", h->name,
                   what[i], (unsigned long long)n, (unsigned long long)len[i], (unsigned long long)first,
                   got[i][first], want[i][first]);
            h->failures++;
        }
    }
    float *yv = as_floats(yt, yd, R * C);
    check_form(h, "layernorm's int8 rows", yv, R, C, d8, exact);
    h->checks++;
    if (zero_row && (((const float *)(const void *)(d8 + R * C))[1] != 0.0f)) {
        printf("FAIL [%s]: the zero row's scale is not 0\n", h->name);
        h->failures++;
    }
    free(yv);
    free(yd);
    free(y2d);
    free(d8);
    free(dq);
    free(od);
    free(o2d);
    th_check_guards(h);
}

/* The int8 rows' arguments refused: overlapping the layernorm's output, read by a product of f16
 * weights, or given to a backend without int8 rows (the reference). */
static void rows8_refusals(struct th *h) {
    th_case(h, "int8 rows refused");
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(4, 32), -1.0f, 1.0f);
    struct th_tensor *g = th_input(h, BE_F32, 1, TH_SHAPE(32), 0.5f, 1.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(32), 0, 0);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(4, 32)), *w = th_input(h, BE_F16, 2, TH_SHAPE(8, 32), -1, 1);
    struct th_tensor *o = th_output(h, BE_F32, 2, TH_SHAPE(4, 8)), *y8 = th_output(h, BE_I32, 1, TH_SHAPE(33));
    struct {
        const char *what;
        int side;
        bool linear;
        uint64_t rows8;
    } cases[] = {
        {"a layernorm's int8 rows over its output", TH_DEV, false, TH_T(y, TH_DEV).addr + 16},
        {"int8 rows read by a product of f16 weights", TH_DEV, true, TH_T(y8, TH_DEV).addr},
        {"int8 rows on the reference backend", TH_REF, false, TH_T(y8, TH_REF).addr},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int s = cases[i].side;
        struct backend *be = h->be[s];
        const struct op_layernorm ln = {.x = TH_T(x, s), .gamma = TH_T(g, s), .beta = TH_T(b, s), .y = TH_T(y, s),
                                        .eps = 1e-5f, .y8 = cases[i].rows8};
        const struct op_linear lin = {.x = TH_T(y, s), .w = TH_T(w, s), .y = TH_T(o, s), .alpha = 1.0f,
                                      .x8 = cases[i].rows8};
        const vkasr_status st = cases[i].linear ? be_linear(be, &lin) : be_layernorm(be, &ln);
        h->checks++;
        if (st == VKASR_OK) {
            printf("FAIL [%s]: %s was accepted\n", h->name, cases[i].what);
            h->failures++;
        } else {
            printf("  refused, %s: %s\n", cases[i].what, be->err.msg);
        }
    }
}

int main(void) {
    /* quantized products without a forced configuration take the int8 path: the real kernel where the
     * device has int8 cooperative matrices, else the emulated twin */
    setenv("VKASR_INT8", "emu", 0);
    struct th h;
    th_open(&h, true);
    if (!h.vulkan) {
        th_skip(&h, "the int8 path (Vulkan only)");
        return th_close(&h);
    }
    const struct vk_caps *caps = &vkb(&h)->d->caps;
    if (!caps->f16) {
        th_skip(&h, "the int8 path (needs f16)");
        return th_close(&h);
    }
    const bool exact = caps->cpu; /* a CPU driver divides exactly */
    printf("int8 tensor cores %s; the device's NV int8 cooperative-matrix shapes: %s\n",
           caps->coopmat_int8 ? "on" : "off", vkb(&h)->d->int8_shapes);

    quantize_case(&h, 1, 32, BE_F32, exact);
    quantize_case(&h, 37, 96, BE_F32, exact);
    quantize_case(&h, 5, 1024, BE_F16, exact);
    weight_case(&h, BE_Q8_0, 40, 64, false, exact);
    weight_case(&h, BE_Q8_0, 3, 1024, false, exact);
    weight_case(&h, BE_Q8_0, 40, 96, true, exact);
    for (int i = 1; i < 4; i++) { /* the k-quants: blocks of 256 */
        weight_case(&h, WTYPES[i], 40, 256, false, exact);
        weight_case(&h, WTYPES[i], 3, 1024, false, exact);
        weight_case(&h, WTYPES[i], 17, 512, true, exact);
    }

    static const struct th_linear_case cases[] = {
        {1, 16, 32, BE_F32, BE_F32, false, false, false, ACT_NONE, 1.0f, false},
        {37, 200, 96, BE_F32, BE_F32, true, false, false, ACT_NONE, 1.0f, false},
        {130, 136, 160, BE_F16, BE_F32, true, true, false, ACT_RELU, 0.5f, false},
        {70, 132, 64, BE_F32, BE_F16, false, true, false, ACT_NONE, 1.0f, false},
        {33, 50, 96, BE_F16, BE_F16, true, false, false, ACT_NONE, 1.0f, false}, /* N % 4 != 0: element-wise epilogue */
        {64, 96, 64, BE_F32, BE_F32, true, true, true, ACT_NONE, 1.0f, false},   /* GLU */
        {20, 48, 32, BE_F32, BE_F32, true, false, false, ACT_SILU, 1.0f, false},
        {140, 264, 256, BE_F16, BE_F16, true, true, false, ACT_NONE, 1.0f, false},
        {150, 272, 64, BE_F32, BE_F32, true, false, true, ACT_NONE, 1.0f, false}, /* GLU in an interior tile */
    };
    /* the k-quants' (K a multiple of 256): the same kernel on another int8 form */
    static const struct th_linear_case kcases[] = {
        {1, 16, 256, BE_F32, BE_F32, false, false, false, ACT_NONE, 1.0f, false},
        {37, 200, 256, BE_F32, BE_F32, true, false, false, ACT_NONE, 1.0f, false},
        {130, 136, 512, BE_F16, BE_F32, true, true, false, ACT_RELU, 0.5f, false},
        {33, 50, 256, BE_F16, BE_F16, true, false, false, ACT_NONE, 1.0f, false},
        {64, 96, 256, BE_F32, BE_F32, true, true, true, ACT_NONE, 1.0f, false},
    };
    size_t n;
    const struct vk_gemm_cfg *all = vk_gemm_configs(&n);
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        const struct vk_gemm_cfg *cfg = &all[i];
        if ((cfg->kind != VK_GEMM_I8 && cfg->kind != VK_GEMM_I8_EMU) || !vk_gemm_cfg_usable(cfg, caps))
            continue;
        ran++;
        if (cfg->wtype == BE_Q8_0)
            for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
                gemm_case(&h, BE_Q8_0, &cases[k], cfg, k == 1, exact);
        else
            for (size_t k = 0; k < sizeof kcases / sizeof *kcases; k++)
                gemm_case(&h, cfg->wtype, &kcases[k], cfg, k == 1, exact);
    }
    h.checks++;
    if (!ran) {
        printf("FAIL: no int8 GEMM configuration can run here\n");
        h.failures++;
    }
    /* layernorms making the rows their products read (VKASR_INT8_ROWS=0 turns them off) */
    if (h.be[TH_DEV]->int8_rows) {
        rows8_case(&h, 3, 32, BE_F32, 16, true, exact);
        rows8_case(&h, 37, 96, BE_F16, 200, false, exact);
        rows8_case(&h, 130, 1024, BE_F16, 136, true, exact);
        rows8_case(&h, 300, 64, BE_F32, 96, false, exact);
        /* rows wider than 4 x a GPU's 256 invocations: some or all invocations hold several words */
        rows8_case(&h, 24, 1536, BE_F16, 40, false, exact);
        rows8_case(&h, 24, 2048, BE_F32, 40, false, exact);
        rows8_refusals(&h);
    } else {
        th_skip(&h, "layernorms' int8 rows (the backend has none)");
    }
    /* the backend's own choice (VKASR_INT8=emu or a real int8 device; VKASR_INT8=0 turns it off) */
    if (caps->coopmat_int8 || caps->int8_emu) {
        gemm_case(&h, BE_Q8_0, &cases[2], NULL, true, exact);
        gemm_case(&h, BE_Q8_0, &cases[5], NULL, false, exact);
        for (int i = 1; i < 4; i++)
            gemm_case(&h, WTYPES[i], &kcases[2], NULL, true, exact);
    } else {
        th_skip(&h, "the backend's choice of the int8 path (VKASR_INT8=0)");
    }
#ifdef VKASR_HAVE_NV_INT8_COOPMAT_SHADERS
    /* the choice on a device with int8 cooperative matrices (these caps with them turned on): 64x64 tiles
     * for a few rows and up to 1024 x 1024, else 128x128; VKASR_INT8=0's caps keep the f16 tensor cores */
    struct vk_caps nv = *caps;
    nv.cpu = false; /* a GPU (a CPU driver takes gemm_direct.comp for every product) */
    nv.coopmat_nv = nv.coopmat_int8 = true;
    nv.subgroup_size = 32;
    nv.max_shared = 49152;
    nv.max_wg_invocations = 1024;
    static const struct {
        int64_t M, N, K;
        be_dtype wt;
        const char *cfg;
    } picks[] = {{750, 1024, 1024, BE_Q8_0, "q8_0_i8cm64x64_k64"},
                 {40, 4096, 1024, BE_Q8_0, "q8_0_i8cm64x64_k64"},
                 {750, 4096, 1024, BE_Q8_0, "q8_0_i8cm128x128_k128"},
                 {7500, 1024, 4096, BE_Q8_0, "q8_0_i8cm128x128_k128"},
                 {750, 1024, 1024, BE_Q4_K, "q4_k_i8cm64x64_k64"},
                 {7500, 4096, 1024, BE_Q4_K, "q4_k_i8cm128x128_k128"},
                 {7500, 1024, 4096, BE_Q5_K, "q5_k_i8cm128x128_k128"},
                 {40, 640, 256, BE_Q6_K, "q6_k_i8cm64x64_k64"}};
    for (size_t i = 0; i < sizeof picks / sizeof *picks; i++) {
        struct vk_gemm_plan q = vk_gemm_choose(&nv, picks[i].M, picks[i].N, picks[i].K, picks[i].wt, false);
        h.checks++;
        if (!q.cfg || strcmp(q.cfg->name, picks[i].cfg) != 0) {
            printf("FAIL: %lldx%lldx%lld on an int8 device took %s, not %s\n", (long long)picks[i].M,
                   (long long)picks[i].N, (long long)picks[i].K, q.cfg ? q.cfg->name : "nothing", picks[i].cfg);
            h.failures++;
        }
    }
    nv.coopmat_int8 = false;
    nv.int8_emu = false;
    for (int i = 0; i < 4; i++) {
        struct vk_gemm_plan q = vk_gemm_choose(&nv, 7500, 1024, 4096, WTYPES[i], false);
        h.checks++;
        if (!q.cfg || q.cfg->kind != VK_GEMM_COOPMAT) {
            printf("FAIL: without int8 (VKASR_INT8=0) a %s product took %s, not the f16 tensor cores\n",
                   be_dtype_name(WTYPES[i]), q.cfg ? q.cfg->name : "nothing");
            h.failures++;
        }
    }
#endif
    /* the decoder's hinted products keep their kernels */
    for (int i = 0; i < 4; i++) {
        h.checks++;
        struct vk_gemm_plan p = vk_gemm_choose(caps, 4, 640, 768, WTYPES[i], true);
        if (p.cfg && (p.cfg->kind == VK_GEMM_I8 || p.cfg->kind == VK_GEMM_I8_EMU)) {
            printf("FAIL: a hinted %s product took %s\n", be_dtype_name(WTYPES[i]), p.cfg->name);
            h.failures++;
        }
    }
    return th_close(&h);
}
