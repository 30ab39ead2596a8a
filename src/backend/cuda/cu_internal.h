/* cu_internal.h — shared declarations of the CUDA backend (CUDA C++ compiled by nvcc, C interface to the
 * rest of vkasr): device, memory blocks, the backend object (one stream, cuBLASLt, pinned staging,
 * profiling events), launch helpers and the op entry points (cu_<family>.cu). Nothing outside
 * backend/cuda includes this file. */
#ifndef VKASR_CU_INTERNAL_H
#define VKASR_CU_INTERNAL_H

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

extern "C" {
#include "../backend.h"
}

/* ---- errors ----------------------------------------------------------------------------------- */

/* Maps a CUDA error to a vkasr status (out of memory, no device/driver, sticky = device lost) and
 * writes "what failed: cudaErrorName (description) at file:line". Clears a non-sticky error. */
vkasr_status cu_fail(struct err *e, cudaError_t r, const char *what, const char *file, int line);
vkasr_status cublas_fail(struct err *e, cublasStatus_t r, const char *what, const char *file, int line);
#define CU_CHECK(e, call)                                                                              \
    do {                                                                                               \
        cudaError_t cu_r_ = (call);                                                                    \
        if (cu_r_ != cudaSuccess)                                                                      \
            return cu_fail((e), cu_r_, #call, __FILE__, __LINE__);                                     \
    } while (0)
#define CUBLAS_CHECK(e, call)                                                                          \
    do {                                                                                               \
        cublasStatus_t cb_r_ = (call);                                                                 \
        if (cb_r_ != CUBLAS_STATUS_SUCCESS)                                                            \
            return cublas_fail((e), cb_r_, #call, __FILE__, __LINE__);                                 \
    } while (0)

/* ---- memory (cu_memory.cu) -------------------------------------------------------------------- */

#define CU_TENSOR_ALIGN BE_SCRATCH_ALIGN /* every tensor starts 256-byte aligned (cuBLASLt's default assumption) */

struct cu_device;

/* The arenas' blocks (arena.h): cudaMalloc'd, on the calling thread's current device made d's. */
extern "C" const struct be_block_ops cu_blocks;
/* One cudaMalloc counted against the device's budget (VKASR_MAX_DEVICE_MEMORY_MIB, the card's memory). */
vkasr_status cu_device_malloc(struct cu_device *d, uint64_t bytes, uint64_t *addr, struct err *e);
void cu_device_free(struct cu_device *d, uint64_t addr, uint64_t bytes);

/* ---- device (cu_device.cu) -------------------------------------------------------------------- */

struct cu_device {
    struct be_device base;
    int ordinal;                 /* CUDA device number                                         */
    cudaDeviceProp prop;
    uint64_t budget;             /* device bytes vkasr may allocate                             */
    uint64_t allocated;          /* device bytes allocated by all arenas (under alloc_lock)     */
    pthread_mutex_t alloc_lock;  /* allocated                                                   */
    uint32_t max_grid;           /* blocks of a 1-D launch (VKASR_MAX_GROUPS applied)           */
    bool profile;
    bool tensor_cores;           /* mma.sync f16 (sm_80+): the tensor-core attention kernel     */
    int64_t att_gemm_min_t;      /* n_valid from which f16 full attention is unfused (cuBLASLt) */
};
/* The default of att_gemm_min_t (VKASR_CUDA_ATT_GEMM_MIN_T): a sequence of this many encoder frames
 * (about 2:40 of audio at 80 ms a frame) is where the products' T x T work outweighs their extra
 * passes over the scores; not tuned per GPU (docs/gpu-results.md, "CUDA against Vulkan"). */
#define CU_ATT_GEMM_MIN_T 2048

/* Makes the device current for the calling thread (every entry point calls it first: a session may
 * run on another thread than the one that opened the model). */
vkasr_status cu_use_device(const struct cu_device *d, struct err *e);

/* ---- backend (cu_backend.cu) ------------------------------------------------------------------ */

#define CU_STAGING_BYTES (32ull << 20) /* per half of the double-buffered pinned staging buffer */
#define CU_THROTTLE_RING 8
#define CU_LT_CACHE 64
#define CU_WORKSPACE_BYTES (32ull << 20)
/* Scratch one op takes for itself on top of the stack (be_memory.op_scratch): the linear op works in row
 * chunks whose temporaries (x rounded to f16, the product before an epilogue) stay within it, and so
 * does the unfused attention (its chunks of query rows and heads: the scores, weights and products). */
#define CU_OP_SCRATCH_BYTES (32ull << 20)
/* The unfused attention's chunks take this much more for a sequence of at least att_gemm_min_t frames
 * (be_memory.op_scratch_long): fewer, larger chunks; with 32 MiB a layer at 10 minutes took ~860
 * launches, and the launches cost more than the fused kernel saved. */
#define CU_ATT_LONG_SCRATCH_BYTES (480ull << 20)
/* Beneath those, a quantized w's f32 copy (cu_linear_quant.cu): be_memory.op_scratch is the sum. */
#define CU_QUANT_W_BYTES (32ull << 20)

/* A cuBLASLt algorithm chosen for one product shape (cu_linear.cu). */
struct cu_lt_entry {
    bool used;
    int64_t m_key, n, k;   /* m_key: the M the heuristic was asked for (negated for matvec) */
    int wtype, epilogue, beta;
    cublasLtMatmulAlgo_t algo;
    uint64_t stamp;
    /* matvec entries (M fixed): the descriptors too, so a decoder step builds none (cu_linear.cu) */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
};
void cu_lt_cache_free(struct cu_backend *b);
/* Frees the unfused attention's cached cuBLASLt algorithms (cu_attention_gemm.cu). */
struct cu_att_algo;
void cu_att_algo_free(struct cu_backend *b);

struct cu_prof_pending {
    const char *name;
    cudaEvent_t start, stop;
};

struct cu_prof_total {
    const char *name;
    uint64_t calls;
    double ms;
};

struct cu_backend {
    struct backend base;
    struct cu_device *d;
    cudaStream_t stream;
    /* Pinned staging: two halves, each reusable once its last copy (event) completed. */
    unsigned char *staging;
    cudaEvent_t staging_done[2];
    bool staging_busy[2];
    int staging_next;
    /* flush/throttle: events recorded at each flush, oldest first. */
    cudaEvent_t flush_ev[CU_THROTTLE_RING];
    int flush_head, flush_count;
    /* cuBLASLt */
    cublasLtHandle_t lt;
    uint64_t workspace;
    struct cu_lt_entry lt_cache[CU_LT_CACHE];
    uint64_t lt_stamp;
    /* profiling */
    const char *op_label;                  /* set by an op to name its kernel in the profile    */
    struct cu_prof_pending *pend;
    size_t npend, cappend;
    cudaEvent_t *free_ev;
    size_t nfree_ev, capfree_ev;
    struct cu_prof_total *prof;
    size_t nprof, capprof;
    /* recorded sequences (cu_graph.cu): the stream is capturing between graph_begin and graph_end;
     * capture_failed: an op failed while recording and the capture was already ended */
    bool capturing, capture_failed;
    /* cuBLASLt algorithms of the unfused attention's products (cu_attention_gemm.cu) */
    struct cu_att_algo *att_algo;
    size_t natt_algo;
};

vkasr_status cu_backend_create(struct be_device *bd, struct backend **out, struct err *e);
/* Waits for the stream's work and resolves the profile's pending intervals (cu_backend.cu). */
vkasr_status cu_stream_sync(struct cu_backend *b);

/* Recorded sequences through CUDA stream capture (cu_graph.cu; backend.h be_graph_*). */
vkasr_status cu_graph_begin(struct backend *bb, const be_tensor *predicate);
vkasr_status cu_graph_end(struct backend *bb, struct be_graph **out);
vkasr_status cu_graph_run(struct backend *bb, struct be_graph *g, uint32_t times);
void cu_graph_free(struct backend *bb, struct be_graph *g);
/* Ends a capture after an op failed during it (the op's error stays in b->base.err); cub_destroy ends
 * one left open. Never leaves the stream capturing. */
void cu_graph_abort(struct cu_backend *b);
/* An error naming `what` when the stream is capturing (uploads, downloads, waits are not recorded). */
vkasr_status cu_not_capturing(struct cu_backend *b, const char *what);
/* relpos_attention through cuBLASLt products in chunks (cu_attention_gemm.cu): *taken false (and
 * nothing done) where its rule leaves the call to the fused kernels (cu_attention.cu). */
vkasr_status cu_att_gemm(struct cu_backend *b, const struct op_relpos_attention *a, bool *taken);
/* linear with a block-quantized w (cu_linear_quant.cu; cu_op_linear sends it there). */
vkasr_status cu_op_linear_quant(struct cu_backend *b, const struct op_linear *a);
/* linear with the matvec hint and no GLU (cu_gemv.cu; cu_op_linear sends every such call there, at any
 * M): a warp per output column, so a row's result depends on N, K and the types only. */
vkasr_status cu_gemv(struct cu_backend *b, const struct op_linear *a);

/* Scratch for the duration of one op: stream order makes it safe to release at the op's end (the next
 * op that reuses the bytes runs after this op's kernels). */
static inline vkasr_status cu_scratch(struct cu_backend *b, uint64_t bytes, void **p) {
    uint64_t addr = 0;
    vkasr_status st = be_alloc(&b->base, BE_POOL_SCRATCH, bytes ? bytes : 4, &addr);
    *p = (void *)(uintptr_t)addr;
    return st;
}

/* ---- launches --------------------------------------------------------------------------------- */

/* Blocks for `items` units of work at `per_block` units per block, capped at the device's max_grid
 * (kernels loop grid-stride). At least 1. */
static inline unsigned cu_grid(const struct cu_backend *b, uint64_t items, uint64_t per_block) {
    uint64_t want = (items + per_block - 1) / per_block;
    if (want == 0)
        want = 1;
    return want > b->d->max_grid ? b->d->max_grid : (unsigned)want;
}

/* Checks the launch that was just made (configuration errors show here; faults at the next sync). */
#define CU_LAUNCHED(b) CU_CHECK(&(b)->base.err, cudaGetLastError())

/* Tensor element pointers. */
template <typename T> static inline T *cu_ptr(const be_tensor &t) { return (T *)(uintptr_t)t.addr; }

/* Grid-stride loop over [0, n) in 64 bits: correct for any grid size. */
#define CU_GRID_STRIDE(i, n)                                                                           \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);                 \
         i += (int64_t)gridDim.x * blockDim.x)

/* The op's activations (ops.h enum be_act) in f32, as the Vulkan kernels compute them (core.glsl). */
static __device__ __forceinline__ float cu_act(float x, int act) {
    switch (act) {
    case ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ACT_SILU: return x / (1.0f + expf(-x));
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ACT_TANH: return tanhf(x);
    case ACT_LOG_GUARD: return logf(x + 5.9604644775390625e-08f); /* 2^-24 */
    default: return x;
    }
}

/* F32 or F16 tensor elements (ops.h): read widened exactly; written rounded once, to nearest even. */
static __device__ __forceinline__ float cu_get(const float *p, int64_t i) { return p[i]; }
static __device__ __forceinline__ float cu_get(const __half *p, int64_t i) { return __half2float(p[i]); }
static __device__ __forceinline__ void cu_put(float *p, int64_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void cu_put(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }

/* Calls LAUNCH(TX, TY) with the element types of an op's input x and output y (F32 or F16 each). */
#define CU_IO_TYPES(xt, yt, LAUNCH)                                                                    \
    do {                                                                                               \
        if ((xt) == BE_F16 && (yt) == BE_F16)                                                          \
            LAUNCH(__half, __half);                                                                    \
        else if ((xt) == BE_F16)                                                                       \
            LAUNCH(__half, float);                                                                     \
        else if ((yt) == BE_F16)                                                                       \
            LAUNCH(float, __half);                                                                     \
        else                                                                                           \
            LAUNCH(float, float);                                                                      \
    } while (0)

/* GLU of a value and its gate, as op_glu and linear's ACT_GLU compute it. */
static __device__ __forceinline__ float cu_glu(float v, float g) { return v / (1.0f + expf(-g)); }

static __device__ __forceinline__ float cu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float cu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The segment of a packed batch holding position pos: the last s of 0 .. nseg-1 whose start seg[s]
 * (seg [nseg+1]: a leading 0, the total last) is at most pos; empty segments are skipped. */
static __device__ __forceinline__ int64_t cu_seg_find(const int64_t *seg, int64_t nseg, int64_t pos) {
    int64_t lo = 0, hi = nseg - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (seg[mid] <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- op implementations (cu_<family>.cu) ------------------------------------------------------ */

#define X(name) vkasr_status cu_op_##name(struct cu_backend *b, const struct op_##name *a);
VKASR_OPS(X)
#undef X

#endif
