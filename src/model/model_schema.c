/* model_schema.c — the tensor set a configuration requires (HF or canonical layout) and the check of
 * an opened model against it (model_validate). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_file.h"
#include "model_schema.h"

/* ---------------------------------------------------------------------------------------------- */
/* The expected tensor set                                                                        */

struct tlist {
    struct tensor_spec *v;
    int n, cap, oom;
};

static void add(struct tlist *L, const char *why, int nd, int64_t a, int64_t b, int64_t c, int64_t d, const char *fmt,
                ...) __attribute__((format(printf, 8, 9)));
static void add(struct tlist *L, const char *why, int nd, int64_t a, int64_t b, int64_t c, int64_t d, const char *fmt,
                ...) {
    if (L->oom)
        return;
    if (L->n == L->cap) {
        int cap = L->cap ? L->cap * 2 : 256;
        struct tensor_spec *v = realloc(L->v, (size_t)cap * sizeof *v);
        if (!v) {
            L->oom = 1;
            return;
        }
        L->v = v;
        L->cap = cap;
    }
    struct tensor_spec *s = &L->v[L->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->nd = nd;
    s->ne[0] = a;
    s->ne[1] = b;
    s->ne[2] = c;
    s->ne[3] = d;
    s->why = why;
}

int model_sub_freq(const struct model_config *c) {
    int f = c->n_mels;
    for (int i = 0; i < 3; i++)
        f = c->causal_sub ? f / 2 + 1 : (f + 1) / 2;
    return f;
}

vkasr_status model_check_ctx(const struct model_config *c, const char *src, const char *field, struct err *e) {
    if (c->n_ctx < 0 || c->n_ctx > MODEL_MAX_CTX)
        return err_set(e, VKASR_ERR_MODEL, "%s: '%s' lists %d [left, right] pairs (at most %d)", src, field, c->n_ctx,
                       MODEL_MAX_CTX);
    for (int i = 0; i < c->n_ctx; i++) {
        const int L = c->ctx[i][0], R = c->ctx[i][1];
        if (L < 1 || R < 0 || L > (1 << 20) || R > (1 << 20))
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: '%s' pair %d = [%d, %d]: a chunked_limited context needs left >= 1 and right >= 0",
                           src, field, i, L, R);
        if (L % (R + 1) != 0)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: '%s' pair %d = [%d, %d]: chunked_limited needs the left context to be a multiple of "
                           "right + 1 = %d",
                           src, field, i, L, R, R + 1);
    }
    return VKASR_OK;
}

int model_ctx_lookahead_ms(const struct model_config *c, int i) {
    const double frame_ms = 1000.0 * c->sub_factor * c->hop_length / (c->sample_rate > 0 ? c->sample_rate : 1);
    return (int)((c->ctx[i][1] + 1) * frame_ms + 0.5);
}

vkasr_status model_select_lookahead(struct model_config *c, int ms, struct err *e) {
    c->ctx_sel = 0;
    if (ms == 0)
        return VKASR_OK;
    if (c->n_ctx == 0)
        return err_set(e, VKASR_ERR_INVALID_ARG,
                       "lookahead %d ms: the model is not a cache-aware streaming model (it has no chunked_limited "
                       "contexts to choose from)",
                       ms);
    char menu[160] = "";
    for (int i = 0; i < c->n_ctx; i++) {
        if (model_ctx_lookahead_ms(c, i) == ms) {
            c->ctx_sel = i;
            return VKASR_OK;
        }
        const size_t l = strlen(menu);
        snprintf(menu + l, sizeof menu - l, "%s%d", i ? ", " : "", model_ctx_lookahead_ms(c, i));
    }
    return err_set(e, VKASR_ERR_INVALID_ARG, "lookahead %d ms is not one the model was trained with (%s ms)", ms, menu);
}

vkasr_status model_expected_tensors(const struct model_config *c, int canonical, struct tensor_spec **out, int *count,
                                    struct err *e) {
    struct tlist L = {0};
    const int64_t C = c->sub_channels, F = model_sub_freq(c), D = c->d_model, FF = c->ff_size, H = c->n_heads;
    const int64_t K = c->conv_kernel, V1 = (int64_t)c->vocab_size + 1, P = c->pred_hidden;
    const bool ab = c->attention_bias, cb = c->conv_bias;
    static const int conv3[] = {0, 2, 5}, conv1[] = {3, 6};
    const char *wC = "subsampling_conv_channels";
    for (int i = 0; i < 3; i++) {
        if (canonical)
            add(&L, wC, 2, C, 9, 0, 0, "encoder.subsampling.layers.%d.weight", conv3[i]);
        else
            add(&L, wC, 4, C, 1, 3, 3, "encoder.subsampling.layers.%d.weight", conv3[i]);
        add(&L, wC, 1, C, 0, 0, 0, "encoder.subsampling.layers.%d.bias", conv3[i]);
        if (i == 0)
            continue;
        int j = conv1[i - 1];
        if (canonical)
            add(&L, wC, 2, C, C, 0, 0, "encoder.subsampling.layers.%d.weight", j);
        else
            add(&L, wC, 4, C, C, 1, 1, "encoder.subsampling.layers.%d.weight", j);
        add(&L, wC, 1, C, 0, 0, 0, "encoder.subsampling.layers.%d.bias", j);
    }
    add(&L, c->causal_sub ? "hidden_size, subsampling_conv_channels * frequency bins (causal: 128 -> 17)"
                          : "hidden_size, subsampling_conv_channels * num_mel_bins / 8",
        2, D, C * F, 0, 0,
        "encoder.subsampling.linear.weight");
    add(&L, "hidden_size", 1, D, 0, 0, 0, "encoder.subsampling.linear.bias");

    const char *wD = "hidden_size", *wFD = "intermediate_size, hidden_size", *wDF = "hidden_size, intermediate_size";
    const char *wDD = "hidden_size, hidden_size", *wHk = "num_attention_heads, hidden_size / num_attention_heads";
    for (int l = 0; l < c->n_layers; l++) {
#define LP "encoder.layers.%d."
        add(&L, wFD, 2, FF, D, 0, 0, LP "feed_forward1.linear1.weight", l);
        if (ab)
            add(&L, "intermediate_size", 1, FF, 0, 0, 0, LP "feed_forward1.linear1.bias", l);
        add(&L, wDF, 2, D, FF, 0, 0, LP "feed_forward1.linear2.weight", l);
        if (ab)
            add(&L, wD, 1, D, 0, 0, 0, LP "feed_forward1.linear2.bias", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_feed_forward1.weight", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_feed_forward1.bias", l);
        static const char *const proj[] = {"q", "k", "v", "o"};
        for (int p = 0; p < 4; p++) {
            add(&L, wDD, 2, D, D, 0, 0, LP "self_attn.%s_proj.weight", l, proj[p]);
            if (ab)
                add(&L, wD, 1, D, 0, 0, 0, LP "self_attn.%s_proj.bias", l, proj[p]);
        }
        add(&L, wDD, 2, D, D, 0, 0, LP "self_attn.relative_k_proj.weight", l);
        add(&L, wHk, 2, H, D / H, 0, 0, LP "self_attn.bias_u", l);
        add(&L, wHk, 2, H, D / H, 0, 0, LP "self_attn.bias_v", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_self_att.weight", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_self_att.bias", l);
        if (canonical)
            add(&L, "2 * hidden_size, hidden_size", 2, 2 * D, D, 0, 0, LP "conv.pointwise_conv1.weight", l);
        else
            add(&L, "2 * hidden_size, hidden_size", 3, 2 * D, D, 1, 0, LP "conv.pointwise_conv1.weight", l);
        if (cb)
            add(&L, "2 * hidden_size", 1, 2 * D, 0, 0, 0, LP "conv.pointwise_conv1.bias", l);
        if (canonical) {
            add(&L, "hidden_size, conv_kernel_size", 2, D, K, 0, 0, LP "conv.depthwise_conv.weight", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.depthwise_conv.bias", l); /* BN folded: always present */
            if (c->conv_ln) { /* the LayerNorm after the depthwise conv */
                add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.weight", l);
                add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.bias", l);
            }
        } else {
            add(&L, "hidden_size, conv_kernel_size", 3, D, 1, K, 0, LP "conv.depthwise_conv.weight", l);
            if (cb)
                add(&L, wD, 1, D, 0, 0, 0, LP "conv.depthwise_conv.bias", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.weight", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.bias", l);
            if (!c->conv_ln) { /* a LayerNorm has no running statistics */
                add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.running_mean", l);
                add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.running_var", l);
            }
        }
        if (canonical)
            add(&L, wDD, 2, D, D, 0, 0, LP "conv.pointwise_conv2.weight", l);
        else
            add(&L, wDD, 3, D, D, 1, 0, LP "conv.pointwise_conv2.weight", l);
        if (cb)
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.pointwise_conv2.bias", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_conv.weight", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_conv.bias", l);
        add(&L, wFD, 2, FF, D, 0, 0, LP "feed_forward2.linear1.weight", l);
        if (ab)
            add(&L, "intermediate_size", 1, FF, 0, 0, 0, LP "feed_forward2.linear1.bias", l);
        add(&L, wDF, 2, D, FF, 0, 0, LP "feed_forward2.linear2.weight", l);
        if (ab)
            add(&L, wD, 1, D, 0, 0, 0, LP "feed_forward2.linear2.bias", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_feed_forward2.weight", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_feed_forward2.bias", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_out.weight", l);
        add(&L, wD, 1, D, 0, 0, 0, LP "norm_out.bias", l);
#undef LP
    }

    if (c->head == VKASR_HEAD_CTC) {
        if (canonical)
            add(&L, "vocab_size, hidden_size", 2, V1, D, 0, 0, "ctc_head.weight");
        else
            add(&L, "vocab_size, hidden_size", 3, V1, D, 1, 0, "ctc_head.weight");
        add(&L, "vocab_size", 1, V1, 0, 0, 0, "ctc_head.bias");
    } else {
        const char *wP = "decoder_hidden_size", *w4P = "4 * decoder_hidden_size, decoder_hidden_size";
        add(&L, "decoder_hidden_size, hidden_size", 2, P, D, 0, 0, "encoder_projector.weight");
        add(&L, wP, 1, P, 0, 0, 0, "encoder_projector.bias");
        add(&L, "vocab_size, decoder_hidden_size", 2, V1, P, 0, 0, "decoder.embedding.weight");
        for (int k = 0; k < c->pred_layers; k++) {
            add(&L, w4P, 2, 4 * P, P, 0, 0, "decoder.lstm.weight_ih_l%d", k);
            add(&L, w4P, 2, 4 * P, P, 0, 0, "decoder.lstm.weight_hh_l%d", k);
            if (canonical) {
                add(&L, "4 * decoder_hidden_size", 1, 4 * P, 0, 0, 0, "decoder.lstm.bias_l%d", k);
            } else {
                add(&L, "4 * decoder_hidden_size", 1, 4 * P, 0, 0, 0, "decoder.lstm.bias_ih_l%d", k);
                add(&L, "4 * decoder_hidden_size", 1, 4 * P, 0, 0, 0, "decoder.lstm.bias_hh_l%d", k);
            }
        }
        add(&L, "decoder_hidden_size, decoder_hidden_size", 2, P, P, 0, 0, "decoder.decoder_projector.weight");
        add(&L, wP, 1, P, 0, 0, 0, "decoder.decoder_projector.bias");
        const int64_t J = V1 + c->n_durations;
        const char *wJ = c->head == VKASR_HEAD_TDT ? "vocab_size + len(durations), decoder_hidden_size"
                                                   : "vocab_size, decoder_hidden_size";
        add(&L, wJ, 2, J, P, 0, 0, "joint.head.weight");
        add(&L, wJ, 1, J, 0, 0, 0, "joint.head.bias");
        if (c->n_prompts > 0) { /* the language prompt's MLP before the joint */
            const int64_t NP = c->n_prompts, HP = c->prompt_hidden;
            if (canonical) { /* the one-hot's columns of the first Linear split off as rows per slot */
                add(&L, "prompt_intermediate_size, hidden_size", 2, HP, D, 0, 0, "prompt_projector.linear_1.weight");
                add(&L, "num_prompts, prompt_intermediate_size", 2, NP, HP, 0, 0, "prompt_projector.language");
            } else {
                add(&L, "prompt_intermediate_size, hidden_size + num_prompts", 2, HP, D + NP, 0, 0,
                    "prompt_projector.linear_1.weight");
            }
            add(&L, "prompt_intermediate_size", 1, HP, 0, 0, 0, "prompt_projector.linear_1.bias");
            add(&L, "hidden_size, prompt_intermediate_size", 2, D, HP, 0, 0, "prompt_projector.linear_2.weight");
            add(&L, wD, 1, D, 0, 0, 0, "prompt_projector.linear_2.bias");
        }
    }
    if (L.oom) {
        free(L.v);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    *out = L.v;
    *count = L.n;
    return VKASR_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Validation                                                                                     */

static int same_shape(const struct model_tensor *t, const struct tensor_spec *s) {
    if (t->nd != s->nd)
        return 0;
    for (int i = 0; i < s->nd; i++)
        if (t->ne[i] != s->ne[i])
            return 0;
    return 1;
}

/* A block-quantized tensor in a non-canonical model (another engine's GGUF, gguf_nemo_speech.c): only a
 * matrix weight (model_prepare keeps it as stored, or dequantizes the subsampling linear, whose columns
 * move). Its shape is compared without trailing dimensions of 1 (a [2D, D, 1] pointwise convolution
 * stored as the [2D, D] matrix its rows of blocks make). */
static bool quant_as_stored(const struct model_tensor *t) {
    return MT_IS_QUANT(t->type) && (model_is_matrix_weight(t->name) || model_is_decoder_matrix(t->name));
}

static int same_squeezed(const struct model_tensor *t, const struct tensor_spec *s) {
    int nd = s->nd;
    while (nd > t->nd && s->ne[nd - 1] == 1)
        nd--;
    if (t->nd != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (t->ne[i] != s->ne[i])
            return 0;
    return 1;
}

vkasr_status model_validate(const struct model_file *mf, struct err *e) {
    const struct model_config *c = &mf->cfg;
    const int gg = mf->canonical;
    /* where missing tensors are reported: the weights file, or the directory for shards */
    const char *wsrc = mf->nmaps == 1 ? mf->map_paths[0] : mf->path;
    char cfgsrc[1024];
    if (gg)
        snprintf(cfgsrc, sizeof cfgsrc, "%s (metadata)", mf->path);
    else
        snprintf(cfgsrc, sizeof cfgsrc, "%s%sconfig.json", mf->path,
                 mf->path[0] && mf->path[strlen(mf->path) - 1] == '/' ? "" : "/");

    struct tensor_spec *sp = NULL;
    int n = 0;
    TRY(model_expected_tensors(c, gg, &sp, &n, e));
    vkasr_status st = VKASR_OK;
    char a[96], b[96];
    for (int i = 0; i < n && st == VKASR_OK; i++) {
        const struct model_tensor *t = model_find(mf, sp[i].name);
        if (!t) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: missing tensor '%s' (expected shape %s from %s: %s)", wsrc,
                         sp[i].name, shape_str(a, sizeof a, sp[i].nd, sp[i].ne), cfgsrc, sp[i].why);
        } else if (!same_shape(t, &sp[i]) && !(!gg && quant_as_stored(t) && same_squeezed(t, &sp[i]))) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' has shape %s, expected %s (from %s: %s)",
                         model_tensor_file(mf, t), t->name, shape_str(a, sizeof a, t->nd, t->ne),
                         shape_str(b, sizeof b, sp[i].nd, sp[i].ne), cfgsrc, sp[i].why);
        } else if (!gg && !mt_dtype_is_float(t->type) && !quant_as_stored(t)) {
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s' has dtype %s, expected a floating-point type (F32, F16, BF16, F64; a "
                         "block type only on a matrix weight)",
                         model_tensor_file(mf, t), t->name, mt_dtype_name(t->type));
        } else if (gg && t->type != MT_F32 &&
                   !((t->type == MT_F16 || MT_IS_QUANT(t->type)) && model_is_matrix_weight(t->name)) &&
                   !(MT_IS_QUANT(t->type) && model_is_decoder_matrix(t->name))) {
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s' has type %s; only matrix weights may be F16 or quantized (the "
                         "decoder's: quantized), the rest F32",
                         model_tensor_file(mf, t), t->name, mt_dtype_name(t->type));
        }
    }
    free(sp);
    if (st != VKASR_OK)
        return st;

    /* Shapes are the robust source of truth (spec §8.2): tensors the configuration says do not exist
     * mean the configuration does not describe these weights. */
    struct {
        bool bad;
        const char *field, *tensor;
    } extra[5];
    char layer_t[96], lstm_t[96];
    snprintf(layer_t, sizeof layer_t, "encoder.layers.%d.norm_out.weight", c->n_layers);
    snprintf(lstm_t, sizeof lstm_t, "decoder.lstm.weight_ih_l%d", c->pred_layers);
    extra[0].bad = !c->attention_bias && (model_find(mf, "encoder.layers.0.self_attn.q_proj.bias") ||
                                          model_find(mf, "encoder.layers.0.feed_forward1.linear1.bias"));
    extra[0].field = gg ? "parakeet.attention_bias = false" : "encoder_config.attention_bias = false";
    extra[0].tensor = model_find(mf, "encoder.layers.0.self_attn.q_proj.bias")
                          ? "encoder.layers.0.self_attn.q_proj.bias"
                          : "encoder.layers.0.feed_forward1.linear1.bias";
    extra[1].bad = !c->conv_bias && model_find(mf, "encoder.layers.0.conv.pointwise_conv1.bias");
    extra[1].field = gg ? "parakeet.conv_bias = false" : "encoder_config.convolution_bias = false";
    extra[1].tensor = "encoder.layers.0.conv.pointwise_conv1.bias";
    extra[2].bad = model_find(mf, layer_t) != NULL;
    extra[2].field = gg ? "parakeet.n_layers" : "encoder_config.num_hidden_layers";
    extra[2].tensor = layer_t;
    extra[3].bad = c->head != VKASR_HEAD_CTC && model_find(mf, lstm_t) != NULL;
    extra[3].field = gg ? "parakeet.pred_layers" : "num_decoder_layers";
    extra[3].tensor = lstm_t;
    extra[4].bad = c->n_prompts == 0 && model_find(mf, "prompt_projector.linear_1.weight") != NULL;
    extra[4].field = gg ? "parakeet.num_prompts = 0" : "num_prompts = 0";
    extra[4].tensor = "prompt_projector.linear_1.weight";
    for (int i = 0; i < 5; i++)
        if (extra[i].bad)
            return err_set(e, VKASR_ERR_MODEL, "%s: %s contradicts the weights: tensor '%s' is present in %s", cfgsrc,
                           extra[i].field, extra[i].tensor, model_tensor_file(mf, model_find(mf, extra[i].tensor)));
    return VKASR_OK;
}
