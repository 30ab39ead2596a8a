/* gguf_kv.c — typed look-ups of a parsed GGUF file's metadata keys (gguf_internal.h), shared by vkasr's
 * own schema (gguf.c) and the readers of other engines' layouts (gguf_nemo_speech.c). The values were
 * bounds-checked when gguf.c parsed the file; here each key's type and range is checked.
 */
#include <string.h>

#include "gguf_internal.h"

static const char *const type_names[GT_COUNT] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                                 "bool",  "string", "array",  "uint64", "int64",  "float64"};

const char *gguf_type_name(uint32_t t) {
    return t < GT_COUNT ? type_names[t] : "unknown";
}

uint64_t gguf_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

const char *gguf_path(const struct gguf *g) {
    return g->r.path;
}

const struct gkv *gguf_kv_find(const struct gguf *g, const char *key) {
    size_t kl = strlen(key);
    for (uint64_t i = 0; i < g->nkv; i++)
        if (g->kv[i].klen == kl && memcmp(g->kv[i].key, key, kl) == 0)
            return &g->kv[i];
    return NULL;
}

bool gguf_has(const struct gguf *g, const char *key) {
    return gguf_kv_find(g, key) != NULL;
}

bool gguf_is_int_type(uint32_t t) {
    return t == GT_U8 || t == GT_I8 || t == GT_U16 || t == GT_I16 || t == GT_U32 || t == GT_I32 || t == GT_U64 ||
           t == GT_I64;
}

/* Reads an integer scalar of any integer type at p (type t) as int64 (u64 above INT64_MAX saturates). */
int64_t gguf_int_at(const uint8_t *p, uint32_t t) {
    switch (t) {
    case GT_U8: return p[0];
    case GT_I8: return (int8_t)p[0];
    case GT_U16: return (int64_t)gguf_le(p, 2);
    case GT_I16: return (int16_t)gguf_le(p, 2);
    case GT_U32: return (int64_t)gguf_le(p, 4);
    case GT_I32: return (int32_t)gguf_le(p, 4);
    case GT_U64: {
        uint64_t v = gguf_le(p, 8);
        return v > INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: return (int64_t)gguf_le(p, 8); /* GT_I64 */
    }
}

/* The key's entry, or NULL when it is absent and not required (else an error naming it). */
static vkasr_status find(const struct gguf *g, const char *key, int required, const struct gkv **kv, struct err *e) {
    *kv = gguf_kv_find(g, key);
    if (!*kv && required)
        return err_set(e, VKASR_ERR_MODEL, "%s: missing key '%s'", g->r.path, key);
    return VKASR_OK;
}

vkasr_status gguf_get_int(const struct gguf *g, const char *key, int required, int def, int lo, int hi, int *out,
                          struct err *e) {
    const struct gkv *kv = NULL;
    TRY(find(g, key, required, &kv, e));
    if (!kv) {
        *out = def;
        return VKASR_OK;
    }
    if (!gguf_is_int_type(kv->type))
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' must be an integer, got %s", g->r.path, key,
                       type_names[kv->type]);
    int64_t v = gguf_int_at(g->r.p + kv->vpos, kv->type);
    if (v < lo || v > hi)
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' = %lld is out of the supported range [%d, %d]", g->r.path, key,
                       (long long)v, lo, hi);
    *out = (int)v;
    return VKASR_OK;
}

vkasr_status gguf_get_bool(const struct gguf *g, const char *key, int required, bool def, bool *out, struct err *e) {
    const struct gkv *kv = NULL;
    TRY(find(g, key, required, &kv, e));
    if (!kv) {
        *out = def;
        return VKASR_OK;
    }
    if (kv->type != GT_BOOL)
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' must be a bool, got %s", g->r.path, key, type_names[kv->type]);
    *out = g->r.p[kv->vpos] != 0;
    return VKASR_OK;
}

vkasr_status gguf_get_f32(const struct gguf *g, const char *key, int required, float def, float *out, struct err *e) {
    const struct gkv *kv = NULL;
    TRY(find(g, key, required, &kv, e));
    if (!kv) {
        *out = def;
    } else if (kv->type == GT_F32) {
        uint32_t b = (uint32_t)gguf_le(g->r.p + kv->vpos, 4);
        memcpy(out, &b, 4);
    } else if (kv->type == GT_F64) {
        uint64_t b = gguf_le(g->r.p + kv->vpos, 8);
        double d;
        memcpy(&d, &b, 8);
        *out = (float)d;
    } else {
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' must be a float, got %s", g->r.path, key,
                       type_names[kv->type]);
    }
    return VKASR_OK;
}

vkasr_status gguf_get_str(const struct gguf *g, const char *key, int required, const char **s, uint64_t *len,
                          struct err *e) {
    const struct gkv *kv = NULL;
    TRY(find(g, key, required, &kv, e));
    *s = NULL;
    *len = 0;
    if (!kv)
        return VKASR_OK;
    if (kv->type != GT_STR)
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' must be a string, got %s", g->r.path, key,
                       type_names[kv->type]);
    *len = gguf_le(g->r.p + kv->vpos, 8);
    *s = (const char *)g->r.p + kv->vpos + 8;
    return VKASR_OK;
}

vkasr_status gguf_get_array(const struct gguf *g, const char *key, uint32_t *atype, uint64_t *n, const uint8_t **data,
                            struct err *e) {
    const struct gkv *kv = NULL;
    TRY(find(g, key, 1, &kv, e));
    if (kv->type != GT_ARR)
        return err_set(e, VKASR_ERR_MODEL, "%s: key '%s' must be an array, got %s", g->r.path, key,
                       type_names[kv->type]);
    *atype = kv->atype;
    *n = kv->alen;
    *data = g->r.p + kv->vpos;
    return VKASR_OK;
}
