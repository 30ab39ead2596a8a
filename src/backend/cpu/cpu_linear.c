/* cpu_linear.c — the CPU backend's matrix products: linear through OpenBLAS (sgemm on column panels of
 * w, one panel per pool thread at a time, then the epilogue; sgemv row by row for the decoder's
 * matvec-hinted products) and the LSTM step through sgemv. F16 and block-quantized weights are widened
 * to f32 one panel at a time (a panel of at most PANEL_WIDEN rows: memory of a panel per thread, not
 * of the model); f32 weights are read in place. A row's result never depends on how many rows a call
 * has: the K order of a product is sgemm's or sgemv's for that row alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/qblock.h"
#include "cpu_internal.h"

#define PANEL_WIDEN 64  /* weight rows widened to f32 at a time (f16, quantized)                 */
#define ROW_CHUNK 256   /* x rows per sgemm: bounds a panel's product buffer                    */

/* IEEE binary16 bits to float, exactly (subnormals, infinities, NaN), without a branch per value. */
static inline float h2f(uint16_t h) {
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

void cpu_row_f32(const be_tensor *t, int64_t row, int64_t n, float *out) {
    if (t->type == BE_F32) {
        memcpy(out, ref_f32(t) + row * n, (size_t)n * sizeof *out);
    } else if (t->type == BE_F16) {
        const uint16_t *s = ref_u16(t) + row * n;
        for (int64_t i = 0; i < n; i++)
            out[i] = h2f(s[i]);
    } else {
        const uint64_t rb = (uint64_t)(n / be_dtype_block(t->type)) * (uint64_t)be_dtype_block_bytes(t->type);
        qblock_dequant_row(be_dtype_ggml(t->type), (const uint8_t *)(uintptr_t)t->addr + (uint64_t)row * rb, out, n);
    }
}


/* ---- linear ---------------------------------------------------------------------------------------- */

struct lin {
    const struct op_linear *a;
    const float *x;     /* [M, K] f32: x itself, or widened / rounded as the op defines          */
    int64_t M, K, N, Ny, pw; /* Ny: y's columns (N/2 with GLU); pw: panel width in y's columns     */
    bool glu;
    vkasr_status st;    /* VKASR_ERR_NO_MEMORY once a panel could not get its buffers             */
};

/* The weight rows [n0, n0 + n) as f32: w itself when it is f32, else widened into buf. */
static const float *w_rows(const be_tensor *w, int64_t n0, int64_t n, int64_t K, float *buf) {
    if (w->type == BE_F32)
        return ref_f32(w) + n0 * K;
    for (int64_t i = 0; i < n; i++)
        cpu_row_f32(w, n0 + i, K, buf + i * K);
    return buf;
}

/* y[m, n0 .. n0+n) = epilogue(v [rows, ldv] (value columns), g (gate columns, GLU) ) for rows m0 ... */
CPU_CLONES static void epilogue(const struct lin *L, int64_t m0, int64_t rows, int64_t n0, int64_t n, const float *v,
                     const float *g, int64_t ldv) {
    const struct op_linear *a = L->a;
    const float *bias = a->bias.addr ? ref_f32(&a->bias) : NULL;
    if (!L->glu && a->y.type == BE_F32 && (!a->res.addr || a->res.type == BE_F32)) { /* the common case */
        for (int64_t m = 0; m < rows; m++) {
            const float *vr = v + m * ldv;
            float *yr = ref_f32(&a->y) + (m0 + m) * L->Ny + n0;
            const float *rr = a->res.addr ? ref_f32(&a->res) + (m0 + m) * L->Ny + n0 : NULL;
            for (int64_t j = 0; j < n; j++) {
                float r = cpu_act(vr[j] + (bias ? bias[n0 + j] : 0.0f), a->act) * a->alpha;
                yr[j] = rr ? rr[j] + r : r;
            }
        }
        return;
    }
    for (int64_t m = 0; m < rows; m++)
        for (int64_t j = 0; j < n; j++) {
            float r = v[m * ldv + j] + (bias ? bias[n0 + j] : 0.0f);
            if (L->glu) { /* as linear, then op_glu (the reference's: in double, rounded once) */
                float gt = g[m * ldv + j] + (bias ? bias[L->Ny + n0 + j] : 0.0f);
                r = (float)((double)r / (1.0 + exp(-(double)gt)));
            } else {
                r = cpu_act(r, a->act);
            }
            r *= a->alpha;
            const uint64_t o = (uint64_t)((m0 + m) * L->Ny + n0 + j);
            if (a->res.addr)
                r += cpu_get(&a->res, o);
            cpu_put(&a->y, o, r);
        }
}

/* w's rows from row0 on, widened segment by segment (cpu_gemm_nt's B). */
struct wsrc {
    const be_tensor *w;
    int64_t row0, K;
};

static const float *w_seg(const void *ctx, int64_t row, int64_t k0, int64_t kc, float *tmp) {
    const struct wsrc *s = ctx;
    const be_tensor *w = s->w;
    const int64_t r = s->row0 + row;
    if (w->type == BE_F32)
        return ref_f32(w) + r * s->K + k0;
    if (w->type == BE_F16) {
        const uint16_t *h = ref_u16(w) + r * s->K + k0;
        for (int64_t k = 0; k < kc; k++)
            tmp[k] = h2f(h[k]);
        return tmp;
    }
    /* blocks: k0 and kc are multiples of the block (the kernel's KC is, and K is) */
    const int blk = be_dtype_block(w->type);
    const uint64_t rb = (uint64_t)(s->K / blk) * (uint64_t)be_dtype_block_bytes(w->type);
    const uint8_t *src = (const uint8_t *)(uintptr_t)w->addr + (uint64_t)r * rb +
                         (uint64_t)(k0 / blk) * (uint64_t)be_dtype_block_bytes(w->type);
    qblock_dequant_row(be_dtype_ggml(w->type), src, tmp, kc);
    return tmp;
}

/* y's columns [c0, c1) (matvec: the weight rows widened PANEL_WIDEN at a time, sgemv row by row; else
 * cpu_gemm_nt in chunks of ROW_CHUNK rows). */
static void lin_columns(struct lin *L, int64_t c0, int64_t c1) {
    const be_tensor *w = &L->a->w;
    const int64_t n = c1 - c0, halves = L->glu ? 2 : 1;
    if (L->a->matvec) {
        const int64_t step = PANEL_WIDEN, rows = L->M < ROW_CHUNK ? L->M : ROW_CHUNK;
        const bool widen = w->type != BE_F32;
        float *wb = widen ? cpu_alloc_floats((size_t)(halves * step * L->K)) : NULL;
        float *v = cpu_alloc_floats((size_t)(halves * rows * step));
        if (!v || (widen && !wb)) {
            free(wb);
            free(v);
            L->st = VKASR_ERR_NO_MEMORY; /* any thread's store: the op fails */
            return;
        }
        for (int64_t n0 = c0; n0 < c1; n0 += step) {
            const int64_t nn = c1 - n0 < step ? c1 - n0 : step;
            const float *wv = w_rows(w, n0, nn, L->K, wb);
            const float *wg = L->glu ? w_rows(w, L->Ny + n0, nn, L->K, wb ? wb + step * L->K : NULL) : NULL;
            for (int64_t m0 = 0; m0 < L->M; m0 += rows) {
                const int64_t mr = L->M - m0 < rows ? L->M - m0 : rows;
                for (int64_t h = 0; h < halves; h++)
                    for (int64_t m = 0; m < mr; m++) /* row by row: each row's sums are sgemv's alone */
                        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)nn, (blasint)L->K, 1.0f, h ? wg : wv,
                                    (blasint)L->K, L->x + (m0 + m) * L->K, 1, 0.0f, v + h * rows * step + m * nn, 1);
                epilogue(L, m0, mr, n0, nn, v, wg ? v + rows * step : NULL, nn);
            }
        }
        free(wb);
        free(v);
        return;
    }
    const int64_t rows = L->M < ROW_CHUNK ? L->M : ROW_CHUNK;
    float *pack = cpu_alloc_floats(cpu_gemm_pack_floats(n));
    float *v = cpu_alloc_floats((size_t)(halves * rows * n));
    if (!pack || !v) {
        free(pack);
        free(v);
        L->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    const struct wsrc sv = {w, c0, L->K}, sg = {w, L->Ny + c0, L->K};
    for (int64_t m0 = 0; m0 < L->M; m0 += rows) {
        const int64_t mr = L->M - m0 < rows ? L->M - m0 : rows;
        cpu_gemm_nt(mr, n, L->K, L->x + m0 * L->K, L->K, w_seg, &sv, v, n, pack);
        if (L->glu)
            cpu_gemm_nt(mr, n, L->K, L->x + m0 * L->K, L->K, w_seg, &sg, v + rows * n, n, pack);
        epilogue(L, m0, mr, c0, n, v, L->glu ? v + rows * n : NULL, n);
    }
    free(pack);
    free(v);
}

static void lin_panel(void *ctx, int64_t p0, int64_t p1) {
    struct lin *L = ctx;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t c0 = p * L->pw, c1 = c0 + L->pw < L->Ny ? c0 + L->pw : L->Ny;
        lin_columns(L, c0, c1);
    }
}

vkasr_status cpu_linear(struct backend *b, const struct op_linear *a) {
    struct lin L = {.a = a, .M = a->x.ne[0], .K = a->x.ne[1], .N = a->w.ne[0], .glu = a->act == ACT_GLU};
    L.Ny = L.glu ? L.N / 2 : L.N;
    if (L.M == 0 || L.Ny == 0)
        return VKASR_OK;
    /* with f16 weights an f32 x enters the product rounded to f16 (the op's rule); an f16 x is widened */
    const bool round_x = a->w.type == BE_F16 && a->x.type == BE_F32;
    float *xc = NULL;
    if (a->x.type != BE_F32 || round_x) {
        const uint64_t n = (uint64_t)L.M * (uint64_t)L.K;
        if (!(xc = malloc((size_t)(n ? n : 1) * sizeof *xc)))
            return err_set(&b->err, VKASR_ERR_NO_MEMORY, "linear: out of host memory for x [%lld, %lld] in f32",
                           (long long)L.M, (long long)L.K);
        for (uint64_t i = 0; i < n; i++)
            xc[i] = round_x ? half_to_float(float_to_half(ref_f32(&a->x)[i])) : cpu_get(&a->x, i);
    }
    L.x = xc ? xc : ref_f32(&a->x);
    /* panels: a few per thread (balance), at least 16 columns; PANEL_WIDEN-aligned for widened weights */
    const int threads = cpu_pool_threads(cpu_pool_of(b));
    int64_t pw = (L.Ny + 2 * threads - 1) / (2 * threads);
    pw = pw < 16 ? 16 : (pw + 15) / 16 * 16;
    L.pw = pw;
    const int64_t panels = (L.Ny + pw - 1) / pw;
    /* one thread for products too small to share */
    const double macs = (double)L.M * (double)L.N * (double)L.K;
    cpu_pool_run(cpu_pool_of(b), panels, macs < 2e5 ? panels : 1, lin_panel, &L);
    free(xc);
    if (L.st != VKASR_OK)
        return err_set(&b->err, L.st, "linear: out of host memory for a [%lld, %lld] weight panel's product",
                       (long long)L.M, (long long)pw);
    return VKASR_OK;
}

/* ---- LSTM step -------------------------------------------------------------------------------------- */

struct lstm {
    const struct op_lstm_step *a;
    int64_t B, P, In;
    float *gates;       /* [B, 4P]: b + W_ih x + W_hh h of each row that runs                      */
    vkasr_status st;
};

static bool lstm_row_runs(const struct op_lstm_step *a, int64_t r) {
    return !a->gate.addr || ref_i32(&a->gate)[r * a->gate_stride] != 0;
}

/* Gate rows [g0, g1) of every running hypothesis: W rows widened in sub-panels where not f32. */
static void lstm_panel(void *ctx, int64_t g0, int64_t g1) {
    struct lstm *S = ctx;
    const struct op_lstm_step *a = S->a;
    const int64_t G = 4 * S->P;
    const bool widen = a->w_ih.type != BE_F32 || a->w_hh.type != BE_F32;
    const int64_t step = widen ? PANEL_WIDEN : g1 - g0, kmax = S->In > S->P ? S->In : S->P;
    float *wb = widen ? malloc((size_t)(step * kmax) * sizeof *wb) : NULL;
    if (widen && !wb) {
        S->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    for (int64_t n0 = g0; n0 < g1; n0 += step) {
        const int64_t n = g1 - n0 < step ? g1 - n0 : step;
        for (int pass = 0; pass < 2; pass++) { /* W_ih x, then W_hh h */
            const be_tensor *w = pass ? &a->w_hh : &a->w_ih;
            const int64_t K = pass ? S->P : S->In;
            const float *wr = w_rows(w, n0, n, K, wb);
            for (int64_t r = 0; r < S->B; r++) {
                if (!lstm_row_runs(a, r))
                    continue;
                const float *v = pass ? ref_f32(&a->h) + r * S->P : ref_f32(&a->x) + r * S->In;
                float *g = S->gates + r * G + n0;
                if (!pass)
                    memcpy(g, ref_f32(&a->b) + n0, (size_t)n * sizeof *g);
                cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)K, 1.0f, wr, (blasint)K, v, 1, 1.0f, g, 1);
            }
        }
    }
    free(wb);
}

static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

vkasr_status cpu_lstm_step(struct backend *b, const struct op_lstm_step *a) {
    struct lstm S = {.a = a, .B = a->h.nd == 2 ? a->h.ne[0] : 1, .P = a->h.ne[a->h.nd - 1], .In = a->x.ne[a->x.nd - 1]};
    const int64_t G = 4 * S.P;
    if (!(S.gates = malloc((size_t)(S.B * G > 0 ? S.B * G : 1) * sizeof *S.gates)))
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "lstm_step: out of host memory for the gates [%lld, %lld]",
                       (long long)S.B, (long long)G);
    const int threads = cpu_pool_threads(cpu_pool_of(b));
    int64_t chunk = (G + threads - 1) / threads;
    chunk = chunk < PANEL_WIDEN ? PANEL_WIDEN : (chunk + PANEL_WIDEN - 1) / PANEL_WIDEN * PANEL_WIDEN;
    cpu_pool_run(cpu_pool_of(b), G, chunk, lstm_panel, &S);
    if (S.st != VKASR_OK) {
        free(S.gates);
        return err_set(&b->err, S.st, "lstm_step: out of host memory widening a weight panel");
    }
    for (int64_t r = 0; r < S.B; r++) {
        if (!lstm_row_runs(a, r))
            continue;
        const float *g = S.gates + r * G, *c = ref_f32(&a->c) + r * S.P;
        float *ho = ref_f32(&a->h_out) + r * S.P, *co = ref_f32(&a->c_out) + r * S.P;
        for (int64_t j = 0; j < S.P; j++) {
            const float i = sigm(g[j]), f = sigm(g[S.P + j]), gg = tanhf(g[2 * S.P + j]), o = sigm(g[3 * S.P + j]);
            const float cn = f * c[j] + i * gg;
            co[j] = cn;
            ho[j] = o * tanhf(cn);
        }
    }
    free(S.gates);
    return VKASR_OK;
}
