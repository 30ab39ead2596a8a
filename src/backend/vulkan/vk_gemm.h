/* vk_gemm.h — kernel selection for the linear op (vk_op_gemm.c): the tile configurations of the scalar
 * GEMM (gemm.comp), of the tensor-core GEMM (gemm_coopmat.comp), of the matrix-vector kernel
 * (gemv.comp) and of the barrier-free kernel for CPU drivers (gemm_direct.comp), the pure function
 * that picks one
 * for a device and a shape, and a recorder that runs a given configuration (tests and the benchmark
 * force configurations through it; the network only calls vk_op_linear). */
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
    const char *name;        /* e.g. "cm128x128": for --cfg in the benchmark and test messages */
    const char *prof;        /* dispatch name in profiles                                     */
    enum vk_gemm_kernel kind;
    be_dtype wtype;          /* weight type the variant reads                                 */
    enum spv_id spv;
    uint32_t wg;             /* workgroup size (spec constant 0)                              */
    uint32_t bm, bn, bk;     /* output tile and K step                                        */
    uint32_t tm, tn;         /* scalar: outputs per invocation (spec constants 4, 5)          */
    uint32_t shared_bytes;   /* shared memory the variant declares                            */
};

/* Every configuration this build has, in no particular order; *n receives the count. */
const struct vk_gemm_cfg *vk_gemm_configs(size_t *n);
/* The configuration called `name` (NULL if none). */
const struct vk_gemm_cfg *vk_gemm_find(const char *name);
/* Whether a configuration can run on a device (features, subgroup size, limits). */
bool vk_gemm_cfg_usable(const struct vk_gemm_cfg *c, const struct vk_caps *caps);
/* The configuration vk_op_linear uses for an M x N x K product with weights of type wtype (matvec:
 * the op's hint); NULL when none can run (f16 weights on a device without f16). Pure: depends on
 * its arguments only. Without the hint, configurations chosen for different M compute a row
 * identically. */
const struct vk_gemm_cfg *vk_gemm_choose(const struct vk_caps *caps, int64_t M, int64_t N, int64_t K,
                                         be_dtype wtype, bool matvec);
/* Records the linear op with a given configuration (arguments already validated). Errors if the
 * configuration cannot run on this device or does not take this weight type. */
vkasr_status vk_gemm_record(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_cfg *cfg);

#endif
