/* transducer_host.c — greedy TDT and RNN-T (spec §6.4, §6.5) walked on the host. With the prediction
 * network's output q fixed, the joint for frames [t, t+W) is a matrix product plus two row argmaxes
 * on the device; the host walks the window (blanks, TDT duration skips) until the next emission, then
 * one LSTM step and projection update q: one host round trip per emitted token (or window of blanks).
 * The decoder of stage taps (each step's joint logits) and teacher forcing (asr_options.forced), and
 * the reference for transducer_device.c, which loops on the device and gives the same tokens. */
#include <stdlib.h>
#include <string.h>

#include "decoder_common.h"
#include "transducer.h"

#define WINDOW_MIN 8
#define WINDOW_MAX 256
/* The joint's rows per product: the matrix-vector kernel's at most (vk_gemm.h), whose rounding of a row
 * does not depend on the product's rows. Longer windows take several products, so that every device
 * rounds a frame's logits as transducer_device.c (windows of 1-8 rows) does. */
#define JOINT_ROWS 8

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
                                             .alpha = 1.0f, .matvec = true, .x_f32 = asr_x_f32(m)});
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

vkasr_status dec_transducer_host(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                      const struct asr_options *opt, const struct asr_hooks *hooks,
                                      struct asr_output *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const bool tdt = c->head == VKASR_HEAD_TDT;
    const int64_t T = enc->ne[0], P = c->pred_hidden, V = c->vocab_size, J = V + 1 + (tdt ? c->n_durations : 0);
    const int max_sym = opt && opt->max_symbols > 0 ? opt->max_symbols : c->max_symbols;
    const double fs = dec_frame_seconds(c);
    /* (a measuring run's model has no weights) */
    CHECK_OR_RETURN(e, be_measuring(be) || (m->joint_w.ne[0] == J && m->embed.ne[0] == V + 1));

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
    if (be_measuring(be)) { /* a measuring run (plan.c) ends here: the search allocates nothing */
        be_release(be, mark);
        free(logits);
        return st;
    }
    // f: [T, P] = enc We^T + be  (the encoder half of the joint, once for all frames)
    if (st == VKASR_OK)
        st = be_linear(be, &(struct op_linear){.x = *enc, .w = m->enc_proj_w, .bias = m->enc_proj_b, .y = f,
                                                .alpha = 1.0f, .x_f32 = asr_x_f32(m)});
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
        // z: [n, P] = relu(f[t0 .. t0+n) + q);  y: [n, J] = z Wo^T + bo, JOINT_ROWS rows per product
        st = be_binary(be, &(struct op_binary){.a = be_tensor_rows(&f, t0, n), .b = s.q, .y = zw, .kind = BINARY_ADD,
                                                .act = ACT_RELU, .alpha = 1.0f, .beta = 1.0f});
        for (int64_t r0 = 0; st == VKASR_OK && r0 < n; r0 += JOINT_ROWS) {
            const int64_t nr = n - r0 < JOINT_ROWS ? n - r0 : JOINT_ROWS;
            st = be_linear(be, &(struct op_linear){.x = be_tensor_rows(&zw, r0, nr), .w = m->joint_w,
                                                    .bias = m->joint_b, .y = be_tensor_rows(&yw, r0, nr),
                                                    .alpha = 1.0f, .matvec = true, .x_f32 = asr_x_f32(m)});
        }
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
            st = dec_push_token(out, k, t, tdt ? d : 1, e);
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
            dec_progress(hooks, t < T ? t : T, T, fs);
            if (dec_aborted(hooks)) {
                st = VKASR_ABORTED;
                break;
            }
        }
    }
    be_release(be, mark);
    free(logits);
    if (st == VKASR_OK)
        dec_progress(hooks, T, T, fs);
    return st;
}

