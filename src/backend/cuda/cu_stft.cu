/* cu_stft.cu — the front end's power spectrum on CUDA: a block per frame (frames grid-stride) loads the
 * pre-emphasised, windowed, zero-padded frame in bit-reversed order into shared memory and runs an
 * in-place radix-2 complex FFT (twiddles from sincospif, accurate to an ulp), then writes re^2 + im^2.
 * Powers of two up to 4096 (every Parakeet model uses 512); other even sizes, which ops.c accepts,
 * are reported as unsupported, as on Vulkan. */
#include "cu_internal.h"

#define STFT_THREADS 256
#define STFT_MAX 4096

static __global__ void stft_kernel(const float *x0, const float *window, float *y, int64_t N0, int64_t f0, int64_t F,
                                   int64_t hop, int nfft, int lg, int win, int off, float preemph,
                                   const int64_t *seg, int64_t nseg) {
    __shared__ float re[STFT_MAX], im[STFT_MAX];
    int nb = nfft / 2 + 1;
    for (int64_t f = blockIdx.x; f < F; f += gridDim.x) {
        /* the frame's signal x [N] and its index t in it (a packed batch: its segment's) */
        const float *x = x0;
        int64_t N = N0, t = f0 + f;
        if (nseg > 0) {
            int64_t lo = 0, hi = nseg - 1;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo + 1) / 2;
                if (seg[4 * mid] <= f)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            x = x0 + seg[4 * lo + 1];
            N = seg[4 * lo + 2];
            t = seg[4 * lo + 3] + f - seg[4 * lo];
        }
        int64_t start = t * hop - nfft / 2;
        for (int m = threadIdx.x; m < nfft; m += blockDim.x) {
            int64_t n = start + m;
            float e = 0.0f;
            if (n >= 0 && n < N)
                e = n > 0 ? x[n] - preemph * x[n - 1] : x[n];
            float wv = m >= off && m < off + win ? window[m - off] : 0.0f;
            int rev = (int)(__brev((unsigned)m) >> (32 - lg));
            re[rev] = e * wv;
            im[rev] = 0.0f;
        }
        __syncthreads();
        for (int len = 2; len <= nfft; len <<= 1) {
            int half = len / 2;
            for (int t = threadIdx.x; t < nfft / 2; t += blockDim.x) {
                int grp = t / half, k = t - grp * half, i = grp * len + k, j = i + half;
                float s, c;
                sincospif(-2.0f * (float)k / (float)len, &s, &c); /* exact argument: len is a power of two */
                float vr = re[j] * c - im[j] * s, vi = re[j] * s + im[j] * c;
                float ur = re[i], ui = im[i];
                re[i] = ur + vr;
                im[i] = ui + vi;
                re[j] = ur - vr;
                im[j] = ui - vi;
            }
            __syncthreads();
        }
        for (int k = threadIdx.x; k < nb; k += blockDim.x)
            y[f * nb + k] = re[k] * re[k] + im[k] * im[k];
        __syncthreads(); /* the next frame overwrites re/im */
    }
}

vkasr_status cu_op_stft_power(struct cu_backend *b, const struct op_stft_power *a) {
    int nfft = a->n_fft;
    if (nfft & (nfft - 1))
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "op stft_power: n_fft %d is not a power of two (the CUDA FFT supports powers of two up to %d)",
                       nfft, STFT_MAX);
    int64_t F = a->y.ne[0];
    if (F == 0)
        return VKASR_OK;
    int lg = 0;
    while ((1 << lg) < nfft)
        lg++;
    int win = (int)a->window.ne[0];
    stft_kernel<<<cu_grid(b, (uint64_t)F, 1), STFT_THREADS, 0, b->stream>>>(
        cu_ptr<float>(a->x), cu_ptr<float>(a->window), cu_ptr<float>(a->y), a->x.ne[0], a->f0, F, a->hop, nfft, lg, win,
        (nfft - win) / 2, a->preemph, a->seg.addr ? cu_ptr<int64_t>(a->seg) : nullptr, a->seg.addr ? a->seg.ne[0] : 0);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
