/* decoder_ctc.c — greedy CTC (spec §6): argmax over each frame's logits, collapse repeats, drop blanks. */
#include <stdlib.h>

#include "decoder_common.h"
#include "decoder_ctc.h"

/* Rows of CTC logits per chunk: [rows, V+1] stays under ~64 MiB. */
#define LOGITS_BUDGET (64ull << 20)

/* Stage tap of a CTC chunk: frames r0 .. r0+n-1, logits lg [n, V+1], their argmaxes best[r0 ..]. */
static vkasr_status tap_ctc_chunk(const struct asr_hooks *hooks, struct backend *be, int64_t r0, const be_tensor *lg,
                                  const be_tensor *best, struct err *e) {
    const int64_t n = lg->ne[0], V1 = lg->ne[1];
    float *rows = malloc(be_nbytes(lg) + 4);
    int32_t *ids = malloc((size_t)n * sizeof *ids + 4);
    vkasr_decoder_step *steps = malloc((size_t)n * sizeof *steps + 4);
    vkasr_status st = rows && ids && steps ? VKASR_OK : err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    if (st == VKASR_OK)
        st = be_download(be, rows, lg->addr, be_nbytes(lg));
    if (st == VKASR_OK)
        st = be_download(be, ids, best->addr + (uint64_t)r0 * sizeof *ids, (uint64_t)n * sizeof *ids);
    for (int64_t i = 0; st == VKASR_OK && i < n; i++)
        steps[i] = (vkasr_decoder_step){.frame = r0 + i, .token = ids[i], .duration = 1};
    if (st == VKASR_OK)
        hooks->stage(hooks->ud, &(vkasr_stage){.name = "logits", .index = r0, .data = rows, .rows = (size_t)n,
                                               .cols = (size_t)V1, .steps = steps});
    free(rows);
    free(ids);
    free(steps);
    return st;
}

/* CTC over every row of enc (a packed batch's rows are independent frames: one product for all), then
 * each input's argmaxes collapsed into its own output. */
vkasr_status dec_ctc(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_hooks *hooks,
                     const struct asr_batch *batch, struct asr_output *out, struct err *e) {
    const int64_t T = enc->ne[0], V1 = m->cfg.vocab_size + 1, blank = V1 - 1, n_in = batch ? batch->n : 1;
    int64_t chunk = (int64_t)(LOGITS_BUDGET / (4 * (uint64_t)V1));
    chunk = chunk < 1 ? 1 : chunk > T ? T : chunk;
    int32_t *ids = malloc((size_t)(T ? T : 1) * sizeof *ids);
    if (!ids)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    uint64_t mark = be_mark(be);
    be_tensor logits, best;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){chunk, V1}, &logits);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I32, 1, (int64_t[]){T}, &best);
    if (be_measuring(be)) { /* a measuring run (plan.c) ends here: the rest allocates nothing */
        be_release(be, mark);
        free(ids);
        return st;
    }
    for (int64_t r0 = 0; st == VKASR_OK && r0 < T; r0 += chunk) {
        int64_t n = T - r0 < chunk ? T - r0 : chunk;
        be_tensor lg = be_tensor_rows(&logits, 0, n);
        // logits: [n, V+1] = enc W^T + b;  best: argmax over all classes (blank = V)
        st = be_linear(be, &(struct op_linear){.x = be_tensor_rows(enc, r0, n), .w = m->ctc_w, .bias = m->ctc_b,
                                                .y = lg, .alpha = 1.0f, .x_f32 = asr_x_f32(m)});
        if (st == VKASR_OK)
            st = be_argmax(be, &(struct op_argmax){.x = lg, .y = be_tensor_rows(&best, r0, n), .c0 = 0, .c1 = V1});
        if (st == VKASR_OK && asr_tapped(hooks))
            st = tap_ctc_chunk(hooks, be, r0, &lg, &best, e);
    }
    if (st == VKASR_OK)
        st = be_download(be, ids, best.addr, (uint64_t)T * sizeof *ids);
    be_release(be, mark);
    // per input: collapse repeats, drop blanks; a token's span is its run of frames
    for (int64_t i = 0; st == VKASR_OK && i < n_in; i++) {
        int64_t f0, Ti;
        dec_input_rows(batch, T, i, &f0, &Ti);
        const int32_t *id = ids + f0;
        for (int64_t t = 0; st == VKASR_OK && t < Ti; t++) {
            if (id[t] == blank || (t > 0 && id[t] == id[t - 1]))
                continue;
            int64_t end = t + 1;
            while (end < Ti && id[end] == id[t])
                end++;
            st = dec_push_token(&out[i], id[t], t, (int32_t)(end - t), e);
            if (st == VKASR_OK && hooks && hooks->tokens_added && n_in == 1)
                hooks->tokens_added(hooks->ud);
        }
    }
    free(ids);
    dec_progress(hooks, T, T, dec_frame_seconds(&m->cfg));
    return st;
}
