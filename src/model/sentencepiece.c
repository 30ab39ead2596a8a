/* sentencepiece.c — a SentencePiece model file (sentencepiece_model.proto's ModelProto) read with a
 * minimal protobuf wire-format reader: the pieces (id = order of appearance) and their types, which
 * is what detokenisation needs (tokenizer.h). Every length is bounded by its enclosing message.
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "nemo_internal.h"

/* Most pieces a vocabulary may have (the largest Parakeet has 8192). */
#define SPM_MAX_PIECES (1 << 22)

struct pb {
    const uint8_t *p, *end;
};

static int varint(struct pb *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return 0;
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return 1;
    }
    return 0;
}

/* One field: its number, wire type and (for length-delimited fields) its bytes; other wire types
 * are skipped, their varint value in *v. */
static int field(struct pb *b, uint64_t *num, int *wt, struct pb *sub, uint64_t *v) {
    uint64_t key;
    if (!varint(b, &key))
        return 0;
    *num = key >> 3;
    *wt = (int)(key & 7);
    *v = 0;
    switch (*wt) {
    case 0:
        return varint(b, v);
    case 1:
    case 5: {
        size_t k = *wt == 1 ? 8 : 4;
        if ((size_t)(b->end - b->p) < k)
            return 0;
        b->p += k;
        return 1;
    }
    case 2: {
        uint64_t len;
        if (!varint(b, &len) || len > (uint64_t)(b->end - b->p))
            return 0;
        sub->p = b->p;
        sub->end = b->p + len;
        b->p += len;
        return 1;
    }
    default: /* groups (3, 4) and invalid types */
        return 0;
    }
}

/* SentencePiece message: piece (1, bytes), score (2, float), type (3, enum; NORMAL when absent). */
static vkasr_status read_piece(const char *src, struct pb m, int32_t id, struct tokenizer *t, struct err *e) {
    struct pb sub = {0};
    const uint8_t *s = NULL;
    size_t len = 0;
    uint64_t type = TOK_NORMAL;
    while (m.p < m.end) {
        uint64_t num, v;
        int wt;
        if (!field(&m, &num, &wt, &sub, &v))
            return err_set(e, VKASR_ERR_MODEL, "%s: piece %d: malformed protobuf field", src, (int)id);
        if (num == 1 && wt == 2) {
            s = sub.p;
            len = (size_t)(sub.end - sub.p);
        } else if (num == 3 && wt == 0) {
            type = v;
        }
    }
    if (!s)
        return err_set(e, VKASR_ERR_MODEL, "%s: piece %d has no text", src, (int)id);
    if (!utf8_valid((const char *)s, len) || memchr(s, 0, len))
        return err_set(e, VKASR_ERR_MODEL, "%s: piece %d is not valid UTF-8", src, (int)id);
    if (type < TOK_NORMAL || type > TOK_BYTE)
        return err_set(e, VKASR_ERR_MODEL, "%s: piece %d has unknown type %llu", src, (int)id,
                       (unsigned long long)type);
    t->piece[id] = strndup((const char *)s, len);
    if (!t->piece[id])
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    t->type[id] = (uint8_t)type;
    return VKASR_OK;
}

static vkasr_status parse(const char *src, const uint8_t *data, size_t size, struct tokenizer *t, struct err *e) {
    /* count the pieces first (field 1 of ModelProto), then read them */
    struct pb b = {data, data + size}, sub;
    int64_t n = 0;
    while (b.p < b.end) {
        uint64_t num, v;
        int wt;
        if (!field(&b, &num, &wt, &sub, &v))
            return err_set(e, VKASR_ERR_MODEL, "%s: not a SentencePiece model (malformed protobuf at byte %zu)", src,
                           (size_t)(b.p - data));
        if (num == 1 && wt == 2 && ++n > SPM_MAX_PIECES)
            return err_set(e, VKASR_ERR_MODEL, "%s: more than %d pieces", src, SPM_MAX_PIECES);
    }
    if (n == 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: a SentencePiece model without pieces", src);
    t->piece = calloc((size_t)n, sizeof *t->piece);
    t->type = calloc((size_t)n, 1);
    if (!t->piece || !t->type)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    t->n = (int32_t)n;
    b.p = data;
    int32_t id = 0;
    while (b.p < b.end) {
        uint64_t num, v;
        int wt;
        field(&b, &num, &wt, &sub, &v);
        if (num == 1 && wt == 2)
            TRY(read_piece(src, sub, id++, t, e));
    }
    return tok_check(t, src, e);
}

vkasr_status spm_parse(const char *src, const uint8_t *data, size_t size, struct tokenizer *t, struct err *e) {
    memset(t, 0, sizeof *t);
    vkasr_status st = parse(src, data, size, t, e);
    if (st != VKASR_OK)
        tok_free(t);
    return st;
}
