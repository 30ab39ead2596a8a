/* bench_ops.c — times the linear op (GEMM) on the Vulkan backend; not a ctest test.
 *   bench_ops [-m M] [-n N] [-k K] [-w f16|f32] [-i iters] [--warmup n] [--cfg NAME|list] [--bias]
 * Defaults: M=7500 K=1024 N=4096, f16 weights (the encoder's feed-forward shape for ~10 min of audio
 * at the 8x subsampled frame rate), 3 warm-up and 10 timed runs. Reports the configuration chosen
 * (or forced with --cfg), wall time per run (op + be_sync), GPU time per run from timestamps when the
 * device has them, TFLOP/s counted as 2*M*N*K, and a spot check of 64 outputs against a
 * double-precision dot product (exit status 1 if it fails). The device is $VKASR_DEVICE or the
 * default; inputs are uniform in [-1, 1). Products of at most 8 rows carry the op's matvec hint (as the
 * decoder's do), so the automatic choice is gemv.comp there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/vulkan/vk_gemm.h"
#include "common/half.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_ops [-m M] [-n N] [-k K] [-w f16|f32] [-i iters] [--warmup n] [--cfg NAME|list] "
                    "[--bias]\n");
    return 2;
}

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) * (2.0 / 16777216.0) - 1.0);
}

static void list_configs(const struct vk_caps *caps) {
    size_t n;
    const struct vk_gemm_cfg *c = vk_gemm_configs(&n);
    for (size_t i = 0; i < n; i++)
        printf("  %-16s %s weights, tile %ux%u, %u invocations, %u B shared%s\n", c[i].name,
               c[i].wtype == BE_F16 ? "f16" : "f32", c[i].bm, c[i].bn, c[i].wg, c[i].shared_bytes,
               caps && !vk_gemm_cfg_usable(&c[i], caps) ? "  (not usable here)" : "");
}

int main(int argc, char **argv) {
    long long M = 7500, N = 4096, K = 1024, iters = 10, warmup = 3;
    be_dtype wt = BE_F16;
    const char *cfg_name = NULL;
    bool bias = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--bias") == 0) {
            bias = true;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (strcmp(o, "-m") == 0)
            M = atoll(v);
        else if (strcmp(o, "-n") == 0)
            N = atoll(v);
        else if (strcmp(o, "-k") == 0)
            K = atoll(v);
        else if (strcmp(o, "-i") == 0)
            iters = atoll(v);
        else if (strcmp(o, "--warmup") == 0)
            warmup = atoll(v);
        else if (strcmp(o, "--cfg") == 0)
            cfg_name = v;
        else if (strcmp(o, "-w") == 0 && (strcmp(v, "f16") == 0 || strcmp(v, "f32") == 0))
            wt = strcmp(v, "f16") == 0 ? BE_F16 : BE_F32;
        else
            return usage();
    }
    if (M < 1 || N < 1 || K < 1 || iters < 1 || warmup < 0)
        return usage();
    if (cfg_name && strcmp(cfg_name, "list") == 0) {
        printf("GEMM configurations of this build:\n");
        list_configs(NULL);
        return 0;
    }

    static const struct logger lg = {VKASR_LOG_WARN, NULL, NULL};
    struct be_device_options o = {.device = getenv("VKASR_DEVICE"), .profile = true, .want_f16 = true, .log = &lg};
    struct err e = {0};
    struct be_device *dev = NULL;
    struct backend *b = NULL;
    if (vk_device_open(&o, &dev, &e)) {
        fprintf(stderr, "bench_ops: opening the Vulkan device: %s\n", e.msg);
        return 1;
    }
    if (be_backend_create(dev, &b, &e)) {
        fprintf(stderr, "bench_ops: creating the backend: %s\n", e.msg);
        be_device_close(dev);
        return 1;
    }
    const struct vk_device *vd = (const struct vk_device *)dev;
    const struct vk_caps *caps = &vd->caps;
    const struct vk_gemm_cfg *cfg = cfg_name ? vk_gemm_find(cfg_name) : vk_gemm_choose(caps, M, N, K, wt, M <= 8);
    printf("device: %s (subgroup %u, shared %u B, f16 %s, tensor cores %s, timestamps %s)\n", dev->info.name,
           caps->subgroup_size, caps->max_shared, caps->f16 ? "on" : "off", caps->coopmat_nv ? "on" : "off",
           caps->timestamp_period > 0 ? "on" : "off");
    int rc = 1;
    float *hx = NULL, *hb = NULL, *hy = NULL;
    void *hw = NULL;
    if (!cfg) {
        fprintf(stderr, "bench_ops: %s\n", cfg_name ? "unknown --cfg; the configurations are:" : "no kernel for these weights here");
        list_configs(caps);
        goto out;
    }
    if (cfg->wtype != wt) {
        fprintf(stderr, "bench_ops: config %s takes %s weights (use -w)\n", cfg->name, cfg->wtype == BE_F16 ? "f16" : "f32");
        goto out;
    }
    printf("linear M=%lld N=%lld K=%lld, %s weights%s: kernel %s (%s, tile %ux%u, %u invocations)%s\n", M, N, K,
           wt == BE_F16 ? "f16" : "f32", bias ? ", bias" : "", cfg->name,
           cfg->kind == VK_GEMM_COOPMAT ? "tensor cores"
           : cfg->kind == VK_GEMM_SCALAR ? "scalar"
           : cfg->kind == VK_GEMM_GEMV   ? "matrix-vector"
                                         : "emulated coopmat",
           cfg->bm, cfg->bn, cfg->wg, cfg_name ? " [forced]" : "");

    be_tensor x, w, bt = {0}, y;
    size_t nx = (size_t)M * (size_t)K, nw = (size_t)N * (size_t)K, ny = (size_t)M * (size_t)N;
    hx = malloc(nx * sizeof *hx);
    hw = malloc(nw * (wt == BE_F16 ? 2 : 4));
    hb = malloc((size_t)N * sizeof *hb);
    hy = malloc(ny * sizeof *hy);
    if (!hx || !hw || !hb || !hy) {
        fprintf(stderr, "bench_ops: out of host memory\n");
        goto out;
    }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < nx; i++)
        hx[i] = rnd(&s);
    for (size_t i = 0; i < nw; i++) {
        float v = rnd(&s);
        if (wt == BE_F16)
            ((uint16_t *)hw)[i] = float_to_half(v);
        else
            ((float *)hw)[i] = v;
    }
    for (long long i = 0; i < N; i++)
        hb[i] = rnd(&s);
    if (be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){M, K}, &x) ||
        be_alloc_tensor(b, BE_POOL_SCRATCH, wt, 2, (int64_t[]){N, K}, &w) ||
        (bias && be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){N}, &bt)) ||
        be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){M, N}, &y) ||
        be_upload(b, x.addr, hx, nx * sizeof *hx) || be_upload(b, w.addr, hw, nw * (wt == BE_F16 ? 2 : 4)) ||
        (bias && be_upload(b, bt.addr, hb, (size_t)N * sizeof *hb))) {
        fprintf(stderr, "bench_ops: setting up the tensors: %s\n", b->err.msg);
        goto out;
    }
    struct op_linear a = {.x = x, .w = w, .bias = bt, .y = y, .alpha = 1.0f};
    if (op_validate(OP_linear, &a, &b->err)) {
        fprintf(stderr, "bench_ops: %s\n", b->err.msg);
        goto out;
    }
    double best = 1e300, total = 0;
    for (long long it = 0; it < warmup + iters; it++) {
        if (it == warmup && b->vt->profile_reset)
            b->vt->profile_reset(b);
        double t0 = now_ms();
        if (vk_gemm_record((struct vk_backend *)b, &a, cfg) || be_sync(b)) {
            fprintf(stderr, "bench_ops: run %lld: %s\n", it, b->err.msg);
            goto out;
        }
        double dt = now_ms() - t0;
        if (it >= warmup) {
            total += dt;
            best = dt < best ? dt : best;
        }
    }
    double flop = 2.0 * (double)M * (double)N * (double)K;
    printf("wall (op + sync): best %.3f ms, mean %.3f ms  ->  %.3f TFLOP/s best (%.2f GFLOP/s), %.3f mean\n", best,
           total / iters, flop / (best * 1e9), flop / (best * 1e6), flop / (total / iters * 1e9));
    struct be_op_stat st[16];
    size_t nst = b->vt->profile ? b->vt->profile(b, st, 16) : 0;
    for (size_t i = 0; i < nst; i++)
        if (strcmp(st[i].name, cfg->prof) == 0 && st[i].calls) {
            double ms = st[i].gpu_ms / (double)st[i].calls;
            printf("gpu (timestamps): %.3f ms per run over %llu runs  ->  %.3f TFLOP/s (%.2f GFLOP/s)\n", ms,
                   (unsigned long long)st[i].calls, flop / (ms * 1e9), flop / (ms * 1e6));
        }
    if (nst == 0)
        printf("gpu timestamps: not available on this device\n");

    /* Spot check: 64 outputs against a double dot product of the same (f16-rounded) operands. */
    if (be_download(b, hy, y.addr, ny * sizeof *hy)) {
        fprintf(stderr, "bench_ops: download: %s\n", b->err.msg);
        goto out;
    }
    double se = 0, sr = 0, worst = 0;
    for (int t = 0; t < 64; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        /* the first and last outputs, then random ones */
        size_t m = t == 0 ? 0 : t == 1 ? (size_t)M - 1 : (size_t)((s >> 33) % (uint64_t)M);
        size_t n = t == 0 ? 0 : t == 1 ? (size_t)N - 1 : (size_t)((s >> 11) % (uint64_t)N);
        double acc = bias ? hb[n] : 0.0;
        for (long long k = 0; k < K; k++) {
            float xv = hx[m * (size_t)K + (size_t)k];
            double wv;
            if (wt == BE_F16) {
                xv = half_to_float(float_to_half(xv));
                wv = half_to_float(((uint16_t *)hw)[n * (size_t)K + (size_t)k]);
            } else {
                wv = ((float *)hw)[n * (size_t)K + (size_t)k];
            }
            acc += (double)xv * wv;
        }
        double d = hy[m * (size_t)N + n] - acc;
        se += d * d;
        sr += acc * acc;
        worst = fabs(d) > worst ? fabs(d) : worst;
    }
    double nmse = sr > 0 ? se / sr : se;
    printf("spot check (64 outputs vs double): nmse %.3g, max abs error %.3g -> %s\n", nmse, worst,
           nmse <= 1e-7 ? "ok" : "FAILED");
    rc = nmse <= 1e-7 ? 0 : 1;
out:
    free(hx);
    free(hw);
    free(hb);
    free(hy);
    be_backend_destroy(b);
    be_device_close(dev);
    return rc;
}
