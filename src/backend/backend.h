/* backend.h — the compute backend interface the network code calls.
 *
 * A be_device is shared by every thread using a model: it owns the weights and (for Vulkan) the
 * VkDevice and pipelines. A backend is one thread's working context on a device: scratch memory,
 * command recording, profiling. Backends: vulkan/ (the engine), cuda/ (optional, -DVKASR_CUDA=ON: the
 * NVIDIA-native yardstick) and ref/ (plain C, the test oracle and a slow CPU fallback). src/asr only
 * ever talks to this interface.
 */
#ifndef VKASR_BACKEND_H
#define VKASR_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "arena.h"
#include "common/err.h"
#include "common/log.h"
#include "ops.h"

struct be_device;
struct backend;

enum be_pool {
    BE_POOL_WEIGHTS = 0, /* lives as long as the device; shared read-only by all backends */
    BE_POOL_SCRATCH = 1  /* per backend, stack discipline: be_mark / be_release          */
};

struct be_device_options {
    const char *device;     /* backend.c: "cpu", "cuda[:N]", "vulkan[:N|NAME]", "N", NAME; NULL/"" =
                             * $VKASR_DEVICE, else the best Vulkan device                            */
    bool validation;        /* Khronos validation layer                                           */
    bool profile;           /* GPU timestamps per dispatch                                        */
    bool want_f16;          /* request f16 arithmetic support (falls back silently if absent)    */
    bool gpu_only;          /* Vulkan, no device named: a GPU or VKASR_ERR_NO_DEVICE (a CPU driver such
                             * as lavapipe is not picked; be_device_open then opens the CPU backend)  */
    const struct logger *log;
};

struct be_device_info {
    char name[256];
    bool reference;         /* the plain-C CPU backend                                            */
    bool f16;               /* f16 weights/arithmetic available                                   */
    bool coopmat;           /* tensor-core GEMM path available                                    */
    bool cpu;               /* computes on the host's CPU (the reference backend, a CPU Vulkan driver
                             * such as lavapipe): work between abort polls is cut finer there        */
    bool host;              /* tensors in host memory, ops as host code (the reference and CPU
                             * backends): f32 is their fast precision, so AUTO picks it             */
    int64_t step_macs;      /* multiply-adds between abort polls on a CPU device (src/asr/steps.c);
                             * 0: ASR_STEP_MACS_CPU, sized for lavapipe                             */
    uint64_t max_alloc;     /* largest single allocation                                          */
    uint64_t heap_bytes;    /* device-local heap size                                             */
    uint32_t max_groups;    /* largest workgroup / block count of a launch dimension, after
                             * VKASR_MAX_GROUPS (tests check that a forced tiny grid took effect)  */
};

/* The device memory a run may plan with (the heap tensors live on). */
struct be_memory {
    uint64_t budget;        /* bytes this process may hold there: VK_EXT_memory_budget's heap budget where
                             * the driver has it, else the heap size (Vulkan); what vkasr holds plus the
                             * free memory cudaMemGetInfo reports (CUDA); VKASR_MAX_DEVICE_MEMORY_MIB
                             * caps it */
    uint64_t used;          /* bytes held now: every arena of the device (weights, all sessions' scratch),
                             * or the driver's count of this process's usage when larger               */
    const char *source;     /* what reported budget and usage ("VK_EXT_memory_budget", "cudaMemGetInfo");
                             * NULL: the heap's size and vkasr's own count                             */
    uint64_t max_tensor;    /* the largest single tensor (allocation) the device makes                 */
    uint64_t op_scratch;    /* scratch one op may take for itself on top of the stack, beyond its tensors
                             * (the CUDA linear's f16 copy of x and epilogue temporaries, which it bounds
                             * by working in row chunks); plans reserve it above every phase. 0 where ops
                             * take none or only what the phase's own released temporaries leave        */
    uint64_t op_scratch_quant; /* more op scratch a product of block-quantized weights takes (the CUDA
                                * linear's f32 copy of w); plans add it for models with such weights   */
    uint64_t op_scratch_long;  /* more op scratch an op takes for one input of at least long_frames
                                * encoder frames (the CUDA unfused attention's chunks); plans of one such
                                * input add it                                                        */
    int64_t long_frames;
};

/* A device's compute pipelines so far (-v's start-up split): zero where the backend has none. */
struct be_pipelines {
    unsigned created;       /* pipelines created                                                   */
    unsigned cache_hits;    /* ... of which the driver found in the pipeline cache                 */
    double create_ms;       /* time spent creating them, summed over the threads that did           */
};

struct be_device_vtbl {
    void (*destroy)(struct be_device *d);
    vkasr_status (*create_backend)(struct be_device *d, struct backend **out, struct err *e);
    uint64_t (*validation_messages)(const struct be_device *d);
    void (*memory)(const struct be_device *d, struct be_memory *out);
    void (*pipelines)(const struct be_device *d, struct be_pipelines *out); /* NULL: none */
    /* Linear products recorded on an int8 path (W8A8: weights and x rounded to int8 per row) so far, by
     * every backend of the device; NULL: the backend has none. */
    uint64_t (*int8_products)(const struct be_device *d);
};

struct be_device {
    const struct be_device_vtbl *vt;
    struct be_device_info info;
    const struct logger *log;
    const char *kind;       /* "cpu", "cuda" or "vulkan": the backend, set by be_device_open     */
    bool predicated_graphs; /* be_graph_begin_predicated's replays skip their ops while the predicate
                             * is 0 (Vulkan with VK_EXT_conditional_rendering)                     */
    pthread_mutex_t weights_lock;
    struct be_arena weights; /* grow only, shared by every backend of the device (be_device_init) */
};

struct be_op_stat {
    const char *name;
    uint64_t calls;
    double gpu_ms;
};

/* A recorded sequence of ops (be_graph_begin). */
struct be_graph;

struct backend_vtbl {
    void (*destroy)(struct backend *b);
    vkasr_status (*upload)(struct backend *b, uint64_t dst, const void *src, uint64_t bytes);
    vkasr_status (*download)(struct backend *b, void *dst, uint64_t src, uint64_t bytes);
    vkasr_status (*flush)(struct backend *b); /* start recorded work without waiting */
    /* Waits until at most max_pending submissions are still executing (keeps the GPU busy while
     * bounding how far the host runs ahead: prompt abort, truthful progress). */
    vkasr_status (*throttle)(struct backend *b, int max_pending);
    vkasr_status (*sync)(struct backend *b);  /* wait for all recorded work          */
    vkasr_status (*run)(struct backend *b, enum op_id id, const void *args);
    /* Per-op profile (Vulkan with profiling on): fills up to cap entries, returns the count. */
    size_t (*profile)(const struct backend *b, struct be_op_stat *out, size_t cap);
    void (*profile_reset)(struct backend *b);
    /* Recorded sequences (be_graph_*); NULL where the backend has none. */
    vkasr_status (*graph_begin)(struct backend *b, const be_tensor *predicate);
    vkasr_status (*graph_end)(struct backend *b, struct be_graph **out);
    vkasr_status (*graph_run)(struct backend *b, struct be_graph *g, uint32_t times);
    void (*graph_free)(struct backend *b, struct be_graph *g);
};

struct backend {
    const struct backend_vtbl *vt;
    struct be_device *dev;
    struct err err;
    struct be_arena scratch; /* BE_POOL_SCRATCH: stack discipline (be_backend_init)               */
    /* Asked during long waits inside the backend (pipeline creation): true ends the wait and the op
     * with VKASR_ABORTED. Set for one run by its caller (src/asr); NULL: never asked. */
    bool (*should_abort)(void *ud);
    void *abort_ud;
    bool measuring;          /* a measuring backend (be_measure_init): ops are not run            */
    /* Its products of block-quantized weights take int8 rows, which its layernorms can make in their
     * own pass (op_layernorm.y8, op_linear.x8); a measuring backend gets the flag of the backend it
     * plans for (asr_work.int8_rows). */
    bool int8_rows;
    /* Staged uploads so far (-v's start-up split of the weights): host time copying into the staging
     * buffer, and waiting for the device to free a half of it; 0 where uploads are not staged. */
    double upload_copy_ms, upload_wait_ms;
};

/* Opens the device a device string names (backend.c). */
vkasr_status be_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e);
/* A device string's part after a backend's name: "prefix" alone or "prefix:rest" gives rest ("" for
 * the bare prefix), anything else NULL (be_device_open's reading of "cpu:N", "vulkan:X", ...). */
const char *be_device_suffix(const char *s, const char *prefix);
void be_device_close(struct be_device *d);
void be_device_pipelines(const struct be_device *d, struct be_pipelines *out);
/* The device's int8 products so far (be_device_vtbl.int8_products; 0 where it has none). */
uint64_t be_device_int8_products(const struct be_device *d);
vkasr_status be_backend_create(struct be_device *d, struct backend **out, struct err *e);
void be_backend_destroy(struct backend *b);

/* ---- memory (backend_memory.c over arena.h) ---------------------------------------------------------- */

/* For the backends' constructors: the device's weights arena (blocks made by `blocks`) and its lock,
 * set up before anything can fail; be_device_fini frees the weights' blocks (while the backend's device
 * still exists) and the lock. be_backend_init sets up a backend's scratch arena on its device's blocks;
 * the backend's destroy frees it (be_arena_destroy) before its device-side state goes. */
void be_device_init(struct be_device *d, const struct be_block_ops *blocks);
void be_device_fini(struct be_device *d);
void be_backend_init(struct backend *b, struct be_device *d);

/* Allocates `bytes` in a pool (uninitialised); errors land in b->err. */
vkasr_status be_alloc(struct backend *b, enum be_pool pool, uint64_t bytes, uint64_t *addr);
/* Allocates a tensor of the given shape in a pool (uninitialised). */
vkasr_status be_alloc_tensor(struct backend *b, enum be_pool pool, be_dtype type, int nd, const int64_t *ne,
                             be_tensor *out);
/* The scratch stack's top, and back to it (every scratch tensor taken since is gone). */
uint64_t be_mark(struct backend *b);
void be_release(struct backend *b, uint64_t mark);
/* Makes the scratch pool hold at least `bytes` for stack allocations without growing, in as few blocks
 * as the device allows (a run's memory plan, reserved before it starts: its peak is then what was
 * planned). What it holds already is kept when that serves and is at most `keep` bytes, else freed
 * first (after the backend's queued work). Only while no scratch is in use. */
vkasr_status be_reserve(struct backend *b, uint64_t bytes, uint64_t keep);
/* The backend's scratch footprint, the same on every backend: bytes of the blocks its scratch arena
 * holds (not the bytes in use). It grows when the stack outgrows its blocks and only be_reserve lowers
 * it, so after a run that kept to its plan it is be_scratch_bytes of the planned scratch. */
uint64_t be_peak_bytes(const struct backend *b);
/* The most scratch bytes in use at once, and the largest scratch tensor (be_scratch_bytes), since the
 * last be_reserve. */
uint64_t be_scratch_peak(const struct backend *b);
uint64_t be_scratch_largest(const struct backend *b);
/* Bytes of the blocks holding the device's weights. */
uint64_t be_weight_bytes(const struct be_device *d);
/* The arena block holding [addr, addr + bytes) in b's scratch or its device's weights; false if none. */
bool be_find_block(struct backend *b, uint64_t addr, uint64_t bytes, struct be_arena_block *out);

static inline vkasr_status be_upload(struct backend *b, uint64_t dst, const void *src, uint64_t n) {
    return b->vt->upload(b, dst, src, n);
}
static inline vkasr_status be_download(struct backend *b, void *dst, uint64_t src, uint64_t n) {
    return b->vt->download(b, dst, src, n);
}
static inline vkasr_status be_flush(struct backend *b) { return b->vt->flush(b); }
static inline vkasr_status be_sync(struct backend *b) { return b->vt->sync(b); }
static inline vkasr_status be_throttle(struct backend *b, int max_pending) { return b->vt->throttle(b, max_pending); }

/* Recorded sequences of ops (the device-resident decoder's loop): ops between be_graph_begin and
 * be_graph_end are validated and recorded, not run; be_graph_run queues `times` replays behind the work
 * before it (be_sync and be_download wait for them). Arguments are fixed at recording, so values that
 * change between replays live in device memory. An op's own scratch is rewritten by every replay:
 * allocate what must survive before recording, and nothing while the graph lives (other graphs' op
 * temporaries may share those bytes). Uploads and downloads are errors while recording;
 * be_graph_free waits for pending replays. VKASR_ERR_UNSUPPORTED from be_graph_begin (the reference
 * backend; Vulkan while profiling): run the ops directly. */
static inline vkasr_status be_graph_begin(struct backend *b) {
    if (!b->vt->graph_begin)
        return err_set(&b->err, VKASR_ERR_UNSUPPORTED, "this backend does not record op sequences");
    return b->vt->graph_begin(b, NULL);
}
/* The same with a predicate, an I32 [1] tensor written by ops (or uploaded) before each replay: a replay
 * that begins while it is 0 may skip its ops, where the backend can (Vulkan with
 * VK_EXT_conditional_rendering; the others run them). So the ops must do nothing useful then, and run
 * as well as skip (the device-resident search past its end: search_step's count of hypotheses not
 * done). */
static inline vkasr_status be_graph_begin_predicated(struct backend *b, const be_tensor *predicate) {
    if (!predicate || predicate->type != BE_I32 || be_numel(predicate) != 1)
        return err_set(&b->err, VKASR_ERR_INTERNAL, "an op sequence's predicate must be one I32");
    if (!b->vt->graph_begin)
        return err_set(&b->err, VKASR_ERR_UNSUPPORTED, "this backend does not record op sequences");
    return b->vt->graph_begin(b, predicate);
}
static inline vkasr_status be_graph_end(struct backend *b, struct be_graph **out) { return b->vt->graph_end(b, out); }
static inline vkasr_status be_graph_run(struct backend *b, struct be_graph *g, uint32_t times) {
    return b->vt->graph_run(b, g, times);
}
static inline void be_graph_free(struct backend *b, struct be_graph *g) {
    if (g)
        b->vt->graph_free(b, g);
}

/* ---- measuring (measure.c) -------------------------------------------------------------------------- */

/* A device and backend that only count, as ggml_gallocr_reserve measures a graph: the scratch arena
 * is the one every backend uses (same rounding, same alignment), over blocks with no memory behind
 * them (addresses from a range nothing maps); ops are neither validated nor run, uploads do nothing,
 * downloads give zeros. Stages run their own code on it to measure the scratch they take for a shape
 * (src/asr/plan.c): be_scratch_peak after the calls is what the same calls take on any backend. A
 * stage whose loop allocates the same on every iteration may stop after the first where be_measuring
 * (the peak is what counts), and a decoder stops once its tensors exist (it would read back zeros).
 * Lives on the caller's stack: nothing to fail, be_measure_fini frees nothing but the lock. */
struct be_measure {
    struct be_device dev;
    struct backend be;
    uint64_t next;           /* the next block's address                                           */
};
void be_measure_init(struct be_measure *m);
void be_measure_fini(struct be_measure *m);
static inline bool be_measuring(const struct backend *b) { return b->measuring; }

/* Validates the arguments, then runs the op on the backend (a measuring one: neither). Errors land in
 * b->err. */
vkasr_status be_run(struct backend *b, enum op_id id, const void *args);

/* Typed entry points: be_linear(b, &(struct op_linear){...}), ... */
#define X(name)                                                                                        \
    static inline vkasr_status be_##name(struct backend *b, const struct op_##name *a) {               \
        return be_run(b, OP_##name, a);                                                                \
    }
VKASR_OPS(X)
#undef X

/* Validates a search's description and writes its initial state (ops.h: struct be_search) for B
 * hypotheses of frames[b] encoder frames each, packed in f in that order (NULL: one hypothesis owning
 * all of f): t = 0, S_EMIT set, so that the first search_joint commits the LSTM state that the
 * caller's start-of-sequence step wrote to h_new. */
vkasr_status be_search_init(struct backend *b, const struct be_search *s, const int64_t *frames);

/* Lists Vulkan devices (vkasr_list_devices). */
vkasr_status vk_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, struct err *e);

/* Constructors of the backends (backend.c dispatches between them). */
vkasr_status vk_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e);
vkasr_status ref_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e);
/* The CPU backend (cpu/): opt->device is what follows "cpu:" ("" = one thread per online CPU, or
 * $VKASR_THREADS); cpu_list_devices appends its entry to vkasr_list_devices. */
vkasr_status cpu_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e);
vkasr_status cpu_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, struct err *e);
/* The CUDA backend (built with -DVKASR_CUDA=ON, which defines VKASR_HAVE_CUDA): opt->device is what
 * follows "cuda:" ("" = device 0); cuda_list_devices appends CUDA devices to vkasr_list_devices. */
vkasr_status cuda_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e);
vkasr_status cuda_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, struct err *e);

#endif
