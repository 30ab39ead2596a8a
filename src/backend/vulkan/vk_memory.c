/* vk_memory.c — device memory: blocks (one VkBuffer + VkDeviceMemory, addressed by buffer device
 * address) and arenas that bump-allocate tensors inside them. Weights use a grow-only arena shared
 * by the device; each backend's scratch arena has stack discipline (mark / release). */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_TENSOR_ALIGN BE_SCRATCH_ALIGN

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

vkasr_status vk_block_create(struct vk_device *d, uint64_t size, bool staging, struct vk_block *b, struct err *e) {
    memset(b, 0, sizeof *b);
    /* By role, not by type index: both roles share one memory type on lavapipe (with VKASR_FORCE_STAGING). */
    uint32_t mem_type = staging ? d->mem_staging : d->mem_device;
    uint64_t total = atomic_load(&d->allocated);
    if (!staging && total + size > d->heap_size)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                       "device memory exhausted: %.1f MiB requested with %.1f MiB already allocated of a %.1f MiB heap",
                       size / 1048576.0, total / 1048576.0, d->heap_size / 1048576.0);
    if (size > d->caps.max_buffer)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY, "a %.1f MiB tensor exceeds the device's maxBufferSize (%.1f MiB)",
                       size / 1048576.0, d->caps.max_buffer / 1048576.0);
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VK_CHECK(e, vkCreateBuffer(d->dev, &bi, NULL, &b->buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
    if (!(req.memoryTypeBits & (1u << mem_type))) {
        vkDestroyBuffer(d->dev, b->buf, NULL);
        b->buf = VK_NULL_HANDLE;
        return err_set(e, VKASR_ERR_VULKAN, "memory type %u cannot back storage buffers on this device", mem_type);
    }
    VkMemoryAllocateFlagsInfo fi = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
        .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
    };
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .pNext = &fi,
        .allocationSize = req.size,
        .memoryTypeIndex = mem_type,
    };
    VkResult r = vkAllocateMemory(d->dev, &ai, NULL, &b->mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(d->dev, b->buf, NULL);
        b->buf = VK_NULL_HANDLE;
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                           "the device refused a %.1f MiB allocation (%s; %.1f MiB already allocated)",
                           req.size / 1048576.0, vk_result_name(r), total / 1048576.0);
        return vk_fail(e, r, "vkAllocateMemory", __FILE__, __LINE__);
    }
    r = vkBindBufferMemory(d->dev, b->buf, b->mem, 0);
    if (r == VK_SUCCESS && (staging || d->device_mappable))
        r = vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
    if (r != VK_SUCCESS) {
        vk_block_destroy(d, b);
        return vk_fail(e, r, "vkBindBufferMemory/vkMapMemory", __FILE__, __LINE__);
    }
    VkBufferDeviceAddressInfo ba = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = b->buf};
    b->addr = vkGetBufferDeviceAddress(d->dev, &ba);
    b->size = size;
    if (!staging) {
        atomic_fetch_add(&d->allocated, size);
        b->counted = size;
    }
    return VKASR_OK;
}

void vk_block_destroy(struct vk_device *d, struct vk_block *b) {
    if (b->map)
        vkUnmapMemory(d->dev, b->mem);
    if (b->buf)
        vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem) {
        vkFreeMemory(d->dev, b->mem, NULL);
        if (b->counted)
            atomic_fetch_sub(&d->allocated, b->counted);
    }
    memset(b, 0, sizeof *b);
}

void vk_arena_init(struct vk_arena *a, uint64_t block_size) {
    memset(a, 0, sizeof *a);
    a->block_size = block_size;
}

vkasr_status vk_arena_alloc(struct vk_device *d, struct vk_arena *a, uint64_t bytes, uint64_t *addr,
                            struct err *e) {
    bytes = align_up(bytes ? bytes : 1, VK_TENSOR_ALIGN);
    /* Bump in the current block, else in a later (released, kept) block that fits. */
    for (size_t i = a->cur; i < a->n; i++) {
        struct vk_block *b = &a->blocks[i];
        if (i > a->cur)
            b->used = 0;
        if (b->size - b->used >= bytes) {
            *addr = b->addr + b->used;
            b->used += bytes;
            a->cur = i;
            a->in_use += bytes;
            if (a->in_use > a->peak)
                a->peak = a->in_use;
            return VKASR_OK;
        }
        /* The remainder of this block is lost until release: account it as in use. */
        if (i == a->cur) {
            a->in_use += b->size - b->used;
            b->used = b->size;
        }
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        struct vk_block *nb = realloc(a->blocks, cap * sizeof *nb);
        if (!nb)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        a->blocks = nb;
        a->cap = cap;
    }
    /* Geometric growth: 16 MiB, then as much as is already reserved, up to block_size; a tensor
     * larger than that gets a block of its own. Small models stay small, large ones use few blocks. */
    uint64_t size = a->reserved > (16ull << 20) ? a->reserved : (16ull << 20);
    if (size > a->block_size)
        size = a->block_size;
    if (size < bytes)
        size = bytes;
    struct vk_block *b = &a->blocks[a->n];
    TRY(vk_block_create(d, size, false, b, e));
    /* Blocks past the current one are free; put the new block right after the current one so the
     * stack order (and release by mark) stays valid. */
    size_t pos = a->n ? a->cur + 1 : 0;
    if (pos < a->n) {
        struct vk_block nbk = *b;
        memmove(&a->blocks[pos + 1], &a->blocks[pos], (a->n - pos) * sizeof *b);
        a->blocks[pos] = nbk;
    }
    a->n++;
    a->cur = pos;
    b = &a->blocks[pos];
    b->used = bytes;
    a->reserved += size;
    a->in_use += bytes;
    if (a->in_use > a->peak)
        a->peak = a->in_use;
    *addr = b->addr;
    return VKASR_OK;
}

vkasr_status vk_arena_reserve(struct vk_device *d, struct vk_arena *a, uint64_t bytes, uint64_t keep, struct err *e) {
    if (a->in_use)
        return err_set(e, VKASR_ERR_INTERNAL, "vk_arena_reserve: %llu bytes still in use",
                       (unsigned long long)a->in_use);
    bytes = align_up(bytes ? bytes : 1, VK_TENSOR_ALIGN);
    if (a->n && a->blocks[0].size >= bytes && a->reserved <= keep)
        return VKASR_OK;
    for (size_t i = 0; i < a->n; i++)
        vk_block_destroy(d, &a->blocks[i]);
    a->n = a->cur = 0;
    a->reserved = a->peak = 0;
    uint64_t most = d->caps.max_alloc < d->caps.max_buffer ? d->caps.max_alloc : d->caps.max_buffer;
    most = most / VK_TENSOR_ALIGN * VK_TENSOR_ALIGN;
    while (a->reserved < bytes) {
        if (a->n == a->cap) {
            size_t cap = a->cap ? a->cap * 2 : 8;
            struct vk_block *nb = realloc(a->blocks, cap * sizeof *nb);
            if (!nb)
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
            a->blocks = nb;
            a->cap = cap;
        }
        uint64_t size = bytes - a->reserved < most ? bytes - a->reserved : most;
        TRY(vk_block_create(d, size, false, &a->blocks[a->n], e));
        a->n++;
        a->reserved += size;
    }
    return VKASR_OK;
}

/* A mark encodes (block index, used bytes) and the in-use counter, packed for the generic backend
 * interface: index in the top 16 bits, offset in the low 48. */
uint64_t vk_arena_mark(const struct vk_arena *a) {
    if (a->n == 0)
        return 0;
    return ((uint64_t)a->cur << 48) | a->blocks[a->cur].used;
}

void vk_arena_release(struct vk_arena *a, uint64_t mark) {
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

struct vk_block *vk_arena_find(struct vk_arena *a, uint64_t addr, uint64_t bytes) {
    for (size_t i = 0; i < a->n; i++) {
        struct vk_block *b = &a->blocks[i];
        if (addr >= b->addr && addr - b->addr <= b->size && bytes <= b->size - (addr - b->addr))
            return b;
    }
    return NULL;
}

void vk_arena_destroy(struct vk_device *d, struct vk_arena *a) {
    for (size_t i = 0; i < a->n; i++)
        vk_block_destroy(d, &a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}
