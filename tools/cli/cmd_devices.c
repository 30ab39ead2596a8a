/* cmd_devices.c — `vkasr devices`: every Vulkan device, the CPU backend (its threads and BLAS) and, in a
 * build with the CUDA backend, every CUDA device: limits and whether vkasr can use it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static void intro(FILE *f) {
    fprintf(f,
            "usage: vkasr devices\n\nLists the Vulkan devices, their memory and the features vkasr uses, then the CPU\n"
            "backend (--device cpu: its threads and BLAS)%s. Without a GPU the CPU backend is the default\n"
            "device; --device vulkan still picks a CPU Vulkan driver such as lavapipe, and --device ref the\n"
            "plain-C reference backend (the test oracle: slow).\n",
            vkasr_has_backend("cuda") ? ", then the CUDA devices (--device cuda:N)" : "");
}

static const struct cli_command devices_command = {CMD_DEVICES, "devices", intro, NULL, NULL, 0, NULL};

/* The CPU backend: what --device cpu names (cpu:N for N threads). */
static void print_cpu(const vkasr_device_info *d) {
    printf("device cpu: %s\n", d->name);
    printf("  backend     cpu\n");
    printf("  type        cpu\n");
    printf("  threads     %u (--threads N, cpu:N or $VKASR_THREADS; default: every online CPU)\n",
           d->max_workgroup_count[0]);
    printf("  blas        %s\n", d->driver);
    printf("  usable      yes\n");
}

/* A CUDA device: what --device cuda:N names. */
static void print_cuda(const vkasr_device_info *d) {
    printf("device cuda:%d: %s\n", d->index, d->name);
    printf("  backend     cuda\n");
    printf("  type        %s\n", d->type);
    printf("  driver      %s\n", d->driver);
    printf("  compute     capability %d.%d\n", d->compute_capability / 10, d->compute_capability % 10);
    printf("  memory      %.1f GiB\n", d->heap_size[0] / 1073741824.0);
    printf("  limits      warp %u, grid %u x %u x %u, shared memory %u KiB per block\n", d->subgroup_size,
           d->max_workgroup_count[0], d->max_workgroup_count[1], d->max_workgroup_count[2], d->max_shared_memory / 1024);
    if (d->usable)
        printf("  usable      yes%s\n", d->compute_capability >= 80 ? " (tensor cores)" : "");
    else
        printf("  usable      no: %s\n", d->missing);
}

int cmd_devices(int argc, char **argv) {
    struct cli_common c = cli_common_default();
    int rc = cli_parse(&devices_command, &c, NULL, argc, argv);
    if (rc != EXIT_OK)
        return rc == ARGS_HELP ? EXIT_OK : rc;
    vkasr_device_info info[16];
    size_t n = 0;
    vkasr_error err;
    vkasr_status st = vkasr_list_devices(info, 16, &n, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        return EXIT_DEVICE;
    }
    bool any = false;
    for (size_t i = 0; i < n && i < 16; i++) {
        const vkasr_device_info *d = &info[i];
        any |= d->usable;
        if (strcmp(d->backend, "cuda") == 0) {
            print_cuda(d);
            continue;
        }
        if (strcmp(d->backend, "cpu") == 0) {
            print_cpu(d);
            continue;
        }
        printf("device %d: %s\n", d->index, d->name);
        printf("  type        %s\n", d->type);
        printf("  driver      %s\n", d->driver);
        printf("  vulkan      %u.%u.%u\n", d->api_version >> 22, (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff);
        for (uint32_t h = 0; h < d->heap_count; h++)
            printf("  heap %u      %.1f GiB%s\n", h, d->heap_size[h] / 1073741824.0, d->heap_device_local[h] ? " (device local)" : "");
        printf("  limits      subgroup %u, workgroups %u x %u x %u, shared memory %u KiB, storage buffer range %.0f MiB, "
               "allocation %.0f MiB\n",
               d->subgroup_size, d->max_workgroup_count[0], d->max_workgroup_count[1], d->max_workgroup_count[2],
               d->max_shared_memory / 1024, d->max_storage_buffer_range / 1048576.0, d->max_allocation_size / 1048576.0);
        printf("  features    shaderInt64 %s, bufferDeviceAddress %s, float16 %s, NV cooperative matrix %s, "
               "KHR cooperative matrix %s, timestamps %s\n",
               d->shader_int64 ? "yes" : "no", d->buffer_device_address ? "yes" : "no", d->shader_float16 ? "yes" : "no",
               d->cooperative_matrix_nv ? "yes" : "no", d->cooperative_matrix_khr ? "yes" : "no",
               d->timestamps ? "yes" : "no");
        if (d->usable)
            printf("  usable      yes%s\n", d->cooperative_matrix_nv ? " (tensor cores)" : "");
        else
            printf("  usable      no: lacks %s\n", d->missing);
    }
    if (!any) {
        fprintf(stderr, "vkasr: no device meets vkasr's requirements\n");
        return EXIT_DEVICE;
    }
    return EXIT_OK;
}
