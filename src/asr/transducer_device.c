/* transducer_device.c — greedy TDT and RNN-T (spec §6.4, §6.5) with the loop over frames and tokens on
 * the device, for one input or the B hypotheses of a packed batch: one search iteration (ops.h: the
 * search ops) is recorded as a graph and replayed in batches, predicated on the hypotheses not done; the
 * host reads states and tokens once per batch. Same tokens as transducer_host.c, whatever B
 * (docs/architecture.md, "The greedy transducer decoder"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_common.h"
#include "transducer.h"

/* Frames per joint evaluation, at most: the tensor-core tile of the joint's product (vk_gemm_configs.c:
 * 16 rows). */
#define WINDOW_MAX 16
/* A window row costs J x P multiply-adds; below this many the rows are nearly free next to the
 * dispatches and every window has WINDOW_MAX rows. Above (the 0.6B models' joint: 8198 x 640), one
 * hypothesis takes the rows one product computes for the price of one (JOINT_FREE_ROWS), a batch picks
 * its window per batch of iterations from the rows the steps needed (next_window). */
#define ROW_MACS_FREE (1 << 20)
/* Rows of a large joint that cost about one: the tensor-core tile of an f16 joint has 16 rows, gemv.comp's
 * of an f32 or quantized one 8 (MR). One hypothesis keeps windows of that many throughout: an iteration
 * costs its dispatches far more than its rows, and each row the window lacks can cost an iteration
 * (figures: docs/gpu-results.md, "Decoder"). */
#define JOINT_FREE_ROWS_F16 16
#define JOINT_FREE_ROWS 8
/* Rows of such a joint that share one read of its weights (gemv.comp's tall tile: 32 rows; the cap is
 * not tuned for the tensor-core tiles of an f16 joint or gemv.comp's groups of 4 rows); past them every
 * row costs its share of the product. So a batch's window is capped where its B x W rows would fill
 * more than one tile (W = 1 from 64 hypotheses on): a frame the window lacks costs an iteration, which
 * for B hypotheses is cheaper than B extra rows in every iteration (figures: docs/gpu-results.md,
 * "Decoder"). */
#define JOINT_SHARED_ROWS 32
#define GRAPH_ITERS 8    /* iterations per recorded graph; a batch is a number of replays      */
#define BATCH_MAX 1024   /* iterations per round trip at most, and the token ring's capacity   */
#define BATCH_MAX_MULTI 256 /* the same with several hypotheses (each has its ring)             */
#define FIRST_BATCH 16   /* iterations before anything is known about the rate                  */
/* A round trip at least every ~256 frames (20 s of audio): progress and abort stay prompt. The
 * schedule depends on the search's own counts only, never on timing, so a run polls the abort
 * callback at the same points every time. */
#define BATCH_FRAMES 256
#define N_WINDOWS 5      /* window sizes 1, 2, 4, 8, 16: one graph each, recorded when first used */

_Static_assert(WINDOW_MAX <= SEARCH_MAX_WINDOW && (1 << (N_WINDOWS - 1)) == WINDOW_MAX, "window sizes");
_Static_assert(BATCH_MAX % GRAPH_ITERS == 0 && BATCH_MAX_MULTI % GRAPH_ITERS == 0 && FIRST_BATCH % GRAPH_ITERS == 0,
               "batches of whole graphs");

struct device_search {
    struct be_search s;
    int64_t B, cap;                     /* hypotheses; iterations per round trip and ring slots    */
    be_tensor io;                       /* I32: states [B, 16], then the token rings [B, cap, 3]   */
    be_tensor c;                        /* F32 [L, B, P]: the LSTM cell state, updated in place     */
    struct be_graph *graph[N_WINDOWS];  /* by log2(W)                                              */
    bool direct;                        /* the backend records no graphs: ops run per iteration    */
};

/* Token ring slots (and iterations per round trip at most) for B hypotheses. */
static int64_t ring_capacity(int64_t B) { return B > 1 ? BATCH_MAX_MULTI : BATCH_MAX; }

/* The prediction network: h_new = LSTM(x, h_old, c) layer by layer, c in place, then q, for every
 * hypothesis. The search's steps are gated by each hypothesis's S_EMIT (nothing changes without an
 * emission) and take x0 = Emb[token]; the start-of-sequence step takes x0 = the blank's embedding row
 * (the zero input), ungated. */
static vkasr_status predict(const struct asr_model *m, struct backend *be, const struct device_search *d, bool sos) {
    const struct be_search *s = &d->s;
    const int64_t P = s->q.ne[1], B = d->B;
    const be_tensor gate = sos ? (be_tensor){0}
                               : be_tensor_1d(s->state.addr + SEARCH_S_EMIT * sizeof(int32_t), BE_I32,
                                              (B - 1) * SEARCH_STATE_INTS + 1);
    be_tensor x = be_tensor_2d(s->x0.addr, BE_F32, B, P);
    for (int l = 0; l < m->cfg.pred_layers; l++) {
        const uint64_t row = (uint64_t)l * (uint64_t)B * (uint64_t)P * sizeof(float);
        const be_tensor h_new = be_tensor_2d(s->h_new.addr + row, BE_F32, B, P), c = be_tensor_row(&d->c, l);
        // h_new[l], c[l]: [B, P] = LSTM(x, h_old[l], c[l])
        TRY(be_lstm_step(be, &(struct op_lstm_step){.x = x, .h = be_tensor_2d(s->h_old.addr + row, BE_F32, B, P), .c = c,
                                                     .w_ih = m->lstm_wih[l], .w_hh = m->lstm_whh[l], .b = m->lstm_b[l],
                                                     .h_out = h_new, .c_out = c, .gate = gate,
                                                     .gate_stride = SEARCH_STATE_INTS}));
        x = h_new;
    }
    // q: [B, P] = h_new[L-1] Wp^T + bp
    return be_linear(be, &(struct op_linear){.x = x, .w = m->pred_proj_w, .bias = m->pred_proj_b, .y = s->q,
                                             .alpha = 1.0f, .matvec = true, .x_f32 = asr_x_f32(m)});
}

/* One iteration of the search with a window of W frames. */
static vkasr_status iteration(const struct asr_model *m, struct backend *be, const struct device_search *d, int W) {
    const struct be_search *s = &d->s;
    // z: [B*W, P] = relu(f[t_b .. t_b+W) + q_b)
    TRY(be_search_joint(be, &(struct op_search_joint){.s = s, .window = W}));
    // y: [B*W, J] = z Wo^T + bo
    TRY(be_linear(be, &(struct op_linear){.x = be_tensor_rows(&s->z, 0, d->B * W), .w = m->joint_w,
                                          .bias = m->joint_b, .y = be_tensor_rows(&s->y, 0, d->B * W),
                                          .alpha = 1.0f, .matvec = true, .x_f32 = asr_x_f32(m)}));
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
        vkasr_status st = be_graph_begin_predicated(be, &d->s.live);
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

/* Iterations for the next batch: about 80 % of the estimated remainder of the hypothesis that needs the
 * most (a replay past the end costs its barriers where replays are predicated, the joint's product where
 * not; a round trip too many costs the device's wait for the host), at most BATCH_FRAMES frames' worth
 * of any hypothesis at its rate so far, in whole graphs, at most cap. The 80 % is not tuned for
 * predicated replays.
 * left[b], rate[b]: frames left and frames per iteration so far of the hypotheses not done (rate 0:
 * nothing known yet). */
static int64_t next_batch(const double *left, const double *rate, int64_t B, int64_t cap) {
    double n = 0, most = -1;
    bool known = true;
    for (int64_t b = 0; b < B; b++) {
        if (left[b] <= 0)
            continue;
        if (!(rate[b] > 0)) {
            known = false;
            continue;
        }
        const double frames = 0.8 * left[b] < BATCH_FRAMES ? 0.8 * left[b] : BATCH_FRAMES;
        const double cap_b = BATCH_FRAMES / rate[b]; /* a round trip at least every BATCH_FRAMES frames */
        n = frames / rate[b] > n ? frames / rate[b] : n;
        most = most < 0 || cap_b < most ? cap_b : most;
    }
    if (!known || n <= 0)
        n = n > FIRST_BATCH ? n : FIRST_BATCH;
    if (most > 0 && n > most)
        n = most;
    int64_t k = ((int64_t)ceil(n) + GRAPH_ITERS - 1) / GRAPH_ITERS * GRAPH_ITERS;
    return k < GRAPH_ITERS ? GRAPH_ITERS : k > cap ? cap : k;
}

/* log2 of the largest window for B hypotheses (JOINT_SHARED_ROWS). */
static int window_cap(int64_t B) {
    int wlog = N_WINDOWS - 1;
    while (wlog > 0 && B * ((int64_t)1 << wlog) > JOINT_SHARED_ROWS)
        wlog--;
    return wlog;
}

/* Is a joint of J x P so large that its rows are not free (ROW_MACS_FREE)? */
static bool joint_large(int64_t J, int64_t P) { return (double)J * (double)P > ROW_MACS_FREE; }

/* log2 of the largest window of a search of B hypotheses with a joint of J x P: the rows per hypothesis
 * of z and y. */
static int window_max_log(int64_t J, int64_t P, int64_t B) { return joint_large(J, P) ? window_cap(B) : N_WINDOWS - 1; }

/* log2 of the next window from the last batch, which ran windows of 1 << wlog rows: from the rows its
 * steps needed on average (up to their emission, or whole windows without one), the smallest power of
 * two >= 1.2 x that - 0.2 (1 for a search that emits at every window's first row), at most cap. A
 * window too short costs an iteration without an emission; a row too many costs its share of the
 * joint's product. Windows of one row always need their one row, which says nothing: there, a batch
 * whose iterations mostly emitted nothing (blank runs) tries two rows, so that a burst of emissions
 * (which brings the window down to 1) does not keep it there for the rest of the input. */
static int next_window(int wlog, double span, double emit_rate, int cap) {
    if (wlog == 0)
        return cap > 0 && emit_rate < 0.5 ? 1 : 0;
    wlog = 0;
    while (wlog < cap && (double)(1 << wlog) < 1.2 * span - 0.2)
        wlog++;
    return wlog;
}

static vkasr_status alloc_search(const struct asr_model *m, struct backend *be, int64_t T, int64_t B, int max_sym,
                                 struct device_search *d) {
    const struct model_config *c = &m->cfg;
    const int64_t P = c->pred_hidden, L = c->pred_layers, cap = ring_capacity(B);
    const int64_t J = c->vocab_size + 1 + (c->head == VKASR_HEAD_TDT ? c->n_durations : 0);
    struct be_search *s = &d->s;
    s->max_symbols = max_sym;
    d->B = B;
    d->cap = cap;
#define ALLOC(t, ...) TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, __VA_ARGS__, &(t)))
    ALLOC(s->f, BE_F32, 2, (int64_t[]){T, P});
    const int64_t rows = B << window_max_log(J, P, B);
    ALLOC(s->z, BE_F32, 2, (int64_t[]){rows, P});
    ALLOC(s->y, BE_F32, 2, (int64_t[]){rows, J});
    ALLOC(s->q, BE_F32, 2, (int64_t[]){B, P});
    ALLOC(s->x0, BE_F32, 2, (int64_t[]){B, P});
    ALLOC(s->h_old, BE_F32, 3, (int64_t[]){L, B, P});
    ALLOC(s->h_new, BE_F32, 3, (int64_t[]){L, B, P});
    ALLOC(d->c, BE_F32, 3, (int64_t[]){L, B, P});
    ALLOC(d->io, BE_I32, 1, (int64_t[]){B * (SEARCH_STATE_INTS + 3 * cap)});
    ALLOC(s->live, BE_I32, 1, (int64_t[]){1}); /* the replays' predicate: past the end they skip their ops */
    if (c->head == VKASR_HEAD_TDT) {
        ALLOC(s->durations, BE_I32, 1, (int64_t[]){c->n_durations});
        TRY(be_upload(be, s->durations.addr, c->durations, (uint64_t)c->n_durations * sizeof(int32_t)));
    }
#undef ALLOC
    s->state = be_tensor_2d(d->io.addr, BE_I32, B, SEARCH_STATE_INTS);
    s->tokens = be_tensor_3d(d->io.addr + (uint64_t)B * SEARCH_STATE_INTS * sizeof(int32_t), BE_I32, B, cap, 3);
    s->embed = m->embed;
    /* the zero LSTM state the start-of-sequence step starts from, and its input: the blank's
     * embedding row for every hypothesis */
    float *host = calloc((size_t)(L * B * P), sizeof *host);
    if (!host)
        return err_set(&be->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    vkasr_status st = be_upload(be, s->h_old.addr, host, be_nbytes(&s->h_old));
    if (st == VKASR_OK)
        st = be_upload(be, d->c.addr, host, be_nbytes(&d->c));
    if (st == VKASR_OK)
        st = be_download(be, host, be_tensor_row(&m->embed, c->vocab_size).addr, (uint64_t)P * sizeof *host);
    for (int64_t b = 1; st == VKASR_OK && b < B; b++)
        memcpy(host + b * P, host, (size_t)P * sizeof *host);
    if (st == VKASR_OK)
        st = be_upload(be, s->x0.addr, host, (uint64_t)(B * P) * sizeof *host);
    free(host);
    return st;
}

/* The search proper, once the tensors exist: B hypotheses, hypothesis b over frames[b] rows of enc
 * (packed in order), its tokens into out[b]. */
static vkasr_status search(const struct asr_model *m, struct backend *be, const be_tensor *enc, struct device_search *d,
                           const int64_t *frames, int window, const struct asr_hooks *hooks, struct asr_output *out,
                           struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t T = enc->ne[0], B = d->B, cap = d->cap;
    const double fs = dec_frame_seconds(c);
    struct be_search *s = &d->s;
    // f: [T, P] = enc We^T + be  (the encoder half of the joint, once for all frames)
    TRY(be_linear(be, &(struct op_linear){.x = *enc, .w = m->enc_proj_w, .bias = m->enc_proj_b, .y = s->f,
                                          .alpha = 1.0f, .x_f32 = asr_x_f32(m)}));
    // the start-of-sequence step: the blank's (zero) embedding from a zero state
    TRY(predict(m, be, d, true));
    TRY(be_search_init(be, s, frames));

    int32_t *io = malloc(be_nbytes(&d->io));
    int64_t *ntok = calloc((size_t)B, sizeof *ntok);
    double *left = malloc((size_t)B * 2 * sizeof *left), *rate = left ? left + B : NULL;
    if (!io || !ntok || !left) {
        free(io);
        free(ntok);
        free(left);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    const int32_t *states = io, *rings = io + B * SEARCH_STATE_INTS;
    /* Every iteration emits or advances each hypothesis not done; at most max_symbols emissions stay on
     * one frame. */
    int64_t tmax = 0;
    for (int64_t b = 0; b < B; b++)
        tmax = frames[b] > tmax ? frames[b] : tmax;
    const int64_t max_iters = (tmax + 1) * ((int64_t)s->max_symbols + 1) + 2 * cap;
    int64_t queued = 0, n = FIRST_BATCH, span_prev = 0, it_prev = 0, emitted_prev = 0, trips = 0;
    /* the window: WINDOW_MAX for a small joint; a large one's free rows for one hypothesis; adaptive,
     * up to window_cap, for a batch */
    const int64_t J = m->joint_w.ne[0], P = m->joint_w.ne[1];
    const int cap_wlog = window_max_log(J, P, B);
    const bool large = joint_large(J, P);
    bool adapt = large && B > 1;
    int wlog = cap_wlog;
    if (large && B == 1)
        while (wlog > 0 && (1 << wlog) > (m->joint_w.type == BE_F16 ? JOINT_FREE_ROWS_F16 : JOINT_FREE_ROWS))
            wlog--;
    if (window > 0) {
        for (wlog = 0; wlog < cap_wlog && (1 << wlog) < window; wlog++)
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
        int64_t done = 0, t_sum = 0, span = 0, iters_sum = 0, steps = 0, emitted_all = 0;
        for (int64_t b = 0; b < B && st == VKASR_OK; b++) {
            const int32_t *state = states + b * SEARCH_STATE_INTS, *ring = rings + b * cap * 3;
            const int64_t t = state[SEARCH_S_T], iters = state[SEARCH_S_ITERS], emitted = state[SEARCH_S_NTOK];
            if (emitted - ntok[b] > cap || emitted < ntok[b] || iters > queued) {
                st = err_set(e, VKASR_ERR_INTERNAL,
                             "device decoder: inconsistent state of hypothesis %lld (%lld tokens, %lld read, %lld of "
                             "%lld iterations)",
                             (long long)b, (long long)emitted, (long long)ntok[b], (long long)iters, (long long)queued);
                break;
            }
            for (; ntok[b] < emitted && st == VKASR_OK; ntok[b]++) {
                const int32_t *tk = ring + (ntok[b] % cap) * 3;
                st = dec_push_token(&out[b], tk[0], tk[1], tk[2], e);
                if (st == VKASR_OK && hooks && hooks->tokens_added && B == 1)
                    hooks->tokens_added(hooks->ud);
            }
            done += state[SEARCH_S_DONE] != 0;
            t_sum += t < frames[b] ? t : frames[b];
            span += state[SEARCH_S_SPAN];
            iters_sum += iters;
            steps += state[SEARCH_S_STEPS];
            emitted_all += emitted;
            left[b] = state[SEARCH_S_DONE] ? 0 : (double)(frames[b] - t);
            rate[b] = iters ? (double)t / (double)iters : 0;
        }
        if (st != VKASR_OK)
            break;
        dec_progress(hooks, t_sum, T, fs);
        if (done == B) {
            LOG_INFO(be->dev->log, "device decoder: %lld hypotheses, %lld frames, %lld tokens, %lld joint rows walked "
                     "in %lld iterations (%lld queued) and %lld round trips", (long long)B, (long long)T,
                     (long long)emitted_all, (long long)steps, (long long)iters_sum, (long long)queued,
                     (long long)trips);
            break;
        }
        if (dec_aborted(hooks)) {
            st = VKASR_ABORTED;
            break;
        }
        if (queued > max_iters) {
            st = err_set(e, VKASR_ERR_INTERNAL, "device decoder: no end after %lld iterations (%lld of %lld frames)",
                         (long long)queued, (long long)t_sum, (long long)T);
            break;
        }
        // the next batch: its window from the rows the last batch's steps needed, its length from
        // the frames per iteration over the whole run
        if (adapt && iters_sum > it_prev) {
            const double its = (double)(iters_sum - it_prev);
            wlog = next_window(wlog, (double)(span - span_prev) / its, (double)(emitted_all - emitted_prev) / its,
                               cap_wlog);
        }
        n = next_batch(left, rate, B, cap);
        span_prev = span;
        it_prev = iters_sum;
        emitted_prev = emitted_all;
    }
    free(io);
    free(ntok);
    free(left);
    return st;
}

vkasr_status dec_transducer_device(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                   const struct asr_options *opt, const struct asr_hooks *hooks,
                                   const struct asr_batch *batch, struct asr_output *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t T = enc->ne[0], V = c->vocab_size, J = m->joint_w.ne[0];
    const int64_t B = batch && batch->n > 1 ? batch->n : 1;
    const int max_sym = opt && opt->max_symbols > 0 ? opt->max_symbols : c->max_symbols;
    /* (a measuring run's model has no weights) */
    CHECK_OR_RETURN(e, be_measuring(be) || (J == V + 1 + (tdt ? c->n_durations : 0) && m->embed.ne[0] == V + 1));
    CHECK_OR_RETURN(e, c->pred_layers >= 1);
    /* The search's state counts frames and tokens in 32 bits (2^30 frames: 2.7 years of audio). */
    if (T > (int64_t)1 << 30 || T * (int64_t)max_sym >= INT32_MAX)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "%lld encoder frames at %d symbols per frame: too long for the "
                       "device decoder (VKASR_DECODER=host decodes it on the host)", (long long)T, max_sym);
    int64_t *frames = malloc((size_t)B * sizeof *frames);
    if (!frames)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t b = 0; b < B; b++)
        frames[b] = B > 1 ? asr_batch_len(batch, ASR_FRAMES, b) : T;
    uint64_t mark = be_mark(be);
    struct device_search d = {0};
    vkasr_status st = alloc_search(m, be, T, B, max_sym, &d);
    if (st == VKASR_OK && !be_measuring(be)) /* a measuring run (plan.c) ends once the tensors exist */
        st = search(m, be, enc, &d, frames, opt ? opt->decoder_window : 0, hooks, out, e);
    if (st != VKASR_OK && st != VKASR_ABORTED && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg[0] ? be->err.msg : vkasr_status_string(st));
    for (int i = 0; i < N_WINDOWS; i++)
        be_graph_free(be, d.graph[i]); /* waits for its replays, before their scratch is released */
    be_release(be, mark);
    free(frames);
    if (st == VKASR_OK)
        dec_progress(hooks, T, T, dec_frame_seconds(c));
    return st;
}
