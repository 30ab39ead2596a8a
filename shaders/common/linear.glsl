// linear.glsl — what every kernel of the linear op shares (gemm.comp, gemm_direct.comp, gemv.comp,
// gemm_coopmat.comp, gemm_reduce.comp): the push constants, the tensor types and the epilogue
// y = res + alpha * act(sum + bias), or with act = ACT_GLU the gated one. Include after core.glsl.
// Quantized weights: kernels built with -DWQ_<type> read w's blocks (dequant.glsl, load_w_nk).
//
// ACT_GLU (ops.h): the product's pc.N columns (w's rows) are GLU's value half [0, N/2) and gate half
// [N/2, N), and y has N/2 columns. The kernels compute the product's columns in pair order instead:
// column c of their index space is the value (c even) or the gate (c odd) of output column c / 2, so
// it takes weight row glu_row(c), and a pair is adjacent where a kernel's epilogue needs it
// (gemm.comp arranges its own pairs, see there).
//
// Tensor types: kernels built with -DF16_TYPES take them from specialization constant 7 (bit 0: x f16,
// bit 1: w f16, bit 2: y and res f16; the host sets it per call). Without F16_TYPES everything is f32
// and the module needs no 16-bit storage, so it runs on devices without it.
#ifdef F16_TYPES
layout(constant_id = 7) const uint TYPES = 0;
#else
const uint TYPES = 0;
#endif
const bool X16 = (TYPES & 1u) != 0u;
const bool W16 = (TYPES & 2u) != 0u;
const bool Y16 = (TYPES & 4u) != 0u;

#include "dequant.glsl"

// Mirror of struct pc_gemm (src/backend/vulkan/vk_op_gemm.c). The first 64 bytes are what every linear
// kernel reads; the rest only the tensor-core kernel and the split-K reduction.
layout(push_constant) uniform PC {
    uint64_t x, w, bias, res, y;
    uint M, N, K;
    uint act;
    float alpha;
    uint flags;
    uint k_slice;     // split-K: K elements per slice (a multiple of the K step)
    uint splits;      // split-K: slices; > 1 in gemm_coopmat.comp: y is the f32 workspace
                      // [splits, M, N] and gets raw sums; gemm_reduce.comp reads it as x
    uint64_t emu_sh;  // EMULATE_COOPMAT: device memory standing in for each workgroup's shared memory,
    uint emu_stride;  // emu_stride bytes per workgroup
    uint pad_;
} pc;

#define FLAG_VEC 1u   // K % 8 == 0 and x, w 16-byte aligned: vector loads along K allowed
#define FLAG_YVEC 2u  // N % 4 == 0 and y, res, bias 16-byte aligned: 4-column vector epilogue allowed

// ACT_GLU: the weight row (and bias element) of column c in pair order; c itself otherwise.
uint glu_row(uint c) { return pc.act != ACT_GLU ? c : (c & 1u) != 0u ? pc.N / 2u + c / 2u : c / 2u; }

// x[i] as the product takes it: f16 x as is; f32 x rounded to f16 when w is f16 (the op's rule).
float load_x(uint64_t i) {
#ifdef F16_TYPES
    if (X16)
        return LOADH(pc.x, i);
    if (W16)
        return round_to_f16(LOADF(pc.x, i));
#endif
    return LOADF(pc.x, i);
}

float load_w(uint64_t i) {
#ifdef F16_TYPES
    if (W16)
        return LOADH(pc.w, i);
#endif
    return LOADF(pc.w, i);
}

// w[n, k] as the product takes it; with -DWQ_<type> (dequant.glsl) w holds quantized rows of K / QB_K
// blocks, dequantized here (x is then used as load_x gives it: W16 is off).
float load_w_nk(uint n, uint k) {
#ifdef WQ
    return dequant_weight(pc.w + uint64_t(n) * uint64_t(pc.K / QB_K) * uint64_t(QB_BYTES), k);
#else
    return load_w(uint64_t(n) * pc.K + k);
#endif
}

// res[i] (y's type).
float load_res(uint64_t i) {
#ifdef F16_TYPES
    if (Y16)
        return LOADH(pc.res, i);
#endif
    return LOADF(pc.res, i);
}

// y[i] = v in y's type. f16: v rounded to nearest even by packHalf2x16, whose bits are stored
// (STOREH_RNE: no float16_t() conversion of driver-chosen rounding).
void store_y(uint64_t i, float v) {
#ifdef F16_TYPES
    if (Y16) {
        STOREH_RNE(pc.y, i, v);
        return;
    }
#endif
    STOREF(pc.y, i, v);
}

// The op's epilogue for output (gm, gn) from its sum, in the reference's order: (sum + bias) -> act
// -> * alpha -> + res, stored in y's type. res may be y: read before the write, same invocation.
void linear_epilogue(uint gm, uint gn, float v) {
    if (pc.bias != 0ul)
        v += LOADF(pc.bias, gn);
    v = pc.alpha * act_apply(v, pc.act);
    const uint64_t o = uint64_t(gm) * pc.N + gn;
    if (pc.res != 0ul)
        v += load_res(o);
    store_y(o, v);
}

// ACT_GLU: output (gm, j) from the sums of its value column j and gate column N/2 + j: bias, then
// res + alpha * (value * sigmoid(gate)) (in f32 the arithmetic of linear then glu.comp), stored in
// y's type. res may be y: read before the write, same invocation.
void linear_epilogue_glu(uint gm, uint j, float v, float g) {
    const uint ny = pc.N / 2u;
    if (pc.bias != 0ul) {
        v += LOADF(pc.bias, j);
        g += LOADF(pc.bias, ny + j);
    }
    v = pc.alpha * (v * sigmoid_f(g));
    const uint64_t o = uint64_t(gm) * ny + j;
    if (pc.res != 0ul)
        v += load_res(o);
    store_y(o, v);
}

// Four consecutive outputs (gm, gn .. gn+3), as four linear_epilogue calls (the same operations in the
// same order per component); needs FLAG_YVEC and gn + 4 <= N.
void linear_epilogue4(uint gm, uint gn, vec4 v) {
    if (pc.bias != 0ul)
        v += V4Ref(pc.bias + uint64_t(gn) * 4ul).v;
    v = pc.alpha * vec4(act_apply(v.x, pc.act), act_apply(v.y, pc.act), act_apply(v.z, pc.act), act_apply(v.w, pc.act));
    const uint64_t o = uint64_t(gm) * pc.N + gn;
#ifdef F16_TYPES
    if (Y16) {
        if (pc.res != 0ul) {
            const uvec2 r = U2Ref(pc.res + o * 2ul).v;
            v += vec4(unpackHalf2x16(r.x), unpackHalf2x16(r.y));
        }
        U2Ref(pc.y + o * 2ul).v = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
        return;
    }
#endif
    if (pc.res != 0ul)
        v += V4Ref(pc.res + o * 4ul).v;
    V4Ref(pc.y + o * 4ul).v = v;
}
