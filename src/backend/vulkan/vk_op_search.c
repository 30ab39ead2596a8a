/* vk_op_search.c — host side of the device-resident greedy search's ops (search.comp -DJOINT and
 * -DSTEP): push constants (the tensors' addresses and sizes), grids, and the byte ranges each dispatch
 * reads and writes (barriers come from them). Argument rules: ops.c. */
#include "vk_internal.h"

struct pc_joint {
    uint64_t f, q, z, h_old, h_new, state;
    uint32_t P, W, B, Tf, L;
    uint32_t unused;
};
_Static_assert(sizeof(struct pc_joint) == 72, "mirror of search.comp (JOINT) push constants");

struct pc_step {
    uint64_t y, state, tokens, durations, embed, x0, part, live;
    uint32_t B, W;
    int32_t V, J, ND, max_symbols, capacity, P;
    uint32_t G, unused;
};
_Static_assert(sizeof(struct pc_step) == 104, "mirror of search.comp (STEP) push constants");

/* Workgroups per hypothesis for the step (search.comp: chunks of the token columns, the last to arrive
 * merging them; op_search_step_chunks, with 64 SMs where the count is unknown). A CPU driver takes one
 * (unless the GPU row shapes are asked for: a test hook). */
static uint32_t step_chunks(const struct vk_caps *c, int64_t B, int64_t V) {
    return c->gpu_rows ? (uint32_t)op_search_step_chunks(c->sm_count ? c->sm_count : 64, B, V) : 1;
}

vkasr_status vk_op_search_joint(struct vk_backend *b, const struct op_search_joint *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0], T = s->f.ne[0], P = s->f.ne[1], L = s->h_old.ne[0];
    const be_tensor z = be_tensor_rows(&s->z, 0, B * a->window);
    struct pc_joint pc = {
        .f = s->f.addr, .q = s->q.addr, .z = z.addr, .h_old = s->h_old.addr, .h_new = s->h_new.addr,
        .state = s->state.addr, .P = (uint32_t)P, .W = (uint32_t)a->window, .B = (uint32_t)B, .Tf = (uint32_t)T,
        .L = (uint32_t)L,
    };
    uint32_t wg = vk_wg_size(b->d);
    struct vk_range rd[4] = {vk_tensor_range(&s->state), vk_tensor_range(&s->f), vk_tensor_range(&s->q),
                             vk_tensor_range(&s->h_new)};
    struct vk_range wr[2] = {vk_tensor_range(&z), vk_tensor_range(&s->h_old)};
    const int64_t items = (a->window > L ? a->window : L) * P; /* z rows, and the commit's [L, P] */
    const uint32_t gx = vk_groups_x(b->d, (uint64_t)items, wg), gy = vk_groups_dim(b->d, 1, (uint64_t)B, 1);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "search_joint",
                            .spv = SPV_search_joint,
                            .spec = &wg,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {gx, gy, 1},
                            .reads = rd,
                            .nreads = 4,
                            .writes = wr,
                            .nwrites = 2,
                        });
}

vkasr_status vk_op_search_step(struct vk_backend *b, const struct op_search_step *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0], V = s->embed.ne[0] - 1, P = s->f.ne[1];
    const uint32_t G = step_chunks(&b->d->caps, B, V);
    /* A power of two (the argmax trees halve it) of at least W: on a GPU as wide as allowed, up to 1024
     * with one workgroup per hypothesis (docs/gpu-results.md, "Decoder"), 256 with several. On a
     * CPU driver fewer invocations: every barrier makes llvmpipe switch between all of them. The argmax
     * (first index of the largest value, NaN never winning) does not depend on the width. */
    uint32_t cap = b->d->caps.cpu ? 64 : G > 1 ? 256 : 1024, wg = 1;
    while (wg * 2 <= cap && wg * 2 <= b->d->caps.max_wg_invocations)
        wg *= 2;
    if (wg < (uint32_t)a->window)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op search_step: window %d exceeds the workgroup (%u)",
                       a->window, wg);
    const be_tensor y = be_tensor_rows(&s->y, 0, B * a->window);
    struct pc_step pc = {
        .y = y.addr, .state = s->state.addr, .tokens = s->tokens.addr, .durations = s->durations.addr,
        .embed = s->embed.addr, .x0 = s->x0.addr, .B = (uint32_t)B, .W = (uint32_t)a->window, .V = (int32_t)V,
        .J = (int32_t)s->y.ne[1], .ND = s->durations.addr ? (int32_t)s->durations.ne[0] : 0,
        .max_symbols = s->max_symbols, .capacity = (int32_t)s->tokens.ne[1], .P = (int32_t)P, .G = G,
        .live = s->live.addr,
    };
    struct vk_range rd[4] = {vk_tensor_range(&s->state), vk_tensor_range(&y), vk_tensor_range(&s->embed),
                             vk_tensor_range(&s->durations)};
    struct vk_range wr[5] = {vk_tensor_range(&s->state), vk_tensor_range(&s->tokens), vk_tensor_range(&s->x0)};
    int nwr = 3;
    if (s->live.addr)
        wr[nwr++] = vk_tensor_range(&s->live);
    /* The chunks' winners: scratch of this dispatch alone (written and read by its workgroups). */
    const uint64_t mark = be_mark(&b->base);
    vkasr_status st = VKASR_OK;
    if (G > 1) {
        const uint64_t bytes = (uint64_t)B * (uint64_t)a->window * G * 16u;
        st = be_arena_alloc(&b->base.scratch, bytes, &pc.part, &b->base.err);
        wr[nwr++] = (struct vk_range){pc.part, bytes};
    }
    if (st == VKASR_OK)
        st = vk_record(b, &(struct vk_dispatch){
                              .name = "search_step",
                              .spv = SPV_search_step,
                              .spec = &wg,
                              .nspec = 1,
                              .pc = &pc,
                              .pc_size = sizeof pc,
                              .groups = {vk_groups_x(b->d, G, 1), vk_groups_dim(b->d, 1, (uint64_t)B, 1), 1},
                              .reads = rd,
                              .nreads = s->durations.addr ? 4 : 3,
                              .writes = wr,
                              .nwrites = nwr,
                          });
    be_release(&b->base, mark);
    return st;
}
