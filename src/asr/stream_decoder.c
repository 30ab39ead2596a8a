/* stream_decoder.c — the greedy TDT / RNN-T search of a stream, carried across chunks (NeMo's
 * previous_hypotheses): the joint of a chunk's frames against the current prediction output, the host
 * walking them to the next emission, one LSTM step per emitted token. The state between chunks is the
 * search's own (next frame, symbols at that frame, LSTM state), so chunks decode exactly as one search
 * over all frames; the joint's products take at most 8 rows, rounding as the offline decoders do. */
#include <stdlib.h>

#include "decoder_common.h"
#include "stream.h"

#define JOINT_ROWS 8

/* Advances the prediction network with token k (blank: the start-of-sequence step), q = Wp h + bp. */
static vkasr_status predict(const struct asr_model *m, struct backend *be, struct asr_stream_dec *d, int32_t k) {
    const int L = m->cfg.pred_layers, nxt = 1 - d->cur;
    be_tensor x = be_tensor_row(&m->embed, k);
    for (int l = 0; l < L; l++) {
        TRY(be_lstm_step(be, &(struct op_lstm_step){.x = x, .h = d->h[d->cur][l], .c = d->c[d->cur][l],
                                                     .w_ih = m->lstm_wih[l], .w_hh = m->lstm_whh[l], .b = m->lstm_b[l],
                                                     .h_out = d->h[nxt][l], .c_out = d->c[nxt][l]}));
        x = d->h[nxt][l];
    }
    d->cur = nxt;
    be_tensor g = be_tensor_2d(x.addr, BE_F32, 1, x.ne[0]);
    return be_linear(be, &(struct op_linear){.x = g, .w = m->pred_proj_w, .bias = m->pred_proj_b, .y = d->q,
                                             .alpha = 1.0f, .matvec = true});
}

vkasr_status asr_stream_dec_init(const struct asr_model *m, struct backend *be, struct asr_stream_dec *d, int64_t rows,
                                 int max_symbols, struct err *e) {
    const struct model_config *c = &m->cfg;
    if (c->head != VKASR_HEAD_RNNT && c->head != VKASR_HEAD_TDT)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "streaming: the cache-aware session decodes with a transducer head (RNN-T or TDT); this "
                       "model's head is CTC");
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t P = c->pred_hidden, V = c->vocab_size, J = V + 1 + (tdt ? c->n_durations : 0);
    CHECK_OR_RETURN(e, m->joint_w.ne[0] == J && m->embed.ne[0] == V + 1 && c->pred_layers <= 8 && rows > 0);
    *d = (struct asr_stream_dec){.rows = rows, .last_t = -1,
                                 .max_sym = max_symbols > 0 ? max_symbols : c->max_symbols};
    vkasr_status st = VKASR_OK;
#define ALLOC(t, ...) if (st == VKASR_OK) st = be_alloc_tensor(be, BE_POOL_SCRATCH, __VA_ARGS__, &(t))
    ALLOC(d->f, BE_F32, 2, (int64_t[]){rows, P});
    ALLOC(d->z, BE_F32, 2, (int64_t[]){rows, P});
    ALLOC(d->y, BE_F32, 2, (int64_t[]){rows, J});
    ALLOC(d->best, BE_I32, 1, (int64_t[]){2 * rows});
    ALLOC(d->q, BE_F32, 2, (int64_t[]){1, P});
    for (int b = 0; b < 2; b++)
        for (int l = 0; l < c->pred_layers; l++) {
            ALLOC(d->h[b][l], BE_F32, 1, (int64_t[]){P});
            ALLOC(d->c[b][l], BE_F32, 1, (int64_t[]){P});
        }
#undef ALLOC
    if (st == VKASR_OK)
        return asr_stream_dec_reset(m, be, d, e);
    if (e->code == VKASR_OK)
        err_set(e, st, "streaming decoder: %s", be->err.msg);
    return st;
}

vkasr_status asr_stream_dec_reset(const struct asr_model *m, struct backend *be, struct asr_stream_dec *d,
                                  struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t P = c->pred_hidden;
    d->cur = 0;
    d->t = 0;
    d->last_t = -1;
    d->run = 0;
    float *zeros = calloc((size_t)P, sizeof *zeros);
    vkasr_status st = zeros ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int l = 0; st == VKASR_OK && l < c->pred_layers; l++) {
        st = be_upload(be, d->h[0][l].addr, zeros, (uint64_t)P * 4);
        if (st == VKASR_OK)
            st = be_upload(be, d->c[0][l].addr, zeros, (uint64_t)P * 4);
    }
    free(zeros);
    // start-of-sequence: the blank embedding from a zero state
    if (st == VKASR_OK)
        st = predict(m, be, d, (int32_t)c->vocab_size);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "streaming decoder: %s", be->err.msg);
    return st;
}

vkasr_status asr_stream_dec_run(const struct asr_model *m, struct backend *be, struct asr_stream_dec *d,
                                const be_tensor *enc, int64_t t0, struct asr_output *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t n = enc->ne[0], V = c->vocab_size;
    CHECK_OR_RETURN(e, n <= d->rows);
    if (n == 0)
        return VKASR_OK;
    be_tensor f = be_tensor_rows(&d->f, 0, n);
    // f: [n, P] = enc We^T + be  (the encoder half of the joint for the chunk's frames)
    vkasr_status st = be_linear(be, &(struct op_linear){.x = *enc, .w = m->enc_proj_w, .bias = m->enc_proj_b,
                                                         .y = f, .alpha = 1.0f});
    int32_t *ids = malloc((size_t)(2 * n) * sizeof *ids);
    if (!ids)
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    const int64_t end = t0 + n;
    while (st == VKASR_OK && d->t < end) {
        const int64_t a = d->t - t0, w = n - a; /* the chunk's frames from the search's */
        be_tensor zw = be_tensor_rows(&d->z, 0, w), yw = be_tensor_rows(&d->y, 0, w);
        // z: [w, P] = relu(f rows a .. + q);  y: [w, J] = z Wo^T + bo;  argmaxes of tokens and durations
        st = be_binary(be, &(struct op_binary){.a = be_tensor_rows(&f, a, w), .b = d->q, .y = zw, .kind = BINARY_ADD,
                                                .act = ACT_RELU, .alpha = 1.0f, .beta = 1.0f});
        for (int64_t r0 = 0; st == VKASR_OK && r0 < w; r0 += JOINT_ROWS) {
            const int64_t nr = w - r0 < JOINT_ROWS ? w - r0 : JOINT_ROWS;
            st = be_linear(be, &(struct op_linear){.x = be_tensor_rows(&zw, r0, nr), .w = m->joint_w,
                                                    .bias = m->joint_b, .y = be_tensor_rows(&yw, r0, nr),
                                                    .alpha = 1.0f, .matvec = true});
        }
        if (st == VKASR_OK)
            st = be_argmax(be, &(struct op_argmax){.x = yw, .y = be_tensor_rows(&d->best, 0, w), .c0 = 0, .c1 = V + 1});
        if (st == VKASR_OK && tdt)
            st = be_argmax(be, &(struct op_argmax){.x = yw, .y = be_tensor_rows(&d->best, w, w), .c0 = V + 1,
                                                    .c1 = V + 1 + c->n_durations});
        if (st == VKASR_OK)
            st = be_download(be, ids, d->best.addr, (uint64_t)(tdt ? 2 * w : w) * 4);
        if (st != VKASR_OK)
            break;
        // walk to the next emission (which changes q) or the chunk's end
        const int64_t tw = d->t;
        while (d->t < end) {
            const int32_t k = ids[d->t - tw], di = tdt ? ids[w + d->t - tw] : 0;
            if (tdt && (di < 0 || di >= c->n_durations)) {
                st = err_set(e, VKASR_ERR_INTERNAL, "duration index %d out of range", di);
                break;
            }
            const int32_t dur = tdt ? c->durations[di] : 1;
            if (k == V) { /* blank */
                d->t += tdt ? (dur > 0 ? dur : 1) : 1;
                if (!tdt)
                    d->run = 0;
                continue;
            }
            st = dec_push_token(out, k, d->t, tdt ? dur : 1, e);
            if (st != VKASR_OK)
                break;
            if (tdt) {
                d->run = d->t == d->last_t ? d->run + 1 : 1;
                d->last_t = d->t;
                d->t += dur;
                if (dur == 0 && d->run >= d->max_sym)
                    d->t += 1;
            } else if (++d->run >= d->max_sym) {
                d->t += 1;
                d->run = 0;
            }
            st = predict(m, be, d, k);
            break;
        }
    }
    free(ids);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "streaming decoder: %s", be->err.msg);
    return st;
}
