/* vk_gemm.h — kernel selection for the linear op: the configurations of gemm.comp, gemm_coopmat.comp
 * (split-K through gemm_reduce.comp), gemv.comp and gemm_direct.comp; the pure planner
 * (vk_gemm_configs.c, with the choice table); the recorder of a given plan (vk_op_gemm.c; tests and
 * benchmarks force plans through it, the network calls vk_op_linear). */
#ifndef VKASR_VK_GEMM_H
#define VKASR_VK_GEMM_H

#include "vk_internal.h"

enum vk_gemm_kernel {
    VK_GEMM_SCALAR = 0,      /* gemm.comp: shared-memory tiles, f32 FMA, any device            */
    VK_GEMM_COOPMAT = 1,     /* gemm_coopmat.comp: NV cooperative matrices, subgroup size 32   */
    VK_GEMM_COOPMAT_EMU = 2, /* gemm_coopmat.comp with emulated fragments: tests only          */
    VK_GEMM_GEMV = 3,        /* gemv.comp: 32 invocations per output column, few rows, any device */
    VK_GEMM_DIRECT = 4       /* gemm_direct.comp: no shared memory, for CPU drivers (lavapipe)  */
};

struct vk_gemm_cfg {
    const char *name;        /* e.g. "cm128x128_k32": for --cfg in the benchmark and test messages */
    const char *prof;        /* dispatch name in profiles                                     */
    enum vk_gemm_kernel kind;
    be_dtype wtype;          /* weight type the variant reads                                 */
    enum spv_id spv;         /* the variant for x, w, y of f32 (f16 weights: the F16_TYPES one) */
    enum spv_id spv_f16io;   /* the F16_TYPES variant: f16 x or y (types by spec constant 7)  */
    uint32_t wg;             /* workgroup size (spec constant 0)                              */
    uint32_t bm, bn, bk;     /* output tile and K step                                        */
    uint32_t tm, tn;         /* scalar: outputs per invocation (spec constants 4, 5)          */
    uint32_t stages;         /* tensor cores: shared-memory stages of the K loop (1 or 2)     */
    uint32_t shared_bytes;   /* shared memory the variant declares (emulated: the same layout,
                                in device memory per workgroup instead)                       */
};

/* A product's plan: the configuration and how many slices K is split into (tensor cores only; the
 * slices are added by gemm_reduce.comp in order, which rounds differently from splits = 1). */
struct vk_gemm_plan {
    const struct vk_gemm_cfg *cfg; /* NULL: no kernel can run the product here */
    uint32_t splits;               /* >= 1                                     */
};

/* Rows of the configuration tables (vk_gemm_configs.c; the lab's emulated twins, tests/vk_lab.c).
 * Shared memory of the tensor-core kernel (gemm_coopmat.comp: SH_SIZE uvec4): the larger of the K
 * stages, (bm + bn) rows of bk/8 + pad uvec4 each, and the epilogue stage, nwarps rows of 16 x
 * (fn*16/4 + pad) uvec4. */
#define GEMM_CM_STAGES_U4(bm, bn, bk, st, pad) ((st) * ((bm) + (bn)) * ((bk) / 8 + (pad)))
#define GEMM_CM_EPI_U4(nw, fn, pad) ((nw) * 16 * ((fn) * 4 + (pad)))
#define GEMM_CM_SHARED(bm, bn, bk, st, pad, nw, fn)                                                        \
    ((uint32_t)(16 * (GEMM_CM_STAGES_U4(bm, bn, bk, st, pad) > GEMM_CM_EPI_U4(nw, fn, pad)                      \
                          ? GEMM_CM_STAGES_U4(bm, bn, bk, st, pad)                                          \
                          : GEMM_CM_EPI_U4(nw, fn, pad))))

/* gemv.comp: tiles of mr rows x wg/32 groups of nc columns, 32 invocations per group, partial sums of
 * mr rows x nc columns in shared memory. nc > 1: wide groups (spec 5; bit for bit the one-column
 * groups' results), x loaded once for nc columns, for many rows. */
#define GEMV_WIDE(nm, wt, w_, mr, nc)                                                                   \
    {.name = nm, .prof = "linear_gemv", .kind = VK_GEMM_GEMV, .wtype = wt,                             \
     .spv = (wt) == BE_F16 ? SPV_gemv_h : SPV_gemv_f32, .spv_f16io = SPV_gemv_h, .wg = w_, .bm = mr,    \
     .bn = (w_) / 32 * (nc), .bk = 0, .tm = 0, .tn = nc, .stages = 0, .shared_bytes = 4 * (mr) * (w_) * (nc)}
/* One column per group. */
#define GEMV(nm, wt, w_, mr) GEMV_WIDE(nm, wt, w_, mr, 1)

/* wm x wn subgroups of fm x fn fragments, K step bk, st shared stages, row pad (must match the
 * variant's defines in shaders/shaders.cmake). */
#define GEMM_COOPMAT(nm, kd, sp, wm, wn, fm, fn, bk_, st, pad) GEMM_COOPMAT_W(nm, kd, BE_F16, sp, wm, wn, fm, fn, bk_, st, pad)
/* The same with weights of type wt (a block type: the -DWQ_<type> variant, linear_tc_q in profiles). */
#define GEMM_COOPMAT_W(nm, kd, wt, sp, wm, wn, fm, fn, bk_, st, pad)                                          \
    {.name = nm, .prof = (wt) == BE_F16 ? "linear_tc" : "linear_tc_q", .kind = kd, .wtype = wt, .spv = sp,  \
     .spv_f16io = sp,                                                                                   \
     .wg = 32 * (wm) * (wn), .bm = 16 * (wm) * (fm), .bn = 16 * (wn) * (fn), .bk = bk_, .tm = 0, .tn = 0, \
     .stages = st,                                                                                      \
     .shared_bytes = GEMM_CM_SHARED(16 * (wm) * (fm), 16 * (wn) * (fn), bk_, st, pad, (wm) * (wn), fn)}

/* Tensor-core shapes: WARPS_M, WARPS_N, FM, FN, BK, STAGES, SK_PAD of the variants in
 * shaders/shaders.cmake (shared memory: the budget comment of gemm_coopmat.comp). Each real variant
 * and its emulated twin share one shape, so the lavapipe tests of the twin check the numbers. */
#define T_64x64_K32 2, 2, 2, 2, 32, 2, 1       /* 4 subgroups of 32x32, 20 KiB          */
#define T_64x64_K64 2, 2, 2, 2, 64, 2, 1       /* 36 KiB                                */
#define T_32x64_K64 1, 2, 2, 2, 64, 2, 1       /* 2 subgroups, for few rows: 27 KiB     */
#define T_16x64_K128 1, 4, 1, 1, 128, 2, 1     /* 4 subgroups of 16x16, K steps of 128: the decoder's few-row products, 42.5 KiB */
#define T_128x64_K32 2, 2, 4, 2, 32, 2, 1      /* 4 subgroups of 64x32, 30 KiB          */
#define T_64x128_K32 2, 2, 2, 4, 32, 2, 1      /* 4 subgroups of 32x64, 30 KiB          */
#define T_128x128_K32 2, 4, 4, 2, 32, 2, 1     /* 8 subgroups of 64x32, 40 KiB          */
#define T_128x128W16_K32 4, 4, 2, 2, 32, 2, 1  /* 16 subgroups of 32x32, 512 invocations, 40 KiB (lab) */
#define T_128x128W16_K64 4, 4, 2, 2, 64, 1, 1  /* the same, one stage of BK 64, 36 KiB  */
#define T_128x128W4_K32 2, 2, 4, 4, 32, 2, 1   /* 4 subgroups of 64x64, 40 KiB          */
#define T_128x128_K64 2, 4, 4, 2, 64, 1, 1     /* one stage of BK 64, 36 KiB            */
#define T_192x128_K64 3, 4, 4, 2, 64, 1, 1     /* 12 subgroups of 64x32, 384 invocations, 45 KiB */
#define T_128x256_K32 2, 4, 4, 4, 32, 1, 1     /* 8 subgroups of 64x64, one stage, 34 KiB */
#define T_256x128_K32 4, 2, 4, 4, 32, 1, 1     /* 34 KiB (lab: cm256x128w16 replaced it)  */
#define T_256x128W16_K32 4, 4, 4, 2, 32, 1, 1  /* 16 subgroups of 64x32, 512 invocations, 36 KiB (lab) */
#define T_128x256NP_K32 2, 4, 4, 4, 32, 2, 0   /* two stages without row padding, 48 KiB */
#define CM(...) GEMM_COOPMAT(__VA_ARGS__) /* expands the T_* shape before COOPMAT takes its arguments */
#define CMQ(...) GEMM_COOPMAT_W(__VA_ARGS__) /* the same for quantized weights: (name, kind, type, spv, shape) */

/* Every configuration this build has (the registered lab's table when there is one, vk_lab.h), in no
 * particular order; *n receives the count. */
const struct vk_gemm_cfg *vk_gemm_configs(size_t *n);
/* The configuration called `name` (NULL if none). */
const struct vk_gemm_cfg *vk_gemm_find(const char *name);
/* Whether a configuration can run on a device (features, subgroup size, limits). */
bool vk_gemm_cfg_usable(const struct vk_gemm_cfg *c, const struct vk_caps *caps);
/* The plan vk_op_linear uses for an M x N x K product with weights of type wtype (matvec: the op's
 * hint); plan.cfg is NULL when none can run (f16 weights on a device without f16). The activation and
 * output types do not change it. Pure. A row never depends on M: the configurations chosen for
 * different M add a product's terms in the same order, K splits depend on N and K only, and hinted
 * products take gemv.comp (CPU drivers: gemm_direct.comp) at any M. */
struct vk_gemm_plan vk_gemm_choose(const struct vk_caps *caps, int64_t M, int64_t N, int64_t K, be_dtype wtype,
                                   bool matvec);
/* Records the linear op with a given plan (arguments already validated). Errors if the configuration
 * cannot run on this device, does not take this weight type, or cannot split K (not tensor cores). */
vkasr_status vk_gemm_record(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_plan *plan);

#endif
