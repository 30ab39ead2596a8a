/* validation_log.h — a log callback for tests that counts vkasr's validation reports: every message of
 * the Khronos layer and the warning that validation was requested but cannot run both start with
 * "Vulkan validation" (VK_VALIDATION_LOG_PREFIX in src/backend/vulkan/vk_device.c). Counting through
 * the logger also catches messages emitted while the device is destroyed (leaked objects), which a
 * count read before be_device_close / vkasr_model_free misses. Header-only; every message is still
 * printed on stderr. */
#ifndef VKASR_TEST_VALIDATION_LOG_H
#define VKASR_TEST_VALIDATION_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkasr.h"

#define TV_PREFIX "Vulkan validation"

/* Whether a test turns the Khronos validation layer on: yes, unless VKASR_TEST_NO_VALIDATION is set.
 * The sanitizer builds set it (tests/CMakeLists.txt): the normal build runs every one of their tests
 * with the layer, and the layer adds nothing to what the sanitizers look for (under ThreadSanitizer
 * its own threads report races that are not vkasr's). */
static inline bool tv_wanted(void) { return getenv("VKASR_TEST_NO_VALIDATION") == NULL; }

static atomic_ulong tv_messages; /* the callback may run on several threads (sessions) */

static inline void tv_log(vkasr_log_level level, const char *message, void *user_data) {
    (void)user_data;
    if (strncmp(message, TV_PREFIX, strlen(TV_PREFIX)) == 0)
        atomic_fetch_add(&tv_messages, 1);
    static const char *const names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "vkasr: %s: %s\n", level >= 0 && level < 4 ? names[level] : "?", message);
}

/* Call after every device is closed. Prints a FAIL line and returns 1 if any report was counted. */
static inline int tv_check(void) {
    unsigned long n = atomic_load(&tv_messages);
    if (n)
        printf("FAIL: %lu Vulkan validation report(s) (see stderr)\n", n);
    return n ? 1 : 0;
}

#endif
