/* cpu_stft.c — the CPU backend's power spectrum (op_stft_power): the reference's frames (pre-emphasis,
 * centring, window) and radix-2 FFT in double, with the twiddle factors computed once per call instead
 * of per butterfly, frames in parallel. An n_fft that is not a power of two takes the reference's
 * direct DFT on each range of frames. */
#include <math.h>
#include <stdlib.h>

#include "cpu_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

struct stft {
    const struct op_stft_power *a;
    const double *cs, *sn; /* [n_fft / 2]: cos and sin of -2 pi m / n_fft */
    struct backend *b;
    vkasr_status st;
};

static void fft(double *re, double *im, int n, const double *cs, const double *sn) {
    ref_fft_bit_reverse(re, im, n);
    for (int len = 2; len <= n; len <<= 1) {
        const int stride = n / len, half = len / 2;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < half; k++) {
                const double wr = cs[k * stride], wi = sn[k * stride];
                const double ur = re[i + k], ui = im[i + k];
                const double vr = re[i + k + half] * wr - im[i + k + half] * wi;
                const double vi = re[i + k + half] * wi + im[i + k + half] * wr;
                re[i + k] = ur + vr;
                im[i + k] = ui + vi;
                re[i + k + half] = ur - vr;
                im[i + k + half] = ui - vi;
            }
    }
}

static void stft_frames(void *ctx, int64_t f0, int64_t f1) {
    struct stft *S = ctx;
    const struct op_stft_power *a = S->a;
    const int nfft = a->n_fft, win = (int)a->window.ne[0], off = (nfft - win) / 2, nb = nfft / 2 + 1;
    const float *w = ref_f32(&a->window);
    float *y = ref_f32(&a->y);
    double *re = malloc(2 * (size_t)nfft * sizeof *re);
    if (!re) {
        S->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    double *im = re + nfft;
    for (int64_t f = f0; f < f1; f++) {
        int64_t x0, N, t; /* the frame's signal x[x0, x0 + N) and its index t in it */
        op_stft_frame(a, f, &x0, &N, &t);
        const float *x = ref_f32(&a->x) + x0;
        const int64_t start = t * a->hop - nfft / 2;
        for (int m = 0; m < nfft; m++) {
            const int64_t n = start + m;
            double e = 0;
            if (n >= 0 && n < N)
                e = (double)x[n] - (n > 0 ? (double)a->preemph * x[n - 1] : 0.0);
            const double wv = (m >= off && m < off + win) ? w[m - off] : 0.0;
            re[m] = e * wv;
            im[m] = 0;
        }
        fft(re, im, nfft, S->cs, S->sn);
        for (int k = 0; k < nb; k++)
            y[f * nb + k] = (float)(re[k] * re[k] + im[k] * im[k]);
    }
    free(re);
}

/* A range of frames through the reference (n_fft not a power of two). */
static void stft_ref_frames(void *ctx, int64_t f0, int64_t f1) {
    struct stft *S = ctx;
    struct op_stft_power o = *S->a;
    o.y = be_tensor_rows(&o.y, f0, f1 - f0);
    o.f0 += f0;
    struct backend rb = {.vt = S->b->vt, .dev = S->b->dev};
    if (ref_stft_power(&rb, &o) != VKASR_OK)
        S->st = VKASR_ERR_NO_MEMORY; /* its only failure */
}

vkasr_status cpu_stft_power(struct backend *b, const struct op_stft_power *a) {
    const int nfft = a->n_fft;
    struct stft S = {.a = a, .b = b};
    if ((nfft & (nfft - 1)) != 0 && a->seg.addr) { /* a packed batch through the reference, whole */
        struct backend rb = {.vt = b->vt, .dev = b->dev};
        S.st = ref_stft_power(&rb, a);
    } else if ((nfft & (nfft - 1)) != 0) {
        cpu_pool_run(cpu_pool_of(b), a->y.ne[0], 4, stft_ref_frames, &S);
    } else {
        double *cs = malloc((size_t)(nfft / 2 + 1) * 2 * sizeof *cs);
        if (!cs)
            return err_set(&b->err, VKASR_ERR_NO_MEMORY, "stft_power: out of host memory for %d twiddles", nfft);
        double *sn = cs + nfft / 2 + 1;
        for (int m = 0; m <= nfft / 2; m++) {
            cs[m] = cos(-2 * M_PI * m / nfft);
            sn[m] = sin(-2 * M_PI * m / nfft);
        }
        S.cs = cs;
        S.sn = sn;
        cpu_pool_run(cpu_pool_of(b), a->y.ne[0], 16, stft_frames, &S);
        free(cs);
    }
    if (S.st != VKASR_OK)
        return err_set(&b->err, S.st, "stft_power: out of host memory for a frame of %d samples", nfft);
    return VKASR_OK;
}
