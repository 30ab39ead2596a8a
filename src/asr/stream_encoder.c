/* stream_encoder.c — cache-aware FastConformer streams (NeMo's cache_aware_stream_step), a chunk of
 * R+1 encoder frames per stream and step, many streams of one model in one step, each equal to the
 * offline chunked run frame by frame:
 *   mel: a step computes its streams' mel frames from their samples (the last two frames wait for
 *     their right half-window), every stream's in one product with the filterbank;
 *   pre-encode: step 0 subsamples 1+8R mel frames, later steps the 9 before the chunk again and 8(R+1)
 *     new ones, dropping their first 2 subsampled frames (their causal convolutions read before the 9);
 *     the streams of a step are one packed batch of the subsampling;
 *   per layer and stream (a slot of the pool's tensors): the projected keys and values of its last L
 *     frames (a window over 2(L+R+1) rows, moved to the slot's start when full) and the last K-1
 *     inputs of the causal depthwise conv (the step convolves its streams' [cache | chunk] rows packed,
 *     so its cost follows the streams it advances, not the pool's slots). The fill length (frames
 *     seen, at most L) needs no mask: a stream's attention segment is [its window | its chunk], the
 *     queries its last rows (op relpos_attention's q_pos form), so every stream of the step attends to
 *     its own keys in one call.
 * Keys and values are cached projected (not the attention's normalised input as NeMo does): the same
 * values, without projecting L cached rows again every step. Rows of all streams of a step go through
 * the linears together; row copies (op copy_rows) move them between the packed rows and the slots. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"
#include "stream.h"

struct pool_layer {
    be_tensor k, v;                  /* [S*W, D]: slot s's window rows s*W .. (types asr_types.k, .v) */
    be_tensor g;                     /* [S*K1, D]: slot s's conv cache, its last K-1 GLU outputs      */
    be_tensor p;                     /* [P, D] the projected relative positions (shared)             */
};

struct asr_stream_pool {
    const struct asr_model *m;
    struct backend *be;
    uint64_t mark;                   /* the scratch stack's top before the pool's tensors            */
    struct asr_stream_geometry g;
    struct asr_types t;
    int64_t S, W, K1;                /* slots; rows of a slot's attention window buffer, conv cache */
    struct pool_layer *layers;
    struct asr_stream_search dec;    /* the slots' transducer search                                 */
    struct asr_stream **used;        /* [S] the slot's stream (NULL: free)                           */
};

struct asr_stream {
    struct asr_stream_pool *p;
    int64_t slot;
    int64_t win, fill;               /* the cache window: rows win .. win+fill-1 of the slot         */
    /* the samples a later step still reads, on the host: [smp_base, smp_base + smp_n) */
    float *smp;
    int64_t smp_base, smp_n, smp_cap;
    int64_t mel_done;                /* mel frames whose samples have all arrived                    */
    int64_t mel_next;                /* the first mel frame no step has taken as new                 */
    int64_t frames, steps;           /* encoder frames emitted, steps run                             */
    bool ended;                      /* the input ended (every mel frame computed)                    */
    bool done;                       /* ... and every encoder frame                                   */
    bool keep;
    int prompt;                      /* asr_stream_opts.prompt                                       */
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

static vkasr_status upload_i64(struct backend *be, const int64_t *v, int64_t n, be_tensor *t) {
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I64, 1, (int64_t[]){n}, t));
    return be_upload(be, t->addr, v, (uint64_t)n * sizeof *v);
}

vkasr_status asr_stream_pool_create(const struct asr_model *m, struct backend *be, int64_t slots, int max_symbols,
                                    struct asr_stream_pool **out, struct err *e) {
    const struct model_config *c = &m->cfg;
    *out = NULL;
    struct asr_stream_geometry g;
    TRY(asr_stream_geometry(c, &g, e));
    if (slots < 1 || slots > (1 << 20))
        return err_set(e, VKASR_ERR_INVALID_ARG, "streaming: a pool of %lld streams (1 .. 2^20)", (long long)slots);
    struct asr_stream_pool *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    p->m = m;
    p->be = be;
    p->g = g;
    p->t = asr_types_for(m->precision);
    p->S = slots;
    p->W = 2 * (g.left + g.chunk);
    p->K1 = c->conv_kernel - 1;
    p->mark = be_mark(be);
    p->layers = calloc((size_t)c->n_layers, sizeof *p->layers);
    p->used = calloc((size_t)slots, sizeof *p->used);
    const int64_t D = c->d_model, P = 2 * (g.left + g.chunk) - 1;
    vkasr_status st = p->layers && p->used ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int l = 0; st == VKASR_OK && l < c->n_layers; l++) {
        struct pool_layer *pl = &p->layers[l];
        st = alloc2(be, p->t.k, slots * p->W, D, &pl->k);
        if (st == VKASR_OK)
            st = alloc2(be, p->t.v, slots * p->W, D, &pl->v);
        if (st == VKASR_OK)
            st = alloc2(be, p->t.hidden, slots * (p->K1 > 0 ? p->K1 : 1), D, &pl->g);
        if (st == VKASR_OK)
            st = alloc2(be, p->t.p, P, D, &pl->p);
    }
    if (st == VKASR_OK)
        st = asr_stream_search_init(m, be, &p->dec, slots, max_symbols, e);
    // pos: [P, D] PE(r) for r = L+R .. -(L+R), every distance between a chunk's query and its keys;
    // p = pos Wpos^T per layer, once for the pool's life (the distances never change)
    uint64_t tmark = be_mark(be);
    be_tensor pos = {0};
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, P, D, &pos);
    if (st == VKASR_OK)
        st = be_posenc(be, &(struct op_posenc){.inv_freq = m->pos_freq, .y = pos, .r0 = (P - 1) / 2});
    for (int l = 0; st == VKASR_OK && l < c->n_layers; l++)
        st = be_linear(be, &(struct op_linear){.x = pos, .w = m->layers[l].wpos, .y = p->layers[l].p, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_sync(be);
    be_release(be, tmark);
    if (st != VKASR_OK) {
        if (e->code == VKASR_OK)
            err_set(e, st, "streaming: caches of %lld streams: %s", (long long)slots, be->err.msg);
        asr_stream_pool_free(p);
        return st;
    }
    *out = p;
    return VKASR_OK;
}

void asr_stream_pool_free(struct asr_stream_pool *p) {
    if (!p)
        return;
    be_release(p->be, p->mark);
    asr_stream_search_fini(&p->dec);
    free(p->layers);
    free(p->used);
    free(p);
}

int64_t asr_stream_pool_slots(const struct asr_stream_pool *p) { return p->S; }
int64_t asr_stream_pool_free_slots(const struct asr_stream_pool *p) {
    int64_t n = 0;
    for (int64_t s = 0; s < p->S; s++)
        n += p->used[s] == NULL;
    return n;
}

vkasr_status asr_stream_create(struct asr_stream_pool *p, const struct asr_stream_opts *o, struct asr_stream **out,
                               struct err *e) {
    *out = NULL;
    if (p->m->cfg.n_prompts > 0 && !(o && o->prompt > 0))
        return err_set(e, VKASR_ERR_INVALID_ARG, "streaming: a language-prompt model needs a language");
    int64_t slot = 0;
    while (slot < p->S && p->used[slot])
        slot++;
    if (slot == p->S)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY, "streaming: all %lld stream slots of the pool are in use",
                       (long long)p->S);
    struct asr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    s->p = p;
    s->slot = slot;
    s->keep = o && o->keep_encoder;
    s->prompt = o ? o->prompt : 0;
    // the conv cache starts as the offline run's causal padding (zeros); the search from its start
    vkasr_status st = VKASR_OK;
    for (int l = 0; st == VKASR_OK && p->K1 > 0 && l < p->m->cfg.n_layers; l++) {
        be_tensor gr = be_tensor_rows(&p->layers[l].g, slot * p->K1, p->K1);
        st = zero_rows(p->be, &gr);
    }
    if (st != VKASR_OK)
        err_set(e, st, "streaming: %s", p->be->err.msg);
    if (st == VKASR_OK)
        st = asr_stream_search_reset(p->m, p->be, &p->dec, slot, o ? o->max_symbols : 0, e);
    if (st != VKASR_OK) {
        free(s);
        return st;
    }
    p->used[slot] = s;
    *out = s;
    return VKASR_OK;
}

void asr_stream_free(struct asr_stream *s) {
    if (!s)
        return;
    s->p->used[s->slot] = NULL;
    free(s->smp);
    free(s->enc);
    free(s);
}

int64_t asr_stream_frames(const struct asr_stream *s) { return s->frames; }
int64_t asr_stream_steps(const struct asr_stream *s) { return s->steps; }
const float *asr_stream_encoder(const struct asr_stream *s) { return s->enc; }
bool asr_stream_done(const struct asr_stream *s) { return s->done; }

/* Mel frames a later step still reads start at mel_next - 9 (the pre-encode cache); computing frame
 * f reads samples from hop*f - n_fft/2, pre-emphasis one more, from a hop boundary. */
static int64_t lead_frames(const struct model_config *c) { return (c->n_fft / 2 + 1 + c->hop_length - 1) / c->hop_length; }

/* A later step's first mel frame: the 9 before its new ones, or the stream's start where fewer came
 * before (R = 0: step 0 took 1). From frame 0 the subsampling recomputes every frame emitted so far,
 * else the first 2 (a multiple of 8 frames in, so the three causal stages align with the offline run's). */
static int64_t cache_start(const struct asr_stream *s) { return max64(0, s->mel_next - s->p->g.mel_cache); }
static int64_t cache_drop(const struct asr_stream *s) { return cache_start(s) == 0 ? s->frames : s->p->g.drop; }

int64_t asr_stream_keep_from(const struct asr_stream *s) {
    const int64_t f = cache_start(s) - lead_frames(&s->p->m->cfg);
    return f > 0 ? f * s->p->m->cfg.hop_length : 0;
}

int64_t asr_stream_samples_needed(const struct asr_stream *s) {
    const struct model_config *c = &s->p->m->cfg;
    const int64_t frames = s->steps == 0 ? s->p->g.mel_first : s->mel_next + s->p->g.mel_step;
    return (int64_t)c->hop_length * (frames - 1) + c->n_fft / 2;
}

/* ---- the samples ------------------------------------------------------------------------------------ */

vkasr_status asr_stream_feed(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, bool final,
                             struct err *e) {
    const struct model_config *c = &s->p->m->cfg;
    if (s->ended)
        return err_set(e, VKASR_ERR_INVALID_ARG, "streaming: the stream has already ended");
    const int64_t have = s->smp_base + s->smp_n;
    if (s0 > have || s0 > asr_stream_keep_from(s) || total < s0)
        return err_set(e, VKASR_ERR_INVALID_ARG,
                       "streaming: samples from %lld to %lld given, the stream still needs those from %lld",
                       (long long)s0, (long long)total, (long long)asr_stream_keep_from(s));
    // drop what no step reads any more, then append what is new
    const int64_t keep = asr_stream_keep_from(s);
    if (keep > s->smp_base) {
        const int64_t d = min64(keep - s->smp_base, s->smp_n);
        memmove(s->smp, s->smp + d, (size_t)(s->smp_n - d) * sizeof *s->smp);
        s->smp_n -= d;
        s->smp_base += d;
    }
    if (total > have) {
        const int64_t need = total - s->smp_base;
        if (need > s->smp_cap) {
            int64_t cap = max64(need, 2 * s->smp_cap);
            float *ns = realloc(s->smp, (size_t)cap * sizeof *ns);
            if (!ns)
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
            s->smp = ns;
            s->smp_cap = cap;
        }
        memcpy(s->smp + (have - s->smp_base), samples + (have - s0), (size_t)(total - have) * sizeof *s->smp);
        s->smp_n = total - s->smp_base;
    }
    // mel frames whose window has fully arrived; at the end, every valid frame (floor(samples / hop))
    const int64_t upto = final ? total / c->hop_length
                               : total >= c->n_fft / 2 ? (total - c->n_fft / 2) / c->hop_length + 1 : 0;
    s->mel_done = max64(s->mel_done, upto);
    if (final) {
        s->ended = true;
        s->done = asr_encoder_frames(c, s->mel_done) <= s->frames;
    }
    return VKASR_OK;
}

/* ---- a step's plan per stream ---------------------------------------------------------------------- */

struct plan {
    int64_t m0, m1, drop, n, mel_next;
};

/* The stream's next step: mel rows [m0, m1) of its buffer, subsampled frames [drop, drop + n) kept. */
static bool plan_of(const struct asr_stream *s, struct plan *pl) {
    const struct asr_stream_geometry *g = &s->p->g;
    if (s->done)
        return false;
    if (s->steps == 0 && s->mel_done >= g->mel_first) {
        *pl = (struct plan){0, g->mel_first, 0, g->chunk, g->mel_first};
        return true;
    }
    if (s->steps > 0 && s->mel_done >= s->mel_next + g->mel_step) {
        *pl = (struct plan){cache_start(s), s->mel_next + g->mel_step, cache_drop(s), g->chunk, s->mel_next + g->mel_step};
        return true;
    }
    if (s->ended) { /* the rest: the offline run's last frames from the remaining mel frames */
        const int64_t left = asr_encoder_frames(&s->p->m->cfg, s->mel_done) - s->frames;
        if (left <= 0)
            return false;
        *pl = (struct plan){cache_start(s), s->mel_done, cache_drop(s), left, s->mel_done};
        return true;
    }
    return false;
}

bool asr_stream_ready(const struct asr_stream *s) {
    struct plan pl;
    return plan_of(s, &pl);
}

/* ---- one step of many streams --------------------------------------------------------------------- */

struct step_ctx {
    struct asr_stream_pool *p;
    struct backend *be;
    const struct model_config *c;
    int64_t N, D;                    /* the step's rows (all streams), width                         */
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
/* A pool of at most this many slots (of 1, 4 or 16 streams in the API's pools) multiplies with the
 * matvec hint, a larger one without. Under the hint a step's few rows per stream are weight-bound and
 * gemv.comp reads each weight once per step, where tensor-core tiles leave a large GPU idle (N / 64
 * workgroups, sequential K steps); without it a step of hundreds of streams takes the tensor cores (the
 * hinted kernel's CUDA-core products bound such a step: 730 streams took 171 ms on the H100). Either
 * way a row's rounding depends on the weight's shape only (ops.h), never on how many streams share the
 * step, so a stream's frames are the same whoever it is batched with in its pool. */
#define STREAM_HINT_MAX_SLOTS 16

static void linear(struct step_ctx *x, const be_tensor *a, const be_tensor *w, const be_tensor *b, const be_tensor *res,
                   const be_tensor *y, int act, float alpha) {
    if (x->st == VKASR_OK)
        x->st = be_linear(x->be, &(struct op_linear){.x = *a, .w = *w, .bias = b ? *b : (be_tensor){0},
                                                      .res = res ? *res : (be_tensor){0}, .y = *y, .act = act,
                                                      .alpha = alpha, .matvec = x->p->S <= STREAM_HINT_MAX_SLOTS});
}
static void copy_rows(struct step_ctx *x, const be_tensor *a, const be_tensor *y, const be_tensor *src,
                      const be_tensor *dst, int64_t n) {
    if (x->st == VKASR_OK && n > 0)
        x->st = be_copy_rows(x->be, &(struct op_copy_rows){.x = *a, .y = *y, .src = src ? *src : (be_tensor){0},
                                                           .dst = dst ? *dst : (be_tensor){0}, .n = n});
}

/* The step's row tables on the device (one upload), each I64. */
struct tables {
    be_tensor xs_rows;               /* [N] the subsampled rows kept, in the packed subsampling output */
    be_tensor kv_rows;               /* [N] the chunk's rows in the attention buffers                 */
    be_tensor q_pos;                 /* [N] the queries' positions (= kv_rows)                        */
    be_tensor seg;                   /* [2B+2] the attention segments (streams' and the gaps between)  */
    /* the conv's packed rows: each stream's segment [its K-1 cached rows | its chunk's rows] */
    be_tensor c_seg;                 /* [B+1] the segments' starts                                    */
    be_tensor c_rows;                /* [N] the chunk's rows in them                                  */
    be_tensor cache_rows;            /* [B(K-1)] the streams' cache rows in the slots' caches         */
    be_tensor cache_in, cache_out;   /* [B(K-1)] in the packed rows: the old cache, the new one       */
    be_tensor w_src, w_dst;          /* [nw] the attention windows moved to their slot's start          */
    int64_t nw;
    /* where xs_rows, kv_rows and c_rows are one run of rows (a step of one stream): its first row, and
     * the rows are then used in place rather than copied; else -1 */
    int64_t xs_at, kv_at, c_at;
};

// x: [N, D] += 0.5 * W2 silu(W1 LN(x) + b1) + b2
static void feed_forward(struct step_ctx *x, const be_tensor *r, const be_tensor *lw, const be_tensor *lb,
                         const be_tensor *w1, const be_tensor *b1, const be_tensor *w2, const be_tensor *b2) {
    const struct asr_types *t = &x->p->t;
    be_tensor h = tmp(x, t->norm, x->N, x->D), u = tmp(x, t->hidden, x->N, x->c->ff_size);
    layernorm(x, r, lw, lb, &h);
    linear(x, &h, w1, b1, NULL, &u, ACT_SILU, 1.0f);
    linear(x, &u, w2, b2, r, r, ACT_NONE, 0.5f);
}

// x: [N, D] += Wo attention(LN(x)) + bo, each stream over its window and its chunk: keys at its
// segment's positions 0 .. fill-1 (the window) and fill .. (the chunk), its queries at fill ..
static void attention(struct step_ctx *x, const struct asr_layer *L, struct pool_layer *pl, const struct tables *tb,
                      const be_tensor *r) {
    struct asr_stream_pool *p = x->p;
    const int64_t N = x->N, D = x->D;
    be_tensor h = tmp(x, p->t.norm, N, D), q = tmp(x, p->t.q, N, D), o = tmp(x, p->t.att, N, D);
    // the chunk's keys and values after each stream's window (one stream's: projected in place)
    const bool run = tb->kv_at >= 0;
    be_tensor kn = run ? be_tensor_rows(&pl->k, tb->kv_at, N) : tmp(x, p->t.k, N, D);
    be_tensor vn = run ? be_tensor_rows(&pl->v, tb->kv_at, N) : tmp(x, p->t.v, N, D);
    layernorm(x, r, &L->att_norm_w, &L->att_norm_b, &h);
    linear(x, &h, &L->wq, &L->bq, NULL, &q, ACT_NONE, 1.0f);
    linear(x, &h, &L->wk, &L->bk, NULL, &kn, ACT_NONE, 1.0f);
    linear(x, &h, &L->wv, &L->bv, NULL, &vn, ACT_NONE, 1.0f);
    if (!run) {
        copy_rows(x, &kn, &pl->k, NULL, &tb->kv_rows, N);
        copy_rows(x, &vn, &pl->v, NULL, &tb->kv_rows, N);
    }
    // o: [N, D] = softmax(((q+u) k^T + rel_shift((q+v) p^T)) / sqrt(dk)) v per stream segment, with the
    // chunked mask anchored at the segment's start: its window is whole chunks, all of them seen
    if (x->st == VKASR_OK)
        x->st = be_relpos_attention(
            x->be, &(struct op_relpos_attention){
                       .q = q, .k = pl->k, .v = pl->v, .p = pl->p, .bias_u = L->bias_u, .bias_v = L->bias_v,
                       .y = o, .heads = x->c->n_heads, .n_valid = pl->k.ne[0], .chunk = p->g.chunk,
                       .left_chunks = p->g.left / p->g.chunk, .seg = tb->seg, .seg_max = p->g.left + p->g.chunk,
                       .q_pos = tb->q_pos, .f16 = p->m->precision == VKASR_PRECISION_F16});
    linear(x, &o, &L->wo, &L->bo, r, r, ACT_NONE, 1.0f);
}

// x: [N, D] += PW2 act(norm(DW_causal([cache | GLU(PW1 LN(x))]))) + b2 per stream; each stream's cache
// keeps its last K-1 GLU outputs
static void conv_module(struct step_ctx *x, const struct asr_layer *L, struct pool_layer *pl, const struct tables *tb,
                        int64_t B, const be_tensor *r) {
    struct asr_stream_pool *p = x->p;
    const int64_t N = x->N, D = x->D, K1 = p->K1, rows = B * K1 + N;
    const bool ln = x->c->conv_ln;
    // g: each stream's [cache | chunk] rows, packed; d: each convolved in its own segment (one stream's
    // chunk rows are written and read in place)
    const bool run = tb->c_at >= 0;
    be_tensor h = tmp(x, p->t.norm, N, D), g = tmp(x, p->t.hidden, rows, D);
    be_tensor d = tmp(x, ln ? BE_F32 : p->t.hidden, rows, D);
    be_tensor gn = run ? be_tensor_rows(&g, tb->c_at, N) : tmp(x, p->t.hidden, N, D);
    be_tensor dn = run ? be_tensor_rows(&d, tb->c_at, N) : tmp(x, d.type, N, D);
    layernorm(x, r, &L->conv_norm_w, &L->conv_norm_b, &h);
    linear(x, &h, &L->pw1_w, &L->pw1_b, NULL, &gn, ACT_GLU, 1.0f);
    copy_rows(x, &pl->g, &g, &tb->cache_rows, &tb->cache_in, B * K1);
    if (!run)
        copy_rows(x, &gn, &g, NULL, &tb->c_rows, N);
    if (x->st == VKASR_OK)
        x->st = be_dwconv1d(x->be, &(struct op_dwconv1d){.x = g, .w = L->dw_w, .b = L->dw_b, .y = d,
                                                         .act = ln ? ACT_NONE : ACT_SILU,
                                                         .seg = B > 1 ? tb->c_seg : (be_tensor){0}, .causal = true});
    if (!run)
        copy_rows(x, &d, &dn, &tb->c_rows, NULL, N);
    if (ln) {
        layernorm(x, &dn, &L->dw_ln_w, &L->dw_ln_b, &dn);
        if (x->st == VKASR_OK)
            x->st = be_unary(x->be, &(struct op_unary){.x = dn, .y = dn, .act = ACT_SILU, .alpha = 1.0f});
    }
    linear(x, &dn, &L->pw2_w, &L->pw2_b, r, r, ACT_NONE, 1.0f);
    // the caches: each stream's last K-1 rows of [cache | chunk] back to its slot
    copy_rows(x, &g, &pl->g, &tb->cache_out, &tb->cache_rows, B * K1);
}

/* v[0] where v[0 .. n) is one run of rows (v[i] = v[0] + i), else -1. */
static int64_t run_start(const int64_t *v, int64_t n) {
    for (int64_t i = 1; i < n; i++)
        if (v[i] != v[0] + i)
            return -1;
    return n > 0 ? v[0] : -1;
}

/* The host side of the tables; B streams sorted by slot with plans pl. */
static vkasr_status make_tables(struct asr_stream_pool *p, struct asr_stream *const *ss, const struct plan *pl,
                                const int64_t *xs_off, int64_t B, int64_t N, struct tables *tb, struct err *e) {
    const int64_t K1 = p->m->cfg.conv_kernel - 1;
    int64_t nw = 0;
    for (int64_t b = 0; b < B; b++) {
        const struct asr_stream *s = ss[b];
        const int64_t nf = min64(s->fill + pl[b].n, p->g.left), w1 = s->win + s->fill + pl[b].n - nf;
        nw += w1 + nf + p->g.chunk > p->W ? nf : 0;
    }
    const int64_t total = 4 * N + 3 * B + 3 + 3 * B * K1 + 2 * nw;
    int64_t *v = malloc((size_t)(total > 0 ? total : 1) * sizeof *v);
    if (!v)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    int64_t *xr = v, *kr = xr + N, *seg = kr + N, *cseg = seg + 2 * B + 2, *cr = cseg + B + 1, *ck = cr + N;
    int64_t *ci = ck + B * K1, *co = ci + B * K1, *ws = co + B * K1, *wd = ws + nw, *qp = wd + nw;
    int64_t row = 0, at = 0, wi = 0, c0 = 0;
    seg[0] = 0;
    for (int64_t b = 0; b < B; b++) {
        const struct asr_stream *s = ss[b];
        const int64_t base = s->slot * p->W + s->win, n = pl[b].n;
        seg[1 + 2 * b] = base;
        seg[2 + 2 * b] = base + s->fill + n;
        cseg[b] = c0;
        for (int64_t i = 0; i < n; i++, row++) {
            xr[row] = xs_off[b] + pl[b].drop + i;
            kr[row] = base + s->fill + i;
            cr[row] = c0 + K1 + i;
        }
        for (int64_t j = 0; j < K1; j++, at++) {
            ck[at] = s->slot * K1 + j;
            ci[at] = c0 + j;
            co[at] = c0 + n + j;
        }
        c0 += K1 + n;
        const int64_t nf = min64(s->fill + n, p->g.left), w1 = s->win + s->fill + n - nf;
        if (w1 + nf + p->g.chunk > p->W)
            for (int64_t j = 0; j < nf; j++, wi++) {
                ws[wi] = s->slot * p->W + w1 + j;
                wd[wi] = s->slot * p->W + j;
            }
    }
    seg[2 * B + 1] = p->S * p->W;
    cseg[B] = c0;
    memcpy(qp, kr, (size_t)N * sizeof *qp);
    tb->xs_at = run_start(xr, N);
    tb->kv_at = run_start(kr, N);
    tb->c_at = run_start(cr, N);
    be_tensor all;
    vkasr_status st = upload_i64(p->be, v, total, &all);
    free(v);
    if (st != VKASR_OK)
        return err_set(e, st, "streaming: %s", p->be->err.msg);
    int64_t o = 0;
#define VIEW(t, len) (t) = be_tensor_1d(all.addr + (uint64_t)o * 8, BE_I64, (len)), o += (len)
    VIEW(tb->xs_rows, N);
    VIEW(tb->kv_rows, N);
    VIEW(tb->seg, 2 * B + 2);
    VIEW(tb->c_seg, B + 1);
    VIEW(tb->c_rows, N);
    VIEW(tb->cache_rows, B * K1);
    VIEW(tb->cache_in, B * K1);
    VIEW(tb->cache_out, B * K1);
    VIEW(tb->w_src, nw);
    VIEW(tb->w_dst, nw);
    VIEW(tb->q_pos, N);
#undef VIEW
    tb->nw = nw;
    return VKASR_OK;
}

/* A step's stream and its output, sorted by slot. */
struct by_slot_item {
    struct asr_stream *s;
    struct asr_output *out;
};
static int by_slot(const void *a, const void *b) {
    const struct asr_stream *x = ((const struct by_slot_item *)a)->s, *y = ((const struct by_slot_item *)b)->s;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

vkasr_status asr_stream_step(struct asr_stream_pool *p, struct asr_stream *const *streams, int64_t B,
                             struct asr_output *const *out, struct err *e) {
    const struct asr_model *m = p->m;
    const struct model_config *c = &m->cfg;
    struct backend *be = p->be;
    const int64_t D = c->d_model, M = c->n_mels;
    CHECK_OR_RETURN(e, B >= 1 && B <= p->S);
    /* the streams in slot order (the attention's segments ascend), each with its output */
    struct asr_stream **ss = malloc((size_t)B * sizeof *ss);
    struct plan *pl = malloc((size_t)B * sizeof *pl);
    int64_t *off = malloc((size_t)(4 * (B + 1)) * sizeof *off), *xs_off = malloc((size_t)(B + 1) * sizeof *xs_off);
    struct asr_output **oo = malloc((size_t)B * sizeof *oo);
    struct by_slot_item *it = malloc((size_t)B * sizeof *it);
    float *feat_h = NULL;
    int64_t *blk = NULL;             /* each stream's samples [b0, b1), then the packed total */
    int64_t *stft_seg = NULL;        /* [B, 4] stft_power's segments (after blk, one allocation) */
    vkasr_status st =
        ss && pl && off && xs_off && oo && it ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    if (st == VKASR_OK) {
        for (int64_t b = 0; b < B; b++)
            it[b] = (struct by_slot_item){streams[b], out[b]};
        qsort(it, (size_t)B, sizeof *it, by_slot);
        for (int64_t b = 0; b < B; b++) {
            ss[b] = it[b].s;
            oo[b] = it[b].out;
            if (ss[b]->p != p || !plan_of(ss[b], &pl[b]) || (b > 0 && ss[b]->slot == ss[b - 1]->slot))
                st = err_set(e, VKASR_ERR_INTERNAL, "streaming: stream %lld of the step is not a ready stream of the pool",
                             (long long)b);
        }
    }
    // the packed batch of the subsampling: each stream's mel rows, lengths at every stage
    struct asr_batch bt = {.n = B};
    int64_t rows = 0, N = 0;
    if (st == VKASR_OK) {
        for (int s = 0; s < 4; s++)
            bt.off[ASR_MEL + s] = off + s * (B + 1);
        for (int s = 0; s < 4; s++)
            bt.off[ASR_MEL + s][0] = 0;
        xs_off[0] = 0;
        for (int64_t b = 0; b < B; b++) {
            int64_t l = pl[b].m1 - pl[b].m0;
            for (int s = 0; s < 4; s++) {
                bt.off[ASR_MEL + s][b + 1] = bt.off[ASR_MEL + s][b] + l;
                l = l / 2 + 1; /* causal: floor(n/2)+1 per stage */
            }
            xs_off[b + 1] = bt.off[ASR_FRAMES][b + 1];
            xs_off[b] = bt.off[ASR_FRAMES][b];
            N += pl[b].n;
        }
        rows = bt.off[ASR_MEL][B];
        // the samples behind each stream's mel frames [m0, m1), packed (16-byte aligned blocks)
        blk = malloc((size_t)(6 * B + 1) * sizeof *blk);
        if (!blk)
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        stft_seg = blk ? blk + 2 * B + 1 : NULL;
        int64_t nsmp = 0;
        for (int64_t b = 0; st == VKASR_OK && b < B; b++) {
            const int64_t lead = lead_frames(c), hop = c->hop_length, m0 = pl[b].m0;
            const int64_t b0 = m0 > lead ? hop * (m0 - lead) : 0;
            const int64_t b1 = min64(hop * (pl[b].m1 - 1) + c->n_fft / 2, ss[b]->smp_base + ss[b]->smp_n);
            if (b0 < ss[b]->smp_base || b1 < b0)
                st = err_set(e, VKASR_ERR_INTERNAL, "streaming: mel frames from %lld need samples from %lld, kept from %lld",
                             (long long)m0, (long long)b0, (long long)ss[b]->smp_base);
            blk[2 * b] = b0;
            blk[2 * b + 1] = b1;
            // its mel rows, its samples' place in the packed ones, how many, its first frame among them
            stft_seg[4 * b] = bt.off[ASR_MEL][b];
            stft_seg[4 * b + 1] = nsmp;
            stft_seg[4 * b + 2] = b1 - b0;
            stft_seg[4 * b + 3] = m0 - b0 / hop;
            nsmp += (b1 - b0 + 3) / 4 * 4;
        }
        feat_h = malloc((size_t)(nsmp > 0 ? nsmp : 1) * sizeof *feat_h); /* the packed samples */
        if (!feat_h && st == VKASR_OK)
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        for (int64_t b = 0; st == VKASR_OK && b < B; b++) {
            const int64_t b0 = blk[2 * b], b1 = blk[2 * b + 1];
            memcpy(feat_h + stft_seg[4 * b + 1], ss[b]->smp + (b0 - ss[b]->smp_base),
                   (size_t)(b1 - b0) * sizeof *feat_h);
        }
        blk[2 * B] = nsmp;
    }
    uint64_t mark = be_mark(be);
    struct step_ctx x = {.p = p, .be = be, .c = c, .N = N, .D = D, .st = st};
    const int64_t T = st == VKASR_OK ? bt.off[ASR_FRAMES][B] : 0;
    be_tensor feat = tmp(&x, BE_F32, rows, M), xs = tmp(&x, BE_F32, T, D), r = {0};
    be_tensor smp = {0}, power = tmp(&x, BE_F32, rows, c->n_fft / 2 + 1);
    if (x.st == VKASR_OK)
        x.st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){blk[2 * B] > 0 ? blk[2 * B] : 1}, &smp);
    for (int s = 0; x.st == VKASR_OK && B > 1 && s < 4; s++)
        x.st = upload_i64(be, bt.off[ASR_MEL + s], B + 1, &bt.dev[ASR_MEL + s]);
    if (x.st == VKASR_OK && blk[2 * B] > 0)
        x.st = be_upload(be, smp.addr, feat_h, (uint64_t)blk[2 * B] * sizeof(float));
    // power: each stream's frames [m0, m1) from its samples (zero beyond them, the input's end at the
    // last step), every stream's in one call (a segment each: its rows, samples and first frame);
    // feat: [rows, M] = ln(power . fb^T + 2^-24), every stream's at once
    be_tensor seg = {0};
    if (x.st == VKASR_OK)
        x.st = upload_i64(be, stft_seg, 4 * B, &seg);
    if (x.st == VKASR_OK)
        x.st = be_stft_power(be, &(struct op_stft_power){.x = smp, .window = m->window, .y = power,
                                                         .n_fft = c->n_fft, .hop = c->hop_length, .preemph = c->preemph,
                                                         .seg = be_tensor_2d(seg.addr, BE_I64, B, 4)});
    if (x.st == VKASR_OK)
        x.st = be_linear(be, &(struct op_linear){.x = power, .w = m->melbank, .y = feat, .act = ACT_LOG_GUARD,
                                                 .alpha = 1.0f});
    struct tables tb = {0};
    if (x.st == VKASR_OK)
        x.st = make_tables(p, ss, pl, xs_off, B, N, &tb, e);
    if (x.st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, x.st, "streaming: %s", be->err.msg);
    // xs: [T, D] = subsampling of each stream's mel rows as alone; r: [N, D] the rows each keeps
    if (x.st == VKASR_OK)
        x.st = asr_subsample_tiled(m, be, &feat, &xs, T, B > 1 ? &bt : NULL, NULL, e);
    if (x.st == VKASR_OK && tb.xs_at >= 0) { /* one run of rows (one stream): used in place */
        r = be_tensor_rows(&xs, tb.xs_at, N);
    } else {
        r = tmp(&x, BE_F32, N, D);
        copy_rows(&x, &xs, &r, &tb.xs_rows, NULL, N);
    }
    if (x.st == VKASR_OK && c->xscaling)
        x.st = be_unary(be, &(struct op_unary){.x = r, .y = r, .act = ACT_NONE, .alpha = sqrtf((float)D)});
    for (int l = 0; x.st == VKASR_OK && l < c->n_layers; l++) {
        const struct asr_layer *L = &m->layers[l];
        struct pool_layer *ply = &p->layers[l];
        uint64_t lm = be_mark(be);
        feed_forward(&x, &r, &L->ff1_norm_w, &L->ff1_norm_b, &L->ff1_w1, &L->ff1_b1, &L->ff1_w2, &L->ff1_b2);
        attention(&x, L, ply, &tb, &r);
        conv_module(&x, L, ply, &tb, B, &r);
        feed_forward(&x, &r, &L->ff2_norm_w, &L->ff2_norm_b, &L->ff2_w1, &L->ff2_b1, &L->ff2_w2, &L->ff2_b2);
        layernorm(&x, &r, &L->out_norm_w, &L->out_norm_b, &r);
        // the windows that would not leave room for the next chunk: moved to their slot's start (never
        // overlapping: such a window starts past L + R+1)
        copy_rows(&x, &ply->k, &ply->k, &tb.w_src, &tb.w_dst, tb.nw);
        copy_rows(&x, &ply->v, &ply->v, &tb.w_src, &tb.w_dst, tb.nw);
        be_release(be, lm);
    }
    // the search over every stream's frames, together
    int64_t *dslot = malloc((size_t)(3 * B + 1) * sizeof *dslot), *doff = dslot ? dslot + B : NULL;
    int64_t *dt0 = doff ? doff + B + 1 : NULL;
    if (!dslot && x.st == VKASR_OK)
        x.st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t b = 0, row0 = 0; dslot && b < B; row0 += pl[b].n, b++) {
        dslot[b] = ss[b]->slot;
        doff[b] = row0;
        doff[b + 1] = row0 + pl[b].n;
        dt0[b] = ss[b]->frames;
    }
    // a language-prompt model: each stream's frames fused with its own language before the joint (in
    // place: the frames a stream keeps are then the joint's input), the rows of consecutive streams of
    // one language at once (a row's products do not depend on the rows beside it)
    for (int64_t b0 = 0, b1; dslot && x.st == VKASR_OK && c->n_prompts > 0 && b0 < B; b0 = b1) {
        for (b1 = b0 + 1; b1 < B && ss[b1]->prompt == ss[b0]->prompt;)
            b1++;
        const be_tensor rb = be_tensor_rows(&r, doff[b0], doff[b1] - doff[b0]);
        if (rb.ne[0] > 0)
            x.st = asr_prompt_fuse(m, be, &rb, ss[b0]->prompt - 1, e);
    }
    if (x.st == VKASR_OK)
        x.st = asr_stream_search_run(m, be, &p->dec, &r, dslot, doff, dt0, B, oo, e);
    free(dslot);
    // each stream: its frames kept (tests), its window moved on
    int64_t row = 0;
    for (int64_t b = 0; x.st == VKASR_OK && b < B; row += pl[b].n, b++) {
        struct asr_stream *s = ss[b];
        const int64_t n = pl[b].n;
        be_tensor rb = be_tensor_rows(&r, row, n);
        if (s->keep && s->frames + n > s->enc_cap) {
            int64_t cap = max64(2 * s->enc_cap, s->frames + n + 64);
            float *ne = realloc(s->enc, (size_t)(cap * D) * sizeof *ne);
            if (!ne) {
                x.st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
                break;
            }
            s->enc = ne;
            s->enc_cap = cap;
        }
        if (s->keep)
            x.st = be_download(be, s->enc + s->frames * D, rb.addr, (uint64_t)(n * D) * sizeof(float));
        const int64_t nf = min64(s->fill + n, p->g.left), w1 = s->win + s->fill + n - nf;
        s->win = w1 + nf + p->g.chunk > p->W ? 0 : w1;
        s->fill = nf;
        s->frames += n;
        s->steps++;
        s->mel_next = pl[b].mel_next;
        s->done = s->ended && asr_encoder_frames(c, s->mel_done) <= s->frames;
    }
    be_release(be, mark);
    if (x.st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, x.st, "streaming step: %s", be->err.msg);
    free(ss);
    free(pl);
    free(off);
    free(xs_off);
    free(oo);
    free(it);
    free(feat_h);
    free(blk);
    return x.st;
}

vkasr_status asr_stream_advance(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, bool final,
                                struct asr_output *out, struct err *e) {
    TRY(asr_stream_feed(s, samples, s0, total, final, e));
    while (asr_stream_ready(s))
        TRY(asr_stream_step(s->p, &s, 1, &out, e));
    return VKASR_OK;
}
