/* vk_grid.c — launch-size planning. Pure integer functions in 64 bits so they can be unit-tested on
 * index spaces far beyond 2^32 without allocating anything. Kernels loop grid-stride, so a launch is
 * capped at the device's maxComputeWorkGroupCount (or a forced smaller cap) whatever the size. */
#include "vk_internal.h"

uint32_t vk_grid_groups(uint64_t items, uint64_t per_group, uint32_t max_groups) {
    if (per_group == 0)
        per_group = 1;
    if (max_groups == 0)
        max_groups = 1;
    uint64_t want = items / per_group + (items % per_group != 0);
    if (want == 0)
        want = 1;
    return want > max_groups ? max_groups : (uint32_t)want;
}

uint64_t vk_grid_iterations(uint64_t items, uint64_t per_group, uint32_t groups) {
    if (per_group == 0)
        per_group = 1;
    if (groups == 0)
        groups = 1;
    uint64_t blocks = items / per_group + (items % per_group != 0);
    return blocks / groups + (blocks % groups != 0);
}

uint32_t vk_groups_dim(const struct vk_device *d, int dim, uint64_t items, uint64_t per_group) {
    return vk_grid_groups(items, per_group, d->caps.max_groups[dim]);
}

uint32_t vk_groups_x(const struct vk_device *d, uint64_t items, uint64_t per_group) {
    /* Beyond ~64k groups a grid-stride loop costs nothing measurable and keeps launches portable. */
    uint32_t cap = d->caps.max_groups[0] < 65535u ? d->caps.max_groups[0] : 65535u;
    return vk_grid_groups(items, per_group, cap);
}

uint32_t vk_wg_size(const struct vk_device *d) {
    return d->caps.max_wg_invocations >= 256 ? 256 : d->caps.max_wg_invocations;
}
