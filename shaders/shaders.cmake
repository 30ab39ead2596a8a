# Every shader variant: vkasr_shader(NAME SOURCE [DEFINES ...] [REQUIRES ...]) embeds it in the library,
# vkasr_lab_shader(...) puts it in the test-only lab table (variants no choice table picks: emulated
# twins for lavapipe, kernels kept for measurement). NAME becomes SPV_<NAME> in the generated tables.
vkasr_shader(unary unary.comp)
vkasr_shader(posenc posenc.comp)
# relpos_attention: *_h variants take f16 q, k, v, p or y (F16_TYPES: 16-bit storage needed).
vkasr_shader(attention attention.comp)
vkasr_shader(attention_h attention.comp DEFINES F16_TYPES)
vkasr_shader(attention_rows attention_rows.comp)
vkasr_shader(attention_rows_h attention_rows.comp DEFINES F16_TYPES)
vkasr_shader(attention_rows_group attention_rows_group.comp)
vkasr_shader(attention_rows_group_h attention_rows_group.comp DEFINES F16_TYPES)
# relpos_attention on tensor cores (f16 products) per padded head width; the *_emu* twins (lab) of the
# kernels the choice takes run the same code with emulated fragments on any f16 device (lavapipe tests;
# the lab's older real kernels are checked on GPUs only). Must match
# src/backend/vulkan/vk_op_attention.c and tests/vk_lab.c. SPLIT (cms*): two subgroups per 16 query
# rows, one computing AC and the other BD, each keeping half the output; x: the softmax rows meet
# through subgroup shuffles (ROW_SHUFFLE), q: staging pipelined, two barriers per key block (PIPE), m:
# softmax row state in registers (ROW_REGS), b: a block's first BD fragment stored before the products
# (BD_FIRST; docs/gpu-results.md). The kernels the choice used before stay in the lab for comparison.
vkasr_shader(attention_cm_dk32 attention_coopmat.comp DEFINES NWARP=4 DKP=32 REQUIRES NV_COOPMAT)
vkasr_shader(attention_cms4xqm_dk64 attention_coopmat.comp DEFINES NWARP=4 DKP=64 SPLIT ROW_SHUFFLE PIPE ROW_REGS REQUIRES NV_COOPMAT)
vkasr_shader(attention_cms8xqmb_dk128 attention_coopmat.comp DEFINES NWARP=8 DKP=128 SPLIT ROW_SHUFFLE PIPE ROW_REGS BD_FIRST REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8xq_dk64 attention_coopmat.comp DEFINES NWARP=8 DKP=64 SPLIT ROW_SHUFFLE PIPE REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms4xq_dk64 attention_coopmat.comp DEFINES NWARP=4 DKP=64 SPLIT ROW_SHUFFLE PIPE REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms4xqmb_dk64 attention_coopmat.comp DEFINES NWARP=4 DKP=64 SPLIT ROW_SHUFFLE PIPE ROW_REGS BD_FIRST REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8xqm_dk128 attention_coopmat.comp DEFINES NWARP=8 DKP=128 SPLIT ROW_SHUFFLE PIPE ROW_REGS REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8xq_dk128 attention_coopmat.comp DEFINES NWARP=8 DKP=128 SPLIT ROW_SHUFFLE PIPE REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8x_dk128 attention_coopmat.comp DEFINES NWARP=8 DKP=128 SPLIT ROW_SHUFFLE REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cm_dk64 attention_coopmat.comp DEFINES NWARP=4 DKP=64 REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cm_dk128 attention_coopmat.comp DEFINES NWARP=4 DKP=128 REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8_dk128 attention_coopmat.comp DEFINES NWARP=8 DKP=128 SPLIT REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8_dk64 attention_coopmat.comp DEFINES NWARP=8 DKP=64 SPLIT REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms8x_dk64 attention_coopmat.comp DEFINES NWARP=8 DKP=64 SPLIT ROW_SHUFFLE REQUIRES NV_COOPMAT)
vkasr_lab_shader(attention_cms_emu2xqmb_dk128 attention_coopmat.comp DEFINES NWARP=2 DKP=128 SPLIT ROW_SHUFFLE PIPE ROW_REGS BD_FIRST EMULATE_COOPMAT)
vkasr_lab_shader(attention_cms_emu4xqm_dk64 attention_coopmat.comp DEFINES NWARP=4 DKP=64 SPLIT ROW_SHUFFLE PIPE ROW_REGS EMULATE_COOPMAT)
vkasr_lab_shader(attention_cm_emu_dk32 attention_coopmat.comp DEFINES NWARP=4 DKP=32 EMULATE_COOPMAT)
vkasr_shader(binary binary.comp)
vkasr_shader(glu glu.comp)
vkasr_shader(glu_h glu.comp DEFINES IO_F16)
vkasr_shader(pad layout.comp DEFINES PAD)
vkasr_shader(permute layout.comp DEFINES PERMUTE)
vkasr_shader(copy_rows copy_rows.comp)
vkasr_shader(layernorm rows.comp DEFINES LAYERNORM)
vkasr_shader(layernorm_h rows.comp DEFINES LAYERNORM IO_F16)
vkasr_shader(softmax rows.comp DEFINES SOFTMAX)
vkasr_shader(argmax rows.comp DEFINES ARGMAX)
vkasr_shader(feature_norm feature_norm.comp)
vkasr_shader(conv2d_s2 conv2d.comp)
vkasr_shader(dwconv2d_s2 conv2d.comp DEFINES DEPTHWISE)
vkasr_shader(dwconv1d dwconv1d.comp)
# *_h variants: f16 x or y (io.glsl: types by specialization constant 7)
vkasr_shader(conv2d_s2_h conv2d.comp DEFINES IO_F16)
vkasr_shader(dwconv2d_s2_h conv2d.comp DEFINES DEPTHWISE IO_F16)
vkasr_shader(dwconv1d_h dwconv1d.comp DEFINES IO_F16)
vkasr_shader(lstm lstm.comp)
vkasr_shader(lstm_f16 lstm.comp DEFINES W16) # f16 w_ih / w_hh (an f16 session's decoder)
# the lanes' tree through subgroup shuffles (32-wide subgroups with shuffles)
vkasr_shader(lstm_sg lstm.comp DEFINES SG)
vkasr_shader(lstm_f16_sg lstm.comp DEFINES W16 SG)
# quantized w_ih / w_hh (dequantized piecewise in the column loop), per block type
foreach(q Q8_0 Q4_K Q5_K Q6_K)
  string(TOLOWER ${q} ql)
  vkasr_shader(lstm_${ql} lstm.comp DEFINES WQ_${q})
endforeach()
# The device-resident greedy search (src/backend/vulkan/vk_op_search.c).
vkasr_shader(search_joint search.comp DEFINES JOINT)
vkasr_shader(search_step search.comp DEFINES STEP)
vkasr_shader(stft stft.comp)
# The packed batch's offsets (src/backend/vulkan/vk_op_scan.c).
vkasr_shader(scan scan.comp)
# linear: scalar GEMM (any device), barrier-free GEMM (CPU drivers), matrix-vector, split-K reduction;
# *_f32 variants are f32 only (no 16-bit storage needed), *_h ones take f16 x, w or y (F16_TYPES).
vkasr_shader(gemm_f32 gemm.comp)
vkasr_shader(gemm_h gemm.comp DEFINES F16_TYPES)
# quantized weights (dequantized while staging w's tiles): per block type, f32 x/y and f16 x/y
foreach(q Q8_0 Q4_K Q5_K Q6_K)
  string(TOLOWER ${q} ql)
  vkasr_shader(gemm_${ql} gemm.comp DEFINES WQ_${q})
  vkasr_shader(gemm_${ql}_h gemm.comp DEFINES WQ_${q} F16_TYPES)
endforeach()
vkasr_shader(gemm_direct_f32 gemm_direct.comp)
vkasr_shader(gemm_direct_h gemm_direct.comp DEFINES F16_TYPES)
# the same on quantized weights (CPU drivers: every product of a quantized file), per block type
foreach(q Q8_0 Q4_K Q5_K Q6_K)
  string(TOLOWER ${q} ql)
  vkasr_shader(gemm_direct_${ql} gemm_direct.comp DEFINES WQ_${q})
  vkasr_shader(gemm_direct_${ql}_h gemm_direct.comp DEFINES WQ_${q} F16_TYPES)
endforeach()
vkasr_shader(gemv_f32 gemv.comp)
vkasr_shader(gemv_h gemv.comp DEFINES F16_TYPES)
# matrix-vector products of quantized weights (blocks read directly): per block type, f32 and f16 x/y
foreach(q Q8_0 Q4_K Q5_K Q6_K)
  string(TOLOWER ${q} ql)
  vkasr_shader(gemv_${ql} gemv.comp DEFINES WQ_${q})
  vkasr_shader(gemv_${ql}_h gemv.comp DEFINES WQ_${q} F16_TYPES)
endforeach()
vkasr_shader(gemm_reduce gemm_reduce.comp)
# linear on tensor cores, one variant per tile configuration (WARPS_M WARPS_N FM FN BK STAGES [SK_PAD]);
# each gemm_emu* twin (lab) runs the same code with emulated fragments and shared memory so lavapipe tests
# cover it. Must match the CM() rows of src/backend/vulkan/vk_gemm_configs.c and tests/vk_lab.c.
vkasr_shader(gemm_cm64x64_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 BK=32 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm64x64_k64 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 BK=64 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm32x64_k64 gemm_coopmat.comp DEFINES WARPS_M=1 WARPS_N=2 FM=2 FN=2 BK=64 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm16x64_k128 gemm_coopmat.comp DEFINES WARPS_M=1 WARPS_N=4 FM=1 FN=1 BK=128 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm128x64_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=2 BK=32 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm64x128_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=4 BK=32 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm128x128w16_k64 gemm_coopmat.comp DEFINES WARPS_M=4 WARPS_N=4 FM=2 FN=2 BK=64 STAGES=1 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm128x128w4_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=4 BK=32 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm128x128_k64 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=64 STAGES=1 REQUIRES NV_COOPMAT)
# 192x128 on 12 subgroups of 64x32, one stage of BK 64 (45 KiB; w fetched in passes of 48 rows)
vkasr_shader(gemm_cm192x128_k64 gemm_coopmat.comp DEFINES WARPS_M=3 WARPS_N=4 FM=4 FN=2 BK=64 STAGES=1 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm128x256_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=4 BK=32 STAGES=1 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm128x256np_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=4 BK=32 STAGES=2 SK_PAD=0 REQUIRES NV_COOPMAT)
# tiles the choice table used before, for comparison: the 8-subgroup ones (cm256x128_k32: 255
# registers, spilling; cm128x128_k32: 180, both with the K steps unrolled) and the 16-subgroup BK 32 ones
# that cm128x128w16_k64 replaced
vkasr_lab_shader(gemm_emu192x128_k64 gemm_coopmat.comp DEFINES WARPS_M=3 WARPS_N=4 FM=4 FN=2 BK=64 STAGES=1 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_cm256x128_k32 gemm_coopmat.comp DEFINES WARPS_M=4 WARPS_N=2 FM=4 FN=4 BK=32 STAGES=1 REQUIRES NV_COOPMAT)
vkasr_lab_shader(gemm_cm128x128_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=32 STAGES=2 REQUIRES NV_COOPMAT)
vkasr_lab_shader(gemm_cm256x128w16_k32 gemm_coopmat.comp DEFINES WARPS_M=4 WARPS_N=4 FM=4 FN=2 BK=32 STAGES=1 REQUIRES NV_COOPMAT)
vkasr_lab_shader(gemm_cm128x128w16_k32 gemm_coopmat.comp DEFINES WARPS_M=4 WARPS_N=4 FM=2 FN=2 BK=32 STAGES=2 REQUIRES NV_COOPMAT)
# Quantized weights on tensor cores (dequantized into the f16 w tile): the tile the choice table uses
# for most encoder products, per block type, and its emulated twin (lab). Must match the CMQ() rows of
# src/backend/vulkan/vk_gemm_configs.c and tests/vk_lab.c.
foreach(q Q8_0 Q4_K Q5_K Q6_K)
  string(TOLOWER ${q} ql)
  vkasr_shader(gemm_cm128x128_k32_${ql} gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=32 STAGES=2 WQ_${q} REQUIRES NV_COOPMAT)
  vkasr_lab_shader(gemm_emu128x128_k32_${ql} gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=32 STAGES=2 WQ_${q} EMULATE_COOPMAT)
endforeach()
vkasr_lab_shader(gemm_emu64x64_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 BK=32 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu64x64_k64 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 BK=64 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu32x64_k64 gemm_coopmat.comp DEFINES WARPS_M=1 WARPS_N=2 FM=2 FN=2 BK=64 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu16x64_k128 gemm_coopmat.comp DEFINES WARPS_M=1 WARPS_N=4 FM=1 FN=1 BK=128 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu128x64_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=2 BK=32 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu64x128_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=4 BK=32 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu128x128w16_k64 gemm_coopmat.comp DEFINES WARPS_M=4 WARPS_N=4 FM=2 FN=2 BK=64 STAGES=1 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu128x128w4_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=4 BK=32 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu128x128_k64 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=64 STAGES=1 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu128x256_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=4 BK=32 STAGES=1 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_emu128x256np_k32 gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=4 BK=32 STAGES=2 SK_PAD=0 EMULATE_COOPMAT)
# The int8 linear of quantized weights (W8A8, one scale per row; src/backend/vulkan/vk_op_gemm_i8.c): rows
# to int8 (f32 x, f16 x, a q8_0 / q4_k / q5_k / q6_k weight's one-off conversion from its blocks) and the
# int8 tensor-core GEMM,
# whose emulated twin runs the same code on any f16 device (in the library, not the lab: VKASR_INT8=emu
# takes it in any program, so the path's accuracy can be measured on lavapipe). Must match the I8() rows
# of src/backend/vulkan/vk_gemm_configs.c and tests/vk_lab.c.
vkasr_shader(quantize_rows quantize_rows.comp)
vkasr_shader(quantize_rows_h quantize_rows.comp DEFINES X_F16)
vkasr_shader(quantize_rows_q8_0 quantize_rows.comp DEFINES WQ_Q8_0)
vkasr_shader(quantize_rows_q4_k quantize_rows.comp DEFINES WQ_Q4_K)
vkasr_shader(quantize_rows_q5_k quantize_rows.comp DEFINES WQ_Q5_K)
vkasr_shader(quantize_rows_q6_k quantize_rows.comp DEFINES WQ_Q6_K)
vkasr_shader(gemm_i8cm128x128_k64 gemm_coopmat_i8.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=64 STAGES=2 REQUIRES NV_INT8_COOPMAT)
vkasr_shader(gemm_i8cm128x128_k128 gemm_coopmat_i8.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=128 STAGES=1 REQUIRES NV_INT8_COOPMAT)
vkasr_shader(gemm_i8emu128x128_k64 gemm_coopmat_i8.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=64 STAGES=2 EMULATE_COOPMAT)
# few tiles (up to 1024 x 1024, the f16 choice's class for 64x64), and a 128x128 alternative for tuning
# (16 subgroups of 32x32); the emulated twins but the default's are the lab's
vkasr_shader(gemm_i8cm64x64_k64 gemm_coopmat_i8.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 BK=64 STAGES=2 REQUIRES NV_INT8_COOPMAT)
vkasr_lab_shader(gemm_i8cm128x128w16_k64 gemm_coopmat_i8.comp DEFINES WARPS_M=4 WARPS_N=4 FM=2 FN=2 BK=64 STAGES=2 REQUIRES NV_INT8_COOPMAT)
vkasr_lab_shader(gemm_i8emu64x64_k64 gemm_coopmat_i8.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 BK=64 STAGES=2 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_i8emu128x128_k128 gemm_coopmat_i8.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 BK=128 STAGES=1 EMULATE_COOPMAT)
vkasr_lab_shader(gemm_i8emu128x128w16_k64 gemm_coopmat_i8.comp DEFINES WARPS_M=4 WARPS_N=4 FM=2 FN=2 BK=64 STAGES=2 EMULATE_COOPMAT)
