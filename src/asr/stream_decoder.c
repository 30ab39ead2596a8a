/* stream_decoder.c — the greedy TDT / RNN-T search of a pool's streams, carried across chunks (NeMo's
 * previous_hypotheses) and run for all streams of a step together: each round evaluates the joint at
 * every unfinished stream's current frame against its prediction output (one product over all of
 * them), the host walks each stream one decision (blank: next frame; a token: emitted), and the
 * streams that emitted advance their LSTM state together (op lstm_step, rows independent). A stream's
 * next frame, symbols at that frame and LSTM state persist between steps in its slot, so its chunks
 * decode exactly as one search over all its frames, whichever streams share its rounds (the products
 * take the matvec hint: a row's rounding does not depend on how many rows there are). An end-of-
 * utterance model's stream whose chunk emitted <EOU> or <EOB> starts its next chunk from a fresh
 * prediction network. */
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "transcript.h"

static vkasr_status alloc2(struct backend *be, be_dtype type, int64_t rows, int64_t cols, be_tensor *t) {
    return be_alloc_tensor(be, BE_POOL_SCRATCH, type, 2, (int64_t[]){rows, cols}, t);
}

static vkasr_status upload_i64(struct backend *be, const int64_t *v, int64_t n, be_tensor *t) {
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I64, 1, (int64_t[]){n > 0 ? n : 1}, t));
    return n > 0 ? be_upload(be, t->addr, v, (uint64_t)n * sizeof *v) : VKASR_OK;
}

static vkasr_status copy_rows(struct backend *be, const be_tensor *x, const be_tensor *y, const be_tensor *src,
                              const be_tensor *dst, int64_t n) {
    return be_copy_rows(be, &(struct op_copy_rows){.x = *x, .y = *y, .src = src ? *src : (be_tensor){0},
                                                   .dst = dst ? *dst : (be_tensor){0}, .n = n});
}

vkasr_status asr_stream_search_init(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                    int64_t slots, int max_symbols, struct err *e) {
    const struct model_config *c = &m->cfg;
    if (c->head != VKASR_HEAD_RNNT && c->head != VKASR_HEAD_TDT)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "streaming: the cache-aware session decodes with a transducer head (RNN-T or TDT); this "
                       "model's head is CTC");
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t P = c->pred_hidden, V = c->vocab_size, J = V + 1 + (tdt ? c->n_durations : 0);
    CHECK_OR_RETURN(e, m->joint_w.ne[0] == J && m->embed.ne[0] == V + 1 && c->pred_layers <= 8 && slots > 0);
    *d = (struct asr_stream_search){.S = slots, .max_sym = max_symbols > 0 ? max_symbols : c->max_symbols};
    for (int32_t id = 0; id < V && d->nreset < 2; id++) { /* an end-of-utterance model's <EOU> and <EOB> */
        const int kind = transcript_event_kind(&m->tok, c, id);
        if (kind == VKASR_EVENT_END_OF_UTTERANCE || kind == VKASR_EVENT_BACKCHANNEL)
            d->reset_id[d->nreset++] = id;
    }
    d->slot = calloc((size_t)slots, sizeof *d->slot);
    if (!d->slot)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    vkasr_status st = VKASR_OK;
    for (int l = 0; st == VKASR_OK && l < c->pred_layers; l++) {
        st = alloc2(be, BE_F32, slots, P, &d->h[l]);
        if (st == VKASR_OK)
            st = alloc2(be, BE_F32, slots, P, &d->c[l]);
    }
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, slots, P, &d->q);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "streaming decoder: %s", be->err.msg);
    return st;
}

void asr_stream_search_fini(struct asr_stream_search *d) {
    free(d->slot);
    d->slot = NULL;
}

/* The prediction network of the slots es[0 .. E) with tokens ks (blank: the start-of-sequence step)
 * advanced one step together, their q = Wp h + bp refreshed. */
static vkasr_status predict(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                            const int64_t *es, const int64_t *ks, int64_t E) {
    const int L = m->cfg.pred_layers;
    const int64_t P = m->cfg.pred_hidden;
    uint64_t mark = be_mark(be);
    be_tensor slots, toks, x, h, c, ho, co, q;
    vkasr_status st = upload_i64(be, es, E, &slots);
    if (st == VKASR_OK)
        st = upload_i64(be, ks, E, &toks);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, E, P, &x);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, E, P, &h);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, E, P, &c);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, E, P, &ho);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, E, P, &co);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, E, P, &q);
    // x: [E, P] = Emb[token] (Emb[blank] is the zero SOS input)
    if (st == VKASR_OK)
        st = copy_rows(be, &m->embed, &x, &toks, NULL, E);
    for (int l = 0; st == VKASR_OK && l < L; l++) {
        // (h, c) of the slots -> one LSTM step -> back into the slots; the next layer's input is h
        st = copy_rows(be, &d->h[l], &h, &slots, NULL, E);
        if (st == VKASR_OK)
            st = copy_rows(be, &d->c[l], &c, &slots, NULL, E);
        if (st == VKASR_OK)
            st = be_lstm_step(be, &(struct op_lstm_step){.x = x, .h = h, .c = c, .w_ih = m->lstm_wih[l],
                                                         .w_hh = m->lstm_whh[l], .b = m->lstm_b[l], .h_out = ho,
                                                         .c_out = co});
        if (st == VKASR_OK)
            st = copy_rows(be, &ho, &d->h[l], NULL, &slots, E);
        if (st == VKASR_OK)
            st = copy_rows(be, &co, &d->c[l], NULL, &slots, E);
        be_tensor t = x;
        x = ho;
        ho = t;
    }
    // q rows of the slots = h_top Wp^T + bp
    if (st == VKASR_OK)
        st = be_linear(be, &(struct op_linear){.x = x, .w = m->pred_proj_w, .bias = m->pred_proj_b, .y = q, .alpha = 1.0f,
                                                .matvec = true});
    if (st == VKASR_OK)
        st = copy_rows(be, &q, &d->q, NULL, &slots, E);
    be_release(be, mark);
    return st;
}

/* The prediction networks of slots es[0 .. n) back to the start of a sequence: a zero LSTM state and
 * the blank (SOS) step from it. The slots' frame positions are the caller's. */
static vkasr_status start_sequence(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                   const int64_t *es, int64_t n, struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t P = c->pred_hidden;
    float *zeros = calloc((size_t)P, sizeof *zeros);
    int64_t *blank = malloc((size_t)n * sizeof *blank);
    vkasr_status st = zeros && blank ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t i = 0; st == VKASR_OK && i < n; i++) {
        blank[i] = c->vocab_size;
        for (int l = 0; st == VKASR_OK && l < c->pred_layers; l++) {
            st = be_upload(be, d->h[l].addr + (uint64_t)(es[i] * P) * 4, zeros, (uint64_t)P * 4);
            if (st == VKASR_OK)
                st = be_upload(be, d->c[l].addr + (uint64_t)(es[i] * P) * 4, zeros, (uint64_t)P * 4);
        }
    }
    if (st == VKASR_OK)
        st = predict(m, be, d, es, blank, n);
    free(zeros);
    free(blank);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "streaming decoder: %s", be->err.msg);
    return st;
}

vkasr_status asr_stream_search_reset(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                     int64_t slot, int max_symbols, struct err *e) {
    d->slot[slot] = (struct asr_stream_slot){.t = 0, .last_t = -1, .run = 0,
                                             .max_sym = max_symbols > 0 ? max_symbols : d->max_sym};
    return start_sequence(m, be, d, &slot, 1, e);
}

/* After a step: the streams whose new tokens (out[b] from n0[b] on) hold an <EOU> or <EOB> start the
 * next chunk from a fresh prediction network, as NVIDIA's live runtime for these models resets the
 * hypothesis after such a chunk (asr/stream.h). */
static vkasr_status reset_after_events(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                       const int64_t *slots, int64_t B, struct asr_output *const *out,
                                       const size_t *n0, int64_t *es, struct err *e) {
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        bool hit = false;
        for (size_t i = n0[b]; i < out[b]->ntokens && !hit; i++)
            for (int k = 0; k < d->nreset; k++)
                hit = hit || out[b]->tokens[i].id == d->reset_id[k];
        if (hit) {
            struct asr_stream_slot *ss = &d->slot[slots[b]];
            ss->run = 0;
            ss->last_t = -1;
            es[n++] = slots[b];
        }
    }
    return n > 0 ? start_sequence(m, be, d, es, n, e) : VKASR_OK;
}

vkasr_status asr_stream_search_run(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                   const be_tensor *enc, const int64_t *slots, const int64_t *off, const int64_t *t0,
                                   int64_t B, struct asr_output *const *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t N = enc->ne[0], P = c->pred_hidden, V = c->vocab_size, J = V + 1 + (tdt ? c->n_durations : 0);
    if (N == 0)
        return VKASR_OK;
    uint64_t mark = be_mark(be);
    be_tensor f, zf, zq, y, best;
    vkasr_status st = alloc2(be, BE_F32, N, P, &f);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, B, P, &zf);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, B, P, &zq);
    if (st == VKASR_OK)
        st = alloc2(be, BE_F32, B, J, &y);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I32, 1, (int64_t[]){2 * B}, &best);
    // f: [N, P] = enc We^T + be  (the encoder half of the joint for every stream's frames)
    if (st == VKASR_OK)
        st = be_linear(be, &(struct op_linear){.x = *enc, .w = m->enc_proj_w, .bias = m->enc_proj_b, .y = f,
                                               .alpha = 1.0f, .matvec = true});
    int64_t *tab = malloc((size_t)(6 * B) * sizeof *tab), *rows = tab, *act = tab + 2 * B;
    int64_t *es = tab + 3 * B, *ks = tab + 4 * B;
    int32_t *ids = malloc((size_t)(2 * B) * sizeof *ids);
    size_t *n0 = malloc((size_t)B * sizeof *n0); /* each stream's tokens before this step */
    if ((!tab || !ids || !n0) && st == VKASR_OK)
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t b = 0; st == VKASR_OK && b < B; b++)
        n0[b] = out[b]->ntokens;
    for (int64_t round = 0; st == VKASR_OK; round++) {
        // the streams whose next frame lies in this chunk, and where its row is
        int64_t A = 0;
        for (int64_t b = 0; b < B; b++) {
            const struct asr_stream_slot *ss = &d->slot[slots[b]];
            if (ss->t < t0[b] + (off[b + 1] - off[b]))
                act[A++] = b;
        }
        if (A == 0)
            break;
        for (int64_t a = 0; a < A; a++) { /* the frames' rows in f, then the slots' rows in q: one upload */
            rows[a] = off[act[a]] + (d->slot[slots[act[a]]].t - t0[act[a]]);
            rows[A + a] = slots[act[a]];
        }
        uint64_t rm = be_mark(be);
        be_tensor tfq, za = be_tensor_rows(&zf, 0, A), qa = be_tensor_rows(&zq, 0, A), ya = be_tensor_rows(&y, 0, A);
        st = upload_i64(be, rows, 2 * A, &tfq);
        const be_tensor tf = be_tensor_1d(tfq.addr, BE_I64, A);
        const be_tensor tq = be_tensor_1d(tfq.addr + (uint64_t)A * 8, BE_I64, A);
        // z: [A, P] = relu(f[frame] + q[slot]);  y: [A, J] = z Wo^T + bo;  the argmaxes
        if (st == VKASR_OK)
            st = copy_rows(be, &f, &za, &tf, NULL, A);
        if (st == VKASR_OK)
            st = copy_rows(be, &d->q, &qa, &tq, NULL, A);
        if (st == VKASR_OK)
            st = be_binary(be, &(struct op_binary){.a = za, .b = qa, .y = za, .kind = BINARY_ADD, .act = ACT_RELU,
                                                    .alpha = 1.0f, .beta = 1.0f});
        if (st == VKASR_OK)
            st = be_linear(be, &(struct op_linear){.x = za, .w = m->joint_w, .bias = m->joint_b, .y = ya, .alpha = 1.0f,
                                                    .matvec = true});
        if (st == VKASR_OK)
            st = be_argmax(be, &(struct op_argmax){.x = ya, .y = be_tensor_rows(&best, 0, A), .c0 = 0, .c1 = V + 1});
        if (st == VKASR_OK && tdt)
            st = be_argmax(be, &(struct op_argmax){.x = ya, .y = be_tensor_rows(&best, B, A), .c0 = V + 1, .c1 = J});
        if (st == VKASR_OK)
            st = be_download(be, ids, best.addr, (uint64_t)A * 4);
        if (st == VKASR_OK && tdt)
            st = be_download(be, ids + B, best.addr + (uint64_t)B * 4, (uint64_t)A * 4);
        be_release(be, rm);
        // one decision per stream: a blank moves to the next frame (TDT: by its duration), a token is
        // emitted and its stream's prediction network advances
        int64_t E = 0;
        for (int64_t a = 0; st == VKASR_OK && a < A; a++) {
            const int64_t b = act[a];
            struct asr_stream_slot *ss = &d->slot[slots[b]];
            const int32_t k = ids[a], di = tdt ? ids[B + a] : 0;
            if (tdt && (di < 0 || di >= c->n_durations)) {
                st = err_set(e, VKASR_ERR_INTERNAL, "duration index %d out of range", di);
                break;
            }
            const int32_t dur = tdt ? c->durations[di] : 1;
            if (k == V) {
                ss->t += tdt ? (dur > 0 ? dur : 1) : 1;
                if (!tdt)
                    ss->run = 0;
                continue;
            }
            struct asr_output *o = out[b];
            if (o->ntokens == o->captokens) {
                size_t cap = o->captokens ? 2 * o->captokens : 256;
                struct asr_token *nt = realloc(o->tokens, cap * sizeof *nt);
                if (!nt) {
                    st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
                    break;
                }
                o->tokens = nt;
                o->captokens = cap;
            }
            o->tokens[o->ntokens++] = (struct asr_token){k, ss->t, tdt ? dur : 1};
            if (tdt) {
                ss->run = ss->t == ss->last_t ? ss->run + 1 : 1;
                ss->last_t = ss->t;
                ss->t += dur;
                if (dur == 0 && ss->run >= ss->max_sym)
                    ss->t += 1;
            } else if (++ss->run >= ss->max_sym) {
                ss->t += 1;
                ss->run = 0;
            }
            es[E] = slots[b];
            ks[E++] = k;
        }
        if (st == VKASR_OK && E > 0)
            st = predict(m, be, d, es, ks, E);
    }
    if (st == VKASR_OK && d->nreset > 0)
        st = reset_after_events(m, be, d, slots, B, out, n0, es, e);
    free(tab);
    free(ids);
    free(n0);
    be_release(be, mark);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "streaming decoder: %s", be->err.msg);
    return st;
}
