/* vk_op_conv.c — host side of the convolutions: the subsampling's strided 3x3 convs (conv2d.comp, two
 * variants) and the conformer's depthwise time convolution (dwconv1d.comp), each with an f16 twin for
 * f16 x or y. Argument rules live in ops.c; this file only sizes grids and records dispatches. */
#include "vk_internal.h"

/* Workgroup size along channels: C is 256 (subsampling) or 1024 (conformer) in practice, so 64 keeps
 * all threads busy there; small C only wastes idle lanes. */
#define CONV_WG 64u
/* The kernels count channels in 32 bits (a lavapipe workaround, see conv2d.comp); a channel index plus
 * the grid stride (at most C + 63) must not wrap. */
#define CONV_MAX_C ((int64_t)1 << 30)
/* Output rows per workgroup on a CPU driver (all columns): the first subsampling conv of 17 s of audio
 * took lavapipe 0.7 s as 160,000 workgroups of 9 multiply-adds per invocation. */
#define CONV_CPU_ROWS 16u
/* Output columns per invocation on a GPU: each loads its channel's 9 taps (and, in a packed batch, finds
 * its row's image) once for these, instead of re-reading them for every column (figures:
 * docs/gpu-results.md, "Other kernels"). */
#define CONV_GPU_COLS 8u
/* Channels per invocation of conv2d_s2 (CPT in conv2d.comp): its channels read the same input
 * elements, loaded once for the four. */
#define CONV2D_CPT 4u

struct pc_conv2d {
    uint64_t x, w, b, y;
    int64_t x_row0, x_len, y_row0;
    int64_t hx, hy, wx, wo, c;
    uint32_t act, nseg;
    uint64_t x_seg, y_seg;
    uint32_t pad, unused; /* rows and columns before the image: 1, or 2 (causal) */
};
_Static_assert(sizeof(struct pc_conv2d) == 128, "mirror of conv2d.comp push constants");

static vkasr_status conv2d_record(struct vk_backend *b, const char *name, enum spv_id spv, enum spv_id spv_h,
                                  uint32_t cpt, const be_tensor *x,
                                  const be_tensor *w, const be_tensor *bias, const be_tensor *y, int64_t x_row0,
                                  int64_t x_len, int64_t y_row0, int act, const be_tensor *x_seg,
                                  const be_tensor *y_seg, bool causal) {
    int64_t Hy = y->ne[0], Wo = y->ne[1], C = y->ne[2];
    if (Hy == 0 || Wo == 0 || C == 0)
        return VKASR_OK;
    if (C > CONV_MAX_C)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op %s: %lld channels (the kernel allows at most 2^30)",
                       name, (long long)C);
    struct pc_conv2d pc = {
        .x = x->addr, .w = w->addr, .b = bias->addr, .y = y->addr,
        .x_row0 = x_row0, .x_len = x_len, .y_row0 = y_row0,
        .hx = x->ne[0], .hy = Hy, .wx = x->ne[1], .wo = Wo, .c = C,
        .act = (uint32_t)act, .nseg = x_seg->addr ? (uint32_t)(x_seg->ne[0] - 1) : 0,
        .x_seg = x_seg->addr, .y_seg = y_seg->addr, .pad = causal ? 2u : 1u,
    };
    uint32_t wg = CONV_WG;
    struct vk_io io;
    TRY(vk_io_variant(b, name, spv, spv_h, wg, x->type, y->type, &io));
    /* A GPU gets a workgroup per output row, CONV_GPU_COLS columns and channel block; a CPU driver, which
     * pays for each workgroup, a few fat ones (the kernel loops grid-stride over rows and columns: every
     * output is the same instructions whatever the grid). */
    const bool cpu = b->d->caps.cpu;
    struct vk_range rd[5] = {vk_tensor_range(x), vk_tensor_range(w), vk_tensor_range(bias), vk_tensor_range(x_seg),
                             vk_tensor_range(y_seg)};
    struct vk_range wr = vk_tensor_range(y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = name,
                            .spv = io.spv,
                            .spec = io.spec,
                            .nspec = io.nspec,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_dim(b->d, 0, ((uint64_t)C + cpt - 1) / cpt, wg),
                                       vk_groups_dim(b->d, 1, (uint64_t)Wo, cpu ? (uint64_t)Wo : CONV_GPU_COLS),
                                       vk_groups_dim(b->d, 2, (uint64_t)Hy, cpu ? CONV_CPU_ROWS : 1)},
                            .reads = rd,
                            .nreads = x_seg->addr ? 5 : 3,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

vkasr_status vk_op_conv2d_s2(struct vk_backend *b, const struct op_conv2d_s2 *a) {
    return conv2d_record(b, "conv2d_s2", SPV_conv2d_s2, SPV_conv2d_s2_h, CONV2D_CPT, &a->x, &a->w, &a->b, &a->y,
                         a->x_row0, a->x_len, a->y_row0, a->act, &a->x_seg, &a->y_seg, a->causal);
}

vkasr_status vk_op_dwconv2d_s2(struct vk_backend *b, const struct op_dwconv2d_s2 *a) {
    return conv2d_record(b, "dwconv2d_s2", SPV_dwconv2d_s2, SPV_dwconv2d_s2_h, 1, &a->x, &a->w, &a->b, &a->y,
                         a->x_row0, a->x_len, a->y_row0, a->act, &a->x_seg, &a->y_seg, a->causal);
}

struct pc_dwconv1d {
    uint64_t x, w, b, y;
    int64_t t, c, k;
    uint32_t act, nseg;
    uint64_t seg;
    int64_t row0;
    int64_t lpad; /* rows before t a tap reaches: K/2, or K-1 (causal) */
};
_Static_assert(sizeof(struct pc_dwconv1d) == 88, "mirror of dwconv1d.comp push constants");

#define DWCONV1D_TT 8u /* time steps per workgroup block (TT in dwconv1d.comp) */

vkasr_status vk_op_dwconv1d(struct vk_backend *b, const struct op_dwconv1d *a) {
    int64_t T = a->x.ne[0], C = a->x.ne[1];
    if (T == 0 || C == 0)
        return VKASR_OK;
    if (C > CONV_MAX_C)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "op dwconv1d: %lld channels (the kernel allows at most 2^30)", (long long)C);
    struct pc_dwconv1d pc = {
        .x = a->x.addr, .w = a->w.addr, .b = a->b.addr, .y = a->y.addr,
        .t = T, .c = C, .k = a->w.ne[1],
        .act = (uint32_t)a->act, .nseg = a->seg.addr ? (uint32_t)(a->seg.ne[0] - 1) : 0, .seg = a->seg.addr,
        .row0 = a->row0, .lpad = a->causal ? a->w.ne[1] - 1 : a->w.ne[1] / 2,
    };
    uint32_t wg = CONV_WG;
    struct vk_io io;
    TRY(vk_io_variant(b, "dwconv1d", SPV_dwconv1d, SPV_dwconv1d_h, wg, a->x.type, a->y.type, &io));
    struct vk_range rd[4] = {vk_tensor_range(&a->x), vk_tensor_range(&a->w), vk_tensor_range(&a->b),
                             vk_tensor_range(&a->seg)};
    struct vk_range wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "dwconv1d",
                            .spv = io.spv,
                            .spec = io.spec,
                            .nspec = io.nspec,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_dim(b->d, 0, (uint64_t)C, wg),
                                       vk_groups_dim(b->d, 1, (uint64_t)T, DWCONV1D_TT), 1},
                            .reads = rd,
                            .nreads = a->seg.addr ? 4 : 3,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}
