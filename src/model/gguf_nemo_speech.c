/* gguf_nemo_speech.c — GGUF files in NVIDIA NeMo-Speech.cpp's layout (general.architecture "asr", the
 * asr.* keys, NeMo's tensor names, the SentencePiece model as base64), as NVIDIA publishes them beside
 * its .nemo checkpoints: keys mapped onto struct model_config, tensors renamed to the HF names that
 * model_prepare takes. What vkasr cannot run (cache-aware streaming, prompts) is refused by key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_internal.h"
#include "model_file.h"
#include "model_internal.h"
#include "nemo_internal.h"

static int is(const char *s, uint64_t len, const char *want) {
    return s && len == strlen(want) && memcmp(s, want, len) == 0;
}

/* An optional string key whose value must be one of ok (NULL-terminated; the first is the one vkasr
 * runs); why says what the other values mean. */
static vkasr_status only(const struct gguf *g, const char *key, const char *const *ok, const char *why,
                         struct err *e) {
    const char *s;
    uint64_t len;
    TRY(gguf_get_str(g, key, 0, &s, &len, e));
    if (!s)
        return VKASR_OK;
    for (const char *const *p = ok; *p; p++)
        if (is(s, len, *p))
            return VKASR_OK;
    return err_set(e, VKASR_ERR_MODEL, "%s: %s = \"%.*s\" is not supported (%s; vkasr runs \"%s\")", gguf_path(g), key,
                   (int)(len > 64 ? 64 : len), s, why, ok[0]);
}

/* An optional bool key that must hold want. */
static vkasr_status must_bool(const struct gguf *g, const char *key, bool want, const char *why, struct err *e) {
    bool v;
    TRY(gguf_get_bool(g, key, 0, want, &v, e));
    if (v != want)
        return err_set(e, VKASR_ERR_MODEL, "%s: %s = %s is not supported (%s)", gguf_path(g), key,
                       v ? "true" : "false", why);
    return VKASR_OK;
}

static vkasr_status encoder(const struct gguf *g, struct model_config *c, struct err *e) {
    const char *path = gguf_path(g);
    const int BIG = 1 << 22;
    int feat_in;
    TRY(gguf_get_int(g, "asr.encoder.d_model", 1, 0, 1, BIG, &c->d_model, e));
    TRY(gguf_get_int(g, "asr.encoder.n_layers", 1, 0, 1, BIG, &c->n_layers, e));
    TRY(gguf_get_int(g, "asr.encoder.n_heads", 1, 0, 1, BIG, &c->n_heads, e));
    TRY(gguf_get_int(g, "asr.encoder.d_ff", 1, 0, 1, BIG, &c->ff_size, e));
    TRY(gguf_get_int(g, "asr.encoder.conv_kernel_size", 1, 0, 1, BIG, &c->conv_kernel, e));
    TRY(gguf_get_int(g, "asr.encoder.subsampling_factor", 1, 0, 1, BIG, &c->sub_factor, e));
    TRY(gguf_get_int(g, "asr.encoder.subsampling_conv_channels", 1, 0, 1, BIG, &c->sub_channels, e));
    TRY(gguf_get_int(g, "asr.encoder.feat_in", 1, 0, 1, BIG, &feat_in, e));
    TRY(gguf_get_bool(g, "asr.encoder.xscaling", 1, true, &c->xscaling, e));
    TRY(gguf_get_bool(g, "asr.encoder.use_bias", 1, true, &c->attention_bias, e));
    c->conv_bias = c->attention_bias; /* NeMo's use_bias covers every linear and convolution of a layer */
    if (feat_in != c->n_mels)
        return err_set(e, VKASR_ERR_MODEL, "%s: asr.encoder.feat_in = %d differs from asr.preprocessor.features = %d",
                       path, feat_in, c->n_mels);

    /* cache-aware streaming models (nemotron-speech-streaming): chunked attention, causal convolutions,
     * a LayerNorm in the convolution module; the file keeps the first [L, R] pair only */
    static const char *const styles[] = {"regular", "chunked_limited", NULL},
                             *const norms[] = {"batch_norm", "layer_norm", NULL}, *const block[] = {"block_q8_0", NULL};
    TRY(only(g, "asr.encoder.att_context_style", styles, "attention styles other than regular and chunked_limited", e));
    TRY(only(g, "asr.encoder.conv_norm", norms, "convolution norms other than batch_norm and layer_norm", e));
    const char *s;
    uint64_t len;
    bool cache = false;
    TRY(gguf_get_bool(g, "asr.encoder.cache_supported", 0, false, &cache, e));
    TRY(gguf_get_str(g, "asr.encoder.att_context_style", 0, &s, &len, e));
    const bool chunked = s && is(s, len, "chunked_limited");
    TRY(gguf_get_str(g, "asr.encoder.conv_norm", 0, &s, &len, e));
    c->conv_ln = s && is(s, len, "layer_norm");
    TRY(gguf_get_bool(g, "asr.encoder.causal_downsampling", 0, cache, &c->causal_sub, e));
    TRY(gguf_get_str(g, "asr.encoder.conv_context", 0, &s, &len, e));
    char centred[32], causal[32];
    snprintf(centred, sizeof centred, "[%d, %d]", (c->conv_kernel - 1) / 2, (c->conv_kernel - 1) / 2);
    snprintf(causal, sizeof causal, "[%d, 0]", c->conv_kernel - 1);
    c->causal_conv = s && (is(s, len, "causal") || is(s, len, causal));
    if (s && !c->causal_conv && !is(s, len, "None") && !is(s, len, "symmetric") && !is(s, len, "default") &&
        !is(s, len, centred))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.encoder.conv_context = \"%.*s\" is not supported (vkasr runs the centred %s and the "
                       "causal %s)",
                       path, (int)(len > 64 ? 64 : len), s, centred, causal);
    int left, right;
    TRY(gguf_get_int(g, "asr.encoder.offline_left_ctx", 0, -1, -1, BIG, &left, e));
    TRY(gguf_get_int(g, "asr.encoder.offline_right_ctx", 0, -1, -1, BIG, &right, e));
    c->att_left = c->att_right = -1;
    c->n_ctx = 0;
    if (chunked) {
        int tl, tr;
        TRY(gguf_get_int(g, "asr.encoder.train_left_ctx", 0, left, -1, BIG, &tl, e));
        TRY(gguf_get_int(g, "asr.encoder.train_right_ctx", 0, right, -1, BIG, &tr, e));
        c->n_ctx = 1;
        c->ctx[0][0] = tl;
        c->ctx[0][1] = tr;
        TRY(model_check_ctx(c, path, "asr.encoder.train_left_ctx / train_right_ctx", e));
    } else if (left != -1 || right != -1)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.encoder.offline_left_ctx / offline_right_ctx = %d / %d with att_context_style regular: "
                       "a limited context is supported as chunked_limited only",
                       path, left, right);
    /* NeMo-Speech.cpp's CUDA layout of Q8_0 matrices ("tensor_planar_v1": all quants, then all scales) */
    TRY(only(g, "asr.encoder.q8_layout", block, "the planar Q8_0 layout; convert with --q8-layout block", e));
    TRY(only(g, "asr.encoder.qkv_q8_layout", block, "the planar Q8_0 layout; convert with --q8-layout block", e));
    return VKASR_OK;
}

static vkasr_status preprocessor(const struct gguf *g, struct model_config *c, struct err *e) {
    const char *path = gguf_path(g);
    float ws, hs;
    TRY(gguf_get_int(g, "asr.preprocessor.sample_rate", 1, 0, 1, 1000000, &c->sample_rate, e));
    TRY(gguf_get_f32(g, "asr.preprocessor.window_size", 1, 0, &ws, e));
    TRY(gguf_get_f32(g, "asr.preprocessor.window_stride", 1, 0, &hs, e));
    if (!(ws > 0 && ws < 1 && hs > 0 && hs < 1))
        return err_set(e, VKASR_ERR_MODEL, "%s: asr.preprocessor.window_size %g / window_stride %g s out of range",
                       path, (double)ws, (double)hs);
    c->win_length = (int)((double)ws * c->sample_rate + 0.5);
    c->hop_length = (int)((double)hs * c->sample_rate + 0.5);
    TRY(gguf_get_int(g, "asr.preprocessor.n_fft", 1, 0, 1, 1 << 16, &c->n_fft, e));
    TRY(gguf_get_int(g, "asr.preprocessor.features", 1, 0, 1, 4096, &c->n_mels, e));
    TRY(gguf_get_f32(g, "asr.preprocessor.preemph", 0, 0.97f, &c->preemph, e));
    static const char *const per_feature[] = {"per_feature", "NA", NULL};
    TRY(only(g, "asr.preprocessor.normalize", per_feature, "another feature normalisation", e));
    const char *norm;
    uint64_t nlen;
    TRY(gguf_get_str(g, "asr.preprocessor.normalize", 0, &norm, &nlen, e));
    c->no_feature_norm = norm && is(norm, nlen, "NA");
    /* NeMo's front end: a symmetric Hann window centred in n_fft (the converter states it) */
    TRY(must_bool(g, "asr.preprocessor.stft_center_window", true, "vkasr centres the window in n_fft as NeMo does", e));
    TRY(must_bool(g, "asr.preprocessor.hann_periodic", false, "vkasr uses NeMo's symmetric Hann window", e));
    return VKASR_OK;
}

static vkasr_status heads(const struct gguf *g, struct model_config *c, struct err *e) {
    const char *path = gguf_path(g), *s;
    uint64_t len;
    const int BIG = 1 << 22;
    TRY(gguf_get_str(g, "asr.head_type", 1, &s, &len, e));
    c->head = is(s, len, "tdt")    ? VKASR_HEAD_TDT
              : is(s, len, "rnnt") ? VKASR_HEAD_RNNT
              : is(s, len, "ctc")  ? VKASR_HEAD_CTC
                                   : -1;
    if (c->head < 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: asr.head_type \"%.*s\" is not tdt, rnnt or ctc", path,
                       (int)(len > 64 ? 64 : len), s);
    int blank;
    if (c->head == VKASR_HEAD_CTC) {
        TRY(gguf_get_int(g, "asr.ctc.num_classes", 1, 0, 1, BIG, &c->vocab_size, e));
        TRY(gguf_get_int(g, "asr.ctc.blank_id", 1, 0, 0, BIG, &blank, e));
        if (blank != c->vocab_size)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: asr.ctc.blank_id = %d must be the last class, asr.ctc.num_classes = %d", path, blank,
                           c->vocab_size);
        return VKASR_OK;
    }
    int classes, embed, joint, prompts;
    TRY(gguf_get_int(g, "asr.rnnt.vocab_size", 1, 0, 2, BIG, &classes, e));
    TRY(gguf_get_int(g, "asr.rnnt.blank_id", 1, 0, 0, BIG, &blank, e));
    c->vocab_size = classes - 1; /* the converter counts the blank */
    if (blank != c->vocab_size)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.rnnt.blank_id = %d must be the last class, asr.rnnt.vocab_size - 1 = %d", path, blank,
                       c->vocab_size);
    TRY(gguf_get_int(g, "asr.rnnt.pred_hidden", 1, 0, 1, BIG, &c->pred_hidden, e));
    TRY(gguf_get_int(g, "asr.rnnt.pred_embed_dim", 0, c->pred_hidden, 1, BIG, &embed, e));
    TRY(gguf_get_int(g, "asr.rnnt.joint_dim", 0, c->pred_hidden, 1, BIG, &joint, e));
    if (embed != c->pred_hidden || joint != c->pred_hidden)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.rnnt.pred_embed_dim = %d and asr.rnnt.joint_dim = %d must equal asr.rnnt.pred_hidden "
                       "= %d",
                       path, embed, joint, c->pred_hidden);
    TRY(gguf_get_int(g, "asr.rnnt.pred_num_layers", 1, 0, 1, 64, &c->pred_layers, e));
    TRY(gguf_get_int(g, "asr.rnnt.max_symbols_per_step", 0, 10, 1, 1000, &c->max_symbols, e));
    TRY(gguf_get_int(g, "asr.rnnt.num_prompts", 0, 0, 0, BIG, &prompts, e));
    if (prompts != 0)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.rnnt.num_prompts = %d: a prompt-conditioned (language-ID) model is not supported", path,
                       prompts);
    if (c->head != VKASR_HEAD_TDT)
        return VKASR_OK;
    uint32_t at;
    uint64_t n;
    const uint8_t *d;
    TRY(gguf_get_array(g, "asr.tdt.durations", &at, &n, &d, e));
    if (!gguf_is_int_type(at) || n < 1 || n > 16)
        return err_set(e, VKASR_ERR_MODEL, "%s: asr.tdt.durations must be 1 to 16 integers", path);
    const uint64_t sz = at == GT_U8 || at == GT_I8    ? 1
                        : at == GT_U16 || at == GT_I16 ? 2
                        : at == GT_U32 || at == GT_I32 ? 4
                                                       : 8;
    for (uint64_t i = 0; i < n; i++) {
        int64_t v = gguf_int_at(d + i * sz, at);
        if (v < 0 || v > 1024)
            return err_set(e, VKASR_ERR_MODEL, "%s: asr.tdt.durations[%llu] = %lld is not in [0, 1024]", path,
                           (unsigned long long)i, (long long)v);
        c->durations[i] = (int)v;
    }
    c->n_durations = (int)n;
    return VKASR_OK;
}

/* RFC 4648 base64 (padding optional, no whitespace) into a malloc'd buffer. */
static int unbase64(const char *s, uint64_t len, uint8_t **out, size_t *n) {
    *out = malloc(len / 4 * 3 + 3);
    if (!*out)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    uint64_t i = 0;
    for (; i < len && s[i] != '='; i++) {
        char ch = s[i];
        int v = ch >= 'A' && ch <= 'Z'   ? ch - 'A'
                : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                : ch >= '0' && ch <= '9' ? ch - '0' + 52
                : ch == '+'              ? 62
                : ch == '/'              ? 63
                                         : -1;
        if (v < 0)
            return 0;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            (*out)[k++] = (uint8_t)(acc >> bits);
        }
    }
    for (; i < len; i++)
        if (s[i] != '=')
            return 0;
    *n = k;
    return 1;
}

/* The SentencePiece model (asr.tokenizer.spm_model), checked against the piece list the converter
 * also stores (asr.tokenizer.vocab) and the head's vocabulary size. */
static vkasr_status tokenizer(const struct gguf *g, int32_t n, struct tokenizer *t, struct err *e) {
    const char *path = gguf_path(g), *s;
    uint64_t len;
    TRY(gguf_get_str(g, "asr.tokenizer.type", 1, &s, &len, e));
    if (!is(s, len, "sentencepiece_bpe"))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.tokenizer.type = \"%.*s\": vkasr needs the model's SentencePiece vocabulary "
                       "(\"sentencepiece_bpe\")",
                       path, (int)(len > 64 ? 64 : len), s);
    TRY(gguf_get_str(g, "asr.tokenizer.spm_model", 1, &s, &len, e));
    uint8_t *proto = NULL;
    size_t plen = 0;
    int ok = unbase64(s, len, &proto, &plen);
    if (ok <= 0) {
        free(proto);
        return ok < 0 ? err_set(e, VKASR_ERR_NO_MEMORY, "out of memory")
                      : err_set(e, VKASR_ERR_MODEL, "%s: asr.tokenizer.spm_model is not base64", path);
    }
    char src[1100];
    snprintf(src, sizeof src, "%s: asr.tokenizer.spm_model", path);
    vkasr_status st = spm_parse(src, proto, plen, t, e);
    free(proto);
    TRY(st);
    if (t->n != n)
        return err_set(e, VKASR_ERR_MODEL, "%s has %d pieces but the head has %d classes besides the blank", src,
                       (int)t->n, (int)n);
    uint32_t at;
    uint64_t cnt;
    const uint8_t *d;
    if (!gguf_has(g, "asr.tokenizer.vocab"))
        return VKASR_OK;
    TRY(gguf_get_array(g, "asr.tokenizer.vocab", &at, &cnt, &d, e));
    if (at != GT_STR || cnt != (uint64_t)n)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: asr.tokenizer.vocab must be %d strings (the SentencePiece model's pieces)", path, (int)n);
    for (int32_t i = 0; i < n; i++) { /* lengths were bounds-checked when the file was parsed */
        uint64_t l = gguf_le(d, 8);
        if (l != strlen(t->piece[i]) || memcmp(d + 8, t->piece[i], l) != 0)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: asr.tokenizer.vocab[%d] differs from the SentencePiece model's piece", path, (int)i);
        d += 8 + l;
    }
    return VKASR_OK;
}

/* The HF name of a tensor of this layout (malloc'd); NULL with *drop for tensors vkasr does not load
 * (the positional table and the filterbank it computes itself), NULL alone for unknown names (*unknown)
 * or when out of memory. */
static char *hf_name(const char *name, bool *drop, bool *unknown) {
    *drop = *unknown = false;
    if (!strcmp(name, "encoder.pos_enc.pe") || !strcmp(name, "preprocessor.fb")) {
        *drop = true;
        return NULL;
    }
    /* the converter renames PyTorch's lstm.weight_ih_l0 to lstm.ih_l0.weight: back to NeMo's name */
    static const char lstm[] = "decoder.prediction.dec_rnn.lstm.";
    char nemo[160];
    const char *r = strncmp(name, lstm, strlen(lstm)) == 0 ? name + strlen(lstm) : NULL, *dot;
    int layer;
    char kind[3], tail;
    if (r && (dot = strchr(r, '.')) &&
        sscanf(r, "%2[ih]_l%d%c", kind, &layer, &tail) == 3 && tail == '.' && layer >= 0 && layer < 1000 &&
        (!strcmp(kind, "ih") || !strcmp(kind, "hh")) && (!strcmp(dot + 1, "weight") || !strcmp(dot + 1, "bias"))) {
        snprintf(nemo, sizeof nemo, "%s%s_%s_l%d", lstm, dot + 1, kind, layer);
        name = nemo;
    }
    return nemo_map_name(name, unknown);
}

/* Whether a (renamed) tensor belongs to the head loaded: a hybrid's file holds its auxiliary CTC head
 * beside the transducer. */
static bool other_head(const char *name, int head) {
    bool ctc = !strncmp(name, "ctc_head.", 9);
    return head == VKASR_HEAD_CTC ? !ctc && (!strncmp(name, "decoder.", 8) || !strncmp(name, "joint.", 6) ||
                                             !strncmp(name, "encoder_projector.", 18))
                                  : ctc;
}

static vkasr_status rename_tensors(struct model_file *mf, const char *path, int head, struct err *e) {
    int kept = 0;
    vkasr_status st = VKASR_OK;
    mf->nby_name = 0; /* the name index is rebuilt after the renaming */
    for (int i = 0; i < mf->ntensors; i++) {
        struct model_tensor t = mf->tensors[i];
        bool drop, unknown;
        char *nm = st == VKASR_OK ? hf_name(t.name, &drop, &unknown) : NULL;
        if (st == VKASR_OK && !nm && unknown)
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s' belongs to no module vkasr implements (NeMo-Speech.cpp layout)", path,
                         t.name);
        else if (st == VKASR_OK && !nm && !drop)
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        if (nm && other_head(nm, head)) {
            free(nm);
            nm = NULL;
        }
        if (!nm) { /* dropped (or after an error): freed here, the rest compacted */
            free(t.name);
            free(t.owned);
            continue;
        }
        free(t.name);
        t.name = nm;
        /* the converter squeezes the pointwise convolutions' kernel dimension of 1; the HF layout keeps it
         * (a block-quantized one keeps its rows: model_validate compares it without the 1) */
        if (strstr(nm, ".conv.pointwise_conv") && ends_with(nm, ".weight") && t.nd == 2 && !MT_IS_QUANT(t.type)) {
            t.ne[2] = 1;
            t.nd = 3;
        }
        mf->tensors[kept++] = t;
    }
    mf->ntensors = kept;
    return st;
}

/* Whether the parsed tensors hold a hybrid's auxiliary CTC head. */
static bool has_aux_ctc(const struct model_file *mf) {
    for (int i = 0; i < mf->ntensors; i++)
        if (!strcmp(mf->tensors[i].name, "ctc_decoder.decoder_layers.0.weight"))
            return true;
    return false;
}

vkasr_status gguf_nemo_speech_read(struct model_file *mf, const struct gguf *g, int head, struct err *e) {
    const char *path = gguf_path(g);
    struct model_config *c = &mf->cfg;
    memset(c, 0, sizeof *c);
    TRY(heads(g, c, e));
    if (head == VKASR_HEAD_CTC && c->head != VKASR_HEAD_CTC && has_aux_ctc(mf)) {
        /* a hybrid's CTC head: over the same vocabulary, as a CTC model's configuration */
        c->head = VKASR_HEAD_CTC;
        c->pred_hidden = c->pred_layers = c->n_durations = c->max_symbols = 0;
        memset(c->durations, 0, sizeof c->durations);
    }
    TRY(preprocessor(g, c, e));
    TRY(encoder(g, c, e));
    TRY(config_check(c, path, e));
    TRY(tokenizer(g, c->vocab_size, &mf->tok, e));
    TRY(rename_tensors(mf, path, c->head, e));
    mf->canonical = false;
    return model_index_names(mf, path, e);
}
