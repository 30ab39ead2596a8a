/* test_ops_linear.c — the linear op (y = res + alpha * act(x w^T + bias), and its GLU epilogue) on the
 * device under test vs the C reference: the kernel the backend picks for each shape (f32 and f16
 * weights, f32 and f16 x and y), then, on Vulkan, every GEMM configuration this device can run, forced, on edge shapes and on
 * integer data whose products and sums are exact in f32 (the results must then be bit-identical
 * whatever the summation order, so any indexing, padding or rounding mistake shows), with and without
 * a split of K; on CUDA (cuBLASLt) the same edge shapes around 64- and 128-wide tiles with its own
 * choice. The Vulkan tensor-core kernel runs here through its emulated variants (same staging,
 * pipelining, tiling and epilogue code); the real one where the device has NV cooperative matrices.
 * Also checks what the kernel choice relies on (a row never depends on M, with the matvec hint or not;
 * on Vulkan, the tensor-core tiles agree bit for bit; on CUDA, a call split into row chunks inside the
 * op), that an f16 y is rounded to nearest even at ties, that the GLU epilogue equals linear then glu
 * bit for bit in f32, and the pure Vulkan kernel-selection function on synthetic devices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_gemm.h"
#include "common/half.h"
#include "op_harness.h"

/* Tolerances (normalized MSE vs the double reference). Both paths accumulate in f32 and the f16
 * path's reference rounds x to f16 exactly as the kernels do, so both sit at f32 summation error
 * (largest measured on lavapipe: 1.3e-12 for either weight type, K = 4096; printed at the end).
 * A missing f16 rounding of x would give only ~4e-8 on random data: the exact test below and the
 * integer cases catch that instead. An f16 y adds the output's own rounding, where the kernel's f32
 * sum and the reference's double one may round to neighbouring halves (one half-ulp, 2^-11 relative,
 * on rare elements); a missing rounding would show as the absence of any difference only, which the
 * integer cases cannot see either, so the bound is loose and the exactness of f16 stores comes from
 * the integer cases (exact in f16). */
#define TOL_F32 1e-7
#define TOL_F16 1e-7
#define TOL_Y16 1e-6

static double worst_nmse[3]; /* f32 weights, f16 weights, f16 y: largest measured, for the report */

struct lin_case {
    int64_t M, N, K;
    bool bias, res, res_alias;
    int act;
    float alpha;
    be_dtype wt;
    bool integer;        /* small-integer data, bit-exact check                                     */
    bool misalign;       /* x and w start 4 (resp. 2) bytes into their allocation: no vector loads   */
    bool f16_only;       /* run with f16 weights only (keeps the reference's time down)               */
    bool matvec;         /* the op's matvec hint (automatic choice: gemv.comp at any M on GPUs)       */
    be_dtype xt, yt;     /* types of x and of y (and res)                                            */
    uint32_t splits;     /* forced plans: slices of K (0 or 1: none)                                 */
    bool glu;            /* act = ACT_GLU: y (and res) [M, N/2]                                       */
    bool x_f32;          /* op_linear.x_f32: f16 weights in an f32 session (host backends)            */
};

static const char *tn(be_dtype t) { return t == BE_F16 ? "f16" : "f32"; }

static double nmse_of(struct th *h, struct th_tensor *y) {
    uint64_t n = be_numel(&TH_T(y, TH_REF));
    const bool f16 = y->type == BE_F16;
    void *vk = malloc(n ? n * 4 : 4);
    if (!vk)
        exit(1);
    if (be_download(h->be[TH_DEV], vk, TH_T(y, TH_DEV).addr, n * (f16 ? 2 : 4)))
        exit(1);
    double se = 0, sr = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* th_check left the reference output in y->host */
        double r = f16 ? half_to_float(((uint16_t *)y->host)[i]) : ((float *)y->host)[i];
        double v = f16 ? half_to_float(((uint16_t *)vk)[i]) : ((float *)vk)[i];
        if (!isfinite(r) || !isfinite(v))
            continue;
        se += (v - r) * (v - r);
        sr += r * r;
    }
    free(vk);
    return sr > 0 ? se / sr : se;
}

static struct th_tensor *int_input(struct th *h, be_dtype type, int nd, const int64_t *ne, int lo, int hi) {
    uint64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= (uint64_t)ne[d];
    void *buf = malloc(n ? n * 4 : 4);
    if (!buf)
        exit(1);
    for (uint64_t i = 0; i < n; i++) {
        float v = (float)(lo + (int)(th_rand(h) % (uint64_t)(hi - lo + 1)));
        if (type == BE_F16)
            ((uint16_t *)buf)[i] = float_to_half(v);
        else
            ((float *)buf)[i] = v;
    }
    struct th_tensor *t = th_input_data(h, type, nd, ne, buf);
    free(buf);
    return t;
}

/* Input of shape ne that starts `off` elements into a larger allocation (both sides). */
static be_tensor view_at(struct th_tensor *t, int s, be_dtype type, int64_t r, int64_t c, uint64_t off) {
    return be_tensor_2d(TH_T(t, s).addr + off * be_dtype_size(type), type, r, c);
}

static vkasr_status record_linear(struct backend *vk, const void *args, const void *plan) {
    return vk_gemm_record((struct vk_backend *)vk, args, plan);
}

/* Runs one case with the automatic kernel choice (cfg NULL) or a forced configuration. */
static void lin_run(struct th *h, const struct lin_case *c, const struct vk_gemm_cfg *cfg) {
    const int act = c->glu ? ACT_GLU : c->act;
    th_case(h, "linear %s split=%u M=%lld N=%lld K=%lld x=%s w=%s y=%s bias=%d res=%d%s act=%d alpha=%g%s%s%s%s",
            cfg ? cfg->name : "auto", c->splits ? c->splits : 1, (long long)c->M, (long long)c->N, (long long)c->K,
            tn(c->xt), tn(c->wt), tn(c->yt), c->bias, c->res, c->res_alias ? "(=y)" : "", act, c->alpha,
            c->integer ? " integer" : "", c->misalign ? " misaligned" : "", c->matvec ? " matvec" : "",
            c->x_f32 ? " x_f32" : "");
    int64_t M = c->M, N = c->N, K = c->K, Ny = c->glu ? N / 2 : N;
    struct th_tensor *x, *w, *b = NULL, *r = NULL, *y;
    uint64_t pad = c->misalign ? 1 : 0;
    /* w's allocation holds an even number of f16 elements: the harness's trailing guard check assumes
     * a 4-byte multiple (an odd f16 count shifts its sentinel pattern by 2 bytes). */
    int64_t nw = N * K + (int64_t)pad, nx = M * K + (int64_t)pad;
    nw += c->wt == BE_F16 ? nw % 2 : 0;
    nx += c->xt == BE_F16 ? nx % 2 : 0;
    if (c->integer) {
        x = int_input(h, c->xt, 1, TH_SHAPE(nx), -4, 4);
        w = int_input(h, c->wt, 1, TH_SHAPE(nw), -4, 4);
        if (c->bias)
            b = int_input(h, BE_F32, 1, TH_SHAPE(N), -64, 64);
    } else {
        x = th_input(h, c->xt, 1, TH_SHAPE(nx), -1.0f, 1.0f);
        w = th_input(h, c->wt, 1, TH_SHAPE(nw), -1.0f, 1.0f);
        if (c->bias)
            b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
    }
    if (c->res_alias) {
        /* y starts as the residual: an input tensor that is also the output. */
        y = c->integer ? int_input(h, c->yt, 2, TH_SHAPE(M, Ny), -100, 100)
                       : th_input(h, c->yt, 2, TH_SHAPE(M, Ny), -1.0f, 1.0f);
    } else {
        if (c->res)
            r = c->integer ? int_input(h, c->yt, 2, TH_SHAPE(M, Ny), -100, 100)
                           : th_input(h, c->yt, 2, TH_SHAPE(M, Ny), -1.0f, 1.0f);
        y = th_output(h, c->yt, 2, TH_SHAPE(M, Ny));
    }
    struct op_linear a[2];
    for (int s = 0; s < 2; s++) {
        a[s] = (struct op_linear){
            .x = view_at(x, s, c->xt, M, K, pad),
            .w = view_at(w, s, c->wt, N, K, pad),
            .bias = b ? TH_T(b, s) : (be_tensor){0},
            .res = c->res_alias ? TH_T(y, s) : r ? TH_T(r, s) : (be_tensor){0},
            .y = TH_T(y, s),
            .act = act,
            .alpha = c->alpha,
            .matvec = c->matvec,
            .x_f32 = c->x_f32,
        };
    }
    struct vk_gemm_plan plan = {cfg, c->splits ? c->splits : 1};
    bool ran = th_run_forced(h, OP_linear, &a[0], &a[1], cfg ? record_linear : NULL, &plan);
    if (!ran)
        return;
    /* f16 w with an unrounded f32 x (x_f32) is an f32 product of the widened weights */
    int kind = c->yt == BE_F16 ? 2 : c->wt == BE_F16 && !(c->x_f32 && c->xt == BE_F32) ? 1 : 0;
    const double tol[3] = {TOL_F32, TOL_F16, TOL_Y16};
    /* integer data is exact in every sum and product, but not through GLU's sigmoid */
    const bool exact = c->integer && !c->glu;
    if (th_check(h, y, exact ? 0.0 : tol[kind])) {
        double e = nmse_of(h, y);
        if (!exact && e > worst_nmse[kind])
            worst_nmse[kind] = e;
    }
    th_check_guards(h);
}

/* ---- a row's result does not depend on M ---------------------------------------------------------- */

/* y[0, m) = silu(x[r0, r0+m) w^T + b) on the Vulkan backend (plan NULL: the automatic choice, no
 * hint; else that plan, forced), downloaded. */
static bool lin_rows(struct th *h, struct th_tensor *x, struct th_tensor *w, struct th_tensor *b, struct th_tensor *y,
                     int64_t r0, int64_t m, const struct vk_gemm_plan *plan, bool matvec, float *out) {
    struct backend *vk = h->be[TH_DEV];
    struct op_linear a = {.x = be_tensor_rows(&TH_T(x, TH_DEV), r0, m), .w = TH_T(w, TH_DEV), .bias = TH_T(b, TH_DEV),
                          .y = be_tensor_rows(&TH_T(y, TH_DEV), 0, m), .act = ACT_SILU, .alpha = 1.0f,
                          .matvec = matvec};
    vkasr_status st = plan ? op_validate(OP_linear, &a, &vk->err) : be_linear(vk, &a);
    if (st == VKASR_OK && plan)
        st = vk_gemm_record((struct vk_backend *)vk, &a, plan);
    if (st || be_download(vk, out, a.y.addr, (uint64_t)(m * a.y.ne[1]) * sizeof(float))) {
        printf("FAIL [%s]: rows %lld+%lld: %s\n", h->name, (long long)r0, (long long)m, vk->err.msg);
        h->checks++;
        h->failures++;
        return false;
    }
    return true;
}

/* Rows of a 300-row product `full` against calls on fewer rows (starting at row 0 and at row 37, or
 * only at 37 when `few`), bit for bit. */
static void rows_match(struct th *h, struct th_tensor *x, struct th_tensor *w, struct th_tensor *b, struct th_tensor *y,
                       int64_t M, int64_t N, const struct vk_gemm_plan *plan, bool matvec, const float *full,
                       bool few) {
    float *part = malloc((size_t)(M * N) * sizeof *part);
    if (!part)
        exit(1);
    const int64_t starts[] = {37, 0}, rows[] = {1, 2, 3, 7, 8, 9, 16, 33, 64, 65, 200};
    for (size_t i = 0; i < (few ? 1u : 2u); i++)
        for (size_t j = 0; j < sizeof rows / sizeof *rows; j++) {
            const int64_t r0 = starts[i], m = rows[j];
            if (few && m != 1 && m != 9 && m != 33)
                continue;
            if (r0 + m > M || !lin_rows(h, x, w, b, y, r0, m, plan, matvec, part))
                continue;
            h->checks++;
            if (memcmp(full + r0 * N, part, (size_t)(m * N) * sizeof(float)) != 0) {
                printf("FAIL [%s]: rows %lld..%lld computed in a %lld-row call differ from the same rows of the "
                       "%lld-row product%s%s split %u\n",
                       h->name, (long long)r0, (long long)(r0 + m - 1), (long long)m, (long long)M, plan ? ": " : "",
                       plan ? plan->cfg->name : "", plan ? plan->splits : 1);
                h->failures++;
            }
        }
    free(part);
}

/* Without the matvec hint the automatic choice may differ by M, but a row must come out bit-identical
 * whether the call has 1 row or 300, and wherever it sits in the call (halo tiles of the subsampling
 * rely on it: a tile starts anywhere and the last one may be a few rows). With the hint likewise, through
 * the automatic choice (the CUDA backend's matrix-vector kernel: 8-row tiles below 32 rows, 32 from). */
static void row_invariance(struct th *h, be_dtype wt, bool matvec) {
    const int64_t M = 300, N = 200, K = 136;
    th_case(h, "linear row invariance w=%s%s", wt == BE_F16 ? "f16" : "f32", matvec ? " matvec" : "");
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = th_input(h, wt, 2, TH_SHAPE(N, K), -1.0f, 1.0f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(M, N));
    float *full = malloc((size_t)(M * N) * sizeof *full);
    if (!full)
        exit(1);
    if (lin_rows(h, x, w, b, y, 0, M, NULL, matvec, full))
        rows_match(h, x, w, b, y, M, N, NULL, matvec, full, false);
    free(full);
}

/* The matvec hint's kernel (gemv.comp, which GPUs run for hinted products of any M: a batch of
 * decoder hypotheses) keeps a row's result independent of M too, bit for bit, and of its tile: the 300
 * rows in 32-row tiles against calls on fewer rows in 8-row tiles (gemv, what one hypothesis gets), in
 * 32-row tiles and in groups of 4 columns (gemvw, what a batch of hypotheses gets), with vector loads
 * (K 136) and without (K 135). */
static void hinted_row_invariance(struct th *h, be_dtype wt, int64_t K) {
    const int64_t M = 300, N = 200;
    const struct vk_caps *caps = &((struct vk_backend *)h->be[TH_DEV])->d->caps;
    const struct vk_gemm_cfg *c8 = vk_gemm_find(wt == BE_F16 ? "f16_gemv" : "f32_gemv");
    const struct vk_gemm_cfg *c32 = vk_gemm_find(wt == BE_F16 ? "f16_gemv32" : "f32_gemv32");
    const struct vk_gemm_cfg *cw = vk_gemm_find(wt == BE_F16 ? "f16_gemvw" : "f32_gemvw");
    if (!c8 || !c32 || !cw || !vk_gemm_cfg_usable(c8, caps) || !vk_gemm_cfg_usable(c32, caps) ||
        !vk_gemm_cfg_usable(cw, caps)) {
        th_skip(h, "gemv.comp row invariance (not usable on this device)");
        return;
    }
    th_case(h, "linear row invariance, hinted (gemv: 8- and 32-row tiles, 4-column groups) w=%s K=%lld",
            wt == BE_F16 ? "f16" : "f32", (long long)K);
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = th_input(h, wt, 2, TH_SHAPE(N, K), -1.0f, 1.0f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(M, N));
    const struct vk_gemm_plan p8 = {c8, 1}, p32 = {c32, 1}, pw = {cw, 1};
    float *full = malloc((size_t)(M * N) * sizeof *full);
    if (!full)
        exit(1);
    if (lin_rows(h, x, w, b, y, 0, M, &p32, false, full)) {
        rows_match(h, x, w, b, y, M, N, &p8, false, full, false);
        rows_match(h, x, w, b, y, M, N, &p32, false, full, true);
        rows_match(h, x, w, b, y, M, N, &pw, false, full, true);
    }
    free(full);
}

/* The CUDA backend runs a call whose temporaries exceed its op scratch (CU_OP_SCRATCH_BYTES, 32 MiB) in
 * row chunks inside the op: here x rounded to f16 takes 8300 x 2048 halves (34 MB), so the call splits
 * at row 8188. The whole call matches the reference, and the rows on both sides of the split equal the
 * same rows computed by a call of their own, bit for bit. */
static void long_call_rows(struct th *h) {
    const int64_t M = 8300, N = 8, K = 2048, r0 = 8176, m = 24;
    th_case(h, "linear in row chunks inside one call, M=%lld N=%lld K=%lld w=f16", (long long)M, (long long)N,
            (long long)K);
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = th_input(h, BE_F16, 2, TH_SHAPE(N, K), -1.0f, 1.0f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(M, N));
    struct op_linear a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_linear){.x = TH_T(x, s), .w = TH_T(w, s), .bias = TH_T(b, s), .y = TH_T(y, s),
                                  .act = ACT_SILU, .alpha = 1.0f};
    if (!th_run(h, OP_linear, &a[0], &a[1]))
        return;
    th_check(h, y, TOL_F16);
    float *full = malloc((size_t)(M * N) * sizeof *full), *part = malloc((size_t)(m * N) * sizeof *part);
    if (!full || !part)
        exit(1);
    if (be_download(h->be[TH_DEV], full, TH_T(y, TH_DEV).addr, (uint64_t)(M * N) * sizeof *full) == VKASR_OK &&
        lin_rows(h, x, w, b, y, r0, m, NULL, false, part)) {
        h->checks++;
        if (memcmp(full + r0 * N, part, (size_t)(m * N) * sizeof *part) != 0) {
            printf("FAIL [%s]: rows %lld..%lld of a %lld-row call differ from a call of their own\n", h->name,
                   (long long)r0, (long long)(r0 + m - 1), (long long)M);
            h->failures++;
        } else {
            printf("ok   %s: rows %lld..%lld equal a call of their own\n", h->name, (long long)r0,
                   (long long)(r0 + m - 1));
        }
    }
    free(full);
    free(part);
}

/* What the tensor-core choice table relies on: every tile configuration computes a row bit-identically
 * (each accumulator takes the same 16x16x16 products in k order whatever the tile, the number of
 * subgroups, K step or shared stages), wherever the row sits and whatever the call's M; and with a
 * fixed split of K (chosen by N and K only), rows still do not depend on M. On every tensor-core
 * configuration this device can run: the emulated ones (any f16 device), the real ones on an NVIDIA
 * GPU (compared among themselves: hardware and emulated products round differently). N = 200: the
 * element-wise epilogue; N = 208: the 4-column one. */
static void coopmat_agreement(struct th *h, int64_t N) {
    const int64_t M = 300, K = 136;
    th_case(h, "linear tensor-core tiles agree, N=%lld", (long long)N);
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = th_input(h, BE_F16, 2, TH_SHAPE(N, K), -1.0f, 1.0f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(M, N));
    float *first[2] = {NULL, NULL}, *full = malloc((size_t)(M * N) * sizeof *full);
    const char *first_name[2] = {NULL, NULL};
    if (!full)
        exit(1);
    size_t ncfg;
    const struct vk_gemm_cfg *cfgs = vk_gemm_configs(&ncfg);
    const struct vk_caps *caps = &((struct vk_device *)h->dev[TH_DEV])->caps;
    for (size_t i = 0; i < ncfg; i++) {
        const struct vk_gemm_cfg *c = &cfgs[i];
        const int emu = c->kind == VK_GEMM_COOPMAT_EMU;
        if ((c->kind != VK_GEMM_COOPMAT && !emu) || c->wtype != BE_F16 || !vk_gemm_cfg_usable(c, caps))
            continue;
        for (uint32_t splits = 1; splits <= 3; splits += 2) {
            const struct vk_gemm_plan plan = {c, splits};
            if (!lin_rows(h, x, w, b, y, 0, M, &plan, false, full))
                continue;
            rows_match(h, x, w, b, y, M, N, &plan, false, full, true);
            if (splits == 1 && !first[emu]) {
                first[emu] = full;
                first_name[emu] = c->name;
                if (!(full = malloc((size_t)(M * N) * sizeof *full)))
                    exit(1);
            } else if (splits == 1) {
                h->checks++;
                if (memcmp(first[emu], full, (size_t)(M * N) * sizeof(float)) != 0) {
                    printf("FAIL [%s]: %s differs from %s\n", h->name, c->name, first_name[emu]);
                    h->failures++;
                }
            }
        }
    }
    free(first[0]);
    free(first[1]);
    free(full);
}

/* gemm_direct.comp and the scalar tiles compute each output as the same FMA chain: bit-identical
 * results (so a CPU driver may use one and a GPU the other, and the choice never changes a row).
 * Shapes with and without vector loads, with a partial last tile. */
static void direct_matches_scalar(struct th *h, be_dtype wt) {
    const char *names[2][4] = {{"f32_direct", "f32_direct_mv", "f32_64x64", "f32_32x32"},
                               {"f16_direct", "f16_direct_mv", "f16_64x64", "f16_32x32"}};
    const int64_t shapes[][3] = {{70, 130, 64}, {33, 17, 77}, {5, 300, 200}};
    const struct vk_caps *caps = &((struct vk_device *)h->dev[TH_DEV])->caps;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        th_case(h, "linear direct vs scalar M=%lld N=%lld K=%lld w=%s", (long long)M, (long long)N, (long long)K,
                wt == BE_F16 ? "f16" : "f32");
        struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
        struct th_tensor *w = th_input(h, wt, 2, TH_SHAPE(N, K), -1.0f, 1.0f);
        struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
        struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(M, N));
        float *out[4];
        for (int k = 0; k < 4; k++)
            if (!(out[k] = malloc((size_t)(M * N) * sizeof(float))))
                exit(1);
        int ran = 0;
        for (int k = 0; k < 4; k++) {
            const struct vk_gemm_cfg *cfg = vk_gemm_find(names[wt == BE_F16][k]);
            if (!cfg || !vk_gemm_cfg_usable(cfg, caps))
                continue;
            struct op_linear a = {.x = TH_T(x, TH_DEV), .w = TH_T(w, TH_DEV), .bias = TH_T(b, TH_DEV), .y = TH_T(y, TH_DEV),
                                  .act = ACT_TANH, .alpha = 1.0f};
            h->checks++;
            const struct vk_gemm_plan plan = {cfg, 1};
            if (vk_gemm_record((struct vk_backend *)h->be[TH_DEV], &a, &plan) ||
                be_download(h->be[TH_DEV], out[ran], a.y.addr, (uint64_t)(M * N) * sizeof(float))) {
                printf("FAIL [%s]: %s: %s\n", h->name, cfg->name, h->be[TH_DEV]->err.msg);
                h->failures++;
                continue;
            }
            if (ran > 0 && memcmp(out[0], out[ran], (size_t)(M * N) * sizeof(float)) != 0) {
                printf("FAIL [%s]: %s differs from %s\n", h->name, cfg->name, names[wt == BE_F16][0]);
                h->failures++;
            }
            ran++;
        }
        for (int k = 0; k < 4; k++)
            free(out[k]);
    }
}

/* Whether the forced f16-activation cases run on a configuration. The type-dependent code (loads,
 * conversion while staging, the epilogue's stores) is one per kernel and does not depend on the tile,
 * while every type combination of a configuration is a pipeline that costs lavapipe seconds to
 * compile. So they run on every configuration of the kernels lavapipe and GPUs use for the network's
 * products (gemm_direct.comp, gemv.comp, real tensor cores), and on representatives of the others:
 * two scalar tiles (one per weight type), and three emulated tensor-core tiles (two K stages with
 * BK 32, one stage with BK 64, 2 subgroups). */
static bool types_tested(const struct vk_gemm_cfg *c) {
    static const char *const reps[] = {"f32_32x32", "f16_64x64", "emu64x64_k32", "emu128x128_k64", "emu32x64_k64"};
    if (c->kind != VK_GEMM_COOPMAT_EMU && c->kind != VK_GEMM_SCALAR)
        return true;
    for (size_t i = 0; i < sizeof reps / sizeof *reps; i++)
        if (!strcmp(c->name, reps[i]))
            return true;
    return false;
}

/* ---- an f16 y is rounded once, to nearest even ------------------------------------------------------- */

/* y = 0 * 0 + bias into an f16 y, with biases on and next to the f16 rounding boundaries: ties (to even:
 * down from an even half, up from an odd one), one f32 step either side of a tie, subnormal ties, the
 * largest finite half and the overflow threshold, negatives. Random data cannot tell rounding to
 * nearest even from other roundings (ties away from zero, toward zero); these must come out exactly
 * as the reference rounds them, with the backend's choice and (Vulkan) every configuration that writes
 * f16 y (element-wise and 4-column epilogues: N = 64 and 63). */
static void f16_y_rounding(struct th *h, be_dtype wt) {
    static const float ulp = 1.0f / 1048576.0f; /* 2^-20: one f32 step at 1 is 2^-23, well inside */
    float b[64];
    int n = 0;
    const float base[] = {1.0f, 1.0f + 1.0f / 1024.0f, 1024.0f, 0.0009765625f /* 2^-10 */};
    for (int i = 0; i < 4; i++) {
        const float step = base[i] * (1.0f / 1024.0f); /* the f16 spacing at base[i] */
        const float tie = base[i] + step / 2;
        b[n++] = tie;                   /* ties: to even */
        b[n++] = tie + step;
        b[n++] = tie + base[i] * ulp;   /* just above: up */
        b[n++] = tie - base[i] * ulp;   /* just below: down */
        b[n++] = -tie;
        b[n++] = -(tie + step);
    }
    b[n++] = 2.98023223876953125e-08f;  /* 2^-25: the tie between 0 and the smallest subnormal -> 0 */
    b[n++] = 8.94069671630859375e-08f;  /* 3 * 2^-25 -> 2^-23 (even) */
    b[n++] = -2.98023223876953125e-08f; /* -> -0 */
    b[n++] = 65504.0f;                  /* the largest half */
    b[n++] = 65519.99609375f;           /* just below the overflow threshold: 65504 */
    b[n++] = 65520.0f;                  /* the threshold (a tie): infinity */
    b[n++] = -65520.0f;
    b[n++] = 0.0f;
    for (; n < 64; n++) /* the rest: k (1 + 2^-11), a tie where k is a power of two */
        b[n] = (float)(n - 40) * (1.0f + 1.0f / 2048.0f);
    size_t ncfg = 0;
    const struct vk_gemm_cfg *cfgs = h->vulkan ? vk_gemm_configs(&ncfg) : NULL;
    const struct vk_caps *caps = h->vulkan ? &((struct vk_device *)h->dev[TH_DEV])->caps : NULL;
    for (int N = 64; N >= 63; N--)
        for (size_t i = 0; i <= ncfg; i++) {
            const struct vk_gemm_cfg *cfg = i < ncfg ? &cfgs[i] : NULL;
            if (cfg && (cfg->wtype != wt || !vk_gemm_cfg_usable(cfg, caps) || !types_tested(cfg)))
                continue;
            th_case(h, "linear f16 y rounds to nearest even, N=%d w=%s, %s", N, tn(wt), cfg ? cfg->name : "auto");
            struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(3, 4), 0.0f, 0.0f);
            struct th_tensor *w = th_input(h, wt, 2, TH_SHAPE(N, 4), 0.0f, 0.0f);
            struct th_tensor *bt = th_input_data(h, BE_F32, 1, TH_SHAPE(N), b);
            struct th_tensor *y = th_output(h, BE_F16, 2, TH_SHAPE(3, N));
            struct op_linear a[2];
            for (int s = 0; s < 2; s++)
                a[s] = (struct op_linear){.x = TH_T(x, s), .w = TH_T(w, s), .bias = TH_T(bt, s), .y = TH_T(y, s),
                                          .alpha = 1.0f};
            const struct vk_gemm_plan plan = {cfg, 1};
            if (th_run_forced(h, OP_linear, &a[0], &a[1], cfg ? record_linear : NULL, &plan))
                th_check(h, y, 0.0);
        }
}

/* ---- GLU in the epilogue --------------------------------------------------------------------------- */

/* linear with ACT_GLU must compute, in f32, exactly what linear (no activation) followed by op_glu
 * computes (ops.h; the network relies on it to keep f32 results as they were): both on the device under
 * test, compared bit for bit, with the automatic choice and (Vulkan) every configuration of the weight
 * type this device can run, tensor cores with and without a split of K. */
static void glu_matches_unfused(struct th *h, be_dtype wt, bool tiny) {
    const int64_t M = 70, N = 2 * 132, K = 136;
    th_case(h, "linear GLU epilogue = linear then glu, bit for bit, w=%s", tn(wt));
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(M, K), -1.0f, 1.0f);
    struct th_tensor *w = th_input(h, wt, 2, TH_SHAPE(N, K), -1.0f, 1.0f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(N), -1.0f, 1.0f);
    struct th_tensor *u = th_output(h, BE_F32, 2, TH_SHAPE(M, N));
    struct th_tensor *g1 = th_output(h, BE_F32, 2, TH_SHAPE(M, N / 2)), *g2 = th_output(h, BE_F32, 2, TH_SHAPE(M, N / 2));
    size_t ncfg = 0;
    const struct vk_gemm_cfg *cfgs = h->vulkan ? vk_gemm_configs(&ncfg) : NULL;
    const struct vk_caps *caps = h->vulkan ? &((struct vk_device *)h->dev[TH_DEV])->caps : NULL;
    float *out[2];
    for (int k = 0; k < 2; k++)
        if (!(out[k] = malloc((size_t)(M * N / 2) * sizeof(float))))
            exit(1);
    struct backend *be = h->be[TH_DEV];
    for (size_t i = 0; i <= ncfg; i++) { /* i == ncfg: the automatic choice */
        const struct vk_gemm_cfg *cfg = i < ncfg ? &cfgs[i] : NULL;
        /* the epilogue's code is one per kernel: the representatives of types_tested suffice */
        if (cfg && (cfg->wtype != wt || !vk_gemm_cfg_usable(cfg, caps) || !types_tested(cfg) ||
                    (tiny && cfg->kind == VK_GEMM_COOPMAT_EMU)))
            continue;
        const bool cm = cfg && (cfg->kind == VK_GEMM_COOPMAT || cfg->kind == VK_GEMM_COOPMAT_EMU);
        for (uint32_t splits = 1; splits <= (cm ? 3u : 1u); splits += 2) {
            const struct vk_gemm_plan plan = {cfg, splits};
            struct op_linear lin = {.x = TH_T(x, TH_DEV), .w = TH_T(w, TH_DEV), .bias = TH_T(b, TH_DEV),
                                    .y = TH_T(u, TH_DEV), .act = ACT_NONE, .alpha = 1.0f};
            struct op_linear fused = lin;
            fused.y = TH_T(g2, TH_DEV);
            fused.act = ACT_GLU;
            struct op_glu glu = {.x = TH_T(u, TH_DEV), .y = TH_T(g1, TH_DEV)};
            vkasr_status st = cfg ? op_validate(OP_linear, &lin, &be->err) : be_linear(be, &lin);
            if (st == VKASR_OK && cfg)
                st = vk_gemm_record((struct vk_backend *)be, &lin, &plan);
            if (st == VKASR_OK)
                st = be_glu(be, &glu);
            if (st == VKASR_OK)
                st = cfg ? op_validate(OP_linear, &fused, &be->err) : be_linear(be, &fused);
            if (st == VKASR_OK && cfg)
                st = vk_gemm_record((struct vk_backend *)be, &fused, &plan);
            if (st == VKASR_OK)
                st = be_download(be, out[0], fused.y.addr, (uint64_t)(M * N / 2) * sizeof(float));
            if (st == VKASR_OK)
                st = be_download(be, out[1], glu.y.addr, (uint64_t)(M * N / 2) * sizeof(float));
            h->checks++;
            if (st != VKASR_OK) {
                printf("FAIL [%s]: %s split %u: %s\n", h->name, cfg ? cfg->name : "auto", splits, be->err.msg);
                h->failures++;
            } else if (memcmp(out[0], out[1], (size_t)(M * N / 2) * sizeof(float)) != 0) {
                printf("FAIL [%s]: %s split %u: the GLU epilogue differs from linear then glu\n", h->name,
                       cfg ? cfg->name : "auto", splits);
                h->failures++;
            }
        }
    }
    free(out[0]);
    free(out[1]);
    th_check_guards(h);
}

/* ---- kernel selection on synthetic devices ------------------------------------------------------- */

static void expect_choice(struct th *h, const char *dev, const struct vk_caps *caps, int64_t M, int64_t N, int64_t K,
                          be_dtype wt, bool matvec, const char *want, uint32_t want_splits) {
    h->checks++;
    const struct vk_gemm_plan p = vk_gemm_choose(caps, M, N, K, wt, matvec);
    const char *got = p.cfg ? p.cfg->name : "(none)";
    if (strcmp(got, want) != 0 || p.splits != want_splits) {
        printf("FAIL [choose %s %lldx%lldx%lld %s%s]: got %s split %u, want %s split %u\n", dev, (long long)M,
               (long long)N, (long long)K, wt == BE_F16 ? "f16" : "f32", matvec ? " matvec" : "", got, p.splits, want,
               want_splits);
        h->failures++;
    }
}

static void selection_tests(struct th *h) {
    /* a GPU without tensor cores (subgroups of 8, 32 KiB of shared memory) */
    const struct vk_caps gpu = {.subgroup_size = 8, .max_wg_invocations = 1024, .max_shared = 32768, .f16 = true};
    expect_choice(h, "gpu", &gpu, 7500, 4096, 1024, BE_F32, false, "f32_128x128", 1);
    expect_choice(h, "gpu", &gpu, 7500, 4096, 1024, BE_F16, false, "f16_128x128", 1);
    expect_choice(h, "gpu", &gpu, 1, 4096, 1024, BE_F16, true, "f16_gemv", 1);
    expect_choice(h, "gpu", &gpu, 8, 1030, 320, BE_F32, true, "f32_gemv", 1);
    expect_choice(h, "gpu", &gpu, 9, 1030, 320, BE_F32, true, "f32_gemv", 1); /* hinted: gemv at any M */
    expect_choice(h, "gpu", &gpu, 31, 1030, 320, BE_F32, true, "f32_gemv", 1);
    expect_choice(h, "gpu", &gpu, 32, 1030, 320, BE_F32, true, "f32_gemvw", 1); /* 4-column groups, same rows */
    expect_choice(h, "gpu", &gpu, 2048, 8198, 640, BE_F32, true, "f32_gemvw", 1); /* a batch's joint */
    expect_choice(h, "gpu", &gpu, 1, 4096, 1024, BE_F16, false, "f16_32x64", 1);
    expect_choice(h, "gpu", &gpu, 20, 640, 640, BE_F32, false, "f32_32x64", 1);
    expect_choice(h, "gpu", &gpu, 37, 1024, 4096, BE_F32, false, "f32_64x64", 1);
    struct vk_caps lvp = gpu; /* a CPU driver: the barrier-free kernel for everything */
    lvp.cpu = true;
    expect_choice(h, "lavapipe", &lvp, 7500, 4096, 1024, BE_F32, false, "f32_direct", 1);
    expect_choice(h, "lavapipe", &lvp, 7500, 4096, 1024, BE_F16, false, "f16_direct", 1);
    expect_choice(h, "lavapipe", &lvp, 8, 518, 256, BE_F16, true, "f16_direct_mv", 1);
    expect_choice(h, "lavapipe", &lvp, 1, 256, 512, BE_F32, false, "f32_direct_mv", 1);
    expect_choice(h, "lavapipe", &lvp, 9, 518, 256, BE_F16, true, "f16_direct", 1);
    /* quantized weights too, hinted or not (gemv.comp took 5 ms a product of a stream step there) */
    expect_choice(h, "lavapipe", &lvp, 2, 704, 176, BE_Q8_0, true, "q8_0_direct_mv", 1);
    expect_choice(h, "lavapipe", &lvp, 33, 704, 256, BE_Q4_K, true, "q4_k_direct", 1);
    expect_choice(h, "lavapipe", &lvp, 7500, 4096, 1024, BE_Q6_K, false, "q6_k_direct", 1);
    expect_choice(h, "gpu", &gpu, 2, 704, 256, BE_Q8_0, true, "q8_0_gemv", 1);
    struct vk_caps nof16 = gpu;
    nof16.f16 = false;
    expect_choice(h, "no-f16", &nof16, 64, 64, 64, BE_F16, false, "(none)", 1);
    expect_choice(h, "no-f16", &nof16, 64, 64, 64, BE_F32, false, "f32_64x64", 1);
    struct vk_caps small = gpu;
    small.max_wg_invocations = 128; /* the Vulkan minimum */
    small.max_shared = 16384;
    expect_choice(h, "minimal", &small, 7500, 4096, 1024, BE_F32, false, "f32_32x32", 1);
    expect_choice(h, "minimal", &small, 1, 4096, 1024, BE_F32, true, "f32_32x32", 1); /* gemv needs 256 invocations */
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* the choice table (vk_gemm_configs.c): rows by M, the same for every activation type */
    const struct vk_caps h100 = {.subgroup_size = 32, .max_wg_invocations = 1024, .max_shared = 49152, .f16 = true,
                                 .coopmat_nv = true};
    struct vk_caps small_shared = h100;
    small_shared.max_shared = 32768; /* the table's tile does not fit: the smallest tensor-core tile */
    expect_choice(h, "h100", &h100, 7500, 4096, 1024, BE_F16, false, "cm128x128_k64", 1);
    expect_choice(h, "h100", &h100, 7500, 1024, 4096, BE_F16, false, "cm128x128_k64", 1);
    expect_choice(h, "h100", &h100, 480000, 256, 256, BE_F16, false, "cm128x128w16_k64", 1);
    expect_choice(h, "h100", &h100, 750, 4096, 1024, BE_F16, false, "cm128x128w16_k64", 1);
    /* up to 1024 rows into at most 1024 columns: 64x64 (too few 128x128 tiles to fill the GPU) */
    expect_choice(h, "h100", &h100, 750, 1024, 1024, BE_F16, false, "cm64x64_k32", 1);
    expect_choice(h, "h100", &h100, 750, 1024, 4096, BE_F16, false, "cm64x64_k32", 1);
    expect_choice(h, "h100", &h100, 1024, 640, 1024, BE_F16, false, "cm64x64_k32", 1);
    expect_choice(h, "h100", &h100, 750, 2048, 1024, BE_F16, false, "cm128x128w16_k64", 1);
    expect_choice(h, "h100", &h100, 1499, 1024, 1024, BE_F16, false, "cm128x128w16_k64", 1);
    /* above 2048 rows: the 8-subgroup tile of 64x32 subgroup tiles */
    expect_choice(h, "h100", &h100, 2048, 4096, 1024, BE_F16, false, "cm128x128w16_k64", 1);
    expect_choice(h, "h100", &h100, 2049, 4096, 1024, BE_F16, false, "cm128x128_k64", 1);
    expect_choice(h, "h100", &h100, 37, 1024, 4096, BE_F16, false, "cm64x64_k32", 1);
    expect_choice(h, "h100", &h100, 1, 4096, 1024, BE_F16, false, "cm64x64_k32", 1); /* rounding independent of M */
    /* hinted f16 products (an f16 session's decoder) of more than 1024 columns take tensor-core tiles
     * at every M, unsplit: a row's rounding never depends on M (batches); those of at most 1024 (the
     * prediction projection), f32 and quantized ones gemv.comp, again at every M */
    expect_choice(h, "h100", &h100, 1, 4096, 1024, BE_F16, true, "cm16x64_k128", 1);
    expect_choice(h, "h100", &h100, 8, 8198, 640, BE_F16, true, "cm16x64_k128", 1);
    expect_choice(h, "h100", &h100, 16, 1025, 640, BE_F16, true, "cm16x64_k128", 1);
    expect_choice(h, "h100", &h100, 31, 1030, 640, BE_F16, true, "cm64x64_k32", 1);
    expect_choice(h, "h100", &h100, 256, 8198, 640, BE_F16, true, "cm128x128w16_k64", 1);
    expect_choice(h, "h100", &h100, 4096, 4096, 4096, BE_F16, true, "cm128x128_k64", 1);
    expect_choice(h, "h100", &h100, 1, 640, 640, BE_F16, true, "f16_gemv", 1);
    expect_choice(h, "h100", &h100, 16, 1024, 640, BE_F16, true, "f16_gemv", 1);
    expect_choice(h, "h100", &h100, 256, 640, 640, BE_F16, true, "f16_gemvw", 1); /* a batch's projection */
    expect_choice(h, "h100", &h100, 8, 8198, 640, BE_F32, true, "f32_gemv", 1);
    expect_choice(h, "h100", &h100, 40, 640, 640, BE_F32, true, "f32_gemvw", 1);
    expect_choice(h, "h100", &h100, 8, 10, 640, BE_F16, true, "f16_gemv", 1); /* N < 16: gemv.comp */
    expect_choice(h, "h100-32k", &small_shared, 4096, 4096, 4096, BE_F16, true, "cm64x64_k32", 1);
    expect_choice(h, "h100", &h100, 7500, 4096, 1024, BE_F32, false, "f32_128x128", 1);
    expect_choice(h, "h100", &h100, 7500, 8, 1024, BE_F16, false, "f16_64x64", 1); /* N < 16: scalar tiles */
    expect_choice(h, "h100-32k", &small_shared, 7500, 4096, 1024, BE_F16, false, "cm64x64_k32", 1);
    /* With the SM count (VK_NV_shader_sm_builtins): the 192-row tile where its waves cost less than
     * the 128-row tile's (1.5 x 0.97 of a wave each), the rule's tile elsewhere */
    struct vk_caps sm132 = h100;
    sm132.sm_count = 132;
    expect_choice(h, "h100-132sm", &sm132, 7500, 4096, 1024, BE_F16, false, "cm192x128_k64", 1); /* 10 waves, 15 */
    expect_choice(h, "h100-132sm", &sm132, 7500, 2048, 1024, BE_F16, false, "cm192x128_k64", 1); /* 5, 8 */
    expect_choice(h, "h100-132sm", &sm132, 7500, 640, 1024, BE_F16, false, "cm192x128_k64", 1);  /* 2, 3 */
    expect_choice(h, "h100-132sm", &sm132, 14999, 1024, 1024, BE_F16, false, "cm192x128_k64", 1); /* 5, 8 */
    expect_choice(h, "h100-132sm", &sm132, 7500, 1024, 4096, BE_F16, false, "cm128x128_k64", 1);  /* 3, 4 */
    expect_choice(h, "h100-132sm", &sm132, 7500, 1024, 1024, BE_F16, false, "cm128x128_k64", 1);
    expect_choice(h, "h100-132sm", &sm132, 750, 4096, 1024, BE_F16, false, "cm192x128_k64", 1);   /* 1, 2 */
    expect_choice(h, "h100-132sm", &sm132, 750, 2048, 1024, BE_F16, false, "cm128x128w16_k64", 1); /* 1, 1 */
    expect_choice(h, "h100-132sm", &sm132, 1499, 1024, 1024, BE_F16, false, "cm128x128w16_k64", 1);
    expect_choice(h, "h100-132sm", &sm132, 750, 1024, 1024, BE_F16, false, "cm64x64_k32", 1);     /* no tall row */
    expect_choice(h, "h100-132sm", &sm132, 480000, 256, 256, BE_F16, false, "cm128x128w16_k64", 1);
    sm132.sm_count = 66; /* the count decides: 472 tiles are 8 waves of 66, 320 are 5 */
    expect_choice(h, "h100-66sm", &sm132, 7500, 1024, 4096, BE_F16, false, "cm192x128_k64", 1);
    sm132.max_shared = 32768; /* neither fits: the smallest tensor-core tile */
    expect_choice(h, "h100-66sm-32k", &sm132, 7500, 4096, 1024, BE_F16, false, "cm64x64_k32", 1);
    struct vk_caps wave64 = h100;
    wave64.subgroup_size = 64; /* the kernel maps 32-wide subgroups to warp tiles */
    expect_choice(h, "wave64", &wave64, 7500, 4096, 1024, BE_F16, false, "f16_128x128", 1);
    struct vk_caps nocm = h100;
    nocm.coopmat_nv = false; /* VKASR_DISABLE_COOPMAT, or no VK_NV_cooperative_matrix */
    expect_choice(h, "no-coopmat", &nocm, 7500, 4096, 1024, BE_F16, false, "f16_128x128", 1);
#endif
}

int main(void) {
    struct th h;
    th_open(&h, true);
    /* the lab (tests/vk_lab.c) is registered: its emulated twins cover the tensor-core code everywhere */
    if (h.vulkan && (h.checks++, !vk_gemm_find("emu64x64_k32") || !vk_gemm_find("emu128x256np_k32"))) {
        printf("FAIL: the lab's emulated GEMM configurations are missing (th_lab_register)\n");
        h.failures++;
    }
    bool f16 = h.dev[TH_DEV]->info.f16;
    const char *mg = getenv("VKASR_MAX_GROUPS");
    bool tiny = mg && *mg;
    if (h.vulkan)
        selection_tests(&h);
    else
        th_skip(&h, "Vulkan GEMM kernel selection on synthetic devices");
    row_invariance(&h, BE_F32, false);
    row_invariance(&h, BE_F32, true);
    if (h.vulkan) {
        direct_matches_scalar(&h, BE_F32);
        for (int64_t k = 135; k <= 136; k++)
            hinted_row_invariance(&h, BE_F32, k);
    }
    else
        th_skip(&h, "gemm_direct.comp against the scalar tiles (Vulkan kernels), f32 and f16");
    if (f16) {
        row_invariance(&h, BE_F16, false);
        row_invariance(&h, BE_F16, true);
        if (h.vulkan) {
            direct_matches_scalar(&h, BE_F16);
            for (int64_t k = 135; k <= 136; k++)
                hinted_row_invariance(&h, BE_F16, k);
            coopmat_agreement(&h, 200);
            if (!tiny)
                coopmat_agreement(&h, 208);
        } else {
            th_skip(&h, "Vulkan tensor-core tiles agreeing with each other");
            long_call_rows(&h);
        }
    }
    if (h.vulkan)
        th_skip(&h, "a call in row chunks inside the op (the CUDA backend's op scratch)");
    glu_matches_unfused(&h, BE_F32, tiny);
    if (f16)
        glu_matches_unfused(&h, BE_F16, tiny);

    /* Automatic choice: the encoder's product shapes, epilogue combinations, f32 and f16 weights. */
    const struct lin_case auto_cases[] = {
        {.M = 1, .N = 1, .K = 1},
        {.M = 3, .N = 5, .K = 7, .bias = true},
        {.M = 1, .N = 4096, .K = 1024, .bias = true},                        /* matrix-vector */
        {.M = 1, .N = 4096, .K = 1024, .bias = true, .matvec = true},        /* ... hinted: gemv.comp */
        {.M = 8, .N = 1035, .K = 320, .bias = true, .act = ACT_RELU, .matvec = true}, /* a decoder window */
        {.M = 5, .N = 33, .K = 77, .res_alias = true, .alpha = -0.5f, .matvec = true},
        {.M = 9, .N = 1035, .K = 320, .bias = true, .matvec = true},         /* hinted above 8 rows: gemv too */
        {.M = 37, .N = 1024, .K = 4096, .bias = true, .act = ACT_SILU},      /* M not a tile multiple */
        {.M = 257, .N = 2560, .K = 1024, .res = true, .alpha = 0.5f, .f16_only = true},
        {.M = 65, .N = 130, .K = 1025, .bias = true, .res = true, .act = ACT_RELU, .alpha = 2.0f}, /* K % 16 != 0 */
        {.M = 130, .N = 70, .K = 33, .bias = true, .res_alias = true, .act = ACT_TANH, .alpha = 0.5f},
        {.M = 200, .N = 1, .K = 64, .bias = true, .act = ACT_SIGMOID},       /* N = 1 */
        {.M = 9, .N = 17, .K = 0, .bias = true, .act = ACT_RELU},             /* K = 0: y = act(bias) */
        {.M = 0, .N = 16, .K = 8, .bias = true},                              /* no rows: nothing to do */
        {.M = 16, .N = 0, .K = 8, .res = true},                               /* no columns */
        /* f16 activations (x, y and res in f16) */
        {.M = 37, .N = 1024, .K = 1024, .bias = true, .act = ACT_SILU, .xt = BE_F16},
        {.M = 130, .N = 264, .K = 136, .bias = true, .res_alias = true, .alpha = 0.5f, .xt = BE_F16, .yt = BE_F16},
        {.M = 65, .N = 130, .K = 77, .res = true, .act = ACT_RELU, .yt = BE_F16},
        {.M = 8, .N = 1035, .K = 320, .bias = true, .matvec = true, .xt = BE_F16, .yt = BE_F16},
        {.M = 40, .N = 640, .K = 640, .bias = true, .matvec = true, .xt = BE_F16},  /* hinted: gemv */
        /* GLU in the epilogue: the convolution module's first pointwise product (N = 2C), a residual,
         * f16 activations, the matrix-vector kernel (at 5 and at 40 rows) */
        {.M = 37, .N = 2 * 176, .K = 176, .bias = true, .glu = true},
        {.M = 130, .N = 2050, .K = 136, .bias = true, .res = true, .alpha = 0.5f, .glu = true},
        {.M = 65, .N = 264, .K = 77, .bias = true, .glu = true, .xt = BE_F16, .yt = BE_F16},
        {.M = 5, .N = 130, .K = 64, .bias = true, .matvec = true, .glu = true},
        {.M = 40, .N = 640, .K = 640, .bias = true, .res_alias = true, .matvec = true, .glu = true, .xt = BE_F16},
    };
    for (int wt = 0; wt < 2; wt++) {
        if (wt == 1 && !f16) {
            printf("skipping f16 weights: the device has no f16 support\n");
            break;
        }
        for (size_t i = 0; i < sizeof auto_cases / sizeof *auto_cases; i++) {
            struct lin_case c = auto_cases[i];
            if ((c.f16_only && wt == 0) || ((c.xt == BE_F16 || c.yt == BE_F16) && !f16))
                continue;
            /* The forced-tiny-grid run is about grid-stride loops: the large shapes add only time. */
            if (tiny && c.M * c.N * c.K > (1 << 26))
                continue;
            c.wt = wt ? BE_F16 : BE_F32;
            if (c.alpha == 0.0f)
                c.alpha = 1.0f;
            lin_run(&h, &c, NULL);
            /* host backends: the f32 session's f16 weights (x not rounded), held to f32's tolerance */
            if (wt == 1 && h.dev[TH_DEV]->info.host && c.xt != BE_F16 && !c.f16_only && c.M * c.N * c.K < (1 << 28)) {
                c.x_f32 = true;
                lin_run(&h, &c, NULL);
            }
        }
    }
    if (f16) {
        f16_y_rounding(&h, BE_F32);
        f16_y_rounding(&h, BE_F16);
    }
    /* x must be rounded to f16 with f16 weights: 1 + 2^-12 rounds to 1, so 64 such products sum to
     * exactly 64 (64.015625 without the rounding). */
    if (f16) {
        float xv[64];
        uint16_t wv[64];
        for (int i = 0; i < 64; i++) {
            xv[i] = 1.0f + 1.0f / 4096.0f;
            wv[i] = float_to_half(1.0f);
        }
        /* the automatic choice, then (Vulkan) every f16 configuration (vector and scalar loads: K = 64, 63) */
        size_t ncfg = 0;
        const struct vk_gemm_cfg *cfgs = h.vulkan ? vk_gemm_configs(&ncfg) : NULL;
        const struct vk_caps *caps = h.vulkan ? &((struct vk_device *)h.dev[TH_DEV])->caps : NULL;
        for (int K = 64; K >= 63; K--)
            for (size_t i = 0; i <= ncfg; i++) {
                const struct vk_gemm_cfg *cfg = i < ncfg ? &cfgs[i] : NULL;
                if (cfg && (cfg->wtype != BE_F16 || !vk_gemm_cfg_usable(cfg, caps)))
                    continue;
                th_case(&h, "linear f16 rounds x, K=%d, %s", K, cfg ? cfg->name : "auto");
                struct th_tensor *x = th_input_data(&h, BE_F32, 2, TH_SHAPE(1, K), xv);
                struct th_tensor *w = th_input_data(&h, BE_F16, 2, TH_SHAPE(1, K), wv);
                struct th_tensor *y = th_output(&h, BE_F32, 2, TH_SHAPE(1, 1));
                struct op_linear a[2];
                for (int s = 0; s < 2; s++)
                    a[s] = (struct op_linear){.x = TH_T(x, s), .w = TH_T(w, s), .y = TH_T(y, s), .alpha = 1.0f};
                const struct vk_gemm_plan plan = {cfg, 1};
                if (th_run_forced(&h, OP_linear, &a[0], &a[1], cfg ? record_linear : NULL, &plan))
                    th_check(&h, y, 0.0);
            }
        /* x_f32 (host backends): x stays 1 + 2^-12, so the sum is 64.015625 exactly on both */
        if (h.dev[TH_DEV]->info.host) {
            th_case(&h, "linear f16 x_f32 keeps x, K=64");
            struct th_tensor *x = th_input_data(&h, BE_F32, 2, TH_SHAPE(1, 64), xv);
            struct th_tensor *w = th_input_data(&h, BE_F16, 2, TH_SHAPE(1, 64), wv);
            struct th_tensor *y = th_output(&h, BE_F32, 2, TH_SHAPE(1, 1));
            float got[2] = {0, 0};
            for (int s = 0; s < 2; s++) {
                struct op_linear a = {.x = TH_T(x, s), .w = TH_T(w, s), .y = TH_T(y, s), .alpha = 1.0f, .x_f32 = true};
                h.checks++;
                if (be_linear(h.be[s], &a) != VKASR_OK ||
                    be_download(h.be[s], &got[s], a.y.addr, sizeof got[s]) != VKASR_OK || got[s] != 64.015625f) {
                    printf("FAIL [%s]: backend %d gives %.9g, want 64.015625\n", h.name, s, got[s]);
                    h.failures++;
                }
            }
        }
    }

    /* Every configuration this device can run, forced onto edge shapes around its tile (Vulkan); the
     * backend's own choice on the same shapes around 64- and 128-wide tiles (CUDA). */
    size_t ncfg = 0;
    const struct vk_gemm_cfg *cfgs = h.vulkan ? vk_gemm_configs(&ncfg) : NULL;
    const struct vk_caps *caps = h.vulkan ? &((struct vk_device *)h.dev[TH_DEV])->caps : NULL;
    const int64_t tiles[] = {64, 128};
    size_t nruns = h.vulkan ? ncfg : 2 * sizeof tiles / sizeof *tiles;
    if (!h.vulkan)
        th_skip(&h, "forced Vulkan GEMM configurations (their edge shapes run with the backend's choice)");
    for (size_t i = 0; i < nruns; i++) {
        const struct vk_gemm_cfg *cfg = h.vulkan ? &cfgs[i] : NULL;
        if (cfg && !vk_gemm_cfg_usable(cfg, caps)) {
            printf("config %s: not usable on this device, skipped\n", cfg->name);
            continue;
        }
        be_dtype wt = cfg ? cfg->wtype : i % 2 ? BE_F16 : BE_F32;
        if ((wt == BE_F16 && !f16) || be_dtype_is_quant(wt)) /* quantized weights: test_ops_quant */
            continue;
        int64_t bm = cfg ? cfg->bm : tiles[i / 2], bn = cfg ? cfg->bn : tiles[i / 2];
        const bool cm = cfg && (cfg->kind == VK_GEMM_COOPMAT || cfg->kind == VK_GEMM_COOPMAT_EMU);
        /* Integer cases are exact whatever the order of the sums and in f16 too (|sum| < 2048 here). */
        const be_dtype H = BE_F16;
        const struct lin_case cases[] = {
            {.M = 1, .N = 1, .K = 1, .alpha = 1.0f},
            {.M = bm + 3, .N = bn + 5, .K = 77, .bias = true, .alpha = 1.0f, .integer = true},
            {.M = 2 * bm - 1, .N = 2 * bn + 1, .K = 64, .res = true, .alpha = 1.0f, .integer = true},          /* vector loads */
            {.M = bm, .N = bn, .K = 64, .bias = true, .res_alias = true, .alpha = 1.0f, .integer = true, .misalign = true},
            {.M = 3 * bm + 1, .N = 17, .K = 40, .bias = true, .act = ACT_SILU, .alpha = 0.25f},
            {.M = 5, .N = 2 * bn + 3, .K = 200, .res = true, .act = ACT_RELU, .alpha = -1.0f},
            /* f16 x (vector and element-wise loads), f16 y and res (4-column and element-wise epilogue) */
            {.M = bm + 1, .N = bn, .K = 64, .bias = true, .res_alias = true, .alpha = 1.0f, .integer = true, .xt = H, .yt = H},
            {.M = bm - 1, .N = bn + 1, .K = 77, .res = true, .alpha = 1.0f, .integer = true, .xt = H},
            {.M = 2 * bm + 5, .N = 2 * bn + 4, .K = 72, .bias = true, .act = ACT_SILU, .alpha = 1.0f, .yt = H},
            {.M = 3, .N = 2 * bn + 3, .K = 48, .res = true, .alpha = 1.0f, .misalign = true, .xt = H, .yt = H},
            /* GLU: pairs across tiles and partial tiles (every configuration: the scalar tiles pair their
             * columns by tile shape), then one output column, f16, a split of K (representatives) */
            {.M = bm + 3, .N = 2 * bn + 6, .K = 77, .bias = true, .alpha = 1.0f, .integer = true, .glu = true},
            {.M = 2 * bm - 1, .N = 2, .K = 64, .res = true, .alpha = 0.5f, .glu = true},
            {.M = bm + 1, .N = bn + 2, .K = 64, .bias = true, .res_alias = true, .alpha = 1.0f, .glu = true, .xt = H,
             .yt = H},
            {.M = bm + 3, .N = 2 * bn + 4, .K = 200, .bias = true, .alpha = 1.0f, .splits = 3, .glu = true},
            /* tensor cores: K split into slices (integer: exact; random: 2 slices and a remainder) */
            {.M = bm + 3, .N = bn + 4, .K = 200, .bias = true, .res = true, .alpha = 1.0f, .integer = true, .splits = 3},
            {.M = 2 * bm - 3, .N = bn + 1, .K = 136, .bias = true, .act = ACT_TANH, .alpha = 1.0f, .splits = 2, .yt = H},
            {.M = bm - 5, .N = 2 * bn, .K = 300, .res_alias = true, .alpha = 0.5f, .splits = 4, .xt = H},
        };
        size_t first_glu = 0;
        while (!cases[first_glu].glu)
            first_glu++;
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            struct lin_case c = cases[k];
            const bool f16io = c.xt == H || c.yt == H;
            if ((c.splits > 1 && !cm) || (f16io && (!f16 || !cfg || !types_tested(cfg))))
                continue;
            if (c.glu && k > first_glu && cfg && !types_tested(cfg))
                continue;
            /* The forced-tiny-grid run is about grid-stride loops, which the tensor types do not touch. */
            if (tiny && f16io)
                continue;
            c.wt = wt;
            lin_run(&h, &c, cfg);
        }
    }
    printf("largest nmse on random data: f32 weights %.3g, f16 weights %.3g, f16 y %.3g\n", worst_nmse[0],
           worst_nmse[1], worst_nmse[2]);
    return th_close(&h);
}
