/* test_gguf_foreign.c — GGUF files written by NVIDIA NeMo-Speech.cpp's own converter
 * (tests/data/gguf_foreign, tools/fixtures/make_foreign_gguf.py) against vkasr's own conversion of the
 * same .nemo checkpoint: the same configuration and vocabulary, the same prepared weights where the
 * grid checkpoint makes both exact, and the same token ids on the reference backend and on the Vulkan
 * device (lavapipe in CI). Edited copies in memory (a key renamed, a shape changed, a streaming flag
 * set, ...) give errors naming the key or tensor.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "fixture_io.h"
#include "model/model_types.h"
#include "model/quant.h"
#include "validation_log.h"
#include "vkasr.h"

static const char *data_dir = "", *work_dir = "";

static const char *data(const char *rel) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", data_dir, rel);
    return buf[k];
}

/* ---------------------------------------------------------------------------------------------- */
/* The loader: configuration, vocabulary, prepared tensors                                        */

static void same_config(const struct model_config *a, const struct model_config *b, const char *what) {
#define F(x) EXPECT(a->x == b->x, "%s: " #x " %g vs .nemo %g", what, (double)a->x, (double)b->x)
    F(head); F(d_model); F(n_layers); F(n_heads); F(ff_size); F(conv_kernel); F(n_mels); F(sub_channels);
    F(sub_factor); F(xscaling); F(attention_bias); F(conv_bias); F(att_left); F(att_right); F(vocab_size);
    F(pred_hidden); F(pred_layers); F(n_durations); F(max_symbols); F(sample_rate); F(n_fft); F(win_length);
    F(hop_length); F(preemph);
#undef F
    for (int i = 0; i < a->n_durations && i < 16; i++)
        EXPECT(a->durations[i] == b->durations[i], "%s: duration %d", what, i);
}

/* The f32 value of element i of a prepared tensor (f32, or a block type used as stored). */
static float value(const struct model_tensor *t, int64_t i, float *row, int64_t *row_at) {
    if (t->type == MT_F32) {
        float v;
        memcpy(&v, (const uint8_t *)t->data + 4 * i, 4);
        return v;
    }
    const int64_t k = t->ne[t->nd - 1], r = i / k;
    if (*row_at != r) {
        const uint32_t type = quant_type_of_mt(t->type);
        qblock_dequant_row(type, (const uint8_t *)t->data + (uint64_t)r * quant_row_bytes(type, k), row, k);
        *row_at = r;
    }
    return row[i % k];
}

/* A foreign file opened beside the .nemo it was converted from: configuration and pieces equal; with
 * exact (the grid checkpoint), every prepared tensor's values equal too. */
static void loader(const char *gguf, const char *nemo, int exact) {
    struct model_file *a = NULL, *b = NULL;
    struct err e = {0};
    vkasr_status st = model_open(data(gguf), &a, &e);
    EXPECT(st == VKASR_OK, "open %s: %s", gguf, e.msg);
    st = model_open(data(nemo), &b, &e);
    EXPECT(st == VKASR_OK, "open %s: %s", nemo, e.msg);
    if (a && b) {
        same_config(&a->cfg, &b->cfg, gguf);
        EXPECT(a->tok.n == b->tok.n, "%s: %d pieces vs %d", gguf, (int)a->tok.n, (int)b->tok.n);
        for (int32_t i = 0; i < a->tok.n && i < b->tok.n; i++)
            EXPECT(!strcmp(a->tok.piece[i], b->tok.piece[i]) && a->tok.type[i] == b->tok.type[i], "%s: piece %d",
                   gguf, (int)i);
        EXPECT(model_prepare(a, &e) == VKASR_OK, "prepare %s: %s", gguf, e.msg);
        EXPECT(model_prepare(b, &e) == VKASR_OK, "prepare %s: %s", nemo, e.msg);
        EXPECT(a->ntensors == b->ntensors, "%s: %d tensors vs %d", gguf, a->ntensors, b->ntensors);
        int quant = 0;
        for (int i = 0; exact && i < b->ntensors; i++) {
            const struct model_tensor *tb = &b->tensors[i], *ta = model_find(a, tb->name);
            EXPECT(ta != NULL, "%s: no %s", gguf, tb->name);
            if (!ta)
                continue;
            quant += MT_IS_QUANT(ta->type);
            int64_t n = 1, at = -1, bt = -1;
            for (int d = 0; d < tb->nd; d++)
                n *= tb->ne[d];
            float *ra = malloc((size_t)ta->ne[ta->nd - 1] * 4), *rb = malloc((size_t)tb->ne[tb->nd - 1] * 4);
            int64_t bad = -1;
            for (int64_t j = 0; ra && rb && j < n && bad < 0; j++)
                if (value(ta, j, ra, &at) != value(tb, j, rb, &bt))
                    bad = j;
            EXPECT(bad < 0, "%s: %s differs from the .nemo's at element %lld", gguf, tb->name, (long long)bad);
            free(ra);
            free(rb);
        }
        if (strstr(gguf, "q8_0"))
            EXPECT(quant > 0, "%s: no matrix kept in its blocks", gguf);
    }
    model_close(a);
    model_close(b);
}

/* ---------------------------------------------------------------------------------------------- */
/* Transcripts                                                                                    */

struct ids {
    int32_t v[1024];
    size_t n;
};

static vkasr_model *load(const char *path, const char *device, vkasr_decoder dec) {
    vkasr_model_params mp = vkasr_model_params_default();
    mp.decoder = dec;
    mp.validation = device == NULL && tv_wanted();
    mp.log_callback = tv_log;
    mp.device = device;
    mp.precision = VKASR_PRECISION_F32;
    vkasr_model *m = NULL;
    vkasr_error e;
    vkasr_status st = vkasr_model_load(path, &mp, &m, &e);
    EXPECT(st == VKASR_OK && m, "load %s on %s: %s", path, device ? device : "vulkan", e.message);
    return m;
}

static void transcribe(vkasr_model *m, const char *clip, struct ids *out) {
    out->n = 0;
    vkasr_session *s = NULL;
    vkasr_error e;
    if (!m || vkasr_session_create(m, &s, &e) != VKASR_OK)
        return;
    const vkasr_result *r = NULL;
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    vkasr_status st = vkasr_transcribe_file(s, data(clip), &tp, &r);
    EXPECT(st == VKASR_OK, "transcribe %s: %s", clip, vkasr_session_last_error(s));
    if (st == VKASR_OK) {
        size_t n;
        const vkasr_token *t = vkasr_result_tokens(r, &n);
        for (size_t i = 0; i < n && i < 1024; i++)
            out->v[out->n++] = t[i].id;
    }
    vkasr_session_free(s);
}

/* The foreign file and vkasr's conversion of its .nemo (type; the head dec of both) give the same token
 * ids on each clip. */
static void tokens(const char *gguf, const char *nemo, vkasr_weight_type type, vkasr_decoder dec, const char *device) {
    static const char *const clips[] = {"audio/parity/us_fox.wav", "audio/parity/scot_boxes.wav"};
    char own[1024];
    snprintf(own, sizeof own, "%s/own_%s_%d_%d.gguf", work_dir, gguf, (int)type, (int)dec);
    for (char *p = own + strlen(work_dir) + 1; *p; p++)
        if (*p == '/')
            *p = '_';
    vkasr_error e;
    EXPECT(vkasr_convert_decoder(data(nemo), own, type, dec, &e) == VKASR_OK, "convert %s: %s", nemo, e.message);
    vkasr_model *a = load(data(gguf), device, dec), *b = load(own, device, dec);
    size_t total = 0;
    for (size_t c = 0; a && b && c < sizeof clips / sizeof clips[0]; c++) {
        struct ids x, y;
        transcribe(a, clips[c], &x);
        transcribe(b, clips[c], &y);
        EXPECT(x.n == y.n && memcmp(x.v, y.v, x.n * sizeof x.v[0]) == 0,
               "%s vs vkasr's conversion (type %d, head %d) on %s, %s: %zu vs %zu tokens", gguf, (int)type,
               (int)dec, device ? device : "vulkan", clips[c], x.n, y.n);
        total += x.n;
    }
    EXPECT(total >= 10, "%s: only %zu tokens over the clips", gguf, total);
    printf("%s%s on %s: %zu tokens, the same as vkasr's conversion\n", gguf,
           dec == VKASR_DECODER_CTC ? " (CTC head)" : "", device ? device : "vulkan", total);
    vkasr_model_free(a);
    vkasr_model_free(b);
}

/* ---------------------------------------------------------------------------------------------- */
/* Edited copies                                                                                  */

/* The byte after a GGUF string (u64 length + bytes) equal to s in img; NULL if absent. */
static uint8_t *after_string(uint8_t *img, size_t n, const char *s) {
    size_t l = strlen(s);
    for (uint8_t *p = img; (p = memmem(p, n - (size_t)(p - img), s, l)) != NULL; p++) {
        uint64_t len = 0;
        if (p - img >= 8)
            memcpy(&len, p - 8, 8);
        if (len == l)
            return p + l;
    }
    return NULL;
}

/* Opens an edited copy of file (edit applied to it) and expects an error containing want. */
static void refused(const char *file, void (*edit)(uint8_t *, size_t), const char *want, const char *what) {
    size_t n;
    uint8_t *img = (uint8_t *)fixture_read_file(data(file), &n);
    EXPECT(img != NULL, "read %s", file);
    if (!img)
        return;
    edit(img, n);
    struct model_file *mf = NULL;
    struct err e = {0};
    vkasr_status st = model_open_gguf_memory(img, n, file, &mf, &e);
    EXPECT(st == VKASR_ERR_MODEL && mf == NULL && strstr(e.msg, want), "%s: status %d, message '%s' (want '%s')",
           what, (int)st, e.msg, want);
    model_close(mf);
    free(img);
}

static void rename_key(uint8_t *img, size_t n) { /* asr.encoder.d_model -> asr.encoder.d_modeX */
    uint8_t *p = after_string(img, n, "asr.encoder.d_model");
    if (p)
        p[-1] = 'X';
}

static void set_flag(uint8_t *img, size_t n) { /* asr.encoder.cache_supported (bool) = true */
    uint8_t *p = after_string(img, n, "asr.encoder.cache_supported");
    if (p)
        p[4] = 1;
}

static void set_prompts(uint8_t *img, size_t n) { /* asr.rnnt.num_prompts (u32) = 2 */
    uint8_t *p = after_string(img, n, "asr.rnnt.num_prompts");
    if (p)
        p[4] = 2;
}

static void set_planar(uint8_t *img, size_t n) { /* asr.encoder.q8_layout "block_q8_0" -> "plane_q8_0" */
    uint8_t *p = after_string(img, n, "asr.encoder.q8_layout");
    if (p)
        memcpy(p + 4 + 8, "plane", 5);
}

static void shrink_tensor(uint8_t *img, size_t n) { /* encoder.layers.0.norm_out.weight: [64] -> [32] */
    uint8_t *p = after_string(img, n, "encoder.layers.0.norm_out.weight");
    if (p)
        p[4] = 32; /* after n_dims (u32): ne[0], little-endian */
}

static void rename_tensor(uint8_t *img, size_t n) { /* a tensor of no module vkasr implements */
    uint8_t *p = after_string(img, n, "encoder.layers.0.norm_out.weight");
    if (p)
        memcpy(p - 15, "norm_xyz", 8);
}

static void break_spm(uint8_t *img, size_t n) { /* a character outside base64 */
    uint8_t *p = after_string(img, n, "asr.tokenizer.spm_model");
    if (p)
        p[4 + 8 + 10] = '!';
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_gguf_foreign DATA_DIR WORK_DIR\n");
        return 2;
    }
    data_dir = argv[1];
    work_dir = argv[2];

    loader("gguf_foreign/rnnt.fp16.gguf", "nemo/rnnt.nemo", 0);
    loader("gguf_foreign/ctc.fp16.gguf", "nemo/ctc_gz.nemo", 0);
    loader("gguf_foreign/tdt_grid.fp16.gguf", "gguf_foreign/tdt_grid.nemo", 1);
    loader("gguf_foreign/tdt_grid.bf16.gguf", "gguf_foreign/tdt_grid.nemo", 1);
    loader("gguf_foreign/tdt_grid.q8_0.gguf", "gguf_foreign/tdt_grid.nemo", 1);

    static const char *const devices[] = {"ref", NULL};
    for (int d = 0; d < 2; d++) {
        const char *dev = devices[d], *grid = "gguf_foreign/tdt_grid.nemo";
        tokens("gguf_foreign/rnnt.fp16.gguf", "nemo/rnnt.nemo", VKASR_WEIGHTS_F16, VKASR_DECODER_AUTO, dev);
        tokens("gguf_foreign/ctc.fp16.gguf", "nemo/ctc_gz.nemo", VKASR_WEIGHTS_F16, VKASR_DECODER_AUTO, dev);
        tokens("gguf_foreign/tdt_grid.fp16.gguf", grid, VKASR_WEIGHTS_F32, VKASR_DECODER_AUTO, dev);
        tokens("gguf_foreign/tdt_grid.bf16.gguf", grid, VKASR_WEIGHTS_F16, VKASR_DECODER_AUTO, dev);
        tokens("gguf_foreign/tdt_grid.q8_0.gguf", grid, VKASR_WEIGHTS_Q8_0, VKASR_DECODER_AUTO, dev);
        tokens("gguf_foreign/tdt_grid.q8_0.gguf", grid, VKASR_WEIGHTS_Q8_0, VKASR_DECODER_CTC, dev);
    }

    /* a head the file lacks: the RNN-T file has no auxiliary CTC head */
    struct model_file *mf = NULL;
    struct err e = {0};
    vkasr_status st = model_open_head(data("gguf_foreign/rnnt.fp16.gguf"), VKASR_HEAD_CTC, &mf, &e);
    EXPECT(st == VKASR_ERR_MODEL && !mf && strstr(e.msg, "has only a RNN-T head"), "CTC head of an RNN-T file: %s",
           e.msg);
    model_close(mf);

    const char *tdt = "gguf_foreign/tdt_grid.q8_0.gguf";
    refused(tdt, rename_key, "missing key 'asr.encoder.d_model'", "key renamed");
    /* cache_supported without causal_downsampling means causal subsampling (17 frequency bins from 128):
     * an offline model's weights flagged so no longer fit, and the error names the tensor and the rule */
    refused(tdt, set_flag,
            "tensor 'encoder.subsampling.linear.weight' has shape [64, 512], expected [64, 544] (from "
            "gguf_foreign/tdt_grid.q8_0.gguf/config.json: hidden_size, subsampling_conv_channels * frequency bins "
            "(causal: 128 -> 17))",
            "cache-aware flag on an offline model");
    refused(tdt, set_prompts, "asr.rnnt.num_prompts = 2: a prompt-conditioned", "prompts");
    refused(tdt, set_planar, "asr.encoder.q8_layout = \"plane_q8_0\" is not supported", "planar Q8_0");
    refused(tdt, shrink_tensor, "tensor 'encoder.layers.0.norm_out.weight' has shape [32], expected [64]",
            "wrong shape");
    refused(tdt, rename_tensor, "tensor 'encoder.layers.0.norm_xyz.weight' belongs to no module", "unknown tensor");
    refused(tdt, break_spm, "asr.tokenizer.spm_model is not base64", "tokenizer");

    failures += tv_check();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
