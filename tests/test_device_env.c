/* test_device_env.c — the VKASR_* variables read at device creation (lavapipe): VKASR_SUBMIT_BATCH is
 * clamped (it sizes the profiling query pool) and garbage is ignored, each with a warning;
 * VKASR_MAX_GROUPS limits the grid; VKASR_FORCE_STAGING turns host-mapped device memory off and the
 * staged upload/download still round-trips with profiling on; VKASR_PIPELINE_STATS logs a new
 * pipeline's statistics where the driver has VK_KHR_pipeline_executable_properties and is ignored with
 * a warning where it has not; VKASR_PIPELINE_THREADS sets how many pipelines are created at once, and a
 * device closes cleanly with creations still queued; a compiled pipeline is logged with its time. Also
 * the "no usable device" message names every device and what it lacks. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/vulkan/vk_internal.h"
#include "expect.h"


static char last_warning[2048];
static int warnings; /* from the variables' parsing, on this thread */
/* Info lines, also logged by the pipeline creation workers: VKASR_PIPELINE_STATS's, and "compiled
 * pipeline softmax in N ms". */
static atomic_int stats_lines, compiled_lines;

static void on_log(vkasr_log_level level, const char *msg, void *ud) {
    (void)ud;
    if (level == VKASR_LOG_INFO && strncmp(msg, "pipeline ", 9) == 0)
        stats_lines++;
    if (level == VKASR_LOG_INFO && strncmp(msg, "compiled pipeline softmax in ", 29) == 0 && strstr(msg, " ms"))
        compiled_lines++;
    if (level >= VKASR_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
        fprintf(stderr, "vkasr: %s\n", msg);
    }
}

static const struct logger lg = {VKASR_LOG_INFO, on_log, NULL};

/* Opens a device with one variable set (NULL: unset); returns NULL on failure. */
static struct vk_device *open_with(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    warnings = 0;
    last_warning[0] = '\0';
    struct err e = {0};
    struct be_device *bd = NULL;
    struct be_device_options o = {.log = &lg};
    vkasr_status st = vk_device_open(&o, &bd, &e);
    unsetenv(name);
    EXPECT(st == VKASR_OK, "open with %s=%s: %s", name, value ? value : "(unset)", e.msg);
    return st == VKASR_OK ? (struct vk_device *)bd : NULL;
}

static void submit_batch(const char *value, uint32_t want, bool warn) {
    struct vk_device *d = open_with("VKASR_SUBMIT_BATCH", value);
    if (!d)
        return;
    EXPECT(d->submit_batch == want, "VKASR_SUBMIT_BATCH=%s: batch %u, want %u", value ? value : "(unset)",
           d->submit_batch, want);
    EXPECT((warnings > 0) == warn && (!warn || strstr(last_warning, "VKASR_SUBMIT_BATCH")),
           "VKASR_SUBMIT_BATCH=%s: %d warning(s), want %s naming the variable", value ? value : "(unset)", warnings,
           warn ? "one" : "none");
    be_device_close(&d->base);
}

/* Upload, a copy through the device (relu of a relu is a copy for non-negative data), download. */
static void round_trip(const char *what) {
    setenv("VKASR_PROFILE", "1", 1);
    struct vk_device *d = open_with("VKASR_FORCE_STAGING", "1");
    unsetenv("VKASR_PROFILE");
    if (!d)
        return;
    EXPECT(!d->device_mappable, "%s: VKASR_FORCE_STAGING=1 left device memory host-mapped", what);
    struct backend *be = NULL;
    struct err e = {0};
    EXPECT(be_backend_create(&d->base, &be, &e) == VKASR_OK, "backend: %s", e.msg);
    if (be) {
        enum { N = 1000 };
        static float in[N], out[N];
        for (int i = 0; i < N; i++)
            in[i] = (float)i * 0.5f;
        uint64_t a = 0;
        vkasr_status st = be_alloc(be, BE_POOL_SCRATCH, sizeof in, &a);
        if (st == VKASR_OK)
            st = be_upload(be, a, in, sizeof in);
        if (st == VKASR_OK)
            st = be_download(be, out, a, sizeof out);
        EXPECT(st == VKASR_OK && memcmp(in, out, sizeof in) == 0, "%s: staged round trip: %s", what, be->err.msg);
        be_backend_destroy(be);
    }
    be_device_close(&d->base);
}

/* VKASR_PIPELINE_STATS=1: a device whose driver has the statistics logs one line for a new pipeline
 * and no warning; one without (lavapipe in Debian 12) warns once, naming the variable, and logs none.
 * "0" turns it off without a word. */
static void pipeline_stats(const char *value, bool on) {
    struct vk_device *d = open_with("VKASR_PIPELINE_STATS", value);
    if (!d)
        return;
    uint32_t n = 0;
    bool has = false;
    vkEnumerateDeviceExtensionProperties(d->phys, NULL, &n, NULL);
    VkExtensionProperties *ext = calloc(n ? n : 1, sizeof *ext);
    if (ext && vkEnumerateDeviceExtensionProperties(d->phys, NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            has = has || strcmp(ext[i].extensionName, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) == 0;
    free(ext);
    const int warned = warnings;
    const bool named = strstr(last_warning, "VKASR_PIPELINE_STATS") != NULL;
    stats_lines = 0;
    VkPipeline pipe;
    struct err e = {0};
    const uint32_t wg = 64;
    EXPECT(vk_pipeline_get(d, SPV_softmax, &wg, 1, &pipe, &e) == VKASR_OK, "pipeline: %s", e.msg);
    const bool logs = on && has;
    EXPECT(d->pipeline_stats == logs && (stats_lines > 0) == logs,
           "VKASR_PIPELINE_STATS=%s (driver %s the extension): stats %s, %d statistics line(s)", value,
           has ? "has" : "lacks", d->pipeline_stats ? "on" : "off", stats_lines);
    const bool warn = on && !has;
    EXPECT(warned == (warn ? 1 : 0) && (!warn || named), "VKASR_PIPELINE_STATS=%s: %d warning(s), want %s", value,
           warned, warn ? "one naming the variable" : "none");
    be_device_close(&d->base);
}

/* VKASR_PIPELINE_THREADS=N: N pipelines created at once (N - 1 in the background; the default on a CPU
 * driver such as lavapipe: 1, no background creation); garbage is ignored with a warning. With
 * background creations, pipelines requested one after the other are all made (several of them in
 * flight at once), each exactly once, and a second request of one gets the same entry. */
#define DEFAULT_THREADS UINT32_MAX
static void pipeline_threads(const char *value, uint32_t want, bool warn) {
    struct vk_device *d = open_with("VKASR_PIPELINE_THREADS", value);
    if (!d)
        return;
    if (want == DEFAULT_THREADS) { /* the CPU count up to 16 on a GPU, one on a CPU driver */
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        want = d->caps.cpu ? 0u : (uint32_t)(ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu) - 1u;
    }
    EXPECT(d->pipe_threads == want, "VKASR_PIPELINE_THREADS=%s: %u in the background, want %u", value ? value : "(unset)",
           d->pipe_threads, want);
    EXPECT((warnings > 0) == warn && (!warn || strstr(last_warning, "VKASR_PIPELINE_THREADS")),
           "VKASR_PIPELINE_THREADS=%s: %d warning(s), want %s", value ? value : "(unset)", warnings, warn ? "one" : "none");
    enum { NP = 6 };
    static const uint32_t wgs[NP] = {32, 64, 96, 128, 192, 256};
    struct vk_pipeline_entry *p[NP] = {0}, *again = NULL;
    VkPipeline pipe[NP] = {0};
    struct err e = {0};
    const unsigned before = (unsigned)atomic_load(&d->pipelines_created);
    for (int i = 0; i < NP; i++)
        EXPECT(vk_pipeline_request(d, SPV_softmax, &wgs[i], 1, &p[i], &e) == VKASR_OK, "request: %s", e.msg);
    EXPECT(vk_pipeline_request(d, SPV_softmax, &wgs[2], 1, &again, &e) == VKASR_OK && again == p[2],
           "VKASR_PIPELINE_THREADS=%s: a second request of a pipeline made another entry", value ? value : "(unset)");
    for (int i = 0; i < NP; i++)
        if (p[i])
            EXPECT(vk_pipeline_wait(p[i], &pipe[i], &e) == VKASR_OK && pipe[i] != VK_NULL_HANDLE, "wait: %s", e.msg);
    for (int i = 0; i < NP; i++)
        for (int j = 0; j < i; j++)
            EXPECT(pipe[i] != pipe[j], "pipelines %d and %d are one", i, j);
    const unsigned made = (unsigned)atomic_load(&d->pipelines_created) - before;
    EXPECT(made == NP, "VKASR_PIPELINE_THREADS=%s: %u pipelines created for %d requested", value ? value : "(unset)",
           made, NP);
    be_device_close(&d->base);
}

/* A device closed while its pipelines are still queued for the creation workers, or being created
 * (a run that failed before it bound them): the close waits for the one being created and drops the
 * rest, and the workers go on serving the next device (one worker: most requests are still queued). */
static void close_with_creations_queued(void) {
    enum { NP = 8 };
    static const uint32_t wgs[NP] = {32, 64, 96, 128, 160, 192, 224, 256};
    for (int round = 0; round < 2; round++) {
        struct vk_device *d = open_with("VKASR_PIPELINE_THREADS", "2");
        if (!d)
            return;
        struct err e = {0};
        struct vk_pipeline_entry *p = NULL;
        if (round == 0) {
            for (int i = 0; i < NP; i++)
                EXPECT(vk_pipeline_request(d, SPV_softmax, &wgs[i], 1, &p, &e) == VKASR_OK, "request: %s", e.msg);
        } else { /* the next device: a request is served */
            VkPipeline pipe = VK_NULL_HANDLE;
            EXPECT(vk_pipeline_request(d, SPV_softmax, &wgs[NP - 1], 1, &p, &e) == VKASR_OK &&
                       vk_pipeline_wait(p, &pipe, &e) == VKASR_OK && pipe != VK_NULL_HANDLE,
                   "a pipeline after a device closed with creations queued: %s", e.msg);
        }
        const unsigned made = (unsigned)atomic_load(&d->pipelines_created);
        EXPECT(made <= NP, "%u pipelines created for %d requested", made, NP);
        be_device_close(&d->base);
    }
}

/* A pipeline compiled (not found in vkasr's pipeline cache, off here) is logged once, with its time;
 * asking for it again compiles and logs nothing. */
static void compile_log(void) {
    struct vk_device *d = open_with("VKASR_NO_PIPELINE_CACHE", "1");
    if (!d)
        return;
    const uint32_t wg = 288;
    VkPipeline pipe = VK_NULL_HANDLE;
    struct err e = {0};
    compiled_lines = 0;
    for (int i = 0; i < 2; i++)
        EXPECT(vk_pipeline_get(d, SPV_softmax, &wg, 1, &pipe, &e) == VKASR_OK, "pipeline: %s", e.msg);
    EXPECT(compiled_lines == 1, "%d \"compiled pipeline softmax in N ms\" line(s) for one compiled pipeline",
           compiled_lines);
    be_device_close(&d->base);
}

static void unusable_message(void) {
    vkasr_device_info infos[3];
    memset(infos, 0, sizeof infos);
    for (int i = 0; i < 3; i++)
        infos[i].index = i;
    snprintf(infos[0].name, sizeof infos[0].name, "Old GPU");
    snprintf(infos[0].missing, sizeof infos[0].missing, "Vulkan 1.2");
    snprintf(infos[1].name, sizeof infos[1].name, "Fine GPU");
    infos[1].usable = true;
    snprintf(infos[2].name, sizeof infos[2].name, "Small GPU");
    snprintf(infos[2].missing, sizeof infos[2].missing, "shaderInt64, bufferDeviceAddress");
    char buf[512];
    vk_describe_unusable(infos, 3, buf, sizeof buf);
    EXPECT(strcmp(buf, "device 0 (Old GPU) lacks Vulkan 1.2; device 2 (Small GPU) lacks shaderInt64, "
                       "bufferDeviceAddress") == 0,
           "unusable devices: \"%s\"", buf);
    char tiny[20];
    vk_describe_unusable(infos, 3, tiny, sizeof tiny); /* truncated, terminated, no overflow */
    EXPECT(strlen(tiny) == sizeof tiny - 1 && strncmp(tiny, "device 0 (Old GPU)", 18) == 0, "truncated: \"%s\"", tiny);
}

int main(void) {
    unsetenv("VKASR_MAX_GROUPS");
    unsetenv("VKASR_FORCE_STAGING");
    /* No pipeline cache: with one, each device that closes saves a warm list (the pipelines it used), which
     * the next device opened creates in the background, and the counts below would depend on that. */
    unsetenv("VKASR_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    submit_batch(NULL, 96, false);
    submit_batch("7", 7, false);
    submit_batch("4096", VK_MAX_SUBMIT_BATCH, false);
    submit_batch("4097", VK_MAX_SUBMIT_BATCH, true);
    submit_batch("4000000000", VK_MAX_SUBMIT_BATCH, true); /* 2 * VK_RING * this overflows 32 bits */
    submit_batch("99999999999999999999999", VK_MAX_SUBMIT_BATCH, true);
    submit_batch("0", 96, true);
    submit_batch("-5", 96, true);
    submit_batch("12abc", 96, true);
    submit_batch(" 12", 96, true);

    struct vk_device *d = open_with("VKASR_MAX_GROUPS", "3");
    if (d) {
        EXPECT(d->caps.max_groups[0] == 3 && d->caps.max_groups[1] == 3 && d->caps.max_groups[2] == 3,
               "VKASR_MAX_GROUPS=3: %u x %u x %u", d->caps.max_groups[0], d->caps.max_groups[1], d->caps.max_groups[2]);
        be_device_close(&d->base);
    }
    d = open_with("VKASR_MAX_GROUPS", "three");
    if (d) {
        EXPECT(d->caps.max_groups[0] > 3 && warnings == 1 && strstr(last_warning, "VKASR_MAX_GROUPS"),
               "VKASR_MAX_GROUPS=three: groups %u, %d warning(s)", d->caps.max_groups[0], warnings);
        be_device_close(&d->base);
    }
    round_trip("forced staging");
    pipeline_stats("1", true);
    pipeline_stats("0", false);
    pipeline_threads(NULL, DEFAULT_THREADS, false);
    pipeline_threads("1", 0, false);
    pipeline_threads("4", 3, false);
    pipeline_threads("0", DEFAULT_THREADS, true);
    pipeline_threads("many", DEFAULT_THREADS, true);
    close_with_creations_queued();
    compile_log();
    unusable_message();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
