/* decoder.c — greedy decoding (spec §6): the entry point, CTC (argmax, collapse, drop blank) and what
 * the decoders share. Transducers: transducer_device.c runs the search's loop on the device (for every
 * input of a packed batch at once); transducer_host.c walks it on the host, for stage taps, teacher
 * forcing and comparisons (one input). */
#include <stdlib.h>
#include <string.h>

#include "decoder.h"

/* Rows of CTC logits per chunk: [rows, V+1] stays under ~64 MiB. */
#define LOGITS_BUDGET (64ull << 20)

vkasr_status dec_push_token(struct asr_output *o, int32_t id, int64_t frame, int32_t dur, struct err *e) {
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

bool dec_aborted(const struct asr_hooks *h) { return h && h->should_abort && h->should_abort(h->ud); }

void dec_progress(const struct asr_hooks *h, int64_t t, int64_t T, double frame_seconds) {
    if (h && h->progress)
        h->progress(h->ud, "decoder", T ? (double)t / (double)T : 1.0, (double)t * frame_seconds);
}

double dec_frame_seconds(const struct model_config *c) {
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

/* The frames of input i of a batch (one input: all of enc). */
static void input_rows(const struct asr_batch *b, int64_t T, int64_t i, int64_t *r0, int64_t *n) {
    *r0 = b && b->n > 1 ? b->off[ASR_FRAMES][i] : 0;
    *n = b && b->n > 1 ? asr_batch_len(b, ASR_FRAMES, i) : T;
}

/* CTC over every row of enc (a packed batch's rows are independent frames: one product for all), then
 * each input's argmaxes collapsed into its own output. */
static vkasr_status decode_ctc(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                               const struct asr_hooks *hooks, const struct asr_batch *batch, struct asr_output *out,
                               struct err *e) {
    const int64_t T = enc->ne[0], V1 = m->ctc_w.ne[0], blank = V1 - 1, n_in = batch ? batch->n : 1;
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
    // per input: collapse repeats, drop blanks; a token's span is its run of frames
    for (int64_t i = 0; st == VKASR_OK && i < n_in; i++) {
        int64_t f0, Ti;
        input_rows(batch, T, i, &f0, &Ti);
        const int32_t *id = ids + f0;
        for (int64_t t = 0; st == VKASR_OK && t < Ti; t++) {
            if (id[t] == blank || (t > 0 && id[t] == id[t - 1]))
                continue;
            int64_t end = t + 1;
            while (end < Ti && id[end] == id[t])
                end++;
            st = dec_push_token(&out[i], id[t], t, (int32_t)(end - t), e);
            if (st == VKASR_OK && hooks && hooks->tokens_added && n_in == 1)
                hooks->tokens_added(hooks->ud);
        }
    }
    free(ids);
    dec_progress(hooks, T, T, dec_frame_seconds(&m->cfg));
    return st;
}

uint64_t asr_decode_scratch(const struct model_config *c, int64_t frames, int64_t inputs) {
    const int64_t T = frames, V1 = c->vocab_size + 1;
    if (T == 0)
        return 0;
    if (c->head == VKASR_HEAD_CTC) {
        int64_t chunk = (int64_t)(LOGITS_BUDGET / (4 * (uint64_t)V1));
        chunk = chunk < 1 ? 1 : chunk > T ? T : chunk;
        // logits [chunk, V+1];  best [T] i32
        return be_scratch_f32(chunk, V1) + be_scratch_f32(T, 1);
    }
    /* either transducer search may run for one input (taps, forcing and VKASR_DECODER=host take the host
     * walk); a batch takes the device loop */
    const uint64_t device = dec_transducer_device_scratch(c, T, inputs);
    if (inputs > 1)
        return device;
    const uint64_t host = dec_transducer_host_scratch(c, T);
    return host > device ? host : device;
}

vkasr_status asr_decode(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_options *opt,
                        const struct asr_hooks *hooks, const struct asr_batch *batch, struct asr_output *out,
                        struct err *e) {
    const int64_t n_in = batch ? batch->n : 1;
    for (int64_t i = 0; i < n_in; i++) {
        int64_t r0, n;
        input_rows(batch, enc->ne[0], i, &r0, &n);
        out[i].frames = n;
    }
    if (enc->ne[0] == 0)
        return VKASR_OK;
    if (m->cfg.head == VKASR_HEAD_CTC)
        return decode_ctc(m, be, enc, hooks, batch, out, e);
    /* Stage taps want each step's logits and teacher forcing replaces the search's choices step by
     * step: both need the host in the loop (one input). */
    if (n_in == 1 && ((opt && (opt->host_decoder || opt->nforced)) || asr_tapped(hooks)))
        return dec_transducer_host(m, be, enc, opt, hooks, out, e);
    return dec_transducer_device(m, be, enc, opt, hooks, batch, out, e);
}
