/* vk_op_lstm.c — host side of the LSTM step (lstm.comp; its -DSG variant on 32-wide subgroups with
 * shuffles): one launch per step of B rows, a group of invocations per hidden unit (grid-stride over
 * blocks of units) and HB rows per workgroup (grid y), computing the four gate rows and the cell update
 * of each row whose optional gate is open. Argument rules live in ops.c. */
#include "vk_internal.h"

struct pc_lstm {
    uint64_t x, h, c, w_ih, w_hh, b, h_out, c_out, gate;
    int64_t in_dim, p;
    uint32_t flags;
    uint32_t rows;
    int64_t gate_stride;
};
_Static_assert(sizeof(struct pc_lstm) == 104, "mirror of lstm.comp push constants");

/* Rows per workgroup on a GPU: each weight load serves this many hypotheses of a batch (the partial
 * sums take 16 * 256 * HB bytes of shared memory). */
#define LSTM_GPU_ROWS 8u

#define LSTM_FLAG_VEC 1u /* In, P multiples of 4 and x, h, w_ih, w_hh 16-byte aligned: vec4 loads */
#define LSTM_FLAG_VEC8 2u /* and multiples of 8: f16 weights 8 per load (lstm.comp -DW16) */
/* (quantized weights: In, P are multiples of the block, so of 8, and the kernel loads 8 at a time) */

vkasr_status vk_op_lstm_step(struct vk_backend *b, const struct op_lstm_step *a) {
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1], In = a->x.ne[a->x.nd - 1];
    if (P == 0)
        return VKASR_OK;
    if (P > (int64_t)1 << 30 || In > (int64_t)1 << 30) /* 32-bit loop counters in lstm.comp */
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op lstm_step: In %lld / P %lld above 2^30",
                       (long long)In, (long long)P);
    struct pc_lstm pc = {
        .x = a->x.addr, .h = a->h.addr, .c = a->c.addr, .w_ih = a->w_ih.addr, .w_hh = a->w_hh.addr,
        .b = a->b.addr, .h_out = a->h_out.addr, .c_out = a->c_out.addr, .gate = a->gate.addr,
        .in_dim = In, .p = P, .rows = (uint32_t)B, .gate_stride = B > 1 ? a->gate_stride : 0,
    };
    if (In % 4 == 0 && P % 4 == 0 && (a->x.addr | a->h.addr | a->w_ih.addr | a->w_hh.addr) % 16 == 0)
        pc.flags |= LSTM_FLAG_VEC;
    if (In % 8 == 0 && P % 8 == 0 && (pc.flags & LSTM_FLAG_VEC))
        pc.flags |= LSTM_FLAG_VEC8;
    /* A GPU: 32 invocations per hidden unit, 8 units per 256-wide workgroup, HB rows sharing each
     * weight load; a CPU driver: one invocation per unit, 64 per workgroup, one row (llvmpipe pays for
     * every workgroup and barrier). Figures: docs/gpu-results.md, "Decoder". The lanes per
     * unit (LPU) fix a row's sums: they depend on the device only, never on B. */
    const bool cpu = b->d->caps.cpu;
    uint32_t wg = cpu ? 64 : (b->d->caps.max_wg_invocations >= 256 ? 256 : 128), lpu = cpu ? 1 : 32;
    /* Rows per workgroup: the batch's, up to LSTM_GPU_ROWS (a single hypothesis adds up one row, not 8);
     * one or two hypotheses get 64-wide workgroups, so that P = 640 spreads over 320 of them. */
    uint32_t hb = 1;
    while (!cpu && hb < LSTM_GPU_ROWS && hb < (uint32_t)B)
        hb *= 2;
    if (!cpu && B <= 2)
        wg = 64;
    while (hb > 1 && 16u * wg * hb > b->d->caps.max_shared) /* the shared tree's partial sums */
        hb /= 2;
    /* f16 or quantized w_ih / w_hh (one type: the argument rules): the lstm.comp variant reading them */
    /* 32-wide subgroups with shuffles: the lanes' tree through shuffles (the same bits), no shared memory */
    const bool sg = !cpu && lpu == 32 && b->d->caps.subgroup_size == 32 && b->d->caps.shuffle_rel;
    enum spv_id spv = sg ? SPV_lstm_sg : SPV_lstm;
    switch (a->w_ih.type) {
    case BE_F32: break;
    case BE_F16:
        if (!b->d->caps.f16)
            return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                           "op lstm_step: f16 weights need shaderFloat16 and 16-bit storage, which this device lacks");
        spv = sg ? SPV_lstm_f16_sg : SPV_lstm_f16;
        break;
    case BE_Q8_0: spv = SPV_lstm_q8_0; break;
    case BE_Q4_K: spv = SPV_lstm_q4_k; break;
    case BE_Q5_K: spv = SPV_lstm_q5_k; break;
    case BE_Q6_K: spv = SPV_lstm_q6_k; break;
    default: return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op lstm_step: w_ih type %d", (int)a->w_ih.type);
    }
    uint32_t spec[3] = {wg, lpu, hb};
    struct vk_range rd[7] = {vk_tensor_range(&a->x),    vk_tensor_range(&a->h),    vk_tensor_range(&a->c),
                             vk_tensor_range(&a->w_ih), vk_tensor_range(&a->w_hh), vk_tensor_range(&a->b),
                             vk_tensor_range(&a->gate)};
    struct vk_range wr[2] = {vk_tensor_range(&a->h_out), vk_tensor_range(&a->c_out)};
    return vk_record(b, &(struct vk_dispatch){
                            .name = "lstm_step",
                            .spv = spv,
                            .spec = spec,
                            .nspec = 3,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)P, wg / lpu),
                                       vk_groups_dim(b->d, 1, (uint64_t)B, hb), 1},
                            .reads = rd,
                            .nreads = a->gate.addr ? 7 : 6,
                            .writes = wr,
                            .nwrites = 2,
                        });
}
