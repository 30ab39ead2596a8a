/* backend.c — the backend-independent calls of backend.h: choosing a backend from a device string,
 * lifetimes, and the op entry points (arguments checked by ops.c). Memory: backend_memory.c.
 *   "cpu", "cpu:N"             the CPU backend (N threads; default: $VKASR_THREADS, else every CPU)
 *   "ref"                      the plain-C reference backend (the test oracle)
 *   "cuda", "cuda:N"           the CUDA backend (builds with -DVKASR_CUDA=ON only)
 *   "vulkan", "vulkan:N|NAME"  a Vulkan device (the best one, index N, or a name substring)
 *   "N", "NAME"                a Vulkan device as above
 *   NULL/""                    $VKASR_DEVICE, else the best Vulkan GPU, else (none, or only a CPU
 *                              driver such as lavapipe) the CPU backend */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && !defined(__ANDROID__)
#include <dirent.h>
#include <unistd.h>
#endif

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

/* Whether this machine has a device node a GPU's Vulkan driver could use: a DRM render node
 * (/dev/dri/renderD*: Mesa's drivers), /dev/nvidia0 (NVIDIA's), /dev/dxg (WSL's); other systems: assumed. */
static bool gpu_node_present(void) {
#if defined(__linux__) && !defined(__ANDROID__)
    if (access("/dev/nvidia0", F_OK) == 0 || access("/dev/dxg", F_OK) == 0)
        return true;
    DIR *d = opendir("/dev/dri");
    if (!d)
        return false;
    bool render = false;
    for (struct dirent *de; !render && (de = readdir(d));)
        render = strncmp(de->d_name, "renderD", 7) == 0;
    closedir(d);
    return render;
#else
    return true;
#endif
}

/* Whether this machine surely has no GPU: no device node (above) and no driver list named in the
 * environment. Then the default device is the CPU backend without asking Vulkan, whose loader would load
 * every installed driver (lavapipe's LLVM among them) only to find none: a tenth of a second of CPU at
 * each start. Elsewhere (other systems, containers passing a GPU's nodes through) Vulkan is asked. */
static bool surely_no_gpu(void) {
    static const char *const env[] = {"VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"};
    for (size_t i = 0; i < sizeof env / sizeof *env; i++)
        if (getenv(env[i]) && *getenv(env[i]))
            return false;
    return !gpu_node_present();
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
        vkasr_status st = VKASR_ERR_NO_DEVICE;
        if (surely_no_gpu())
            snprintf(ve.msg, sizeof ve.msg, "no GPU device node");
        else
            st = vk_device_open(&o, out, &ve);
        if (st == VKASR_OK)
            return opened(st, "vulkan", out);
        if (st != VKASR_ERR_NO_DEVICE) {
            *e = ve;
            return st;
        }
        /* A GPU whose Vulkan driver is missing or broken: say so, or the user never learns why the GPU
         * is idle (-d cpu chooses the CPU backend without this) */
        if (opt->log && gpu_node_present())
            LOG_WARN(opt->log, "a GPU is present but Vulkan offers no usable GPU device (%s): using the CPU "
                               "backend; install the GPU's Vulkan driver, or pass -d cpu",
                     ve.msg);
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

uint64_t be_device_int8_products(const struct be_device *d) {
    return d->vt->int8_products ? d->vt->int8_products(d) : 0;
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
    if (!b->int8_rows && ((id == OP_layernorm && ((const struct op_layernorm *)args)->y8) ||
                          (id == OP_linear && ((const struct op_linear *)args)->x8)))
        return err_set(&b->err, VKASR_ERR_INTERNAL, "op %s: int8 rows (y8, x8) on a backend without int8 rows",
                       op_name(id));
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
