/* vk_op_pending.c — ops whose Vulkan kernels are not written yet (temporary; each moves to its own
 * vk_op_*.c file with its shader). */
#include "vk_internal.h"

#define PENDING(name)                                                                                  \
    vkasr_status vk_op_##name(struct vk_backend *b, const struct op_##name *a) {                       \
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op " #name ": Vulkan kernel not implemented"); \
    }
