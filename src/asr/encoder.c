/* encoder.c — the FastConformer encoder: subsampling (halo-tiled), optional x sqrt(D) input scaling,
 * relative positional table, the conformer stack. Progress and abort are checked between blocks. */
#include <math.h>

#include "asr.h"

vkasr_status asr_conformer_block(const struct asr_model *m, struct backend *be, const struct asr_layer *L,
                                 be_tensor *x, be_tensor *y, const be_tensor *pos, int64_t window, struct err *e);

/* Local attention: NeMo's rel_pos_local_attn with a symmetric context [w, w] (spec §5.2). */
static vkasr_status attention_window(const struct model_config *c, int64_t *window, struct err *e) {
    *window = 0;
    if (c->att_left < 0 && c->att_right < 0)
        return VKASR_OK;
    if (c->att_left != c->att_right || c->att_left < 1)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "local attention context [%d, %d]: only symmetric [w, w] is supported",
                       c->att_left, c->att_right);
    *window = c->att_left;
    return VKASR_OK;
}

vkasr_status asr_encode(const struct asr_model *m, struct backend *be, struct asr_cache *cache, const be_tensor *feat,
                        const struct asr_hooks *hooks, be_tensor *enc, struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t T = asr_encoder_frames(c, feat->ne[0]), D = c->d_model;
    int64_t window;
    TRY(attention_window(c, &window, e));
    // x, y: [T, D] residual stream (ping-pong: the block output LN writes the other buffer)
    be_tensor x, y;
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, D}, &x));
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, D}, &y));
    *enc = x;
    if (T == 0)
        return VKASR_OK;
    TRY(asr_subsample(m, be, feat, &x, e));
    TRY(asr_tap(hooks, be, "subsampling", 0, &x, e));
    if (c->xscaling)
        TRY(be_unary(be, &(struct op_unary){.x = x, .y = x, .act = ACT_NONE, .alpha = sqrtf((float)D)}));
    // pos: [P, D], P = 2 reach + 1 rows of PE(r) for r = reach .. -reach
    const int64_t reach = window > 0 && window < T - 1 ? window : T - 1;
    const float *rows;
    TRY(asr_posenc_table(cache, T, (int)D, &rows, e));
    be_tensor pos;
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){2 * reach + 1, D}, &pos));
    TRY(be_upload(be, pos.addr, rows + (T - 1 - reach) * D, be_nbytes(&pos)));
    for (int i = 0; i < c->n_layers; i++) {
        TRY(asr_conformer_block(m, be, &m->layers[i], &x, &y, &pos, window, e));
        be_tensor t = x;
        x = y;
        y = t;
        TRY(asr_tap(hooks, be, "layer", i, &x, e));
        /* Start this block, wait for the previous one: the GPU stays busy while the host never runs
         * more than a block ahead, so abort is prompt and progress truthful. */
        TRY(be_flush(be));
        TRY(be_throttle(be, 1));
        if (hooks && hooks->should_abort && hooks->should_abort(hooks->ud))
            return VKASR_ABORTED;
        if (hooks && hooks->progress)
            hooks->progress(hooks->ud, "encoder", (double)(i + 1) / c->n_layers, 0.0);
    }
    *enc = x;
    return VKASR_OK;
}
