/* vk_lab.c — the lab: SPIR-V variants and configurations that tests and benchmarks run but no choice
 * table picks (the emulated tensor-core twins that let lavapipe cover the coopmat code, and the kernels
 * the choice tables took before, kept for measurement), registered with the library through
 * vk_lab_register (th_lab_register). */
#include <stdlib.h>

#include "backend/vulkan/vk_attention.h"
#include "backend/vulkan/vk_gemm.h"
#include "backend/vulkan/vk_lab.h"
#include "op_harness.h"
#include "spv_lab_ids.h"

/* Each emulated tensor-core tile has its real twin's shape (vk_gemm_configs.c), so the lavapipe tests
 * of the twin check the real variant's numbers. */
static const struct vk_gemm_cfg lab_gemm[] = {
    CM("emu64x64_k32", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu64x64_k32, T_64x64_K32),
    CM("emu64x64_k64", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu64x64_k64, T_64x64_K64),
    CM("emu32x64_k64", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu32x64_k64, T_32x64_K64),
    CM("emu16x64_k128", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu16x64_k128, T_16x64_K128),
    CM("emu128x64_k32", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu128x64_k32, T_128x64_K32),
    CM("emu64x128_k32", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu64x128_k32, T_64x128_K32),
    CM("emu128x128w16_k64", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu128x128w16_k64, T_128x128W16_K64),
    CM("emu128x128w4_k32", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu128x128w4_k32, T_128x128W4_K32),
    CM("emu128x128_k64", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu128x128_k64, T_128x128_K64),
    CM("emu128x256_k32", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu128x256_k32, T_128x256_K32),
    CM("emu128x256np_k32", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu128x256np_k32, T_128x256NP_K32),
    CM("emu192x128_k64", VK_GEMM_COOPMAT_EMU, SPV_gemm_emu192x128_k64, T_192x128_K64),
    /* quantized weights (the q*_cm128x128_k32 rows of vk_gemm_configs.c) */
    CMQ("q8_0_emu128x128_k32", VK_GEMM_COOPMAT_EMU, BE_Q8_0, SPV_gemm_emu128x128_k32_q8_0, T_128x128_K32),
    CMQ("q4_k_emu128x128_k32", VK_GEMM_COOPMAT_EMU, BE_Q4_K, SPV_gemm_emu128x128_k32_q4_k, T_128x128_K32),
    CMQ("q5_k_emu128x128_k32", VK_GEMM_COOPMAT_EMU, BE_Q5_K, SPV_gemm_emu128x128_k32_q5_k, T_128x128_K32),
    CMQ("q6_k_emu128x128_k32", VK_GEMM_COOPMAT_EMU, BE_Q6_K, SPV_gemm_emu128x128_k32_q6_k, T_128x128_K32),
    /* the int8 kernel's other tiles (q8_0_i8emu128x128_k64, the library's choice's twin, is the library's) */
    I8("q8_0_i8emu64x64_k64", VK_GEMM_I8_EMU, BE_Q8_0, SPV_gemm_i8emu64x64_k64, T_I8_64x64_K64),
    I8("q8_0_i8emu128x128_k128", VK_GEMM_I8_EMU, BE_Q8_0, SPV_gemm_i8emu128x128_k128, T_I8_128x128_K128),
    I8("q8_0_i8emu128x128w16_k64", VK_GEMM_I8_EMU, BE_Q8_0, SPV_gemm_i8emu128x128w16_k64, T_I8_128x128W16_K64),
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* tiles the choice table used before: the 8-subgroup ones, then the 16-subgroup BK 32 ones */
    CM("cm256x128_k32", VK_GEMM_COOPMAT, SPV_gemm_cm256x128_k32, T_256x128_K32),
    CM("cm128x128_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x128_k32, T_128x128_K32),
    CM("cm256x128w16_k32", VK_GEMM_COOPMAT, SPV_gemm_cm256x128w16_k32, T_256x128W16_K32),
    CM("cm128x128w16_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x128w16_k32, T_128x128W16_K32),
#endif
#ifdef VKASR_HAVE_NV_INT8_COOPMAT_SHADERS
    /* int8 tiles for tuning (bench_ops -w q8_0 --cfg NAME) */
    I8("q8_0_i8cm128x128w16_k64", VK_GEMM_I8, BE_Q8_0, SPV_gemm_i8cm128x128w16_k64, T_I8_128x128W16_K64),
#endif
    /* gemv.comp's 32-row tiles, which a batch's hypotheses took before the wide groups (f*_gemvw) */
    GEMV("f32_gemv32", BE_F32, 256, 32),
    GEMV("f16_gemv32", BE_F16, 256, 32),
};

/* The emulated twins of the kernels the choice takes (vk_op_attention.c's tc_choice), with their layout
 * except for the subgroup count (lavapipe has 32 KiB of shared memory): the 2-subgroup dk-128 twin
 * checks the DKP 128 unrolling, the 4-subgroup ones the per-subgroup window offsets. */
static const struct vk_att_cfg lab_att[] = {
    ATT_COOPMAT("emu_dk32", VK_ATT_COOPMAT_EMU, SPV_attention_cm_emu_dk32, 4, 32),
    ATT_COOPMAT_SPLIT_SHUFFLE("emus2xqmb_dk128", VK_ATT_COOPMAT_EMU, SPV_attention_cms_emu2xqmb_dk128, 2, 128),
    ATT_COOPMAT_SPLIT_SHUFFLE("emus4xqm_dk64", VK_ATT_COOPMAT_EMU, SPV_attention_cms_emu4xqm_dk64, 4, 64),
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* the kernels the SPLIT ones replaced (one subgroup per 16 query rows) */
    ATT_COOPMAT("cm_dk64", VK_ATT_COOPMAT, SPV_attention_cm_dk64, 4, 64),
    ATT_COOPMAT("cm_dk128", VK_ATT_COOPMAT, SPV_attention_cm_dk128, 4, 128),
    /* the kernels the choice took before the first BD fragment was stored ahead of the products
     * (cms8xqm_dk128) and before dk 64 went to four subgroups (cms8xq_dk64), and the four-subgroup
     * dk-64 builds without the row state in registers and with the early BD store (both slower) */
    ATT_COOPMAT_SPLIT_SHUFFLE("cms8xqm_dk128", VK_ATT_COOPMAT, SPV_attention_cms8xqm_dk128, 8, 128),
    ATT_COOPMAT_SPLIT_SHUFFLE("cms8xq_dk64", VK_ATT_COOPMAT, SPV_attention_cms8xq_dk64, 8, 64),
    ATT_COOPMAT_SPLIT_SHUFFLE("cms4xq_dk64", VK_ATT_COOPMAT, SPV_attention_cms4xq_dk64, 4, 64),
    ATT_COOPMAT_SPLIT_SHUFFLE("cms4xqmb_dk64", VK_ATT_COOPMAT, SPV_attention_cms4xqmb_dk64, 4, 64),
    /* the dk-128 kernel the choice took before the row state moved to registers */
    ATT_COOPMAT_SPLIT_SHUFFLE("cms8xq_dk128", VK_ATT_COOPMAT, SPV_attention_cms8xq_dk128, 8, 128),
    /* the SPLIT kernels the choice took before the pipelined staging (cms8x_dk128) and before the row
     * shuffles, and the dk-64 one with the shuffles (the dk-64 choice before the pipelined staging,
     * cms8p_dk64, which fetched the next block during P V, left the tree once measured) */
    ATT_COOPMAT_SPLIT_SHUFFLE("cms8x_dk128", VK_ATT_COOPMAT, SPV_attention_cms8x_dk128, 8, 128),
    ATT_COOPMAT_SPLIT("cms8_dk128", VK_ATT_COOPMAT, SPV_attention_cms8_dk128, 8, 128),
    ATT_COOPMAT_SPLIT("cms8_dk64", VK_ATT_COOPMAT, SPV_attention_cms8_dk64, 8, 64),
    ATT_COOPMAT_SPLIT_SHUFFLE("cms8x_dk64", VK_ATT_COOPMAT, SPV_attention_cms8x_dk64, 8, 64),
#endif
};

#define N_OF(a) (sizeof(a) / sizeof *(a))
/* The library's tables followed by the lab's (the registered tables replace the library's). */
#define MAX_GEMM 128
#define MAX_ATT 64
static struct vk_gemm_cfg all_gemm[MAX_GEMM];
static struct vk_att_cfg all_att[MAX_ATT];
static struct vk_lab lab;

void th_lab_register(void) {
    if (vk_lab_get())
        return;
    size_t ng, na;
    const struct vk_gemm_cfg *g = vk_gemm_configs(&ng);
    const struct vk_att_cfg *a = vk_att_configs(&na);
    _Static_assert(N_OF(lab_gemm) <= MAX_GEMM && N_OF(lab_att) <= MAX_ATT, "lab tables: raise MAX_*");
    if (ng + N_OF(lab_gemm) > MAX_GEMM || na + N_OF(lab_att) > MAX_ATT)
        abort(); /* a test program's own bound: raise MAX_GEMM / MAX_ATT */
    for (size_t i = 0; i < ng; i++)
        all_gemm[i] = g[i];
    for (size_t i = 0; i < N_OF(lab_gemm); i++)
        all_gemm[ng + i] = lab_gemm[i];
    for (size_t i = 0; i < na; i++)
        all_att[i] = a[i];
    for (size_t i = 0; i < N_OF(lab_att); i++)
        all_att[na + i] = lab_att[i];
    lab = (struct vk_lab){.spv = spv_lab_table, .nspv = SPV_LAB_COUNT, .gemm = all_gemm,
                          .ngemm = ng + N_OF(lab_gemm), .att = all_att, .natt = na + N_OF(lab_att)};
    vk_lab_register(&lab);
}
