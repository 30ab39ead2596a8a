/* cpu_internal.h — declarations shared by the CPU backend's files: its device and backend, the thread
 * pool, and the ops it implements itself (the others are the reference backend's, run on row ranges
 * in parallel where an op's rows are independent). */
#ifndef VKASR_CPU_INTERNAL_H
#define VKASR_CPU_INTERNAL_H

#include <math.h>
#include <stdlib.h>

#include "../ref/ref_internal.h"

/* Hot loops compiled twice, for x86-64-v3 (AVX2, FMA) and the baseline, the CPU choosing at load time:
 * one machine always runs the same code, so results are reproducible there. Not under the sanitizers,
 * whose run times are not ready when the loader resolves the choice (an ifunc). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CPU_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CPU_NO_CLONES 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CPU_NO_CLONES)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#endif

/* The innermost arithmetic loops (GEMM micro-kernels, convolution, attention and dot-product rows) are
 * not instrumented by AddressSanitizer, nor with clang by UBSan, whose overflow checks kept them scalar:
 * they were most of the CPU time of the sanitizer tests (CI's stage 2 runs on this backend). What they
 * access lies in arena blocks (backend/arena.c poisons only the unallocated rest) and in buffers whose
 * sizes the instrumented callers computed; the op tests compare every one with the reference, and
 * test_cpu_gemm checks the product kernels' every element and that they write nothing beside C. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPU_KERNEL __attribute__((no_sanitize("address", "undefined")))
#endif
#endif
#if !defined(CPU_KERNEL) && defined(__SANITIZE_ADDRESS__)
#define CPU_KERNEL __attribute__((no_sanitize_address))
#endif
#ifndef CPU_KERNEL
#define CPU_KERNEL
#endif

/* A parallel loop's body: indices [i0, i1) of the loop's range. */
typedef void (*cpu_range_fn)(void *ctx, int64_t i0, int64_t i1);

struct cpu_pool;
vkasr_status cpu_pool_create(int threads, struct cpu_pool **out, struct err *e);
void cpu_pool_destroy(struct cpu_pool *p);
int cpu_pool_threads(const struct cpu_pool *p);
/* Runs fn over [0, n) in chunks of at least `grain` indices on the pool's threads and the caller's;
 * returns when every chunk is done. One loop at a time per pool (a pool belongs to one backend). */
void cpu_pool_run(struct cpu_pool *p, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);

struct cpu_device {
    struct ref_device host; /* host memory, as the reference backend's (first: the device's base) */
    int threads;
};

struct cpu_lstm_cache;
struct cpu_backend {
    struct backend base;
    struct cpu_pool *pool;
    struct cpu_lstm_cache *lstm; /* the LSTM steps' b + W_ih x per distinct x (made on first use) */
};

static inline struct cpu_pool *cpu_pool_of(struct backend *b) { return ((struct cpu_backend *)b)->pool; }

/* ---- the LSTM input halves (cpu_lstm_cache.c) ---- */

/* b + W_ih x [g] computed before for this x (the same bits), or NULL. On NULL, *store may name where the
 * step writes its own b + W_ih x [g] (then cpu_lstm_cache_commit(*slot) once written). Makes the cache
 * on first use (*cp NULL: none yet; it stays NULL without memory, and nothing is cached). */
const float *cpu_lstm_cache_find(struct cpu_lstm_cache **cp, const void *w, const void *b, const float *x, int64_t in,
                                 int64_t g, float **store, int *slot);
void cpu_lstm_cache_commit(struct cpu_lstm_cache *c, int slot);
void cpu_lstm_cache_destroy(struct cpu_lstm_cache *c);

/* The ops the CPU backend implements (the rest run the reference's code: cpu_backend.c's table). */
#define CPU_OWN_OPS(X)                                                                                 \
    X(unary)                                                                                           \
    X(binary)                                                                                          \
    X(glu)                                                                                             \
    X(layernorm)                                                                                       \
    X(softmax)                                                                                         \
    X(linear)                                                                                          \
    X(conv2d_s2)                                                                                       \
    X(dwconv2d_s2)                                                                                     \
    X(dwconv1d)                                                                                        \
    X(relpos_attention)                                                                                \
    X(lstm_step)                                                                                       \
    X(stft_power)

#define X(name) vkasr_status cpu_##name(struct backend *b, const struct op_##name *a);
CPU_OWN_OPS(X)
#undef X

/* Element i of an F32 or F16 tensor as float. */
static inline float cpu_get(const be_tensor *t, uint64_t i) {
    return t->type == BE_F16 ? half_to_float(ref_u16(t)[i]) : ref_f32(t)[i];
}
/* Stores v into element i of an F32 or F16 tensor (F16: rounded once to nearest even). */
static inline void cpu_put(const be_tensor *t, uint64_t i, float v) {
    if (t->type == BE_F16)
        ref_u16(t)[i] = float_to_half(v);
    else
        ref_f32(t)[i] = v;
}

/* ---- the product kernel (cpu_gemm.c) ---- */

#define CPU_GEMM_NR 16  /* B rows per packed panel                   */
#define CPU_GEMM_KC 256 /* k per block: the most columns a pack asks */
/* Writes B's rows [j0, j0 + nr) (nr <= CPU_GEMM_NR), columns [k0, k0 + kc), into panel k-major as f32:
 * panel[k * CPU_GEMM_NR + r], rows nr .. CPU_GEMM_NR - 1 zero. */
typedef void (*cpu_pack_fn)(const void *ctx, int64_t j0, int64_t nr, int64_t k0, int64_t kc, float *panel);
/* Plain f32 rows `ld` apart (cpu_pack_f32's context), and f16 rows (cpu_pack_f16's: widened exactly). */
struct cpu_mat {
    const float *p;
    int64_t ld;
};
struct cpu_mat16 {
    const uint16_t *p;
    int64_t ld;
};
void cpu_pack_f32(const void *ctx, int64_t j0, int64_t nr, int64_t k0, int64_t kc, float *panel);
void cpu_pack_f16(const void *ctx, int64_t j0, int64_t nr, int64_t k0, int64_t kc, float *panel);
/* C [M, N] (ldc apart) = A [M, K] (lda apart) B^T, B's panels from pack_b: each element one multiply-add
 * chain over k in order, so a row's result depends on nothing but its own A row. pack holds
 * cpu_gemm_pack_floats(N) floats, 64-byte aligned. */
void cpu_gemm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, cpu_pack_fn pack_b, const void *bctx,
                 float *C, int64_t ldc, float *pack);
size_t cpu_gemm_pack_floats(int64_t N);
/* The kernel this CPU runs ("AVX-512", "AVX2+FMA", "plain C"; $VKASR_CPU_ISA=avx2|c caps it). */
const char *cpu_gemm_kernel(void);
/* The CPU widens f16 with F16C (every CPU the AVX2 and AVX-512 kernels run on). */
bool cpu_have_f16c(void);
/* IEEE binary16 bits to float, exactly. */
float cpu_h2f(uint16_t h);
/* y[i] (+ y[i] where acc) = w row (n0 + i) . x for i < n: w [*, K] F32, F16 or a block type. Each row's
 * sum has one order, that of its K alone. tmp: CPU_GEMV_TMP(K) floats (widened blocks). */
#define CPU_GEMV_TMP(K) ((size_t)(K))
void cpu_gemv(const be_tensor *w, int64_t n0, int64_t n, int64_t K, const float *x, float *y, bool acc, float *tmp);
/* n floats, 64-byte aligned (free with free), or NULL. */
static inline float *cpu_alloc_floats(size_t n) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}
/* A task's scratch: buffer `slot` (< CPU_SCRATCH_SLOTS) of the calling thread, at least n floats, 64-byte
 * aligned, contents undefined; NULL when out of memory. The thread keeps it (grown, never shrunk) until
 * it exits, so an op's tasks allocate nothing once the largest op ran: pages are faulted in once per
 * thread, not once per op (under AddressSanitizer, whose allocator maps large blocks afresh, that was a
 * third of a CLI call's time). Not to be freed; valid until the thread's next call for the same slot. */
enum { CPU_SCRATCH_PACK, CPU_SCRATCH_OUT, CPU_SCRATCH_TMP, CPU_SCRATCH_SLOTS };
float *cpu_scratch_floats(int slot, size_t n);

/* An epilogue's activation in f32 (ops.h: enum be_act, ACT_GLU aside). */
static inline float cpu_act(float v, int act) {
    switch (act) {
    case ACT_RELU: return v > 0 ? v : 0;
    case ACT_SILU: return v / (1.0f + expf(-v));
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case ACT_TANH: return tanhf(v);
    case ACT_LOG_GUARD: return logf(v + 5.9604644775390625e-08f);
    default: return v;
    }
}

#endif
