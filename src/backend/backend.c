/* backend.c — the backend-independent calls of backend.h: choosing a backend from a device string,
 * lifetimes, and the op entry points (arguments checked by ops.c). Memory: backend_memory.c.
 *   "cpu", "cpu:N"             the CPU backend (N threads; default: $VKASR_THREADS, else every CPU)
 *   "ref"                      the plain-C reference backend (the test oracle)
 *   "cuda", "cuda:N"           the CUDA backend (builds with -DVKASR_CUDA=ON only)
 *   "vulkan", "vulkan:N|NAME"  a Vulkan device (the best one, index N, or a name substring)
 *   "N", "NAME"                a Vulkan device as above
 *   NULL/""                    $VKASR_DEVICE, else the best Vulkan GPU, else (none, or only a CPU
 *                              driver such as lavapipe) the CPU backend */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common/clock.h"

const char *be_device_suffix(const char *s, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0)
        return NULL;
    if (s[n] == '\0')
        return s + n;
    return s[n] == ':' ? s + n + 1 : NULL;
}

/* Records which backend an opened device belongs to. */
static vkasr_status opened(vkasr_status st, const char *kind, struct be_device **out) {
    if (st == VKASR_OK)
        (*out)->kind = kind;
    return st;
}

vkasr_status be_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e) {
    const char *want = opt->device;
    if (!want || !*want)
        want = getenv("VKASR_DEVICE");
    if (!want)
        want = "";
    struct be_device_options o = *opt;
    const char *rest;
    if (!*want) {
        /* The best Vulkan GPU, found by the instance that then opens it; none (no driver, no usable
         * device, only a CPU driver): the CPU backend. */
        o.device = "";
        o.gpu_only = true;
        struct err ve = {0};
        const double t0 = clock_ms();
        vkasr_status st = vk_device_open(&o, out, &ve);
        if (st == VKASR_OK)
            return opened(st, "vulkan", out);
        if (st != VKASR_ERR_NO_DEVICE) {
            *e = ve;
            return st;
        }
        if (opt->log)
            LOG_INFO(opt->log, "start-up: looking for a Vulkan GPU %.1f ms (%s): the CPU backend", clock_ms() - t0,
                     ve.msg);
        o.gpu_only = false;
        want = "cpu";
    }
    if (strcmp(want, "ref") == 0)
        return opened(ref_device_open(opt, out, e), "ref", out);
    if ((rest = be_device_suffix(want, "cpu"))) {
        o.device = rest;
        return opened(cpu_device_open(&o, out, e), "cpu", out);
    }
    if ((rest = be_device_suffix(want, "cuda"))) {
#ifdef VKASR_HAVE_CUDA
        o.device = rest;
        return opened(cuda_device_open(&o, out, e), "cuda", out);
#else
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "device '%s': this vkasr was built without the CUDA backend (configure with -DVKASR_CUDA=ON)",
                       want);
#endif
    }
    if ((rest = be_device_suffix(want, "vulkan")))
        want = rest;
    o.device = want;
    return opened(vk_device_open(&o, out, e), "vulkan", out);
}

void be_device_close(struct be_device *d) {
    if (d)
        d->vt->destroy(d);
}

void be_device_pipelines(const struct be_device *d, struct be_pipelines *out) {
    *out = (struct be_pipelines){0};
    if (d->vt->pipelines)
        d->vt->pipelines(d, out);
}

vkasr_status be_backend_create(struct be_device *d, struct backend **out, struct err *e) {
    return d->vt->create_backend(d, out, e);
}

void be_backend_destroy(struct backend *b) {
    if (b)
        b->vt->destroy(b);
}


/* ---- op entry points -------------------------------------------------------------------------- */

vkasr_status be_run(struct backend *b, enum op_id id, const void *args) {
    if (b->measuring) /* its model may have no weights: nothing to check an op's arguments against */
        return VKASR_OK;
    TRY(op_validate(id, args, &b->err));
    return b->vt->run(b, id, args);
}

vkasr_status be_search_init(struct backend *b, const struct be_search *s, const int64_t *frames) {
    int32_t *state = NULL;
    uint64_t bytes = 0;
    TRY(op_search_init_state(s, frames, &state, &bytes, &b->err));
    vkasr_status st = be_upload(b, s->state.addr, state, bytes);
    free(state);
    const int32_t live = (int32_t)s->state.ne[0]; /* every hypothesis has frames: none is done */
    if (st == VKASR_OK && s->live.addr)
        st = be_upload(b, s->live.addr, &live, sizeof live);
    return st;
}
