/* test_ops_eltwise.c — element-wise and layout ops (unary, binary, glu, pad, permute) and the
 * positional rows (posenc) on Vulkan vs the C reference: empty, tiny, odd and large shapes,
 * broadcasting, aliasing, every element type of pad/permute, f16 tensors that start or end in the
 * middle of a 32-bit word, glu's f16 x and y (on a device with f16; test_ops_eltwise_nof16 runs the
 * rest on one without, where the f32 kernels must not need 16-bit storage), and posenc over every
 * integer distance below 2^22. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

static void unary_case(struct th *h, int64_t n, int act, float alpha) {
    th_case(h, "unary n=%lld act=%d alpha=%g", (long long)n, act, alpha);
    float lo = act == ACT_LOG_GUARD ? 0.0f : -8.0f;
    struct th_tensor *x = th_input(h, BE_F32, 1, TH_SHAPE(n), lo, 8.0f);
    struct th_tensor *y = th_output(h, BE_F32, 1, TH_SHAPE(n));
    struct op_unary a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_unary){.x = TH_T(x, s), .y = TH_T(y, s), .act = act, .alpha = alpha};
    if (th_run(h, OP_unary, &a[0], &a[1]))
        th_check(h, y, 1e-7);
}

/* In place (y = x): an element processed twice, e.g. by overlapping grid-stride ranges, shows. */
static void unary_inplace_case(struct th *h, int64_t n, int act, float alpha) {
    th_case(h, "unary in place n=%lld act=%d alpha=%g", (long long)n, act, alpha);
    struct th_tensor *x = th_input(h, BE_F32, 1, TH_SHAPE(n), -8.0f, 8.0f);
    struct op_unary a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_unary){.x = TH_T(x, s), .y = TH_T(x, s), .act = act, .alpha = alpha};
    if (th_run(h, OP_unary, &a[0], &a[1]))
        th_check(h, x, 1e-7);
}

/* Uploads recorded back to back without a wait (staged: they pile up in the staging buffer, which they
 * overflow here, 3 x 24 MiB against 64), each followed by an op reading what it wrote, and each region
 * then overwritten by the next upload: every op must see its own upload's data (copies ordered after
 * the reads before them) and every download the last one's. Meaningful staged (test_ops_eltwise_staging,
 * VKASR_FORCE_STAGING=1); host-mapped memory waits per upload. */
static void upload_pileup_case(struct th *h) {
    th_case(h, "uploads piled up without waits (3 x 24 MiB and small ones, regions rewritten)");
    struct backend *dv = h->be[TH_DEV];
    enum { PARTS = 3 };
    const uint64_t big = 24ull << 20, n = big / 4;
    float *src = malloc(big), *got = malloc(big);
    uint64_t x = 0, y[PARTS] = {0};
    bool ok = src && got && be_alloc(dv, BE_POOL_SCRATCH, big, &x) == VKASR_OK;
    for (int p = 0; ok && p < PARTS; p++)
        ok = be_alloc(dv, BE_POOL_SCRATCH, big, &y[p]) == VKASR_OK;
    for (int p = 0; ok && p < PARTS; p++) {
        for (uint64_t i = 0; i < n; i++)
            src[i] = (float)(p + 1) + (float)(i % 1000) * 1e-3f;
        /* x = part p's data (the region the previous part's op read), then y[p] = 2 x */
        ok = be_upload(dv, x, src, big) == VKASR_OK &&
             be_run(dv, OP_unary, &(struct op_unary){.x = be_tensor_1d(x, BE_F32, (int64_t)n),
                                                      .y = be_tensor_1d(y[p], BE_F32, (int64_t)n), .act = ACT_NONE,
                                                      .alpha = 2.0f}) == VKASR_OK;
        for (int k = 0; ok && k < 8; k++) /* small uploads in between, into x's tail */
            ok = be_upload(dv, x + big - 4096, src, 4096) == VKASR_OK;
    }
    for (int p = 0; ok && p < PARTS; p++) {
        h->checks++;
        ok = be_download(dv, got, y[p], big) == VKASR_OK;
        for (uint64_t i = 0; ok && i < n; i++)
            if (got[i] != 2.0f * ((float)(p + 1) + (float)(i % 1000) * 1e-3f)) {
                printf("FAIL [%s]: part %d element %llu: %g\n", h->name, p, (unsigned long long)i, got[i]);
                h->failures++;
                break;
            }
    }
    if (!ok) {
        printf("FAIL [%s]: %s\n", h->name, dv->err.msg);
        h->failures++;
    }
    free(src);
    free(got);
}

static void binary_case(struct th *h, int64_t rows, int64_t cols, int64_t nb, int kind, int act, float alpha,
                        float beta, bool alias) {
    th_case(h, "binary a=[%lld, %lld] nb=%lld kind=%d act=%d alpha=%g beta=%g%s", (long long)rows, (long long)cols,
            (long long)nb, kind, act, alpha, beta, alias ? " y=a" : "");
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(rows, cols), -4.0f, 4.0f);
    struct th_tensor *z = th_input(h, BE_F32, 1, TH_SHAPE(nb), -4.0f, 4.0f);
    struct th_tensor *y = alias ? x : th_output(h, BE_F32, 2, TH_SHAPE(rows, cols));
    struct op_binary a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_binary){.a = TH_T(x, s), .b = TH_T(z, s), .y = TH_T(y, s), .kind = kind, .act = act,
                                  .alpha = alpha, .beta = beta};
    if (th_run(h, OP_binary, &a[0], &a[1]))
        th_check(h, y, 1e-7);
}

static void glu_case(struct th *h, int64_t rows, int64_t cols, be_dtype xt, be_dtype yt) {
    th_case(h, "glu x=[%lld, %lld] %s -> %s", (long long)rows, (long long)(2 * cols), xt == BE_F16 ? "f16" : "f32",
            yt == BE_F16 ? "f16" : "f32");
    struct th_tensor *x = th_input(h, xt, 2, TH_SHAPE(rows, 2 * cols), -6.0f, 6.0f);
    struct th_tensor *y = th_output(h, yt, 2, TH_SHAPE(rows, cols));
    struct op_glu a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_glu){.x = TH_T(x, s), .y = TH_T(y, s)};
    if (!th_run(h, OP_glu, &a[0], &a[1]))
        return;
    if (yt == BE_F16) /* differing on at most 1 % of the elements (rounding boundaries) */
        th_check_f16(h, y, 1e-8, 0.01);
    else
        th_check(h, y, 1e-7);
}

/* transformers' frequencies 1 / 10000^(2j/C) in float32, as the model loader makes them (malloc'd). */
static float *posenc_freqs(int64_t C) {
    float *w = malloc((size_t)(C / 2 + 1) * sizeof *w);
    if (!w)
        exit(1);
    for (int64_t j = 0; j < C / 2; j++)
        w[j] = 1.0f / powf(10000.0f, (float)(2 * j) / (float)C);
    return w;
}

/* The positional rows PE(r0), .., PE(r0 - n + 1) at width C with transformers' frequencies: within
 * 4 units of 2^-24 of the reference's sin and cos of the float argument, evaluated in double. */
static void posenc_case(struct th *h, int64_t r0, int64_t n, int64_t C) {
    th_case(h, "posenc rows %lld .. %lld, C=%lld", (long long)r0, (long long)(r0 - n + 1), (long long)C);
    float *w = posenc_freqs(C);
    struct th_tensor *inv = th_input_data(h, BE_F32, 1, TH_SHAPE(C / 2), w);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(n, C));
    struct op_posenc a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_posenc){.inv_freq = TH_T(inv, s), .y = TH_T(y, s), .r0 = r0};
    if (th_run(h, OP_posenc, &a[0], &a[1]))
        th_check_abs(h, y, 4.0 / 16777216.0);
    free(w);
}

/* A row depends on its r alone: rows of a short call are bit for bit those of a long one (the encoder
 * makes the rows of each call's reach; halo tiles and packed batches rely on it). */
static void posenc_rows_case(struct th *h) {
    th_case(h, "posenc rows 1234 .. 235 identical to those rows of 7499 .. -7499 (C=1024)");
    const int64_t C = 1024, n_long = 14999, n_short = 1000, r_long = 7499, r_short = 1234;
    float *w = posenc_freqs(C), *lo = malloc((size_t)(n_long * C) * 4), *sh = malloc((size_t)(n_short * C) * 4);
    if (!lo || !sh)
        exit(1);
    struct th_tensor *inv = th_input_data(h, BE_F32, 1, TH_SHAPE(C / 2), w);
    struct th_tensor *yl = th_output(h, BE_F32, 2, TH_SHAPE(n_long, C));
    struct th_tensor *ys = th_output(h, BE_F32, 2, TH_SHAPE(n_short, C));
    struct backend *dv = h->be[TH_DEV];
    const struct op_posenc a_long = {.inv_freq = TH_T(inv, TH_DEV), .y = TH_T(yl, TH_DEV), .r0 = r_long};
    const struct op_posenc a_short = {.inv_freq = TH_T(inv, TH_DEV), .y = TH_T(ys, TH_DEV), .r0 = r_short};
    h->checks++;
    bool ok = be_run(dv, OP_posenc, &a_long) == VKASR_OK && be_run(dv, OP_posenc, &a_short) == VKASR_OK &&
              be_download(dv, lo, TH_T(yl, TH_DEV).addr, (uint64_t)(n_long * C) * 4) == VKASR_OK &&
              be_download(dv, sh, TH_T(ys, TH_DEV).addr, (uint64_t)(n_short * C) * 4) == VKASR_OK;
    if (!ok || memcmp(sh, lo + (r_long - r_short) * C, (size_t)(n_short * C) * 4) != 0) {
        printf("FAIL [%s]: %s\n", h->name, ok ? "the rows differ" : dv->err.msg);
        h->failures++;
    }
    free(w);
    free(lo);
    free(sh);
}

/* Arguments the op rejects, each with its reason. */
static void posenc_rejects_case(struct th *h) {
    th_case(h, "posenc rejects odd widths, a wrong inv_freq and distances of 2^22");
    struct th_tensor *inv = th_input(h, BE_F32, 1, TH_SHAPE(4), 0.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(3, 8)), *odd = th_output(h, BE_F32, 2, TH_SHAPE(3, 7));
    const struct {
        struct op_posenc a;
        const char *why;
    } bad[] = {
        {{.inv_freq = TH_T(inv, TH_DEV), .y = TH_T(odd, TH_DEV), .r0 = 1}, "even number of columns"},
        {{.inv_freq = be_tensor_1d(TH_T(inv, TH_DEV).addr, BE_F32, 3), .y = TH_T(y, TH_DEV), .r0 = 1}, "[C/2]"},
        {{.inv_freq = TH_T(inv, TH_DEV), .y = TH_T(y, TH_DEV), .r0 = POSENC_MAX_R}, "2^22"},
        {{.inv_freq = TH_T(inv, TH_DEV), .y = TH_T(y, TH_DEV), .r0 = 1 - POSENC_MAX_R}, "2^22"},
    };
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        h->checks++;
        vkasr_status st = be_run(h->be[TH_DEV], OP_posenc, &bad[i].a);
        if (st == VKASR_OK || !strstr(h->be[TH_DEV]->err.msg, bad[i].why)) {
            printf("FAIL [%s]: case %u: status %d, message '%s'\n", h->name, i, (int)st, h->be[TH_DEV]->err.msg);
            h->failures++;
        }
    }
}

static const char *tname(be_dtype t) { return t == BE_F32 ? "f32" : t == BE_F16 ? "f16" : "i32"; }

/* A view of tensor t starting `skip` elements in, with the given shape (same on both sides). */
static be_tensor view(struct th_tensor *t, int s, int64_t skip, int nd, const int64_t *ne) {
    return be_tensor_make(TH_T(t, s).addr + (uint64_t)skip * be_dtype_size(t->type), t->type, nd, ne);
}

/* Elements of a buffer holding `used` elements plus at least one spare after them. The harness's
 * guard check needs buffers of whole 32-bit words, so an f16 buffer gets an even count. */
static int64_t buffer_len(be_dtype type, int64_t used) {
    return type == BE_F16 && (used + 1) % 2 ? used + 2 : used + 1;
}

static int64_t numel_of(int nd, const int64_t *ne) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= ne[d];
    return n;
}

/* Pad x (shape xne) into y: y.ne = xne + before + after. With skip_x / skip_y > 0 the tensors are
 * views starting that many elements into larger buffers (f16: starting mid-word); the untouched
 * elements around y must survive, which the bit-exact check of the whole buffer verifies. */
static void pad_case(struct th *h, be_dtype type, int nd, const int64_t *xne, const int64_t *before,
                     const int64_t *after, float value, int64_t skip_x, int64_t skip_y) {
    int64_t yne[BE_MAX_DIMS];
    char desc[160];
    int o = 0;
    for (int d = 0; d < nd; d++) {
        yne[d] = xne[d] + before[d] + after[d];
        o += snprintf(desc + o, sizeof desc - (size_t)o, "%s%lld+%lld+%lld", d ? "," : "", (long long)before[d],
                      (long long)xne[d], (long long)after[d]);
    }
    th_case(h, "pad %s [%s] value=%g skip x=%lld y=%lld", tname(type), desc, value, (long long)skip_x,
            (long long)skip_y);
    int64_t nx = numel_of(nd, xne), ny = numel_of(nd, yne);
    struct th_tensor *x = th_input(h, type, 1, TH_SHAPE(buffer_len(type, nx + skip_x)), -1000.0f, 1000.0f);
    /* y's buffer: random data (so a stray write shows), spare elements after the view. */
    struct th_tensor *y = th_input(h, type, 1, TH_SHAPE(buffer_len(type, ny + skip_y)), -1000.0f, 1000.0f);
    struct op_pad a[2];
    for (int s = 0; s < 2; s++) {
        a[s] = (struct op_pad){.x = view(x, s, skip_x, nd, xne), .y = view(y, s, skip_y, nd, yne), .value = value};
        memcpy(a[s].before, before, (size_t)nd * sizeof *before);
    }
    if (th_run(h, OP_pad, &a[0], &a[1]))
        th_check(h, y, 0);
}

static void permute_case(struct th *h, be_dtype type, int nd, const int64_t *xne, const int32_t *perm,
                         int64_t skip_x, int64_t skip_y) {
    int64_t yne[BE_MAX_DIMS];
    char desc[160];
    int o = 0;
    for (int d = 0; d < nd; d++) {
        yne[d] = xne[perm[d]];
        o += snprintf(desc + o, sizeof desc - (size_t)o, "%s%lld", d ? "," : "", (long long)xne[d]);
    }
    o += snprintf(desc + o, sizeof desc - (size_t)o, "] perm (");
    for (int d = 0; d < nd; d++)
        o += snprintf(desc + o, sizeof desc - (size_t)o, "%s%d", d ? "," : "", perm[d]);
    th_case(h, "permute %s [%s) skip x=%lld y=%lld", tname(type), desc, (long long)skip_x, (long long)skip_y);
    int64_t n = numel_of(nd, xne);
    struct th_tensor *x = th_input(h, type, 1, TH_SHAPE(buffer_len(type, n + skip_x)), -1000.0f, 1000.0f);
    struct th_tensor *y = th_input(h, type, 1, TH_SHAPE(buffer_len(type, n + skip_y)), -1000.0f, 1000.0f);
    struct op_permute a[2];
    for (int s = 0; s < 2; s++) {
        a[s] = (struct op_permute){.x = view(x, s, skip_x, nd, xne), .y = view(y, s, skip_y, nd, yne)};
        memcpy(a[s].perm, perm, (size_t)nd * sizeof *perm);
    }
    if (th_run(h, OP_permute, &a[0], &a[1]))
        th_check(h, y, 0);
}

/* Calls f(perm) for every permutation of 0..nd-1 (Heap's algorithm). */
static void all_perms(struct th *h, be_dtype type, int nd, const int64_t *xne, int64_t skip_x, int64_t skip_y) {
    int32_t p[BE_MAX_DIMS];
    int c[BE_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++)
        p[d] = d;
    permute_case(h, type, nd, xne, p, skip_x, skip_y);
    for (int i = 1; i < nd;) {
        if (c[i] < i) {
            int j = i % 2 ? c[i] : 0;
            int32_t t = p[j];
            p[j] = p[i];
            p[i] = t;
            permute_case(h, type, nd, xne, p, skip_x, skip_y);
            c[i]++;
            i = 1;
        } else {
            c[i++] = 0;
        }
    }
}

int main(void) {
    struct th h;
    th_open(&h, true);
    const bool f16 = h.dev[TH_DEV]->info.f16;
    const int64_t sizes[] = {0, 1, 3, 255, 256, 1025, 70001};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int act = ACT_NONE; act <= ACT_LOG_GUARD; act++)
            unary_case(&h, sizes[i], act, act == ACT_NONE ? 0.5f : 1.0f);
    unary_inplace_case(&h, 1025, ACT_NONE, 0.5f);
    unary_inplace_case(&h, 70001, ACT_TANH, 2.0f);
    upload_pileup_case(&h);

    /* binary: full-size b, per-column vectors, scalars; every activation; y aliasing a. */
    for (int kind = BINARY_ADD; kind <= BINARY_MUL; kind++) {
        binary_case(&h, 0, 5, 5, kind, ACT_NONE, 1.0f, 1.0f, false);
        binary_case(&h, 1, 1, 1, kind, ACT_NONE, 1.0f, 1.0f, false);
        binary_case(&h, 1, 3, 3, kind, ACT_NONE, 0.5f, -2.0f, false);
        binary_case(&h, 7, 3, 21, kind, ACT_NONE, 1.0f, 0.25f, false);
        binary_case(&h, 1025, 3, 3, kind, ACT_NONE, 1.0f, 1.0f, false);
        binary_case(&h, 3, 1025, 1025, kind, ACT_NONE, -1.5f, 0.5f, false);
        binary_case(&h, 70001, 3, 1, kind, ACT_NONE, 1.0f, 3.0f, false);
        binary_case(&h, 301, 257, 257, kind, ACT_NONE, 1.0f, 1.0f, true);
        binary_case(&h, 9, 1000, 9000, kind, ACT_NONE, 2.0f, 1.0f, true);
        for (int act = ACT_RELU; act <= ACT_TANH; act++)
            binary_case(&h, 33, 65, 65, kind, act, 1.0f, 0.5f, false);
    }

    const int64_t glu_shapes[][2] = {{0, 4}, {3, 0}, {1, 1}, {3, 7}, {7, 512}, {2, 1025}, {70001, 3}};
    for (unsigned i = 0; i < sizeof glu_shapes / sizeof *glu_shapes; i++) {
        glu_case(&h, glu_shapes[i][0], glu_shapes[i][1], BE_F32, BE_F32);
        if (f16 && i % 2 == 0) /* f16 rows of odd width start and end mid-word */
            glu_case(&h, glu_shapes[i][0], glu_shapes[i][1], BE_F16, BE_F16);
        if (f16 && i >= 3) {
            glu_case(&h, glu_shapes[i][0], glu_shapes[i][1], BE_F32, BE_F16);
            glu_case(&h, glu_shapes[i][0], glu_shapes[i][1], BE_F16, BE_F32);
        }
    }
    if (!f16)
        printf("the device has no f16 (VKASR_DISABLE_F16?): glu's f16 tensors are not tested\n");

    /* posenc: the encoder's shapes (60 s and 10 min), negative and zero distances, and every integer
     * argument below 2^22 (C = 2: inv_freq 1, so x = |r|) */
    posenc_case(&h, 3, 7, 8);
    posenc_case(&h, 749, 1499, 1024);
    posenc_case(&h, 7499, 14999, 1024);
    posenc_case(&h, POSENC_MAX_R - 1, 2 * POSENC_MAX_R - 1, 2);
    posenc_case(&h, 0, 0, 64);
    posenc_rows_case(&h);
    posenc_rejects_case(&h);

    /* pad: ranks 1-4, every type, a value f16 must round, zero-size x, x and y starting mid-word. */
    const be_dtype types[] = {BE_F32, BE_F16, BE_I32};
    for (unsigned t = 0; t < 3; t++) {
        be_dtype ty = types[t];
        pad_case(&h, ty, 1, TH_SHAPE(1), TH_SHAPE(0), TH_SHAPE(0), -1.5f, 0, 0);
        pad_case(&h, ty, 1, TH_SHAPE(1025), TH_SHAPE(5), TH_SHAPE(12), 0.3f, 0, 0);
        pad_case(&h, ty, 1, TH_SHAPE(1025), TH_SHAPE(5), TH_SHAPE(12), -3.7f, 1, 1);
        pad_case(&h, ty, 1, TH_SHAPE(0), TH_SHAPE(2), TH_SHAPE(1), 2.0f, 0, 0);
        pad_case(&h, ty, 2, TH_SHAPE(3, 7), TH_SHAPE(1, 2), TH_SHAPE(0, 3), 7.0f, 0, 1);
        pad_case(&h, ty, 2, TH_SHAPE(70001, 3), TH_SHAPE(0, 1), TH_SHAPE(2, 0), 0.0f, 1, 0);
        pad_case(&h, ty, 2, TH_SHAPE(5, 0), TH_SHAPE(1, 1), TH_SHAPE(1, 1), -1.0f, 0, 0);
        pad_case(&h, ty, 2, TH_SHAPE(0, 3), TH_SHAPE(0, 1), TH_SHAPE(0, 0), -1.0f, 0, 0); /* empty y */
        pad_case(&h, ty, 3, TH_SHAPE(3, 5, 7), TH_SHAPE(1, 0, 2), TH_SHAPE(2, 3, 0), 1e9f, 1, 1);
        pad_case(&h, ty, 3, TH_SHAPE(2, 129, 33), TH_SHAPE(0, 4, 0), TH_SHAPE(0, 0, 1), -0.0f, 0, 0);
        pad_case(&h, ty, 4, TH_SHAPE(2, 3, 5, 7), TH_SHAPE(1, 0, 1, 2), TH_SHAPE(0, 2, 1, 1), 65504.0f, 0, 1);
        pad_case(&h, ty, 4, TH_SHAPE(1, 1, 1, 1), TH_SHAPE(0, 0, 0, 0), TH_SHAPE(0, 0, 0, 0), 5.0f, 1, 0);
    }

    /* permute: every permutation of ranks 1-4 on odd shapes, every type, aligned and mid-word. */
    for (unsigned t = 0; t < 3; t++) {
        be_dtype ty = types[t];
        all_perms(&h, ty, 1, TH_SHAPE(1025), 0, 0);
        all_perms(&h, ty, 2, TH_SHAPE(3, 7), 1, 0);
        all_perms(&h, ty, 2, TH_SHAPE(257, 129), 0, 1);
        all_perms(&h, ty, 3, TH_SHAPE(3, 5, 7), 1, 1);
        all_perms(&h, ty, 4, TH_SHAPE(2, 3, 5, 7), (int64_t)t % 2, 1 - (int64_t)t % 2);
        permute_case(&h, ty, 3, TH_SHAPE(0, 5, 7), (const int32_t[]){2, 0, 1}, 0, 0);
        permute_case(&h, ty, 2, TH_SHAPE(70001, 3), (const int32_t[]){1, 0}, 0, 1);
        permute_case(&h, ty, 3, TH_SHAPE(33, 65, 17), (const int32_t[]){1, 0, 2}, 1, 0);
    }
    return th_close(&h);
}
