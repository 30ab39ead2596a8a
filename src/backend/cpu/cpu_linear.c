/* cpu_linear.c — the CPU backend's linear and LSTM step: linear through the packed kernel (cpu_gemm.c)
 * on column panels of w, a panel per pool thread at a time, then the epilogue; the decoder's
 * matvec-hinted products and the LSTM step through cpu_gemv (an input's b + W_ih x from cpu_lstm_cache.c
 * when it repeats). Weights are read where they lie (f32, f16
 * widened inside the kernel's packing, blocks dequantized a panel segment at a time): no copy of the
 * model. A row's result never depends on how many rows a call has: each element's K order is its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/qblock.h"
#include "cpu_internal.h"

#define PANEL_ROWS 64   /* weight rows per matrix-vector pass (their x rows reused from cache)    */
/* x rows per product: each chunk packs the weights anew, so as many as a CPU step's chunk of a large
 * model's sublayer (512 rows of a 0.6B feed-forward, src/asr/steps.c); bounds a panel's product
 * buffer (ROW_CHUNK x its columns) and keeps A's k block (ROW_CHUNK x CPU_GEMM_KC) in the second-level
 * cache */
#define ROW_CHUNK 512

/* ---- linear ---------------------------------------------------------------------------------------- */

struct lin {
    const struct op_linear *a;
    const float *x;     /* [M, K] f32: x itself, or widened / rounded as the op defines          */
    int64_t M, K, N, Ny, pw; /* Ny: y's columns (N/2 with GLU); pw: panel width in y's columns     */
    bool glu;
    vkasr_status st;    /* VKASR_ERR_NO_MEMORY once a panel could not get its buffers             */
};

/* One row of the common case: y = act(v + bias) * alpha (+ res), each loop with its activation fixed,
 * so that those without a libm call vectorise (the same expressions, the same bits). */
#define EPI_ROW(ACT)                                                                                   \
    do {                                                                                               \
        if (bn && rr)                                                                                  \
            for (int64_t j = 0; j < n; j++)                                                            \
                yr[j] = rr[j] + cpu_act(vr[j] + bn[j], ACT) * alpha;                                   \
        else if (bn)                                                                                   \
            for (int64_t j = 0; j < n; j++)                                                            \
                yr[j] = cpu_act(vr[j] + bn[j], ACT) * alpha;                                           \
        else if (rr)                                                                                   \
            for (int64_t j = 0; j < n; j++)                                                            \
                yr[j] = rr[j] + cpu_act(vr[j] + 0.0f, ACT) * alpha;                                    \
        else                                                                                           \
            for (int64_t j = 0; j < n; j++)                                                            \
                yr[j] = cpu_act(vr[j] + 0.0f, ACT) * alpha;                                            \
    } while (0)

/* y[m, n0 .. n0+n) = epilogue(v [rows, ldv] (value columns), g (gate columns, GLU) ) for rows m0 ... */
CPU_KERNEL CPU_CLONES
static void epilogue(const struct lin *L, int64_t m0, int64_t rows, int64_t n0, int64_t n, const float *v,
                     const float *g, int64_t ldv) {
    const struct op_linear *a = L->a;
    const float *bias = a->bias.addr ? ref_f32(&a->bias) : NULL;
    if (!L->glu && a->y.type == BE_F32 && (!a->res.addr || a->res.type == BE_F32)) { /* the common case */
        const float alpha = a->alpha;
        for (int64_t m = 0; m < rows; m++) {
            const float *vr = v + m * ldv, *bn = bias ? bias + n0 : NULL;
            float *yr = ref_f32(&a->y) + (m0 + m) * L->Ny + n0;
            const float *rr = a->res.addr ? ref_f32(&a->res) + (m0 + m) * L->Ny + n0 : NULL;
            switch (a->act) {
            case ACT_NONE: EPI_ROW(ACT_NONE); break;
            case ACT_RELU: EPI_ROW(ACT_RELU); break;
            case ACT_SILU: EPI_ROW(ACT_SILU); break;
            default: EPI_ROW(a->act); break;
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

/* w's rows from row0 on (cpu_gemm_nt's B): f32 and f16 packed by the kernel's own packers, blocks
 * dequantized a row segment at a time. */
struct wsrc {
    const be_tensor *w;
    int64_t row0, K;
};

static void w_pack(const void *ctx, int64_t j0, int64_t nr, int64_t k0, int64_t kc, float *panel) {
    const struct wsrc *s = ctx;
    const be_tensor *w = s->w;
    if (w->type == BE_F32) {
        cpu_pack_f32(&(struct cpu_mat){ref_f32(w) + s->row0 * s->K, s->K}, j0, nr, k0, kc, panel);
        return;
    }
    if (w->type == BE_F16) {
        cpu_pack_f16(&(struct cpu_mat16){ref_u16(w) + s->row0 * s->K, s->K}, j0, nr, k0, kc, panel);
        return;
    }
    /* blocks: k0 and kc are multiples of the block (the kernel's KC is, and K is) */
    const int blk = be_dtype_block(w->type);
    const uint64_t bb = (uint64_t)be_dtype_block_bytes(w->type), rb = (uint64_t)(s->K / blk) * bb;
    float seg[CPU_GEMM_KC];
    for (int64_t r = 0; r < CPU_GEMM_NR; r++) {
        if (r < nr)
            qblock_dequant_row(be_dtype_ggml(w->type),
                               (const uint8_t *)(uintptr_t)w->addr + (uint64_t)(s->row0 + j0 + r) * rb +
                                   (uint64_t)(k0 / blk) * bb,
                               seg, kc);
        for (int64_t k = 0; k < kc; k++)
            panel[k * CPU_GEMM_NR + r] = r < nr ? seg[k] : 0.0f;
    }
}

/* y's columns [c0, c1) (matvec: cpu_gemv row by row, PANEL_ROWS weight rows at a time; else
 * cpu_gemm_nt in chunks of ROW_CHUNK rows). */
static void lin_columns(struct lin *L, int64_t c0, int64_t c1) {
    const be_tensor *w = &L->a->w;
    const int64_t n = c1 - c0, halves = L->glu ? 2 : 1;
    if (L->a->matvec) {
        const int64_t step = PANEL_ROWS, rows = L->M < ROW_CHUNK ? L->M : ROW_CHUNK;
        float *tmp = cpu_scratch_floats(CPU_SCRATCH_TMP, CPU_GEMV_TMP(L->K));
        float *v = cpu_scratch_floats(CPU_SCRATCH_OUT, (size_t)(halves * rows * step));
        if (!v || !tmp) {
            L->st = VKASR_ERR_NO_MEMORY; /* any thread's store: the op fails */
            return;
        }
        for (int64_t n0 = c0; n0 < c1; n0 += step) {
            const int64_t nn = c1 - n0 < step ? c1 - n0 : step;
            for (int64_t m0 = 0; m0 < L->M; m0 += rows) {
                const int64_t mr = L->M - m0 < rows ? L->M - m0 : rows;
                for (int64_t h = 0; h < halves; h++)
                    for (int64_t m = 0; m < mr; m++) /* row by row: each row's sums are its own */
                        cpu_gemv(w, (h ? L->Ny : 0) + n0, nn, L->K, L->x + (m0 + m) * L->K,
                                 v + h * rows * step + m * nn, false, tmp);
                epilogue(L, m0, mr, n0, nn, v, L->glu ? v + rows * step : NULL, nn);
            }
        }
        return;
    }
    const int64_t rows = L->M < ROW_CHUNK ? L->M : ROW_CHUNK;
    float *pack = cpu_scratch_floats(CPU_SCRATCH_PACK, cpu_gemm_pack_floats(n));
    float *v = cpu_scratch_floats(CPU_SCRATCH_OUT, (size_t)(halves * rows * n));
    if (!pack || !v) {
        L->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    const struct wsrc sv = {w, c0, L->K}, sg = {w, L->Ny + c0, L->K};
    for (int64_t m0 = 0; m0 < L->M; m0 += rows) {
        const int64_t mr = L->M - m0 < rows ? L->M - m0 : rows;
        cpu_gemm_nt(mr, n, L->K, L->x + m0 * L->K, L->K, w_pack, &sv, v, n, pack);
        if (L->glu)
            cpu_gemm_nt(mr, n, L->K, L->x + m0 * L->K, L->K, w_pack, &sg, v + rows * n, n, pack);
        epilogue(L, m0, mr, c0, n, v, L->glu ? v + rows * n : NULL, n);
    }
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
    /* with f16 weights an f32 x enters the product rounded to f16 (the op's rule) unless the session
     * is f32 (x_f32); an f16 x is widened */
    const bool round_x = a->w.type == BE_F16 && a->x.type == BE_F32 && !a->x_f32;
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
    /* panels: a few per thread (balance), at least 16 columns, whole packed panels */
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
    const float **half; /* [B]: row r's b + W_ih x from the cache, or NULL (computed here)          */
    float **store;      /* [B]: where row r's computed b + W_ih x goes for the cache, or NULL         */
    vkasr_status st;
};

static bool lstm_row_runs(const struct op_lstm_step *a, int64_t r) {
    return !a->gate.addr || ref_i32(&a->gate)[r * a->gate_stride] != 0;
}

/* Gate rows [g0, g1) of every running hypothesis: b + W_ih x + W_hh h, PANEL_ROWS rows at a time. */
static void lstm_panel(void *ctx, int64_t g0, int64_t g1) {
    struct lstm *S = ctx;
    const struct op_lstm_step *a = S->a;
    const int64_t G = 4 * S->P, kmax = S->In > S->P ? S->In : S->P;
    float *tmp = cpu_scratch_floats(CPU_SCRATCH_TMP, CPU_GEMV_TMP(kmax));
    if (!tmp) {
        S->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    for (int64_t n0 = g0; n0 < g1; n0 += PANEL_ROWS) {
        const int64_t n = g1 - n0 < PANEL_ROWS ? g1 - n0 : PANEL_ROWS;
        for (int64_t r = 0; r < S->B; r++) {
            if (!lstm_row_runs(a, r))
                continue;
            float *g = S->gates + r * G + n0;
            if (S->half[r]) { /* (b + W_ih x) + W_hh h, the sums below in the same order */
                memcpy(g, S->half[r] + n0, (size_t)n * sizeof *g);
            } else {
                memcpy(g, ref_f32(&a->b) + n0, (size_t)n * sizeof *g);
                cpu_gemv(&a->w_ih, n0, n, S->In, ref_f32(&a->x) + r * S->In, g, true, tmp);
                if (S->store[r])
                    memcpy(S->store[r] + n0, g, (size_t)n * sizeof *g);
            }
            cpu_gemv(&a->w_hh, n0, n, S->P, ref_f32(&a->h) + r * S->P, g, true, tmp);
        }
    }
}

static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

vkasr_status cpu_lstm_step(struct backend *b, const struct op_lstm_step *a) {
    struct lstm S = {.a = a, .B = a->h.nd == 2 ? a->h.ne[0] : 1, .P = a->h.ne[a->h.nd - 1], .In = a->x.ne[a->x.nd - 1]};
    const int64_t G = 4 * S.P, nb = S.B > 0 ? S.B : 1;
    S.gates = malloc((size_t)(S.B * G > 0 ? S.B * G : 1) * sizeof *S.gates);
    S.half = calloc((size_t)nb, sizeof *S.half);
    S.store = calloc((size_t)nb, sizeof *S.store);
    int *slot = malloc((size_t)nb * sizeof *slot);
    if (!S.gates || !S.half || !S.store || !slot) {
        free(S.gates);
        free(S.half);
        free(S.store);
        free(slot);
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "lstm_step: out of host memory for the gates [%lld, %lld]",
                       (long long)S.B, (long long)G);
    }
    struct cpu_lstm_cache **cache = &((struct cpu_backend *)b)->lstm;
    /* the cache is keyed by the weights' addresses: only weights that outlive the backend unchanged
     * (the model's), never its scratch, whose addresses come back with other contents */
    struct be_arena_block blk;
    const bool cacheable = !be_arena_find(&b->scratch, a->w_ih.addr, 1, &blk) &&
                           !be_arena_find(&b->scratch, a->b.addr, 1, &blk);
    for (int64_t r = 0; r < S.B; r++) {
        slot[r] = -1;
        if (cacheable && lstm_row_runs(a, r))
            S.half[r] = cpu_lstm_cache_find(cache, (const void *)(uintptr_t)a->w_ih.addr,
                                            (const void *)(uintptr_t)a->b.addr, ref_f32(&a->x) + r * S.In, S.In, G,
                                            &S.store[r], &slot[r]);
    }
    /* panels of rows, claimed by whichever thread is free (a few per thread) */
    cpu_pool_run(cpu_pool_of(b), G, PANEL_ROWS, lstm_panel, &S);
    for (int64_t r = 0; r < S.B && S.st == VKASR_OK; r++)
        if (S.store[r])
            cpu_lstm_cache_commit(*cache, slot[r]);
    free(S.half);
    free(S.store);
    free(slot);
    if (S.st != VKASR_OK) {
        free(S.gates);
        return err_set(&b->err, S.st, "lstm_step: out of host memory for a weight row in f32");
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
