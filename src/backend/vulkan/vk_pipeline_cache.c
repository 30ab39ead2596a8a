/* vk_pipeline_cache.c — the VkPipelineCache kept on disk between runs, so that a run does not pay the
 * driver's shader compilation again (seconds on NVIDIA: docs/gpu-results.md, "Cold start, pipelines and
 * threads"). One file per device, driver and vkasr version ($VKASR_CACHE_DIR, $XDG_CACHE_HOME/vkasr or
 * ~/.cache/vkasr; VKASR_NO_PIPELINE_CACHE=1: off): our header (magic, key, size, checksum), then
 * vkGetPipelineCacheData's bytes. Loaded only when everything matches (else an INFO log), written at
 * device close through a temporary file renamed over the old one, so readers never see a partial file.
 * Every failure only costs the cache. Beside it, the warm list: the pipelines the last run used, created
 * by the next device's creation workers while its model's weights upload. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk_internal.h"

#define PCACHE_MAGIC "VKASRPC1"
#define PCACHE_MAX_BYTES (256ull << 20) /* larger files are not ours to load */

struct pcache_header {
    char magic[8];
    uint32_t header_bytes;  /* sizeof(struct pcache_header)                 */
    uint32_t vkasr_version; /* VKASR_VERSION_NUMBER                          */
    uint32_t vendor_id, device_id, driver_version, pad_;
    uint8_t uuid[VK_UUID_SIZE]; /* pipelineCacheUUID                         */
    uint64_t data_bytes;    /* the driver's data that follows                */
    uint64_t checksum;      /* FNV-1a 64 of the data                         */
};
_Static_assert(sizeof(struct pcache_header) == 64, "pipeline cache header layout");

static uint64_t fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static bool env_on(const char *name) {
    const char *s = getenv(name);
    return s && *s && strcmp(s, "0") != 0;
}

/* mkdir -p; true when dir exists afterwards. */
static bool make_dirs(const char *dir) {
    char buf[sizeof ((struct vk_device *)0)->pcache_path];
    int n = snprintf(buf, sizeof buf, "%s", dir);
    if (n <= 0 || (size_t)n >= sizeof buf)
        return false;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return false;
            *p = '/';
        }
    return mkdir(buf, 0755) == 0 || errno == EEXIST;
}

/* The cache directory (VKASR_CACHE_DIR, $XDG_CACHE_HOME/vkasr, ~/.cache/vkasr) into buf; false when
 * none can be named (no HOME). */
static bool cache_dir(char *buf, size_t size) {
    const char *v = getenv("VKASR_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (v && *v)
        n = snprintf(buf, size, "%s", v);
    else if (xdg && xdg[0] == '/') /* the XDG spec: a relative path is invalid and ignored */
        n = snprintf(buf, size, "%s/vkasr", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/vkasr", home);
    else
        return false;
    return n > 0 && (size_t)n < size;
}

static void fill_key(const struct vk_device *d, struct pcache_header *h) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d->phys, &p);
    memset(h, 0, sizeof *h);
    memcpy(h->magic, PCACHE_MAGIC, 8);
    h->header_bytes = sizeof *h;
    h->vkasr_version = VKASR_VERSION_NUMBER;
    h->vendor_id = p.vendorID;
    h->device_id = p.deviceID;
    h->driver_version = p.driverVersion;
    memcpy(h->uuid, p.pipelineCacheUUID, VK_UUID_SIZE);
}

/* Reads and checks the file; returns the driver's data (malloc'd) or NULL with *why set. */
static void *load_file(const char *path, const struct pcache_header *want, size_t *bytes, const char **why) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = errno == ENOENT ? NULL : strerror(errno); /* none yet: not worth a message */
        return NULL;
    }
    struct pcache_header h;
    void *data = NULL;
    *why = NULL;
    if (fread(&h, sizeof h, 1, f) != 1)
        *why = "truncated header";
    else if (memcmp(h.magic, PCACHE_MAGIC, 8) != 0 || h.header_bytes != sizeof h)
        *why = "not a vkasr pipeline cache";
    else if (h.vkasr_version != want->vkasr_version || h.vendor_id != want->vendor_id ||
             h.device_id != want->device_id || h.driver_version != want->driver_version ||
             memcmp(h.uuid, want->uuid, VK_UUID_SIZE) != 0)
        *why = "made for another device, driver or vkasr version";
    else if (h.data_bytes < 32 || h.data_bytes > PCACHE_MAX_BYTES)
        *why = "implausible size";
    else if (!(data = malloc((size_t)h.data_bytes)))
        *why = "out of host memory";
    else if (fread(data, 1, (size_t)h.data_bytes, f) != h.data_bytes || fgetc(f) != EOF)
        *why = "truncated or oversized data";
    else if (fnv1a64(data, (size_t)h.data_bytes) != h.checksum)
        *why = "checksum mismatch";
    else {
        /* The driver's own header (Vulkan spec, VkPipelineCacheHeaderVersionOne): length, version 1,
         * vendor, device, UUID. */
        const uint8_t *p = data;
        uint32_t len, ver, vendor, device;
        memcpy(&len, p, 4);
        memcpy(&ver, p + 4, 4);
        memcpy(&vendor, p + 8, 4);
        memcpy(&device, p + 12, 4);
        if (len < 32 || len > h.data_bytes || ver != VK_PIPELINE_CACHE_HEADER_VERSION_ONE || vendor != want->vendor_id ||
            device != want->device_id || memcmp(p + 16, want->uuid, VK_UUID_SIZE) != 0)
            *why = "the driver's header does not match this device";
    }
    fclose(f);
    if (*why) {
        free(data);
        return NULL;
    }
    *bytes = (size_t)h.data_bytes;
    return data;
}

vkasr_status vk_pcache_create(struct vk_device *d, struct err *e) {
    const struct logger *lg = d->base.log;
    void *data = NULL;
    size_t bytes = 0;
    d->pcache_path[0] = '\0';
    d->pcache_loaded = 0;
    char dir[sizeof d->pcache_path];
    if (env_on("VKASR_NO_PIPELINE_CACHE")) {
        LOG_INFO(lg, "pipeline cache: off (VKASR_NO_PIPELINE_CACHE)");
    } else if (!cache_dir(dir, sizeof dir)) {
        LOG_INFO(lg, "pipeline cache: off (no VKASR_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    } else {
        struct pcache_header key;
        fill_key(d, &key);
        char uuid[2 * VK_UUID_SIZE + 1];
        for (unsigned i = 0; i < VK_UUID_SIZE; i++)
            snprintf(uuid + 2 * i, 3, "%02x", key.uuid[i]);
        int n = snprintf(d->pcache_path, sizeof d->pcache_path, "%s/pipelines-%04x-%04x-%08x-%s-v%d.bin", dir,
                         key.vendor_id, key.device_id, key.driver_version, uuid, VKASR_VERSION_NUMBER);
        if (n <= 0 || (size_t)n >= sizeof d->pcache_path) {
            LOG_INFO(lg, "pipeline cache: off (the directory's path is too long)");
            d->pcache_path[0] = '\0';
        } else {
            const char *why = NULL;
            data = load_file(d->pcache_path, &key, &bytes, &why);
            if (why)
                LOG_INFO(lg, "pipeline cache: %s ignored (%s)", d->pcache_path, why);
            else if (data)
                LOG_INFO(lg, "pipeline cache: %zu bytes from %s", bytes, d->pcache_path);
        }
    }
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = data ? bytes : 0,
        .pInitialData = data,
    };
    VkResult r = vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
    if (r != VK_SUCCESS && data) {
        /* A driver may refuse data it wrote itself (another build of it): start empty. */
        LOG_INFO(lg, "pipeline cache: the driver refused %s (%s); starting empty", d->pcache_path, vk_result_name(r));
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
    } else if (data) {
        d->pcache_loaded = bytes;
    }
    free(data);
    VK_CHECK(e, r);
    return VKASR_OK;
}

void vk_pcache_save(struct vk_device *d) {
    const struct logger *lg = d->base.log;
    const unsigned created = (unsigned)atomic_load(&d->pipelines_created);
    const unsigned hits = (unsigned)atomic_load(&d->pipeline_cache_hits);
    if (!d->pcache_path[0] || !d->cache || created == hits)
        return; /* off, or nothing new to keep (none created, or every one found in the cache) */
    size_t bytes = 0;
    if (vkGetPipelineCacheData(d->dev, d->cache, &bytes, NULL) != VK_SUCCESS || bytes == 0)
        return;
    if (!d->creation_feedback && bytes == d->pcache_loaded)
        return; /* no hit counts from this driver: an unchanged size means nothing new */
    uint8_t *data = malloc(bytes);
    if (!data)
        return;
    VkResult r = vkGetPipelineCacheData(d->dev, d->cache, &bytes, data);
    char dir[sizeof d->pcache_path], tmp[sizeof d->pcache_path + 16];
    snprintf(dir, sizeof dir, "%s", d->pcache_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int fd = -1;
    const char *why = NULL;
    if (r != VK_SUCCESS) /* VK_INCOMPLETE included: the cache grew between the calls */
        why = vk_result_name(r);
    else if (!make_dirs(dir))
        why = strerror(errno);
    else if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", d->pcache_path) >= (int)sizeof tmp || (fd = mkstemp(tmp)) < 0)
        why = strerror(errno);
    if (!why) {
        struct pcache_header h;
        fill_key(d, &h);
        h.data_bytes = bytes;
        h.checksum = fnv1a64(data, bytes);
        FILE *f = fdopen(fd, "wb");
        bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, bytes, f) == bytes && fflush(f) == 0 &&
                  fsync(fd) == 0;
        if (f ? fclose(f) != 0 : close(fd) != 0)
            ok = false;
        if (!ok || rename(tmp, d->pcache_path) != 0) {
            why = strerror(errno ? errno : EIO);
            remove(tmp);
        }
    }
    if (why)
        LOG_INFO(lg, "pipeline cache: not written to %s (%s)", d->pcache_path, why);
    else
        LOG_INFO(lg, "pipeline cache: %zu bytes written to %s (%u pipelines created, %u of them found in the cache%s)",
                 bytes, d->pcache_path, created, hits, d->creation_feedback ? "" : " as far as the driver says");
    free(data);
}

/* ---- the warm list ---- */

/* warm-KEY.txt beside pipelines-KEY.bin; false when the cache is off. */
static bool warm_path(const struct vk_device *d, char *buf, size_t size) {
    const char *slash = strrchr(d->pcache_path, '/');
    if (!slash || strncmp(slash + 1, "pipelines-", 10) != 0)
        return false;
    const char *key = slash + 11;
    size_t klen = strlen(key);
    if (klen > 4 && strcmp(key + klen - 4, ".bin") == 0)
        klen -= 4;
    int n = snprintf(buf, size, "%.*s/warm-%.*s.txt", (int)(slash - d->pcache_path), d->pcache_path, (int)klen, key);
    return n > 0 && (size_t)n < size;
}

/* The list's text: one line per used pipeline of a shipped shader, "NAME NSPEC S0 S1 ...". malloc'd. */
static char *warm_text(const struct vk_device *d, size_t *len) {
    size_t cap = 1, n = 0; /* a line: the name, then at most 9 numbers of up to 10 digits, blanks, newline */
    for (size_t i = 0; i < d->npipes; i++)
        if (d->pipes[i]->spv < SPV_COUNT)
            cap += strlen(spv_table[d->pipes[i]->spv].name) + 9 * 11 + 1;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    t[0] = '\0';
    for (size_t i = 0; i < d->npipes; i++) {
        const struct vk_pipeline_entry *p = d->pipes[i];
        if (!p->used || p->spv >= SPV_COUNT)
            continue;
        n += (size_t)snprintf(t + n, cap - n, "%s %u", spv_table[p->spv].name, p->nspec);
        for (uint32_t k = 0; k < p->nspec; k++)
            n += (size_t)snprintf(t + n, cap - n, " %u", p->spec[k]);
        n += (size_t)snprintf(t + n, cap - n, "\n");
    }
    *len = n;
    return t;
}

size_t vk_pcache_load_warm(const struct vk_device *d, struct vk_warm_entry **out, char *path, size_t size) {
    char name[128];
    *out = NULL;
    if (d->pipe_threads == 0 || d->pcache_loaded == 0 || !warm_path(d, path, size))
        return 0; /* no workers to create them meanwhile, or no cache to create them from */
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = 0, cap = 0;
    unsigned nspec;
    while (fscanf(f, "%127s %u", name, &nspec) == 2 && nspec <= 8) {
        struct vk_warm_entry w = {.nspec = nspec};
        unsigned k = 0;
        while (k < nspec && fscanf(f, "%u", &w.spec[k]) == 1)
            k++;
        if (k < nspec)
            break;
        uint32_t id = 0;
        while (id < SPV_COUNT && strcmp(spv_table[id].name, name) != 0)
            id++;
        if (id == SPV_COUNT)
            continue; /* a shader this build does not have */
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            struct vk_warm_entry *g = realloc(*out, cap * sizeof *g);
            if (!g)
                break;
            *out = g;
        }
        w.spv = (enum spv_id)id;
        (*out)[n++] = w;
    }
    fclose(f);
    return n;
}

void vk_pcache_save_warm(struct vk_device *d) {
    char path[sizeof d->pcache_path + 16], tmp[sizeof path + 16];
    size_t len = 0;
    if (!d->pcache_path[0] || !warm_path(d, path, sizeof path))
        return;
    char *text = warm_text(d, &len);
    if (!text || len == 0) {
        free(text);
        return;
    }
    size_t old_len = 0;
    char *old = NULL;
    FILE *f = fopen(path, "rb");
    if (f) {
        old = malloc(len + 1);
        old_len = old ? fread(old, 1, len + 1, f) : 0;
        fclose(f);
    }
    const bool same = old && old_len == len && memcmp(old, text, len) == 0;
    free(old);
    int fd = -1;
    if (!same && snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) < (int)sizeof tmp && (fd = mkstemp(tmp)) >= 0) {
        f = fdopen(fd, "wb");
        bool ok = f && fwrite(text, 1, len, f) == len;
        if (f ? fclose(f) != 0 : close(fd) != 0)
            ok = false;
        if (!ok || rename(tmp, path) != 0)
            remove(tmp);
    }
    free(text);
}
