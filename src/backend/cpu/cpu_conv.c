/* cpu_conv.c — the CPU backend's convolutions: the depthwise time convolution (op_dwconv1d) and the
 * subsampling's strided 3x3 convs (op_conv2d_s2, op_dwconv2d_s2). Output rows in parallel, each output's
 * channels accumulated in f32 tap by tap in a fixed order (the weights transposed tap-major once per
 * call, so the channel loop is contiguous); the reference's rules for segments, halo rows and padding,
 * the causal forms (NeMo's causal convolutions) included. */
#include <math.h>
#include <stdlib.h>

#include "cpu_internal.h"

struct dw {
    const struct op_dwconv1d *a;
    const float *wt; /* [K, C] */
    int64_t T, C, K;
    vkasr_status st;
};


CPU_KERNEL CPU_CLONES static void dw_rows(void *ctx, int64_t t0, int64_t t1) {
    struct dw *S = ctx;
    const struct op_dwconv1d *a = S->a;
    const int64_t T = S->T, C = S->C, K = S->K, half = a->causal ? K - 1 : K / 2; /* causal: rows t-K+1 .. t */
    const float *bias = ref_f32(&a->b);
    float *restrict acc = malloc((size_t)C * sizeof *acc);
    if (!acc) {
        S->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    const bool f32 = a->x.type == BE_F32;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = 0, hi = T; /* the rows a tap may read: all, or those of t's segment */
        if (a->seg.addr) {
            const int64_t sg = ref_seg_find(&a->seg, a->row0 + t), *o = ref_i64(&a->seg);
            lo = o[sg] - a->row0 > 0 ? o[sg] - a->row0 : 0;
            hi = o[sg + 1] - a->row0 < T ? o[sg + 1] - a->row0 : T;
        }
        for (int64_t c = 0; c < C; c++)
            acc[c] = bias[c];
        for (int64_t k = 0; k < K; k++) {
            const int64_t s = t - half + k;
            if (s < lo || s >= hi)
                continue;
            const float *restrict w = S->wt + k * C;
            if (f32) {
                const float *restrict x = ref_f32(&a->x) + s * C;
                for (int64_t c = 0; c < C; c++)
                    acc[c] += w[c] * x[c];
            } else {
                for (int64_t c = 0; c < C; c++)
                    acc[c] += w[c] * cpu_get(&a->x, (uint64_t)(s * C + c));
            }
        }
        for (int64_t c = 0; c < C; c++)
            cpu_put(&a->y, (uint64_t)(t * C + c), cpu_act(acc[c], a->act));
    }
    free(acc);
}

vkasr_status cpu_dwconv1d(struct backend *b, const struct op_dwconv1d *a) {
    struct dw S = {.a = a, .T = a->x.ne[0], .C = a->x.ne[1], .K = a->w.ne[1]};
    float *wt = malloc((size_t)(S.K * S.C > 0 ? S.K * S.C : 1) * sizeof *wt);
    if (!wt)
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "dwconv1d: out of host memory for the weights [%lld, %lld]",
                       (long long)S.K, (long long)S.C);
    const float *w = ref_f32(&a->w);
    for (int64_t c = 0; c < S.C; c++)
        for (int64_t k = 0; k < S.K; k++)
            wt[k * S.C + c] = w[c * S.K + k];
    S.wt = wt;
    int64_t grain = 16384 / (S.C * S.K > 0 ? S.C * S.K : 1);
    cpu_pool_run(cpu_pool_of(b), S.T, grain < 1 ? 1 : grain, dw_rows, &S);
    free(wt);
    if (S.st != VKASR_OK)
        return err_set(&b->err, S.st, "dwconv1d: out of host memory for a row's %lld channels", (long long)S.C);
    return VKASR_OK;
}

/* ---- the subsampling's strided 3x3 convs: output rows in parallel, channels innermost ---------------- */

/* Where output row R's input rows come from (the reference's rule, ref_conv.c): the image's row g is
 * global row base + g, valid in [0, len). */
static void conv_source(const be_tensor *x_seg, const be_tensor *y_seg, int64_t x_len, int64_t R, int64_t *r,
                        int64_t *base, int64_t *len) {
    if (!x_seg->addr) {
        *r = R;
        *base = 0;
        *len = x_len;
        return;
    }
    const int64_t s = ref_seg_find(y_seg, R), *xo = ref_i64(x_seg);
    *r = R - ref_i64(y_seg)[s];
    *base = xo[s];
    *len = xo[s + 1] - xo[s];
}

struct s2 {
    const be_tensor *x, *y, *x_seg, *y_seg;
    const float *wt, *bias; /* wt [9, C]: tap-major */
    int64_t x_row0, x_len, y_row0;
    int act;
    int64_t pad;            /* rows and columns before the image: 1, or 2 when causal          */
    bool depthwise;         /* dwconv2d_s2: x [Hx, W, C]; else conv2d_s2: x [Hx, W]            */
    vkasr_status st;
};

CPU_KERNEL CPU_CLONES static void s2_rows(void *ctx, int64_t r0, int64_t r1) {
    struct s2 *S = ctx;
    const int64_t Wo = S->y->ne[1], C = S->y->ne[2], W = S->x->ne[1], Hx = S->x->ne[0];
    const int64_t xrow = S->depthwise ? W * C : W;
    float *restrict acc = malloc((size_t)C * sizeof *acc);
    if (!acc) {
        S->st = VKASR_ERR_NO_MEMORY;
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t R, base, len;
        conv_source(S->x_seg, S->y_seg, S->x_len, S->y_row0 + r, &R, &base, &len);
        int64_t rows[3]; /* element offsets of the three input rows, -1: zero */
        for (int i = 0; i < 3; i++) {
            const int64_t g = 2 * R - S->pad + i;
            rows[i] = g < 0 || g >= len || base + g < S->x_row0 || base + g >= S->x_row0 + Hx
                          ? -1
                          : (base + g - S->x_row0) * xrow;
        }
        for (int64_t o = 0; o < Wo; o++) {
            for (int64_t c = 0; c < C; c++)
                acc[c] = S->bias[c];
            for (int i = 0; i < 3; i++) {
                if (rows[i] < 0)
                    continue;
                for (int j = 0; j < 3; j++) {
                    const int64_t col = 2 * o - S->pad + j;
                    if (col < 0 || col >= W)
                        continue;
                    const float *restrict w = S->wt + (i * 3 + j) * C;
                    if (!S->depthwise) {
                        const float xv = cpu_get(S->x, (uint64_t)(rows[i] + col));
                        for (int64_t c = 0; c < C; c++)
                            acc[c] += w[c] * xv;
                    } else if (S->x->type == BE_F32) {
                        const float *restrict xv = ref_f32(S->x) + rows[i] + col * C;
                        for (int64_t c = 0; c < C; c++)
                            acc[c] += w[c] * xv[c];
                    } else {
                        for (int64_t c = 0; c < C; c++)
                            acc[c] += w[c] * cpu_get(S->x, (uint64_t)(rows[i] + col * C + c));
                    }
                }
            }
            const uint64_t yo = (uint64_t)((r * Wo + o) * C);
            if (S->y->type == BE_F32) {
                float *y = ref_f32(S->y) + yo;
                for (int64_t c = 0; c < C; c++)
                    y[c] = cpu_act(acc[c], S->act);
            } else {
                for (int64_t c = 0; c < C; c++)
                    cpu_put(S->y, yo + (uint64_t)c, cpu_act(acc[c], S->act));
            }
        }
    }
    free(acc);
}

static vkasr_status run_s2(struct backend *b, struct s2 *S, const be_tensor *w, const char *op) {
    const int64_t C = S->y->ne[2];
    float *wt = malloc((size_t)(9 * C > 0 ? 9 * C : 1) * sizeof *wt);
    if (!wt)
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "%s: out of host memory for the weights [%lld, 9]", op,
                       (long long)C);
    for (int64_t c = 0; c < C; c++)
        for (int t = 0; t < 9; t++)
            wt[t * C + c] = ref_f32(w)[c * 9 + t];
    S->wt = wt;
    const int64_t per_row = S->y->ne[1] * C * 9;
    const int64_t grain = 16384 / (per_row > 0 ? per_row : 1);
    cpu_pool_run(cpu_pool_of(b), S->y->ne[0], grain < 1 ? 1 : grain, s2_rows, S);
    free(wt);
    if (S->st != VKASR_OK)
        return err_set(&b->err, S->st, "%s: out of host memory for a row's %lld channels", op, (long long)C);
    return VKASR_OK;
}

vkasr_status cpu_conv2d_s2(struct backend *b, const struct op_conv2d_s2 *a) {
    struct s2 S = {.x = &a->x, .y = &a->y, .x_seg = &a->x_seg, .y_seg = &a->y_seg, .bias = ref_f32(&a->b),
                   .x_row0 = a->x_row0, .x_len = a->x_len, .y_row0 = a->y_row0, .act = a->act,
                   .pad = a->causal ? 2 : 1};
    return run_s2(b, &S, &a->w, "conv2d_s2");
}

vkasr_status cpu_dwconv2d_s2(struct backend *b, const struct op_dwconv2d_s2 *a) {
    struct s2 S = {.x = &a->x, .y = &a->y, .x_seg = &a->x_seg, .y_seg = &a->y_seg, .bias = ref_f32(&a->b),
                   .x_row0 = a->x_row0, .x_len = a->x_len, .y_row0 = a->y_row0, .act = a->act,
                   .pad = a->causal ? 2 : 1, .depthwise = true};
    return run_s2(b, &S, &a->w, "dwconv2d_s2");
}
