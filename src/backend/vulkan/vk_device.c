/* vk_device.c — Vulkan instance, device discovery and description, selection by index or name,
 * logical device creation with the features vkasr needs (Vulkan 1.2, shaderInt64,
 * bufferDeviceAddress; optionally f16 and NV cooperative matrices), and the validation-layer hook. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "vk_gemm.h"
#include "vk_internal.h"

/* Debian 12's headers predate VK_KHR_cooperative_matrix: declare the one constant we query by. */
#ifndef VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#endif
#ifndef VK_KHR_PORTABILITY_SUBSET_EXTENSION_NAME
#define VK_KHR_PORTABILITY_SUBSET_EXTENSION_NAME "VK_KHR_portability_subset"
#endif

/* ---- instance ------------------------------------------------------------------------------- */

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                       VkDebugUtilsMessageTypeFlagsEXT type,
                                                       const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                       void *ud) {
    struct vk_device *d = ud;
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT &&
        (type & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT))) {
        atomic_fetch_add(&d->validation_count, 1);
        log_msg(d->base.log, VKASR_LOG_ERROR, VK_VALIDATION_LOG_PREFIX ": %s", data->pMessage ? data->pMessage : "?");
    }
    return VK_FALSE;
}

static bool has_layer(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *p = calloc(n, sizeof *p);
    if (!p)
        return false;
    bool found = false;
    if (vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(p[i].layerName, name) == 0;
    free(p);
    return found;
}

static bool has_instance_ext(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    if (!p)
        return false;
    bool found = false;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(p[i].extensionName, name) == 0;
    free(p);
    return found;
}

/* d may be NULL (device listing): no debug messenger then. */
vkasr_status vk_instance_create(bool validation, struct vk_device *d, VkInstance *out, struct err *e) {
    uint32_t api = VK_API_VERSION_1_2, loader = 0;
    if (vkEnumerateInstanceVersion(&loader) == VK_SUCCESS && loader >= VK_API_VERSION_1_3)
        api = VK_API_VERSION_1_3;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkasr",
        .pEngineName = "vkasr",
        .engineVersion = VK_MAKE_API_VERSION(0, VKASR_VERSION_MAJOR, VKASR_VERSION_MINOR, VKASR_VERSION_PATCH),
        .apiVersion = api,
    };
    const char *exts[4];
    uint32_t next = 0;
    VkInstanceCreateFlags flags = 0;
    /* MoltenVK and other non-conformant drivers are only listed with portability enumeration. */
    if (has_instance_ext(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        exts[next++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    const char *layers[1];
    uint32_t nlayers = 0;
    bool debug = false;
    if (validation) {
        if (has_layer("VK_LAYER_KHRONOS_validation")) {
            layers[nlayers++] = "VK_LAYER_KHRONOS_validation";
        } else if (d) {
            /* The VK_VALIDATION_LOG_PREFIX makes tests fail on this too: no layer is no check. */
            log_msg(d->base.log, VKASR_LOG_WARN,
                    VK_VALIDATION_LOG_PREFIX " unavailable: VK_LAYER_KHRONOS_validation is not installed "
                    "(Debian: vulkan-validationlayers)");
        }
        if (d && has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
            exts[next++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
            debug = true;
        } else if (d) {
            log_msg(d->base.log, VKASR_LOG_WARN,
                    VK_VALIDATION_LOG_PREFIX " unavailable: without VK_EXT_debug_utils its messages are not received");
        }
    }
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity =
            VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug_message,
        .pUserData = d,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug ? &dbg : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = nlayers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = next,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
        return err_set(e, VKASR_ERR_NO_DEVICE,
                       "no Vulkan driver could be loaded (vkCreateInstance: %s); install a Vulkan ICD, e.g. "
                       "Debian's mesa-vulkan-drivers for lavapipe",
                       vk_result_name(r));
    VK_CHECK(e, r);
    vk_keep_drivers_loaded();
    if (debug) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(*out, "vkCreateDebugUtilsMessengerEXT");
        if (create)
            VK_CHECK(e, create(*out, &dbg, NULL, &d->messenger));
    }
    return VKASR_OK;
}

/* ---- device description ------------------------------------------------------------------------ */

static bool has_device_ext(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    if (!p)
        return false;
    bool found = false;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(p[i].extensionName, name) == 0;
    free(p);
    return found;
}

/* Whether the device lists an NV coopmat shape M x N x K, a x b -> c, at subgroup scope: the f16 GEMM's
 * 16x16x16 f16 x f16 -> f32, the int8 GEMM's 16x16x32 s8 x s8 -> s32. */
static bool nv_coopmat_shape_ok(VkInstance inst, VkPhysicalDevice pd, uint32_t ms, uint32_t ns, uint32_t ks,
                                VkComponentTypeNV ab, VkComponentTypeNV c) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    if (!get)
        return false;
    uint32_t n = 0;
    if (get(pd, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    if (!p)
        return false;
    for (uint32_t i = 0; i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    bool ok = false;
    if (get(pd, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !ok; i++)
            ok = p[i].MSize == ms && p[i].NSize == ns && p[i].KSize == ks && p[i].AType == ab && p[i].BType == ab &&
                 p[i].CType == c && p[i].DType == c && p[i].scope == VK_SCOPE_SUBGROUP_NV;
    free(p);
    return ok;
}

/* The device's subgroup-scope NV coopmat shapes with int8 operands ("MxNxK s8/u8->s32/u32", ...) into buf
 * ("none" if it lists none): logged and shown by test_ops_int8 when the int8 kernel's shape is missing. */
static void nv_coopmat_int8_list(VkInstance inst, VkPhysicalDevice pd, char *buf, size_t n) {
    snprintf(buf, n, "none");
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t cnt = 0;
    if (!get || get(pd, &cnt, NULL) != VK_SUCCESS || cnt == 0)
        return;
    VkCooperativeMatrixPropertiesNV *p = calloc(cnt, sizeof *p);
    if (!p)
        return;
    for (uint32_t i = 0; i < cnt; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    size_t len = 0;
    if (get(pd, &cnt, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < cnt && len + 1 < n; i++) {
            const bool s8 = p[i].AType == VK_COMPONENT_TYPE_SINT8_NV, u8 = p[i].AType == VK_COMPONENT_TYPE_UINT8_NV;
            if ((!s8 && !u8) || p[i].scope != VK_SCOPE_SUBGROUP_NV)
                continue;
            int w = snprintf(buf + len, n - len, "%s%ux%ux%u %s->%s", len ? ", " : "", p[i].MSize, p[i].NSize,
                             p[i].KSize, s8 ? "s8" : "u8", p[i].CType == VK_COMPONENT_TYPE_SINT32_NV ? "s32" : "u32");
            if (w < 0)
                break;
            len += (size_t)w;
        }
    free(p);
}

struct vk_probe {
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm;
    VkPhysicalDeviceVulkan11Properties p11;
    VkPhysicalDeviceMaintenance3Properties pm3;
    VkPhysicalDeviceMaintenance4Properties pm4;
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV psm;
    VkPhysicalDeviceConditionalRenderingFeaturesEXT fcr;
    bool ext_coopmat_nv, ext_coopmat_khr, ext_portability, ext_memory_budget, ext_exec_props, ext_sm_builtins;
    bool ext_cond_render;
    bool coopmat_nv_shape, coopmat_nv_int8_shape;
};

static void probe_device(VkInstance inst, VkPhysicalDevice pd, struct vk_probe *p) {
    memset(p, 0, sizeof *p);
    vkGetPhysicalDeviceProperties(pd, &p->props);
    p->ext_coopmat_nv = has_device_ext(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    p->ext_coopmat_khr = has_device_ext(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    p->ext_portability = has_device_ext(pd, VK_KHR_PORTABILITY_SUBSET_EXTENSION_NAME);
    p->ext_memory_budget = has_device_ext(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    p->ext_exec_props = has_device_ext(pd, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    p->ext_sm_builtins = has_device_ext(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    p->ext_cond_render = has_device_ext(pd, VK_EXT_CONDITIONAL_RENDERING_EXTENSION_NAME);
    if (p->props.apiVersion < VK_API_VERSION_1_2)
        return; /* the 1.1/1.2 feature structs may not be chained: the device is unusable anyway */
    p->f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    p->f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    p->fcm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    p->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    p->f2.pNext = &p->f11;
    p->f11.pNext = &p->f12;
    if (p->ext_coopmat_nv)
        p->f12.pNext = &p->fcm;
    p->fcr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_CONDITIONAL_RENDERING_FEATURES_EXT;
    if (p->ext_cond_render) {
        p->fcr.pNext = p->f12.pNext;
        p->f12.pNext = &p->fcr;
    }
    vkGetPhysicalDeviceFeatures2(pd, &p->f2);

    VkPhysicalDeviceProperties2 pr2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p->p11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES;
    p->pm3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
    p->pm4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
    pr2.pNext = &p->p11;
    p->p11.pNext = &p->pm3;
    if (p->props.apiVersion >= VK_API_VERSION_1_3)
        p->pm3.pNext = &p->pm4;
    /* the SM count (NVIDIA): the GEMM's tile choice counts waves of workgroups with it */
    p->psm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV;
    if (p->ext_sm_builtins) {
        p->psm.pNext = pr2.pNext;
        pr2.pNext = &p->psm;
    }
    vkGetPhysicalDeviceProperties2(pd, &pr2);
    if (p->ext_coopmat_nv && p->fcm.cooperativeMatrix) {
        p->coopmat_nv_shape =
            nv_coopmat_shape_ok(inst, pd, 16, 16, 16, VK_COMPONENT_TYPE_FLOAT16_NV, VK_COMPONENT_TYPE_FLOAT32_NV);
        p->coopmat_nv_int8_shape =
            nv_coopmat_shape_ok(inst, pd, 16, 16, 32, VK_COMPONENT_TYPE_SINT8_NV, VK_COMPONENT_TYPE_SINT32_NV);
    }
}

static void append_missing(char *buf, size_t n, const char *what) {
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", len ? ", " : "", what);
}

static bool queue_family(VkPhysicalDevice pd, uint32_t *family, bool *timestamps) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[32];
    if (n > 32)
        n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0)
            continue;
        /* Prefer a family with timestamps; among those the first (usually graphics+compute). */
        if (best < 0 || (q[i].timestampValidBits && !q[best].timestampValidBits))
            best = (int)i;
    }
    if (best < 0)
        return false;
    *family = (uint32_t)best;
    *timestamps = q[best].timestampValidBits > 0;
    return true;
}

void vk_describe_device(VkInstance inst, VkPhysicalDevice pd, int index, vkasr_device_info *info) {
    struct vk_probe p;
    probe_device(inst, pd, &p);
    memset(info, 0, sizeof *info);
    info->index = index;
    snprintf(info->backend, sizeof info->backend, "vulkan");
    snprintf(info->name, sizeof info->name, "%s", p.props.deviceName);
    const char *type = "other";
    switch (p.props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: type = "discrete"; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: type = "integrated"; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: type = "virtual"; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: type = "cpu"; break;
    default: break;
    }
    snprintf(info->type, sizeof info->type, "%s", type);
    info->api_version = p.props.apiVersion;
    info->vendor_id = p.props.vendorID;
    info->device_id = p.props.deviceID;
    if (p.props.apiVersion >= VK_API_VERSION_1_2) {
        VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
        VkPhysicalDeviceProperties2 pr2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
        vkGetPhysicalDeviceProperties2(pd, &pr2);
        snprintf(info->driver, sizeof info->driver, "%.120s %.120s", drv.driverName, drv.driverInfo);
    } else {
        snprintf(info->driver, sizeof info->driver, "driver version 0x%x", p.props.driverVersion);
    }
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    info->heap_count = mp.memoryHeapCount < 16 ? mp.memoryHeapCount : 16;
    for (uint32_t i = 0; i < info->heap_count; i++) {
        info->heap_size[i] = mp.memoryHeaps[i].size;
        info->heap_device_local[i] = (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    }
    const VkPhysicalDeviceLimits *L = &p.props.limits;
    info->subgroup_size = p.p11.subgroupSize;
    for (int i = 0; i < 3; i++)
        info->max_workgroup_count[i] = L->maxComputeWorkGroupCount[i];
    info->max_shared_memory = L->maxComputeSharedMemorySize;
    info->max_storage_buffer_range = L->maxStorageBufferRange;
    info->max_allocation_size = p.pm3.maxMemoryAllocationSize;
    info->shader_int64 = p.f2.features.shaderInt64;
    info->buffer_device_address = p.f12.bufferDeviceAddress;
    info->shader_float16 = p.f12.shaderFloat16 && p.f11.storageBuffer16BitAccess;
    info->cooperative_matrix_nv = p.ext_coopmat_nv && p.fcm.cooperativeMatrix && p.coopmat_nv_shape &&
                                  p.f12.vulkanMemoryModel && info->shader_float16;
    info->cooperative_matrix_khr = p.ext_coopmat_khr;
    uint32_t fam;
    bool ts = false;
    bool has_queue = queue_family(pd, &fam, &ts);
    info->timestamps = ts && L->timestampPeriod > 0;

    info->usable = true;
    if (p.props.apiVersion < VK_API_VERSION_1_2) {
        info->usable = false;
        append_missing(info->missing, sizeof info->missing, "Vulkan 1.2");
    }
    if (!info->shader_int64) {
        info->usable = false;
        append_missing(info->missing, sizeof info->missing, "shaderInt64");
    }
    if (!info->buffer_device_address) {
        info->usable = false;
        append_missing(info->missing, sizeof info->missing, "bufferDeviceAddress");
    }
    if (!has_queue) {
        info->usable = false;
        append_missing(info->missing, sizeof info->missing, "a compute queue");
    }
    if (L->maxPushConstantsSize < VK_PUSH_CONSTANT_BYTES) {
        info->usable = false;
        append_missing(info->missing, sizeof info->missing, "128 bytes of push constants");
    }
}

vkasr_status vk_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, struct err *e) {
    *count = 0;
    VkInstance inst = VK_NULL_HANDLE;
    TRY(vk_instance_create(false, NULL, &inst, e));
    uint32_t n = 0;
    vkasr_status st = VKASR_OK;
    VkResult r = vkEnumeratePhysicalDevices(inst, &n, NULL);
    VkPhysicalDevice *pds = n ? calloc(n, sizeof *pds) : NULL;
    if (r == VK_SUCCESS && n && !pds)
        st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory listing devices");
    else if (r == VK_SUCCESS && n)
        r = vkEnumeratePhysicalDevices(inst, &n, pds);
    if (st == VKASR_OK && r != VK_SUCCESS && r != VK_INCOMPLETE)
        st = vk_fail(e, r, "vkEnumeratePhysicalDevices", __FILE__, __LINE__);
    if (st == VKASR_OK) {
        for (uint32_t i = 0; i < n && i < capacity && out; i++)
            vk_describe_device(inst, pds[i], (int)i, &out[i]);
        *count = n;
        if (n == 0)
            st = err_set(e, VKASR_ERR_NO_DEVICE, "the Vulkan loader found no physical device");
    }
    free(pds);
    vkDestroyInstance(inst, NULL);
    return st;
}

/* ---- selection and creation ---------------------------------------------------------------------- */

static int type_rank(const char *type) {
    static const char *const order[] = {"discrete", "integrated", "virtual", "other", "cpu"};
    for (int i = 0; i < 5; i++)
        if (strcmp(type, order[i]) == 0)
            return i;
    return 5;
}

static bool icontains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

static bool is_index(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

void vk_describe_unusable(const vkasr_device_info *infos, uint32_t n, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && len + 1 < size; i++) {
        if (infos[i].usable)
            continue;
        int w = snprintf(buf + len, size - len, "%sdevice %d (%s) lacks %s", len ? "; " : "", infos[i].index,
                         infos[i].name, infos[i].missing[0] ? infos[i].missing : "?");
        if (w < 0)
            break;
        len += (size_t)w < size - len ? (size_t)w : size - len - 1;
    }
}

static vkasr_status select_device(struct vk_device *d, const char *want, bool gpu_only, VkPhysicalDevice *out,
                                  vkasr_device_info *chosen, uint32_t *count, struct err *e) {
    uint32_t n = 0;
    VK_CHECK(e, vkEnumeratePhysicalDevices(d->instance, &n, NULL));
    *count = n;
    if (n == 0)
        return err_set(e, VKASR_ERR_NO_DEVICE, "no Vulkan device found (the loader lists none)");
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    vkasr_device_info *infos = calloc(n, sizeof *infos);
    if (!pds || !infos) {
        free(pds);
        free(infos);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    vkasr_status st = VKASR_OK;
    VkResult r = vkEnumeratePhysicalDevices(d->instance, &n, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        st = vk_fail(e, r, "vkEnumeratePhysicalDevices", __FILE__, __LINE__);
    int pick = -1;
    if (st == VKASR_OK) {
        for (uint32_t i = 0; i < n; i++)
            vk_describe_device(d->instance, pds[i], (int)i, &infos[i]);
        if (want && *want) {
            if (is_index(want)) {
                long idx = strtol(want, NULL, 10);
                if (idx >= 0 && idx < (long)n)
                    pick = (int)idx;
                else
                    st = err_set(e, VKASR_ERR_NO_DEVICE, "device index %s out of range (%u device%s found)", want,
                                 n, n == 1 ? "" : "s");
            } else {
                for (uint32_t i = 0; i < n && pick < 0; i++)
                    if (icontains(infos[i].name, want))
                        pick = (int)i;
                if (pick < 0) {
                    char names[512] = "";
                    for (uint32_t i = 0; i < n; i++)
                        append_missing(names, sizeof names, infos[i].name);
                    st = err_set(e, VKASR_ERR_NO_DEVICE, "no Vulkan device matches \"%s\" (found: %s)", want, names);
                }
            }
            if (pick >= 0 && !infos[pick].usable)
                st = err_set(e, VKASR_ERR_NO_DEVICE, "Vulkan device %d (%s) lacks %s", pick, infos[pick].name,
                             infos[pick].missing);
        } else {
            for (uint32_t i = 0; i < n; i++)
                if (infos[i].usable && !(gpu_only && strcmp(infos[i].type, "cpu") == 0) &&
                    (pick < 0 || type_rank(infos[i].type) < type_rank(infos[pick].type)))
                    pick = (int)i;
            if (pick < 0 && gpu_only) {
                st = err_set(e, VKASR_ERR_NO_DEVICE, "no Vulkan GPU found");
            } else if (pick < 0) {
                /* Name every device: the one the user meant to use may not be device 0. */
                char why[900];
                vk_describe_unusable(infos, n, why, sizeof why);
                st = err_set(e, VKASR_ERR_NO_DEVICE, "no usable Vulkan device: %s", why);
            }
        }
    }
    if (st == VKASR_OK) {
        *out = pds[pick];
        *chosen = infos[pick];
    }
    free(pds);
    free(infos);
    return st;
}

/* A positive integer from the environment, dflt when unset. Anything else ("0", "-3", "abc") is ignored
 * and a value above max clamped, each with a warning: a typo must not silently change behaviour. */
static uint32_t env_u32(const struct logger *lg, const char *name, uint32_t dflt, uint32_t max) {
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long v = strtoul(s, &end, 10); /* saturates at ULONG_MAX: clamped below */
    if (!isdigit((unsigned char)s[0]) || *end || v == 0) {
        LOG_WARN(lg, "%s=%s ignored: not a positive integer", name, s);
        return dflt;
    }
    if (v > max) {
        LOG_WARN(lg, "%s=%s clamped to %u", name, s, max);
        return max;
    }
    return (uint32_t)v;
}

static bool env_flag(const char *name) {
    const char *s = getenv(name);
    return s && *s && strcmp(s, "0") != 0;
}

static void choose_memory_types(struct vk_device *d) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(d->phys, &mp);
    const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int dev = -1, stg = -1;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
        VkDeviceSize heap = mp.memoryHeaps[mp.memoryTypes[i].heapIndex].size;
        if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
            /* The largest device-local heap; on equal heaps prefer a non-mappable type (NVIDIA's
             * host-visible device-local type without resizable BAR is a 256 MiB window). */
            if (dev < 0) {
                dev = (int)i;
            } else {
                VkDeviceSize best = mp.memoryHeaps[mp.memoryTypes[dev].heapIndex].size;
                bool cur_host = (mp.memoryTypes[dev].propertyFlags & host) == host;
                if (heap > best || (heap == best && cur_host && (f & host) != host))
                    dev = (int)i;
            }
        }
        if ((f & host) == host) {
            /* Prefer cached system memory for staging (fast host reads of downloads). */
            int score = ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 2 : 0) + ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? 0 : 1);
            if (stg < 0) {
                stg = (int)i;
            } else {
                VkMemoryPropertyFlags g = mp.memoryTypes[stg].propertyFlags;
                int best = ((g & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 2 : 0) + ((g & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? 0 : 1);
                if (score > best)
                    stg = (int)i;
            }
        }
    }
    if (dev < 0)
        dev = stg >= 0 ? stg : 0; /* no device-local type (unusual software drivers) */
    if (stg < 0)
        stg = dev;
    d->mem_device = (uint32_t)dev;
    d->mem_staging = (uint32_t)stg;
    /* VKASR_FORCE_STAGING (a test hook): use the staged upload/download path of discrete GPUs even
     * where device memory is mappable, so lavapipe runs it too. */
    d->device_mappable = (mp.memoryTypes[dev].propertyFlags & host) == host && !env_flag("VKASR_FORCE_STAGING");
    d->heap_index = mp.memoryTypes[dev].heapIndex;
    d->heap_size = mp.memoryHeaps[d->heap_index].size;
    /* VKASR_MAX_DEVICE_MEMORY_MIB: allocate at most this much device memory (a GPU shared with other
     * programs; tests of the out-of-memory path). Allocations past it fail as the heap's end would. */
    uint64_t cap = (uint64_t)env_u32(d->base.log, "VKASR_MAX_DEVICE_MEMORY_MIB", 0xffffffffu, 0xffffffffu) << 20;
    if (cap < d->heap_size) {
        LOG_INFO(d->base.log, "device memory capped at %.0f MiB (VKASR_MAX_DEVICE_MEMORY_MIB)", cap / 1048576.0);
        d->heap_size = cap;
    }
}

static vkasr_status create_logical(struct vk_device *d, const vkasr_device_info *info, bool want_f16,
                                   struct err *e) {
    struct vk_probe p;
    probe_device(d->instance, d->phys, &p);
    bool ts = false;
    if (!queue_family(d->phys, &d->queue_family, &ts))
        return err_set(e, VKASR_ERR_NO_DEVICE, "%s has no compute queue", info->name);

    struct vk_caps *c = &d->caps;
    c->api_version = p.props.apiVersion;
    c->subgroup_size = p.p11.subgroupSize ? p.p11.subgroupSize : 1;
    uint32_t cap = env_u32(d->base.log, "VKASR_MAX_GROUPS", 0xffffffffu, 0xffffffffu);
    for (int i = 0; i < 3; i++) {
        c->max_groups[i] = p.props.limits.maxComputeWorkGroupCount[i];
        if (c->max_groups[i] > cap)
            c->max_groups[i] = cap;
    }
    c->max_wg_invocations = p.props.limits.maxComputeWorkGroupInvocations;
    c->max_shared = p.props.limits.maxComputeSharedMemorySize;
    c->max_alloc = p.pm3.maxMemoryAllocationSize ? p.pm3.maxMemoryAllocationSize : (1ull << 30);
    c->max_buffer = p.pm4.maxBufferSize ? p.pm4.maxBufferSize : c->max_alloc;
    c->timestamp_period = ts ? p.props.limits.timestampPeriod : 0.0f;
    c->cpu = p.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    /* VKASR_GPU_ROW_SHAPES (a test hook): the row reductions' GPU shapes on a CPU driver too, so
     * lavapipe runs their trees. */
    c->gpu_rows = !c->cpu || env_flag("VKASR_GPU_ROW_SHAPES");
    c->shuffle_rel = (p.p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                     (p.p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT);
    c->sm_count = p.ext_sm_builtins ? p.psm.shaderSMCount : 0;
    c->shuffle = (p.p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                 (p.p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    /* Pipeline creation feedback is core in Vulkan 1.3, for the instance (vk_instance_create asks for
     * 1.3 when the loader has it) and the device alike. */
    uint32_t loader = 0;
    d->creation_feedback = p.props.apiVersion >= VK_API_VERSION_1_3 &&
                           vkEnumerateInstanceVersion(&loader) == VK_SUCCESS && loader >= VK_API_VERSION_1_3;
    c->f16 = want_f16 && info->shader_float16 && !env_flag("VKASR_DISABLE_F16");
    c->coopmat_nv = c->f16 && info->cooperative_matrix_nv && !env_flag("VKASR_DISABLE_COOPMAT");
#ifndef VKASR_HAVE_NV_COOPMAT_SHADERS
    c->coopmat_nv = false; /* this build's glslc could not compile the tensor-core kernels */
#endif
    /* The int8 linear of q8_0 weights (vk_op_gemm_i8.c): the 16x16x32 int8 shape and shaderInt8 on top
     * of the f16 tensor cores; VKASR_INT8=0 turns it off (the f16 tensor-core path then runs).
     * VKASR_INT8=emu (a test hook) takes its emulated twin on any f16 device (its accuracy on lavapipe). */
    const char *i8 = getenv("VKASR_INT8");
    c->coopmat_int8 = c->coopmat_nv && p.coopmat_nv_int8_shape && p.f12.shaderInt8 && !(i8 && strcmp(i8, "0") == 0);
#ifndef VKASR_HAVE_NV_INT8_COOPMAT_SHADERS
    c->coopmat_int8 = false;
#endif
    c->int8_emu = c->f16 && i8 && strcmp(i8, "emu") == 0;
    /* Layernorms make the int8 rows of the products they feed in their own pass (op_layernorm.y8);
     * VKASR_INT8_ROWS=0 (a benchmark and test hook) leaves the products to quantize them. */
    const char *rows8 = getenv("VKASR_INT8_ROWS");
    c->int8_rows = (c->coopmat_int8 || c->int8_emu) && !(rows8 && strcmp(rows8, "0") == 0);
    if (p.ext_coopmat_nv && p.fcm.cooperativeMatrix)
        nv_coopmat_int8_list(d->instance, d->phys, d->int8_shapes, sizeof d->int8_shapes);
    else
        snprintf(d->int8_shapes, sizeof d->int8_shapes, "no NV cooperative matrices");
    if (c->coopmat_nv && !c->coopmat_int8 && !(i8 && strcmp(i8, "0") == 0))
        LOG_INFO(d->base.log,
                 "int8 tensor cores off: the int8 GEMM needs the 16x16x32 s8->s32 shape and shaderInt8 (%s); the "
                 "device's int8 shapes: %s",
                 p.f12.shaderInt8 ? "present" : "absent", d->int8_shapes);

    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .cooperativeMatrix = VK_TRUE,
    };
    /* VKASR_PIPELINE_STATS: what the driver's compiler made of each kernel (registers, spills, ...), for
     * kernel work; where the driver offers the statistics. */
    const bool want_stats = env_flag("VKASR_PIPELINE_STATS");
    d->pipeline_stats = want_stats && p.ext_exec_props;
    if (want_stats && !d->pipeline_stats)
        LOG_WARN(d->base.log, "VKASR_PIPELINE_STATS ignored: %s has no VK_KHR_pipeline_executable_properties",
                 info->name);
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexe = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pNext = c->coopmat_nv ? &fcm : NULL,
        .pipelineExecutableInfo = VK_TRUE,
    };
    /* VK_EXT_conditional_rendering: replays of a recorded sequence past the end of its work skip their
     * dispatches (be_graph_begin_predicated); VKASR_DISABLE_PREDICATION turns it off (tests, A/B). */
    c->predication = p.ext_cond_render && p.fcr.conditionalRendering && !env_flag("VKASR_DISABLE_PREDICATION");
    VkPhysicalDeviceConditionalRenderingFeaturesEXT fcr = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_CONDITIONAL_RENDERING_FEATURES_EXT,
        .pNext = d->pipeline_stats ? (void *)&fexe : c->coopmat_nv ? (void *)&fcm : NULL,
        .conditionalRendering = VK_TRUE,
    };
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = c->predication ? (void *)&fcr : fcr.pNext,
        .bufferDeviceAddress = VK_TRUE,
        .shaderFloat16 = c->f16,
        .shaderInt8 = c->coopmat_int8,
        .vulkanMemoryModel = c->coopmat_nv,
        .vulkanMemoryModelDeviceScope = c->coopmat_nv && p.f12.vulkanMemoryModelDeviceScope,
    };
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &f12,
        .storageBuffer16BitAccess = c->f16,
    };
    VkPhysicalDeviceFeatures2 f2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &f11,
        .features = {.shaderInt64 = VK_TRUE},
    };
    const char *exts[6];
    uint32_t next = 0;
    if (c->predication)
        exts[next++] = VK_EXT_CONDITIONAL_RENDERING_EXTENSION_NAME;
    if (d->pipeline_stats)
        exts[next++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    if (p.ext_memory_budget) /* the heap budget and usage the memory plan starts from */
        exts[next++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    if (c->coopmat_nv)
        exts[next++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (p.ext_portability)
        exts[next++] = VK_KHR_PORTABILITY_SUBSET_EXTENSION_NAME; /* required when offered */
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = d->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &f2,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &q,
        .enabledExtensionCount = next,
        .ppEnabledExtensionNames = exts,
    };
    VK_CHECK(e, vkCreateDevice(d->phys, &ci, NULL, &d->dev));
    vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
    if (c->predication) {
        d->begin_predicated = (PFN_vkCmdBeginConditionalRenderingEXT)vkGetDeviceProcAddr(
            d->dev, "vkCmdBeginConditionalRenderingEXT");
        d->end_predicated =
            (PFN_vkCmdEndConditionalRenderingEXT)vkGetDeviceProcAddr(d->dev, "vkCmdEndConditionalRenderingEXT");
        c->predication = d->begin_predicated && d->end_predicated;
    }
    d->memory_budget = p.ext_memory_budget;
    choose_memory_types(d);
    return VKASR_OK;
}

/* ---- be_device vtable ------------------------------------------------------------------------- */

static void vk_device_destroy(struct be_device *bd) {
    struct vk_device *d = (struct vk_device *)bd;
    double t[6] = {clock_ms()}; /* -v's shut-down split: idle, weights, pipelines, device, instance */
    if (d->dev) {
        vkDeviceWaitIdle(d->dev);
        vk_block_destroy(d, &d->spare_staging);
        t[1] = clock_ms();
        be_arena_destroy(&d->base.weights);
        t[2] = clock_ms();
        vk_pipelines_destroy(d);
        t[3] = clock_ms();
        vkDestroyDevice(d->dev, NULL);
    }
    t[4] = clock_ms();
    if (d->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(d->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy)
            destroy(d->instance, d->messenger, NULL);
    }
    if (d->instance)
        vkDestroyInstance(d->instance, NULL);
    t[5] = clock_ms();
    if (d->dev)
        LOG_INFO(d->base.log, "shut-down: device idle %.1f ms, weights freed %.1f, pipelines and their cache %.1f, "
                 "device destroyed %.1f, instance %.1f", t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3],
                 t[5] - t[4]);
    free(d->i8w);
    pthread_mutex_destroy(&d->i8_lock);
    pthread_mutex_destroy(&d->staging_lock);
    pthread_mutex_destroy(&d->queue_lock);
    pthread_mutex_destroy(&d->pipe_lock);
    pthread_cond_destroy(&d->pipe_done);
    be_device_fini(&d->base);
    free(d);
}

static uint64_t vk_device_validation(const struct be_device *bd) {
    struct vk_device *d = (struct vk_device *)bd;
    return atomic_load(&d->validation_count);
}


/* The planner's view of the tensor heap: VK_EXT_memory_budget's budget (what this process may hold, given
 * every other program on the GPU) and usage where the driver has them, else the heap size and what
 * vkasr's arenas hold; VKASR_MAX_DEVICE_MEMORY_MIB (already in heap_size) caps the budget either way. */
static void vk_device_memory(const struct be_device *bd, struct be_memory *out) {
    const struct vk_device *d = (const struct vk_device *)bd;
    *out = (struct be_memory){
        .budget = d->heap_size,
        .used = atomic_load(&d->allocated),
        .max_tensor = d->caps.max_alloc < d->caps.max_buffer ? d->caps.max_alloc : d->caps.max_buffer,
    };
    /* the int8 path's x rows and scales (vk_op_gemm_i8.c; its emulated kernel's stand-in for shared
     * memory too), on top of the stack in a quantized model's products */
    if (d->caps.coopmat_int8 || d->caps.int8_emu)
        out->op_scratch_quant = VK_I8_X_BYTES + 4096 + (d->caps.int8_emu ? (uint64_t)GEMM_EMU_MAX_GROUPS * 49152 : 0);
    if (!d->memory_budget)
        return;
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b};
    vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp);
    if (d->heap_index >= mp.memoryProperties.memoryHeapCount || b.heapBudget[d->heap_index] == 0)
        return; /* a driver that fills nothing in */
    out->source = "VK_EXT_memory_budget";
    if (b.heapBudget[d->heap_index] < out->budget)
        out->budget = b.heapBudget[d->heap_index];
    if (b.heapUsage[d->heap_index] > out->used)
        out->used = b.heapUsage[d->heap_index];
}

static void vk_device_pipelines(const struct be_device *bd, struct be_pipelines *out) {
    struct vk_device *d = (struct vk_device *)bd;
    *out = (struct be_pipelines){
        .created = (unsigned)atomic_load(&d->pipelines_created),
        .cache_hits = (unsigned)atomic_load(&d->pipeline_cache_hits),
        .create_ms = (double)atomic_load(&d->pipeline_us) * 1e-3,
    };
}

static uint64_t vk_device_int8_products(const struct be_device *bd) {
    return atomic_load(&((const struct vk_device *)bd)->i8_products);
}

static const struct be_device_vtbl vk_device_vtbl = {
    .destroy = vk_device_destroy,
    .create_backend = vk_backend_create,
    .validation_messages = vk_device_validation,
    .memory = vk_device_memory,
    .pipelines = vk_device_pipelines,
    .int8_products = vk_device_int8_products,
};

vkasr_status vk_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e) {
    *out = NULL;
    struct vk_device *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    d->base.vt = &vk_device_vtbl;
    d->base.log = opt->log;
    pthread_mutex_init(&d->queue_lock, NULL);
    pthread_mutex_init(&d->pipe_lock, NULL);
    pthread_mutex_init(&d->i8_lock, NULL);
    pthread_mutex_init(&d->staging_lock, NULL);
    pthread_cond_init(&d->pipe_done, NULL);
    be_device_init(&d->base, &vk_blocks);
    atomic_init(&d->validation_count, 0);
    atomic_init(&d->allocated, 0);
    atomic_init(&d->pipelines_created, 0);
    atomic_init(&d->i8_products, 0);
    atomic_init(&d->pipeline_cache_hits, 0);
    atomic_init(&d->pipeline_us, 0);
    d->profile = opt->profile || env_flag("VKASR_PROFILE");
    d->submit_batch = env_u32(d->base.log, "VKASR_SUBMIT_BATCH", 96, VK_MAX_SUBMIT_BATCH);
    bool validation = opt->validation || env_flag("VKASR_VALIDATION");

    vkasr_device_info info;
    double t[5] = {clock_ms()}; /* -v's start-up split: instance, selection, creation, pipeline cache */
    vkasr_status st = vk_instance_create(validation, d, &d->instance, e);
    t[1] = clock_ms();
    uint32_t ndev = 0;
    if (st == VKASR_OK)
        st = select_device(d, opt->device, opt->gpu_only, &d->phys, &info, &ndev, e);
    t[2] = clock_ms();
    if (st != VKASR_OK && opt->gpu_only) /* no GPU to be had here (no driver, none found): the caller's fallback */
        st = e->code = VKASR_ERR_NO_DEVICE;
    if (st == VKASR_OK)
        st = create_logical(d, &info, opt->want_f16, e);
    t[3] = clock_ms();
    if (st == VKASR_OK) {
        /* Pipelines created at once: the requester and the creation workers (vk_pipeline.c). A GPU
         * driver compiles each on the calling thread, so the kernels of a first run compile in
         * parallel; a CPU driver's threads are the ones that run the kernels: one at a time there. */
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        const uint32_t dflt = d->caps.cpu ? 1u : (uint32_t)(ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu);
        d->pipe_threads = env_u32(d->base.log, "VKASR_PIPELINE_THREADS", dflt, 64) - 1;
        st = vk_pipelines_init(d, e);
    }
    if (st != VKASR_OK) {
        vk_device_destroy(&d->base);
        return st;
    }
    t[4] = clock_ms();
    LOG_INFO(d->base.log, "start-up: Vulkan instance %.1f ms", t[1] - t[0]);
    LOG_INFO(d->base.log, "start-up: device selection %.1f ms (%u device%s described)", t[2] - t[1], ndev,
             ndev == 1 ? "" : "s");
    LOG_INFO(d->base.log, "start-up: device creation %.1f ms (%s)", t[3] - t[2], info.name);
    LOG_INFO(d->base.log, "start-up: pipeline layout and cache %.1f ms (%zu bytes of cache read)", t[4] - t[3],
             d->pcache_loaded);
    vk_pipelines_prewarm(d);
    snprintf(d->base.info.name, sizeof d->base.info.name, "%s", info.name);
    d->base.info.f16 = d->caps.f16;
    d->base.info.coopmat = d->caps.coopmat_nv;
    d->base.info.cpu = d->caps.cpu;
    d->base.predicated_graphs = d->caps.predication;
    d->base.info.max_alloc = d->caps.max_alloc;
    d->base.info.heap_bytes = d->heap_size;
    d->base.info.max_groups = d->caps.max_groups[0];
    for (int i = 1; i < 3; i++)
        if (d->caps.max_groups[i] > d->base.info.max_groups)
            d->base.info.max_groups = d->caps.max_groups[i];
    char sms[24] = "";
    if (d->caps.sm_count)
        snprintf(sms, sizeof sms, ", %u SMs", d->caps.sm_count);
    LOG_INFO(d->base.log, "device %d: %s (%s), subgroup %u%s, f16 %s, tensor cores %s, %s memory", info.index,
             info.name, info.type, d->caps.subgroup_size, sms, d->caps.f16 ? "on" : "off",
             d->caps.coopmat_int8 ? "on (int8 too)" : d->caps.coopmat_nv ? "on" : "off",
             d->device_mappable ? "host-mapped" : "staged");
    *out = &d->base;
    return VKASR_OK;
}
