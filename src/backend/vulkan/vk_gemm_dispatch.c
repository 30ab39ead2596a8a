/* vk_gemm_dispatch.c — records one dispatch of a GEMM configuration for the linear op's two recorders
 * (vk_op_gemm.c: f32/f16 weights and the block-quantized tiles; vk_op_gemm_i8.c: the int8 path), with
 * an emulated tensor-core configuration's stand-in for shared memory taken from scratch. vk_gemm.h. */
#include "vk_gemm.h"

vkasr_status vk_gemm_dispatch(struct vk_backend *b, const struct vk_gemm_cfg *cfg, enum spv_id spv,
                              const uint32_t spec[8], struct pc_gemm *pc, uint32_t groups, const struct vk_range *rd,
                              int nrd, struct vk_range *wr, int nwr) {
    if (cfg->kind == VK_GEMM_COOPMAT_EMU || cfg->kind == VK_GEMM_I8_EMU) {
        groups = groups < GEMM_EMU_MAX_GROUPS ? groups : GEMM_EMU_MAX_GROUPS;
        uint64_t bytes = (uint64_t)groups * cfg->shared_bytes;
        TRY(be_arena_alloc(&b->base.scratch, bytes, &pc->emu_sh, &b->base.err));
        pc->emu_stride = cfg->shared_bytes;
        wr[nwr++] = (struct vk_range){pc->emu_sh, bytes};
    }
    return vk_record(b, &(struct vk_dispatch){
                            .name = cfg->prof,
                            .spv = spv,
                            .spec = spec,
                            .nspec = 8,
                            .pc = pc,
                            .pc_size = sizeof *pc,
                            .groups = {groups, 1, 1},
                            .reads = rd,
                            .nreads = (uint32_t)nrd,
                            .writes = wr,
                            .nwrites = (uint32_t)nwr,
                        });
}
