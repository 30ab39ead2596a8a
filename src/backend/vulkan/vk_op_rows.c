/* vk_op_rows.c — host side of the row and column reductions: layernorm (f32 or f16 y), softmax, argmax (rows.comp)
 * and per-feature normalisation (feature_norm.comp). Argument rules live in ops.c; this file maps
 * arguments to push constants, grids, and (feature_norm) its scratch buffer. */
#include "vk_internal.h"

/* The reduction kernels need a power-of-two workgroup (their shared-memory trees halve it). */
static uint32_t pow2_wg(const struct vk_device *d) {
    uint32_t w = vk_wg_size(d), p = 1;
    while (p * 2 <= w)
        p *= 2;
    return p;
}

/* Workgroup size and invocations per row (tpr) of rows.comp. On a GPU: the device's power-of-two
 * workgroup and the smallest power of two covering the row (at most the workgroup). On a CPU driver
 * (unless VKASR_GPU_ROW_SHAPES, a test hook): one invocation per row in workgroups of 8 rows, since
 * llvmpipe pays for every barrier of a reduction tree. The two shapes round a row's sums differently;
 * on one device the shape depends only on the row width, so row chunks stay bit-identical. */
#define ROWS_CPU_WG 8u

static void row_shape(const struct vk_device *d, uint64_t width, uint32_t *wg, uint32_t *tpr) {
    if (!d->caps.gpu_rows) {
        *wg = ROWS_CPU_WG;
        *tpr = 1;
        return;
    }
    *wg = pow2_wg(d);
    uint32_t t = 1;
    while (t < *wg && t < width)
        t *= 2;
    *tpr = t;
}

static vkasr_status record_rows(struct vk_backend *b, const char *name, const struct vk_io *io, const void *pc,
                                uint32_t pc_size, uint64_t rows, uint32_t tpr, uint32_t wg,
                                const struct vk_range *rd, int nrd, const struct vk_range *wr, int nwr) {
    return vk_record(b, &(struct vk_dispatch){
                            .name = name,
                            .spv = io->spv,
                            .spec = io->spec,
                            .nspec = io->nspec,
                            .pc = pc,
                            .pc_size = pc_size,
                            .groups = {vk_groups_x(b->d, rows, wg / tpr), 1, 1},
                            .reads = rd,
                            .nreads = nrd,
                            .writes = wr,
                            .nwrites = nwr,
                        });
}

/* ---- layernorm -------------------------------------------------------------------------------- */

struct pc_layernorm {
    uint64_t x, gamma, beta, y, rows, cols;
    uint32_t tpr;
    float eps, inv_cols;
    uint64_t y8; /* 0: no int8 rows */
};
_Static_assert(sizeof(struct pc_layernorm) == 72, "mirror of rows.comp (LAYERNORM) push constants");

vkasr_status vk_op_layernorm(struct vk_backend *b, const struct op_layernorm *a) {
    uint64_t R = (uint64_t)a->x.ne[0], C = (uint64_t)a->x.ne[1];
    if (R == 0 || C == 0)
        return VKASR_OK;
    uint32_t wg, tpr;
    row_shape(b->d, C, &wg, &tpr);
    struct pc_layernorm pc = {a->x.addr, a->gamma.addr, a->beta.addr, a->y.addr, R, C, tpr, a->eps,
                              (float)(1.0 / (double)C), a->y8};
    struct vk_io io;
    const bool rows8 = a->y8 != 0;
    TRY(vk_io_variant(b, "layernorm", SPV_layernorm, SPV_layernorm_h, wg, a->x.type, a->y.type, &io));
    struct vk_range rd[3] = {vk_tensor_range(&a->x), vk_tensor_range(&a->gamma), vk_tensor_range(&a->beta)};
    struct vk_range wr[2] = {vk_tensor_range(&a->y), {a->y8, be_rows8_bytes((int64_t)R, (int64_t)C)}};
    return record_rows(b, rows8 ? "layernorm_rows8" : "layernorm", &io, &pc, sizeof pc, R, tpr, wg, rd, 3, wr,
                       rows8 ? 2 : 1);
}

/* ---- softmax ---------------------------------------------------------------------------------- */

struct pc_softmax {
    uint64_t x, y, rows, cols;
    uint32_t tpr;
    float scale;
};
_Static_assert(sizeof(struct pc_softmax) == 40, "mirror of rows.comp (SOFTMAX) push constants");

vkasr_status vk_op_softmax(struct vk_backend *b, const struct op_softmax *a) {
    uint64_t R = (uint64_t)a->x.ne[0], C = (uint64_t)a->x.ne[1];
    if (R == 0 || C == 0)
        return VKASR_OK;
    uint32_t wg, tpr;
    row_shape(b->d, C, &wg, &tpr);
    struct pc_softmax pc = {a->x.addr, a->y.addr, R, C, tpr, a->scale};
    const struct vk_io io = {SPV_softmax, {wg}, 1};
    struct vk_range rd = vk_tensor_range(&a->x), wr = vk_tensor_range(&a->y);
    return record_rows(b, "softmax", &io, &pc, sizeof pc, R, tpr, wg, &rd, 1, &wr, 1);
}

/* ---- argmax ----------------------------------------------------------------------------------- */

struct pc_argmax {
    uint64_t x, y, rows, cols, c0, c1;
    uint32_t tpr, unused;
};
_Static_assert(sizeof(struct pc_argmax) == 56, "mirror of rows.comp (ARGMAX) push constants");

vkasr_status vk_op_argmax(struct vk_backend *b, const struct op_argmax *a) {
    uint64_t R = (uint64_t)a->x.ne[0], C = (uint64_t)a->x.ne[1];
    if (R == 0)
        return VKASR_OK;
    if (a->c1 - a->c0 > INT32_MAX)
        return err_set(&b->base.err, VKASR_ERR_INVALID_ARG,
                       "op argmax: column range [%lld, %lld) is wider than an i32 index can hold",
                       (long long)a->c0, (long long)a->c1);
    uint32_t wg, tpr;
    row_shape(b->d, (uint64_t)(a->c1 - a->c0), &wg, &tpr);
    struct pc_argmax pc = {a->x.addr, a->y.addr, R, C, (uint64_t)a->c0, (uint64_t)a->c1, tpr, 0};
    const struct vk_io io = {SPV_argmax, {wg}, 1};
    struct vk_range rd = vk_tensor_range(&a->x), wr = vk_tensor_range(&a->y);
    return record_rows(b, "argmax", &io, &pc, sizeof pc, R, tpr, wg, &rd, 1, &wr, 1);
}

/* ---- feature_norm ----------------------------------------------------------------------------- */

struct pc_feature_norm {
    uint64_t x, y, part, stats;
    uint64_t rows, cols, chunk, nchunks;
    uint32_t mode;
    float eps;
};
_Static_assert(sizeof(struct pc_feature_norm) == 72, "mirror of feature_norm.comp push constants");

enum { FN_SUM = 0, FN_SQDEV = 1, FN_MEAN = 2, FN_STD = 3, FN_APPLY = 4 };
#define FN_TC 32u           /* columns per workgroup in feature_norm.comp                   */
#define FN_MAX_CHUNKS 1024u /* partial sums per column: bounds the scratch and the 2nd level */
#define FN_MIN_CHUNK 64u    /* rows per chunk at least: enough work per workgroup           */

static vkasr_status fn_pass(struct vk_backend *b, struct pc_feature_norm *pc, uint32_t mode, uint32_t wg,
                            const struct vk_range *rd, int nrd, struct vk_range wr) {
    pc->mode = mode;
    uint32_t gx, gy = 1;
    if (mode == FN_APPLY) {
        gx = vk_groups_x(b->d, pc->rows * pc->cols, wg);
    } else {
        gx = vk_groups_dim(b->d, 0, pc->cols, FN_TC);
        if (mode == FN_SUM || mode == FN_SQDEV)
            gy = vk_groups_dim(b->d, 1, pc->nchunks, 1);
    }
    return vk_record(b, &(struct vk_dispatch){
                            .name = "feature_norm",
                            .spv = SPV_feature_norm,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = pc,
                            .pc_size = sizeof *pc,
                            .groups = {gx, gy, 1},
                            .reads = rd,
                            .nreads = nrd,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

/* Rows per chunk and chunk count: at most FN_MAX_CHUNKS partial sums per column. */
static void fn_plan(uint64_t L, uint64_t *chunk, uint64_t *nchunks) {
    uint64_t c = (L + FN_MAX_CHUNKS - 1) / FN_MAX_CHUNKS;
    *chunk = c < FN_MIN_CHUNK ? FN_MIN_CHUNK : c;
    *nchunks = (L + *chunk - 1) / *chunk;
}

static vkasr_status fn_record(struct vk_backend *b, const struct op_feature_norm *a, uint64_t scratch) {
    uint64_t L = (uint64_t)a->x.ne[0], M = (uint64_t)a->x.ne[1], chunk, P;
    fn_plan(L, &chunk, &P);
    uint32_t wg = pow2_wg(b->d);
    CHECK_OR_RETURN(&b->base.err, wg >= FN_TC);
    struct pc_feature_norm pc = {
        .x = a->x.addr,
        .y = a->y.addr,
        .stats = scratch,             /* mean [M], then std [M] */
        .part = scratch + 2 * M * 4,  /* partial sums [P, M]     */
        .rows = L,
        .cols = M,
        .chunk = chunk,
        .nchunks = P,
        .eps = a->eps,
    };
    struct vk_range x = vk_tensor_range(&a->x), y = vk_tensor_range(&a->y);
    struct vk_range part = {pc.part, P * M * 4}, mean = {pc.stats, M * 4}, sd = {pc.stats + M * 4, M * 4};
    struct vk_range stats = {pc.stats, 2 * M * 4};
    TRY(fn_pass(b, &pc, FN_SUM, wg, &x, 1, part));
    TRY(fn_pass(b, &pc, FN_MEAN, wg, (struct vk_range[]){part, x}, 2, mean)); /* x[0] + shifted sum / L */
    TRY(fn_pass(b, &pc, FN_SQDEV, wg, (struct vk_range[]){x, mean}, 2, part));
    TRY(fn_pass(b, &pc, FN_STD, wg, &part, 1, sd));
    return fn_pass(b, &pc, FN_APPLY, wg, (struct vk_range[]){x, stats}, 2, y);
}

vkasr_status vk_op_feature_norm(struct vk_backend *b, const struct op_feature_norm *a) {
    uint64_t L = (uint64_t)a->x.ne[0], M = (uint64_t)a->x.ne[1], chunk, P;
    if (L == 0 || M == 0)
        return VKASR_OK;
    fn_plan(L, &chunk, &P);
    /* Scratch from this backend's stack arena, released once recorded: the barrier tracking orders
     * any later dispatch that reuses the bytes after ours, and uploads wait for all work first. */
    uint64_t mark = be_mark(&b->base), scratch;
    TRY(be_arena_alloc(&b->base.scratch, (2 + P) * M * 4, &scratch, &b->base.err));
    vkasr_status st = fn_record(b, a, scratch);
    be_release(&b->base, mark);
    return st;
}
