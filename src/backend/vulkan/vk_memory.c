/* vk_memory.c — device memory blocks: one VkBuffer + VkDeviceMemory each, addressed by buffer device
 * address, counted against the heap (or VKASR_MAX_DEVICE_MEMORY_MIB). The arenas that bump-allocate
 * tensors inside them are the shared ones (arena.h), fed by vk_blocks. */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vk_internal.h"

/* A CPU driver's (lavapipe's) mapped device memory is the process's own anonymous memory, untouched until
 * written: its 2 MiB-aligned interior is marked for transparent huge pages, so that the first write (the
 * weights' upload, a session's activations) faults it in 2 MiB at a time, not 4 KiB. A hint: where the
 * memory is something else, madvise refuses and nothing changes. */
static void hint_huge_pages(void *map, uint64_t size) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20, lo = ((uintptr_t)map + huge - 1) & ~(huge - 1),
                    hi = ((uintptr_t)map + (uintptr_t)size) & ~(huge - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)map;
    (void)size;
#endif
}

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
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                 (d->caps.predication ? VK_BUFFER_USAGE_CONDITIONAL_RENDERING_BIT_EXT : 0),
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
    if (b->map && !staging && d->caps.cpu)
        hint_huge_pages(b->map, req.size);
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

/* ---- the arenas' block interface -------------------------------------------------------------- */

/* A device-local block; its vk_block lives on the heap as the arena's handle (stable when the arena's
 * list grows), which uploads and downloads find again through be_find_block. */
static vkasr_status vkm_make(struct be_device *bd, uint64_t bytes, uint64_t *addr, void **handle, struct err *e) {
    struct vk_block *b = malloc(sizeof *b);
    if (!b)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    vkasr_status st = vk_block_create((struct vk_device *)bd, bytes, false, b, e);
    if (st != VKASR_OK) {
        free(b);
        return st;
    }
    *addr = b->addr;
    *handle = b;
    return VKASR_OK;
}

static void vkm_free(struct be_device *bd, uint64_t addr, uint64_t bytes, void *handle) {
    (void)addr;
    (void)bytes;
    vk_block_destroy((struct vk_device *)bd, handle);
    free(handle);
}

/* One buffer bound to one allocation: both maxMemoryAllocationSize and maxBufferSize bound a block. */
static uint64_t vkm_max_block(const struct be_device *bd) {
    const struct vk_caps *c = &((const struct vk_device *)bd)->caps;
    return c->max_alloc < c->max_buffer ? c->max_alloc : c->max_buffer;
}

const struct be_block_ops vk_blocks = {.make = vkm_make, .free = vkm_free, .max_block = vkm_max_block};
