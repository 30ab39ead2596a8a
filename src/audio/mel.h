/* mel.h — the Parakeet mel front end's constants and host-side pieces (spec §1): symmetric Hann
 * window, Slaney mel filterbank computed like librosa, frame counts. The backend path
 * (src/asr/frontend.c) uses the window and filterbank from here. */
#ifndef VKASR_MEL_H
#define VKASR_MEL_H

#include <stdint.h>

#include "common/err.h"

struct mel_config {
    int sample_rate;         /* 16000 */
    int n_fft;               /* 512   */
    int win_length;          /* 400   */
    int hop;                 /* 160   */
    int n_mels;              /* 80 or 128 */
    float preemph;           /* 0.97  */
};

#define MEL_LOG_GUARD 5.9604644775390625e-08 /* 2^-24 */
#define MEL_NORM_EPS 1e-5

/* Symmetric Hann window of win_length taps: 0.5 - 0.5 cos(2 pi n / (win_length - 1)), as float32. */
void mel_window(const struct mel_config *c, float *w);
/* Slaney-scale, Slaney-normalised triangular filters [n_mels][n_fft/2+1] (fmin 0, fmax sr/2),
 * computed in double and rounded to float32 where librosa rounds. */
vkasr_status mel_filterbank(const struct mel_config *c, float *fb, struct err *e);
/* Valid feature frames for n samples: floor(n / hop). */
int64_t mel_frames(const struct mel_config *c, int64_t n);
/* Checks a configuration's ranges (sizes, rates, hop); the error names the field. */
vkasr_status mel_check_config(const struct mel_config *c, struct err *e);

#endif
