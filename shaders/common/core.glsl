// core.glsl — shared by every vkasr kernel.
// Tensors arrive as 64-bit buffer device addresses in push constants; element offsets are computed in
// 64 bits (GLSL forbids 64-bit array subscripts, so addressing is pointer arithmetic on references).
// Launches are grid-stride: no kernel assumes the grid covers its index space.
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_control_flow_attributes : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32Ref { float v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32Ref { int v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64Ref { int64_t v; };
// Vector loads (the caller checks the alignment, usually through a host-computed flag).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer V4Ref { vec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer U4Ref { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U2Ref { uvec2 v; };
// Arrays for 32-bit indexing inside a region a tile bounds (the base address is 64-bit).
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32Arr { float d[]; };

#define LOADF(base, i) F32Ref((base) + uint64_t(i) * 4ul).v
#define STOREF(base, i, val) F32Ref((base) + uint64_t(i) * 4ul).v = (val)
#define LOADI(base, i) I32Ref((base) + uint64_t(i) * 4ul).v
#define STOREI(base, i, val) I32Ref((base) + uint64_t(i) * 4ul).v = (val)
#define LOADL(base, i) I64Ref((base) + uint64_t(i) * 8ul).v
#define STOREL(base, i, val) I64Ref((base) + uint64_t(i) * 8ul).v = (val)

// The segment of a packed batch holding position pos: the last s of 0 .. nseg-1 whose start
// seg[s] (I64 [nseg+1]: a leading 0, the total last) is at most pos; empty segments are skipped.
// A binary search with a uniform trip count (ceil(log2(nseg)) steps).
uint seg_find(uint64_t seg, uint nseg, int64_t pos) {
    uint lo = 0u, hi = nseg - 1u;
    while (lo < hi) {
        const uint mid = lo + (hi - lo + 1u) / 2u;
        if (LOADL(seg, mid) <= pos)
            lo = mid;
        else
            hi = mid - 1u;
    }
    return lo;
}

#ifdef HAS_F16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
layout(buffer_reference, std430, buffer_reference_align = 2) buffer F16Ref { float16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer U16Ref { uint16_t v; };
#define LOADH(base, i) float(F16Ref((base) + uint64_t(i) * 2ul).v)
#define STOREH(base, i, val) F16Ref((base) + uint64_t(i) * 2ul).v = float16_t(val)
// val rounded to the nearest f16 (ties to even, by packHalf2x16) and stored as those bits: one
// rounding, and none whose mode the driver chooses (a float16_t() conversion's).
#define STOREH_RNE(base, i, val) U16Ref((base) + uint64_t(i) * 2ul).v = uint16_t(packHalf2x16(vec2((val), 0.0)))
#endif

// Activation codes (mirror enum be_act in src/backend/ops.h).
#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_SILU 2
#define ACT_SIGMOID 3
#define ACT_TANH 4
#define ACT_LOG_GUARD 5
#define ACT_GLU 6 // linear only: its epilogue pairs the product's columns (linear.glsl)

float sigmoid_f(float x) { return 1.0 / (1.0 + exp(-x)); }

// tanh without overflow for large |x| (GLSL's tanh may return NaN for |x| > ~44 on some drivers).
float tanh_f(float x) {
    float ax = min(abs(x), 20.0);
    float e = exp(-2.0 * ax);
    return sign(x) * (1.0 - e) / (1.0 + e);
}

float act_apply(float x, uint act) {
    switch (act) {
    case ACT_RELU: return max(x, 0.0);
    case ACT_SILU: return x * sigmoid_f(x);
    case ACT_SIGMOID: return sigmoid_f(x);
    case ACT_TANH: return tanh_f(x);
    case ACT_LOG_GUARD: return log(x + 5.9604644775390625e-08); // 2^-24
    default: return x;
    }
}

// Macros, not functions: this file is included before each kernel's `layout(local_size_x_id = 0) in;`,
// and a function compiled before that declaration sees gl_WorkGroupSize.x == 1.
#define grid_id_x() (uint64_t(gl_WorkGroupID.x) * uint64_t(gl_WorkGroupSize.x) + uint64_t(gl_LocalInvocationID.x))
#define grid_stride_x() (uint64_t(gl_NumWorkGroups.x) * uint64_t(gl_WorkGroupSize.x))

// v rounded to the nearest f16 value (ties to even; overflow to +-inf), returned as f32. The rounding
// is packHalf2x16's; the expansion back to f32 is done on the bits because NVIDIA's compiler folds
// float(float16_t(v)), and unpackHalf2x16(packHalf2x16(v)), back to v.
float round_to_f16(float v) {
    const uint h = packHalf2x16(vec2(v, 0.0)) & 0xffffu;
    const uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) // zero or subnormal: m * 2^-24
        return uintBitsToFloat(s | floatBitsToUint(float(m) * 5.9604644775390625e-08));
    if (e == 31u) // inf or NaN
        return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}
// Component-wise (vec4(f16vec4(v)) would be folded back to v by NVIDIA's compiler, as above).
vec4 round_to_f16(vec4 v) { return vec4(round_to_f16(v.x), round_to_f16(v.y), round_to_f16(v.z), round_to_f16(v.w)); }
