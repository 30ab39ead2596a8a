/* model_file.c — the leaf of src/model: dtypes, paths and small files, file mappings, the tensor table
 * and its name index, and name rules (matrix weights). The readers and the rest of src/model call it;
 * it calls none of them. */
#define _DEFAULT_SOURCE /* madvise's MADV_POPULATE_READ */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_file.h"

/* ---------------------------------------------------------------------------------------------- */
/* dtypes, paths, files                                                                           */

size_t mt_dtype_size(enum mt_dtype t) {
    switch (t) {
    case MT_F64:
    case MT_I64: return 8;
    case MT_F32:
    case MT_I32: return 4;
    case MT_F16:
    case MT_BF16:
    case MT_I16: return 2;
    default: return 1;
    }
}

const char *mt_dtype_name(enum mt_dtype t) {
    static const char *const names[] = {"F32", "F16", "BF16", "F64",  "I64",  "I32",  "I16",
                                        "I8",  "U8",  "BOOL", "Q8_0", "Q4_K", "Q5_K", "Q6_K"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

int mt_dtype_is_float(enum mt_dtype t) {
    return t == MT_F32 || t == MT_F16 || t == MT_BF16 || t == MT_F64;
}

char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

vkasr_status read_small_file(const char *path, int missing_is_model_error, char **out, size_t *len, struct err *e) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && missing_is_model_error)
            return err_set(e, VKASR_ERR_MODEL, "%s: missing (required in a model directory)", path);
        return err_set(e, VKASR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    }
    struct stat sb;
    vkasr_status st = VKASR_OK;
    char *buf = NULL;
    if (fstat(fd, &sb) != 0) {
        st = err_set(e, VKASR_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = err_set(e, VKASR_ERR_MODEL, "%s: not a regular file", path);
    } else if ((uint64_t)sb.st_size > MODEL_MAX_JSON_BYTES) {
        st = err_set(e, VKASR_ERR_MODEL, "%s: %lld bytes is larger than the %u MB accepted for a JSON file", path,
                     (long long)sb.st_size, MODEL_MAX_JSON_BYTES >> 20);
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory reading '%s'", path);
    } else {
        size_t got = 0, want = (size_t)sb.st_size;
        while (got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                st = err_set(e, VKASR_ERR_IO, "cannot read '%s': %s", path, r < 0 ? strerror(errno) : "file shrank");
                break;
            }
            got += (size_t)r;
        }
        buf[got] = '\0';
        *len = got;
    }
    close(fd);
    if (st != VKASR_OK)
        free(buf);
    else
        *out = buf;
    return st;
}

/* Records a mapping (or a caller's memory image: borrowed, never unmapped) in mf. */
static vkasr_status add_map(struct model_file *mf, void *p, uint64_t size, const char *path, bool borrowed, int *idx,
                            struct err *e) {
    int n = mf->nmaps;
    void **maps = realloc(mf->maps, (size_t)(n + 1) * sizeof *maps);
    if (maps)
        mf->maps = maps;
    uint64_t *sizes = maps ? realloc(mf->map_sizes, (size_t)(n + 1) * sizeof *sizes) : NULL;
    if (sizes)
        mf->map_sizes = sizes;
    char **paths = sizes ? realloc(mf->map_paths, (size_t)(n + 1) * sizeof *paths) : NULL;
    if (paths)
        mf->map_paths = paths;
    bool *bor = paths ? realloc(mf->map_borrowed, (size_t)(n + 1) * sizeof *bor) : NULL;
    if (bor)
        mf->map_borrowed = bor;
    char *copy = bor ? strdup(path) : NULL;
    if (!copy)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    mf->maps[n] = p;
    mf->map_sizes[n] = size;
    mf->map_paths[n] = copy;
    mf->map_borrowed[n] = borrowed;
    mf->nmaps = n + 1;
    *idx = n;
    return VKASR_OK;
}

vkasr_status model_map_file(struct model_file *mf, const char *path, int *idx, struct err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, VKASR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int er = errno;
        close(fd);
        return err_set(e, VKASR_ERR_IO, "cannot stat '%s': %s", path, strerror(er));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(e, VKASR_ERR_MODEL, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return err_set(e, VKASR_ERR_MODEL, "%s: empty file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return err_set(e, VKASR_ERR_MODEL, "%s: too large to map on this system", path);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int er = errno;
    close(fd);
    if (p == MAP_FAILED)
        return err_set(e, VKASR_ERR_IO, "cannot map '%s': %s", path, strerror(er));
    vkasr_status st = add_map(mf, p, (uint64_t)sb.st_size, path, false, idx, e);
    if (st != VKASR_OK)
        munmap(p, (size_t)sb.st_size);
    return st;
}

vkasr_status model_map_memory(struct model_file *mf, const void *data, size_t size, const char *name, int *idx,
                              struct err *e) {
    if (!data || size == 0)
        return err_set(e, VKASR_ERR_MODEL, "%s: empty file", name);
    return add_map(mf, (void *)(uintptr_t)data, (uint64_t)size, name, true, idx, e);
}

vkasr_status model_add_tensor(struct model_file *mf, const char *name, size_t name_len, enum mt_dtype type, int nd,
                              const int64_t *ne, const void *data, uint64_t nbytes, int map, struct err *e) {
    int n = mf->ntensors;
    if (n >= MODEL_MAX_TENSORS)
        return err_set(e, VKASR_ERR_MODEL, "%s: more than %d tensors", map >= 0 ? mf->map_paths[map] : mf->path,
                       MODEL_MAX_TENSORS);
    /* capacity grows by doubling: 16, 32, 64, ... (reallocated when n reaches a power of two >= 16) */
    if (n == 0 || (n >= 16 && (n & (n - 1)) == 0)) {
        size_t cap = n == 0 ? 16 : (size_t)n * 2;
        struct model_tensor *t = realloc(mf->tensors, cap * sizeof *t);
        if (!t)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        mf->tensors = t;
    }
    struct model_tensor *t = &mf->tensors[n];
    memset(t, 0, sizeof *t);
    t->name = malloc(name_len + 1);
    if (!t->name)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    memcpy(t->name, name, name_len);
    t->name[name_len] = '\0';
    t->type = type;
    t->nd = nd;
    for (int i = 0; i < nd; i++)
        t->ne[i] = ne[i];
    t->data = data;
    t->nbytes = nbytes;
    t->map = map;
    mf->ntensors = n + 1;
    return VKASR_OK;
}

const char *shape_str(char *buf, size_t cap, int nd, const int64_t *ne) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

const char *model_tensor_file(const struct model_file *mf, const struct model_tensor *t) {
    return t && t->map >= 0 && t->map < mf->nmaps ? mf->map_paths[t->map] : mf->path;
}

void model_prefault(const struct model_file *mf) {
#ifdef MADV_POPULATE_READ
    for (int i = 0; i < mf->nmaps; i++)
        if (!mf->map_borrowed[i])
            madvise(mf->maps[i], (size_t)mf->map_sizes[i], MADV_POPULATE_READ);
#else
    (void)mf;
#endif
}

const struct model_tensor *model_find(const struct model_file *mf, const char *name) {
    if (!mf || !name)
        return NULL;
    if (mf->by_name && mf->nby_name == mf->ntensors) {
        int lo = 0, hi = mf->ntensors;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            int c = strcmp(name, mf->tensors[mf->by_name[mid]].name);
            if (c == 0)
                return &mf->tensors[mf->by_name[mid]];
            if (c < 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        return NULL;
    }
    for (int i = 0; i < mf->ntensors; i++) /* while loading, before the index exists */
        if (strcmp(mf->tensors[i].name, name) == 0)
            return &mf->tensors[i];
    return NULL;
}

struct name_idx {
    const char *name;
    int idx;
};

static int name_idx_cmp(const void *a, const void *b) {
    return strcmp(((const struct name_idx *)a)->name, ((const struct name_idx *)b)->name);
}

vkasr_status model_index_names(struct model_file *mf, const char *src, struct err *e) {
    free(mf->by_name);
    mf->by_name = NULL;
    mf->nby_name = 0;
    int n = mf->ntensors;
    struct name_idx *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    int *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!v || !idx) {
        free(v);
        free(idx);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        v[i].name = mf->tensors[i].name;
        v[i].idx = i;
    }
    qsort(v, (size_t)n, sizeof *v, name_idx_cmp);
    for (int i = 0; i < n; i++) {
        if (i > 0 && strcmp(v[i - 1].name, v[i].name) == 0) {
            vkasr_status st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' is defined twice", src, v[i].name);
            free(v);
            free(idx);
            return st;
        }
        idx[i] = v[i].idx;
    }
    free(v);
    mf->by_name = idx;
    mf->nby_name = n;
    return VKASR_OK;
}

void model_free_tensors(struct model_tensor *t, int n) {
    for (int i = 0; i < n; i++) {
        free(t[i].name);
        free(t[i].owned);
    }
    free(t);
}

int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

bool model_is_decoder_matrix(const char *name) {
    static const char *const exact[] = {"decoder.decoder_projector.weight", "encoder_projector.weight",
                                        "joint.head.weight"};
    if (!name)
        return false;
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (strcmp(name, exact[i]) == 0)
            return true;
    int layer, end = 0;
    return (sscanf(name, "decoder.lstm.weight_ih_l%d%n", &layer, &end) == 1 ||
            sscanf(name, "decoder.lstm.weight_hh_l%d%n", &layer, &end) == 1) &&
           end > 0 && name[end] == '\0';
}

bool model_is_matrix_weight(const char *name) {
    /* Encoder matrices only: the heads (CTC, projectors, joint) stay f32 — spec §10: the argmax
     * decisions are the fragile part, and those weights are a small share of the model. */
    static const char *const exact[] = {"encoder.subsampling.layers.3.weight", "encoder.subsampling.layers.6.weight",
                                        "encoder.subsampling.linear.weight"};
    static const char *const layer_suffix[] = {
        ".feed_forward1.linear1.weight", ".feed_forward1.linear2.weight", ".feed_forward2.linear1.weight",
        ".feed_forward2.linear2.weight", ".self_attn.q_proj.weight",      ".self_attn.k_proj.weight",
        ".self_attn.v_proj.weight",      ".self_attn.o_proj.weight",      ".self_attn.relative_k_proj.weight",
        ".conv.pointwise_conv1.weight",  ".conv.pointwise_conv2.weight"};
    if (!name)
        return false;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(name, exact[i]) == 0)
            return true;
    if (strncmp(name, "encoder.layers.", 15) != 0)
        return false;
    for (size_t i = 0; i < sizeof layer_suffix / sizeof layer_suffix[0]; i++)
        if (ends_with(name, layer_suffix[i]))
            return true;
    return false;
}
