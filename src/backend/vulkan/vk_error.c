/* vk_error.c — VkResult names and vk_fail, the error path of VK_CHECK (vk_error.h). */
#include <string.h>

#include "vk_error.h"

const char *vk_result_name(VkResult r) {
    switch (r) {
#define C(x) case x: return #x;
        C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_INCOMPLETE) C(VK_ERROR_OUT_OF_HOST_MEMORY)
        C(VK_ERROR_OUT_OF_DEVICE_MEMORY) C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST)
        C(VK_ERROR_MEMORY_MAP_FAILED) C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
        C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER) C(VK_ERROR_TOO_MANY_OBJECTS)
        C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_FRAGMENTED_POOL) C(VK_ERROR_UNKNOWN)
        C(VK_ERROR_OUT_OF_POOL_MEMORY) C(VK_ERROR_INVALID_EXTERNAL_HANDLE) C(VK_ERROR_FRAGMENTATION)
        C(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef C
    default: return "VkResult(?)";
    }
}

vkasr_status vk_fail(struct err *e, VkResult r, const char *what, const char *file, int line) {
    vkasr_status st = VKASR_ERR_VULKAN;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        st = VKASR_ERR_DEVICE_MEMORY;
    else if (r == VK_ERROR_DEVICE_LOST)
        st = VKASR_ERR_DEVICE_LOST;
    else if (r == VK_ERROR_OUT_OF_HOST_MEMORY)
        st = VKASR_ERR_NO_MEMORY;
    const char *base = strrchr(file, '/');
    return err_set(e, st, "Vulkan call failed with %s (%d) at %s:%d: %s", vk_result_name(r), (int)r,
                   base ? base + 1 : file, line, what);
}
