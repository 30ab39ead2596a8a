/* vk_op_gemm.c — host side of the linear op (ops.h): plans the product (vk_gemm_choose) and records one
 * dispatch of the chosen kernel, or for a split of K the tensor-core kernel's raw slices into scratch
 * and gemm_reduce.comp adding them and applying the epilogue (the int8 path: vk_op_gemm_i8.c).
 * Selection contract: vk_gemm.h. */
#include <stdio.h>
#include <string.h>

#include "vk_gemm.h"


static uint64_t tiles(int64_t M, int64_t N, uint32_t bm, uint32_t bn) {
    return (uint64_t)((M + bm - 1) / bm) * (uint64_t)((N + bn - 1) / bn);
}

static bool aligned16(const be_tensor *t) { return t->addr % 16 == 0; }

/* The split-K pass: sums the slices of ws [splits, M, N] in order and applies the op's epilogue. */
static vkasr_status record_reduce(struct vk_backend *b, const struct op_linear *a, uint64_t ws, uint32_t splits,
                                  uint32_t types) {
    int64_t M = a->x.ne[0], N = a->w.ne[0], ny = a->act == ACT_GLU ? N / 2 : N;
    struct pc_gemm pc = {
        .x = ws, .bias = a->bias.addr, .res = a->res.addr, .y = a->y.addr, .M = (uint32_t)M, .N = (uint32_t)N,
        .act = (uint32_t)a->act, .alpha = a->alpha, .splits = splits,
    };
    uint32_t wg = vk_wg_size(b->d);
    uint32_t spec[8] = {wg, 0, 0, 0, 0, 0, 0, types};
    struct vk_range rd[3];
    int nrd = 0;
    rd[nrd++] = (struct vk_range){ws, (uint64_t)splits * (uint64_t)M * (uint64_t)N * 4};
    if (a->bias.addr)
        rd[nrd++] = vk_tensor_range(&a->bias);
    if (a->res.addr)
        rd[nrd++] = vk_tensor_range(&a->res);
    struct vk_range wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "linear_splitk_reduce",
                            .spv = SPV_gemm_reduce,
                            .spec = spec,
                            .nspec = 8,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)M * (uint64_t)ny, wg), 1, 1},
                            .reads = rd,
                            .nreads = nrd,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}

vkasr_status vk_gemm_record(struct vk_backend *b, const struct op_linear *a, const struct vk_gemm_plan *plan) {
    struct err *e = &b->base.err;
    const struct vk_caps *caps = &b->d->caps;
    const struct vk_gemm_cfg *cfg = plan->cfg;
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    CHECK_OR_RETURN(e, cfg != NULL && plan->splits >= 1);
    if (M == 0 || N == 0)
        return VKASR_OK; /* nothing to write */
    const bool cm = cfg->kind == VK_GEMM_COOPMAT || cfg->kind == VK_GEMM_COOPMAT_EMU;
    if (cfg->wtype != a->w.type)
        return err_set(e, VKASR_ERR_INVALID_ARG, "linear: kernel config %s takes %s weights, w is %s", cfg->name,
                       be_dtype_name(cfg->wtype), be_dtype_name(a->w.type));
    if (!vk_gemm_cfg_usable(cfg, caps))
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "linear: kernel config %s cannot run on this device (needs %u invocations, %u bytes of "
                       "shared memory%s%s)",
                       cfg->name, cfg->wg, cfg->kind == VK_GEMM_COOPMAT_EMU ? 0 : cfg->shared_bytes,
                       cfg->wtype == BE_F16 || cm ? ", f16" : "",
                       cfg->kind == VK_GEMM_COOPMAT ? ", NV cooperative matrices, subgroup size 32" : "");
    if ((a->x.type == BE_F16 || a->y.type == BE_F16) && !caps->f16)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "linear: f16 %s needs shaderFloat16 and 16-bit storage, which this device lacks",
                       a->x.type == BE_F16 ? "x" : "y");
    if (plan->splits > 1 && !cm)
        return err_set(e, VKASR_ERR_INVALID_ARG, "linear: kernel config %s cannot split K (tensor cores only)",
                       cfg->name);
    /* GLU pairs a value column with its gate inside one invocation (scalar and direct kernels: an even
     * number of columns each) or one workgroup (gemv: an even number of one-column groups, or groups
     * of an even number of columns). */
    if (a->act == ACT_GLU && (((cfg->kind == VK_GEMM_SCALAR || cfg->kind == VK_GEMM_DIRECT) && cfg->tn % 2) ||
                              (cfg->kind == VK_GEMM_GEMV && (cfg->bn % 2 || (cfg->tn > 1 && cfg->tn % 2)))))
        return err_set(e, VKASR_ERR_INTERNAL, "linear: kernel config %s cannot pair GLU's columns", cfg->name);
    /* Slices of whole K steps; fewer than asked when K is short. */
    uint32_t splits = plan->splits, k_slice = (uint32_t)K;
    if (splits > 1) {
        uint64_t steps = ((uint64_t)K + cfg->bk - 1) / cfg->bk, per = (steps + splits - 1) / splits;
        k_slice = (uint32_t)(per * cfg->bk);
        splits = per ? (uint32_t)((steps + per - 1) / per) : 1;
        if (splits < 2) {
            splits = 1;
            k_slice = (uint32_t)K;
        }
    }
    /* The kernels index tiles and rows in 32 bits (element offsets are 64-bit). */
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || tiles(M, N, cfg->bm, cfg->bn) * splits > UINT32_MAX)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "linear: shape %lldx%lldx%lld exceeds the kernel's 32-bit tile indexing",
                       (long long)M, (long long)N, (long long)K);

    uint32_t flags = 0, types = 0;
    if (K % 8 == 0 && aligned16(&a->x) && aligned16(&a->w))
        flags |= GEMM_FLAG_VEC;
    if (N % 4 == 0 && aligned16(&a->y) && (!a->res.addr || aligned16(&a->res)) && (!a->bias.addr || aligned16(&a->bias)))
        flags |= GEMM_FLAG_YVEC;
    types |= a->x.type == BE_F16 ? TYPE_X16 : 0;
    types |= a->w.type == BE_F16 ? TYPE_W16 : 0;
    types |= a->y.type == BE_F16 ? TYPE_Y16 : 0;
    if (cfg->kind == VK_GEMM_I8 || cfg->kind == VK_GEMM_I8_EMU) {
        if (splits > 1 || K % 32 != 0)
            return err_set(e, VKASR_ERR_INVALID_ARG, "linear: kernel config %s needs K %% 32 == 0 (K = %lld) and no K split",
                           cfg->name, (long long)K);
        return vk_gemm_record_i8(b, a, cfg, flags, types);
    }
    struct pc_gemm pc = {
        .x = a->x.addr, .w = a->w.addr, .bias = a->bias.addr, .res = a->res.addr, .y = a->y.addr,
        .M = (uint32_t)M, .N = (uint32_t)N, .K = (uint32_t)K, .act = (uint32_t)a->act, .alpha = a->alpha,
        .flags = flags, .k_slice = k_slice, .splits = splits,
    };
    uint32_t spec[8] = {cfg->wg, cfg->bm, cfg->bn, cfg->bk, cfg->tm, cfg->tn, 0, types};
    uint32_t groups = vk_groups_x(b->d, tiles(M, N, cfg->bm, cfg->bn) * splits, 1);

    /* Scratch for this call only (the workspace of a split, the emulated kernel's shared memory):
     * released after recording; the recorded ranges order any later reuse of the bytes. */
    uint64_t mark = be_mark(&b->base), ws = 0;
    vkasr_status st = VKASR_OK;
    struct vk_range rd[4], wr[2];
    int nrd = 0, nwr = 0;
    rd[nrd++] = vk_tensor_range(&a->x);
    rd[nrd++] = vk_tensor_range(&a->w);
    if (splits > 1) { /* raw slices into the workspace; bias, res and y are the reduction's */
        uint64_t bytes = (uint64_t)splits * (uint64_t)M * (uint64_t)N * 4;
        st = be_arena_alloc(&b->base.scratch, bytes, &ws, e);
        pc.y = ws;
        pc.bias = pc.res = 0;
        wr[nwr++] = (struct vk_range){ws, bytes};
    } else {
        if (a->bias.addr)
            rd[nrd++] = vk_tensor_range(&a->bias);
        if (a->res.addr)
            rd[nrd++] = vk_tensor_range(&a->res);
        wr[nwr++] = vk_tensor_range(&a->y);
    }
    if (st == VKASR_OK)
        st = vk_gemm_dispatch(b, cfg, types ? cfg->spv_f16io : cfg->spv, spec, &pc, groups, rd, nrd, wr, nwr);
    if (st == VKASR_OK && splits > 1)
        st = record_reduce(b, a, ws, splits, types);
    be_release(&b->base, mark);
    return st;
}

vkasr_status vk_op_linear(struct vk_backend *b, const struct op_linear *a) {
    int64_t M = a->x.ne[0], K = a->x.ne[1], N = a->w.ne[0];
    if (M == 0 || N == 0)
        return VKASR_OK;
    struct vk_gemm_plan plan = vk_gemm_choose(&b->d->caps, M, N, K, a->w.type, a->matvec);
    if (!plan.cfg)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "linear: no GEMM kernel for %s weights on this device%s",
                       be_dtype_name(a->w.type),
                       a->w.type == BE_F16 && !b->d->caps.f16 ? " (f16 weights need shaderFloat16 and 16-bit storage)"
                                                               : "");
    return vk_gemm_record(b, a, &plan);
}
