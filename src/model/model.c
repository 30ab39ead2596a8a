/* model.c — a model on the host: opening (HF directory or GGUF file), the tensor table and file
 * mappings, validation of the tensor set against the configuration, the canonical kernel-layout
 * transform (model_prepare: BN folding, reshapes, the subsampling column permutation, LSTM bias sums,
 * widening to f32) and closing. The file formats themselves live in safetensors.c, hf_config.c,
 * tokenizer.c and gguf.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/half.h"
#include "model_internal.h"

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

static void free_tensors(struct model_tensor *t, int n) {
    for (int i = 0; i < n; i++) {
        free(t[i].name);
        free(t[i].owned);
    }
    free(t);
}

void model_close(struct model_file *mf) {
    if (!mf)
        return;
    free(mf->by_name);
    free_tensors(mf->tensors, mf->ntensors);
    for (int i = 0; i < mf->nmaps; i++) {
        if (!mf->map_borrowed[i])
            munmap(mf->maps[i], (size_t)mf->map_sizes[i]);
        free(mf->map_paths[i]);
    }
    free(mf->maps);
    free(mf->map_sizes);
    free(mf->map_paths);
    free(mf->map_borrowed);
    tok_free(&mf->tok);
    free(mf->path);
    free(mf);
}

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

vkasr_status model_expected_tensors(const struct model_config *c, int canonical, struct tensor_spec **out, int *count,
                                    struct err *e) {
    struct tlist L = {0};
    const int64_t C = c->sub_channels, F = c->n_mels / 8, D = c->d_model, FF = c->ff_size, H = c->n_heads;
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
    add(&L, "hidden_size, subsampling_conv_channels * num_mel_bins / 8", 2, D, C * F, 0, 0,
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
        } else {
            add(&L, "hidden_size, conv_kernel_size", 3, D, 1, K, 0, LP "conv.depthwise_conv.weight", l);
            if (cb)
                add(&L, wD, 1, D, 0, 0, 0, LP "conv.depthwise_conv.bias", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.weight", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.bias", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.running_mean", l);
            add(&L, wD, 1, D, 0, 0, 0, LP "conv.norm.running_var", l);
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
        } else if (!same_shape(t, &sp[i])) {
            st = err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' has shape %s, expected %s (from %s: %s)",
                         model_tensor_file(mf, t), t->name, shape_str(a, sizeof a, t->nd, t->ne),
                         shape_str(b, sizeof b, sp[i].nd, sp[i].ne), cfgsrc, sp[i].why);
        } else if (!gg && !mt_dtype_is_float(t->type)) {
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s' has dtype %s, expected a floating-point type (F32, F16, BF16, F64)",
                         model_tensor_file(mf, t), t->name, mt_dtype_name(t->type));
        } else if (gg && t->type != MT_F32 &&
                   !((t->type == MT_F16 || MT_IS_QUANT(t->type)) && model_is_matrix_weight(t->name))) {
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: tensor '%s' has type %s; only matrix weights may be F16 or quantized, the rest F32",
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
    } extra[4];
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
    for (int i = 0; i < 4; i++)
        if (extra[i].bad)
            return err_set(e, VKASR_ERR_MODEL, "%s: %s contradicts the weights: tensor '%s' is present in %s", cfgsrc,
                           extra[i].field, extra[i].tensor, model_tensor_file(mf, model_find(mf, extra[i].tensor)));
    return VKASR_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Open                                                                                           */

static vkasr_status open_hf(struct model_file *mf, const char *dir, struct err *e) {
    TRY(hf_config_load(dir, &mf->cfg, e));
    TRY(st_load_dir(mf, dir, e));
    TRY(model_validate(mf, e));
    char *tp = path_join(dir, "tokenizer.json");
    if (!tp)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    vkasr_status st = tok_load_hf_json(tp, mf->cfg.vocab_size, &mf->tok, e);
    free(tp);
    return st;
}

vkasr_status model_open(const char *path, struct model_file **out, struct err *e) {
    if (!out)
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_open: out is NULL");
    *out = NULL;
    if (!path || !path[0])
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_open: empty path");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return err_set(e, VKASR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct model_file *mf = calloc(1, sizeof *mf);
    if (!mf || !(mf->path = strdup(path))) {
        free(mf);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    vkasr_status st;
    if (S_ISDIR(sb.st_mode)) {
        st = open_hf(mf, path, e);
    } else {
        unsigned char magic[4] = {0};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd >= 0 ? read(fd, magic, 4) : -1;
        int er = errno;
        if (fd >= 0)
            close(fd);
        if (fd < 0 || got < 0)
            st = err_set(e, VKASR_ERR_IO, "cannot read '%s': %s", path, strerror(er));
        else if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
            st = gguf_load(mf, path, e);
            if (st == VKASR_OK)
                st = model_validate(mf, e);
        } else
            st = err_set(e, VKASR_ERR_MODEL,
                         "%s: not a model: expected a Hugging Face model directory (config.json, model.safetensors, "
                         "tokenizer.json) or a GGUF file",
                         path);
    }
    if (st != VKASR_OK) {
        model_close(mf);
        return st;
    }
    *out = mf;
    return VKASR_OK;
}

vkasr_status model_open_gguf_memory(const void *data, size_t size, const char *name, struct model_file **out,
                                    struct err *e) {
    if (!out)
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_open_gguf_memory: out is NULL");
    *out = NULL;
    if (!name)
        name = "(memory)";
    struct model_file *mf = calloc(1, sizeof *mf);
    if (!mf || !(mf->path = strdup(name))) {
        free(mf);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    int map;
    vkasr_status st = model_map_memory(mf, data, size, name, &map, e);
    if (st == VKASR_OK)
        st = gguf_parse(mf, map, e);
    if (st == VKASR_OK)
        st = model_validate(mf, e);
    if (st != VKASR_OK) {
        model_close(mf);
        return st;
    }
    *out = mf;
    return VKASR_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* The canonical transform                                                                        */

static double elem(const struct model_tensor *t, uint64_t i) {
    const uint8_t *p = (const uint8_t *)t->data + i * mt_dtype_size(t->type);
    switch (t->type) {
    case MT_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case MT_F64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case MT_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return half_to_float(h);
    }
    case MT_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return bf16_to_float(h);
    }
    default: return 0.0; /* int tensors never reach here (validated as floating point) */
    }
}

static uint64_t numel_of(int nd, const int64_t *ne) {
    uint64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= (uint64_t)ne[i];
    return n;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Fills o (f32, shape from its spec) from the HF tensors of mf. */
static vkasr_status make_canonical(const struct model_file *mf, struct model_tensor *o, struct err *e) {
    const struct model_config *c = &mf->cfg;
    uint64_t n = numel_of(o->nd, o->ne);
    const struct model_tensor *src = model_find(mf, o->name);
    int lstm_k;
    char tail;

    /* Plain reshape of f32 data: keep pointing into the mapping when it is aligned for float access. */
    if (src && src->type == MT_F32 && ((uintptr_t)src->data % 4) == 0 &&
        strcmp(o->name, "encoder.subsampling.linear.weight") != 0 &&
        !ends_with(o->name, "conv.depthwise_conv.weight") && !ends_with(o->name, "conv.depthwise_conv.bias")) {
        o->data = src->data;
        o->nbytes = n * 4;
        o->map = src->map;
        return VKASR_OK;
    }
    float *dst = malloc(n ? n * 4 : 4);
    if (!dst)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory preparing '%s'", o->name);
    o->owned = dst;
    o->data = dst;
    o->nbytes = n * 4;

    if (strcmp(o->name, "encoder.subsampling.linear.weight") == 0) {
        /* HF flattens the subsampling output [C, T, F] per time step as c*F + f; the engine keeps it
         * channels-last (f*C + c), so the columns move: W'[d][f*C + c] = W[d][c*F + f]. */
        const int64_t D = c->d_model, C = c->sub_channels, F = c->n_mels / 8;
        for (int64_t d = 0; d < D; d++)
            for (int64_t f = 0; f < F; f++)
                for (int64_t ch = 0; ch < C; ch++)
                    dst[d * F * C + f * C + ch] = (float)elem(src, (uint64_t)(d * C * F + ch * F + f));
        return VKASR_OK;
    }
    if (ends_with(o->name, "conv.depthwise_conv.weight") || ends_with(o->name, "conv.depthwise_conv.bias")) {
        /* BatchNorm (eval) folded into the depthwise conv, in double:
         * s = gamma / sqrt(var + eps), w' = w * s, b' = (b - mean) * s + beta  (spec §4.3) */
        char pre[96], nm[128];
        size_t plen = strlen(o->name) -
                      (ends_with(o->name, ".weight") ? strlen("depthwise_conv.weight") : strlen("depthwise_conv.bias"));
        snprintf(pre, sizeof pre, "%.*s", (int)plen, o->name); /* "encoder.layers.N.conv." */
        const struct model_tensor *w, *b, *g, *be, *mu, *var;
        snprintf(nm, sizeof nm, "%sdepthwise_conv.weight", pre);
        w = model_find(mf, nm);
        snprintf(nm, sizeof nm, "%sdepthwise_conv.bias", pre);
        b = model_find(mf, nm);
        snprintf(nm, sizeof nm, "%snorm.weight", pre);
        g = model_find(mf, nm);
        snprintf(nm, sizeof nm, "%snorm.bias", pre);
        be = model_find(mf, nm);
        snprintf(nm, sizeof nm, "%snorm.running_mean", pre);
        mu = model_find(mf, nm);
        snprintf(nm, sizeof nm, "%snorm.running_var", pre);
        var = model_find(mf, nm);
        CHECK_OR_RETURN(e, w && g && be && mu && var); /* model_validate guarantees them */
        const int64_t D = c->d_model, K = c->conv_kernel;
        const int weight = ends_with(o->name, ".weight");
        for (int64_t ch = 0; ch < D; ch++) {
            double v = elem(var, (uint64_t)ch) + 1e-5;
            if (!(v > 0.0))
                return err_set(e, VKASR_ERR_MODEL,
                               "%s: tensor '%snorm.running_var' channel %lld is %g: cannot fold "
                               "the batch norm",
                               model_tensor_file(mf, var), pre, (long long)ch, v - 1e-5);
            double s = elem(g, (uint64_t)ch) / sqrt(v);
            if (weight) {
                for (int64_t k = 0; k < K; k++)
                    dst[ch * K + k] = (float)(elem(w, (uint64_t)(ch * K + k)) * s);
            } else {
                double bias = b && c->conv_bias ? elem(b, (uint64_t)ch) : 0.0;
                dst[ch] = (float)((bias - elem(mu, (uint64_t)ch)) * s + elem(be, (uint64_t)ch));
            }
        }
        return VKASR_OK;
    }
    if (sscanf(o->name, "decoder.lstm.bias_l%d%c", &lstm_k, &tail) == 1) {
        /* PyTorch adds both LSTM biases every step; the engine adds their sum once */
        char ih[64], hh[64];
        snprintf(ih, sizeof ih, "decoder.lstm.bias_ih_l%d", lstm_k);
        snprintf(hh, sizeof hh, "decoder.lstm.bias_hh_l%d", lstm_k);
        const struct model_tensor *a = model_find(mf, ih), *b = model_find(mf, hh);
        CHECK_OR_RETURN(e, a && b);
        for (uint64_t i = 0; i < n; i++)
            dst[i] = (float)(elem(a, i) + elem(b, i));
        return VKASR_OK;
    }
    CHECK_OR_RETURN(e, src && numel_of(src->nd, src->ne) == n);
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (float)elem(src, i);
    return VKASR_OK;
}

vkasr_status model_prepare(struct model_file *mf, struct err *e) {
    if (!mf)
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_prepare: NULL model");
    if (mf->canonical)
        return VKASR_OK;
    struct tensor_spec *sp = NULL;
    int n = 0;
    TRY(model_expected_tensors(&mf->cfg, 1, &sp, &n, e));
    struct model_tensor *nt = calloc((size_t)(n ? n : 1), sizeof *nt);
    vkasr_status st = nt ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    int done = 0;
    for (; st == VKASR_OK && done < n; done++) {
        struct model_tensor *o = &nt[done];
        o->name = strdup(sp[done].name);
        o->type = MT_F32;
        o->nd = sp[done].nd;
        memcpy(o->ne, sp[done].ne, sizeof o->ne);
        o->map = -1;
        st = o->name ? make_canonical(mf, o, e) : err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    free(sp);
    if (st != VKASR_OK) {
        if (nt)
            free_tensors(nt, done);
        return st;
    }
    /* Everything not in the canonical set (BN statistics, num_batches_tracked, the separate LSTM biases,
     * unexpected extras) is dropped; the mappings stay, the new tensors may point into them. */
    free_tensors(mf->tensors, mf->ntensors);
    mf->tensors = nt;
    mf->ntensors = n;
    mf->canonical = true;
    return model_index_names(mf, mf->path, e);
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
