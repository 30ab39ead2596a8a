/* vk_op_eltwise.c — host side of the element-wise kernels (unary.comp). */
#include "vk_internal.h"

struct pc_unary {
    uint64_t x, y, n;
    uint32_t act;
    float alpha;
};
_Static_assert(sizeof(struct pc_unary) == 32, "mirror of unary.comp push constants");

vkasr_status vk_op_unary(struct vk_backend *b, const struct op_unary *a) {
    uint64_t n = be_numel(&a->x);
    if (n == 0)
        return VKASR_OK;
    struct pc_unary pc = {a->x.addr, a->y.addr, n, (uint32_t)a->act, a->alpha};
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd = vk_tensor_range(&a->x), wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "unary",
                            .spv = SPV_unary,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, n, wg), 1, 1},
                            .reads = &rd,
                            .nreads = 1,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}
