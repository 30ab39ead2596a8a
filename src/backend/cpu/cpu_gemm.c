/* cpu_gemm.c — the CPU backend's matrix-product kernel, C = A B^T (both operands rows along K: x and a
 * PyTorch weight, queries and keys): B packed k-major in panels of 16 rows by KC columns (f32 and f16
 * rows transposed 8 x 8 in registers, f16 widened there with F16C), MR rows of A against a panel (with
 * AVX-512: two panels) at a time. Every element is one multiply-add chain over k = 0 .. K-1 in order,
 * whatever M, N, the row's place in the call, the panel cut or the kernel (AVX-512 and AVX2 both fuse
 * each multiply-add): a row's result never depends on the other rows, which the ops' contract asks
 * (halo tiles, packed batches).
 * OpenBLAS's sgemm does not keep that, so the products use this kernel. Plain C where the CPU lacks
 * AVX2 + FMA (multiply, then add). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define CPU_GEMM_X86 1
#endif

#include "cpu_internal.h"

#define NR CPU_GEMM_NR /* B rows per panel (the kernel's columns)                                    */
#define KC CPU_GEMM_KC /* k per block: a panel of B is NR x KC floats (16 KiB, first-level cache)      */

/* ---- what this CPU runs ------------------------------------------------------------------------------ */

enum { ISA_C = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

static atomic_int isa_state = -1; /* -1: not asked yet; every thread that asks finds the same answer */

static int isa(void) {
    int v = atomic_load_explicit(&isa_state, memory_order_relaxed);
    if (v < 0) {
        v = ISA_C;
#ifdef CPU_GEMM_X86
        __builtin_cpu_init();
        unsigned a, b, c, d; /* F16C from CPUID leaf 1 (clang's __builtin_cpu_supports does not know it) */
        const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
            v = __builtin_cpu_supports("avx512f") ? ISA_AVX512 : ISA_AVX2;
        const char *cap = getenv("VKASR_CPU_ISA"); /* "avx2" or "c": a lower kernel, for comparisons */
        if (cap && strcmp(cap, "avx2") == 0 && v > ISA_AVX2)
            v = ISA_AVX2;
        else if (cap && strcmp(cap, "c") == 0)
            v = ISA_C;
#endif
        atomic_store_explicit(&isa_state, v, memory_order_relaxed);
    }
    return v;
}

const char *cpu_gemm_kernel(void) {
    static const char *const names[] = {"plain C", "AVX2+FMA", "AVX-512"};
    return names[isa()];
}

bool cpu_have_f16c(void) { return isa() >= ISA_AVX2; }

/* ---- kernels: C[R, NR] (+)= A[R, k0 .. k0+kc) . panel ----------------------------------------------- */

/* Plain C. `first`: the chain starts at 0; else it goes on from C's values. */
static void kern_c(int64_t rows, int64_t kc, const float *a, int64_t lda, const float *p, float *c, int64_t ldc,
                   int64_t ncols, bool first) {
    for (int64_t r = 0; r < rows; r++) {
        float acc[NR];
        for (int j = 0; j < NR; j++)
            acc[j] = first || j >= ncols ? 0.0f : c[r * ldc + j];
        const float *ar = a + r * lda;
        for (int64_t k = 0; k < kc; k++) {
            const float av = ar[k];
            for (int j = 0; j < NR; j++) {
                const float prod = av * p[k * NR + j];
                acc[j] = acc[j] + prod;
            }
        }
        for (int64_t j = 0; j < ncols; j++)
            c[r * ldc + j] = acc[j];
    }
}

#ifdef CPU_GEMM_X86
/* R rows (R <= 6), two 8-wide halves of the panel per row: 2R accumulators. */
__attribute__((target("avx2,fma"), always_inline)) static inline void k256(const int R, int64_t kc, const float *a,
                                                                           int64_t lda, const float *p, float *c,
                                                                           int64_t ldc, int64_t ncols, bool first) {
    __m256 c0[6], c1[6];
    float t[NR];
    _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) {
        if (first) {
            c0[r] = c1[r] = _mm256_setzero_ps();
        } else if (ncols == NR) {
            c0[r] = _mm256_loadu_ps(c + r * ldc);
            c1[r] = _mm256_loadu_ps(c + r * ldc + 8);
        } else {
            for (int j = 0; j < NR; j++)
                t[j] = j < ncols ? c[r * ldc + j] : 0.0f;
            c0[r] = _mm256_loadu_ps(t);
            c1[r] = _mm256_loadu_ps(t + 8);
        }
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_load_ps(p + k * NR), b1 = _mm256_load_ps(p + k * NR + 8);
        _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
            c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
        }
    }
    _Pragma("GCC unroll 12") for (int r = 0; r < R; r++) {
        if (ncols == NR) {
            _mm256_storeu_ps(c + r * ldc, c0[r]);
            _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
        } else {
            _mm256_storeu_ps(t, c0[r]);
            _mm256_storeu_ps(t + 8, c1[r]);
            memcpy(c + r * ldc, t, (size_t)ncols * sizeof *c);
        }
    }
}

CPU_KERNEL
__attribute__((target("avx2,fma"))) static void kern_avx2_6(int64_t kc, const float *a, int64_t lda, const float *p,
                                                            float *c, int64_t ldc, int64_t ncols, bool first) {
    k256(6, kc, a, lda, p, c, ldc, ncols, first);
}
CPU_KERNEL
__attribute__((target("avx2,fma"))) static void kern_avx2_1(int64_t kc, const float *a, int64_t lda, const float *p,
                                                            float *c, int64_t ldc, int64_t ncols, bool first) {
    k256(1, kc, a, lda, p, c, ldc, ncols, first);
}

/* R rows (R <= 12), the panel's 16 columns in one register per row. */
__attribute__((target("avx512f"), always_inline)) static inline void k512(const int R, int64_t kc, const float *a,
                                                                          int64_t lda, const float *p, float *c,
                                                                          int64_t ldc, int64_t ncols, bool first) {
    const __mmask16 m = (__mmask16)((1u << ncols) - 1u);
    __m512 acc[12];
    _Pragma("GCC unroll 12") for (int r = 0; r < R; r++)
        acc[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, c + r * ldc);
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b = _mm512_load_ps(p + k * NR);
        _Pragma("GCC unroll 12") for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + k]), b, acc[r]);
    }
    _Pragma("GCC unroll 12") for (int r = 0; r < R; r++)
        _mm512_mask_storeu_ps(c + r * ldc, m, acc[r]);
}

CPU_KERNEL
__attribute__((target("avx512f"))) static void kern_avx512_12(int64_t kc, const float *a, int64_t lda, const float *p,
                                                              float *c, int64_t ldc, int64_t ncols, bool first) {
    k512(12, kc, a, lda, p, c, ldc, ncols, first);
}
CPU_KERNEL
__attribute__((target("avx512f"))) static void kern_avx512_4(int64_t kc, const float *a, int64_t lda, const float *p,
                                                             float *c, int64_t ldc, int64_t ncols, bool first) {
    k512(4, kc, a, lda, p, c, ldc, ncols, first);
}
CPU_KERNEL
__attribute__((target("avx512f"))) static void kern_avx512_1(int64_t kc, const float *a, int64_t lda, const float *p,
                                                             float *c, int64_t ldc, int64_t ncols, bool first) {
    k512(1, kc, a, lda, p, c, ldc, ncols, first);
}

/* R rows (R <= 8) against two panels side by side (32 columns, the first panel full): 2R accumulators,
 * two panel loads and R broadcasts for 2R multiply-adds (10 loads for 16), where the one-panel kernel
 * needs 13 for 12; each element's chain is the same. 8 rows: a step's 512-row chunks have no rest. */
__attribute__((target("avx512f"), always_inline)) static inline void k512x2(const int R, int64_t kc, const float *a,
                                                                            int64_t lda, const float *p0,
                                                                            const float *p1, float *c, int64_t ldc,
                                                                            int64_t ncols1, bool first) {
    const __mmask16 m1 = (__mmask16)((1u << ncols1) - 1u);
    __m512 c0[8], c1[8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
        c0[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * ldc);
        c1[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, c + r * ldc + NR);
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(p0 + k * NR), b1 = _mm512_load_ps(p1 + k * NR);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            const __m512 av = _mm512_set1_ps(a[r * lda + k]);
            c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
        _mm512_storeu_ps(c + r * ldc, c0[r]);
        _mm512_mask_storeu_ps(c + r * ldc + NR, m1, c1[r]);
    }
}

CPU_KERNEL
__attribute__((target("avx512f"))) static void kern_avx512_8x2(int64_t kc, const float *a, int64_t lda,
                                                               const float *p0, const float *p1, float *c,
                                                               int64_t ldc, int64_t ncols1, bool first) {
    k512x2(8, kc, a, lda, p0, p1, c, ldc, ncols1, first);
}
CPU_KERNEL
__attribute__((target("avx512f"))) static void kern_avx512_4x2(int64_t kc, const float *a, int64_t lda,
                                                               const float *p0, const float *p1, float *c,
                                                               int64_t ldc, int64_t ncols1, bool first) {
    k512x2(4, kc, a, lda, p0, p1, c, ldc, ncols1, first);
}
CPU_KERNEL
__attribute__((target("avx512f"))) static void kern_avx512_1x2(int64_t kc, const float *a, int64_t lda,
                                                               const float *p0, const float *p1, float *c,
                                                               int64_t ldc, int64_t ncols1, bool first) {
    k512x2(1, kc, a, lda, p0, p1, c, ldc, ncols1, first);
}

/* ---- packing: 8 rows x 8 columns transposed in registers --------------------------------------------- */

__attribute__((target("avx2"), always_inline)) static inline void tr8_store(__m256 r0, __m256 r1, __m256 r2, __m256 r3,
                                                                           __m256 r4, __m256 r5, __m256 r6, __m256 r7,
                                                                           float *dst) {
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_store_ps(dst + 0 * NR, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_store_ps(dst + 1 * NR, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_store_ps(dst + 2 * NR, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_store_ps(dst + 3 * NR, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_store_ps(dst + 4 * NR, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_store_ps(dst + 5 * NR, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_store_ps(dst + 6 * NR, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_store_ps(dst + 7 * NR, _mm256_permute2f128_ps(s3, s7, 0x31));
}

/* Rows r .. r+7 (all present), k from 0 in steps of 8 while 8 remain; returns the k reached. */
__attribute__((target("avx2"))) static int64_t pack8_f32(const float *src, int64_t ld, int64_t kc, float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8)
        tr8_store(_mm256_loadu_ps(src + k), _mm256_loadu_ps(src + ld + k), _mm256_loadu_ps(src + 2 * ld + k),
                  _mm256_loadu_ps(src + 3 * ld + k), _mm256_loadu_ps(src + 4 * ld + k),
                  _mm256_loadu_ps(src + 5 * ld + k), _mm256_loadu_ps(src + 6 * ld + k),
                  _mm256_loadu_ps(src + 7 * ld + k), dst + k * NR);
    return k;
}

#define H8(q) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q)))
__attribute__((target("avx2,f16c"))) static int64_t pack8_f16(const uint16_t *src, int64_t ld, int64_t kc,
                                                              float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8)
        tr8_store(H8(src + k), H8(src + ld + k), H8(src + 2 * ld + k), H8(src + 3 * ld + k), H8(src + 4 * ld + k),
                  H8(src + 5 * ld + k), H8(src + 6 * ld + k), H8(src + 7 * ld + k), dst + k * NR);
    return k;
}
#undef H8
#endif

/* IEEE binary16 bits to float, exactly (subnormals, infinities, NaN), without a branch per value. */
float cpu_h2f(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } o;
    const uint32_t em = h & 0x7fffu;
    o.u = em << 13;
    o.f *= 0x1p112f; /* rebias the exponent; scales a subnormal half exactly too */
    if (em >= 0x7c00u)
        o.u = 0x7f800000u | ((em & 0x3ffu) << 13);
    o.u |= (uint32_t)(h & 0x8000u) << 16;
    return o.f;
}

void cpu_pack_f32(const void *ctx, int64_t j0, int64_t nr, int64_t k0, int64_t kc, float *panel) {
    const struct cpu_mat *m = ctx;
    const float *src = m->p + j0 * m->ld + k0;
    int64_t r0 = 0;
#ifdef CPU_GEMM_X86
    if (isa() >= ISA_AVX2)
        for (; r0 + 8 <= nr; r0 += 8) { /* whole groups of 8 rows; their tail columns below */
            const int64_t k = pack8_f32(src + r0 * m->ld, m->ld, kc, panel + r0);
            for (int64_t r = r0; r < r0 + 8; r++)
                for (int64_t kk = k; kk < kc; kk++)
                    panel[kk * NR + r] = src[r * m->ld + kk];
        }
#endif
    for (int64_t r = r0; r < NR; r++)
        for (int64_t k = 0; k < kc; k++)
            panel[k * NR + r] = r < nr ? src[r * m->ld + k] : 0.0f;
}

void cpu_pack_f16(const void *ctx, int64_t j0, int64_t nr, int64_t k0, int64_t kc, float *panel) {
    const struct cpu_mat16 *m = ctx;
    const uint16_t *src = m->p + j0 * m->ld + k0;
    int64_t r0 = 0;
#ifdef CPU_GEMM_X86
    if (isa() >= ISA_AVX2)
        for (; r0 + 8 <= nr; r0 += 8) {
            const int64_t k = pack8_f16(src + r0 * m->ld, m->ld, kc, panel + r0);
            for (int64_t r = r0; r < r0 + 8; r++)
                for (int64_t kk = k; kk < kc; kk++)
                    panel[kk * NR + r] = cpu_h2f(src[r * m->ld + kk]);
        }
#endif
    for (int64_t r = r0; r < NR; r++)
        for (int64_t k = 0; k < kc; k++)
            panel[k * NR + r] = r < nr ? cpu_h2f(src[r * m->ld + k]) : 0.0f;
}

/* ---- the product ------------------------------------------------------------------------------------ */

size_t cpu_gemm_pack_floats(int64_t N) { return (size_t)((N + NR - 1) / NR * NR) * KC; }

void cpu_gemm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, cpu_pack_fn pack_b, const void *bctx,
                 float *C, int64_t ldc, float *pack) {
    const int level = isa();
    if (K == 0) { /* empty sums */
        for (int64_t i = 0; i < M; i++)
            memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        return;
    }
    const int64_t panels = (N + NR - 1) / NR;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        const bool first = k0 == 0;
        /* a panel of this k block (B rows j0 .. j0+NR, columns k0 .. k0+kc, k-major; missing rows 0),
         * then every row of A against it while it stays in the first-level cache: A's M x kc block
         * stays in the second-level one over the panels */
        for (int64_t jp = 0; jp < panels; jp++) {
            const int64_t j0 = jp * NR, nc = N - j0 < NR ? N - j0 : NR;
            pack_b(bctx, j0, nc, k0, kc, pack);
            const float *pk = pack;
            const float *a = A + k0;
            float *c = C + j0;
            int64_t i = 0;
#ifdef CPU_GEMM_X86
            if (level == ISA_AVX512 && jp + 1 < panels) { /* this panel and the next, side by side */
                const int64_t nc1 = N - j0 - NR < NR ? N - j0 - NR : NR;
                float *pk1 = pack + NR * KC; /* the pack holds a panel per NR columns of N */
                pack_b(bctx, j0 + NR, nc1, k0, kc, pk1);
                for (; i + 8 <= M; i += 8)
                    kern_avx512_8x2(kc, a + i * lda, lda, pk, pk1, c + i * ldc, ldc, nc1, first);
                for (; i + 4 <= M; i += 4)
                    kern_avx512_4x2(kc, a + i * lda, lda, pk, pk1, c + i * ldc, ldc, nc1, first);
                for (; i < M; i++)
                    kern_avx512_1x2(kc, a + i * lda, lda, pk, pk1, c + i * ldc, ldc, nc1, first);
                jp++;
                continue;
            }
            if (level == ISA_AVX512) {
                for (; i + 12 <= M; i += 12)
                    kern_avx512_12(kc, a + i * lda, lda, pk, c + i * ldc, ldc, nc, first);
                for (; i + 4 <= M; i += 4)
                    kern_avx512_4(kc, a + i * lda, lda, pk, c + i * ldc, ldc, nc, first);
                for (; i < M; i++)
                    kern_avx512_1(kc, a + i * lda, lda, pk, c + i * ldc, ldc, nc, first);
            } else if (level == ISA_AVX2) {
                for (; i + 6 <= M; i += 6)
                    kern_avx2_6(kc, a + i * lda, lda, pk, c + i * ldc, ldc, nc, first);
                for (; i < M; i++)
                    kern_avx2_1(kc, a + i * lda, lda, pk, c + i * ldc, ldc, nc, first);
            }
#endif
            if (i < M)
                kern_c(M - i, kc, a + i * lda, lda, pk, c + i * ldc, ldc, nc, first);
        }
    }
}
