/* vk_internal.h — shared declarations of the Vulkan backend: device, memory, pipelines, command
 * recording. Op implementations (vk_op_*.c) use vk_record() and the grid helpers; nothing outside
 * backend/vulkan includes this file except tests. */
#ifndef VKASR_VK_INTERNAL_H
#define VKASR_VK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <vulkan/vulkan.h>

#include "../backend.h"
#include "spv_ids.h"
#include "vk_error.h"

/* ---- device ----------------------------------------------------------------------------------- */

/* Every validation-layer message is logged (VKASR_LOG_ERROR) starting with this prefix, and so is the
 * warning that validation was requested but cannot run: tests fail on any log line carrying it. */
#define VK_VALIDATION_LOG_PREFIX "Vulkan validation"
/* Upper bound of VKASR_SUBMIT_BATCH: the profiling query pool holds 2 * VK_RING * batch timestamps. */
#define VK_MAX_SUBMIT_BATCH 4096u

struct vk_caps {
    uint32_t api_version;
    uint32_t subgroup_size;
    uint32_t max_groups[3];          /* maxComputeWorkGroupCount, clamped by VKASR_MAX_GROUPS   */
    uint32_t max_wg_invocations;
    uint32_t max_shared;
    uint64_t max_alloc;
    uint64_t max_buffer;             /* maxBufferSize (Vulkan 1.3) or max_alloc                 */
    float timestamp_period;          /* ns per tick; 0 if timestamps unusable                   */
    bool f16;                        /* shaderFloat16 + storageBuffer16BitAccess enabled        */
    bool coopmat_nv;                 /* VK_NV_cooperative_matrix 16x16x16 f16->f32 enabled      */
    bool coopmat_int8;               /* ... and 16x16x32 s8->s32 with shaderInt8, VKASR_INT8 not 0:
                                      * q8_0 products on int8 tensor cores (vk_op_gemm_i8.c)    */
    bool int8_emu;                   /* VKASR_INT8=emu (test hook): q8_0 products take the int8
                                      * path's emulated twin                                     */
    bool int8_rows;                  /* either, VKASR_INT8_ROWS not 0: layernorms make the int8 rows
                                      * of the products they feed (backend.int8_rows)            */
    bool cpu;                        /* a CPU driver (lavapipe): barriers are costly there      */
    bool gpu_rows;                   /* rows.comp's GPU shapes (a tree per row): not a CPU driver,
                                      * or VKASR_GPU_ROW_SHAPES (a test hook)                    */
    bool shuffle_rel;                /* subgroup shuffleUp/Down in compute shaders               */
    bool shuffle;                    /* subgroup shuffle / shuffleXor in compute shaders         */
    uint32_t sm_count;               /* streaming multiprocessors (VK_NV_shader_sm_builtins), 0: unknown */
    bool predication;                /* VK_EXT_conditional_rendering enabled: predicated graphs  */
};

struct vk_block {
    VkBuffer buf;
    VkDeviceMemory mem;
    uint64_t addr;                   /* device address of byte 0                                */
    uint64_t size;
    void *map;                       /* host pointer if host-visible                            */
    uint64_t counted;                /* bytes added to vk_device.allocated (device-local blocks) */
};


/* A pipeline of the device, created on first request; by the process's creation workers
 * (vk_pipeline.c) when the device allows creations in flight, while the requester records on, so that
 * the kernels a command buffer needs compile in parallel. state and the results are guarded by
 * pipe_lock; next and queued by the workers' own lock. */
enum vk_pipeline_state { VK_PIPE_CREATING, VK_PIPE_READY, VK_PIPE_FAILED };
struct vk_pipeline_entry {
    struct vk_device *d;
    enum spv_id spv;
    uint32_t spec[8];
    uint32_t nspec;
    enum vk_pipeline_state state;
    bool queued;                     /* waiting for a worker (a waiter may take it over)        */
    bool used;                       /* a run waited for it (the warm list: vk_pcache_save_warm) */
    struct vk_pipeline_entry *next;  /* the workers' queue                                      */
    VkPipeline pipeline;
    struct err err;                  /* why creation failed (VK_PIPE_FAILED)                    */
};

/* A quantized weight's int8 form: w8 [N, K] int8 rows followed by their f32 scales [N] (sw, at w8 + N*K). */
struct vk_i8_weight {
    uint64_t w;                      /* the quantized tensor's address                           */
    int64_t n, k;
    uint64_t w8;
};

struct vk_device {
    struct be_device base;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    atomic_uint_fast64_t validation_count;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t queue_family;
    pthread_mutex_t queue_lock;      /* vkQueueSubmit needs external synchronisation            */
    struct vk_caps caps;
    uint32_t mem_device;             /* memory type for tensors                                 */
    bool device_mappable;            /* that type is HOST_VISIBLE|HOST_COHERENT (lavapipe, ReBAR)
                                        and VKASR_FORCE_STAGING is not set                      */
    uint32_t mem_staging;            /* HOST_VISIBLE|HOST_COHERENT type for staging             */
    /* A closed backend's staging block, kept for the next backend that stages (the model loader's
     * goes to the first session, whose first upload would otherwise make its own: 64 MiB of host
     * memory the driver maps and pins); under staging_lock, freed with the device. */
    struct vk_block spare_staging;
    pthread_mutex_t staging_lock;
    uint64_t heap_size;              /* size of the tensor memory type's heap (or the env cap)  */
    uint32_t heap_index;             /* that heap                                               */
    bool memory_budget;              /* VK_EXT_memory_budget enabled                            */
    PFN_vkCmdBeginConditionalRenderingEXT begin_predicated; /* caps.predication */
    PFN_vkCmdEndConditionalRenderingEXT end_predicated;
    atomic_uint_fast64_t allocated;  /* device bytes allocated by all arenas of this device     */
    VkPipelineLayout layout;         /* push constants only: tensors are addressed by BDA       */
    VkPipelineCache cache;           /* seeded from and saved to disk (vk_pipeline_cache.c)     */
    char pcache_path[4096];          /* the cache's file; "" when off                           */
    size_t pcache_loaded;            /* bytes the cache was seeded with                         */
    bool creation_feedback;          /* Vulkan 1.3: the driver reports pipeline-cache hits      */
    bool pipeline_stats;             /* VKASR_PIPELINE_STATS and VK_KHR_pipeline_executable_
                                        properties: each new pipeline's statistics are logged   */
    atomic_uint pipelines_created;   /* vkCreateComputePipelines calls that succeeded           */
    atomic_uint pipeline_cache_hits; /* ... of which the driver found in the cache              */
    atomic_uint_fast64_t pipeline_us; /* microseconds in vkCreateComputePipelines, all threads   */
    atomic_uint_fast64_t i8_products; /* linear products recorded on the int8 path (vk_op_gemm_i8.c) */
    pthread_mutex_t pipe_lock;
    pthread_cond_t pipe_done;        /* broadcast when a creation finishes                      */
    struct vk_pipeline_entry **pipes; /* stable entries: the creation workers hold them         */
    size_t npipes, cappipes;
    uint32_t pipe_threads;           /* creation workers wanted (VKASR_PIPELINE_THREADS - 1)    */
    bool profile;
    uint32_t submit_batch;           /* dispatches per command buffer before it is submitted   */
    struct err init_err;
    /* The int8 forms of quantized weights made so far (vk_op_gemm_i8.c), in the weights arena; i8_lock guards
     * the table and is held while a form is made, so every backend finds it whole. */
    char int8_shapes[256];           /* the NV coopmat int8 shapes the device lists (nv_coopmat_int8_list) */
    pthread_mutex_t i8_lock;
    struct vk_i8_weight *i8w;
    size_t ni8w, capi8w;
};

/* Fills the public device description from a physical device (also used by vkasr_list_devices). */
void vk_describe_device(VkInstance inst, VkPhysicalDevice pd, int index, vkasr_device_info *info);
/* Writes "device N (name) lacks what; ..." for every device of infos[0..n-1] that is not usable
 * (the error when none is). */
void vk_describe_unusable(const vkasr_device_info *infos, uint32_t n, char *buf, size_t size);
vkasr_status vk_instance_create(bool validation, struct vk_device *d, VkInstance *out, struct err *e);
vkasr_status vk_backend_create(struct be_device *bd, struct backend **out, struct err *e);

/* ---- memory (vk_memory.c) --------------------------------------------------------------------- */

/* staging: a host-mapped block of the staging memory type (not counted against the device heap);
 * otherwise device memory for tensors, mapped when d->device_mappable. */
vkasr_status vk_block_create(struct vk_device *d, uint64_t size, bool staging, struct vk_block *b, struct err *e);
void vk_block_destroy(struct vk_device *d, struct vk_block *b);
/* The arenas' blocks (arena.h): device-local vk_blocks, the handle a malloc'd struct vk_block. */
extern const struct be_block_ops vk_blocks;

/* ---- pipelines (vk_pipeline.c) ---------------------------------------------------------------- */

#define VK_PUSH_CONSTANT_BYTES 128
/* vk_keep_loaded.c: in AddressSanitizer builds, pins the shared objects loaded so far (an instance's
 * driver) for the life of the process; elsewhere nothing. */
void vk_keep_drivers_loaded(void);
/* The pipeline layout and the cache; pipelines themselves are created on first use. */
vkasr_status vk_pipelines_init(struct vk_device *d, struct err *e);
/* Saves the cache to disk (when pipelines were created), then destroys pipelines, cache and layout. */
void vk_pipelines_destroy(struct vk_device *d);
/* vk_pipeline_cache.c: creates d->cache, seeded from a cache file that matches this device, driver and
 * vkasr version, and writes it back atomically; problems with the file cost only the cache. */
vkasr_status vk_pcache_create(struct vk_device *d, struct err *e);
void vk_pcache_save(struct vk_device *d);
/* The warm list beside the cache: the pipelines the last device of this key used. Read when a device
 * with creation workers and a loaded cache opens (entries malloc'd, the list's path in path; 0: none),
 * written at close (when it changed). */
struct vk_warm_entry {
    enum spv_id spv;
    uint32_t nspec;
    uint32_t spec[8];
};
size_t vk_pcache_load_warm(const struct vk_device *d, struct vk_warm_entry **out, char *path, size_t size);
void vk_pcache_save_warm(struct vk_device *d);
/* Queues the warm list's pipelines for the creation workers (vk_device_open's last step). */
void vk_pipelines_prewarm(struct vk_device *d);
/* The entry of a shader and its specialization constants (ids 0..nspec-1); on first request its
 * creation starts: queued for the creation workers where d->pipe_threads > 0, else at once.
 * Thread-safe. */
vkasr_status vk_pipeline_request(struct vk_device *d, enum spv_id spv, const uint32_t *spec, uint32_t nspec,
                                 struct vk_pipeline_entry **out, struct err *e);
/* Waits until the entry's pipeline exists; its creation's error if that failed. */
vkasr_status vk_pipeline_wait(struct vk_pipeline_entry *p, VkPipeline *out, struct err *e);
/* vk_pipeline_wait that asks should_abort(ud) every few milliseconds while a worker still creates the
 * pipeline: VKASR_ABORTED then (the creation goes on; a later wait finds it). */
vkasr_status vk_pipeline_wait_abortable(struct vk_pipeline_entry *p, VkPipeline *out, bool (*should_abort)(void *),
                                        void *ud, struct err *e);
/* Both: the pipeline, created on first use. */
vkasr_status vk_pipeline_get(struct vk_device *d, enum spv_id spv, const uint32_t *spec, uint32_t nspec,
                             VkPipeline *out, struct err *e);

/* ---- command recording (vk_cmd.c) ------------------------------------------------------------- */

struct vk_range {
    uint64_t addr, bytes;
};

#define VK_RING 4
#define VK_MAX_TRACKED 64

/* A dispatch recorded into a slot but not yet into its command buffer: commands are written when the
 * slot is submitted (or before a copy), once the pipelines they bind exist, so that the pipelines
 * of one command buffer are created in parallel. */
struct vk_deferred {
    struct vk_pipeline_entry *pipe;
    const char *name;
    uint32_t groups[3];
    uint32_t pc_size;
    bool barrier;                    /* a compute barrier before the dispatch                   */
    uint32_t pc[VK_PUSH_CONSTANT_BYTES / 4];
};

struct vk_slot {
    VkCommandBuffer cb;
    VkFence fence;
    bool recording, pending;
    uint32_t n_dispatch;
    uint32_t n_deferred;             /* dispatches in `deferred`, not yet in cb                 */
    struct vk_deferred *deferred;    /* [submit_batch]                                          */
    uint32_t n_queries;              /* timestamps written into this slot's query range         */
    const char **query_names;        /* [max dispatches per slot] op name of each dispatch      */
};

struct vk_profile_entry {
    const char *name;
    uint64_t calls;
    double ms;
};

/* A recorded sequence of dispatches (vk_graph.c): its own command buffer, replayed by submitting it
 * again (simultaneous use). */
struct be_graph {
    VkCommandBuffer cb;
    bool predicated;                 /* the replays' ops are inside conditional rendering      */
    VkCommandBuffer *submit;         /* scratch array for a submission of several replays      */
    uint32_t cap_submit;
    struct vk_range ring_written[VK_MAX_TRACKED], ring_read[VK_MAX_TRACKED]; /* while recording */
    int ring_n_written, ring_n_read;
};

struct vk_backend {
    struct backend base;
    struct vk_device *d;
    VkCommandPool pool;
    struct vk_slot slots[VK_RING];
    int cur;                         /* slot being recorded                                     */
    struct vk_range written[VK_MAX_TRACKED], read[VK_MAX_TRACKED];
    int n_written, n_read;
    struct vk_block staging;         /* host-visible bounce buffer (when device memory is not mappable) */
    uint64_t staging_used;           /* bytes of its current half read by copies not waited for  */
    int staging_half;                /* the half uploads fill (vkb_upload: double-buffered)     */
    int staging_slot[2];             /* 1 + the ring slot whose submission reads a half; 0: none */
    VkQueryPool queries;
    struct vk_profile_entry *prof;
    size_t nprof, capprof;
    struct be_graph *capture;        /* graph being recorded: vk_record writes into it          */
    const struct vk_att_cfg *att_force; /* VKASR_ATTENTION_KERNEL's kernel (vk_op_attention.c) */
    bool att_force_read;             /* att_force resolved (on the first attention call)        */
};

/* One dispatch: shader + spec constants, push constants, workgroup counts, and the byte ranges the
 * kernel reads and writes (they drive barrier placement). */
struct vk_dispatch {
    const char *name;                /* op name for profiling                                   */
    enum spv_id spv;
    const uint32_t *spec;
    uint32_t nspec;
    const void *pc;
    uint32_t pc_size;
    uint32_t groups[3];
    const struct vk_range *reads;
    int nreads;
    const struct vk_range *writes;
    int nwrites;
};

vkasr_status vk_record(struct vk_backend *b, const struct vk_dispatch *dp);
vkasr_status vk_submit(struct vk_backend *b, bool wait);
/* The ring slot of the last submission, and waiting for a slot's submission (if pending). */
int vk_last_slot(const struct vk_backend *b);
vkasr_status vk_wait_slot(struct vk_backend *b, int slot);
/* Submits the recorded work followed by `n` more command buffers (graph replays) under one fence. */
vkasr_status vk_submit_with(struct vk_backend *b, const VkCommandBuffer *extra, uint32_t n);
/* Barriers around a graph's command buffer: everything before it is finished and visible when it
 * starts (to its predicate's read too, when predicated); its writes are visible to everything after
 * it, the host included. */
void vk_graph_barriers(VkCommandBuffer cb, bool at_end, bool predicated);
/* Forgets the tracked ranges (a full barrier has just ordered everything). */
void vk_track_reset(struct vk_backend *b);

/* ---- recorded sequences (vk_graph.c): the backend_vtbl graph entries --------------------------- */

vkasr_status vk_graph_begin(struct backend *bb, const be_tensor *predicate);
vkasr_status vk_graph_end(struct backend *bb, struct be_graph **out);
vkasr_status vk_graph_run(struct backend *bb, struct be_graph *g, uint32_t times);
void vk_graph_free(struct backend *bb, struct be_graph *g);
/* Waits for the oldest submissions until at most max_pending remain in flight. */
vkasr_status vk_throttle(struct vk_backend *b, int max_pending);
vkasr_status vk_cmd_init(struct vk_backend *b, struct err *e);
void vk_cmd_destroy(struct vk_backend *b);
/* Records a buffer copy (staging), with full barriers around it. */
vkasr_status vk_record_copy(struct vk_backend *b, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off,
                            uint64_t bytes);

/* ---- grid planning (vk_grid.c, pure functions: unit-tested on shapes beyond 2^32) ------------- */

/* Workgroups for `items` units of work at `per_group` units per workgroup, capped at max_groups
 * (kernels loop with a grid stride). Returns at least 1. */
uint32_t vk_grid_groups(uint64_t items, uint64_t per_group, uint32_t max_groups);
/* Iterations of a grid-stride loop a workgroup performs (the most any one does). */
uint64_t vk_grid_iterations(uint64_t items, uint64_t per_group, uint32_t groups);
/* Convenience: 1-D grid for a device (dimension x). */
uint32_t vk_groups_x(const struct vk_device *d, uint64_t items, uint64_t per_group);
uint32_t vk_groups_dim(const struct vk_device *d, int dim, uint64_t items, uint64_t per_group);

/* Default workgroup size for 1-D kernels on this device. */
uint32_t vk_wg_size(const struct vk_device *d);

/* The kernel variant for an op's input x and output y (shaders/common/io.glsl): the f32 module when
 * both are f32 (spec = {wg}), else its *_h twin with the types in specialization constant 7. */
struct vk_io {
    enum spv_id spv;
    uint32_t spec[8];
    uint32_t nspec;
};
/* Fills *out; an error naming the op when an f16 tensor meets a device without f16 support. */
vkasr_status vk_io_variant(struct vk_backend *b, const char *op, enum spv_id f32, enum spv_id f16, uint32_t wg,
                           be_dtype x, be_dtype y, struct vk_io *out);

/* ---- op implementations (vk_op_*.c) ----------------------------------------------------------- */

#define X(name) vkasr_status vk_op_##name(struct vk_backend *b, const struct op_##name *a);
VKASR_OPS(X)
#undef X

/* Range helpers for vk_dispatch read/write lists. */
static inline struct vk_range vk_tensor_range(const be_tensor *t) {
    return (struct vk_range){t->addr, be_nbytes(t)};
}

#endif
