/* vk_lab.c — the registered lab (vk_lab.h): test-only SPIR-V and configuration tables. A leaf. */
#include "vk_lab.h"

/* Set by a test or benchmark before any device opens; read-only after (no library code writes it). */
static const struct vk_lab *registered;

void vk_lab_register(const struct vk_lab *lab) { registered = lab; }

const struct vk_lab *vk_lab_get(void) { return registered; }

const struct spv_blob *vk_spv_blob(uint32_t id) {
    if (id < SPV_COUNT)
        return &spv_table[id];
    if (registered && id - SPV_COUNT < registered->nspv)
        return &registered->spv[id - SPV_COUNT];
    return NULL;
}
