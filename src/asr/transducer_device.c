/* transducer_device.c — greedy TDT and RNN-T (spec §6.4, §6.5) with the loop over frames and emitted
 * tokens on the device (the label-looping idea of NeMo's decoders). One iteration of the search — the
 * joint for a window of frames against the current q, a step that walks the window to the first
 * emission, the LSTM and projection for a hypothesis that emitted (backend ops.h: the search ops) —
 * is recorded once as a graph and replayed in batches; the host reads the search state and the
 * tokens emitted into a ring once per batch (progress, abort, segment callbacks). Same tokens as
 * transducer_host.c, which computes the same joint rows with the same arithmetic and walks them on the
 * host (docs/architecture.md: the greedy transducer decoder). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"

/* Frames per joint evaluation, at most: the matrix-vector kernel's rows (vk_gemm.h). */
#define WINDOW_MAX 8
/* A window row costs J x P multiply-adds; below this many the rows are nearly free next to the
 * dispatches and every window has WINDOW_MAX rows. Above (the 0.6B models' joint: 8198 x 640), the
 * host picks the window per batch from the rows the steps needed (next_window). */
#define ROW_MACS_FREE (1 << 20)
#define GRAPH_ITERS 8    /* iterations per recorded graph; a batch is a number of replays      */
#define BATCH_MAX 1024   /* iterations per round trip at most, and the token ring's capacity   */
#define FIRST_BATCH 16   /* iterations before anything is known about the rate                  */
/* A round trip at least every ~256 frames (20 s of audio): progress and abort stay prompt. The
 * schedule depends on the search's own counts only, never on timing, so a run polls the abort
 * callback at the same points every time. */
#define BATCH_FRAMES 256
#define N_WINDOWS 4      /* window sizes 1, 2, 4, 8: one graph each, recorded when first used   */

_Static_assert(WINDOW_MAX <= SEARCH_MAX_WINDOW && (1 << (N_WINDOWS - 1)) == WINDOW_MAX, "window sizes");
_Static_assert(BATCH_MAX % GRAPH_ITERS == 0 && FIRST_BATCH % GRAPH_ITERS == 0, "batches of whole graphs");

struct device_search {
    struct be_search s;
    be_tensor io;                       /* I32: state [1, 16], then the token ring [1, BATCH_MAX, 3] */
    be_tensor c;                        /* F32 [L, P]: the LSTM cell state, updated in place        */
    struct be_graph *graph[N_WINDOWS];  /* by log2(W)                                              */
    bool direct;                        /* the backend records no graphs: ops run per iteration    */
};

/* The prediction network: h_new = LSTM(x, h_old, c) layer by layer, c in place, then q. The search's
 * steps are gated by S_EMIT (nothing changes without an emission) and take x0 = Emb[token]; the
 * start-of-sequence step takes the blank's embedding row (the zero input) ungated. */
static vkasr_status predict(const struct asr_model *m, struct backend *be, const struct device_search *d, bool sos) {
    const struct be_search *s = &d->s;
    const int64_t P = s->q.ne[1];
    const be_tensor gate = sos ? (be_tensor){0}
                               : be_tensor_1d(s->state.addr + SEARCH_S_EMIT * sizeof(int32_t), BE_I32, 1);
    be_tensor x = sos ? be_tensor_row(&m->embed, m->cfg.vocab_size) : be_tensor_1d(s->x0.addr, BE_F32, P);
    for (int l = 0; l < m->cfg.pred_layers; l++) {
        const uint64_t row = (uint64_t)l * (uint64_t)P * sizeof(float);
        const be_tensor h_new = be_tensor_1d(s->h_new.addr + row, BE_F32, P), c = be_tensor_row(&d->c, l);
        // h_new[l], c[l]: [P] = LSTM(x, h_old[l], c[l])
        TRY(be_lstm_step(be, &(struct op_lstm_step){.x = x, .h = be_tensor_1d(s->h_old.addr + row, BE_F32, P), .c = c,
                                                     .w_ih = m->lstm_wih[l], .w_hh = m->lstm_whh[l], .b = m->lstm_b[l],
                                                     .h_out = h_new, .c_out = c, .gate = gate}));
        x = h_new;
    }
    // q: [1, P] = h_new[L-1] Wp^T + bp
    return be_linear(be, &(struct op_linear){.x = be_tensor_2d(x.addr, BE_F32, 1, P), .w = m->pred_proj_w,
                                             .bias = m->pred_proj_b, .y = s->q, .alpha = 1.0f, .matvec = true});
}

/* One iteration of the search with a window of W frames. */
static vkasr_status iteration(const struct asr_model *m, struct backend *be, const struct device_search *d, int W) {
    const struct be_search *s = &d->s;
    // z: [W, P] = relu(f[t .. t+W) + q)
    TRY(be_search_joint(be, &(struct op_search_joint){.s = s, .window = W}));
    // y: [W, J] = z Wo^T + bo
    TRY(be_linear(be, &(struct op_linear){.x = be_tensor_rows(&s->z, 0, W), .w = m->joint_w, .bias = m->joint_b,
                                          .y = be_tensor_rows(&s->y, 0, W), .alpha = 1.0f, .matvec = true}));
    // token and duration argmaxes of the rows, the walk to the first emission, the token into the ring
    TRY(be_search_step(be, &(struct op_search_step){.s = s, .window = W}));
    return predict(m, be, d, false);
}

/* Queues n iterations (a multiple of GRAPH_ITERS) with window 1 << wlog: replays of the recorded graph,
 * or the ops themselves where the backend records none. */
static vkasr_status run_batch(const struct asr_model *m, struct backend *be, struct device_search *d, int wlog,
                              int64_t n) {
    const int W = 1 << wlog;
    if (!d->direct && !d->graph[wlog]) {
        vkasr_status st = be_graph_begin(be);
        if (st == VKASR_ERR_UNSUPPORTED) {
            d->direct = true;
            err_clear(&be->err);
        } else {
            TRY(st);
            for (int i = 0; i < GRAPH_ITERS && st == VKASR_OK; i++)
                st = iteration(m, be, d, W);
            vkasr_status se = be_graph_end(be, &d->graph[wlog]);
            TRY(st);
            TRY(se);
        }
    }
    if (d->direct) {
        for (int64_t i = 0; i < n; i++)
            TRY(iteration(m, be, d, W));
        return VKASR_OK;
    }
    return be_graph_run(be, d->graph[wlog], (uint32_t)(n / GRAPH_ITERS));
}

/* Iterations for the next batch: about 80 % of the estimated remainder (a replay past the end costs
 * the joint's product; one round trip too many costs less), at most BATCH_FRAMES frames' worth at the
 * rate so far, in whole graphs. */
static int64_t next_batch(int64_t frames_left, double frames_per_iter) {
    double frames = 0.8 * (double)frames_left < BATCH_FRAMES ? 0.8 * (double)frames_left : BATCH_FRAMES;
    double n = frames_per_iter > 0 ? frames / frames_per_iter : FIRST_BATCH;
    int64_t b = ((int64_t)ceil(n) + GRAPH_ITERS - 1) / GRAPH_ITERS * GRAPH_ITERS;
    return b < GRAPH_ITERS ? GRAPH_ITERS : b > BATCH_MAX ? BATCH_MAX : b;
}

/* log2 of the next window from the rows the last batch's steps needed on average (up to their
 * emission, or whole windows without one): the smallest power of two >= 1.2 x that - 0.2 (1 for a
 * search that emits at every window's first row). A window too short costs an iteration without
 * an emission; a row too many costs its share of the joint's product. */
static int next_window(double span) {
    int wlog = 0;
    while (wlog < N_WINDOWS - 1 && (double)(1 << wlog) < 1.2 * span - 0.2)
        wlog++;
    return wlog;
}

uint64_t dec_transducer_device_scratch(const struct model_config *c, int64_t T) {
    const int64_t P = c->pred_hidden, L = c->pred_layers;
    const int64_t J = c->vocab_size + 1 + (c->head == VKASR_HEAD_TDT ? c->n_durations : 0);
    // what alloc_search allocates: f [T, P];  z [W, P];  y [W, J];  q, x0 [1, P];  h_old, h_new, c [L, P];
    // state and token ring (i32);  durations (TDT, i32)
    return be_scratch_f32(T, P) + be_scratch_f32(WINDOW_MAX, P) + be_scratch_f32(WINDOW_MAX, J) +
           2 * be_scratch_f32(1, P) + 3 * be_scratch_f32(L, P) + be_scratch_f32(SEARCH_STATE_INTS + 3 * BATCH_MAX, 1) +
           (c->head == VKASR_HEAD_TDT ? be_scratch_f32(c->n_durations, 1) : 0);
}

static vkasr_status alloc_search(const struct asr_model *m, struct backend *be, int64_t T, int max_sym,
                                 struct device_search *d) {
    const struct model_config *c = &m->cfg;
    const int64_t P = c->pred_hidden, J = m->joint_w.ne[0], L = c->pred_layers;
    struct be_search *s = &d->s;
    s->max_symbols = max_sym;
#define ALLOC(t, ...) TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, __VA_ARGS__, &(t)))
    ALLOC(s->f, BE_F32, 3, (int64_t[]){1, T, P});
    ALLOC(s->z, BE_F32, 2, (int64_t[]){WINDOW_MAX, P});
    ALLOC(s->y, BE_F32, 2, (int64_t[]){WINDOW_MAX, J});
    ALLOC(s->q, BE_F32, 2, (int64_t[]){1, P});
    ALLOC(s->x0, BE_F32, 2, (int64_t[]){1, P});
    ALLOC(s->h_old, BE_F32, 3, (int64_t[]){L, 1, P});
    ALLOC(s->h_new, BE_F32, 3, (int64_t[]){L, 1, P});
    ALLOC(d->c, BE_F32, 2, (int64_t[]){L, P});
    ALLOC(d->io, BE_I32, 1, (int64_t[]){SEARCH_STATE_INTS + 3 * BATCH_MAX});
    if (c->head == VKASR_HEAD_TDT) {
        ALLOC(s->durations, BE_I32, 1, (int64_t[]){c->n_durations});
        TRY(be_upload(be, s->durations.addr, c->durations, (uint64_t)c->n_durations * sizeof(int32_t)));
    }
#undef ALLOC
    s->state = be_tensor_2d(d->io.addr, BE_I32, 1, SEARCH_STATE_INTS);
    s->tokens = be_tensor_3d(d->io.addr + SEARCH_STATE_INTS * sizeof(int32_t), BE_I32, 1, BATCH_MAX, 3);
    s->embed = m->embed;
    /* the zero LSTM state the start-of-sequence step starts from */
    float *zeros = calloc((size_t)(L * P), sizeof *zeros);
    if (!zeros)
        return err_set(&be->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    vkasr_status st = be_upload(be, s->h_old.addr, zeros, be_nbytes(&s->h_old));
    if (st == VKASR_OK)
        st = be_upload(be, d->c.addr, zeros, be_nbytes(&d->c));
    free(zeros);
    return st;
}

/* The search proper, once the tensors exist. */
static vkasr_status search(const struct asr_model *m, struct backend *be, const be_tensor *enc, struct device_search *d,
                           int window, const struct asr_hooks *hooks, struct asr_output *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t T = enc->ne[0];
    const double fs = dec_frame_seconds(c);
    struct be_search *s = &d->s;
    // f: [T, P] = enc We^T + be  (the encoder half of the joint, once for all frames)
    TRY(be_linear(be, &(struct op_linear){.x = *enc, .w = m->enc_proj_w, .bias = m->enc_proj_b,
                                          .y = be_tensor_2d(s->f.addr, BE_F32, T, s->f.ne[2]), .alpha = 1.0f}));
    // the start-of-sequence step: the blank's (zero) embedding from a zero state
    TRY(predict(m, be, d, true));
    TRY(be_search_init(be, s));

    int32_t *io = malloc(be_nbytes(&d->io));
    if (!io)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    const int32_t *state = io, *ring = io + SEARCH_STATE_INTS;
    /* Every iteration emits or advances; at most max_symbols emissions stay on one frame. */
    const int64_t max_iters = (T + 1) * ((int64_t)s->max_symbols + 1) + 2 * BATCH_MAX;
    int64_t queued = 0, ntok = 0, n = FIRST_BATCH, span_prev = 0, it_prev = 0, trips = 0;
    int wlog = N_WINDOWS - 1;
    bool adapt = (double)m->joint_w.ne[0] * (double)m->joint_w.ne[1] > ROW_MACS_FREE;
    if (window > 0) {
        for (wlog = 0; wlog < N_WINDOWS - 1 && (1 << wlog) < window; wlog++)
            ;
        adapt = false;
    }
    vkasr_status st = VKASR_OK;
    for (;;) {
        st = run_batch(m, be, d, wlog, n);
        if (st == VKASR_OK)
            st = be_download(be, io, d->io.addr, be_nbytes(&d->io)); /* the round trip */
        if (st != VKASR_OK)
            break;
        queued += n;
        trips++;
        const int64_t t = state[SEARCH_S_T], iters = state[SEARCH_S_ITERS], emitted = state[SEARCH_S_NTOK];
        if (emitted - ntok > BATCH_MAX || emitted < ntok || iters > queued) {
            st = err_set(e, VKASR_ERR_INTERNAL,
                         "device decoder: inconsistent state (%lld tokens, %lld read, %lld of %lld iterations)",
                         (long long)emitted, (long long)ntok, (long long)iters, (long long)queued);
            break;
        }
        for (; ntok < emitted && st == VKASR_OK; ntok++) {
            const int32_t *tk = ring + (ntok % BATCH_MAX) * 3;
            st = dec_push_token(out, tk[0], tk[1], tk[2], e);
            if (st == VKASR_OK && hooks && hooks->tokens_added)
                hooks->tokens_added(hooks->ud);
        }
        if (st != VKASR_OK)
            break;
        dec_progress(hooks, t < T ? t : T, T, fs);
        if (state[SEARCH_S_DONE]) {
            LOG_INFO(be->dev->log, "device decoder: %lld frames, %lld tokens, %d joint rows walked in %lld iterations "
                     "(%lld queued) and %lld round trips", (long long)T, (long long)emitted, state[SEARCH_S_STEPS],
                     (long long)iters, (long long)queued, (long long)trips);
            break;
        }
        if (dec_aborted(hooks)) {
            st = VKASR_ABORTED;
            break;
        }
        if (queued > max_iters) {
            st = err_set(e, VKASR_ERR_INTERNAL, "device decoder: no end after %lld iterations (frame %lld of %lld)",
                         (long long)queued, (long long)t, (long long)T);
            break;
        }
        // the next batch: its window from the rows the last batch's steps needed, its length from
        // the frames per iteration over the whole run
        const int64_t span = state[SEARCH_S_SPAN];
        if (adapt && iters > it_prev)
            wlog = next_window((double)(span - span_prev) / (double)(iters - it_prev));
        n = next_batch(T - t, iters ? (double)t / (double)iters : 0);
        span_prev = span;
        it_prev = iters;
    }
    free(io);
    return st;
}

vkasr_status dec_transducer_device(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                   const struct asr_options *opt, const struct asr_hooks *hooks,
                                   struct asr_output *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t T = enc->ne[0], V = c->vocab_size, J = m->joint_w.ne[0];
    const int max_sym = opt && opt->max_symbols > 0 ? opt->max_symbols : c->max_symbols;
    CHECK_OR_RETURN(e, J == V + 1 + (tdt ? c->n_durations : 0) && m->embed.ne[0] == V + 1);
    CHECK_OR_RETURN(e, c->pred_layers >= 1);
    /* The search's state counts frames and tokens in 32 bits (2^30 frames: 2.7 years of audio). */
    if (T > (int64_t)1 << 30 || T * (int64_t)max_sym >= INT32_MAX)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "%lld encoder frames at %d symbols per frame: too long for the "
                       "device decoder (VKASR_DECODER=host decodes it on the host)", (long long)T, max_sym);
    uint64_t mark = be_mark(be);
    struct device_search d = {0};
    vkasr_status st = alloc_search(m, be, T, max_sym, &d);
    if (st == VKASR_OK)
        st = search(m, be, enc, &d, opt ? opt->decoder_window : 0, hooks, out, e);
    if (st != VKASR_OK && st != VKASR_ABORTED && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg[0] ? be->err.msg : vkasr_status_string(st));
    for (int i = 0; i < N_WINDOWS; i++)
        be_graph_free(be, d.graph[i]); /* waits for its replays, before their scratch is released */
    be_release(be, mark);
    if (st == VKASR_OK)
        dec_progress(hooks, T, T, dec_frame_seconds(c));
    return st;
}
