/* encoder.c — the FastConformer stack after subsampling: optional x sqrt(D) scaling, the relative
 * positional table for the attention's reach (2T-1 rows, or 2w+1 for local attention), the conformer
 * blocks on x [T, D] with a second residual buffer (and the values for full attention), progress and
 * abort polls after each block; and the choice of attention (spec §5.3). */
#include <math.h>
#include <stdlib.h>

#include "asr.h"

vkasr_status asr_attention_choose(const struct model_config *c, int64_t frames, const struct asr_options *opt,
                                  enum asr_attention *mode, int64_t *window, struct err *e) {
    /* The model's own context (spec §5.2-5.3): honoured when it ships local attention. */
    if ((c->att_left >= 0 || c->att_right >= 0) && (c->att_left != c->att_right || c->att_left < 1))
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "local attention context [%d, %d]: only symmetric [w, w] is supported", c->att_left,
                       c->att_right);
    const int64_t model_w = c->att_left > 0 ? c->att_left : 0;
    const enum asr_attention want = opt ? opt->attention : ASR_ATT_AUTO;
    if (c->n_ctx > 0) { /* cache-aware models: the trained chunked mask over every key (linear cost) */
        if (want == ASR_ATT_LOCAL || (opt && opt->window > 0))
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "local attention does not apply to a cache-aware streaming model: it runs its trained "
                           "chunked mask (choose its context with the lookahead)");
        *mode = ASR_ATT_FULL;
        *window = 0;
        return VKASR_OK;
    }
    const int64_t asked_w = opt && opt->window > 0 ? opt->window : 0;
    if (opt && opt->window < 0)
        return err_set(e, VKASR_ERR_INVALID_ARG, "attention window %lld: must be >= 1 (0 = the model's)",
                       (long long)opt->window);
    double limit_s = opt && opt->auto_full_seconds > 0 ? opt->auto_full_seconds : ASR_AUTO_FULL_SECONDS;
    const double seconds = (double)frames * c->sub_factor * c->hop_length / c->sample_rate;
    switch (want) {
    case ASR_ATT_FULL:
        *mode = ASR_ATT_FULL;
        break;
    case ASR_ATT_LOCAL:
        *mode = ASR_ATT_LOCAL;
        break;
    case ASR_ATT_AUTO:
        /* a model trained or shipped with local attention keeps it; a full-context one switches by length */
        *mode = model_w > 0 || seconds > limit_s ? ASR_ATT_LOCAL : ASR_ATT_FULL;
        break;
    default:
        return err_set(e, VKASR_ERR_INVALID_ARG, "unknown attention mode %d", (int)want);
    }
    *window = *mode == ASR_ATT_FULL ? 0 : asked_w ? asked_w : model_w ? model_w : ASR_DEFAULT_WINDOW;
    return VKASR_OK;
}

/* The band the network computes: a window at least as long as the sequence is full attention (the
 * same result, with k and v computed once instead of for every chunk). */
static int64_t effective_window(int64_t frames, int64_t window) {
    return window > 0 && window < frames ? window : 0;
}

/* Position rows of the attention's reach: PE(r) for r = reach .. -reach. */
static int64_t pos_rows(int64_t frames, int64_t window) {
    const int64_t w = effective_window(frames, window), reach = w > 0 ? w : frames > 0 ? frames - 1 : 0;
    return 2 * reach + 1;
}

/* pos [P, D] = PE(r) for r = reach .. -reach, made on the device (op posenc) from the model's
 * frequencies. */
static vkasr_status make_positions(const struct asr_model *m, struct backend *be, const be_tensor *pos,
                                   struct err *e) {
    const int64_t reach = (pos->ne[0] - 1) / 2;
    if (reach >= POSENC_MAX_R)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "attention over relative positions up to %lld frames: the positional encoding reaches at "
                       "most %lld (a shorter attention window would do)",
                       (long long)reach, (long long)POSENC_MAX_R - 1);
    vkasr_status st = be_posenc(be, &(struct op_posenc){.inv_freq = m->pos_freq, .y = *pos, .r0 = reach});
    return st == VKASR_OK ? st : err_set(e, st, "%s", be->err.msg);
}

vkasr_status asr_encode(const struct asr_model *m, struct backend *be, const struct asr_plan *plan, be_tensor *x,
                        const struct asr_segments *segs, const struct asr_hooks *hooks, struct asr_steps *steps,
                        struct err *e) {
    const struct model_config *c = &m->cfg;
    /* positions and the band follow the longest sequence: a window at least as long as each of them
     * is full attention for all (the band then scores what full attention scores) */
    const int64_t T = x->ne[0], D = c->d_model, Tmax = segs ? segs->max_frames : T;
    const int64_t w = effective_window(Tmax, plan->window), P = pos_rows(Tmax, plan->window);
    if (T == 0)
        return VKASR_OK;
    if (c->xscaling)
        TRY(be_unary(be, &(struct op_unary){.x = *x, .y = *x, .act = ACT_NONE, .alpha = sqrtf((float)D)}));
    uint64_t mark = be_mark(be);
    const struct asr_types t = asr_types_for(m->precision);
    be_tensor y, pos, p, v = {0}, out = *x;
    // y: [T, D] the blocks' second residual buffer (full attention's keys);  pos, p: [P, D] sinusoids
    // and their projection;  full attention: v [T, D] the values
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, D}, &y);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){P, D}, &pos);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, t.p, 2, (int64_t[]){P, D}, &p);
    if (st == VKASR_OK && w == 0)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, t.v, 2, (int64_t[]){T, D}, &v);
    if (st != VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    if (st == VKASR_OK)
        st = make_positions(m, be, &pos, e);
    be_tensor cur = *x;
    /* every block allocates the same: a measuring run (plan.c) needs the first only */
    const int layers = be_measuring(be) ? 1 : c->n_layers;
    for (int i = 0; st == VKASR_OK && i < layers; i++) {
        st = asr_conformer_block(m, be, &m->layers[i], &cur, &y, &v, &pos, &p, w, plan->chunks.rows, segs, steps, e);
        if (st == VKASR_OK)
            st = asr_tap(hooks, be, "layer", i, &cur, e);
        /* Start this block's last step, wait for the one before: the host never runs more than a step
         * ahead, so abort is prompt and progress truthful. */
        if (st == VKASR_OK)
            st = asr_steps_poll(steps);
        if (st == VKASR_OK && hooks && hooks->progress)
            hooks->progress(hooks->ud, "encoder", (double)(i + 1) / c->n_layers, 0.0);
    }
    // the output back in x when the blocks left it in the other buffer (full attention, odd layer count)
    if (st == VKASR_OK && cur.addr != out.addr)
        st = be_permute(be, &(struct op_permute){.x = cur, .y = out, .perm = {0, 1}});
    be_release(be, mark);
    if (st != VKASR_OK && st != VKASR_ABORTED && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    return st;
}
