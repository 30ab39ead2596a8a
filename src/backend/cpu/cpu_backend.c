/* cpu_backend.c — the CPU backend ("cpu", the default where no GPU exists): tensors in host memory
 * (the reference backend's device code), the products through a packed kernel (cpu_gemm.c), the
 * decoder's matrix-vector products through OpenBLAS's sgemv, the other ops as host loops, all split over
 * a thread pool. OpenBLAS runs single-threaded inside the pool's threads: the two never oversubscribe. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "cpu_internal.h"

#define CPU_MAX_THREADS 256

/* ---- backend ---------------------------------------------------------------------------------- */

static vkasr_status cpub_nop(struct backend *bb) { return VKASR_OK; }
static vkasr_status cpub_throttle(struct backend *bb, int max_pending) { return VKASR_OK; }

#define X(name)                                                                                        \
    static vkasr_status thunk_##name(struct backend *b, const void *a) {                               \
        return ref_##name(b, (const struct op_##name *)a);                                             \
    }
VKASR_OPS(X)
#undef X
#define X(name)                                                                                        \
    static vkasr_status own_##name(struct backend *b, const void *a) {                                 \
        return cpu_##name(b, (const struct op_##name *)a);                                             \
    }
CPU_OWN_OPS(X)
#undef X

/* The reference's code for every op, then this backend's own where it has one. */
static vkasr_status (*cpu_op_table[OP_COUNT])(struct backend *, const void *);
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static void table_init(void) {
#define X(name) cpu_op_table[OP_##name] = thunk_##name;
    VKASR_OPS(X)
#undef X
#define X(name) cpu_op_table[OP_##name] = own_##name;
    CPU_OWN_OPS(X)
#undef X
}

static vkasr_status cpub_run(struct backend *bb, enum op_id id, const void *args) {
    CHECK_OR_RETURN(&bb->err, (unsigned)id < OP_COUNT);
    /* the attention's q_pos form (the streaming session's queries at positions from a table): the
     * reference's code, which implements every op's whole contract */
    if (id == OP_relpos_attention && ((const struct op_relpos_attention *)args)->q_pos.addr)
        return thunk_relpos_attention(bb, args);
    return cpu_op_table[id](bb, args);
}

static size_t cpub_profile(const struct backend *bb, struct be_op_stat *out, size_t cap) { return 0; }
static void cpub_profile_reset(struct backend *bb) {}

static void cpub_destroy(struct backend *bb) {
    struct cpu_backend *b = (struct cpu_backend *)bb;
    cpu_pool_destroy(b->pool);
    cpu_lstm_cache_destroy(b->lstm);
    be_arena_destroy(&bb->scratch);
    free(b);
}

static const struct backend_vtbl cpu_backend_vtbl = {
    .destroy = cpub_destroy,
    .upload = ref_host_upload,
    .download = ref_host_download,
    .flush = cpub_nop,
    .throttle = cpub_throttle,
    .sync = cpub_nop,
    .run = cpub_run,
    .profile = cpub_profile,
    .profile_reset = cpub_profile_reset,
};

static vkasr_status cpud_create_backend(struct be_device *d, struct backend **out, struct err *e) {
    struct cpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory creating a CPU backend");
    vkasr_status st = cpu_pool_create(((struct cpu_device *)d)->threads, &b->pool, e);
    if (st != VKASR_OK) {
        free(b);
        return st;
    }
    b->base.vt = &cpu_backend_vtbl;
    be_backend_init(&b->base, d);
    *out = &b->base;
    return VKASR_OK;
}

static void cpud_destroy(struct be_device *bd) {
    be_device_fini(bd);
    free(bd);
}

static uint64_t cpud_validation(const struct be_device *bd) { return 0; }

static const struct be_device_vtbl cpu_device_vtbl = {
    .destroy = cpud_destroy,
    .create_backend = cpud_create_backend,
    .validation_messages = cpud_validation,
    .memory = ref_host_memory,
};

/* ---- threads and the device -------------------------------------------------------------------- */

/* A thread count: 1 .. CPU_MAX_THREADS, or 0 when s is not one. */
static int parse_threads(const char *s) {
    char *end = NULL;
    long v = s && *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : 0;
    return end && !*end && v >= 1 && v <= CPU_MAX_THREADS ? (int)v : 0;
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)n;
}

/* The threads a device string's rest asks for ("" = $VKASR_THREADS, else the online CPUs). */
static vkasr_status threads_of(const char *rest, const struct logger *log, int *out, struct err *e) {
    if (rest && *rest) {
        if (!(*out = parse_threads(rest)))
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "device 'cpu:%s': expected cpu:N with N threads, 1 to %d", rest, CPU_MAX_THREADS);
        return VKASR_OK;
    }
    const char *env = getenv("VKASR_THREADS");
    if (env && *env) {
        if ((*out = parse_threads(env)))
            return VKASR_OK;
        LOG_WARN(log, "VKASR_THREADS='%s' is not a thread count from 1 to %d: ignored", env, CPU_MAX_THREADS);
    }
    *out = online_cpus();
    return VKASR_OK;
}

/* What computes: "AVX-512 products, AVX2 matrix-vector, OpenBLAS 0.3.21 (Haswell) for blocks", or
 * "plain C products, OpenBLAS 0.3.21 (Haswell) matrix-vector" on a CPU without AVX2. */
static void blas_name(char *out, size_t cap) {
    const char *cfg = openblas_get_config(), *core = openblas_get_corename();
    int n = 0; /* "OpenBLAS 0.3.21": the first two words of the configuration */
    for (int words = 0; cfg && cfg[n] && (cfg[n] != ' ' || ++words < 2); n++)
        ;
    const bool avx2 = cpu_have_f16c();
    snprintf(out, cap, "%s products, %s%.*s%s%s%s%s", cpu_gemm_kernel(), avx2 ? "AVX2 matrix-vector, " : "",
             cfg ? n : 8, cfg ? cfg : "OpenBLAS", core ? " (" : "", core ? core : "", core ? ")" : "",
             avx2 ? " for blocks" : " matrix-vector");
}

vkasr_status cpu_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e) {
    int threads = 0;
    TRY(threads_of(opt->device, opt->log, &threads, e));
    pthread_once(&table_once, table_init);
    /* sgemm runs inside the pool's threads, each on its own columns: OpenBLAS's own threads would
     * only compete with them */
    openblas_set_num_threads(1);
    struct cpu_device *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    d->host.base.vt = &cpu_device_vtbl;
    ref_host_device_init(&d->host, opt);
    d->threads = threads;
    char blas[200];
    blas_name(blas, sizeof blas);
    snprintf(d->host.base.info.name, sizeof d->host.base.info.name, "CPU, %d thread%s: %s", threads,
             threads == 1 ? "" : "s", blas);
    d->host.base.info.f16 = true; /* f16 and quantized weights widened to f32 panels per product */
    /* about 0.1 s of products per thread between abort polls: the row chunks a step cuts stay large
     * enough for the product kernel (lavapipe's step would cut a 0.6B model's rows to ~15) */
    d->host.base.info.step_macs = (int64_t)threads << 31;
    *out = &d->host.base;
    return VKASR_OK;
}

vkasr_status cpu_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, struct err *e) {
    *count = 1;
    if (capacity == 0 || !out)
        return VKASR_OK;
    int threads = 0;
    TRY(threads_of("", NULL, &threads, e));
    vkasr_device_info *d = out;
    memset(d, 0, sizeof *d);
    d->index = 0;
    char blas[200];
    blas_name(blas, sizeof blas);
    snprintf(d->name, sizeof d->name, "CPU, %d thread%s", threads, threads == 1 ? "" : "s");
    snprintf(d->type, sizeof d->type, "cpu");
    snprintf(d->driver, sizeof d->driver, "%s", blas);
    snprintf(d->backend, sizeof d->backend, "cpu");
    d->max_workgroup_count[0] = (uint32_t)threads; /* the threads, for the listing */
    d->max_allocation_size = UINT64_MAX;
    d->shader_float16 = true;
    d->usable = true;
    return VKASR_OK;
}
