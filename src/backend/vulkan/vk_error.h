/* vk_error.h — VkResult names and the VK_CHECK macro that turns a failed Vulkan call into a vkasr
 * status and message: a leaf that every Vulkan file may use. */
#ifndef VKASR_VK_ERROR_H
#define VKASR_VK_ERROR_H

#include <vulkan/vulkan.h>

#include "common/err.h"

/* Sets e to name the failed call, its VkResult and place; returns the matching vkasr status. */
vkasr_status vk_fail(struct err *e, VkResult r, const char *what, const char *file, int line);
#define VK_CHECK(e, call)                                                                              \
    do {                                                                                               \
        VkResult vk_r_ = (call);                                                                       \
        if (vk_r_ != VK_SUCCESS)                                                                       \
            return vk_fail((e), vk_r_, #call, __FILE__, __LINE__);                                     \
    } while (0)
/* "VK_ERROR_DEVICE_LOST" etc.; "VkResult(?)" for a value it does not know. */
const char *vk_result_name(VkResult r);

#endif
