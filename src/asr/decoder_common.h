/* decoder_common.h — what the greedy decoders share (decoder_common.c): token output, the abort and
 * progress hooks, frame timing, a batch input's rows. Internal to src/asr; calls no decoder. */
#ifndef VKASR_DECODER_COMMON_H
#define VKASR_DECODER_COMMON_H

#include "asr.h"

/* Appends a token to the output. */
vkasr_status dec_push_token(struct asr_output *o, int32_t id, int64_t frame, int32_t dur, struct err *e);
/* The abort hook's answer (false without one). */
bool dec_aborted(const struct asr_hooks *h);
/* Reports decoder progress: t of T frames. */
void dec_progress(const struct asr_hooks *h, int64_t t, int64_t T, double frame_seconds);
/* Seconds per encoder frame. */
double dec_frame_seconds(const struct model_config *c);
/* The frames of input i of a batch: first row *r0, *n rows (no batch or one input: all T). */
void dec_input_rows(const struct asr_batch *b, int64_t T, int64_t i, int64_t *r0, int64_t *n);

#endif
