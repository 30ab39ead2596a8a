/* test_big_tensor.c — element-wise kernels over a tensor of more than 2^31 elements (GPU machines
 * only; registered with -DVKASR_GPU_TESTS=ON). Runs unary relu in place over x [N] and the constant
 * pad x [N] -> y [N+17] (5 before, 12 after), then checks the first, last, boundary and ~1000
 * pseudo-random elements of each by downloading just those 4 bytes. Prints elements, GB, time per op
 * and effective bandwidth; exits non-zero on any mismatch or error. The device: $VKASR_TEST_DEVICE (e.g.
 * "cuda": the CUDA backend), else the Vulkan device $VKASR_DEVICE names, else the best one.
 * Usage: test_big_tensor [elements]   (default 2.6e9, ~10.4 GB per tensor; e.g. 3e7 for a smoke run) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"

#define PAD_BEFORE 5
#define PAD_AFTER 12
#define PAD_VALUE (-7.25f)
#define SAMPLES 1000
#define REPS 3

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* x[i] before relu: a multiple of 1/8 in [-125, 125] (exact in f32), half of them negative. */
static float pattern(uint64_t i) { return (float)((int64_t)(mix(i) % 2001) - 1000) / 8.0f; }
static float relu(float v) { return v > 0 ? v : 0.0f; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int failures;

static int fail_status(const char *what, struct backend *b) {
    fprintf(stderr, "FAIL: %s: %s\n", what, b->err.msg);
    return 1;
}

/* Compares element i of t (one 4-byte download) with want, bit for bit. */
static int check_at(struct backend *b, const be_tensor *t, uint64_t i, float want, const char *name) {
    float got;
    if (be_download(b, &got, t->addr + 4 * i, 4))
        return fail_status("download", b);
    if (memcmp(&got, &want, 4) != 0) {
        if (failures++ < 20)
            printf("FAIL: %s[%llu] = %.9g, want %.9g\n", name, (unsigned long long)i, got, want);
    }
    return 0;
}

/* Runs op `run` once to warm up (pipeline creation), then REPS times; returns the best time. */
static int time_op(struct backend *b, enum op_id id, const void *args, double *best) {
    *best = INFINITY;
    for (int r = 0; r <= REPS; r++) {
        double t0 = now_s();
        if (be_run(b, id, args) || be_sync(b))
            return fail_status(op_name(id), b);
        double t = now_s() - t0;
        if (r > 0 && t < *best)
            *best = t;
    }
    return 0;
}

static int run(uint64_t n, struct backend *b) {
    uint64_t ny = n + PAD_BEFORE + PAD_AFTER;
    /* A spacer between x and y holding a value neither op produces: a read past the end of x (or a
     * write past it) then shows as a mismatch instead of landing on y's own padding value. */
    be_tensor x, gap, y;
    enum { GAP = 256 };
    if (be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){(int64_t)n}, &x) ||
        be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){GAP}, &gap) ||
        be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){(int64_t)ny}, &y))
        return fail_status("allocating x and y", b);
    float gap_data[GAP];
    for (int k = 0; k < GAP; k++)
        gap_data[k] = 12345.5f;
    if (be_upload(b, gap.addr, gap_data, sizeof gap_data))
        return fail_status("upload", b);

    /* Fill x chunk by chunk (the host never holds the whole tensor). */
    const uint64_t chunk = 16u << 20;
    float *buf = malloc(chunk * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "FAIL: out of host memory\n");
        return 1;
    }
    double t0 = now_s();
    for (uint64_t off = 0; off < n; off += chunk) {
        uint64_t m = n - off < chunk ? n - off : chunk;
        for (uint64_t k = 0; k < m; k++)
            buf[k] = pattern(off + k);
        if (be_upload(b, x.addr + 4 * off, buf, 4 * m)) {
            free(buf);
            return fail_status("upload", b);
        }
    }
    free(buf);
    printf("upload: %.2f s\n", now_s() - t0);

    /* relu in place (relu twice = relu once, so every repetition leaves the same data). */
    struct op_unary ru = {.x = x, .y = x, .act = ACT_RELU, .alpha = 1.0f};
    double t_relu, t_pad;
    if (time_op(b, OP_unary, &ru, &t_relu))
        return 1;
    struct op_pad pd = {.x = x, .y = y, .before = {PAD_BEFORE}, .value = PAD_VALUE};
    if (time_op(b, OP_pad, &pd, &t_pad))
        return 1;
    double gb_relu = 8.0 * (double)n / 1e9, gb_pad = 4.0 * (double)(n + ny) / 1e9;
    printf("unary relu (in place): %.3f ms, %.1f GB/s effective (%.2f GB read + written)\n", 1e3 * t_relu,
           gb_relu / t_relu, gb_relu);
    printf("pad [%llu] -> [%llu]:    %.3f ms, %.1f GB/s effective (%.2f GB read + written)\n",
           (unsigned long long)n, (unsigned long long)ny, 1e3 * t_pad, gb_pad / t_pad, gb_pad);

    /* Spot checks: ends, pad boundaries, and pseudo-random interior elements. */
    uint64_t fixed_x[] = {0, 1, n / 2, n - 2, n - 1, (1ull << 31) - 1, 1ull << 31, (1ull << 32) + 3};
    for (unsigned k = 0; k < sizeof fixed_x / sizeof *fixed_x; k++)
        if (fixed_x[k] < n && check_at(b, &x, fixed_x[k], relu(pattern(fixed_x[k])), "relu"))
            return 1;
    for (int k = 0; k < SAMPLES; k++) {
        uint64_t i = mix(0xabcdef00ull + (uint64_t)k) % n;
        if (check_at(b, &x, i, relu(pattern(i)), "relu"))
            return 1;
    }
    uint64_t fixed_y[] = {0, PAD_BEFORE - 1, PAD_BEFORE, PAD_BEFORE + 1, (1ull << 31) + PAD_BEFORE,
                          n + PAD_BEFORE - 1, n + PAD_BEFORE, ny - 1};
    for (int k = 0; k < SAMPLES + (int)(sizeof fixed_y / sizeof *fixed_y); k++) {
        uint64_t j = k < (int)(sizeof fixed_y / sizeof *fixed_y) ? fixed_y[k] : mix(0x12345600ull + (uint64_t)k) % ny;
        if (j >= ny)
            continue;
        float want = j < PAD_BEFORE || j >= n + PAD_BEFORE ? PAD_VALUE : relu(pattern(j - PAD_BEFORE));
        if (check_at(b, &y, j, want, "pad"))
            return 1;
    }
    /* The spacer is untouched. */
    for (int k = 0; k < GAP; k += GAP - 1)
        if (check_at(b, &gap, (uint64_t)k, 12345.5f, "spacer"))
            return 1;
    return 0;
}

int main(int argc, char **argv) {
    double want = argc > 1 ? strtod(argv[1], NULL) : 2.6e9;
    if (!(want >= 1 && want < 1e13)) {
        fprintf(stderr, "usage: %s [elements >= 1] (default 2.6e9)\n", argv[0]);
        return 2;
    }
    uint64_t n = (uint64_t)want;
    static const struct logger lg = {VKASR_LOG_WARN, NULL, NULL};
    struct err e = {0};
    const char *test_dev = getenv("VKASR_TEST_DEVICE");
    bool named = test_dev && *test_dev;
    const char *vk = getenv("VKASR_DEVICE");
    if (vk && be_device_suffix(vk, "vulkan")) /* "vulkan[:X]" as be_device_open reads it */
        vk = be_device_suffix(vk, "vulkan");
    struct be_device_options o = {.device = named ? test_dev : vk, .log = &lg};
    struct be_device *dev = NULL;
    struct backend *b = NULL;
    if ((named ? be_device_open(&o, &dev, &e) : vk_device_open(&o, &dev, &e)) ||
        be_backend_create(dev, &b, &e)) {
        fprintf(stderr, "FAIL: device: %s\n", e.msg);
        be_device_close(dev);
        return 1;
    }
    printf("device: %s\n", dev->info.name);
    printf("elements: %llu (%s 2^31), %.2f GB per f32 tensor, %.2f GB in all\n", (unsigned long long)n,
           n > (1ull << 31) ? "more than" : "not more than", 4.0 * (double)n / 1e9,
           4.0 * (double)(2 * n + PAD_BEFORE + PAD_AFTER) / 1e9);
    int rc = run(n, b);
    be_backend_destroy(b);
    be_device_close(dev);
    if (rc == 0 && failures)
        rc = 1;
    printf("%s: %d mismatch(es)\n", rc ? "FAIL" : "PASS", failures);
    return rc;
}
