/* vk_graph.c — recorded sequences of ops (backend.h: be_graph_*): the dispatches go into a command
 * buffer of their own, recorded once with simultaneous use, and each replay is that command buffer
 * submitted again, behind the work recorded before it and under the same ring slot's fence. The host
 * pays for recording once, not per op. Not while profiling (timestamps are per dispatch and slot).
 * A predicated sequence (where the device has VK_EXT_conditional_rendering) records its dispatches
 * inside conditional rendering on the predicate's 4 bytes: a replay that begins while they are 0
 * skips them (its barriers still run). */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static void graph_destroy(struct vk_backend *b, struct be_graph *g) {
    if (g->cb)
        vkFreeCommandBuffers(b->d->dev, b->pool, 1, &g->cb);
    free(g->submit);
    free(g);
}

vkasr_status vk_graph_begin(struct backend *bb, const be_tensor *predicate) {
    struct vk_backend *b = (struct vk_backend *)bb;
    struct be_arena_block pb = {0};
    /* (be_graph_begin_predicated checked its type and size) */
    if (predicate && b->d->caps.predication && !be_find_block(bb, predicate->addr, 4, &pb))
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "an op sequence's predicate must be on the device");
    if (b->capture)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "an op sequence is already being recorded");
    if (b->queries)
        return err_set(&bb->err, VKASR_ERR_UNSUPPORTED, "op sequences are not recorded while profiling");
    struct be_graph *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(&bb->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = b->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkResult r = vkAllocateCommandBuffers(b->d->dev, &ai, &g->cb);
    if (r != VK_SUCCESS) {
        g->cb = VK_NULL_HANDLE;
        graph_destroy(b, g);
        return vk_fail(&bb->err, r, "vkAllocateCommandBuffers", __FILE__, __LINE__);
    }
    /* Simultaneous use: one submission carries several replays of the same command buffer. */
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
    };
    r = vkBeginCommandBuffer(g->cb, &bi);
    if (r != VK_SUCCESS) {
        graph_destroy(b, g);
        return vk_fail(&bb->err, r, "vkBeginCommandBuffer", __FILE__, __LINE__);
    }
    g->predicated = predicate && b->d->caps.predication;
    vk_graph_barriers(g->cb, false, g->predicated);
    if (g->predicated) {
        const struct vk_block *blk = pb.handle;
        VkConditionalRenderingBeginInfoEXT ci = {
            .sType = VK_STRUCTURE_TYPE_CONDITIONAL_RENDERING_BEGIN_INFO_EXT,
            .buffer = blk->buf,
            .offset = predicate->addr - blk->addr,
        };
        b->d->begin_predicated(g->cb, &ci);
    }
    /* The graph tracks its own ranges from a full barrier; the ring's come back at the end. */
    memcpy(g->ring_written, b->written, sizeof b->written);
    memcpy(g->ring_read, b->read, sizeof b->read);
    g->ring_n_written = b->n_written;
    g->ring_n_read = b->n_read;
    vk_track_reset(b);
    b->capture = g;
    return VKASR_OK;
}

vkasr_status vk_graph_end(struct backend *bb, struct be_graph **out) {
    struct vk_backend *b = (struct vk_backend *)bb;
    struct be_graph *g = b->capture;
    *out = NULL;
    if (!g)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "no op sequence is being recorded");
    b->capture = NULL;
    memcpy(b->written, g->ring_written, sizeof b->written);
    memcpy(b->read, g->ring_read, sizeof b->read);
    b->n_written = g->ring_n_written;
    b->n_read = g->ring_n_read;
    if (g->predicated)
        b->d->end_predicated(g->cb);
    vk_graph_barriers(g->cb, true, false);
    VkResult r = vkEndCommandBuffer(g->cb);
    if (r != VK_SUCCESS) {
        graph_destroy(b, g);
        return vk_fail(&bb->err, r, "vkEndCommandBuffer", __FILE__, __LINE__);
    }
    *out = g;
    return VKASR_OK;
}

vkasr_status vk_graph_run(struct backend *bb, struct be_graph *g, uint32_t times) {
    struct vk_backend *b = (struct vk_backend *)bb;
    if (!g || b->capture)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "replay of %s", g ? "a graph while recording one" : "no graph");
    if (times == 0)
        return VKASR_OK;
    if (times > g->cap_submit) {
        VkCommandBuffer *ns = realloc(g->submit, times * sizeof *ns);
        if (!ns)
            return err_set(&bb->err, VKASR_ERR_NO_MEMORY, "out of host memory");
        g->submit = ns;
        g->cap_submit = times;
    }
    for (uint32_t i = 0; i < times; i++)
        g->submit[i] = g->cb;
    TRY(vk_submit_with(b, g->submit, times));
    vk_track_reset(b); /* the graph's closing barrier ordered everything before it */
    return VKASR_OK;
}

void vk_graph_free(struct backend *bb, struct be_graph *g) {
    struct vk_backend *b = (struct vk_backend *)bb;
    if (!g)
        return;
    if (b->capture == g) { /* abandoned while recording (an error path) */
        b->capture = NULL;
        memcpy(b->written, g->ring_written, sizeof b->written);
        memcpy(b->read, g->ring_read, sizeof b->read);
        b->n_written = g->ring_n_written;
        b->n_read = g->ring_n_read;
        if (g->predicated)
            b->d->end_predicated(g->cb);
        vkEndCommandBuffer(g->cb); /* its result does not matter: the buffer is freed unsubmitted */
    } else {
        vk_submit(b, true); /* pending replays must finish; a failure here leaves nothing better to do */
    }
    graph_destroy(b, g);
}
