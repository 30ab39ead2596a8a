/* vk_op_attention.c — host side of the fused relative-position attention kernel (attention.comp):
 * one dispatch, no scratch (scores stay in shared memory, so memory is linear in T). Only the scalar
 * f32 path exists; a tensor-core variant would be chosen in pick_path(). */
#include <math.h>

#include "vk_internal.h"

/* Mirrors of the kernel's constants (shaders/attention.comp). */
#define ATT_WG 128u           /* workgroup size the kernel's thread maps are built for          */
#define ATT_BQ 32u            /* query rows per workgroup                                        */
#define ATT_DC 32u            /* dk chunk: the output accumulator holds NCH = ceil(dk/DC) chunks */
#define ATT_MAX_NCH 8u        /* register budget: 8 chunks x 8 floats per thread -> dk <= 256    */
#define ATT_SHARED_BYTES 25596u

struct pc_attention {
    uint64_t q, k, v, p, bu, bv, y;
    uint32_t T, D, dk, H, P, center, n_valid, w;
    float scale;
    uint32_t pad_;
};
_Static_assert(sizeof(struct pc_attention) == 96, "mirror of attention.comp push constants");

enum att_path { ATT_SCALAR };

static enum att_path pick_path(const struct vk_device *d) {
    (void)d; /* later: a cooperative-matrix kernel when d->caps.coopmat_nv */
    return ATT_SCALAR;
}

static bool overlaps(const be_tensor *a, const be_tensor *b) {
    uint64_t na = be_nbytes(a), nb = be_nbytes(b);
    return na && nb && a->addr < b->addr + nb && b->addr < a->addr + na;
}

vkasr_status vk_op_relpos_attention(struct vk_backend *b, const struct op_relpos_attention *a) {
    struct err *e = &b->base.err;
    struct vk_device *d = b->d;
    int64_t T = a->q.ne[0], D = a->q.ne[1], H = a->heads, dk = D / H, P = a->p.ne[0];
    if (T == 0 || D == 0)
        return VKASR_OK;
    if (dk > (int64_t)(ATT_MAX_NCH * ATT_DC))
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: head width dk = %lld (D = %lld / heads = %lld) exceeds the Vulkan "
                       "kernel's limit of %u",
                       (long long)dk, (long long)D, (long long)H, ATT_MAX_NCH * ATT_DC);
    /* The kernel indexes rows and columns in 32 bits (offsets are 64-bit) and forms center - i + j. */
    if (T > INT32_MAX / 2 || P > INT32_MAX / 2 || D > INT32_MAX)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: q [%lld, %lld] / p [%lld rows] too large for the kernel's 32-bit indices",
                       (long long)T, (long long)D, (long long)P);
    /* Every output row reads all keys and position rows of its head: y may not overlap any input. */
    const be_tensor *in[] = {&a->q, &a->k, &a->v, &a->p, &a->bias_u, &a->bias_v};
    static const char *const in_name[] = {"q", "k", "v", "p", "bias_u", "bias_v"};
    for (int i = 0; i < 6; i++)
        if (overlaps(&a->y, in[i]))
            return err_set(e, VKASR_ERR_INVALID_ARG, "relpos_attention: y must not overlap %s", in_name[i]);
    if (d->caps.max_shared < ATT_SHARED_BYTES || d->caps.max_wg_invocations < ATT_WG)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "relpos_attention: the kernel needs %u bytes of shared memory and %u invocations per "
                       "workgroup; the device offers %u and %u",
                       ATT_SHARED_BYTES, ATT_WG, d->caps.max_shared, d->caps.max_wg_invocations);

    switch (pick_path(d)) {
    case ATT_SCALAR: break;
    }
    /* window 0 (full) and windows wider than the sequence are the same band: |i - j| <= T. */
    int64_t w = a->window > 0 && a->window < T ? a->window : T;
    struct pc_attention pc = {
        .q = a->q.addr,
        .k = a->k.addr,
        .v = a->v.addr,
        .p = a->p.addr,
        .bu = a->bias_u.addr,
        .bv = a->bias_v.addr,
        .y = a->y.addr,
        .T = (uint32_t)T,
        .D = (uint32_t)D,
        .dk = (uint32_t)dk,
        .H = (uint32_t)H,
        .P = (uint32_t)P,
        .center = (uint32_t)((P - 1) / 2),
        .n_valid = (uint32_t)a->n_valid,
        .w = (uint32_t)w,
        .scale = (float)(1.0 / sqrt((double)dk)),
    };
    uint32_t spec[2] = {ATT_WG, (uint32_t)((dk + ATT_DC - 1) / ATT_DC)};
    uint64_t qblocks = ((uint64_t)T + ATT_BQ - 1) / ATT_BQ;
    struct vk_range rd[6], wr = vk_tensor_range(&a->y);
    for (int i = 0; i < 6; i++)
        rd[i] = vk_tensor_range(in[i]);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "relpos_attention",
                            .spv = SPV_attention,
                            .spec = spec,
                            .nspec = 2,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_dim(d, 0, qblocks, 1), vk_groups_dim(d, 1, (uint64_t)H, 1), 1},
                            .reads = rd,
                            .nreads = 6,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}
