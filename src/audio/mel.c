/* mel.c — host side of the mel front end (spec §1): symmetric Hann window, Slaney filterbank computed
 * the way librosa computes it, valid frame count. The features themselves are computed on the backend
 * (src/asr/frontend.c); their double-precision reference lives with the tests (tests/mel_reference.c). */
#include "audio/mel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define MEL_MAX_NFFT (1 << 16)
#define MEL_MAX_MELS 4096

vkasr_status mel_check_config(const struct mel_config *c, struct err *e) {
    if (!c)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: NULL configuration");
    if (c->sample_rate < 1)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: invalid sample_rate %d", c->sample_rate);
    if (c->n_fft < 2 || c->n_fft > MEL_MAX_NFFT)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: invalid n_fft %d (2..%d)", c->n_fft, MEL_MAX_NFFT);
    if (c->win_length < 1 || c->win_length > c->n_fft)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: invalid win_length %d (1..n_fft=%d)", c->win_length,
                       c->n_fft);
    if (c->hop < 1)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: invalid hop %d", c->hop);
    if (c->n_mels < 1 || c->n_mels > MEL_MAX_MELS)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: invalid n_mels %d (1..%d)", c->n_mels, MEL_MAX_MELS);
    if (!isfinite(c->preemph))
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel: preemph is not finite");
    return VKASR_OK;
}

void mel_window(const struct mel_config *c, float *w) {
    int N = c->win_length;
    if (N == 1) { /* torch.hann_window(1) is [1] */
        w[0] = 1.0f;
        return;
    }
    /* Computed in double, rounded once: w[1] = 6.19933e-05 exactly as the spec quotes. (torch computes
     * its window in float32; NeMo checkpoints store theirs, which callers should prefer.) */
    for (int n = 0; n < N; n++)
        w[n] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * n / (N - 1)));
}

/* librosa's Slaney mel scale (htk=False), with its constants formed exactly as librosa forms them:
 * f_sp = 200/3, min_log_mel = 1000/f_sp (= 14.999999999999998), logstep = ln(6.4)/27. */
static const double F_SP = 200.0 / 3;
static const double MIN_LOG_HZ = 1000.0;

static double hz_to_mel(double f) {
    double min_log_mel = MIN_LOG_HZ / F_SP, logstep = log(6.4) / 27.0;
    if (f >= MIN_LOG_HZ)
        return min_log_mel + log(f / MIN_LOG_HZ) / logstep;
    return f / F_SP;
}

static double mel_to_hz(double m) {
    double min_log_mel = MIN_LOG_HZ / F_SP, logstep = log(6.4) / 27.0;
    if (m >= min_log_mel)
        return MIN_LOG_HZ * exp(logstep * (m - min_log_mel));
    return F_SP * m;
}

vkasr_status mel_filterbank(const struct mel_config *c, float *fb, struct err *e) {
    TRY(mel_check_config(c, e));
    if (!fb)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel_filterbank: NULL output");
    int M = c->n_mels, nb = c->n_fft / 2 + 1;
    double f_max = c->sample_rate / 2.0;
    double *edge = malloc((size_t)(M + 2) * sizeof *edge);
    if (!edge)
        return err_set(e, VKASR_ERR_NO_MEMORY, "mel_filterbank: out of host memory");
    /* Edges: numpy.linspace(mel(0), mel(fmax), M + 2) = j * step + start, mapped back to Hz. The last
     * edge is forced to exactly fmax: the mel round trip lands within an ulp of it (7999.999999999998
     * with glibc), and forcing makes bin n_fft/2 get exactly zero weight on every platform. */
    double m0 = hz_to_mel(0.0), m1 = hz_to_mel(f_max), step = (m1 - m0) / (M + 1);
    for (int j = 0; j < M + 2; j++)
        edge[j] = mel_to_hz(j * step + m0);
    edge[M + 1] = f_max;
    for (int i = 0; i < M; i++) {
        double d0 = edge[i + 1] - edge[i], d1 = edge[i + 2] - edge[i + 1];
        double enorm = 2.0 / (edge[i + 2] - edge[i]);
        for (int k = 0; k < nb; k++) {
            /* FFT bin frequencies: numpy.fft.rfftfreq(n_fft, 1/sr) = k * sr / n_fft. */
            double f = (double)k * c->sample_rate / c->n_fft;
            double lower = (f - edge[i]) / d0, upper = (edge[i + 2] - f) / d1;
            double tri = lower < upper ? lower : upper; /* max(0, min(lower, upper)) */
            if (!(tri > 0))
                tri = 0;
            /* librosa stores the triangle into a float32 array, then multiplies it by the float64
             * norm and stores float32 again: two roundings, reproduced here. */
            float t32 = (float)tri;
            fb[(size_t)i * nb + k] = (float)((double)t32 * enorm);
        }
    }
    free(edge);
    return VKASR_OK;
}

int64_t mel_frames(const struct mel_config *c, int64_t n) {
    if (!c || c->hop < 1 || n <= 0)
        return 0;
    return n / c->hop;
}
