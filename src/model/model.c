/* model.c — a model on the host: opening (HF directory, GGUF file or .nemo checkpoint: the readers,
 * the choice of head, then validation) and closing. The tensor table lives in model_file.c, the schema
 * in model_schema.c, the canonical transform in model_prepare.c; the formats in safetensors.c,
 * hf_config.c, tokenizer.c, gguf.c and nemo*.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub.h"
#include "model_file.h"
#include "model_internal.h"
#include "model_schema.h"
#include "nemo.h"

void model_close(struct model_file *mf) {
    if (!mf)
        return;
    free(mf->by_name);
    model_free_tensors(mf->tensors, mf->ntensors);
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
    model_langs_free(&mf->langs);
    nemo_model_close(mf->nemo); /* after the maps: one of them is the checkpoint's, borrowed */
    free(mf->path);
    free(mf);
}

/* ---------------------------------------------------------------------------------------------- */
/* Open                                                                                           */

/* transformers' NemotronAsrStreaming names its subsampling convs as a stem and two depthwise-separable
 * stages; Parakeet's (vkasr's) names number them as NeMo's Sequential does. */
static vkasr_status rename_streaming(struct model_file *mf, struct err *e) {
    static const char *const from[] = {"encoder.subsampling.conv_in.", "encoder.subsampling.layers.0.depthwise_conv.",
                                       "encoder.subsampling.layers.0.pointwise_conv.",
                                       "encoder.subsampling.layers.1.depthwise_conv.",
                                       "encoder.subsampling.layers.1.pointwise_conv."};
    static const char *const to[] = {"encoder.subsampling.layers.0.", "encoder.subsampling.layers.2.",
                                     "encoder.subsampling.layers.3.", "encoder.subsampling.layers.5.",
                                     "encoder.subsampling.layers.6."};
    for (int i = 0; i < mf->ntensors; i++)
        for (int k = 0; k < 5; k++) {
            const size_t n = strlen(from[k]);
            if (strncmp(mf->tensors[i].name, from[k], n) != 0)
                continue;
            char *nm = malloc(strlen(to[k]) + strlen(mf->tensors[i].name + n) + 1);
            if (!nm)
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
            strcpy(nm, to[k]);
            strcat(nm, mf->tensors[i].name + n);
            free(mf->tensors[i].name);
            mf->tensors[i].name = nm;
            break;
        }
    mf->nby_name = 0; /* the name index is rebuilt after the renaming */
    return VKASR_OK;
}

static vkasr_status open_hf(struct model_file *mf, const char *dir, struct err *e) {
    TRY(hf_config_load(dir, &mf->cfg, e));
    TRY(hf_langs_load(dir, &mf->cfg, &mf->langs, e));
    TRY(st_load_dir(mf, dir, e));
    if (mf->cfg.n_ctx > 0) /* only NemotronAsrStreaming configurations carry a chunked menu */
        TRY(rename_streaming(mf, e));
    TRY(model_validate(mf, e));
    char *tp = path_join(dir, "tokenizer.json");
    if (!tp)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    vkasr_status st = tok_load_hf_json(tp, mf->cfg.vocab_size, &mf->tok, e);
    free(tp);
    return st;
}

static const char *head_name(int h) {
    return h == VKASR_HEAD_TDT ? "TDT" : h == VKASR_HEAD_RNNT ? "RNN-T" : h == VKASR_HEAD_CTC ? "CTC" : "unknown";
}

/* A file's format by its first bytes: GGUF, a tar (ustar magic at 257) or gzip (a .nemo), else unknown. */
enum file_kind { FILE_UNKNOWN, FILE_GGUF, FILE_NEMO };

static vkasr_status sniff(const char *path, enum file_kind *kind, struct err *e) {
    unsigned char b[512] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    int er = errno;
    if (fd >= 0)
        close(fd);
    if (fd < 0 || got < 0)
        return err_set(e, VKASR_ERR_IO, "cannot read '%s': %s", path, strerror(er));
    if (got >= 4 && memcmp(b, "GGUF", 4) == 0)
        *kind = FILE_GGUF;
    else if ((got >= 2 && b[0] == 0x1f && b[1] == 0x8b) || (got >= 262 && memcmp(b + 257, "ustar", 5) == 0) ||
             ends_with(path, ".nemo"))
        *kind = FILE_NEMO;
    else
        *kind = FILE_UNKNOWN;
    return VKASR_OK;
}

static vkasr_status open_any(struct model_file *mf, const char *path, bool dir, int head, struct err *e) {
    enum file_kind kind = FILE_UNKNOWN;
    if (dir)
        TRY(open_hf(mf, path, e));
    else {
        TRY(sniff(path, &kind, e));
        if (kind == FILE_GGUF)
            TRY(gguf_load(mf, path, head, e));
        else if (kind == FILE_NEMO)
            TRY(nemo_model_open(mf, path, head, e));
        else
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: not a model: expected a Hugging Face model directory (config.json, model.safetensors, "
                           "tokenizer.json), a GGUF file or a NeMo .nemo checkpoint",
                           path);
    }
    if (kind != FILE_NEMO && head != MODEL_HEAD_AUTO && head != mf->cfg.head)
        return err_set(e, VKASR_ERR_MODEL, "%s has only a %s head; the %s head asked for is not there", path,
                       head_name(mf->cfg.head), head_name(head));
    return dir ? VKASR_OK : model_validate(mf, e);
}

vkasr_status model_open_head(const char *path, int head, struct model_file **out, struct err *e) {
    if (!out)
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_open: out is NULL");
    *out = NULL;
    if (!path || !path[0])
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_open: empty path");
    if (head != MODEL_HEAD_AUTO && head != VKASR_HEAD_TDT && head != VKASR_HEAD_RNNT && head != VKASR_HEAD_CTC)
        return err_set(e, VKASR_ERR_INVALID_ARG, "model_open: unknown head %d", head);
    struct stat sb;
    char *named = NULL; /* a model name's file in the Hugging Face cache (hub_cache.c) */
    if (stat(path, &sb) != 0) {
        int er = errno;
        vkasr_hub_model hm;
        struct err ignored = {0};
        if (er != ENOENT || hub_lookup(path, &hm, &ignored) != VKASR_OK)
            return err_set(e, VKASR_ERR_IO, "cannot open '%s': %s", path, strerror(er));
        if (hub_resolve(path, &named, e) != VKASR_OK) { /* a relative path with one '/' is a name's shape too */
            if (!hm.aliases[0] && !strchr(path, ':') && (ends_with(path, ".gguf") || ends_with(path, ".nemo")))
                err_prefix(e, "cannot open '%s': %s; as a model name", path, strerror(er));
            return e->code;
        }
        if (stat(named, &sb) != 0) {
            err_set(e, VKASR_ERR_IO, "cannot open '%s' (model '%s'): %s", named, path, strerror(errno));
            free(named);
            return e->code;
        }
        path = named;
    }
    struct model_file *mf = calloc(1, sizeof *mf);
    if (!mf || !(mf->path = strdup(path))) {
        free(mf);
        free(named);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    vkasr_status st = open_any(mf, path, S_ISDIR(sb.st_mode), head, e);
    free(named);
    if (st != VKASR_OK) {
        model_close(mf);
        return st;
    }
    *out = mf;
    return VKASR_OK;
}

vkasr_status model_open(const char *path, struct model_file **out, struct err *e) {
    return model_open_head(path, MODEL_HEAD_AUTO, out, e);
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
        st = gguf_parse(mf, map, MODEL_HEAD_AUTO, e);
    if (st == VKASR_OK)
        st = model_validate(mf, e);
    if (st != VKASR_OK) {
        model_close(mf);
        return st;
    }
    *out = mf;
    return VKASR_OK;
}
