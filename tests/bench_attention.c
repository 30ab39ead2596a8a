/* bench_attention.c — times relpos_attention on the Vulkan backend (an executable, not a ctest test).
 *   bench_attention [T=7500] [D=1024] [heads=8] [window=0] [iters=5] [f32|f16|h16] [CONFIG[,CONFIG...]|auto|all]
 * f32: f32 tensors and products; f16: f32 tensors, the op's f16 flag (tensor cores where the device
 * has them: what the network runs in f16 precision today); h16: q, k, v, p and y f16 with the f16 flag
 * (what it runs once activations are f16). CONFIG forces kernel configurations of vk_attention.h
 * (scalar, cms8xqmb_dk128, emus2xqmb_dk128, ...); all: every configuration this device can run for the head
 * width (the tensor-core ones only with f16/h16), emulated twins excepted. One line per configuration:
 *   attention T= D= H= dk= window= keys= prec= cfg= ms= tflops= tflops_bd= timer=gpu check=ok
 * ms is GPU time per call from timestamps (mean of the timed runs after two warm-up calls; wall time of
 * op + sync on a device without timestamps, then timer=wall). TFLOP/s count
 *   4 * T * K * D   (QK^T and PV, 2 flops per multiply-add: the usual attention count), and
 *   6 * T * K * D   (tflops_bd: plus the relative-position term (q+v).p every kernel also computes)
 * with K = keys per query: T for full attention, min(T, 2*window+1) with a window (edges ignored).
 * check compares six output rows (first, middle, last query; first and last head) with a host
 * computation in double of the same inputs (f16-rounded where the kernel rounds them): relative L2
 * error at most 1e-4 (f32) or 3e-2 (f16); exit status 1 if any fails. Inputs are uniform in [-1, 1),
 * generated per element from its index, so any row can be recomputed. The device is $VKASR_DEVICE or
 * the default. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/vulkan/vk_attention.h"
#include "common/half.h"
#include "op_harness.h"

enum { IN_Q, IN_K, IN_V, IN_P, IN_BU, IN_BV, NIN };

struct bench {
    long long T, D, H, dk, window, P, iters;
    bool f16;  /* the op's f16 flag                 */
    bool h16;  /* q, k, v, p and y stored as f16    */
    const char *prec;
    struct backend *b;
    const struct vk_caps *caps;
    be_tensor t[NIN], y;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static long long arg(int argc, char **argv, int i, long long def) {
    return argc > i ? atoll(argv[i]) : def;
}

/* Input element i of tensor `which`, uniform in [-1, 1) (splitmix64 of the index). */
static float gen(int which, uint64_t i) {
    uint64_t z = ((uint64_t)which << 56) ^ i ^ 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((z >> 40) * (2.0 / 16777216.0) - 1.0);
}

static bool stored_f16(const struct bench *B, int which) { return B->h16 && which <= IN_P; }

/* The value the device holds for element i of an input (f16 inputs: the rounded value). */
static float held(const struct bench *B, int which, uint64_t i) {
    const float x = gen(which, i);
    return stored_f16(B, which) ? half_to_float(float_to_half(x)) : x;
}

/* As the products take it: rounded to f16 in the op's f16 mode (the C reference's rule). */
static double in(const struct bench *B, float x) {
    return B->f16 ? (double)half_to_float(float_to_half(x)) : (double)x;
}

static int alloc_inputs(struct bench *B) {
    const long long rows[NIN] = {B->T, B->T, B->T, B->P, B->H, B->H}, cols[NIN] = {B->D, B->D, B->D, B->D, B->dk, B->dk};
    const size_t chunk = 1u << 20;
    void *host = malloc(chunk * 4);
    if (!host) {
        fprintf(stderr, "bench_attention: out of host memory\n");
        return 1;
    }
    for (int w = 0; w < NIN; w++) {
        const be_dtype type = stored_f16(B, w) ? BE_F16 : BE_F32;
        if (be_alloc_tensor(B->b, BE_POOL_SCRATCH, type, 2, (int64_t[]){rows[w], cols[w]}, &B->t[w])) {
            fprintf(stderr, "bench_attention: allocating the inputs: %s\n", B->b->err.msg);
            free(host);
            return 1;
        }
        const uint64_t n = (uint64_t)rows[w] * (uint64_t)cols[w], es = be_dtype_size(type);
        for (uint64_t i0 = 0; i0 < n; i0 += chunk) {
            const uint64_t m = n - i0 < chunk ? n - i0 : chunk;
            for (uint64_t i = 0; i < m; i++) {
                if (type == BE_F16)
                    ((uint16_t *)host)[i] = float_to_half(gen(w, i0 + i));
                else
                    ((float *)host)[i] = gen(w, i0 + i);
            }
            if (be_upload(B->b, B->t[w].addr + i0 * es, host, m * es)) {
                fprintf(stderr, "bench_attention: uploading the inputs: %s\n", B->b->err.msg);
                free(host);
                return 1;
            }
        }
    }
    free(host);
    if (be_alloc_tensor(B->b, BE_POOL_SCRATCH, B->h16 ? BE_F16 : BE_F32, 2, (int64_t[]){B->T, B->D}, &B->y)) {
        fprintf(stderr, "bench_attention: allocating y: %s\n", B->b->err.msg);
        return 1;
    }
    return 0;
}

/* Relative L2 error of output row i, head h against a computation in double (the op's definition). */
static double row_error(const struct bench *B, long long i, long long h) {
    const long long dk = B->dk, D = B->D, center = (B->P - 1) / 2, hd = h * dk;
    const long long j0 = B->window > 0 && i - B->window > 0 ? i - B->window : 0;
    const long long j1 = B->window > 0 && i + B->window + 1 < B->T ? i + B->window + 1 : B->T;
    double *s = malloc((size_t)(j1 - j0) * sizeof *s), *ref = calloc((size_t)dk, sizeof *ref);
    const size_t es = B->h16 ? 2 : 4;
    unsigned char *dev = malloc((size_t)dk * es);
    double err = INFINITY;
    if (!s || !ref || !dev)
        goto out;
    const double scale = 1.0 / sqrt((double)dk);
    double mx = -INFINITY, sum = 0;
    for (long long j = j0; j < j1; j++) {
        double ac = 0, bd = 0;
        for (long long d = 0; d < dk; d++) {
            const float q = held(B, IN_Q, (uint64_t)(i * D + hd + d));
            ac += in(B, q + held(B, IN_BU, (uint64_t)(hd + d))) * in(B, held(B, IN_K, (uint64_t)(j * D + hd + d)));
            bd += in(B, q + held(B, IN_BV, (uint64_t)(hd + d))) *
                  in(B, held(B, IN_P, (uint64_t)((center - (i - j)) * D + hd + d)));
        }
        s[j - j0] = (ac + bd) * scale;
        mx = fmax(mx, s[j - j0]);
    }
    for (long long j = j0; j < j1; j++)
        sum += s[j - j0] = exp(s[j - j0] - mx);
    for (long long j = j0; j < j1; j++)
        for (long long d = 0; d < dk; d++)
            ref[d] += s[j - j0] / sum * in(B, held(B, IN_V, (uint64_t)(j * D + hd + d)));
    if (be_download(B->b, dev, B->y.addr + (uint64_t)(i * D + hd) * es, (uint64_t)dk * es))
        goto out;
    double se = 0, sr = 0;
    for (long long d = 0; d < dk; d++) {
        const double y = B->h16 ? half_to_float(((const uint16_t *)dev)[d]) : ((const float *)dev)[d];
        se += (y - ref[d]) * (y - ref[d]);
        sr += ref[d] * ref[d];
    }
    err = sr > 0 ? sqrt(se / sr) : sqrt(se);
out:
    free(s);
    free(ref);
    free(dev);
    return err;
}

/* Runs one configuration (NULL: the automatic choice) and prints its line; returns 0 when it ran and
 * its check passed. */
static int run(struct bench *B, const struct vk_att_cfg *cfg) {
    struct backend *b = B->b;
    const struct vk_att_cfg *used = cfg ? cfg : vk_att_choose(B->caps, vk_att_override(B->caps, NULL), B->dk, B->f16);
    struct op_relpos_attention a = {
        .q = B->t[IN_Q], .k = B->t[IN_K], .v = B->t[IN_V], .p = B->t[IN_P], .bias_u = B->t[IN_BU],
        .bias_v = B->t[IN_BV], .y = B->y, .heads = (int32_t)B->H, .n_valid = B->T, .window = B->window,
        .f16 = B->f16,
    };
    printf("attention T=%lld D=%lld H=%lld dk=%lld window=%lld", B->T, B->D, B->H, B->dk, B->window);
    const double K = B->window > 0 && 2 * B->window + 1 < B->T ? 2.0 * B->window + 1 : (double)B->T;
    printf(" keys=%.0f prec=%s cfg=%s", K, B->prec, used ? used->name : "(none)");
    double wall = 0;
    bool ok = true;
    const long long warmup = 2;
    for (long long it = 0; it < warmup + B->iters && ok; it++) {
        if (it == warmup && b->vt->profile_reset)
            b->vt->profile_reset(b);
        const double t0 = now_ms();
        ok = (cfg ? vk_att_record((struct vk_backend *)b, &a, cfg) : be_relpos_attention(b, &a)) == VKASR_OK &&
             be_sync(b) == VKASR_OK;
        if (it >= warmup)
            wall += now_ms() - t0;
    }
    if (!ok) {
        printf(" error=\"%s\"\n", b->err.msg);
        fflush(stdout);
        return 1;
    }
    struct be_op_stat st[16];
    const size_t nst = b->vt->profile ? b->vt->profile(b, st, 16) : 0;
    double gpu = 0;
    for (size_t i = 0; i < nst; i++)
        gpu += st[i].gpu_ms;
    const bool timed = nst > 0 && gpu > 0;
    const double ms = (timed ? gpu : wall) / (double)B->iters;
    const double fl = 4.0 * (double)B->T * K * (double)B->D, fl_bd = 6.0 * (double)B->T * K * (double)B->D;
    double worst = 0;
    const long long rows[3] = {0, B->T / 2, B->T - 1}, heads[2] = {0, B->H - 1};
    for (int r = 0; r < 3; r++)
        for (int h = 0; h < 2; h++) {
            const double e = row_error(B, rows[r], heads[h]);
            worst = e > worst || isnan(e) ? e : worst;
        }
    const bool good = worst <= (B->f16 || B->h16 ? 3e-2 : 1e-4);
    printf(" ms=%.4f tflops=%.2f tflops_bd=%.2f timer=%s check=%s err=%.2e\n", ms, fl / (ms * 1e9), fl_bd / (ms * 1e9),
           timed ? "gpu" : "wall", good ? "ok" : "FAILED", worst);
    fflush(stdout);
    return good ? 0 : 1;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_attention [T] [D] [heads] [window] [iters] [f32|f16|h16] "
                    "[CONFIG[,CONFIG...]|auto|all]\nconfigs:");
    size_t n;
    const struct vk_att_cfg *all = vk_att_configs(&n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s", all[i].name);
    fprintf(stderr, "\n");
    return 2;
}

int main(int argc, char **argv) {
    th_lab_register(); /* the emulated twins and the older kernels: tests/vk_lab.c */
    struct bench B = {.T = arg(argc, argv, 1, 7500), .D = arg(argc, argv, 2, 1024), .H = arg(argc, argv, 3, 8),
                      .window = arg(argc, argv, 4, 0), .iters = arg(argc, argv, 5, 5)};
    B.prec = argc > 6 ? argv[6] : "f32";
    const char *cfg_arg = argc > 7 ? argv[7] : "auto";
    if (B.T < 1 || B.D < 1 || B.H < 1 || B.D % B.H || B.window < 0 || B.iters < 1)
        return usage();
    if (strcmp(B.prec, "f32") == 0) {
    } else if (strcmp(B.prec, "f16") == 0) {
        B.f16 = true;
    } else if (strcmp(B.prec, "h16") == 0) {
        B.f16 = B.h16 = true;
    } else {
        return usage();
    }
    /* the configurations named, checked before the device is opened */
    const struct vk_att_cfg *named[64];
    int nnamed = 0;
    bool all = strcmp(cfg_arg, "all") == 0, autom = strcmp(cfg_arg, "auto") == 0;
    if (!all && !autom) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", cfg_arg);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            const struct vk_att_cfg *c = vk_att_find(tok);
            if (!c || nnamed == 64) {
                fprintf(stderr, "bench_attention: unknown configuration %s\n", tok);
                return usage();
            }
            named[nnamed++] = c;
        }
    }
    B.dk = B.D / B.H;
    const long long reach = B.window > 0 && B.window < B.T - 1 ? B.window : B.T - 1;
    B.P = 2 * reach + 1;

    /* VKASR_PIPELINE_STATS: each kernel's statistics (registers, ...) are logged at info */
    const char *stats = getenv("VKASR_PIPELINE_STATS");
    const struct logger lg = {stats && *stats && strcmp(stats, "0") != 0 ? VKASR_LOG_INFO : VKASR_LOG_WARN, NULL,
                              NULL};
    struct be_device_options o = {.device = getenv("VKASR_DEVICE"), .want_f16 = B.f16, .profile = true, .log = &lg};
    struct err e = {0};
    struct be_device *dev = NULL;
    if (vk_device_open(&o, &dev, &e)) {
        fprintf(stderr, "bench_attention: opening the Vulkan device: %s\n", e.msg);
        return 1;
    }
    if (be_backend_create(dev, &B.b, &e)) {
        fprintf(stderr, "bench_attention: creating the backend: %s\n", e.msg);
        be_device_close(dev);
        return 1;
    }
    B.caps = &((struct vk_device *)dev)->caps;
    printf("device: %s (subgroup %u, shared %u B, f16 %s, tensor cores %s, timestamps %s)\n", dev->info.name,
           B.caps->subgroup_size, B.caps->max_shared, B.caps->f16 ? "on" : "off", B.caps->coopmat_nv ? "on" : "off",
           B.caps->timestamp_period > 0 ? "on" : "off");
    int failures = alloc_inputs(&B);
    if (failures)
        nnamed = 0, autom = all = false;
    if (autom)
        failures += run(&B, NULL);
    for (int i = 0; i < nnamed; i++)
        failures += run(&B, named[i]);
    if (all) {
        size_t n;
        const struct vk_att_cfg *cs = vk_att_configs(&n);
        for (size_t i = 0; i < n; i++) {
            const struct vk_att_cfg *c = &cs[i];
            const bool emu = c->kind == VK_ATT_COOPMAT_EMU;
            if (emu || (vk_att_cfg_tensor_cores(c) && !B.f16) || (c->kind == VK_ATT_ROWS && !B.caps->cpu) ||
                B.dk > (long long)c->max_dk || !vk_att_cfg_usable(c, B.caps))
                continue;
            failures += run(&B, c);
        }
    }
    be_backend_destroy(B.b);
    be_device_close(dev);
    return failures ? 1 : 0;
}
