/* test_ops_decoder_audio.c — the prediction network's LSTM step and the front end's STFT power spectrum
 * on Vulkan vs the C reference (double precision). The LSTM step of B rows (a batch of hypotheses, each
 * gated by its own S_EMIT-like word), with f32 and f16 weights: against the reference, and each row
 * bit-identical to the same row computed alone on the device (on a GPU with 32-wide subgroups, the
 * variant adding the lanes through subgroup shuffles; lavapipe runs the shared-memory one).
 *
 * Tolerances (NMSE against the double reference):
 *   lstm_step 1e-10: each gate is an f32 dot product of In + P terms (relative error ~1e-7 at P = 1025),
 *     followed by sigmoid/tanh; measured NMSE ~2e-13. A wrong row, gate order or state gives > 1e-3.
 *     With a closed gate, bit-exact: nothing may be written.
 *   stft_power 1e-10: f32 radix-2 FFT with accurately computed twiddles; measured NMSE ~3e-14 on full-
 *     scale and 1e-3-amplitude noise. Twiddles at GLSL's guaranteed sin/cos precision (2^-11) would
 *     exceed it. The spectrum feeds a log, so the relative error of every bin above 1e-6 of the frame's
 *     peak power is bounded too (STFT_REL_TOL): f32 rounding in the FFT is absolute, ~1e-7 of the
 *     frame's energy, so a bin 60 dB below the peak sees ~1e-4 relative error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

#define LSTM_TOL 1e-10
#define STFT_TOL 1e-10
#define STFT_REL_TOL 1e-3

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static double worst_lstm, worst_stft, worst_rel;

static float *vk_fetch(struct th *h, const struct th_tensor *t) {
    uint64_t bytes = be_nbytes(&t->side[TH_DEV]);
    float *p = malloc(bytes ? bytes : 4);
    if (!p)
        exit(1);
    if (be_download(h->be[TH_DEV], p, t->side[TH_DEV].addr, bytes)) {
        fprintf(stderr, "FATAL: download: %s\n", h->be[TH_DEV]->err.msg);
        exit(1);
    }
    return p;
}

/* NMSE of the Vulkan output against the reference (out->host after th_check). */
static double measured_nmse(struct th *h, struct th_tensor *out) {
    uint64_t n = be_numel(&out->side[TH_REF]);
    float *v = vk_fetch(h, out);
    const float *r = out->host;
    double se = 0, sr = 0;
    for (uint64_t i = 0; i < n; i++) {
        se += ((double)v[i] - r[i]) * ((double)v[i] - r[i]);
        sr += (double)r[i] * r[i];
    }
    free(v);
    return sr > 0 ? se / sr : se;
}

/* ---- lstm_step -------------------------------------------------------------------------------- */

/* gate: -1 none; 0 or 1 the value of the op's gate (0: nothing may be written, so the outputs start as
 * identical inputs on both sides and must stay bit-identical: a computed step would differ). */
static void lstm_case(struct th *h, be_dtype wt, int64_t in, int64_t p, float wscale, bool c_in_place, int gate) {
    th_case(h, "lstm_step %s In=%lld P=%lld w=+-%g%s%s", wt == BE_F16 ? "f16" : "f32", (long long)in, (long long)p,
            wscale, c_in_place ? " c_out=c" : "", gate < 0 ? "" : gate ? " gate open" : " gate closed");
    struct th_tensor *x = th_input(h, BE_F32, 1, TH_SHAPE(in), -1.0f, 1.0f);
    struct th_tensor *hh = th_input(h, BE_F32, 1, TH_SHAPE(p), -1.0f, 1.0f);
    struct th_tensor *c = th_input(h, BE_F32, 1, TH_SHAPE(p), -2.0f, 2.0f);
    struct th_tensor *wih = th_input(h, wt, 2, TH_SHAPE(4 * p, in), -wscale, wscale);
    struct th_tensor *whh = th_input(h, wt, 2, TH_SHAPE(4 * p, p), -wscale, wscale);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(4 * p), -0.5f, 0.5f);
    struct th_tensor *ho = gate == 0 ? th_input(h, BE_F32, 1, TH_SHAPE(p), -1.0f, 1.0f)
                                     : th_output(h, BE_F32, 1, TH_SHAPE(p));
    struct th_tensor *co = c_in_place ? c
                           : gate == 0 ? th_input(h, BE_F32, 1, TH_SHAPE(p), -1.0f, 1.0f)
                                       : th_output(h, BE_F32, 1, TH_SHAPE(p));
    struct th_tensor *g = gate < 0 ? NULL : th_input_data(h, BE_I32, 1, TH_SHAPE(1), &gate);
    struct op_lstm_step a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_lstm_step){.x = TH_T(x, s), .h = TH_T(hh, s), .c = TH_T(c, s), .w_ih = TH_T(wih, s),
                                     .w_hh = TH_T(whh, s), .b = TH_T(b, s), .h_out = TH_T(ho, s),
                                     .c_out = TH_T(co, s), .gate = g ? TH_T(g, s) : (be_tensor){0}};
    if (!th_run(h, OP_lstm_step, &a[0], &a[1]))
        return;
    if (gate == 0) {
        th_check(h, ho, 0);
        th_check(h, co, 0);
        th_check_guards(h);
        return;
    }
    struct th_tensor *outs[2] = {ho, co};
    for (int i = 0; i < 2; i++)
        if (th_check(h, outs[i], LSTM_TOL)) {
            double e = measured_nmse(h, outs[i]);
            worst_lstm = e > worst_lstm ? e : worst_lstm;
        }
    th_check_guards(h);
}

/* B rows, gates every third closed (gate words `stride` apart); closed rows' outputs start as inputs equal
 * on both sides and must not move. Then every open row alone (1-D tensors, B = 1) on the device must
 * give the batch's bits. */
static void lstm_batch_case(struct th *h, be_dtype wt, int64_t B, int64_t in, int64_t p, int64_t stride) {
    th_case(h, "lstm_step %s B=%lld In=%lld P=%lld gate stride %lld", wt == BE_F16 ? "f16" : "f32", (long long)B,
            (long long)in, (long long)p, (long long)stride);
    struct th_tensor *x = th_input(h, BE_F32, 2, TH_SHAPE(B, in), -1.0f, 1.0f);
    struct th_tensor *hh = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -1.0f, 1.0f);
    struct th_tensor *c = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -2.0f, 2.0f);
    struct th_tensor *wih = th_input(h, wt, 2, TH_SHAPE(4 * p, in), -0.3f, 0.3f);
    struct th_tensor *whh = th_input(h, wt, 2, TH_SHAPE(4 * p, p), -0.3f, 0.3f);
    struct th_tensor *b = th_input(h, BE_F32, 1, TH_SHAPE(4 * p), -0.5f, 0.5f);
    struct th_tensor *ho = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -1.0f, 1.0f);
    struct th_tensor *co = th_input(h, BE_F32, 2, TH_SHAPE(B, p), -1.0f, 1.0f);
    int32_t *gw = calloc((size_t)((B - 1) * stride + 1), sizeof *gw);
    if (!gw)
        exit(1);
    for (int64_t r = 0; r < B; r++)
        gw[r * stride] = r % 3 != 1;
    struct th_tensor *g = th_input_data(h, BE_I32, 1, TH_SHAPE((B - 1) * stride + 1), gw);
    struct op_lstm_step a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_lstm_step){.x = TH_T(x, s), .h = TH_T(hh, s), .c = TH_T(c, s), .w_ih = TH_T(wih, s),
                                     .w_hh = TH_T(whh, s), .b = TH_T(b, s), .h_out = TH_T(ho, s),
                                     .c_out = TH_T(co, s), .gate = TH_T(g, s), .gate_stride = stride};
    if (!th_run(h, OP_lstm_step, &a[0], &a[1])) {
        free(gw);
        return;
    }
    th_check(h, ho, LSTM_TOL);
    th_check(h, co, LSTM_TOL);
    th_check_guards(h);
    float *bh = vk_fetch(h, ho), *bc = vk_fetch(h, co);
    struct th_tensor *h1 = th_output(h, BE_F32, 1, TH_SHAPE(p)), *c1 = th_output(h, BE_F32, 1, TH_SHAPE(p));
    float *oh = malloc((size_t)p * sizeof *oh), *oc = malloc((size_t)p * sizeof *oc);
    if (!oh || !oc)
        exit(1);
    struct backend *dv = h->be[TH_DEV];
    bool same = true;
    for (int64_t r = 0; r < B && same; r++) {
        if (!gw[r * stride])
            continue;
        const uint64_t rin = (uint64_t)(r * in) * 4, rp = (uint64_t)(r * p) * 4;
        struct op_lstm_step one = {
            .x = be_tensor_1d(TH_T(x, TH_DEV).addr + rin, BE_F32, in),
            .h = be_tensor_1d(TH_T(hh, TH_DEV).addr + rp, BE_F32, p),
            .c = be_tensor_1d(TH_T(c, TH_DEV).addr + rp, BE_F32, p), .w_ih = TH_T(wih, TH_DEV),
            .w_hh = TH_T(whh, TH_DEV),
            .b = TH_T(b, TH_DEV), .h_out = TH_T(h1, TH_DEV), .c_out = TH_T(c1, TH_DEV)};
        if (be_run(dv, OP_lstm_step, &one) || be_sync(dv) || be_download(dv, oh, one.h_out.addr, (uint64_t)p * 4) ||
            be_download(dv, oc, one.c_out.addr, (uint64_t)p * 4)) {
            printf("FAIL [%s]: row %lld alone: %s\n", h->name, (long long)r, dv->err.msg);
            h->failures++;
            break;
        }
        if (memcmp(oh, bh + r * p, (size_t)p * 4) || memcmp(oc, bc + r * p, (size_t)p * 4)) {
            printf("FAIL [%s]: row %lld of the batch differs from the row alone\n", h->name, (long long)r);
            h->failures++;
            same = false;
        }
    }
    h->checks++;
    free(oh);
    free(oc);
    free(bh);
    free(bc);
    free(gw);
}

/* A decoder's steps: weights in the weights pool (a model's, as the CPU backend's per-input cache of
 * b + W_ih x asks), B rows whose inputs repeat within the step (rows r and r + 2 alike) and across
 * steps (the same x with new h and c). Every step must give the bits of the same step on a fresh
 * backend of the device, which has computed nothing before. */
static float repeat_rand(uint64_t *s) {
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return (float)((double)(*s >> 40) / (double)(1u << 24)) - 0.5f;
}

static bool repeat_step(struct backend *be, const be_tensor *w, int64_t B, int64_t in, int64_t p, const float *x,
                        const float *hc, float *out) {
    const uint64_t mark = be_mark(be);
    be_tensor t[5]; /* x, h, c, h_out, c_out */
    bool ok = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){B, in}, &t[0]) == VKASR_OK;
    for (int i = 1; i < 5 && ok; i++)
        ok = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){B, p}, &t[i]) == VKASR_OK;
    const uint64_t nx = (uint64_t)(B * in) * 4, np = (uint64_t)(B * p) * 4;
    ok = ok && be_upload(be, t[0].addr, x, nx) == VKASR_OK && be_upload(be, t[1].addr, hc, np) == VKASR_OK &&
         be_upload(be, t[2].addr, hc + B * p, np) == VKASR_OK;
    struct op_lstm_step a = {.x = t[0], .h = t[1], .c = t[2], .w_ih = w[0], .w_hh = w[1], .b = w[2],
                             .h_out = t[3], .c_out = t[4]};
    ok = ok && be_run(be, OP_lstm_step, &a) == VKASR_OK && be_sync(be) == VKASR_OK &&
         be_download(be, out, t[3].addr, np) == VKASR_OK && be_download(be, out + B * p, t[4].addr, np) == VKASR_OK;
    be_release(be, mark);
    return ok;
}

static void lstm_repeat_case(struct th *h, int64_t B, int64_t in, int64_t p) {
    th_case(h, "lstm_step repeated inputs B=%lld In=%lld P=%lld, weights in the weights pool", (long long)B,
            (long long)in, (long long)p);
    struct backend *dv = h->be[TH_DEV], *fresh = NULL;
    struct err e = {0};
    be_tensor w[3]; /* w_ih, w_hh, b */
    const int64_t G = 4 * p, n[3] = {G * in, G * p, G};
    float *buf = malloc((size_t)(n[0] + n[1] + n[2] + 2 * B * in + 4 * B * p + 2 * 2 * B * p) * sizeof *buf);
    if (!buf)
        exit(1);
    float *wv = buf, *x = wv + n[0] + n[1] + n[2], *hc = x + 2 * B * in, *o1 = hc + 4 * B * p, *o2 = o1 + 2 * B * p;
    uint64_t rng = 12345;
    for (int64_t i = 0; i < n[0] + n[1] + n[2]; i++)
        wv[i] = repeat_rand(&rng);
    for (int64_t r = 0; r < B; r++) /* step 1's rows: r and r + 2 alike; step 2's: step 1's row 0, then 1 */
        for (int64_t k = 0; k < in; k++) {
            x[r * in + k] = r % 2 ? repeat_rand(&rng) : (r ? x[(r - 2) * in + k] : repeat_rand(&rng));
            x[(B + r) * in + k] = x[(r % 2) * in + k];
        }
    for (int64_t i = 0; i < 4 * B * p; i++)
        hc[i] = 2.0f * repeat_rand(&rng);
    bool ok = be_backend_create(h->dev[TH_DEV], &fresh, &e) == VKASR_OK;
    for (int i = 0; i < 3 && ok; i++) {
        ok = be_alloc_tensor(dv, BE_POOL_WEIGHTS, BE_F32, i < 2 ? 2 : 1, i < 2 ? (int64_t[]){G, i ? p : in}
                                                                           : (int64_t[]){G}, &w[i]) == VKASR_OK;
        ok = ok && be_upload(dv, w[i].addr, wv + (i ? n[0] : 0) + (i > 1 ? n[1] : 0), (uint64_t)n[i] * 4) == VKASR_OK;
    }
    for (int step = 0; step < 2 && ok; step++) {
        const float *xs = x + step * B * in, *hs = hc + step * 2 * B * p;
        ok = repeat_step(dv, w, B, in, p, xs, hs, o1) && repeat_step(fresh, w, B, in, p, xs, hs, o2);
        if (ok && memcmp(o1, o2, (size_t)(2 * B * p) * sizeof *o1) != 0) {
            printf("FAIL [%s]: step %d differs from the same step on a fresh backend\n", h->name, step + 1);
            h->failures++;
        }
    }
    if (!ok) {
        printf("FAIL [%s]: %s\n", h->name, e.msg[0] ? e.msg : dv->err.msg[0] ? dv->err.msg : fresh->err.msg);
        h->failures++;
    }
    h->checks++;
    if (fresh)
        be_backend_destroy(fresh);
    free(buf);
}

/* ---- stft_power ------------------------------------------------------------------------------- */

enum sig { SIG_NOISE, SIG_TONE_THEN_SILENCE };

/* Max relative error over bins whose reference power exceeds 1e-6 of the largest in their frame. */
static double stft_rel_err(struct th *h, struct th_tensor *y) {
    int64_t F = y->ne[0], nb = y->ne[1];
    float *v = vk_fetch(h, y);
    const float *r = y->host;
    double worst = 0;
    for (int64_t f = 0; f < F; f++) {
        double peak = 0;
        for (int64_t k = 0; k < nb; k++)
            peak = r[f * nb + k] > peak ? r[f * nb + k] : peak;
        for (int64_t k = 0; k < nb; k++) {
            double rv = r[f * nb + k];
            if (peak > 0 && rv > 1e-6 * peak) {
                double e = fabs((double)v[f * nb + k] - rv) / rv;
                worst = e > worst ? e : worst;
            }
        }
    }
    free(v);
    return worst;
}

/* The window input: a symmetric Hann of win samples, as the Parakeet front end uses. */
static struct th_tensor *hann_window(struct th *h, int win) {
    float *ws = malloc((size_t)win * sizeof *ws);
    if (!ws)
        exit(1);
    for (int i = 0; i < win; i++)
        ws[i] = win == 1 ? 1.0f : (float)(0.5 - 0.5 * cos(2 * M_PI * i / (win - 1)));
    struct th_tensor *w = th_input_data(h, BE_F32, 1, TH_SHAPE(win), ws);
    free(ws);
    return w;
}

static void stft_case(struct th *h, int64_t n, int n_fft, int win, int hop, int64_t f0, int64_t frames, float amp,
                      enum sig sig, float preemph) {
    th_case(h, "stft_power N=%lld n_fft=%d win=%d hop=%d frames %lld..%lld amp=%g %s preemph=%g", (long long)n, n_fft,
            win, hop, (long long)f0, (long long)(f0 + frames - 1), amp, sig == SIG_NOISE ? "noise" : "tone+silence",
            preemph);
    float *xs = malloc((size_t)(n ? n : 1) * sizeof *xs);
    if (!xs)
        exit(1);
    for (int64_t i = 0; i < n; i++)
        xs[i] = sig == SIG_NOISE ? amp * th_uniform(h, -1.0f, 1.0f)
                                 : (i < n / 2 ? amp * (float)sin(2 * M_PI * 440.0 * (double)i / 16000.0) : 0.0f);
    struct th_tensor *x = th_input_data(h, BE_F32, 1, TH_SHAPE(n), xs);
    struct th_tensor *w = hann_window(h, win);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(frames, n_fft / 2 + 1));
    free(xs);
    struct op_stft_power a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_stft_power){.x = TH_T(x, s), .window = TH_T(w, s), .y = TH_T(y, s), .f0 = f0,
                                      .n_fft = n_fft, .hop = hop, .preemph = preemph};
    if (!th_run(h, OP_stft_power, &a[0], &a[1]))
        return;
    if (th_check(h, y, STFT_TOL)) {
        double e = measured_nmse(h, y), r = stft_rel_err(h, y);
        worst_stft = e > worst_stft ? e : worst_stft;
        worst_rel = r > worst_rel ? r : worst_rel;
        printf("  %s: nmse %.3g, max relative error %.3g\n", h->name, e, r);
        h->checks++;
        if (!(r <= STFT_REL_TOL)) {
            printf("FAIL [%s]: max relative error %.3g of bins above 1e-6 of the peak > %.0e\n", h->name, r,
                   STFT_REL_TOL);
            h->failures++;
        }
    }
    th_check_guards(h);
}

/* A packed batch (the streaming step's form): three signals packed in one x, their frames in one call
 * with the segment table, against the reference, and each segment's rows equal bit for bit to a call on
 * that signal alone, on both sides (n_fft 512, the models', and 8). */
static void stft_batch_case(struct th *h, int n_fft, int win, int hop) {
    enum { S = 3 };
    static const int64_t n[S] = {3000, 1601, 9000}, f0[S] = {0, 5, 3}, frames[S] = {19, 7, 20};
    int64_t seg[S * 4], x0 = 0, rows = 0;
    for (int s = 0; s < S; s++) {
        seg[4 * s] = rows;
        seg[4 * s + 1] = x0;
        seg[4 * s + 2] = n[s];
        seg[4 * s + 3] = f0[s];
        x0 += (n[s] + 3) / 4 * 4;
        rows += frames[s];
    }
    th_case(h, "stft_power packed batch: %d signals, %lld frames, n_fft=%d win=%d hop=%d", S, (long long)rows, n_fft,
            win, hop);
    float *xs = malloc((size_t)x0 * sizeof *xs);
    if (!xs)
        exit(1);
    for (int64_t i = 0; i < x0; i++)
        xs[i] = th_uniform(h, -1.0f, 1.0f);
    struct th_tensor *x = th_input_data(h, BE_F32, 1, TH_SHAPE(x0), xs);
    struct th_tensor *w = hann_window(h, win);
    struct th_tensor *tab = th_input_data(h, BE_I64, 2, TH_SHAPE(S, 4), seg);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(rows, n_fft / 2 + 1));
    struct th_tensor *y1 = th_output(h, BE_F32, 2, TH_SHAPE(rows, n_fft / 2 + 1));
    free(xs);
    struct op_stft_power a[2];
    for (int sd = 0; sd < 2; sd++)
        a[sd] = (struct op_stft_power){.x = TH_T(x, sd), .window = TH_T(w, sd), .y = TH_T(y, sd), .n_fft = n_fft,
                                       .hop = hop, .preemph = 0.97f, .seg = TH_T(tab, sd)};
    if (!th_run(h, OP_stft_power, &a[0], &a[1]))
        return;
    for (int s = 0; s < S; s++) { /* each signal alone, into its rows of y1 */
        struct op_stft_power b[2];
        for (int sd = 0; sd < 2; sd++)
            b[sd] = (struct op_stft_power){
                .x = be_tensor_1d(TH_T(x, sd).addr + (uint64_t)seg[4 * s + 1] * 4, BE_F32, n[s]),
                .window = TH_T(w, sd), .y = be_tensor_rows(&TH_T(y1, sd), seg[4 * s], frames[s]), .f0 = f0[s],
                .n_fft = n_fft, .hop = hop, .preemph = 0.97f};
        if (!th_run(h, OP_stft_power, &b[0], &b[1]))
            return;
    }
    if (th_check(h, y, STFT_TOL) && th_check(h, y1, STFT_TOL)) {
        const size_t bytes = (size_t)be_nbytes(&TH_T(y, TH_DEV));
        float *dv = vk_fetch(h, y), *dv1 = vk_fetch(h, y1);
        const bool same_dev = memcmp(dv, dv1, bytes) == 0, same_ref = memcmp(y->host, y1->host, bytes) == 0;
        free(dv);
        free(dv1);
        h->checks++;
        printf("  %s: batched = alone, bit for bit: device %s, reference %s\n", h->name, same_dev ? "yes" : "NO",
               same_ref ? "yes" : "NO");
        if (!same_dev || !same_ref) {
            printf("FAIL [%s]: a segment's rows differ from its signal's call alone\n", h->name);
            h->failures++;
        }
    }
    th_check_guards(h);
}

/* Even n_fft that is not a power of two: valid for the op (the reference runs a direct DFT), refused by
 * the Vulkan FFT with VKASR_ERR_UNSUPPORTED and a message naming n_fft. */
static void stft_unsupported_case(struct th *h) {
    if (strcmp(h->dev_name, "CPU") == 0) { /* the reference's direct DFT */
        th_skip(h, "stft_power n_fft=400 refused (the Vulkan FFT's limit)");
        return;
    }
    th_case(h, "stft_power n_fft=400 on Vulkan");
    struct th_tensor *x = th_input(h, BE_F32, 1, TH_SHAPE(1000), -1.0f, 1.0f);
    struct th_tensor *w = th_input(h, BE_F32, 1, TH_SHAPE(400), 0.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(3, 201));
    struct op_stft_power a = {.x = TH_T(x, TH_DEV), .window = TH_T(w, TH_DEV), .y = TH_T(y, TH_DEV), .n_fft = 400,
                              .hop = 160, .preemph = 0.97f};
    h->checks++;
    vkasr_status st = be_run(h->be[TH_DEV], OP_stft_power, &a);
    if (st != VKASR_ERR_UNSUPPORTED || !strstr(h->be[TH_DEV]->err.msg, "400")) {
        printf("FAIL [%s]: status %d (%s), want VKASR_ERR_UNSUPPORTED naming n_fft\n", h->name, (int)st,
               h->be[TH_DEV]->err.msg);
        h->failures++;
    }
    err_clear(&h->be[TH_DEV]->err);
}

int main(void) {
    struct th h;
    th_open(&h, true);

    /* LSTM: tiny, Parakeet's P = 640 (In = P), In != P both ways, a P that is not a multiple of the
     * workgroup, saturating gates, and c updated in place (c_out = c is allowed). */
    lstm_case(&h, BE_F32, 1, 1, 0.5f, false, -1);
    lstm_case(&h, BE_F32, 0, 3, 0.5f, false, -1); /* no input: gates from h and the bias alone */
    lstm_case(&h, BE_F32, 0, 65, 0.5f, true, -1);
    lstm_case(&h, BE_F32, 5, 3, 0.5f, false, -1);
    lstm_case(&h, BE_F32, 640, 640, 0.05f, false, -1);
    lstm_case(&h, BE_F32, 300, 1025, 0.05f, false, -1);
    lstm_case(&h, BE_F32, 1025, 640, 0.05f, false, -1);
    lstm_case(&h, BE_F32, 640, 640, 1.0f, false, -1);
    lstm_case(&h, BE_F32, 64, 64, 0.2f, true, -1);
    lstm_case(&h, BE_F32, 96, 96, 0.2f, false, 1); /* the device-resident search's gated step */
    lstm_case(&h, BE_F32, 96, 96, 0.2f, false, 0);
    lstm_case(&h, BE_F32, 96, 96, 0.2f, true, 0);
    lstm_batch_case(&h, BE_F32, 7, 96, 96, 16);
    lstm_batch_case(&h, BE_F32, 33, 64, 40, 1);
    lstm_batch_case(&h, BE_F32, 2, 640, 640, 16);
    lstm_repeat_case(&h, 4, 96, 80);
    /* f16 weights (an f16 session's decoder): vector loads (In, P multiples of 4), single weights (5, 3;
     * 1025), gated, and batches whose rows must equal the rows alone */
    if (h.dev[TH_DEV]->info.f16) {
        lstm_case(&h, BE_F16, 640, 640, 0.05f, false, -1);
        lstm_case(&h, BE_F16, 5, 3, 0.5f, false, -1);
        lstm_case(&h, BE_F16, 1025, 640, 0.05f, true, -1);
        lstm_case(&h, BE_F16, 96, 96, 0.2f, false, 1);
        lstm_case(&h, BE_F16, 96, 96, 0.2f, false, 0);
        lstm_batch_case(&h, BE_F16, 33, 64, 40, 1);
        lstm_batch_case(&h, BE_F16, 2, 640, 640, 16);
    } else {
        th_skip(&h, "lstm_step with f16 weights (the device has no f16)");
    }

    /* STFT: the Parakeet front end (n_fft 512, win 400, hop 160, preemph 0.97) on 1 s of full-scale and
     * quiet noise, a frame range starting inside the signal (tiles), a tone followed by silence (frames
     * of zeros, huge dynamic range), other powers of two from 2 to 4096 with odd windows and hops, and
     * frames reaching past both ends of a short signal (including no samples at all). */
    stft_case(&h, 16000, 512, 400, 160, 0, 101, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 16000, 512, 400, 160, 0, 101, 1e-3f, SIG_NOISE, 0.97f);
    stft_case(&h, 16000, 512, 400, 160, 37, 20, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 16000, 512, 400, 160, 0, 101, 0.5f, SIG_TONE_THEN_SILENCE, 0.97f);
    stft_case(&h, 7, 2, 1, 1, 0, 9, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 9, 4, 3, 2, 0, 6, 1.0f, SIG_NOISE, -0.5f);
    stft_case(&h, 50, 8, 8, 3, 0, 17, 1.0f, SIG_NOISE, 0.0f);
    stft_case(&h, 1000, 64, 49, 16, 0, 63, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 5000, 1024, 801, 256, 2, 18, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 20000, 4096, 4096, 1024, 0, 20, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 0, 512, 400, 160, 0, 2, 1.0f, SIG_NOISE, 0.97f);
    stft_case(&h, 300, 512, 400, 160, 0, 0, 1.0f, SIG_NOISE, 0.97f);
    stft_batch_case(&h, 512, 400, 160);
    stft_batch_case(&h, 8, 8, 3);
    stft_unsupported_case(&h);

    printf("worst nmse: lstm_step %.3g (tolerance %.0e), stft_power %.3g (tolerance %.0e); stft max relative "
           "error of bins > 1e-6 of the frame peak %.3g (tolerance %.0e)\n",
           worst_lstm, LSTM_TOL, worst_stft, STFT_TOL, worst_rel, STFT_REL_TOL);
    return th_close(&h);
}
