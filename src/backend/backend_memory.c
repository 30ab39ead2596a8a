/* backend_memory.c — the memory calls of backend.h over the arenas (arena.h): a device's weights, a
 * backend's scratch stack, reserves and lookup. A leaf the backends call; it calls none of them. */
#include <pthread.h>

#include "backend.h"

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

uint64_t be_scratch_peak(const struct backend *b) { return b->scratch.peak; }
uint64_t be_scratch_largest(const struct backend *b) { return b->scratch.largest; }

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
