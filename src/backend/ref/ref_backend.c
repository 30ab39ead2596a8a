/* ref_backend.c — the plain-C reference backend: tensors in host memory (addr = host pointer), ops
 * as simple loops (ref_ops_*.c). It is the test oracle for every Vulkan kernel and a slow CPU
 * fallback (--device cpu); it is deliberately not tuned. */
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

struct ref_device {
    struct be_device base;
    pthread_mutex_t lock;
    void **weights;
    size_t nweights, capweights;
    uint64_t weight_bytes;
};

struct ref_backend {
    struct backend base;
    void **scratch; /* stack of allocations */
    uint64_t *sizes;
    size_t n, cap;
    uint64_t in_use, peak;
};

static bool push_ptr(void ***arr, uint64_t **sizes, size_t *n, size_t *cap, void *p, uint64_t size) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void **na = realloc(*arr, c * sizeof *na);
        if (!na)
            return false;
        *arr = na;
        if (sizes) {
            uint64_t *ns = realloc(*sizes, c * sizeof *ns);
            if (!ns)
                return false;
            *sizes = ns;
        }
        *cap = c;
    }
    (*arr)[*n] = p;
    if (sizes)
        (*sizes)[*n] = size;
    (*n)++;
    return true;
}

/* 64-byte aligned host allocations so the reference sees the same alignment as device tensors. */
static void *alloc_aligned(uint64_t bytes) {
    if (bytes > SIZE_MAX - 64)
        return NULL;
    size_t n = (size_t)((bytes + 63) / 64 * 64);
    return aligned_alloc(64, n ? n : 64);
}

static vkasr_status refb_alloc(struct backend *bb, enum be_pool pool, uint64_t bytes, uint64_t *addr) {
    struct ref_backend *b = (struct ref_backend *)bb;
    void *p = alloc_aligned(bytes);
    if (!p)
        return err_set(&bb->err, VKASR_ERR_NO_MEMORY, "out of host memory allocating %llu bytes",
                       (unsigned long long)bytes);
    bool ok;
    if (pool == BE_POOL_WEIGHTS) {
        struct ref_device *d = (struct ref_device *)bb->dev;
        pthread_mutex_lock(&d->lock);
        ok = push_ptr(&d->weights, NULL, &d->nweights, &d->capweights, p, bytes);
        if (ok)
            d->weight_bytes += bytes;
        pthread_mutex_unlock(&d->lock);
    } else {
        ok = push_ptr(&b->scratch, &b->sizes, &b->n, &b->cap, p, bytes);
        if (ok) {
            b->in_use += bytes;
            if (b->in_use > b->peak)
                b->peak = b->in_use;
        }
    }
    if (!ok) {
        free(p);
        return err_set(&bb->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    *addr = (uint64_t)(uintptr_t)p;
    return VKASR_OK;
}

static uint64_t refb_mark(struct backend *bb) { return ((struct ref_backend *)bb)->n; }

static void refb_release(struct backend *bb, uint64_t mark) {
    struct ref_backend *b = (struct ref_backend *)bb;
    while (b->n > mark) {
        b->n--;
        b->in_use -= b->sizes[b->n];
        free(b->scratch[b->n]);
    }
}

static vkasr_status refb_upload(struct backend *bb, uint64_t dst, const void *src, uint64_t bytes) {
    if (bytes)
        memcpy((void *)(uintptr_t)dst, src, bytes);
    return VKASR_OK;
}

static vkasr_status refb_download(struct backend *bb, void *dst, uint64_t src, uint64_t bytes) {
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

static uint64_t refb_peak(const struct backend *bb) { return ((const struct ref_backend *)bb)->peak; }
/* Host memory: allocations are made as they come, there is nothing to reserve. */
static vkasr_status refb_reserve(struct backend *bb, uint64_t bytes, uint64_t keep) { return VKASR_OK; }

static size_t refb_profile(const struct backend *bb, struct be_op_stat *out, size_t cap) { return 0; }
static void refb_profile_reset(struct backend *bb) {}

static void refb_destroy(struct backend *bb) {
    struct ref_backend *b = (struct ref_backend *)bb;
    refb_release(bb, 0);
    free(b->scratch);
    free(b->sizes);
    free(b);
}

static const struct backend_vtbl ref_backend_vtbl = {
    .destroy = refb_destroy,
    .alloc = refb_alloc,
    .mark = refb_mark,
    .release = refb_release,
    .upload = refb_upload,
    .download = refb_download,
    .flush = refb_nop,
    .throttle = refb_throttle,
    .sync = refb_nop,
    .run = refb_run,
    .peak_bytes = refb_peak,
    .reserve = refb_reserve,
    .profile = refb_profile,
    .profile_reset = refb_profile_reset,
};

static vkasr_status refd_create_backend(struct be_device *d, struct backend **out, struct err *e) {
    struct ref_backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    b->base.vt = &ref_backend_vtbl;
    b->base.dev = d;
    *out = &b->base;
    return VKASR_OK;
}

static void refd_destroy(struct be_device *bd) {
    struct ref_device *d = (struct ref_device *)bd;
    for (size_t i = 0; i < d->nweights; i++)
        free(d->weights[i]);
    free(d->weights);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static uint64_t refd_weight_bytes(const struct be_device *bd) { return ((const struct ref_device *)bd)->weight_bytes; }
static uint64_t refd_validation(const struct be_device *bd) { return 0; }
/* Host memory, not budgeted: plans take their preferred chunk sizes. */
static void refd_memory(const struct be_device *bd, struct be_memory *out) {
    *out = (struct be_memory){.budget = UINT64_MAX, .used = refd_weight_bytes(bd), .max_tensor = UINT64_MAX};
}

static const struct be_device_vtbl ref_device_vtbl = {
    .destroy = refd_destroy,
    .create_backend = refd_create_backend,
    .weight_bytes = refd_weight_bytes,
    .validation_messages = refd_validation,
    .memory = refd_memory,
};

vkasr_status ref_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e) {
    struct ref_device *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    d->base.vt = &ref_device_vtbl;
    d->base.log = opt->log;
    pthread_mutex_init(&d->lock, NULL);
    snprintf(d->base.info.name, sizeof d->base.info.name, "CPU reference backend");
    d->base.info.reference = true;
    d->base.info.cpu = true;
    d->base.info.f16 = true; /* emulated: f16 weights are widened, products rounded like the GPU path */
    d->base.info.max_alloc = UINT64_MAX;
    d->base.info.heap_bytes = UINT64_MAX;
    *out = &d->base;
    return VKASR_OK;
}
