/* test_ops_quant.c — the linear op with block-quantized weights (Q8_0, Q4_K, Q5_K, Q6_K) on the device
 * under test vs the C reference (which dequantizes w with src/common/qblock.c and computes as for f32
 * weights): the kernel the backend picks and, on Vulkan, every configuration of each type forced; odd
 * shapes, f32 and f16 x and y, bias, activations, the residual and GLU; that the kernel's dequantized
 * weights are the host's bit for bit (an identity x); and that a K the block does not divide is refused.
 * The tensor-core variants (their emulated twins on lavapipe) round w to f16: the f16 products' bound. */
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

static const be_dtype TYPES[] = {BE_Q8_0, BE_Q4_K, BE_Q5_K, BE_Q6_K};
static const uint32_t GGML[] = {QT_Q8_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
static const char *const NAMES[] = {"q8_0", "q4_k", "q5_k", "q6_k"};

struct qcase {
    int64_t M, N, K;
    be_dtype xt, yt;
    bool bias, res, glu;
    int act;
    float alpha;
};

static const char *tn(be_dtype t) { return t == BE_F16 ? "f16" : "f32"; }

/* A quantized w [N, K] made from uniform values in [-1, 1) by the converter's quantizer. */
static struct th_tensor *quant_input(struct th *h, int qi, int64_t N, int64_t K) {
    float *f = malloc((size_t)(N * K) * sizeof *f);
    uint8_t *q = malloc((size_t)(quant_row_bytes(GGML[qi], K) * (uint64_t)N));
    if (!f || !q)
        exit(1);
    for (int64_t i = 0; i < N * K; i++)
        f[i] = th_uniform(h, -1.0f, 1.0f);
    if (quant_rows(GGML[qi], f, false, N, K, q, 1) != 0)
        exit(1);
    struct th_tensor *w = th_input_data(h, TYPES[qi], 2, TH_SHAPE(N, K), q);
    free(f);
    free(q);
    return w;
}

static vkasr_status record_linear(struct backend *vk, const void *args, const void *plan) {
    return vk_gemm_record((struct vk_backend *)vk, args, plan);
}

static void run_case(struct th *h, int qi, const struct qcase *c, const struct vk_gemm_cfg *cfg) {
    th_case(h, "linear %s w=%s M=%lld N=%lld K=%lld x=%s y=%s bias=%d res=%d glu=%d act=%d alpha=%g",
            cfg ? cfg->name : "auto", NAMES[qi], (long long)c->M, (long long)c->N, (long long)c->K, tn(c->xt),
            tn(c->yt), c->bias, c->res, c->glu, c->act, c->alpha);
    const int64_t M = c->M, N = c->N, K = c->K, Ny = c->glu ? N / 2 : N;
    struct th_tensor *x = th_input(h, c->xt, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = quant_input(h, qi, N, K);
    struct th_tensor *b = c->bias ? th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f) : NULL;
    struct th_tensor *r = c->res ? th_input(h, c->yt, 2, TH_SHAPE(M, Ny), -1.0f, 1.0f) : NULL;
    struct th_tensor *y = th_output(h, c->yt, 2, TH_SHAPE(M, Ny));
    struct op_linear a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_linear){.x = TH_T(x, s), .w = TH_T(w, s), .bias = b ? TH_T(b, s) : (be_tensor){0},
                                  .res = r ? TH_T(r, s) : (be_tensor){0}, .y = TH_T(y, s),
                                  .act = c->glu ? ACT_GLU : c->act, .alpha = c->alpha};
    struct vk_gemm_plan plan = {cfg, 1};
    if (!th_run_forced(h, OP_linear, &a[0], &a[1], cfg ? record_linear : NULL, &plan))
        return;
    /* the kernel that ran: the forced one, or (Vulkan) the backend's choice for this shape */
    const struct vk_gemm_cfg *ran = cfg;
    if (!ran && h->vulkan)
        ran = vk_gemm_choose(&((struct vk_device *)h->dev[TH_DEV])->caps, M, N, K, TYPES[qi], false).cfg;
    const bool tc = ran && (ran->kind == VK_GEMM_COOPMAT || ran->kind == VK_GEMM_COOPMAT_EMU);
    th_check(h, y, tc ? TOL_TC : c->yt == BE_F16 ? TOL_Y16 : TOL);
    th_check_guards(h);
}

/* x = the identity [K, K]: y = w dequantized, bit for bit the reference's (one exact product each). */
static void exact_dequant(struct th *h, int qi, int64_t N, int64_t K) {
    th_case(h, "linear %s: identity x gives the host's dequantized w exactly (N=%lld K=%lld)", NAMES[qi],
            (long long)N, (long long)K);
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
        a[s] = (struct op_linear){.x = TH_T(x, s), .w = TH_T(w, s), .y = TH_T(y, s), .alpha = 1.0f};
    if (th_run(h, OP_linear, &a[0], &a[1]))
        th_check(h, y, 0.0);
}

/* A K the block does not divide: the argument rules refuse it, naming the reason. */
static void bad_k(struct th *h, int qi) {
    th_case(h, "linear %s: K not a multiple of the block is refused", NAMES[qi]);
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
        {&h100, 1, 8198, 640, 0, true, "q8_0_32x64"},    /* hinted: scalar tiles */
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
                   (long long)rows[i].N, (long long)rows[i].K, NAMES[rows[i].qi], rows[i].matvec ? " matvec" : "",
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
        const struct qcase cases[] = {
            {.M = 1, .N = 7, .K = k1, .xt = BE_F32, .yt = BE_F32, .alpha = 1.0f},
            {.M = 3, .N = 33, .K = k2, .xt = BE_F32, .yt = BE_F32, .bias = true, .act = ACT_RELU, .alpha = 1.0f},
            {.M = 3, .N = 65, .K = k3, .xt = h16, .yt = BE_F32, .bias = true, .act = ACT_SILU, .alpha = 0.5f},
            {.M = 5, .N = 31, .K = k1, .xt = h16, .yt = h16, .bias = true, .res = true, .alpha = 0.5f},
            {.M = 4, .N = 34, .K = k2, .xt = BE_F32, .yt = BE_F32, .bias = true, .glu = true, .alpha = 1.0f},
            {.M = 1025, .N = 65, .K = k3, .xt = h16, .yt = h16, .bias = true, .res = true, .alpha = 1.0f},
        };
        const size_t nc = sizeof cases / sizeof *cases;
        for (size_t i = 0; i < nc; i++)
            run_case(&h, qi, &cases[i], NULL);
        exact_dequant(&h, qi, 5, k3);
        bad_k(&h, qi);
        if (!h.vulkan) {
            th_skip(&h, "Vulkan GEMM configurations forced, quantized weights");
            continue;
        }
        /* every configuration of this type the device runs, on the small cases (and the big one once) */
        size_t n;
        const struct vk_gemm_cfg *cfgs = vk_gemm_configs(&n);
        for (size_t j = 0; j < n; j++) {
            if (cfgs[j].wtype != TYPES[qi] || !vk_gemm_cfg_usable(&cfgs[j], &((struct vk_device *)h.dev[TH_DEV])->caps))
                continue;
            for (size_t i = 0; i + (tiny ? 1 : 0) < nc; i++)
                run_case(&h, qi, &cases[i], &cfgs[j]);
        }
    }
    return th_close(&h);
}
