/* hf_config.c — the configuration of a Hugging Face transformers Parakeet directory: config.json
 * (model type, nested encoder_config, head fields; transformers' defaults where keys are missing) and
 * the feature extractor of preprocessor_config.json or processor_config.json. Also the range checks
 * every configuration passes, whichever file it came from. Tensor shapes are checked in model.c.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_file.h"
#include "model_internal.h"

static const char *jtype(const cJSON *j) {
    if (cJSON_IsNull(j))
        return "null";
    if (cJSON_IsBool(j))
        return "a boolean";
    if (cJSON_IsNumber(j))
        return "a number";
    if (cJSON_IsString(j))
        return "a string";
    if (cJSON_IsArray(j))
        return "an array";
    if (cJSON_IsObject(j))
        return "an object";
    return "invalid";
}

/* One JSON object being read: the file and the key path prefix for messages ("encoder_config."). */
struct jobj {
    const char *file;
    const char *prefix;
    const cJSON *obj; /* NULL: every key takes its default */
};

static const cJSON *jget(const struct jobj *o, const char *key) {
    return o->obj ? cJSON_GetObjectItemCaseSensitive(o->obj, key) : NULL;
}

static vkasr_status get_int(const struct jobj *o, const char *key, int def, int lo, int hi, int *out, struct err *e) {
    const cJSON *j = jget(o, key);
    if (!j) {
        *out = def;
        return VKASR_OK;
    }
    if (!cJSON_IsNumber(j))
        return err_set(e, VKASR_ERR_MODEL, "%s: field '%s%s' must be an integer, got %s", o->file, o->prefix, key,
                       jtype(j));
    double d = j->valuedouble;
    if (d != floor(d))
        return err_set(e, VKASR_ERR_MODEL, "%s: field '%s%s' must be an integer, got %g", o->file, o->prefix, key, d);
    if (!(d >= lo && d <= hi))
        return err_set(e, VKASR_ERR_MODEL, "%s: field '%s%s' = %.17g is out of the supported range [%d, %d]", o->file,
                       o->prefix, key, d, lo, hi);
    *out = (int)d;
    return VKASR_OK;
}

static vkasr_status get_bool(const struct jobj *o, const char *key, bool def, bool *out, struct err *e) {
    const cJSON *j = jget(o, key);
    if (!j) {
        *out = def;
        return VKASR_OK;
    }
    if (!cJSON_IsBool(j))
        return err_set(e, VKASR_ERR_MODEL, "%s: field '%s%s' must be a boolean, got %s", o->file, o->prefix, key,
                       jtype(j));
    *out = cJSON_IsTrue(j);
    return VKASR_OK;
}

/* A string field that must be one of the accepted values (NULL-terminated list); def when missing. */
static vkasr_status check_str(const struct jobj *o, const char *key, const char *const *ok, struct err *e) {
    const cJSON *j = jget(o, key);
    if (!j)
        return VKASR_OK;
    if (!cJSON_IsString(j))
        return err_set(e, VKASR_ERR_MODEL, "%s: field '%s%s' must be a string, got %s", o->file, o->prefix, key,
                       jtype(j));
    for (const char *const *p = ok; *p; p++)
        if (strcmp(j->valuestring, *p) == 0)
            return VKASR_OK;
    return err_set(e, VKASR_ERR_MODEL, "%s: field '%s%s' = \"%s\" is not supported (vkasr implements \"%s\")", o->file,
                   o->prefix, key, j->valuestring, ok[0]);
}

static int head_from_name(const char *s, int is_arch) {
    static const char *const types[] = {"parakeet_tdt", "parakeet_rnnt", "parakeet_ctc"};
    static const char *const archs[] = {"ParakeetForTDT", "ParakeetForRNNT", "ParakeetForCTC"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, is_arch ? archs[i] : types[i]) == 0)
            return i; /* VKASR_HEAD_TDT, _RNNT, _CTC in this order */
    /* transformers' cache-aware streaming RNN-T (nemotron-speech-streaming) */
    if (strcmp(s, is_arch ? "NemotronAsrStreamingForRNNT" : "nemotron_asr_streaming") == 0)
        return VKASR_HEAD_RNNT;
    /* its multilingual extension with the language prompt (Nemotron 3.5) */
    if (strcmp(s, is_arch ? "Nemotron3_5AsrForRNNT" : "nemotron3_5_asr") == 0)
        return VKASR_HEAD_RNNT;
    return -1;
}

/* transformers' NemotronAsrStreaming: the encoder is always cache-aware (causal subsampling, the causal
 * LayerNorm conv module, the chunked_limited mask of sliding_window - 1 left frames and the lookahead
 * menu supported_num_lookahead_tokens, default default_num_lookahead_tokens) and the feature extractor
 * never normalises. */
static bool names_type(const cJSON *root, const char *type, const char *arch) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, type) == 0)
        return true;
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "architectures"), *it;
    if (cJSON_IsArray(ar))
        cJSON_ArrayForEach(it, ar) if (cJSON_IsString(it) && strcmp(it->valuestring, arch) == 0)
            return true;
    return false;
}

/* transformers' Nemotron3_5Asr: NemotronAsrStreaming's encoder and head with the language prompt
 * (num_prompts slots, prompt_intermediate_size wide; the map of languages is the processor's). */
static bool is_prompt(const cJSON *root) { return names_type(root, "nemotron3_5_asr", "Nemotron3_5AsrForRNNT"); }

static bool is_streaming(const cJSON *root) {
    return names_type(root, "nemotron_asr_streaming", "NemotronAsrStreamingForRNNT") || is_prompt(root);
}

static vkasr_status streaming_menu(const struct jobj *eo, struct model_config *c, struct err *e) {
    int window = 0, def = 0;
    TRY(get_int(eo, "sliding_window", 71, 2, 1 << 20, &window, e));
    const cJSON *menu = jget(eo, "supported_num_lookahead_tokens");
    if (!cJSON_IsArray(menu) || cJSON_GetArraySize(menu) < 1 || cJSON_GetArraySize(menu) > MODEL_MAX_CTX)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: field '%ssupported_num_lookahead_tokens' must list 1 to %d lookaheads (right contexts)",
                       eo->file, eo->prefix, MODEL_MAX_CTX);
    const int n = cJSON_GetArraySize(menu), first = cJSON_GetArrayItem(menu, 0)->valueint;
    TRY(get_int(eo, "default_num_lookahead_tokens", first, 0, 1 << 20, &def, e));
    c->n_ctx = 0;
    for (int pass = 0; pass < 2; pass++) /* the default first, as NeMo's first pair */
        for (int i = 0; i < n; i++) {
            const cJSON *r = cJSON_GetArrayItem(menu, i);
            if (!cJSON_IsNumber(r) || r->valuedouble != (double)r->valueint)
                return err_set(e, VKASR_ERR_MODEL, "%s: field '%ssupported_num_lookahead_tokens' must hold integers",
                               eo->file, eo->prefix);
            if ((pass == 0) == (r->valueint == def)) {
                c->ctx[c->n_ctx][0] = window - 1;
                c->ctx[c->n_ctx][1] = r->valueint;
                c->n_ctx++;
            }
        }
    if (c->n_ctx != n || c->ctx[0][1] != def)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: field '%sdefault_num_lookahead_tokens' = %d is not one of supported_num_lookahead_tokens",
                       eo->file, eo->prefix, def);
    c->causal_sub = c->causal_conv = c->conv_ln = c->no_feature_norm = true;
    return model_check_ctx(c, eo->file, "encoder_config.sliding_window / supported_num_lookahead_tokens", e);
}

static vkasr_status read_head(const char *file, const cJSON *root, int *head, struct err *e) {
    int from_type = -1, from_arch = -1;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt) {
        if (!cJSON_IsString(mt))
            return err_set(e, VKASR_ERR_MODEL, "%s: field 'model_type' must be a string, got %s", file, jtype(mt));
        from_type = head_from_name(mt->valuestring, 0);
        if (from_type < 0)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: model_type \"%s\" is not a Parakeet TDT, RNN-T or CTC model (parakeet_tdt, "
                           "parakeet_rnnt, parakeet_ctc, nemotron_asr_streaming, nemotron3_5_asr)",
                           file, mt->valuestring);
    }
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (ar) {
        if (!cJSON_IsArray(ar))
            return err_set(e, VKASR_ERR_MODEL, "%s: field 'architectures' must be an array, got %s", file, jtype(ar));
        const cJSON *it;
        cJSON_ArrayForEach(it, ar) {
            if (!cJSON_IsString(it))
                return err_set(e, VKASR_ERR_MODEL, "%s: field 'architectures' must hold strings, got %s", file,
                               jtype(it));
            if (from_arch < 0)
                from_arch = head_from_name(it->valuestring, 1);
        }
    }
    if (from_type >= 0 && from_arch >= 0 && from_type != from_arch)
        return err_set(e, VKASR_ERR_MODEL, "%s: model_type \"%s\" contradicts 'architectures'", file, mt->valuestring);
    *head = from_type >= 0 ? from_type : from_arch;
    if (*head < 0)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: neither 'model_type' nor 'architectures' names a Parakeet TDT, RNN-T or CTC model", file);
    return VKASR_OK;
}

static vkasr_status read_config_json(const char *file, const cJSON *root, struct model_config *c, struct err *e) {
    if (!cJSON_IsObject(root))
        return err_set(e, VKASR_ERR_MODEL, "%s: not a JSON object", file);
    TRY(read_head(file, root, &c->head, e));

    const cJSON *enc = cJSON_GetObjectItemCaseSensitive(root, "encoder_config");
    if (enc && !cJSON_IsObject(enc))
        return err_set(e, VKASR_ERR_MODEL, "%s: field 'encoder_config' must be an object, got %s", file, jtype(enc));
    /* transformers' ParakeetEncoderConfig defaults apply to missing keys (and to a missing encoder_config) */
    struct jobj eo = {file, "encoder_config.", enc};
    static const char *const silu[] = {"silu", "swish", NULL};
    int ksub = 3, stride = 2;
    TRY(get_int(&eo, "hidden_size", 1024, 1, 1 << 16, &c->d_model, e));
    TRY(get_int(&eo, "num_hidden_layers", 24, 1, 1024, &c->n_layers, e));
    TRY(get_int(&eo, "num_attention_heads", 8, 1, 1024, &c->n_heads, e));
    TRY(get_int(&eo, "intermediate_size", 4096, 1, 1 << 20, &c->ff_size, e));
    TRY(check_str(&eo, "hidden_act", silu, e));
    TRY(get_bool(&eo, "attention_bias", true, &c->attention_bias, e));
    TRY(get_bool(&eo, "convolution_bias", true, &c->conv_bias, e));
    TRY(get_int(&eo, "conv_kernel_size", 9, 1, 1023, &c->conv_kernel, e));
    TRY(get_int(&eo, "subsampling_factor", 8, 1, 64, &c->sub_factor, e));
    TRY(get_int(&eo, "subsampling_conv_channels", 256, 1, 1 << 16, &c->sub_channels, e));
    TRY(get_int(&eo, "subsampling_conv_kernel_size", 3, 1, 31, &ksub, e));
    TRY(get_int(&eo, "subsampling_conv_stride", 2, 1, 8, &stride, e));
    TRY(get_int(&eo, "num_mel_bins", 80, 1, 4096, &c->n_mels, e));
    TRY(get_bool(&eo, "scale_input", true, &c->xscaling, e));
    if (ksub != 3 || stride != 2)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: subsampling_conv_kernel_size %d / subsampling_conv_stride %d: vkasr implements the "
                       "dw_striding subsampling with 3x3 kernels and stride 2 only",
                       file, ksub, stride);
    /* HF Parakeet has no local attention: full context */
    c->att_left = -1;
    c->att_right = -1;
    if (is_streaming(root))
        TRY(streaming_menu(&eo, c, e));

    struct jobj to = {file, "", root};
    int vocab1 = 0;
    if (c->head == VKASR_HEAD_CTC) {
        TRY(get_int(&to, "vocab_size", 1025, 2, 1 << 22, &vocab1, e));
        int pad;
        /* the CTC blank is pad_token_id and must be the last class (vkasr assumes blank = V) */
        TRY(get_int(&to, "pad_token_id", vocab1 - 1, 0, 1 << 22, &pad, e));
        if (pad != vocab1 - 1)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: pad_token_id %d (the CTC blank) must be the last class, vocab_size-1 = %d", file, pad,
                           vocab1 - 1);
        c->pred_hidden = c->pred_layers = c->n_durations = c->max_symbols = 0;
    } else {
        static const char *const relu[] = {"relu", NULL};
        TRY(get_int(&to, "vocab_size", 8193, 2, 1 << 22, &vocab1, e));
        int blank;
        TRY(get_int(&to, "blank_token_id", vocab1 - 1, 0, 1 << 22, &blank, e));
        if (blank != vocab1 - 1)
            return err_set(e, VKASR_ERR_MODEL, "%s: blank_token_id %d must be the last class, vocab_size-1 = %d", file,
                           blank, vocab1 - 1);
        TRY(get_int(&to, "decoder_hidden_size", 640, 1, 1 << 16, &c->pred_hidden, e));
        TRY(get_int(&to, "num_decoder_layers", 2, 1, 64, &c->pred_layers, e));
        TRY(check_str(&to, "hidden_act", relu, e));
        TRY(get_int(&to, "max_symbols_per_step", 10, 1, 1000, &c->max_symbols, e));
        c->n_durations = 0;
        if (is_prompt(root)) {
            int joint_hidden, def_slot;
            TRY(get_int(&to, "joint_hidden_size", c->pred_hidden, 1, 1 << 16, &joint_hidden, e));
            if (joint_hidden != c->pred_hidden)
                return err_set(e, VKASR_ERR_MODEL, "%s: joint_hidden_size %d differs from decoder_hidden_size %d", file,
                               joint_hidden, c->pred_hidden);
            TRY(get_int(&to, "num_prompts", 128, 1, 4096, &c->n_prompts, e));
            TRY(get_int(&to, "prompt_intermediate_size", 2048, 1, 1 << 20, &c->prompt_hidden, e));
            TRY(get_int(&to, "default_prompt_id", 0, 0, c->n_prompts - 1, &def_slot, e));
        }
        if (c->head == VKASR_HEAD_TDT) {
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "durations");
            if (!d) {
                c->n_durations = 5;
                for (int i = 0; i < 5; i++)
                    c->durations[i] = i;
            } else {
                if (!cJSON_IsArray(d))
                    return err_set(e, VKASR_ERR_MODEL, "%s: field 'durations' must be an array, got %s", file,
                                   jtype(d));
                int n = cJSON_GetArraySize(d);
                if (n < 1 || n > 16)
                    return err_set(e, VKASR_ERR_MODEL, "%s: field 'durations' has %d entries (1 to 16 supported)", file,
                                   n);
                const cJSON *it;
                cJSON_ArrayForEach(it, d) {
                    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
                        it->valuedouble > 1024)
                        return err_set(e, VKASR_ERR_MODEL,
                                       "%s: field 'durations' entry %d must be an integer in [0, 1024]", file,
                                       c->n_durations);
                    c->durations[c->n_durations++] = (int)it->valuedouble;
                }
            }
        }
    }
    c->vocab_size = vocab1 - 1;
    return VKASR_OK;
}

static vkasr_status read_feature_extractor(const char *file, const cJSON *root, struct model_config *c, struct err *e) {
    if (!cJSON_IsObject(root))
        return err_set(e, VKASR_ERR_MODEL, "%s: not a JSON object", file);
    struct jobj o = {file, "", root};
    const cJSON *fe = cJSON_GetObjectItemCaseSensitive(root, "feature_extractor");
    if (fe) {
        if (!cJSON_IsObject(fe))
            return err_set(e, VKASR_ERR_MODEL, "%s: field 'feature_extractor' must be an object, got %s", file,
                           jtype(fe));
        o.obj = fe;
        o.prefix = "feature_extractor.";
    }
    int mels = 0;
    TRY(get_int(&o, "feature_size", 80, 1, 4096, &mels, e));
    if (mels != c->n_mels)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: field '%sfeature_size' = %d differs from config.json "
                       "encoder_config.num_mel_bins = %d",
                       file, o.prefix, mels, c->n_mels);
    TRY(get_int(&o, "sampling_rate", 16000, 1, 1000000, &c->sample_rate, e));
    TRY(get_int(&o, "hop_length", 160, 1, 1 << 16, &c->hop_length, e));
    TRY(get_int(&o, "n_fft", 512, 1, 1 << 16, &c->n_fft, e));
    TRY(get_int(&o, "win_length", 400, 1, 1 << 16, &c->win_length, e));
    const cJSON *pe = jget(&o, "preemphasis");
    if (!pe)
        c->preemph = 0.97f;
    else if (cJSON_IsNull(pe)) /* NeMo preemph: null = no pre-emphasis */
        c->preemph = 0.0f;
    else if (cJSON_IsNumber(pe))
        c->preemph = (float)pe->valuedouble;
    else
        return err_set(e, VKASR_ERR_MODEL, "%s: field '%spreemphasis' must be a number or null, got %s", file, o.prefix,
                       jtype(pe));
    return VKASR_OK;
}

/* Parses JSON text (name for messages) and hands the tree to read(). */
static vkasr_status parse_json(const char *name, const char *text, size_t len, struct model_config *cfg,
                               vkasr_status (*read)(const char *, const cJSON *, struct model_config *, struct err *),
                               struct err *e) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root)
        return err_set(e, VKASR_ERR_MODEL, "%s: not valid JSON (error near byte %zu)", name,
                       end ? (size_t)(end - text) : (size_t)0);
    vkasr_status st = read(name, root, cfg, e);
    cJSON_Delete(root);
    return st;
}

static vkasr_status parse_file(const char *path, struct model_config *cfg,
                               vkasr_status (*read)(const char *, const cJSON *, struct model_config *, struct err *),
                               struct err *e) {
    char *txt = NULL;
    size_t len = 0;
    TRY(read_small_file(path, 1, &txt, &len, e));
    vkasr_status st = parse_json(path, txt, len, cfg, read, e);
    free(txt);
    return st;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 || errno != ENOENT;
}

static vkasr_status frontend_check(const struct model_config *c, const char *src, struct err *e) {
    /* Front end (spec §1.1): every Parakeet model takes 16 kHz audio, a 400-sample (25 ms) window in a
     * 512-point FFT and a 160-sample (10 ms) hop. Other sizes pass only within bounds that keep the STFT
     * meaningful (and the kernels within their limits): an even n_fft of 64..4096 (the STFT op), a window
     * of at least 5 ms that fits in n_fft, and a hop of 2.5 ms up to the window (no skipped samples). */
    if (c->sample_rate != VKASR_SAMPLE_RATE)
        return err_set(e, VKASR_ERR_MODEL, "%s: sampling_rate %d Hz: Parakeet models take %d Hz", src, c->sample_rate,
                       VKASR_SAMPLE_RATE);
    if (c->n_fft < 64 || c->n_fft > 4096 || c->n_fft % 2 != 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: n_fft %d: must be even, 64..4096 (Parakeet: 512)", src, c->n_fft);
    if (c->win_length < c->sample_rate / 200 || c->win_length > c->n_fft)
        return err_set(e, VKASR_ERR_MODEL, "%s: win_length %d: must be %d (5 ms) .. n_fft = %d (Parakeet: 400)", src,
                       c->win_length, c->sample_rate / 200, c->n_fft);
    if (c->hop_length < c->sample_rate / 400 || c->hop_length > c->win_length)
        return err_set(e, VKASR_ERR_MODEL, "%s: hop_length %d: must be %d (2.5 ms) .. win_length = %d (Parakeet: 160)",
                       src, c->hop_length, c->sample_rate / 400, c->win_length);
    return VKASR_OK;
}

/* The checks after both files are read: the front end (named by the file that holds its sizes), then
 * the whole configuration (named by config.json). */
static vkasr_status final_checks(const struct model_config *cfg, const char *cfg_name, const char *fe_name,
                                 struct err *e) {
    TRY(frontend_check(cfg, fe_name, e));
    return config_check(cfg, cfg_name, e);
}

vkasr_status hf_config_parse(const char *cfg_name, const char *cfg_text, size_t cfg_len, const char *fe_name,
                             const char *fe_text, size_t fe_len, struct model_config *cfg, struct err *e) {
    memset(cfg, 0, sizeof *cfg);
    TRY(parse_json(cfg_name, cfg_text, cfg_len, cfg, read_config_json, e));
    TRY(parse_json(fe_name, fe_text, fe_len, cfg, read_feature_extractor, e));
    return final_checks(cfg, cfg_name, fe_name, e);
}

/* The language map of a prompt model: processor_config.json's prompt_dictionary (an object of names
 * to slots, written by transformers' Nemotron3_5AsrProcessor) and its num_prompts, which must agree. */
vkasr_status hf_langs_load(const char *dir, const struct model_config *c, struct model_langs *langs, struct err *e) {
    if (c->n_prompts == 0)
        return VKASR_OK;
    char *path = path_join(dir, "processor_config.json"), *txt = NULL;
    size_t len = 0;
    if (!path)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    vkasr_status st = exists(path) ? read_small_file(path, 1, &txt, &len, e)
                                   : err_set(e, VKASR_ERR_MODEL,
                                             "%s: missing: a language-prompt model (num_prompts = %d) takes its map of "
                                             "languages ('prompt_dictionary') from it",
                                             path, c->n_prompts);
    cJSON *root = st == VKASR_OK ? cJSON_ParseWithLength(txt, len) : NULL;
    if (st == VKASR_OK && !cJSON_IsObject(root))
        st = err_set(e, VKASR_ERR_MODEL, "%s: not a JSON object", path);
    const cJSON *d = st == VKASR_OK ? cJSON_GetObjectItemCaseSensitive(root, "prompt_dictionary") : NULL;
    if (st == VKASR_OK && d && !cJSON_IsObject(d))
        st = err_set(e, VKASR_ERR_MODEL, "%s: field 'prompt_dictionary' must be an object, got %s", path, jtype(d));
    int np = c->n_prompts;
    if (st == VKASR_OK)
        st = get_int(&(struct jobj){path, "", root}, "num_prompts", c->n_prompts, 1, 4096, &np, e);
    if (st == VKASR_OK && np != c->n_prompts)
        st = err_set(e, VKASR_ERR_MODEL, "%s: field 'num_prompts' = %d differs from config.json num_prompts = %d", path,
                     np, c->n_prompts);
    const cJSON *it;
    if (st == VKASR_OK && d)
        cJSON_ArrayForEach(it, d) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble)) {
                st = err_set(e, VKASR_ERR_MODEL, "%s: field 'prompt_dictionary.%.64s' must be an integer slot", path,
                             it->string);
                break;
            }
            if ((st = model_langs_add(langs, it->string, (long long)it->valuedouble, c->n_prompts, path,
                                      "prompt_dictionary", e)) != VKASR_OK)
                break;
        }
    if (st == VKASR_OK)
        st = model_langs_check(langs, c, path, "prompt_dictionary", e);
    cJSON_Delete(root);
    free(txt);
    free(path);
    return st;
}

vkasr_status hf_config_load(const char *dir, struct model_config *cfg, struct err *e) {
    memset(cfg, 0, sizeof *cfg);
    char *cpath = path_join(dir, "config.json");
    char *ppath = path_join(dir, "preprocessor_config.json");
    char *qpath = path_join(dir, "processor_config.json");
    vkasr_status st = VKASR_OK;
    if (!cpath || !ppath || !qpath) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    st = parse_file(cpath, cfg, read_config_json, e);
    if (st != VKASR_OK)
        goto done;
    /* transformers writes preprocessor_config.json (older) or processor_config.json (feature extractor
     * nested under "feature_extractor"); prefer the former when both exist, like AutoFeatureExtractor */
    const char *fe = exists(ppath) ? ppath : exists(qpath) ? qpath : NULL;
    if (!fe) {
        st = err_set(e, VKASR_ERR_MODEL, "%s: no preprocessor_config.json or processor_config.json", dir);
        goto done;
    }
    st = parse_file(fe, cfg, read_feature_extractor, e);
    if (st == VKASR_OK)
        st = final_checks(cfg, cpath, fe, e);
done:
    free(cpath);
    free(ppath);
    free(qpath);
    return st;
}

vkasr_status config_check(const struct model_config *c, const char *src, struct err *e) {
    if (c->head < VKASR_HEAD_TDT || c->head > VKASR_HEAD_CTC)
        return err_set(e, VKASR_ERR_MODEL, "%s: unknown head type %d", src, c->head);
    if (c->d_model < 1 || c->n_layers < 1 || c->n_heads < 1 || c->ff_size < 1 || c->sub_channels < 1 ||
        c->vocab_size < 1 || c->d_model > (1 << 16) || c->n_layers > 1024 || c->ff_size > (1 << 20) ||
        c->sub_channels > (1 << 16) || c->vocab_size > (1 << 22))
        return err_set(e, VKASR_ERR_MODEL, "%s: encoder or vocabulary size out of the supported range", src);
    if (c->d_model % c->n_heads != 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: hidden size %d is not a multiple of the %d attention heads", src,
                       c->d_model, c->n_heads);
    if (c->conv_kernel < 1 || c->conv_kernel > 1023 || c->conv_kernel % 2 == 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: conv kernel size %d must be odd (1..1023)", src, c->conv_kernel);
    if (c->sub_factor != 8)
        return err_set(e, VKASR_ERR_MODEL, "%s: subsampling factor %d: vkasr implements factor 8 only", src,
                       c->sub_factor);
    if (c->n_mels < 8 || c->n_mels > 4096 || (c->n_mels % 8 != 0 && !c->causal_sub))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: %d mel bins: must be a multiple of 8 (the subsampling halves the frequency axis 3 times)",
                       src, c->n_mels);
    if (c->n_ctx > 0 && c->att_left >= 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: a chunked_limited model with a local attention window", src);
    TRY(model_check_ctx(c, src, "att_context_size", e));
    if (c->att_left < -1 || c->att_right < -1 || (c->att_left < 0) != (c->att_right < 0))
        return err_set(e, VKASR_ERR_MODEL, "%s: attention context [%d, %d] is invalid (-1, -1 = full)", src,
                       c->att_left, c->att_right);
    if (c->head != VKASR_HEAD_CTC) {
        if (c->pred_hidden < 1 || c->pred_hidden > (1 << 16) || c->pred_layers < 1 || c->pred_layers > 64 ||
            c->max_symbols < 1)
            return err_set(e, VKASR_ERR_MODEL, "%s: prediction network size out of the supported range", src);
        if ((c->head == VKASR_HEAD_TDT) != (c->n_durations > 0) || c->n_durations > 16)
            return err_set(e, VKASR_ERR_MODEL, "%s: %d durations for a %s model", src, c->n_durations,
                           c->head == VKASR_HEAD_TDT ? "TDT" : "RNN-T");
        for (int i = 0; i < c->n_durations; i++)
            if (c->durations[i] < 0)
                return err_set(e, VKASR_ERR_MODEL, "%s: negative duration %d", src, c->durations[i]);
    }
    if (c->n_prompts < 0 || c->n_prompts > 4096 || (c->n_prompts > 0 && c->head != VKASR_HEAD_RNNT))
        return err_set(e, VKASR_ERR_MODEL, "%s: %d language prompts with a %s head (a prompt needs RNN-T)", src,
                       c->n_prompts, c->head == VKASR_HEAD_TDT ? "TDT" : c->head == VKASR_HEAD_CTC ? "CTC" : "RNN-T");
    TRY(frontend_check(c, src, e));
    if (!(c->preemph >= 0.0f && c->preemph < 1.0f))
        return err_set(e, VKASR_ERR_MODEL, "%s: preemphasis %g is outside [0, 1)", src, (double)c->preemph);
    return VKASR_OK;
}
