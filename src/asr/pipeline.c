/* pipeline.c — one utterance through the network: features -> encoder -> decoder, with per-stage
 * timings, optional copies of the features and encoder output (and their stage taps), and scratch
 * released at the end. */
#include <stdlib.h>
#include <time.h>

#include "asr.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void asr_output_free(struct asr_output *o) {
    free(o->tokens);
    free(o->mel);
    free(o->encoder);
    *o = (struct asr_output){0};
}

static vkasr_status copy_out(struct backend *be, const be_tensor *t, float **dst, struct err *e) {
    uint64_t bytes = be_nbytes(t);
    *dst = malloc(bytes ? bytes : 4);
    if (!*dst)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    return be_download(be, *dst, t->addr, bytes);
}

vkasr_status asr_run(const struct asr_model *m, struct backend *be, struct asr_cache *cache, const float *samples,
                     size_t n, const struct asr_options *opt, const struct asr_hooks *hooks, struct asr_output *out,
                     struct err *e) {
    err_clear(e);
    err_clear(&be->err);
    uint64_t mark = be_mark(be);
    be_tensor feat, enc;
    double t0 = now_ms();
    vkasr_status st = asr_features(m, be, samples, n, &feat, e);
    if (st == VKASR_OK)
        st = be_sync(be);
    out->mel_frames = st == VKASR_OK ? feat.ne[0] : 0;
    if (st == VKASR_OK && opt && opt->keep_features)
        st = copy_out(be, &feat, &out->mel, e);
    if (st == VKASR_OK)
        st = asr_tap(hooks, be, "mel", 0, &feat, e);
    double t1 = now_ms();
    out->features_ms = t1 - t0;
    if (st == VKASR_OK && hooks && hooks->progress)
        hooks->progress(hooks->ud, "features", 1.0, 0.0);
    if (st == VKASR_OK)
        st = asr_encode(m, be, cache, &feat, hooks, &enc, e);
    if (st == VKASR_OK)
        st = be_sync(be);
    out->frames = st == VKASR_OK ? enc.ne[0] : 0;
    if (st == VKASR_OK && opt && opt->keep_features)
        st = copy_out(be, &enc, &out->encoder, e);
    if (st == VKASR_OK)
        st = asr_tap(hooks, be, "encoder", 0, &enc, e);
    double t2 = now_ms();
    out->encoder_ms = t2 - t1;
    if (st == VKASR_OK)
        st = asr_decode(m, be, &enc, opt, hooks, out, e);
    if (st == VKASR_OK)
        st = be_sync(be);
    out->decoder_ms = now_ms() - t2;
    /* Finish whatever was recorded before the scratch it uses is handed out again. */
    vkasr_status st2 = be_sync(be);
    be_release(be, mark);
    if (st == VKASR_OK)
        st = st2;
    if (st != VKASR_OK && st != VKASR_ABORTED && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg[0] ? be->err.msg : vkasr_status_string(st));
    return st;
}
