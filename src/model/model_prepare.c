/* model_prepare.c — the canonical kernel-layout transform (model_prepare): BN folding, reshapes, the
 * subsampling column permutation, LSTM bias sums, widening to f32 (block-quantized matrices of another
 * engine's GGUF kept as stored). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "model_file.h"
#include "model_schema.h"
#include "quant.h"

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

/* Fills o (f32, shape from its spec) from the HF tensors of mf. */
static vkasr_status make_canonical(const struct model_file *mf, struct model_tensor *o, struct err *e) {
    const struct model_config *c = &mf->cfg;
    uint64_t n = numel_of(o->nd, o->ne);
    const struct model_tensor *src = model_find(mf, o->name);
    int lstm_k;
    char tail;

    /* A matrix already in a block type (another engine's GGUF; model_validate admits it on matrix weights
     * only): used as stored where the transform is a reshape. */
    const bool sub_linear = strcmp(o->name, "encoder.subsampling.linear.weight") == 0;
    /* the language prompt's first Linear [H, D + P] splits into its encoder columns [H, D] and the
     * one-hot's columns, transposed to a row per slot [P, H] (the bias a language adds) */
    const bool prompt_split = !strcmp(o->name, "prompt_projector.linear_1.weight") ||
                              !strcmp(o->name, "prompt_projector.language");
    if (prompt_split)
        src = model_find(mf, "prompt_projector.linear_1.weight");
    if (src && MT_IS_QUANT(src->type) && prompt_split)
        return err_set(e, VKASR_ERR_MODEL, "%s: tensor '%s' is block-quantized; vkasr reads it only as a float type",
                       model_tensor_file(mf, src), src->name);
    if (src && MT_IS_QUANT(src->type) && !sub_linear && !prompt_split) {
        o->type = src->type;
        o->data = src->data;
        o->nbytes = src->nbytes;
        o->map = src->map;
        return VKASR_OK;
    }
    /* Plain reshape of f32 data: keep pointing into the mapping when it is aligned for float access. */
    if (src && src->type == MT_F32 && ((uintptr_t)src->data % 4) == 0 &&
        !sub_linear && !prompt_split &&
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

    if (sub_linear) {
        /* HF flattens the subsampling output [C, T, F] per time step as c*F + f; the engine keeps it
         * channels-last (f*C + c), so the columns move: W'[d][f*C + c] = W[d][c*F + f]. Block-quantized
         * rows are dequantized first (their exact values; the result is f32). */
        const int64_t D = c->d_model, C = c->sub_channels, F = model_sub_freq(c);
        struct model_tensor wide = *src;
        float *rows = NULL;
        if (MT_IS_QUANT(src->type)) {
            const uint32_t qt = quant_type_of_mt(src->type);
            if (!(rows = malloc(n * 4)))
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory preparing '%s'", o->name);
            for (int64_t d = 0; d < D; d++)
                qblock_dequant_row(qt, (const uint8_t *)src->data + (uint64_t)d * quant_row_bytes(qt, C * F),
                                   rows + d * C * F, C * F);
            wide.type = MT_F32;
            wide.data = rows;
        }
        for (int64_t d = 0; d < D; d++)
            for (int64_t f = 0; f < F; f++)
                for (int64_t ch = 0; ch < C; ch++)
                    dst[d * F * C + f * C + ch] = (float)elem(&wide, (uint64_t)(d * C * F + ch * F + f));
        free(rows);
        return VKASR_OK;
    }
    if (prompt_split) {
        const int64_t D = c->d_model, P = c->n_prompts, H = c->prompt_hidden;
        CHECK_OR_RETURN(e, src && src->nd == 2 && src->ne[0] == H && src->ne[1] == D + P);
        const bool language = !strcmp(o->name, "prompt_projector.language");
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < (language ? P : D); j++)
                dst[language ? j * H + h : h * D + j] =
                    (float)elem(src, (uint64_t)(h * (D + P) + (language ? D + j : j)));
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
        if (c->conv_ln) { /* the LayerNorm comes after the conv: nothing to fold; an absent bias is 0 */
            snprintf(nm, sizeof nm, "%sdepthwise_conv.%s", pre, ends_with(o->name, ".weight") ? "weight" : "bias");
            const struct model_tensor *t = model_find(mf, nm);
            for (uint64_t i = 0; i < n; i++)
                dst[i] = t && (c->conv_bias || ends_with(o->name, ".weight")) ? (float)elem(t, i) : 0.0f;
            return VKASR_OK;
        }
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
            model_free_tensors(nt, done);
        return st;
    }
    /* Everything not in the canonical set (BN statistics, num_batches_tracked, the separate LSTM biases,
     * unexpected extras) is dropped; the mappings stay, the new tensors may point into them. */
    model_free_tensors(mf->tensors, mf->ntensors);
    mf->tensors = nt;
    mf->ntensors = n;
    mf->canonical = true;
    return model_index_names(mf, mf->path, e);
}
