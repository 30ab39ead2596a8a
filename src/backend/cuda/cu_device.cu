/* cu_device.cu — the CUDA device: choosing it from "cuda" / "cuda:N", what the machine lacks when no
 * driver or GPU is there, the memory budget and launch caps read from the environment, the figures
 * memory plans start from (cudaMemGetInfo), the weights arena, device listing for vkasr_list_devices,
 * and the mapping of CUDA and cuBLAS errors to vkasr statuses. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_internal.h"

/* ---- errors ----------------------------------------------------------------------------------- */

static vkasr_status status_of(cudaError_t r) {
    switch (r) {
    case cudaErrorMemoryAllocation: return VKASR_ERR_DEVICE_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion: return VKASR_ERR_NO_DEVICE;
    /* sticky: the context is unusable from here on */
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout: return VKASR_ERR_DEVICE_LOST;
    default: return VKASR_ERR_INTERNAL;
    }
}

vkasr_status cu_fail(struct err *e, cudaError_t r, const char *what, const char *file, int line) {
    vkasr_status st = status_of(r);
    if (st != VKASR_ERR_DEVICE_LOST)
        cudaGetLastError(); /* a non-sticky error must not resurface at the next launch check */
    const char *base = strrchr(file, '/');
    return err_set(e, st, "CUDA: %s failed: %s (%s) at %s:%d%s", what, cudaGetErrorName(r), cudaGetErrorString(r),
                   base ? base + 1 : file, line,
                   st == VKASR_ERR_DEVICE_LOST ? "; the CUDA context is lost: free the session and the model" : "");
}

vkasr_status cublas_fail(struct err *e, cublasStatus_t r, const char *what, const char *file, int line) {
    vkasr_status st = r == CUBLAS_STATUS_ALLOC_FAILED       ? VKASR_ERR_DEVICE_MEMORY
                      : r == CUBLAS_STATUS_NOT_SUPPORTED     ? VKASR_ERR_UNSUPPORTED
                      : r == CUBLAS_STATUS_ARCH_MISMATCH     ? VKASR_ERR_UNSUPPORTED
                      : r == CUBLAS_STATUS_EXECUTION_FAILED  ? VKASR_ERR_DEVICE_LOST
                      : r == CUBLAS_STATUS_NOT_INITIALIZED   ? VKASR_ERR_NO_DEVICE
                                                             : VKASR_ERR_INTERNAL;
    const char *base = strrchr(file, '/');
    return err_set(e, st, "cuBLAS: %s failed: %s (%s) at %s:%d", what, cublasLtGetStatusName(r),
                   cublasLtGetStatusString(r), base ? base + 1 : file, line);
}

vkasr_status cu_use_device(const struct cu_device *d, struct err *e) {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == d->ordinal)
        return VKASR_OK; /* nothing to set (also while a stream of this thread is being captured) */
    CU_CHECK(e, cudaSetDevice(d->ordinal));
    return VKASR_OK;
}

/* ---- environment ------------------------------------------------------------------------------ */

/* A positive integer from the environment (as vk_device.c reads them), dflt when unset or invalid. */
static uint64_t env_u64(const struct logger *lg, const char *name, uint64_t dflt) {
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end || v == 0) {
        LOG_WARN(lg, "%s=%s ignored: not a positive integer", name, s);
        return dflt;
    }
    return v;
}

static bool env_flag(const char *name) {
    const char *s = getenv(name);
    return s && *s && strcmp(s, "0") != 0;
}

/* ---- the driver and the device number --------------------------------------------------------- */

static int runtime_version(void) {
    int v = 0;
    cudaRuntimeGetVersion(&v);
    return v;
}

/* cudaGetDeviceCount with the machine's shortcomings spelled out. */
static vkasr_status device_count(int *n, struct err *e) {
    *n = 0;
    cudaError_t r = cudaGetDeviceCount(n);
    if (r == cudaSuccess && *n > 0)
        return VKASR_OK;
    cudaGetLastError();
    int rt = runtime_version();
    if (r == cudaErrorInsufficientDriver)
        return err_set(e, VKASR_ERR_NO_DEVICE,
                       "no usable NVIDIA driver: the CUDA backend needs the NVIDIA driver (libcuda.so) supporting "
                       "CUDA %d.%d or newer (%s)",
                       rt / 1000, rt % 1000 / 10, cudaGetErrorString(r));
    if (r == cudaSuccess || r == cudaErrorNoDevice)
        return err_set(e, VKASR_ERR_NO_DEVICE, "no CUDA device found (the NVIDIA driver sees no GPU)");
    return err_set(e, VKASR_ERR_NO_DEVICE, "CUDA could not be initialised: %s (%s)", cudaGetErrorName(r),
                   cudaGetErrorString(r));
}

/* "" = device 0 (CUDA orders the fastest first), "N" = device N. */
static vkasr_status parse_ordinal(const char *s, int count, int *out, struct err *e) {
    if (!s || !*s) {
        *out = 0;
        return VKASR_OK;
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end)
        return err_set(e, VKASR_ERR_NO_DEVICE, "device 'cuda:%s': expected cuda or cuda:N with N a device number", s);
    if (v >= count)
        return err_set(e, VKASR_ERR_NO_DEVICE, "CUDA device %ld requested, but %d CUDA device%s present", v, count,
                       count == 1 ? " is" : "s are");
    *out = (int)v;
    return VKASR_OK;
}

/* Whether this build has kernels for the device (an sm_XX image, or PTX the driver can compile). */
static bool has_kernel_image(int ordinal, char *why, size_t n);

/* ---- be_device -------------------------------------------------------------------------------- */

static void cud_destroy(struct be_device *bd) {
    struct cu_device *d = (struct cu_device *)bd;
    if (cudaSetDevice(d->ordinal) == cudaSuccess) {
        cudaDeviceSynchronize();
        be_arena_destroy(&d->base.weights);
    }
    pthread_mutex_destroy(&d->alloc_lock);
    be_device_fini(&d->base);
    free(d);
}

static uint64_t cud_validation(const struct be_device *bd) { return 0; }

/* The planner's view of the device: vkasr's own blocks plus the free memory cudaMemGetInfo reports (what
 * other processes hold is not ours to plan with), within the budget (the card's memory, or
 * VKASR_MAX_DEVICE_MEMORY_MIB). cudaMalloc has no per-allocation limit below that. Ops take scratch for
 * themselves only in linear and the unfused attention, bounded by CU_OP_SCRATCH_BYTES (+ CU_QUANT_W_BYTES,
 * op_scratch_quant, for a quantized w). */
static void cud_memory(const struct be_device *bd, struct be_memory *out) {
    struct cu_device *d = (struct cu_device *)bd; /* the lock, not the device's state, changes */
    pthread_mutex_lock(&d->alloc_lock);
    const uint64_t held = d->allocated;
    pthread_mutex_unlock(&d->alloc_lock);
    memset(out, 0, sizeof *out);
    out->budget = d->budget;
    out->used = held;
    out->max_tensor = d->budget;
    out->op_scratch = CU_OP_SCRATCH_BYTES;
    out->op_scratch_quant = CU_QUANT_W_BYTES;
    if (d->tensor_cores) {
        out->op_scratch_long = CU_ATT_LONG_SCRATCH_BYTES;
        out->long_frames = d->att_gemm_min_t;
    }
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(d->ordinal) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError(); /* no figure from the driver: plan with the budget (allocation errors stay clean) */
        return;
    }
    out->source = "cudaMemGetInfo";
    if (held + free_b < out->budget)
        out->budget = held + free_b;
}

static const struct be_device_vtbl cu_device_vtbl = {
    .destroy = cud_destroy,
    .create_backend = cu_backend_create,
    .validation_messages = cud_validation,
    .memory = cud_memory,
    .pipelines = NULL, /* no pipelines: kernels are compiled into the binary */
    .int8_products = NULL, /* no int8 path */
};

extern "C" vkasr_status cuda_device_open(const struct be_device_options *opt, struct be_device **out, struct err *e) {
    *out = NULL;
    int count = 0, ordinal = 0;
    TRY(device_count(&count, e));
    TRY(parse_ordinal(opt->device, count, &ordinal, e));
    struct cu_device *d = (struct cu_device *)calloc(1, sizeof *d);
    if (!d)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    d->base.vt = &cu_device_vtbl;
    d->base.log = opt->log;
    d->ordinal = ordinal;
    pthread_mutex_init(&d->alloc_lock, NULL);
    be_device_init(&d->base, &cu_blocks);
    vkasr_status st = VKASR_OK;
    cudaError_t r = cudaSetDevice(ordinal);
    if (r == cudaSuccess)
        r = cudaGetDeviceProperties(&d->prop, ordinal);
    size_t free_b = 0, total_b = 0;
    if (r == cudaSuccess)
        r = cudaMemGetInfo(&free_b, &total_b); /* creates the context: driver problems show here */
    if (r != cudaSuccess)
        st = cu_fail(e, r, "opening the CUDA device", __FILE__, __LINE__);
    char why[256] = "";
    if (st == VKASR_OK && !has_kernel_image(ordinal, why, sizeof why))
        st = err_set(e, VKASR_ERR_NO_DEVICE, "CUDA device %d (%s, compute capability %d.%d): %s", ordinal,
                     d->prop.name, d->prop.major, d->prop.minor, why);
    if (st != VKASR_OK) {
        pthread_mutex_destroy(&d->alloc_lock);
        be_device_fini(&d->base);
        free(d);
        return st;
    }
    d->budget = total_b;
    /* VKASR_MAX_DEVICE_MEMORY_MIB: allocate at most this much (a shared GPU; tests of the out-of-memory
     * path), as the Vulkan backend does. */
    uint64_t cap = env_u64(d->base.log, "VKASR_MAX_DEVICE_MEMORY_MIB", 0);
    if (cap && (cap << 20) < d->budget) {
        d->budget = cap << 20;
        LOG_INFO(d->base.log, "device memory capped at %llu MiB (VKASR_MAX_DEVICE_MEMORY_MIB)", (unsigned long long)cap);
    }
    /* 1-D grids: a few waves of the machine (grid-stride loops do the rest), never above 65535 blocks,
     * and VKASR_MAX_GROUPS (tests force tiny grids with it) like the Vulkan backend. */
    uint64_t grid = (uint64_t)d->prop.multiProcessorCount * 16;
    if (grid > 65535)
        grid = 65535;
    uint64_t mg = env_u64(d->base.log, "VKASR_MAX_GROUPS", 0);
    if (mg && mg < grid)
        grid = mg;
    d->max_grid = (uint32_t)grid;
    d->profile = opt->profile || env_flag("VKASR_PROFILE");
    d->tensor_cores = d->prop.major >= 8;
    /* The unfused attention (cu_attention_gemm.cu) from this many valid positions on; tests force it
     * with a small VKASR_CUDA_ATT_GEMM_MIN_T. */
    d->att_gemm_min_t = (int64_t)env_u64(d->base.log, "VKASR_CUDA_ATT_GEMM_MIN_T", CU_ATT_GEMM_MIN_T);
    snprintf(d->base.info.name, sizeof d->base.info.name, "%s (CUDA device %d)", d->prop.name, ordinal);
    d->base.info.f16 = true;
    d->base.info.coopmat = d->tensor_cores;
    d->base.info.max_alloc = d->budget;
    d->base.info.heap_bytes = d->budget;
    d->base.info.max_groups = d->max_grid;
    int drv = 0;
    cudaDriverGetVersion(&drv);
    LOG_INFO(d->base.log, "CUDA device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB, driver %d.%d, runtime %d.%d",
             ordinal, d->prop.name, d->prop.major, d->prop.minor, d->prop.multiProcessorCount, total_b / 1073741824.0,
             drv / 1000, drv % 1000 / 10, runtime_version() / 1000, runtime_version() % 1000 / 10);
    *out = &d->base;
    return VKASR_OK;
}

/* ---- listing ---------------------------------------------------------------------------------- */

static __global__ void probe_kernel(int *p) {
    if (p)
        *p = 1;
}

static bool has_kernel_image(int ordinal, char *why, size_t n) {
    cudaFuncAttributes fa;
    cudaError_t r = cudaFuncGetAttributes(&fa, probe_kernel);
    if (r == cudaSuccess)
        return true;
    cudaGetLastError();
    snprintf(why, n, "this build has no kernels for it (%s; configure with -DVKASR_CUDA_ARCHITECTURES naming it)",
             cudaGetErrorString(r));
    return false;
}

extern "C" vkasr_status cuda_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, struct err *e) {
    *count = 0;
    int n = 0;
    TRY(device_count(&n, e));
    int drv = 0, rt = runtime_version();
    cudaDriverGetVersion(&drv);
    int prev = 0;
    cudaGetDevice(&prev);
    for (int i = 0; i < n && (size_t)i < capacity && out; i++) {
        vkasr_device_info *info = &out[i];
        memset(info, 0, sizeof *info);
        info->index = i;
        snprintf(info->backend, sizeof info->backend, "cuda");
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
            cudaGetLastError();
            snprintf(info->name, sizeof info->name, "CUDA device %d", i);
            snprintf(info->missing, sizeof info->missing, "its properties could not be read");
            continue;
        }
        snprintf(info->name, sizeof info->name, "%s", p.name);
        snprintf(info->type, sizeof info->type, "%s", p.integrated ? "integrated" : "discrete");
        snprintf(info->driver, sizeof info->driver, "NVIDIA CUDA driver %d.%d, runtime %d.%d", drv / 1000,
                 drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        info->vendor_id = 0x10de;
        info->compute_capability = p.major * 10 + p.minor;
        info->heap_count = 1;
        info->heap_size[0] = p.totalGlobalMem;
        info->heap_device_local[0] = true;
        info->subgroup_size = (uint32_t)p.warpSize;
        for (int k = 0; k < 3; k++)
            info->max_workgroup_count[k] = (uint32_t)p.maxGridSize[k];
        info->max_shared_memory = (uint32_t)p.sharedMemPerBlockOptin;
        info->max_storage_buffer_range = p.totalGlobalMem;
        info->max_allocation_size = p.totalGlobalMem;
        info->shader_int64 = info->buffer_device_address = info->shader_float16 = info->timestamps = true;
        char why[256] = "";
        info->usable = cudaSetDevice(i) == cudaSuccess && has_kernel_image(i, why, sizeof why);
        if (!info->usable)
            snprintf(info->missing, sizeof info->missing, "%s", why[0] ? why : "the device cannot be used");
    }
    cudaSetDevice(prev);
    cudaGetLastError();
    *count = (size_t)n;
    return VKASR_OK;
}
