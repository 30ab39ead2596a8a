/* vk_op_pending.c — ops whose Vulkan kernels are not written yet (temporary; each moves to its own
 * vk_op_*.c file with its shader). */
#include "vk_internal.h"

#define PENDING(name)                                                                                  \
    vkasr_status vk_op_##name(struct vk_backend *b, const struct op_##name *a) {                       \
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op " #name ": Vulkan kernel not implemented"); \
    }
PENDING(binary)
PENDING(glu)
PENDING(pad)
PENDING(permute)
PENDING(layernorm)
PENDING(softmax)
PENDING(argmax)
PENDING(linear)
PENDING(conv2d_s2)
PENDING(dwconv2d_s2)
PENDING(dwconv1d)
PENDING(relpos_attention)
PENDING(lstm_step)
PENDING(stft_power)
PENDING(feature_norm)
