# Every shader variant compiled into the library: vkasr_shader(NAME SOURCE [DEFINES ...] [REQUIRES ...]).
# NAME becomes SPV_<NAME> in the generated table.
vkasr_shader(unary unary.comp)
vkasr_shader(attention attention.comp)
# relpos_attention on tensor cores (f16 products) per padded head width; the *_emu* twins run the same
# code with emulated fragments on any f16 device (lavapipe tests). Must match src/backend/vulkan/vk_op_attention.c.
vkasr_shader(attention_cm_dk32 attention_coopmat.comp DEFINES NWARP=4 DKP=32 REQUIRES NV_COOPMAT)
vkasr_shader(attention_cm_dk64 attention_coopmat.comp DEFINES NWARP=4 DKP=64 REQUIRES NV_COOPMAT)
vkasr_shader(attention_cm_dk128 attention_coopmat.comp DEFINES NWARP=4 DKP=128 REQUIRES NV_COOPMAT)
vkasr_shader(attention_cm_emu_dk32 attention_coopmat.comp DEFINES NWARP=4 DKP=32 EMULATE_COOPMAT)
vkasr_shader(attention_cm_emu2_dk64 attention_coopmat.comp DEFINES NWARP=2 DKP=64 EMULATE_COOPMAT)
vkasr_shader(attention_cm_emu2_dk128 attention_coopmat.comp DEFINES NWARP=2 DKP=128 EMULATE_COOPMAT)
vkasr_shader(binary binary.comp)
vkasr_shader(glu glu.comp)
vkasr_shader(pad layout.comp DEFINES PAD)
vkasr_shader(permute layout.comp DEFINES PERMUTE)
vkasr_shader(layernorm rows.comp DEFINES LAYERNORM)
vkasr_shader(softmax rows.comp DEFINES SOFTMAX)
vkasr_shader(argmax rows.comp DEFINES ARGMAX)
vkasr_shader(feature_norm feature_norm.comp)
vkasr_shader(conv2d_s2 conv2d.comp)
vkasr_shader(dwconv2d_s2 conv2d.comp DEFINES DEPTHWISE)
vkasr_shader(dwconv1d dwconv1d.comp)
vkasr_shader(lstm lstm.comp)
vkasr_shader(stft stft.comp)
# linear: scalar GEMM (any device) and the NV tensor-core GEMM; the *_emu variants run the tensor-core
# kernel's staging and epilogue with emulated fragments so lavapipe tests cover them. Tile defines
# must match the COOPMAT() rows in src/backend/vulkan/vk_op_gemm.c.
vkasr_shader(gemm_f32 gemm.comp)
vkasr_shader(gemm_f16 gemm.comp DEFINES W_F16)
vkasr_shader(gemm_cm_l gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=4 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm_m gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm_w gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm_l_nopad gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=4 SK_PAD=0 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm_xl gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=4 REQUIRES NV_COOPMAT)
vkasr_shader(gemm_cm_l_emu gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=4 FN=4 EMULATE_COOPMAT)
vkasr_shader(gemm_cm_m_emu gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=2 FM=2 FN=2 EMULATE_COOPMAT)
vkasr_shader(gemm_cm_w_emu gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=2 EMULATE_COOPMAT)
vkasr_shader(gemm_cm_xl_emu gemm_coopmat.comp DEFINES WARPS_M=2 WARPS_N=4 FM=4 FN=4 EMULATE_COOPMAT)
