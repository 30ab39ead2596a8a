/* safetensors.c — reader for the safetensors format: one model.safetensors or the shards named by
 * model.safetensors.index.json. Every header field is validated against the mapped file before use
 * (hostile lengths, offsets, shapes, dtypes). Tensors point into the mapping; nothing is copied.
 * Checking tensors against the model configuration is model.c's job, not this file's.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_file.h"
#include "model_internal.h"

/* The reference implementation (safetensors crate) refuses headers above 100 MB; so do we, so a hostile
 * length cannot make cJSON allocate gigabytes. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)
/* Offsets and sizes arrive as JSON numbers (doubles): integers are exact up to 2^53. */
#define ST_MAX_EXACT 9007199254740992.0

static uint64_t rd_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int parse_dtype(const char *s, enum mt_dtype *t) {
    static const struct {
        const char *name;
        enum mt_dtype type;
    } tab[] = {{"F64", MT_F64}, {"F32", MT_F32}, {"F16", MT_F16}, {"BF16", MT_BF16}, {"I64", MT_I64},
               {"I32", MT_I32}, {"I16", MT_I16}, {"I8", MT_I8},   {"U8", MT_U8},     {"BOOL", MT_BOOL}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(s, tab[i].name) == 0) {
            *t = tab[i].type;
            return 1;
        }
    return 0;
}

/* A JSON number that is a non-negative integer exactly representable (<= 2^53). */
static int json_u64(const cJSON *n, uint64_t *out) {
    if (!cJSON_IsNumber(n))
        return 0;
    double d = n->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_EXACT) || d != (double)(uint64_t)d)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

struct span {
    uint64_t begin, end;
    const char *name;
};

static int span_cmp(const void *a, const void *b) {
    const struct span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

static vkasr_status parse_entry(struct model_file *mf, int map, const cJSON *ent, uint64_t data_off, uint64_t data_size,
                                struct span *sp, struct err *e) {
    const char *path = mf->map_paths[map];
    const char *name = ent->string;
    if (!cJSON_IsObject(ent))
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': header entry is not a JSON object", path, name);

    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(ent, "dtype");
    if (!cJSON_IsString(jd))
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    enum mt_dtype type;
    if (!parse_dtype(jd->valuestring, &type))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tensor '%s': unsupported dtype '%s' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)",
                       path, name, jd->valuestring);

    const cJSON *js = cJSON_GetObjectItemCaseSensitive(ent, "shape");
    if (!cJSON_IsArray(js))
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    int nd = cJSON_GetArraySize(js);
    if (nd > 4)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': %d dimensions (at most 4 are supported)", path, name, nd);
    int64_t ne[4] = {0, 0, 0, 0};
    uint64_t numel = 1;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, js) {
        uint64_t d;
        if (!json_u64(it, &d))
            return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': shape entry %d is not a non-negative integer", path,
                           name, i);
        ne[i++] = (int64_t)d;
        /* overflow-safe product: stop at anything that cannot fit the file anyway */
        if (d != 0 && numel > UINT64_MAX / d)
            return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': shape product overflows", path, name);
        numel *= d;
    }
    size_t esz = mt_dtype_size(type);
    if (numel > UINT64_MAX / esz)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': byte size overflows", path, name);
    uint64_t nbytes = numel * esz;

    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(ent, "data_offsets");
    uint64_t b, en;
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || !json_u64(cJSON_GetArrayItem(jo, 0), &b) ||
        !json_u64(cJSON_GetArrayItem(jo, 1), &en))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tensor '%s': \"data_offsets\" must be two non-negative integers [begin, end]", path, name);
    if (b > en)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", path,
                       name, (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tensor '%s': data_offsets [%llu, %llu] exceed the file's data section (%llu bytes)", path,
                       name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_size);
    if (en - b != nbytes) {
        char sh[96];
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but dtype %s and shape %s need "
                       "%llu",
                       path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b),
                       jd->valuestring, shape_str(sh, sizeof sh, nd, ne), (unsigned long long)nbytes);
    }
    sp->begin = b;
    sp->end = en;
    sp->name = name;
    const uint8_t *base = mf->maps[map];
    return model_add_tensor(mf, name, strlen(name), type, nd, ne, base + data_off + b, nbytes, map, e);
}

vkasr_status st_parse(struct model_file *mf, int map, struct err *e) {
    const uint8_t *base = mf->maps[map];
    uint64_t size = mf->map_sizes[map];
    const char *path = mf->map_paths[map];
    if (size < 8)
        return err_set(e, VKASR_ERR_MODEL, "%s: %llu bytes is too small for a safetensors file", path,
                       (unsigned long long)size);
    uint64_t hlen = rd_le64(base);
    if (hlen > size - 8)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: header length %llu exceeds the file size (%llu bytes): truncated or not safetensors", path,
                       (unsigned long long)hlen, (unsigned long long)size);
    if (hlen > ST_MAX_HEADER)
        return err_set(e, VKASR_ERR_MODEL, "%s: header length %llu exceeds the 100 MB limit", path,
                       (unsigned long long)hlen);
    uint64_t data_off = 8 + hlen, data_size = size - data_off;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)base + 8, (size_t)hlen, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - (const char *)base - 8) : 0;
        return err_set(e, VKASR_ERR_MODEL, "%s: header is not valid JSON (error near header byte %zu)", path, at);
    }
    /* Only trailing spaces may follow the JSON object (writers pad the header to 8 bytes). */
    for (const char *p = end; p && p < (const char *)base + 8 + hlen; p++)
        if (*p != ' ' && *p != '\0' && *p != '\n' && *p != '\t' && *p != '\r') {
            cJSON_Delete(root);
            return err_set(e, VKASR_ERR_MODEL, "%s: unexpected data after the header's JSON object", path);
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return err_set(e, VKASR_ERR_MODEL, "%s: header is not a JSON object", path);
    }

    int n = cJSON_GetArraySize(root);
    struct span *spans = calloc(n > 0 ? (size_t)n : 1, sizeof *spans);
    if (!spans) {
        cJSON_Delete(root);
        return err_set(e, VKASR_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    int ns = 0;
    vkasr_status st = VKASR_OK;
    const cJSON *ent;
    cJSON_ArrayForEach(ent, root) {
        if (!ent->string) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: header entry without a name", path);
            break;
        }
        if (strcmp(ent->string, "__metadata__") == 0) {
            /* {str: str}; we read nothing from it but refuse malformed ones like the reference does */
            if (!cJSON_IsObject(ent)) {
                st = err_set(e, VKASR_ERR_MODEL, "%s: \"__metadata__\" is not a JSON object", path);
                break;
            }
            const cJSON *m;
            cJSON_ArrayForEach(m, ent) {
                if (!cJSON_IsString(m)) {
                    st = err_set(e, VKASR_ERR_MODEL, "%s: \"__metadata__\" value '%s' is not a string", path,
                                 m->string ? m->string : "");
                    break;
                }
            }
            if (st != VKASR_OK)
                break;
            continue;
        }
        st = parse_entry(mf, map, ent, data_off, data_size, &spans[ns], e);
        if (st != VKASR_OK)
            break;
        ns++;
    }
    if (st == VKASR_OK) {
        /* No two tensors may share bytes (empty tensors occupy none). */
        qsort(spans, (size_t)ns, sizeof *spans, span_cmp);
        const struct span *prev = NULL;
        for (int i = 0; i < ns; i++) {
            if (spans[i].begin == spans[i].end)
                continue;
            if (prev && spans[i].begin < prev->end) {
                st = err_set(e, VKASR_ERR_MODEL,
                             "%s: tensors '%s' (data_offsets [%llu, %llu]) and '%s' ([%llu, %llu]) overlap", path,
                             prev->name, (unsigned long long)prev->begin, (unsigned long long)prev->end, spans[i].name,
                             (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end);
                break;
            }
            prev = &spans[i];
        }
    }
    free(spans);
    cJSON_Delete(root);
    return st;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 || errno != ENOENT;
}

/* A shard name from the index must be a plain file name inside the model directory. */
static int safe_shard_name(const char *s) {
    if (!s[0] || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p == '/' || *p == '\\')
            return 0;
    return 1;
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static vkasr_status load_index(struct model_file *mf, const char *dir, const char *ipath, struct err *e) {
    char *txt = NULL;
    size_t len = 0;
    TRY(read_small_file(ipath, 1, &txt, &len, e));
    cJSON *root = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!root)
        return err_set(e, VKASR_ERR_MODEL, "%s: not valid JSON", ipath);
    vkasr_status st = VKASR_OK;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    const cJSON *it;
    const char **names = NULL;
    int first_map = mf->nmaps, nent = 0, k = 0;
    if (!cJSON_IsObject(wm) || cJSON_GetArraySize(wm) == 0) {
        st = err_set(e, VKASR_ERR_MODEL, "%s: missing or empty \"weight_map\" object", ipath);
        goto done;
    }
    /* Map and parse each distinct shard once (sorted names: duplicates are adjacent). */
    nent = cJSON_GetArraySize(wm);
    names = malloc((size_t)nent * sizeof *names);
    if (!names) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    cJSON_ArrayForEach(it, wm) {
        if (!cJSON_IsString(it)) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: weight_map entry '%s' is not a string", ipath,
                         it->string ? it->string : "");
            goto done;
        }
        if (!safe_shard_name(it->valuestring)) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: weight_map entry '%s' names '%s', which is not a file name in %s",
                         ipath, it->string, it->valuestring, dir);
            goto done;
        }
        names[k++] = it->valuestring;
    }
    qsort(names, (size_t)k, sizeof *names, str_cmp);
    for (int i = 0; i < k && st == VKASR_OK; i++) {
        if (i > 0 && strcmp(names[i - 1], names[i]) == 0)
            continue;
        char *sp = path_join(dir, names[i]);
        int map;
        st = sp ? model_map_file(mf, sp, &map, e) : err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        free(sp);
        if (st == VKASR_OK)
            st = st_parse(mf, map, e);
    }
    if (st == VKASR_OK)
        st = model_index_names(mf, ipath, e);
    if (st != VKASR_OK)
        goto done;
    /* Every tensor the index names must be in the shard it names. */
    cJSON_ArrayForEach(it, wm) {
        const struct model_tensor *t = model_find(mf, it->string);
        const char *f = t && t->map >= first_map ? mf->map_paths[t->map] : NULL;
        const char *slash = f ? strrchr(f, '/') : NULL;
        const char *base = slash ? slash + 1 : f;
        if (!t || !base || strcmp(base, it->valuestring) != 0) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' is not in %s as weight_map says", ipath, it->string,
                         it->valuestring);
            goto done;
        }
    }
done:
    free(names);
    cJSON_Delete(root);
    return st;
}

vkasr_status st_load_dir(struct model_file *mf, const char *dir, struct err *e) {
    char *single = path_join(dir, "model.safetensors");
    char *index = path_join(dir, "model.safetensors.index.json");
    vkasr_status st;
    if (!single || !index) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    } else if (file_exists(single)) {
        int map;
        st = model_map_file(mf, single, &map, e);
        if (st == VKASR_OK)
            st = st_parse(mf, map, e);
        if (st == VKASR_OK)
            st = model_index_names(mf, single, e);
    } else if (file_exists(index)) {
        st = load_index(mf, dir, index, e);
    } else {
        st = err_set(e, VKASR_ERR_MODEL, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    free(single);
    free(index);
    return st;
}
