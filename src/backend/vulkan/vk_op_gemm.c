/* vk_op_gemm.c — host side of the linear op: y = res + alpha * act(x w^T + bias). Picks a kernel and
 * a tile configuration from the device and the shape (tensor cores for f16 weights where the device
 * has NV cooperative matrices and 32-wide subgroups, the scalar GEMM otherwise, a matrix-vector
 * kernel for the decoder's hinted products of at most 8 rows, a barrier-free one on CPU drivers) and
 * records it. The kernels are gemm.comp, gemm_coopmat.comp, gemv.comp and gemm_direct.comp; see
 * vk_gemm.h for the selection contract. */
#include <stdio.h>
#include <string.h>

#include "vk_gemm.h"

struct pc_gemm {
    uint64_t x, w, bias, res, y;
    uint32_t M, N, K;
    uint32_t act;
    float alpha;
    uint32_t flags;
};
_Static_assert(sizeof(struct pc_gemm) == 64, "mirror of gemm.comp / gemm_coopmat.comp push constants");

#define GEMM_FLAG_VEC 1u /* K % 8 == 0 and x, w 16-byte aligned: the coopmat kernel loads vectors */

/* Shared memory of the scalar kernel: two k-major tiles with a one-word pad per row. */
#define SCALAR_SHARED(bm, bn, bk) ((uint32_t)(4 * (bk) * ((bm) + 1 + (bn) + 1)))
/* Shared memory of the coopmat kernel: max(staged blocks, epilogue stage), BK = 32, uvec4 units. */
#define CM_SHARED(bm, bn, nwarps, wn, pad)                                                             \
    ((uint32_t)(16 * (((bm) + (bn)) * (4 + (pad)) > (nwarps) * 4 * (wn)                               \
                          ? ((bm) + (bn)) * (4 + (pad))                                                \
                          : (nwarps) * 4 * (wn))))

#define SCALAR(nm, wt, sp, w_, m_, n_, k_, tm_, tn_)                                                  \
    {.name = nm, .prof = "linear", .kind = VK_GEMM_SCALAR, .wtype = wt, .spv = sp, .wg = w_, .bm = m_,  \
     .bn = n_, .bk = k_, .tm = tm_, .tn = tn_, .shared_bytes = SCALAR_SHARED(m_, n_, k_)}
/* Tiles of tm rows x wg*tn columns, no shared memory (CPU drivers). */
#define DIRECT(nm, wt, sp, w_, tm_, tn_)                                                               \
    {.name = nm, .prof = "linear", .kind = VK_GEMM_DIRECT, .wtype = wt, .spv = sp, .wg = w_, .bm = tm_,   \
     .bn = (w_) * (tn_), .bk = 0, .tm = tm_, .tn = tn_, .shared_bytes = 0}
/* Tiles of 8 rows x wg/32 columns: 32 invocations per column, partial sums of 8 rows in shared memory. */
#define GEMV(nm, wt, sp, w_)                                                                           \
    {.name = nm, .prof = "linear_gemv", .kind = VK_GEMM_GEMV, .wtype = wt, .spv = sp, .wg = w_, .bm = 8,  \
     .bn = (w_) / 32, .bk = 0, .tm = 0, .tn = 0, .shared_bytes = 4 * 8 * (w_)}
/* wm x wn subgroups of fm x fn fragments (must match the variant's defines in shaders.cmake). */
#define COOPMAT(nm, kd, sp, wm, wn, fm, fn, pad)                                                       \
    {.name = nm, .prof = "linear_tc", .kind = kd, .wtype = BE_F16, .spv = sp, .wg = 32 * (wm) * (wn),     \
     .bm = 16 * (wm) * (fm), .bn = 16 * (wn) * (fn), .bk = 32, .tm = 0, .tn = 0,                         \
     .shared_bytes = CM_SHARED(16 * (wm) * (fm), 16 * (wn) * (fn), (wm) * (wn), 16 * (fn), pad)}

/* Tensor-core shapes: WARPS_M, WARPS_N, FM, FN of the variants in shaders.cmake. Each real variant
 * and its emulated twin share one shape, so the lavapipe tests of the twin check the numbers. */
#define CM_L 2, 2, 4, 4  /* 128x128 tile, 4 subgroups of 64x64 */
#define CM_M 2, 2, 2, 2  /* 64x64 tile, 4 subgroups of 32x32   */
#define CM_W 2, 4, 4, 2  /* 128x128 tile, 8 subgroups of 64x32 */
#define CM_XL 2, 4, 4, 4 /* 128x256 tile, 8 subgroups of 64x64 */
#define CM(...) COOPMAT(__VA_ARGS__)

/* The scalar configs follow one rule: workgroup = (bm/tm) * (bn/tn) invocations. "32x32" (64
 * invocations, 4 KiB) runs on every device; the others need 256 invocations. */
static const struct vk_gemm_cfg configs[] = {
    SCALAR("f32_128x128", BE_F32, SPV_gemm_f32, 256, 128, 128, 16, 8, 8),
    SCALAR("f32_64x64", BE_F32, SPV_gemm_f32, 256, 64, 64, 16, 4, 4),
    SCALAR("f32_32x64", BE_F32, SPV_gemm_f32, 256, 32, 64, 32, 2, 4),
    SCALAR("f32_32x32", BE_F32, SPV_gemm_f32, 64, 32, 32, 16, 4, 4),
    SCALAR("f16_128x128", BE_F16, SPV_gemm_f16, 256, 128, 128, 16, 8, 8),
    SCALAR("f16_64x64", BE_F16, SPV_gemm_f16, 256, 64, 64, 16, 4, 4),
    SCALAR("f16_32x64", BE_F16, SPV_gemm_f16, 256, 32, 64, 32, 2, 4),
    SCALAR("f16_32x32", BE_F16, SPV_gemm_f16, 64, 32, 32, 16, 4, 4),
    DIRECT("f32_direct", BE_F32, SPV_gemm_direct_f32, 8, 8, 8),
    DIRECT("f16_direct", BE_F16, SPV_gemm_direct_f16, 8, 8, 8),
    DIRECT("f32_direct_mv", BE_F32, SPV_gemm_direct_f32, 64, 4, 4),
    DIRECT("f16_direct_mv", BE_F16, SPV_gemm_direct_f16, 64, 4, 4),
    GEMV("f32_gemv", BE_F32, SPV_gemv_f32, 256),
    GEMV("f16_gemv", BE_F16, SPV_gemv_f16, 256),
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    CM("cm128x128", VK_GEMM_COOPMAT, SPV_gemm_cm_l, CM_L, 1),
    CM("cm64x64", VK_GEMM_COOPMAT, SPV_gemm_cm_m, CM_M, 1),
    CM("cm128x128w8", VK_GEMM_COOPMAT, SPV_gemm_cm_w, CM_W, 1),
    CM("cm128x256", VK_GEMM_COOPMAT, SPV_gemm_cm_xl, CM_XL, 1),
    CM("cm128x128nopad", VK_GEMM_COOPMAT, SPV_gemm_cm_l_nopad, CM_L, 0),
#endif
    CM("emu128x128", VK_GEMM_COOPMAT_EMU, SPV_gemm_cm_l_emu, CM_L, 1),
    CM("emu64x64", VK_GEMM_COOPMAT_EMU, SPV_gemm_cm_m_emu, CM_M, 1),
    CM("emu128x128w8", VK_GEMM_COOPMAT_EMU, SPV_gemm_cm_w_emu, CM_W, 1),
    CM("emu128x256", VK_GEMM_COOPMAT_EMU, SPV_gemm_cm_xl_emu, CM_XL, 1),
};

const struct vk_gemm_cfg *vk_gemm_configs(size_t *n) {
    *n = sizeof configs / sizeof *configs;
    return configs;
}

const struct vk_gemm_cfg *vk_gemm_find(const char *name) {
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++)
        if (strcmp(configs[i].name, name) == 0)
            return &configs[i];
    return NULL;
}

bool vk_gemm_cfg_usable(const struct vk_gemm_cfg *c, const struct vk_caps *caps) {
    if (c->wg > caps->max_wg_invocations || c->shared_bytes > caps->max_shared)
        return false;
    const bool cm = c->kind == VK_GEMM_COOPMAT || c->kind == VK_GEMM_COOPMAT_EMU;
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

const struct vk_gemm_cfg *vk_gemm_choose(const struct vk_caps *caps, int64_t M, int64_t N, int64_t K,
                                         be_dtype wtype, bool matvec) {
    (void)K; /* no K-dependent choice yet (a split-K variant would need one) */
    if (wtype != BE_F32 && wtype != BE_F16)
        return NULL;
    /* A CPU driver: gemm_direct.comp for every product (no barriers; on lavapipe 4x the scalar tiles
     * on an encoder product, 9-14x gemv.comp on the decoder's): 8x8 outputs per invocation in
     * 8-invocation workgroups, or 4x4 in 64 for at most 8 rows. Its FMA chains are those of the
     * scalar tiles, so a row still does not depend on M. */
    if (caps->cpu) {
        const struct vk_gemm_cfg *c = vk_gemm_find(M <= 8 ? (wtype == BE_F16 ? "f16_direct_mv" : "f32_direct_mv")
                                                          : (wtype == BE_F16 ? "f16_direct" : "f32_direct"));
        if (c && vk_gemm_cfg_usable(c, caps))
            return c;
    }
    /* A matrix-vector product (hinted, at most 8 rows): gemv.comp, parallel over columns and K, at the
     * speed of reading w; the tiled kernels leave most of a GPU idle there (N / 64 workgroups). */
    if (matvec && M <= 8) {
        const struct vk_gemm_cfg *c = vk_gemm_find(wtype == BE_F16 ? "f16_gemv" : "f32_gemv");
        if (c && vk_gemm_cfg_usable(c, caps))
            return c;
    }
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* Tensor cores for f16 weights at any M (a row's rounding must not depend on M). 64x64 tiles at
     * every size: on an H100 they beat 128x128 even on 7500x4096x1024 (79 vs 65 TFLOP/s,
     * docs/gpu-results.md), and small products need their extra workgroups anyway. */
    if (wtype == BE_F16 && N >= 16) {
        const char *cm = "cm64x64";
        const struct vk_gemm_cfg *c = vk_gemm_find(cm);
        if (c && vk_gemm_cfg_usable(c, caps))
            return c;
    }
#endif
    const char *order[5];
    scalar_order(M, N, order);
    for (int i = 0; i < 5 && order[i]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s_%s", wtype == BE_F16 ? "f16" : "f32", order[i]);
        const struct vk_gemm_cfg *c = vk_gemm_find(name);
        if (c && vk_gemm_cfg_usable(c, caps))
            return c;
    }
    return NULL;
}

vkasr_status vk_gemm_record(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_cfg *cfg) {
    struct err *e = &b->base.err;
    const struct vk_caps *caps = &b->d->caps;
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    if (M == 0 || N == 0)
        return VKASR_OK; /* nothing to write */
    if (cfg->wtype != a->w.type)
        return err_set(e, VKASR_ERR_INVALID_ARG, "linear: kernel config %s takes %s weights, w is %s", cfg->name,
                       cfg->wtype == BE_F16 ? "f16" : "f32", a->w.type == BE_F16 ? "f16" : "f32");
    if (!vk_gemm_cfg_usable(cfg, caps))
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "linear: kernel config %s cannot run on this device (needs %u invocations, %u bytes of "
                       "shared memory%s%s)",
                       cfg->name, cfg->wg, cfg->shared_bytes, cfg->wtype == BE_F16 ? ", f16" : "",
                       cfg->kind == VK_GEMM_COOPMAT ? ", NV cooperative matrices, subgroup size 32" : "");
    /* The kernels index tiles and rows in 32 bits (element offsets are 64-bit). */
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || tiles(M, N, cfg->bm, cfg->bn) > UINT32_MAX)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "linear: shape %lldx%lldx%lld exceeds the kernel's 32-bit tile indexing",
                       (long long)M, (long long)N, (long long)K);
    uint32_t flags = 0;
    if (K % 8 == 0 && a->x.addr % 16 == 0 && a->w.addr % 16 == 0)
        flags |= GEMM_FLAG_VEC;
    struct pc_gemm pc = {
        .x = a->x.addr, .w = a->w.addr, .bias = a->bias.addr, .res = a->res.addr, .y = a->y.addr,
        .M = (uint32_t)M, .N = (uint32_t)N, .K = (uint32_t)K, .act = (uint32_t)a->act, .alpha = a->alpha,
        .flags = flags,
    };
    uint32_t spec[6] = {cfg->wg, cfg->bm, cfg->bn, cfg->bk, cfg->tm, cfg->tn};
    struct vk_range rd[4];
    int nrd = 0;
    rd[nrd++] = vk_tensor_range(&a->x);
    rd[nrd++] = vk_tensor_range(&a->w);
    if (a->bias.addr)
        rd[nrd++] = vk_tensor_range(&a->bias);
    if (a->res.addr)
        rd[nrd++] = vk_tensor_range(&a->res);
    struct vk_range wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = cfg->prof,
                            .spv = cfg->spv,
                            .spec = spec,
                            .nspec = cfg->kind == VK_GEMM_SCALAR || cfg->kind == VK_GEMM_DIRECT ? 6 : 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, tiles(M, N, cfg->bm, cfg->bn), 1), 1, 1},
                            .reads = rd,
                            .nreads = nrd,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

vkasr_status vk_op_linear(struct vk_backend *b, const struct op_linear *a) {
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    if (M == 0 || N == 0)
        return VKASR_OK;
    const struct vk_gemm_cfg *cfg = vk_gemm_choose(&b->d->caps, M, N, K, a->w.type, a->matvec);
    if (!cfg)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "linear: no GEMM kernel for %s weights on this device%s", a->w.type == BE_F16 ? "f16" : "f32",
                       a->w.type == BE_F16 && !b->d->caps.f16 ? " (f16 weights need shaderFloat16 and 16-bit storage)"
                                                               : "");
    return vk_gemm_record(b, a, cfg);
}
