/* measure.c — the measuring device and backend (backend.h: struct be_measure): the shared arena over
 * blocks that are only counted, ops that do nothing, downloads of zeros. The memory planner runs the
 * stages on it; it computes nothing. */
#include <stdio.h>
#include <string.h>

#include "backend.h"

/* Blocks start here (aligned, far from 0 so that no tensor reads as absent) and are at most this large:
 * one block holds any plan, below the 2^48 bytes a stack mark can address. */
#define MEASURE_BASE (1ull << 48)
#define MEASURE_BLOCK (1ull << 46)

static vkasr_status mb_make(struct be_device *d, uint64_t bytes, uint64_t *addr, void **handle, struct err *e) {
    (void)e;
    struct be_measure *m = (struct be_measure *)d; /* dev is its first member */
    *addr = m->next;
    *handle = NULL;
    m->next += bytes;
    return VKASR_OK;
}
static void mb_free(struct be_device *d, uint64_t addr, uint64_t bytes, void *handle) {
    (void)d, (void)addr, (void)bytes, (void)handle;
}
static uint64_t mb_max_block(const struct be_device *d) {
    (void)d;
    return MEASURE_BLOCK;
}
static const struct be_block_ops measure_blocks = {.make = mb_make, .free = mb_free, .max_block = mb_max_block};

static void mb_destroy(struct backend *b) { (void)b; }
static vkasr_status mb_upload(struct backend *b, uint64_t dst, const void *src, uint64_t bytes) {
    (void)b, (void)dst, (void)src, (void)bytes;
    return VKASR_OK;
}
static vkasr_status mb_download(struct backend *b, void *dst, uint64_t src, uint64_t bytes) {
    (void)b, (void)src;
    memset(dst, 0, (size_t)bytes);
    return VKASR_OK;
}
static vkasr_status mb_nop(struct backend *b) {
    (void)b;
    return VKASR_OK;
}
static vkasr_status mb_throttle(struct backend *b, int max_pending) {
    (void)b, (void)max_pending;
    return VKASR_OK;
}
static vkasr_status mb_run(struct backend *b, enum op_id id, const void *args) {
    (void)b, (void)id, (void)args;
    return VKASR_OK;
}
static size_t mb_profile(const struct backend *b, struct be_op_stat *out, size_t cap) {
    (void)b, (void)out, (void)cap;
    return 0;
}
static void mb_profile_reset(struct backend *b) { (void)b; }

static const struct backend_vtbl measure_backend_vtbl = {
    .destroy = mb_destroy,
    .upload = mb_upload,
    .download = mb_download,
    .flush = mb_nop,
    .throttle = mb_throttle,
    .sync = mb_nop,
    .run = mb_run,
    .profile = mb_profile,
    .profile_reset = mb_profile_reset,
};

static void md_destroy(struct be_device *d) { (void)d; }
static vkasr_status md_create_backend(struct be_device *d, struct backend **out, struct err *e) {
    (void)d, (void)out;
    return err_set(e, VKASR_ERR_UNSUPPORTED, "the measuring device has one backend (be_measure_init)");
}
static uint64_t md_validation(const struct be_device *d) {
    (void)d;
    return 0;
}
static void md_memory(const struct be_device *d, struct be_memory *out) {
    (void)d;
    *out = (struct be_memory){.budget = UINT64_MAX, .max_tensor = MEASURE_BLOCK};
}
static const struct be_device_vtbl measure_device_vtbl = {
    .destroy = md_destroy,
    .create_backend = md_create_backend,
    .validation_messages = md_validation,
    .memory = md_memory,
};

void be_measure_init(struct be_measure *m) {
    memset(m, 0, sizeof *m);
    m->next = MEASURE_BASE;
    m->dev.vt = &measure_device_vtbl;
    m->dev.kind = "measure";
    be_device_init(&m->dev, &measure_blocks);
    snprintf(m->dev.info.name, sizeof m->dev.info.name, "measuring backend");
    m->dev.info.max_alloc = MEASURE_BLOCK;
    m->be.vt = &measure_backend_vtbl;
    m->be.measuring = true;
    be_backend_init(&m->be, &m->dev);
}

void be_measure_fini(struct be_measure *m) {
    be_arena_destroy(&m->be.scratch);
    be_device_fini(&m->dev);
}
