/* convert.c — vkasr_convert: any model vkasr opens (HF directory, .nemo or f32/f16 GGUF; one head) ->
 * vkasr's GGUF, on the host only (no GPU). The transform is model_prepare; the file is written (and quantized) by
 * model_write_gguf_stats, which goes through a temporary file and a rename so a failed conversion never
 * leaves a partial model behind.
 */
#include <stdio.h>

#include "api.h"
#include "model/model_types.h"
#include "model/quant.h"
#include "vkasr.h"

/* A quantized source would be quantized twice (its rounding errors compounded): refused. */
static vkasr_status refuse_quantized(const struct model_file *mf, struct err *e) {
    for (int i = 0; i < mf->ntensors; i++)
        if (MT_IS_QUANT(mf->tensors[i].type))
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "%s is already quantized (tensor '%s' is %s): convert from the f32/f16 model or the "
                           "Hugging Face directory instead",
                           mf->path, mf->tensors[i].name, quant_traits(quant_type_of_mt(mf->tensors[i].type))->name);
    return VKASR_OK;
}

/* The success message: file size and effective bits per weight (matrices, and the whole file's data). */
static void summary(const struct gguf_write_stats *s, vkasr_weight_type type, struct err *e) {
    const double mib = (double)s->file_bytes / (1024.0 * 1024.0);
    const double bpw_all = s->n_weights ? 8.0 * (double)s->data_bytes / (double)s->n_weights : 0.0;
    const double bpw_mat = s->matrix_weights ? 8.0 * (double)s->matrix_bytes / (double)s->matrix_weights : 0.0;
    snprintf(e->msg, sizeof e->msg,
             "%.2f MiB; %s: matrix weights %.2f bits per weight (%d matrices in a fallback type), all weights "
             "%.2f bits per weight",
             mib, quant_traits((uint32_t)type)->name, bpw_mat, s->n_fallback, bpw_all);
}

vkasr_status vkasr_convert(const char *src_path, const char *dst_gguf, vkasr_weight_type type, vkasr_error *error) {
    return vkasr_convert_decoder(src_path, dst_gguf, type, VKASR_DECODER_AUTO, error);
}

vkasr_status vkasr_convert_decoder(const char *src_path, const char *dst_gguf, vkasr_weight_type type,
                                   vkasr_decoder decoder, vkasr_error *error) {
    struct err e;
    err_clear(&e);
    struct model_file *mf = NULL;
    vkasr_status st;
    struct gguf_write_stats stats = {0};
    if (!src_path || !src_path[0] || !dst_gguf || !dst_gguf[0])
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_convert: source and destination paths are required");
    else if (!quant_traits((uint32_t)type))
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_convert: unknown weight type %d", (int)type);
    else if (api_model_head(decoder) == -2)
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_convert: unknown decoder %d", (int)decoder);
    else {
        st = model_open_head(src_path, api_model_head(decoder), &mf, &e);
        if (st == VKASR_OK)
            st = refuse_quantized(mf, &e);
        if (st == VKASR_OK)
            st = model_prepare(mf, &e);
        /* Reading the source is the model's problem (a missing shard, an unreadable file): report it as
         * such, so that VKASR_ERR_IO always names a destination that could not be written. */
        if (st == VKASR_ERR_IO)
            st = e.code = VKASR_ERR_MODEL;
        if (st == VKASR_OK)
            st = model_write_gguf_stats(mf, dst_gguf, type, &stats, &e);
        model_close(mf);
    }
    if (st == VKASR_OK)
        summary(&stats, type, &e);
    err_export(&e, error);
    return st;
}
