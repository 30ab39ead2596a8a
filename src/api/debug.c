/* debug.c — the debugging hooks of include/vkasr_debug.h: a session's debug parameters (stage taps,
 * teacher forcing, kept features; vkasr.c and batch.c apply them), the kept features' accessors and
 * the device's count of int8 products; the per-op profile's copy that vkasr_session_profile and
 * vkasr_model_stream_profile share.
 * Used by vkasr's own tools and tests; not part of vkasr.h's contract. */
#include <stdio.h>

#include "api/api.h"

vkasr_debug_params vkasr_debug_params_default(void) {
    return (vkasr_debug_params){.struct_size = sizeof(vkasr_debug_params)};
}

vkasr_status vkasr_session_set_debug(vkasr_session *s, const vkasr_debug_params *params) {
    if (!s)
        return VKASR_ERR_INVALID_ARG;
    if (s->stream)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "the session is in use by a live stream (vkasr_stream_free() gives it back)");
    vkasr_debug_params p;
    READ_PARAMS(p, params, vkasr_debug_params_default());
    if (p.n_forced_steps && !p.forced_steps)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG, "debug params: n_forced_steps is %zu but forced_steps is NULL",
                       p.n_forced_steps);
    s->debug = p;
    return VKASR_OK;
}

const float *vkasr_result_mel(const vkasr_result *r, size_t *frames, size_t *n_mels) {
    bool ok = r && r->out.mel;
    if (frames)
        *frames = ok ? (size_t)r->out.mel_frames : 0;
    if (n_mels)
        *n_mels = ok ? r->mel_dim : 0;
    return ok ? r->out.mel : NULL;
}

const float *vkasr_result_encoder(const vkasr_result *r, size_t *frames, size_t *dim) {
    bool ok = r && r->out.encoder;
    if (frames)
        *frames = ok ? (size_t)r->out.frames : 0;
    if (dim)
        *dim = ok ? r->enc_dim : 0;
    return ok ? r->out.encoder : NULL;
}

uint64_t vkasr_model_int8_products(const vkasr_model *m) { return m ? be_device_int8_products(m->dev) : 0; }

size_t api_profile_copy(const struct backend *be, vkasr_op_profile *out, size_t capacity) {
    struct be_op_stat st[128];
    const size_t n = be->vt->profile(be, st, 128);
    for (size_t i = 0; i < n && i < capacity && out; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%s", st[i].name);
        out[i].calls = st[i].calls;
        out[i].gpu_ms = st[i].gpu_ms;
    }
    return n;
}
