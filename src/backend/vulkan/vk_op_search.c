/* vk_op_search.c — host side of the device-resident greedy search's ops (search.comp -DJOINT and
 * -DSTEP): a 16-byte push constant (the argument block's address and W), the grids, and the byte
 * ranges each dispatch reads and writes (barriers come from them). The kernels take everything else
 * from the argument block and the state. Argument rules: ops.c. */
#include "vk_internal.h"

struct pc_search {
    uint64_t args;
    uint32_t window;
    uint32_t unused;
};
_Static_assert(sizeof(struct pc_search) == 16, "mirror of search.comp push constants");

static vkasr_status record(struct vk_backend *b, const char *name, enum spv_id spv, uint32_t wg, uint64_t args,
                           uint32_t window, const uint32_t groups[2], const struct vk_range *rd, int nrd,
                           const struct vk_range *wr, int nwr) {
    struct pc_search pc = {args, window, 0};
    return vk_record(b, &(struct vk_dispatch){
                            .name = name,
                            .spv = spv,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {groups[0], groups[1], 1},
                            .reads = rd,
                            .nreads = nrd,
                            .writes = wr,
                            .nwrites = nwr,
                        });
}

vkasr_status vk_op_search_joint(struct vk_backend *b, const struct op_search_joint *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0], P = s->f.ne[2], L = s->h_old.ne[0];
    uint32_t wg = vk_wg_size(b->d);
    be_tensor z = be_tensor_rows(&s->z, 0, B * a->window);
    struct vk_range rd[5] = {vk_tensor_range(&s->args), vk_tensor_range(&s->state), vk_tensor_range(&s->f),
                             vk_tensor_range(&s->q), vk_tensor_range(&s->h_new)};
    struct vk_range wr[2] = {vk_tensor_range(&z), vk_tensor_range(&s->h_old)};
    const int64_t items = (a->window > L ? a->window : L) * P; /* z rows, and the commit's [L, P] */
    uint32_t groups[2] = {vk_groups_x(b->d, (uint64_t)items, wg), vk_groups_dim(b->d, 1, (uint64_t)B, 1)};
    return record(b, "search_joint", SPV_search_joint, wg, s->args.addr, (uint32_t)a->window, groups, rd, 5, wr, 2);
}

vkasr_status vk_op_search_step(struct vk_backend *b, const struct op_search_step *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0];
    /* One workgroup per hypothesis, a power of two (the argmax trees halve it) of at least W. On a CPU
     * driver fewer invocations: every barrier makes llvmpipe switch between all of them. */
    uint32_t cap = b->d->caps.cpu ? 64 : 256, wg = 1;
    while (wg * 2 <= cap && wg * 2 <= b->d->caps.max_wg_invocations)
        wg *= 2;
    if (wg < (uint32_t)a->window)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op search_step: window %d exceeds the workgroup (%u)",
                       a->window, wg);
    be_tensor y = be_tensor_rows(&s->y, 0, B * a->window);
    struct vk_range rd[5] = {vk_tensor_range(&s->args), vk_tensor_range(&s->state), vk_tensor_range(&y),
                             vk_tensor_range(&s->embed), vk_tensor_range(&s->durations)};
    struct vk_range wr[3] = {vk_tensor_range(&s->state), vk_tensor_range(&s->tokens), vk_tensor_range(&s->x0)};
    uint32_t groups[2] = {vk_groups_x(b->d, (uint64_t)B, 1), 1};
    return record(b, "search_step", SPV_search_step, wg, s->args.addr, (uint32_t)a->window, groups, rd,
                  s->durations.addr ? 5 : 4, wr, 3);
}
