/* backend.c — the backend-independent calls of backend.h: choosing a backend from a device string,
 * lifetimes, memory over the arenas (arena.h), and the op entry points (arguments checked by ops.c).
 *   "cpu"                      the plain-C reference backend
 *   "cuda", "cuda:N"           the CUDA backend (builds with -DVKASR_CUDA=ON only)
 *   "vulkan", "vulkan:N|NAME"  a Vulkan device (the best one, index N, or a name substring)
 *   "N", "NAME", NULL/""       a Vulkan device as above; NULL/"" reads $VKASR_DEVICE first */
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* "prefix" alone or "prefix:rest": returns rest ("" for the bare prefix), NULL if s is neither. */
static const char *after_prefix(const char *s, const char *prefix) {
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
    if (strcmp(want, "cpu") == 0)
        return opened(ref_device_open(opt, out, e), "cpu", out);
    struct be_device_options o = *opt;
    const char *rest;
    if ((rest = after_prefix(want, "cuda"))) {
#ifdef VKASR_HAVE_CUDA
        o.device = rest;
        return opened(cuda_device_open(&o, out, e), "cuda", out);
#else
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "device '%s': this vkasr was built without the CUDA backend (configure with -DVKASR_CUDA=ON)",
                       want);
#endif
    }
    if ((rest = after_prefix(want, "vulkan")))
        want = rest;
    o.device = want;
    return opened(vk_device_open(&o, out, e), "vulkan", out);
}

void be_device_close(struct be_device *d) {
    if (d)
        d->vt->destroy(d);
}

vkasr_status be_backend_create(struct be_device *d, struct backend **out, struct err *e) {
    return d->vt->create_backend(d, out, e);
}

void be_backend_destroy(struct backend *b) {
    if (b)
        b->vt->destroy(b);
}


/* ---- memory ----------------------------------------------------------------------------------- */

void be_device_init(struct be_device *d, const struct be_block_ops *blocks) {
    pthread_mutex_init(&d->weights_lock, NULL);
    be_arena_init(&d->weights, blocks, d, BE_ARENA_BLOCK);
}

void be_device_fini(struct be_device *d) {
    be_arena_destroy(&d->weights);
    pthread_mutex_destroy(&d->weights_lock);
}

void be_backend_init(struct backend *b, struct be_device *d) {
    b->dev = d;
    be_arena_init(&b->scratch, d->weights.ops, d, BE_ARENA_BLOCK);
}

vkasr_status be_alloc(struct backend *b, enum be_pool pool, uint64_t bytes, uint64_t *addr) {
    if (pool != BE_POOL_WEIGHTS)
        return be_arena_alloc(&b->scratch, bytes, addr, &b->err);
    pthread_mutex_lock(&b->dev->weights_lock);
    vkasr_status st = be_arena_alloc(&b->dev->weights, bytes, addr, &b->err);
    pthread_mutex_unlock(&b->dev->weights_lock);
    return st;
}

vkasr_status be_alloc_tensor(struct backend *b, enum be_pool pool, be_dtype type, int nd, const int64_t *ne,
                             be_tensor *out) {
    *out = be_tensor_make(0, type, nd, ne);
    uint64_t bytes = be_nbytes(out);
    return be_alloc(b, pool, bytes ? bytes : 4, &out->addr);
}

uint64_t be_mark(struct backend *b) { return be_arena_mark(&b->scratch); }
void be_release(struct backend *b, uint64_t mark) { be_arena_release(&b->scratch, mark); }

vkasr_status be_reserve(struct backend *b, uint64_t bytes, uint64_t keep) {
    TRY(b->vt->sync(b)); /* the blocks about to be freed may still be read by queued work */
    return be_arena_reserve(&b->scratch, bytes, keep, &b->err);
}

uint64_t be_peak_bytes(const struct backend *b) { return b->scratch.reserved; }

uint64_t be_weight_bytes(const struct be_device *d) {
    struct be_device *m = (struct be_device *)d; /* the lock, not the device, changes */
    pthread_mutex_lock(&m->weights_lock);
    uint64_t n = d->weights.reserved;
    pthread_mutex_unlock(&m->weights_lock);
    return n;
}

bool be_find_block(struct backend *b, uint64_t addr, uint64_t bytes, struct be_arena_block *out) {
    if (be_arena_find(&b->scratch, addr, bytes, out))
        return true;
    pthread_mutex_lock(&b->dev->weights_lock);
    bool found = be_arena_find(&b->dev->weights, addr, bytes, out);
    pthread_mutex_unlock(&b->dev->weights_lock);
    return found;
}

/* ---- op entry points -------------------------------------------------------------------------- */

vkasr_status be_run(struct backend *b, enum op_id id, const void *args) {
    TRY(op_validate(id, args, &b->err));
    return b->vt->run(b, id, args);
}

vkasr_status be_search_init(struct backend *b, const struct be_search *s, const int64_t *frames) {
    int32_t *state = NULL;
    uint64_t bytes = 0;
    TRY(op_search_init_state(s, frames, &state, &bytes, &b->err));
    vkasr_status st = be_upload(b, s->state.addr, state, bytes);
    free(state);
    return st;
}
