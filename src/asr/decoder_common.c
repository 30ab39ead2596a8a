/* decoder_common.c — what the greedy decoders share: token output, hooks, frame timing, batch rows. */
#include <stdlib.h>

#include "decoder_common.h"

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

void dec_input_rows(const struct asr_batch *b, int64_t T, int64_t i, int64_t *r0, int64_t *n) {
    *r0 = b && b->n > 1 ? b->off[ASR_FRAMES][i] : 0;
    *n = b && b->n > 1 ? asr_batch_len(b, ASR_FRAMES, i) : T;
}
