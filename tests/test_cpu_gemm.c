/* test_cpu_gemm.c — the CPU backend's product kernel (src/backend/cpu/cpu_gemm.c) element by element: C = A B^T
 * over shapes that meet every kernel (the AVX-512 two-panel kernel's 8, 4 and 1 rows, the one-panel ones,
 * AVX2's 6 and 1, plain C), partial panels (the first or the second of a pair), k blocks (K above
 * CPU_GEMM_KC) and strided rows, with f32 and f16 weights. Each element must equal, bit for bit, its
 * multiply-add chain over k in order computed here in plain C (fmaf where the kernel fuses, a product
 * then a sum where it does not: cpu_gemm.c's contract), and C's columns past N and rows past M must be
 * untouched. VKASR_CPU_ISA=avx2|c chooses a lower kernel (CTest runs all three where the CPU has them). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "common/half.h"
#include "expect.h"

static uint32_t rng = 12345u;
static float uniform(void) { /* [-1, 1) with 24 bits */
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

#define SENTINEL 1234.5f

/* One product against the chains; `half` takes B as f16 (the rows rounded to f16 first). */
static void check(int64_t M, int64_t N, int64_t K, bool half, bool fused) {
    const int64_t lda = K + 3, ldb = K + 5, ldc = N + 4;
    float *A = malloc(sizeof(float) * (size_t)((M ? M : 1) * lda));
    float *B = malloc(sizeof(float) * (size_t)((N ? N : 1) * ldb));
    uint16_t *Bh = malloc(sizeof(uint16_t) * (size_t)((N ? N : 1) * ldb));
    float *C = malloc(sizeof(float) * (size_t)((M + 1) * ldc));
    float *pack = cpu_alloc_floats(cpu_gemm_pack_floats(N));
    if (!A || !B || !Bh || !C || !pack) {
        EXPECT(false, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < M * lda; i++)
        A[i] = uniform();
    for (int64_t i = 0; i < N * ldb; i++) { /* f16 weights: B holds what the kernel sees, Bh widened */
        const float v = uniform();
        Bh[i] = float_to_half(v);
        B[i] = half ? half_to_float(Bh[i]) : v;
    }
    for (int64_t i = 0; i < (M + 1) * ldc; i++)
        C[i] = SENTINEL;
    const struct cpu_mat bm = {B, ldb};
    const struct cpu_mat16 bh = {Bh, ldb};
    if (half)
        cpu_gemm_nt(M, N, K, A, lda, cpu_pack_f16, &bh, C, ldc, pack);
    else
        cpu_gemm_nt(M, N, K, A, lda, cpu_pack_f32, &bm, C, ldc, pack);
    int bad = 0;
    for (int64_t i = 0; i <= M && bad < 3; i++)
        for (int64_t j = 0; j < ldc && bad < 3; j++) {
            float want = SENTINEL;
            if (i < M && j < N) {
                want = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    if (fused) {
                        want = fmaf(A[i * lda + k], B[j * ldb + k], want);
                    } else {
                        volatile float prod = A[i * lda + k] * B[j * ldb + k];
                        want = want + prod;
                    }
                }
            }
            const float got = C[i * ldc + j];
            if (memcmp(&got, &want, sizeof got) != 0) {
                printf("M=%lld N=%lld K=%lld %s: C[%lld, %lld] = %.9g, want %.9g%s\n", (long long)M, (long long)N,
                       (long long)K, half ? "f16" : "f32", (long long)i, (long long)j, got, want,
                       i >= M || j >= N ? " (outside C: must be untouched)" : "");
                bad++;
            }
        }
    EXPECT(bad == 0, "M=%lld N=%lld K=%lld %s", (long long)M, (long long)N, (long long)K, half ? "f16" : "f32");
out:
    free(A);
    free(B);
    free(Bh);
    free(C);
    free(pack);
}

int main(void) {
    const char *kernel = cpu_gemm_kernel();
    const bool fused = strcmp(kernel, "plain C") != 0;
    printf("kernel: %s (%s)\n", kernel, fused ? "fused multiply-adds" : "products, then sums");
    /* rows: the 8/4/1-row and 12/4/1-row AVX-512 kernels, AVX2's 6 and 1; columns: one panel, pairs with a
     * full or a partial second panel, an odd last panel; k: one block, several, a partial last one */
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 17, 25};
    static const int64_t Ns[] = {1, 15, 16, 17, 31, 32, 33, 47, 48, 50, 64, 65};
    static const int64_t Ks[] = {1, 5, CPU_GEMM_KC, CPU_GEMM_KC + 1, 2 * CPU_GEMM_KC + 88};
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
                for (int half = 0; half < 2; half++)
                    check(Ms[a], Ns[b], Ks[c], half, fused);
    check(0, 16, 8, false, fused); /* no rows */
    check(3, 40, 0, false, fused); /* empty sums: zeros */
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
