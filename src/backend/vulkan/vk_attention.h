/* vk_attention.h — kernel selection for the fused relative-position attention (vk_op_attention.c):
 * the scalar kernel (attention.comp), its barrier-free twin for CPU drivers (attention_rows.comp), a
 * workgroup per query row for rows of few keys on GPUs (attention_rows_group.comp) and
 * the tensor-core kernels for the op's f16 mode (attention_coopmat.comp; the lab's older variants and
 * emulated twins, tests/vk_lab.c), the pure choice function, and a recorder that runs a given
 * configuration (tests and benchmarks force configurations through it). */
#ifndef VKASR_VK_ATTENTION_H
#define VKASR_VK_ATTENTION_H

#include "vk_internal.h"

enum vk_att_kernel {
    VK_ATT_SCALAR = 0,      /* attention.comp: f32 FMA, any device                                  */
    VK_ATT_COOPMAT = 1,     /* attention_coopmat.comp: NV cooperative matrices, subgroup size 32    */
    VK_ATT_COOPMAT_EMU = 2, /* attention_coopmat.comp with emulated fragments: tests only           */
    VK_ATT_ROWS = 3,        /* attention_rows.comp: a query row per invocation, no barriers (CPUs)  */
    VK_ATT_ROWS_GROUP = 4   /* attention_rows_group.comp: a (row, head) per 32-invocation workgroup,
                               for rows of few keys on GPUs (the streaming step's q_pos form)       */
};

/* Keys one query row of attention_rows.comp may score: its key loop is the only loop llvmpipe counts
 * against its limit of 65535 iterations per invocation (a few to spare for the rest). */
#define VK_ATT_ROWS_MAX_KEYS 65000

struct vk_att_cfg {
    const char *name;       /* e.g. "cms8xqmb_dk128": for the benchmark's CONFIG and test messages  */
    const char *prof;       /* dispatch name in profiles                                           */
    enum vk_att_kernel kind;
    enum spv_id spv;        /* all tensors f32 (the tensor-core kernels: any types)                */
    enum spv_id spv_h;      /* some tensor f16 (16-bit storage)                                    */
    uint32_t wg;            /* workgroup size (spec constant 0)                                    */
    uint32_t bq;            /* query rows per workgroup                                            */
    uint32_t max_dk;        /* widest head the variant takes                                       */
    uint32_t shared_bytes;  /* shared memory the variant declares                                  */
    uint32_t row_lanes;     /* > 0: a query row's softmax invocations meet through subgroup shuffles
                               (attention_coopmat.comp -DROW_SHUFFLE): this many adjacent lanes    */
};

/* Rows of the configuration tables (vk_op_attention.c; the lab's, tests/vk_lab.c).
 * Tensor-core kernel (attention_coopmat.comp): shared memory for NWARP subgroups and head width DKP,
 * mirroring the shader's layout in uvec4 units plus three per-row float arrays and a flag (plus the
 * emulation's A-fragment exchange). */
#define ATT_CM_DKS(dkp) ((dkp) / 8 + 1)
/* ng: row groups of 16 query rows (nw subgroups, or nw / 2 with SPLIT) */
#define ATT_CM_UVEC4(ng, dkp) ((16 * (ng) + 16) * ATT_CM_DKS(dkp) + 2 * 16 * ATT_CM_DKS(dkp) + (ng) * 16 * (5 + 9) + (ng) * 16 * 3)
#define ATT_CM_SHARED(ng, nw, dkp, emu) (16u * ATT_CM_UVEC4(ng, dkp) + 3u * 4u * 16u * (ng) + 4u + ((emu) ? 512u * (nw) : 0u))
#define ATT_CM_ROW(nm, kd, sp, nw, ng, dkp, lanes)                                                         \
    {.name = nm, .prof = "relpos_attention_tc", .kind = kd, .spv = sp, .spv_h = sp, .wg = 32u * (nw),     \
     .bq = 16u * (ng), .max_dk = dkp,                                                                   \
     .shared_bytes = ATT_CM_SHARED(ng, nw, dkp, (kd) == VK_ATT_COOPMAT_EMU), .row_lanes = lanes}
/* a subgroup per 16 query rows */
#define ATT_COOPMAT(nm, kd, sp, nw, dkp) ATT_CM_ROW(nm, kd, sp, nw, nw, dkp, 0)
/* SPLIT: two subgroups per 16 query rows */
#define ATT_COOPMAT_SPLIT(nm, kd, sp, nw, dkp) ATT_CM_ROW(nm, kd, sp, nw, (nw) / 2, dkp, 0)
/* SPLIT with ROW_SHUFFLE: the softmax's four invocations per row meet through subgroup shuffles */
#define ATT_COOPMAT_SPLIT_SHUFFLE(nm, kd, sp, nw, dkp) ATT_CM_ROW(nm, kd, sp, nw, (nw) / 2, dkp, 4)

/* Every configuration this build has (the registered lab's table when there is one, vk_lab.h); *n
 * receives the count. */
const struct vk_att_cfg *vk_att_configs(size_t *n);
/* The configuration called `name` (NULL if none). */
const struct vk_att_cfg *vk_att_find(const char *name);
/* Whether a configuration can run on a device (features, subgroup size, limits). */
bool vk_att_cfg_usable(const struct vk_att_cfg *c, const struct vk_caps *caps);
/* Whether a configuration computes the op's f16 mode on tensor cores (or their emulation). */
bool vk_att_cfg_tensor_cores(const struct vk_att_cfg *c);
/* The configuration vk_op_relpos_attention uses for head width dk; f16 is the op's f16 flag (tensor
 * cores are used only when the op allows f16 products); force is VKASR_ATTENTION_KERNEL's configuration
 * (vk_att_override) or NULL, taken where it fits. NULL when none can run. Pure. */
const struct vk_att_cfg *vk_att_choose(const struct vk_caps *caps, const struct vk_att_cfg *force, int64_t dk,
                                       bool f16);
/* VKASR_ATTENTION_KERNEL=NAME: the configuration of that name if this device can run it, else NULL
 * (an unknown or unusable name is logged as a warning and ignored). */
const struct vk_att_cfg *vk_att_override(const struct vk_caps *caps, const struct logger *lg);
/* Records the op with a given configuration (arguments already validated). Errors if the
 * configuration cannot run on this device, does not take this head width, or the op has f16
 * tensors and the device no 16-bit storage. */
vkasr_status vk_att_record(struct vk_backend *b, const struct op_relpos_attention *a, const struct vk_att_cfg *cfg);

#endif
