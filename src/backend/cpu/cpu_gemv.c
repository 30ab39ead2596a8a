/* cpu_gemv.c — the CPU backend's matrix-vector products (the decoder's LSTM, joint and projections):
 * f32 and f16 weights dotted where they lie with AVX2 + FMA (f16 widened with F16C: half the bytes,
 * which the decoder's time is), OpenBLAS's sgemv and sdot where the CPU lacks them and for
 * block-quantized rows (dequantized a row at a time). A row's sum has one order, set by K alone,
 * whichever rows are computed with it. */
#include <string.h>

#include <cblas.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_GEMV_X86 1
#endif

#include "common/qblock.h"
#include "cpu_internal.h"

#ifdef CPU_GEMV_X86
/* Horizontal sum of the four partial sums, in a fixed order. */
__attribute__((target("avx2"))) static float hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* As dot_f16_avx2 below, for f32 rows (about a third faster than sgemv on the decoder's LSTM). */
CPU_KERNEL
__attribute__((target("avx2,fma"))) static float dot_f32_avx2(const float *w, const float *x, int64_t K) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 8), _mm256_loadu_ps(x + k + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 16), _mm256_loadu_ps(x + k + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 24), _mm256_loadu_ps(x + k + 24), a3);
    }
    for (; k + 8 <= K; k += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a0);
    float r = hsum4(a0, a1, a2, a3);
    for (; k < K; k++)
        r += w[k] * x[k];
    return r;
}

/* Four 8-wide partial sums over k in steps of 32, then 8, added in a fixed order, then the tail. */
__attribute__((target("avx2,fma,f16c"))) static float dot_f16_avx2(const uint16_t *w, const float *x, int64_t K) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + k))), _mm256_loadu_ps(x + k), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + k + 8))),
                             _mm256_loadu_ps(x + k + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + k + 16))),
                             _mm256_loadu_ps(x + k + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + k + 24))),
                             _mm256_loadu_ps(x + k + 24), a3);
    }
    for (; k + 8 <= K; k += 8)
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + k))), _mm256_loadu_ps(x + k), a0);
    float r = hsum4(a0, a1, a2, a3);
    for (; k < K; k++)
        r += cpu_h2f(w[k]) * x[k];
    return r;
}
#endif

/* Row `row` of a block-quantized w [*, n], dequantized. */
static void dequant_row(const be_tensor *w, int64_t row, int64_t n, float *out) {
    const uint64_t rb = (uint64_t)(n / be_dtype_block(w->type)) * (uint64_t)be_dtype_block_bytes(w->type);
    qblock_dequant_row(be_dtype_ggml(w->type), (const uint8_t *)(uintptr_t)w->addr + (uint64_t)row * rb, out, n);
}

static float dot_f16_c(const uint16_t *w, const float *x, int64_t K) {
    float r = 0.0f;
    for (int64_t k = 0; k < K; k++)
        r += cpu_h2f(w[k]) * x[k];
    return r;
}

void cpu_gemv(const be_tensor *w, int64_t n0, int64_t n, int64_t K, const float *x, float *y, bool acc, float *tmp) {
    if (n <= 0)
        return;
    if (w->type == BE_F32) {
#ifdef CPU_GEMV_X86
        if (cpu_have_f16c()) { /* the AVX2 + FMA kernels' CPUs */
            const float *f = ref_f32(w) + n0 * K;
            for (int64_t i = 0; i < n; i++)
                y[i] = (acc ? y[i] : 0.0f) + dot_f32_avx2(f + i * K, x, K);
            return;
        }
#endif
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)K, 1.0f, ref_f32(w) + n0 * K, (blasint)K, x, 1,
                    acc ? 1.0f : 0.0f, y, 1);
        return;
    }
    if (w->type == BE_F16) {
        const uint16_t *h = ref_u16(w) + n0 * K;
#ifdef CPU_GEMV_X86
        if (cpu_have_f16c()) {
            for (int64_t i = 0; i < n; i++)
                y[i] = (acc ? y[i] : 0.0f) + dot_f16_avx2(h + i * K, x, K);
            return;
        }
#endif
        for (int64_t i = 0; i < n; i++)
            y[i] = (acc ? y[i] : 0.0f) + dot_f16_c(h + i * K, x, K);
        return;
    }
    for (int64_t i = 0; i < n; i++) { /* blocks: one row dequantized, then sgemv's dot */
        dequant_row(w, n0 + i, K, tmp);
        y[i] = (acc ? y[i] : 0.0f) + cblas_sdot((blasint)K, tmp, 1, x, 1);
    }
}
