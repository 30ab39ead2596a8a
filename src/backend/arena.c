/* arena.c — the one allocator of every backend (arena.h): a list of blocks made through the backend's
 * be_block_ops, bump allocation, stack marks, reserves and lookup. The backends supply only blocks. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
/* Host blocks only (be_block_ops.host): the other backends' addresses are not host pointers. */
static void poison(const struct be_arena *a, uint64_t addr, uint64_t n, int on) {
    if (!a->ops->host || n == 0)
        return;
    if (on)
        ASAN_POISON_MEMORY_REGION((void *)(uintptr_t)addr, (size_t)n);
    else
        ASAN_UNPOISON_MEMORY_REGION((void *)(uintptr_t)addr, (size_t)n);
}
#else
static void poison(const struct be_arena *a, uint64_t addr, uint64_t n, int on) {
    (void)a, (void)addr, (void)n, (void)on;
}
#endif

#define MARK_OFFSET_BITS 48
#define FIRST_BLOCK (16ull << 20)

void be_arena_init(struct be_arena *a, const struct be_block_ops *ops, struct be_device *d, uint64_t block_size) {
    memset(a, 0, sizeof *a);
    a->ops = ops;
    a->dev = d;
    a->block_size = block_size;
}

static uint64_t max_block(const struct be_arena *a) {
    return a->ops->max_block(a->dev) / BE_SCRATCH_ALIGN * BE_SCRATCH_ALIGN;
}

/* Room for one more block in the list. */
static vkasr_status grow_list(struct be_arena *a, struct err *e) {
    if (a->n < a->cap)
        return VKASR_OK;
    size_t cap = a->cap ? a->cap * 2 : 8;
    struct be_arena_block *nb = realloc(a->blocks, cap * sizeof *nb);
    if (!nb)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory (memory arena's block list)");
    a->blocks = nb;
    a->cap = cap;
    return VKASR_OK;
}

static vkasr_status make_block(struct be_arena *a, uint64_t size, struct be_arena_block *out, struct err *e) {
    *out = (struct be_arena_block){.size = size};
    const double t0 = clock_ms();
    TRY(a->ops->make(a->dev, size, &out->addr, &out->handle, e));
    a->make_ms += clock_ms() - t0;
    poison(a, out->addr, size, 1);
    return VKASR_OK;
}

static void free_blocks(struct be_arena *a) {
    for (size_t i = 0; i < a->n; i++) {
        poison(a, a->blocks[i].addr, a->blocks[i].size, 0);
        a->ops->free(a->dev, a->blocks[i].addr, a->blocks[i].size, a->blocks[i].handle);
    }
    a->n = a->cur = 0;
    a->reserved = a->in_use = 0;
}

/* An allocation of `bytes` was handed out: the peak and largest counts. */
static void count(struct be_arena *a, uint64_t bytes) {
    if (a->in_use > a->peak)
        a->peak = a->in_use;
    if (bytes > a->largest)
        a->largest = bytes;
}

vkasr_status be_arena_alloc(struct be_arena *a, uint64_t bytes, uint64_t *addr, struct err *e) {
    const uint64_t asked = bytes;
    bytes = be_scratch_bytes(bytes);
    /* Bump in the current block, else in a later (released, kept) block that fits. */
    for (size_t i = a->cur; i < a->n; i++) {
        struct be_arena_block *b = &a->blocks[i];
        if (i > a->cur)
            b->used = 0;
        if (b->size - b->used >= bytes) {
            *addr = b->addr + b->used;
            b->used += bytes;
            a->cur = i;
            a->in_use += bytes;
            count(a, bytes);
            poison(a, *addr, asked, 0);
            return VKASR_OK;
        }
        if (i == a->cur) { /* the rest of this block is lost until release: in use */
            a->in_use += b->size - b->used;
            b->used = b->size;
        }
    }
    TRY(grow_list(a, e));
    /* Geometric growth: small models stay small, large ones use few blocks. */
    uint64_t size = a->reserved > FIRST_BLOCK ? a->reserved : FIRST_BLOCK, most = max_block(a);
    if (size > a->block_size)
        size = a->block_size;
    if (size > most)
        size = most;
    if (size < bytes)
        size = bytes;
    struct be_arena_block nb;
    TRY(make_block(a, size, &nb, e));
    nb.used = bytes;
    /* Blocks past the current one are free: the new block goes right after it, so the stack order (and
     * release by mark) stays valid. */
    size_t pos = a->n ? a->cur + 1 : 0;
    if (pos < a->n)
        memmove(&a->blocks[pos + 1], &a->blocks[pos], (a->n - pos) * sizeof *a->blocks);
    a->blocks[pos] = nb;
    a->n++;
    a->cur = pos;
    a->reserved += size;
    a->in_use += bytes;
    count(a, bytes);
    *addr = nb.addr;
    poison(a, *addr, asked, 0);
    return VKASR_OK;
}

vkasr_status be_arena_reserve(struct be_arena *a, uint64_t bytes, uint64_t keep, struct err *e) {
    if (a->in_use)
        return err_set(e, VKASR_ERR_INTERNAL, "memory arena: reserve with %llu bytes still in use",
                       (unsigned long long)a->in_use);
    bytes = be_scratch_bytes(bytes);
    a->peak = a->largest = 0;
    if (a->n && a->blocks[0].size >= bytes && a->reserved <= keep)
        return VKASR_OK;
    free_blocks(a);
    const uint64_t most = max_block(a);
    if (most == 0)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY, "memory arena: the device makes no block of %u bytes",
                       BE_SCRATCH_ALIGN);
    while (a->reserved < bytes) {
        TRY(grow_list(a, e));
        uint64_t size = bytes - a->reserved < most ? bytes - a->reserved : most;
        TRY(make_block(a, size, &a->blocks[a->n], e));
        a->n++;
        a->reserved += size;
    }
    return VKASR_OK;
}

uint64_t be_arena_mark(const struct be_arena *a) {
    if (a->n == 0)
        return 0;
    return ((uint64_t)a->cur << MARK_OFFSET_BITS) | a->blocks[a->cur].used;
}

void be_arena_release(struct be_arena *a, uint64_t mark) {
    if (a->n == 0)
        return;
    size_t idx = (size_t)(mark >> MARK_OFFSET_BITS);
    uint64_t used = mark & ((1ull << MARK_OFFSET_BITS) - 1);
    if (idx >= a->n)
        return;
    if (used > a->blocks[idx].size)
        return;
    /* What lies above the mark is free again: in its block and in every later one. */
    for (size_t i = idx; i <= a->cur && i < a->n; i++) {
        uint64_t from = i == idx ? used : 0;
        poison(a, a->blocks[i].addr + from, a->blocks[i].size - from, 1);
    }
    a->cur = idx;
    a->blocks[idx].used = used;
    uint64_t in_use = used;
    for (size_t i = 0; i < idx; i++)
        in_use += a->blocks[i].used;
    a->in_use = in_use;
}

bool be_arena_find(const struct be_arena *a, uint64_t addr, uint64_t bytes, struct be_arena_block *out) {
    for (size_t i = 0; i < a->n; i++) {
        const struct be_arena_block *b = &a->blocks[i];
        if (addr >= b->addr && addr - b->addr <= b->size && bytes <= b->size - (addr - b->addr)) {
            *out = *b;
            return true;
        }
    }
    return false;
}

void be_arena_destroy(struct be_arena *a) {
    free_blocks(a);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}
