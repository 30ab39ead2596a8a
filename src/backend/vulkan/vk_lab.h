/* vk_lab.h — the hook through which tests and benchmarks add the lab: SPIR-V variants the library does
 * not embed (emulated tensor-core twins, kernels no choice table picks; tests/vk_lab.c) and the
 * configuration tables that name them. Without a registration the library sees only its own. */
#ifndef VKASR_VK_LAB_H
#define VKASR_VK_LAB_H

#include <stddef.h>
#include <stdint.h>

#include "spv_ids.h"

struct vk_gemm_cfg;
struct vk_att_cfg;

struct vk_lab {
    const struct spv_blob *spv;     /* blobs of ids SPV_COUNT .. SPV_COUNT + nspv - 1     */
    uint32_t nspv;
    const struct vk_gemm_cfg *gemm; /* every linear configuration, the library's included */
    size_t ngemm;
    const struct vk_att_cfg *att;   /* every attention configuration, likewise            */
    size_t natt;
};

/* Registers lab (static storage; NULL unregisters). Call before opening any device: not thread-safe. */
void vk_lab_register(const struct vk_lab *lab);
/* The registered lab, or NULL. */
const struct vk_lab *vk_lab_get(void);
/* The SPIR-V of variant id: the library's table or the registered lab's; NULL if neither has it. */
const struct spv_blob *vk_spv_blob(uint32_t id);

#endif
