/* cu_linear.cu — the linear op on CUDA through cuBLASLt. f16 weights: an f32 x rounded to f16 into
 * scratch, then f16 x f16 on tensor cores with f32 accumulation; f32 weights: CUBLAS_COMPUTE_32F (never
 * TF32). With an f32 y the epilogue goes into cuBLASLt's where that is exactly the op's expression;
 * otherwise (f16 y, GLU) one element-wise kernel finishes from an f32 product, so an f16 y is rounded
 * as the reference rounds it (cuBLASLt's f16 rounding is not documented). A row must not depend on M:
 * the algorithm is chosen once per (N, K, types, epilogue) at a fixed M without split-K, and hinted
 * products without GLU take cu_gemv.cu at any M. Long calls run in row chunks that fit
 * CU_OP_SCRATCH_BYTES. */
#include <string.h>

#include "cu_internal.h"

#define LIN_THREADS 256
#define LT_M_KEY 4096      /* the M the heuristic sees for products without the matvec hint */
#define LT_ALIGN 16u       /* the alignment every pointer handed to cuBLASLt has (else copied) */

enum epi { EPI_NONE = 0, EPI_BIAS = 1, EPI_RELU = 2, EPI_RELU_BIAS = 3 };

static __global__ void to_f16_kernel(const float *x, __half *y, int64_t n) {
    CU_GRID_STRIDE(i, n) { y[i] = __float2half_rn(x[i]); }
}

static __global__ void to_f32_kernel(const __half *x, float *y, int64_t n) {
    CU_GRID_STRIDE(i, n) { y[i] = __half2float(x[i]); }
}

static __global__ void copy_kernel(const unsigned char *x, unsigned char *y, int64_t n) {
    CU_GRID_STRIDE(i, n) { y[i] = x[i]; }
}

/* The part of the op cuBLASLt cannot express, over n outputs of y (of type TY): y = res + alpha *
 * act(t + bias) from the product t [., N] (f32); with ACT_GLU, y [., N/2] = res + alpha * glu(value,
 * gate) from t's columns j and N/2 + j (each + bias). t may be y (in place, f32 and no GLU only); t NULL
 * means a zero product (K = 0). */
template <typename TY>
static __global__ void epilogue_kernel(const float *t, const float *bias, const TY *res, TY *y, int64_t n, int64_t N,
                                       int act, float alpha) {
    const bool glu = act == ACT_GLU;
    const int64_t ny = glu ? N / 2 : N;
    CU_GRID_STRIDE(i, n) {
        float v;
        if (glu) {
            const int64_t r = i / ny, j = i - r * ny;
            float val = t ? t[r * N + j] : 0.0f, gate = t ? t[r * N + ny + j] : 0.0f;
            if (bias) {
                val += bias[j];
                gate += bias[ny + j];
            }
            v = alpha * cu_glu(val, gate);
        } else {
            v = t ? t[i] : 0.0f;
            if (bias)
                v += bias[i % N];
            v = alpha * cu_act(v, act);
        }
        if (res)
            v += cu_get(res, i);
        cu_put(y, i, v);
    }
}

template <typename TY>
static vkasr_status epilogue_launch(struct cu_backend *b, const float *t, const float *bias, const void *res, void *y,
                                    int64_t n, int64_t N, int act, float alpha) {
    epilogue_kernel<TY><<<cu_grid(b, (uint64_t)n, LIN_THREADS), LIN_THREADS, 0, b->stream>>>(
        t, bias, (const TY *)res, (TY *)y, n, N, act, alpha);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

/* epilogue_kernel for the op's y type. */
static vkasr_status epilogue(struct cu_backend *b, const struct op_linear *a, const float *t, const float *bias,
                             const void *res, void *y, int64_t n, int64_t N) {
    if (a->y.type == BE_F16)
        return epilogue_launch<__half>(b, t, bias, res, y, n, N, a->act, a->alpha);
    return epilogue_launch<float>(b, t, bias, res, y, n, N, a->act, a->alpha);
}

static bool aligned(const void *p) { return ((uintptr_t)p % LT_ALIGN) == 0; }

/* A copy of n bytes at p in scratch (256-byte aligned) when p is not LT_ALIGN-aligned. */
static vkasr_status aligned_copy(struct cu_backend *b, const void *p, uint64_t n, const void **out) {
    *out = p;
    if (aligned(p) || n == 0)
        return VKASR_OK;
    void *q;
    TRY(cu_scratch(b, n, &q));
    copy_kernel<<<cu_grid(b, n, LIN_THREADS), LIN_THREADS, 0, b->stream>>>((const unsigned char *)p, (unsigned char *)q,
                                                                          (int64_t)n);
    CU_LAUNCHED(b);
    *out = q;
    return VKASR_OK;
}

struct lt_call {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* A = w [K x N col-major, transposed], B = x [K x M], C/D = y [N x M] */
};

static void lt_call_free(struct lt_call *c) {
    if (c->op)
        cublasLtMatmulDescDestroy(c->op);
    if (c->la)
        cublasLtMatrixLayoutDestroy(c->la);
    if (c->lb)
        cublasLtMatrixLayoutDestroy(c->lb);
    if (c->lc)
        cublasLtMatrixLayoutDestroy(c->lc);
}

static vkasr_status lt_layouts(struct err *e, struct lt_call *c, cudaDataType_t ab, int64_t M, int64_t N, int64_t K) {
    CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(&c->la, ab, (uint64_t)K, (uint64_t)N, K));
    CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(&c->lb, ab, (uint64_t)K, (uint64_t)M, K));
    CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(&c->lc, CUDA_R_32F, (uint64_t)N, (uint64_t)M, N));
    return VKASR_OK;
}

static vkasr_status lt_desc(struct err *e, struct lt_call *c, int epi, const float *bias) {
    CUBLAS_CHECK(e, cublasLtMatmulDescCreate(&c->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    static const cublasLtEpilogue_t lt_epi[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU,
                                                CUBLASLT_EPILOGUE_RELU_BIAS};
    CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi[epi], sizeof lt_epi[epi]));
    if (epi & EPI_BIAS) {
        cudaDataType_t bt = CUDA_R_32F;
        CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    return VKASR_OK;
}

/* The algorithm for a shape: from the backend's cache, else from the heuristic (asked with M = m_key;
 * split-K excluded unless matvec) and cached. */
static void entry_free(struct cu_lt_entry *c) {
    struct lt_call d = {c->op, c->la, c->lb, c->lc};
    lt_call_free(&d);
    memset(c, 0, sizeof *c);
}

void cu_lt_cache_free(struct cu_backend *b) {
    for (int i = 0; i < CU_LT_CACHE; i++)
        entry_free(&b->lt_cache[i]);
}

static vkasr_status lt_algo(struct cu_backend *b, bool matvec, int64_t m_key, int64_t N, int64_t K, cudaDataType_t ab,
                            int epi, int beta, const float *bias, struct cu_lt_entry **out) {
    struct err *e = &b->base.err;
    const int64_t key = matvec ? -m_key : m_key; /* a matvec choice never serves a fixed-M one */
    struct cu_lt_entry *slot = NULL;
    for (int i = 0; i < CU_LT_CACHE; i++) {
        struct cu_lt_entry *c = &b->lt_cache[i];
        if (c->used && c->m_key == key && c->n == N && c->k == K && c->wtype == (int)ab && c->epilogue == epi &&
            c->beta == beta) {
            c->stamp = ++b->lt_stamp;
            *out = c;
            return VKASR_OK;
        }
        if (!slot || !c->used || (slot->used && c->stamp < slot->stamp))
            slot = c; /* a free entry, else the least recently used */
    }
    struct lt_call q;
    memset(&q, 0, sizeof q);
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    vkasr_status st = lt_desc(e, &q, epi, bias);
    if (st == VKASR_OK)
        st = lt_layouts(e, &q, ab, m_key, N, K);
    if (st == VKASR_OK) {
        uint64_t ws = CU_WORKSPACE_BYTES;
        uint32_t al = LT_ALIGN, red = CUBLASLT_REDUCTION_SCHEME_NONE;
        cublasStatus_t r = cublasLtMatmulPreferenceCreate(&pref);
        if (r == CUBLAS_STATUS_SUCCESS)
            r = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; r == CUBLAS_STATUS_SUCCESS &&
                                                                 a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
            r = cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al);
        if (r == CUBLAS_STATUS_SUCCESS && !matvec) /* a fixed summation order: no split-K */
            r = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red);
        if (r == CUBLAS_STATUS_SUCCESS)
            r = cublasLtMatmulAlgoGetHeuristic(b->lt, q.op, q.la, q.lb, q.lc, q.lc, pref, 1, &res, &got);
        if (r != CUBLAS_STATUS_SUCCESS)
            st = cublas_fail(e, r, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
        else if (got < 1)
            st = err_set(e, VKASR_ERR_UNSUPPORTED,
                         "op linear: cuBLASLt has no algorithm for N=%lld K=%lld (%s weights, epilogue %d)", (long long)N,
                         (long long)K, ab == CUDA_R_16F ? "f16" : "f32", epi);
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (st != VKASR_OK || !matvec) /* a matvec entry keeps its descriptors: its M is the call's */
        lt_call_free(&q);
    TRY(st);
    if (!matvec) { /* belt and braces: the chosen configuration must not split K */
        int32_t splitk = 0;
        size_t written = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                                 &written) == CUBLAS_STATUS_SUCCESS &&
            splitk > 1)
            return err_set(e, VKASR_ERR_INTERNAL,
                           "op linear: cuBLASLt chose split-K (%d) for N=%lld K=%lld despite the reduction mask", splitk,
                           (long long)N, (long long)K);
    }
    entry_free(slot);
    *slot = (struct cu_lt_entry){true, key, N, K, (int)ab, epi, beta, res.algo, ++b->lt_stamp,
                                 matvec ? q.op : NULL, matvec ? q.la : NULL, matvec ? q.lb : NULL, matvec ? q.lc : NULL};
    *out = slot;
    return VKASR_OK;
}

/* D = alpha * A B (+ beta C) with the epilogue: A = w, B = x (both of type ab), C = res, D = out. Without
 * the matvec hint, the algorithm chosen for M = LT_M_KEY; should cuBLASLt refuse it for this M, the one
 * chosen for this M (still without split-K; logged, as rows of such calls may then round differently). */
static vkasr_status lt_matmul(struct cu_backend *b, bool matvec, int64_t M, int64_t N, int64_t K, cudaDataType_t ab,
                              const void *w, const void *x, const float *bias, int epi, float alpha, const float *res,
                              float *out) {
    struct err *e = &b->base.err;
    int beta_on = res != NULL;
    float beta = beta_on ? 1.0f : 0.0f;
    if (matvec) { /* the entry's descriptors were made for this M: only the bias pointer changes */
        struct cu_lt_entry *ent;
        TRY(lt_algo(b, true, M, N, K, ab, epi, beta_on, bias, &ent));
        if (epi & EPI_BIAS)
            CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(ent->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CUBLAS_CHECK(e, cublasLtMatmul(b->lt, ent->op, &alpha, w, ent->la, x, ent->lb, &beta,
                                       res ? (const void *)res : out, ent->lc, out, ent->lc, &ent->algo,
                                       (void *)(uintptr_t)b->workspace, CU_WORKSPACE_BYTES, b->stream));
        return VKASR_OK;
    }
    struct lt_call c;
    memset(&c, 0, sizeof c);
    vkasr_status st = lt_desc(e, &c, epi, bias);
    if (st == VKASR_OK)
        st = lt_layouts(e, &c, ab, M, N, K);
    for (int attempt = 0; st == VKASR_OK && attempt < 2; attempt++) {
        struct cu_lt_entry *ent;
        st = lt_algo(b, false, attempt == 0 ? LT_M_KEY : M, N, K, ab, epi, beta_on, bias, &ent);
        if (st != VKASR_OK)
            break;
        cublasStatus_t r = cublasLtMatmul(b->lt, c.op, &alpha, w, c.la, x, c.lb, &beta, res ? (const void *)res : out,
                                          c.lc, out, c.lc, &ent->algo, (void *)(uintptr_t)b->workspace,
                                          CU_WORKSPACE_BYTES, b->stream);
        if (r == CUBLAS_STATUS_SUCCESS)
            break;
        if (r == CUBLAS_STATUS_NOT_SUPPORTED && attempt == 0 && M != LT_M_KEY) {
            LOG_WARN(b->d->base.log, "linear: cuBLASLt's algorithm for N=%lld K=%lld does not take M=%lld; using one "
                     "chosen for that M", (long long)N, (long long)K, (long long)M);
            continue;
        }
        st = cublas_fail(e, r, "cublasLtMatmul", __FILE__, __LINE__);
        break;
    }
    lt_call_free(&c);
    return st;
}

/* Where a chunk's operands and product go; the same for every chunk of a call (chunks start at multiples
 * of 4 rows, so each is aligned as row 0 is). */
struct lin_path {
    bool f16;      /* f16 weights: an f16 x x f16 w product                                     */
    bool x_conv;   /* x converted into scratch: f32 -> f16 (f16 weights), f16 -> f32 (f32 ones) */
    bool x_copy;   /* x copied to an aligned scratch buffer (as it is)                          */
    bool res_copy; /* res copied likewise (res != y; f32 y in cuBLASLt's epilogue only)        */
    bool whole;    /* the epilogue inside cuBLASLt (cleared for good when it has no algorithm) */
    bool tmp;      /* the product goes to scratch (y misaligned or f16, GLU; or res is y)      */
};

/* Rows [r0, r0 + M) of the op. Temporaries come from scratch and are released by the caller. */
static vkasr_status linear_rows(struct cu_backend *b, const struct op_linear *a, struct lin_path *path, const void *win,
                                int64_t r0, int64_t M) {
    const int64_t K = a->x.ne[1], N = a->w.ne[0], ny = a->act == ACT_GLU ? N / 2 : N, n = M * ny;
    const size_t xs = be_dtype_size(a->x.type), ys = be_dtype_size(a->y.type);
    const float *bias = a->bias.addr ? cu_ptr<float>(a->bias) : NULL;
    const void *res = a->res.addr ? (const void *)(cu_ptr<unsigned char>(a->res) + r0 * ny * ys) : NULL;
    const void *x = cu_ptr<unsigned char>(a->x) + r0 * K * xs;
    void *y = cu_ptr<unsigned char>(a->y) + r0 * ny * ys;
    const bool in_place = res && res == y;
    /* Operands as cuBLASLt takes them: x of the weights' type, every pointer 16-byte aligned. */
    const void *xin = x;
    vkasr_status st = VKASR_OK;
    if (path->x_conv) {
        void *xc;
        st = cu_scratch(b, (uint64_t)(M * K) * (path->f16 ? 2 : 4), &xc);
        if (st == VKASR_OK) {
            const unsigned grid = cu_grid(b, (uint64_t)(M * K), LIN_THREADS);
            if (path->f16)
                to_f16_kernel<<<grid, LIN_THREADS, 0, b->stream>>>((const float *)x, (__half *)xc, M * K);
            else
                to_f32_kernel<<<grid, LIN_THREADS, 0, b->stream>>>((const __half *)x, (float *)xc, M * K);
            cudaError_t r = cudaGetLastError();
            if (r != cudaSuccess)
                st = cu_fail(&b->base.err, r, path->f16 ? "to_f16_kernel" : "to_f32_kernel", __FILE__, __LINE__);
            xin = xc;
        }
    } else if (path->x_copy) {
        st = aligned_copy(b, xin, (uint64_t)(M * K) * xs, &xin);
    }
    if (st == VKASR_OK && path->res_copy) {
        const void *rc;
        st = aligned_copy(b, res, (uint64_t)n * 4, &rc);
        res = rc;
    }
    if (st != VKASR_OK)
        return st;
    cudaDataType_t ab = path->f16 ? CUDA_R_16F : CUDA_R_32F;
    if (path->whole) { /* f32 y, no GLU (cu_op_linear) */
        int epi = a->act == ACT_RELU ? (bias ? EPI_RELU_BIAS : EPI_RELU) : (bias ? EPI_BIAS : EPI_NONE);
        st = lt_matmul(b, false, M, N, K, ab, win, xin, bias, epi, a->alpha, (const float *)res, (float *)y);
        if (st != VKASR_ERR_UNSUPPORTED || epi == EPI_NONE)
            return st;
        err_clear(&b->base.err); /* no algorithm with that epilogue: below, for this chunk and the next */
        path->whole = false;
    }
    /* Product (+ bias) into y when y may be overwritten before the epilogue reads res, else into scratch;
     * then the epilogue kernel writes y. */
    float *t = (float *)y;
    if (path->tmp || in_place) {
        void *tp;
        TRY(cu_scratch(b, (uint64_t)(M * N) * 4, &tp));
        t = (float *)tp;
    }
    const float *late_bias = NULL; /* the bias, when cuBLASLt has no algorithm that adds it */
    st = lt_matmul(b, false, M, N, K, ab, win, xin, bias, bias ? EPI_BIAS : EPI_NONE, 1.0f, NULL, t);
    if (st == VKASR_ERR_UNSUPPORTED && bias) {
        err_clear(&b->base.err);
        late_bias = bias;
        st = lt_matmul(b, false, M, N, K, ab, win, xin, NULL, EPI_NONE, 1.0f, NULL, t);
    }
    TRY(st);
    return epilogue(b, a, t, late_bias, res, y, n, N);
}

/* Rows go through in chunks whose temporaries fit CU_OP_SCRATCH_BYTES (the scratch memory plans reserve
 * for an op, be_memory.op_scratch). Chunks start at multiples of 4 rows (each chunk aligned as the whole
 * call is, so all take the same path) and, without the matvec hint, cuBLASLt's algorithm does not depend
 * on M: a row's result does not depend on the chunking. */
vkasr_status cu_op_linear(struct cu_backend *b, const struct op_linear *a) {
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    if (M == 0 || N == 0)
        return VKASR_OK;
    if (a->matvec && a->act != ACT_GLU)
        return cu_gemv(b, a); /* every hinted product without GLU, at any M (cu_gemv.cu) */
    if (be_dtype_is_quant(a->w.type))
        return cu_op_linear_quant(b, a); /* w dequantized to f32 in scratch, then this function */
    const bool f16 = a->w.type == BE_F16, glu = a->act == ACT_GLU, y16 = a->y.type == BE_F16;
    const int64_t ny = glu ? N / 2 : N;
    b->op_label = f16 ? "linear_tc" : "linear";
    const float *bias = a->bias.addr ? cu_ptr<float>(a->bias) : NULL;
    const void *res = a->res.addr ? cu_ptr<void>(a->res) : NULL, *x = cu_ptr<void>(a->x);
    void *y = cu_ptr<void>(a->y);
    if (K == 0) /* no product: y = res + alpha * act(bias) */
        return epilogue(b, a, NULL, bias, res, y, M * ny, N);
    struct lin_path path;
    path.f16 = f16;
    path.x_conv = f16 != (a->x.type == BE_F16);
    path.x_copy = !path.x_conv && !aligned(x);
    /* Exactly the op in cuBLASLt's epilogue, for an f32 y without GLU: no activation (bias only when
     * alpha = 1, as cuBLASLt adds it after alpha), or ReLU with neither alpha nor a residual. A misaligned
     * y (tests only) takes the path through scratch. */
    path.whole = !y16 && !glu && aligned(y) &&
                 ((a->act == ACT_NONE && (!bias || a->alpha == 1.0f)) ||
                  (a->act == ACT_RELU && !res && a->alpha == 1.0f));
    path.res_copy = path.whole && res && res != y && !aligned(res);
    path.tmp = y16 || glu || !aligned(y);
    /* bytes per row of a chunk's temporaries (the product's whenever the path may need it) */
    const uint64_t x_row = path.x_conv   ? (uint64_t)K * (f16 ? 2 : 4)
                           : path.x_copy ? (uint64_t)K * be_dtype_size(a->x.type)
                                         : 0;
    const uint64_t per_row = x_row + (path.res_copy ? (uint64_t)N * 4 : 0) +
                             (path.tmp || (res && res == y) ? (uint64_t)N * 4 : 0);
    const uint64_t room = CU_OP_SCRATCH_BYTES - 3 * CU_TENSOR_ALIGN; /* three buffers, each 256-aligned */
    const uint64_t fit = per_row ? room / per_row : (uint64_t)M;
    const int64_t rows = fit >= (uint64_t)M ? M : (int64_t)(fit - fit % 4);
    if (rows == 0)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "linear: a row of x [K = %lld] -> y [N = %lld] needs %llu bytes of temporaries: fewer than "
                       "4 rows fit the op's %llu MiB of scratch",
                       (long long)K, (long long)N, (unsigned long long)per_row,
                       (unsigned long long)(CU_OP_SCRATCH_BYTES >> 20));
    uint64_t mark = be_mark(&b->base);
    /* A misaligned w (slices only tests make: weights are 256-aligned) is copied whole, beyond that bound. */
    const void *win = cu_ptr<void>(a->w);
    vkasr_status st = aligned_copy(b, win, be_nbytes(&a->w), &win);
    for (int64_t r0 = 0; st == VKASR_OK && r0 < M; r0 += rows) {
        uint64_t chunk = be_mark(&b->base);
        st = linear_rows(b, a, &path, win, r0, M - r0 < rows ? M - r0 : rows);
        be_release(&b->base, chunk); /* stream order: the next chunk's kernels run after these */
    }
    be_release(&b->base, mark);
    return st;
}
