/* vk_cmd.c — command recording for one backend: a ring of command buffers, many dispatches per
 * submit, a global memory barrier only where a dispatch touches bytes an earlier, unsynchronised one
 * wrote (or writes bytes one read), optional per-dispatch timestamps aggregated per op. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "vk_internal.h"

static bool overlap(const struct vk_range *a, const struct vk_range *b) {
    return a->bytes && b->bytes && a->addr < b->addr + b->bytes && b->addr < a->addr + a->bytes;
}

vkasr_status vk_cmd_init(struct vk_backend *b, struct err *e) {
    struct vk_device *d = b->d;
    VkCommandPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = d->queue_family,
    };
    VK_CHECK(e, vkCreateCommandPool(d->dev, &pi, NULL, &b->pool));
    VkCommandBuffer cbs[VK_RING];
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = b->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = VK_RING,
    };
    VK_CHECK(e, vkAllocateCommandBuffers(d->dev, &ai, cbs));
    for (int i = 0; i < VK_RING; i++) {
        b->slots[i].cb = cbs[i];
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        VK_CHECK(e, vkCreateFence(d->dev, &fi, NULL, &b->slots[i].fence));
    }
    for (int i = 0; i < VK_RING; i++) {
        b->slots[i].deferred = calloc(d->submit_batch, sizeof *b->slots[i].deferred);
        if (!b->slots[i].deferred)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    if (d->profile && d->caps.timestamp_period > 0) {
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = VK_RING * 2 * d->submit_batch,
        };
        VK_CHECK(e, vkCreateQueryPool(d->dev, &qi, NULL, &b->queries));
        for (int i = 0; i < VK_RING; i++) {
            b->slots[i].query_names = calloc(d->submit_batch, sizeof(const char *));
            if (!b->slots[i].query_names)
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        }
    }
    return VKASR_OK;
}

void vk_cmd_destroy(struct vk_backend *b) {
    struct vk_device *d = b->d;
    for (int i = 0; i < VK_RING; i++) {
        if (b->slots[i].fence)
            vkDestroyFence(d->dev, b->slots[i].fence, NULL);
        free(b->slots[i].query_names);
        free(b->slots[i].deferred);
    }
    if (b->queries)
        vkDestroyQueryPool(d->dev, b->queries, NULL);
    if (b->pool)
        vkDestroyCommandPool(d->dev, b->pool, NULL);
    free(b->prof);
}

static void profile_add(struct vk_backend *b, const char *name, double ms) {
    for (size_t i = 0; i < b->nprof; i++)
        if (b->prof[i].name == name || strcmp(b->prof[i].name, name) == 0) {
            b->prof[i].calls++;
            b->prof[i].ms += ms;
            return;
        }
    if (b->nprof == b->capprof) {
        size_t cap = b->capprof ? 2 * b->capprof : 32;
        struct vk_profile_entry *np = realloc(b->prof, cap * sizeof *np);
        if (!np)
            return; /* profiling is best effort */
        b->prof = np;
        b->capprof = cap;
    }
    b->prof[b->nprof++] = (struct vk_profile_entry){name, 1, ms};
}

/* How long a wait polls the fence before it blocks. A blocking wait sleeps and is woken by the
 * driver, which costs tens of microseconds: the decoder waits once per emitted token, for a few
 * microseconds of GPU work. Not on a CPU driver, whose threads need the cores. */
#define FENCE_SPIN_MS 0.2 /* 200 microseconds */

/* Waits for a submitted slot, then harvests its timestamps. */
static vkasr_status slot_wait(struct vk_backend *b, int i) {
    struct vk_device *d = b->d;
    struct vk_slot *s = &b->slots[i];
    if (!s->pending)
        return VKASR_OK;
    VkResult fr = VK_NOT_READY;
    if (!d->caps.cpu)
        for (double t0 = clock_ms();
             (fr = vkGetFenceStatus(d->dev, s->fence)) == VK_NOT_READY && clock_ms() - t0 < FENCE_SPIN_MS;)
            ;
    if (fr != VK_SUCCESS && fr != VK_NOT_READY)
        return vk_fail(&b->base.err, fr, "vkGetFenceStatus", __FILE__, __LINE__);
    if (fr == VK_NOT_READY)
        VK_CHECK(&b->base.err, vkWaitForFences(d->dev, 1, &s->fence, VK_TRUE, UINT64_MAX));
    VK_CHECK(&b->base.err, vkResetFences(d->dev, 1, &s->fence));
    s->pending = false;
    if (b->queries && s->n_queries) {
        uint64_t ts[2 * 512];
        uint32_t base = (uint32_t)i * 2 * d->submit_batch;
        for (uint32_t q0 = 0; q0 < s->n_queries; q0 += 512) {
            uint32_t nq = s->n_queries - q0 < 512 ? s->n_queries - q0 : 512;
            VkResult r = vkGetQueryPoolResults(d->dev, b->queries, base + 2 * q0, 2 * nq, sizeof ts, ts,
                                               sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
            if (r != VK_SUCCESS) {
                /* Profiling is best effort, but a gap in it must not pass silently. */
                LOG_WARN(d->base.log, "profiling: vkGetQueryPoolResults failed with %s; %u dispatch(es) not timed",
                         vk_result_name(r), s->n_queries - q0);
                break;
            }
            for (uint32_t k = 0; k < nq; k++)
                profile_add(b, s->query_names[q0 + k], (double)(ts[2 * k + 1] - ts[2 * k]) * d->caps.timestamp_period * 1e-6);
        }
    }
    s->n_queries = 0;
    return VKASR_OK;
}

static vkasr_status ensure_recording(struct vk_backend *b) {
    struct vk_slot *s = &b->slots[b->cur];
    if (s->recording)
        return VKASR_OK;
    TRY(slot_wait(b, b->cur));
    VK_CHECK(&b->base.err, vkResetCommandBuffer(s->cb, 0));
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VK_CHECK(&b->base.err, vkBeginCommandBuffer(s->cb, &bi));
    if (b->queries)
        vkCmdResetQueryPool(s->cb, b->queries, (uint32_t)b->cur * 2 * b->d->submit_batch, 2 * b->d->submit_batch);
    s->recording = true;
    s->n_dispatch = 0;
    s->n_deferred = 0;
    s->n_queries = 0; /* already harvested; also drops the timestamps of a buffer whose end failed */
    return VKASR_OK;
}

static void global_barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags sa, VkPipelineStageFlags dst,
                           VkAccessFlags da) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = sa, .dstAccessMask = da};
    vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void compute_barrier(VkCommandBuffer cb) {
    global_barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT);
}

/* Does this dispatch need a barrier against unsynchronised earlier work (RAW, WAR, WAW)? */
static bool needs_barrier(const struct vk_backend *b, const struct vk_dispatch *dp) {
    if (b->n_written + dp->nwrites > VK_MAX_TRACKED || b->n_read + dp->nreads > VK_MAX_TRACKED)
        return true;
    for (int i = 0; i < dp->nreads; i++)
        for (int j = 0; j < b->n_written; j++)
            if (overlap(&dp->reads[i], &b->written[j]))
                return true;
    for (int i = 0; i < dp->nwrites; i++) {
        for (int j = 0; j < b->n_written; j++)
            if (overlap(&dp->writes[i], &b->written[j]))
                return true;
        for (int j = 0; j < b->n_read; j++)
            if (overlap(&dp->writes[i], &b->read[j]))
                return true;
    }
    return false;
}

/* Writes one noted dispatch into cb: its barrier, pipeline, push constants and launch; with timestamps
 * around the launch while profiling (the current slot's query range). */
static void write_dispatch(struct vk_backend *b, VkCommandBuffer cb, const struct vk_deferred *w, VkPipeline pipe,
                           bool stamps) {
    struct vk_device *d = b->d;
    struct vk_slot *s = &b->slots[b->cur];
    if (w->barrier)
        compute_barrier(cb);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    if (w->pc_size)
        vkCmdPushConstants(cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, w->pc_size, w->pc);
    const uint32_t q = (uint32_t)b->cur * 2 * d->submit_batch + 2 * s->n_queries;
    /* The start stamp waits for the compute work before it (COMPUTE_SHADER, not TOP_OF_PIPE: a
     * top-of-pipe stamp is written as soon as the command is reached, while the previous dispatch
     * may still run, and its interval would then count that dispatch's tail too). */
    if (stamps)
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, b->queries, q);
    vkCmdDispatch(cb, w->groups[0], w->groups[1], w->groups[2]);
    if (stamps) {
        /* Serialise while profiling so each interval covers one dispatch only. */
        compute_barrier(cb);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b->queries, q + 1);
        s->query_names[s->n_queries++] = w->name;
    }
}

/* Writes the current slot's deferred dispatches into its command buffer, in order, each once its
 * pipeline exists (the wait for the first is where a first run's compilations overlap). On failure
 * the rest are dropped: the caller fails the run. */
static vkasr_status emit_deferred(struct vk_backend *b) {
    struct vk_slot *s = &b->slots[b->cur];
    vkasr_status st = VKASR_OK;
    for (uint32_t i = 0; i < s->n_deferred && st == VKASR_OK; i++) {
        VkPipeline pipe;
        st = vk_pipeline_wait_abortable(s->deferred[i].pipe, &pipe, b->base.should_abort, b->base.abort_ud,
                                        &b->base.err);
        if (st == VKASR_OK)
            write_dispatch(b, s->cb, &s->deferred[i], pipe, b->queries != VK_NULL_HANDLE);
    }
    s->n_deferred = 0;
    return st;
}

/* Ends the current slot's recording without submitting it (after a failed or aborted emit_deferred):
 * none of its dispatches run, and the next dispatch resets and begins the buffer anew. */
static void discard_recording(struct vk_backend *b) {
    struct vk_slot *s = &b->slots[b->cur];
    if (!s->recording)
        return;
    s->recording = false;
    (void)vkEndCommandBuffer(s->cb); /* discarded either way: reset before it is begun again */
}

vkasr_status vk_record(struct vk_backend *b, const struct vk_dispatch *dp) {
    struct vk_device *d = b->d;
    struct err *e = &b->base.err;
    CHECK_OR_RETURN(e, dp->pc_size <= VK_PUSH_CONSTANT_BYTES && dp->pc_size % 4 == 0);
    CHECK_OR_RETURN(e, dp->nreads >= 0 && dp->nwrites >= 0 && dp->nreads <= VK_MAX_TRACKED && dp->nwrites <= VK_MAX_TRACKED);
    for (int i = 0; i < 3; i++) {
        /* Kernels loop grid-stride: a launch never exceeds the device's (or the forced) limit. */
        CHECK_OR_RETURN(e, dp->groups[i] >= 1 && dp->groups[i] <= d->caps.max_groups[i]);
    }
    struct vk_pipeline_entry *pe;
    TRY(vk_pipeline_request(d, dp->spv, dp->spec, dp->nspec, &pe, e));
    if (!b->capture)
        TRY(ensure_recording(b));
    struct vk_deferred w = {.pipe = pe, .name = dp->name, .pc_size = dp->pc_size, .barrier = needs_barrier(b, dp)};
    memcpy(w.groups, dp->groups, sizeof w.groups);
    if (dp->pc_size)
        memcpy(w.pc, dp->pc, dp->pc_size);
    if (w.barrier)
        b->n_written = b->n_read = 0;
    for (int i = 0; i < dp->nreads; i++)
        b->read[b->n_read++] = dp->reads[i];
    for (int i = 0; i < dp->nwrites; i++)
        b->written[b->n_written++] = dp->writes[i];
    if (b->capture) { /* a graph: no timestamps, no submission of its own; recorded at once */
        VkPipeline pipe;
        TRY(vk_pipeline_wait(pe, &pipe, e));
        write_dispatch(b, b->capture->cb, &w, pipe, false);
        return VKASR_OK;
    }
    struct vk_slot *s = &b->slots[b->cur];
    s->deferred[s->n_deferred++] = w;
    if (b->queries) /* each dispatch is followed by a barrier while profiling */
        b->n_written = b->n_read = 0;
    if (++s->n_dispatch >= d->submit_batch)
        return vk_submit(b, false);
    return VKASR_OK;
}

vkasr_status vk_record_copy(struct vk_backend *b, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off,
                            uint64_t bytes) {
    if (b->capture)
        return err_set(&b->base.err, VKASR_ERR_INTERNAL, "upload or download while an op sequence is being recorded");
    TRY(ensure_recording(b));
    vkasr_status st = emit_deferred(b); /* the dispatches before the copy come first */
    if (st != VKASR_OK) {
        discard_recording(b);
        return st;
    }
    VkCommandBuffer cb = b->slots[b->cur].cb;
    const VkAccessFlags all = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                              VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT;
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT;
    global_barrier(cb, stages, all, stages, all);
    VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = bytes};
    vkCmdCopyBuffer(cb, src, dst, 1, &region);
    global_barrier(cb, stages, all, stages, all);
    b->n_written = b->n_read = 0;
    return VKASR_OK;
}

void vk_graph_barriers(VkCommandBuffer cb, bool at_end, bool predicated) {
    const VkAccessFlags rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                             VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags work = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    if (at_end)
        global_barrier(cb, work, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                       work | VK_PIPELINE_STAGE_HOST_BIT, rw | VK_ACCESS_HOST_READ_BIT);
    else if (predicated) /* the predicate, written by the replay before or uploaded, is read next */
        global_barrier(cb, work, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                       work | VK_PIPELINE_STAGE_CONDITIONAL_RENDERING_BIT_EXT,
                       rw | VK_ACCESS_CONDITIONAL_RENDERING_READ_BIT_EXT);
    else
        global_barrier(cb, work, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, work, rw);
}

void vk_track_reset(struct vk_backend *b) { b->n_written = b->n_read = 0; }

static vkasr_status submit(struct vk_backend *b, bool wait, const VkCommandBuffer *extra, uint32_t n_extra);

vkasr_status vk_submit(struct vk_backend *b, bool wait) { return submit(b, wait, NULL, 0); }

int vk_last_slot(const struct vk_backend *b) { return (b->cur + VK_RING - 1) % VK_RING; }

vkasr_status vk_wait_slot(struct vk_backend *b, int slot) { return slot_wait(b, slot); }

vkasr_status vk_submit_with(struct vk_backend *b, const VkCommandBuffer *extra, uint32_t n) {
    if (n)
        TRY(ensure_recording(b)); /* the slot whose fence covers the extra command buffers */
    return submit(b, false, extra, n);
}

static vkasr_status submit(struct vk_backend *b, bool wait, const VkCommandBuffer *extra, uint32_t n_extra) {
    struct vk_device *d = b->d;
    struct vk_slot *s = &b->slots[b->cur];
    if (b->capture)
        return err_set(&b->base.err, VKASR_ERR_INTERNAL, "submission while an op sequence is being recorded");
    if (s->recording) {
        vkasr_status st = emit_deferred(b);
        if (st != VKASR_OK) { /* nothing of this buffer is submitted */
            discard_recording(b);
            return st;
        }
        /* Make all device writes available to the host (downloads from mapped memory). */
        global_barrier(s->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                       VK_ACCESS_HOST_READ_BIT);
        /* Not recording from here on whatever the outcome: after a failed end the buffer is invalid and
         * the next dispatch must reset and begin it again rather than record into it. */
        s->recording = false;
        VK_CHECK(&b->base.err, vkEndCommandBuffer(s->cb));
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &s->cb,
        };
        VkSubmitInfo sx = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = n_extra,
            .pCommandBuffers = extra,
        };
        pthread_mutex_lock(&d->queue_lock);
        /* Two batches of one submission, in order, under the slot's fence (signalled when both are done). */
        VkResult r = vkQueueSubmit(d->queue, n_extra ? 2 : 1, (VkSubmitInfo[]){si, sx}, s->fence);
        pthread_mutex_unlock(&d->queue_lock);
        if (r != VK_SUCCESS)
            return vk_fail(&b->base.err, r, "vkQueueSubmit", __FILE__, __LINE__);
        s->pending = true;
        b->cur = (b->cur + 1) % VK_RING;
    }
    if (wait) {
        for (int i = 0; i < VK_RING; i++)
            TRY(slot_wait(b, (b->cur + i) % VK_RING));
        b->staging_used = 0; /* every staged upload's copy has run */
        b->staging_slot[0] = b->staging_slot[1] = 0;
    }
    return VKASR_OK;
}

vkasr_status vk_throttle(struct vk_backend *b, int max_pending) {
    /* Ring order: slot cur is the oldest candidate (submitted VK_RING submissions ago), cur-1 the newest. */
    int pending = 0;
    for (int i = 0; i < VK_RING; i++)
        pending += b->slots[i].pending;
    for (int i = 0; i < VK_RING && pending > max_pending; i++) {
        int s = (b->cur + i) % VK_RING;
        if (b->slots[s].pending) {
            TRY(slot_wait(b, s));
            pending--;
        }
    }
    return VKASR_OK;
}
