/* convert.c — vkasr_convert: any model vkasr opens (HF directory or GGUF) -> vkasr's GGUF, on the host
 * only (no GPU). The transform is model_prepare; the file is written by model_write_gguf, which goes
 * through a temporary file and a rename so a failed conversion never leaves a partial model behind.
 */
#include "model/model.h"
#include "vkasr.h"

vkasr_status vkasr_convert(const char *src_path, const char *dst_gguf, vkasr_weight_type type, vkasr_error *error) {
    struct err e;
    err_clear(&e);
    struct model_file *mf = NULL;
    vkasr_status st;
    if (!src_path || !src_path[0] || !dst_gguf || !dst_gguf[0])
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_convert: source and destination paths are required");
    else if (type != VKASR_WEIGHTS_F32 && type != VKASR_WEIGHTS_F16)
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_convert: unknown weight type %d", (int)type);
    else {
        st = model_open(src_path, &mf, &e);
        if (st == VKASR_OK)
            st = model_prepare(mf, &e);
        /* Reading the source is the model's problem (a missing shard, an unreadable file): report it as
         * such, so that VKASR_ERR_IO always names a destination that could not be written. */
        if (st == VKASR_ERR_IO)
            st = e.code = VKASR_ERR_MODEL;
        if (st == VKASR_OK)
            st = model_write_gguf(mf, dst_gguf, type, &e);
        model_close(mf);
    }
    err_export(&e, error);
    return st;
}
