/* test_pipeline_cache.c — the persistent pipeline cache (vk_pipeline_cache.c) on lavapipe:
 *   test_pipeline_cache WORKDIR
 * A device that created pipelines writes the cache file at close; the next device loads it (the
 * driver accepts the data; drivers that report pipeline-cache hits, such as NVIDIA's, show them in
 * the counters: lavapipe keeps no pipelines in its cache, so here the load itself is what is checked);
 * truncated, corrupt or foreign files are ignored with an INFO log and replaced by a good one; a
 * directory that cannot be created or written costs the cache and nothing else; concurrent writers
 * leave a whole file; VKASR_NO_PIPELINE_CACHE=1 writes nothing; the pipelines a device used are queued
 * when the next one opens (the warm list). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/vulkan/vk_internal.h"
#include "expect.h"
#include "validation_log.h"

static char infos[8192]; /* the INFO lines about the pipeline cache since the last reset */

static void on_log(vkasr_log_level level, const char *msg, void *ud) {
    if (strstr(msg, "pipeline cache")) {
        size_t n = strlen(infos);
        snprintf(infos + n, sizeof infos - n, "%s\n", msg);
    }
    if (level >= VKASR_LOG_WARN || strncmp(msg, TV_PREFIX, strlen(TV_PREFIX)) == 0)
        tv_log(level, msg, ud); /* counts validation reports */
}

static const struct logger lg = {VKASR_LOG_INFO, on_log, NULL};

static struct vk_device *open_dev(void) {
    struct err e = {0};
    struct be_device *bd = NULL;
    struct be_device_options o = {.validation = tv_wanted(), .want_f16 = true, .log = &lg};
    vkasr_status st = vk_device_open(&o, &bd, &e);
    EXPECT(st == VKASR_OK, "open: %s", e.msg);
    return st == VKASR_OK ? (struct vk_device *)bd : NULL;
}

/* Runs an op (a unary relu: one pipeline) on the device. */
static void use(struct vk_device *d) {
    struct backend *be = NULL;
    struct err e = {0};
    EXPECT(be_backend_create(&d->base, &be, &e) == VKASR_OK, "backend: %s", e.msg);
    if (!be)
        return;
    static const float in[64] = {1.0f, -2.0f};
    be_tensor t;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){64}, &t);
    if (st == VKASR_OK)
        st = be_upload(be, t.addr, in, sizeof in);
    if (st == VKASR_OK)
        st = be_unary(be, &(struct op_unary){.x = t, .y = t, .act = ACT_RELU, .alpha = 1.0f});
    if (st == VKASR_OK)
        st = be_sync(be);
    EXPECT(st == VKASR_OK, "relu: %s", be->err.msg);
    be_backend_destroy(be);
}

/* The cache file in dir (the one pipelines-*.bin there), or "" if none; also counts the files. */
static int find_file(const char *dir, char *path, size_t size) {
    path[0] = '\0';
    int n = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    for (struct dirent *de; (de = readdir(dp));) {
        if (strncmp(de->d_name, "pipelines-", 10) != 0)
            continue;
        n++;
        snprintf(path, size, "%s/%s", dir, de->d_name);
    }
    closedir(dp);
    return n;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Opens, uses and closes a device; returns the bytes its cache was seeded with. */
static size_t cycle(const char *what, bool expect_ignored) {
    infos[0] = '\0';
    struct vk_device *d = open_dev();
    if (!d)
        return 0;
    size_t loaded = d->pcache_loaded;
    EXPECT((strstr(infos, "ignored") != NULL) == expect_ignored, "%s: the INFO lines were \"%s\"", what, infos);
    use(d);
    EXPECT(atomic_load(&d->pipelines_created) >= 1, "%s: no pipeline was created", what);
    printf("%s: seeded with %zu bytes, %u pipeline(s) created, %u found in the cache\n", what, loaded,
           (unsigned)atomic_load(&d->pipelines_created), (unsigned)atomic_load(&d->pipeline_cache_hits));
    be_device_close(&d->base);
    return loaded;
}

static void overwrite(const char *path, long offset, const void *bytes, size_t n, long truncate_to) {
    FILE *f = fopen(path, "r+b");
    EXPECT(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    if (n) {
        fseek(f, offset, SEEK_SET);
        fwrite(bytes, 1, n, f);
    }
    fclose(f);
    if (truncate_to >= 0)
        EXPECT(truncate(path, truncate_to) == 0, "truncate %s", path);
}

static void *close_in_thread(void *d) {
    be_device_close(d);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_pipeline_cache WORKDIR\n");
        return 2;
    }
    char dir[1024], path[2048], path2[2048];
    unsetenv("VKASR_NO_PIPELINE_CACHE");
    snprintf(dir, sizeof dir, "%s/cache", argv[1]);
    mkdir(argv[1], 0755);
    /* a fresh directory: remove what an earlier run left */
    if (find_file(dir, path, sizeof path))
        remove(path);
    rmdir(dir);
    setenv("VKASR_CACHE_DIR", dir, 1);

    /* written at the first close (the directory is created), loaded by the next device */
    EXPECT(cycle("first run", false) == 0, "first run: seeded from a file that should not exist");
    EXPECT(find_file(dir, path, sizeof path) == 1, "no cache file in %s after a device created pipelines", dir);
    long size = file_size(path);
    EXPECT(size >= 64 + 32, "cache file %s: %ld bytes", path, size);
    size_t loaded = cycle("second run", false);
    EXPECT(loaded > 0 && (long)loaded == size - 64, "second run: seeded with %zu bytes of a %ld-byte file", loaded,
           size);
    EXPECT(strstr(infos, "bytes from") != NULL, "second run: no INFO line about the load: \"%s\"", infos);

    /* the warm list: what the last device used is queued at open for the next device's creation workers
     * (a device with workers: lavapipe has none unless asked) */
    setenv("VKASR_PIPELINE_THREADS", "2", 1);
    struct vk_device *w = open_dev();
    if (w) {
        pthread_mutex_lock(&w->pipe_lock);
        const size_t queued = w->npipes;
        pthread_mutex_unlock(&w->pipe_lock);
        EXPECT(queued >= 1, "warm list: no pipeline queued when the device opened");
        use(w);
        be_device_close(&w->base);
    }
    unsetenv("VKASR_PIPELINE_THREADS");

    /* damaged files: ignored with an INFO line, never loaded, and replaced by a good one at close */
    static const struct {
        const char *what;
        long offset;
        const char *bytes;
        long truncate_to;
    } damage[] = {
        {"truncated header", 0, NULL, 40},
        {"truncated data", 0, NULL, 64 + 16},
        {"corrupt data", 64 + 20, "garbage!", -1},
        {"corrupt magic", 0, "NOTVKASR", -1},
        {"another vkasr version", 12, "\x01\x02\x03\x04", -1},
        {"empty file", 0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        find_file(dir, path, sizeof path);
        overwrite(path, damage[i].offset, damage[i].bytes, damage[i].bytes ? strlen(damage[i].bytes) : 0,
                  damage[i].truncate_to);
        EXPECT(cycle(damage[i].what, true) == 0, "%s: the damaged file was loaded", damage[i].what);
        EXPECT(cycle("after it", false) > 0, "%s: no good file was written in its place", damage[i].what);
    }

    /* concurrent writers: two devices close at once; the file is whole afterwards */
    infos[0] = '\0';
    struct vk_device *a = open_dev(), *b = open_dev();
    if (a && b) {
        use(a);
        use(b);
        pthread_t ta, tb;
        pthread_create(&ta, NULL, close_in_thread, a);
        pthread_create(&tb, NULL, close_in_thread, b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        EXPECT(find_file(dir, path, sizeof path) == 1, "concurrent writers left %d cache files (temporaries?)",
               find_file(dir, path2, sizeof path2));
        EXPECT(cycle("after concurrent writers", false) > 0, "the file written by concurrent writers did not load");
    } else {
        if (a)
            be_device_close(&a->base);
        if (b)
            be_device_close(&b->base);
    }

    /* a directory that cannot be created (its parent is a file): no cache, no error */
    snprintf(path, sizeof path, "%s/not-a-directory", argv[1]);
    FILE *f = fopen(path, "w");
    EXPECT(f != NULL, "cannot create %s", path);
    if (f)
        fclose(f);
    snprintf(path2, sizeof path2, "%s/sub", path);
    setenv("VKASR_CACHE_DIR", path2, 1);
    cycle("unwritable directory", true); /* the load says why too (ENOTDIR) */
    EXPECT(strstr(infos, "not written") != NULL, "unwritable directory: no INFO line: \"%s\"", infos);
    remove(path);

    /* off: nothing written */
    snprintf(path2, sizeof path2, "%s/off", argv[1]);
    setenv("VKASR_CACHE_DIR", path2, 1);
    setenv("VKASR_NO_PIPELINE_CACHE", "1", 1);
    cycle("VKASR_NO_PIPELINE_CACHE=1", false);
    EXPECT(find_file(path2, path, sizeof path) == 0, "VKASR_NO_PIPELINE_CACHE=1 wrote %s", path);
    unsetenv("VKASR_NO_PIPELINE_CACHE");

    if (tv_check())
        failures++;
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
