/* conformer.c — one FastConformer block (spec §4-5) on the backend:
 *   x = x + 0.5 FF1(LN(x));  x = x + MHSA(LN(x));  x = x + Conv(LN(x));  x = x + 0.5 FF2(LN(x));  x = LN(x)
 * Every sublayer runs in chunks of rows (temporaries bounded by the chunk, results bit-identical to one
 * chunk): row-local sublayers update x in place; the convolution module and local attention read a
 * halo or band and write the other residual buffer; full attention takes keys and values from every row
 * first, and its convolution writes into the dead keys' buffer, which becomes x. A packed batch passes
 * its segments to the two ops that mix rows. Chunks count as work between abort polls (steps.c).
 * Tensor types (asr_types_for): the residual stream and everything accumulated inside an op stay f32;
 * in f16 precision the tensors between ops that feed a product or are read once are f16 (the rule and
 * its reasons: docs/architecture.md, "Tensor types between ops (precision)"). On a backend whose
 * products of block-quantized weights take int8 rows (backend.int8_rows), the layernorms in front of
 * such products also write their output's int8 rows, which the products read instead of quantizing it. */
#include <math.h>

#include "asr.h"

struct asr_types asr_types_for(vkasr_precision precision) {
    const be_dtype h = precision == VKASR_PRECISION_F16 ? BE_F16 : BE_F32;
    return (struct asr_types){
        .sub = h,
        .norm = h,
        .hidden = h,
        .q = h,
        .k = h,
        .v = h,
        .p = h,
        .att = h,
    };
}

struct block_ctx {
    const struct model_config *cfg;
    struct backend *be;
    int64_t T, D, rows;  /* sequence length, width, rows per chunk (<= T) */
    bool f16;            /* f16 precision: attention products may round to f16 (tensor cores) */
    bool rows8;          /* layernorms make the int8 rows of the quantized products they feed  */
    struct asr_types t;  /* the types of the tensors between ops */
    be_tensor seg;       /* a packed batch's encoder-frame offsets (addr 0: one sequence) */
    int64_t seg_max;     /* its longest sequence */
    struct asr_steps *steps; /* abort polls (NULL: none) */
};

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Rows of the depthwise convolution's halo before and after a row: (K-1)/2 each (4 for K = 9), or K-1
 * before and none after for the causal conv of cache-aware models. */
static int64_t conv_halo_before(const struct model_config *c) {
    return c->causal_conv ? c->conv_kernel - 1 : (c->conv_kernel - 1) / 2;
}
static int64_t conv_halo_after(const struct model_config *c) { return c->causal_conv ? 0 : (c->conv_kernel - 1) / 2; }

/* Where a sublayer's loop over chunks of `rows` ends: after the last row, or on a measuring backend
 * after the first chunk (the chunks allocate nothing: the temporaries are taken before the loop). */
static int64_t loop_end(const struct block_ctx *c, int64_t rows, int64_t total) {
    return be_measuring(c->be) ? min64(rows, total) : total;
}

/* Rows per chunk of a sublayer costing `fixed` + rows x `per_row` multiply-adds: the planned rows,
 * cut to about one step on a CPU device. */
static int64_t chunk_rows(const struct block_ctx *c, int64_t fixed, int64_t per_row) {
    return asr_steps_rows(c->steps, c->rows, fixed, per_row, 16);
}

static be_tensor tmp(struct block_ctx *c, be_dtype type, int64_t rows, int64_t cols, vkasr_status *st) {
    be_tensor t = {0};
    if (*st == VKASR_OK)
        *st = be_alloc_tensor(c->be, BE_POOL_SCRATCH, type, 2, (int64_t[]){rows, cols}, &t);
    return t;
}

/* Scratch for the int8 rows of a layernorm's output [rows, D] (op_layernorm.y8), 0 where the block's
 * layernorms make none. */
static uint64_t tmp_rows8(struct block_ctx *c, int64_t rows, vkasr_status *st) {
    uint64_t addr = 0;
    if (*st == VKASR_OK && c->rows8)
        *st = be_alloc(c->be, BE_POOL_SCRATCH, be_rows8_bytes(rows, c->D), &addr);
    return addr;
}

/* h8 where one of the products reading a layernorm's output (w0, w1, w2; NULL: none) has quantized
 * weights, else 0: the layernorm makes int8 rows only for a product that reads them. */
static uint64_t rows8_for(uint64_t h8, const be_tensor *w0, const be_tensor *w1, const be_tensor *w2) {
    const bool q = be_dtype_is_quant(w0->type) || (w1 && be_dtype_is_quant(w1->type)) ||
                   (w2 && be_dtype_is_quant(w2->type));
    return q ? h8 : 0;
}

/* y = LN(x), and y's int8 rows into y8 (0: none). */
static vkasr_status layernorm(struct block_ctx *c, const be_tensor *x, const be_tensor *g, const be_tensor *b,
                              const be_tensor *y, uint64_t y8) {
    return be_layernorm(c->be,
                        &(struct op_layernorm){.x = *x, .gamma = *g, .beta = *b, .y = *y, .eps = 1e-5f, .y8 = y8});
}

/* y = res + alpha act(x w^T + b); x8: x's int8 rows made by its layernorm (0: none), read by a product
 * of quantized w. */
static vkasr_status linear(struct block_ctx *c, const be_tensor *x, uint64_t x8, const be_tensor *w,
                           const be_tensor *b, const be_tensor *res, const be_tensor *y, int act, float alpha) {
    return be_linear(c->be, &(struct op_linear){.x = *x, .w = *w, .bias = b ? *b : (be_tensor){0},
                                                 .res = res ? *res : (be_tensor){0}, .y = *y, .act = act,
                                                 .alpha = alpha, .x_f32 = !c->f16,
                                                 .x8 = be_dtype_is_quant(w->type) ? x8 : 0});
}

// x: [T, D] += 0.5 * W2 silu(W1 LN(x) + b1) + b2, chunk by chunk in place
static vkasr_status feed_forward(struct block_ctx *c, be_tensor *x, const be_tensor *ln_w, const be_tensor *ln_b,
                                 const be_tensor *w1, const be_tensor *b1, const be_tensor *w2, const be_tensor *b2) {
    const int64_t F = c->cfg->ff_size, per_row = 2 * c->D * F, rows = chunk_rows(c, 0, per_row);
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor h = tmp(c, c->t.norm, rows, c->D, &st), u = tmp(c, c->t.hidden, rows, F, &st);
    const uint64_t h8 = rows8_for(tmp_rows8(c, rows, &st), w1, NULL, NULL);
    for (int64_t r0 = 0, end = loop_end(c, rows, c->T); st == VKASR_OK && r0 < end; r0 += rows) {
        const int64_t n = min64(rows, c->T - r0);
        be_tensor xr = be_tensor_rows(x, r0, n), hr = be_tensor_rows(&h, 0, n), ur = be_tensor_rows(&u, 0, n);
        // h: [n, D] = LN(x rows);  u: [n, F] = silu(h W1^T + b1);  x rows += 0.5 (u W2^T + b2)
        st = layernorm(c, &xr, ln_w, ln_b, &hr, h8);
        if (st == VKASR_OK)
            st = linear(c, &hr, h8, w1, b1, NULL, &ur, ACT_SILU, 1.0f);
        if (st == VKASR_OK)
            st = linear(c, &ur, 0, w2, b2, &xr, &xr, ACT_NONE, 0.5f);
        if (st == VKASR_OK)
            st = asr_steps_add(c->steps, n * per_row);
    }
    be_release(c->be, mark);
    return st;
}

/* a: [n, D] = attention of the queries q (positions r0 ..) over the keys k, v (positions ka ..). */
/* A chunked_limited model's mask (ops.h): chunks of R+1 frames, L/(R+1) chunks back, for the pair in
 * use; chunk 0 for the others. */
static void chunked_mask(const struct model_config *cfg, int64_t *chunk, int64_t *left) {
    *chunk = *left = 0;
    if (cfg->n_ctx > 0) {
        const int *lr = cfg->ctx[cfg->ctx_sel];
        *chunk = lr[1] + 1;
        *left = lr[0] / (lr[1] + 1);
    }
}

static vkasr_status attend(struct block_ctx *c, const struct asr_layer *L, const be_tensor *q, int64_t r0,
                           const be_tensor *k, const be_tensor *v, int64_t ka, const be_tensor *p, int64_t window,
                           const be_tensor *a) {
    int64_t chunk, left;
    chunked_mask(c->cfg, &chunk, &left);
    return be_relpos_attention(c->be, &(struct op_relpos_attention){
                                          .q = *q, .k = *k, .v = *v, .p = *p, .bias_u = L->bias_u,
                                          .bias_v = L->bias_v, .y = *a, .heads = c->cfg->n_heads, .n_valid = c->T,
                                          .window = window, .chunk = chunk, .left_chunks = left, .q_pos0 = r0,
                                          .k_pos0 = ka, .f16 = c->f16, .seg = c->seg, .seg_max = c->seg_max});
}

// y: [T, D] = x + Wo attention(LN(x)) + bo with local attention [w, w]: each chunk of queries
// computes the keys and values of its band (its rows and w more on each side) itself
static vkasr_status attention_local(struct block_ctx *c, const struct asr_layer *L, const be_tensor *x,
                                    const be_tensor *y, const be_tensor *p, int64_t w) {
    const int64_t D = c->D;
    // a chunk of n queries: k, v of its n + 2w band rows; q, o and the scores over 2w+1 keys of its own
    const int64_t kv_row = 2 * D * D, q_row = 2 * D * D + 3 * (2 * w + 1) * D;
    const int64_t rows = chunk_rows(c, 2 * w * kv_row, kv_row + q_row), nk_max = min64(c->T, rows + 2 * w);
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor hk = tmp(c, c->t.norm, nk_max, D, &st), k = tmp(c, c->t.k, nk_max, D, &st);
    be_tensor v = tmp(c, c->t.v, nk_max, D, &st), q = tmp(c, c->t.q, rows, D, &st);
    be_tensor a = tmp(c, c->t.att, rows, D, &st);
    /* the band's int8 rows (the queries' rows are a slice of them, and quantize themselves) */
    const uint64_t hk8 = rows8_for(tmp_rows8(c, nk_max, &st), &L->wk, &L->wv, NULL);
    for (int64_t r0 = 0, end = loop_end(c, rows, c->T); st == VKASR_OK && r0 < end; r0 += rows) {
        const int64_t n = min64(rows, c->T - r0), ka = max64(0, r0 - w), nk = min64(c->T, r0 + n + w) - ka;
        be_tensor hkr = be_tensor_rows(&hk, 0, nk), kr = be_tensor_rows(&k, 0, nk), vr = be_tensor_rows(&v, 0, nk);
        be_tensor hq = be_tensor_rows(&hk, r0 - ka, n), qr = be_tensor_rows(&q, 0, n), ar = be_tensor_rows(&a, 0, n);
        be_tensor xk = be_tensor_rows(x, ka, nk), xr = be_tensor_rows(x, r0, n), yr = be_tensor_rows(y, r0, n);
        // hk: [nk, D] = LN(x rows ka ..);  k, v: [nk, D];  q: [n, D] from the chunk's own rows of hk
        st = layernorm(c, &xk, &L->att_norm_w, &L->att_norm_b, &hkr, hk8);
        if (st == VKASR_OK)
            st = linear(c, &hkr, hk8, &L->wk, &L->bk, NULL, &kr, ACT_NONE, 1.0f);
        if (st == VKASR_OK)
            st = linear(c, &hkr, hk8, &L->wv, &L->bv, NULL, &vr, ACT_NONE, 1.0f);
        if (st == VKASR_OK)
            st = linear(c, &hq, 0, &L->wq, &L->bq, NULL, &qr, ACT_NONE, 1.0f);
        // a: [n, D] = softmax(((q+u) k^T + rel_shift((q+v) p^T)) / sqrt(dk)) v over |i - j| <= w, per head
        if (st == VKASR_OK)
            st = attend(c, L, &qr, r0, &kr, &vr, ka, p, w, &ar);
        // y rows = x rows + a Wo^T + bo
        if (st == VKASR_OK)
            st = linear(c, &ar, 0, &L->wo, &L->bo, &xr, &yr, ACT_NONE, 1.0f);
        if (st == VKASR_OK)
            st = asr_steps_add(c->steps, nk * kv_row + n * q_row);
    }
    be_release(c->be, mark);
    return st;
}

// x: [T, D] += Wo attention(LN(x)) + bo with full attention: k, v [T, D] for every row first, then the
// queries chunk by chunk against all of them, each chunk updating its own rows (no later chunk reads
// them: the keys and values are already computed)
static vkasr_status attention_full(struct block_ctx *c, const struct asr_layer *L, const be_tensor *x,
                                   const be_tensor *p, const be_tensor *k, const be_tensor *v) {
    // a row: pass 0 its key and value, pass 1 its query, output and the scores over all T keys
    const int64_t per_row[2] = {2 * c->D * c->D, 2 * c->D * c->D + 3 * c->T * c->D};
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor h = tmp(c, c->t.norm, c->rows, c->D, &st), q = tmp(c, c->t.q, c->rows, c->D, &st);
    be_tensor a = tmp(c, c->t.att, c->rows, c->D, &st);
    const uint64_t h8 = rows8_for(tmp_rows8(c, c->rows, &st), &L->wk, &L->wv, &L->wq);
    // both passes in one chunk: the queries' pass takes the keys' LN(x), still in h
    const bool one_chunk = chunk_rows(c, 0, per_row[0]) >= c->T && chunk_rows(c, 0, per_row[1]) >= c->T;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t r0 = 0, rows = chunk_rows(c, 0, per_row[pass]), end = loop_end(c, rows, c->T);
             st == VKASR_OK && r0 < end; r0 += rows) {
            const int64_t n = min64(rows, c->T - r0);
            be_tensor xr = be_tensor_rows(x, r0, n), hr = be_tensor_rows(&h, 0, n);
            // h: [n, D] = LN(x rows)
            if (pass == 0 || !one_chunk)
                st = layernorm(c, &xr, &L->att_norm_w, &L->att_norm_b, &hr, h8);
            if (pass == 0) {
                // k, v rows: [n, D]
                be_tensor kr = be_tensor_rows(k, r0, n), vr = be_tensor_rows(v, r0, n);
                if (st == VKASR_OK)
                    st = linear(c, &hr, h8, &L->wk, &L->bk, NULL, &kr, ACT_NONE, 1.0f);
                if (st == VKASR_OK)
                    st = linear(c, &hr, h8, &L->wv, &L->bv, NULL, &vr, ACT_NONE, 1.0f);
                if (st == VKASR_OK)
                    st = asr_steps_add(c->steps, n * per_row[0]);
                continue;
            }
            be_tensor qr = be_tensor_rows(&q, 0, n), ar = be_tensor_rows(&a, 0, n);
            // q: [n, D];  a: [n, D] = softmax(((q+u) k^T + rel_shift((q+v) p^T)) / sqrt(dk)) v, per head
            if (st == VKASR_OK)
                st = linear(c, &hr, h8, &L->wq, &L->bq, NULL, &qr, ACT_NONE, 1.0f);
            if (st == VKASR_OK)
                st = attend(c, L, &qr, r0, k, v, 0, p, 0, &ar);
            // x rows += a Wo^T + bo
            if (st == VKASR_OK)
                st = linear(c, &ar, 0, &L->wo, &L->bo, &xr, &xr, ACT_NONE, 1.0f);
            if (st == VKASR_OK)
                st = asr_steps_add(c->steps, n * per_row[1]);
        }
    be_release(c->be, mark);
    return st;
}

// x: [T, D] = y + PW2 silu(BN(DW(GLU(PW1 LN(y))))) + b, BN folded into DW; each chunk computes LN,
// PW1 and GLU for its rows and the depthwise halo around them. Cache-aware models: the depthwise conv
// causal (halo K-1 rows before, none after) and a LayerNorm over channels after it, in f32:
// y + PW2 silu(LN_dw(DW_causal(GLU(PW1 LN(y))))) + b
static vkasr_status conv_module(struct block_ctx *c, const struct asr_layer *L, const be_tensor *y,
                                const be_tensor *x) {
    const int64_t hb = conv_halo_before(c->cfg), hf = conv_halo_after(c->cfg), D = c->D;
    const bool ln = c->cfg->conv_ln;
    // a row: the pointwise products (D -> 2D, D -> D) and the depthwise taps; the halo rows all but the last
    const int64_t in_row = 2 * D * D + c->cfg->conv_kernel * D, per_row = in_row + D * D;
    const int64_t rows = chunk_rows(c, (hb + hf) * in_row, per_row), nh_max = min64(c->T, rows + hb + hf);
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor h = tmp(c, c->t.norm, nh_max, D, &st), g = tmp(c, c->t.hidden, nh_max, D, &st);
    be_tensor d = tmp(c, ln ? BE_F32 : c->t.hidden, nh_max, D, &st);
    const uint64_t h8 = rows8_for(tmp_rows8(c, nh_max, &st), &L->pw1_w, NULL, NULL);
    for (int64_t r0 = 0, end = loop_end(c, rows, c->T); st == VKASR_OK && r0 < end; r0 += rows) {
        const int64_t n = min64(rows, c->T - r0), ha = max64(0, r0 - hb), nh = min64(c->T, r0 + n + hf) - ha;
        be_tensor yh = be_tensor_rows(y, ha, nh), hr = be_tensor_rows(&h, 0, nh);
        be_tensor gr = be_tensor_rows(&g, 0, nh), dr = be_tensor_rows(&d, 0, nh);
        // h: [nh, D] = LN(y rows ha ..);  g: [nh, D] = GLU(h PW1^T + b1) (value half * sigmoid(gate half))
        st = layernorm(c, &yh, &L->conv_norm_w, &L->conv_norm_b, &hr, h8);
        if (st == VKASR_OK)
            st = linear(c, &hr, h8, &L->pw1_w, &L->pw1_b, NULL, &gr, ACT_GLU, 1.0f);
        // d: [nh, D] = silu(depthwise_conv_K(g)) (LayerNorm models: the conv alone); the slice's zero
        // padding only reaches halo rows that are not the chunk's own, or lies outside the sequence,
        // where it is the real padding (in a packed batch, every input's edges are padding too)
        if (st == VKASR_OK)
            st = be_dwconv1d(c->be, &(struct op_dwconv1d){.x = gr, .w = L->dw_w, .b = L->dw_b, .y = dr,
                                                           .act = ln ? ACT_NONE : ACT_SILU, .seg = c->seg,
                                                           .row0 = ha, .causal = c->cfg->causal_conv});
        be_tensor dn = be_tensor_rows(&d, r0 - ha, n), yr = be_tensor_rows(y, r0, n), xr = be_tensor_rows(x, r0, n);
        // LayerNorm models: d (own rows) = silu(LN_dw(d)), in place in f32
        if (st == VKASR_OK && ln)
            st = layernorm(c, &dn, &L->dw_ln_w, &L->dw_ln_b, &dn, 0);
        if (st == VKASR_OK && ln)
            st = be_unary(c->be, &(struct op_unary){.x = dn, .y = dn, .act = ACT_SILU, .alpha = 1.0f});
        // x rows = y rows + d (own rows) PW2^T + b2
        if (st == VKASR_OK)
            st = linear(c, &dn, 0, &L->pw2_w, &L->pw2_b, &yr, &xr, ACT_NONE, 1.0f);
        if (st == VKASR_OK)
            st = asr_steps_add(c->steps, (nh - n) * in_row + n * per_row);
    }
    be_release(c->be, mark);
    return st;
}

vkasr_status asr_conformer_block(const struct asr_model *m, struct backend *be, const struct asr_layer *L,
                                 be_tensor *x, be_tensor *y, const be_tensor *v, const be_tensor *pos, const be_tensor *p,
                                 int64_t window, int64_t rows, const struct asr_segments *segs, struct asr_steps *steps,
                                 struct err *e) {
    const int64_t T = x->ne[0];
    struct block_ctx c = {&m->cfg, be, T, m->cfg.d_model, max64(1, min64(rows, T)),
                          m->precision == VKASR_PRECISION_F16, be->int8_rows && m->quantized && m->cfg.d_model % 4 == 0,
                          asr_types_for(m->precision),
                          segs ? segs->seg : (be_tensor){0}, segs ? segs->max_frames : 0, steps};
    vkasr_status st = VKASR_OK;
    // x = x + 0.5 FF1(LN(x))
    st = feed_forward(&c, x, &L->ff1_norm_w, &L->ff1_norm_b, &L->ff1_w1, &L->ff1_b1, &L->ff1_w2, &L->ff1_b2);
    // p: [P, D] = pos Wpos^T (no bias), in chunks of rows (a row's result never depends on them)
    const int64_t P = pos->ne[0], prow = asr_steps_rows(steps, P, 0, c.D * c.D, 16);
    for (int64_t r0 = 0, end = loop_end(&c, prow, P); st == VKASR_OK && r0 < end; r0 += prow) {
        const int64_t n = min64(prow, P - r0);
        be_tensor pr = be_tensor_rows(pos, r0, n), yr = be_tensor_rows(p, r0, n);
        st = linear(&c, &pr, 0, &L->wpos, NULL, NULL, &yr, ACT_NONE, 1.0f);
        if (st == VKASR_OK)
            st = asr_steps_add(steps, n * c.D * c.D);
    }
    if (window > 0) {
        // y = x + MHSA(LN(x));  x = y + Conv(LN(y))
        if (st == VKASR_OK)
            st = attention_local(&c, L, x, y, p, window);
        if (st == VKASR_OK)
            st = conv_module(&c, L, y, x);
    } else {
        // x = x + MHSA(LN(x)) with the keys in y;  y = x + Conv(LN(x)), which is x from here on
        be_tensor keys = be_tensor_2d(y->addr, c.t.k, T, c.D); /* the first bytes of y */
        if (st == VKASR_OK)
            st = attention_full(&c, L, x, p, &keys, v);
        if (st == VKASR_OK)
            st = conv_module(&c, L, x, y);
        be_tensor t = *x;
        *x = *y;
        *y = t;
    }
    // x = x + 0.5 FF2(LN(x))
    if (st == VKASR_OK)
        st = feed_forward(&c, x, &L->ff2_norm_w, &L->ff2_norm_b, &L->ff2_w1, &L->ff2_b1, &L->ff2_w2, &L->ff2_b2);
    // x = LN_out(x), row by row in place
    if (st == VKASR_OK)
        st = layernorm(&c, x, &L->out_norm_w, &L->out_norm_b, x, 0);
    if (st != VKASR_OK && st != VKASR_ABORTED && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    return st;
}
