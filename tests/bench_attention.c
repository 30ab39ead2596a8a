/* bench_attention.c — times relpos_attention on the Vulkan backend (an executable, not a ctest test).
 *   bench_attention [T=7500] [D=1024] [heads=8] [window=0] [iters=5] [f32|f16] [CONFIG|auto]
 * f16 sets the op's f16 flag (tensor cores where the device has them); CONFIG forces a kernel
 * configuration of vk_attention.h (scalar, cm_dk128, ...). The device is $VKASR_DEVICE or the default;
 * inputs are random in [-1, 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_attention.h"

/* Prints the best and mean wall time of op + sync per run, and TFLOP/s counted as
 *   flops    = 4 * T * K * D   (QK^T and PV, 2 flops per multiply-add: the usual attention count)
 *   flops_bd = 6 * T * K * D   (plus the relative-position term (q+v).p the kernel also computes)
 * with K = keys per query: T for full attention, min(T, 2*window+1) with a window (edges ignored). */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int fail(const char *what, const struct err *e) {
    fprintf(stderr, "bench_attention: %s: %s\n", what, e->msg);
    return 1;
}

static long long arg(int argc, char **argv, int i, long long def) {
    return argc > i ? atoll(argv[i]) : def;
}

int main(int argc, char **argv) {
    long long T = arg(argc, argv, 1, 7500), D = arg(argc, argv, 2, 1024), H = arg(argc, argv, 3, 8);
    long long window = arg(argc, argv, 4, 0), iters = arg(argc, argv, 5, 5);
    const char *prec = argc > 6 ? argv[6] : "f32", *cfg_name = argc > 7 ? argv[7] : "auto";
    const struct vk_att_cfg *cfg = strcmp(cfg_name, "auto") == 0 ? NULL : vk_att_find(cfg_name);
    if (T < 1 || D < 1 || H < 1 || D % H || window < 0 || iters < 1 ||
        (strcmp(prec, "f32") != 0 && strcmp(prec, "f16") != 0) || (!cfg && strcmp(cfg_name, "auto") != 0)) {
        fprintf(stderr, "usage: bench_attention [T] [D] [heads] [window] [iters] [f32|f16] [CONFIG|auto]\n"
                        "configs:");
        size_t n;
        const struct vk_att_cfg *all = vk_att_configs(&n);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %s", all[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    long long reach = window > 0 && window < T - 1 ? window : T - 1, P = 2 * reach + 1, dk = D / H;

    static const struct logger lg = {VKASR_LOG_WARN, NULL, NULL};
    struct be_device_options o = {.device = getenv("VKASR_DEVICE"), .want_f16 = strcmp(prec, "f16") == 0, .log = &lg};
    struct err e = {0};
    struct be_device *dev = NULL;
    struct backend *b = NULL;
    if (vk_device_open(&o, &dev, &e))
        return fail("opening the Vulkan device", &e);
    if (be_backend_create(dev, &b, &e)) {
        be_device_close(dev);
        return fail("creating the backend", &e);
    }
    const struct vk_att_cfg *chosen =
        cfg ? cfg : vk_att_choose(&((struct vk_device *)dev)->caps, dk, strcmp(prec, "f16") == 0);
    printf("device: %s\nT=%lld D=%lld heads=%lld dk=%lld window=%lld P=%lld %s kernel %s\n", dev->info.name, T, D, H,
           dk, window, P, prec, chosen ? chosen->name : "(none)");

    int rc = 1;
    be_tensor t[7];
    const int64_t rows[7] = {T, T, T, P, H, H, T}, cols[7] = {D, D, D, D, dk, dk, D};
    float *host = NULL;
    for (int i = 0; i < 7; i++) {
        if (be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){rows[i], cols[i]}, &t[i])) {
            fail("allocating the tensors", &b->err);
            goto out;
        }
        if (i == 6)
            break;
        size_t n = (size_t)rows[i] * (size_t)cols[i];
        float *nh = realloc(host, n * sizeof *host);
        if (!nh) {
            fprintf(stderr, "bench_attention: out of host memory\n");
            goto out;
        }
        host = nh;
        uint64_t s = 0x1234567ull + (uint64_t)i;
        for (size_t k = 0; k < n; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            host[k] = (float)((s >> 40) * (2.0 / 16777216.0) - 1.0);
        }
        if (be_upload(b, t[i].addr, host, n * sizeof *host)) {
            fail("uploading the inputs", &b->err);
            goto out;
        }
    }
    struct op_relpos_attention a = {
        .q = t[0], .k = t[1], .v = t[2], .p = t[3], .bias_u = t[4], .bias_v = t[5], .y = t[6],
        .heads = (int32_t)H, .n_valid = T, .window = window, .f16 = strcmp(prec, "f16") == 0,
    };
    double best = INFINITY, sum = 0;
    for (long long it = -1; it < iters; it++) { /* iteration -1: warm-up (pipeline creation) */
        double t0 = now_ms();
        vkasr_status st = cfg ? vk_att_record((struct vk_backend *)b, &a, cfg) : be_relpos_attention(b, &a);
        if (st || be_sync(b)) {
            fail("running relpos_attention", &b->err);
            goto out;
        }
        double ms = now_ms() - t0;
        if (it >= 0) {
            sum += ms;
            best = ms < best ? ms : best;
        }
    }
    double K = window > 0 && 2 * window + 1 < T ? 2.0 * window + 1 : (double)T;
    double fl = 4.0 * T * K * D, fl_bd = 6.0 * T * K * D;
    printf("best %.3f ms, mean %.3f ms over %lld runs\n", best, sum / iters, iters);
    printf("TFLOP/s (4*T*K*D): %.4g   incl. BD (6*T*K*D): %.4g   [K = %.0f keys per query]\n",
           fl / (best * 1e-3) * 1e-12, fl_bd / (best * 1e-3) * 1e-12, K);
    rc = 0;
out:
    free(host);
    be_backend_destroy(b);
    be_device_close(dev);
    return rc;
}
