/* tokenizer.c — the SentencePiece vocabulary: reading an HF tokenizer.json (transformers'
 * ParakeetConverter layout), checking one read from GGUF, and decoding ids to text with SentencePiece's
 * DecodeIds semantics (spec §7.2). Encoding text to ids is not needed and not implemented.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_file.h"
#include "model_internal.h"
#include "tokenizer.h"
#include "unicode_punct.h"

/* ---------------------------------------------------------------------------------------------- */
/* UTF-8                                                                                          */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one (overlong forms, surrogates,
 * code points above U+10FFFF and truncated sequences are invalid). *cp receives the code point. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0; /* continuation byte, C0/C1 (always overlong) or F5..FF */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

int utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    while (n > 0) {
        uint32_t cp;
        size_t l = utf8_next(p, n, &cp);
        if (l == 0)
            return 0;
        p += l;
        n -= l;
    }
    return 1;
}

static int is_punct_cp(uint32_t cp) {
    size_t lo = 0, hi = sizeof unicode_punct_ranges / sizeof unicode_punct_ranges[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < unicode_punct_ranges[mid][0])
            hi = mid;
        else if (cp > unicode_punct_ranges[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

#define SPACE_SYMBOL "\xE2\x96\x81"  /* U+2581, SentencePiece's word boundary */
#define UNK_SURFACE " \xE2\x81\x87 " /* " ⁇ ", SentencePiece's default unk_surface */
#define REPLACEMENT "\xEF\xBF\xBD"   /* U+FFFD */

/* <0xHH> with two upper-case hex digits, as SentencePiece writes byte pieces. */
static int byte_piece_value(const char *p) {
    static const char hex[] = "0123456789ABCDEF";
    if (strlen(p) != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>')
        return -1;
    const char *h = strchr(hex, p[3]), *l = strchr(hex, p[4]);
    if (!p[3] || !p[4] || !h || !l)
        return -1;
    return (int)((h - hex) * 16 + (l - hex));
}

void tok_free(struct tokenizer *t) {
    if (!t)
        return;
    if (t->piece)
        for (int32_t i = 0; i < t->n; i++)
            free(t->piece[i]);
    free(t->piece);
    free(t->type);
    free(t->punct);
    free(t->punct_cp);
    t->piece = NULL;
    t->type = NULL;
    t->punct = NULL;
    t->punct_cp = NULL;
    t->n_punct_cp = 0;
    t->n = 0;
}

vkasr_status tok_check(struct tokenizer *t, const char *src, struct err *e) {
    for (int32_t i = 0; i < t->n; i++) {
        if (!t->piece[i] || !utf8_valid(t->piece[i], strlen(t->piece[i])))
            return err_set(e, VKASR_ERR_MODEL, "%s: piece id %d is not valid UTF-8", src, (int)i);
        if (t->type[i] < TOK_NORMAL || t->type[i] > TOK_BYTE)
            return err_set(e, VKASR_ERR_MODEL, "%s: piece id %d has unknown type %d", src, (int)i, t->type[i]);
        if (t->type[i] == TOK_BYTE && byte_piece_value(t->piece[i]) < 0)
            return err_set(e, VKASR_ERR_MODEL, "%s: piece id %d ('%s') has type BYTE but is not <0xHH>", src, (int)i,
                           t->piece[i]);
    }
    return tok_index(t, e);
}

/* ---------------------------------------------------------------------------------------------- */
/* tokenizer.json                                                                                 */

static vkasr_status json_id(const char *path, const cJSON *j, const char *what, const char *piece, int32_t *id,
                            struct err *e) {
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < 0 ||
        j->valuedouble > 2147483647.0)
        return err_set(e, VKASR_ERR_MODEL, "%s: %s '%s' has an id that is not a non-negative integer", path, what,
                       piece);
    *id = (int32_t)j->valuedouble;
    return VKASR_OK;
}

static vkasr_status set_piece(const char *path, struct tokenizer *t, int32_t id, const char *s, const char *what,
                              struct err *e) {
    if (!utf8_valid(s, strlen(s)))
        return err_set(e, VKASR_ERR_MODEL, "%s: %s id %d is not valid UTF-8", path, what, (int)id);
    if (t->piece[id]) {
        if (strcmp(t->piece[id], s) == 0)
            return VKASR_OK;
        return err_set(e, VKASR_ERR_MODEL, "%s: id %d is given to both '%s' and '%s'", path, (int)id, t->piece[id], s);
    }
    t->piece[id] = strdup(s);
    if (!t->piece[id])
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    return VKASR_OK;
}

/* model.vocab: {piece: id} (BPE, what ParakeetConverter writes) or [[piece, score], ...] (Unigram). */
static vkasr_status read_vocab(const char *path, const cJSON *model, struct tokenizer *t, struct err *e) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *it;
    if (cJSON_IsObject(vocab)) {
        cJSON_ArrayForEach(it, vocab) {
            int32_t id = 0;
            TRY(json_id(path, it, "piece", it->string, &id, e));
            if (id >= t->n)
                return err_set(e, VKASR_ERR_MODEL,
                               "%s: piece '%s' has id %d but the model has %d pieces (config vocab_size %d)", path,
                               it->string, (int)id, (int)t->n, (int)t->n + 1);
            TRY(set_piece(path, t, id, it->string, "piece", e));
        }
        return VKASR_OK;
    }
    if (cJSON_IsArray(vocab)) {
        int32_t id = 0;
        cJSON_ArrayForEach(it, vocab) {
            const cJSON *p = cJSON_GetArrayItem(it, 0);
            if (!cJSON_IsArray(it) || !cJSON_IsString(p))
                return err_set(e, VKASR_ERR_MODEL, "%s: model.vocab entry %d is not [piece, score]", path, (int)id);
            if (id >= t->n)
                return err_set(e, VKASR_ERR_MODEL, "%s: model.vocab has more than the model's %d pieces", path,
                               (int)t->n);
            TRY(set_piece(path, t, id, p->valuestring, "piece", e));
            id++;
        }
        return VKASR_OK;
    }
    return err_set(e, VKASR_ERR_MODEL, "%s: missing or malformed \"model\".\"vocab\"", path);
}

static vkasr_status parse_tokenizer(const char *path, const cJSON *root, struct tokenizer *t, uint8_t *added,
                                    struct err *e) {
    if (!cJSON_IsObject(root))
        return err_set(e, VKASR_ERR_MODEL, "%s: not a JSON object", path);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return err_set(e, VKASR_ERR_MODEL, "%s: missing \"model\" object", path);
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (mtype && (!cJSON_IsString(mtype) ||
                  (strcmp(mtype->valuestring, "BPE") != 0 && strcmp(mtype->valuestring, "Unigram") != 0)))
        return err_set(e, VKASR_ERR_MODEL, "%s: model type %s is not a SentencePiece BPE or Unigram model", path,
                       cJSON_IsString(mtype) ? mtype->valuestring : "(not a string)");
    TRY(read_vocab(path, model, t, e));

    /* added_tokens: SentencePiece CONTROL (special) and USER_DEFINED (not special) pieces at their ids,
     * plus tokens the conversion added after the pieces (<pad>/<blank> at id V: not pieces, skipped) */
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (at && !cJSON_IsArray(at))
        return err_set(e, VKASR_ERR_MODEL, "%s: \"added_tokens\" is not an array", path);
    const cJSON *it;
    cJSON_ArrayForEach(it, at) {
        const cJSON *jc = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(it, "special");
        if (!cJSON_IsObject(it) || !cJSON_IsString(jc) || (js && !cJSON_IsBool(js)))
            return err_set(e, VKASR_ERR_MODEL, "%s: malformed added_tokens entry", path);
        int32_t id = 0;
        TRY(json_id(path, cJSON_GetObjectItemCaseSensitive(it, "id"), "added token", jc->valuestring, &id, e));
        if (id >= t->n)
            continue;
        TRY(set_piece(path, t, id, jc->valuestring, "added token", e));
        added[id] = cJSON_IsTrue(js) ? TOK_CONTROL : TOK_USER_DEFINED;
    }

    for (int32_t i = 0; i < t->n; i++)
        if (!t->piece[i])
            return err_set(e, VKASR_ERR_MODEL, "%s: no piece for id %d (the model has %d pieces)", path, (int)i,
                           (int)t->n);

    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    const cJSON *unk_id = cJSON_GetObjectItemCaseSensitive(model, "unk_id"); /* Unigram */
    const cJSON *bf = cJSON_GetObjectItemCaseSensitive(model, "byte_fallback");
    if (unk && !cJSON_IsString(unk) && !cJSON_IsNull(unk))
        return err_set(e, VKASR_ERR_MODEL, "%s: model.unk_token must be a string or null", path);
    if (bf && !cJSON_IsBool(bf))
        return err_set(e, VKASR_ERR_MODEL, "%s: model.byte_fallback must be a boolean", path);
    int byte_fallback = cJSON_IsTrue(bf);
    for (int32_t i = 0; i < t->n; i++) {
        const char *p = t->piece[i];
        if ((cJSON_IsString(unk) && strcmp(p, unk->valuestring) == 0) ||
            (cJSON_IsNumber(unk_id) && unk_id->valuedouble == (double)i))
            t->type[i] = TOK_UNKNOWN;
        else if (byte_fallback && byte_piece_value(p) >= 0)
            t->type[i] = TOK_BYTE;
        else if (added[i])
            t->type[i] = added[i];
        else
            t->type[i] = TOK_NORMAL;
    }
    return VKASR_OK;
}

vkasr_status tok_parse_hf_json(const char *name, const char *text, size_t len, int32_t n_pieces, struct tokenizer *t,
                               struct err *e) {
    memset(t, 0, sizeof *t);
    if (n_pieces < 1)
        return err_set(e, VKASR_ERR_MODEL, "%s: the model has no pieces", name);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root)
        return err_set(e, VKASR_ERR_MODEL, "%s: not valid JSON (error near byte %zu)", name,
                       end ? (size_t)(end - text) : (size_t)0);
    t->n = n_pieces;
    t->piece = calloc((size_t)n_pieces, sizeof *t->piece);
    t->type = calloc((size_t)n_pieces, 1);
    uint8_t *added = calloc((size_t)n_pieces, 1);
    vkasr_status st = (!t->piece || !t->type || !added) ? err_set(e, VKASR_ERR_NO_MEMORY, "out of memory")
                                                        : parse_tokenizer(name, root, t, added, e);
    free(added);
    cJSON_Delete(root);
    if (st == VKASR_OK)
        st = tok_index(t, e);
    if (st != VKASR_OK)
        tok_free(t);
    return st;
}

vkasr_status tok_load_hf_json(const char *path, int32_t n_pieces, struct tokenizer *t, struct err *e) {
    memset(t, 0, sizeof *t);
    if (n_pieces < 1)
        return err_set(e, VKASR_ERR_MODEL, "%s: the model has no pieces", path);
    char *txt = NULL;
    size_t len = 0;
    TRY(read_small_file(path, 1, &txt, &len, e));
    vkasr_status st = tok_parse_hf_json(path, txt, len, n_pieces, t, e);
    free(txt);
    return st;
}

/* ---------------------------------------------------------------------------------------------- */
/* Decoding                                                                                       */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_put(struct sbuf *b, const void *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Byte pieces are joined and decoded as UTF-8; each byte that does not start a valid sequence becomes
 * one U+FFFD (SentencePiece's ProcessBytePieces). */
static void flush_bytes(struct sbuf *out, struct sbuf *bytes) {
    const unsigned char *s = (const unsigned char *)bytes->p;
    size_t n = bytes->len, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = utf8_next(s + i, n - i, &cp);
        if (l) {
            sb_put(out, s + i, l);
            i += l;
        } else {
            sb_put(out, REPLACEMENT, 3);
            i++;
        }
    }
    bytes->len = 0;
}

vkasr_status tok_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int strip_leading_space, char **out,
                        struct err *e) {
    *out = NULL;
    struct sbuf o = {0}, bytes = {0};
    sb_put(&o, "", 0);
    for (size_t k = 0; k < n; k++) {
        int32_t id = ids[k];
        if (id < 0 || id >= t->n) /* blank (= n) and anything else outside the vocabulary */
            continue;
        int type = t->type[id];
        const char *p = t->piece[id];
        if (type == TOK_BYTE) {
            unsigned char b = (unsigned char)byte_piece_value(p);
            sb_put(&bytes, &b, 1);
            continue;
        }
        flush_bytes(&o, &bytes);
        if (type == TOK_CONTROL || type == TOK_UNUSED)
            continue;
        if (type == TOK_UNKNOWN) {
            sb_put(&o, UNK_SURFACE, sizeof UNK_SURFACE - 1);
            continue;
        }
        /* SentencePiece removes the dummy-prefix "▁" of the piece that starts the text */
        if (strip_leading_space && o.len == 0 && strncmp(p, SPACE_SYMBOL, 3) == 0)
            p += 3;
        for (const char *q; (q = strstr(p, SPACE_SYMBOL)) != NULL; p = q + 3) {
            sb_put(&o, p, (size_t)(q - p));
            sb_put(&o, " ", 1);
        }
        sb_put(&o, p, strlen(p));
    }
    flush_bytes(&o, &bytes);
    free(bytes.p);
    if (o.oom || bytes.oom) {
        free(o.p);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory decoding %zu tokens", n);
    }
    *out = o.p;
    return VKASR_OK;
}

vkasr_status tok_piece_text(const struct tokenizer *t, int32_t id, char **out, struct err *e) {
    return tok_decode(t, &id, 1, 1, out, e);
}

static int piece_is_punct(const struct tokenizer *t, int32_t id);

int tok_is_punct(const struct tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n)
        return 0;
    return t->punct ? t->punct[id] : piece_is_punct(t, id);
}

vkasr_status tok_index(struct tokenizer *t, struct err *e) {
    free(t->punct);
    free(t->punct_cp);
    t->punct_cp = NULL;
    t->n_punct_cp = 0;
    t->punct = malloc(t->n > 0 ? (size_t)t->n : 1);
    if (!t->punct)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    size_t cap = 0;
    for (int32_t id = 0; id < t->n; id++) {
        t->punct[id] = (uint8_t)piece_is_punct(t, id);
        if (!t->punct[id])
            continue;
        /* every character of the piece (a leading "▁" included: it never occurs in the text) */
        const unsigned char *p = (const unsigned char *)t->piece[id];
        size_t n = strlen((const char *)p);
        while (n > 0) {
            uint32_t cp;
            size_t l = utf8_next(p, n, &cp);
            if (l == 0)
                break;
            p += l;
            n -= l;
            size_t k = 0;
            while (k < t->n_punct_cp && t->punct_cp[k] != cp)
                k++;
            if (k < t->n_punct_cp)
                continue;
            if (t->n_punct_cp == cap) {
                cap = cap ? 2 * cap : 16;
                uint32_t *nc = realloc(t->punct_cp, cap * sizeof *nc);
                if (!nc)
                    return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
                t->punct_cp = nc;
            }
            t->punct_cp[t->n_punct_cp++] = cp;
        }
    }
    return VKASR_OK;
}

static int piece_is_punct(const struct tokenizer *t, int32_t id) {
    if (t->type[id] != TOK_NORMAL && t->type[id] != TOK_USER_DEFINED)
        return 0;
    /* the text decoded alone: a leading "▁" is dropped; any other "▁" is a space, not punctuation */
    const unsigned char *p = (const unsigned char *)t->piece[id];
    if (strncmp((const char *)p, SPACE_SYMBOL, 3) == 0)
        p += 3;
    size_t n = strlen((const char *)p);
    if (n == 0)
        return 0;
    while (n > 0) {
        uint32_t cp;
        size_t l = utf8_next(p, n, &cp);
        if (l == 0 || !is_punct_cp(cp))
            return 0;
        p += l;
        n -= l;
    }
    return 1;
}
