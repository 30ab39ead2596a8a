/* test_ops_conv.c — convolutions on Vulkan vs the C reference: the subsampling's strided 3x3 convs
 * (conv2d_s2, dwconv2d_s2; channels-last, global row coordinates) and the depthwise time conv
 * (dwconv1d), with f32 and f16 inputs and outputs. Also checks that the three-stage subsampling chain
 * computed in halo tiles (spec §2.4: encoder rows [a, b) need mel rows [8a-7, 8b-1]) is bit-identical
 * to the untiled Vulkan run, with f32 and with f16 intermediates, and the packed batches of all three
 * (segment tables): against the reference, each image or segment bit-identical to a run on it alone,
 * and a tile across image boundaries equal to the whole run.
 *
 * Tolerance: NMSE 1e-10 against the double-precision reference for f32 outputs. Each output is a sum
 * of at most 9 (2-D) or K (1-D) f32 products plus a bias, so the f32 error is a few ulp (measured NMSE
 * <= 1.2e-14); 1e-10 still leaves room for any summation order or fma contraction a driver picks, while
 * a wrong tap, row or channel gives NMSE > 1e-3. f16 outputs: th_check_f16 (NMSE F16_TOL, at most
 * F16_DIFFER of the elements differing: those at a rounding boundary). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

#define TOL 1e-10
#define F16_TOL 1e-8
#define F16_DIFFER 0.01

static double worst_nmse[3];
/* The cases below run with causal padding while causal_cases runs them (NeMo's causal_downsampling and
 * causal depthwise conv): every op gets .causal = g_causal, and the shapes and halo rules follow it. */
static bool g_causal;

/* Output length of a stride-2 stage: ceil(n/2), or floor(n/2)+1 (causal). */
static int64_t s2(int64_t n) { return g_causal ? n / 2 + 1 : (n + 1) / 2; }

static void vk_fail(struct th *h, const char *what) {
    printf("FAIL [%s]: %s: %s\n", h->name, what, h->be[TH_DEV]->err.msg);
    h->failures++;
}

/* Runs an op on the Vulkan backend only (tiles are compared with the untiled Vulkan result). */
static bool vk_run(struct th *h, enum op_id id, const void *args) {
    h->checks++;
    if (be_run(h->be[TH_DEV], id, args) || be_sync(h->be[TH_DEV])) {
        vk_fail(h, op_name(id));
        return false;
    }
    return true;
}

static void *vk_fetch(struct th *h, const struct th_tensor *t) {
    uint64_t bytes = be_nbytes(&t->side[TH_DEV]);
    void *p = malloc(bytes ? bytes : 4);
    if (!p)
        exit(1);
    if (be_download(h->be[TH_DEV], p, t->side[TH_DEV].addr, bytes)) {
        fprintf(stderr, "FATAL: download: %s\n", h->be[TH_DEV]->err.msg);
        exit(1);
    }
    return p;
}

static const char *tn(be_dtype t) { return t == BE_F16 ? "f16" : "f32"; }

/* th_check plus the measured NMSE (out->host holds the reference after th_check); f16 outputs:
 * th_check_f16. */
static void check(struct th *h, struct th_tensor *out, int op_slot) {
    if (out->type == BE_F16) {
        th_check_f16(h, out, F16_TOL, F16_DIFFER);
        return;
    }
    if (!th_check(h, out, TOL))
        return;
    uint64_t n = be_numel(&out->side[TH_REF]);
    float *v = vk_fetch(h, out);
    const float *r = out->host;
    double se = 0, sr = 0;
    for (uint64_t i = 0; i < n; i++) {
        se += ((double)v[i] - r[i]) * ((double)v[i] - r[i]);
        sr += (double)r[i] * r[i];
    }
    double nmse = sr > 0 ? se / sr : se;
    if (nmse > worst_nmse[op_slot])
        worst_nmse[op_slot] = nmse;
    free(v);
}

static void conv2d_case(struct th *h, int64_t hx, int64_t w, int64_t c, int64_t x_row0, int64_t x_len, int64_t y_row0,
                        int64_t hy, int act, be_dtype xt, be_dtype yt) {
    th_case(h, "conv2d_s2%s x[%lld,%lld] C=%lld x_row0=%lld x_len=%lld y_row0=%lld Hy=%lld act=%d %s -> %s",
            g_causal ? " causal" : "", (long long)hx, (long long)w, (long long)c, (long long)x_row0, (long long)x_len,
            (long long)y_row0, (long long)hy, act, tn(xt), tn(yt));
    int64_t wo = s2(w);
    struct th_tensor *x = th_input(h, xt, 2, TH_SHAPE(hx, w), -1.0f, 1.0f);
    struct th_tensor *wt = th_input(h, BE_F32, 2, TH_SHAPE(c, 9), -0.5f, 0.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(c), -0.2f, 0.2f);
    struct th_tensor *y = th_output(h, yt, 3, TH_SHAPE(hy, wo, c));
    struct op_conv2d_s2 a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_conv2d_s2){.x = TH_T(x, s), .w = TH_T(wt, s), .b = TH_T(b, s), .y = TH_T(y, s),
                                     .x_row0 = x_row0, .x_len = x_len, .y_row0 = y_row0, .act = act,
                                     .causal = g_causal};
    if (th_run(h, OP_conv2d_s2, &a[0], &a[1]))
        check(h, y, 0);
    th_check_guards(h);
}

static void dwconv2d_case(struct th *h, int64_t hx, int64_t w, int64_t c, int64_t x_row0, int64_t x_len,
                          int64_t y_row0, int64_t hy, int act, be_dtype xt, be_dtype yt) {
    th_case(h, "dwconv2d_s2%s x[%lld,%lld,%lld] x_row0=%lld x_len=%lld y_row0=%lld Hy=%lld act=%d %s -> %s",
            g_causal ? " causal" : "", (long long)hx, (long long)w, (long long)c, (long long)x_row0, (long long)x_len,
            (long long)y_row0, (long long)hy, act, tn(xt), tn(yt));
    int64_t wo = s2(w);
    struct th_tensor *x = th_input(h, xt, 3, TH_SHAPE(hx, w, c), -1.0f, 1.0f);
    struct th_tensor *wt = th_input(h, BE_F32, 2, TH_SHAPE(c, 9), -0.5f, 0.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(c), -0.2f, 0.2f);
    struct th_tensor *y = th_output(h, yt, 3, TH_SHAPE(hy, wo, c));
    struct op_dwconv2d_s2 a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_dwconv2d_s2){.x = TH_T(x, s), .w = TH_T(wt, s), .b = TH_T(b, s), .y = TH_T(y, s),
                                       .x_row0 = x_row0, .x_len = x_len, .y_row0 = y_row0, .act = act,
                                       .causal = g_causal};
    if (th_run(h, OP_dwconv2d_s2, &a[0], &a[1]))
        check(h, y, 1);
    th_check_guards(h);
}

static void dwconv1d_case(struct th *h, int64_t t, int64_t c, int64_t k, int act, be_dtype xt, be_dtype yt) {
    th_case(h, "dwconv1d%s x[%lld,%lld] K=%lld act=%d %s -> %s", g_causal ? " causal" : "", (long long)t, (long long)c,
            (long long)k, act, tn(xt), tn(yt));
    struct th_tensor *x = th_input(h, xt, 2, TH_SHAPE(t, c), -2.0f, 2.0f);
    struct th_tensor *wt = th_input(h, BE_F32, 2, TH_SHAPE(c, k), -0.5f, 0.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(c), -0.5f, 0.5f);
    struct th_tensor *y = th_output(h, yt, 2, TH_SHAPE(t, c));
    struct op_dwconv1d a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_dwconv1d){.x = TH_T(x, s), .w = TH_T(wt, s), .b = TH_T(b, s), .y = TH_T(y, s), .act = act,
                                    .causal = g_causal};
    if (th_run(h, OP_dwconv1d, &a[0], &a[1]))
        check(h, y, 2);
    th_check_guards(h);
}

static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* Offsets [n+1] (leading 0) of lengths len[i] (halve: a stride-2 stage's, s2), as an I64 input. */
static struct th_tensor *offsets(struct th *h, const int64_t *len, int n, bool halve, int64_t *host) {
    host[0] = 0;
    for (int i = 0; i < n; i++)
        host[i + 1] = host[i] + (halve ? s2(len[i]) : len[i]);
    return th_input_data(h, BE_I64, 1, TH_SHAPE(n + 1), host);
}

/* n elements of type t at a and b, bit for bit. */
static bool same_rows(struct th *h, const void *a, const void *b, uint64_t n, be_dtype t, const char *what) {
    h->checks++;
    if (memcmp(a, b, n * be_dtype_size(t)) == 0)
        return true;
    printf("FAIL [%s]: %s\n", h->name, what);
    h->failures++;
    return false;
}

/* A packed batch of n images of len[i] rows (width w, c channels; depthwise or the one-channel first
 * conv; an f32 input, an output of type yt): the whole batch against the reference, every image's rows
 * bit-identical to the image run alone on Vulkan, and a tile of output rows [ta, tb) across images (fed
 * only the input rows it needs) against the reference and the whole run. */
static void packed_conv_case(struct th *h, bool dw, const int64_t *len, int n, int64_t w, int64_t c, int64_t ta,
                             int64_t tb, be_dtype yt) {
    th_case(h, "%s%s packed batch of %d, W=%lld C=%lld, tile %lld..%lld, f32 -> %s", dw ? "dwconv2d_s2" : "conv2d_s2",
            g_causal ? " causal" : "", n, (long long)w, (long long)c, (long long)ta, (long long)tb, tn(yt));
    int64_t xo[16], yo[16];
    struct th_tensor *xs = offsets(h, len, n, false, xo), *ys = offsets(h, len, n, true, yo);
    const int64_t Hx = xo[n], Hy = yo[n], wo = s2(w), inner = dw ? w * c : w;
    struct th_tensor *x = dw ? th_input(h, BE_F32, 3, TH_SHAPE(Hx, w, c), -1.0f, 1.0f)
                             : th_input(h, BE_F32, 2, TH_SHAPE(Hx, w), -1.0f, 1.0f);
    struct th_tensor *wt = th_input(h, BE_F32, 2, TH_SHAPE(c, 9), -0.5f, 0.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(c), -0.2f, 0.2f);
    struct th_tensor *y = th_output(h, yt, 3, TH_SHAPE(Hy, wo, c));
    const enum op_id id = dw ? OP_dwconv2d_s2 : OP_conv2d_s2;
    /* both ops share the argument layout up to the segment tables */
    struct op_dwconv2d_s2 a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_dwconv2d_s2){.x = TH_T(x, s), .w = TH_T(wt, s), .b = TH_T(b, s), .y = TH_T(y, s),
                                       .x_len = Hx, .act = ACT_RELU, .x_seg = TH_T(xs, s), .y_seg = TH_T(ys, s),
                                       .causal = g_causal};
    struct op_conv2d_s2 c2[2];
    for (int s = 0; s < 2; s++)
        c2[s] = (struct op_conv2d_s2){.x = a[s].x, .w = a[s].w, .b = a[s].b, .y = a[s].y, .x_len = Hx,
                                      .act = ACT_RELU, .x_seg = a[s].x_seg, .y_seg = a[s].y_seg,
                                      .causal = g_causal};
    if (!(dw ? th_run(h, id, &a[0], &a[1]) : th_run(h, id, &c2[0], &c2[1])))
        return;
    check(h, y, dw ? 1 : 0);
    unsigned char *whole = vk_fetch(h, y);
    /* each image alone: rows of x and y, no tables */
    struct th_tensor *y1 = th_output(h, yt, 3, TH_SHAPE(Hy, wo, c));
    for (int i = 0; i < n; i++) {
        const be_tensor xi = be_tensor_rows(&TH_T(x, TH_DEV), xo[i], len[i]);
        const be_tensor yi = be_tensor_rows(&TH_T(y1, TH_DEV), yo[i], yo[i + 1] - yo[i]);
        struct op_dwconv2d_s2 one = {.x = xi, .w = TH_T(wt, TH_DEV), .b = TH_T(b, TH_DEV), .y = yi, .x_len = len[i],
                                     .act = ACT_RELU, .causal = g_causal};
        struct op_conv2d_s2 one2 = {.x = xi, .w = one.w, .b = one.b, .y = yi, .x_len = len[i], .act = ACT_RELU,
                                    .causal = g_causal};
        if (!vk_run(h, id, dw ? (const void *)&one : (const void *)&one2))
            return;
    }
    void *alone = vk_fetch(h, y1);
    same_rows(h, whole, alone, (uint64_t)(Hy * wo * c), yt, "images of the batch differ from the images run alone");
    free(alone);
    /* a tile of output rows [ta, tb): the input rows its outputs need, per image */
    int sa = 0, sb = 0;
    while (sa + 1 < n && yo[sa + 1] <= ta)
        sa++;
    while (sb + 1 < n && yo[sb + 1] <= tb - 1)
        sb++;
    const int64_t lpad = g_causal ? 2 : 1; /* output row r reads rows 2r - lpad .. 2r - lpad + 2 */
    const int64_t xa = xo[sa] + imax(0, 2 * (ta - yo[sa]) - lpad),
                  xb = xo[sb] + imin(len[sb], 2 * (tb - 1 - yo[sb]) + 3 - lpad);
    struct th_tensor *xt = dw ? th_output(h, BE_F32, 3, TH_SHAPE(xb - xa, w, c))
                              : th_output(h, BE_F32, 2, TH_SHAPE(xb - xa, w));
    struct th_tensor *ytile = th_output(h, yt, 3, TH_SHAPE(tb - ta, wo, c));
    float *xh = malloc((size_t)(Hx * inner) * sizeof *xh);
    if (!xh)
        exit(1);
    memcpy(xh, x->host, (size_t)(Hx * inner) * sizeof *xh);
    for (int s = 0; s < 2; s++) {
        if (be_upload(h->be[s], TH_T(xt, s).addr, xh + xa * inner, (uint64_t)((xb - xa) * inner) * 4))
            exit(1);
        a[s].x = c2[s].x = TH_T(xt, s);
        a[s].y = c2[s].y = TH_T(ytile, s);
        a[s].x_row0 = c2[s].x_row0 = xa;
        a[s].y_row0 = c2[s].y_row0 = ta;
    }
    free(xh);
    if (!(dw ? th_run(h, id, &a[0], &a[1]) : th_run(h, id, &c2[0], &c2[1]))) {
        free(whole);
        return;
    }
    check(h, ytile, dw ? 1 : 0);
    void *tile = vk_fetch(h, ytile);
    same_rows(h, whole + (size_t)(ta * wo * c) * be_dtype_size(yt), tile, (uint64_t)((tb - ta) * wo * c), yt,
              "the tile differs from the whole run");
    free(tile);
    free(whole);
    th_check_guards(h);
}

/* dwconv1d over a packed sequence of segments len[i] (x holding positions row0 .. of it; x and y of
 * type ty): against the reference, and each segment bit-identical to the segment alone. */
static void packed_dwconv1d_case(struct th *h, const int64_t *len, int n, int64_t row0, int64_t t, int64_t c,
                                 int64_t k, be_dtype ty) {
    th_case(h, "dwconv1d%s packed batch of %d, rows %lld..%lld, C=%lld K=%lld, %s", g_causal ? " causal" : "", n,
            (long long)row0, (long long)(row0 + t - 1), (long long)c, (long long)k, tn(ty));
    int64_t so[16];
    struct th_tensor *seg = offsets(h, len, n, false, so);
    struct th_tensor *x = th_input(h, ty, 2, TH_SHAPE(t, c), -2.0f, 2.0f);
    struct th_tensor *wt = th_input(h, BE_F32, 2, TH_SHAPE(c, k), -0.5f, 0.5f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(c), -0.5f, 0.5f);
    struct th_tensor *y = th_output(h, ty, 2, TH_SHAPE(t, c));
    struct op_dwconv1d a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_dwconv1d){.x = TH_T(x, s), .w = TH_T(wt, s), .b = TH_T(b, s), .y = TH_T(y, s),
                                    .act = ACT_SILU, .seg = TH_T(seg, s), .row0 = row0, .causal = g_causal};
    if (!th_run(h, OP_dwconv1d, &a[0], &a[1]))
        return;
    check(h, y, 2);
    void *whole = vk_fetch(h, y);
    struct th_tensor *y1 = th_output(h, ty, 2, TH_SHAPE(t, c));
    /* each segment's part of x alone */
    for (int i = 0; i < n; i++) {
        const int64_t lo = imax(so[i], row0) - row0, hi = imin(so[i + 1], row0 + t) - row0;
        if (lo >= hi)
            continue;
        struct op_dwconv1d one = {.x = be_tensor_rows(&TH_T(x, TH_DEV), lo, hi - lo), .w = TH_T(wt, TH_DEV),
                                  .b = TH_T(b, TH_DEV), .y = be_tensor_rows(&TH_T(y1, TH_DEV), lo, hi - lo),
                                  .act = ACT_SILU, .causal = g_causal};
        if (!vk_run(h, OP_dwconv1d, &one))
            return;
    }
    void *alone = vk_fetch(h, y1);
    same_rows(h, whole, alone, (uint64_t)(t * c), ty, "segments of the batch differ from the segments alone");
    free(alone);
    free(whole);
    th_check_guards(h);
}

/* The subsampling's three strided convs (pointwise convs omitted: they are per row and do not change
 * the halo) on mel [L, M] with intermediates of type it: untiled on both backends (checked against the
 * reference), then on Vulkan in tiles of encoder rows [cuts[i], cuts[i+1]), each tile fed only the mel
 * rows the halo rule names, in a tensor of its own (a read outside the halo hits the harness's sentinel
 * guard). Every tile's output must equal the untiled rows bit for bit. */
static void chain_case(struct th *h, int64_t L, int64_t M, int64_t C, const int64_t *cuts, int ncuts, be_dtype it) {
    th_case(h, "subsampling chain%s mel[%lld,%lld] C=%lld in %d tiles, %s", g_causal ? " causal" : "", (long long)L,
            (long long)M, (long long)C, ncuts - 1, tn(it));
    int64_t L1 = s2(L), L2 = s2(L1), L3 = s2(L2);
    int64_t M1 = s2(M), M2 = s2(M1), M3 = s2(M2);
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(L, M), -1.0f, 1.0f);
    struct th_tensor *w[3], *b[3];
    for (int i = 0; i < 3; i++) {
        w[i] = th_input(h, BE_F32, 2, TH_SHAPE(C, 9), -0.5f, 0.5f);
        b[i] = th_input(h, BE_F32, 1, TH_SHAPE(C), -0.2f, 0.2f);
    }
    struct th_tensor *t1s = th_output(h, it, 3, TH_SHAPE(L1, M1, C));
    struct th_tensor *t2s = th_output(h, it, 3, TH_SHAPE(L2, M2, C));
    struct th_tensor *s3 = th_output(h, it, 3, TH_SHAPE(L3, M3, C));
    struct op_conv2d_s2 a1[2];
    struct op_dwconv2d_s2 a2[2], a3[2];
    for (int s = 0; s < 2; s++) {
        a1[s] = (struct op_conv2d_s2){.x = TH_T(x, s), .w = TH_T(w[0], s), .b = TH_T(b[0], s), .y = TH_T(t1s, s),
                                      .x_len = L, .act = ACT_RELU, .causal = g_causal};
        a2[s] = (struct op_dwconv2d_s2){.x = TH_T(t1s, s), .w = TH_T(w[1], s), .b = TH_T(b[1], s), .y = TH_T(t2s, s),
                                        .x_len = L1, .act = ACT_NONE, .causal = g_causal};
        a3[s] = (struct op_dwconv2d_s2){.x = TH_T(t2s, s), .w = TH_T(w[2], s), .b = TH_T(b[2], s), .y = TH_T(s3, s),
                                        .x_len = L2, .act = ACT_RELU, .causal = g_causal};
    }
    if (!th_run(h, OP_conv2d_s2, &a1[0], &a1[1]) || !th_run(h, OP_dwconv2d_s2, &a2[0], &a2[1]) ||
        !th_run(h, OP_dwconv2d_s2, &a3[0], &a3[1]))
        return;
    check(h, t1s, 0);
    if (it == BE_F16) { /* both sides round s1 alike, but a rare neighbouring half feeds s2 and s3 */
        th_check(h, t2s, 1e-6);
        th_check(h, s3, 1e-6);
    } else {
        check(h, t2s, 1);
        check(h, s3, 1);
    }
    unsigned char *full = vk_fetch(h, s3);
    const float *xh = x->host;
    const size_t es = be_dtype_size(it);
    uint64_t row3 = (uint64_t)(M3 * C);
    for (int ti = 0; ti + 1 < ncuts; ti++) {
        int64_t a = cuts[ti], bnd = cuts[ti + 1];
        /* Halo rule per stage (rows clipped to the stage's valid rows): output rows [a, b) read rows
         * [2a-1, 2b) of the stage below, or [2a-2, 2b-1) causal. */
        const int64_t lo = g_causal ? 2 : 1, hi = g_causal ? 1 : 0;
        int64_t r20 = imax(0, 2 * a - lo), r21 = imin(L2, 2 * bnd - hi);
        int64_t r10 = imax(0, 2 * r20 - lo), r11 = imin(L1, 2 * r21 - hi);
        int64_t m0 = imax(0, 2 * r10 - lo), m1 = imin(L, 2 * r11 - hi);
        struct th_tensor *tx = th_input_data(h, BE_F32, 2, TH_SHAPE(m1 - m0, M), xh + m0 * M);
        struct th_tensor *t1 = th_output(h, it, 3, TH_SHAPE(r11 - r10, M1, C));
        struct th_tensor *t2 = th_output(h, it, 3, TH_SHAPE(r21 - r20, M2, C));
        struct th_tensor *t3 = th_output(h, it, 3, TH_SHAPE(bnd - a, M3, C));
        struct op_conv2d_s2 c1 = {.x = TH_T(tx, TH_DEV), .w = TH_T(w[0], TH_DEV), .b = TH_T(b[0], TH_DEV),
                                  .y = TH_T(t1, TH_DEV), .x_row0 = m0, .x_len = L, .y_row0 = r10, .act = ACT_RELU,
                                  .causal = g_causal};
        struct op_dwconv2d_s2 c2 = {.x = TH_T(t1, TH_DEV), .w = TH_T(w[1], TH_DEV), .b = TH_T(b[1], TH_DEV),
                                    .y = TH_T(t2, TH_DEV), .x_row0 = r10, .x_len = L1, .y_row0 = r20, .act = ACT_NONE,
                                    .causal = g_causal};
        struct op_dwconv2d_s2 c3 = {.x = TH_T(t2, TH_DEV), .w = TH_T(w[2], TH_DEV), .b = TH_T(b[2], TH_DEV),
                                    .y = TH_T(t3, TH_DEV), .x_row0 = r20, .x_len = L2, .y_row0 = a, .act = ACT_RELU,
                                    .causal = g_causal};
        if (!vk_run(h, OP_conv2d_s2, &c1) || !vk_run(h, OP_dwconv2d_s2, &c2) || !vk_run(h, OP_dwconv2d_s2, &c3))
            continue;
        h->checks++;
        unsigned char *tile = vk_fetch(h, t3);
        const unsigned char *want = full + (uint64_t)a * row3 * es;
        if (memcmp(tile, want, (uint64_t)(bnd - a) * row3 * es) != 0) {
            uint64_t i = 0;
            while (memcmp(tile + i * es, want + i * es, es) == 0)
                i++;
            printf("FAIL [%s]: tile [%lld, %lld) differs from the untiled run at element %llu\n", h->name,
                   (long long)a, (long long)bnd, (unsigned long long)i);
            h->failures++;
        }
        free(tile);
    }
    free(full);
    th_check_guards(h);

    /* A tile one halo row short must be refused, not computed from missing rows. */
    h->checks++;
    /* encoder row a needs mel rows from 8a-7 (from 8a-14 causal): a tile from one row later */
    int64_t a = cuts[1], need = g_causal ? 8 * a - 14 : 8 * a - 7, r1 = g_causal ? 4 * a - 6 : 4 * a - 3;
    struct th_tensor *tx = th_input_data(h, BE_F32, 2, TH_SHAPE(8, M), xh + (need + 1) * M);
    struct th_tensor *t1 = th_output(h, it, 3, TH_SHAPE(1, M1, C));
    struct op_conv2d_s2 c1 = {.x = TH_T(tx, TH_DEV), .w = TH_T(w[0], TH_DEV), .b = TH_T(b[0], TH_DEV),
                              .y = TH_T(t1, TH_DEV), .x_row0 = need + 1, .x_len = L, .y_row0 = r1,
                              .act = ACT_RELU, .causal = g_causal};
    if (be_run(h->be[TH_DEV], OP_conv2d_s2, &c1) == VKASR_OK) {
        printf("FAIL [%s]: a tile lacking halo row %lld was accepted\n", h->name, (long long)need);
        h->failures++;
    }
}

int main(void) {
    struct th h;
    th_open(&h, true);
    const bool f16 = h.dev[TH_DEV]->info.f16;
    if (!f16)
        printf("the device has no f16: the f16 cases are not run\n");
    const be_dtype F = BE_F32, H = BE_F16;

    /* conv2d_s2: the real first conv (mel [L, 128] -> [ceil(L/2), 64, 256]), odd widths, one row, one
     * or three channels, rows past x_len present in x (must read as zero), a tile away from row 0. */
    conv2d_case(&h, 203, 128, 256, 0, 203, 0, 102, ACT_RELU, F, F);
    conv2d_case(&h, 64, 80, 256, 0, 64, 0, 32, ACT_NONE, F, F);
    conv2d_case(&h, 9, 7, 3, 0, 9, 0, 5, ACT_NONE, F, F);
    conv2d_case(&h, 1, 5, 1, 0, 1, 0, 1, ACT_RELU, F, F);
    conv2d_case(&h, 2, 1, 3, 0, 2, 0, 1, ACT_NONE, F, F);
    conv2d_case(&h, 20, 9, 5, 0, 15, 0, 10, ACT_NONE, F, F);
    conv2d_case(&h, 13, 16, 33, 9, 40, 5, 6, ACT_RELU, F, F);
    conv2d_case(&h, 0, 16, 8, 0, 0, 0, 0, ACT_NONE, F, F);
    if (f16) { /* f32 mel -> f16 (the network's), f16 in, both; odd channel counts end rows mid-word */
        conv2d_case(&h, 203, 128, 256, 0, 203, 0, 102, ACT_RELU, F, H);
        conv2d_case(&h, 9, 7, 3, 0, 9, 0, 5, ACT_NONE, H, F);
        conv2d_case(&h, 13, 16, 33, 9, 40, 5, 6, ACT_RELU, H, H);
    }

    /* dwconv2d_s2: the real stages ([H, 64, 256] -> [H/2, 32, 256], [.., 32, ..] -> [.., 16, ..]) and odd
     * shapes. */
    dwconv2d_case(&h, 102, 64, 256, 0, 102, 0, 51, ACT_NONE, F, F);
    dwconv2d_case(&h, 51, 32, 256, 0, 51, 0, 26, ACT_RELU, F, F);
    dwconv2d_case(&h, 7, 5, 3, 0, 7, 0, 4, ACT_RELU, F, F);
    dwconv2d_case(&h, 1, 1, 1, 0, 1, 0, 1, ACT_NONE, F, F);
    dwconv2d_case(&h, 5, 3, 1, 0, 5, 0, 3, ACT_NONE, F, F);
    dwconv2d_case(&h, 11, 9, 37, 0, 8, 0, 6, ACT_RELU, F, F);
    dwconv2d_case(&h, 9, 20, 16, 7, 30, 4, 4, ACT_NONE, F, F);
    if (f16) {
        dwconv2d_case(&h, 102, 64, 256, 0, 102, 0, 51, ACT_NONE, H, H);
        dwconv2d_case(&h, 11, 9, 37, 0, 8, 0, 6, ACT_RELU, H, F);
        dwconv2d_case(&h, 9, 20, 17, 7, 30, 4, 4, ACT_NONE, F, H);
        dwconv2d_case(&h, 1, 1, 1, 0, 1, 0, 1, ACT_NONE, H, H);
    }

    /* dwconv1d: K 1, 3, 9 (Parakeet), 31; T shorter than K; C = 1024 as in the conformer. */
    dwconv1d_case(&h, 0, 8, 3, ACT_NONE, F, F);
    dwconv1d_case(&h, 1, 1, 1, ACT_NONE, F, F);
    dwconv1d_case(&h, 5, 3, 3, ACT_SILU, F, F);
    dwconv1d_case(&h, 4, 16, 9, ACT_NONE, F, F);
    dwconv1d_case(&h, 300, 1024, 9, ACT_SILU, F, F);
    dwconv1d_case(&h, 257, 64, 31, ACT_NONE, F, F);
    dwconv1d_case(&h, 3001, 3, 9, ACT_SILU, F, F);
    dwconv1d_case(&h, 33, 100, 1, ACT_SILU, F, F);
    if (f16) { /* the conformer's f16 -> f16 (SiLU), and the mixed combinations */
        dwconv1d_case(&h, 300, 1024, 9, ACT_SILU, H, H);
        dwconv1d_case(&h, 3001, 3, 9, ACT_SILU, H, H);
        dwconv1d_case(&h, 5, 3, 3, ACT_SILU, H, F);
        dwconv1d_case(&h, 257, 65, 31, ACT_NONE, F, H);
        dwconv1d_case(&h, 1, 1, 1, ACT_NONE, H, H);
    }

    /* Halo tiles of the whole subsampling: Parakeet's M = 128 (L3 = 26), and M = 80 at a length that is
     * not a multiple of 8, with a one-row tile; f16 intermediates as in f16 precision. */
    chain_case(&h, 203, 128, 256, TH_SHAPE(0, 7, 15, 26), 4, F);
    chain_case(&h, 61, 80, 16, TH_SHAPE(0, 3, 4, 6, 8), 5, F);
    if (f16) {
        chain_case(&h, 203, 128, 256, TH_SHAPE(0, 7, 15, 26), 4, H);
        chain_case(&h, 61, 80, 17, TH_SHAPE(0, 3, 4, 6, 8), 5, H);
    }

    /* Packed batches: images of 1, 2, 3, 9 and 40 rows (odd and even, shorter than a tap's reach), a
     * tile of output rows cutting images on both sides. */
    const int64_t lens[] = {9, 1, 40, 2, 3, 17};
    packed_conv_case(&h, false, lens, 6, 16, 8, 3, 24, F);
    packed_conv_case(&h, true, lens, 6, 11, 5, 5, 14, F);
    packed_conv_case(&h, true, lens + 2, 1, 8, 3, 4, 11, F);
    packed_dwconv1d_case(&h, lens, 6, 0, 72, 33, 9, F);
    packed_dwconv1d_case(&h, lens, 6, 7, 50, 16, 9, F); /* a slice of the sequence: rows 7 .. 56 */
    packed_dwconv1d_case(&h, lens, 6, 0, 72, 5, 31, F);
    if (f16) { /* the f16 variants (f16 precision's activations) take the tables alike */
        packed_conv_case(&h, false, lens, 6, 16, 8, 3, 24, H);
        packed_conv_case(&h, true, lens, 6, 11, 5, 5, 14, H);
        packed_dwconv1d_case(&h, lens, 6, 7, 50, 16, 9, H);
    }

    /* Causal padding (NeMo's cache-aware models): the same kinds of cases; frequency 128 -> 65 -> 33 -> 17
     * and 80 -> 41 -> 21 -> 11 with time lengths floor(n/2)+1, rows past x_len, tiles away from row 0,
     * one-row images, the chain's halo tiles and packed batches. */
    g_causal = true;
    conv2d_case(&h, 203, 128, 16, 0, 203, 0, 102, ACT_RELU, F, F);
    conv2d_case(&h, 64, 80, 8, 0, 64, 0, 33, ACT_NONE, F, F);
    conv2d_case(&h, 9, 7, 3, 0, 9, 0, 5, ACT_NONE, F, F);
    conv2d_case(&h, 1, 5, 1, 0, 1, 0, 1, ACT_RELU, F, F);
    conv2d_case(&h, 20, 9, 5, 0, 15, 0, 8, ACT_NONE, F, F);
    conv2d_case(&h, 13, 16, 33, 8, 40, 5, 6, ACT_RELU, F, F);
    dwconv2d_case(&h, 102, 65, 16, 0, 102, 0, 52, ACT_NONE, F, F);
    dwconv2d_case(&h, 7, 5, 3, 0, 7, 0, 4, ACT_RELU, F, F);
    dwconv2d_case(&h, 1, 1, 1, 0, 1, 0, 1, ACT_NONE, F, F);
    dwconv2d_case(&h, 11, 9, 37, 0, 8, 0, 5, ACT_RELU, F, F);
    dwconv2d_case(&h, 9, 20, 16, 6, 30, 4, 4, ACT_NONE, F, F);
    dwconv1d_case(&h, 1, 1, 1, ACT_NONE, F, F);
    dwconv1d_case(&h, 5, 3, 3, ACT_SILU, F, F);
    dwconv1d_case(&h, 4, 16, 9, ACT_NONE, F, F);
    dwconv1d_case(&h, 300, 64, 9, ACT_SILU, F, F);
    dwconv1d_case(&h, 257, 5, 31, ACT_NONE, F, F);
    chain_case(&h, 203, 128, 16, TH_SHAPE(0, 7, 15, 27), 4, F);
    chain_case(&h, 61, 80, 8, TH_SHAPE(0, 3, 4, 6, 9), 5, F);
    packed_conv_case(&h, false, lens, 6, 16, 8, 3, 24, F);
    packed_conv_case(&h, true, lens, 6, 11, 5, 5, 14, F);
    packed_dwconv1d_case(&h, lens, 6, 0, 72, 33, 9, F);
    packed_dwconv1d_case(&h, lens, 6, 7, 50, 16, 9, F);
    if (f16) {
        conv2d_case(&h, 13, 16, 33, 8, 40, 5, 6, ACT_RELU, H, H);
        dwconv2d_case(&h, 11, 9, 37, 0, 8, 0, 5, ACT_RELU, H, F);
        dwconv1d_case(&h, 300, 64, 9, ACT_SILU, H, H);
        chain_case(&h, 61, 80, 9, TH_SHAPE(0, 3, 4, 6, 9), 5, H);
    }
    g_causal = false;

    printf("worst nmse of f32 outputs: conv2d_s2 %.3g, dwconv2d_s2 %.3g, dwconv1d %.3g (tolerance %.0e)\n",
           worst_nmse[0], worst_nmse[1], worst_nmse[2], TOL);
    return th_close(&h);
}
