/* model.c — a model on the host: opening (HF directory or GGUF file: the readers, then validation)
 * and closing. The tensor table lives in model_file.c, the schema in model_schema.c, the canonical
 * transform in model_prepare.c; the formats in safetensors.c, hf_config.c, tokenizer.c and gguf.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_file.h"
#include "model_internal.h"
#include "model_schema.h"

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
    free(mf->path);
    free(mf);
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
