/* nemo_config.c — NeMo's model_config.yaml mapped onto struct model_config: the model class, the
 * preprocessor (AudioToMelSpectrogramPreprocessor), the ConformerEncoder, the transducer's decoder
 * and joint (TDT durations), the CTC decoder or a hybrid's aux_ctc. NeMo's class defaults apply to
 * missing keys; every option vkasr does not implement is an error naming the key and its value.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "nemo_internal.h"

/* One mapping being read: the file and the key path prefix for messages ("encoder."). */
struct ymap {
    const char *src;
    const char *prefix;
    const struct ny_node *m; /* NULL: every key takes its default */
};

static const char *kind_name(const struct ny_node *n) {
    return n->kind == NY_SEQ ? "a list" : n->kind == NY_MAP ? "a mapping" : "a string";
}

static vkasr_status y_int(const struct ymap *o, const char *key, int def, int lo, int hi, int *out, struct err *e) {
    const struct ny_node *n = ny_get(o->m, key);
    if (!n || ny_is_null(n)) {
        *out = def;
        return VKASR_OK;
    }
    char *end = NULL;
    errno = 0;
    long long v = n->kind == NY_SCALAR && n->plain ? strtoll(n->str, &end, 10) : 0;
    if (n->kind != NY_SCALAR || !n->plain || !end || end == n->str || *end || errno)
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' must be an integer, got %s%s%s", o->src, n->line,
                       o->prefix, key, n->kind == NY_SCALAR ? "\"" : kind_name(n), n->kind == NY_SCALAR ? n->str : "",
                       n->kind == NY_SCALAR ? "\"" : "");
    if (v < lo || v > hi)
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' = %lld is out of the supported range [%d, %d]", o->src,
                       n->line, o->prefix, key, v, lo, hi);
    *out = (int)v;
    return VKASR_OK;
}

static vkasr_status y_num(const struct ymap *o, const char *key, double def, double *out, struct err *e) {
    const struct ny_node *n = ny_get(o->m, key);
    if (!n || ny_is_null(n)) {
        *out = def;
        return VKASR_OK;
    }
    char *end = NULL;
    double v = n->kind == NY_SCALAR && n->plain ? strtod(n->str, &end) : 0;
    if (n->kind != NY_SCALAR || !n->plain || !end || end == n->str || *end || !isfinite(v))
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' must be a number", o->src, n->line, o->prefix, key);
    *out = v;
    return VKASR_OK;
}

static vkasr_status y_bool(const struct ymap *o, const char *key, bool def, bool *out, struct err *e) {
    const struct ny_node *n = ny_get(o->m, key);
    if (!n || ny_is_null(n)) {
        *out = def;
        return VKASR_OK;
    }
    static const char *const t[] = {"true", "True", "TRUE"}, *const f[] = {"false", "False", "FALSE"};
    for (int i = 0; i < 3 && n->kind == NY_SCALAR && n->plain; i++) {
        if (!strcmp(n->str, t[i])) {
            *out = true;
            return VKASR_OK;
        }
        if (!strcmp(n->str, f[i])) {
            *out = false;
            return VKASR_OK;
        }
    }
    return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' must be true or false", o->src, n->line, o->prefix, key);
}

/* The string value of key (NULL when absent or null); an error when it is not a scalar. */
static vkasr_status y_str(const struct ymap *o, const char *key, const char **out, struct err *e) {
    const struct ny_node *n = ny_get(o->m, key);
    *out = NULL;
    if (!n || ny_is_null(n))
        return VKASR_OK;
    if (n->kind != NY_SCALAR)
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' must be a string, got %s", o->src, n->line, o->prefix,
                       key, kind_name(n));
    *out = n->str;
    return VKASR_OK;
}

/* A string option whose value must be one of ok (NULL-terminated; the first is what vkasr implements);
 * absent or null passes. */
static vkasr_status y_only(const struct ymap *o, const char *key, const char *const *ok, struct err *e) {
    const char *s;
    TRY(y_str(o, key, &s, e));
    if (!s)
        return VKASR_OK;
    for (const char *const *p = ok; *p; p++)
        if (!strcmp(s, *p))
            return VKASR_OK;
    return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' = \"%s\" is not supported (vkasr implements \"%s\")",
                   o->src, ny_get(o->m, key)->line, o->prefix, key, s, ok[0]);
}

/* A mapping-valued key (absent or null: an empty ymap). */
static vkasr_status y_sub(const struct ymap *o, const char *key, char *prefix, size_t cap, struct ymap *out,
                          struct err *e) {
    const struct ny_node *n = ny_get(o->m, key);
    snprintf(prefix, cap, "%s%s.", o->prefix, key);
    *out = (struct ymap){o->src, prefix, NULL};
    if (!n || ny_is_null(n))
        return VKASR_OK;
    if (n->kind != NY_MAP)
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s%s' must be a mapping, got %s", o->src, n->line, o->prefix,
                       key, kind_name(n));
    out->m = n;
    return VKASR_OK;
}

/* The class name after the last '.' of a _target_ / target string. */
static const char *class_of(const char *t) {
    const char *d = strrchr(t, '.');
    return d ? d + 1 : t;
}

/* _target_ of a module: absent passes; otherwise its class must be one of ok. */
static vkasr_status y_target(const struct ymap *o, const char *const *ok, struct err *e) {
    const char *t;
    TRY(y_str(o, "_target_", &t, e));
    if (!t)
        return VKASR_OK;
    for (const char *const *p = ok; *p; p++)
        if (!strcmp(class_of(t), *p))
            return VKASR_OK;
    return err_set(e, VKASR_ERR_MODEL, "%s: line %d: '%s_target_' = \"%s\" is not supported (vkasr implements %s)",
                   o->src, ny_get(o->m, "_target_")->line, o->prefix, t, ok[0]);
}

static vkasr_status preprocessor(const struct ymap *root, struct model_config *c, struct err *e) {
    char pf[64];
    struct ymap p;
    TRY(y_sub(root, "preprocessor", pf, sizeof pf, &p, e));
    if (!p.m)
        return err_set(e, VKASR_ERR_MODEL, "%s: no 'preprocessor' section", root->src);
    static const char *const cls[] = {"AudioToMelSpectrogramPreprocessor", NULL};
    TRY(y_target(&p, cls, e));
    int sr_root;
    TRY(y_int(root, "sample_rate", 16000, 1, 1000000, &sr_root, e));
    TRY(y_int(&p, "sample_rate", sr_root, 1, 1000000, &c->sample_rate, e));
    double ws, hs;
    TRY(y_num(&p, "window_size", 0.02, &ws, e));
    TRY(y_num(&p, "window_stride", 0.01, &hs, e));
    if (!(ws > 0 && ws < 1 && hs > 0 && hs < 1))
        return err_set(e, VKASR_ERR_MODEL, "%s: 'preprocessor.window_size' %g / 'window_stride' %g s out of range",
                       root->src, ws, hs);
    c->win_length = (int)(ws * c->sample_rate + 0.5);
    c->hop_length = (int)(hs * c->sample_rate + 0.5);
    int nfft_def = 1;
    while (nfft_def < c->win_length)
        nfft_def *= 2;
    TRY(y_int(&p, "n_fft", nfft_def, 1, 1 << 16, &c->n_fft, e));
    TRY(y_int(&p, "features", 64, 1, 4096, &c->n_mels, e));
    static const char *const per_feature[] = {"per_feature", "NA", NULL}, *const hann[] = {"hann", NULL},
                             *const add[] = {"add", NULL}, *const slaney[] = {"slaney", NULL};
    TRY(y_only(&p, "normalize", per_feature, e));
    const char *norm;
    TRY(y_str(&p, "normalize", &norm, e));
    c->no_feature_norm = norm && !strcmp(norm, "NA"); /* NeMo's normalize_batch passes "NA" through */
    TRY(y_only(&p, "window", hann, e));
    TRY(y_only(&p, "log_zero_guard_type", add, e));
    TRY(y_only(&p, "mel_norm", slaney, e));
    bool log = true, exact_pad = false, stft_conv = false;
    TRY(y_bool(&p, "log", true, &log, e));
    TRY(y_bool(&p, "exact_pad", false, &exact_pad, e));
    TRY(y_bool(&p, "stft_conv", false, &stft_conv, e));
    if (!log || exact_pad || stft_conv)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'preprocessor.%s' = %s is not supported", root->src,
                       !log ? "log" : exact_pad ? "exact_pad" : "stft_conv", !log ? "false" : "true");
    double guard, mag, lowf, highf, splice;
    TRY(y_num(&p, "log_zero_guard_value", 0x1p-24, &guard, e));
    TRY(y_num(&p, "mag_power", 2.0, &mag, e));
    TRY(y_num(&p, "lowfreq", 0.0, &lowf, e));
    TRY(y_num(&p, "highfreq", c->sample_rate / 2.0, &highf, e));
    TRY(y_num(&p, "frame_splicing", 1.0, &splice, e));
    const struct {
        const char *key;
        double v, want;
        const char *what;
    } fixed[] = {{"log_zero_guard_value", guard, 0x1p-24, "2^-24"},
                 {"mag_power", mag, 2.0, "2.0"},
                 {"lowfreq", lowf, 0.0, "0"},
                 {"highfreq", highf, c->sample_rate / 2.0, "sample_rate / 2"},
                 {"frame_splicing", splice, 1.0, "1"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fabs(fixed[i].v - fixed[i].want) > 1e-6 * fabs(fixed[i].want))
            return err_set(e, VKASR_ERR_MODEL, "%s: 'preprocessor.%s' = %g is not supported (vkasr implements %s)",
                           root->src, fixed[i].key, fixed[i].v, fixed[i].what);
    /* dither (training only), pad_to and pad_value (masked padding frames) do not change a transcript */
    const struct ny_node *pe = ny_get(p.m, "preemph");
    double pre = 0.97;
    if (pe && ny_is_null(pe))
        pre = 0.0; /* preemph: null = no pre-emphasis */
    else
        TRY(y_num(&p, "preemph", 0.97, &pre, e));
    c->preemph = (float)pre;
    return VKASR_OK;
}

/* One [L, R] pair of integers at n into v. */
static bool ctx_pair(const struct ny_node *n, int v[2]) {
    if (n->kind != NY_SEQ || n->n != 2)
        return false;
    for (int i = 0; i < 2; i++) {
        char *end = NULL;
        const struct ny_node *k = n->kids[i];
        long x = k->kind == NY_SCALAR ? strtol(k->str, &end, 10) : 0;
        if (k->kind != NY_SCALAR || !end || end == k->str || *end || x < -1 || x > (1 << 24))
            return false;
        v[i] = (int)x;
    }
    return true;
}

/* att_context_size: [L, R], or a list of such pairs (multi-lookahead models). chunked: the
 * chunked_limited style, whose pairs all form the menu (the first the default). */
static vkasr_status att_context(const struct ymap *enc, bool local, bool chunked, struct model_config *c,
                                struct err *e) {
    c->att_left = c->att_right = -1;
    c->n_ctx = 0;
    const struct ny_node *n = ny_get(enc->m, "att_context_size");
    if (!n || ny_is_null(n)) {
        if (local || chunked)
            return err_set(e, VKASR_ERR_MODEL, "%s: 'encoder.%s' without 'encoder.att_context_size'", enc->src,
                           local ? "self_attention_model' rel_pos_local_attn" : "att_context_style' chunked_limited");
        return VKASR_OK;
    }
    int v[2];
    if (chunked) {
        const bool list = n->kind == NY_SEQ && n->n >= 1 && n->kids[0]->kind == NY_SEQ;
        const int np = list ? n->n : 1;
        if (np > MODEL_MAX_CTX)
            return err_set(e, VKASR_ERR_MODEL, "%s: line %d: 'encoder.att_context_size' lists %d pairs (at most %d)",
                           enc->src, n->line, np, MODEL_MAX_CTX);
        for (int i = 0; i < np; i++) {
            const struct ny_node *pn = list ? n->kids[i] : n;
            if (!ctx_pair(pn, v))
                return err_set(e, VKASR_ERR_MODEL,
                               "%s: line %d: 'encoder.att_context_size' must be [left, right] integers or a list of "
                               "such pairs",
                               enc->src, pn->line);
            c->ctx[i][0] = v[0];
            c->ctx[i][1] = v[1];
        }
        c->n_ctx = np;
        return model_check_ctx(c, enc->src, "encoder.att_context_size", e);
    }
    if (n->kind == NY_SEQ && n->n >= 1 && n->kids[0]->kind == NY_SEQ) {
        if (n->n > 1)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: line %d: 'encoder.att_context_size' lists %d contexts with att_context_style "
                           "regular: vkasr implements a menu of contexts for chunked_limited only",
                           enc->src, n->line, n->n);
        n = n->kids[0];
    }
    if (!ctx_pair(n, v))
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: 'encoder.att_context_size' must be [left, right] integers",
                       enc->src, n->line);
    if (v[0] == -1 && v[1] == -1) {
        if (local)
            return err_set(e, VKASR_ERR_MODEL, "%s: local attention with an unlimited context [-1, -1]", enc->src);
        return VKASR_OK;
    }
    if (!local)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: line %d: 'encoder.att_context_size' = [%d, %d] with full attention (rel_pos) and "
                       "att_context_style regular: vkasr implements limited contexts as chunked_limited or "
                       "rel_pos_local_attn",
                       enc->src, n->line, v[0], v[1]);
    if (v[0] != v[1] || v[0] < 1)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: line %d: 'encoder.att_context_size' = [%d, %d]: vkasr implements symmetric local attention "
                       "[w, w] only",
                       enc->src, n->line, v[0], v[1]);
    c->att_left = v[0];
    c->att_right = v[1];
    return VKASR_OK;
}

static vkasr_status encoder(const struct ymap *root, struct model_config *c, struct err *e) {
    char pf[64];
    struct ymap en;
    TRY(y_sub(root, "encoder", pf, sizeof pf, &en, e));
    if (!en.m)
        return err_set(e, VKASR_ERR_MODEL, "%s: no 'encoder' section", root->src);
    static const char *const cls[] = {"ConformerEncoder", NULL};
    TRY(y_target(&en, cls, e));
    int feat_in, ffx, glob = 0, red = 0;
    TRY(y_int(&en, "feat_in", c->n_mels, 1, 4096, &feat_in, e));
    if (feat_in != c->n_mels)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'encoder.feat_in' = %d differs from 'preprocessor.features' = %d",
                       root->src, feat_in, c->n_mels);
    TRY(y_int(&en, "n_layers", 0, 1, 1024, &c->n_layers, e));
    TRY(y_int(&en, "d_model", 0, 1, 1 << 16, &c->d_model, e));
    TRY(y_int(&en, "n_heads", 4, 1, 1024, &c->n_heads, e));
    TRY(y_int(&en, "ff_expansion_factor", 4, 1, 64, &ffx, e));
    c->ff_size = c->d_model * ffx;
    TRY(y_int(&en, "conv_kernel_size", 31, 1, 1023, &c->conv_kernel, e));
    TRY(y_int(&en, "subsampling_factor", 4, 1, 64, &c->sub_factor, e));
    TRY(y_int(&en, "subsampling_conv_channels", -1, -1, 1 << 16, &c->sub_channels, e));
    if (c->sub_channels == -1)
        c->sub_channels = c->d_model;
    if (c->sub_channels < 1)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'encoder.subsampling_conv_channels' = %d", root->src, c->sub_channels);
    static const char *const dws[] = {"dw_striding", NULL}, *const relpos[] = {"rel_pos", "rel_pos_local_attn", NULL},
                             *const bn[] = {"batch_norm", "layer_norm", NULL},
                             *const regular[] = {"regular", "chunked_limited", NULL};
    TRY(y_only(&en, "subsampling", dws, e));
    TRY(y_only(&en, "self_attention_model", relpos, e));
    TRY(y_only(&en, "conv_norm_type", bn, e));
    TRY(y_only(&en, "att_context_style", regular, e));
    const char *sam, *style, *cnorm;
    TRY(y_str(&en, "self_attention_model", &sam, e));
    TRY(y_str(&en, "att_context_style", &style, e));
    TRY(y_str(&en, "conv_norm_type", &cnorm, e));
    const bool local = sam && !strcmp(sam, "rel_pos_local_attn"), chunked = style && !strcmp(style, "chunked_limited");
    if (local && chunked)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: 'encoder.att_context_style' chunked_limited with 'self_attention_model' "
                       "rel_pos_local_attn is not supported (vkasr implements it with rel_pos)",
                       root->src);
    TRY(att_context(&en, local, chunked, c, e));
    c->conv_ln = cnorm && !strcmp(cnorm, "layer_norm");
    bool untie = true, causal_ds = false;
    TRY(y_bool(&en, "xscaling", true, &c->xscaling, e));
    TRY(y_bool(&en, "untie_biases", true, &untie, e));
    TRY(y_bool(&en, "use_bias", true, &c->attention_bias, e));
    TRY(y_bool(&en, "causal_downsampling", false, &causal_ds, e));
    c->conv_bias = c->attention_bias;
    c->causal_sub = causal_ds;
    if (!untie)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'encoder.untie_biases' = false is not supported", root->src);
    TRY(y_int(&en, "global_tokens", 0, 0, 1 << 20, &glob, e));
    TRY(y_int(&en, "reduction_factor", 1, 1, 64, &red, e));
    if (glob != 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'encoder.global_tokens' = %d is not supported (vkasr implements 0)",
                       root->src, glob);
    const char *rp;
    TRY(y_str(&en, "reduction_position", &rp, e));
    if (rp || red != 1)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'encoder.reduction_position' / 'reduction_factor': time reduction "
                                           "inside the encoder is not supported",
                       root->src);
    /* conv_context_size: null, "default" or the centred [(K-1)/2, (K-1)/2]; "causal" or [K-1, 0] (the
     * causal depthwise conv of cache-aware models); others are not */
    const struct ny_node *cc = ny_get(en.m, "conv_context_size");
    c->causal_conv = false;
    if (cc && !ny_is_null(cc)) {
        int h = (c->conv_kernel - 1) / 2;
        bool ok = (cc->kind == NY_SCALAR && !strcmp(cc->str, "default"));
        if (cc->kind == NY_SCALAR && !strcmp(cc->str, "causal"))
            ok = c->causal_conv = true;
        if (cc->kind == NY_SEQ && cc->n == 2 && cc->kids[0]->kind == NY_SCALAR && cc->kids[1]->kind == NY_SCALAR) {
            const int l = atoi(cc->kids[0]->str), r = atoi(cc->kids[1]->str);
            ok = (l == h && r == h) || (l == 2 * h && r == 0);
            c->causal_conv = l == 2 * h && r == 0 && h > 0;
        }
        if (!ok)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: line %d: 'encoder.conv_context_size' is not supported (vkasr implements the centred "
                           "[%d, %d] and the causal [%d, 0])",
                           root->src, cc->line, h, h, 2 * h);
    }
    return VKASR_OK;
}

/* The durations list of a TDT model: model_defaults.tdt_durations, else decoding.durations, else
 * loss.tdt_kwargs.durations. *found = 0 when none is given. */
static vkasr_status durations(const struct ymap *root, struct model_config *c, int *found, struct err *e) {
    const struct ny_node *d = ny_get(ny_get(root->m, "model_defaults"), "tdt_durations");
    if (!d)
        d = ny_get(ny_get(root->m, "decoding"), "durations");
    if (!d)
        d = ny_get(ny_get(ny_get(root->m, "loss"), "tdt_kwargs"), "durations");
    *found = d != NULL;
    c->n_durations = 0;
    if (!d)
        return VKASR_OK;
    if (d->kind != NY_SEQ || d->n < 1 || d->n > 16)
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: the TDT durations must be a list of 1 to 16 integers",
                       root->src, d->line);
    for (int i = 0; i < d->n; i++) {
        const struct ny_node *k = d->kids[i];
        char *end = NULL;
        long v = k->kind == NY_SCALAR ? strtol(k->str, &end, 10) : -1;
        if (k->kind != NY_SCALAR || !end || end == k->str || *end || v < 0 || v > 1024)
            return err_set(e, VKASR_ERR_MODEL, "%s: line %d: TDT duration %d is not an integer in [0, 1024]",
                           root->src, d->line, i);
        c->durations[c->n_durations++] = (int)v;
    }
    return VKASR_OK;
}

static vkasr_status transducer(const struct ymap *root, struct model_config *c, struct err *e) {
    char pf[64], pf2[64], pf3[64];
    struct ymap dec, pred, joint, jn;
    TRY(y_sub(root, "decoder", pf, sizeof pf, &dec, e));
    static const char *const rnnt_dec[] = {"RNNTDecoder", NULL}, *const rnnt_joint[] = {"RNNTJoint", NULL};
    TRY(y_target(&dec, rnnt_dec, e));
    TRY(y_sub(&dec, "prednet", pf2, sizeof pf2, &pred, e));
    int vocab, rnn_hidden, jh, extra, nclass, enc_hidden, pred_hidden2;
    TRY(y_int(&dec, "vocab_size", 0, 1, 1 << 22, &vocab, e));
    TRY(y_int(&pred, "pred_hidden", 640, 1, 1 << 16, &c->pred_hidden, e));
    TRY(y_int(&pred, "pred_rnn_layers", 2, 1, 64, &c->pred_layers, e));
    TRY(y_int(&dec, "rnn_hidden_size", -1, -1, 1 << 16, &rnn_hidden, e));
    if (rnn_hidden != -1 && rnn_hidden != c->pred_hidden)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'decoder.rnn_hidden_size' = %d differs from 'prednet.pred_hidden' "
                                           "= %d (an LSTM projection is not supported)",
                       root->src, rnn_hidden, c->pred_hidden);
    static const char *const lstm[] = {"lstm", NULL};
    TRY(y_only(&pred, "rnn_type", lstm, e));
    TRY(y_sub(root, "joint", pf3, sizeof pf3, &joint, e));
    TRY(y_target(&joint, rnnt_joint, e));
    char pf4[64];
    TRY(y_sub(&joint, "jointnet", pf4, sizeof pf4, &jn, e));
    TRY(y_int(&joint, "num_classes", vocab, 1, 1 << 22, &nclass, e));
    TRY(y_int(&joint, "num_extra_outputs", 0, 0, 16, &extra, e));
    TRY(y_int(&jn, "joint_hidden", c->pred_hidden, 1, 1 << 16, &jh, e));
    TRY(y_int(&jn, "encoder_hidden", c->d_model, 1, 1 << 16, &enc_hidden, e));
    TRY(y_int(&jn, "pred_hidden", c->pred_hidden, 1, 1 << 16, &pred_hidden2, e));
    static const char *const relu[] = {"relu", NULL};
    TRY(y_only(&jn, "activation", relu, e));
    if (nclass != vocab)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'joint.num_classes' = %d differs from 'decoder.vocab_size' = %d",
                       root->src, nclass, vocab);
    if (jh != c->pred_hidden || pred_hidden2 != c->pred_hidden || enc_hidden != c->d_model)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: 'joint.jointnet' sizes (joint_hidden %d, pred_hidden %d, encoder_hidden %d) must equal "
                       "the prediction network's %d and the encoder's %d",
                       root->src, jh, pred_hidden2, enc_hidden, c->pred_hidden, c->d_model);
    c->vocab_size = vocab;
    int found = 0;
    TRY(durations(root, c, &found, e));
    const char *loss = NULL;
    TRY(y_str(&(struct ymap){root->src, "loss.", ny_get(root->m, "loss")}, "loss_name", &loss, e));
    bool tdt = extra > 0 || (loss && !strcmp(loss, "tdt"));
    if (tdt && !found) /* NeMo's TDT recipes and transformers' converter default */
        for (c->n_durations = 0; c->n_durations < 5; c->n_durations++)
            c->durations[c->n_durations] = c->n_durations;
    if (tdt && extra != c->n_durations)
        return err_set(e, VKASR_ERR_MODEL, "%s: 'joint.num_extra_outputs' = %d but the TDT durations list has %d entries",
                       root->src, extra, c->n_durations);
    if (!tdt)
        c->n_durations = 0;
    c->head = tdt ? VKASR_HEAD_TDT : VKASR_HEAD_RNNT;
    struct ymap decoding = {root->src, "decoding.greedy.", ny_get(ny_get(root->m, "decoding"), "greedy")};
    TRY(y_int(&decoding, "max_symbols", 10, 1, 1000, &c->max_symbols, e));
    return VKASR_OK;
}

/* The language prompt of EncDecRNNTBPEModelWithPrompt (NVIDIA-NeMo/Speech rnnt_bpe_models_prompt.py):
 * model_defaults.num_prompts slots and the prompt_dictionary mapping locales to them; the MLP's width
 * comes from its weights (prompt_kernel.0), checked against the schema. Another class with either key
 * is refused: its meaning there is unknown. */
static vkasr_status prompt(const struct ymap *root, bool is_prompt_class, struct model_config *c,
                           struct model_langs *langs, struct err *e) {
    char pf[64];
    struct ymap md;
    TRY(y_sub(root, "model_defaults", pf, sizeof pf, &md, e));
    const struct ny_node *np = ny_get(md.m, "num_prompts"), *dict = ny_get(md.m, "prompt_dictionary");
    if (!is_prompt_class) {
        if ((np && !ny_is_null(np)) || (dict && !ny_is_null(dict)))
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: line %d: 'model_defaults.%s' in a model that is not EncDecRNNTBPEModelWithPrompt "
                           "(a language prompt vkasr does not know how to apply)",
                           root->src, (np ? np : dict)->line, np ? "num_prompts" : "prompt_dictionary");
        return VKASR_OK;
    }
    if (c->head != VKASR_HEAD_RNNT)
        return err_set(e, VKASR_ERR_MODEL, "%s: a language prompt over a TDT head is not supported", root->src);
    if (!np || ny_is_null(np))
        return err_set(e, VKASR_ERR_MODEL, "%s: 'model_defaults.num_prompts' is missing (EncDecRNNTBPEModelWithPrompt)",
                       root->src);
    TRY(y_int(&md, "num_prompts", 0, 1, 4096, &c->n_prompts, e));
    if (dict && !ny_is_null(dict) && dict->kind != NY_MAP)
        return err_set(e, VKASR_ERR_MODEL, "%s: line %d: 'model_defaults.prompt_dictionary' must be a mapping, got %s",
                       root->src, dict->line, kind_name(dict));
    for (int i = 0; dict && dict->kind == NY_MAP && i < dict->n; i++) {
        const struct ny_node *v = dict->kids[i];
        char field[96];
        snprintf(field, sizeof field, "model_defaults.prompt_dictionary (line %d)", v->line);
        char *end = NULL;
        long long slot = v->kind == NY_SCALAR && v->plain ? strtoll(v->str, &end, 10) : -1;
        if (v->kind != NY_SCALAR || !v->plain || !end || end == v->str || *end)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: line %d: 'model_defaults.prompt_dictionary.%s' must be an integer slot", root->src,
                           v->line, dict->keys[i]);
        TRY(model_langs_add(langs, dict->keys[i], slot, c->n_prompts, root->src, field, e));
    }
    return model_langs_check(langs, c, root->src, "model_defaults.prompt_dictionary", e);
}

/* A CTC decoder section (decoder of a CTC model, aux_ctc.decoder of a hybrid): its class, its input
 * width and its number of classes (blank excluded). */
static vkasr_status ctc_decoder(const char *src, const struct ny_node *node, const char *prefix, int d_model,
                                int *vocab, struct err *e) {
    if (!node || node->kind != NY_MAP)
        return err_set(e, VKASR_ERR_MODEL, "%s: no '%s' section", src, prefix);
    char pf[64];
    snprintf(pf, sizeof pf, "%s.", prefix);
    struct ymap d = {src, pf, node};
    static const char *const cls[] = {"ConvASRDecoder", NULL};
    TRY(y_target(&d, cls, e));
    int feat_in, n;
    TRY(y_int(&d, "feat_in", d_model, 1, 1 << 16, &feat_in, e));
    if (feat_in != d_model)
        return err_set(e, VKASR_ERR_MODEL, "%s: '%sfeat_in' = %d differs from 'encoder.d_model' = %d", src, pf,
                       feat_in, d_model);
    TRY(y_int(&d, "num_classes", -1, -1, 1 << 22, &n, e));
    if (n == -1) {
        const struct ny_node *v = ny_get(node, "vocabulary");
        n = v && v->kind == NY_SEQ ? v->n : 0;
    }
    if (n < 1)
        return err_set(e, VKASR_ERR_MODEL, "%s: '%snum_classes' is missing and there is no vocabulary", src, pf);
    *vocab = n;
    return VKASR_OK;
}

vkasr_status nemo_config_map(const char *src, const struct ny_node *root, struct nemo_checkpoint *ck,
                             char **tokenizer_path, struct err *e) {
    struct model_config *c = &ck->cfg;
    memset(c, 0, sizeof *c);
    *tokenizer_path = NULL;
    struct ymap r = {src, "", root};
    const char *target = NULL;
    TRY(y_str(&r, "target", &target, e));
    if (!target)
        TRY(y_str(&r, "_target_", &target, e));
    if (!target)
        return err_set(e, VKASR_ERR_MODEL, "%s: no 'target' naming the model class", src);
    /* NVIDIA's streaming transducers with extras: the language prompt (Nemotron 3.5,
     * rnnt_bpe_models_prompt.py) and the end-of-utterance models (asr_eou_models.py), whose <EOU>/<EOB>
     * are ordinary tokens of the vocabulary */
    static const struct {
        const char *cls;
        bool transducer, ctc;
    } classes[] = {{"EncDecRNNTBPEModel", 1, 0},          {"EncDecRNNTModel", 1, 0},
                   {"EncDecCTCModelBPE", 0, 1},           {"EncDecCTCModel", 0, 1},
                   {"EncDecHybridRNNTCTCBPEModel", 1, 1}, {"EncDecHybridRNNTCTCModel", 1, 1},
                   {"EncDecRNNTBPEModelWithPrompt", 1, 0}, {"EncDecRNNTBPEEOUModel", 1, 0},
                   {"EncDecHybridRNNTCTCBPEEOUModel", 1, 1}};
    int k = -1;
    for (int i = 0; i < (int)(sizeof classes / sizeof classes[0]) && k < 0; i++)
        if (!strcmp(class_of(target), classes[i].cls))
            k = i;
    if (k < 0)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: 'target' = \"%s\" is not a model vkasr implements (EncDecRNNTBPEModel, EncDecCTCModelBPE, "
                       "EncDecHybridRNNTCTCBPEModel, EncDecRNNTBPEModelWithPrompt, EncDecRNNTBPEEOUModel)",
                       src, target);
    ck->model_class = strdup(class_of(target));
    if (!ck->model_class)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    ck->has_transducer = classes[k].transducer;
    ck->has_ctc = classes[k].ctc;

    TRY(preprocessor(&r, c, e));
    TRY(encoder(&r, c, e));
    int ctc_vocab = 0;
    if (ck->has_transducer)
        TRY(transducer(&r, c, e));
    TRY(prompt(&r, !strcmp(ck->model_class, "EncDecRNNTBPEModelWithPrompt"), c, &ck->langs, e));
    if (ck->has_ctc) {
        const bool hybrid = ck->has_transducer;
        TRY(ctc_decoder(src, hybrid ? ny_get(ny_get(root, "aux_ctc"), "decoder") : ny_get(root, "decoder"),
                        hybrid ? "aux_ctc.decoder" : "decoder", c->d_model, &ctc_vocab, e));
        if (hybrid && ctc_vocab != c->vocab_size)
            return err_set(e, VKASR_ERR_MODEL, "%s: 'aux_ctc.decoder.num_classes' = %d differs from the transducer's "
                                               "vocabulary of %d",
                           src, ctc_vocab, c->vocab_size);
        if (!hybrid) {
            c->head = VKASR_HEAD_CTC;
            c->vocab_size = ctc_vocab;
        }
    }
    const char *tp = NULL;
    TRY(y_str(&(struct ymap){src, "tokenizer.", ny_get(root, "tokenizer")}, "model_path", &tp, e));
    if (tp) {
        if (!strncmp(tp, "nemo:", 5))
            tp += 5;
        *tokenizer_path = strdup(tp);
        if (!*tokenizer_path)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    return config_check(c, src, e);
}

vkasr_status nemo_config_parse(const char *src, const char *text, size_t len, struct nemo_checkpoint *ck,
                               char **tokenizer_path, struct err *e) {
    struct ny_node *root = NULL;
    *tokenizer_path = NULL;
    TRY(ny_parse(src, text, len, &root, e));
    vkasr_status st = nemo_config_map(src, root, ck, tokenizer_path, e);
    ny_free(root);
    if (st != VKASR_OK) {
        free(*tokenizer_path);
        *tokenizer_path = NULL;
    }
    return st;
}
