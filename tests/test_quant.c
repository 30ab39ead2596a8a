/* test_quant.c — the quantized weight formats (src/model/quant.*): byte layouts against blocks written
 * here by hand from ggml's documented layouts, every weight at its nearest representable level, exact
 * round trips of representable blocks, error bounds, determinism over threads, the type rule, and
 * vkasr_convert's quantized GGUF files (round trip, identical bytes twice, refusal to re-quantize).
 *
 * usage: test_quant MODEL.gguf TMPDIR   (MODEL: an f16 vkasr GGUF, the shipped default model) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "expect.h"
#include "fixture_io.h"
#include "model/model_types.h"
#include "model/quant.h"
#include "vkasr.h"


static const uint32_t BLOCK_TYPES[] = {QT_Q8_0, QT_Q6_K, QT_Q5_K, QT_Q4_K};

/* Deterministic Gaussian-ish numbers (sum of uniforms). */
static uint64_t rng = 88172645463325252ull;
static float urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}
static float grand(void) {
    float s = 0.0f;
    for (int i = 0; i < 12; i++)
        s += urand();
    return s - 6.0f;
}

static float h16(const uint8_t *p) {
    return half_to_float((uint16_t)(p[0] | p[1] << 8));
}

/* ---------------------------------------------------------------------------------------------- */

static void test_traits(void) {
    static const struct {
        uint32_t id;
        const char *name;
        int block, bytes;
    } want[] = {{0, "f32", 1, 4},     {1, "f16", 1, 2},      {8, "q8_0", 32, 34},
                {12, "q4_k", 256, 144}, {13, "q5_k", 256, 176}, {14, "q6_k", 256, 210}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct qtraits *t = quant_traits(want[i].id);
        EXPECT(t && !strcmp(t->name, want[i].name) && t->block == want[i].block && t->bytes == want[i].bytes,
               "traits of type %u", want[i].id);
    }
    EXPECT(!quant_traits(2) && !quant_traits(10) && !quant_traits(15), "unknown ids have no traits");
    EXPECT(quant_row_bytes(QT_Q4_K, 1024) == 4 * 144 && quant_row_bytes(QT_Q8_0, 64) == 68, "row bytes");
    /* the public enum's values are the GGML ids */
    EXPECT(VKASR_WEIGHTS_Q8_0 == 8 && VKASR_WEIGHTS_Q4_K == 12 && VKASR_WEIGHTS_Q5_K == 13 && VKASR_WEIGHTS_Q6_K == 14,
           "vkasr_weight_type values");
}

/* x_i = i - 16: amax 16, d = f16(16/127) = 0x3008 (0.1259765625); q = round(x/d). */
static void test_q8_0_by_hand(void) {
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 16);
    uint8_t b[34];
    EXPECT(quant_row(QT_Q8_0, x, b, 32) == 0, "q8_0 quantize");
    EXPECT(b[0] == 0x08 && b[1] == 0x30, "q8_0 scale bits %02x%02x, want 3008", b[1], b[0]);
    /* -16/d = -127.007 -> -127; -1/d = -7.938 -> -8; 0; 1 -> 8; 5/d = 39.69 -> 40; 15/d = 119.07 -> 119 */
    static const struct {
        int i, q;
    } want[] = {{0, -127}, {15, -8}, {16, 0}, {17, 8}, {21, 40}, {31, 119}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        EXPECT((int8_t)b[2 + want[k].i] == want[k].q, "q8_0 x=%d: q %d, want %d", want[k].i - 16,
               (int8_t)b[2 + want[k].i], want[k].q);
    float y[32];
    dequant_row(QT_Q8_0, b, y, 32);
    EXPECT(y[17] == 8 * 0.1259765625f && y[0] == -127 * 0.1259765625f, "q8_0 dequantize");
}

/* Blocks written here from ggml's layouts (ggml-common.h), with known levels, scales and mins; the
 * dequantizer must read back d*sc*q - dmin*m (Q4_K, Q5_K) or d*sc*(q - 32) (Q6_K). */
static void make_kx_block(int bits, uint8_t *blk, int sc[8], int mn[8], int q[256], float d, float dmin) {
    const int nmax = (1 << bits) - 1;
    const int bytes = bits == 4 ? 144 : 176;
    memset(blk, 0, (size_t)bytes);
    uint16_t dh = float_to_half(d), mh = float_to_half(dmin);
    blk[0] = (uint8_t)dh, blk[1] = (uint8_t)(dh >> 8), blk[2] = (uint8_t)mh, blk[3] = (uint8_t)(mh >> 8);
    uint8_t *s = blk + 4;
    for (int j = 0; j < 8; j++) {
        sc[j] = j == 3 ? 63 : 1 + (int)(urand() * 62);
        mn[j] = j == 6 ? 63 : (int)(urand() * 64) % 64;
    }
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[8 + j] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
    uint8_t *qs = blk + (bits == 4 ? 16 : 48), *qh = blk + 16;
    for (int e = 0; e < 256; e++) {
        const int j = e / 32, l = e % 32;
        /* each sub-block uses its lowest and highest level at least once */
        q[e] = l == 0 ? 0 : l == 1 ? nmax : (int)(urand() * (float)(nmax + 1)) % (nmax + 1);
        qs[32 * (j / 2) + l] |= (uint8_t)((q[e] & 15) << (j % 2 ? 4 : 0));
        if (bits == 5)
            qh[l] |= (uint8_t)(((q[e] >> 4) & 1) << j);
    }
}

static void make_q6_block(uint8_t *blk, int sc[16], int q[256], float d) {
    memset(blk, 0, 210);
    for (int j = 0; j < 16; j++) {
        sc[j] = j == 5 ? -128 : (int)(urand() * 200) - 100;
        if (sc[j] == 0)
            sc[j] = 1;
        ((int8_t *)(blk + 192))[j] = (int8_t)sc[j];
    }
    uint16_t dh = float_to_half(d);
    blk[208] = (uint8_t)dh, blk[209] = (uint8_t)(dh >> 8);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, c = (e % 128) / 32, l = e % 32;
        /* every sub-block of 16 holds level 0 (q - 32 = -32: its largest magnitude) at least once */
        q[e] = e % 16 == 0 ? 0 : (int)(urand() * 64) % 64;
        blk[64 * h + 32 * (c % 2) + l] |= (uint8_t)((q[e] & 15) << (c >= 2 ? 4 : 0));
        blk[128 + 32 * h + l] |= (uint8_t)((q[e] >> 4) << (2 * c));
    }
}

static void test_layouts_and_exact_round_trip(void) {
    for (int bits = 4; bits <= 6; bits++) {
        const uint32_t ty = bits == 4 ? QT_Q4_K : bits == 5 ? QT_Q5_K : QT_Q6_K;
        const int bytes = quant_traits(ty)->bytes;
        for (int rep = 0; rep < 20; rep++) {
            uint8_t blk[210], again[210];
            int sc[16], mn[8], q[256];
            float want[256], y[256], y2[256];
            /* powers of two: every product and difference below is exact in f32 */
            const float d = ldexpf(1.0f, -8 - rep % 4), dmin = ldexpf(1.0f, -9 - rep % 3);
            if (bits == 6) {
                make_q6_block(blk, sc, q, d);
                for (int e = 0; e < 256; e++)
                    want[e] = d * (float)sc[e / 16] * (float)(q[e] - 32);
            } else {
                make_kx_block(bits, blk, sc, mn, q, d, dmin);
                for (int e = 0; e < 256; e++)
                    want[e] = d * (float)sc[e / 32] * (float)q[e] - dmin * (float)mn[e / 32];
            }
            dequant_row(ty, blk, y, 256);
            int bad = -1;
            for (int e = 0; e < 256 && bad < 0; e++)
                if (y[e] != want[e])
                    bad = e;
            EXPECT(bad < 0, "%s layout: weight %d reads %g, want %g", quant_traits(ty)->name, bad, y[bad < 0 ? 0 : bad],
                   want[bad < 0 ? 0 : bad]);
            /* representable values come back exactly, in the same bytes */
            EXPECT(quant_row(ty, y, again, 256) == 0, "quantize");
            dequant_row(ty, again, y2, 256);
            EXPECT(memcmp(y, y2, sizeof y) == 0, "%s: representable block not reproduced exactly (rep %d)",
                   quant_traits(ty)->name, rep);
            EXPECT(memcmp(blk, again, (size_t)bytes) == 0, "%s: representable block's bytes differ (rep %d)",
                   quant_traits(ty)->name, rep);
        }
    }
    /* Q8_0: x = d*q, d a power of two, one |q| = 127 */
    float x[64], y[64];
    uint8_t b[68];
    for (int i = 0; i < 64; i++)
        x[i] = ldexpf((float)(i % 32 == 7 ? -127 : (int)(urand() * 255) - 127), -6);
    EXPECT(quant_row(QT_Q8_0, x, b, 64) == 0, "q8_0 quantize");
    dequant_row(QT_Q8_0, b, y, 64);
    EXPECT(memcmp(x, y, sizeof x) == 0, "q8_0: representable values not reproduced exactly");
}

/* Every weight must sit at the level nearest to it among those its block's stored scales allow
 * (round to nearest), which also bounds its error by half a step inside the block's range. Returns the
 * squared error. */
static double check_nearest(uint32_t ty, const float *x, const uint8_t *blk, const float *y, int *bad) {
    const struct qtraits *qt = quant_traits(ty);
    double se = 0.0;
    for (int e = 0; e < qt->block; e++) {
        float step, lo;
        int nl;
        if (ty == QT_Q8_0) {
            step = h16(blk), lo = -127.0f * step, nl = 255;
        } else if (ty == QT_Q6_K) {
            step = h16(blk + 208) * (float)((const int8_t *)(blk + 192))[e / 16];
            lo = -32.0f * step, nl = 64;
        } else {
            const uint8_t *s = blk + 4;
            const int j = e / 32;
            const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
            const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
            step = h16(blk) * (float)sc, lo = -h16(blk + 2) * (float)m, nl = ty == QT_Q4_K ? 16 : 32;
        }
        float best = INFINITY;
        for (int l = 0; l < nl; l++)
            best = fminf(best, fabsf(x[e] - (lo + step * (float)l)));
        const float err = fabsf(x[e] - y[e]);
        /* slack: the quantizer divides, the levels here multiply (a few ulps of the step) */
        if (err > best + 1e-5f * fabsf(step) + 1e-30f)
            (*bad)++;
        se += (double)err * err;
    }
    return se;
}

static void test_random_bounds(void) {
    enum { K = 4096, ROWS = 8 };
    float *x = malloc(sizeof(float) * K * ROWS), *y = malloc(sizeof(float) * K * ROWS);
    uint8_t *q = malloc(quant_row_bytes(QT_Q8_0, K) * ROWS), *q4 = malloc(quant_row_bytes(QT_Q8_0, K) * ROWS);
    double prev = 0.0;
    for (int i = 0; i < K * ROWS; i++) /* rows of different scales, a few outliers */
        x[i] = grand() * ldexpf(1.0f, (i / K) * 3 - 12) * (i % 997 == 0 ? 20.0f : 1.0f);
    for (size_t t = 0; t < sizeof BLOCK_TYPES / sizeof BLOCK_TYPES[0]; t++) {
        const uint32_t ty = BLOCK_TYPES[t];
        const struct qtraits *qt = quant_traits(ty);
        const uint64_t rb = quant_row_bytes(ty, K);
        EXPECT(quant_rows(ty, x, false, ROWS, K, q, 1) == 0, "%s: quant_rows", qt->name);
        /* the same bytes on 3 threads (rows split differently) */
        EXPECT(quant_rows(ty, x, false, ROWS, K, q4, 3) == 0 && memcmp(q, q4, rb * ROWS) == 0,
               "%s: bytes depend on the thread count", qt->name);
        double rel_worst = 0.0;
        int bad = 0;
        for (int r = 0; r < ROWS; r++) {
            dequant_row(ty, q + r * rb, y + r * K, K);
            double se = 0.0, ss = 0.0;
            for (int b = 0; b < K / qt->block; b++) {
                const int o = r * K + b * qt->block;
                se += check_nearest(ty, x + o, q + r * rb + (uint64_t)b * (uint64_t)qt->bytes, y + o, &bad);
            }
            for (int i = 0; i < K; i++)
                ss += (double)x[r * K + i] * x[r * K + i];
            rel_worst = fmax(rel_worst, sqrt(se / ss));
        }
        EXPECT(bad == 0, "%s: %d weights not at their nearest level", qt->name, bad);
        /* Relative RMS error bounds from the formats, for Gaussian weights: a step is about the block's
         * range over its levels (range ~ 5 sigma in 32 weights, outliers widen it), rounding error
         * step/sqrt(12): q8_0 5/254/3.46 = 0.6 %, q6_k (16 weights, ~4.5 sigma) 4.5/63/3.46 = 2.1 %,
         * q5_k 5/31/3.46 = 4.7 %, q4_k 5/15/3.46 = 9.6 %; the bounds allow 1.5x for outliers. */
        const double bound = ty == QT_Q8_0 ? 0.009 : ty == QT_Q6_K ? 0.032 : ty == QT_Q5_K ? 0.07 : 0.145;
        printf("%s: relative RMS error %.4f (bound %.3f)\n", qt->name, rel_worst, bound);
        EXPECT(rel_worst <= bound, "%s: relative RMS error %.4f > %.3f", qt->name, rel_worst, bound);
        EXPECT(rel_worst > prev, "%s: error %.4f not above the previous (finer) type's %.4f", qt->name, rel_worst,
               prev);
        prev = rel_worst;
        /* f16 sources quantize as their f32 values */
        uint16_t *h = malloc(sizeof(uint16_t) * K);
        float *hf = malloc(sizeof(float) * K);
        for (int i = 0; i < K; i++)
            hf[i] = half_to_float(h[i] = float_to_half(x[i]));
        EXPECT(quant_rows(ty, h, true, 1, K, q4, 2) == 0 && quant_rows(ty, hf, false, 1, K, q, 1) == 0 &&
                   memcmp(q, q4, rb) == 0,
               "%s: f16 source", qt->name);
        free(h);
        free(hf);
    }
    /* refusals: a non-finite weight names its row */
    x[2 * K + 5] = NAN;
    EXPECT(quant_rows(QT_Q4_K, x, false, ROWS, K, q, 2) == 3, "NaN in row 2 reported as row 2");
    x[2 * K + 5] = INFINITY;
    EXPECT(quant_row(QT_Q8_0, x + 2 * K, q, K) == -1, "inf refused");
    for (size_t t = 0; t < sizeof BLOCK_TYPES / sizeof BLOCK_TYPES[0]; t++) {
        x[2 * K + 5] = 65520.0f; /* beyond f16's range, which the scales have */
        EXPECT(quant_row(BLOCK_TYPES[t], x + 2 * K, q, K) == -1, "%s: 65520 refused",
               quant_traits(BLOCK_TYPES[t])->name);
        x[2 * K + 5] = -65504.0f; /* the largest accepted: reproduced within a relative 1 % */
        EXPECT(quant_row(BLOCK_TYPES[t], x + 2 * K, q, K) == 0, "%s: 65504 accepted",
               quant_traits(BLOCK_TYPES[t])->name);
        dequant_row(BLOCK_TYPES[t], q, y, K);
        EXPECT(isfinite(y[5]) && fabsf(y[5] + 65504.0f) < 655.0f, "%s: -65504 reads %g",
               quant_traits(BLOCK_TYPES[t])->name, y[5]);
    }
    /* zero blocks stay zero */
    memset(x, 0, sizeof(float) * K);
    for (size_t t = 0; t < sizeof BLOCK_TYPES / sizeof BLOCK_TYPES[0]; t++) {
        EXPECT(quant_row(BLOCK_TYPES[t], x, q, K) == 0, "zeros");
        dequant_row(BLOCK_TYPES[t], q, y, K);
        int nz = 0;
        for (int i = 0; i < K; i++)
            nz += y[i] != 0.0f;
        EXPECT(nz == 0, "%s: zeros dequantize to %d non-zeros", quant_traits(BLOCK_TYPES[t])->name, nz);
    }
    free(x);
    free(y);
    free(q);
    free(q4);
}

static void test_type_rule(void) {
    const char *m = "encoder.layers.3.feed_forward1.linear1.weight";
    EXPECT(quant_tensor_type(m, 1024, QT_Q4_K) == QT_Q4_K, "1024-long rows take q4_k");
    EXPECT(quant_tensor_type(m, 640, QT_Q5_K) == QT_Q8_0, "640 = 2.5 x 256: q5_k falls back to q8_0");
    EXPECT(quant_tensor_type(m, 176, QT_Q6_K) == QT_F16, "176 = 5.5 x 32: q6_k -> q8_0 -> f16");
    EXPECT(quant_tensor_type(m, 176, QT_Q8_0) == QT_F16 && quant_tensor_type(m, 704, QT_Q8_0) == QT_Q8_0, "q8_0");
    EXPECT(quant_tensor_type(m, 1024, QT_F16) == QT_F16 && quant_tensor_type(m, 1024, QT_F32) == QT_F32, "f16/f32");
    EXPECT(quant_tensor_type("encoder.layers.3.norm_out.weight", 1024, QT_Q4_K) == QT_F32, "norms stay f32");
    EXPECT(quant_tensor_type("encoder.layers.3.conv.depthwise_conv.weight", 256, QT_Q4_K) == QT_F32, "depthwise");
    /* the decoder's matrices: block types only (f16 files keep them f32), the last fallback f32 */
    EXPECT(quant_tensor_type("joint.head.weight", 1024, QT_Q8_0) == QT_Q8_0, "the joint head takes q8_0");
    EXPECT(quant_tensor_type("joint.head.weight", 1024, QT_F16) == QT_F32, "an f16 file keeps the joint f32");
    EXPECT(quant_tensor_type("decoder.lstm.weight_ih_l0", 1024, QT_Q4_K) == QT_Q4_K, "the LSTM takes q4_k");
    EXPECT(quant_tensor_type("decoder.lstm.weight_hh_l1", 640, QT_Q6_K) == QT_Q8_0, "640: q6_k -> q8_0");
    EXPECT(quant_tensor_type("encoder_projector.weight", 176, QT_Q8_0) == QT_F32, "176: q8_0 -> f32");
    EXPECT(quant_tensor_type("decoder.decoder_projector.weight", 256, QT_Q5_K) == QT_Q5_K, "projection");
    EXPECT(quant_tensor_type("decoder.embedding.weight", 256, QT_Q8_0) == QT_F32, "the embedding stays f32");
    EXPECT(quant_tensor_type("decoder.lstm.weight_ih_l0x", 256, QT_Q8_0) == QT_F32, "exact names only");
    EXPECT(quant_tensor_type("decoder.lstm.bias_l0", 1024, QT_Q8_0) == QT_F32, "LSTM biases stay f32");
}

/* ---------------------------------------------------------------------------------------------- */
/* Files                                                                                          */

static void test_files(const char *model, const char *tmpdir) {
    static const struct {
        vkasr_weight_type wt;
        uint32_t qt;
    } types[] = {{VKASR_WEIGHTS_Q8_0, QT_Q8_0},
                 {VKASR_WEIGHTS_Q6_K, QT_Q6_K},
                 {VKASR_WEIGHTS_Q5_K, QT_Q5_K},
                 {VKASR_WEIGHTS_Q4_K, QT_Q4_K}};
    struct model_file *src = NULL;
    struct err e = {0};
    EXPECT(model_open(model, &src, &e) == VKASR_OK, "open %s: %s", model, e.msg);
    if (!src)
        return;
    char a[512], b[512];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const char *name = quant_traits(types[t].qt)->name;
        snprintf(a, sizeof a, "%s/quant_%s_a.gguf", tmpdir, name);
        snprintf(b, sizeof b, "%s/quant_%s_b.gguf", tmpdir, name);
        vkasr_error ve;
        EXPECT(vkasr_convert(model, a, types[t].wt, &ve) == VKASR_OK, "convert %s: %s", name, ve.message);
        EXPECT(strstr(ve.message, "bits per weight") && strstr(ve.message, "MiB"), "summary: %s", ve.message);
        printf("%s: %s\n", name, ve.message);
        EXPECT(vkasr_convert(model, b, types[t].wt, NULL) == VKASR_OK, "convert %s again", name);
        size_t na = 0, nb = 0;
        char *pa = fixture_read_file(a, &na), *pb = fixture_read_file(b, &nb);
        EXPECT(pa && pb && na == nb && memcmp(pa, pb, na) == 0, "%s: two conversions differ", name);
        free(pa);
        free(pb);
        /* the file reads back: each tensor in the rule's type, quantized bytes equal to the rows' */
        struct model_file *q = NULL;
        EXPECT(model_open(a, &q, &e) == VKASR_OK, "open %s: %s", a, e.msg);
        int nq = 0;
        for (int i = 0; q && i < q->ntensors; i++) {
            const struct model_tensor *qt = &q->tensors[i], *st = model_find(src, qt->name);
            const int64_t k = qt->ne[qt->nd - 1];
            const uint32_t want = quant_tensor_type(qt->name, k, types[t].qt);
            const uint32_t have = quant_type_of_mt(qt->type);
            EXPECT(have == want, "%s: '%s' stored as %u, want %u", name, qt->name, have, want);
            if (!quant_is_block(have))
                continue;
            nq++;
            const int64_t rows = (int64_t)(qt->nbytes / quant_row_bytes(have, k));
            uint8_t *exp = malloc(qt->nbytes);
            EXPECT(quant_rows(have, st->data, st->type == MT_F16, rows, k, exp, 1) == 0 &&
                       memcmp(exp, qt->data, qt->nbytes) == 0,
                   "%s: '%s' bytes differ from its rows quantized", name, qt->name);
            free(exp);
        }
        EXPECT(nq > 0, "%s: no tensor quantized", name);
        /* a quantized file is not quantized again (nor re-exported) */
        vkasr_error ve2;
        EXPECT(vkasr_convert(a, b, VKASR_WEIGHTS_Q4_K, &ve2) == VKASR_ERR_INVALID_ARG &&
                   strstr(ve2.message, "already quantized") && strstr(ve2.message, a),
               "re-quantizing %s: %s", name, ve2.message);
        EXPECT(vkasr_convert(a, b, VKASR_WEIGHTS_F16, &ve2) == VKASR_ERR_INVALID_ARG, "re-exporting %s", name);
        model_close(q);
        remove(a);
        remove(b);
    }
    model_close(src);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_quant MODEL.gguf TMPDIR\n");
        return 2;
    }
    test_traits();
    test_q8_0_by_hand();
    test_layouts_and_exact_round_trip();
    test_random_bounds();
    test_type_rule();
    test_files(argv[1], argv[2]);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
