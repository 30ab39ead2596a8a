/* ref_backend.c — the plain-C reference backend: tensors in host memory (addr = host pointer), ops
 * as simple loops (ref_ops_*.c). It is the test oracle for every Vulkan kernel and a slow CPU
 * fallback (--device ref); it is deliberately not tuned. The CPU backend (cpu/) shares its device. */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ref_internal.h"

#define HUGE_PAGE ((size_t)2 << 20)

/* ---- blocks (arena.h): host memory (shared with the CPU backend, cpu/), counted against VKASR_MAX_DEVICE_MEMORY_MIB where it is set --- */

static vkasr_status refm_make(struct be_device *bd, uint64_t bytes, uint64_t *addr, void **handle, struct err *e) {
    struct ref_device *d = (struct ref_device *)bd;
    *handle = NULL;
    uint64_t total = atomic_fetch_add(&d->allocated, bytes);
    if (bytes > d->budget || total > d->budget - bytes) {
        atomic_fetch_sub(&d->allocated, bytes);
        return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                       "device memory exhausted: %.1f MiB requested with %.1f MiB already allocated of %.1f MiB "
                       "(CPU reference backend, VKASR_MAX_DEVICE_MEMORY_MIB)",
                       bytes / 1048576.0, total / 1048576.0, d->budget / 1048576.0);
    }
    /* blocks of 2 MiB and more on 2 MiB boundaries, marked for transparent huge pages: a model's
     * weights and a session's scratch then fault in 2 MiB at a time, not 4 KiB (page faults took a
     * fifth of a short transcription on the CPU backend) */
    const size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : BE_SCRATCH_ALIGN;
    void *p = bytes <= SIZE_MAX - align ? aligned_alloc(align, ((size_t)bytes + align - 1) / align * align) : NULL;
#ifdef MADV_HUGEPAGE
    if (p && align == HUGE_PAGE)
        madvise(p, ((size_t)bytes + align - 1) / align * align, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
    if (!p) {
        atomic_fetch_sub(&d->allocated, bytes);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory allocating a block of %llu bytes",
                       (unsigned long long)bytes);
    }
    *addr = (uint64_t)(uintptr_t)p;
    return VKASR_OK;
}

static void refm_free(struct be_device *bd, uint64_t addr, uint64_t bytes, void *handle) {
    (void)handle;
    free((void *)(uintptr_t)addr);
    atomic_fetch_sub(&((struct ref_device *)bd)->allocated, bytes);
}

static uint64_t refm_max_block(const struct be_device *bd) {
    (void)bd;
    return SIZE_MAX;
}

static const struct be_block_ops ref_blocks = {.make = refm_make, .free = refm_free, .max_block = refm_max_block, .host = true};

/* ---- backend ---------------------------------------------------------------------------------- */

vkasr_status ref_host_upload(struct backend *bb, uint64_t dst, const void *src, uint64_t bytes) {
    if (bytes)
        memcpy((void *)(uintptr_t)dst, src, bytes);
    return VKASR_OK;
}

vkasr_status ref_host_download(struct backend *bb, void *dst, uint64_t src, uint64_t bytes) {
    if (bytes)
        memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return VKASR_OK;
}

static vkasr_status refb_nop(struct backend *bb) { return VKASR_OK; }
static vkasr_status refb_throttle(struct backend *bb, int max_pending) { return VKASR_OK; }

#define X(name)                                                                                        \
    static vkasr_status thunk_##name(struct backend *b, const void *a) {                               \
        return ref_##name(b, (const struct op_##name *)a);                                             \
    }
VKASR_OPS(X)
#undef X

static vkasr_status (*const ref_op_table[OP_COUNT])(struct backend *, const void *) = {
#define X(name) [OP_##name] = thunk_##name,
    VKASR_OPS(X)
#undef X
};

static vkasr_status refb_run(struct backend *bb, enum op_id id, const void *args) {
    CHECK_OR_RETURN(&bb->err, (unsigned)id < OP_COUNT);
    return ref_op_table[id](bb, args);
}

static size_t refb_profile(const struct backend *bb, struct be_op_stat *out, size_t cap) { return 0; }
static void refb_profile_reset(struct backend *bb) {}

static void refb_destroy(struct backend *b) {
    be_arena_destroy(&b->scratch);
    free(b);
}

static const struct backend_vtbl ref_backend_vtbl = {
    .destroy = refb_destroy,
    .upload = ref_host_upload,
    .download = ref_host_download,
    .flush = refb_nop,
    .throttle = refb_throttle,
    .sync = refb_nop,
    .run = refb_run,
    .profile = refb_profile,
    .profile_reset = refb_profile_reset,
};

static vkasr_status refd_create_backend(struct be_device *d, struct backend **out, struct err *e) {
    struct backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    b->vt = &ref_backend_vtbl;
    be_backend_init(b, d);
    *out = b;
    return VKASR_OK;
}

static void refd_destroy(struct be_device *bd) {
    be_device_fini(bd);
    free(bd);
}

static uint64_t refd_validation(const struct be_device *bd) { return 0; }
/* Host memory, budgeted only under VKASR_MAX_DEVICE_MEMORY_MIB: else plans take their preferred chunk
 * sizes. */
void ref_host_memory(const struct be_device *bd, struct be_memory *out) {
    struct ref_device *d = (struct ref_device *)bd;
    *out = (struct be_memory){.budget = d->budget, .used = atomic_load(&d->allocated), .max_tensor = UINT64_MAX};
}

static const struct be_device_vtbl ref_device_vtbl = {
    .destroy = refd_destroy,
    .create_backend = refd_create_backend,
    .validation_messages = refd_validation,
    .memory = ref_host_memory,
};

/* VKASR_MAX_DEVICE_MEMORY_MIB, as the GPU backends read it: the most this device's arenas may hold. */
static uint64_t memory_cap(const struct logger *log) {
    const char *v = getenv("VKASR_MAX_DEVICE_MEMORY_MIB");
    if (!v || !*v)
        return UINT64_MAX;
    char *end = NULL;
    unsigned long long mib = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end || mib == 0 || mib > (UINT64_MAX >> 20)) {
        LOG_WARN(log, "VKASR_MAX_DEVICE_MEMORY_MIB='%s' is not a positive number of MiB: ignored", v);
        return UINT64_MAX;
    }
    LOG_INFO(log, "memory capped at %llu MiB (VKASR_MAX_DEVICE_MEMORY_MIB)", mib);
    return (uint64_t)mib << 20;
}

void ref_host_device_init(struct ref_device *d, const struct be_device_options *opt) {
    d->base.log = opt->log;
    be_device_init(&d->base, &ref_blocks);
    atomic_init(&d->allocated, 0);
    d->budget = memory_cap(opt->log);
    d->base.info.cpu = true;
    d->base.info.host = true;
    d->base.info.max_alloc = UINT64_MAX;
    d->base.info.heap_bytes = d->budget;
}

vkasr_status ref_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e) {
    struct ref_device *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    d->base.vt = &ref_device_vtbl;
    ref_host_device_init(d, opt);
    snprintf(d->base.info.name, sizeof d->base.info.name, "CPU reference backend");
    d->base.info.reference = true;
    d->base.info.f16 = true; /* emulated: f16 weights are widened, products rounded like the GPU path */
    *out = &d->base;
    return VKASR_OK;
}
