/* test_ops_quant.c — the linear op and the LSTM step with block-quantized weights (Q8_0, Q4_K, Q5_K,
 * Q6_K) on the device under test vs the C reference (which dequantizes w with src/common/qblock.c and
 * computes as for f32 weights): the kernel the backend picks (with and without the matvec hint) and, on
 * Vulkan, every configuration of each type forced (the scalar tiles, the matrix-vector kernel); odd
 * shapes, f32 and f16 x and y, bias, activations, the residual and GLU; that the kernels' dequantized
 * weights are the host's bit for bit (an identity x); that a K the block does not divide is refused.
 * The tensor-core variants (their emulated twins on lavapipe) round w to f16: the f16 products' bound;
 * the int8 kernel (W8A8, any block type) has its own (test_ops_int8 checks its arithmetic exactly). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_gemm.h"
#include "common/half.h"
#include "model/quant.h"
#include "op_harness.h"

/* Normalized MSE bounds: the kernels dequantize exactly as the reference, so what remains is f32
 * summation error (TOL) plus, for an f16 y, the output's own rounding (TOL_Y16), as test_ops_linear. */
#define TOL 1e-7
#define TOL_Y16 1e-6
/* Tensor-core kernels round the dequantized w and an f32 x to f16 (ops.h): the f16 products' bound. */
#define TOL_TC 5e-4
/* The int8 kernel (W8A8: w and x rounded to int8 with one scale per row; exact arithmetic
 * against a C reference: test_ops_int8): the W8A8 bound of test_ops_int8. */
#define TOL_I8 3e-4
/* The LSTM step against the double reference on the same dequantized weights: f32 dot products of
 * In + P terms, then sigmoid/tanh (test_ops_decoder_audio's bound). */
#define TOL_LSTM 1e-10

static const be_dtype TYPES[] = {BE_Q8_0, BE_Q4_K, BE_Q5_K, BE_Q6_K};

/* A quantized w [N, K] made from uniform values in [-1, 1) by the converter's quantizer. */
static struct th_tensor *quant_input(struct th *h, int qi, int64_t N, int64_t K) {
    float *f = malloc((size_t)(N * K) * sizeof *f);
    uint8_t *q = malloc((size_t)(quant_row_bytes(be_dtype_ggml(TYPES[qi]), K) * (uint64_t)N));
    if (!f || !q)
        exit(1);
    for (int64_t i = 0; i < N * K; i++)
        f[i] = th_uniform(h, -1.0f, 1.0f);
    if (quant_rows(be_dtype_ggml(TYPES[qi]), f, false, N, K, q, 1) != 0)
        exit(1);
    struct th_tensor *w = th_input_data(h, TYPES[qi], 2, TH_SHAPE(N, K), q);
    free(f);
    free(q);
    return w;
}

static vkasr_status record_linear(struct backend *vk, const void *args, const void *plan) {
    return vk_gemm_record((struct vk_backend *)vk, args, plan);
}

static void run_case(struct th *h, int qi, const struct th_linear_case *c, const struct vk_gemm_cfg *cfg) {
    th_case(h, "linear %s w=%s M=%lld N=%lld K=%lld x=%s y=%s bias=%d res=%d glu=%d act=%d alpha=%g%s",
            cfg ? cfg->name : "auto", be_dtype_name(TYPES[qi]), (long long)c->M, (long long)c->N, (long long)c->K,
            be_dtype_name(c->xt), be_dtype_name(c->yt), c->bias, c->res, c->glu, c->act, c->alpha,
            c->matvec ? " matvec" : "");
    const int64_t M = c->M, N = c->N, K = c->K;
    struct th_linear l;
    th_linear_setup(h, c, quant_input(h, qi, N, K), &l);
    struct vk_gemm_plan plan = {cfg, 1};
    if (!th_run_forced(h, OP_linear, &l.a[0], &l.a[1], cfg ? record_linear : NULL, &plan))
        return;
    /* the kernel that ran: the forced one, or (Vulkan) the backend's choice for this shape */
    const struct vk_gemm_cfg *ran = cfg;
    if (!ran && h->vulkan)
        ran = vk_gemm_choose(&((struct vk_device *)h->dev[TH_DEV])->caps, M, N, K, TYPES[qi], c->matvec).cfg;
    const bool tc = ran && (ran->kind == VK_GEMM_COOPMAT || ran->kind == VK_GEMM_COOPMAT_EMU);
    const bool i8 = ran && (ran->kind == VK_GEMM_I8 || ran->kind == VK_GEMM_I8_EMU);
    th_check(h, l.y, i8 ? TOL_I8 : tc ? TOL_TC : c->yt == BE_F16 ? TOL_Y16 : TOL);
    th_check_guards(h);
}

/* x = the identity [K, K]: y = w dequantized, bit for bit the reference's (one exact product each). */
static void exact_dequant(struct th *h, int qi, int64_t N, int64_t K, bool matvec) {
    th_case(h, "linear %s: identity x gives the host's dequantized w exactly (N=%lld K=%lld%s)",
            be_dtype_name(TYPES[qi]), (long long)N, (long long)K, matvec ? " matvec" : "");
    if (h->vulkan) { /* the int8 kernel rounds w again (its own test checks that form) */
        const struct vk_gemm_cfg *c =
            vk_gemm_choose(&((struct vk_device *)h->dev[TH_DEV])->caps, K, N, K, TYPES[qi], matvec).cfg;
        if (c && (c->kind == VK_GEMM_I8 || c->kind == VK_GEMM_I8_EMU)) {
            th_skip(h, "identity x on the int8 kernel (W8A8 rounds w again: test_ops_int8)");
            return;
        }
    }
    float *eye = calloc((size_t)(K * K), sizeof *eye);
    if (!eye)
        exit(1);
    for (int64_t i = 0; i < K; i++)
        eye[i * K + i] = 1.0f;
    struct th_tensor *x = th_input_data(h, BE_F32, 2, TH_SHAPE(K, K), eye);
    free(eye);
    struct th_tensor *w = quant_input(h, qi, N, K);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(K, N));
    struct op_linear a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_linear){.x = TH_T(x, s), .w = TH_T(w, s), .y = TH_T(y, s), .alpha = 1.0f, .matvec = matvec};
    if (th_run(h, OP_linear, &a[0], &a[1]))
        th_check(h, y, 0.0);
}

/* The matrix-vector kernel's rows do not depend on M (its tile of 8 or 32 rows): rows of a 33-row
 * product, run alone, give the same bits (the batch-identical transcripts rely on it). */
static void gemv_rows_alone(struct th *h, int qi, int64_t K) {
    th_case(h, "linear %s matvec: a row alone gives the 33-row product's bits (K=%lld)", be_dtype_name(TYPES[qi]),
            (long long)K);
    const int64_t M = 33, N = 13;
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = quant_input(h, qi, N, K);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(M, N)), *y1 = th_output(h, BE_F32, 2, TH_SHAPE(1, N));
    struct backend *dv = h->be[TH_DEV];
    const struct op_linear all = {.x = TH_T(x, TH_DEV), .w = TH_T(w, TH_DEV), .y = TH_T(y, TH_DEV), .alpha = 1.0f,
                                  .matvec = true};
    float *ya = malloc((size_t)(M * N) * sizeof *ya), one[13];
    if (!ya)
        exit(1);
    h->checks++;
    if (be_run(dv, OP_linear, &all) || be_sync(dv) || be_download(dv, ya, all.y.addr, (uint64_t)(M * N) * 4)) {
        printf("FAIL [%s]: %s\n", h->name, dv->err.msg);
        h->failures++;
        free(ya);
        return;
    }
    for (int64_t r = 0; r < M; r += 8) {
        const struct op_linear a = {.x = be_tensor_2d(all.x.addr + (uint64_t)(r * K) * 4, BE_F32, 1, K), .w = all.w,
                                    .y = TH_T(y1, TH_DEV), .alpha = 1.0f, .matvec = true};
        if (be_run(dv, OP_linear, &a) || be_sync(dv) || be_download(dv, one, a.y.addr, (uint64_t)N * 4)) {
            printf("FAIL [%s]: row %lld: %s\n", h->name, (long long)r, dv->err.msg);
            h->failures++;
            break;
        }
        if (memcmp(one, ya + r * N, (size_t)N * 4) != 0) {
            printf("FAIL [%s]: row %lld alone differs from the 33-row product's\n", h->name, (long long)r);
            h->failures++;
            break;
        }
    }
    free(ya);
}

/* One LSTM step of B rows (every third row's gate closed: its outputs must not move) with w_ih [4P, In]
 * and w_hh [4P, P] of one block type, against the reference on the same dequantized weights. */
static void lstm_case(struct th *h, int qi, int64_t B, int64_t in, int64_t p) {
    th_case(h, "lstm_step w=%s B=%lld In=%lld P=%lld", be_dtype_name(TYPES[qi]), (long long)B, (long long)in,
            (long long)p);
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(B, in), -1.0f, 1.0f);
    struct th_tensor *hh = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -1.0f, 1.0f);
    struct th_tensor *c = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -2.0f, 2.0f);
    struct th_tensor *wih = quant_input(h, qi, 4 * p, in), *whh = quant_input(h, qi, 4 * p, p);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(4 * p), -0.5f, 0.5f);
    /* outputs start as equal inputs on both sides: a closed row's must stay so */
    struct th_tensor *ho = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -1.0f, 1.0f);
    struct th_tensor *co = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -1.0f, 1.0f);
    int32_t gw[8];
    for (int64_t r = 0; r < B && r < 8; r++)
        gw[r] = r % 3 != 1;
    struct th_tensor *g = th_input_data(h, BE_I32, 1, TH_SHAPE(B), gw);
    struct op_lstm_step a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_lstm_step){.x = TH_T(x, s), .h = TH_T(hh, s), .c = TH_T(c, s), .w_ih = TH_T(wih, s),
                                     .w_hh = TH_T(whh, s), .b = TH_T(b, s), .h_out = TH_T(ho, s),
                                     .c_out = TH_T(co, s), .gate = TH_T(g, s), .gate_stride = 1};
    if (!th_run(h, OP_lstm_step, &a[0], &a[1]))
        return;
    th_check(h, ho, TOL_LSTM);
    th_check(h, co, TOL_LSTM);
    th_check_guards(h);
}

/* The LSTM's argument rules: rows the block does not divide, and w_ih, w_hh of different types. */
static void lstm_refused(struct th *h, int qi) {
    const int64_t blk = be_dtype_block(TYPES[qi]), P = blk, bad_in = blk + 16;
    for (int t = 0; t < 2; t++) {
        th_case(h, "lstm_step %s: %s is refused", be_dtype_name(TYPES[qi]),
                t ? "w_hh of another type" : "In not a block multiple");
        h->checks++;
        const int64_t in = t ? blk : bad_in;
        struct th_tensor *x = th_input(h, BE_F32, 1, TH_SHAPE(in), -1.0f, 1.0f);
        struct th_tensor *st = th_input(h, BE_F32, 1, TH_SHAPE(2 * P), -1.0f, 1.0f);
        /* f32 storage large enough for either type's bytes: the check must come before any read */
        struct th_tensor *wi = th_input(h, BE_F32, 1, TH_SHAPE(4 * P * in), -1.0f, 1.0f);
        struct th_tensor *wh = th_input(h, BE_F32, 1, TH_SHAPE(4 * P * P), -1.0f, 1.0f);
        struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(4 * P), -1.0f, 1.0f);
        struct th_tensor *o = th_output(h, BE_F32, 1, TH_SHAPE(2 * P));
        struct backend *be = h->be[TH_DEV];
        const uint64_t s0 = TH_T(st, TH_DEV).addr, o0 = TH_T(o, TH_DEV).addr;
        struct op_lstm_step a = {
            .x = TH_T(x, TH_DEV), .h = be_tensor_1d(s0, BE_F32, P), .c = be_tensor_1d(s0 + (uint64_t)P * 4, BE_F32, P),
            .w_ih = be_tensor_2d(TH_T(wi, TH_DEV).addr, TYPES[qi], 4 * P, in),
            .w_hh = be_tensor_2d(TH_T(wh, TH_DEV).addr, t ? BE_F32 : TYPES[qi], 4 * P, P),
            .b = TH_T(b, TH_DEV), .h_out = be_tensor_1d(o0, BE_F32, P),
            .c_out = be_tensor_1d(o0 + (uint64_t)P * 4, BE_F32, P)};
        vkasr_status rc = be_run(be, OP_lstm_step, &a);
        const char *want = t ? "w_ih's type" : "block";
        if (rc == VKASR_OK || !strstr(be->err.msg, want)) {
            printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)rc, be->err.msg);
            h->failures++;
        }
        err_clear(&be->err);
    }
}

/* A K the block does not divide: the argument rules refuse it, naming the reason. */
static void bad_k(struct th *h, int qi) {
    th_case(h, "linear %s: K not a multiple of the block is refused", be_dtype_name(TYPES[qi]));
    h->checks++;
    const int64_t K = be_dtype_block(TYPES[qi]) + 16, N = 3;
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(1, K), -1.0f, 1.0f);
    /* storage for the rows' bytes as if K were rounded up: the check must come before any read */
    struct th_tensor *w = th_input(h, BE_F32, 1, TH_SHAPE(N * K), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(1, N));
    struct backend *be = h->be[TH_DEV];
    be_tensor wq = be_tensor_2d(TH_T(w, TH_DEV).addr, TYPES[qi], N, K);
    vkasr_status st = be_linear(be, &(struct op_linear){.x = TH_T(x, TH_DEV), .w = wq, .y = TH_T(y, TH_DEV),
                                                        .alpha = 1.0f});
    if (st == VKASR_OK || !strstr(be->err.msg, "block")) {
        printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, be->err.msg);
        h->failures++;
    }
    err_clear(&be->err);
}

/* The choice for quantized weights on synthetic devices: tensor cores where f16 weights would take them
 * without the hint (any M), else the scalar tiles. */
static void selection_tests(struct th *h) {
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    const struct vk_caps h100 = {.subgroup_size = 32, .max_wg_invocations = 1024, .max_shared = 49152, .f16 = true,
                                 .coopmat_nv = true};
    struct vk_caps gpu = h100;
    gpu.coopmat_nv = false;
    const struct {
        const struct vk_caps *caps;
        int64_t M, N, K;
        int qi;
        bool matvec;
        const char *want;
    } rows[] = {
        {&h100, 7500, 4096, 1024, 0, false, "q8_0_cm128x128_k32"},
        {&h100, 1, 640, 256, 1, false, "q4_k_cm128x128_k32"}, /* rounding independent of M */
        {&h100, 750, 1024, 4096, 2, false, "q5_k_cm128x128_k32"},
        {&h100, 750, 1024, 4096, 3, false, "q6_k_cm128x128_k32"},
        {&h100, 1, 8198, 640, 0, true, "q8_0_gemv"},     /* hinted: the matrix-vector kernel */
        {&h100, 31, 1030, 640, 3, true, "q6_k_gemv"},
        {&h100, 32, 1030, 640, 1, true, "q4_k_gemv32"},   /* a batch's hypotheses */
        {&gpu, 3, 640, 256, 2, true, "q5_k_gemv"},
        {&h100, 7500, 8, 1024, 3, false, "q6_k_64x64"},  /* N < 16 */
        {&gpu, 7500, 4096, 1024, 1, false, "q4_k_128x128"}, /* no tensor cores */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        h->checks++;
        const struct vk_gemm_plan p =
            vk_gemm_choose(rows[i].caps, rows[i].M, rows[i].N, rows[i].K, TYPES[rows[i].qi], rows[i].matvec);
        const char *got = p.cfg ? p.cfg->name : "(none)";
        if (strcmp(got, rows[i].want) != 0 || p.splits != 1) {
            printf("FAIL [choose %lldx%lldx%lld %s%s]: got %s split %u, want %s\n", (long long)rows[i].M,
                   (long long)rows[i].N, (long long)rows[i].K, be_dtype_name(TYPES[rows[i].qi]),
                   rows[i].matvec ? " matvec" : "",
                   got, p.splits, rows[i].want);
            h->failures++;
        }
    }
#else
    th_skip(h, "the tensor-core choice for quantized weights (no NV cooperative-matrix shaders in this build)");
#endif
}

int main(void) {
    struct th h;
    th_open(&h, true);
    const bool f16 = h.dev[TH_DEV]->info.f16;
    const char *mg = getenv("VKASR_MAX_GROUPS");
    const bool tiny = mg && *mg;
    if (h.vulkan)
        selection_tests(&h);
    for (int qi = 0; qi < 4; qi++) {
        const int64_t B = be_dtype_block(TYPES[qi]);
        /* K: one block, two, three (q8_0: 32 times odd numbers) */
        const int64_t k1 = B == 32 ? 96 : 256, k2 = B == 32 ? 224 : 512, k3 = B == 32 ? 800 : 768;
        const be_dtype h16 = f16 ? BE_F16 : BE_F32;
        const struct th_linear_case cases[] = {
            {.M = 1, .N = 7, .K = k1, .xt = BE_F32, .yt = BE_F32, .alpha = 1.0f},
            {.M = 3, .N = 33, .K = k2, .xt = BE_F32, .yt = BE_F32, .bias = true, .act = ACT_RELU, .alpha = 1.0f},
            {.M = 3, .N = 65, .K = k3, .xt = h16, .yt = BE_F32, .bias = true, .act = ACT_SILU, .alpha = 0.5f},
            {.M = 5, .N = 31, .K = k1, .xt = h16, .yt = h16, .bias = true, .res = true, .alpha = 0.5f},
            {.M = 4, .N = 34, .K = k2, .xt = BE_F32, .yt = BE_F32, .bias = true, .glu = true, .alpha = 1.0f},
            {.M = 1025, .N = 65, .K = k3, .xt = h16, .yt = h16, .bias = true, .res = true, .alpha = 1.0f},
            /* the decoder's products (matvec: the matrix-vector kernel): 1, 3, 8 and 32 rows, odd N */
            {.M = 1, .N = 37, .K = k3, .xt = BE_F32, .yt = BE_F32, .bias = true, .alpha = 1.0f, .matvec = true},
            {.M = 3, .N = 9, .K = k1, .xt = BE_F32, .yt = BE_F32, .bias = true, .act = ACT_RELU, .alpha = 1.0f,
             .matvec = true},
            {.M = 8, .N = 19, .K = k2, .xt = h16, .yt = BE_F32, .bias = true, .res = true, .alpha = 0.5f,
             .matvec = true},
            {.M = 32, .N = 41, .K = k3, .xt = BE_F32, .yt = h16, .bias = true, .alpha = 1.0f, .matvec = true},
            {.M = 5, .N = 18, .K = k2, .xt = BE_F32, .yt = BE_F32, .bias = true, .glu = true, .alpha = 1.0f,
             .matvec = true},
        };
        const size_t nc = sizeof cases / sizeof *cases;
        for (size_t i = 0; i < nc; i++)
            run_case(&h, qi, &cases[i], NULL);
        exact_dequant(&h, qi, 5, k3, false);
        exact_dequant(&h, qi, 7, k2, true);
        gemv_rows_alone(&h, qi, k3);
        bad_k(&h, qi);
        /* the LSTM: In != P (a wrong row stride shows), 1 and 3 rows (the second gated off) */
        lstm_case(&h, qi, 1, k2 == 224 ? 96 : 512, B);
        lstm_case(&h, qi, 3, k1, B == 32 ? 64 : 256);
        lstm_refused(&h, qi);
        if (!h.vulkan) {
            th_skip(&h, "Vulkan GEMM configurations forced, quantized weights");
            continue;
        }
        /* every configuration of this type the device runs, on the small cases (and the big one once);
         * under a forced small grid for q8_0 only: the grid-stride tile loop is the same code for every
         * block type (the types differ in how a tile is staged, which the normal grid's run covers) */
        if (tiny && qi > 0)
            continue;
        size_t n;
        const struct vk_gemm_cfg *cfgs = vk_gemm_configs(&n);
        for (size_t j = 0; j < n; j++) {
            if (cfgs[j].wtype != TYPES[qi] || !vk_gemm_cfg_usable(&cfgs[j], &((struct vk_device *)h.dev[TH_DEV])->caps))
                continue;
            if (cfgs[j].kind == VK_GEMM_I8 || cfgs[j].kind == VK_GEMM_I8_EMU)
                continue; /* the int8 tiles: test_ops_int8, against the same reference and exactly */
            for (size_t i = 0; i + (tiny ? 1 : 0) < nc; i++)
                run_case(&h, qi, &cases[i], &cfgs[j]);
        }
    }
    return th_close(&h);
}
