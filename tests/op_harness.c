/* op_harness.c — see op_harness.h. */
#include "op_harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_internal.h"
#include "common/half.h"
#include "validation_log.h"

#define GUARD_BYTES 1024u
/* A finite, odd bit pattern (about 1.5e16): unlike a NaN it cannot survive an out-of-bounds
 * read-modify-write through NaN payload propagation. */
static const uint32_t SENTINEL = 0x5a5aa5a5u;

uint64_t th_rand(struct th *h) {
    /* splitmix64: fixed seed per program, reproducible */
    uint64_t z = (h->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float th_uniform(struct th *h, float lo, float hi) {
    return lo + (hi - lo) * (float)((th_rand(h) >> 40) * (1.0 / 16777216.0));
}

static void die(const char *what, const struct err *e) {
    fprintf(stderr, "FATAL: %s: %s\n", what, e->msg);
    exit(1);
}

void th_open(struct th *h, bool want_f16) {
    th_lab_register();
    memset(h, 0, sizeof *h);
    h->rng = 0x5eed1234abcdull;
    static struct logger lg = {VKASR_LOG_WARN, tv_log, NULL}; /* counts validation reports */
    /* VKASR_PIPELINE_STATS: the driver's statistics of each kernel are info lines (vk_pipeline.c) */
    const char *stats = getenv("VKASR_PIPELINE_STATS");
    if (stats && *stats && strcmp(stats, "0") != 0)
        lg.level = VKASR_LOG_INFO;
    struct err e = {0};
    struct be_device_options ro = {.device = "ref", .log = &lg};
    if (ref_device_open(&ro, &h->dev[TH_REF], &e) || be_backend_create(h->dev[TH_REF], &h->be[TH_REF], &e))
        die("reference backend", &e);
    /* VKASR_TEST_DEVICE=cuda[:N] or cpu[:N]: the CUDA or the CPU backend is the device under test;
     * otherwise Vulkan. */
    const char *test_dev = getenv("VKASR_TEST_DEVICE");
    const bool cpu = test_dev && strncmp(test_dev, "cpu", 3) == 0;
    h->vulkan = !(test_dev && (strncmp(test_dev, "cuda", 4) == 0 || cpu));
    h->dev_name = h->vulkan ? "Vulkan" : cpu ? "CPU" : "CUDA";
    if (h->vulkan) {
        const char *want = getenv("VKASR_DEVICE");
        if (want && (strncmp(want, "cpu", 3) == 0 || strcmp(want, "ref") == 0))
            want = NULL;
        else if (want && be_device_suffix(want, "vulkan"))
            want = be_device_suffix(want, "vulkan");
        struct be_device_options vo = {.device = want, .validation = tv_wanted(), .want_f16 = want_f16, .log = &lg};
        if (vk_device_open(&vo, &h->dev[TH_DEV], &e) || be_backend_create(h->dev[TH_DEV], &h->be[TH_DEV], &e))
            die("Vulkan backend", &e);
        const struct vk_device *vd = (const struct vk_device *)h->dev[TH_DEV];
        const uint32_t *mg = vd->caps.max_groups;
        printf("device: %s (f16 %s, tensor cores %s, max groups %u x %u x %u, %s memory)\n", h->dev[TH_DEV]->info.name,
               h->dev[TH_DEV]->info.f16 ? "on" : "off", h->dev[TH_DEV]->info.coopmat ? "on" : "off", mg[0], mg[1],
               mg[2], vd->device_mappable ? "host-mapped" : "staged");
        const char *staging = getenv("VKASR_FORCE_STAGING");
        if (staging && *staging && strcmp(staging, "0") != 0 && vd->device_mappable) {
            fprintf(stderr, "FATAL: VKASR_FORCE_STAGING=%s but device memory is host-mapped\n", staging);
            exit(1);
        }
    } else if (cpu) {
        struct be_device_options co = {.device = test_dev, .want_f16 = want_f16, .log = &lg};
        if (be_device_open(&co, &h->dev[TH_DEV], &e) || be_backend_create(h->dev[TH_DEV], &h->be[TH_DEV], &e))
            die("CPU backend (VKASR_TEST_DEVICE)", &e);
        printf("device: %s\n", h->dev[TH_DEV]->info.name);
    } else {
        struct be_device_options co = {.device = test_dev, .want_f16 = want_f16, .log = &lg};
        if (be_device_open(&co, &h->dev[TH_DEV], &e) || be_backend_create(h->dev[TH_DEV], &h->be[TH_DEV], &e))
            die("CUDA backend (VKASR_TEST_DEVICE)", &e);
        printf("device: %s (CUDA backend, tensor cores %s, grid capped at %u blocks)\n", h->dev[TH_DEV]->info.name,
               h->dev[TH_DEV]->info.coopmat ? "on" : "off", h->dev[TH_DEV]->info.max_groups);
    }
    /* The _tinygrid variants test nothing unless their variable took effect. */
    const char *want_groups = getenv("VKASR_MAX_GROUPS");
    if (want_groups && *want_groups) {
        char *end;
        unsigned long cap = strtoul(want_groups, &end, 10);
        uint32_t got = h->dev[TH_DEV]->info.max_groups;
        if (*end || cap == 0 || got > cap) {
            fprintf(stderr, "FATAL: VKASR_MAX_GROUPS=%s did not limit the grid (largest %u)\n", want_groups, got);
            exit(1);
        }
    }
}

void th_skip(struct th *h, const char *what) {
    h->skipped++;
    printf("SKIP (not applicable to the %s backend): %s\n", h->dev_name, what);
}

static void free_tensors(struct th *h) {
    for (int i = 0; i < h->ntensors; i++) {
        free(h->tensors[i]->host);
        free(h->tensors[i]);
    }
    h->ntensors = 0;
    for (int s = 0; s < 2; s++)
        if (h->be[s])
            be_release(h->be[s], 0);
}

int th_close(struct th *h) {
    free_tensors(h);
    be_backend_destroy(h->be[TH_DEV]);
    be_backend_destroy(h->be[TH_REF]);
    be_device_close(h->dev[TH_DEV]);
    be_device_close(h->dev[TH_REF]);
    /* After the close: vkDestroyDevice reports objects still alive. */
    if (tv_check())
        h->failures++;
    if (h->f16_differ > 0)
        printf("f16 outputs: at most %.3g %% of a tensor's elements differed from the reference\n",
               100.0 * h->f16_differ);
    printf("%d check(s), %d failure(s), %d group(s) skipped on %s\n", h->checks, h->failures, h->skipped, h->dev_name);
    return h->failures ? 1 : 0;
}

void th_case(struct th *h, const char *fmt, ...) {
    free_tensors(h);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->name, sizeof h->name, fmt, ap);
    va_end(ap);
}

static struct th_tensor *new_tensor(struct th *h, be_dtype type, int nd, const int64_t *ne) {
    if (h->ntensors == 64) {
        fprintf(stderr, "FATAL: too many tensors in case %s\n", h->name);
        exit(1);
    }
    struct th_tensor *t = calloc(1, sizeof *t);
    if (!t)
        exit(1);
    t->type = type;
    t->nd = nd;
    for (int d = 0; d < nd; d++)
        t->ne[d] = ne[d];
    be_tensor shape = be_tensor_make(0, type, nd, ne);
    uint64_t bytes = be_nbytes(&shape);
    t->host = calloc(1, bytes ? bytes : 4);
    if (!t->host)
        exit(1);
    struct err *e;
    /* Reference: exact size. Device: guard | body | guard, guards filled with the sentinel. */
    e = &h->be[TH_REF]->err;
    if (be_alloc_tensor(h->be[TH_REF], BE_POOL_SCRATCH, type, nd, ne, &t->side[TH_REF]))
        die("reference alloc", e);
    t->guard = GUARD_BYTES;
    /* The sentinel is a byte pattern with period 4 in the allocation's own offsets, so guards are
     * byte-exact even when the body (an odd number of f16 elements) ends mid-word. */
    uint64_t total = (bytes + 2 * GUARD_BYTES + 3) / 4 * 4;
    e = &h->be[TH_DEV]->err;
    if (be_alloc(h->be[TH_DEV], BE_POOL_SCRATCH, total, &t->dev_base))
        die("device alloc", e);
    t->side[TH_DEV] = be_tensor_make(t->dev_base + GUARD_BYTES, type, nd, ne);
    uint32_t *pat = malloc(total);
    if (!pat)
        exit(1);
    for (uint64_t i = 0; i < total / 4; i++)
        pat[i] = SENTINEL;
    if (be_upload(h->be[TH_DEV], t->dev_base, pat, total))
        die("device upload", e);
    free(pat);
    h->tensors[h->ntensors++] = t;
    return t;
}

static void upload_both(struct th *h, struct th_tensor *t) {
    uint64_t bytes = be_nbytes(&t->side[TH_REF]);
    for (int s = 0; s < 2; s++)
        if (be_upload(h->be[s], t->side[s].addr, t->host, bytes))
            die("upload", &h->be[s]->err);
}

struct th_tensor *th_input(struct th *h, be_dtype type, int nd, const int64_t *ne, float lo, float hi) {
    struct th_tensor *t = new_tensor(h, type, nd, ne);
    uint64_t n = be_numel(&t->side[TH_REF]);
    for (uint64_t i = 0; i < n; i++) {
        float v = th_uniform(h, lo, hi);
        if (type == BE_F32)
            ((float *)t->host)[i] = v;
        else if (type == BE_F16)
            ((uint16_t *)t->host)[i] = float_to_half(v);
        else if (type == BE_I64)
            ((int64_t *)t->host)[i] = (int64_t)floorf(v);
        else
            ((int32_t *)t->host)[i] = (int32_t)floorf(v);
    }
    upload_both(h, t);
    return t;
}

struct th_tensor *th_input_data(struct th *h, be_dtype type, int nd, const int64_t *ne, const void *data) {
    struct th_tensor *t = new_tensor(h, type, nd, ne);
    memcpy(t->host, data, be_nbytes(&t->side[TH_REF]));
    upload_both(h, t);
    return t;
}

struct th_tensor *th_output(struct th *h, be_dtype type, int nd, const int64_t *ne) {
    struct th_tensor *t = new_tensor(h, type, nd, ne);
    uint64_t bytes = be_nbytes(&t->side[TH_REF]);
    memset(t->host, 0xff, bytes); /* NaN pattern: an output the reference forgets shows up */
    if (be_upload(h->be[TH_REF], t->side[TH_REF].addr, t->host, bytes))
        die("upload", &h->be[TH_REF]->err);
    return t;
}

static bool fail(struct th *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL [%s]: ", h->name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    h->failures++;
    return false;
}

void th_linear_setup(struct th *h, const struct th_linear_case *c, struct th_tensor *w, struct th_linear *l) {
    const int64_t Ny = c->glu ? c->N / 2 : c->N;
    l->w = w;
    l->x = th_input(h, c->xt, 2, TH_SHAPE(c->M, c->K), -1.0f, 1.0f);
    l->b = c->bias ? th_input(h, BE_F32, 1, TH_SHAPE(c->N), -1.0f, 1.0f) : NULL;
    l->r = c->res ? th_input(h, c->yt, 2, TH_SHAPE(c->M, Ny), -1.0f, 1.0f) : NULL;
    l->y = th_output(h, c->yt, 2, TH_SHAPE(c->M, Ny));
    for (int s = 0; s < 2; s++)
        l->a[s] = (struct op_linear){.x = TH_T(l->x, s), .w = TH_T(w, s), .bias = l->b ? TH_T(l->b, s) : (be_tensor){0},
                                     .res = l->r ? TH_T(l->r, s) : (be_tensor){0}, .y = TH_T(l->y, s),
                                     .act = c->glu ? ACT_GLU : c->act, .alpha = c->alpha, .matvec = c->matvec};
}

bool th_run(struct th *h, enum op_id id, const void *args_ref, const void *args_dev) {
    return th_run_forced(h, id, args_ref, args_dev, NULL, NULL);
}

bool th_run_forced(struct th *h, enum op_id id, const void *args_ref, const void *args_dev, th_record_fn record,
                   const void *cfg) {
    h->checks++;
    if (record && !h->vulkan)
        return fail(h, "a forced Vulkan kernel configuration cannot run on the %s backend", h->dev_name);
    const char *side_name[2] = {"reference", h->dev_name};
    const void *args[2] = {args_ref, args_dev};
    for (int s = 0; s < 2; s++) {
        vkasr_status st;
        if (s == TH_DEV && record) { /* the op table's argument rules, then the forced kernel */
            st = op_validate(id, args[s], &h->be[s]->err);
            if (st == VKASR_OK)
                st = record(h->be[s], args[s], cfg);
        } else {
            st = be_run(h->be[s], id, args[s]);
        }
        if (st == VKASR_OK)
            st = be_sync(h->be[s]);
        if (st != VKASR_OK)
            return fail(h, "%s %s: %s", side_name[s], op_name(id), h->be[s]->err.msg);
    }
    return true;
}

static double as_double(const struct th_tensor *t, const void *p, uint64_t i) {
    switch (t->type) {
    case BE_F32: return ((const float *)p)[i];
    case BE_F16: return half_to_float(((const uint16_t *)p)[i]);
    case BE_I32: return ((const int32_t *)p)[i];
    case BE_I64: return (double)((const int64_t *)p)[i];
    default: return 0; /* block types are inputs only */
    }
}

static bool guards_ok(struct th *h, struct th_tensor *t) {
    uint64_t bytes = be_nbytes(&t->side[TH_REF]);
    unsigned char g[GUARD_BYTES], pat[4];
    memcpy(pat, &SENTINEL, 4);
    for (int side = 0; side < 2; side++) {
        uint64_t off = side == 0 ? 0 : GUARD_BYTES + bytes; /* byte offset in the allocation */
        if (be_download(h->be[TH_DEV], g, t->dev_base + off, GUARD_BYTES))
            die("download", &h->be[TH_DEV]->err);
        for (unsigned i = 0; i < GUARD_BYTES; i++)
            if (g[i] != pat[(off + i) % 4])
                return fail(h, "write %s the tensor (guard byte %u of %u changed)", side == 0 ? "before" : "after",
                            side == 0 ? GUARD_BYTES - i : i, GUARD_BYTES);
    }
    return true;
}

bool th_check_guards(struct th *h) {
    bool ok = true;
    for (int i = 0; i < h->ntensors; i++)
        ok = guards_ok(h, h->tensors[i]) && ok;
    return ok;
}

/* th_check's comparison, and with max_abs >= 0 th_check_abs's instead of the NMSE. */
static bool compare(struct th *h, struct th_tensor *out, double tol, double max_abs) {
    h->checks++;
    uint64_t n = be_numel(&out->side[TH_REF]), bytes = be_nbytes(&out->side[TH_REF]);
    void *ref = malloc(bytes ? bytes : 4), *vk = malloc(bytes ? bytes : 4);
    if (!ref || !vk)
        exit(1);
    if (be_download(h->be[TH_REF], ref, out->side[TH_REF].addr, bytes) ||
        be_download(h->be[TH_DEV], vk, out->side[TH_DEV].addr, bytes))
        die("download", &h->be[TH_DEV]->err);
    bool ok = guards_ok(h, out);
    double se = 0, sr = 0;
    uint64_t worst = 0;
    double worst_d = -1;
    for (uint64_t i = 0; i < n && ok; i++) {
        double a = as_double(out, vk, i), b = as_double(out, ref, i);
        if (isnan(b) || isnan(a) || isinf(a) || isinf(b)) {
            if (!(isnan(a) && isnan(b)) && !(isinf(a) && isinf(b) && (a > 0) == (b > 0)))
                ok = fail(h, "element %llu: %s %g, reference %g (NaN/Inf mismatch)", (unsigned long long)i, h->dev_name,
                          a, b);
            continue;
        }
        double d = (a - b) * (a - b);
        se += d;
        sr += b * b;
        if (d > worst_d) {
            worst_d = d;
            worst = i;
        }
    }
    if (ok && max_abs >= 0) {
        if (worst_d >= 0 && !(sqrt(worst_d) <= max_abs))
            ok = fail(h, "max |difference| %.3g > %.3g (element %llu: %s %.9g, reference %.9g)", sqrt(worst_d), max_abs,
                      (unsigned long long)worst, h->dev_name, as_double(out, vk, worst), as_double(out, ref, worst));
    } else if (ok) {
        double nmse = sr > 0 ? se / sr : se;
        if (tol == 0 ? memcmp(ref, vk, bytes) != 0 : !(nmse <= tol)) {
            ok = fail(h, "nmse %.3g > %.3g (worst element %llu: %s %.9g, reference %.9g)", nmse, tol,
                      (unsigned long long)worst, h->dev_name, as_double(out, vk, worst), as_double(out, ref, worst));
        }
    }
    memcpy(out->host, ref, bytes);
    free(ref);
    free(vk);
    return ok;
}

bool th_check(struct th *h, struct th_tensor *out, double tol) { return compare(h, out, tol, -1); }

bool th_check_abs(struct th *h, struct th_tensor *out, double max_abs) { return compare(h, out, 0, max_abs); }

bool th_check_f16(struct th *h, struct th_tensor *out, double tol, double max_frac) {
    if (out->type != BE_F16) {
        h->checks++;
        return fail(h, "th_check_f16 on a tensor that is not f16");
    }
    uint64_t n = be_numel(&out->side[TH_REF]), bytes = be_nbytes(&out->side[TH_REF]);
    uint16_t *dev = malloc(bytes ? bytes : 4);
    if (!dev)
        exit(1);
    if (be_download(h->be[TH_DEV], dev, out->side[TH_DEV].addr, bytes))
        die("download", &h->be[TH_DEV]->err);
    bool ok = th_check(h, out, tol); /* leaves the reference's output in out->host */
    const uint16_t *ref = out->host;
    uint64_t differ = 0;
    for (uint64_t i = 0; i < n; i++)
        differ += dev[i] != ref[i] && !((dev[i] & 0x7fffu) == 0 && (ref[i] & 0x7fffu) == 0); /* -0 == +0 */
    free(dev);
    h->checks++;
    if (n && (double)differ / (double)n > h->f16_differ)
        h->f16_differ = (double)differ / (double)n;
    if (ok && (double)differ > max_frac * (double)n + 1.0) /* + 1: a tiny tensor may hold one such element */
        return fail(h, "%llu of %llu f16 elements differ from the reference (at most %.3g%%: rounded alike, only "
                    "results at a rounding boundary may)",
                    (unsigned long long)differ, (unsigned long long)n, 100.0 * max_frac);
    return ok;
}
