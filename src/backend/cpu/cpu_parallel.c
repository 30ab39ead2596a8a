/* cpu_parallel.c — the CPU backend's element-wise and row ops: the reference's code run on ranges of
 * independent rows (or elements) in parallel, so these ops give the oracle's results exactly. A range
 * is the same op on a slice: the rows r0..r1 of x and y. */
#include <string.h>

#include "cpu_internal.h"

/* One split op: the op, its arguments, and the first error a range met. */
struct split {
    struct backend *b;
    const void *a;
    int64_t unit; /* elements per index of the loop (unary, binary) */
    pthread_mutex_t lock;
    vkasr_status st;
    struct err err;
};

/* A worker's stand-in backend: the reference ops write their errors into it, not into the shared one. */
static struct backend range_backend(const struct split *s) {
    return (struct backend){.vt = s->b->vt, .dev = s->b->dev};
}

static void range_done(struct split *s, vkasr_status st, const struct backend *rb) {
    if (st == VKASR_OK)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->st == VKASR_OK) {
        s->st = st;
        s->err = rb->err;
    }
    pthread_mutex_unlock(&s->lock);
}

static vkasr_status run_split(struct backend *b, const void *a, int64_t n, int64_t grain, int64_t unit,
                              cpu_range_fn fn) {
    struct split s = {.b = b, .a = a, .unit = unit};
    pthread_mutex_init(&s.lock, NULL);
    cpu_pool_run(cpu_pool_of(b), n, grain, fn, &s);
    pthread_mutex_destroy(&s.lock);
    if (s.st != VKASR_OK)
        b->err = s.err;
    return s.st;
}

/* Rows [r0, r1) of t's outermost dimension (a tensor of any rank). */
static be_tensor rows(const be_tensor *t, int64_t r0, int64_t r1) {
    be_tensor o = *t;
    if (t->nd == 0)
        return o;
    uint64_t row_bytes = be_nbytes(t) / (uint64_t)(t->ne[0] > 0 ? t->ne[0] : 1);
    o.addr = t->addr + (uint64_t)r0 * row_bytes;
    o.ne[0] = r1 - r0;
    return o;
}

/* Elements [i0, i1) of t as a 1-D tensor. */
static be_tensor span(const be_tensor *t, int64_t i0, int64_t i1) {
    return be_tensor_1d(t->addr + (uint64_t)i0 * be_dtype_size(t->type), t->type, i1 - i0);
}

/* Work below this many elements runs on the calling thread alone (a hand-off costs more). */
#define GRAIN_ELEMS 16384

static int64_t grain_rows(int64_t row_elems) {
    int64_t g = GRAIN_ELEMS / (row_elems > 0 ? row_elems : 1);
    return g < 1 ? 1 : g;
}

/* ---- element-wise --------------------------------------------------------------------------------- */

static void unary_range(void *ctx, int64_t i0, int64_t i1) {
    struct split *s = ctx;
    struct op_unary o = *(const struct op_unary *)s->a;
    o.x = span(&o.x, i0, i1);
    o.y = span(&o.y, i0, i1);
    struct backend rb = range_backend(s);
    range_done(s, ref_unary(&rb, &o), &rb);
}

vkasr_status cpu_unary(struct backend *b, const struct op_unary *a) {
    return run_split(b, a, (int64_t)be_numel(&a->x), GRAIN_ELEMS, 1, unary_range);
}

/* Index i covers `unit` elements of a: whole repeats of b (so element k still pairs with b[k % nb]),
 * or, where b is as long as a, the same elements of both. */
static void binary_range(void *ctx, int64_t i0, int64_t i1) {
    struct split *s = ctx;
    struct op_binary o = *(const struct op_binary *)s->a;
    const int64_t nb = (int64_t)be_numel(&o.b), u = s->unit;
    o.a = span(&o.a, i0 * u, i1 * u);
    o.y = span(&o.y, i0 * u, i1 * u);
    if (u == 1 && nb > 1)
        o.b = span(&o.b, i0, i1);
    struct backend rb = range_backend(s);
    range_done(s, ref_binary(&rb, &o), &rb);
}

vkasr_status cpu_binary(struct backend *b, const struct op_binary *a) {
    const int64_t n = (int64_t)be_numel(&a->a), nb = (int64_t)be_numel(&a->b);
    if (nb == n) /* one element of b per element of a */
        return run_split(b, a, n, GRAIN_ELEMS, 1, binary_range);
    return run_split(b, a, n / nb, grain_rows(nb), nb, binary_range);
}

static void glu_range(void *ctx, int64_t i0, int64_t i1) {
    struct split *s = ctx;
    struct op_glu o = *(const struct op_glu *)s->a;
    o.x = rows(&o.x, i0, i1);
    o.y = rows(&o.y, i0, i1);
    struct backend rb = range_backend(s);
    range_done(s, ref_glu(&rb, &o), &rb);
}

vkasr_status cpu_glu(struct backend *b, const struct op_glu *a) {
    return run_split(b, a, a->y.ne[0], grain_rows(a->x.ne[1]), 1, glu_range);
}

/* ---- rows ------------------------------------------------------------------------------------------ */

static void layernorm_range(void *ctx, int64_t i0, int64_t i1) {
    struct split *s = ctx;
    struct op_layernorm o = *(const struct op_layernorm *)s->a;
    o.x = rows(&o.x, i0, i1);
    o.y = rows(&o.y, i0, i1);
    struct backend rb = range_backend(s);
    range_done(s, ref_layernorm(&rb, &o), &rb);
}

vkasr_status cpu_layernorm(struct backend *b, const struct op_layernorm *a) {
    return run_split(b, a, a->x.ne[0], grain_rows(a->x.ne[1]), 1, layernorm_range);
}

static void softmax_range(void *ctx, int64_t i0, int64_t i1) {
    struct split *s = ctx;
    struct op_softmax o = *(const struct op_softmax *)s->a;
    o.x = rows(&o.x, i0, i1);
    o.y = rows(&o.y, i0, i1);
    struct backend rb = range_backend(s);
    range_done(s, ref_softmax(&rb, &o), &rb);
}

vkasr_status cpu_softmax(struct backend *b, const struct op_softmax *a) {
    return run_split(b, a, a->x.ne[0], grain_rows(a->x.ne[1]), 1, softmax_range);
}
