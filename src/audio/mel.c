/* mel.c — host side of the mel front end (spec §1): symmetric Hann window, Slaney filterbank computed
 * the way librosa computes it, valid frame count, and a complete double-precision reference of the
 * features (for tests and as an oracle; the GPU path lives in src/asr/frontend.c and does not call
 * mel_reference). Nothing here touches the backend. */
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

static vkasr_status check_config(const struct mel_config *c, struct err *e) {
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
    TRY(check_config(c, e));
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

/* In-place iterative radix-2 FFT of length n (a power of two); tw holds cos/sin of -2 pi j / n. */
static void fft_radix2(double *re, double *im, int n, const double *twr, const double *twi) {
    for (int i = 1, j = 0; i < n; i++) { /* bit-reversal permutation */
        int bit = n >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i];
            re[i] = re[j];
            re[j] = t;
            t = im[i];
            im[i] = im[j];
            im[j] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        int half = len / 2, stride = n / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < half; k++) {
                double wr = twr[k * stride], wi = twi[k * stride];
                int a = i + k, b = i + k + half;
                double vr = re[b] * wr - im[b] * wi, vi = re[b] * wi + im[b] * wr;
                re[b] = re[a] - vr;
                im[b] = im[a] - vi;
                re[a] += vr;
                im[a] += vi;
            }
    }
}

/* Log-mel of the L = floor(n / hop) valid frames into feat [L][n_mels] (double), before normalisation. */
static vkasr_status logmel(const struct mel_config *c, const float *x, int64_t n, int64_t L, double *feat,
                           struct err *e) {
    int nfft = c->n_fft, win = c->win_length, M = c->n_mels, nb = nfft / 2 + 1, off = (nfft - win) / 2;
    bool pow2 = (nfft & (nfft - 1)) == 0;
    size_t scratch = (size_t)nfft * 4 + (size_t)nb;
    double *buf = malloc(scratch * sizeof *buf);
    float *fb = malloc((size_t)M * nb * sizeof *fb);
    float *w32 = malloc((size_t)win * sizeof *w32);
    vkasr_status st = VKASR_OK;
    if (!buf || !fb || !w32) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "mel_reference: out of host memory");
        goto done;
    }
    double *re = buf, *im = re + nfft, *twr = im + nfft, *twi = twr + nfft, *pw = twi + nfft;
    st = mel_filterbank(c, fb, e);
    if (st != VKASR_OK)
        goto done;
    mel_window(c, w32);
    for (int j = 0; j < nfft; j++) {
        twr[j] = cos(-2.0 * M_PI * j / nfft);
        twi[j] = sin(-2.0 * M_PI * j / nfft);
    }
    /* The pre-emphasis coefficient is the float32 one (0.97f), as torch applies it to float32 audio. */
    double a = (double)c->preemph;
    for (int64_t t = 0; t < L; t++) {
        /* Frame t: y[hop*t - nfft/2 + m], m = 0..nfft-1, zero outside [0, n) (constant centring pad);
         * the window occupies positions off..off+win-1 (zero-padded to nfft). */
        int64_t start = t * c->hop - nfft / 2;
        for (int m = 0; m < nfft; m++) {
            int64_t s = start + m;
            double y = 0;
            if (m >= off && m < off + win && s >= 0 && s < n)
                y = ((double)x[s] - (s > 0 ? a * (double)x[s - 1] : 0.0)) * (double)w32[m - off];
            re[m] = y;
            im[m] = 0;
        }
        if (pow2) {
            fft_radix2(re, im, nfft, twr, twi);
            for (int k = 0; k < nb; k++)
                pw[k] = re[k] * re[k] + im[k] * im[k];
        } else { /* direct DFT; twiddle index k*m mod nfft keeps it exact */
            for (int k = 0; k < nb; k++) {
                double sr = 0, si = 0;
                for (int m = 0; m < nfft; m++) {
                    int j = (int)(((int64_t)k * m) % nfft);
                    sr += re[m] * twr[j];
                    si += re[m] * twi[j];
                }
                pw[k] = sr * sr + si * si;
            }
        }
        double *f = feat + (size_t)t * M;
        for (int i = 0; i < M; i++) {
            const float *row = fb + (size_t)i * nb;
            double acc = 0;
            for (int k = 0; k < nb; k++)
                acc += (double)row[k] * pw[k];
            f[i] = log(acc + MEL_LOG_GUARD);
        }
    }
done:
    free(buf);
    free(fb);
    free(w32);
    return st;
}

/* Checks arguments, computes L and allocates the double feature buffer (NULL when L == 0). */
static vkasr_status reference_setup(const struct mel_config *c, const float *x, int64_t n, const float *out,
                                    int64_t *L, double **feat, struct err *e) {
    *feat = NULL;
    TRY(check_config(c, e));
    if (n < 0 || (n > 0 && !x))
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel_reference: invalid input (%lld samples)", (long long)n);
    *L = mel_frames(c, n);
    if (*L == 0)
        return VKASR_OK;
    if (!out)
        return err_set(e, VKASR_ERR_INVALID_ARG, "mel_reference: NULL output");
    if ((uint64_t)*L > SIZE_MAX / sizeof(double) / (size_t)c->n_mels)
        return err_set(e, VKASR_ERR_NO_MEMORY, "mel_reference: %lld frames is too many", (long long)*L);
    *feat = malloc((size_t)*L * (size_t)c->n_mels * sizeof **feat);
    if (!*feat)
        return err_set(e, VKASR_ERR_NO_MEMORY, "mel_reference: out of host memory for %lld frames", (long long)*L);
    vkasr_status st = logmel(c, x, n, *L, *feat, e);
    if (st != VKASR_OK) {
        free(*feat);
        *feat = NULL;
    }
    return st;
}

vkasr_status mel_reference_logmel(const struct mel_config *c, const float *x, int64_t n, float *out,
                                  struct err *e) {
    int64_t L = 0;
    double *feat;
    TRY(reference_setup(c, x, n, out, &L, &feat, e));
    for (size_t i = 0; i < (size_t)L * (size_t)c->n_mels; i++)
        out[i] = (float)feat[i];
    free(feat);
    return VKASR_OK;
}

vkasr_status mel_reference(const struct mel_config *c, const float *x, int64_t n, float *out, struct err *e) {
    int64_t L = 0;
    double *feat;
    TRY(reference_setup(c, x, n, out, &L, &feat, e));
    int M = c->n_mels;
    /* Per-bin statistics over the L valid frames, two passes in double: mean, then the unbiased std
     * (L - 1 in the denominator; L == 1 gives std 0 as NeMo does), epsilon added to the std. */
    for (int i = 0; i < M; i++) {
        double sum = 0;
        for (int64_t t = 0; t < L; t++)
            sum += feat[(size_t)t * M + i];
        double mean = sum / (double)L, ss = 0;
        for (int64_t t = 0; t < L; t++) {
            double d = feat[(size_t)t * M + i] - mean;
            ss += d * d;
        }
        double sd = L > 1 ? sqrt(ss / (double)(L - 1)) : 0.0;
        for (int64_t t = 0; t < L; t++)
            out[(size_t)t * M + i] = (float)((feat[(size_t)t * M + i] - mean) / (sd + MEL_NORM_EPS));
    }
    free(feat);
    return VKASR_OK;
}
