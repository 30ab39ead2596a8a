/* tap.c — stage taps (vkasr_debug_params.stage_callback): a device tensor copied to the host and
 * handed to the caller with its stage name and index. The network calls asr_tap() at each stage; without
 * a callback it returns at once, so untapped runs do no extra work. */
#include <stdlib.h>

#include "asr.h"

vkasr_status asr_tap(const struct asr_hooks *hooks, struct backend *be, const char *name, int64_t index,
                     const be_tensor *t, struct err *e) {
    if (!asr_tapped(hooks))
        return VKASR_OK;
    int64_t rows = t->ne[0], cols = 1; /* [rows, everything else] */
    for (int i = 1; i < t->nd; i++)
        cols *= t->ne[i];
    const uint64_t bytes = be_nbytes(t);
    CHECK_OR_RETURN(e, t->type == BE_F32);
    float *host = malloc(bytes ? bytes : 4);
    if (!host)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory copying stage %s", name);
    vkasr_status st = be_download(be, host, t->addr, bytes); /* waits for the work that writes t */
    if (st == VKASR_OK)
        hooks->stage(hooks->ud, &(vkasr_stage){.name = name, .index = index, .data = host, .rows = (size_t)rows,
                                               .cols = (size_t)cols});
    free(host);
    return st;
}
