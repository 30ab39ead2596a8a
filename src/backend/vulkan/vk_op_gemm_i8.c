/* vk_op_gemm_i8.c — the linear op of quantized weights (q8_0, q4_k, q5_k, q6_k) on int8 tensor cores
 * (W8A8 with one f32 scale per row): x's rows quantized into scratch by quantize_rows.comp, a model
 * weight's int8 form made once per device on first use (quantize_rows.comp dequantizing its blocks and
 * requantizing each row, kept in the weights arena; a weight outside that arena is converted per call
 * into scratch), and gemm_coopmat_i8.comp's int32 products scaled in its epilogue. Selection:
 * vk_gemm_choose. */
#include <stdlib.h>

#include "vk_gemm.h"

/* Workgroup size of quantize_rows.comp (one workgroup per row). */
#define QROWS_WG 128u

struct pc_quantize_rows {
    uint64_t x, q, scale;
    uint32_t M, K;
};

/* The variant of quantize_rows.comp that converts a weight of type t; false for a type without an int8
 * form. */
static bool weight_variant(be_dtype t, enum spv_id *spv) {
    switch (t) {
    case BE_Q8_0: *spv = SPV_quantize_rows_q8_0; return true;
    case BE_Q4_K: *spv = SPV_quantize_rows_q4_k; return true;
    case BE_Q5_K: *spv = SPV_quantize_rows_q5_k; return true;
    case BE_Q6_K: *spv = SPV_quantize_rows_q6_k; return true;
    default: return false;
    }
}

/* Records quantize_rows.comp (variant spv; weight: a weight's conversion) over rows of `in` (reads:
 * in_bytes) into q8 (rows x K int8, then the scales). */
static vkasr_status record_quantize(struct vk_backend *b, enum spv_id spv, bool weight, uint64_t in, uint64_t in_bytes,
                                    int64_t rows, int64_t K, uint64_t q8) {
    struct pc_quantize_rows pc = {.x = in, .q = q8, .scale = q8 + (uint64_t)rows * (uint64_t)K,
                                  .M = (uint32_t)rows, .K = (uint32_t)K};
    uint32_t spec[1] = {QROWS_WG};
    struct vk_range rd = {in, in_bytes}, wr = {q8, be_rows8_bytes(rows, K)};
    return vk_record(b, &(struct vk_dispatch){
                            .name = weight ? "linear_i8_weights" : "linear_i8_quantize_x",
                            .spv = spv,
                            .spec = spec,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)rows, 1), 1, 1},
                            .reads = &rd,
                            .nreads = 1,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

vkasr_status vk_i8_quantize_rows(struct vk_backend *b, const be_tensor *x, uint64_t q8) {
    const int64_t M = x->ne[0], K = x->ne[1];
    if ((x->type != BE_F32 && x->type != BE_F16) || K % 4 != 0 || M > INT32_MAX || K > INT32_MAX)
        return err_set(&b->base.err, VKASR_ERR_INVALID_ARG,
                       "linear: rows to int8 take f32 or f16 x with K %% 4 == 0 (K = %lld)", (long long)K);
    return record_quantize(b, x->type == BE_F16 ? SPV_quantize_rows_h : SPV_quantize_rows, false, x->addr, be_nbytes(x),
                           M, K, q8);
}

vkasr_status vk_i8_weight(struct vk_backend *b, const be_tensor *w, uint64_t *w8) {
    struct vk_device *d = b->d;
    struct err *e = &b->base.err;
    const int64_t N = w->ne[0], K = w->ne[1];
    enum spv_id spv;
    const char *tname = be_dtype_name(w->type);
    if (!weight_variant(w->type, &spv))
        return err_set(e, VKASR_ERR_INVALID_ARG, "linear: an int8 weight form takes q8_0, q4_k, q5_k or q6_k weights");
    if (K % 32 != 0 || N > INT32_MAX || K > INT32_MAX)
        return err_set(e, VKASR_ERR_INVALID_ARG, "linear: the int8 form of %s weight [%lld, %lld] needs K %% 32 == 0",
                       tname, (long long)N, (long long)K);
    struct be_arena_block blk;
    pthread_mutex_lock(&d->base.weights_lock);
    const bool model = be_arena_find(&d->base.weights, w->addr, be_nbytes(w), &blk);
    pthread_mutex_unlock(&d->base.weights_lock);
    if (!model) { /* a tensor of the caller's, which may change: its form for this call, in scratch */
        TRY(be_arena_alloc(&b->base.scratch, be_rows8_bytes(N, K), w8, e));
        return record_quantize(b, spv, true, w->addr, be_nbytes(w), N, K, *w8);
    }
    vkasr_status st = VKASR_OK;
    pthread_mutex_lock(&d->i8_lock);
    for (size_t i = 0; i < d->ni8w; i++)
        if (d->i8w[i].w == w->addr && d->i8w[i].n == N && d->i8w[i].k == K) {
            *w8 = d->i8w[i].w8;
            pthread_mutex_unlock(&d->i8_lock);
            return VKASR_OK;
        }
    if (b->capture) {
        st = err_set(e, VKASR_ERR_UNSUPPORTED,
                     "linear: the int8 form of %s weight [%lld, %lld] is made on its first use, which cannot be "
                     "inside a recorded op sequence",
                     tname, (long long)N, (long long)K);
        goto out;
    }
    if (d->ni8w == d->capi8w) {
        size_t cap = d->capi8w ? 2 * d->capi8w : 64;
        struct vk_i8_weight *t = realloc(d->i8w, cap * sizeof *t);
        if (!t) {
            st = err_set(e, VKASR_ERR_NO_MEMORY, "linear: out of memory for the int8 weights' table");
            goto out;
        }
        d->i8w = t;
        d->capi8w = cap;
    }
    /* The form lives as long as the device (the weights arena is grow-only), made once and waited for:
     * a later product on another backend reads it without ordering against this backend's queue. */
    uint64_t addr = 0;
    st = be_alloc(&b->base, BE_POOL_WEIGHTS, be_rows8_bytes(N, K), &addr);
    if (st == VKASR_OK)
        st = record_quantize(b, spv, true, w->addr, be_nbytes(w), N, K, addr);
    if (st == VKASR_OK)
        st = vk_submit(b, true);
    if (st == VKASR_OK) {
        d->i8w[d->ni8w++] = (struct vk_i8_weight){.w = w->addr, .n = N, .k = K, .w8 = addr};
        *w8 = addr;
    }
out:
    pthread_mutex_unlock(&d->i8_lock);
    return st;
}

/* One row chunk of the product: x's rows [r0, r0 + n) to int8 in x8 (made: they are there already, the
 * whole of x), then the GEMM into y's rows. */
static vkasr_status record_chunk(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_cfg *cfg,
                                 uint32_t flags, uint32_t types, uint64_t w8, uint64_t x8, bool made, int64_t r0,
                                 int64_t n) {
    const int64_t K = a->x.ne[1], N = a->w.ne[0];
    const be_tensor x = be_tensor_rows(&a->x, r0, n), y = be_tensor_rows(&a->y, r0, n);
    const be_tensor res = a->res.addr ? be_tensor_rows(&a->res, r0, n) : a->res;
    if (!made)
        TRY(vk_i8_quantize_rows(b, &x, x8));
    struct pc_gemm pc = {
        .x = x8, .w = w8, .bias = a->bias.addr, .res = res.addr, .y = y.addr, .M = (uint32_t)n,
        .N = (uint32_t)N, .K = (uint32_t)K, .act = (uint32_t)a->act, .alpha = a->alpha,
        .flags = flags & GEMM_FLAG_YVEC, .k_slice = (uint32_t)K, .splits = 1,
    };
    uint32_t spec[8] = {cfg->wg, cfg->bm, cfg->bn, cfg->bk, 0, 0, 0, types & TYPE_Y16};
    const uint64_t tiles = (uint64_t)((n + cfg->bm - 1) / cfg->bm) * (uint64_t)((N + cfg->bn - 1) / cfg->bn);
    uint32_t groups = vk_groups_x(b->d, tiles, 1);
    struct vk_range rd[4], wr[2];
    int nrd = 0, nwr = 0;
    rd[nrd++] = (struct vk_range){x8, be_rows8_bytes(n, K)};
    rd[nrd++] = (struct vk_range){w8, be_rows8_bytes(N, K)};
    if (a->bias.addr)
        rd[nrd++] = vk_tensor_range(&a->bias);
    if (res.addr)
        rd[nrd++] = vk_tensor_range(&res);
    wr[nwr++] = vk_tensor_range(&y);
    const uint64_t mark = be_mark(&b->base);
    vkasr_status st = vk_gemm_dispatch(b, cfg, cfg->spv, spec, &pc, groups, rd, nrd, wr, nwr);
    be_release(&b->base, mark);
    return st;
}

/* x's rows go to int8 in chunks of at most VK_I8_X_BYTES (a whole number of tiles), so the op's own
 * scratch stays bounded whatever M is (be_memory.op_scratch_quant): each chunk is quantized, then
 * multiplied. A row's int8 form and sums do not depend on the chunk it falls in. With a->x8 (the int8
 * rows its layernorm made) there is nothing to quantize: one GEMM over all rows. */
vkasr_status vk_gemm_record_i8(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_cfg *cfg,
                               uint32_t flags, uint32_t types) {
    struct err *e = &b->base.err;
    const int64_t M = a->x.ne[0], K = a->x.ne[1];
    if (a->x.type != BE_F32 && a->x.type != BE_F16)
        return err_set(e, VKASR_ERR_INVALID_ARG, "linear: the int8 path takes f32 or f16 x");
    static uint64_t chunk_bytes; /* VKASR_I8_X_BYTES (tests): smaller chunks; read once */
    if (!chunk_bytes) {
        const char *s = getenv("VKASR_I8_X_BYTES");
        const uint64_t v = s ? strtoull(s, NULL, 10) : 0;
        chunk_bytes = v && v < VK_I8_X_BYTES ? v : VK_I8_X_BYTES;
    }
    int64_t rows = (int64_t)(chunk_bytes / (uint64_t)(K + 4)) / cfg->bm * cfg->bm;
    if (rows < cfg->bm)
        rows = cfg->bm;
    const bool made = a->x8 != 0;
    if (rows > M || made)
        rows = M;
    const uint64_t mark = be_mark(&b->base);
    uint64_t w8 = 0, x8 = a->x8;
    vkasr_status st = vk_i8_weight(b, &a->w, &w8);
    if (st == VKASR_OK && !made)
        st = be_arena_alloc(&b->base.scratch, be_rows8_bytes(rows, K), &x8, e);
    for (int64_t r0 = 0; st == VKASR_OK && r0 < M; r0 += rows)
        st = record_chunk(b, a, cfg, flags, types, w8, x8, made, r0, M - r0 < rows ? M - r0 : rows);
    be_release(&b->base, mark);
    if (st == VKASR_OK)
        atomic_fetch_add(&b->d->i8_products, 1);
    return st;
}
