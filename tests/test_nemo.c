/* test_nemo.c — the .nemo readers on tests/data/nemo (tools/fixtures/make_nemo.py): each checkpoint
 * built from an HF fixture maps to that fixture's configuration, tensors (byte for byte, after renaming)
 * and tokenizer pieces; tensors of an uncompressed archive are read in place, a gzip one's copied; the
 * small TDT model's fields and its strided buffer; each malformed file gives an error naming the reason;
 * model_open_head hands the chosen head of a checkpoint to the loader, and refuses a head it lacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "model/model_internal.h"
#include "model/nemo.h"
#include "model/nemo_internal.h"

static const char *data_dir = "";

static const char *data(const char *rel) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", data_dir, rel);
    return buf[k];
}

static void same_config(const struct model_config *a, const struct model_config *b, const char *what) {
#define F(x) EXPECT(a->x == b->x, "%s: " #x " %g vs HF %g", what, (double)a->x, (double)b->x)
    F(head); F(d_model); F(n_layers); F(n_heads); F(ff_size); F(conv_kernel); F(n_mels); F(sub_channels);
    F(sub_factor); F(xscaling); F(attention_bias); F(conv_bias); F(att_left); F(att_right); F(vocab_size);
    F(pred_hidden); F(pred_layers); F(n_durations); F(max_symbols); F(sample_rate); F(n_fft); F(win_length);
    F(hop_length); F(preemph);
#undef F
    for (int i = 0; i < a->n_durations && i < 16; i++)
        EXPECT(a->durations[i] == b->durations[i], "%s: duration %d", what, i);
}

/* Every tensor of the HF fixture (only_prefix: those starting with it) equals the .nemo's. */
static int same_tensors(const struct nemo_checkpoint *ck, const struct model_file *mf, const char *only_prefix,
                        const char *what) {
    int n = 0;
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *h = &mf->tensors[i];
        if (only_prefix && strncmp(h->name, only_prefix, strlen(only_prefix)) != 0)
            continue;
        const struct nemo_tensor *t = nemo_find(ck, h->name);
        EXPECT(t != NULL, "%s: tensor %s missing", what, h->name);
        if (!t)
            continue;
        int same = t->type == h->type && t->nd == h->nd && t->nbytes == h->nbytes;
        for (int d = 0; same && d < h->nd; d++)
            same = t->ne[d] == h->ne[d];
        EXPECT(same && memcmp(t->data, h->data, h->nbytes) == 0, "%s: tensor %s differs", what, h->name);
        n++;
    }
    return n;
}

static void same_tokenizer(const struct tokenizer *a, const struct tokenizer *b, const char *what) {
    EXPECT(a->n == b->n, "%s: %d pieces vs %d", what, (int)a->n, (int)b->n);
    for (int32_t i = 0; i < a->n && i < b->n; i++)
        EXPECT(!strcmp(a->piece[i], b->piece[i]) && a->type[i] == b->type[i], "%s: piece %d '%s' (%d) vs '%s' (%d)",
               what, (int)i, a->piece[i], a->type[i], b->piece[i], b->type[i]);
}

static int in_map(const struct nemo_checkpoint *ck, const void *p) {
    const char *m = ck->map, *q = p;
    return m && q >= m && q < m + ck->map_size;
}

/* A .nemo against its HF fixture: configuration, tensors, tokenizer; in_place: data in the mapping. */
static void against_fixture(const char *nemo, const char *fixture, int head, int hybrid, int in_place) {
    struct nemo_checkpoint ck;
    struct err e = {0};
    vkasr_status st = nemo_open(data(nemo), &ck, &e);
    EXPECT(st == VKASR_OK, "%s: %s", nemo, e.msg);
    if (st != VKASR_OK)
        return;
    struct model_file *mf = NULL;
    st = model_open(data(fixture), &mf, &e);
    EXPECT(st == VKASR_OK, "%s: %s", fixture, e.msg);
    if (st == VKASR_OK) {
        EXPECT(ck.cfg.head == head, "%s: head %d", nemo, ck.cfg.head);
        same_config(&ck.cfg, &mf->cfg, nemo);
        int n = same_tensors(&ck, mf, NULL, nemo);
        EXPECT(n == mf->ntensors && n > 50, "%s: %d of %d tensors compared", nemo, n, mf->ntensors);
        same_tokenizer(&ck.tok, &mf->tok, nemo);
        EXPECT(ck.has_ctc == (head == VKASR_HEAD_CTC || hybrid), "%s: has_ctc %d", nemo, ck.has_ctc);
        EXPECT(ck.has_transducer == (head != VKASR_HEAD_CTC), "%s: has_transducer %d", nemo, ck.has_transducer);
        int placed = 0;
        for (int i = 0; i < ck.ntensors; i++)
            placed += in_map(&ck, ck.tensors[i].data) && !ck.tensors[i].owned;
        EXPECT(in_place ? placed == ck.ntensors : placed == 0, "%s: %d of %d tensors in place", nemo, placed,
               ck.ntensors);
        model_close(mf);
    }
    if (hybrid) { /* the aux CTC head is the ctc fixture's */
        st = model_open(data("fixtures/ctc"), &mf, &e);
        EXPECT(st == VKASR_OK, "fixtures/ctc: %s", e.msg);
        if (st == VKASR_OK) {
            EXPECT(same_tensors(&ck, mf, "ctc_head.", nemo) == 2, "%s: CTC head", nemo);
            model_close(mf);
        }
    }
    nemo_close(&ck);
}

static void mini(void) {
    struct nemo_checkpoint ck;
    struct err e = {0};
    vkasr_status st = nemo_open(data("nemo/tdt_mini.nemo"), &ck, &e);
    EXPECT(st == VKASR_OK, "tdt_mini: %s", e.msg);
    if (st != VKASR_OK)
        return;
    const struct model_config *c = &ck.cfg;
    EXPECT(c->head == VKASR_HEAD_TDT && c->d_model == 8 && c->n_layers == 1 && c->ff_size == 32 && c->n_heads == 2 &&
               c->n_mels == 80 && c->sub_channels == 4 && c->pred_hidden == 8 && c->pred_layers == 1 &&
               c->n_durations == 5 && c->durations[4] == 4 && c->vocab_size == 128 && c->xscaling &&
               !c->attention_bias && c->att_left == -1,
           "tdt_mini: configuration");
    EXPECT(!ck.has_ctc && ck.has_transducer && !strcmp(ck.model_class, "EncDecRNNTBPEModel"), "tdt_mini: heads");
    /* the filterbank was saved as a transposed view: copied into row-major order */
    const struct nemo_tensor *fb = nemo_find(&ck, "preprocessor.featurizer.fb");
    const struct nemo_tensor *w = nemo_find(&ck, "preprocessor.featurizer.window");
    EXPECT(fb && fb->owned && fb->nd == 3 && fb->ne[1] == 80 && fb->ne[2] == 257, "tdt_mini: fb");
    EXPECT(w && w->nd == 1 && w->ne[0] == 400 && !w->owned && ((const float *)w->data)[0] == 0.0f &&
               ((const float *)w->data)[200] > 0.999f,
           "tdt_mini: window");
    const struct nemo_tensor *nb = nemo_find(&ck, "encoder.layers.0.conv.norm.num_batches_tracked");
    EXPECT(nb && nb->type == MT_I64 && nb->nd == 0 && *(const int64_t *)nb->data == 3, "tdt_mini: num_batches_tracked");
    nemo_close(&ck);
}

static void refusal(const char *file, const char *want) {
    struct nemo_checkpoint ck;
    struct err e = {0};
    vkasr_status st = nemo_open(data(file), &ck, &e);
    EXPECT(st == VKASR_ERR_MODEL && strstr(e.msg, want) && strstr(e.msg, file), "%s: status %d, message '%s' (want '%s')",
           file, (int)st, e.msg, want);
    EXPECT(ck.ntensors == 0 && ck.tok.n == 0 && !ck.map, "%s: not emptied", file);
    if (st == VKASR_OK)
        nemo_close(&ck);
}

/* A cache-aware streaming configuration alone (tests/data/streaming/config*.yaml): mapped (want NULL)
 * or refused with a message holding want. */
static void stream_config(const char *file, const char *want, struct nemo_checkpoint *out) {
    FILE *f = fopen(data(file), "rb");
    char *text = calloc(1, 1 << 16);
    size_t n = f && text ? fread(text, 1, (1 << 16) - 1, f) : 0;
    if (f)
        fclose(f);
    struct err e = {0};
    struct ny_node *root = NULL;
    char *tok = NULL;
    vkasr_status st = n ? ny_parse(file, text, n, &root, &e) : VKASR_ERR_IO;
    memset(out, 0, sizeof *out);
    if (st == VKASR_OK)
        st = nemo_config_map(file, root, out, &tok, &e);
    if (want)
        EXPECT(st == VKASR_ERR_MODEL && strstr(e.msg, want), "%s: status %d, message '%s' (want '%s')", file, (int)st,
               e.msg, want);
    else
        EXPECT(st == VKASR_OK, "%s: %s", file, e.msg);
    free(tok);
    free(out->model_class);
    out->model_class = NULL;
    ny_free(root);
    free(text);
}

static void stream_configs(void) {
    struct nemo_checkpoint ck;
    stream_config("streaming/config.yaml", NULL, &ck);
    const struct model_config *c = &ck.cfg;
    EXPECT(c->n_ctx == 3 && c->ctx[0][0] == 8 && c->ctx[0][1] == 1 && c->ctx[1][1] == 3 && c->ctx[2][1] == 0 &&
               c->att_left == -1 && c->causal_sub && c->causal_conv && c->conv_ln && c->no_feature_norm &&
               c->preemph == 0.0f && c->head == VKASR_HEAD_RNNT,
           "streaming config: menu [[8,1],[8,3],[8,0]], causal subsampling and conv, LayerNorm, NA, no preemphasis");
    EXPECT(model_sub_freq(c) == 11, "streaming config: 80 mel bins -> %d after causal subsampling", model_sub_freq(c));
    struct model_config m = *c;
    struct err e = {0};
    EXPECT(model_select_lookahead(&m, 320, &e) == VKASR_OK && m.ctx_sel == 1, "lookahead 320 ms: pair 1");
    EXPECT(model_select_lookahead(&m, 240, &e) == VKASR_ERR_INVALID_ARG && strstr(e.msg, "(160, 320, 80 ms)"),
           "lookahead 240 ms: '%s'", e.msg);
    stream_config("streaming/config_bad_ctx.yaml",
                  "'encoder.att_context_size' pair 1 = [8, 2]: chunked_limited needs the left context to be a "
                  "multiple of right + 1 = 3",
                  &ck);
    /* Nemotron 3.5's language prompt: num_prompts and the language map, each entry checked */
    stream_config("streaming/config_prompt.yaml", "'model_defaults.prompt_dictionary' is missing or empty", &ck);
    stream_config("streaming/config_prompt_nomap.yaml", "'model_defaults.prompt_dictionary' is missing or empty",
                  &ck);
    stream_config("streaming/config_prompt_slot.yaml",
                  "entry \"it-IT\" = 8: the prompt slot must be in [0, 8) (num_prompts)", &ck);
    model_langs_free(&ck.langs);
    stream_config("streaming/config_prompt_size.yaml", NULL, &ck);
    EXPECT(ck.cfg.n_prompts == 12 && ck.langs.n == 6 && model_langs_find(&ck.langs, "de") == 1 &&
               model_langs_find(&ck.langs, "AUTO") == 5 && model_langs_find(&ck.langs, "it") == -1,
           "prompt config: 12 slots, 6 names (de -> 1, auto -> 5)");
    model_langs_free(&ck.langs);
    /* the end-of-utterance model is a plain RNN-T model whose vocabulary holds <EOU> and <EOB> */
    stream_config("streaming/config_eou.yaml", NULL, &ck);
    EXPECT(ck.cfg.head == VKASR_HEAD_RNNT && ck.cfg.n_prompts == 0, "EOU config: an RNN-T head, no prompt");
}

/* model_open_head: the head chosen, its tensors only (no preprocessor buffers), in place or copied. */
static void loader(const char *nemo, int want, int head, int in_place) {
    struct model_file *mf = NULL;
    struct err e = {0};
    vkasr_status st = model_open_head(data(nemo), want, &mf, &e);
    EXPECT(st == VKASR_OK, "%s: %s", nemo, e.msg);
    if (st != VKASR_OK)
        return;
    EXPECT(mf->cfg.head == head, "%s: head %d, want %d", nemo, mf->cfg.head, head);
    int placed = 0, wrong = 0;
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        placed += t->map >= 0;
        bool transducer = !strncmp(t->name, "decoder.", 8) || !strncmp(t->name, "joint.", 6);
        wrong += !strncmp(t->name, "preprocessor.", 13) || (head == VKASR_HEAD_CTC && transducer) ||
                 (head != VKASR_HEAD_CTC && !strncmp(t->name, "ctc_head.", 9));
    }
    EXPECT(wrong == 0 && mf->ntensors > 50, "%s: %d tensors of another head or the preprocessor", nemo, wrong);
    EXPECT(in_place ? placed == mf->ntensors : placed == 0, "%s: %d of %d tensors in the mapping", nemo, placed,
           mf->ntensors);
    EXPECT(head != VKASR_HEAD_CTC || (mf->cfg.pred_hidden == 0 && mf->cfg.max_symbols == 0),
           "%s: a CTC configuration", nemo);
    EXPECT(mf->tok.n == mf->cfg.vocab_size, "%s: tokenizer", nemo);
    model_close(mf);
}

static void loader_refusal(const char *nemo, int want, const char *reason) {
    struct model_file *mf = NULL;
    struct err e = {0};
    vkasr_status st = model_open_head(data(nemo), want, &mf, &e);
    EXPECT(st == VKASR_ERR_MODEL && !mf && strstr(e.msg, reason), "%s: status %d, '%s' (want '%s')", nemo, (int)st,
           e.msg, reason);
    model_close(mf);
}

int main(int argc, char **argv) {
    if (argc > 1)
        data_dir = argv[1];
    against_fixture("nemo/rnnt.nemo", "fixtures/rnnt", VKASR_HEAD_RNNT, 0, 1);
    against_fixture("nemo/ctc_gz.nemo", "fixtures/ctc", VKASR_HEAD_CTC, 0, 0);
    against_fixture("nemo/tdt_ctc.nemo", "fixtures/tdt", VKASR_HEAD_TDT, 1, 1);
    mini();
    loader("nemo/rnnt.nemo", MODEL_HEAD_AUTO, VKASR_HEAD_RNNT, 1);
    loader("nemo/ctc_gz.nemo", VKASR_HEAD_CTC, VKASR_HEAD_CTC, 0);
    loader("nemo/tdt_ctc.nemo", MODEL_HEAD_AUTO, VKASR_HEAD_TDT, 1);
    loader("nemo/tdt_ctc.nemo", VKASR_HEAD_TDT, VKASR_HEAD_TDT, 1);
    loader("nemo/tdt_ctc.nemo", VKASR_HEAD_CTC, VKASR_HEAD_CTC, 1);
    loader_refusal("nemo/tdt_ctc.nemo", VKASR_HEAD_RNNT, "has a TDT head and a CTC head");
    loader_refusal("nemo/rnnt.nemo", VKASR_HEAD_CTC, "has only a RNN-T head");
    loader_refusal("nemo/ctc_gz.nemo", VKASR_HEAD_TDT, "has only a CTC head");
    loader_refusal("fixtures/tdt", VKASR_HEAD_CTC, "has only a TDT head");
    loader_refusal("nemo/truncated.nemo", MODEL_HEAD_AUTO, "runcated");
    refusal("nemo/bad_global.nemo", "refused global '__builtin__.eval'");
    refusal("nemo/bad_option.nemo", "'encoder.subsampling' = \"striding\" is not supported");
    refusal("nemo/missing_tensor.nemo", "missing tensor 'encoder.layers.0.norm_out.bias'");
    refusal("nemo/truncated.nemo", "runcated");
    refusal("nemo/legacy.nemo", "legacy (pre-zip) PyTorch checkpoint");
    stream_configs();
    printf("test_nemo: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
