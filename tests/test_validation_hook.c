/* test_validation_hook.c — proves the validation plumbing the op tests rely on is live: with the
 * Khronos layer on, a deliberately invalid call (a zero-size buffer) must be counted. If this test
 * fails, "no validation message" in the other tests means nothing. */
#include <stdio.h>

#include "backend/vulkan/vk_internal.h"

int main(void) {
    static const struct logger quiet = {VKASR_LOG_NONE, NULL, NULL};
    struct err e = {0};
    struct be_device *bd = NULL;
    struct be_device_options o = {.validation = true, .log = &quiet};
    if (vk_device_open(&o, &bd, &e) != VKASR_OK) {
        printf("FAIL: cannot open a Vulkan device: %s\n", e.msg);
        return 1;
    }
    struct vk_device *d = (struct vk_device *)bd;
    uint64_t before = bd->vt->validation_messages(bd);
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = 0, /* VUID-VkBufferCreateInfo-size-00912: size must be greater than 0 */
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
    };
    VkBuffer buf = VK_NULL_HANDLE;
    VkResult r = vkCreateBuffer(d->dev, &bi, NULL, &buf);
    if (r == VK_SUCCESS && buf)
        vkDestroyBuffer(d->dev, buf, NULL);
    uint64_t after = bd->vt->validation_messages(bd);
    be_device_close(bd);
    printf("validation messages: %llu before, %llu after the invalid call\n", (unsigned long long)before,
           (unsigned long long)after);
    if (before != 0 || after == 0) {
        printf("FAIL: the validation layer did not report the invalid call (is vulkan-validationlayers installed?)\n");
        return 1;
    }
    return 0;
}
