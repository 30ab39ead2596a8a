/* nemo.c — opening a .nemo: the archive's members, model_config.yaml mapped onto the configuration,
 * the SentencePiece tokenizer, model_weights.ckpt's state dict renamed to vkasr's canonical names, and
 * the check that every tensor the configuration needs is there with its shape. Handing the result to
 * the model loader (model_prepare and the backends) is the caller's job.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_file.h"
#include "model_internal.h"
#include "model_schema.h"
#include "nemo_internal.h"

void nemo_close(struct nemo_checkpoint *ck) {
    if (!ck)
        return;
    nemo_tensors_free(ck->tensors, ck->ntensors);
    tok_free(&ck->tok);
    model_langs_free(&ck->langs);
    free(ck->model_class);
    if (ck->archive) {
        nemo_archive_free(ck->archive);
        free(ck->archive);
    }
    if (ck->map)
        munmap(ck->map, ck->map_size);
    memset(ck, 0, sizeof *ck);
}

const struct nemo_tensor *nemo_find(const struct nemo_checkpoint *ck, const char *name) {
    for (int i = 0; i < ck->ntensors; i++)
        if (!strcmp(ck->tensors[i].name, name))
            return &ck->tensors[i];
    return NULL;
}

/* The tokenizer member: tokenizer.model_path's file, else the one member named *tokenizer.model. */
static const struct nemo_member *find_tokenizer(const struct nemo_archive *a, const char *path) {
    if (path) {
        const struct nemo_member *m = nemo_archive_find(a, path);
        if (m)
            return m;
    }
    const struct nemo_member *found = NULL;
    for (int i = 0; i < a->n; i++) {
        size_t l = strlen(a->m[i].name);
        if (l >= 15 && !strcmp(a->m[i].name + l - 15, "tokenizer.model")) {
            if (found)
                return NULL;
            found = &a->m[i];
        }
    }
    return found;
}

static vkasr_status rename_tensors(const char *src, struct nemo_checkpoint *ck, struct err *e) {
    for (int i = 0; i < ck->ntensors; i++) {
        bool unknown = false;
        char *n = nemo_map_name(ck->tensors[i].name, &unknown);
        if (!n && unknown)
            return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' belongs to no module vkasr implements", src,
                           ck->tensors[i].name);
        if (!n)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        free(ck->tensors[i].name);
        ck->tensors[i].name = n;
    }
    for (int i = 0; i < ck->ntensors; i++)
        for (int j = i + 1; j < ck->ntensors; j++)
            if (!strcmp(ck->tensors[i].name, ck->tensors[j].name))
                return err_set(e, VKASR_ERR_MODEL, "%s: two tensors map to '%s'", src, ck->tensors[i].name);
    return VKASR_OK;
}

static vkasr_status check_one(const char *src, const char *cfg_src, const struct nemo_checkpoint *ck,
                              const struct tensor_spec *s, struct err *e) {
    const struct nemo_tensor *t = nemo_find(ck, s->name);
    char a[96], b[96];
    if (!t)
        return err_set(e, VKASR_ERR_MODEL, "%s: missing tensor '%s' (expected shape %s from %s: %s)", src, s->name,
                       shape_str(a, sizeof a, s->nd, s->ne), cfg_src, s->why);
    bool same = t->nd == s->nd;
    for (int i = 0; same && i < s->nd; i++)
        same = t->ne[i] == s->ne[i];
    if (!same)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' has shape %s, expected %s (from %s: %s)", src, s->name,
                       shape_str(a, sizeof a, t->nd, t->ne), shape_str(b, sizeof b, s->nd, s->ne), cfg_src, s->why);
    if (!mt_dtype_is_float(t->type))
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' has dtype %s, expected a floating-point type", src,
                       s->name, mt_dtype_name(t->type));
    return VKASR_OK;
}

/* Every tensor each head needs, with its shape (the HF layout of model_expected_tensors). */
static vkasr_status check_tensors(const char *src, const char *cfg_src, const struct nemo_checkpoint *ck,
                                  struct err *e) {
    for (int pass = 0; pass < 2; pass++) {
        struct model_config c = ck->cfg;
        if (pass == 1) {
            if (!ck->has_ctc || c.head == VKASR_HEAD_CTC)
                break;
            c.head = VKASR_HEAD_CTC; /* a hybrid's aux CTC head, over the same encoder */
        }
        struct tensor_spec *sp = NULL;
        int n = 0;
        TRY(model_expected_tensors(&c, 0, &sp, &n, e));
        vkasr_status st = VKASR_OK;
        for (int i = 0; i < n && st == VKASR_OK; i++)
            if (pass == 0 || !strncmp(sp[i].name, "ctc_head.", 9))
                st = check_one(src, cfg_src, ck, &sp[i], e);
        free(sp);
        TRY(st);
    }
    if (!ck->has_ctc && nemo_find(ck, "ctc_head.weight"))
        return err_set(e, VKASR_ERR_MODEL, "%s: a CTC head's tensors in a %s model", src, ck->model_class);
    return VKASR_OK;
}

static vkasr_status open_image(const char *name, const void *data, size_t size, struct nemo_checkpoint *ck,
                               struct err *e) {
    ck->archive = calloc(1, sizeof(struct nemo_archive));
    if (!ck->archive)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    struct nemo_archive *a = ck->archive;
    TRY(nemo_archive_read(name, data, size, a, e));
    char src[1200], cfg_src[1200];
    const struct nemo_member *cm = nemo_archive_find(a, "model_config.yaml");
    const struct nemo_member *wm = nemo_archive_find(a, "model_weights.ckpt");
    if (!cm || !wm)
        return err_set(e, VKASR_ERR_MODEL, "%s: no %s member (not a .nemo model archive)", name,
                       !cm ? "model_config.yaml" : "model_weights.ckpt");
    snprintf(cfg_src, sizeof cfg_src, "%s: model_config.yaml", name);
    char *tpath = NULL;
    TRY(nemo_config_parse(cfg_src, (const char *)cm->data, (size_t)cm->size, ck, &tpath, e));
    const struct nemo_member *tm = find_tokenizer(a, tpath);
    vkasr_status st = VKASR_OK;
    if (!tm)
        st = err_set(e, VKASR_ERR_MODEL, "%s: no tokenizer member%s%s%s (a SentencePiece *tokenizer.model)", name,
                     tpath ? " '" : "", tpath ? tpath : "", tpath ? "'" : "");
    free(tpath);
    TRY(st);
    snprintf(src, sizeof src, "%s: %s", name, tm->name);
    TRY(spm_parse(src, tm->data, (size_t)tm->size, &ck->tok, e));
    if (ck->tok.n != ck->cfg.vocab_size)
        return err_set(e, VKASR_ERR_MODEL, "%s has %d pieces but model_config.yaml's vocabulary has %d", src,
                       (int)ck->tok.n, ck->cfg.vocab_size);
    snprintf(src, sizeof src, "%s: model_weights.ckpt", name);
    TRY(nemo_ckpt_read(src, wm->data, wm->size, &ck->tensors, &ck->ntensors, e));
    TRY(rename_tensors(src, ck, e));
    if (ck->cfg.n_prompts > 0) { /* the prompt MLP's width: its first Linear's outputs */
        const struct nemo_tensor *w1 = nemo_find(ck, "prompt_projector.linear_1.weight");
        if (!w1 || w1->nd != 2 || w1->ne[0] < 1 || w1->ne[0] > (1 << 20))
            return err_set(e, VKASR_ERR_MODEL,
                           "%s: %s tensor 'prompt_kernel.0.weight' (the language prompt's first Linear, "
                           "[hidden, d_model + num_prompts])",
                           src, w1 ? "a malformed" : "no");
        ck->cfg.prompt_hidden = (int)w1->ne[0];
    } else if (nemo_find(ck, "prompt_projector.linear_1.weight")) {
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor 'prompt_kernel.0.weight' in a %s model (no num_prompts)", src,
                       ck->model_class);
    }
    return check_tensors(src, cfg_src, ck, e);
}

vkasr_status nemo_open_memory(const void *data, size_t size, const char *name, struct nemo_checkpoint *out,
                              struct err *e) {
    memset(out, 0, sizeof *out);
    vkasr_status st = open_image(name, data, size, out, e);
    if (st != VKASR_OK)
        nemo_close(out);
    return st;
}

vkasr_status nemo_open(const char *path, struct nemo_checkpoint *out, struct err *e) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, VKASR_ERR_IO, "%s: cannot open", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd);
        return err_set(e, VKASR_ERR_MODEL, "%s: not a regular, non-empty file", path);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return err_set(e, VKASR_ERR_IO, "%s: cannot map the file", path);
    vkasr_status st = open_image(path, m, (size_t)sb.st_size, out, e);
    out->map = m;
    out->map_size = (size_t)sb.st_size;
    if (st != VKASR_OK)
        nemo_close(out);
    return st;
}
