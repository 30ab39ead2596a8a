/* vk_pipeline.c — compute pipelines from the embedded SPIR-V table, created lazily per (shader,
 * specialization constants) on first use, so a run pays only for the kernels it uses, and shared by
 * all backends of a device; created through the persistent pipeline cache (vk_pipeline_cache.c). One
 * pipeline layout for all: 128 bytes of push constants and no descriptors (tensors are buffer device
 * addresses). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

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

void vk_pipelines_destroy(struct vk_device *d) {
    vk_pcache_save(d);
    for (size_t i = 0; i < d->npipes; i++)
        vkDestroyPipeline(d->dev, d->pipes[i].pipeline, NULL);
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
    const struct spv_blob *blob = &spv_table[spv];
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
    VkResult r = vkCreateComputePipelines(d->dev, d->cache, 1, &ci, NULL, out);
    vkDestroyShaderModule(d->dev, mod, NULL);
    if (r == VK_SUCCESS) {
        atomic_fetch_add(&d->pipelines_created, 1);
        if (d->pipeline_stats)
            log_statistics(d, *out, blob->name, spec, nspec);
        if ((fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
            (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT))
            atomic_fetch_add(&d->pipeline_cache_hits, 1);
    }
    if (r != VK_SUCCESS)
        return err_set(e, r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? VKASR_ERR_DEVICE_MEMORY : VKASR_ERR_VULKAN,
                       "creating the compute pipeline of shader %s failed: %s", blob->name, vk_result_name(r));
    return VKASR_OK;
}

vkasr_status vk_pipeline_get(struct vk_device *d, enum spv_id spv, const uint32_t *spec, uint32_t nspec,
                             VkPipeline *out, struct err *e) {
    CHECK_OR_RETURN(e, (unsigned)spv < SPV_COUNT && nspec <= 8);
    pthread_mutex_lock(&d->pipe_lock);
    for (size_t i = 0; i < d->npipes; i++) {
        struct vk_pipeline_entry *p = &d->pipes[i];
        if (p->spv == spv && p->nspec == nspec && memcmp(p->spec, spec, 4 * nspec) == 0) {
            *out = p->pipeline;
            pthread_mutex_unlock(&d->pipe_lock);
            return VKASR_OK;
        }
    }
    vkasr_status st = VKASR_OK;
    if (d->npipes == d->cappipes) {
        size_t cap = d->cappipes ? 2 * d->cappipes : 32;
        struct vk_pipeline_entry *np = realloc(d->pipes, cap * sizeof *np);
        if (!np)
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        else {
            d->pipes = np;
            d->cappipes = cap;
        }
    }
    if (st == VKASR_OK) {
        struct vk_pipeline_entry *p = &d->pipes[d->npipes];
        memset(p, 0, sizeof *p);
        p->spv = spv;
        p->nspec = nspec;
        if (nspec)
            memcpy(p->spec, spec, 4 * nspec);
        st = create_pipeline(d, spv, spec, nspec, &p->pipeline, e);
        if (st == VKASR_OK) {
            d->npipes++;
            *out = p->pipeline;
        }
    }
    pthread_mutex_unlock(&d->pipe_lock);
    return st;
}
