/* cu_attention_gemm.cu — the unfused relative-position attention for long sequences in f16 mode (as
 * PyTorch's Parakeet computes it): per chunk of C query rows and group of G heads, AC = (q+u) K^T and
 * BD = (q+v) P_band^T as batched cuBLASLt products (f16 in, f32 out), one kernel for the relative
 * shift, scale, masks and softmax (f16 weights, the f32 row sums kept), Y = W V, and a kernel dividing
 * by the sums into y. Temporaries stay within the op scratch plans reserve (CU_OP_SCRATCH_BYTES). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cu_internal.h"

#define AG_CHUNK_MAX 512 /* query rows per chunk at most (a multiple of AG_ROW_STEP)              */
#define AG_ROW_STEP 8    /* chunks are multiples of this many rows (16-byte aligned f16 rows)     */
#define AG_SOFT_THREADS 256
#define AG_ALGO_CACHE 32

/* A product shape (the key: every argument of ag_gemm but the pointers) with its descriptors and
 * cuBLASLt's algorithm, made once. */
struct cu_att_algo {
    int64_t key[11];
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l[3]; /* A, B, D */
    cublasLtMatmulAlgo_t algo;
};

static void entry_free(struct cu_att_algo *c) {
    for (int i = 0; i < 3; i++)
        if (c->l[i])
            cublasLtMatrixLayoutDestroy(c->l[i]);
    if (c->op)
        cublasLtMatmulDescDestroy(c->op);
    memset(c, 0, sizeof *c);
}

void cu_att_algo_free(struct cu_backend *b) {
    for (size_t i = 0; b->att_algo && i < AG_ALGO_CACHE; i++)
        entry_free(&b->att_algo[i]);
    free(b->att_algo);
    b->att_algo = NULL;
    b->natt_algo = 0;
}

static int64_t up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* ---- kernels ---------------------------------------------------------------------------------- */

static __device__ __forceinline__ float ldh(const void *t, int64_t i, bool h16) {
    return h16 ? __half2float(((const __half *)t)[i]) : ((const float *)t)[i];
}

/* QU, QV [G][C][dk] = q rows [i0, i0 + n) + u, + v of heads h0 .., rounded to f16; rows >= n zero. */
static __global__ void ag_stage_q(const void *q, bool q16, const float *u, const float *bv, __half *qu, __half *qv,
                                  int64_t i0, int64_t n, int64_t C, int G, int h0, int dk, int64_t D) {
    CU_GRID_STRIDE(idx, (int64_t)G * C * dk) {
        const int64_t hg = idx / (C * dk), r = (idx / dk) % C;
        const int d = (int)(idx % dk);
        const int64_t col = (int64_t)(h0 + hg) * dk + d;
        const float x = r < n ? ldh(q, (i0 + r) * D + col, q16) : 0.0f;
        qu[idx] = __float2half_rn(r < n ? x + u[col] : 0.0f);
        qv[idx] = __float2half_rn(r < n ? x + bv[col] : 0.0f);
    }
}

/* Row r of head group hg: s(c) = (S[c] + BD[c + off - r]) * scale over keys c (position jlo + c), off =
 * the band column of c = r = 0; masked keys (the window, a band row p lacks) weigh 0. W = f16(exp(s -
 * max)), L = their f32 sum; rows past n or at invalid positions: W = 0, L = 1. */
static __global__ void __launch_bounds__(AG_SOFT_THREADS)
    ag_softmax(const float *S, const float *BD, __half *W, float *L, int64_t C, int64_t NK, int64_t NKp, int64_t NP,
               int64_t NPp, int64_t off, int64_t n, int64_t nvalid_rows, int64_t pi0, int64_t jlo, int64_t window,
               float scale, int64_t items) {
    __shared__ float red[AG_SOFT_THREADS / 32];
    __shared__ float bcast;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t r = item % C;
        const float *srow = S + item * NKp, *brow = BD + item * NPp;
        __half *wrow = W + item * NKp;
        const bool valid = r < n && r < nvalid_rows;
        const int64_t pi = pi0 + r;
        float mx = -INFINITY;
        for (int64_t c = threadIdx.x; c < NK; c += blockDim.x) {
            const int64_t col = c + off - r, j = jlo + c;
            const bool ok = valid && col >= 0 && col < NP && (window <= 0 || (pi - j <= window && j - pi <= window));
            if (ok)
                mx = fmaxf(mx, (srow[c] + brow[col]) * scale);
        }
        mx = cu_warp_max(mx);
        if (lane == 0)
            red[warp] = mx;
        __syncthreads();
        if (threadIdx.x == 0) {
            float m = red[0];
            for (int w = 1; w < AG_SOFT_THREADS / 32; w++)
                m = fmaxf(m, red[w]);
            bcast = m;
        }
        __syncthreads();
        mx = bcast;
        float sum = 0.0f;
        for (int64_t c = threadIdx.x; c < NK; c += blockDim.x) {
            const int64_t col = c + off - r, j = jlo + c;
            const bool ok = valid && col >= 0 && col < NP && (window <= 0 || (pi - j <= window && j - pi <= window));
            const float w = ok ? expf((srow[c] + brow[col]) * scale - mx) : 0.0f;
            wrow[c] = __float2half_rn(w);
            sum += w;
        }
        sum = cu_warp_sum(sum);
        __syncthreads(); /* red is read above before it is rewritten */
        if (lane == 0)
            red[warp] = sum;
        __syncthreads();
        if (threadIdx.x == 0) {
            float s = 0.0f;
            for (int w = 0; w < AG_SOFT_THREADS / 32; w++)
                s += red[w];
            L[item] = valid && s > 0.0f ? s : 1.0f;
        }
        __syncthreads();
    }
}

/* y rows [i0, i0 + n), heads h0 .. h0+G-1 = Ys / L (zeros at rows >= nvalid_rows), in y's type. */
static __global__ void ag_finish(const float *Ys, const float *L, void *y, bool y16, int64_t i0, int64_t n,
                                 int64_t nvalid_rows, int64_t C, int G, int h0, int dk, int64_t D) {
    CU_GRID_STRIDE(idx, (int64_t)G * n * dk) {
        const int64_t hg = idx / (n * dk), r = (idx / dk) % n;
        const int d = (int)(idx % dk);
        const int64_t row = hg * C + r;
        const float v = r < nvalid_rows ? Ys[row * dk + d] / L[row] : 0.0f;
        const int64_t o = (i0 + r) * D + (int64_t)(h0 + hg) * dk + d;
        if (y16)
            ((__half *)y)[o] = __float2half_rn(v);
        else
            ((float *)y)[o] = v;
    }
}

/* ---- products ------------------------------------------------------------------------------- */

/* A batched product D (m x n, f32, column-major ld ldd) = op(A) (m x k) * B (k x n) over `batch`
 * matrices: A f16 stored k x m (transa) or m x k, B f16 k x n; strides in elements. */
struct ag_gemm {
    bool transa;
    int64_t m, n, k;
    const __half *A;
    int64_t lda, sa;
    const __half *B;
    int64_t ldb, sb;
    float *D;
    int64_t ldd, sd, batch;
};

static vkasr_status layout(struct err *e, cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols,
                           int64_t ld, int64_t stride, int64_t batch) {
    int32_t bc = (int32_t)batch;
    CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    CUBLAS_CHECK(e, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    CUBLAS_CHECK(e, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                     sizeof stride));
    return VKASR_OK;
}

/* Fills an entry for g's shape: descriptors, then cuBLASLt's heuristic without split-K (a fixed
 * summation order: a row's sums do not depend on which chunk holds it) for 16-byte aligned operands. */
static vkasr_status entry_make(struct cu_backend *b, const struct ag_gemm *g, struct cu_att_algo *c) {
    struct err *e = &b->base.err;
    CUBLAS_CHECK(e, cublasLtMatmulDescCreate(&c->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = g->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    TRY(layout(e, &c->l[0], CUDA_R_16F, g->transa ? g->k : g->m, g->transa ? g->m : g->k, g->lda, g->sa, g->batch));
    TRY(layout(e, &c->l[1], CUDA_R_16F, g->k, g->n, g->ldb, g->sb, g->batch));
    TRY(layout(e, &c->l[2], CUDA_R_32F, g->m, g->n, g->ldd, g->sd, g->batch));
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    uint64_t ws = CU_WORKSPACE_BYTES;
    uint32_t al = 16, red = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t r = cublasLtMatmulPreferenceCreate(&pref);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
         r == CUBLAS_STATUS_SUCCESS && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        r = cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulAlgoGetHeuristic(b->lt, c->op, c->l[0], c->l[1], c->l[2], c->l[2], pref, 1, &res, &got);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (r != CUBLAS_STATUS_SUCCESS)
        return cublas_fail(e, r, "op relpos_attention (unfused): cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (got < 1)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "op relpos_attention (unfused): cuBLASLt has no algorithm for the product m=%lld n=%lld "
                       "k=%lld batch=%lld",
                       (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
    c->algo = res.algo;
    return VKASR_OK;
}

/* The entry for g's shape: cached, else made (the cache starts over when full: shapes change with the
 * sequence, and a sequence uses three). */
static vkasr_status entry(struct cu_backend *b, const struct ag_gemm *g, struct cu_att_algo **out) {
    const int64_t key[11] = {g->transa, g->m, g->n, g->k, g->lda, g->ldb, g->ldd, g->sa, g->sb, g->sd, g->batch};
    for (size_t i = 0; i < b->natt_algo; i++)
        if (memcmp(b->att_algo[i].key, key, sizeof key) == 0) {
            *out = &b->att_algo[i];
            return VKASR_OK;
        }
    if (!b->att_algo) {
        b->att_algo = (struct cu_att_algo *)calloc(AG_ALGO_CACHE, sizeof *b->att_algo);
        if (!b->att_algo)
            return err_set(&b->base.err, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    if (b->natt_algo == AG_ALGO_CACHE) {
        for (size_t i = 0; i < AG_ALGO_CACHE; i++)
            entry_free(&b->att_algo[i]);
        b->natt_algo = 0;
    }
    struct cu_att_algo *c = &b->att_algo[b->natt_algo];
    vkasr_status st = entry_make(b, g, c);
    if (st != VKASR_OK) {
        entry_free(c);
        return st;
    }
    memcpy(c->key, key, sizeof key);
    b->natt_algo++;
    *out = c;
    return VKASR_OK;
}

static vkasr_status gemm(struct cu_backend *b, const struct ag_gemm *g) {
    struct cu_att_algo *c = NULL;
    TRY(entry(b, g, &c));
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(&b->base.err, cublasLtMatmul(b->lt, c->op, &one, g->A, c->l[0], g->B, c->l[1], &zero, g->D, c->l[2],
                                              g->D, c->l[2], &c->algo, (void *)(uintptr_t)b->workspace,
                                              CU_WORKSPACE_BYTES, b->stream));
    return VKASR_OK;
}

/* ---- the plan --------------------------------------------------------------------------------- */

struct ag_plan {
    int64_t C, NK, NKp, NP, NPp;
    int G;
};

/* Scratch of a chunk of C rows and G heads: q+u, q+v (f16), AC and BD (f32), the weights (f16), their
 * sums and the product (f32). */
static uint64_t plan_bytes(int64_t C, int64_t G, int64_t dk, int64_t NKp, int64_t NPp) {
    const int64_t rows = G * C;
    return 2 * be_scratch_bytes((uint64_t)(rows * dk * 2)) + be_scratch_bytes((uint64_t)(rows * NKp * 4)) +
           be_scratch_bytes((uint64_t)(rows * NPp * 4)) + be_scratch_bytes((uint64_t)(rows * NKp * 2)) +
           be_scratch_bytes((uint64_t)(rows * 4)) + be_scratch_bytes((uint64_t)(rows * dk * 4));
}

/* The rule choosing this path (every term is fixed for the whole sequence, so every row chunk of a
 * sequence takes the same path and the same product shapes): f16 mode on a tensor-core device, full
 * attention (window 0, no chunked mask) over one sequence (no packed segments), n_valid >= the device's threshold
 * (VKASR_CUDA_ATT_GEMM_MIN_T), f16 k, v and p that cuBLASLt can read in place (16-byte aligned rows and
 * heads), and a chunk of at least AG_ROW_STEP rows fitting the op scratch. Chunks are as large as fit
 * (rows x heads, then rows), at most AG_CHUNK_MAX rows and the sequence rounded up. */
static bool plan(const struct cu_backend *b, const struct op_relpos_attention *a, int64_t kend, struct ag_plan *p) {
    const int64_t D = a->q.ne[1], H = a->heads, dk = D / H, P = a->p.ne[0], k0 = a->k_pos0;
    if (!a->f16 || !b->d->tensor_cores || a->window > 0 || a->chunk > 0 || a->seg.addr || a->n_valid < b->d->att_gemm_min_t)
        return false;
    if (a->k.type != BE_F16 || a->v.type != BE_F16 || a->p.type != BE_F16 || dk % 8 || D % 8 || a->k.addr % 16 ||
        a->v.addr % 16 || a->p.addr % 16)
        return false;
    p->NK = kend - k0;
    if (p->NK <= 0)
        return false;
    p->NKp = up(p->NK, 8);
    const int64_t cmax = up(a->n_valid, AG_ROW_STEP) < AG_CHUNK_MAX ? up(a->n_valid, AG_ROW_STEP) : AG_CHUNK_MAX;
    int64_t best = 0;
    for (int64_t C = AG_ROW_STEP; C <= cmax; C += AG_ROW_STEP) {
        const int64_t NP = C + p->NK - 1;
        if (NP > P)
            break;
        for (int64_t G = H; G >= 1; G--) {
            if (H % G || plan_bytes(C, G, dk, p->NKp, up(NP, 8)) > CU_OP_SCRATCH_BYTES + CU_ATT_LONG_SCRATCH_BYTES)
                continue;
            if (G * C >= best) { /* the most rows per product; of equals, the longer chunk */
                best = G * C;
                p->C = C;
                p->G = (int)G;
            }
            break;
        }
    }
    if (!best)
        return false;
    p->NP = p->C + p->NK - 1;
    p->NPp = up(p->NP, 8);
    return true;
}

/* ---- the op ----------------------------------------------------------------------------------- */

static vkasr_status run_chunks(struct cu_backend *b, const struct op_relpos_attention *a, const struct ag_plan *p,
                               int64_t kend) {
    const int64_t Tq = a->q.ne[0], D = a->q.ne[1], H = a->heads, dk = D / H, P = a->p.ne[0], C = p->C;
    const int64_t nvq = a->n_valid > a->q_pos0 ? (a->n_valid - a->q_pos0 < Tq ? a->n_valid - a->q_pos0 : Tq) : 0;
    const int64_t center = (P - 1) / 2, jlo = a->k_pos0, G = p->G;
    const float scale = (float)(1.0 / sqrt((double)dk));
    (void)kend;
    void *qu, *qv, *S, *BD, *W, *L, *Ys;
    TRY(cu_scratch(b, (uint64_t)(G * C * dk * 2), &qu));
    TRY(cu_scratch(b, (uint64_t)(G * C * dk * 2), &qv));
    TRY(cu_scratch(b, (uint64_t)(G * C * p->NKp * 4), &S));
    TRY(cu_scratch(b, (uint64_t)(G * C * p->NPp * 4), &BD));
    TRY(cu_scratch(b, (uint64_t)(G * C * p->NKp * 2), &W));
    TRY(cu_scratch(b, (uint64_t)(G * C * 4), &L));
    TRY(cu_scratch(b, (uint64_t)(G * C * dk * 4), &Ys));
    const __half *k = cu_ptr<__half>(a->k), *v = cu_ptr<__half>(a->v), *pp = cu_ptr<__half>(a->p);
    const bool q16 = a->q.type == BE_F16, y16 = a->y.type == BE_F16;
    for (int64_t h0 = 0; h0 < H; h0 += G)
        for (int64_t i0 = 0; i0 < Tq; i0 += C) {
            const int64_t n = Tq - i0 < C ? Tq - i0 : C, nv = nvq - i0 < 0 ? 0 : nvq - i0;
            const int64_t pi0 = a->q_pos0 + i0;
            /* key c (position jlo + c) and row r use p row center - (pi0 + r - jlo - c) = nb + (C-1) - r + c;
             * the band of NP rows starts at nb, moved inside p where it would leave it (only rows past the
             * sequence need rows outside p: the scored pairs have theirs, ops.h) */
            const int64_t nb = center - (pi0 + C - 1) + jlo;
            const int64_t nbc = nb < 0 ? 0 : nb > P - p->NP ? P - p->NP : nb;
            ag_stage_q<<<cu_grid(b, (uint64_t)(G * C * dk), 256), 256, 0, b->stream>>>(
                cu_ptr<void>(a->q), q16, cu_ptr<float>(a->bias_u), cu_ptr<float>(a->bias_v), (__half *)qu,
                (__half *)qv, i0, n, C, (int)G, (int)h0, (int)dk, D);
            CU_LAUNCHED(b);
            // S [G][C][NK] = (q+u) K^T;  BD [G][C][NP] = (q+v) P_band^T
            const struct ag_gemm ac = {true, p->NK, C, dk, k + h0 * dk, D, dk, (const __half *)qu, dk, C * dk,
                                       (float *)S, p->NKp, C * p->NKp, G};
            const struct ag_gemm bd = {true, p->NP, C, dk, pp + nbc * D + h0 * dk, D, dk, (const __half *)qv, dk,
                                       C * dk, (float *)BD, p->NPp, C * p->NPp, G};
            TRY(gemm(b, &ac));
            TRY(gemm(b, &bd));
            ag_softmax<<<cu_grid(b, (uint64_t)(G * C), 1), AG_SOFT_THREADS, 0, b->stream>>>(
                (const float *)S, (const float *)BD, (__half *)W, (float *)L, C, p->NK, p->NKp, p->NP, p->NPp,
                nb - nbc + C - 1, n, nv, pi0, jlo, a->window, scale, G * C);
            CU_LAUNCHED(b);
            // Ys [G][C][dk] = W V
            const struct ag_gemm pv = {false, dk, C, p->NK, v + h0 * dk, D, dk, (const __half *)W, p->NKp,
                                       C * p->NKp, (float *)Ys, dk, C * dk, G};
            TRY(gemm(b, &pv));
            ag_finish<<<cu_grid(b, (uint64_t)(G * n * dk), 256), 256, 0, b->stream>>>(
                (const float *)Ys, (const float *)L, cu_ptr<void>(a->y), y16, i0, n, nv, C, (int)G, (int)h0, (int)dk, D);
            CU_LAUNCHED(b);
        }
    return VKASR_OK;
}

vkasr_status cu_att_gemm(struct cu_backend *b, const struct op_relpos_attention *a, bool *taken) {
    const int64_t Tk = a->k.ne[0];
    int64_t kend = a->k_pos0 + Tk < a->n_valid ? a->k_pos0 + Tk : a->n_valid;
    struct ag_plan p = {0, 0, 0, 0, 0, 0};
    *taken = plan(b, a, kend, &p);
    if (!*taken)
        return VKASR_OK;
    b->op_label = "relpos_attention_gemm";
    uint64_t mark = be_mark(&b->base);
    vkasr_status st = run_chunks(b, a, &p, kend);
    be_release(&b->base, mark); /* stream order: later ops reusing the bytes run after these kernels */
    return st;
}
