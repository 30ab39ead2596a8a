/* pipeline.c — one utterance, or a packed batch of them, through the network: the memory plan (checked
 * against the device's budget and the caller's cap before anything is allocated, then reserved), the
 * batch's offset tables (one offsets scan), features (per input, into the packed rows) -> subsampling
 * -> conformer stack -> decoder on one scratch stack where each buffer is released once dead (the
 * features after subsampling, the blocks' second buffer before decoding), per-stage timings, optional
 * copies of the features and encoder output, and for one input the stage taps of each (host copies: a
 * tap takes no device memory beyond the backend's fixed staging buffer, so the plan is the same with
 * or without them). Abort is polled between steps of work throughout (steps.c), chunks cut to steps on
 * CPU devices unless the caller forced them. */
#include <stdio.h>
#include <stdlib.h>

#include "asr.h"
#include "common/clock.h"

static double mib(uint64_t b) { return (double)b / 1048576.0; }

void asr_output_free(struct asr_output *o) {
    free(o->tokens);
    free(o->mel);
    free(o->encoder);
    *o = (struct asr_output){0};
}

/* A host copy of rows [r0, r0 + n) of t. */
static vkasr_status copy_out(struct backend *be, const be_tensor *t, int64_t r0, int64_t n, float **dst, struct err *e) {
    const be_tensor rows = be_tensor_rows(t, r0, n);
    uint64_t bytes = be_nbytes(&rows);
    *dst = malloc(bytes ? bytes : 4);
    if (!*dst)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    return be_download(be, *dst, rows.addr, bytes);
}

vkasr_status asr_work_for(const struct asr_model *m, struct backend *be, const struct asr_batch *b,
                          const struct asr_options *opt, struct asr_work *out, struct err *e) {
    struct be_memory mem;
    be->dev->vt->memory(be->dev, &mem);
    const uint64_t weights = be_weight_bytes(be->dev), own = be_peak_bytes(be);
    const uint64_t others = mem.used > own ? mem.used - own : 0;
    *out = (struct asr_work){.batch = b, .opt = opt, .weights = weights, .max_tensor = mem.max_tensor,
                             .int8_rows = be->int8_rows, .log = be->dev->log};
    out->available = mem.budget > others ? mem.budget - others : 0;
    if (mem.budget == UINT64_MAX)
        snprintf(out->limit, sizeof out->limit, "host memory");
    else
        snprintf(out->limit, sizeof out->limit,
                 "device budget %.1f MiB%s%s%s, %.1f MiB of it held by weights and other sessions", mib(mem.budget),
                 mem.source ? " (" : "", mem.source ? mem.source : "", mem.source ? ")" : "", mib(others));
    if (opt && opt->max_memory) {
        if (opt->max_memory <= weights)
            return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                           "device memory limit %.1f MiB (max_memory) is not above the model's weights (%.1f MiB): "
                           "nothing is left for the audio",
                           mib(opt->max_memory), mib(weights));
        if (opt->max_memory - weights < out->available) {
            out->available = opt->max_memory - weights;
            snprintf(out->limit, sizeof out->limit, "max_memory %.1f MiB", mib(opt->max_memory));
        }
    }
    out->op_scratch = mem.op_scratch + (m->quantized ? mem.op_scratch_quant : 0);
    const bool long_one = b->n == 1 && b->max[ASR_FRAMES] >= mem.long_frames;
    if (mem.op_scratch_long && m->precision == VKASR_PRECISION_F16 && long_one)
        out->op_scratch += mem.op_scratch_long;
    return VKASR_OK;
}

vkasr_status asr_run(const struct asr_model *m, struct backend *be, const float *samples, size_t n,
                     const struct asr_options *opt, const struct asr_hooks *hooks, struct asr_output *out,
                     struct err *e) {
    return asr_run_batch(m, be, &samples, &n, 1, opt, hooks, out, e);
}

/* Checks what a batch of several inputs needs: every input long enough for one encoder frame, one
 * attention for all (the one each would get alone), no taps or teacher forcing. */
static vkasr_status check_batch(const struct asr_model *m, const struct asr_batch *b, const struct asr_plan *plan,
                                const struct asr_options *opt, const struct asr_hooks *hooks, struct err *e) {
    if (b->n == 1)
        return VKASR_OK;
    if (asr_tapped(hooks) || (opt && opt->nforced))
        return err_set(e, VKASR_ERR_INVALID_ARG, "stage taps and teacher forcing take one input, not a batch of %lld",
                       (long long)b->n);
    for (int64_t i = 0; i < b->n; i++) {
        const int64_t T = asr_batch_len(b, ASR_FRAMES, i);
        enum asr_attention mode;
        int64_t w;
        if (T < 1)
            return err_set(e, VKASR_ERR_INVALID_ARG, "batch input %lld: %lld samples give no encoder frame",
                           (long long)i, (long long)asr_batch_len(b, ASR_SAMPLES, i));
        TRY(asr_attention_choose(&m->cfg, T, opt, &mode, &w, e));
        if (mode != plan->attention || w != plan->window)
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "batch input %lld (%lld encoder frames) takes %s attention alone, the batch %s: batch "
                           "inputs must take the same attention", (long long)i, (long long)T,
                           mode == ASR_ATT_FULL ? "full" : "local", plan->attention == ASR_ATT_FULL ? "full" : "local");
    }
    return VKASR_OK;
}

vkasr_status asr_run_batch(const struct asr_model *m, struct backend *be, const float *const *samples,
                           const size_t *ns, int64_t n, const struct asr_options *opt,
                           const struct asr_hooks *hooks, struct asr_output *out, struct err *e) {
    err_clear(e);
    err_clear(&be->err);
    const struct model_config *c = &m->cfg;
    double t0 = clock_ms();
    int64_t *lens = malloc((size_t)(n > 0 ? n : 1) * sizeof *lens);
    if (!lens)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t i = 0; i < n; i++)
        lens[i] = (int64_t)ns[i];
    struct asr_batch b;
    vkasr_status st = asr_batch_layout(c, lens, n, &b, e);
    free(lens);
    TRY(st);
    struct asr_plan plan = {0};
    struct asr_work work;
    st = asr_work_for(m, be, &b, opt, &work, e);
    if (st == VKASR_OK)
        st = asr_plan(m, &work, &plan, e);
    if (st == VKASR_OK)
        st = check_batch(m, &b, &plan, opt, hooks, e);
    for (int64_t i = 0; i < n; i++)
        out[i].plan = plan;
    if (st != VKASR_OK) {
        asr_batch_free(&b);
        return st;
    }
    const int64_t T = plan.frames;
    /* What the session holds from earlier calls is kept when it is within this call's limit and not far
     * above its plan (a short file after a long one gives the long one's memory back). */
    uint64_t keep = 2 * plan.scratch + (64ull << 20);
    st = be_reserve(be, plan.scratch, keep < plan.available ? keep : plan.available);
    if (st != VKASR_OK) {
        asr_batch_free(&b);
        return err_set(e, st, "reserving the planned %.1f MiB of device memory: %s", mib(plan.scratch), be->err.msg);
    }
    uint64_t mark = be_mark(be);
    /* the backend asks the abort hook too, in its own long waits (pipeline creation) */
    be->should_abort = hooks ? hooks->should_abort : NULL;
    be->abort_ud = hooks ? hooks->ud : NULL;
    struct asr_steps steps;
    asr_steps_init(&steps, be, hooks, !(opt && opt->force));
    // a batch's offset tables at every stage, below everything (one offsets scan)
    if (n > 1)
        st = asr_batch_upload(be, c, &b, e);
    be_tensor x = {0}, feat = {0};
    // x: [T, D] the encoder's residual stream (every input's frames), below the rest
    if (st == VKASR_OK)
        st = asr_batch_tensor(be, c, &b, ASR_FRAMES, &x);
    uint64_t mark_x = be_mark(be);
    // feat: [L, M] normalised features of every input, dead once subsampled
    if (st == VKASR_OK)
        st = asr_batch_tensor(be, c, &b, ASR_MEL, &feat);
    // each input's front end (its own normalisation statistics) into its rows
    for (int64_t i = 0; st == VKASR_OK && i < n; i++) {
        const be_tensor rows = be_tensor_rows(&feat, b.off[ASR_MEL][i], asr_batch_len(&b, ASR_MEL, i));
        st = asr_features(m, be, samples[i], ns[i], plan.chunks.stft_frames, &rows, &steps, e);
    }
    if (st == VKASR_OK)
        st = be_sync(be);
    for (int64_t i = 0; i < n; i++)
        out[i].mel_frames = st == VKASR_OK ? asr_batch_len(&b, ASR_MEL, i) : 0;
    for (int64_t i = 0; st == VKASR_OK && opt && opt->keep_features && i < n; i++)
        st = copy_out(be, &feat, b.off[ASR_MEL][i], asr_batch_len(&b, ASR_MEL, i), &out[i].mel, e);
    if (st == VKASR_OK)
        st = asr_tap(hooks, be, "mel", 0, &feat, e);
    double t1 = clock_ms();
    if (st == VKASR_OK && hooks && hooks->progress)
        hooks->progress(hooks->ud, "features", 1.0, 0.0);
    // x = subsample(feat), then feat is released (its copy and tap are taken above)
    if (st == VKASR_OK && T > 0)
        st = asr_subsample_tiled(m, be, &feat, &x, plan.chunks.sub_tile, &b, &steps, e);
    if (st == VKASR_OK && T > 0)
        st = asr_tap(hooks, be, "subsampling", 0, &x, e); /* before the encoder's x sqrt(D) scaling */
    be_release(be, mark_x);
    const struct asr_segments segs = {asr_batch_seg(&b, ASR_FRAMES), b.max[ASR_FRAMES]};
    if (st == VKASR_OK)
        st = asr_encode(m, be, &plan, &x, n > 1 ? &segs : NULL, hooks, &steps, e);
    if (st == VKASR_OK)
        st = be_sync(be);
    for (int64_t i = 0; i < n; i++)
        out[i].frames = st == VKASR_OK ? asr_batch_len(&b, ASR_FRAMES, i) : 0;
    for (int64_t i = 0; st == VKASR_OK && opt && opt->keep_features && i < n; i++)
        st = copy_out(be, &x, b.off[ASR_FRAMES][i], asr_batch_len(&b, ASR_FRAMES, i), &out[i].encoder, e);
    if (st == VKASR_OK)
        st = asr_tap(hooks, be, "encoder", 0, &x, e);
    double t2 = clock_ms();
    if (st == VKASR_OK)
        st = asr_decode(m, be, &x, opt, hooks, &b, out, e);
    if (st == VKASR_OK)
        st = be_sync(be);
    double t3 = clock_ms();
    for (int64_t i = 0; i < n; i++) {
        out[i].features_ms = t1 - t0;
        out[i].encoder_ms = t2 - t1;
        out[i].decoder_ms = t3 - t2;
    }
    /* Finish whatever was recorded before the scratch it uses is handed out again. */
    vkasr_status st2 = be_sync(be);
    be->should_abort = NULL;
    be->abort_ud = NULL;
    be_release(be, mark);
    asr_batch_free(&b);
    if (st == VKASR_OK)
        st = st2;
    if (st != VKASR_OK && st != VKASR_ABORTED && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg[0] ? be->err.msg : vkasr_status_string(st));
    return st;
}
