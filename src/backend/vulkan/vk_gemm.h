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
    VK_GEMM_DIRECT = 4,      /* gemm_direct.comp: no shared memory, for CPU drivers (lavapipe)  */
    VK_GEMM_I8 = 5,          /* gemm_coopmat_i8.comp: quantized weights as int8 rows, NV int8
                                cooperative matrices (vk_op_gemm_i8.c)                        */
    VK_GEMM_I8_EMU = 6       /* gemm_coopmat_i8.comp with emulated fragments: tests, VKASR_INT8=emu */
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

/* The linear kernels' push constants (shaders/common/linear.glsl's PC block). */
struct pc_gemm {
    uint64_t x, w, bias, res, y;
    uint32_t M, N, K;
    uint32_t act;
    float alpha;
    uint32_t flags;
    uint32_t k_slice, splits;
    uint64_t emu_sh;
    uint32_t emu_stride, pad_;
};
_Static_assert(sizeof(struct pc_gemm) == 88, "mirror of the PC block in shaders/common/linear.glsl");

#define GEMM_FLAG_VEC 1u  /* K % 8 == 0 and x, w 16-byte aligned: vector loads along K            */
#define GEMM_FLAG_YVEC 2u /* N % 4 == 0 and y, res, bias 16-byte aligned: 4-column epilogue      */
#define TYPE_X16 1u       /* spec constant 7 (linear.glsl)                                          */
#define TYPE_W16 2u
#define TYPE_Y16 4u
/* Emulated tensor-core variants run on at most this many workgroups (each needs its own stand-in
 * for shared memory in scratch device memory; the kernel loops grid-stride over the rest). */
#define GEMM_EMU_MAX_GROUPS 256u

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
/* The int8 kernel on quantized weights of type wt (gemm_coopmat_i8.comp on their int8 form, the same
 * kernel for every type; bk in bytes = values): x and w staged as int8, so a stage is (bm + bn) rows of
 * bk/16 + pad uvec4; its epilogue stage is the f16 kernel's. */
#define GEMM_I8(nm, kd, wt, sp, wm, wn, fm, fn, bk_, st, pad)                                              \
    {.name = nm, .prof = "linear_tc_i8", .kind = kd, .wtype = wt, .spv = sp, .spv_f16io = sp,               \
     .wg = 32 * (wm) * (wn), .bm = 16 * (wm) * (fm), .bn = 16 * (wn) * (fn), .bk = bk_, .tm = 0, .tn = 0,  \
     .stages = st,                                                                                      \
     .shared_bytes = GEMM_CM_SHARED(16 * (wm) * (fm), 16 * (wn) * (fn), (bk_) / 2, st, pad, (wm) * (wn), fn)}
#define T_I8_128x128_K64 2, 4, 4, 2, 64, 2, 1    /* 8 subgroups of 64x32, two stages of 64 bytes, 40 KiB */
#define T_I8_64x64_K64 2, 2, 2, 2, 64, 2, 1      /* 4 subgroups of 32x32, 20 KiB                    */
#define T_I8_128x128_K128 2, 4, 4, 2, 128, 1, 1  /* one stage of 128 bytes, 36 KiB                  */
#define T_I8_128x128W16_K64 4, 4, 2, 2, 64, 2, 1 /* 16 subgroups of 32x32, 512 invocations, 40 KiB (lab) */
#define I8(...) GEMM_I8(__VA_ARGS__)
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
/* Records one dispatch of a GEMM configuration (spv: its variant) over `groups` workgroups; an emulated
 * tensor-core configuration first gets its stand-in for shared memory from scratch (the groups capped at
 * GEMM_EMU_MAX_GROUPS), written through pc and appended to wr, which needs room for it. The caller's
 * mark releases that scratch. */
vkasr_status vk_gemm_dispatch(struct vk_backend *b, const struct vk_gemm_cfg *cfg, enum spv_id spv,
                              const uint32_t spec[8], struct pc_gemm *pc, uint32_t groups, const struct vk_range *rd,
                              int nrd, struct vk_range *wr, int nwr);
/* The int8 path of a quantized product with an I8 configuration (vk_op_gemm_i8.c; called by vk_gemm_record
 * once the arguments and the configuration are checked): makes the weight's int8 form on its first use,
 * then per chunk of x's rows (at most VK_I8_X_BYTES of int8 rows and scales: the op's own scratch,
 * be_memory.op_scratch_quant) quantizes them into scratch and records the int8 GEMM. */
#define VK_I8_X_BYTES (8u << 20)
vkasr_status vk_gemm_record_i8(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_cfg *cfg,
                               uint32_t flags, uint32_t types);
/* The int8 form of quantized weight w [N, K] (q8_0, q4_k, q5_k or q6_k; K % 32 == 0): w8 [N, K] int8 rows
 * followed by their f32 scales, each row w's dequantized row (qblock.c's values) requantized with one
 * scale (absmax / 127, quantize_rows.comp).
 * A model weight (in the weights arena, unchanged while the device lives) gets it once, made by
 * quantize_rows.comp on first use into the weights arena and waited for, so every backend of the device
 * finds it ready (not while a graph is being recorded: it cannot wait there). Any other w gets it
 * recorded into this backend's scratch (the caller's mark releases it). */
vkasr_status vk_i8_weight(struct vk_backend *b, const be_tensor *w, uint64_t *w8);
/* Records quantize_rows.comp over x [M, K] (f32 or f16, K % 4 == 0): M*K int8 at q8, then M f32 scales
 * (the int8 path's x; tests check it against the host's rule). */
vkasr_status vk_i8_quantize_rows(struct vk_backend *b, const be_tensor *x, uint64_t q8);

#endif
