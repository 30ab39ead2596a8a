/* cpu_gemm.c — the CPU backend's matrix-product kernel, C = A B^T (both operands rows along K: x and a
 * PyTorch weight, queries and keys): B packed in panels of 16 rows by KC columns, 4 rows of A against a
 * panel at a time. Every element is one multiply-add chain over k = 0 .. K-1 in order, whatever M, N,
 * the row's place in the call or the panel cut: a row's result never depends on the other rows, which
 * the ops' contract asks (halo tiles, packed batches). OpenBLAS's sgemm does not keep that (its result
 * for a row changes with the rows around it), so the products use this kernel. AVX2 + FMA where the
 * CPU has them (fused multiply-add), plain C elsewhere (multiply, then add). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_GEMM_X86 1
#endif

#include "cpu_internal.h"

#define NR 16   /* B rows per panel (the kernel's columns) */
#define MR 4    /* A rows per kernel call                 */
#define KC 256  /* k per block: a panel of B is NR x KC floats (16 KiB, first-level cache) */
#define MC 64   /* A rows per pass over the panels                                        */

/* ---- kernels: C[MR|1, NR] (+)= A[.., k0..k0+kc) . panel ------------------------------------------- */

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
__attribute__((target("avx2,fma"))) static void kern_avx2_1(int64_t kc, const float *a, const float *p, float *c,
                                                            int64_t ncols, bool first) {
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
    float t[NR];
    if (!first) {
        for (int j = 0; j < NR; j++)
            t[j] = j < ncols ? c[j] : 0.0f;
        c0 = _mm256_loadu_ps(t);
        c1 = _mm256_loadu_ps(t + 8);
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_load_ps(p + k * NR), b1 = _mm256_load_ps(p + k * NR + 8);
        const __m256 av = _mm256_broadcast_ss(a + k);
        c0 = _mm256_fmadd_ps(av, b0, c0);
        c1 = _mm256_fmadd_ps(av, b1, c1);
    }
    if (ncols == NR) {
        _mm256_storeu_ps(c, c0);
        _mm256_storeu_ps(c + 8, c1);
        return;
    }
    _mm256_storeu_ps(t, c0);
    _mm256_storeu_ps(t + 8, c1);
    memcpy(c, t, (size_t)ncols * sizeof *c);
}

/* MR rows: the same chain per element as kern_avx2_1 (the rows share the panel's loads only). */
__attribute__((target("avx2,fma"))) static void kern_avx2_4(int64_t kc, const float *a, int64_t lda, const float *p,
                                                            float *c, int64_t ldc, int64_t ncols, bool first) {
    if (ncols != NR) {
        for (int r = 0; r < MR; r++)
            kern_avx2_1(kc, a + r * lda, p, c + r * ldc, ncols, first);
        return;
    }
    __m256 c00, c01, c10, c11, c20, c21, c30, c31;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
    } else {
        c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
        c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    }
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_load_ps(p + k * NR), b1 = _mm256_load_ps(p + k * NR + 8);
        __m256 av = _mm256_broadcast_ss(a0 + k);
        c00 = _mm256_fmadd_ps(av, b0, c00);
        c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a1 + k);
        c10 = _mm256_fmadd_ps(av, b0, c10);
        c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a2 + k);
        c20 = _mm256_fmadd_ps(av, b0, c20);
        c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a3 + k);
        c30 = _mm256_fmadd_ps(av, b0, c30);
        c31 = _mm256_fmadd_ps(av, b1, c31);
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
    _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
}

static atomic_int avx2_state = -1; /* -1: not asked yet; every thread that asks finds the same answer */

static bool have_avx2(void) {
    int v = atomic_load_explicit(&avx2_state, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        atomic_store_explicit(&avx2_state, v, memory_order_relaxed);
    }
    return v == 1;
}
#endif

const char *cpu_gemm_kernel(void) {
#ifdef CPU_GEMM_X86
    if (have_avx2())
        return "AVX2+FMA";
#endif
    return "plain C";
}

/* ---- the product ------------------------------------------------------------------------------------ */

size_t cpu_gemm_pack_floats(int64_t N) { return (size_t)((N + NR - 1) / NR * NR + 1) * KC; }

void cpu_gemm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, cpu_rows_fn brows, const void *bctx,
                 float *C, int64_t ldc, float *pack) {
#ifdef CPU_GEMM_X86
    const bool avx2 = have_avx2();
#else
    const bool avx2 = false;
#endif
    if (K == 0) { /* empty sums */
        for (int64_t i = 0; i < M; i++)
            memset(C + i * ldc, 0, (size_t)N * sizeof *C);
        return;
    }
    const int64_t panels = (N + NR - 1) / NR;
    float *seg = pack + panels * NR * KC; /* one B row's segment, widened */
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        const bool first = k0 == 0;
        /* every panel of this k block: B rows j0 .. j0+NR, columns k0 .. k0+kc, k-major; missing rows 0 */
        for (int64_t j = 0; j < panels * NR; j++) {
            float *pp = pack + (j / NR) * NR * KC + j % NR;
            if (j < N) {
                const float *src = brows(bctx, j, k0, kc, seg);
                for (int64_t k = 0; k < kc; k++)
                    pp[k * NR] = src[k];
            } else {
                for (int64_t k = 0; k < kc; k++)
                    pp[k * NR] = 0.0f;
            }
        }
        /* MC rows of A (MC x KC floats: second-level cache) against every panel */
        for (int64_t i0 = 0; i0 < M; i0 += MC) {
            const int64_t i1 = M - i0 < MC ? M : i0 + MC;
            for (int64_t jp = 0; jp < panels; jp++) {
                const int64_t j0 = jp * NR, nc = N - j0 < NR ? N - j0 : NR;
                const float *pk = pack + jp * NR * KC;
                int64_t i = i0;
#ifdef CPU_GEMM_X86
                if (avx2) {
                    for (; i + MR <= i1; i += MR)
                        kern_avx2_4(kc, A + i * lda + k0, lda, pk, C + i * ldc + j0, ldc, nc, first);
                    for (; i < i1; i++)
                        kern_avx2_1(kc, A + i * lda + k0, pk, C + i * ldc + j0, nc, first);
                }
#endif
                if (!avx2)
                    kern_c(i1 - i0, kc, A + i0 * lda + k0, lda, pk, C + i0 * ldc + j0, ldc, nc, first);
            }
        }
    }
}

/* B as plain f32 rows ldb apart. */
const float *cpu_rows_f32(const void *ctx, int64_t row, int64_t k0, int64_t kc, float *tmp) {
    const struct cpu_mat *m = ctx;
    (void)kc;
    (void)tmp;
    return m->p + row * m->ld + k0;
}
