/* vk_op_search.c — host side of the device-resident greedy search's ops (search.comp -DJOINT / -DSTEP,
 * lstm.comp -DSEARCH): a 16-byte push constant (the argument block's address and W or the layer),
 * the grids, and the byte ranges each dispatch reads and writes (barriers come from them). The
 * kernels take everything else from the argument block and the state. Argument rules: ops.c. */
#include "vk_internal.h"

struct pc_search {
    uint64_t args;
    uint32_t arg; /* W (joint, step) or the layer (lstm) */
    uint32_t unused;
};
_Static_assert(sizeof(struct pc_search) == 16, "mirror of search.comp and lstm.comp (SEARCH) push constants");

static vkasr_status record(struct vk_backend *b, const char *name, enum spv_id spv, const uint32_t *spec,
                           uint32_t nspec, uint64_t args, uint32_t arg, const uint32_t groups[2],
                           const struct vk_range *rd, int nrd, const struct vk_range *wr, int nwr) {
    struct pc_search pc = {args, arg, 0};
    return vk_record(b, &(struct vk_dispatch){
                            .name = name,
                            .spv = spv,
                            .spec = spec,
                            .nspec = nspec,
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
    const int64_t B = s->state.ne[0], P = s->f.ne[2];
    uint32_t wg = vk_wg_size(b->d);
    be_tensor z = be_tensor_rows(&s->z, 0, B * a->window);
    struct vk_range rd[4] = {vk_tensor_range(&s->args), vk_tensor_range(&s->state), vk_tensor_range(&s->f),
                             vk_tensor_range(&s->q)};
    struct vk_range wr = vk_tensor_range(&z);
    uint32_t groups[2] = {vk_groups_x(b->d, (uint64_t)(a->window * P), wg), vk_groups_dim(b->d, 1, (uint64_t)B, 1)};
    return record(b, "search_joint", SPV_search_joint, &wg, 1, s->args.addr, (uint32_t)a->window, groups, rd, 4, &wr, 1);
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
    struct vk_range rd[4] = {vk_tensor_range(&s->args), vk_tensor_range(&s->state), vk_tensor_range(&y),
                             vk_tensor_range(&s->durations)};
    struct vk_range wr[2] = {vk_tensor_range(&s->state), vk_tensor_range(&s->tokens)};
    uint32_t groups[2] = {vk_groups_x(b->d, (uint64_t)B, 1), 1};
    return record(b, "search_step", SPV_search_step, &wg, 1, s->args.addr, (uint32_t)a->window, groups, rd,
                  s->durations.addr ? 4 : 3, wr, 2);
}

vkasr_status vk_op_search_lstm(struct vk_backend *b, const struct op_search_lstm *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0], P = s->f.ne[2];
    const int l = a->layer;
    /* As vk_op_lstm_step: a unit per workgroup on a GPU, 32 lanes per unit on a CPU driver. */
    uint32_t wg = b->d->caps.max_wg_invocations >= 256 ? 256 : 128;
    uint32_t spec[2] = {wg, b->d->caps.cpu ? 32 : wg};
    struct vk_range rd[10] = {vk_tensor_range(&s->args), vk_tensor_range(&s->state), vk_tensor_range(&s->embed),
                              vk_tensor_range(&s->h[0]), vk_tensor_range(&s->h[1]),  vk_tensor_range(&s->c[0]),
                              vk_tensor_range(&s->c[1]), vk_tensor_range(&s->w_ih[l]), vk_tensor_range(&s->w_hh[l]),
                              vk_tensor_range(&s->b[l])};
    struct vk_range wr[5] = {vk_tensor_range(&s->h[0]), vk_tensor_range(&s->h[1]), vk_tensor_range(&s->c[0]),
                             vk_tensor_range(&s->c[1]), vk_tensor_range(&s->g)};
    uint32_t groups[2] = {vk_groups_x(b->d, (uint64_t)P, wg / spec[1]), vk_groups_dim(b->d, 1, (uint64_t)B, 1)};
    return record(b, "search_lstm", SPV_lstm_search, spec, 2, s->args.addr, (uint32_t)l, groups, rd, 10, wr, 5);
}
