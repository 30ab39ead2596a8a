/* test_validation_hook.c — proves the validation plumbing the other tests rely on is live: with the
 * Khronos layer on, a deliberately invalid call (a zero-size buffer) must be counted and reach the log
 * with the prefix the tests' log callback (validation_log.h) matches, and an object leaked at device
 * destruction must be reported too (after be_device_close, where the tests look). If this test fails,
 * "no validation message" in the other tests means nothing. */
#include <stdio.h>

#include "backend/vulkan/vk_internal.h"
#include "validation_log.h"

int main(void) {
    static const struct logger counting = {VKASR_LOG_WARN, tv_log, NULL};
    struct err e = {0};
    struct be_device *bd = NULL;
    struct be_device_options o = {.validation = true, .log = &counting};
    if (vk_device_open(&o, &bd, &e) != VKASR_OK) {
        printf("FAIL: cannot open a Vulkan device: %s\n", e.msg);
        return 1;
    }
    struct vk_device *d = (struct vk_device *)bd;
    uint64_t before = bd->vt->validation_messages(bd);
    unsigned long logged_before = atomic_load(&tv_messages);
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
    unsigned long logged_after = atomic_load(&tv_messages);

    /* A valid buffer never destroyed: reported by vkDestroyDevice (VUID-vkDestroyDevice-device-00378). */
    bi.size = 256;
    VkBuffer leak = VK_NULL_HANDLE;
    r = vkCreateBuffer(d->dev, &bi, NULL, &leak);
    be_device_close(bd);
    unsigned long logged_close = atomic_load(&tv_messages);
    printf("validation messages: %llu before, %llu after the invalid call; logged %lu, %lu, %lu after the close "
           "with a leaked buffer\n",
           (unsigned long long)before, (unsigned long long)after, logged_before, logged_after, logged_close);
    int fails = 0;
    if (before != 0 || after == 0 || logged_before != 0) {
        printf("FAIL: the validation layer did not report the invalid call (is vulkan-validationlayers installed?)\n");
        fails++;
    }
    if (logged_after != after) {
        printf("FAIL: %llu validation message(s) counted but %lu logged with the prefix \"%s\"\n",
               (unsigned long long)after, logged_after, TV_PREFIX);
        fails++;
    }
    if (r != VK_SUCCESS) {
        printf("FAIL: vkCreateBuffer (valid) failed: %s\n", vk_result_name(r));
        fails++;
    } else if (logged_close <= logged_after) {
        printf("FAIL: the buffer leaked at device destruction was not reported through the log\n");
        fails++;
    }
    return fails ? 1 : 0;
}
