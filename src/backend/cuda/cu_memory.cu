/* cu_memory.cu — device memory of the CUDA backend: cudaMalloc'd blocks counted against a budget (the
 * card's memory, or VKASR_MAX_DEVICE_MEMORY_MIB). The arenas that bump-allocate tensors inside them are
 * the shared ones (arena.h), fed by cu_blocks; no op allocates device memory by itself. */
#include <stdlib.h>
#include <string.h>

#include "cu_internal.h"

vkasr_status cu_device_malloc(struct cu_device *d, uint64_t bytes, uint64_t *addr, struct err *e) {
    pthread_mutex_lock(&d->alloc_lock);
    uint64_t total = d->allocated;
    bool over = bytes > d->budget || total > d->budget - bytes;
    if (!over)
        d->allocated += bytes; /* reserved before the call, so two threads cannot both pass the check */
    pthread_mutex_unlock(&d->alloc_lock);
    if (over)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                       "device memory exhausted: %.1f MiB requested with %.1f MiB already allocated of %.1f MiB "
                       "(CUDA device %d%s)",
                       bytes / 1048576.0, total / 1048576.0, d->budget / 1048576.0, d->ordinal,
                       getenv("VKASR_MAX_DEVICE_MEMORY_MIB") ? ", VKASR_MAX_DEVICE_MEMORY_MIB" : "");
    void *p = NULL;
    cudaError_t r = cudaMalloc(&p, bytes);
    if (r != cudaSuccess) {
        pthread_mutex_lock(&d->alloc_lock);
        d->allocated -= bytes;
        pthread_mutex_unlock(&d->alloc_lock);
        if (r == cudaErrorMemoryAllocation) {
            cudaGetLastError(); /* not sticky: clear it so later launch checks do not report it */
            return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                           "device memory exhausted: CUDA device %d refused a %.1f MiB allocation "
                           "(cudaErrorMemoryAllocation; %.1f MiB already allocated by vkasr)",
                           d->ordinal, bytes / 1048576.0, total / 1048576.0);
        }
        return cu_fail(e, r, "cudaMalloc", __FILE__, __LINE__);
    }
    *addr = (uint64_t)(uintptr_t)p;
    return VKASR_OK;
}

void cu_device_free(struct cu_device *d, uint64_t addr, uint64_t bytes) {
    if (!addr)
        return;
    cudaFree((void *)(uintptr_t)addr); /* nothing to report on a teardown path */
    pthread_mutex_lock(&d->alloc_lock);
    d->allocated -= bytes;
    pthread_mutex_unlock(&d->alloc_lock);
}

/* ---- the arenas' block interface -------------------------------------------------------------- */

static vkasr_status cum_make(struct be_device *bd, uint64_t bytes, uint64_t *addr, void **handle, struct err *e) {
    struct cu_device *d = (struct cu_device *)bd;
    *handle = NULL;
    TRY(cu_use_device(d, e)); /* a session may allocate on another thread than the one that opened it */
    return cu_device_malloc(d, bytes, addr, e);
}

static void cum_free(struct be_device *bd, uint64_t addr, uint64_t bytes, void *handle) {
    (void)handle;
    cu_device_free((struct cu_device *)bd, addr, bytes);
}

/* cudaMalloc has no per-allocation limit below the memory itself: a reserve is one block. */
static uint64_t cum_max_block(const struct be_device *bd) { return UINT64_MAX; }

extern "C" const struct be_block_ops cu_blocks = {cum_make, cum_free, cum_max_block, false};
