/* cu_backend.cu — the CUDA backend object (one per session): one in-order stream for ops, uploads and
 * downloads, the scratch arena, double-buffered pinned staging, flush/throttle through events, the op
 * table from VKASR_OPS, cuBLASLt's handle and workspace, per-op event timings when profiling. */
#include <stdlib.h>
#include <string.h>

#include "cu_internal.h"

/* ---- profiling -------------------------------------------------------------------------------- */

static vkasr_status prof_event(struct cu_backend *b, cudaEvent_t *ev) {
    if (b->nfree_ev) {
        *ev = b->free_ev[--b->nfree_ev];
        return VKASR_OK;
    }
    CU_CHECK(&b->base.err, cudaEventCreate(ev));
    return VKASR_OK;
}

static void prof_recycle(struct cu_backend *b, cudaEvent_t ev) {
    if (b->nfree_ev == b->capfree_ev) {
        size_t cap = b->capfree_ev ? 2 * b->capfree_ev : 64;
        cudaEvent_t *n = (cudaEvent_t *)realloc(b->free_ev, cap * sizeof *n);
        if (!n) {
            cudaEventDestroy(ev);
            return;
        }
        b->free_ev = n;
        b->capfree_ev = cap;
    }
    b->free_ev[b->nfree_ev++] = ev;
}

static void prof_add(struct cu_backend *b, const char *name, double ms) {
    for (size_t i = 0; i < b->nprof; i++)
        if (strcmp(b->prof[i].name, name) == 0) {
            b->prof[i].calls++;
            b->prof[i].ms += ms;
            return;
        }
    if (b->nprof == b->capprof) {
        size_t cap = b->capprof ? 2 * b->capprof : 32;
        struct cu_prof_total *n = (struct cu_prof_total *)realloc(b->prof, cap * sizeof *n);
        if (!n)
            return; /* the profile loses an entry, the transcription goes on */
        b->prof = n;
        b->capprof = cap;
    }
    b->prof[b->nprof++] = (struct cu_prof_total){name, 1, ms};
}

/* Turns every recorded interval into op totals; the stream must have passed the events (sync). */
static vkasr_status prof_resolve(struct cu_backend *b) {
    for (size_t i = 0; i < b->npend; i++) {
        struct cu_prof_pending *p = &b->pend[i];
        float ms = 0;
        CU_CHECK(&b->base.err, cudaEventElapsedTime(&ms, p->start, p->stop));
        prof_add(b, p->name, ms);
        prof_recycle(b, p->start);
        prof_recycle(b, p->stop);
    }
    b->npend = 0;
    return VKASR_OK;
}

/* ---- stream ----------------------------------------------------------------------------------- */

vkasr_status cu_stream_sync(struct cu_backend *b) {
    CU_CHECK(&b->base.err, cudaStreamSynchronize(b->stream));
    b->staging_busy[0] = b->staging_busy[1] = false;
    b->flush_count = 0;
    if (b->npend)
        TRY(prof_resolve(b));
    return VKASR_OK;
}

static vkasr_status cub_flush(struct backend *bb) {
    struct cu_backend *b = (struct cu_backend *)bb;
    TRY(cu_not_capturing(b, "flush"));
    TRY(cu_use_device(b->d, &bb->err));
    /* Launches are already queued on the GPU; an event marks how far this flush reaches for throttle. */
    if (b->flush_count == CU_THROTTLE_RING) { /* the oldest mark is superseded by the newer ones */
        b->flush_head = (b->flush_head + 1) % CU_THROTTLE_RING;
        b->flush_count--;
    }
    int slot = (b->flush_head + b->flush_count) % CU_THROTTLE_RING;
    CU_CHECK(&bb->err, cudaEventRecord(b->flush_ev[slot], b->stream));
    b->flush_count++;
    return VKASR_OK;
}

static vkasr_status cub_throttle(struct backend *bb, int max_pending) {
    struct cu_backend *b = (struct cu_backend *)bb;
    TRY(cu_not_capturing(b, "throttle"));
    TRY(cu_use_device(b->d, &bb->err));
    if (max_pending < 0)
        max_pending = 0;
    while (b->flush_count > max_pending) {
        CU_CHECK(&bb->err, cudaEventSynchronize(b->flush_ev[b->flush_head]));
        b->flush_head = (b->flush_head + 1) % CU_THROTTLE_RING;
        b->flush_count--;
    }
    return VKASR_OK;
}

static vkasr_status cub_sync(struct backend *bb) {
    struct cu_backend *b = (struct cu_backend *)bb;
    TRY(cu_not_capturing(b, "sync"));
    TRY(cu_use_device(b->d, &bb->err));
    return cu_stream_sync(b);
}

/* ---- memory ----------------------------------------------------------------------------------- */

/* The range must lie in this backend's scratch or the device's weights: a stray address is a bug to
 * report, not a pointer to hand to the driver. */
static vkasr_status check_range(struct cu_backend *b, uint64_t addr, uint64_t bytes, const char *what) {
    struct be_arena_block blk;
    if (be_find_block(&b->base, addr, bytes, &blk))
        return VKASR_OK;
    return err_set(&b->base.err, VKASR_ERR_INTERNAL, "%s unknown device range 0x%llx+%llu", what,
                   (unsigned long long)addr, (unsigned long long)bytes);
}

static vkasr_status ensure_staging(struct cu_backend *b) {
    if (b->staging)
        return VKASR_OK;
    void *p = NULL;
    CU_CHECK(&b->base.err, cudaMallocHost(&p, 2 * CU_STAGING_BYTES));
    b->staging = (unsigned char *)p;
    return VKASR_OK;
}

/* Uploads return as soon as the data is in pinned memory and its copy is queued: the two halves of
 * the staging buffer alternate, each reused once its previous copy has finished. */
static vkasr_status cub_upload(struct backend *bb, uint64_t dst, const void *src, uint64_t bytes) {
    struct cu_backend *b = (struct cu_backend *)bb;
    TRY(cu_not_capturing(b, "upload"));
    if (bytes == 0)
        return VKASR_OK;
    TRY(cu_use_device(b->d, &bb->err));
    TRY(check_range(b, dst, bytes, "upload to"));
    TRY(ensure_staging(b));
    for (uint64_t off = 0; off < bytes; off += CU_STAGING_BYTES) {
        uint64_t n = bytes - off < CU_STAGING_BYTES ? bytes - off : CU_STAGING_BYTES;
        int h = b->staging_next;
        b->staging_next ^= 1;
        if (b->staging_busy[h])
            CU_CHECK(&bb->err, cudaEventSynchronize(b->staging_done[h]));
        unsigned char *stage = b->staging + (uint64_t)h * CU_STAGING_BYTES;
        memcpy(stage, (const char *)src + off, n);
        CU_CHECK(&bb->err, cudaMemcpyAsync((void *)(uintptr_t)(dst + off), stage, n, cudaMemcpyHostToDevice, b->stream));
        CU_CHECK(&bb->err, cudaEventRecord(b->staging_done[h], b->stream));
        b->staging_busy[h] = true;
    }
    return VKASR_OK;
}

/* Downloads run after all queued work (stream order) and wait for it. */
static vkasr_status cub_download(struct backend *bb, void *dst, uint64_t src, uint64_t bytes) {
    struct cu_backend *b = (struct cu_backend *)bb;
    TRY(cu_not_capturing(b, "download"));
    if (bytes == 0)
        return VKASR_OK;
    TRY(cu_use_device(b->d, &bb->err));
    TRY(check_range(b, src, bytes, "download from"));
    TRY(ensure_staging(b));
    for (uint64_t off = 0; off < bytes; off += 2 * CU_STAGING_BYTES) {
        uint64_t n = bytes - off < 2 * CU_STAGING_BYTES ? bytes - off : 2 * CU_STAGING_BYTES;
        CU_CHECK(&bb->err, cudaMemcpyAsync(b->staging, (const void *)(uintptr_t)(src + off), n, cudaMemcpyDeviceToHost,
                                          b->stream));
        TRY(cu_stream_sync(b));
        memcpy((char *)dst + off, b->staging, n);
    }
    return VKASR_OK;
}

/* ---- ops -------------------------------------------------------------------------------------- */

/* The op table, generated from VKASR_OPS: a missing cu_op_<name> fails to link. */
#define X(name)                                                                                        \
    static vkasr_status thunk_##name(struct cu_backend *b, const void *a) {                            \
        return cu_op_##name(b, (const struct op_##name *)a);                                           \
    }
VKASR_OPS(X)
#undef X

static vkasr_status (*const cu_op_table[OP_COUNT])(struct cu_backend *, const void *) = {
#define X(name) thunk_##name,
    VKASR_OPS(X)
#undef X
};

static vkasr_status cub_run(struct backend *bb, enum op_id id, const void *args) {
    struct cu_backend *b = (struct cu_backend *)bb;
    CHECK_OR_RETURN(&bb->err, (unsigned)id < OP_COUNT);
    TRY(cu_use_device(b->d, &bb->err));
    if (b->capturing) { /* an op that fails while recording ends the capture (cu_graph.cu) */
        vkasr_status st = cu_op_table[id](b, args);
        if (st != VKASR_OK)
            cu_graph_abort(b);
        return st;
    }
    if (!b->d->profile)
        return cu_op_table[id](b, args);
    if (b->npend == b->cappend) {
        TRY(cu_stream_sync(b)); /* resolves the pending intervals */
        if (b->npend == b->cappend) {
            size_t cap = b->cappend ? 2 * b->cappend : 256;
            struct cu_prof_pending *n = (struct cu_prof_pending *)realloc(b->pend, cap * sizeof *n);
            if (!n)
                return err_set(&bb->err, VKASR_ERR_NO_MEMORY, "out of host memory");
            b->pend = n;
            b->cappend = cap;
        }
    }
    struct cu_prof_pending p = {op_name(id), NULL, NULL};
    TRY(prof_event(b, &p.start));
    vkasr_status st = prof_event(b, &p.stop);
    if (st != VKASR_OK) {
        prof_recycle(b, p.start);
        return st;
    }
    b->op_label = NULL;
    cudaError_t r = cudaEventRecord(p.start, b->stream);
    if (r == cudaSuccess) {
        st = cu_op_table[id](b, args);
        r = cudaEventRecord(p.stop, b->stream);
    }
    if (b->op_label)
        p.name = b->op_label;
    if (r != cudaSuccess && st == VKASR_OK)
        st = cu_fail(&bb->err, r, "cudaEventRecord", __FILE__, __LINE__);
    if (st != VKASR_OK) {
        prof_recycle(b, p.start);
        prof_recycle(b, p.stop);
        return st;
    }
    b->pend[b->npend++] = p;
    return VKASR_OK;
}

static size_t cub_profile(const struct backend *bb, struct be_op_stat *out, size_t cap) {
    const struct cu_backend *b = (const struct cu_backend *)bb;
    size_t n = 0;
    for (size_t i = 0; i < b->nprof && n < cap; i++, n++)
        out[n] = (struct be_op_stat){b->prof[i].name, b->prof[i].calls, b->prof[i].ms};
    return n;
}

static void cub_profile_reset(struct backend *bb) { ((struct cu_backend *)bb)->nprof = 0; }

/* ---- lifetime --------------------------------------------------------------------------------- */

static void cub_destroy(struct backend *bb) {
    struct cu_backend *b = (struct cu_backend *)bb;
    if (cudaSetDevice(b->d->ordinal) == cudaSuccess) {
        if (b->capturing)
            cu_graph_abort(b);
        if (b->stream)
            cudaStreamSynchronize(b->stream);
        for (size_t i = 0; i < b->npend; i++) {
            cudaEventDestroy(b->pend[i].start);
            cudaEventDestroy(b->pend[i].stop);
        }
        for (size_t i = 0; i < b->nfree_ev; i++)
            cudaEventDestroy(b->free_ev[i]);
        for (int i = 0; i < CU_THROTTLE_RING; i++)
            if (b->flush_ev[i])
                cudaEventDestroy(b->flush_ev[i]);
        for (int i = 0; i < 2; i++)
            if (b->staging_done[i])
                cudaEventDestroy(b->staging_done[i]);
        cu_lt_cache_free(b);
        cu_att_algo_free(b);
        if (b->lt)
            cublasLtDestroy(b->lt);
        cu_device_free(b->d, b->workspace, CU_WORKSPACE_BYTES);
        be_arena_destroy(&b->base.scratch);
        if (b->staging)
            cudaFreeHost(b->staging);
        if (b->stream)
            cudaStreamDestroy(b->stream);
        cudaGetLastError();
    }
    free(b->pend);
    free(b->free_ev);
    free(b->prof);
    free(b);
}

/* designated, in the struct's order (C++20 syntax; nvcc takes it in C++17 mode), as the other backends'
 * vtables are: a slot added to backend_vtbl cannot shift the others */
static const struct backend_vtbl cu_backend_vtbl = {
    .destroy = cub_destroy,
    .upload = cub_upload,
    .download = cub_download,
    .flush = cub_flush,
    .throttle = cub_throttle,
    .sync = cub_sync,
    .run = cub_run,
    .profile = cub_profile,
    .profile_reset = cub_profile_reset,
    .graph_begin = cu_graph_begin,
    .graph_end = cu_graph_end,
    .graph_run = cu_graph_run,
    .graph_free = cu_graph_free,
};

static vkasr_status backend_init(struct cu_backend *b, struct err *e) {
    TRY(cu_use_device(b->d, e));
    CU_CHECK(e, cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++)
        CU_CHECK(e, cudaEventCreateWithFlags(&b->staging_done[i], cudaEventDisableTiming));
    for (int i = 0; i < CU_THROTTLE_RING; i++)
        CU_CHECK(e, cudaEventCreateWithFlags(&b->flush_ev[i], cudaEventDisableTiming));
    CUBLAS_CHECK(e, cublasLtCreate(&b->lt));
    TRY(cu_device_malloc(b->d, CU_WORKSPACE_BYTES, &b->workspace, e));
    return VKASR_OK;
}

vkasr_status cu_backend_create(struct be_device *bd, struct backend **out, struct err *e) {
    *out = NULL;
    struct cu_backend *b = (struct cu_backend *)calloc(1, sizeof *b);
    if (!b)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    b->base.vt = &cu_backend_vtbl;
    be_backend_init(&b->base, bd);
    b->d = (struct cu_device *)bd;
    vkasr_status st = backend_init(b, e);
    if (st != VKASR_OK) {
        cub_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return VKASR_OK;
}
