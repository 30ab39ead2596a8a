/* vk_op_lstm.c — host side of the LSTM step of B rows: the four gate rows and the cell update of each row
 * whose optional gate is open. lstm.comp: a group of invocations per hidden unit (grid-stride over
 * blocks of units) and HB rows per workgroup (grid y), one launch. With op_lstm_step.tensor_cores, f16
 * weights on a device with NV cooperative matrices take the tensor-core kernel instead
 * (gemm_coopmat.comp -DLSTM_CELL: 16 rows x 16 units x 4 gates per workgroup, K split by In and P
 * only, then lstm.comp -DCELL adding the slices): H100, 256 hypotheses, ~3x faster; one hypothesis,
 * slower (two dependent launches). VKASR_LSTM_KERNEL=emu runs its emulated twin where the test lab is
 * registered (lavapipe tests). Argument rules live in ops.c. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_lab.h"

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

/* Mirror of the PC block of gemm_coopmat.comp -DLSTM_CELL. */
struct pc_lstm_tc {
    uint64_t x, h, w_ih, w_hh, b, c, h_out, c_out, gate, emu_sh, ws;
    uint32_t M, in_dim, p, flags, gate_stride, emu_stride, k_slice, splits;
};
_Static_assert(sizeof(struct pc_lstm_tc) == 120, "mirror of gemm_coopmat.comp's LSTM push constants");
/* Mirror of lstm.comp -DCELL's push constants. */
struct pc_lstm_cell {
    uint64_t ws, b, c, h_out, c_out, gate;
    uint32_t M, p, splits, gate_stride;
};
_Static_assert(sizeof(struct pc_lstm_cell) == 64, "mirror of lstm.comp -DCELL's push constants");
/* The tensor-core kernel's tile (shaders.cmake: lstm_cm): 16 rows, 4 x 16 gate columns, K steps of 128
 * halves in two stages: (16 + 64) rows of 17 uvec4 per stage. Its emulated twin runs on at most
 * LSTM_EMU_GROUPS workgroups, each with this many bytes of device memory for shared memory. */
#define LSTM_TC_SHARED (2u * (16u + 64u) * 17u * 16u)
#define LSTM_TC_WG 128u
#define LSTM_EMU_GROUPS 64u

#define LSTM_FLAG_VEC 1u /* In, P multiples of 4 and x, h, w_ih, w_hh 16-byte aligned: vec4 loads */
/* (quantized weights: In, P are multiples of the block, so of 8, and the kernel loads 8 at a time) */

/* The products (and, unsplit, the cell update) of the tensor-core step: gemm_coopmat.comp -DLSTM_CELL. */
static vkasr_status lstm_tc_products(struct vk_backend *b, const struct op_lstm_step *a, struct pc_lstm_tc *pc,
                                     uint64_t tiles, bool emu) {
    uint32_t spec[1] = {LSTM_TC_WG};
    struct vk_range rd[7] = {vk_tensor_range(&a->x),    vk_tensor_range(&a->h),    vk_tensor_range(&a->c),
                             vk_tensor_range(&a->w_ih), vk_tensor_range(&a->w_hh), vk_tensor_range(&a->b),
                             vk_tensor_range(&a->gate)};
    struct vk_range wr[3] = {vk_tensor_range(&a->h_out), vk_tensor_range(&a->c_out)};
    if (pc->splits > 1) /* raw sums into the workspace; the cell pass writes the outputs */
        wr[0] = (struct vk_range){pc->ws, (uint64_t)pc->splits * pc->M * (uint64_t)(4 * (uint64_t)pc->p) * 4};
    struct vk_dispatch dp = {
        .name = "lstm_step_tc",
        .spv = SPV_lstm_cm,
        .spec = spec,
        .nspec = 1,
        .pc = pc,
        .pc_size = sizeof *pc,
        .groups = {vk_groups_x(b->d, tiles, 1), 1, 1},
        .reads = rd,
        .nreads = a->gate.addr ? 7 : 6,
        .writes = wr,
        .nwrites = pc->splits > 1 ? 1 : 2,
    };
    if (!emu)
        return vk_record(b, &dp);
    /* the stand-in shared memory of each workgroup, for this call only (the recorded ranges order any
     * later reuse of the bytes) */
    dp.spv = (enum spv_id)vk_lab_get()->lstm_emu;
    dp.groups[0] = dp.groups[0] < LSTM_EMU_GROUPS ? dp.groups[0] : LSTM_EMU_GROUPS;
    const uint64_t mark = be_mark(&b->base), bytes = (uint64_t)dp.groups[0] * LSTM_TC_SHARED;
    vkasr_status st = be_arena_alloc(&b->base.scratch, bytes, &pc->emu_sh, &b->base.err);
    pc->emu_stride = LSTM_TC_SHARED;
    wr[dp.nwrites++] = (struct vk_range){pc->emu_sh, bytes};
    if (st == VKASR_OK)
        st = vk_record(b, &dp);
    be_release(&b->base, mark);
    return st;
}

/* The cell pass of a split step: the slices of ws added in order, the bias, the cell update. */
static vkasr_status lstm_cell(struct vk_backend *b, const struct op_lstm_step *a, int64_t B, int64_t P, uint64_t ws,
                              uint32_t splits) {
    struct pc_lstm_cell pc = {.ws = ws, .b = a->b.addr, .c = a->c.addr, .h_out = a->h_out.addr,
                              .c_out = a->c_out.addr, .gate = a->gate.addr, .M = (uint32_t)B, .p = (uint32_t)P,
                              .splits = splits, .gate_stride = B > 1 ? (uint32_t)a->gate_stride : 0};
    const uint32_t wg = vk_wg_size(b->d);
    uint32_t spec[1] = {wg};
    struct vk_range rd[4] = {{ws, (uint64_t)splits * (uint64_t)B * (uint64_t)(4 * P) * 4}, vk_tensor_range(&a->b),
                             vk_tensor_range(&a->c), vk_tensor_range(&a->gate)};
    struct vk_range wr[2] = {vk_tensor_range(&a->h_out), vk_tensor_range(&a->c_out)};
    return vk_record(b, &(struct vk_dispatch){
                            .name = "lstm_step_tc",
                            .spv = SPV_lstm_cell,
                            .spec = spec,
                            .nspec = 1,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)B * (uint64_t)P, wg), 1, 1},
                            .reads = rd,
                            .nreads = a->gate.addr ? 4 : 3,
                            .writes = wr,
                            .nwrites = 2,
                        });
}

/* The tensor-core step (real, or the lab's emulated twin when emu): one dispatch over the tiles of 16
 * rows x 16 units and, where K is split (be_lstm_step_splits: by In and P only, never by B), the cell
 * pass. */
static vkasr_status lstm_tc(struct vk_backend *b, const struct op_lstm_step *a, int64_t B, int64_t In, int64_t P,
                            bool emu) {
    struct pc_lstm_tc pc = {
        .x = a->x.addr, .h = a->h.addr, .w_ih = a->w_ih.addr, .w_hh = a->w_hh.addr, .b = a->b.addr, .c = a->c.addr,
        .h_out = a->h_out.addr, .c_out = a->c_out.addr, .gate = a->gate.addr, .M = (uint32_t)B,
        .in_dim = (uint32_t)In, .p = (uint32_t)P, .gate_stride = B > 1 ? (uint32_t)a->gate_stride : 0,
        .splits = (uint32_t)be_lstm_step_splits(In, P), .k_slice = BE_LSTM_K_SLICE,
    };
    if (P % 8 == 0 && (a->x.addr | a->h.addr | a->w_ih.addr | a->w_hh.addr) % 16 == 0)
        pc.flags |= LSTM_FLAG_VEC;
    uint64_t tiles = (uint64_t)((B + 15) / 16) * (uint64_t)((P + 15) / 16) * pc.splits;
    const uint64_t mark = be_mark(&b->base);
    vkasr_status st = VKASR_OK;
    if (pc.splits > 1) /* the op's own scratch (be_lstm_step_scratch), for this call only */
        st = be_arena_alloc(&b->base.scratch, (uint64_t)pc.splits * (uint64_t)B * (uint64_t)(4 * P) * 4, &pc.ws,
                            &b->base.err);
    if (st == VKASR_OK)
        st = lstm_tc_products(b, a, &pc, tiles, emu);
    if (st == VKASR_OK && pc.splits > 1)
        st = lstm_cell(b, a, B, P, pc.ws, pc.splits);
    be_release(&b->base, mark);
    return st;
}

vkasr_status vk_op_lstm_step(struct vk_backend *b, const struct op_lstm_step *a) {
    const int64_t B = a->h.nd == 2 ? a->h.ne[0] : 1, P = a->h.ne[a->h.nd - 1], In = a->x.ne[a->x.nd - 1];
    if (P == 0)
        return VKASR_OK;
    /* asked for, and f16 weights: the tensor-core kernel where it runs (In % 8 == 0: its K chunks of 8 lie
     * wholly in x or in h; the choice never depends on B) */
    const struct vk_caps *caps = &b->d->caps;
    const char *force = getenv("VKASR_LSTM_KERNEL");
    if (a->tensor_cores && a->w_ih.type == BE_F16 && In % 8 == 0 && B < ((int64_t)1 << 31) &&
        In + P < ((int64_t)1 << 31)) {
        const struct vk_lab *lab = vk_lab_get();
        if (force && strcmp(force, "emu") == 0 && lab && lab->lstm_emu && caps->f16)
            return lstm_tc(b, a, B, In, P, true);
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
        if (caps->coopmat_nv && caps->subgroup_size == 32 && caps->f16 && caps->max_shared >= LSTM_TC_SHARED &&
            caps->max_wg_invocations >= LSTM_TC_WG)
            return lstm_tc(b, a, B, In, P, false);
#endif
    }
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
    /* A GPU: 32 invocations per hidden unit, 8 units per 256-wide workgroup, HB rows sharing each
     * weight load; a CPU driver: one invocation per unit, 64 per workgroup, one row (llvmpipe pays for
     * every workgroup and barrier). Measurements: docs/gpu-results.md, "Kernel choices". The lanes per
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
