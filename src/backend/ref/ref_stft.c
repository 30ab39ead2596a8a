/* ref_stft.c — reference power spectrum of the mel front end: pre-emphasis, centred zero-padded
 * frames, window, FFT in double precision (radix-2 for powers of two, a direct DFT otherwise). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void ref_fft_bit_reverse(double *re, double *im, int n) {
    for (int i = 1, j = 0; i < n; i++) { /* bit reversal */
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
}

static void fft_pow2(double *re, double *im, int n) {
    ref_fft_bit_reverse(re, im, n);
    for (int len = 2; len <= n; len <<= 1) {
        double ang = -2 * M_PI / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < len / 2; k++) {
                double wr = cos(ang * k), wi = sin(ang * k);
                double ur = re[i + k], ui = im[i + k];
                double vr = re[i + k + len / 2] * wr - im[i + k + len / 2] * wi;
                double vi = re[i + k + len / 2] * wi + im[i + k + len / 2] * wr;
                re[i + k] = ur + vr;
                im[i + k] = ui + vi;
                re[i + k + len / 2] = ur - vr;
                im[i + k + len / 2] = ui - vi;
            }
    }
}

vkasr_status ref_stft_power(struct backend *b, const struct op_stft_power *a) {
    const int64_t F = a->y.ne[0];
    int nfft = a->n_fft, win = (int)a->window.ne[0], off = (nfft - win) / 2, nb = nfft / 2 + 1;
    const float *w = ref_f32(&a->window);
    float *y = ref_f32(&a->y);
    double *re = malloc(2 * (size_t)nfft * sizeof *re);
    if (!re)
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    double *im = re + nfft;
    bool pow2 = (nfft & (nfft - 1)) == 0;
    for (int64_t f = 0; f < F; f++) {
        int64_t x0, N, t; /* the frame's signal x[x0, x0 + N) and its index t in it */
        op_stft_frame(a, f, &x0, &N, &t);
        const float *x = ref_f32(&a->x) + x0;
        const int64_t start = t * a->hop - nfft / 2;
        for (int m = 0; m < nfft; m++) {
            int64_t n = start + m;
            double e = 0;
            if (n >= 0 && n < N)
                e = (double)x[n] - (n > 0 ? (double)a->preemph * x[n - 1] : 0.0);
            double wv = (m >= off && m < off + win) ? w[m - off] : 0.0;
            re[m] = e * wv;
            im[m] = 0;
        }
        if (pow2) {
            fft_pow2(re, im, nfft);
            for (int k = 0; k < nb; k++)
                y[f * nb + k] = (float)(re[k] * re[k] + im[k] * im[k]);
        } else {
            for (int k = 0; k < nb; k++) {
                double sr = 0, si = 0;
                for (int m = 0; m < nfft; m++) {
                    double ang = -2 * M_PI * (double)k * m / nfft;
                    sr += re[m] * cos(ang);
                    si += re[m] * sin(ang);
                }
                y[f * nb + k] = (float)(sr * sr + si * si);
            }
        }
    }
    free(re);
    return VKASR_OK;
}
