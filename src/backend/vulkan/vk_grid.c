/* vk_grid.c — launch-size planning. Pure integer functions in 64 bits so they can be unit-tested on
 * index spaces far beyond 2^32 without allocating anything. Kernels loop grid-stride, so a launch is
 * capped at the device's maxComputeWorkGroupCount (or a forced smaller cap) whatever the size. Also the
 * choice of a kernel's f32 or f16 variant by its tensors' types (vk_io_variant). */
#include <string.h>

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

/* Type bits of io.glsl's specialization constant 7 (those of linear.glsl). */
#define IO_X16 1u
#define IO_Y16 4u

vkasr_status vk_io_variant(struct vk_backend *b, const char *op, enum spv_id f32, enum spv_id f16, uint32_t wg,
                           be_dtype x, be_dtype y, struct vk_io *out) {
    memset(out, 0, sizeof *out);
    out->spec[0] = wg;
    if (x == BE_F32 && y == BE_F32) {
        out->spv = f32;
        out->nspec = 1;
        return VKASR_OK;
    }
    if (!b->d->caps.f16)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "op %s: f16 tensors need shaderFloat16 and 16-bit storage, which this device lacks", op);
    out->spv = f16;
    out->spec[7] = (x == BE_F16 ? IO_X16 : 0) | (y == BE_F16 ? IO_Y16 : 0);
    out->nspec = 8;
    return VKASR_OK;
}
