/* nemo_model.c — a .nemo checkpoint handed to the model loader: the chosen head's tensors (in place in
 * the mapping, or in the reader's one copy for a compressed archive) and the tokenizer move into a
 * model_file, which keeps the checkpoint open until model_close. Preprocessor buffers are dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "model_file.h"
#include "nemo.h"
#include "nemo_internal.h"

static const char *head_name(int h) {
    return h == VKASR_HEAD_TDT ? "TDT" : h == VKASR_HEAD_RNNT ? "RNN-T" : h == VKASR_HEAD_CTC ? "CTC" : "unknown";
}

/* The head to load: the transducer unless CTC is asked for; a head the checkpoint lacks is refused. */
static vkasr_status choose_head(const char *path, const struct nemo_checkpoint *ck, int want, int *head,
                                struct err *e) {
    const int th = ck->has_transducer ? ck->cfg.head : -1;
    if (want == MODEL_HEAD_AUTO) {
        *head = ck->cfg.head;
        return VKASR_OK;
    }
    if ((want == VKASR_HEAD_CTC && ck->has_ctc) || (want != VKASR_HEAD_CTC && want == th)) {
        *head = want;
        return VKASR_OK;
    }
    if (th >= 0 && ck->has_ctc)
        return err_set(e, VKASR_ERR_MODEL, "%s (%s) has a %s head and a CTC head; the %s head asked for is not there",
                       path, ck->model_class, head_name(th), head_name(want));
    return err_set(e, VKASR_ERR_MODEL, "%s (%s) has only a %s head; the %s head asked for is not there", path,
                   ck->model_class, head_name(th >= 0 ? th : VKASR_HEAD_CTC), head_name(want));
}

/* Whether a (renamed) tensor belongs to the loaded model: not a preprocessor buffer (vkasr computes
 * the window and the filterbank itself), not the head left behind. */
static bool wanted(const char *name, int head) {
    if (!strncmp(name, "preprocessor.", 13))
        return false;
    bool ctc = !strncmp(name, "ctc_head.", 9);
    bool transducer = !strncmp(name, "decoder.", 8) || !strncmp(name, "joint.", 6) ||
                      !strncmp(name, "encoder_projector.", 18) || !strncmp(name, "prompt_projector.", 17);
    return head == VKASR_HEAD_CTC ? !transducer : !ctc;
}

vkasr_status nemo_model_open(struct model_file *mf, const char *path, int want, struct err *e) {
    struct nemo_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    mf->nemo = ck;
    TRY(nemo_open(path, ck, e));
    int head = MODEL_HEAD_AUTO;
    TRY(choose_head(path, ck, want, &head, e));
    mf->cfg = ck->cfg;
    if (head != mf->cfg.head && head == VKASR_HEAD_CTC) { /* a hybrid's CTC head: as a CTC model's config */
        struct model_config *c = &mf->cfg;
        c->head = VKASR_HEAD_CTC;
        c->pred_hidden = c->pred_layers = c->n_durations = c->max_symbols = 0;
        memset(c->durations, 0, sizeof c->durations);
    }
    /* the mapping, registered borrowed (ck unmaps it) so that messages name the file of its tensors */
    int map = -1;
    if (ck->map)
        TRY(model_map_memory(mf, ck->map, ck->map_size, path, &map, e));
    for (int i = 0; i < ck->ntensors; i++) {
        const struct nemo_tensor *t = &ck->tensors[i];
        if (!wanted(t->name, head))
            continue;
        const char *d = t->data;
        bool in_map = map >= 0 && !t->owned && d >= (const char *)ck->map && d < (const char *)ck->map + ck->map_size;
        TRY(model_add_tensor(mf, t->name, strlen(t->name), t->type, t->nd, t->ne, t->data, t->nbytes,
                             in_map ? map : -1, e));
    }
    mf->tok = ck->tok;
    memset(&ck->tok, 0, sizeof ck->tok);
    mf->langs = ck->langs;
    memset(&ck->langs, 0, sizeof ck->langs);
    return model_index_names(mf, path, e);
}

void nemo_model_close(void *nemo) {
    if (!nemo)
        return;
    nemo_close(nemo);
    free(nemo);
}
