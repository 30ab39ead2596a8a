/* gguf.c — vkasr's native model file: GGUF v3 reader (memory mapped, every count, length, type and
 * offset validated before use; keys read through gguf_kv.c, NeMo-Speech.cpp's "asr" layout handed to
 * gguf_nemo_speech.c) and writer (a prepared, canonical model, written to a temporary file and renamed).
 * The key schema is in docs/model-format.md. Tensor data are used in place from the mapping. */
#define _XOPEN_SOURCE 700 /* realpath (XSI) for writing through a symlink */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "gguf_internal.h"
#include "model_file.h"
#include "model_internal.h"
#include "quant.h"

#define GGUF_DEFAULT_ALIGN 32u
#define GGUF_MAX_NAME 64u      /* tensor names (GGUF spec) */
#define GGUF_MAX_KEY 65535u    /* keys (GGUF spec) */
#define GGUF_MAX_ARRAY_DEPTH 4 /* nested arrays are legal; we read none, but skip a few levels */
#define LAYOUT_VERSION 1u

/* ---------------------------------------------------------------------------------------------- */
/* Reader                                                                                         */

static int need(struct rd *r, uint64_t n, const char *what) {
    if (n > r->size - r->pos) {
        err_set(r->e, VKASR_ERR_MODEL, "%s: truncated: %s needs %llu bytes at offset %llu but the file has %llu",
                r->path, what, (unsigned long long)n, (unsigned long long)r->pos, (unsigned long long)r->size);
        return 0;
    }
    return 1;
}

static int rd_u32(struct rd *r, uint32_t *v, const char *what) {
    if (!need(r, 4, what))
        return 0;
    *v = (uint32_t)gguf_le(r->p + r->pos, 4);
    r->pos += 4;
    return 1;
}

static int rd_u64(struct rd *r, uint64_t *v, const char *what) {
    if (!need(r, 8, what))
        return 0;
    *v = gguf_le(r->p + r->pos, 8);
    r->pos += 8;
    return 1;
}

static int rd_str(struct rd *r, const char **s, uint64_t *len, const char *what) {
    if (!rd_u64(r, len, what))
        return 0;
    if (*len > r->size - r->pos) {
        err_set(r->e, VKASR_ERR_MODEL,
                "%s: truncated or corrupt: %s: string length %llu at offset %llu exceeds the file (%llu bytes)",
                r->path, what, (unsigned long long)*len, (unsigned long long)(r->pos - 8), (unsigned long long)r->size);
        return 0;
    }
    *s = (const char *)r->p + r->pos;
    r->pos += *len;
    return 1;
}

static uint64_t scalar_size(uint32_t t) {
    switch (t) {
    case GT_U8:
    case GT_I8:
    case GT_BOOL: return 1;
    case GT_U16:
    case GT_I16: return 2;
    case GT_U32:
    case GT_I32:
    case GT_F32: return 4;
    case GT_U64:
    case GT_I64:
    case GT_F64: return 8;
    default: return 0;
    }
}

/* Skips (and validates) one value of type t; kv names the key for messages. */
static int skip_value(struct rd *r, uint32_t t, const char *kv, int depth) {
    if (t >= GT_COUNT) {
        err_set(r->e, VKASR_ERR_MODEL, "%s: key '%s': unknown value type %u", r->path, kv, t);
        return 0;
    }
    uint64_t sz = scalar_size(t);
    if (sz) {
        if (!need(r, sz, kv))
            return 0;
        if (t == GT_BOOL && r->p[r->pos] > 1) {
            err_set(r->e, VKASR_ERR_MODEL, "%s: key '%s': bool value %u is neither 0 nor 1", r->path, kv, r->p[r->pos]);
            return 0;
        }
        r->pos += sz;
        return 1;
    }
    if (t == GT_STR) {
        const char *s;
        uint64_t len;
        return rd_str(r, &s, &len, kv);
    }
    /* array */
    uint32_t at;
    uint64_t n;
    if (!rd_u32(r, &at, kv) || !rd_u64(r, &n, kv))
        return 0;
    if (at >= GT_COUNT) {
        err_set(r->e, VKASR_ERR_MODEL, "%s: key '%s': array of unknown value type %u", r->path, kv, at);
        return 0;
    }
    if (at == GT_ARR && depth >= GGUF_MAX_ARRAY_DEPTH) {
        err_set(r->e, VKASR_ERR_MODEL, "%s: key '%s': arrays nested too deeply", r->path, kv);
        return 0;
    }
    /* every element takes at least this many bytes: reject hostile counts before looping */
    uint64_t min = scalar_size(at) ? scalar_size(at) : at == GT_STR ? 8 : 12;
    if (n > (r->size - r->pos) / min) {
        err_set(r->e, VKASR_ERR_MODEL, "%s: key '%s': array of %llu %s values exceeds the file (%llu bytes)", r->path,
                kv, (unsigned long long)n, gguf_type_name(at), (unsigned long long)r->size);
        return 0;
    }
    if (scalar_size(at) && at != GT_BOOL) {
        r->pos += n * min;
        return 1;
    }
    for (uint64_t i = 0; i < n; i++)
        if (!skip_value(r, at, kv, depth + 1))
            return 0;
    return 1;
}

static int kv_cmp(const void *a, const void *b) {
    const struct gkv *x = *(const struct gkv *const *)a, *y = *(const struct gkv *const *)b;
    if (x->klen != y->klen)
        return x->klen < y->klen ? -1 : 1;
    return memcmp(x->key, y->key, (size_t)x->klen);
}

/* Duplicate keys would make lookups ambiguous; sorting finds them in n log n even for hostile counts. */
static vkasr_status check_unique_keys(const struct gguf *g, struct err *e) {
    const struct gkv **v = malloc((size_t)(g->nkv ? g->nkv : 1) * sizeof *v);
    if (!v)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    for (uint64_t i = 0; i < g->nkv; i++)
        v[i] = &g->kv[i];
    qsort(v, (size_t)g->nkv, sizeof *v, kv_cmp);
    vkasr_status st = VKASR_OK;
    for (uint64_t i = 1; i < g->nkv; i++)
        if (kv_cmp(&v[i - 1], &v[i]) == 0) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: metadata key '%.*s' appears twice", g->r.path,
                         (int)(v[i]->klen > 100 ? 100 : v[i]->klen), v[i]->key);
            break;
        }
    free(v);
    return st;
}

static int str_is(const char *s, uint64_t len, const char *want) {
    return len == strlen(want) && memcmp(s, want, len) == 0;
}

static vkasr_status kv_array(const struct gguf *g, const char *key, uint32_t atype, const struct gkv **out,
                             struct err *e) {
    const struct gkv *kv = gguf_kv_find(g, key);
    if (!kv)
        return err_set(e, VKASR_ERR_MODEL, "%s: missing key '%s'", g->r.path, key);
    if (kv->type != GT_ARR || kv->atype != atype)
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' must be an array of %s", g->r.path, key,
                       gguf_type_name(atype));
    *out = kv;
    return VKASR_OK;
}

static vkasr_status read_config(const struct gguf *g, struct model_config *c, struct err *e) {
    const char *path = g->r.path, *s;
    uint64_t len;
    TRY(gguf_get_str(g, "general.architecture", 1, &s, &len, e));
    if (!str_is(s, len, "parakeet"))
        return err_set(e, VKASR_ERR_MODEL, "%s: general.architecture is \"%.*s\", not \"parakeet\"", path,
                       (int)(len > 64 ? 64 : len), s);
    int lv;
    TRY(gguf_get_int(g, "vkasr.layout_version", 1, 0, 0, INT32_MAX, &lv, e));
    if (lv != (int)LAYOUT_VERSION)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: vkasr.layout_version %d is not supported by this build (it reads version %u); convert "
                       "the model again with this version of vkasr",
                       path, lv, LAYOUT_VERSION);
    TRY(gguf_get_str(g, "parakeet.head", 1, &s, &len, e));
    if (str_is(s, len, "tdt"))
        c->head = VKASR_HEAD_TDT;
    else if (str_is(s, len, "rnnt"))
        c->head = VKASR_HEAD_RNNT;
    else if (str_is(s, len, "ctc"))
        c->head = VKASR_HEAD_CTC;
    else
        return err_set(e, VKASR_ERR_MODEL, "%s: parakeet.head \"%.*s\" is not tdt, rnnt or ctc", path,
                       (int)(len > 64 ? 64 : len), s);
    const int BIG = 1 << 22;
    TRY(gguf_get_int(g, "parakeet.d_model", 1, 0, 1, BIG, &c->d_model, e));
    TRY(gguf_get_int(g, "parakeet.n_layers", 1, 0, 1, BIG, &c->n_layers, e));
    TRY(gguf_get_int(g, "parakeet.n_heads", 1, 0, 1, BIG, &c->n_heads, e));
    TRY(gguf_get_int(g, "parakeet.ff_size", 1, 0, 1, BIG, &c->ff_size, e));
    TRY(gguf_get_int(g, "parakeet.conv_kernel", 1, 0, 1, BIG, &c->conv_kernel, e));
    TRY(gguf_get_int(g, "parakeet.n_mels", 1, 0, 1, BIG, &c->n_mels, e));
    TRY(gguf_get_int(g, "parakeet.subsampling_channels", 1, 0, 1, BIG, &c->sub_channels, e));
    TRY(gguf_get_int(g, "parakeet.subsampling_factor", 1, 0, 1, BIG, &c->sub_factor, e));
    TRY(gguf_get_bool(g, "parakeet.xscaling", 1, false, &c->xscaling, e));
    TRY(gguf_get_bool(g, "parakeet.attention_bias", 1, false, &c->attention_bias, e));
    TRY(gguf_get_bool(g, "parakeet.conv_bias", 1, false, &c->conv_bias, e));
    TRY(gguf_get_int(g, "parakeet.att_context_left", 0, -1, -1, BIG, &c->att_left, e));
    TRY(gguf_get_int(g, "parakeet.att_context_right", 0, -1, -1, BIG, &c->att_right, e));
    /* cache-aware streaming models (absent: an offline model) */
    TRY(gguf_get_bool(g, "parakeet.causal_downsampling", 0, false, &c->causal_sub, e));
    TRY(gguf_get_bool(g, "parakeet.conv_causal", 0, false, &c->causal_conv, e));
    TRY(gguf_get_bool(g, "parakeet.conv_layer_norm", 0, false, &c->conv_ln, e));
    TRY(gguf_get_bool(g, "parakeet.no_feature_norm", 0, false, &c->no_feature_norm, e));
    if (gguf_kv_find(g, "parakeet.att_chunked_contexts")) {
        const struct gkv *d;
        TRY(kv_array(g, "parakeet.att_chunked_contexts", GT_I32, &d, e));
        if (d->alen < 2 || d->alen % 2 != 0 || d->alen > 2 * MODEL_MAX_CTX)
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: parakeet.att_chunked_contexts has %llu entries (1 to %d [left, right] pairs)", path,
                           (unsigned long long)d->alen, MODEL_MAX_CTX);
        c->n_ctx = (int)(d->alen / 2);
        for (int i = 0; i < 2 * c->n_ctx; i++)
            c->ctx[i / 2][i % 2] = (int32_t)gguf_le(g->r.p + d->vpos + 4 * (uint64_t)i, 4);
    }
    TRY(gguf_get_int(g, "parakeet.vocab_size", 1, 0, 1, BIG, &c->vocab_size, e));
    if (c->head != VKASR_HEAD_CTC) {
        TRY(gguf_get_int(g, "parakeet.pred_hidden", 1, 0, 1, BIG, &c->pred_hidden, e));
        TRY(gguf_get_int(g, "parakeet.pred_layers", 1, 0, 1, BIG, &c->pred_layers, e));
        TRY(gguf_get_int(g, "parakeet.max_symbols_per_step", 1, 0, 1, BIG, &c->max_symbols, e));
    }
    if (c->head == VKASR_HEAD_TDT) {
        const struct gkv *d = NULL;
        TRY(kv_array(g, "parakeet.durations", GT_I32, &d, e));
        if (d->alen < 1 || d->alen > 16)
            return err_set(e, VKASR_ERR_MODEL, "%s: parakeet.durations has %llu entries (1 to 16 supported)", path,
                           (unsigned long long)d->alen);
        c->n_durations = (int)d->alen;
        for (int i = 0; i < c->n_durations; i++)
            c->durations[i] = (int32_t)gguf_le(g->r.p + d->vpos + 4 * (uint64_t)i, 4);
    }
    TRY(gguf_get_int(g, "parakeet.sample_rate", 1, 0, 1, BIG, &c->sample_rate, e));
    TRY(gguf_get_int(g, "parakeet.n_fft", 1, 0, 1, BIG, &c->n_fft, e));
    TRY(gguf_get_int(g, "parakeet.win_length", 1, 0, 1, BIG, &c->win_length, e));
    TRY(gguf_get_int(g, "parakeet.hop_length", 1, 0, 1, BIG, &c->hop_length, e));
    TRY(gguf_get_f32(g, "parakeet.preemphasis", 1, 0, &c->preemph, e));
    return config_check(c, path, e);
}

/* The language prompt (Nemotron 3.5): parakeet.num_prompts, parakeet.prompt_hidden and the language
 * map parakeet.prompt_dictionary, an array of "name:slot" strings (NeMo-Speech.cpp's spelling). */
static vkasr_status read_langs(const struct gguf *g, struct model_config *c, struct model_langs *l, struct err *e) {
    const char *path = g->r.path;
    TRY(gguf_get_int(g, "parakeet.num_prompts", 0, 0, 0, 4096, &c->n_prompts, e));
    if (c->n_prompts == 0) {
        if (gguf_kv_find(g, "parakeet.prompt_dictionary") || gguf_kv_find(g, "parakeet.prompt_hidden"))
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: parakeet.prompt_dictionary / prompt_hidden without parakeet.num_prompts", path);
        return VKASR_OK;
    }
    if (c->head != VKASR_HEAD_RNNT)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: parakeet.num_prompts = %d with a %s head (a language prompt needs RNN-T)", path,
                       c->n_prompts, c->head == VKASR_HEAD_TDT ? "TDT" : "CTC");
    TRY(gguf_get_int(g, "parakeet.prompt_hidden", 1, 0, 1, 1 << 20, &c->prompt_hidden, e));
    if (!gguf_kv_find(g, "parakeet.prompt_dictionary"))
        return model_langs_check(l, c, path, "parakeet.prompt_dictionary", e);
    const struct gkv *d = NULL;
    TRY(kv_array(g, "parakeet.prompt_dictionary", GT_STR, &d, e));
    uint64_t pos = d->vpos; /* strings were bounds-checked when the key was skipped */
    for (uint64_t i = 0; i < d->alen; i++) {
        uint64_t len = gguf_le(g->r.p + pos, 8);
        const char *p = (const char *)g->r.p + pos + 8;
        pos += 8 + len;
        char entry[MODEL_LANG_MAX + 16], *end = NULL;
        const char *colon = len < sizeof entry ? memchr(p, ':', len) : NULL;
        if (colon) {
            memcpy(entry, p, len);
            entry[len] = '\0';
            entry[colon - p] = '\0';
        }
        long long slot = colon ? strtoll(entry + (colon - p) + 1, &end, 10) : -1;
        if (!colon || !end || end == entry + (colon - p) + 1 || *end)
            return err_set(e, VKASR_ERR_MODEL, "%s: parakeet.prompt_dictionary entry %llu is not \"name:slot\"", path,
                           (unsigned long long)i);
        TRY(model_langs_add(l, entry, slot, c->n_prompts, path, "parakeet.prompt_dictionary", e));
    }
    return model_langs_check(l, c, path, "parakeet.prompt_dictionary", e);
}

static vkasr_status read_tokenizer(const struct gguf *g, int32_t n, struct tokenizer *t, struct err *e) {
    const char *path = g->r.path, *s;
    uint64_t len;
    TRY(gguf_get_str(g, "tokenizer.ggml.model", 1, &s, &len, e));
    if (!str_is(s, len, "llama"))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tokenizer.ggml.model is \"%.*s\"; vkasr reads SentencePiece vocabularies (\"llama\")", path,
                       (int)(len > 64 ? 64 : len), s);
    const struct gkv *tok = NULL, *typ = NULL;
    TRY(kv_array(g, "tokenizer.ggml.tokens", GT_STR, &tok, e));
    TRY(kv_array(g, "tokenizer.ggml.token_type", GT_I32, &typ, e));
    if (tok->alen != (uint64_t)n || typ->alen != (uint64_t)n)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tokenizer.ggml.tokens (%llu) and tokenizer.ggml.token_type (%llu) must have "
                       "parakeet.vocab_size = %d entries",
                       path, (unsigned long long)tok->alen, (unsigned long long)typ->alen, (int)n);
    t->n = n;
    t->piece = calloc((size_t)n, sizeof *t->piece);
    t->type = calloc((size_t)n, 1);
    if (!t->piece || !t->type)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    uint64_t pos = tok->vpos; /* strings were bounds-checked when the key was skipped */
    for (int32_t i = 0; i < n; i++) {
        uint64_t l = gguf_le(g->r.p + pos, 8);
        const char *p = (const char *)g->r.p + pos + 8;
        pos += 8 + l;
        if (memchr(p, 0, l) || !utf8_valid(p, l))
            return err_set(e, VKASR_ERR_MODEL, "%s: tokenizer.ggml.tokens: piece id %d is not valid UTF-8", path,
                           (int)i);
        t->piece[i] = malloc(l + 1);
        if (!t->piece[i])
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        memcpy(t->piece[i], p, l);
        t->piece[i][l] = '\0';
        int32_t ty = (int32_t)gguf_le(g->r.p + typ->vpos + 4 * (uint64_t)i, 4);
        if (ty < TOK_NORMAL || ty > TOK_BYTE)
            return err_set(e, VKASR_ERR_MODEL, "%s: tokenizer.ggml.token_type: piece id %d has unknown type %d", path,
                           (int)i, (int)ty);
        t->type[i] = (uint8_t)ty;
    }
    return tok_check(t, path, e);
}

struct gspan {
    uint64_t begin, end;
    int idx;
};

static int gspan_cmp(const void *a, const void *b) {
    const struct gspan *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Tensor infos -> tensors of mf (data resolved after the infos end). */
static vkasr_status read_tensors(struct model_file *mf, struct gguf *g, int map, uint64_t nt, uint32_t align,
                                 struct err *e) {
    struct rd *r = &g->r;
    struct gspan *sp = calloc(nt ? nt : 1, sizeof *sp);
    vkasr_status st = VKASR_OK;
    if (!sp) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    int first = mf->ntensors;
    for (uint64_t i = 0; i < nt; i++) {
        const char *name;
        uint64_t nlen;
        uint32_t nd, type;
        uint64_t dims[4], off;
        if (!rd_str(r, &name, &nlen, "tensor name")) {
            st = e->code;
            goto done;
        }
        char nm[GGUF_MAX_NAME + 1];
        if (nlen > GGUF_MAX_NAME || nlen == 0 || memchr(name, 0, nlen)) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor %llu: name of %llu bytes (1 to %u allowed)", r->path,
                         (unsigned long long)i, (unsigned long long)nlen, GGUF_MAX_NAME);
            goto done;
        }
        memcpy(nm, name, nlen);
        nm[nlen] = '\0';
        if (!rd_u32(r, &nd, nm)) {
            st = e->code;
            goto done;
        }
        if (nd < 1 || nd > 4) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': %u dimensions (1 to 4 supported)", r->path, nm, nd);
            goto done;
        }
        uint64_t numel = 1;
        for (uint32_t k = 0; k < nd; k++) {
            if (!rd_u64(r, &dims[k], nm)) {
                st = e->code;
                goto done;
            }
            if (dims[k] == 0 || dims[k] > (uint64_t)INT64_MAX || numel > UINT64_MAX / dims[k]) {
                st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': dimension %u = %llu is zero or overflows the size",
                             r->path, nm, k, (unsigned long long)dims[k]);
                goto done;
            }
            numel *= dims[k];
        }
        if (!rd_u32(r, &type, nm) || !rd_u64(r, &off, nm)) {
            st = e->code;
            goto done;
        }
        static const struct qtraits bf16 = {"bf16", 1, 2}; /* other engines' files (gguf_nemo_speech.c) */
        const struct qtraits *qt = type == GGML_TYPE_BF16 ? &bf16 : quant_traits(type);
        if (!qt) {
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s': type %u is not supported (F32 = 0, F16 = 1, Q8_0 = 8, Q4_K = 12, "
                         "Q5_K = 13, Q6_K = 14, BF16 = 30)",
                         r->path, nm, type);
            goto done;
        }
        /* block types store whole blocks along the row (GGUF's ne[0], the innermost dimension) */
        if (dims[0] % (uint64_t)qt->block != 0) {
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s': type %s needs a row length that is a multiple of %d, but its innermost "
                         "dimension is %llu",
                         r->path, nm, qt->name, qt->block, (unsigned long long)dims[0]);
            goto done;
        }
        const uint64_t nblocks = numel / (uint64_t)qt->block;
        if (nblocks > UINT64_MAX / (uint64_t)qt->bytes) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': byte size overflows", r->path, nm);
            goto done;
        }
        const uint64_t nbytes = nblocks * (uint64_t)qt->bytes;
        if (off % align != 0) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': offset %llu is not a multiple of the alignment %u",
                         r->path, nm, (unsigned long long)off, align);
            goto done;
        }
        int64_t ne[4];
        for (uint32_t k = 0; k < nd; k++)
            ne[k] = (int64_t)dims[nd - 1 - k]; /* GGUF ne[0] is the innermost dimension */
        sp[i].begin = off;
        sp[i].end = nbytes; /* size for now: the data section is not located yet */
        sp[i].idx = (int)i;
        enum mt_dtype mt = type == GGML_TYPE_BF16 ? MT_BF16 : (enum mt_dtype)quant_mt_of_type(type);
        st = model_add_tensor(mf, nm, nlen, mt, (int)nd, ne, NULL, nbytes, map, e);
        if (st != VKASR_OK)
            goto done;
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t data = r->pos + (align - r->pos % align) % align;
    if (data > r->size) {
        st = err_set(e, VKASR_ERR_MODEL, "%s: truncated before the tensor data section", r->path);
        goto done;
    }
    uint64_t dsize = r->size - data;
    for (uint64_t i = 0; i < nt; i++) {
        struct model_tensor *t = &mf->tensors[first + (int)i];
        uint64_t n = sp[i].end;
        if (sp[i].begin > dsize || n > dsize - sp[i].begin) {
            st =
                err_set(e, VKASR_ERR_MODEL,
                        "%s: tensor '%s': data [%llu, +%llu) lies beyond the file's data section (%llu bytes)", r->path,
                        t->name, (unsigned long long)sp[i].begin, (unsigned long long)n, (unsigned long long)dsize);
            goto done;
        }
        sp[i].end = sp[i].begin + n;
        t->data = r->p + data + sp[i].begin;
    }
    st = model_index_names(mf, r->path, e);
    if (st != VKASR_OK)
        goto done;
    qsort(sp, nt, sizeof *sp, gspan_cmp);
    for (uint64_t i = 1; i < nt; i++)
        if (sp[i].begin < sp[i - 1].end) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensors '%s' and '%s' overlap", r->path,
                         mf->tensors[first + sp[i - 1].idx].name, mf->tensors[first + sp[i].idx].name);
            goto done;
        }
done:
    free(sp);
    return st;
}

vkasr_status gguf_load(struct model_file *mf, const char *path, int head, struct err *e) {
    int map;
    TRY(model_map_file(mf, path, &map, e));
    return gguf_parse(mf, map, head, e);
}

vkasr_status gguf_parse(struct model_file *mf, int map, int head, struct err *e) {
    const char *path = mf->map_paths[map];
    struct gguf g = {{mf->maps[map], mf->map_sizes[map], 0, mf->map_paths[map], e}, NULL, 0};
    struct rd *r = &g.r;
    uint32_t version;
    uint64_t nt, nkv;
    if (r->size < 4 || memcmp(r->p, "GGUF", 4) != 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: not a GGUF file (bad magic)", path);
    r->pos = 4;
    if (!rd_u32(r, &version, "header"))
        return e->code;
    if (version != 3 && version != 2)
        return err_set(e, VKASR_ERR_MODEL, "%s: GGUF version %u is not supported (vkasr reads version 3)", path,
                       version);
    if (!rd_u64(r, &nt, "header") || !rd_u64(r, &nkv, "header"))
        return e->code;
    /* each key-value pair takes >= 13 bytes and each tensor info >= 32: reject counts the file cannot hold
     * before allocating anything for them */
    if (nkv > (1u << 20))
        return err_set(e, VKASR_ERR_MODEL, "%s: %llu metadata keys (at most %u supported)", path,
                       (unsigned long long)nkv, 1u << 20);
    if (nkv > (r->size - r->pos) / 13)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: truncated or corrupt: metadata count %llu cannot fit in a file of %llu bytes", path,
                       (unsigned long long)nkv, (unsigned long long)r->size);
    if (nt > MODEL_MAX_TENSORS)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor count %llu (at most %d supported)", path, (unsigned long long)nt,
                       MODEL_MAX_TENSORS);
    if (nt > (r->size - r->pos) / 32)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: truncated or corrupt: tensor count %llu cannot fit in a file of %llu bytes", path,
                       (unsigned long long)nt, (unsigned long long)r->size);
    g.kv = calloc(nkv ? nkv : 1, sizeof *g.kv);
    if (!g.kv)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    vkasr_status st = VKASR_OK;
    for (uint64_t i = 0; i < nkv; i++) {
        struct gkv *kv = &g.kv[i];
        char key[128];
        if (!rd_str(r, &kv->key, &kv->klen, "metadata key")) {
            st = e->code;
            goto done;
        }
        snprintf(key, sizeof key, "%.*s", (int)(kv->klen > 100 ? 100 : kv->klen), kv->key);
        if (kv->klen == 0 || kv->klen > GGUF_MAX_KEY) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: metadata key %llu has length %llu (1 to %u allowed)", path,
                         (unsigned long long)i, (unsigned long long)kv->klen, GGUF_MAX_KEY);
            goto done;
        }
        if (!rd_u32(r, &kv->type, key)) {
            st = e->code;
            goto done;
        }
        uint64_t start = r->pos;
        if (!skip_value(r, kv->type, key, 0)) {
            st = e->code;
            goto done;
        }
        kv->vpos = start;
        if (kv->type == GT_ARR) {
            kv->atype = (uint32_t)gguf_le(r->p + start, 4);
            kv->alen = gguf_le(r->p + start + 4, 8);
            kv->vpos = start + 12;
        }
    }
    g.nkv = nkv;
    st = check_unique_keys(&g, e);
    if (st != VKASR_OK)
        goto done;
    uint32_t align = GGUF_DEFAULT_ALIGN;
    const struct gkv *ak = gguf_kv_find(&g, "general.alignment");
    if (ak) {
        if (ak->type != GT_U32) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: general.alignment must be a uint32, got %s", path,
                         gguf_type_name(ak->type));
            goto done;
        }
        align = (uint32_t)gguf_le(r->p + ak->vpos, 4);
        if (align == 0 || align % 8 != 0 || align > (1u << 16)) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: general.alignment %u is not a multiple of 8 (up to 65536)", path,
                         align);
            goto done;
        }
    }
    st = read_tensors(mf, &g, map, nt, align, e);
    const char *arch;
    uint64_t alen;
    if (st == VKASR_OK)
        st = gguf_get_str(&g, "general.architecture", 1, &arch, &alen, e);
    if (st == VKASR_OK && alen == 3 && memcmp(arch, "asr", 3) == 0) { /* NeMo-Speech.cpp's layout */
        st = gguf_nemo_speech_read(mf, &g, head, e);
        goto done;
    }
    if (st == VKASR_OK)
        st = read_config(&g, &mf->cfg, e);
    if (st == VKASR_OK)
        st = read_tokenizer(&g, mf->cfg.vocab_size, &mf->tok, e);
    if (st == VKASR_OK)
        st = read_langs(&g, &mf->cfg, &mf->langs, e);
    if (st == VKASR_OK)
        mf->canonical = true;
done:
    free(g.kv);
    return st;
}

/* ---------------------------------------------------------------------------------------------- */
/* Writer                                                                                         */

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

static void wb_put(struct wbuf *b, const void *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void wb_le(struct wbuf *b, uint64_t v, int n) {
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    wb_put(b, t, (size_t)n);
}

static void wb_str(struct wbuf *b, const char *s) {
    size_t n = strlen(s);
    wb_le(b, n, 8);
    wb_put(b, s, n);
}

static void kv_head(struct wbuf *b, const char *key, uint32_t type) {
    wb_str(b, key);
    wb_le(b, type, 4);
}

static void w_u32(struct wbuf *b, const char *key, uint32_t v) {
    kv_head(b, key, GT_U32);
    wb_le(b, v, 4);
}

static void w_i32(struct wbuf *b, const char *key, int32_t v) {
    kv_head(b, key, GT_I32);
    wb_le(b, (uint32_t)v, 4);
}

static void w_bool(struct wbuf *b, const char *key, bool v) {
    kv_head(b, key, GT_BOOL);
    uint8_t c = v ? 1 : 0;
    wb_put(b, &c, 1);
}

static void w_f32(struct wbuf *b, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    kv_head(b, key, GT_F32);
    wb_le(b, u, 4);
}

static void w_str(struct wbuf *b, const char *key, const char *s) {
    kv_head(b, key, GT_STR);
    wb_str(b, s);
}

static const char *head_name(int head) {
    return head == VKASR_HEAD_TDT ? "tdt" : head == VKASR_HEAD_RNNT ? "rnnt" : "ctc";
}

/* general.name: the source's last path component without a .gguf extension. */
static void model_name(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/')
        s--;
    size_t len = n - s;
    if (len > 5 && memcmp(path + n - 5, ".gguf", 5) == 0)
        len -= 5;
    snprintf(out, cap, "%.*s", (int)len, path + s);
}

/* vkasr_weight_type's values are GGML type ids (vkasr.h). */
static uint32_t out_type(const struct model_tensor *t, vkasr_weight_type wt) {
    return quant_tensor_type(t->name, t->ne[t->nd - 1], (uint32_t)wt);
}

static uint64_t tensor_numel(const struct model_tensor *t) {
    uint64_t n = 1;
    for (int k = 0; k < t->nd; k++)
        n *= (uint64_t)t->ne[k];
    return n;
}

/* Bytes of t's data stored as ty (whole rows of the innermost dimension). */
static uint64_t out_bytes(const struct model_tensor *t, uint32_t ty) {
    const int64_t k = t->ne[t->nd - 1];
    return quant_row_bytes(ty, k) * (tensor_numel(t) / (uint64_t)k);
}

/* general.file_type: llama.cpp's file type numbers (informational; the tensor types are what count). */
static uint32_t file_type(vkasr_weight_type wt) {
    switch ((int)wt) {
    case VKASR_WEIGHTS_F16: return 1;
    case VKASR_WEIGHTS_Q8_0: return 7;
    case VKASR_WEIGHTS_Q4_K: return 14; /* MOSTLY_Q4_K_S */
    case VKASR_WEIGHTS_Q5_K: return 16; /* MOSTLY_Q5_K_S */
    case VKASR_WEIGHTS_Q6_K: return 18;
    default: return 0;
    }
}

static vkasr_status build_header(const struct model_file *mf, vkasr_weight_type wt, struct wbuf *b, uint64_t *offsets,
                                 struct err *e) {
    const struct model_config *c = &mf->cfg;
    uint64_t nkv = 0;
    char name[256];
    model_name(mf->path ? mf->path : "model", name, sizeof name);

    wb_put(b, "GGUF", 4);
    wb_le(b, 3, 4);
    wb_le(b, (uint64_t)mf->ntensors, 8);
    size_t nkv_at = b->len;
    wb_le(b, 0, 8); /* patched below */

#define KV(stmt) (stmt, nkv++)
    KV(w_str(b, "general.architecture", "parakeet"));
    KV(w_str(b, "general.name", name));
    KV(w_u32(b, "general.alignment", GGUF_DEFAULT_ALIGN));
    KV(w_u32(b, "general.file_type", file_type(wt)));
    KV(w_u32(b, "vkasr.layout_version", LAYOUT_VERSION));
    KV(w_str(b, "parakeet.head", head_name(c->head)));
    KV(w_u32(b, "parakeet.d_model", (uint32_t)c->d_model));
    KV(w_u32(b, "parakeet.n_layers", (uint32_t)c->n_layers));
    KV(w_u32(b, "parakeet.n_heads", (uint32_t)c->n_heads));
    KV(w_u32(b, "parakeet.ff_size", (uint32_t)c->ff_size));
    KV(w_u32(b, "parakeet.conv_kernel", (uint32_t)c->conv_kernel));
    KV(w_u32(b, "parakeet.n_mels", (uint32_t)c->n_mels));
    KV(w_u32(b, "parakeet.subsampling_channels", (uint32_t)c->sub_channels));
    KV(w_u32(b, "parakeet.subsampling_factor", (uint32_t)c->sub_factor));
    KV(w_bool(b, "parakeet.xscaling", c->xscaling));
    KV(w_bool(b, "parakeet.attention_bias", c->attention_bias));
    KV(w_bool(b, "parakeet.conv_bias", c->conv_bias));
    KV(w_i32(b, "parakeet.att_context_left", c->att_left));
    KV(w_i32(b, "parakeet.att_context_right", c->att_right));
    if (c->causal_sub || c->causal_conv || c->conv_ln || c->no_feature_norm || c->n_ctx > 0) {
        KV(w_bool(b, "parakeet.causal_downsampling", c->causal_sub));
        KV(w_bool(b, "parakeet.conv_causal", c->causal_conv));
        KV(w_bool(b, "parakeet.conv_layer_norm", c->conv_ln));
        KV(w_bool(b, "parakeet.no_feature_norm", c->no_feature_norm));
    }
    if (c->n_ctx > 0) {
        kv_head(b, "parakeet.att_chunked_contexts", GT_ARR);
        wb_le(b, GT_I32, 4);
        wb_le(b, (uint64_t)(2 * c->n_ctx), 8);
        for (int i = 0; i < 2 * c->n_ctx; i++)
            wb_le(b, (uint32_t)c->ctx[i / 2][i % 2], 4);
        nkv++;
    }
    KV(w_u32(b, "parakeet.vocab_size", (uint32_t)c->vocab_size));
    KV(w_u32(b, "parakeet.pred_hidden", (uint32_t)c->pred_hidden));
    KV(w_u32(b, "parakeet.pred_layers", (uint32_t)c->pred_layers));
    kv_head(b, "parakeet.durations", GT_ARR);
    wb_le(b, GT_I32, 4);
    wb_le(b, (uint64_t)c->n_durations, 8);
    for (int i = 0; i < c->n_durations; i++)
        wb_le(b, (uint32_t)c->durations[i], 4);
    nkv++;
    KV(w_u32(b, "parakeet.max_symbols_per_step", (uint32_t)c->max_symbols));
    KV(w_u32(b, "parakeet.sample_rate", (uint32_t)c->sample_rate));
    KV(w_u32(b, "parakeet.n_fft", (uint32_t)c->n_fft));
    KV(w_u32(b, "parakeet.win_length", (uint32_t)c->win_length));
    KV(w_u32(b, "parakeet.hop_length", (uint32_t)c->hop_length));
    KV(w_f32(b, "parakeet.preemphasis", c->preemph));
    if (c->n_prompts > 0) {
        KV(w_u32(b, "parakeet.num_prompts", (uint32_t)c->n_prompts));
        KV(w_u32(b, "parakeet.prompt_hidden", (uint32_t)c->prompt_hidden));
        kv_head(b, "parakeet.prompt_dictionary", GT_ARR);
        wb_le(b, GT_STR, 4);
        wb_le(b, (uint64_t)mf->langs.n, 8);
        for (int i = 0; i < mf->langs.n; i++) {
            char entry[MODEL_LANG_MAX + 16];
            snprintf(entry, sizeof entry, "%s:%d", mf->langs.v[i].name, mf->langs.v[i].slot);
            wb_str(b, entry);
        }
        nkv++;
    }
    KV(w_str(b, "tokenizer.ggml.model", "llama"));
    kv_head(b, "tokenizer.ggml.tokens", GT_ARR);
    wb_le(b, GT_STR, 4);
    wb_le(b, (uint64_t)mf->tok.n, 8);
    for (int32_t i = 0; i < mf->tok.n; i++)
        wb_str(b, mf->tok.piece[i]);
    nkv++;
    kv_head(b, "tokenizer.ggml.token_type", GT_ARR);
    wb_le(b, GT_I32, 4);
    wb_le(b, (uint64_t)mf->tok.n, 8);
    for (int32_t i = 0; i < mf->tok.n; i++)
        wb_le(b, mf->tok.type[i], 4);
    nkv++;
#undef KV
    if (!b->oom)
        for (int i = 0; i < 8; i++)
            b->p[nkv_at + (size_t)i] = (uint8_t)(nkv >> (8 * i));

    uint64_t off = 0;
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        uint32_t ty = out_type(t, wt);
        wb_str(b, t->name);
        wb_le(b, (uint64_t)t->nd, 4);
        for (int k = t->nd - 1; k >= 0; k--) /* innermost first */
            wb_le(b, (uint64_t)t->ne[k], 8);
        wb_le(b, ty, 4);
        wb_le(b, off, 8);
        offsets[i] = off;
        off += out_bytes(t, ty);
        off += (GGUF_DEFAULT_ALIGN - off % GGUF_DEFAULT_ALIGN) % GGUF_DEFAULT_ALIGN;
    }
    static const uint8_t zeros[GGUF_DEFAULT_ALIGN];
    wb_put(b, zeros, (GGUF_DEFAULT_ALIGN - b->len % GGUF_DEFAULT_ALIGN) % GGUF_DEFAULT_ALIGN);
    if (b->oom)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory building the GGUF header");
    return VKASR_OK;
}

/* Writes one tensor's data in the output type: as is, converted in chunks (f32 <-> f16), or quantized
 * whole on the converter's threads. */
static vkasr_status write_tensor(FILE *f, const struct model_tensor *t, uint32_t ty, int nthreads, const char *path,
                                 struct err *e) {
    const uint64_t numel = tensor_numel(t);
    const int same = (ty == QT_F32 && t->type == MT_F32) || (ty == QT_F16 && t->type == MT_F16);
    if (same)
        return fwrite(t->data, 1, (size_t)t->nbytes, f) == t->nbytes
                   ? VKASR_OK
                   : err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
    if (quant_is_block(ty)) {
        const int64_t k = t->ne[t->nd - 1];
        const uint64_t n = out_bytes(t, ty);
        uint8_t *q = malloc(n ? (size_t)n : 1);
        if (!q)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory quantizing '%s'", t->name);
        const int64_t bad =
            quant_rows(ty, t->data, t->type == MT_F16, (int64_t)(numel / (uint64_t)k), k, q, nthreads);
        vkasr_status st = VKASR_OK;
        if (bad < 0)
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory quantizing '%s'", t->name);
        else if (bad > 0)
            st = err_set(e, VKASR_ERR_MODEL,
                         "tensor '%s' row %lld: a weight is not finite or beyond f16's range (the scales of %s)",
                         t->name, (long long)(bad - 1), quant_traits(ty)->name);
        else if (fwrite(q, 1, (size_t)n, f) != n)
            st = err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
        free(q);
        return st;
    }
    enum { CHUNK = 16384 };
    union {
        float f32[CHUNK];
        uint16_t f16[CHUNK];
    } buf;
    for (uint64_t i = 0; i < numel; i += CHUNK) {
        size_t n = (size_t)(numel - i < CHUNK ? numel - i : CHUNK);
        for (size_t k = 0; k < n; k++) {
            float v;
            if (t->type == MT_F32)
                memcpy(&v, (const uint8_t *)t->data + 4 * (i + k), 4);
            else {
                uint16_t h;
                memcpy(&h, (const uint8_t *)t->data + 2 * (i + k), 2);
                v = half_to_float(h);
            }
            if (ty == QT_F16)
                buf.f16[k] = float_to_half(v);
            else
                buf.f32[k] = v;
        }
        size_t esz = ty == QT_F16 ? 2 : 4;
        if (fwrite(&buf, esz, n, f) != n)
            return err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
    }
    return VKASR_OK;
}

static int converter_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

vkasr_status model_write_gguf(const struct model_file *mf, const char *path, vkasr_weight_type wt, struct err *e) {
    return model_write_gguf_stats(mf, path, wt, NULL, e);
}

vkasr_status model_write_gguf_stats(const struct model_file *mf, const char *path, vkasr_weight_type wt,
                                    struct gguf_write_stats *stats, struct err *e) {
    if (stats)
        *stats = (struct gguf_write_stats){0};
    if (!mf || !path || !quant_traits((uint32_t)wt))
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_write_gguf: invalid argument");
    if (!mf->canonical)
        return err_set(e, VKASR_ERR_INTERNAL, "model_write_gguf: %s is not prepared (call model_prepare first)",
                       mf->path ? mf->path : "model");
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        if ((t->type != MT_F32 && t->type != MT_F16) || t->nd < 1 || t->nd > 4 || strlen(t->name) >= GGUF_MAX_NAME)
            return err_set(e, VKASR_ERR_INTERNAL, "model_write_gguf: tensor '%s' cannot be stored (type %s, %d dims)",
                           t->name, mt_dtype_name(t->type), t->nd);
    }

    struct wbuf hdr = {0};
    uint64_t *offsets = NULL;
    char *tmp = NULL, *real = NULL;
    FILE *f = NULL;
    vkasr_status st = VKASR_OK;

    /* The rename below replaces whatever entry is at `path`: a symlink itself (its target left stale),
     * a FIFO or a device node. Write through a symlink to its target, and replace nothing but a
     * regular file. */
    struct stat sb;
    bool exists = lstat(path, &sb) == 0;
    if (!exists && errno != ENOENT) {
        st = err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        goto done;
    }
    if (exists && S_ISLNK(sb.st_mode)) {
        real = realpath(path, NULL);
        if (!real || stat(real, &sb) != 0) {
            st = err_set(e, VKASR_ERR_IO, "cannot write '%s': a symbolic link whose target cannot be resolved: %s",
                         path, strerror(errno));
            goto done;
        }
        path = real;
    }
    if (exists && !S_ISREG(sb.st_mode)) {
        st = err_set(e, VKASR_ERR_IO, "cannot write '%s': it exists and is not a regular file (refusing to replace it)",
                     path);
        goto done;
    }

    offsets = calloc(mf->ntensors ? (size_t)mf->ntensors : 1, sizeof *offsets);
    tmp = malloc(strlen(path) + 40);
    if (!offsets || !tmp) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    st = build_header(mf, wt, &hdr, offsets, e);
    if (st != VKASR_OK)
        goto done;

    /* A fresh temporary name next to the destination (same file system, so rename is atomic). */
    int fd = -1;
    for (int k = 0; k < 100 && fd < 0; k++) {
        sprintf(tmp, "%s.tmp.%ld.%d", path, (long)getpid(), k);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        st = err_set(e, VKASR_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
        tmp[0] = '\0';
        goto done;
    }
    f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        st = err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        goto done;
    }
    int ok = fwrite(hdr.p, 1, hdr.len, f) == hdr.len;
    uint64_t pos = 0;
    static const uint8_t zeros[GGUF_DEFAULT_ALIGN];
    const int nthreads = converter_threads();
    for (int i = 0; ok && i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        if (offsets[i] > pos)
            ok = fwrite(zeros, 1, (size_t)(offsets[i] - pos), f) == offsets[i] - pos;
        uint32_t ty = out_type(t, wt);
        if (ok && (st = write_tensor(f, t, ty, nthreads, path, e)) != VKASR_OK) {
            fclose(f);
            f = NULL;
            goto done;
        }
        pos = offsets[i] + out_bytes(t, ty);
        if (stats) {
            stats->n_weights += tensor_numel(t);
            stats->data_bytes += out_bytes(t, ty);
            if (model_is_matrix_weight(t->name) || (quant_is_block((uint32_t)wt) && model_is_decoder_matrix(t->name))) {
                stats->matrix_weights += tensor_numel(t);
                stats->matrix_bytes += out_bytes(t, ty);
                stats->n_fallback += ty != (uint32_t)wt;
            }
        }
    }
    /* pad the file end too, so every tensor is followed by a full alignment unit */
    if (ok && pos % GGUF_DEFAULT_ALIGN)
        ok = fwrite(zeros, 1, GGUF_DEFAULT_ALIGN - pos % GGUF_DEFAULT_ALIGN, f) ==
             GGUF_DEFAULT_ALIGN - pos % GGUF_DEFAULT_ALIGN;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    f = NULL;
    if (!ok) {
        st = err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(saved ? saved : EIO));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st = err_set(e, VKASR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        goto done;
    }
    tmp[0] = '\0'; /* renamed: nothing to remove */
    if (stats)
        stats->file_bytes = hdr.len + pos + (GGUF_DEFAULT_ALIGN - pos % GGUF_DEFAULT_ALIGN) % GGUF_DEFAULT_ALIGN;
done:
    if (st != VKASR_OK && tmp && tmp[0])
        unlink(tmp);
    free(tmp);
    free(real);
    free(offsets);
    free(hdr.p);
    return st;
}
