/* mel_reference.c — the mel front end in double precision, with its own radix-2 FFT: the oracle of
 * test_mel (pre-emphasis, centred zero-padded STFT, power, mel, log with guard, normalisation). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mel_reference.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

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
    TRY(mel_check_config(c, e));
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
