/* decoder.c — greedy decoding (spec §6): CTC (argmax, collapse, drop blank), RNN-T and TDT.
 *
 * Transducers run on the device in windows: with the prediction-network output q fixed, the joint
 * for frames [t, t+W) is one matrix product plus two row argmaxes; the host walks the window
 * (blanks, TDT duration skips) until the next emission, then one LSTM step and projection update q.
 * Host round trips therefore scale with emitted tokens, not with frames. A stage tap receives each
 * step's joint logits; teacher forcing (asr_options.forced) replaces the search's choices. */
#include <stdlib.h>
#include <string.h>

#include "asr.h"

#define WINDOW_MIN 8
#define WINDOW_MAX 256
/* Rows of CTC logits per chunk: [rows, V+1] stays under ~64 MiB. */
#define LOGITS_BUDGET (64ull << 20)

static vkasr_status push_token(struct asr_output *o, int32_t id, int64_t frame, int32_t dur, struct err *e) {
    if (o->ntokens == o->captokens) {
        size_t cap = o->captokens ? 2 * o->captokens : 256;
        struct asr_token *nt = realloc(o->tokens, cap * sizeof *nt);
        if (!nt)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        o->tokens = nt;
        o->captokens = cap;
    }
    o->tokens[o->ntokens++] = (struct asr_token){id, frame, dur};
    return VKASR_OK;
}

static bool aborted(const struct asr_hooks *h) { return h && h->should_abort && h->should_abort(h->ud); }

static void progress(const struct asr_hooks *h, int64_t t, int64_t T, double frame_seconds) {
    if (h && h->progress)
        h->progress(h->ud, "decoder", T ? (double)t / (double)T : 1.0, (double)t * frame_seconds);
}

static double frame_seconds(const struct model_config *c) {
    return (double)c->sub_factor * c->hop_length / c->sample_rate;
}

/* ---- CTC ---------------------------------------------------------------------------------------- */

/* Stage tap of a CTC chunk: frames r0 .. r0+n-1, logits lg [n, V+1], their argmaxes best[r0 ..]. */
static vkasr_status tap_ctc_chunk(const struct asr_hooks *hooks, struct backend *be, int64_t r0, const be_tensor *lg,
                                  const be_tensor *best, struct err *e) {
    const int64_t n = lg->ne[0], V1 = lg->ne[1];
    float *rows = malloc(be_nbytes(lg) + 4);
    int32_t *ids = malloc((size_t)n * sizeof *ids + 4);
    vkasr_decoder_step *steps = malloc((size_t)n * sizeof *steps + 4);
    vkasr_status st = rows && ids && steps ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    if (st == VKASR_OK)
        st = be_download(be, rows, lg->addr, be_nbytes(lg));
    if (st == VKASR_OK)
        st = be_download(be, ids, best->addr + (uint64_t)r0 * sizeof *ids, (uint64_t)n * sizeof *ids);
    for (int64_t i = 0; st == VKASR_OK && i < n; i++)
        steps[i] = (vkasr_decoder_step){.frame = r0 + i, .token = ids[i], .duration = 1};
    if (st == VKASR_OK)
        hooks->stage(hooks->ud, &(vkasr_stage){.name = "logits", .index = r0, .data = rows, .rows = (size_t)n,
                                               .cols = (size_t)V1, .steps = steps});
    free(rows);
    free(ids);
    free(steps);
    return st;
}

static vkasr_status decode_ctc(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                               const struct asr_hooks *hooks, struct asr_output *out, struct err *e) {
    const int64_t T = enc->ne[0], V1 = m->ctc_w.ne[0], blank = V1 - 1;
    int64_t chunk = (int64_t)(LOGITS_BUDGET / (4 * (uint64_t)V1));
    chunk = chunk < 1 ? 1 : chunk > T ? T : chunk;
    int32_t *ids = malloc((size_t)(T ? T : 1) * sizeof *ids);
    if (!ids)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    uint64_t mark = be_mark(be);
    be_tensor logits, best;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){chunk, V1}, &logits);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I32, 1, (int64_t[]){T}, &best);
    for (int64_t r0 = 0; st == VKASR_OK && r0 < T; r0 += chunk) {
        int64_t n = T - r0 < chunk ? T - r0 : chunk;
        be_tensor lg = be_tensor_rows(&logits, 0, n);
        // logits: [n, V+1] = enc W^T + b;  best: argmax over all classes (blank = V)
        st = be_linear(be, &(struct op_linear){.x = be_tensor_rows(enc, r0, n), .w = m->ctc_w, .bias = m->ctc_b,
                                                .y = lg, .alpha = 1.0f});
        if (st == VKASR_OK)
            st = be_argmax(be, &(struct op_argmax){.x = lg, .y = be_tensor_rows(&best, r0, n), .c0 = 0, .c1 = V1});
        if (st == VKASR_OK && asr_tapped(hooks))
            st = tap_ctc_chunk(hooks, be, r0, &lg, &best, e);
    }
    if (st == VKASR_OK)
        st = be_download(be, ids, best.addr, (uint64_t)T * sizeof *ids);
    be_release(be, mark);
    // collapse repeats, drop blanks; a token's span is its run of frames
    for (int64_t t = 0; st == VKASR_OK && t < T; t++) {
        if (ids[t] == blank || (t > 0 && ids[t] == ids[t - 1]))
            continue;
        int64_t end = t + 1;
        while (end < T && ids[end] == ids[t])
            end++;
        st = push_token(out, ids[t], t, (int32_t)(end - t), e);
        if (st == VKASR_OK && hooks && hooks->tokens_added)
            hooks->tokens_added(hooks->ud);
    }
    free(ids);
    progress(hooks, T, T, frame_seconds(&m->cfg));
    return st;
}

/* ---- transducers --------------------------------------------------------------------------------- */

struct pred_state {
    be_tensor h[2][8], c[2][8];      /* ping-pong LSTM state per layer                              */
    int cur;                         /* which of the two holds the current state                   */
    be_tensor q;                     /* [1, P] projected prediction-network output                  */
};

/* Advances the prediction network with token k (k = blank: the start-of-sequence step) and refreshes
 * q = Wp h_top + bp. */
static vkasr_status predict(const struct asr_model *m, struct backend *be, struct pred_state *s, int32_t k) {
    const int L = m->cfg.pred_layers, nxt = 1 - s->cur;
    be_tensor x = be_tensor_row(&m->embed, k); // [P] = Emb[k] (Emb[blank] is the zero SOS input)
    for (int l = 0; l < L; l++) {
        TRY(be_lstm_step(be, &(struct op_lstm_step){.x = x, .h = s->h[s->cur][l], .c = s->c[s->cur][l],
                                                     .w_ih = m->lstm_wih[l], .w_hh = m->lstm_whh[l], .b = m->lstm_b[l],
                                                     .h_out = s->h[nxt][l], .c_out = s->c[nxt][l]}));
        x = s->h[nxt][l];
    }
    s->cur = nxt;
    // q: [1, P] = g Wp^T + bp
    be_tensor g = be_tensor_2d(x.addr, BE_F32, 1, x.ne[0]);
    return be_linear(be, &(struct op_linear){.x = g, .w = m->pred_proj_w, .bias = m->pred_proj_b, .y = s->q,
                                             .alpha = 1.0f, .matvec = true});
}

/* Teacher forcing (asr_options.forced): the caller's step i replaces the search's own choice (k, d). */
static vkasr_status force_step(const struct model_config *c, const vkasr_decoder_step *f, int64_t i, int64_t t,
                               int32_t *k, int32_t *d, struct err *e) {
    if (f->frame != t)
        return err_set(e, VKASR_ERR_INVALID_ARG,
                       "forced decoder step %lld is at frame %lld but the search is at frame %lld (forced steps "
                       "must come from a run on the same audio and model)",
                       (long long)i, (long long)f->frame, (long long)t);
    if (f->token < 0 || f->token > c->vocab_size)
        return err_set(e, VKASR_ERR_INVALID_ARG, "forced decoder step %lld: token %d is not in 0..%d",
                       (long long)i, f->token, c->vocab_size);
    if (c->head == VKASR_HEAD_TDT) {
        bool known = false;
        for (int j = 0; j < c->n_durations; j++)
            known |= c->durations[j] == f->duration;
        if (!known)
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "forced decoder step %lld: duration %d is not one of the model's durations",
                           (long long)i, f->duration);
        *d = f->duration;
    }
    *k = f->token;
    return VKASR_OK;
}

/* Stage tap of one transducer step: its joint logits row [J] and the search's own choice. */
static void tap_step(const struct asr_hooks *hooks, int64_t step, const float *row, int64_t J, int64_t t, int32_t k,
                     int32_t d) {
    vkasr_decoder_step s = {.frame = t, .token = k, .duration = d};
    hooks->stage(hooks->ud, &(vkasr_stage){.name = "logits", .index = step, .data = row, .rows = 1,
                                           .cols = (size_t)J, .steps = &s});
}

static vkasr_status decode_transducer(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                      const struct asr_options *opt, const struct asr_hooks *hooks,
                                      struct asr_output *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t T = enc->ne[0], P = c->pred_hidden, V = c->vocab_size, J = m->joint_w.ne[0];
    const int max_sym = opt && opt->max_symbols > 0 ? opt->max_symbols : c->max_symbols;
    const double fs = frame_seconds(c);
    CHECK_OR_RETURN(e, J == V + 1 + (tdt ? c->n_durations : 0) && m->embed.ne[0] == V + 1);

    uint64_t mark = be_mark(be);
    struct pred_state s = {0};
    be_tensor f, z, y, best;
    vkasr_status st = VKASR_OK;
#define ALLOC(t, ...) if (st == VKASR_OK) st = be_alloc_tensor(be, BE_POOL_SCRATCH, __VA_ARGS__, &(t))
    ALLOC(f, BE_F32, 2, (int64_t[]){T, P});
    ALLOC(z, BE_F32, 2, (int64_t[]){WINDOW_MAX, P});
    ALLOC(y, BE_F32, 2, (int64_t[]){WINDOW_MAX, J});
    ALLOC(best, BE_I32, 1, (int64_t[]){2 * WINDOW_MAX}); /* a window's token ids, then its duration indices */
    ALLOC(s.q, BE_F32, 2, (int64_t[]){1, P});
    float *zeros = calloc((size_t)P, sizeof *zeros);
    float *logits = asr_tapped(hooks) ? malloc((size_t)(WINDOW_MAX * J) * sizeof *logits) : NULL; /* a window's y */
    if ((!zeros || (asr_tapped(hooks) && !logits)) && st == VKASR_OK)
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int b = 0; b < 2; b++)
        for (int l = 0; l < c->pred_layers; l++) {
            ALLOC(s.h[b][l], BE_F32, 1, (int64_t[]){P});
            ALLOC(s.c[b][l], BE_F32, 1, (int64_t[]){P});
            if (st == VKASR_OK && b == 0)
                st = be_upload(be, s.h[0][l].addr, zeros, (uint64_t)P * 4);
            if (st == VKASR_OK && b == 0)
                st = be_upload(be, s.c[0][l].addr, zeros, (uint64_t)P * 4);
        }
#undef ALLOC
    free(zeros);
    // f: [T, P] = enc We^T + be  (the encoder half of the joint, once for all frames)
    if (st == VKASR_OK)
        st = be_linear(be, &(struct op_linear){.x = *enc, .w = m->enc_proj_w, .bias = m->enc_proj_b, .y = f,
                                                .alpha = 1.0f});
    // start-of-sequence: the blank embedding (all zeros in trained checkpoints) from a zero state
    if (st == VKASR_OK)
        st = predict(m, be, &s, (int32_t)V);

    int32_t ids[2 * WINDOW_MAX];
    const size_t nforced = opt ? opt->nforced : 0;
    int64_t t = 0, last_t = -1, windows = 0, step = 0; /* step: joint evaluations the search consumed */
    int run = 0, W = WINDOW_MIN;
    while (st == VKASR_OK && t < T) {
        const int64_t t0 = t, n = T - t < W ? T - t : W;
        be_tensor zw = be_tensor_rows(&z, 0, n), yw = be_tensor_rows(&y, 0, n);
        // z: [n, P] = relu(f[t0 .. t0+n) + q);  y: [n, J] = z Wo^T + bo
        st = be_binary(be, &(struct op_binary){.a = be_tensor_rows(&f, t0, n), .b = s.q, .y = zw, .kind = BINARY_ADD,
                                                .act = ACT_RELU, .alpha = 1.0f, .beta = 1.0f});
        if (st == VKASR_OK)
            st = be_linear(be, &(struct op_linear){.x = zw, .w = m->joint_w, .bias = m->joint_b, .y = yw, .alpha = 1.0f,
                                                    .matvec = true});
        // token = argmax over [0, V] (blank included); duration index = argmax over the duration logits;
        // both in one download (one host round trip per window)
        if (st == VKASR_OK)
            st = be_argmax(be, &(struct op_argmax){.x = yw, .y = be_tensor_rows(&best, 0, n), .c0 = 0, .c1 = V + 1});
        if (st == VKASR_OK && tdt)
            st = be_argmax(be, &(struct op_argmax){.x = yw, .y = be_tensor_rows(&best, n, n), .c0 = V + 1, .c1 = J});
        if (st == VKASR_OK)
            st = be_download(be, ids, best.addr, (uint64_t)(tdt ? 2 * n : n) * 4);
        if (st == VKASR_OK && logits)
            st = be_download(be, logits, yw.addr, be_nbytes(&yw));
        if (st != VKASR_OK)
            break;
        const int32_t *tok = ids, *dur = ids + n;
        // walk the window until the next emission (which changes q) or its end
        bool emitted = false;
        while (t < t0 + n && t < T) {
            int32_t k = tok[t - t0];
            const int32_t di = tdt ? dur[t - t0] : 0;
            if (tdt && (di < 0 || di >= c->n_durations)) {
                st = err_set(e, VKASR_ERR_INTERNAL, "duration index %d out of range", di);
                break;
            }
            int32_t d = tdt ? c->durations[di] : 1;
            if (logits)
                tap_step(hooks, step, logits + (t - t0) * J, J, t, k, d);
            if ((size_t)step < nforced && (st = force_step(c, &opt->forced[step], step, t, &k, &d, e)) != VKASR_OK)
                break;
            step++;
            if (k == V) { /* blank */
                if (tdt)
                    t += d > 0 ? d : 1; /* blank with duration 0 advances one frame */
                else {
                    t += 1;
                    run = 0;
                }
                continue;
            }
            st = push_token(out, k, t, tdt ? d : 1, e);
            if (st != VKASR_OK)
                break;
            if (tdt) {
                run = t == last_t ? run + 1 : 1;
                last_t = t;
                t += d;
                if (d == 0 && run >= max_sym)
                    t += 1; /* cap on symbols emitted at one frame (NeMo label-looping) */
            } else if (++run >= max_sym) {
                t += 1;
                run = 0;
            }
            st = predict(m, be, &s, k);
            emitted = true;
            if (hooks && hooks->tokens_added)
                hooks->tokens_added(hooks->ud);
            break;
        }
        W = emitted ? WINDOW_MIN : (W * 2 > WINDOW_MAX ? WINDOW_MAX : W * 2);
        if (++windows % 16 == 0) {
            progress(hooks, t < T ? t : T, T, fs);
            if (aborted(hooks)) {
                st = VKASR_ABORTED;
                break;
            }
        }
    }
    be_release(be, mark);
    free(logits);
    if (st == VKASR_OK)
        progress(hooks, T, T, fs);
    return st;
}

uint64_t asr_decode_scratch(const struct model_config *c, int64_t frames) {
    const int64_t T = frames, V1 = c->vocab_size + 1, P = c->pred_hidden;
    if (T == 0)
        return 0;
    if (c->head == VKASR_HEAD_CTC) {
        int64_t chunk = (int64_t)(LOGITS_BUDGET / (4 * (uint64_t)V1));
        chunk = chunk < 1 ? 1 : chunk > T ? T : chunk;
        // logits [chunk, V+1];  best [T] i32
        return be_scratch_f32(chunk, V1) + be_scratch_f32(T, 1);
    }
    const int64_t J = V1 + (c->head == VKASR_HEAD_TDT ? c->n_durations : 0);
    // f [T, P];  z [W, P];  y [W, J];  best [2W] i32;  q [1, P];  h, c [P] x layers x 2
    return be_scratch_f32(T, P) + be_scratch_f32(WINDOW_MAX, P) + be_scratch_f32(WINDOW_MAX, J) +
           be_scratch_f32(2 * WINDOW_MAX, 1) + be_scratch_f32(1, P) + 4 * (uint64_t)c->pred_layers * be_scratch_f32(P, 1);
}

vkasr_status asr_decode(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_options *opt,
                        const struct asr_hooks *hooks, struct asr_output *out, struct err *e) {
    out->frames = enc->ne[0];
    if (enc->ne[0] == 0)
        return VKASR_OK;
    if (m->cfg.head == VKASR_HEAD_CTC)
        return decode_ctc(m, be, enc, hooks, out, e);
    return decode_transducer(m, be, enc, opt, hooks, out, e);
}
