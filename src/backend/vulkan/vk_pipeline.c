/* vk_pipeline.c — compute pipelines from the embedded SPIR-V table, created lazily per (shader,
 * specialization constants) on first use, so a run pays only for the kernels it uses (on GPUs in
 * parallel, by the creation workers below), and shared by all backends of a device; created through
 * the persistent pipeline cache (vk_pipeline_cache.c). One pipeline layout for all: 128 bytes of push
 * constants and no descriptors (tensors are buffer device addresses). */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "vk_internal.h"
#include "vk_lab.h"

vkasr_status vk_pipelines_init(struct vk_device *d, struct err *e) {
    VkPushConstantRange pcr = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = VK_PUSH_CONSTANT_BYTES,
    };
    VkPipelineLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pcr,
    };
    VK_CHECK(e, vkCreatePipelineLayout(d->dev, &li, NULL, &d->layout));
    return vk_pcache_create(d, e);
}

/* VKASR_PIPELINE_STATS: one log line per executable of a new pipeline with every statistic the driver
 * reports (NVIDIA: registers, shared memory, ...). A query that fails only loses the line. */
static void log_statistics(struct vk_device *d, VkPipeline pipe, const char *name, const uint32_t *spec,
                           uint32_t nspec) {
    PFN_vkGetPipelineExecutablePropertiesKHR props_fn =
        (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutablePropertiesKHR");
    PFN_vkGetPipelineExecutableStatisticsKHR stats_fn =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(d->dev, "vkGetPipelineExecutableStatisticsKHR");
    if (!props_fn || !stats_fn)
        return;
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipe};
    uint32_t nexe = 0;
    if (props_fn(d->dev, &pi, &nexe, NULL) != VK_SUCCESS)
        return;
    char line[1024];
    for (uint32_t x = 0; x < nexe; x++) {
        VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                          .pipeline = pipe, .executableIndex = x};
        VkPipelineExecutableStatisticKHR st[32];
        uint32_t n = 32;
        for (uint32_t i = 0; i < n; i++)
            st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
        VkResult r = stats_fn(d->dev, &ei, &n, st);
        if (r != VK_SUCCESS && r != VK_INCOMPLETE)
            continue;
        size_t len = (size_t)snprintf(line, sizeof line, "pipeline %s", name);
        for (uint32_t i = 0; i < nspec && len < sizeof line; i++)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%u", i ? "," : " [spec ", spec[i]);
        if (nspec && len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, "]");
        for (uint32_t i = 0; i < n && len < sizeof line; i++) {
            const VkPipelineExecutableStatisticKHR *s = &st[i];
            const char *sep = i ? ", " : ": ";
            switch (s->format) {
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %s", sep, s->name,
                                        s->value.b32 ? "yes" : "no");
                break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %lld", sep, s->name, (long long)s->value.i64);
                break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %llu", sep, s->name,
                                        (unsigned long long)s->value.u64);
                break;
            default:
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %g", sep, s->name, s->value.f64);
                break;
            }
        }
        LOG_INFO(d->base.log, "%s", line);
    }
}

static vkasr_status create_pipeline(struct vk_device *d, enum spv_id spv, const uint32_t *spec, uint32_t nspec,
                                    VkPipeline *out, struct err *e) {
    const struct spv_blob *blob = vk_spv_blob(spv); /* vk_pipeline_request checked it */
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = blob->size,
        .pCode = blob->words,
    };
    VkShaderModule mod;
    VK_CHECK(e, vkCreateShaderModule(d->dev, &mi, NULL, &mod));
    VkSpecializationMapEntry entries[8];
    for (uint32_t i = 0; i < nspec; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {
        .mapEntryCount = nspec,
        .pMapEntries = entries,
        .dataSize = 4 * nspec,
        .pData = spec,
    };
    /* Whether the driver found the pipeline in the cache (Vulkan 1.3; counted for logs and tests). */
    VkPipelineCreationFeedback fb = {0}, fb_stage = {0};
    VkPipelineCreationFeedbackCreateInfo fci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pPipelineCreationFeedback = &fb,
        .pipelineStageCreationFeedbackCount = 1,
        .pPipelineStageCreationFeedbacks = &fb_stage,
    };
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .pNext = d->creation_feedback ? &fci : NULL,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = mod,
                .pName = "main",
                .pSpecializationInfo = nspec ? &si : NULL,
            },
        .layout = d->layout,
        .flags = d->pipeline_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
    };
    const double t0 = clock_ms();
    VkResult r = vkCreateComputePipelines(d->dev, d->cache, 1, &ci, NULL, out);
    const double ms = clock_ms() - t0;
    vkDestroyShaderModule(d->dev, mod, NULL);
    atomic_fetch_add(&d->pipeline_us, (uint_fast64_t)(ms * 1e3));
    if (r == VK_SUCCESS) {
        atomic_fetch_add(&d->pipelines_created, 1);
        if (d->pipeline_stats)
            log_statistics(d, *out, blob->name, spec, nspec);
        const bool hit = (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
                         (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
        if (hit)
            atomic_fetch_add(&d->pipeline_cache_hits, 1);
        else /* what a first run waits for: one line per compiled pipeline */
            LOG_INFO(d->base.log, "compiled pipeline %s in %.0f ms", blob->name, ms);
    }
    if (r != VK_SUCCESS)
        return err_set(e, r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? VKASR_ERR_DEVICE_MEMORY : VKASR_ERR_VULKAN,
                       "creating the compute pipeline of shader %s failed: %s", blob->name, vk_result_name(r));
    return VKASR_OK;
}

/* Stores the outcome of p's creation for its waiters. */
static void finish_creation(struct vk_pipeline_entry *p, vkasr_status st, VkPipeline pipe, const struct err *e) {
    struct vk_device *d = p->d;
    pthread_mutex_lock(&d->pipe_lock);
    p->pipeline = pipe;
    p->err = *e;
    p->state = st == VKASR_OK ? VK_PIPE_READY : VK_PIPE_FAILED;
    pthread_cond_broadcast(&d->pipe_done);
    pthread_mutex_unlock(&d->pipe_lock);
}

static void run_creation(struct vk_pipeline_entry *p) {
    struct err e = {0};
    VkPipeline pipe = VK_NULL_HANDLE;
    vkasr_status st = create_pipeline(p->d, p->spv, p->spec, p->nspec, &pipe, &e);
    finish_creation(p, st, pipe, &e);
}

/* The creation workers: threads of the process, shared by every device, started as creations are
 * queued (up to the most any device asked for) and never ending. On NVIDIA's driver (580) a thread that
 * created a pipeline runs driver code when it exits, and that deadlocked against vkDestroyDevice of
 * another device on another thread (test_threads hung with a thread per creation, joined before the
 * device closed or not: docs/gpu-results.md, "Cold start, pipelines and threads"). An idle worker waits
 * on the queue, outside the driver; libvkasr.so stays loaded once loaded (-z nodelete) so that the
 * workers' code stays mapped.
 * A waiter takes over a creation still queued (vk_pipeline_wait), so every creation finishes even
 * where no worker could be started. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;                    /* signalled when a creation is queued               */
    struct vk_pipeline_entry *head, *tail;  /* queued creations, oldest first                    */
    uint32_t queued;                        /* creations in the queue                            */
    uint32_t threads, idle, limit;          /* workers started, waiting, wanted at most          */
} workers = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

/* Takes p, the entry after prev (NULL: the head), off the queue (workers.lock held). */
static void unlink_queued(struct vk_pipeline_entry *prev, struct vk_pipeline_entry *p) {
    *(prev ? &prev->next : &workers.head) = p->next;
    if (workers.tail == p)
        workers.tail = prev;
    p->next = NULL;
    p->queued = false;
    workers.queued--;
}

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&workers.lock);
    for (;;) {
        while (!workers.head) {
            workers.idle++;
            pthread_cond_wait(&workers.work, &workers.lock);
            workers.idle--;
        }
        struct vk_pipeline_entry *p = workers.head;
        unlink_queued(NULL, p);
        pthread_mutex_unlock(&workers.lock);
        run_creation(p);
        pthread_mutex_lock(&workers.lock);
    }
    return NULL;
}

/* Queues p's creation (pipe_lock held; the workers' lock nests inside it) and starts a worker if the
 * queue outnumbers the idle ones and fewer than the most wanted run. */
static void queue_creation(struct vk_device *d, struct vk_pipeline_entry *p) {
    pthread_mutex_lock(&workers.lock);
    p->queued = true;
    p->next = NULL;
    if (workers.tail)
        workers.tail->next = p;
    else
        workers.head = p;
    workers.tail = p;
    workers.queued++;
    if (d->pipe_threads > workers.limit)
        workers.limit = d->pipe_threads;
    if (workers.queued > workers.idle && workers.threads < workers.limit) {
        pthread_t t;
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) == 0) {
            if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                pthread_create(&t, &attr, worker_main, NULL) == 0)
                workers.threads++;
            pthread_attr_destroy(&attr);
        }
    }
    pthread_cond_signal(&workers.work);
    pthread_mutex_unlock(&workers.lock);
}

/* Takes p off the workers' queue if it is still there (pipe_lock held). */
static bool unqueue_creation(struct vk_pipeline_entry *p) {
    bool taken = false;
    pthread_mutex_lock(&workers.lock);
    if (p->queued) {
        struct vk_pipeline_entry *prev = NULL;
        for (struct vk_pipeline_entry *q = workers.head; q != p; q = q->next)
            prev = q;
        unlink_queued(prev, p);
        taken = true;
    }
    pthread_mutex_unlock(&workers.lock);
    return taken;
}

/* Creates p on this thread, pipe_lock held and released meanwhile (other requesters of the entry wait
 * for it as for a queued one). */
static void create_here(struct vk_device *d, struct vk_pipeline_entry *p) {
    pthread_mutex_unlock(&d->pipe_lock);
    run_creation(p);
    pthread_mutex_lock(&d->pipe_lock);
}

/* Starts the creation of entry p (state VK_PIPE_CREATING), pipe_lock held: queued for the workers where
 * the device wants them, else here. */
static void start_creation(struct vk_device *d, struct vk_pipeline_entry *p) {
    if (d->pipe_threads > 0)
        queue_creation(d, p);
    else
        create_here(d, p);
}

/* Waits until no creation of the device is queued or running (pipe_lock held); queued ones are
 * dropped. For a closing device: nothing records on it any more. */
static void settle_creations(struct vk_device *d) {
    for (size_t i = 0; i < d->npipes; i++) {
        struct vk_pipeline_entry *p = d->pipes[i];
        if (p->state == VK_PIPE_CREATING && unqueue_creation(p)) {
            p->state = VK_PIPE_FAILED;
            err_set(&p->err, VKASR_ERR_INTERNAL, "the device closed before its pipeline was created");
        }
        while (p->state == VK_PIPE_CREATING)
            pthread_cond_wait(&d->pipe_done, &d->pipe_lock);
    }
}

vkasr_status vk_pipeline_request(struct vk_device *d, enum spv_id spv, const uint32_t *spec, uint32_t nspec,
                                 struct vk_pipeline_entry **out, struct err *e) {
    if (!vk_spv_blob(spv))
        return err_set(e, VKASR_ERR_UNSUPPORTED, "SPIR-V variant %u is not in this build (a lab variant: tests only)",
                       (unsigned)spv);
    CHECK_OR_RETURN(e, nspec <= 8);
    pthread_mutex_lock(&d->pipe_lock);
    for (size_t i = 0; i < d->npipes; i++) {
        struct vk_pipeline_entry *p = d->pipes[i];
        if (p->spv == spv && p->nspec == nspec && memcmp(p->spec, spec, 4 * nspec) == 0) {
            if (p->state == VK_PIPE_FAILED) { /* tried again (entries live as long as the device) */
                p->state = VK_PIPE_CREATING;
                start_creation(d, p);
            }
            *out = p;
            pthread_mutex_unlock(&d->pipe_lock);
            return VKASR_OK;
        }
    }
    struct vk_pipeline_entry *p = NULL;
    if (d->npipes == d->cappipes) {
        size_t cap = d->cappipes ? 2 * d->cappipes : 32;
        struct vk_pipeline_entry **np = realloc(d->pipes, cap * sizeof *np);
        if (np) {
            d->pipes = np;
            d->cappipes = cap;
        }
    }
    if (d->npipes < d->cappipes)
        p = calloc(1, sizeof *p);
    if (!p) {
        pthread_mutex_unlock(&d->pipe_lock);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    *p = (struct vk_pipeline_entry){.d = d, .spv = spv, .nspec = nspec, .state = VK_PIPE_CREATING};
    if (nspec)
        memcpy(p->spec, spec, 4 * nspec);
    d->pipes[d->npipes++] = p;
    start_creation(d, p);
    *out = p;
    pthread_mutex_unlock(&d->pipe_lock);
    return VKASR_OK; /* a failed creation is reported by vk_pipeline_wait */
}

void vk_pipelines_prewarm(struct vk_device *d) {
    char path[sizeof d->pcache_path + 16];
    struct vk_warm_entry *w = NULL;
    const size_t n = vk_pcache_load_warm(d, &w, path, sizeof path);
    unsigned queued = 0;
    for (size_t i = 0; i < n; i++) {
        struct vk_pipeline_entry *p;
        struct err e = {0};
        if (vk_pipeline_request(d, w[i].spv, w[i].spec, w[i].nspec, &p, &e) == VKASR_OK)
            queued++; /* a failed creation is the first use's to report */
    }
    free(w);
    if (queued)
        LOG_INFO(d->base.log, "start-up: %u pipelines the last run used queued for creation (%s)", queued, path);
}

vkasr_status vk_pipeline_wait(struct vk_pipeline_entry *p, VkPipeline *out, struct err *e) {
    return vk_pipeline_wait_abortable(p, out, NULL, NULL, e);
}

vkasr_status vk_pipeline_wait_abortable(struct vk_pipeline_entry *p, VkPipeline *out, bool (*should_abort)(void *),
                                        void *ud, struct err *e) {
    struct vk_device *d = p->d;
    pthread_mutex_lock(&d->pipe_lock);
    if (p->state == VK_PIPE_CREATING && unqueue_creation(p)) /* no worker has it yet */
        create_here(d, p);
    while (p->state == VK_PIPE_CREATING) {
        if (!should_abort) {
            pthread_cond_wait(&d->pipe_done, &d->pipe_lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->pipe_done, &d->pipe_lock, &ts);
        if (p->state == VK_PIPE_CREATING) {
            pthread_mutex_unlock(&d->pipe_lock); /* the hook runs the caller's code: not under our lock */
            const bool stop = should_abort(ud);
            pthread_mutex_lock(&d->pipe_lock);
            if (stop && p->state == VK_PIPE_CREATING) {
                pthread_mutex_unlock(&d->pipe_lock);
                return err_set(e, VKASR_ABORTED, "aborted while GPU pipelines were being created");
            }
        }
    }
    const bool ok = p->state == VK_PIPE_READY;
    p->used = p->used || ok;
    *out = p->pipeline;
    if (!ok)
        *e = p->err;
    pthread_mutex_unlock(&d->pipe_lock);
    return ok ? VKASR_OK : e->code;
}

vkasr_status vk_pipeline_get(struct vk_device *d, enum spv_id spv, const uint32_t *spec, uint32_t nspec,
                             VkPipeline *out, struct err *e) {
    struct vk_pipeline_entry *p;
    TRY(vk_pipeline_request(d, spv, spec, nspec, &p, e));
    return vk_pipeline_wait(p, out, e);
}

void vk_pipelines_destroy(struct vk_device *d) {
    /* No worker may still create one of this device's pipelines (a run that failed before it bound
     * them leaves creations queued or running). */
    pthread_mutex_lock(&d->pipe_lock);
    settle_creations(d);
    pthread_mutex_unlock(&d->pipe_lock);
    vk_pcache_save(d);
    vk_pcache_save_warm(d);
    for (size_t i = 0; i < d->npipes; i++) {
        if (d->pipes[i]->pipeline)
            vkDestroyPipeline(d->dev, d->pipes[i]->pipeline, NULL);
        free(d->pipes[i]);
    }
    free(d->pipes);
    d->pipes = NULL;
    d->npipes = d->cappipes = 0;
    if (d->cache)
        vkDestroyPipelineCache(d->dev, d->cache, NULL);
    if (d->layout)
        vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    d->cache = VK_NULL_HANDLE;
    d->layout = VK_NULL_HANDLE;
}
