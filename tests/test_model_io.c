/* test_model_io.c — model loading on the host (no GPU): the tiny HF models of tests/data/tiny (config,
 * tokenizer, tensor shapes), model_prepare's numerics against direct computations on the original
 * tensors, GGUF round trips (f32 bit-exact, f16), the independent Python GGUF writer, every malformed
 * fixture of tests/data/malformed (clean error naming file and field/tensor), vkasr_convert's error
 * paths, and SentencePiece decoding.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "expect.h"
#include "model/model_types.h"
#include "model/tokenizer.h"

/* tests/data, from the command line (CTest passes it: the build tree may be moved). */
static const char *data_dir = "";


static char tmpdir[256];

static const char *data(const char *rel) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", data_dir, rel);
    return buf[k];
}

static const char *tmp(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static struct model_file *open_ok(const char *path) {
    struct model_file *mf = NULL;
    struct err e;
    err_clear(&e);
    vkasr_status st = model_open(path, &mf, &e);
    EXPECT(st == VKASR_OK && mf, "model_open(%s): %d %s", path, st, e.msg);
    return st == VKASR_OK ? mf : NULL;
}

static const struct model_tensor *need(const struct model_file *mf, const char *name) {
    const struct model_tensor *t = model_find(mf, name);
    EXPECT(t != NULL, "tensor %s missing in %s", name, mf->path);
    return t;
}

static int shape_is(const struct model_tensor *t, int nd, ...) {
    if (!t || t->nd != nd)
        return 0;
    va_list ap;
    va_start(ap, nd);
    int ok = 1;
    for (int i = 0; i < nd; i++)
        ok &= t->ne[i] == (int64_t)va_arg(ap, int);
    va_end(ap);
    return ok;
}

static float f32_at(const struct model_tensor *t, uint64_t i) {
    float v;
    if (t->type == MT_F16) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
        return half_to_float(h);
    }
    memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
    return v;
}

static uint64_t numel(const struct model_tensor *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->nd; i++)
        n *= (uint64_t)t->ne[i];
    return n;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64*, uniform in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0;
}

/* ---------------------------------------------------------------------------------------------- */

static void test_open_tiny(void) {
    static const char *const heads[] = {"tiny/tdt", "tiny/rnnt", "tiny/ctc", "tiny/ctc_sharded"};
    for (int h = 0; h < 4; h++) {
        struct model_file *mf = open_ok(data(heads[h]));
        if (!mf)
            continue;
        const struct model_config *c = &mf->cfg;
        int head = h == 3 ? VKASR_HEAD_CTC : h;
        EXPECT(c->head == head, "%s head %d", heads[h], c->head);
        EXPECT(c->d_model == 16 && c->n_layers == 2 && c->n_heads == 2 && c->ff_size == 32 && c->conv_kernel == 9,
               "%s encoder dims %d %d %d %d %d", heads[h], c->d_model, c->n_layers, c->n_heads, c->ff_size,
               c->conv_kernel);
        EXPECT(c->n_mels == 16 && c->sub_channels == 8 && c->sub_factor == 8, "%s subsampling", heads[h]);
        EXPECT(c->vocab_size == 20 && mf->tok.n == 20, "%s vocab %d tok %d", heads[h], c->vocab_size, mf->tok.n);
        EXPECT(c->att_left == -1 && c->att_right == -1, "%s att context", heads[h]);
        EXPECT(c->sample_rate == 16000 && c->n_fft == 512 && c->win_length == 400 && c->hop_length == 160 &&
                   c->preemph == 0.97f,
               "%s feature extractor", heads[h]);
        EXPECT(!mf->canonical, "%s HF model marked canonical", heads[h]);
        if (head == VKASR_HEAD_TDT) {
            EXPECT(!c->xscaling && !c->attention_bias && !c->conv_bias, "tdt flags");
            EXPECT(c->pred_hidden == 8 && c->pred_layers == 2 && c->max_symbols == 10, "tdt pred");
            EXPECT(c->n_durations == 5 && c->durations[0] == 0 && c->durations[4] == 4, "tdt durations");
            EXPECT(shape_is(need(mf, "joint.head.weight"), 2, 26, 8), "tdt joint shape");
            const struct model_tensor *nb = need(mf, "encoder.layers.1.conv.norm.num_batches_tracked");
            EXPECT(nb && nb->type == MT_I64 && nb->nd == 0, "num_batches_tracked");
            EXPECT(!model_find(mf, "encoder.layers.0.self_attn.q_proj.bias"), "tdt has no attention bias");
            EXPECT(mf->tok.type[2] == TOK_CONTROL && strcmp(mf->tok.piece[2], "<pad>") == 0, "tdt <pad> piece");
        } else if (head == VKASR_HEAD_RNNT) {
            EXPECT(c->xscaling && c->attention_bias && c->conv_bias, "rnnt flags");
            EXPECT(c->pred_hidden == 8 && c->pred_layers == 1 && c->n_durations == 0, "rnnt pred");
            EXPECT(shape_is(need(mf, "joint.head.weight"), 2, 21, 8), "rnnt joint shape");
            EXPECT(mf->tok.type[15] == TOK_USER_DEFINED && strcmp(mf->tok.piece[15], ",") == 0, "rnnt user piece");
        } else {
            /* convolution_bias and scale_input are absent from this config.json: transformers' defaults */
            EXPECT(c->xscaling && c->attention_bias && c->conv_bias, "ctc defaults");
            EXPECT(c->pred_hidden == 0 && c->pred_layers == 0 && c->n_durations == 0, "ctc pred");
            EXPECT(shape_is(need(mf, "ctc_head.weight"), 3, 21, 16, 1), "ctc head shape");
            EXPECT(shape_is(need(mf, "encoder.layers.1.conv.depthwise_conv.bias"), 1, 16), "ctc dw bias");
        }
        EXPECT(shape_is(need(mf, "encoder.subsampling.layers.0.weight"), 4, 8, 1, 3, 3), "%s sub conv0", heads[h]);
        EXPECT(shape_is(need(mf, "encoder.subsampling.linear.weight"), 2, 16, 16), "%s sub linear", heads[h]);
        EXPECT(shape_is(need(mf, "encoder.layers.1.conv.depthwise_conv.weight"), 3, 16, 1, 9), "%s dw", heads[h]);
        EXPECT(shape_is(need(mf, "encoder.layers.0.self_attn.bias_u"), 2, 2, 8), "%s bias_u", heads[h]);
        /* tokenizer types: <unk> UNKNOWN, <s> CONTROL, bytes BYTE, the rest NORMAL (rnnt "," USER_DEFINED) */
        EXPECT(mf->tok.type[0] == TOK_UNKNOWN && mf->tok.type[1] == TOK_CONTROL && mf->tok.type[3] == TOK_BYTE &&
                   mf->tok.type[7] == TOK_BYTE && mf->tok.type[8] == TOK_NORMAL && mf->tok.type[19] == TOK_NORMAL,
               "%s token types", heads[h]);
        EXPECT(strcmp(mf->tok.piece[19], "\xE2\x96\x81"
                                         "cat") == 0,
               "%s piece 19 %s", heads[h], mf->tok.piece[19]);
        model_close(mf);
    }
}

/* ---------------------------------------------------------------------------------------------- */

/* BN(depthwise conv(v)) with the ORIGINAL tensors, in double, vs the folded conv of the prepared model. */
static void check_bn_fold(const struct model_file *o, const struct model_file *p, int layer) {
    const struct model_config *c = &o->cfg;
    const int D = c->d_model, K = c->conv_kernel, T = 7, pad = (K - 1) / 2;
    char nm[128];
#define T_(suffix) (snprintf(nm, sizeof nm, "encoder.layers.%d.conv.%s", layer, suffix), need(o, nm))
    const struct model_tensor *w = T_("depthwise_conv.weight"), *g = T_("norm.weight"), *be = T_("norm.bias"),
                              *mu = T_("norm.running_mean"), *var = T_("norm.running_var");
    const struct model_tensor *b = c->conv_bias ? T_("depthwise_conv.bias") : NULL;
#undef T_
    snprintf(nm, sizeof nm, "encoder.layers.%d.conv.depthwise_conv.weight", layer);
    const struct model_tensor *fw = need(p, nm);
    snprintf(nm, sizeof nm, "encoder.layers.%d.conv.depthwise_conv.bias", layer);
    const struct model_tensor *fb = need(p, nm);
    if (!w || !g || !be || !mu || !var || !fw || !fb || (c->conv_bias && !b))
        return;
    EXPECT(shape_is(fw, 2, D, K) && shape_is(fb, 1, D) && fw->type == MT_F32 && fb->type == MT_F32, "folded dw shapes");
    double v[64][16], maxerr = 0;
    for (int ch = 0; ch < D; ch++)
        for (int t = 0; t < T; t++)
            v[ch][t] = urand();
    for (int ch = 0; ch < D; ch++)
        for (int t = 0; t < T; t++) {
            double d = b ? f32_at(b, (uint64_t)ch) : 0.0, df = f32_at(fb, (uint64_t)ch);
            for (int k = 0; k < K; k++) {
                int s = t - pad + k;
                if (s < 0 || s >= T)
                    continue;
                d += (double)f32_at(w, (uint64_t)(ch * K + k)) * v[ch][s];
                df += (double)f32_at(fw, (uint64_t)(ch * K + k)) * v[ch][s];
            }
            double ref = (d - f32_at(mu, (uint64_t)ch)) / sqrt((double)f32_at(var, (uint64_t)ch) + 1e-5) *
                             f32_at(g, (uint64_t)ch) +
                         f32_at(be, (uint64_t)ch);
            double err = fabs(df - ref) / (1.0 + fabs(ref));
            if (err > maxerr)
                maxerr = err;
        }
    EXPECT(maxerr < 5e-7, "layer %d BN fold max relative error %g", layer, maxerr);
    if (getenv("VKASR_TEST_VERBOSE"))
        printf("  BN fold layer %d: max relative error %.3g\n", layer, maxerr);
}

static void test_prepare(const char *rel) {
    struct model_file *o = open_ok(data(rel)), *p = open_ok(data(rel));
    struct err e;
    err_clear(&e);
    if (!o || !p)
        goto done;
    EXPECT(model_prepare(p, &e) == VKASR_OK, "prepare %s: %s", rel, e.msg);
    EXPECT(p->canonical, "prepared %s not canonical", rel);
    EXPECT(model_prepare(p, &e) == VKASR_OK, "second prepare is a no-op");
    const struct model_config *c = &o->cfg;
    for (int i = 0; i < p->ntensors; i++) {
        EXPECT(p->tensors[i].type == MT_F32, "%s: prepared %s not f32", rel, p->tensors[i].name);
        EXPECT(p->tensors[i].nbytes == numel(&p->tensors[i]) * 4, "%s nbytes", p->tensors[i].name);
        EXPECT(!strstr(p->tensors[i].name, "conv.norm.") && !strstr(p->tensors[i].name, "bias_ih") &&
                   !strstr(p->tensors[i].name, "bias_hh"),
               "%s: %s survived prepare", rel, p->tensors[i].name);
    }
    for (int l = 0; l < c->n_layers; l++)
        check_bn_fold(o, p, l);

    /* subsampling linear: HF column c*F + f -> canonical column f*C + c, element by element */
    const struct model_tensor *lo = need(o, "encoder.subsampling.linear.weight"),
                              *lp = need(p, "encoder.subsampling.linear.weight");
    const int D = c->d_model, C = c->sub_channels, F = c->n_mels / 8;
    if (lo && lp) {
        EXPECT(shape_is(lp, 2, D, F * C), "linear shape");
        int bad = 0;
        for (int d = 0; d < D; d++)
            for (int ch = 0; ch < C; ch++)
                for (int f = 0; f < F; f++) {
                    float a = f32_at(lp, (uint64_t)(d * F * C + f * C + ch)),
                          b = f32_at(lo, (uint64_t)(d * C * F + ch * F + f));
                    bad += memcmp(&a, &b, 4) != 0;
                }
        EXPECT(bad == 0, "%d permuted subsampling weights differ", bad);
    }
    /* LSTM biases summed */
    for (int k = 0; k < c->pred_layers; k++) {
        char a[64], b[64], s[64];
        snprintf(a, sizeof a, "decoder.lstm.bias_ih_l%d", k);
        snprintf(b, sizeof b, "decoder.lstm.bias_hh_l%d", k);
        snprintf(s, sizeof s, "decoder.lstm.bias_l%d", k);
        const struct model_tensor *ti = need(o, a), *th = need(o, b), *ts = need(p, s);
        if (!ti || !th || !ts)
            continue;
        EXPECT(shape_is(ts, 1, 4 * c->pred_hidden), "lstm bias shape");
        EXPECT(!model_find(p, a) && !model_find(p, b), "separate LSTM biases dropped");
        for (uint64_t i = 0; i < numel(ts); i++) {
            float want = (float)((double)f32_at(ti, i) + (double)f32_at(th, i)), got = f32_at(ts, i);
            EXPECT(memcmp(&want, &got, 4) == 0, "lstm bias %d[%llu]: %g vs %g", k, (unsigned long long)i, got, want);
        }
    }
    /* reshapes keep the data: pointwise convs, subsampling kernels, the CTC head */
    static const char *const same[] = {"encoder.layers.1.conv.pointwise_conv1.weight",
                                       "encoder.layers.0.conv.pointwise_conv2.weight",
                                       "encoder.subsampling.layers.0.weight",
                                       "encoder.subsampling.layers.3.weight",
                                       "ctc_head.weight",
                                       "joint.head.weight",
                                       "decoder.embedding.weight"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        const struct model_tensor *a = model_find(o, same[i]), *b = model_find(p, same[i]);
        EXPECT(!a == !b, "%s presence differs", same[i]);
        if (a && b)
            EXPECT(numel(a) == numel(b) && memcmp(a->data, b->data, (size_t)a->nbytes) == 0, "%s data changed",
                   same[i]);
    }
    EXPECT(shape_is(model_find(p, "encoder.layers.0.conv.pointwise_conv1.weight"), 2, 2 * D, D), "pw1 shape");
    EXPECT(shape_is(model_find(p, "encoder.subsampling.layers.5.weight"), 2, C, 9), "sub conv5 shape");
    EXPECT(shape_is(model_find(p, "encoder.subsampling.layers.6.weight"), 2, C, C), "sub conv6 shape");
    if (c->head == VKASR_HEAD_CTC)
        EXPECT(shape_is(model_find(p, "ctc_head.weight"), 2, c->vocab_size + 1, D), "ctc head shape");
done:
    model_close(o);
    model_close(p);
}

/* The sharded f16/bf16 copy of tiny/ctc widens to the rounded values of the f32 original. */
static void test_sharded_dtypes(void) {
    struct model_file *a = open_ok(data("tiny/ctc")), *b = open_ok(data("tiny/ctc_sharded"));
    struct err e;
    err_clear(&e);
    if (!a || !b)
        goto done;
    const struct model_tensor *h = need(b, "encoder.layers.0.feed_forward1.linear1.weight"),
                              *r = need(b, "ctc_head.weight");
    EXPECT(h && h->type == MT_F16 && r && r->type == MT_BF16, "shard dtypes");
    EXPECT(model_prepare(a, &e) == VKASR_OK && model_prepare(b, &e) == VKASR_OK, "prepare: %s", e.msg);
    const struct model_tensor *x = need(a, "encoder.layers.0.feed_forward1.linear1.weight"),
                              *y = need(b, "encoder.layers.0.feed_forward1.linear1.weight");
    for (uint64_t i = 0; x && y && i < numel(x); i++) {
        float want = half_to_float(float_to_half(f32_at(x, i)));
        EXPECT(float_bits(want) == float_bits(f32_at(y, i)), "f16 widening at %llu", (unsigned long long)i);
    }
    x = need(a, "ctc_head.weight");
    y = need(b, "ctc_head.weight");
    for (uint64_t i = 0; x && y && i < numel(x); i++) {
        uint32_t u = float_bits(f32_at(x, i));
        uint32_t want = ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) << 16; /* round to nearest even bf16 */
        EXPECT(want == float_bits(f32_at(y, i)), "bf16 widening at %llu", (unsigned long long)i);
    }
    /* everything else within bf16/f16 rounding of the f32 model (BN folding included) */
    double worst = 0;
    for (int i = 0; i < a->ntensors; i++) {
        const struct model_tensor *s = &a->tensors[i], *t = model_find(b, s->name);
        EXPECT(t && numel(t) == numel(s), "sharded %s", s->name);
        for (uint64_t k = 0; t && k < numel(s); k++) {
            double d = fabs(f32_at(s, k) - f32_at(t, k)) / (0.05 + fabs(f32_at(s, k)));
            worst = d > worst ? d : worst;
        }
    }
    EXPECT(worst < 1e-2, "sharded model differs by %g", worst);
done:
    model_close(a);
    model_close(b);
}

/* ---------------------------------------------------------------------------------------------- */

static void same_config(const struct model_config *a, const struct model_config *b, const char *what) {
    int ok = a->head == b->head && a->d_model == b->d_model && a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
             a->ff_size == b->ff_size && a->conv_kernel == b->conv_kernel && a->n_mels == b->n_mels &&
             a->sub_channels == b->sub_channels && a->sub_factor == b->sub_factor && a->xscaling == b->xscaling &&
             a->attention_bias == b->attention_bias && a->conv_bias == b->conv_bias && a->att_left == b->att_left &&
             a->att_right == b->att_right && a->vocab_size == b->vocab_size && a->pred_hidden == b->pred_hidden &&
             a->pred_layers == b->pred_layers && a->n_durations == b->n_durations && a->max_symbols == b->max_symbols &&
             a->sample_rate == b->sample_rate && a->n_fft == b->n_fft && a->win_length == b->win_length &&
             a->hop_length == b->hop_length && a->preemph == b->preemph;
    for (int i = 0; ok && i < a->n_durations; i++)
        ok = a->durations[i] == b->durations[i];
    EXPECT(ok, "%s: configurations differ", what);
}

static void same_tokenizer(const struct tokenizer *a, const struct tokenizer *b, const char *what) {
    int ok = a->n == b->n;
    for (int32_t i = 0; ok && i < a->n; i++)
        ok = strcmp(a->piece[i], b->piece[i]) == 0 && a->type[i] == b->type[i];
    EXPECT(ok, "%s: tokenizers differ", what);
}

/* f16: matrix weights hold float_to_half of the f32 values; everything else is bit-exact f32. */
static void same_tensors(const struct model_file *a, const struct model_file *b, int f16, const char *what) {
    EXPECT(a->ntensors == b->ntensors, "%s: %d vs %d tensors", what, a->ntensors, b->ntensors);
    int bad = 0, nf16 = 0;
    for (int i = 0; i < a->ntensors; i++) {
        const struct model_tensor *s = &a->tensors[i], *t = model_find(b, s->name);
        if (!t || t->nd != s->nd || memcmp(t->ne, s->ne, sizeof s->ne[0] * (size_t)s->nd) != 0) {
            EXPECT(0, "%s: tensor %s missing or reshaped", what, s->name);
            continue;
        }
        int want16 = f16 && model_is_matrix_weight(s->name);
        nf16 += want16;
        EXPECT(t->type == (want16 ? MT_F16 : MT_F32), "%s: %s type %d", what, s->name, t->type);
        for (uint64_t k = 0; k < numel(s); k++) {
            if (want16) {
                uint16_t h;
                memcpy(&h, (const uint8_t *)t->data + 2 * k, 2);
                bad += h != float_to_half(f32_at(s, k));
            } else {
                bad += float_bits(f32_at(s, k)) != float_bits(f32_at(t, k));
            }
        }
    }
    EXPECT(bad == 0, "%s: %d elements differ", what, bad);
    EXPECT(!f16 || nf16 > 10, "%s: only %d f16 tensors", what, nf16);
}

static void test_gguf_roundtrip(const char *rel, const char *head) {
    struct model_file *p = open_ok(data(rel));
    struct err e;
    err_clear(&e);
    char f32p[512], f16p[512], again[512];
    snprintf(f32p, sizeof f32p, "%s", tmp(head));
    strcat(f32p, "-f32.gguf");
    snprintf(f16p, sizeof f16p, "%s", tmp(head));
    strcat(f16p, "-f16.gguf");
    snprintf(again, sizeof again, "%s", tmp(head));
    strcat(again, "-again.gguf");
    if (!p)
        return;
    EXPECT(model_prepare(p, &e) == VKASR_OK, "prepare: %s", e.msg);
    EXPECT(model_write_gguf(p, f32p, VKASR_WEIGHTS_F32, &e) == VKASR_OK, "write f32: %s", e.msg);
    EXPECT(model_write_gguf(p, f16p, VKASR_WEIGHTS_F16, &e) == VKASR_OK, "write f16: %s", e.msg);
    struct model_file *g = open_ok(f32p), *h = open_ok(f16p);
    if (g) {
        EXPECT(g->canonical, "gguf canonical");
        same_config(&p->cfg, &g->cfg, f32p);
        same_tokenizer(&p->tok, &g->tok, f32p);
        same_tensors(p, g, 0, f32p);
        EXPECT(model_prepare(g, &e) == VKASR_OK && g->ntensors == p->ntensors, "prepare on gguf is a no-op");
    }
    if (h) {
        same_config(&p->cfg, &h->cfg, f16p);
        same_tokenizer(&p->tok, &h->tok, f16p);
        same_tensors(p, h, 1, f16p);
    }
    /* vkasr_convert from the f16 GGUF back to f32: f16 matrix weights widen exactly */
    vkasr_error ve;
    EXPECT(vkasr_convert(f16p, again, VKASR_WEIGHTS_F32, &ve) == VKASR_OK, "convert gguf: %s", ve.message);
    struct model_file *a = open_ok(again);
    if (a && h)
        for (int i = 0; i < h->ntensors; i++) {
            const struct model_tensor *s = &h->tensors[i], *t = model_find(a, s->name);
            int bad = !t || t->type != MT_F32;
            for (uint64_t k = 0; !bad && k < numel(s); k++)
                bad = float_bits(f32_at(s, k)) != float_bits(f32_at(t, k));
            EXPECT(!bad, "re-converted %s differs", s->name);
        }
    model_close(a);
    model_close(g);
    model_close(h);
    model_close(p);
    unlink(f32p);
    unlink(f16p);
    unlink(again);
}

/* tests/data/malformed/base.gguf was written by tools/make_malformed_models.py (its own GGUF writer and
 * canonical transform): it must equal our transform of base/ bit for bit. */
static void test_python_gguf(void) {
    struct model_file *p = open_ok(data("malformed/base")), *g = open_ok(data("malformed/base.gguf"));
    struct err e;
    err_clear(&e);
    if (p && g) {
        EXPECT(model_prepare(p, &e) == VKASR_OK, "prepare: %s", e.msg);
        same_config(&p->cfg, &g->cfg, "python gguf");
        same_tokenizer(&p->tok, &g->tok, "python gguf");
        same_tensors(p, g, 0, "python gguf");
    }
    model_close(p);
    model_close(g);
}

/* ---------------------------------------------------------------------------------------------- */

struct bad_case {
    const char *rel;
    vkasr_status code;
    const char *s1, *s2;
};

static void expect_error(const char *path, vkasr_status code, const char *s1, const char *s2) {
    struct model_file *mf = (struct model_file *)0x1;
    struct err e;
    err_clear(&e);
    vkasr_status st = model_open(path, &mf, &e);
    EXPECT(st == code, "%s: status %d, expected %d (%s)", path, st, code, e.msg);
    EXPECT(mf == NULL, "%s: *out not NULL on error", path);
    EXPECT(e.code == st && e.msg[0], "%s: no message", path);
    EXPECT(!s1 || strstr(e.msg, s1), "%s: message lacks \"%s\": %s", path, s1, e.msg);
    EXPECT(!s2 || strstr(e.msg, s2), "%s: message lacks \"%s\": %s", path, s2, e.msg);
    if (getenv("VKASR_TEST_VERBOSE"))
        printf("  %-40s %s\n", strrchr(path, '/') + 1, e.msg);
    if (st == VKASR_OK)
        model_close(mf);
}

static void test_malformed(void) {
    static const struct bad_case cases[] = {
        {"st_truncated", VKASR_ERR_MODEL, "model.safetensors", "exceed the file's data section"},
        {"st_header_too_long", VKASR_ERR_MODEL, "model.safetensors", "header length"},
        {"st_header_absurd", VKASR_ERR_MODEL, "model.safetensors", "header length 9223372036854775808"},
        {"st_bad_json", VKASR_ERR_MODEL, "model.safetensors", "not valid JSON"},
        {"st_offsets_out_of_range", VKASR_ERR_MODEL, "'encoder.layers.0.self_attn.q_proj.weight'", "exceed"},
        {"st_overlap", VKASR_ERR_MODEL, "model.safetensors", "overlap"},
        {"st_wrong_size", VKASR_ERR_MODEL, "'encoder.layers.0.self_attn.q_proj.weight'", "[8, 7] need 224"},
        {"st_unknown_dtype", VKASR_ERR_MODEL, "'encoder.layers.0.self_attn.q_proj.weight'", "F8_E4M3"},
        {"wrong_shape", VKASR_ERR_MODEL, "'encoder.layers.0.self_attn.q_proj.weight' has shape [4, 16]",
         "expected [8, 8]"},
        {"st_duplicate_name", VKASR_ERR_MODEL, "model.safetensors",
         "'encoder.layers.0.norm_out.bias' is defined twice"},
        {"missing_tensor", VKASR_ERR_MODEL, "model.safetensors", "missing tensor 'encoder.layers.0.norm_out.bias'"},
        {"config_wrong_type", VKASR_ERR_MODEL, "config.json", "'encoder_config.hidden_size' must be an integer"},
        {"tokenizer_bad_utf8", VKASR_ERR_MODEL, "tokenizer.json", "id 18 is not valid UTF-8"},
        {"index_bad_shard_name", VKASR_ERR_MODEL, "model.safetensors.index.json", "../base/model.safetensors"},
        {"gguf_bad_magic.gguf", VKASR_ERR_MODEL, "gguf_bad_magic.gguf", "not a model"},
        {"gguf_version_99.gguf", VKASR_ERR_MODEL, "gguf_version_99.gguf", "version 99"},
        {"gguf_truncated.gguf", VKASR_ERR_MODEL, "gguf_truncated.gguf", "truncated or corrupt: tensor name"},
        {"gguf_tensor_count_2p60.gguf", VKASR_ERR_MODEL, "gguf_tensor_count_2p60.gguf",
         "tensor count 1152921504606846976"},
        {"gguf_string_len_2p40.gguf", VKASR_ERR_MODEL, "gguf_string_len_2p40.gguf", "string length 1099511627776"},
        {"gguf_offset_beyond_file.gguf", VKASR_ERR_MODEL, "'ctc_head.bias'", "beyond the file's data section"},
        {"gguf_tensor_type_2.gguf", VKASR_ERR_MODEL, "'encoder.subsampling.layers.0.weight'",
         "type 2 is not supported"},
        {"gguf_q8_0_row_8.gguf", VKASR_ERR_MODEL, "'encoder.layers.0.self_attn.q_proj.weight'",
         "q8_0 needs a row length that is a multiple of 32"},
        {"gguf_dims_overflow.gguf", VKASR_ERR_MODEL, "gguf_dims_overflow.gguf", "overflows"},
        {"gguf_duplicate_key.gguf", VKASR_ERR_MODEL, "gguf_duplicate_key.gguf", "'general.name' appears twice"},
        {"gguf_layout_version_2.gguf", VKASR_ERR_MODEL, "vkasr.layout_version 2", "convert"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "malformed/%s", cases[i].rel);
        expect_error(data(rel), cases[i].code, cases[i].s1, cases[i].s2);
    }
    /* every fixture in the directory is covered (a new one needs a line above) */
    DIR *d = opendir(data("malformed"));
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.' && strcmp(de->d_name, "base") != 0 && strcmp(de->d_name, "base.gguf") != 0 &&
             strcmp(de->d_name, "README.md") != 0;
    if (d)
        closedir(d);
    EXPECT(n == (int)(sizeof cases / sizeof cases[0]), "%d fixtures in malformed/, %d tested", n,
           (int)(sizeof cases / sizeof cases[0]));

    expect_error(tmp("does-not-exist"), VKASR_ERR_IO, "does-not-exist", NULL);
    expect_error(tmpdir, VKASR_ERR_MODEL, "config.json", NULL); /* a directory that is not a model */
    FILE *f = fopen(tmp("notes.txt"), "w");
    if (f) {
        fputs("hello", f);
        fclose(f);
    }
    expect_error(tmp("notes.txt"), VKASR_ERR_MODEL, "notes.txt", "not a model");
    unlink(tmp("notes.txt"));
    struct err e;
    EXPECT(model_open(NULL, NULL, &e) == VKASR_ERR_INVALID_ARG, "NULL arguments");
}

/* A directory built in tmp from pieces of tiny/ctc with one file replaced. */
static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    EXPECT(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[8192];
    size_t n;
    EXPECT(a && b, "copy %s -> %s", from, to);
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
        fwrite(buf, 1, n, b);
    if (a)
        fclose(a);
    if (b)
        fclose(b);
}

static void test_config_variants(void) {
    const char *dir = tmp("cfgdir");
    mkdir(dir, 0777);
    char p[512];
#define IN(name) (snprintf(p, sizeof p, "%s/%s", dir, name), p)
    copy_file(data("tiny/ctc/model.safetensors"), IN("model.safetensors"));
    copy_file(data("tiny/ctc/tokenizer.json"), IN("tokenizer.json"));
    copy_file(data("tiny/ctc/config.json"), IN("config.json"));
    /* processor_config.json with a nested feature extractor and preemphasis null (= none) */
    write_file(IN("processor_config.json"), "{\"feature_extractor\": {\"feature_size\": 16, \"preemphasis\": null, "
                                            "\"sampling_rate\": 16000}, \"processor_class\": \"ParakeetProcessor\"}");
    struct model_file *mf = open_ok(dir);
    if (mf)
        EXPECT(mf->cfg.preemph == 0.0f && mf->cfg.n_fft == 512, "nested feature extractor");
    model_close(mf);
    write_file(IN("processor_config.json"), "{\"feature_extractor\": {\"feature_size\": 80}}");
    expect_error(dir, VKASR_ERR_MODEL, "processor_config.json", "feature_size");
    write_file(IN("processor_config.json"), "{\"feature_extractor\": {\"feature_size\": 16, \"hop_length\": 1.5}}");
    expect_error(dir, VKASR_ERR_MODEL, "processor_config.json", "'feature_extractor.hop_length' must be an integer");
    /* front-end sizes outside the spec's (16 kHz, n_fft 512, win 400, hop 160) plausible range: the error
     * names the file that holds them and the field */
    static const struct {
        const char *json, *s1;
    } fe_bad[] = {
        {"\"sampling_rate\": 1", "sampling_rate 1 Hz"},
        {"\"sampling_rate\": 8000", "sampling_rate 8000 Hz"},
        {"\"hop_length\": 1", "hop_length 1:"},
        {"\"hop_length\": 401", "hop_length 401:"},    /* longer than the window: samples skipped */
        {"\"win_length\": 513", "win_length 513:"},    /* longer than n_fft */
        {"\"win_length\": 8, \"hop_length\": 4", "win_length 8:"},
        {"\"n_fft\": 511", "n_fft 511:"},
        {"\"n_fft\": 8192, \"win_length\": 8000", "n_fft 8192:"},
    };
    for (size_t i = 0; i < sizeof fe_bad / sizeof fe_bad[0]; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"feature_extractor\": {\"feature_size\": 16, %s}}", fe_bad[i].json);
        write_file(IN("processor_config.json"), json);
        expect_error(dir, VKASR_ERR_MODEL, "processor_config.json", fe_bad[i].s1);
    }
    unlink(IN("processor_config.json"));
    expect_error(dir, VKASR_ERR_MODEL, "preprocessor_config.json or processor_config.json", NULL);
    copy_file(data("tiny/ctc/preprocessor_config.json"), IN("preprocessor_config.json"));
    /* config.json variants: wrong vocabulary size, contradicting bias flag, unknown model type */
    write_file(IN("config.json"),
               "{\"model_type\": \"parakeet_ctc\", \"vocab_size\": 22, \"encoder_config\": "
               "{\"hidden_size\": 16, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
               "\"intermediate_size\": 32, \"subsampling_conv_channels\": 8, \"num_mel_bins\": 16}}");
    expect_error(dir, VKASR_ERR_MODEL, "'ctc_head.weight' has shape [21, 16, 1], expected [22, 16, 1]", "vocab_size");
    write_file(IN("config.json"),
               "{\"model_type\": \"parakeet_ctc\", \"vocab_size\": 21, \"encoder_config\": "
               "{\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
               "\"intermediate_size\": 32, \"subsampling_conv_channels\": 8, \"num_mel_bins\": 16}}");
    expect_error(dir, VKASR_ERR_MODEL, "num_hidden_layers", "'encoder.layers.1.norm_out.weight'");
    write_file(IN("config.json"), "{\"model_type\": \"parakeet_ctc\", \"vocab_size\": 21, \"encoder_config\": "
                                  "{\"hidden_size\": 16, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                                  "\"attention_bias\": false, \"intermediate_size\": 32, "
                                  "\"subsampling_conv_channels\": 8, \"num_mel_bins\": 16}}");
    expect_error(dir, VKASR_ERR_MODEL, "attention_bias = false", "q_proj.bias");
    write_file(IN("config.json"), "{\"model_type\": \"whisper\"}");
    expect_error(dir, VKASR_ERR_MODEL, "config.json", "\"whisper\"");
    write_file(IN("config.json"), "{\"architectures\": [\"ParakeetForCTC\"], \"vocab_size\": 21, \"pad_token_id\": 3}");
    expect_error(dir, VKASR_ERR_MODEL, "config.json", "pad_token_id 3");
    copy_file(data("tiny/ctc/config.json"), IN("config.json"));
    /* tokenizer.json: a missing id */
    write_file(IN("tokenizer.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"<unk>\": 0, \"a\": 1}}}");
    expect_error(dir, VKASR_ERR_MODEL, "tokenizer.json", "no piece for id 2");
    write_file(IN("tokenizer.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"<unk>\": 0, \"a\": 25}}}");
    expect_error(dir, VKASR_ERR_MODEL, "tokenizer.json", "id 25");
    unlink(IN("tokenizer.json"));
    expect_error(dir, VKASR_ERR_MODEL, "tokenizer.json", "missing");
    copy_file(data("tiny/ctc/tokenizer.json"), IN("tokenizer.json"));
    mf = open_ok(dir);
    model_close(mf);
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "config.json",
                                        "preprocessor_config.json"};
    for (int i = 0; i < 4; i++)
        unlink(IN(files[i]));
    rmdir(dir);
#undef IN
}

/* Overwrites the u32 value of GGUF key `key` in file `path` (key string, then type u32, then the value). */
static void gguf_patch_u32(const char *path, const char *key, uint32_t v) {
    FILE *f = fopen(path, "r+b");
    EXPECT(f != NULL, "open %s", path);
    if (!f)
        return;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f), kl = strlen(key);
    long at = -1;
    for (size_t i = 0; i + kl + 8 <= n && at < 0; i++)
        if (memcmp(buf + i, key, kl) == 0 && buf[i + kl] == 4 && !buf[i + kl + 1] && !buf[i + kl + 2] && !buf[i + kl + 3])
            at = (long)(i + kl + 4);
    EXPECT(at >= 0, "key %s (u32) not found in %s", key, path);
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    if (at >= 0)
        EXPECT(fseek(f, at, SEEK_SET) == 0 && fwrite(le, 1, 4, f) == 4, "patch %s", path);
    fclose(f);
}

/* GGUF metadata goes through the same range checks as an HF directory's. */
static void test_gguf_bad_frontend(void) {
    static const struct {
        const char *key;
        uint32_t v;
        const char *s2;
    } bad[] = {{"parakeet.sample_rate", 1, "sampling_rate 1 Hz"},
               {"parakeet.hop_length", 1, "hop_length 1:"},
               {"parakeet.win_length", 1024, "win_length 1024:"},
               {"parakeet.n_fft", 100000, "n_fft 100000:"}};
    const char *dst = tmp("bad_frontend.gguf");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vkasr_error ve;
        EXPECT(vkasr_convert(data("tiny/ctc"), dst, VKASR_WEIGHTS_F32, &ve) == VKASR_OK, "convert: %s", ve.message);
        gguf_patch_u32(dst, bad[i].key, bad[i].v);
        expect_error(dst, VKASR_ERR_MODEL, "bad_frontend.gguf", bad[i].s2);
    }
    unlink(dst);
}

static void test_convert_errors(void) {
    vkasr_error ve;
    /* unwritable destination: VKASR_ERR_IO naming the path, nothing left behind */
    const char *bad = tmp("no-such-dir/out.gguf");
    EXPECT(vkasr_convert(data("tiny/ctc"), bad, VKASR_WEIGHTS_F16, &ve) == VKASR_ERR_IO && strstr(ve.message, bad),
           "unwritable output: %d %s", ve.status, ve.message);
    /* a failed conversion leaves an existing destination untouched and no temporary file */
    const char *dst = tmp("keep.gguf");
    write_file(dst, "previous content");
    EXPECT(vkasr_convert(data("malformed/missing_tensor"), dst, VKASR_WEIGHTS_F32, &ve) == VKASR_ERR_MODEL,
           "convert malformed: %s", ve.message);
    FILE *f = fopen(dst, "r");
    char buf[64] = {0};
    if (f) {
        EXPECT(fgets(buf, sizeof buf, f) != NULL, "read back");
        fclose(f);
    }
    EXPECT(strcmp(buf, "previous content") == 0, "destination changed by a failed conversion");
    unlink(dst);
    EXPECT(vkasr_convert(NULL, dst, VKASR_WEIGHTS_F32, &ve) == VKASR_ERR_INVALID_ARG, "NULL source");
    EXPECT(vkasr_convert(data("tiny/ctc"), dst, (vkasr_weight_type)7, NULL) == VKASR_ERR_INVALID_ARG, "bad type");
    /* a good conversion through the public API; its output opens */
    EXPECT(vkasr_convert(data("tiny/tdt"), dst, VKASR_WEIGHTS_F16, &ve) == VKASR_OK, "convert: %s", ve.message);
    struct model_file *mf = open_ok(dst);
    if (mf)
        EXPECT(mf->cfg.head == VKASR_HEAD_TDT && model_find(mf, "decoder.lstm.bias_l1") &&
                   model_find(mf, "encoder.layers.0.feed_forward1.linear1.weight")->type == MT_F16 &&
                   model_find(mf, "joint.head.weight")->type == MT_F32 &&
                   model_find(mf, "decoder.embedding.weight")->type == MT_F32,
               "converted tdt");
    model_close(mf);
    unlink(dst);

    /* a source that cannot be read (a shard missing) is a model error, not the destination's I/O error */
    const char *sh = tmp("nosh");
    mkdir(sh, 0777);
    static const char *const shard_files[] = {"config.json", "model-00001-of-00002.safetensors",
                                              "model.safetensors.index.json", "preprocessor_config.json",
                                              "tokenizer.json"};
    char from[512], to[512];
    for (int i = 0; i < 5; i++) {
        snprintf(from, sizeof from, "tiny/ctc_sharded/%s", shard_files[i]);
        snprintf(to, sizeof to, "%s/%s", sh, shard_files[i]);
        copy_file(data(from), to);
    }
    EXPECT(vkasr_convert(sh, dst, VKASR_WEIGHTS_F32, &ve) == VKASR_ERR_MODEL &&
               strstr(ve.message, "model-00002-of-00002.safetensors"),
           "missing shard: %d %s", ve.status, ve.message);
    EXPECT(access(dst, F_OK) != 0, "missing shard: output written");
    for (int i = 0; i < 5; i++) {
        snprintf(to, sizeof to, "%s/%s", sh, shard_files[i]);
        unlink(to);
    }
    rmdir(sh);

    /* a symlink destination: the model goes to its target, the link stays a link */
    const char *target = tmp("target.gguf"), *link = tmp("link.gguf");
    write_file(target, "old");
    EXPECT(symlink("target.gguf", link) == 0, "symlink: %s", strerror(errno));
    EXPECT(vkasr_convert(data("tiny/ctc"), link, VKASR_WEIGHTS_F32, &ve) == VKASR_OK, "convert to a symlink: %s",
           ve.message);
    struct stat sb;
    EXPECT(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the symlink was replaced");
    EXPECT(stat(target, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 1000, "the target was not written");
    unlink(link);
    unlink(target);
    /* a dangling symlink: refused, nothing created */
    EXPECT(symlink("nowhere.gguf", link) == 0, "symlink: %s", strerror(errno));
    EXPECT(vkasr_convert(data("tiny/ctc"), link, VKASR_WEIGHTS_F32, &ve) == VKASR_ERR_IO && strstr(ve.message, link),
           "dangling symlink: %d %s", ve.status, ve.message);
    EXPECT(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the dangling symlink was replaced");
    unlink(link);
    /* a FIFO (or a directory) is refused, naming the path, and stays what it was */
    const char *fifo = tmp("fifo.gguf");
    EXPECT(mkfifo(fifo, 0666) == 0, "mkfifo: %s", strerror(errno));
    EXPECT(vkasr_convert(data("tiny/ctc"), fifo, VKASR_WEIGHTS_F32, &ve) == VKASR_ERR_IO &&
               strstr(ve.message, fifo) && strstr(ve.message, "not a regular file"),
           "FIFO destination: %d %s", ve.status, ve.message);
    EXPECT(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    unlink(fifo);
    const char *dir = tmp("dir.gguf");
    mkdir(dir, 0777);
    EXPECT(vkasr_convert(data("tiny/ctc"), dir, VKASR_WEIGHTS_F32, &ve) == VKASR_ERR_IO && strstr(ve.message, dir),
           "directory destination: %d %s", ve.status, ve.message);
    rmdir(dir);

    /* no temporaries left in tmpdir */
    DIR *d = opendir(tmpdir);
    for (struct dirent *de; d && (de = readdir(d));)
        EXPECT(!strstr(de->d_name, ".tmp."), "temporary file %s left behind", de->d_name);
    if (d)
        closedir(d);
}

/* ---------------------------------------------------------------------------------------------- */

static void expect_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int strip, const char *want) {
    char *out = NULL;
    struct err e;
    err_clear(&e);
    EXPECT(tok_decode(t, ids, n, strip, &out, &e) == VKASR_OK, "decode: %s", e.msg);
    EXPECT(out && strcmp(out, want) == 0, "decode gave \"%s\", expected \"%s\"", out ? out : "(null)", want);
    free(out);
}

#define DEC(strip, want, ...)                                                                                          \
    do {                                                                                                               \
        const int32_t ids_[] = {__VA_ARGS__};                                                                          \
        expect_decode(&t, ids_, sizeof ids_ / sizeof ids_[0], strip, want);                                            \
    } while (0)

static void test_tokenizer(void) {
    char *pieces[] = {"<unk>",
                      "<s>",
                      "</s>",
                      "<0xC3>",
                      "<0xA9>",
                      "<0xE2>",
                      "<0x82>",
                      "<0xAC>",
                      "\xE2\x96\x81",
                      "\xE2\x96\x81hello",
                      "\xE2\x96\x81world",
                      ",",
                      ".",
                      "ab",
                      "\xE2\x96\x81\xC2\xBF",
                      "!?",
                      "<0x41>",
                      "x",
                      ("a\xE2\x96\x81" "b")}; /* two literals: "\x81b" would be one escape */
    uint8_t types[] = {TOK_UNKNOWN, TOK_CONTROL,      TOK_CONTROL, TOK_BYTE,   TOK_BYTE,   TOK_BYTE,   TOK_BYTE,
                       TOK_BYTE,    TOK_NORMAL,       TOK_NORMAL,  TOK_NORMAL, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL,
                       TOK_NORMAL,  TOK_USER_DEFINED, TOK_NORMAL,  TOK_UNUSED, TOK_NORMAL};
    struct tokenizer t = {.n = (int32_t)(sizeof pieces / sizeof pieces[0]), .piece = pieces, .type = types};
    DEC(1, "hello world", 9, 10);
    DEC(0, " hello world", 9, 10);
    DEC(1, "hello, world.", 1, 9, 11, 10, 12, 2); /* CONTROL dropped; still strips */
    DEC(1, "hello", 19, -3, 9, 1000);             /* blank (= n) and out-of-range skipped */
    DEC(1, "hello \xC3\xA9", 9, 8, 3, 4);         /* bytes joined to UTF-8 (e-acute) */
    DEC(1, "\xC3\xA9", 3, 4);
    DEC(1,
        "\xE2\x82\xAC"
        "ab",
        5, 6, 7, 13);                                  /* the euro sign */
    DEC(1, "\xEF\xBF\xBD\xEF\xBF\xBD hello", 5, 6, 9); /* truncated sequence: one U+FFFD per byte */
    DEC(1, "\xEF\xBF\xBD", 4);                         /* lone continuation byte */
    DEC(1,
        "\xEF\xBF\xBD"
        "ab",
        3, 13);
    DEC(1, " \xE2\x81\x87 ", 0); /* unknown: " ⁇ ", not stripped */
    DEC(1, "hello \xE2\x81\x87 ", 9, 0);
    DEC(1, "a b ab", 18, 8, 13); /* inner U+2581 is a space too */
    DEC(1, "", 1, 2, 17);        /* CONTROL and UNUSED only */
    DEC(1, "<0x41>", 16);        /* <0x41> typed NORMAL stays text */
    DEC(1, "world", 8, 10);      /* "▁" then "▁world": only the first ▁ goes */

    static const struct {
        int32_t id;
        const char *text;
        int punct;
    } one[] = {{9, "hello", 0},        {11, ",", 1},  {12, ".", 1},      {14, "\xC2\xBF", 1},
               {15, "!?", 1},          {1, "", 0},    {8, "", 0},        {0, " \xE2\x81\x87 ", 0},
               {3, "\xEF\xBF\xBD", 0}, {13, "ab", 0}, {16, "<0x41>", 0}, {18, "a b", 0}};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        char *s = NULL;
        struct err e;
        EXPECT(tok_piece_text(&t, one[i].id, &s, &e) == VKASR_OK && s && strcmp(s, one[i].text) == 0,
               "piece_text(%d) = \"%s\"", one[i].id, s ? s : "");
        free(s);
        EXPECT(tok_is_punct(&t, one[i].id) == one[i].punct, "is_punct(%d)", one[i].id);
    }
    EXPECT(!tok_is_punct(&t, -1) && !tok_is_punct(&t, t.n), "is_punct out of range");

    /* any id sequence decodes to valid UTF-8 without embedded NULs */
    for (int r = 0; r < 2000; r++) {
        int32_t ids[12];
        size_t n = (size_t)(r % 12) + 1;
        for (size_t k = 0; k < n; k++)
            ids[k] = (int32_t)((urand() + 1.0) * 0.5 * (t.n + 2)) - 1;
        char *out = NULL;
        struct err e;
        EXPECT(tok_decode(&t, ids, n, r & 1, &out, &e) == VKASR_OK && out && utf8_valid(out, strlen(out)),
               "random decode %d not valid UTF-8", r);
        free(out);
    }

    static const struct {
        const char *s;
        size_t n;
        int ok;
    } u[] = {{"", 0, 1},
             {"abc", 3, 1},
             {"\xC3\xA9", 2, 1},
             {"\xF0\x9F\x98\x80", 4, 1},
             {"\xF4\x8F\xBF\xBF", 4, 1},
             {"\xEF\xBF\xBD", 3, 1},
             {"\xC0\x80", 2, 0},         /* overlong NUL */
             {"\xC1\xBF", 2, 0},         /* overlong */
             {"\xE0\x80\x80", 3, 0},     /* overlong */
             {"\xF0\x80\x80\x80", 4, 0}, /* overlong */
             {"\xED\xA0\x80", 3, 0},     /* surrogate */
             {"\xF4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
             {"\xE2\x82", 2, 0},         /* truncated */
             {"\x80", 1, 0},
             {"\xFF", 1, 0},
             {"a\xC3", 2, 0}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        EXPECT(utf8_valid(u[i].s, u[i].n) == u[i].ok, "utf8_valid case %zu", i);

    /* the loaded tiny vocabulary decodes like SentencePiece */
    struct model_file *mf = open_ok(data("tiny/tdt"));
    if (mf) {
        const int32_t ids[] = {1, 16, 10, 11, 19, 14, 20, 8, 3, 4, 2};
        char *out = NULL;
        struct err e;
        EXPECT(tok_decode(&mf->tok, ids, sizeof ids / sizeof ids[0], 1, &out, &e) == VKASR_OK && out &&
                   strcmp(out, "the cat. \xC3\xA9") == 0,
               "tiny decode \"%s\"", out ? out : "");
        free(out);
        EXPECT(tok_is_punct(&mf->tok, 14) && tok_is_punct(&mf->tok, 15) && !tok_is_punct(&mf->tok, 19), "tiny punct");
        model_close(mf);
    }
}

static void test_matrix_weights(void) {
    static const char *const yes[] = {"encoder.layers.3.self_attn.q_proj.weight",
                                      "encoder.layers.0.feed_forward2.linear1.weight",
                                      "encoder.layers.11.conv.pointwise_conv2.weight",
                                      "encoder.layers.0.self_attn.relative_k_proj.weight",
                                      "encoder.subsampling.linear.weight",
                                      "encoder.subsampling.layers.3.weight"};
    static const char *const no[] = {"encoder.layers.3.self_attn.q_proj.bias",
                                     "encoder.layers.0.norm_out.weight",
                                     "encoder.layers.0.conv.depthwise_conv.weight",
                                     "encoder.subsampling.layers.0.weight",
                                     "encoder.subsampling.layers.5.weight",
                                     "encoder.layers.0.self_attn.bias_u",
                                     "decoder.embedding.weight",
                                     "decoder.lstm.weight_ih_l0",
                                     "decoder.decoder_projector.weight",
                                     "joint.head.bias",
                                     "joint.head.weight",
                                     "ctc_head.weight",
                                     "encoder_projector.weight",
                                     "q_proj.weight"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        EXPECT(model_is_matrix_weight(yes[i]), "%s should be a matrix weight", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        EXPECT(!model_is_matrix_weight(no[i]), "%s should not be a matrix weight", no[i]);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_model_io TESTS_DATA_DIR\n");
        return 2;
    }
    data_dir = argv[1];
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/vkasr_model_io_XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp(%s): %s\n", tmpdir, strerror(errno));
        return 1;
    }
    test_open_tiny();
    test_prepare("tiny/tdt");
    test_prepare("tiny/rnnt");
    test_prepare("tiny/ctc");
    test_sharded_dtypes();
    test_gguf_roundtrip("tiny/tdt", "tdt");
    test_gguf_roundtrip("tiny/rnnt", "rnnt");
    test_gguf_roundtrip("tiny/ctc", "ctc");
    test_python_gguf();
    test_malformed();
    test_config_variants();
    test_gguf_bad_frontend();
    test_convert_errors();
    test_tokenizer();
    test_matrix_weights();
    rmdir(tmpdir);
    printf("test_model_io: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
