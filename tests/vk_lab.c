/* vk_lab.c — the lab: SPIR-V variants and configurations that tests and benchmarks run but no choice
 * table picks (the emulated tensor-core twins that let lavapipe cover the coopmat code, and the flash
 * attention kernel), registered with the library through vk_lab_register (th_lab_register). */
#include <stdlib.h>

#include "backend/vulkan/vk_attention.h"
#include "backend/vulkan/vk_gemm.h"
#include "backend/vulkan/vk_lab.h"
#include "op_harness.h"
#include "spv_lab_ids.h"

/* Flash kernel (attention_flash.comp): its shared layout in uvec4 units, mirrored — k and v blocks,
 * the position ring, a scratch per warp (BD' fragments: the whole window or one fragment; the staged
 * weights when P_REG is 0) — plus 16 uints per warp of row statistics. The emulation keeps the uvec4
 * part, and its A fragments behind it, in device memory (emu_stride per workgroup) and only the row
 * statistics and a flag in shared memory. */
#define FL_DKS(dkp) ((dkp) / 8 + 1)
#define FL_BDP(bk, whole) (((whole) ? 16 * ((bk) / 16 + 1) : 16) / 4 + 1)
#define FL_WSW(bk, whole, preg) (16 * ((preg) || FL_BDP(bk, whole) >= (bk) / 8 + 1 ? FL_BDP(bk, whole) : (bk) / 8 + 1))
#define FL_UVEC4(nw, bk, dkp, whole, preg) ((3 * (bk) + 16 * (nw)) * FL_DKS(dkp) + (nw) * FL_WSW(bk, whole, preg))
/* the emulation's A-fragment slots behind that layout: per warp, q+u, q+v and the weights */
#define FL_EMU_A(nw, bk, dkp) ((nw) * (2 * ((dkp) / 16) + (bk) / 16) * 32)
#define FLASH(nm, kd, sp, nw, bkk, dkp, whole, preg)                                                   \
    {.name = nm, .prof = "relpos_attention_flash", .kind = kd, .spv = sp, .spv_h = sp, .wg = 32u * (nw),  \
     .bq = 16u * (nw), .bk = bkk, .max_dk = dkp,                                                        \
     .shared_bytes = (kd) == VK_ATT_FLASH ? 16u * FL_UVEC4(nw, bkk, dkp, whole, preg) + 64u * (nw)         \
                                          : 64u * (nw) + 4u,                                            \
     .emu_stride = (kd) == VK_ATT_FLASH_EMU ? 16u * (FL_UVEC4(nw, bkk, dkp, whole, preg) + FL_EMU_A(nw, bkk, dkp)) : 0u}
/* A flash variant and its emulated twin (the same shader with EMULATE_COOPMAT; shaders/shaders.cmake
 * builds both from the same defines). */
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
#define FLASH_PAIR(nm, id, nw, bkk, dkp, whole, preg)                                                  \
    FLASH(nm, VK_ATT_FLASH, SPV_attention_##id, nw, bkk, dkp, whole, preg),                            \
        FLASH("emu_" nm, VK_ATT_FLASH_EMU, SPV_attention_emu_##id, nw, bkk, dkp, whole, preg)
#else
#define FLASH_PAIR(nm, id, nw, bkk, dkp, whole, preg)                                                  \
    FLASH("emu_" nm, VK_ATT_FLASH_EMU, SPV_attention_emu_##id, nw, bkk, dkp, whole, preg)
#endif

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
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    /* tiles the choice table used before: the 8-subgroup ones, then the 16-subgroup BK 32 ones */
    CM("cm256x128_k32", VK_GEMM_COOPMAT, SPV_gemm_cm256x128_k32, T_256x128_K32),
    CM("cm128x128_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x128_k32, T_128x128_K32),
    CM("cm256x128w16_k32", VK_GEMM_COOPMAT, SPV_gemm_cm256x128w16_k32, T_256x128W16_K32),
    CM("cm128x128w16_k32", VK_GEMM_COOPMAT, SPV_gemm_cm128x128w16_k32, T_128x128W16_K32),
#endif
    /* gemv.comp's 32-row tiles, which a batch's hypotheses took before the wide groups (f*_gemvw) */
    GEMV("f32_gemv32", BE_F32, 256, 32),
    GEMV("f16_gemv32", BE_F16, 256, 32),
};

/* Each emulated coopmat attention variant has the layout of a real one except for the subgroup count
 * (lavapipe has 32 KiB of shared memory): the 2-subgroup twins check the DKP 128 unrolling, the
 * 4-subgroup one the per-subgroup window offsets. The flash twins are exact: their shared memory lives
 * in device memory. Names: flash<DKP>_q<BQ>k<BK>[_ps: weights through shared memory][_pf: register
 * prefetch]; the tile parameters are in shaders/shaders.cmake. */
static const struct vk_att_cfg lab_att[] = {
    ATT_COOPMAT("emu_dk32", VK_ATT_COOPMAT_EMU, SPV_attention_cm_emu_dk32, 4, 32),
    ATT_COOPMAT_SPLIT("emus2_dk128", VK_ATT_COOPMAT_EMU, SPV_attention_cms_emu2_dk128, 2, 128),
    ATT_COOPMAT_SPLIT("emus4_dk64", VK_ATT_COOPMAT_EMU, SPV_attention_cms_emu4_dk64, 4, 64),
    ATT_COOPMAT_SPLIT_SHUFFLE("emus2x_dk128", VK_ATT_COOPMAT_EMU, SPV_attention_cms_emu2x_dk128, 2, 128),
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
    /* name, shader, warps, keys per block, DKP, whole BD' window, weights in registers */
    FLASH_PAIR("flash32_q128k64", fl32_q128k64, 8, 64, 32, 0, 1),
    FLASH_PAIR("flash32_q64k64", fl32_q64k64, 4, 64, 32, 1, 1),
    FLASH_PAIR("flash64_q64k64", fl64_q64k64, 4, 64, 64, 0, 1),
    FLASH_PAIR("flash64_q64k32", fl64_q64k32, 4, 32, 64, 1, 1),
    FLASH_PAIR("flash128_q64k32", fl128_q64k32, 4, 32, 128, 0, 1),
    FLASH_PAIR("flash128_q64k32_ps", fl128_q64k32_ps, 4, 32, 128, 0, 0),
    FLASH_PAIR("flash128_q64k32_pf", fl128_q64k32_pf, 4, 32, 128, 0, 1),
    FLASH_PAIR("flash128_q64k16", fl128_q64k16, 4, 16, 128, 1, 1),
    FLASH_PAIR("flash128_q64k16_ps", fl128_q64k16_ps, 4, 16, 128, 1, 0),
    FLASH_PAIR("flash128_q48k32", fl128_q48k32, 3, 32, 128, 0, 1),
    FLASH_PAIR("flash128_q32k32", fl128_q32k32, 2, 32, 128, 1, 1),
};

#define N_OF(a) (sizeof(a) / sizeof *(a))
/* The library's tables followed by the lab's (the registered tables replace the library's). */
#define MAX_GEMM 80
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
