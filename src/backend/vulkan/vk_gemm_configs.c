/* vk_gemm_configs.c — the linear op's kernel configurations and how a product is planned: one row
 * per library variant of shaders/shaders.cmake (the lab's rows: tests/vk_lab.c), the tensor-core
 * choice table, the split-K rules and vk_gemm_choose. Recording lives in vk_op_gemm.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vk_gemm.h"
#include "vk_lab.h"

/* Shared memory of the scalar kernel: two k-major tiles with a one-word pad per row. */
#define SCALAR_SHARED(bm, bn, bk) ((uint32_t)(4 * (bk) * ((bm) + 1 + (bn) + 1)))
#define SCALAR(nm, wt, w_, m_, n_, k_, tm_, tn_)                                                      \
    {.name = nm, .prof = "linear", .kind = VK_GEMM_SCALAR, .wtype = wt,                                \
     .spv = (wt) == BE_F16 ? SPV_gemm_h : SPV_gemm_f32, .spv_f16io = SPV_gemm_h, .wg = w_, .bm = m_,   \
     .bn = n_, .bk = k_, .tm = tm_, .tn = tn_, .stages = 1, .shared_bytes = SCALAR_SHARED(m_, n_, k_)}
/* The scalar kernel on quantized weights (gemm.comp -DWQ_<type>: f32 or, through spec constant 7, f16
 * x and y): the four tiles of the f32/f16 rows for each block type. */
#define SCALARQ(nm, wt, sp, sph, w_, m_, n_, k_, tm_, tn_)                                           \
    {.name = nm, .prof = "linear_q", .kind = VK_GEMM_SCALAR, .wtype = wt, .spv = sp, .spv_f16io = sph, \
     .wg = w_, .bm = m_, .bn = n_, .bk = k_, .tm = tm_, .tn = tn_, .stages = 1,                        \
     .shared_bytes = SCALAR_SHARED(m_, n_, k_)}
#define SCALARQ4(q, wt, sp, sph)                                                                       \
    SCALARQ(q "_128x128", wt, sp, sph, 256, 128, 128, 16, 8, 8), SCALARQ(q "_64x64", wt, sp, sph, 256, 64, 64, 16, 4, 4), \
        SCALARQ(q "_32x64", wt, sp, sph, 256, 32, 64, 32, 2, 4), SCALARQ(q "_32x32", wt, sp, sph, 64, 32, 32, 16, 4, 4)
/* Tiles of tm rows x wg*tn columns, no shared memory (CPU drivers). */
#define DIRECT(nm, wt, w_, tm_, tn_)                                                                   \
    {.name = nm, .prof = "linear", .kind = VK_GEMM_DIRECT, .wtype = wt,                                \
     .spv = (wt) == BE_F16 ? SPV_gemm_direct_h : SPV_gemm_direct_f32, .spv_f16io = SPV_gemm_direct_h,  \
     .wg = w_, .bm = tm_, .bn = (w_) * (tn_), .bk = 0, .tm = tm_, .tn = tn_, .stages = 0, .shared_bytes = 0}
/* ... on quantized weights (gemm_direct.comp -DWQ_<type>: each block dequantized in the FMA chain) */
#define DIRECTQ(nm, wt, sp, sph, w_, tm_, tn_)                                                         \
    {.name = nm, .prof = "linear_q", .kind = VK_GEMM_DIRECT, .wtype = wt, .spv = sp, .spv_f16io = sph,  \
     .wg = w_, .bm = tm_, .bn = (w_) * (tn_), .bk = 0, .tm = tm_, .tn = tn_, .stages = 0, .shared_bytes = 0}
#define DIRECTQ2(q, wt, sp, sph)                                                                       \
    DIRECTQ(q "_direct", wt, sp, sph, 8, 8, 8), DIRECTQ(q "_direct_mv", wt, sp, sph, 64, 4, 4)
/* The same on quantized weights (gemv.comp -DWQ_<type>: blocks read directly, f32 or f16 x and y). */
#define GEMVQ(nm, wt, sp, sph, w_, mr)                                                                 \
    {.name = nm, .prof = "linear_gemv_q", .kind = VK_GEMM_GEMV, .wtype = wt, .spv = sp, .spv_f16io = sph, \
     .wg = w_, .bm = mr, .bn = (w_) / 32, .bk = 0, .tm = 0, .tn = 1, .stages = 0, .shared_bytes = 4 * (mr) * (w_)}
#define GEMVQ2(q, wt, sp, sph) GEMVQ(q "_gemv", wt, sp, sph, 256, 8), GEMVQ(q "_gemv32", wt, sp, sph, 256, 32)
/* The scalar configs follow one rule: workgroup = (bm/tm) * (bn/tn) invocations. "32x32" (64
 * invocations, 4 KiB) runs on every device; the others need 256 invocations. */
/* An int8 configuration's row for each block type, named TYPE_TILE: one kernel serves every type's int8
 * form (vk_op_gemm_i8.c). */
#define I8_EACH_TYPE(tile, kd, sp, shape)                                                                      \
    I8("q8_0_" tile, kd, BE_Q8_0, sp, shape), I8("q4_k_" tile, kd, BE_Q4_K, sp, shape),                        \
        I8("q5_k_" tile, kd, BE_Q5_K, sp, shape), I8("q6_k_" tile, kd, BE_Q6_K, sp, shape)

static const struct vk_gemm_cfg configs[] = {
    SCALAR("f32_128x128", BE_F32, 256, 128, 128, 16, 8, 8),
    SCALAR("f32_64x64", BE_F32, 256, 64, 64, 16, 4, 4),
    SCALAR("f32_32x64", BE_F32, 256, 32, 64, 32, 2, 4),
    SCALAR("f32_32x32", BE_F32, 64, 32, 32, 16, 4, 4),
    SCALAR("f16_128x128", BE_F16, 256, 128, 128, 16, 8, 8),
    SCALAR("f16_64x64", BE_F16, 256, 64, 64, 16, 4, 4),
    SCALAR("f16_32x64", BE_F16, 256, 32, 64, 32, 2, 4),
    SCALAR("f16_32x32", BE_F16, 64, 32, 32, 16, 4, 4),
    SCALARQ4("q8_0", BE_Q8_0, SPV_gemm_q8_0, SPV_gemm_q8_0_h),
    SCALARQ4("q4_k", BE_Q4_K, SPV_gemm_q4_k, SPV_gemm_q4_k_h),
    SCALARQ4("q5_k", BE_Q5_K, SPV_gemm_q5_k, SPV_gemm_q5_k_h),
    SCALARQ4("q6_k", BE_Q6_K, SPV_gemm_q6_k, SPV_gemm_q6_k_h),
    DIRECT("f32_direct", BE_F32, 8, 8, 8),
    DIRECT("f16_direct", BE_F16, 8, 8, 8),
    DIRECT("f32_direct_mv", BE_F32, 64, 4, 4),
    DIRECT("f16_direct_mv", BE_F16, 64, 4, 4),
    DIRECTQ2("q8_0", BE_Q8_0, SPV_gemm_direct_q8_0, SPV_gemm_direct_q8_0_h),
    DIRECTQ2("q4_k", BE_Q4_K, SPV_gemm_direct_q4_k, SPV_gemm_direct_q4_k_h),
    DIRECTQ2("q5_k", BE_Q5_K, SPV_gemm_direct_q5_k, SPV_gemm_direct_q5_k_h),
    DIRECTQ2("q6_k", BE_Q6_K, SPV_gemm_direct_q6_k, SPV_gemm_direct_q6_k_h),
    GEMV("f32_gemv", BE_F32, 256, 8),
    GEMV("f16_gemv", BE_F16, 256, 8),
    GEMV_WIDE("f32_gemvw", BE_F32, 256, 4, 4), /* many rows: 4 rows x 4 columns per group */
    GEMV_WIDE("f16_gemvw", BE_F16, 256, 4, 4),
    GEMVQ2("q8_0", BE_Q8_0, SPV_gemv_q8_0, SPV_gemv_q8_0_h),
    GEMVQ2("q4_k", BE_Q4_K, SPV_gemv_q4_k, SPV_gemv_q4_k_h),
    GEMVQ2("q5_k", BE_Q5_K, SPV_gemv_q5_k, SPV_gemv_q5_k_h),
    GEMVQ2("q6_k", BE_Q6_K, SPV_gemv_q6_k, SPV_gemv_q6_k_h),
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    CM("cm64x64_k32", VK_GEMM_COOPMAT, SPV_gemm_cm64x64_k32, T_64x64_K32),
    CM("cm64x64_k64", VK_GEMM_COOPMAT, SPV_gemm_cm64x64_k64, T_64x64_K64),
    CM("cm32x64_k64", VK_GEMM_COOPMAT, SPV_gemm_cm32x64_k64, T_32x64_K64),
    CM("cm16x64_k128", VK_GEMM_COOPMAT, SPV_gemm_cm16x64_k128, T_16x64_K128),
    CM("cm128x64_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x64_k32, T_128x64_K32),
    CM("cm64x128_k32", VK_GEMM_COOPMAT, SPV_gemm_cm64x128_k32, T_64x128_K32),
    CM("cm128x128w16_k64", VK_GEMM_COOPMAT, SPV_gemm_cm128x128w16_k64, T_128x128W16_K64),
    CM("cm128x128w4_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x128w4_k32, T_128x128W4_K32),
    CM("cm128x128_k64", VK_GEMM_COOPMAT, SPV_gemm_cm128x128_k64, T_128x128_K64),
    CM("cm192x128_k64", VK_GEMM_COOPMAT, SPV_gemm_cm192x128_k64, T_192x128_K64),
    CM("cm128x256_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x256_k32, T_128x256_K32),
    CM("cm128x256np_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x256np_k32, T_128x256NP_K32),
    /* quantized weights, dequantized into the f16 w tile: one tile per block type */
    CMQ("q8_0_cm128x128_k32", VK_GEMM_COOPMAT, BE_Q8_0, SPV_gemm_cm128x128_k32_q8_0, T_128x128_K32),
    CMQ("q4_k_cm128x128_k32", VK_GEMM_COOPMAT, BE_Q4_K, SPV_gemm_cm128x128_k32_q4_k, T_128x128_K32),
    CMQ("q5_k_cm128x128_k32", VK_GEMM_COOPMAT, BE_Q5_K, SPV_gemm_cm128x128_k32_q5_k, T_128x128_K32),
    CMQ("q6_k_cm128x128_k32", VK_GEMM_COOPMAT, BE_Q6_K, SPV_gemm_cm128x128_k32_q6_k, T_128x128_K32),
#endif
#ifdef VKASR_HAVE_NV_INT8_COOPMAT_SHADERS
    /* quantized weights as int8 rows with one scale each (q8_0's and the k-quants' int8 forms: the same
     * kernel, a row per block type), x quantized per row: int8 tensor cores */
    I8_EACH_TYPE("i8cm128x128_k128", VK_GEMM_I8, SPV_gemm_i8cm128x128_k128, T_I8_128x128_K128),
    I8_EACH_TYPE("i8cm128x128_k64", VK_GEMM_I8, SPV_gemm_i8cm128x128_k64, T_I8_128x128_K64),
    I8_EACH_TYPE("i8cm64x64_k64", VK_GEMM_I8, SPV_gemm_i8cm64x64_k64, T_I8_64x64_K64),
#endif
    /* its emulated twin (any f16 device; VKASR_INT8=emu, tests) */
    I8_EACH_TYPE("i8emu128x128_k64", VK_GEMM_I8_EMU, SPV_gemm_i8emu128x128_k64, T_I8_128x128_K64),
};

const struct vk_gemm_cfg *vk_gemm_configs(size_t *n) {
    const struct vk_lab *lab = vk_lab_get();
    if (lab && lab->gemm) {
        *n = lab->ngemm;
        return lab->gemm;
    }
    *n = sizeof configs / sizeof *configs;
    return configs;
}

const struct vk_gemm_cfg *vk_gemm_find(const char *name) {
    size_t n;
    const struct vk_gemm_cfg *c = vk_gemm_configs(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].name, name) == 0)
            return &c[i];
    return NULL;
}

bool vk_gemm_cfg_usable(const struct vk_gemm_cfg *c, const struct vk_caps *caps) {
    /* An emulated tensor-core variant keeps its "shared memory" in device memory. */
    uint32_t shared = c->kind == VK_GEMM_COOPMAT_EMU || c->kind == VK_GEMM_I8_EMU ? 0 : c->shared_bytes;
    if (c->wg > caps->max_wg_invocations || shared > caps->max_shared)
        return false;
    const bool cm = c->kind == VK_GEMM_COOPMAT || c->kind == VK_GEMM_COOPMAT_EMU || c->kind == VK_GEMM_I8 ||
                    c->kind == VK_GEMM_I8_EMU;
    if (c->kind == VK_GEMM_I8 && (!caps->coopmat_int8 || caps->subgroup_size != 32))
        return false;
    if ((c->wtype == BE_F16 || cm) && !caps->f16)
        return false;
    /* The real kernel maps one 32-invocation subgroup to each warp tile (gl_SubgroupID). */
    if (c->kind == VK_GEMM_COOPMAT && (!caps->coopmat_nv || caps->subgroup_size != 32))
        return false;
    return true;
}

static uint64_t tiles(int64_t M, int64_t N, uint32_t bm, uint32_t bn) {
    return (uint64_t)((M + bm - 1) / bm) * (uint64_t)((N + bn - 1) / bn);
}

#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
/* ---- the tensor-core choice table ---------------------------------------------------------------
 * Shape class -> configuration for devices with NV cooperative matrices; the first row whose bounds
 * hold the product wins, the last holds every shape. Refill from tools/gpu/gemm_sweep.sh's "best"
 * lines (figures: docs/gpu-results.md, "GEMM"). A row may bound M because the tiles are
 * interchangeable bit for bit (the same 16x16x16 products in k order; test_ops_linear checks it). */
#define ANY INT64_MAX
static const struct vk_gemm_rule {
    int64_t m_max, n_max, k_max; /* the class: M <= m_max, N <= n_max, K <= k_max */
    const char *cfg;
    const char *tall; /* a 192-row alternative, taken where it needs fewer waves (tall_fills_better) */
} cm_rules[] = {
    {64, ANY, ANY, "cm64x64_k32", NULL},
    /* the subsampling's pointwise convs (K = 256): 16 subgroups of 32x32 */
    {ANY, ANY, 256, "cm128x128w16_k64", NULL},
    /* a minute of audio (750 rows) into 640-1024 columns: under 64 tiles of 128x128 leave a large GPU's
     * SMs idle (2048 columns or 1500 rows: 128x128) */
    {1024, 1024, ANY, "cm64x64_k32", NULL},
    /* up to 2048 rows: 16 subgroups of 32x32, one shared stage of BK 64 */
    {2048, ANY, ANY, "cm128x128w16_k64", "cm192x128_k64"},
    /* the rest: 8 subgroups of 64x32 (three fragment loads per four products instead of one per
     * product), one shared stage of BK 64 */
    {ANY, ANY, ANY, "cm128x128_k64", "cm192x128_k64"},
};

/* A workgroup of the rules' 128x128 tiles and of the 192x128 one fills an SM, so a product takes
 * ceil(tiles / SMs) waves of equal tiles; a tall wave costs 1.5 x 0.97 of a 128-row one (0.97: the tall
 * tile's throughput edge where both fill their waves). The tall tile is taken where its waves cost
 * less; an unknown SM count keeps the rule's tile (figures: docs/gpu-results.md, "GEMM"). */
static bool tall_fills_better(const struct vk_caps *caps, int64_t M, int64_t N, const struct vk_gemm_cfg *rule,
                              const struct vk_gemm_cfg *tall) {
    const uint64_t s = caps->sm_count;
    if (s == 0)
        return false;
    const uint64_t w_rule = (tiles(M, N, rule->bm, rule->bn) + s - 1) / s;
    const uint64_t w_tall = (tiles(M, N, tall->bm, tall->bn) + s - 1) / s;
    return 97 * (uint64_t)tall->bm * w_tall < 100 * (uint64_t)rule->bm * w_rule;
}

/* Split-K without the matvec hint: by N and K only, so a row keeps its rounding whatever the call's
 * M. A row belongs here only where the sweep shows it does not slow the largest M of its class (none
 * does: docs/gpu-results.md, "GEMM"). */
static const struct vk_gemm_split_rule {
    int64_t n_max, k_min; /* the class: N <= n_max, K >= k_min */
    uint32_t splits;
} split_rules[] = {
    {0, ANY, 1}, /* placeholder that matches nothing (N >= 16 on tensor cores) */
};

/* The choice table's tensor-core tile for a shape, or the smallest tile where that one cannot run here;
 * NULL when neither can. */
static const struct vk_gemm_cfg *cm_choice(const struct vk_caps *caps, int64_t M, int64_t N, int64_t K) {
    const struct vk_gemm_cfg *c = NULL;
    for (size_t i = 0; i < sizeof cm_rules / sizeof *cm_rules && !c; i++)
        if (M <= cm_rules[i].m_max && N <= cm_rules[i].n_max && K <= cm_rules[i].k_max) {
            c = vk_gemm_find(cm_rules[i].cfg);
            const struct vk_gemm_cfg *t = cm_rules[i].tall ? vk_gemm_find(cm_rules[i].tall) : NULL;
            if (c && t && vk_gemm_cfg_usable(t, caps) && tall_fills_better(caps, M, N, c, t))
                c = t;
        }
    if (c && !vk_gemm_cfg_usable(c, caps))
        c = vk_gemm_find("cm64x64_k32");
    return c && vk_gemm_cfg_usable(c, caps) ? c : NULL;
}

/* Slices of K for a tensor-core plan: the split rules (hinted products are never split). */
static uint32_t cm_splits(int64_t N, int64_t K) {
    for (size_t i = 0; i < sizeof split_rules / sizeof *split_rules; i++)
        if (N <= split_rules[i].n_max && K >= split_rules[i].k_min)
            return split_rules[i].splits;
    return 1;
}

#endif

/* Preference order of scalar configs for a shape: the first usable one wins. Small M gets tiles
 * that do not waste rows; large problems get 128x128 only when that still yields enough
 * workgroups to fill a GPU (a guess without the compute-unit count: 64). All scalar tiles add a
 * product's terms in the same order, so the choice by M does not change any result. */
static void scalar_order(int64_t M, int64_t N, const char *order[5]) {
    int n = 0;
    if (M <= 32)
        order[n++] = "32x64";
    if (M > 64 && N > 64 && tiles(M, N, 128, 128) >= 64)
        order[n++] = "128x128";
    order[n++] = "64x64";
    order[n++] = "32x32";
    while (n < 5)
        order[n++] = NULL;
}

/* The int8 kernel's small tile: the f16 choice table's 64x64 classes (a few rows; up to 1024 x 1024, where
 * 128x128 tiles leave a large GPU's SMs idle). Every int8 tile gives the same bits (exact int32 sums). */
static bool i8_small(int64_t M, int64_t N) { return M <= 64 || (M <= 1024 && N <= 1024); }

/* Hinted f16 products of at most this many columns take gemv.comp rather than tensor cores (below). */
#define MATVEC_GEMV_MAX_N 1024

struct vk_gemm_plan vk_gemm_choose(const struct vk_caps *caps, int64_t M, int64_t N, int64_t K, be_dtype wtype,
                                   bool matvec) {
    struct vk_gemm_plan p = {NULL, 1};
    const bool quant = be_dtype_is_quant(wtype);
    if (wtype != BE_F32 && wtype != BE_F16 && !quant)
        return p;
    /* q8_0 and the k-quants on int8 tensor cores (their int8 forms, x quantized per row: vk_op_gemm_i8.c)
     * where the device has them, or the emulated twin under VKASR_INT8=emu (tests, accuracy on any f16
     * device): the products the f16 tensor cores would take below, with K a multiple of 32 (always:
     * q8_0's blocks hold 32 weights, the k-quants' 256). */
    /* The larger tile: K steps of 128 bytes in one stage (8-13 % faster than two stages of 64 on the H100's
     * encoder products at 7500 rows, 3 % at 750: docs/gpu-results.md), else the two-stage one; every
     * tile gives the same bits. */
    if (quant && !matvec && N >= 16 && K % 32 == 0 && (caps->coopmat_int8 || caps->int8_emu)) {
        const char *tiles[2] = {"i8cm128x128_k128", "i8cm128x128_k64"};
        if (!caps->coopmat_int8 || i8_small(M, N)) {
            tiles[0] = !caps->coopmat_int8 ? "i8emu128x128_k64" : "i8cm64x64_k64";
            tiles[1] = NULL;
        }
        for (int i = 0; i < 2 && tiles[i]; i++) {
            char name[32];
            snprintf(name, sizeof name, "%s_%s", be_dtype_name(wtype), tiles[i]);
            p.cfg = vk_gemm_find(name);
            if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
                return p;
        }
        p.cfg = NULL;
    }
    /* A CPU driver: gemm_direct.comp for every product, f32, f16 or block-quantized weights, hinted or
     * not (no barriers; on lavapipe 4x the scalar tiles on an encoder product, 9-14x gemv.comp on the
     * decoder's, and 5 -> 1.1 ms a hinted q8_0 product of a stream step): 8x8 outputs per invocation in
     * 8-invocation workgroups, or 4x4 in 64 for at most 8 rows. Its FMA chains are those of the scalar
     * tiles, so a row still does not depend on M. */
    if (caps->cpu) {
        char name[32];
        snprintf(name, sizeof name, "%s_direct%s", be_dtype_name(wtype), M <= 8 ? "_mv" : "");
        p.cfg = vk_gemm_find(name);
        if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
            return p;
        p.cfg = NULL;
    }
    /* Quantized weights on a GPU: a hinted product (the decoder's) takes gemv.comp reading the blocks
     * (32-row tiles from 32 rows on, as for f32/f16; a row depends on N and K only); else tensor cores
     * where an f16 weight would take them without the hint (N >= 16, any M: the one tile of the block
     * type, so a row does not depend on M), w dequantized and rounded to f16 in the tile; else the
     * scalar tiles, which dequantize w to f32 while staging it. */
    if (quant) {
        if (matvec) {
            char name[32];
            snprintf(name, sizeof name, "%s_gemv%s", be_dtype_name(wtype), M >= 32 ? "32" : "");
            p.cfg = vk_gemm_find(name);
            if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
                return p;
            snprintf(name, sizeof name, "%s_gemv", be_dtype_name(wtype));
            p.cfg = vk_gemm_find(name);
            if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
                return p;
            p.cfg = NULL;
        }
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
        if (!matvec && N >= 16) {
            char name[32];
            snprintf(name, sizeof name, "%s_cm128x128_k32", be_dtype_name(wtype));
            p.cfg = vk_gemm_find(name);
            if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
                return p;
            p.cfg = NULL;
        }
#endif
        goto scalar;
    }
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* A hinted product with f16 weights on tensor cores (an f16 session's decoder): at every M, so a
     * batch of hypotheses (B x W rows) gets each row exactly as one hypothesis alone (W rows) does (the
     * tiles are interchangeable bit for bit); a few rows take 16-row tiles of 64 columns (N / 64
     * workgroups, K steps of 128), more rows the choice table's tiles. Not for at most
     * MATVEC_GEMV_MAX_N columns (the prediction network's projection, P x P): there the 16-row tiles
     * make too few workgroups (P / 64) for their sequential K steps, and gemv.comp (one 32-invocation
     * group per column) takes half the time. The rule depends on N only, so a row's rounding still never
     * depends on M (a batch's projection then takes the wide groups below). Figures: docs/gpu-results.md,
     * "Decoder". */
    if (matvec && wtype == BE_F16 && N > MATVEC_GEMV_MAX_N) {
        p.cfg = M <= 16 ? vk_gemm_find("cm16x64_k128") : NULL;
        if (!p.cfg || !vk_gemm_cfg_usable(p.cfg, caps))
            p.cfg = cm_choice(caps, M, N, K);
        if (p.cfg)
            return p;
    }
#endif
    /* A hinted product (the decoder's: a few rows per hypothesis, weight-bound): gemv.comp, parallel
     * over columns and K, at the speed of reading w; the tiled kernels leave most of a GPU idle there
     * (N / 64 workgroups). At any M: a row's rounding then depends on N and K only, so a batch of
     * hypotheses (B x W rows) gets each row exactly as one hypothesis alone (W rows) does. */
    if (matvec) {
        /* From 32 rows on, groups of 4 columns and 4 rows (the same sums, bit for bit): each x load
         * serves 4 columns, where one-column groups re-read x for every column (tensor cores are
         * faster, but their rounding differs from one row's) */
        if (M >= 32) {
            p.cfg = vk_gemm_find(wtype == BE_F16 ? "f16_gemvw" : "f32_gemvw");
            if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
                return p;
        }
        p.cfg = vk_gemm_find(wtype == BE_F16 ? "f16_gemv" : "f32_gemv");
        if (p.cfg && vk_gemm_cfg_usable(p.cfg, caps))
            return p;
        p.cfg = NULL;
    }
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* Tensor cores for f16 weights at any M, from the choice table (a configuration that cannot run
     * here falls back to the smallest). */
    if (wtype == BE_F16 && N >= 16) {
        p.cfg = cm_choice(caps, M, N, K);
        if (p.cfg) {
            p.splits = cm_splits(N, K);
            return p;
        }
    }
#endif
scalar:;
    const char *order[5];
    scalar_order(M, N, order);
    for (int i = 0; i < 5 && order[i]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s_%s", be_dtype_name(wtype), order[i]); /* f32, f16 or a block type */
        const struct vk_gemm_cfg *c = vk_gemm_find(name);
        if (c && vk_gemm_cfg_usable(c, caps)) {
            p.cfg = c;
            return p;
        }
    }
    return p;
}
