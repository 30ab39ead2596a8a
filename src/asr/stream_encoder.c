/* stream_encoder.c — one stream of a cache-aware FastConformer, a chunk of R+1 encoder frames per step
 * (NeMo's cache_aware_stream_step), equal to the offline chunked run frame by frame:
 *   mel: frames computed once their right half-window has arrived (the last two wait for it);
 *   pre-encode: step 0 subsamples 1+8R mel frames, later steps the 9 before the chunk again and 8(R+1)
 *     new ones, dropping their first 2 subsampled frames (their causal convolutions read before the 9);
 *   per layer: the projected keys and values of the last L frames (the attention cache, a window over
 *     a buffer of 2(L+R+1) rows that is moved to its start when full) and the last K-1 inputs of the
 *     causal depthwise conv; the fill length (frames seen, at most L) masks nothing: only filled rows
 *     are passed to the attention, as keys at positions 0 .. fill-1 before the chunk's queries.
 * Keys and values are cached projected (not the attention's normalised input as NeMo does): the same
 * values, without projecting L cached rows again every step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

struct stream_layer {
    be_tensor k, v;                  /* [W, D] the attention cache's buffer (types asr_types.k, .v)  */
    be_tensor g;                     /* [K-1 + R+1, D] the conv cache then a chunk's GLU outputs     */
    be_tensor p;                     /* [P, D] the projected relative positions (asr_types.p)        */
};

struct asr_stream {
    const struct asr_model *m;
    struct backend *be;
    uint64_t mark;                   /* the scratch stack's top before the stream's tensors           */
    struct asr_stream_geometry g;
    struct asr_types t;
    int64_t W;                       /* rows of an attention cache buffer                            */
    int64_t win, fill;               /* the cache window: rows win .. win+fill-1 of every buffer     */
    struct stream_layer *layers;
    be_tensor gtmp;                  /* [K-1, D] the conv cache's move                                */
    struct asr_stream_dec dec;
    /* mel frames on the host: [mel_base, mel_base + mel_n) */
    float *mel;
    int64_t mel_base, mel_n, mel_cap;
    int64_t mel_done;                /* frames computed (the next one to compute)                    */
    int64_t mel_next;                /* the first mel frame no step has taken as new                 */
    int64_t frames, steps;           /* encoder frames emitted, steps run                             */
    bool finished;
    bool keep;
    float *enc;                      /* keep_encoder: [frames, D]                                    */
    int64_t enc_cap;
};

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

vkasr_status asr_stream_geometry(const struct model_config *c, struct asr_stream_geometry *g, struct err *e) {
    if (c->n_ctx <= 0)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "streaming: the model is not cache-aware (no chunked_limited att_context_size): it streams "
                       "through overlapping windows instead");
    if (!c->causal_sub || !c->causal_conv || c->sub_factor != 8)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "streaming: a cache-aware session needs causal subsampling by 8 and the causal depthwise "
                       "conv (this model: causal_downsampling %s, factor %d, causal conv %s)",
                       c->causal_sub ? "true" : "false", c->sub_factor, c->causal_conv ? "true" : "false");
    const int L = c->ctx[c->ctx_sel][0], R = c->ctx[c->ctx_sel][1];
    *g = (struct asr_stream_geometry){.left = L, .chunk = R + 1, .mel_first = 1 + 8 * (int64_t)R,
                                      .mel_step = 8 * ((int64_t)R + 1), .mel_cache = 9, .drop = 2};
    return VKASR_OK;
}

/* ---- tensors -------------------------------------------------------------------------------------- */

static vkasr_status alloc2(struct backend *be, be_dtype type, int64_t rows, int64_t cols, be_tensor *t) {
    return be_alloc_tensor(be, BE_POOL_SCRATCH, type, 2, (int64_t[]){rows, cols}, t);
}

static vkasr_status zero_rows(struct backend *be, const be_tensor *t) {
    const uint64_t n = be_nbytes(t);
    void *z = calloc(1, n ? n : 1);
    if (!z)
        return VKASR_ERR_NO_MEMORY;
    vkasr_status st = be_upload(be, t->addr, z, n);
    free(z);
    return st;
}

static vkasr_status copy(struct backend *be, const be_tensor *x, const be_tensor *y) {
    return be_permute(be, &(struct op_permute){.x = *x, .y = *y, .perm = {0, 1}});
}

vkasr_status asr_stream_create(const struct asr_model *m, struct backend *be, const struct asr_stream_opts *o,
                               struct asr_stream **out, struct err *e) {
    const struct model_config *c = &m->cfg;
    *out = NULL;
    struct asr_stream_geometry g;
    TRY(asr_stream_geometry(c, &g, e));
    struct asr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    s->m = m;
    s->be = be;
    s->g = g;
    s->t = asr_types_for(m->precision);
    s->keep = o && o->keep_encoder;
    s->W = 2 * (g.left + g.chunk);
    s->mark = be_mark(be);
    s->layers = calloc((size_t)c->n_layers, sizeof *s->layers);
    const int64_t D = c->d_model, K1 = c->conv_kernel - 1, P = 2 * (g.left + g.chunk) - 1;
    vkasr_status st = s->layers ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    // pos: [P, D] PE(r) for r = L+R .. -(L+R): every distance between a chunk's query and its keys
    be_tensor pos = {0};
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, K1 > 0 ? K1 : 1, D, &s->gtmp);
    for (int l = 0; st == VKASR_OK && l < c->n_layers; l++) {
        struct stream_layer *sl = &s->layers[l];
        st = alloc2(be, s->t.k, s->W, D, &sl->k);
        if (st == VKASR_OK)
            st = alloc2(be, s->t.v, s->W, D, &sl->v);
        if (st == VKASR_OK)
            st = alloc2(be, s->t.hidden, K1 + g.chunk, D, &sl->g);
        if (st == VKASR_OK)
            st = alloc2(be, s->t.p, P, D, &sl->p);
        if (st == VKASR_OK) // the conv cache starts as the offline run's causal padding: zeros
            st = zero_rows(be, &sl->g);
    }
    if (st == VKASR_OK)
        st = asr_stream_dec_init(m, be, &s->dec, g.chunk, o ? o->max_symbols : 0, e);
    uint64_t tmark = be_mark(be);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, P, D, &pos);
    if (st == VKASR_OK)
        st = be_posenc(be, &(struct op_posenc){.inv_freq = m->pos_freq, .y = pos, .r0 = (P - 1) / 2});
    // p: [P, D] = pos Wpos^T per layer, once for the stream's life (the distances never change)
    for (int l = 0; st == VKASR_OK && l < c->n_layers; l++)
        st = be_linear(be, &(struct op_linear){.x = pos, .w = m->layers[l].wpos, .y = s->layers[l].p, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_sync(be);
    be_release(be, tmark);
    if (st != VKASR_OK) {
        if (e->code == VKASR_OK)
            err_set(e, st, "streaming: %s", st == VKASR_ERR_NO_MEMORY ? "out of memory for the caches" : be->err.msg);
        asr_stream_free(s);
        return st;
    }
    *out = s;
    return VKASR_OK;
}

void asr_stream_free(struct asr_stream *s) {
    if (!s)
        return;
    be_release(s->be, s->mark);
    free(s->layers);
    free(s->mel);
    free(s->enc);
    free(s);
}

int64_t asr_stream_frames(const struct asr_stream *s) { return s->frames; }
int64_t asr_stream_steps(const struct asr_stream *s) { return s->steps; }
const float *asr_stream_encoder(const struct asr_stream *s) { return s->enc; }

/* Mel frames a later step still reads start at mel_next - 9 (the pre-encode cache); computing frame
 * f reads samples from hop*f - n_fft/2, pre-emphasis one more, from a hop boundary. */
static int64_t lead_frames(const struct model_config *c) { return (c->n_fft / 2 + 1 + c->hop_length - 1) / c->hop_length; }

int64_t asr_stream_keep_from(const struct asr_stream *s) {
    const int64_t f = s->mel_done - lead_frames(&s->m->cfg);
    return f > 0 ? f * s->m->cfg.hop_length : 0;
}

int64_t asr_stream_samples_needed(const struct asr_stream *s) {
    const struct model_config *c = &s->m->cfg;
    const int64_t frames = s->steps == 0 ? s->g.mel_first : s->mel_next + s->g.mel_step;
    return (int64_t)c->hop_length * (frames - 1) + c->n_fft / 2;
}

/* ---- the front end ---------------------------------------------------------------------------------- */

#define MEL_TILE 256

/* Appends mel frames [mel_done, upto) to the host buffer, computed as asr_features computes them
 * (without per-feature normalisation: cache-aware models take the raw log-mel). */
static vkasr_status mel_frames(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, int64_t upto,
                               struct err *e) {
    const struct model_config *c = &s->m->cfg;
    struct backend *be = s->be;
    const int64_t M = c->n_mels, nb = c->n_fft / 2 + 1, hop = c->hop_length;
    // drop frames no step reads any more
    const int64_t keep = max64(s->mel_base, s->mel_next - s->g.mel_cache);
    if (keep > s->mel_base) {
        const int64_t d = min64(keep - s->mel_base, s->mel_n);
        memmove(s->mel, s->mel + d * M, (size_t)((s->mel_n - d) * M) * sizeof *s->mel);
        s->mel_n -= d;
        s->mel_base += d;
    }
    if (upto <= s->mel_done)
        return VKASR_OK;
    const int64_t need = s->mel_done + (upto - s->mel_done) - s->mel_base;
    if (need > s->mel_cap) {
        float *nm = realloc(s->mel, (size_t)(need * M) * sizeof *nm);
        if (!nm)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        s->mel = nm;
        s->mel_cap = need;
    }
    uint64_t mark = be_mark(be);
    be_tensor block, power, mel;
    const int64_t F = min64(MEL_TILE, upto - s->mel_done);
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 1,
                                      (int64_t[]){hop * (F - 1 + lead_frames(c)) + c->n_fft / 2}, &block);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, F, nb, &power);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, F, M, &mel);
    for (int64_t f0 = s->mel_done; st == VKASR_OK && f0 < upto; f0 += F) {
        const int64_t nf = min64(F, upto - f0);
        const int64_t b0 = f0 > lead_frames(c) ? hop * (f0 - lead_frames(c)) : 0;
        const int64_t b1 = min64(hop * (f0 + nf - 1) + c->n_fft / 2, total);
        CHECK_OR_RETURN(e, b0 >= s0 && b1 >= b0);
        be_tensor blk = be_tensor_rows(&block, 0, b1 - b0), pw = be_tensor_rows(&power, 0, nf);
        be_tensor mr = be_tensor_rows(&mel, 0, nf);
        st = be_upload(be, blk.addr, samples + (b0 - s0), (uint64_t)(b1 - b0) * sizeof(float));
        if (st == VKASR_OK)
            st = be_stft_power(be, &(struct op_stft_power){.x = blk, .window = s->m->window, .y = pw,
                                                           .f0 = f0 - b0 / hop, .n_fft = c->n_fft,
                                                           .hop = c->hop_length, .preemph = c->preemph});
        // mel: [nf, M] = ln(power . fb^T + 2^-24)
        if (st == VKASR_OK)
            st = be_linear(be, &(struct op_linear){.x = pw, .w = s->m->melbank, .y = mr, .act = ACT_LOG_GUARD,
                                                   .alpha = 1.0f});
        if (st == VKASR_OK)
            st = be_download(be, s->mel + (f0 - s->mel_base) * M, mr.addr, (uint64_t)(nf * M) * sizeof(float));
    }
    be_release(be, mark);
    if (st != VKASR_OK)
        return e->code == VKASR_OK ? err_set(e, st, "streaming front end: %s", be->err.msg) : st;
    s->mel_n = upto - s->mel_base;
    s->mel_done = upto;
    return VKASR_OK;
}

/* ---- one encoder step ------------------------------------------------------------------------------ */

struct step_ctx {
    struct asr_stream *s;
    struct backend *be;
    const struct model_config *c;
    int64_t n, D;                    /* the chunk's frames, width                                   */
    vkasr_status st;
};

static be_tensor tmp(struct step_ctx *x, be_dtype type, int64_t rows, int64_t cols) {
    be_tensor t = {0};
    if (x->st == VKASR_OK)
        x->st = alloc2(x->be, type, rows, cols, &t);
    return t;
}
static void layernorm(struct step_ctx *x, const be_tensor *a, const be_tensor *g, const be_tensor *b, const be_tensor *y) {
    if (x->st == VKASR_OK)
        x->st = be_layernorm(x->be, &(struct op_layernorm){.x = *a, .gamma = *g, .beta = *b, .y = *y, .eps = 1e-5f});
}
static void linear(struct step_ctx *x, const be_tensor *a, const be_tensor *w, const be_tensor *b, const be_tensor *res,
                   const be_tensor *y, int act, float alpha) {
    if (x->st == VKASR_OK)
        x->st = be_linear(x->be, &(struct op_linear){.x = *a, .w = *w, .bias = b ? *b : (be_tensor){0},
                                                      .res = res ? *res : (be_tensor){0}, .y = *y, .act = act,
                                                      .alpha = alpha});
}

// x: [n, D] += 0.5 * W2 silu(W1 LN(x) + b1) + b2
static void feed_forward(struct step_ctx *x, const be_tensor *r, const be_tensor *lw, const be_tensor *lb,
                         const be_tensor *w1, const be_tensor *b1, const be_tensor *w2, const be_tensor *b2) {
    const struct asr_types *t = &x->s->t;
    be_tensor h = tmp(x, t->norm, x->n, x->D), u = tmp(x, t->hidden, x->n, x->c->ff_size);
    layernorm(x, r, lw, lb, &h);
    linear(x, &h, w1, b1, NULL, &u, ACT_SILU, 1.0f);
    linear(x, &u, w2, b2, r, r, ACT_NONE, 0.5f);
}

// x: [n, D] += Wo attention(LN(x)) + bo over the cached keys and the chunk's own: keys at positions
// 0 .. fill-1 (the cache window) and fill .. fill+n-1 (the chunk), queries at fill ..
static void attention(struct step_ctx *x, const struct asr_layer *L, struct stream_layer *sl, const be_tensor *r) {
    struct asr_stream *s = x->s;
    const int64_t n = x->n, D = x->D, f = s->fill, a = s->win;
    be_tensor h = tmp(x, s->t.norm, n, D), q = tmp(x, s->t.q, n, D), o = tmp(x, s->t.att, n, D);
    be_tensor kn = be_tensor_rows(&sl->k, a + f, n), vn = be_tensor_rows(&sl->v, a + f, n);
    layernorm(x, r, &L->att_norm_w, &L->att_norm_b, &h);
    // q, and k, v of the chunk's rows written after the cache window
    linear(x, &h, &L->wq, &L->bq, NULL, &q, ACT_NONE, 1.0f);
    linear(x, &h, &L->wk, &L->bk, NULL, &kn, ACT_NONE, 1.0f);
    linear(x, &h, &L->wv, &L->bv, NULL, &vn, ACT_NONE, 1.0f);
    // o: [n, D] = softmax(((q+u) k^T + rel_shift((q+v) p^T)) / sqrt(dk)) v over keys 0 .. f+n-1 with the
    // chunked mask anchored at 0: f is a whole number of chunks, so the query chunk sees them all
    if (x->st == VKASR_OK)
        x->st = be_relpos_attention(
            x->be, &(struct op_relpos_attention){
                       .q = q, .k = be_tensor_rows(&sl->k, a, f + n), .v = be_tensor_rows(&sl->v, a, f + n),
                       .p = sl->p, .bias_u = L->bias_u, .bias_v = L->bias_v, .y = o, .heads = x->c->n_heads,
                       .n_valid = f + n, .chunk = s->g.chunk, .left_chunks = s->g.left / s->g.chunk, .q_pos0 = f,
                       .k_pos0 = 0, .f16 = s->m->precision == VKASR_PRECISION_F16});
    linear(x, &o, &L->wo, &L->bo, r, r, ACT_NONE, 1.0f);
}

// x: [n, D] += PW2 act(norm(DW_causal([cache | GLU(PW1 LN(x))]))) + b2; the cache keeps the last K-1
// GLU outputs
static void conv_module(struct step_ctx *x, const struct asr_layer *L, struct stream_layer *sl, const be_tensor *r) {
    struct asr_stream *s = x->s;
    const int64_t n = x->n, D = x->D, K1 = x->c->conv_kernel - 1;
    const bool ln = x->c->conv_ln;
    be_tensor h = tmp(x, s->t.norm, n, D), d = tmp(x, ln ? BE_F32 : s->t.hidden, K1 + n, D);
    be_tensor gn = be_tensor_rows(&sl->g, K1, n), gall = be_tensor_rows(&sl->g, 0, K1 + n);
    layernorm(x, r, &L->conv_norm_w, &L->conv_norm_b, &h);
    linear(x, &h, &L->pw1_w, &L->pw1_b, NULL, &gn, ACT_GLU, 1.0f);
    if (x->st == VKASR_OK)
        x->st = be_dwconv1d(x->be, &(struct op_dwconv1d){.x = gall, .w = L->dw_w, .b = L->dw_b, .y = d,
                                                         .act = ln ? ACT_NONE : ACT_SILU, .causal = true});
    be_tensor dn = be_tensor_rows(&d, K1, n);
    if (ln) {
        layernorm(x, &dn, &L->dw_ln_w, &L->dw_ln_b, &dn);
        if (x->st == VKASR_OK)
            x->st = be_unary(x->be, &(struct op_unary){.x = dn, .y = dn, .act = ACT_SILU, .alpha = 1.0f});
    }
    linear(x, &dn, &L->pw2_w, &L->pw2_b, r, r, ACT_NONE, 1.0f);
    // the cache: rows n .. n+K-2 of [cache | chunk] moved to the front (through gtmp: they may overlap)
    if (x->st == VKASR_OK && K1 > 0) {
        be_tensor tail = be_tensor_rows(&sl->g, n, K1), head = be_tensor_rows(&sl->g, 0, K1);
        be_tensor tt = be_tensor_2d(s->gtmp.addr, sl->g.type, K1, D);
        x->st = copy(x->be, &tail, &tt);
        if (x->st == VKASR_OK)
            x->st = copy(x->be, &tt, &head);
    }
}

/* Encoder and decoder of one chunk: mel rows [m0, m1) of the host buffer, of which the first `drop`
 * subsampled frames are dropped and the next n kept. */
static vkasr_status step(struct asr_stream *s, int64_t m0, int64_t m1, int64_t drop, int64_t n,
                         struct asr_output *out, struct err *e) {
    const struct asr_model *m = s->m;
    const struct model_config *c = &m->cfg;
    struct backend *be = s->be;
    const int64_t D = c->d_model, M = c->n_mels, rows = m1 - m0, T = asr_encoder_frames(c, rows);
    CHECK_OR_RETURN(e, n > 0 && n <= s->g.chunk && drop + n <= T && m0 >= s->mel_base &&
                           m1 <= s->mel_base + s->mel_n);
    uint64_t mark = be_mark(be);
    struct step_ctx x = {.s = s, .be = be, .c = c, .n = n, .D = D};
    be_tensor feat = tmp(&x, BE_F32, rows, M), xs = tmp(&x, BE_F32, T, D);
    if (x.st == VKASR_OK)
        x.st = be_upload(be, feat.addr, s->mel + (m0 - s->mel_base) * M, (uint64_t)(rows * M) * sizeof(float));
    if (x.st != VKASR_OK) {
        be_release(be, mark);
        return err_set(e, x.st, "streaming: %s", be->err.msg);
    }
    // xs: [T, D] = subsampling of the chunk's mel (causal: the 9 cached frames make its first outputs exact
    // from row `drop` on)
    vkasr_status st = asr_subsample_tiled(m, be, &feat, &xs, T, NULL, NULL, e);
    be_tensor r = be_tensor_rows(&xs, drop, n);
    if (st == VKASR_OK && c->xscaling)
        st = be_unary(be, &(struct op_unary){.x = r, .y = r, .act = ACT_NONE, .alpha = sqrtf((float)D)});
    x.st = st;
    for (int l = 0; x.st == VKASR_OK && l < c->n_layers; l++) {
        const struct asr_layer *L = &m->layers[l];
        struct stream_layer *sl = &s->layers[l];
        uint64_t lm = be_mark(be);
        feed_forward(&x, &r, &L->ff1_norm_w, &L->ff1_norm_b, &L->ff1_w1, &L->ff1_b1, &L->ff1_w2, &L->ff1_b2);
        attention(&x, L, sl, &r);
        conv_module(&x, L, sl, &r);
        feed_forward(&x, &r, &L->ff2_norm_w, &L->ff2_norm_b, &L->ff2_w1, &L->ff2_b1, &L->ff2_w2, &L->ff2_b2);
        layernorm(&x, &r, &L->out_norm_w, &L->out_norm_b, &r);
        be_release(be, lm);
    }
    // the cache window: the last L rows of [window | chunk]; moved to the buffers' start when the next
    // chunk would not fit after it (never overlapping: the window then starts past L + R+1)
    if (x.st == VKASR_OK) {
        const int64_t nf = min64(s->fill + n, s->g.left), nw = s->win + s->fill + n - nf;
        if (nw + nf + s->g.chunk > s->W) {
            for (int l = 0; x.st == VKASR_OK && l < c->n_layers; l++) {
                struct stream_layer *sl = &s->layers[l];
                be_tensor kf = be_tensor_rows(&sl->k, nw, nf), kt = be_tensor_rows(&sl->k, 0, nf);
                be_tensor vf = be_tensor_rows(&sl->v, nw, nf), vt = be_tensor_rows(&sl->v, 0, nf);
                x.st = copy(be, &kf, &kt);
                if (x.st == VKASR_OK)
                    x.st = copy(be, &vf, &vt);
            }
            s->win = 0;
        } else {
            s->win = nw;
        }
        s->fill = nf;
    }
    if (x.st == VKASR_OK && s->keep) {
        if (s->frames + n > s->enc_cap) {
            int64_t cap = max64(2 * s->enc_cap, s->frames + n + 64);
            float *ne = realloc(s->enc, (size_t)(cap * D) * sizeof *ne);
            if (!ne)
                x.st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
            else {
                s->enc = ne;
                s->enc_cap = cap;
            }
        }
        if (x.st == VKASR_OK)
            x.st = be_download(be, s->enc + s->frames * D, r.addr, (uint64_t)(n * D) * sizeof(float));
    }
    if (x.st == VKASR_OK)
        x.st = asr_stream_dec_run(m, be, &s->dec, &r, s->frames, out, e);
    be_release(be, mark);
    if (x.st != VKASR_OK) {
        if (e->code == VKASR_OK)
            err_set(e, x.st, "streaming encoder step %lld: %s", (long long)s->steps, be->err.msg);
        return x.st;
    }
    s->frames += n;
    s->steps++;
    return VKASR_OK;
}

/* A later step's first mel frame: the 9 before its new ones, or the stream's start where fewer came
 * before (R = 0: step 0 took 1). From frame 0 the subsampling recomputes every frame emitted so far,
 * else the first 2 (a multiple of 8 frames in, so the three causal stages align with the offline run's). */
static int64_t cache_start(const struct asr_stream *s) { return max64(0, s->mel_next - s->g.mel_cache); }
static int64_t cache_drop(const struct asr_stream *s) { return cache_start(s) == 0 ? s->frames : s->g.drop; }

vkasr_status asr_stream_advance(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, bool final,
                                struct asr_output *out, struct err *e) {
    const struct model_config *c = &s->m->cfg;
    if (s->finished)
        return err_set(e, VKASR_ERR_INVALID_ARG, "streaming: the stream has already ended");
    if (s0 > asr_stream_keep_from(s) || total < s0)
        return err_set(e, VKASR_ERR_INVALID_ARG,
                       "streaming: samples from %lld to %lld given, the stream still needs those from %lld",
                       (long long)s0, (long long)total, (long long)asr_stream_keep_from(s));
    // mel frames whose window has fully arrived; at the end, every valid frame (floor(samples / hop))
    int64_t upto = final ? total / c->hop_length
                         : total >= c->n_fft / 2 ? (total - c->n_fft / 2) / c->hop_length + 1 : 0;
    upto = max64(upto, s->mel_done);
    TRY(mel_frames(s, samples, s0, total, upto, e));
    const struct asr_stream_geometry *g = &s->g;
    for (;;) {
        if (s->steps == 0 && s->mel_done >= g->mel_first) {
            TRY(step(s, 0, g->mel_first, 0, g->chunk, out, e));
            s->mel_next = g->mel_first;
        } else if (s->steps > 0 && s->mel_done >= s->mel_next + g->mel_step) {
            TRY(step(s, cache_start(s), s->mel_next + g->mel_step, cache_drop(s), g->chunk, out, e));
            s->mel_next += g->mel_step;
        } else {
            break;
        }
        TRY(mel_frames(s, samples, s0, total, upto, e)); /* drops the frames no step reads now */
    }
    if (final) {
        // the rest: the offline run's last frames from the remaining mel frames
        const int64_t T = asr_encoder_frames(c, s->mel_done), left = T - s->frames;
        if (left > 0) {
            TRY(step(s, cache_start(s), s->mel_done, cache_drop(s), left, out, e));
            s->mel_next = s->mel_done;
        }
        s->finished = true;
    }
    return VKASR_OK;
}
