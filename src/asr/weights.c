/* weights.c — uploads a prepared (canonical-layout) checkpoint to a device: the encoder's and the
 * decoder's matrices in the session precision (f16 or f32) or, quantized in the file, as their blocks;
 * everything else (embedding, biases, norms) in f32;
 * builds the mel window and filterbank and the positional frequencies; the VKASR_TEST_PERTURB test
 * hook. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr.h"
#include "audio/mel.h"
#include "common/clock.h"
#include "common/half.h"
#include "model/quant.h"

/* VKASR_TEST_PERTURB=BACKEND:TENSOR:FACTOR, a test hook for vkasr compare: when a model is loaded on
 * BACKEND ("cpu", "vulkan", "cuda"), the weight TENSOR (its name after preparation, e.g.
 * "encoder.layers.1.self_attn.o_proj.weight") is multiplied by FACTOR, so that one of two devices runs a
 * deliberately wrong network. A malformed value, or a tensor the model lacks, fails the load. */
struct perturb {
    bool active, applied;
    char tensor[256];
    float factor;
};

static vkasr_status read_perturb(const struct be_device *dev, struct perturb *p, struct err *e) {
    *p = (struct perturb){0};
    const char *v = getenv("VKASR_TEST_PERTURB");
    if (!v || !*v)
        return VKASR_OK;
    /* BACKEND is before the first ':', FACTOR after the last, TENSOR (which has no ':') between */
    const char *c1 = strchr(v, ':'), *c2 = strrchr(v, ':');
    const size_t nb = c1 ? (size_t)(c1 - v) : 0, nt = c1 && c2 > c1 ? (size_t)(c2 - c1 - 1) : 0;
    char *end = NULL;
    const float f = nt ? strtof(c2 + 1, &end) : 0.0f;
    if (nb == 0 || nt == 0 || nt >= sizeof p->tensor || end == c2 + 1 || *end)
        return err_set(e, VKASR_ERR_INVALID_ARG, "VKASR_TEST_PERTURB='%s': expected BACKEND:TENSOR:FACTOR", v);
    if (!dev->kind || strlen(dev->kind) != nb || strncmp(v, dev->kind, nb) != 0)
        return VKASR_OK; /* another backend's */
    memcpy(p->tensor, c1 + 1, nt);
    p->factor = f;
    p->active = true;
    return VKASR_OK;
}

struct loader {
    const struct model_file *mf;
    struct backend *be;
    vkasr_precision precision;
    uint64_t n_params;
    uint64_t in_place;  /* tensors read from the file in place (host devices) */
    uint64_t in_place_bytes, uploaded; /* their bytes; bytes copied to the device (start-up split) */
    bool quantized;
    struct perturb perturb;
    struct err *e;
};

/* Copies a weight's bytes to the device, counted for the start-up split; errors name the tensor. */
static vkasr_status put(struct loader *ld, const char *name, uint64_t addr, const void *data, uint64_t bytes) {
    vkasr_status st = be_upload(ld->be, addr, data, bytes);
    if (st != VKASR_OK)
        return err_set(ld->e, st, "uploading %s: %s", name, ld->be->err.msg);
    ld->uploaded += bytes;
    return VKASR_OK;
}

/* The backend's type of a block-quantized model tensor type. */
static be_dtype quant_dtype(int mt) {
    switch (mt) {
    case MT_Q8_0: return BE_Q8_0;
    case MT_Q4_K: return BE_Q4_K;
    case MT_Q5_K: return BE_Q5_K;
    default: return BE_Q6_K;
    }
}

/* Whether t's bytes serve as the device tensor itself: on a host device (tensors in host memory), not
 * the perturbed tensor, its data aligned for the element (a GGUF's are, to 32 bytes). The model then
 * keeps the file open: no copy, and the pages are the file's (shared, read on first use). */
static bool use_in_place(struct loader *ld, const struct model_tensor *t, be_tensor *out) {
    const uint64_t align = out->type == BE_F32 ? 4 : out->type == BE_F16 ? 2 : 1;
    if (!ld->be->dev->info.host || (ld->perturb.active && strcmp(t->name, ld->perturb.tensor) == 0) ||
        (uintptr_t)t->data % align != 0 || t->nbytes != be_nbytes(out) || be_nbytes(out) == 0)
        return false;
    out->addr = (uint64_t)(uintptr_t)t->data;
    ld->in_place++;
    ld->in_place_bytes += t->nbytes;
    return true;
}

/* A quantized tensor uploads as it is (linear reads the blocks): its bytes straight from the mapped
 * file (or in place), after checking that they match its shape. */
static vkasr_status upload_quant(struct loader *ld, const struct model_tensor *t, be_tensor *out) {
    *out = be_tensor_make(0, quant_dtype(t->type), t->nd, t->ne);
    const int64_t k = t->nd > 0 ? t->ne[t->nd - 1] : 0;
    if (k <= 0 || k % be_dtype_block(out->type) != 0 || be_nbytes(out) != t->nbytes)
        return err_set(ld->e, VKASR_ERR_MODEL, "%s: tensor '%s': %s data of %llu bytes does not match its shape",
                       ld->mf->path, t->name, quant_traits(quant_type_of_mt(t->type))->name,
                       (unsigned long long)t->nbytes);
    if (ld->perturb.active && strcmp(t->name, ld->perturb.tensor) == 0)
        return err_set(ld->e, VKASR_ERR_INVALID_ARG, "VKASR_TEST_PERTURB: %s is quantized (perturb an f32 or f16 file)",
                       t->name);
    ld->n_params += be_numel(out);
    if (use_in_place(ld, t, out))
        return VKASR_OK;
    TRY(be_alloc(ld->be, BE_POOL_WEIGHTS, be_nbytes(out), &out->addr));
    return put(ld, t->name, out->addr, t->data, be_nbytes(out));
}

/* Converts a host tensor (f32 or f16) to the device type and uploads it into the weight pool; a
 * quantized one keeps its type. */
static vkasr_status upload(struct loader *ld, const struct model_tensor *t, be_dtype type, be_tensor *out) {
    if (MT_IS_QUANT(t->type)) {
        ld->quantized = true;
        return upload_quant(ld, t, out);
    }
    *out = be_tensor_make(0, type, t->nd, t->ne);
    uint64_t n = be_numel(out);
    ld->n_params += n;
    if (((t->type == MT_F16 && type == BE_F16) || (t->type == MT_F32 && type == BE_F32)) && use_in_place(ld, t, out))
        return VKASR_OK;
    TRY(be_alloc(ld->be, BE_POOL_WEIGHTS, be_nbytes(out) ? be_nbytes(out) : 4, &out->addr));
    const bool perturbed = ld->perturb.active && strcmp(t->name, ld->perturb.tensor) == 0;
    /* Already in the device type (an f16 GGUF for an f16 session, f32 for f32): straight from the
     * mapped file. Converting element by element costs ~5 ns each (3 s for a 0.6B model). */
    if (!perturbed && t->nbytes == be_nbytes(out) &&
        ((t->type == MT_F16 && type == BE_F16) || (t->type == MT_F32 && type == BE_F32)))
        return put(ld, t->name, out->addr, t->data, be_nbytes(out));
    /* host memory (the CPU and reference backends): converted in place, without a staging copy */
    const bool host = ld->be->dev->weights.ops->host;
    void *buf = host ? (void *)(uintptr_t)out->addr : malloc(n ? be_nbytes(out) : 4);
    if (!buf)
        return err_set(ld->e, VKASR_ERR_NO_MEMORY, "out of host memory uploading %s", t->name);
    if (perturbed) {
        ld->perturb.applied = true;
        LOG_WARN(ld->be->dev->log, "VKASR_TEST_PERTURB: %s multiplied by %g on the %s backend (a test hook: "
                 "results are deliberately wrong)", t->name, ld->perturb.factor, ld->be->dev->kind);
    }
    /* whole rows where nothing is perturbed (element by element, an f16 session's f32 decoder matrices of
     * the 0.6B shape, 7.6 M values, took about 40 ms of an H100's start-up) */
    const bool widen = !perturbed && t->type == MT_F16 && type == BE_F32;
    const bool narrow = !perturbed && t->type == MT_F32 && type == BE_F16 && (uintptr_t)t->data % 4 == 0;
    if (widen)
        half_to_float_row(t->data, buf, n);
    else if (narrow)
        float_to_half_row(t->data, buf, n);
    for (uint64_t i = 0; !widen && !narrow && i < n; i++) {
        float v = t->type == MT_F16 ? half_to_float(((const uint16_t *)t->data)[i])
                                    : ((const float *)t->data)[i];
        if (perturbed)
            v *= ld->perturb.factor;
        if (type == BE_F16)
            ((uint16_t *)buf)[i] = float_to_half(v);
        else
            ((float *)buf)[i] = v;
    }
    if (host) {
        ld->uploaded += be_nbytes(out); /* written in place: the copy is the conversion */
        return VKASR_OK;
    }
    vkasr_status st = put(ld, t->name, out->addr, buf, be_nbytes(out));
    free(buf);
    return st;
}

/* A required tensor (validated at model open; a miss here is a bug). */
static vkasr_status get(struct loader *ld, const char *name, be_tensor *out) {
    const struct model_tensor *t = model_find(ld->mf, name);
    if (!t || (t->type != MT_F32 && t->type != MT_F16 && !MT_IS_QUANT(t->type)))
        return err_set(ld->e, VKASR_ERR_MODEL, "%s: tensor '%s' missing or not float after preparation", ld->mf->path,
                       name);
    /* the decoder's matrices too: its products read them once per search iteration, so their bytes are
     * the decoder's time (an f16 joint and LSTM read half as many). The CPU backend keeps an f16 file's
     * matrices f16 in an f32 session too: its products widen them exactly and take x unrounded
     * (op_linear.x_f32), so the results are those of the widened weights, at half their memory, read in
     * place. The reference widens them here: its double loops would widen them again per element. */
    const struct be_device_info *di = &ld->be->dev->info;
    const bool matrix = model_is_matrix_weight(name) || model_is_decoder_matrix(name);
    const bool f16 =
        matrix && (ld->precision == VKASR_PRECISION_F16 || (di->host && !di->reference && t->type == MT_F16));
    return upload(ld, t, f16 ? BE_F16 : BE_F32, out);
}

/* An optional tensor (biases of models without them): addr 0 when absent. */
static vkasr_status opt(struct loader *ld, const char *name, be_tensor *out) {
    memset(out, 0, sizeof *out);
    if (!model_find(ld->mf, name))
        return VKASR_OK;
    return get(ld, name, out);
}

static vkasr_status getf(struct loader *ld, be_tensor *out, bool optional, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static vkasr_status getf(struct loader *ld, be_tensor *out, bool optional, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return optional ? opt(ld, name, out) : get(ld, name, out);
}

static vkasr_status load_layer(struct loader *ld, int i, struct asr_layer *L) {
#define REQ(field, suffix) TRY(getf(ld, &L->field, false, "encoder.layers.%d.%s", i, suffix))
#define OPT(field, suffix) TRY(getf(ld, &L->field, true, "encoder.layers.%d.%s", i, suffix))
    REQ(ff1_norm_w, "norm_feed_forward1.weight");
    REQ(ff1_norm_b, "norm_feed_forward1.bias");
    REQ(ff1_w1, "feed_forward1.linear1.weight");
    OPT(ff1_b1, "feed_forward1.linear1.bias");
    REQ(ff1_w2, "feed_forward1.linear2.weight");
    OPT(ff1_b2, "feed_forward1.linear2.bias");
    REQ(att_norm_w, "norm_self_att.weight");
    REQ(att_norm_b, "norm_self_att.bias");
    REQ(wq, "self_attn.q_proj.weight");
    OPT(bq, "self_attn.q_proj.bias");
    REQ(wk, "self_attn.k_proj.weight");
    OPT(bk, "self_attn.k_proj.bias");
    REQ(wv, "self_attn.v_proj.weight");
    OPT(bv, "self_attn.v_proj.bias");
    REQ(wo, "self_attn.o_proj.weight");
    OPT(bo, "self_attn.o_proj.bias");
    REQ(wpos, "self_attn.relative_k_proj.weight");
    REQ(bias_u, "self_attn.bias_u");
    REQ(bias_v, "self_attn.bias_v");
    REQ(conv_norm_w, "norm_conv.weight");
    REQ(conv_norm_b, "norm_conv.bias");
    REQ(pw1_w, "conv.pointwise_conv1.weight");
    OPT(pw1_b, "conv.pointwise_conv1.bias");
    REQ(dw_w, "conv.depthwise_conv.weight");
    if (ld->mf->cfg.conv_ln) {
        REQ(dw_ln_w, "conv.norm.weight");
        REQ(dw_ln_b, "conv.norm.bias");
    }
    REQ(dw_b, "conv.depthwise_conv.bias");
    REQ(pw2_w, "conv.pointwise_conv2.weight");
    OPT(pw2_b, "conv.pointwise_conv2.bias");
    REQ(ff2_norm_w, "norm_feed_forward2.weight");
    REQ(ff2_norm_b, "norm_feed_forward2.bias");
    REQ(ff2_w1, "feed_forward2.linear1.weight");
    OPT(ff2_b1, "feed_forward2.linear1.bias");
    REQ(ff2_w2, "feed_forward2.linear2.weight");
    OPT(ff2_b2, "feed_forward2.linear2.bias");
    REQ(out_norm_w, "norm_out.weight");
    REQ(out_norm_b, "norm_out.bias");
#undef REQ
#undef OPT
    return VKASR_OK;
}

static vkasr_status upload_host_f32(struct loader *ld, const float *data, int nd, const int64_t *ne, be_tensor *out) {
    *out = be_tensor_make(0, BE_F32, nd, ne);
    TRY(be_alloc(ld->be, BE_POOL_WEIGHTS, be_nbytes(out), &out->addr));
    return put(ld, "a front-end table", out->addr, data, be_nbytes(out));
}

static vkasr_status load_frontend(struct loader *ld, struct asr_model *m) {
    const struct model_config *c = &m->cfg;
    struct mel_config mc = {c->sample_rate, c->n_fft, c->win_length, c->hop_length, c->n_mels, c->preemph};
    int nb = c->n_fft / 2 + 1;
    float *w = malloc((size_t)c->win_length * sizeof *w);
    float *fb = malloc((size_t)c->n_mels * (size_t)nb * sizeof *fb);
    vkasr_status st = VKASR_OK;
    if (!w || !fb)
        st = err_set(ld->e, VKASR_ERR_NO_MEMORY, "out of host memory");
    if (st == VKASR_OK) {
        mel_window(&mc, w);
        st = mel_filterbank(&mc, fb, ld->e);
    }
    if (st == VKASR_OK)
        st = upload_host_f32(ld, w, 1, (int64_t[]){c->win_length}, &m->window);
    if (st == VKASR_OK)
        st = upload_host_f32(ld, fb, 2, (int64_t[]){c->n_mels, nb}, &m->melbank);
    free(w);
    free(fb);
    return st;
}

/* The relative positional encoding's frequencies (spec §3.2), made here as transformers makes them, 1 /
 * 10000^(2j/D) in float32, since pow differs between devices; the rows themselves are made on the device
 * per call (op posenc). */
static vkasr_status load_pos_freq(struct loader *ld, struct asr_model *m) {
    const int64_t D = m->cfg.d_model;
    float *w = malloc((size_t)(D / 2 + 1) * sizeof *w);
    if (!w)
        return err_set(ld->e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t j = 0; j < D / 2; j++)
        w[j] = 1.0f / powf(10000.0f, (float)(2 * j) / (float)D);
    vkasr_status st = upload_host_f32(ld, w, 1, (int64_t[]){D / 2}, &m->pos_freq);
    free(w);
    return st;
}

static vkasr_status load_all(struct loader *ld, struct asr_model *m) {
    const struct model_config *c = &m->cfg;
    TRY(load_frontend(ld, m));
    TRY(load_pos_freq(ld, m));
    static const char *const sub_names[] = {"0", "2", "3", "5", "6"};
    be_tensor *sub_w[] = {&m->sub_w0, &m->sub_w2, &m->sub_w3, &m->sub_w5, &m->sub_w6};
    be_tensor *sub_b[] = {&m->sub_b0, &m->sub_b2, &m->sub_b3, &m->sub_b5, &m->sub_b6};
    for (int i = 0; i < 5; i++) {
        TRY(getf(ld, sub_w[i], false, "encoder.subsampling.layers.%s.weight", sub_names[i]));
        TRY(getf(ld, sub_b[i], false, "encoder.subsampling.layers.%s.bias", sub_names[i]));
    }
    TRY(get(ld, "encoder.subsampling.linear.weight", &m->sub_lin_w));
    TRY(get(ld, "encoder.subsampling.linear.bias", &m->sub_lin_b));
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers)
        return err_set(ld->e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int i = 0; i < c->n_layers; i++)
        TRY(load_layer(ld, i, &m->layers[i]));
    if (c->head == VKASR_HEAD_CTC) {
        TRY(get(ld, "ctc_head.weight", &m->ctc_w));
        TRY(get(ld, "ctc_head.bias", &m->ctc_b));
        return VKASR_OK;
    }
    if (c->pred_layers < 1 || c->pred_layers > 8)
        return err_set(ld->e, VKASR_ERR_UNSUPPORTED, "%s: %d prediction-network LSTM layers (1..8 supported)",
                       ld->mf->path, c->pred_layers);
    TRY(get(ld, "decoder.embedding.weight", &m->embed));
    for (int l = 0; l < c->pred_layers; l++) {
        TRY(getf(ld, &m->lstm_wih[l], false, "decoder.lstm.weight_ih_l%d", l));
        TRY(getf(ld, &m->lstm_whh[l], false, "decoder.lstm.weight_hh_l%d", l));
        TRY(getf(ld, &m->lstm_b[l], false, "decoder.lstm.bias_l%d", l));
    }
    TRY(get(ld, "decoder.decoder_projector.weight", &m->pred_proj_w));
    TRY(get(ld, "decoder.decoder_projector.bias", &m->pred_proj_b));
    TRY(get(ld, "encoder_projector.weight", &m->enc_proj_w));
    TRY(get(ld, "encoder_projector.bias", &m->enc_proj_b));
    TRY(get(ld, "joint.head.weight", &m->joint_w));
    TRY(get(ld, "joint.head.bias", &m->joint_b));
    if (c->n_prompts > 0) {
        TRY(get(ld, "prompt_projector.linear_1.weight", &m->prompt_w1));
        TRY(get(ld, "prompt_projector.language", &m->prompt_lang));
        TRY(get(ld, "prompt_projector.linear_1.bias", &m->prompt_b1));
        TRY(get(ld, "prompt_projector.linear_2.weight", &m->prompt_w2));
        TRY(get(ld, "prompt_projector.linear_2.bias", &m->prompt_b2));
    }
    return VKASR_OK;
}

vkasr_status asr_model_load(struct be_device *dev, struct model_file **mfp, vkasr_precision precision,
                            struct asr_model **out, struct err *e) {
    struct model_file *mf = *mfp;
    uint64_t in_place = 0;
    *out = NULL;
    const double t0 = clock_ms();
    TRY(model_prepare(mf, e));
    const double t1 = clock_ms(), make0 = dev->weights.make_ms;
    struct asr_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    m->cfg = mf->cfg;
    m->dev = dev;
    m->precision = precision;
    struct backend *be = NULL;
    vkasr_status st = be_backend_create(dev, &be, e);
    if (st == VKASR_OK) {
        struct loader ld = {.mf = mf, .be = be, .precision = precision, .e = e};
        const double t2 = clock_ms();
        st = read_perturb(dev, &ld.perturb, e);
        if (st == VKASR_OK)
            st = load_all(&ld, m);
        if (st == VKASR_OK && ld.perturb.active && !ld.perturb.applied)
            st = err_set(e, VKASR_ERR_INVALID_ARG, "VKASR_TEST_PERTURB: %s has no tensor '%s'", mf->path,
                         ld.perturb.tensor);
        if (st == VKASR_OK)
            st = be_sync(be);
        if (st != VKASR_OK && e->code == VKASR_OK)
            err_set(e, st, "%s", be->err.msg);
        m->n_params = ld.n_params;
        m->quantized = ld.quantized;
        in_place = ld.in_place;
        if (st == VKASR_OK) {
            const double ms = clock_ms() - t2;
            LOG_INFO(dev->log, "start-up: model layout prepared in %.1f ms", t1 - t0);
            char extra[160] = "";
            if (ld.in_place_bytes)
                snprintf(extra, sizeof extra, "; %.1f MiB used in place from the mapped file",
                         ld.in_place_bytes / 1048576.0);
            else if (be->upload_copy_ms > 0)
                snprintf(extra, sizeof extra, "; %.1f ms copying into the staging buffer, %.1f ms waiting for the "
                         "device to free it", be->upload_copy_ms, be->upload_wait_ms);
            LOG_INFO(dev->log, "start-up: weights %.1f MiB copied to the device in %.1f ms (%.0f MB/s; %.1f ms of it "
                     "making the device's weight blocks)%s", ld.uploaded / 1048576.0, ms,
                     ms > 0 ? ld.uploaded / 1e3 / ms : 0.0, dev->weights.make_ms - make0, extra);
        }
        be_backend_destroy(be);
    }
    if (st != VKASR_OK) {
        asr_model_free(m);
        return st;
    }
    /* The tokenizer moves to the model; the file can be closed by the caller. */
    m->tok = mf->tok;
    memset(&mf->tok, 0, sizeof mf->tok);
    m->langs = mf->langs;
    memset(&mf->langs, 0, sizeof mf->langs);
    if (in_place) { /* the file too where weights are read from it in place */
        m->file = mf;
        *mfp = NULL;
    }
    *out = m;
    return VKASR_OK;
}

void asr_model_free(struct asr_model *m) {
    if (!m)
        return;
    /* Device weights belong to the device's weight pool and go with it. */
    free(m->layers);
    tok_free(&m->tok);
    model_langs_free(&m->langs);
    model_close(m->file);
    free(m);
}
