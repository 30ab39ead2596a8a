/* vk_op_scan.c — host side of the packed batch's offsets scan (scan.comp): the outputs' addresses and
 * transforms in push constants, one dispatch of a workgroup per output (grid-stride). Argument rules:
 * ops.c. */
#include "vk_internal.h"

struct pc_scan {
    uint64_t x;
    uint32_t n, nout;
    uint64_t y[SCAN_MAX_OUT];
    uint32_t div[SCAN_MAX_OUT], stride[SCAN_MAX_OUT], flags[SCAN_MAX_OUT];
    uint32_t pad;
};
_Static_assert(SCAN_MAX_OUT == 5 && sizeof(struct pc_scan) == 120, "mirror of scan.comp push constants");

vkasr_status vk_op_offsets_scan(struct vk_backend *b, const struct op_offsets_scan *a) {
    struct pc_scan pc = {.x = a->x.addr, .n = (uint32_t)a->x.ne[0], .nout = (uint32_t)a->nout};
    struct vk_range rd = vk_tensor_range(&a->x), wr[SCAN_MAX_OUT];
    for (int k = 0; k < a->nout; k++) {
        const struct op_offsets_scan_out *o = &a->out[k];
        pc.y[k] = o->y.addr;
        pc.div[k] = o->div;
        pc.stride[k] = o->stride;
        pc.flags[k] = o->halvings | (o->lead ? 1u << 8 : 0u) | (o->causal ? 1u << 9 : 0u);
        wr[k] = vk_tensor_range(&o->y);
    }
    /* A power of two: 64 invocations on a CPU driver (each barrier makes llvmpipe switch between all
     * of them), 256 elsewhere. */
    uint32_t wg = b->d->caps.cpu ? 64 : 256;
    while (wg > b->d->caps.max_wg_invocations)
        wg /= 2;
    return vk_record(b, &(struct vk_dispatch){
                            .name = "offsets_scan",
                            .spv = SPV_scan,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)a->nout, 1), 1, 1},
                            .reads = &rd,
                            .nreads = a->x.ne[0] ? 1 : 0,
                            .writes = wr,
                            .nwrites = a->nout,
                        });
}
