/* vk_op_eltwise.c — host side of the element-wise and layout kernels: unary.comp, binary.comp,
 * glu.comp (f32 or f16 x and y), layout.comp (pad, permute), posenc.comp (the positional rows).
 * Argument rules live in ops.c; this file only maps arguments to push constants, grids and the byte
 * ranges each dispatch touches. */
#include <math.h>
#include <string.h>

#include "common/half.h"
#include "vk_internal.h"

struct pc_unary {
    uint64_t x, y, n;
    uint32_t act;
    float alpha;
};
_Static_assert(sizeof(struct pc_unary) == 32, "mirror of unary.comp push constants");

vkasr_status vk_op_unary(struct vk_backend *b, const struct op_unary *a) {
    uint64_t n = be_numel(&a->x);
    if (n == 0)
        return VKASR_OK;
    struct pc_unary pc = {a->x.addr, a->y.addr, n, (uint32_t)a->act, a->alpha};
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd = vk_tensor_range(&a->x), wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "unary",
                            .spv = SPV_unary,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, n, wg), 1, 1},
                            .reads = &rd,
                            .nreads = 1,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

/* ---- posenc (posenc.comp) --------------------------------------------------------------------- */

struct pc_posenc {
    uint64_t inv_freq, y, n, half_c;
    int64_t r0;
};
_Static_assert(sizeof(struct pc_posenc) == 40, "mirror of posenc.comp push constants");

vkasr_status vk_op_posenc(struct vk_backend *b, const struct op_posenc *a) {
    const uint64_t pairs = be_numel(&a->y) / 2;
    if (pairs == 0)
        return VKASR_OK;
    struct pc_posenc pc = {a->inv_freq.addr, a->y.addr, (uint64_t)a->y.ne[0], (uint64_t)a->y.ne[1] / 2, a->r0};
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd = vk_tensor_range(&a->inv_freq), wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "posenc",
                            .spv = SPV_posenc,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, pairs, wg), 1, 1},
                            .reads = &rd,
                            .nreads = 1,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

/* ---- binary (binary.comp) --------------------------------------------------------------------- */

struct pc_binary {
    uint64_t a, b, y, n, nb;
    uint32_t kind, act;
    float alpha, beta;
};
_Static_assert(sizeof(struct pc_binary) == 56, "mirror of binary.comp push constants");

vkasr_status vk_op_binary(struct vk_backend *b, const struct op_binary *a) {
    uint64_t n = be_numel(&a->a);
    if (n == 0)
        return VKASR_OK;
    struct pc_binary pc = {a->a.addr, a->b.addr,          a->y.addr, n,       be_numel(&a->b),
                           (uint32_t)a->kind, (uint32_t)a->act, a->alpha, a->beta};
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd[2] = {vk_tensor_range(&a->a), vk_tensor_range(&a->b)}, wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "binary",
                            .spv = SPV_binary,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, n, wg), 1, 1},
                            .reads = rd,
                            .nreads = 2,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

/* ---- glu (glu.comp) --------------------------------------------------------------------------- */

struct pc_glu {
    uint64_t x, y, n, cols;
};
_Static_assert(sizeof(struct pc_glu) == 32, "mirror of glu.comp push constants");

vkasr_status vk_op_glu(struct vk_backend *b, const struct op_glu *a) {
    uint64_t n = be_numel(&a->y);
    if (n == 0)
        return VKASR_OK;
    struct pc_glu pc = {a->x.addr, a->y.addr, n, (uint64_t)a->y.ne[1]};
    uint32_t wg = vk_wg_size(b->d);
    struct vk_io io;
    TRY(vk_io_variant(b, "glu", SPV_glu, SPV_glu_h, wg, a->x.type, a->y.type, &io));
    struct vk_range rd = vk_tensor_range(&a->x), wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "glu",
                            .spv = io.spv,
                            .spec = io.spec,
                            .nspec = io.nspec,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, n, wg), 1, 1},
                            .reads = &rd,
                            .nreads = 1,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

/* ---- pad and permute (layout.comp) ------------------------------------------------------------ */

/* Shapes are padded to 4 dims with leading 1s (the kernel always works on 4). */
static void shape4(const be_tensor *t, uint64_t *ne4) {
    int lead = BE_MAX_DIMS - t->nd;
    for (int d = 0; d < BE_MAX_DIMS; d++)
        ne4[d] = d < lead ? 1 : (uint64_t)t->ne[d - lead];
}

static bool layout_esize_ok(be_dtype t) { return be_dtype_size(t) == 2 || be_dtype_size(t) == 4; }

/* Work units of layout.comp: elements for 4-byte types, aligned 32-bit words for 2-byte types. */
static uint64_t layout_units(const be_tensor *y, uint64_t n) {
    if (be_dtype_size(y->type) == 4)
        return n;
    uint64_t off = (y->addr >> 1) & 1;
    return (n + off + 1) / 2;
}

/* The bytes layout.comp may write: for 2-byte types whole words, since the boundary words are
 * updated in place (their other half is preserved, but the barrier tracking must see the word). */
static struct vk_range layout_write_range(const be_tensor *y) {
    struct vk_range r = vk_tensor_range(y);
    if (be_dtype_size(y->type) == 2 && r.bytes) {
        uint64_t lo = r.addr & ~3ull, hi = (r.addr + r.bytes + 3) & ~3ull;
        r = (struct vk_range){lo, hi - lo};
    }
    return r;
}

static vkasr_status layout_record(struct vk_backend *b, const char *name, enum spv_id spv, const void *pc,
                                  uint32_t pc_size, const be_tensor *x, const be_tensor *y) {
    uint64_t units = layout_units(y, be_numel(y));
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd = vk_tensor_range(x), wr = layout_write_range(y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = name,
                            .spv = spv,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = pc,
                            .pc_size = pc_size,
                            .groups = {vk_groups_x(b->d, units, wg), 1, 1},
                            .reads = &rd,
                            .nreads = 1,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

struct pc_pad {
    uint64_t x, y;
    uint64_t yne[4], xne[4], before[4];
    uint32_t value, esize;
};
_Static_assert(sizeof(struct pc_pad) == 120, "mirror of layout.comp (PAD) push constants");

vkasr_status vk_op_pad(struct vk_backend *b, const struct op_pad *a) {
    CHECK_OR_RETURN(&b->base.err, a->y.nd <= BE_MAX_DIMS && layout_esize_ok(a->y.type));
    if (be_numel(&a->y) == 0)
        return VKASR_OK;
    struct pc_pad pc = {.x = a->x.addr, .y = a->y.addr, .esize = (uint32_t)be_dtype_size(a->y.type)};
    shape4(&a->y, pc.yne);
    shape4(&a->x, pc.xne);
    int lead = BE_MAX_DIMS - a->y.nd;
    for (int d = 0; d < a->y.nd; d++)
        pc.before[lead + d] = (uint64_t)a->before[d];
    /* The fill value in the tensor's own bits, converted exactly as the reference does. */
    if (a->y.type == BE_F32) {
        memcpy(&pc.value, &a->value, 4);
    } else if (a->y.type == BE_F16) {
        pc.value = float_to_half(a->value);
    } else {
        /* (int)value; NaN and out-of-range values (undefined in C) are pinned instead of trapping. */
        float v = a->value;
        int32_t iv = isnan(v) ? 0 : v >= 2147483648.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
        memcpy(&pc.value, &iv, 4);
    }
    return layout_record(b, "pad", SPV_pad, &pc, sizeof pc, &a->x, &a->y);
}

struct pc_permute {
    uint64_t x, y;
    uint64_t yne[4], xst[4];
    uint32_t esize, unused;
};
_Static_assert(sizeof(struct pc_permute) == 88, "mirror of layout.comp (PERMUTE) push constants");

vkasr_status vk_op_permute(struct vk_backend *b, const struct op_permute *a) {
    CHECK_OR_RETURN(&b->base.err, a->y.nd <= BE_MAX_DIMS && layout_esize_ok(a->y.type));
    if (be_numel(&a->y) == 0)
        return VKASR_OK;
    struct pc_permute pc = {.x = a->x.addr, .y = a->y.addr, .esize = (uint32_t)be_dtype_size(a->y.type)};
    shape4(&a->y, pc.yne);
    int nd = a->x.nd, lead = BE_MAX_DIMS - nd;
    uint64_t xs[BE_MAX_DIMS], s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xs[d] = s;
        s *= (uint64_t)a->x.ne[d];
    }
    for (int d = 0; d < nd; d++)
        pc.xst[lead + d] = xs[a->perm[d]];
    return layout_record(b, "permute", SPV_permute, &pc, sizeof pc, &a->x, &a->y);
}

/* ---- row copies (copy_rows.comp) ---------------------------------------------------------------- */

struct pc_copy_rows {
    uint64_t x, y, src, dst, n, rx, ry, wpr;
};
_Static_assert(sizeof(struct pc_copy_rows) == 64, "mirror of copy_rows.comp push constants");

vkasr_status vk_op_copy_rows(struct vk_backend *b, const struct op_copy_rows *a) {
    const uint64_t wpr = (uint64_t)a->x.ne[1] * be_dtype_size(a->x.type) / 4;
    if (a->n == 0 || wpr == 0)
        return VKASR_OK;
    struct pc_copy_rows pc = {.x = a->x.addr, .y = a->y.addr, .src = a->src.addr, .dst = a->dst.addr,
                              .n = (uint64_t)a->n, .rx = (uint64_t)a->x.ne[0], .ry = (uint64_t)a->y.ne[0],
                              .wpr = wpr};
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd[3] = {vk_tensor_range(&a->x)}, wr = vk_tensor_range(&a->y);
    uint32_t nrd = 1;
    if (a->src.addr)
        rd[nrd++] = vk_tensor_range(&a->src);
    if (a->dst.addr)
        rd[nrd++] = vk_tensor_range(&a->dst);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "copy_rows",
                            .spv = SPV_copy_rows,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)a->n * wpr, wg), 1, 1},
                            .reads = rd,
                            .nreads = nrd,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}
