/* conformer.c — one FastConformer block (spec §4-5) on the backend:
 *   x = x + 0.5 FF1(LN(x));  x = x + MHSA(LN(x));  x = x + Conv(LN(x));  x = x + 0.5 FF2(LN(x));  x = LN(x)
 * Feed-forward hidden activations are computed in row chunks so their memory stays bounded. */
#include <math.h>

#include "asr.h"

/* Rows per feed-forward chunk: the [rows, F] hidden tensor stays under ~128 MiB. */
#define FF_HIDDEN_BUDGET (128ull << 20)

struct block_ctx {
    const struct model_config *cfg;
    struct backend *be;
    int64_t T;
    bool f16; /* f16 precision: attention products may round to f16 (tensor cores) */
};

static be_tensor tmp(struct block_ctx *c, int64_t rows, int64_t cols, vkasr_status *st) {
    be_tensor t = {0};
    if (*st == VKASR_OK)
        *st = be_alloc_tensor(c->be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){rows, cols}, &t);
    return t;
}

// x: [T, D] += 0.5 * W2 silu(W1 h + b1) + b2, with h = LN(x) already in `h`
static vkasr_status feed_forward(struct block_ctx *c, be_tensor *x, const be_tensor *h, const be_tensor *w1,
                                 const be_tensor *b1, const be_tensor *w2, const be_tensor *b2) {
    const int64_t F = w1->ne[0];
    int64_t chunk = (int64_t)(FF_HIDDEN_BUDGET / (4 * (uint64_t)F));
    chunk = chunk < 1 ? 1 : chunk > c->T ? c->T : chunk;
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor u = tmp(c, chunk, F, &st);
    for (int64_t r0 = 0; st == VKASR_OK && r0 < c->T; r0 += chunk) {
        int64_t n = c->T - r0 < chunk ? c->T - r0 : chunk;
        be_tensor ur = be_tensor_rows(&u, 0, n), xr = be_tensor_rows(x, r0, n);
        // u: [n, F] = silu(h W1^T + b1)
        st = be_linear(c->be, &(struct op_linear){.x = be_tensor_rows(h, r0, n), .w = *w1, .bias = *b1, .y = ur,
                                                   .act = ACT_SILU, .alpha = 1.0f});
        // x: [n, D] += 0.5 * (u W2^T + b2)
        if (st == VKASR_OK)
            st = be_linear(c->be, &(struct op_linear){.x = ur, .w = *w2, .bias = *b2, .res = xr, .y = xr,
                                                       .alpha = 0.5f});
    }
    be_release(c->be, mark);
    return st;
}

static vkasr_status layernorm(struct block_ctx *c, const be_tensor *x, const be_tensor *g, const be_tensor *b,
                              be_tensor *y) {
    return be_layernorm(c->be, &(struct op_layernorm){.x = *x, .gamma = *g, .beta = *b, .y = *y, .eps = 1e-5f});
}

// x: [T, D] += Wo attention(q, k, v, p) + bo, with h = LN(x); pos: [P, D] sinusoids
static vkasr_status self_attention(struct block_ctx *c, const struct asr_layer *L, be_tensor *x, const be_tensor *h,
                                   const be_tensor *pos, int64_t window) {
    const int64_t T = c->T, D = c->cfg->d_model;
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor q = tmp(c, T, D, &st), k = tmp(c, T, D, &st), v = tmp(c, T, D, &st), a = tmp(c, T, D, &st);
    be_tensor p = tmp(c, pos->ne[0], D, &st);
    // q, k, v: [T, D];  p: [P, D] (no bias)
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = *h, .w = L->wq, .bias = L->bq, .y = q, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = *h, .w = L->wk, .bias = L->bk, .y = k, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = *h, .w = L->wv, .bias = L->bv, .y = v, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = *pos, .w = L->wpos, .y = p, .alpha = 1.0f});
    // a: [T, D] = softmax(((q+u) k^T + rel_shift((q+v) p^T)) / sqrt(dk)) v, per head
    if (st == VKASR_OK)
        st = be_relpos_attention(c->be, &(struct op_relpos_attention){.q = q, .k = k, .v = v, .p = p,
                                                                      .bias_u = L->bias_u, .bias_v = L->bias_v,
                                                                      .y = a, .heads = c->cfg->n_heads,
                                                                      .n_valid = T, .window = window,
                                                                      .f16 = c->f16});
    // x += a Wo^T + bo
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = a, .w = L->wo, .bias = L->bo, .res = *x, .y = *x, .alpha = 1.0f});
    be_release(c->be, mark);
    return st;
}

// x: [T, D] += PW2 silu(BN(DW(GLU(PW1 h)))), BN folded into DW
static vkasr_status conv_module(struct block_ctx *c, const struct asr_layer *L, be_tensor *x, const be_tensor *h) {
    const int64_t T = c->T, D = c->cfg->d_model;
    uint64_t mark = be_mark(c->be);
    vkasr_status st = VKASR_OK;
    be_tensor u = tmp(c, T, 2 * D, &st), g = tmp(c, T, D, &st), d = tmp(c, T, D, &st);
    // u: [T, 2D] = h PW1^T + b1;  g: [T, D] = u[:, :D] * sigmoid(u[:, D:])
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = *h, .w = L->pw1_w, .bias = L->pw1_b, .y = u, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_glu(c->be, &(struct op_glu){.x = u, .y = g});
    // d: [T, D] = silu(depthwise_conv_K(g) with BN folded)
    if (st == VKASR_OK)
        st = be_dwconv1d(c->be, &(struct op_dwconv1d){.x = g, .w = L->dw_w, .b = L->dw_b, .y = d, .act = ACT_SILU});
    // x += d PW2^T + b2
    if (st == VKASR_OK)
        st = be_linear(c->be, &(struct op_linear){.x = d, .w = L->pw2_w, .bias = L->pw2_b, .res = *x, .y = *x,
                                                   .alpha = 1.0f});
    be_release(c->be, mark);
    return st;
}

vkasr_status asr_conformer_block(const struct asr_model *m, struct backend *be, const struct asr_layer *L,
                                 be_tensor *x, be_tensor *y, const be_tensor *pos, int64_t window, struct err *e);
vkasr_status asr_conformer_block(const struct asr_model *m, struct backend *be, const struct asr_layer *L,
                                 be_tensor *x, be_tensor *y, const be_tensor *pos, int64_t window, struct err *e) {
    struct block_ctx c = {&m->cfg, be, x->ne[0], m->precision == VKASR_PRECISION_F16};
    const int64_t D = m->cfg.d_model;
    uint64_t mark = be_mark(be);
    vkasr_status st = VKASR_OK;
    be_tensor h = tmp(&c, c.T, D, &st);
    // x: [T, D] = x + 0.5 FF1(LN(x))
    if (st == VKASR_OK)
        st = layernorm(&c, x, &L->ff1_norm_w, &L->ff1_norm_b, &h);
    if (st == VKASR_OK)
        st = feed_forward(&c, x, &h, &L->ff1_w1, &L->ff1_b1, &L->ff1_w2, &L->ff1_b2);
    // x = x + MHSA(LN(x))
    if (st == VKASR_OK)
        st = layernorm(&c, x, &L->att_norm_w, &L->att_norm_b, &h);
    if (st == VKASR_OK)
        st = self_attention(&c, L, x, &h, pos, window);
    // x = x + Conv(LN(x))
    if (st == VKASR_OK)
        st = layernorm(&c, x, &L->conv_norm_w, &L->conv_norm_b, &h);
    if (st == VKASR_OK)
        st = conv_module(&c, L, x, &h);
    // x = x + 0.5 FF2(LN(x))
    if (st == VKASR_OK)
        st = layernorm(&c, x, &L->ff2_norm_w, &L->ff2_norm_b, &h);
    if (st == VKASR_OK)
        st = feed_forward(&c, x, &h, &L->ff2_w1, &L->ff2_b1, &L->ff2_w2, &L->ff2_b2);
    // y = LN_out(x)
    if (st == VKASR_OK)
        st = layernorm(&c, x, &L->out_norm_w, &L->out_norm_b, y);
    be_release(be, mark);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    return st;
}
