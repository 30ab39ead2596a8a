/* cu_memory.cu — device memory of the CUDA backend: cudaMalloc'd blocks counted against a budget (the
 * card's memory, or VKASR_MAX_DEVICE_MEMORY_MIB), and arenas that bump-allocate tensors inside them:
 * the device's grow-only weights arena and each backend's scratch stack (mark / release; reserved to a
 * run's memory plan before it starts). No op allocates device memory by itself: everything comes from
 * these arenas. */
#include <stdlib.h>
#include <string.h>

#include "cu_internal.h"

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

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

void cu_arena_init(struct cu_arena *a, uint64_t block_size) {
    memset(a, 0, sizeof *a);
    a->block_size = block_size;
}

vkasr_status cu_arena_alloc(struct cu_device *d, struct cu_arena *a, uint64_t bytes, uint64_t *addr, struct err *e) {
    bytes = align_up(bytes ? bytes : 1, CU_TENSOR_ALIGN);
    /* Bump in the current block, else in a later (released, kept) block that fits. */
    for (size_t i = a->cur; i < a->n; i++) {
        struct cu_block *b = &a->blocks[i];
        if (i > a->cur)
            b->used = 0;
        if (b->size - b->used >= bytes) {
            *addr = b->addr + b->used;
            b->used += bytes;
            a->cur = i;
            a->in_use += bytes;
            return VKASR_OK;
        }
        if (i == a->cur) { /* the rest of this block is lost until release */
            a->in_use += b->size - b->used;
            b->used = b->size;
        }
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        struct cu_block *nb = (struct cu_block *)realloc(a->blocks, cap * sizeof *nb);
        if (!nb)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        a->blocks = nb;
        a->cap = cap;
    }
    /* Geometric growth: 16 MiB, then as much as is already reserved, up to block_size; a tensor larger
     * than that gets a block of its own. */
    uint64_t size = a->reserved > (16ull << 20) ? a->reserved : (16ull << 20);
    if (size > a->block_size)
        size = a->block_size;
    if (size < bytes)
        size = bytes;
    struct cu_block nbk = {0, size, bytes};
    TRY(cu_device_malloc(d, size, &nbk.addr, e));
    /* Blocks past the current one are free: the new block goes right after it, so the stack order
     * (and release by mark) stays valid. */
    size_t pos = a->n ? a->cur + 1 : 0;
    if (pos < a->n)
        memmove(&a->blocks[pos + 1], &a->blocks[pos], (a->n - pos) * sizeof *a->blocks);
    a->blocks[pos] = nbk;
    a->n++;
    a->cur = pos;
    a->reserved += size;
    a->in_use += bytes;
    *addr = nbk.addr;
    return VKASR_OK;
}

vkasr_status cu_arena_reserve(struct cu_device *d, struct cu_arena *a, uint64_t bytes, uint64_t keep, struct err *e) {
    if (a->in_use)
        return err_set(e, VKASR_ERR_INTERNAL, "cu_arena_reserve: %llu bytes still in use", (unsigned long long)a->in_use);
    bytes = align_up(bytes ? bytes : 1, CU_TENSOR_ALIGN);
    if (a->n && a->blocks[0].size >= bytes && a->reserved <= keep)
        return VKASR_OK;
    for (size_t i = 0; i < a->n; i++)
        cu_device_free(d, a->blocks[i].addr, a->blocks[i].size);
    a->n = a->cur = 0;
    a->reserved = a->in_use = 0;
    if (a->cap == 0) {
        struct cu_block *nb = (struct cu_block *)malloc(8 * sizeof *nb);
        if (!nb)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        a->blocks = nb;
        a->cap = 8;
    }
    /* cudaMalloc has no per-allocation limit below the memory itself: one block */
    struct cu_block nbk = {0, bytes, 0};
    TRY(cu_device_malloc(d, bytes, &nbk.addr, e));
    a->blocks[0] = nbk;
    a->n = 1;
    a->reserved = bytes;
    return VKASR_OK;
}

/* A mark packs the current block index (top 16 bits) and its bump offset (low 48 bits). */
uint64_t cu_arena_mark(const struct cu_arena *a) {
    if (a->n == 0)
        return 0;
    return ((uint64_t)a->cur << 48) | a->blocks[a->cur].used;
}

void cu_arena_release(struct cu_arena *a, uint64_t mark) {
    if (a->n == 0)
        return;
    size_t idx = (size_t)(mark >> 48);
    uint64_t used = mark & ((1ull << 48) - 1);
    if (idx >= a->n)
        return;
    a->cur = idx;
    a->blocks[idx].used = used;
    uint64_t in_use = used;
    for (size_t i = 0; i < idx; i++)
        in_use += a->blocks[i].used;
    a->in_use = in_use;
}

bool cu_arena_holds(const struct cu_arena *a, uint64_t addr, uint64_t bytes) {
    for (size_t i = 0; i < a->n; i++) {
        const struct cu_block *b = &a->blocks[i];
        if (addr >= b->addr && addr - b->addr <= b->size && bytes <= b->size - (addr - b->addr))
            return true;
    }
    return false;
}

void cu_arena_destroy(struct cu_device *d, struct cu_arena *a) {
    for (size_t i = 0; i < a->n; i++)
        cu_device_free(d, a->blocks[i].addr, a->blocks[i].size);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}
