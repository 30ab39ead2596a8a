/* mel_reference.h — the mel front end in double precision (tests/mel_reference.c), test_mel's oracle. */
#ifndef VKASR_MEL_REFERENCE_H
#define VKASR_MEL_REFERENCE_H

#include "audio/mel.h"

/* The whole front end in double precision: out [mel_frames(n)][n_mels], normalised features. */
vkasr_status mel_reference(const struct mel_config *c, const float *x, int64_t n, float *out, struct err *e);
/* The same before normalisation: out [mel_frames(n)][n_mels] = ln(mel + 2^-24) (computed in double,
 * stored float32). For tests of the power/mel/log stages and of a tone's mel bin. */
vkasr_status mel_reference_logmel(const struct mel_config *c, const float *x, int64_t n, float *out,
                                  struct err *e);

#endif
