/* bench_ops.c — times the linear op (GEMM) on the Vulkan backend; not a ctest test.
 *   bench_ops [-m M] [-n N] [-k K] [-w f16|f32|q8_0] [-x f16|f32] [-y f16|f32] [-i iters] [--warmup n]
 *             [--cfg NAME[,NAME...]|all|tc|list] [--split S[,S...]] [--shapes NAME=MxNxK|NAME[,...]|encoder|list]
 *             [--bias]
 * Defaults: M=7500 K=1024 N=4096, f16 weights, f32 x and y (the encoder's feed-forward shape for ~10
 * min of audio at the 8x subsampled frame rate), 3 warm-up and 10 timed runs, the configuration
 * vk_op_linear would choose. Each (shape, configuration, split) prints one line:
 *   gemm shape=NAME M=.. N=.. K=.. x=f16 w=f16 y=f32 cfg=NAME split=S ms=.. tflops=.. check=ok
 * ms is GPU time per product from timestamps (mean of the timed runs; the split-K reduction
 * included), or wall time (op + be_sync) on a device without timestamps (then timer=wall). TFLOP/s
 * counts 2*M*N*K. check compares 64 outputs with a double-precision dot product of the same
 * (f16-rounded) operands (exit status 1 if any fails). --cfg all runs every configuration this device
 * can run for the weight type, tc its tensor-core ones; --shapes encoder the 0.6B encoder's products
 * at 60 s and 10 min of audio (tools/gpu/gemm_sweep.sh), a NAME one of them, list prints them. Time
 * one (shape, configuration) per process: later ones in a process can run 2-5x slower on NVIDIA's
 * driver (docs/gpu-results.md, "The machine and how to measure"). The device is $VKASR_DEVICE or the default;
 * inputs are uniform in [-1, 1). Products of at most 8 rows carry the op's matvec hint (as the
 * decoder's do). -w q8_0: the weights quantized by the converter and held where a model's are (the
 * weights arena: the int8 path makes their int8 form once, in the warm-up); ms is then the whole op
 * (the int8 path: x's rows to int8, then the GEMM), kernel_ms and kernel_tops the GEMM dispatch alone,
 * and check allows W8A8's error (3e-4) or the f16-rounded weights' (5e-4). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/vulkan/vk_gemm.h"
#include "common/half.h"
#include "common/qblock.h"
#include "model/quant.h"
#include "op_harness.h"

struct shape {
    char name[32];
    long long M, N, K;
};

/* The products of a 0.6B-shaped encoder (d_model 1024, ff 4096, 8 heads, subsampling channels 256,
 * 128 mels; the TDT joint 640 wide, 8193 + 5 outputs) for T = 750 (60 s) and 7500 (10 min) frames. */
static const struct shape encoder_shapes[] = {
    {"ff_up_750", 750, 4096, 1024},      {"ff_down_750", 750, 1024, 4096},
    {"attn_proj_750", 750, 1024, 1024},  {"pos_proj_750", 1499, 1024, 1024},
    {"conv_pw1_750", 750, 2048, 1024},   {"sub_pw_750", 48000, 256, 256},
    {"sub_lin_750", 750, 1024, 4096},    {"joint_enc_750", 750, 640, 1024},
    {"ff_up_7500", 7500, 4096, 1024},    {"ff_down_7500", 7500, 1024, 4096},
    {"attn_proj_7500", 7500, 1024, 1024}, {"pos_proj_7500", 14999, 1024, 1024},
    {"conv_pw1_7500", 7500, 2048, 1024}, {"sub_pw_7500", 480000, 256, 256},
    {"sub_lin_7500", 7500, 1024, 4096},  {"joint_enc_7500", 7500, 640, 1024},
    {"sub_lin_tail", 37, 1024, 4096},    {"joint_out_64", 64, 8198, 640},
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_ops [-m M] [-n N] [-k K] [-w f16|f32|q8_0] [-x f16|f32] [-y f16|f32] [-i iters] "
                    "[--warmup n] [--cfg NAME[,NAME...]|all|tc|list] [--split S[,S...]] "
                    "[--shapes NAME=MxNxK|NAME[,...]|encoder|list] [--bias]\n");
    return 2;
}

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) * (2.0 / 16777216.0) - 1.0);
}

static const char *wname(be_dtype t) {
    return t == BE_F16    ? "f16"
           : t == BE_F32  ? "f32"
           : t == BE_Q8_0 ? "q8_0"
           : t == BE_Q4_K ? "q4_k"
           : t == BE_Q5_K ? "q5_k"
                          : "q6_k";
}

static void list_configs(const struct vk_caps *caps) {
    size_t n;
    const struct vk_gemm_cfg *c = vk_gemm_configs(&n);
    for (size_t i = 0; i < n; i++)
        printf("  %-18s %s weights, tile %ux%u, K step %u, %u invocations, %u B shared%s\n", c[i].name,
               wname(c[i].wtype), c[i].bm, c[i].bn, c[i].bk, c[i].wg, c[i].shared_bytes,
               caps && !vk_gemm_cfg_usable(&c[i], caps) ? "  (not usable here)" : "");
}

static bool parse_type(const char *v, be_dtype *t) {
    if (strcmp(v, "f16") == 0 || strcmp(v, "f32") == 0) {
        *t = strcmp(v, "f16") == 0 ? BE_F16 : BE_F32;
        return true;
    }
    return false;
}

/* An entry of encoder_shapes by name, or NULL. */
static const struct shape *encoder_shape(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof encoder_shapes / sizeof *encoder_shapes; i++)
        if (strlen(encoder_shapes[i].name) == len && strncmp(encoder_shapes[i].name, name, len) == 0)
            return &encoder_shapes[i];
    return NULL;
}

/* NAME=MxNxK or NAME (one of encoder_shapes), comma-separated */
static int parse_shapes(const char *v, struct shape *out, int cap) {
    int n = 0;
    while (*v && n < cap) {
        struct shape *s = &out[n];
        int used = 0;
        const size_t len = strcspn(v, ",=");
        const struct shape *named = v[len] != '=' ? encoder_shape(v, len) : NULL;
        if (named) {
            *s = *named;
            used = (int)len;
        } else if (sscanf(v, "%31[^=]=%lldx%lldx%lld%n", s->name, &s->M, &s->N, &s->K, &used) != 4 || s->M < 1 ||
                   s->N < 1 || s->K < 1)
            return -1;
        n++;
        v += used;
        if (*v == ',')
            v++;
        else if (*v)
            return -1;
    }
    return n;
}

/* Values of a tensor on the host (f16 as bits) and on the device. */
struct operand {
    be_dtype type;
    size_t n;
    float *f;     /* the values as the product takes them (f16: exactly representable) */
    void *bits;   /* what is uploaded */
};

/* q8_0 w [rows, n / rows]: the converter's blocks of uniform values, f their dequantized values. */
static bool operand_fill_q8(struct operand *o, size_t rows, size_t n, uint64_t *seed) {
    const int64_t K = (int64_t)(n / rows);
    const uint64_t rb = quant_row_bytes(QT_Q8_0, K);
    o->type = BE_Q8_0;
    o->n = n;
    o->f = malloc(n * sizeof *o->f);
    o->bits = malloc(rb * rows);
    if (!o->f || !o->bits)
        return false;
    for (size_t i = 0; i < n; i++)
        o->f[i] = rnd(seed);
    if (quant_rows(QT_Q8_0, o->f, false, (int64_t)rows, K, o->bits, 1) != 0)
        return false;
    for (size_t r = 0; r < rows; r++)
        qblock_dequant_row(QT_Q8_0, (const uint8_t *)o->bits + r * rb, o->f + r * (size_t)K, K);
    return true;
}

static bool operand_fill(struct operand *o, be_dtype type, size_t n, uint64_t *seed) {
    o->type = type;
    o->n = n;
    o->f = malloc(n * sizeof *o->f);
    o->bits = malloc(n * (type == BE_F16 ? 2 : 4));
    if (!o->f || !o->bits)
        return false;
    for (size_t i = 0; i < n; i++) {
        float v = rnd(seed);
        if (type == BE_F16) {
            uint16_t h = float_to_half(v);
            ((uint16_t *)o->bits)[i] = h;
            o->f[i] = half_to_float(h);
        } else {
            ((float *)o->bits)[i] = o->f[i] = v;
        }
    }
    return true;
}

static void operand_free(struct operand *o) {
    free(o->f);
    free(o->bits);
}

/* 64 outputs (the first, the last, random ones) against a double dot product of the operands as the
 * op takes them (x rounded to f16 with f16 weights); the f16 y's own rounding is allowed for. */
static bool spot_check(const struct shape *s, const struct operand *x, const struct operand *w, const float *bias,
                       const void *y, be_dtype yt) {
    double se = 0, sr = 0;
    uint64_t seed = 0x1234567ull;
    for (int t = 0; t < 64; t++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t m = t == 0 ? 0 : t == 1 ? (size_t)s->M - 1 : (size_t)((seed >> 33) % (uint64_t)s->M);
        size_t n = t == 0 ? 0 : t == 1 ? (size_t)s->N - 1 : (size_t)((seed >> 11) % (uint64_t)s->N);
        double acc = bias ? bias[n] : 0.0;
        for (long long k = 0; k < s->K; k++) {
            float xv = x->f[m * (size_t)s->K + (size_t)k];
            if (w->type == BE_F16 && x->type == BE_F32)
                xv = half_to_float(float_to_half(xv));
            acc += (double)xv * w->f[n * (size_t)s->K + (size_t)k];
        }
        size_t o = m * (size_t)s->N + n;
        double got = yt == BE_F16 ? half_to_float(((const uint16_t *)y)[o]) : ((const float *)y)[o];
        se += (got - acc) * (got - acc);
        sr += acc * acc;
    }
    if (w->type == BE_Q8_0) /* W8A8 (int8 path) or the dequantized w rounded to f16 (tensor cores) */
        return (sr > 0 ? se / sr : se) <= 5e-4;
    return (sr > 0 ? se / sr : se) <= (yt == BE_F16 ? 1e-6 : 1e-7);
}

struct bench {
    struct backend *b;
    const struct vk_caps *caps;
    be_dtype wt, xt, yt;
    bool bias;
    long long iters, warmup;
};

/* One shape with every requested (configuration, split): one line each. Returns the failures. */
static int run_shape(struct bench *B, const struct shape *s, const struct vk_gemm_cfg **cfgs, int ncfg,
                     const uint32_t *splits, int nsplit) {
    struct backend *b = B->b;
    int failures = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(s->M * 131 + s->N * 7 + s->K);
    size_t nx = (size_t)s->M * (size_t)s->K, nw = (size_t)s->N * (size_t)s->K, ny = (size_t)s->M * (size_t)s->N;
    struct operand x = {0}, w = {0};
    float *hb = malloc((size_t)s->N * sizeof *hb);
    void *hy = malloc(ny * 4);
    uint64_t mark = be_mark(b);
    be_tensor tx, tw, tb = {0}, ty;
    if (!hb || !hy || !operand_fill(&x, B->xt, nx, &seed) ||
        !(B->wt == BE_Q8_0 ? operand_fill_q8(&w, (size_t)s->N, nw, &seed) : operand_fill(&w, B->wt, nw, &seed))) {
        fprintf(stderr, "bench_ops: out of host memory\n");
        failures++;
        goto out;
    }
    for (long long i = 0; i < s->N; i++)
        hb[i] = rnd(&seed);
    if (be_alloc_tensor(b, BE_POOL_SCRATCH, B->xt, 2, (int64_t[]){s->M, s->K}, &tx) ||
        be_alloc_tensor(b, B->wt == BE_Q8_0 ? BE_POOL_WEIGHTS : BE_POOL_SCRATCH, B->wt, 2, (int64_t[]){s->N, s->K},
                        &tw) ||
        (B->bias && be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){s->N}, &tb)) ||
        be_alloc_tensor(b, BE_POOL_SCRATCH, B->yt, 2, (int64_t[]){s->M, s->N}, &ty) ||
        be_upload(b, tx.addr, x.bits, be_nbytes(&tx)) || be_upload(b, tw.addr, w.bits, be_nbytes(&tw)) ||
        (B->bias && be_upload(b, tb.addr, hb, (size_t)s->N * sizeof *hb))) {
        fprintf(stderr, "bench_ops: %s: setting up the tensors: %s\n", s->name, b->err.msg);
        failures++;
        goto out;
    }
    struct op_linear a = {.x = tx, .w = tw, .bias = tb, .y = ty, .alpha = 1.0f, .matvec = s->M <= 8};
    if (op_validate(OP_linear, &a, &b->err)) {
        fprintf(stderr, "bench_ops: %s: %s\n", s->name, b->err.msg);
        failures++;
        goto out;
    }
    const double flop = 2.0 * (double)s->M * (double)s->N * (double)s->K;
    for (int c = 0; c < (ncfg ? ncfg : 1); c++)
        for (int k = 0; k < (nsplit ? nsplit : 1); k++) {
            struct vk_gemm_plan plan = vk_gemm_choose(B->caps, s->M, s->N, s->K, B->wt, a.matvec);
            if (ncfg)
                plan.cfg = cfgs[c];
            if (nsplit)
                plan.splits = splits[k];
            if (!plan.cfg) {
                fprintf(stderr, "bench_ops: no kernel for %s weights here\n", wname(B->wt));
                failures++;
                goto out;
            }
            if (plan.splits > 1 && plan.cfg->kind != VK_GEMM_COOPMAT && plan.cfg->kind != VK_GEMM_COOPMAT_EMU)
                continue; /* only the tensor-core kernel splits K */
            double wall = 0;
            bool ok = true;
            for (long long it = 0; it < B->warmup + B->iters && ok; it++) {
                if (it == B->warmup && b->vt->profile_reset)
                    b->vt->profile_reset(b);
                double t0 = now_ms();
                ok = vk_gemm_record((struct vk_backend *)b, &a, &plan) == VKASR_OK && be_sync(b) == VKASR_OK;
                if (it >= B->warmup)
                    wall += now_ms() - t0;
            }
            if (!ok) {
                printf("gemm shape=%s M=%lld N=%lld K=%lld cfg=%s split=%u error=\"%s\"\n", s->name, s->M, s->N, s->K,
                       plan.cfg->name, plan.splits, b->err.msg);
                failures++;
                continue;
            }
            struct be_op_stat st[16];
            size_t nst = b->vt->profile ? b->vt->profile(b, st, 16) : 0;
            double gpu = 0, kernel = 0;
            for (size_t i = 0; i < nst; i++) {
                gpu += st[i].gpu_ms;
                if (strcmp(st[i].name, plan.cfg->prof) == 0)
                    kernel += st[i].gpu_ms;
            }
            const bool timed = nst > 0 && gpu > 0;
            double ms = (timed ? gpu : wall) / (double)B->iters;
            bool good = be_download(b, hy, ty.addr, be_nbytes(&ty)) == VKASR_OK &&
                        spot_check(s, &x, &w, B->bias ? hb : NULL, hy, B->yt);
            failures += !good;
            char kern[64] = "";
            if (timed && nst > 1 && kernel > 0) /* the int8 path: x's rows to int8, then the GEMM */
                snprintf(kern, sizeof kern, " kernel_ms=%.4f kernel_tops=%.2f", kernel / (double)B->iters,
                         flop / (kernel / (double)B->iters * 1e9));
            printf("gemm shape=%s M=%lld N=%lld K=%lld x=%s w=%s y=%s cfg=%s split=%u ms=%.4f tflops=%.2f%s%s "
                   "check=%s\n",
                   s->name, s->M, s->N, s->K, B->xt == BE_F16 ? "f16" : "f32", wname(B->wt),
                   B->yt == BE_F16 ? "f16" : "f32", plan.cfg->name, plan.splits, ms, flop / (ms * 1e9), kern,
                   timed ? "" : " timer=wall", good ? "ok" : "FAILED");
            fflush(stdout);
        }
out:
    be_release(b, mark);
    operand_free(&x);
    operand_free(&w);
    free(hb);
    free(hy);
    return failures;
}

int main(int argc, char **argv) {
    th_lab_register(); /* the emulated twins and the older kernels: tests/vk_lab.c */
    struct shape one = {"cli", 7500, 4096, 1024}, shapes[64];
    int nshapes = 0;
    struct bench B = {.wt = BE_F16, .xt = BE_F32, .yt = BE_F32, .iters = 10, .warmup = 3};
    const char *cfg_arg = NULL, *split_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--bias") == 0) {
            B.bias = true;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (strcmp(o, "-m") == 0)
            one.M = atoll(v);
        else if (strcmp(o, "-n") == 0)
            one.N = atoll(v);
        else if (strcmp(o, "-k") == 0)
            one.K = atoll(v);
        else if (strcmp(o, "-i") == 0)
            B.iters = atoll(v);
        else if (strcmp(o, "--warmup") == 0)
            B.warmup = atoll(v);
        else if (strcmp(o, "--cfg") == 0)
            cfg_arg = v;
        else if (strcmp(o, "--split") == 0)
            split_arg = v;
        else if (strcmp(o, "--shapes") == 0) {
            if (strcmp(v, "list") == 0) {
                for (size_t k = 0; k < sizeof encoder_shapes / sizeof *encoder_shapes; k++)
                    printf("%s %lldx%lldx%lld\n", encoder_shapes[k].name, encoder_shapes[k].M, encoder_shapes[k].N,
                           encoder_shapes[k].K);
                return 0;
            }
            if (strcmp(v, "encoder") == 0) {
                nshapes = (int)(sizeof encoder_shapes / sizeof *encoder_shapes);
                memcpy(shapes, encoder_shapes, sizeof encoder_shapes);
            } else if ((nshapes = parse_shapes(v, shapes, 64)) <= 0) {
                return usage();
            }
        } else if (strcmp(o, "-w") == 0 && strcmp(v, "q8_0") == 0) {
            B.wt = BE_Q8_0;
        } else if (!((strcmp(o, "-w") == 0 && parse_type(v, &B.wt)) || (strcmp(o, "-x") == 0 && parse_type(v, &B.xt)) ||
                     (strcmp(o, "-y") == 0 && parse_type(v, &B.yt))))
            return usage();
    }
    if (one.M < 1 || one.N < 1 || one.K < 1 || B.iters < 1 || B.warmup < 0)
        return usage();
    if (cfg_arg && strcmp(cfg_arg, "list") == 0) {
        printf("GEMM configurations of this build:\n");
        list_configs(NULL);
        return 0;
    }
    if (nshapes == 0)
        shapes[nshapes++] = one;
    uint32_t splits[8];
    int nsplit = 0;
    for (const char *p = split_arg; p && *p && nsplit < 8;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 64 || (*end && *end != ','))
            return usage();
        splits[nsplit++] = (uint32_t)v;
        p = *end ? end + 1 : end;
    }

    /* VKASR_PIPELINE_STATS: each kernel's statistics (registers, ...) are logged at info */
    const char *stats = getenv("VKASR_PIPELINE_STATS");
    const struct logger lg = {stats && *stats && strcmp(stats, "0") != 0 ? VKASR_LOG_INFO : VKASR_LOG_WARN, NULL,
                              NULL};
    struct be_device_options o = {.device = getenv("VKASR_DEVICE"), .profile = true, .want_f16 = true, .log = &lg};
    struct err e = {0};
    struct be_device *dev = NULL;
    if (vk_device_open(&o, &dev, &e)) {
        fprintf(stderr, "bench_ops: opening the Vulkan device: %s\n", e.msg);
        return 1;
    }
    if (be_backend_create(dev, &B.b, &e)) {
        fprintf(stderr, "bench_ops: creating the backend: %s\n", e.msg);
        be_device_close(dev);
        return 1;
    }
    B.caps = &((const struct vk_device *)dev)->caps;
    printf("device: %s (subgroup %u, shared %u B, f16 %s, tensor cores %s%s, timestamps %s)\n", dev->info.name,
           B.caps->subgroup_size, B.caps->max_shared, B.caps->f16 ? "on" : "off", B.caps->coopmat_nv ? "on" : "off",
           B.caps->coopmat_int8 ? " (int8 too)" : "",
           B.caps->timestamp_period > 0 ? "on" : "off");
    int rc = 1, ncfg = 0;
    size_t nall;
    const struct vk_gemm_cfg *all = vk_gemm_configs(&nall), *cfgs[64];
    if (cfg_arg && (strcmp(cfg_arg, "all") == 0 || strcmp(cfg_arg, "tc") == 0)) {
        const bool tc = strcmp(cfg_arg, "tc") == 0;
        for (size_t i = 0; i < nall && ncfg < 64; i++)
            if (all[i].wtype == B.wt && all[i].kind != VK_GEMM_COOPMAT_EMU && all[i].kind != VK_GEMM_I8_EMU &&
                vk_gemm_cfg_usable(&all[i], B.caps) &&
                (!tc || all[i].kind == VK_GEMM_COOPMAT || all[i].kind == VK_GEMM_I8))
                cfgs[ncfg++] = &all[i];
        if (ncfg == 0) {
            fprintf(stderr, "bench_ops: no %s configuration for %s weights can run here\n", tc ? "tensor-core" : "",
                    wname(B.wt));
            goto out;
        }
    } else if (cfg_arg) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", cfg_arg);
        for (char *t = strtok(buf, ","); t && ncfg < 64; t = strtok(NULL, ",")) {
            const struct vk_gemm_cfg *c = vk_gemm_find(t);
            if (!c || c->wtype != B.wt) {
                fprintf(stderr, "bench_ops: %s: not a configuration for %s weights; the configurations are:\n", t,
                        wname(B.wt));
                list_configs(B.caps);
                goto out;
            }
            cfgs[ncfg++] = c;
        }
    }
    int failures = 0;
    for (int i = 0; i < nshapes; i++)
        failures += run_shape(&B, &shapes[i], cfgs, ncfg, splits, nsplit);
    rc = failures ? 1 : 0;
out:
    be_backend_destroy(B.b);
    be_device_close(dev);
    return rc;
}
