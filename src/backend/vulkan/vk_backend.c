/* vk_backend.c — the Vulkan backend object: uploads/downloads (direct mapping where
 * device memory is host-visible, a staging buffer otherwise), the op table, profiling export. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/copy.h"
#include "vk_internal.h"

#define VK_STAGING_BYTES (64ull << 20)

static void vkb_destroy(struct backend *bb) {
    struct vk_backend *b = (struct vk_backend *)bb;
    if (b->d && b->d->dev) {
        if (b->capture)
            vk_graph_free(bb, b->capture);
        vk_submit(b, true);
        vk_cmd_destroy(b);
        be_arena_destroy(&b->base.scratch);
        if (b->staging.buf) { /* kept for the next backend when the device holds none yet */
            pthread_mutex_lock(&b->d->staging_lock);
            const bool keep = !b->d->spare_staging.buf;
            if (keep)
                b->d->spare_staging = b->staging;
            pthread_mutex_unlock(&b->d->staging_lock);
            if (!keep)
                vk_block_destroy(b->d, &b->staging);
        }
    }
    free(b);
}

/* The block of the scratch or weights arena holding a range (its handle is the vk_block). */
static struct vk_block *find_block(struct vk_backend *b, uint64_t addr, uint64_t bytes) {
    struct be_arena_block blk;
    return be_find_block(&b->base, addr, bytes, &blk) ? blk.handle : NULL;
}

static vkasr_status ensure_staging(struct vk_backend *b) {
    if (b->staging.buf)
        return VKASR_OK;
    pthread_mutex_lock(&b->d->staging_lock); /* a closed backend's, when the device kept one */
    b->staging = b->d->spare_staging;
    memset(&b->d->spare_staging, 0, sizeof b->d->spare_staging);
    pthread_mutex_unlock(&b->d->staging_lock);
    if (b->staging.buf)
        return VKASR_OK;
    return vk_block_create(b->d, VK_STAGING_BYTES, true, &b->staging, &b->base.err);
}

static vkasr_status vkb_upload(struct backend *bb, uint64_t dst, const void *src, uint64_t bytes) {
    struct vk_backend *b = (struct vk_backend *)bb;
    if (bytes == 0)
        return VKASR_OK;
    struct vk_block *blk = find_block(b, dst, bytes);
    if (!blk)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "upload to unknown device range 0x%llx+%llu",
                       (unsigned long long)dst, (unsigned long long)bytes);
    if (blk->map) {
        /* Pending work may still read the destination: finish it first. */
        TRY(vk_submit(b, true));
        memcpy((char *)blk->map + (dst - blk->addr), src, bytes);
        return VKASR_OK;
    }
    /* Staged, double-buffered: the data goes to the next free bytes of the staging buffer's current half
     * and the copy is recorded after the pending work (vk_record_copy orders it with barriers), with no
     * wait: uploads pile up in the half until it is full (a batch's inputs: hundreds of uploads, one
     * submission per 32 MiB instead of one each). A full half is submitted and the other one filled
     * while the device copies it, once that half's earlier copies have run (a model's weights: the
     * host's copies into the buffer overlap the device's out of it). A waited submission frees both. */
    TRY(ensure_staging(b));
    const uint64_t half = VK_STAGING_BYTES / 2;
    for (uint64_t off = 0; off < bytes; off += half) {
        uint64_t n = bytes - off < half ? bytes - off : half;
        if (b->staging_used + n > half) {
            TRY(vk_submit(b, false));
            b->staging_slot[b->staging_half] = 1 + vk_last_slot(b);
            b->staging_half ^= 1;
            if (b->staging_slot[b->staging_half]) {
                const double t0 = clock_ms();
                TRY(vk_wait_slot(b, b->staging_slot[b->staging_half] - 1));
                bb->upload_wait_ms += clock_ms() - t0;
            }
            b->staging_slot[b->staging_half] = 0;
            b->staging_used = 0;
        }
        const uint64_t at = (uint64_t)b->staging_half * half + b->staging_used;
        const double t0 = clock_ms();
        copy_large((char *)b->staging.map + at, (const char *)src + off, n);
        bb->upload_copy_ms += clock_ms() - t0;
        TRY(vk_record_copy(b, b->staging.buf, at, blk->buf, dst - blk->addr + off, n));
        b->staging_used = (b->staging_used + n + 15) & ~(uint64_t)15;
    }
    return VKASR_OK;
}

static vkasr_status vkb_download(struct backend *bb, void *dst, uint64_t src, uint64_t bytes) {
    struct vk_backend *b = (struct vk_backend *)bb;
    if (bytes == 0)
        return VKASR_OK;
    struct vk_block *blk = find_block(b, src, bytes);
    if (!blk)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "download from unknown device range 0x%llx+%llu",
                       (unsigned long long)src, (unsigned long long)bytes);
    if (blk->map) {
        TRY(vk_submit(b, true));
        memcpy(dst, (const char *)blk->map + (src - blk->addr), bytes);
        return VKASR_OK;
    }
    /* Staged: one submission runs the pending work (staged uploads included: they have read their bytes
     * of the staging buffer before this copy, which vk_record_copy orders after them, overwrites them)
     * and then the copy (one round trip, not two). */
    TRY(ensure_staging(b));
    for (uint64_t off = 0; off < bytes; off += VK_STAGING_BYTES) {
        uint64_t n = bytes - off < VK_STAGING_BYTES ? bytes - off : VK_STAGING_BYTES;
        TRY(vk_record_copy(b, blk->buf, src - blk->addr + off, b->staging.buf, 0, n));
        TRY(vk_submit(b, true));
        memcpy((char *)dst + off, b->staging.map, n);
    }
    return VKASR_OK;
}

static vkasr_status vkb_flush(struct backend *bb) { return vk_submit((struct vk_backend *)bb, false); }
static vkasr_status vkb_sync(struct backend *bb) { return vk_submit((struct vk_backend *)bb, true); }
static vkasr_status vkb_throttle(struct backend *bb, int max_pending) {
    return vk_throttle((struct vk_backend *)bb, max_pending);
}

/* The op table, generated from VKASR_OPS: one thunk per op restores the argument type. */
#define X(name)                                                                                        \
    static vkasr_status thunk_##name(struct vk_backend *b, const void *a) {                            \
        return vk_op_##name(b, (const struct op_##name *)a);                                           \
    }
VKASR_OPS(X)
#undef X

static vkasr_status (*const vk_op_table[OP_COUNT])(struct vk_backend *, const void *) = {
#define X(name) [OP_##name] = thunk_##name,
    VKASR_OPS(X)
#undef X
};

static vkasr_status vkb_run(struct backend *bb, enum op_id id, const void *args) {
    CHECK_OR_RETURN(&bb->err, (unsigned)id < OP_COUNT);
    return vk_op_table[id]((struct vk_backend *)bb, args);
}

static size_t vkb_profile(const struct backend *bb, struct be_op_stat *out, size_t cap) {
    const struct vk_backend *b = (const struct vk_backend *)bb;
    size_t n = 0;
    for (size_t i = 0; i < b->nprof && n < cap; i++, n++)
        out[n] = (struct be_op_stat){b->prof[i].name, b->prof[i].calls, b->prof[i].ms};
    return n;
}

static void vkb_profile_reset(struct backend *bb) { ((struct vk_backend *)bb)->nprof = 0; }

static const struct backend_vtbl vk_backend_vtbl = {
    .destroy = vkb_destroy,
    .upload = vkb_upload,
    .download = vkb_download,
    .flush = vkb_flush,
    .throttle = vkb_throttle,
    .sync = vkb_sync,
    .run = vkb_run,
    .profile = vkb_profile,
    .profile_reset = vkb_profile_reset,
    .graph_begin = vk_graph_begin,
    .graph_end = vk_graph_end,
    .graph_run = vk_graph_run,
    .graph_free = vk_graph_free,
};


vkasr_status vk_backend_create(struct be_device *bd, struct backend **out, struct err *e) {
    *out = NULL;
    struct vk_backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    b->base.vt = &vk_backend_vtbl;
    be_backend_init(&b->base, bd);
    b->d = (struct vk_device *)bd;
    b->base.int8_rows = b->d->caps.int8_rows;
    vkasr_status st = vk_cmd_init(b, e);
    if (st != VKASR_OK) {
        vkb_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return VKASR_OK;
}
