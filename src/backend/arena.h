/* arena.h — the one allocator of device memory, shared by every backend: blocks that the backend makes
 * and frees through a small block interface (be_block_ops), bump allocation inside them, stack marks,
 * reserving a run's planned bytes up front, and address lookup. Knows nothing of Vulkan or CUDA. */
#ifndef VKASR_ARENA_H
#define VKASR_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct be_device;

/* Tensors start at multiples of this many bytes (>= minStorageBufferOffsetAlignment everywhere; keeps
 * vec4 loads aligned; cuBLASLt's default assumption): a tensor of n bytes takes be_scratch_bytes(n) of
 * an arena, which is what memory plans count. */
#define BE_SCRATCH_ALIGN 256u
static inline uint64_t be_scratch_bytes(uint64_t n) {
    return ((n ? n : 1) + BE_SCRATCH_ALIGN - 1) / BE_SCRATCH_ALIGN * BE_SCRATCH_ALIGN;
}

/* What a backend supplies: blocks of its memory (Vulkan: a VkBuffer on its own VkDeviceMemory; CUDA:
 * cudaMalloc; the reference backend: aligned_alloc). */
struct be_block_ops {
    /* Makes a block of `bytes` (a multiple of BE_SCRATCH_ALIGN) at a BE_SCRATCH_ALIGN-aligned address
     * (device address or host pointer), with the backend's own handle; errors name size and limit. */
    vkasr_status (*make)(struct be_device *d, uint64_t bytes, uint64_t *addr, void **handle, struct err *e);
    void (*free)(struct be_device *d, uint64_t addr, uint64_t bytes, void *handle);
    /* The largest block the device makes: growth stays below it, reserves are split into blocks of it. */
    uint64_t (*max_block)(const struct be_device *d);
    /* Blocks are host memory (the reference backend): AddressSanitizer builds poison what is not handed
     * out, so a tensor's out-of-bounds access or a use after release is reported as with malloc. */
    bool host;
};

struct be_arena_block {
    uint64_t addr;   /* address of byte 0                */
    uint64_t size;
    uint64_t used;   /* bump pointer                     */
    void *handle;    /* the backend's (be_block_ops.make) */
};

/* Blocks with bump allocation: a device's weights (grow only, under its lock) and each backend's scratch
 * (stack discipline: mark / release). Blocks are freed only by be_arena_reserve and be_arena_destroy, so
 * live tensors keep their addresses when the arena grows. */
struct be_arena {
    const struct be_block_ops *ops;
    struct be_device *dev;
    struct be_arena_block *blocks;
    size_t n, cap;
    size_t cur;          /* block currently bumped                        */
    uint64_t block_size; /* largest block made for growth (below max_block) */
    uint64_t in_use;     /* bytes handed out (and lost at block ends)     */
    uint64_t reserved;   /* bytes of all blocks                           */
    uint64_t peak;       /* the most in_use at once, and the largest tensor */
    uint64_t largest;    /* (be_scratch_bytes), since init or be_arena_reserve */
    double make_ms;      /* time spent making blocks, since init (-v's start-up split) */
};

/* Growth blocks: 16 MiB, then as much as is already held, up to this. */
#define BE_ARENA_BLOCK (256ull << 20)

/* An empty arena whose blocks ops makes on d (nothing is allocated yet). */
void be_arena_init(struct be_arena *a, const struct be_block_ops *ops, struct be_device *d, uint64_t block_size);
/* Takes be_scratch_bytes(bytes) at the top of the stack: in the current block, else in a later kept
 * block, else in a new block (16 MiB, then as much as the arena already holds, up to block_size and the
 * device's max_block; a larger tensor gets a block of its own size). */
vkasr_status be_arena_alloc(struct be_arena *a, uint64_t bytes, uint64_t *addr, struct err *e);
/* Gives the arena at least `bytes` for stack allocations without growing: one block, or blocks of
 * max_block where the device's largest block is smaller (Vulkan's maxMemoryAllocationSize). Keeps what
 * it holds when its first block already has `bytes` and all blocks are at most `keep` bytes, else frees
 * them first. Nothing may be in use, and no queued work may still read the blocks. Starts peak and
 * largest afresh. */
vkasr_status be_arena_reserve(struct be_arena *a, uint64_t bytes, uint64_t keep, struct err *e);
/* A mark packs the current block's index (top 16 bits) and its bump offset (low 48 bits). */
uint64_t be_arena_mark(const struct be_arena *a);
void be_arena_release(struct be_arena *a, uint64_t mark);
/* The block holding [addr, addr + bytes), copied to *out; false if none. */
bool be_arena_find(const struct be_arena *a, uint64_t addr, uint64_t bytes, struct be_arena_block *out);
/* Frees every block; the arena is then empty (and needs be_arena_init before it is used again). */
void be_arena_destroy(struct be_arena *a);

#endif
