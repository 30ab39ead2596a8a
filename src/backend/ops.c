/* ops.c — tensor helpers and the argument rules of every op (shared by all backends): a leaf under
 * backend.c, which calls it before every op. Kernels live in the backends, not here. */
#include "ops.h"

#include "common/err.h"
#include "common/qblock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t be_dtype_size(be_dtype t) {
    switch (t) {
    case BE_F32: return 4;
    case BE_F16: return 2;
    case BE_I32: return 4;
    case BE_I64: return 8;
    default: return 0;
    }
}

bool be_dtype_is_quant(be_dtype t) { return t == BE_Q8_0 || t == BE_Q4_K || t == BE_Q5_K || t == BE_Q6_K; }

uint32_t be_dtype_ggml(be_dtype t) {
    switch (t) {
    case BE_Q8_0: return QB_Q8_0;
    case BE_Q4_K: return QB_Q4_K;
    case BE_Q5_K: return QB_Q5_K;
    case BE_Q6_K: return QB_Q6_K;
    default: return 0;
    }
}

const char *be_dtype_name(be_dtype t) {
    static const char *const names[] = {[BE_F32] = "f32",  [BE_F16] = "f16",  [BE_I32] = "i32",  [BE_I64] = "i64",
                                        [BE_Q8_0] = "q8_0", [BE_Q4_K] = "q4_k", [BE_Q5_K] = "q5_k", [BE_Q6_K] = "q6_k"};
    return (unsigned)t < sizeof names / sizeof *names && names[t] ? names[t] : "?";
}

int be_dtype_block(be_dtype t) { return be_dtype_is_quant(t) ? qblock_size(be_dtype_ggml(t)) : 1; }

int be_dtype_block_bytes(be_dtype t) {
    return be_dtype_is_quant(t) ? qblock_bytes(be_dtype_ggml(t)) : (int)be_dtype_size(t);
}

/* Bytes of n elements of type t (n a multiple of the block for the block types). */
static uint64_t elems_bytes(be_dtype t, uint64_t n) {
    return n / (uint64_t)be_dtype_block(t) * (uint64_t)be_dtype_block_bytes(t);
}

uint64_t be_numel(const be_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->nd; d++)
        n *= (uint64_t)t->ne[d];
    return n;
}

uint64_t be_nbytes(const be_tensor *t) { return elems_bytes(t->type, be_numel(t)); }

be_tensor be_tensor_make(uint64_t addr, be_dtype type, int nd, const int64_t *ne) {
    be_tensor t = {.addr = addr, .type = type, .nd = nd};
    for (int d = 0; d < nd && d < BE_MAX_DIMS; d++)
        t.ne[d] = ne[d];
    return t;
}

be_tensor be_tensor_1d(uint64_t addr, be_dtype type, int64_t n0) {
    return be_tensor_make(addr, type, 1, (int64_t[]){n0});
}

be_tensor be_tensor_2d(uint64_t addr, be_dtype type, int64_t n0, int64_t n1) {
    return be_tensor_make(addr, type, 2, (int64_t[]){n0, n1});
}

be_tensor be_tensor_3d(uint64_t addr, be_dtype type, int64_t n0, int64_t n1, int64_t n2) {
    return be_tensor_make(addr, type, 3, (int64_t[]){n0, n1, n2});
}

static uint64_t inner_numel(const be_tensor *t) {
    uint64_t n = 1;
    for (int d = 1; d < t->nd; d++)
        n *= (uint64_t)t->ne[d];
    return n;
}

be_tensor be_tensor_row(const be_tensor *t, int64_t r) {
    be_tensor o = be_tensor_make(0, t->type, t->nd > 0 ? t->nd - 1 : 0, t->ne + 1);
    o.addr = t->addr + (uint64_t)r * elems_bytes(t->type, inner_numel(t));
    return o;
}

be_tensor be_tensor_rows(const be_tensor *t, int64_t r0, int64_t n) {
    be_tensor o = *t;
    o.ne[0] = n;
    o.addr = t->addr + (uint64_t)r0 * elems_bytes(t->type, inner_numel(t));
    return o;
}

const char *op_name(enum op_id id) {
    static const char *const names[] = {
#define X(name) #name,
        VKASR_OPS(X)
#undef X
    };
    return (unsigned)id < OP_COUNT ? names[id] : "?";
}

/* ---- validation ------------------------------------------------------------------------------- */

static void tensor_shape_str(const be_tensor *t, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->nd && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? ", %lld" : "%lld", (long long)t->ne[d]);
    if (o < n)
        snprintf(buf + o, n - o, "] %s", be_dtype_name(t->type));
}

/* A small rule language: each failing rule returns an error naming op, field and shape. */
struct vctx {
    const char *op;
    struct err *e;
};

static vkasr_status bad(struct vctx *c, const char *field, const be_tensor *t, const char *why) {
    char s[128] = "";
    if (t)
        tensor_shape_str(t, s, sizeof s);
    return err_set(c->e, VKASR_ERR_INTERNAL, "op %s: %s %s: %s", c->op, field, s, why);
}

static vkasr_status need(struct vctx *c, const char *field, const be_tensor *t, int nd, be_dtype type) {
    if (t->nd != nd)
        return bad(c, field, t, "wrong rank");
    if (t->type != type)
        return bad(c, field, t, "wrong type");
    for (int d = 0; d < nd; d++)
        if (t->ne[d] < 0)
            return bad(c, field, t, "negative dimension");
    if (!t->addr && be_numel(t) > 0)
        return bad(c, field, t, "no storage");
    return VKASR_OK;
}

/* need() for a tensor that may be F32 or F16. */
static vkasr_status need_float(struct vctx *c, const char *field, const be_tensor *t, int nd) {
    if (t->type != BE_F32 && t->type != BE_F16)
        return bad(c, field, t, "must be f32 or f16");
    return need(c, field, t, nd, t->type);
}

static bool present(const be_tensor *t) { return t->addr != 0; }

/* Memory overlap of two tensors (both non-empty). */
static bool overlaps(const be_tensor *a, const be_tensor *b) {
    uint64_t na = be_nbytes(a), nb = be_nbytes(b);
    return na && nb && a->addr < b->addr + nb && b->addr < a->addr + na;
}

/* Outputs of ops whose output elements read several input elements (neighbourhoods, rows, whole
 * columns) must not overlap those inputs: the kernels would read values already overwritten. */
static vkasr_status no_overlap(struct vctx *c, const be_tensor *y, const be_tensor *x, const char *field) {
    if (overlaps(y, x))
        return bad(c, field, x, "overlaps the output (in-place is not supported for this op)");
    return VKASR_OK;
}

/* Row-wise ops (each row read completely before it is written, by the same workgroup) may run in place,
 * but only exactly: a shifted overlap would read rows other workgroups already wrote. */
static vkasr_status same_or_disjoint(struct vctx *c, const be_tensor *y, const be_tensor *x, const char *field) {
    if (overlaps(y, x) && !(y->addr == x->addr && be_nbytes(y) == be_nbytes(x)))
        return bad(c, field, x, "partially overlaps the output");
    return VKASR_OK;
}

static vkasr_status need_dims(struct vctx *c, const char *field, const be_tensor *t, int64_t d0, int64_t d1) {
    if (t->ne[0] != d0 || (t->nd > 1 && d1 >= 0 && t->ne[1] != d1))
        return bad(c, field, t, "shape mismatch");
    return VKASR_OK;
}

static bool valid_act(int act) { return act >= ACT_NONE && act <= ACT_LOG_GUARD; }

/* The offsets of a packed batch's segments (I64 [S+1], S >= 1), read by the kernels: the op's outputs
 * must not overlap them. Their values live on the device: the kernels keep every access inside the
 * op's tensors whatever they hold. */
static vkasr_status need_seg(struct vctx *c, const char *field, const be_tensor *seg, const be_tensor *y) {
    TRY(need(c, field, seg, 1, BE_I64));
    if (seg->ne[0] < 2 || seg->ne[0] > ((int64_t)1 << 31))
        return bad(c, field, seg, "must be [S + 1] with 1 <= S < 2^31");
    return no_overlap(c, y, seg, field);
}

static vkasr_status v_unary(struct vctx *c, const struct op_unary *a) {
    if (a->x.type != BE_F32 || a->y.type != BE_F32)
        return bad(c, "x/y", &a->x, "must be f32");
    if (be_numel(&a->x) != be_numel(&a->y))
        return bad(c, "y", &a->y, "element count differs from x");
    if (!valid_act(a->act))
        return bad(c, "act", NULL, "unknown activation");
    TRY(same_or_disjoint(c, &a->y, &a->x, "x"));
    return VKASR_OK;
}

static vkasr_status v_posenc(struct vctx *c, const struct op_posenc *a) {
    TRY(need(c, "y", &a->y, 2, BE_F32));
    const int64_t n = a->y.ne[0], C = a->y.ne[1];
    if (C % 2)
        return bad(c, "y", &a->y, "must have an even number of columns (sin, cos pairs)");
    TRY(need(c, "inv_freq", &a->inv_freq, 1, BE_F32));
    if (a->inv_freq.ne[0] != C / 2)
        return bad(c, "inv_freq", &a->inv_freq, "must be [C/2]");
    /* rows r0 .. r0 - n + 1 */
    if (n > 0 && (a->r0 >= POSENC_MAX_R || a->r0 <= -POSENC_MAX_R || n - 1 >= a->r0 + POSENC_MAX_R))
        return bad(c, "r0", &a->y, "relative distances must stay below 2^22 in magnitude");
    TRY(no_overlap(c, &a->y, &a->inv_freq, "inv_freq"));
    return VKASR_OK;
}

static vkasr_status v_binary(struct vctx *c, const struct op_binary *a) {
    if (a->a.type != BE_F32 || a->b.type != BE_F32 || a->y.type != BE_F32)
        return bad(c, "a/b/y", &a->a, "must be f32");
    uint64_t na = be_numel(&a->a), nb = be_numel(&a->b);
    if (be_numel(&a->y) != na)
        return bad(c, "y", &a->y, "element count differs from a");
    if (na > 0 && (nb == 0 || na % nb != 0))
        return bad(c, "b", &a->b, "element count must divide a's");
    if (a->kind != BINARY_ADD && a->kind != BINARY_MUL)
        return bad(c, "kind", NULL, "unknown kind");
    if (!valid_act(a->act))
        return bad(c, "act", NULL, "unknown activation");
    TRY(same_or_disjoint(c, &a->y, &a->a, "a"));
    TRY(same_or_disjoint(c, &a->y, &a->b, "b"));
    return VKASR_OK;
}

static vkasr_status v_glu(struct vctx *c, const struct op_glu *a) {
    TRY(need_float(c, "x", &a->x, 2));
    TRY(need_float(c, "y", &a->y, 2));
    if (a->x.ne[1] != 2 * a->y.ne[1] || a->x.ne[0] != a->y.ne[0])
        return bad(c, "y", &a->y, "must be [R, C] for x [R, 2C]");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    return VKASR_OK;
}

static vkasr_status v_pad(struct vctx *c, const struct op_pad *a) {
    if (a->x.nd != a->y.nd || a->x.type != a->y.type || a->x.nd < 1)
        return bad(c, "y", &a->y, "rank/type must match x");
    if (a->x.type == BE_I64)
        return bad(c, "x", &a->x, "must be f32, f16 or i32");
    for (int d = 0; d < a->x.nd; d++)
        if (a->before[d] < 0 || a->y.ne[d] < a->x.ne[d] + a->before[d])
            return bad(c, "y", &a->y, "too small for x plus padding");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    return VKASR_OK;
}

static vkasr_status v_permute(struct vctx *c, const struct op_permute *a) {
    if (a->x.nd != a->y.nd || a->x.type != a->y.type || a->x.nd < 1)
        return bad(c, "y", &a->y, "rank/type must match x");
    if (a->x.type == BE_I64)
        return bad(c, "x", &a->x, "must be f32, f16 or i32");
    int seen = 0;
    for (int d = 0; d < a->x.nd; d++) {
        int p = a->perm[d];
        if (p < 0 || p >= a->x.nd || (seen & (1 << p)))
            return bad(c, "perm", NULL, "not a permutation");
        seen |= 1 << p;
        if (a->y.ne[d] != a->x.ne[p])
            return bad(c, "y", &a->y, "shape is not x permuted");
    }
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    return VKASR_OK;
}

static vkasr_status v_copy_rows(struct vctx *c, const struct op_copy_rows *a) {
    if (a->x.nd != 2 || a->y.nd != 2 || a->x.type != a->y.type || a->x.ne[1] != a->y.ne[1])
        return bad(c, "y", &a->y, "must be 2-D of x's type and row width");
    if (a->x.type != BE_F32 && a->x.type != BE_F16 && a->x.type != BE_I32)
        return bad(c, "x", &a->x, "must be f32, f16 or i32");
    if ((a->x.ne[1] * (int64_t)be_dtype_size(a->x.type)) % 4 != 0 || a->x.addr % 4 != 0 || a->y.addr % 4 != 0)
        return bad(c, "x", &a->x, "rows must be whole 4-byte words, 4-byte aligned");
    if (a->n < 0 || a->n > ((int64_t)1 << 40))
        return bad(c, "n", NULL, "out of range");
    if (present(&a->src)) {
        TRY(need(c, "src", &a->src, 1, BE_I64));
        if (a->src.ne[0] < a->n)
            return bad(c, "src", &a->src, "shorter than n");
    }
    if (present(&a->dst)) {
        TRY(need(c, "dst", &a->dst, 1, BE_I64));
        if (a->dst.ne[0] < a->n)
            return bad(c, "dst", &a->dst, "shorter than n");
        TRY(no_overlap(c, &a->y, &a->dst, "dst"));
    }
    if (present(&a->src))
        TRY(no_overlap(c, &a->y, &a->src, "src"));
    if (a->x.addr != a->y.addr || a->x.ne[0] != a->y.ne[0])
        TRY(no_overlap(c, &a->y, &a->x, "x"));
    return VKASR_OK;
}

/* The bytes of int8 rows at addr for x's [rows, cols] (op_layernorm.y8, op_linear.x8) as a tensor, for
 * the overlap checks; cols % 4 == 0, so they are a whole number of words. */
static be_tensor rows8_view(uint64_t addr, const be_tensor *x) {
    const int64_t words = (int64_t)(be_rows8_bytes(x->ne[0], x->ne[1]) / 4);
    return (be_tensor){.addr = addr, .type = BE_I32, .nd = 1, .ne = {words}};
}

static vkasr_status v_layernorm(struct vctx *c, const struct op_layernorm *a) {
    TRY(need(c, "x", &a->x, 2, BE_F32));
    TRY(need_float(c, "y", &a->y, 2));
    TRY(need_dims(c, "y", &a->y, a->x.ne[0], a->x.ne[1]));
    TRY(need(c, "gamma", &a->gamma, 1, BE_F32));
    TRY(need(c, "beta", &a->beta, 1, BE_F32));
    TRY(need_dims(c, "gamma", &a->gamma, a->x.ne[1], -1));
    TRY(need_dims(c, "beta", &a->beta, a->x.ne[1], -1));
    if (!(a->eps >= 0.0f))
        return bad(c, "eps", NULL, "must be >= 0");
    TRY(same_or_disjoint(c, &a->y, &a->x, "x"));
    if (a->y8) {
        if (a->x.ne[1] % 4 != 0)
            return bad(c, "y8", &a->x, "int8 rows need a multiple of 4 columns");
        const be_tensor y8 = rows8_view(a->y8, &a->x);
        if (overlaps(&y8, &a->x) || overlaps(&y8, &a->y))
            return bad(c, "y8", NULL, "its int8 rows and scales overlap x or y");
    }
    return VKASR_OK;
}

/* An f32 row op: x and y [rows, cols] of the same shape, y equal to x (in place) or disjoint from it. */
static vkasr_status v_same_shape_f32(struct vctx *c, const be_tensor *x, const be_tensor *y) {
    TRY(need(c, "x", x, 2, BE_F32));
    TRY(need(c, "y", y, 2, BE_F32));
    TRY(same_or_disjoint(c, y, x, "x"));
    return need_dims(c, "y", y, x->ne[0], x->ne[1]);
}

static vkasr_status v_softmax(struct vctx *c, const struct op_softmax *a) { return v_same_shape_f32(c, &a->x, &a->y); }

static vkasr_status v_argmax(struct vctx *c, const struct op_argmax *a) {
    TRY(need(c, "x", &a->x, 2, BE_F32));
    TRY(need(c, "y", &a->y, 1, BE_I32));
    TRY(need_dims(c, "y", &a->y, a->x.ne[0], -1));
    if (a->c0 < 0 || a->c1 <= a->c0 || a->c1 > a->x.ne[1])
        return bad(c, "c0/c1", &a->x, "column range empty or out of bounds");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    return VKASR_OK;
}

static vkasr_status v_linear(struct vctx *c, const struct op_linear *a) {
    if (a->x.type != BE_F32 && a->x.type != BE_F16)
        return bad(c, "x", &a->x, "must be f32 or f16");
    TRY(need(c, "x", &a->x, 2, a->x.type));
    if (a->y.type != BE_F32 && a->y.type != BE_F16)
        return bad(c, "y", &a->y, "must be f32 or f16");
    TRY(need(c, "y", &a->y, 2, a->y.type));
    if (a->w.type != BE_F32 && a->w.type != BE_F16 && !be_dtype_is_quant(a->w.type))
        return bad(c, "w", &a->w, "must be f32, f16 or a quantized type");
    TRY(need(c, "w", &a->w, 2, a->w.type));
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    if (a->w.ne[1] != K)
        return bad(c, "w", &a->w, "inner dimension differs from x");
    if (K % be_dtype_block(a->w.type) != 0)
        return bad(c, "w", &a->w, "inner dimension is not a multiple of the quantized type's block");
    /* ACT_GLU: the product's columns are value and gate halves; y has one of them */
    const bool glu = a->act == ACT_GLU;
    if (glu && N % 2 != 0)
        return bad(c, "w", &a->w, "act glu: needs an even number of rows (value and gate halves)");
    const int64_t Ny = glu ? N / 2 : N;
    TRY(need_dims(c, "y", &a->y, M, Ny));
    if (present(&a->bias)) {
        TRY(need(c, "bias", &a->bias, 1, BE_F32));
        TRY(need_dims(c, "bias", &a->bias, N, -1));
    }
    if (present(&a->res)) {
        TRY(need(c, "res", &a->res, 2, a->y.type)); /* may alias y: same type */
        TRY(need_dims(c, "res", &a->res, M, Ny));
    }
    if (!valid_act(a->act) && !glu)
        return bad(c, "act", NULL, "unknown activation");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    TRY(no_overlap(c, &a->y, &a->w, "w"));
    if (present(&a->bias))
        TRY(no_overlap(c, &a->y, &a->bias, "bias"));
    if (present(&a->res)) /* res may be y itself: each output reads its own residual first */
        TRY(same_or_disjoint(c, &a->y, &a->res, "res"));
    if (a->x8) {
        if (!be_dtype_is_quant(a->w.type) || K % 4 != 0)
            return bad(c, "w", &a->w, "x8 (x's int8 rows) is read by products of block-quantized w only");
        const be_tensor x8 = rows8_view(a->x8, &a->x);
        if (overlaps(&x8, &a->y))
            return bad(c, "x8", NULL, "its int8 rows and scales overlap y");
    }
    return VKASR_OK;
}

static int64_t half_up(int64_t n) { return (n + 1) / 2; }

/* Output width of a stride-2 subsampling conv: ceil(W/2) (pad 1, 1) or floor(W/2)+1 (causal: 2, 1). */
static int64_t s2_out(int64_t n, bool causal) { return causal ? n / 2 + 1 : half_up(n); }

static vkasr_status v_conv_rows(struct vctx *c, const be_tensor *x, const be_tensor *y, int64_t x_row0,
                                int64_t x_len, int64_t y_row0, const be_tensor *x_seg, const be_tensor *y_seg,
                                bool causal) {
    if (x_row0 < 0 || y_row0 < 0 || x_row0 > ((int64_t)1 << 60) || y_row0 > ((int64_t)1 << 60))
        return bad(c, "x_row0/y_row0", NULL, "out of range");
    if (present(x_seg) || present(y_seg)) { /* a packed batch: the halo rule is the caller's */
        TRY(need_seg(c, "x_seg", x_seg, y));
        TRY(need_seg(c, "y_seg", y_seg, y));
        if (x_seg->ne[0] != y_seg->ne[0])
            return bad(c, "y_seg", y_seg, "must have as many segments as x_seg");
        return VKASR_OK;
    }
    /* Every in-range input row an output row needs must be present in x. */
    if (y->ne[0] == 0)
        return VKASR_OK;
    /* output row r reads rows 2r-1 .. 2r+1, or 2r-2 .. 2r (causal) */
    int64_t need_lo = 2 * y_row0 - (causal ? 2 : 1), need_hi = 2 * (y_row0 + y->ne[0] - 1) + (causal ? 0 : 1);
    if (need_lo < 0)
        need_lo = 0;
    if (need_hi > x_len - 1)
        need_hi = x_len - 1;
    if (need_lo <= need_hi && (need_lo < x_row0 || need_hi >= x_row0 + x->ne[0]))
        return bad(c, "x", x, "tile lacks input rows its outputs need (halo too small)");
    return VKASR_OK;
}

static vkasr_status v_conv2d_s2(struct vctx *c, const struct op_conv2d_s2 *a) {
    TRY(need_float(c, "x", &a->x, 2));
    TRY(need_float(c, "y", &a->y, 3));
    TRY(need(c, "w", &a->w, 2, BE_F32));
    TRY(need(c, "b", &a->b, 1, BE_F32));
    int64_t C = a->y.ne[2];
    if (a->w.ne[0] != C || a->w.ne[1] != 9 || a->b.ne[0] != C)
        return bad(c, "w/b", &a->w, "must be [C, 9] / [C]");
    if (a->y.ne[1] != s2_out(a->x.ne[1], a->causal))
        return bad(c, "y", &a->y, a->causal ? "width must be floor(W/2)+1 (causal)" : "width must be ceil(W/2)");
    if (a->act != ACT_NONE && a->act != ACT_RELU)
        return bad(c, "act", NULL, "only none or relu");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    return v_conv_rows(c, &a->x, &a->y, a->x_row0, a->x_len, a->y_row0, &a->x_seg, &a->y_seg, a->causal);
}

static vkasr_status v_dwconv2d_s2(struct vctx *c, const struct op_dwconv2d_s2 *a) {
    TRY(need_float(c, "x", &a->x, 3));
    TRY(need_float(c, "y", &a->y, 3));
    TRY(need(c, "w", &a->w, 2, BE_F32));
    TRY(need(c, "b", &a->b, 1, BE_F32));
    int64_t C = a->x.ne[2];
    if (a->y.ne[2] != C || a->w.ne[0] != C || a->w.ne[1] != 9 || a->b.ne[0] != C)
        return bad(c, "y/w/b", &a->y, "channel counts differ");
    if (a->y.ne[1] != s2_out(a->x.ne[1], a->causal))
        return bad(c, "y", &a->y, a->causal ? "width must be floor(W/2)+1 (causal)" : "width must be ceil(W/2)");
    if (a->act != ACT_NONE && a->act != ACT_RELU)
        return bad(c, "act", NULL, "only none or relu");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    return v_conv_rows(c, &a->x, &a->y, a->x_row0, a->x_len, a->y_row0, &a->x_seg, &a->y_seg, a->causal);
}

static vkasr_status v_dwconv1d(struct vctx *c, const struct op_dwconv1d *a) {
    TRY(need_float(c, "x", &a->x, 2));
    TRY(need_float(c, "y", &a->y, 2));
    TRY(need_dims(c, "y", &a->y, a->x.ne[0], a->x.ne[1]));
    TRY(need(c, "w", &a->w, 2, BE_F32));
    TRY(need(c, "b", &a->b, 1, BE_F32));
    if (a->w.ne[0] != a->x.ne[1] || a->w.ne[1] < 1 || a->w.ne[1] % 2 == 0 || a->b.ne[0] != a->x.ne[1])
        return bad(c, "w/b", &a->w, "must be [C, K odd] / [C]");
    if (!valid_act(a->act))
        return bad(c, "act", NULL, "unknown activation");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    if (present(&a->seg)) {
        TRY(need_seg(c, "seg", &a->seg, &a->y));
        if (a->row0 < 0 || a->row0 > ((int64_t)1 << 60))
            return bad(c, "row0", NULL, "out of range");
    }
    return VKASR_OK;
}

/* An f32 or f16 tensor of rank nd (the attention's q, k, v, p, y). */
static vkasr_status need_f32_or_f16(struct vctx *c, const char *field, const be_tensor *t, int nd) {
    if (t->type != BE_F32 && t->type != BE_F16)
        return bad(c, field, t, "must be f32 or f16");
    return need(c, field, t, nd, t->type);
}

static vkasr_status v_relpos_attention(struct vctx *c, const struct op_relpos_attention *a) {
    TRY(need_f32_or_f16(c, "q", &a->q, 2));
    int64_t Tq = a->q.ne[0], D = a->q.ne[1];
    if (a->heads < 1 || D % a->heads != 0)
        return bad(c, "heads", &a->q, "must divide the width");
    int64_t dk = D / a->heads;
    TRY(need_f32_or_f16(c, "k", &a->k, 2));
    int64_t Tk = a->k.ne[0];
    TRY(need_dims(c, "k", &a->k, Tk, D));
    TRY(need_f32_or_f16(c, "v", &a->v, 2));
    TRY(need_dims(c, "v", &a->v, Tk, D));
    TRY(need_f32_or_f16(c, "y", &a->y, 2));
    TRY(need_dims(c, "y", &a->y, Tq, D));
    TRY(need_f32_or_f16(c, "p", &a->p, 2));
    if (a->p.ne[1] != D || a->p.ne[0] % 2 == 0)
        return bad(c, "p", &a->p, "must be [P odd, D]");
    TRY(need(c, "bias_u", &a->bias_u, 2, BE_F32));
    TRY(need_dims(c, "bias_u", &a->bias_u, a->heads, dk));
    TRY(need(c, "bias_v", &a->bias_v, 2, BE_F32));
    TRY(need_dims(c, "bias_v", &a->bias_v, a->heads, dk));
    if (present(&a->seg)) {
        TRY(need_seg(c, "seg", &a->seg, &a->y));
        if (a->seg_max < 1 || a->seg_max > ((int64_t)1 << 60))
            return bad(c, "seg_max", NULL, "must be the longest segment's length (>= 1)");
    }
    /* positions stay far below 2^62: sums of two never overflow */
    const int64_t lim = (int64_t)1 << 60;
    if (a->n_valid < 0 || a->window < 0 || a->q_pos0 < 0 || a->k_pos0 < 0 || a->n_valid > lim || a->window > lim ||
        a->q_pos0 > lim || a->k_pos0 > lim || Tq > lim || Tk > lim)
        return bad(c, "n_valid/window/q_pos0/k_pos0", NULL, "out of range");
    if (a->chunk < 0 || a->left_chunks < 0 || a->chunk > ((int64_t)1 << 30) || a->left_chunks > ((int64_t)1 << 30))
        return bad(c, "chunk/left_chunks", NULL, "out of range (0 .. 2^30)");
    if (a->chunk > 0 && a->window > 0)
        return bad(c, "chunk", NULL, "the chunked mask and a local window exclude each other");
    if (present(&a->q_pos)) { /* positions from a table: the segments bound the distances */
        TRY(need(c, "q_pos", &a->q_pos, 1, BE_I64));
        TRY(need_dims(c, "q_pos", &a->q_pos, Tq, 0));
        if (!present(&a->seg))
            return bad(c, "q_pos", &a->q_pos, "needs seg (the segments bound the positions p covers)");
        if (2 * a->seg_max - 1 > a->p.ne[0])
            return bad(c, "p", &a->p, "too few position rows for the longest segment (2 seg_max - 1)");
        TRY(no_overlap(c, &a->y, &a->q_pos, "q_pos"));
    }
    /* valid query positions [qa, qb) must be keys too; scored relative positions need a row of p */
    int64_t qa = a->q_pos0, qb = a->q_pos0 + Tq < a->n_valid ? a->q_pos0 + Tq : a->n_valid;
    if (qa < qb && !present(&a->q_pos)) {
        if (qa < a->k_pos0 || qb > a->k_pos0 + Tk)
            return bad(c, "k", &a->k, "must hold every valid query position (q_pos0 .. min(q_pos0+Tq, n_valid)-1)");
        int64_t kb = a->k_pos0 + Tk < a->n_valid ? a->k_pos0 + Tk : a->n_valid;
        int64_t rmax = qb - 1 - a->k_pos0, rmin = qa - (kb - 1); /* i - j over the scored pairs */
        if (a->window > 0) {
            rmax = rmax < a->window ? rmax : a->window;
            rmin = rmin > -a->window ? rmin : -a->window;
        }
        if (a->chunk > 0) { /* a query sees at most chunk - 1 keys ahead, chunk (left_chunks + 1) - 1 behind */
            const int64_t back = a->chunk * (a->left_chunks + 1) - 1;
            rmax = rmax < back ? rmax : back;
            rmin = rmin > 1 - a->chunk ? rmin : 1 - a->chunk;
        }
        if (present(&a->seg)) { /* pairs of one segment only */
            rmax = rmax < a->seg_max - 1 ? rmax : a->seg_max - 1;
            rmin = rmin > 1 - a->seg_max ? rmin : 1 - a->seg_max;
        }
        int64_t center = (a->p.ne[0] - 1) / 2;
        if (rmax > center || -rmin > center)
            return bad(c, "p", &a->p, "too few position rows for the attention span");
    }
    const be_tensor *in[] = {&a->q, &a->k, &a->v, &a->p, &a->bias_u, &a->bias_v};
    static const char *const in_name[] = {"q", "k", "v", "p", "bias_u", "bias_v"};
    for (int i = 0; i < 6; i++) /* every output row reads all keys and position rows of its head */
        TRY(no_overlap(c, &a->y, in[i], in_name[i]));
    return VKASR_OK;
}

/* A [B, n] tensor of B rows, or B = 1 as [n]. */
static vkasr_status need_rows(struct vctx *c, const char *field, const be_tensor *t, int64_t B, int64_t n) {
    if (t->nd == 1 && B == 1)
        TRY(need(c, field, t, 1, BE_F32));
    else
        TRY(need(c, field, t, 2, BE_F32));
    if (t->ne[t->nd - 1] != n || (t->nd == 2 && t->ne[0] != B))
        return bad(c, field, t, "must be [B, n] as the other rows' tensors");
    return VKASR_OK;
}

static vkasr_status v_lstm_step(struct vctx *c, const struct op_lstm_step *a) {
    if (a->h.nd != 1 && a->h.nd != 2)
        return bad(c, "h", &a->h, "must be [P] or [B, P]");
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1];
    const int64_t In = a->x.ne[a->x.nd > 0 ? a->x.nd - 1 : 0];
    if (B < 1 || B > INT32_MAX)
        return bad(c, "h", &a->h, "must have 1 .. 2^31-1 rows");
    TRY(need_rows(c, "x", &a->x, B, In));
    TRY(need_rows(c, "h", &a->h, B, P));
    TRY(need_rows(c, "c", &a->c, B, P));
    TRY(need_rows(c, "h_out", &a->h_out, B, P));
    TRY(need_rows(c, "c_out", &a->c_out, B, P));
    /* w_ih, w_hh: f32, f16 or a block type whose block divides their rows */
    const be_tensor *ws[] = {&a->w_ih, &a->w_hh};
    const char *wn[] = {"w_ih", "w_hh"};
    for (int i = 0; i < 2; i++) {
        if (ws[i]->type != BE_F32 && ws[i]->type != BE_F16 && !be_dtype_is_quant(ws[i]->type))
            return bad(c, wn[i], ws[i], "must be f32, f16 or a quantized type");
        TRY(need(c, wn[i], ws[i], 2, ws[i]->type));
        TRY(need_dims(c, wn[i], ws[i], 4 * P, i == 0 ? In : P));
        if ((i == 0 ? In : P) % be_dtype_block(ws[i]->type) != 0)
            return bad(c, wn[i], ws[i], "inner dimension is not a multiple of the quantized type's block");
    }
    if (a->w_hh.type != a->w_ih.type)
        return bad(c, "w_hh", &a->w_hh, "must have w_ih's type");
    TRY(need(c, "b", &a->b, 1, BE_F32));
    TRY(need_dims(c, "b", &a->b, 4 * P, -1));
    /* every output reads all of x and h; c_out may replace c element-wise */
    const be_tensor *outs[] = {&a->h_out, &a->c_out};
    for (int i = 0; i < 2; i++) {
        TRY(no_overlap(c, outs[i], &a->x, "x"));
        TRY(no_overlap(c, outs[i], &a->h, "h"));
    }
    TRY(no_overlap(c, &a->h_out, &a->c, "c"));
    TRY(same_or_disjoint(c, &a->c_out, &a->c, "c"));
    if (present(&a->gate)) {
        TRY(need(c, "gate", &a->gate, 1, BE_I32));
        if (B > 1 && (a->gate_stride < 1 || a->gate_stride > ((int64_t)1 << 30)))
            return bad(c, "gate_stride", NULL, "must be >= 1 for several rows");
        const int64_t need_n = 1 + (B - 1) * (B > 1 ? a->gate_stride : 0);
        if (a->gate.ne[0] < need_n)
            return bad(c, "gate", &a->gate, "too short for the rows' gates (1 + (B - 1) * gate_stride)");
        for (int i = 0; i < 2; i++)
            TRY(no_overlap(c, outs[i], &a->gate, "gate"));
    }
    if (overlaps(&a->h_out, &a->c_out))
        return bad(c, "h_out", &a->h_out, "overlaps c_out");
    return VKASR_OK;
}

/* The search's description (struct be_search): shapes, types, and every tensor apart from the others
 * (the kernels write state, tokens, z, y, x0, h_old and q while reading the rest). */
static vkasr_status v_search(struct vctx *c, const struct be_search *s) {
    if (!s)
        return bad(c, "s", NULL, "NULL");
    TRY(need(c, "state", &s->state, 2, BE_I32));
    const int64_t B = s->state.ne[0];
    if (B < 1 || B > ((int64_t)1 << 20) || s->state.ne[1] != SEARCH_STATE_INTS)
        return bad(c, "state", &s->state, "must be [B, SEARCH_STATE_INTS] with 1 <= B <= 2^20");
    TRY(need(c, "f", &s->f, 2, BE_F32));
    const int64_t T = s->f.ne[0], P = s->f.ne[1];
    if (T < 1 || T > (int64_t)1 << 30 || P < 1 || P > (int64_t)1 << 24)
        return bad(c, "f", &s->f, "must be [Tf, P] with 1 <= Tf <= 2^30, 1 <= P <= 2^24");
    if (s->max_symbols < 1 || T * s->max_symbols >= INT32_MAX)
        return bad(c, "max_symbols", &s->f, "must be >= 1, and T * max_symbols < 2^31 (32-bit token counts)");
    TRY(need(c, "tokens", &s->tokens, 3, BE_I32));
    if (s->tokens.ne[0] != B || s->tokens.ne[1] < 1 || s->tokens.ne[1] > INT32_MAX || s->tokens.ne[2] != 3)
        return bad(c, "tokens", &s->tokens, "must be [B, capacity, 3]");
    TRY(need(c, "embed", &s->embed, 2, BE_F32));
    const int64_t V = s->embed.ne[0] - 1;
    if (V < 1 || V > (int64_t)1 << 30)
        return bad(c, "embed", &s->embed, "must be [V+1, P] with 1 <= V <= 2^30");
    TRY(need_dims(c, "embed", &s->embed, V + 1, P));
    const struct {
        const char *name;
        const be_tensor *t;
    } bp[] = {{"q", &s->q}, {"x0", &s->x0}};
    for (size_t i = 0; i < sizeof bp / sizeof bp[0]; i++) {
        TRY(need(c, bp[i].name, bp[i].t, 2, BE_F32));
        TRY(need_dims(c, bp[i].name, bp[i].t, B, P));
    }
    TRY(need(c, "h_old", &s->h_old, 3, BE_F32));
    const int64_t L = s->h_old.ne[0];
    if (L < 1 || L > 64 || s->h_old.ne[1] != B || s->h_old.ne[2] != P)
        return bad(c, "h_old", &s->h_old, "must be [L, B, P] with 1 <= L <= 64");
    TRY(need(c, "h_new", &s->h_new, 3, BE_F32));
    if (s->h_new.ne[0] != L || s->h_new.ne[1] != B || s->h_new.ne[2] != P)
        return bad(c, "h_new", &s->h_new, "must be [L, B, P] as h_old");
    TRY(need(c, "z", &s->z, 2, BE_F32));
    const int64_t wmax = s->z.ne[0] / B;
    if (s->z.ne[0] % B || wmax < 1 || wmax > SEARCH_MAX_WINDOW)
        return bad(c, "z", &s->z, "must be [B * Wmax, P] with Wmax <= SEARCH_MAX_WINDOW");
    TRY(need_dims(c, "z", &s->z, B * wmax, P));
    TRY(need(c, "y", &s->y, 2, BE_F32));
    int64_t nd = 0;
    if (present(&s->durations)) {
        TRY(need(c, "durations", &s->durations, 1, BE_I32));
        nd = s->durations.ne[0];
        if (nd < 1)
            return bad(c, "durations", &s->durations, "empty");
    }
    TRY(need_dims(c, "y", &s->y, B * wmax, V + 1 + nd));
    if (present(&s->live)) {
        TRY(need(c, "live", &s->live, 1, BE_I32));
        if (s->live.ne[0] != 1)
            return bad(c, "live", &s->live, "must be [1]");
    }
    const be_tensor *all[] = {&s->state, &s->tokens, &s->f, &s->q, &s->z, &s->y, &s->x0, &s->h_old,
                              &s->h_new, &s->embed, &s->durations, &s->live};
    const int n = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (present(all[i]) && present(all[j]) && overlaps(all[i], all[j]))
                return bad(c, "tensors", all[j], "overlaps another tensor of the search");
    return VKASR_OK;
}

static vkasr_status v_window(struct vctx *c, const struct be_search *s, int32_t w) {
    if (w < 1 || (w & (w - 1)) || w > SEARCH_MAX_WINDOW || s->z.ne[0] < w * s->state.ne[0])
        return bad(c, "window", NULL, "must be a power of two <= Wmax");
    return VKASR_OK;
}

static vkasr_status v_search_joint(struct vctx *c, const struct op_search_joint *a) {
    TRY(v_search(c, a->s));
    return v_window(c, a->s, a->window);
}

static vkasr_status v_search_step(struct vctx *c, const struct op_search_step *a) {
    TRY(v_search(c, a->s));
    return v_window(c, a->s, a->window);
}

static vkasr_status v_stft_power(struct vctx *c, const struct op_stft_power *a) {
    TRY(need(c, "x", &a->x, 1, BE_F32));
    TRY(need(c, "window", &a->window, 1, BE_F32));
    TRY(need(c, "y", &a->y, 2, BE_F32));
    if (a->n_fft < 2 || a->n_fft % 2 || a->n_fft > 4096 || a->hop < 1)
        return bad(c, "n_fft/hop", NULL, "n_fft must be even and <= 4096, hop >= 1");
    if (a->window.ne[0] > a->n_fft || a->window.ne[0] < 1)
        return bad(c, "window", &a->window, "longer than n_fft");
    if (a->y.ne[1] != a->n_fft / 2 + 1 || a->f0 < 0)
        return bad(c, "y", &a->y, "must be [F, n_fft/2+1]");
    if (!(fabsf(a->preemph) <= 1.0f))
        return bad(c, "preemph", NULL, "out of range");
    TRY(no_overlap(c, &a->y, &a->x, "x"));
    if (a->seg.addr) {
        TRY(need(c, "seg", &a->seg, 2, BE_I64));
        if (a->seg.ne[1] != 4 || a->seg.ne[0] < 1)
            return bad(c, "seg", &a->seg, "must be [S, 4] (row0, x0, n, f0 per segment), S >= 1");
    }
    return VKASR_OK;
}

void op_stft_frame(const struct op_stft_power *a, int64_t f, int64_t *x0, int64_t *n, int64_t *t) {
    if (!a->seg.addr) {
        *x0 = 0;
        *n = a->x.ne[0];
        *t = a->f0 + f;
        return;
    }
    const int64_t *seg = (const int64_t *)(uintptr_t)a->seg.addr;
    int64_t lo = 0, hi = a->seg.ne[0] - 1; /* the last segment whose first row is at most f */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (seg[4 * mid] <= f)
            lo = mid;
        else
            hi = mid - 1;
    }
    *x0 = seg[4 * lo + 1];
    *n = seg[4 * lo + 2];
    *t = seg[4 * lo + 3] + f - seg[4 * lo];
}

static vkasr_status v_feature_norm(struct vctx *c, const struct op_feature_norm *a) {
    return v_same_shape_f32(c, &a->x, &a->y);
}

static vkasr_status v_offsets_scan(struct vctx *c, const struct op_offsets_scan *a) {
    TRY(need(c, "x", &a->x, 1, BE_I64));
    const int64_t N = a->x.ne[0];
    if (N > ((int64_t)1 << 31) - 2)
        return bad(c, "x", &a->x, "more than 2^31 - 2 lengths");
    if (a->nout < 1 || a->nout > SCAN_MAX_OUT)
        return bad(c, "nout", NULL, "must be 1 .. SCAN_MAX_OUT");
    for (int k = 0; k < a->nout; k++) {
        const struct op_offsets_scan_out *o = &a->out[k];
        char f[16];
        snprintf(f, sizeof f, "out[%d].y", k);
        TRY(need(c, f, &o->y, 1, BE_I64));
        if (o->y.ne[0] != N + (o->lead ? 1 : 0))
            return bad(c, f, &o->y, "must be [N + lead]");
        if (o->div < 1 || o->stride < 1 || o->halvings > 62)
            return bad(c, f, &o->y, "div and stride must be >= 1, halvings <= 62");
        TRY(no_overlap(c, &o->y, &a->x, "x"));
        for (int j = 0; j < k; j++)
            if (overlaps(&o->y, &a->out[j].y))
                return bad(c, f, &o->y, "overlaps another output");
    }
    return VKASR_OK;
}

vkasr_status op_validate(enum op_id id, const void *args, struct err *e) {
    struct vctx c = {op_name(id), e};
    if (!args)
        return bad(&c, "args", NULL, "NULL");
    switch (id) {
#define X(name)                                                                                        \
    case OP_##name:                                                                                    \
        return v_##name(&c, (const struct op_##name *)args);
        VKASR_OPS(X)
#undef X
    case OP_COUNT: break;
    }
    return bad(&c, "id", NULL, "unknown op");
}

int64_t op_search_step_chunks(int64_t units, int64_t B, int64_t V) {
    enum { CHUNK_MIN = 64, CHUNKS_MAX = 64 };
    int64_t g = (units + B - 1) / B;
    if (g > (V + 1) / CHUNK_MIN)
        g = (V + 1) / CHUNK_MIN;
    if (g > CHUNKS_MAX)
        g = CHUNKS_MAX;
    return g > 1 ? g : 1;
}

vkasr_status op_search_init_state(const struct be_search *s, const int64_t *frames, int32_t **state, uint64_t *bytes,
                                  struct err *e) {
    struct vctx c = {"search_init", e};
    *state = NULL;
    *bytes = 0;
    TRY(v_search(&c, s));
    const int64_t B = s->state.ne[0], Tf = s->f.ne[0];
    /* S_EMIT: the LSTM state the caller's start-of-sequence step writes to h_new is committed by the
     * first search_joint. Hypothesis h's frames follow those of the hypotheses before it in f. */
    int32_t *st = calloc((size_t)B, SEARCH_STATE_INTS * sizeof *st);
    if (!st)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    int64_t f0 = 0;
    for (int64_t h = 0; h < B; h++) {
        const int64_t n = frames ? frames[h] : Tf;
        if (n < 1 || f0 + n > Tf || n * s->max_symbols >= INT32_MAX) {
            free(st);
            return bad(&c, "frames", &s->f, "hypotheses' frames must be >= 1 and fit f (and T * max_symbols < 2^31)");
        }
        int32_t *sh = st + h * SEARCH_STATE_INTS;
        sh[SEARCH_S_FRAMES] = (int32_t)n;
        sh[SEARCH_S_F0] = (int32_t)f0;
        sh[SEARCH_S_LAST_T] = -1;
        sh[SEARCH_S_EMIT] = 1;
        sh[SEARCH_S_TOKEN] = (int32_t)(s->embed.ne[0] - 1);
        f0 += n;
    }
    *state = st;
    *bytes = (uint64_t)B * SEARCH_STATE_INTS * sizeof *st;
    return VKASR_OK;
}
