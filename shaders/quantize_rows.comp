#version 460
// quantize_rows.comp — rows to int8 with one f32 scale per row, the operands of the int8 tensor-core
// linear (gemm_coopmat_i8.comp): for row m of x [M, K], s[m] = max_k |x[m,k]| / 127 and
// q[m,k] = clamp(roundEven(x[m,k] * (127 / max_k |x[m,k]|)), -127, 127), stored as K bytes (row m at
// byte m*K); a row of zeros gets s = 0 and zeros. x is f32, f16 (-DX_F16) or the rows of a block-quantized
// weight (-DWQ_Q8_0, -DWQ_Q4_K, -DWQ_Q5_K, -DWQ_Q6_K: the blocks' values dequantized by dequant.glsl, bit
// for bit the host's qblock.c, then requantized to one scale per row like any row; the weight's one-off
// conversion when the int8 path is first used). K must be a multiple of 4 (a word of 4 bytes per
// invocation and step; the linear's int8 path needs K % 32 == 0 anyway, and a k-quant's K is a multiple
// of its 256-weight blocks).
//
// One workgroup per row, grid-stride over rows: a pass takes the row's absolute maximum (a tree in
// shared memory: every f32 max is exact, so the order does not matter), a second pass quantizes. The
// quotient 127 / max is one f32 division per row; products and roundEven are exact-rounded, so a CPU
// reference with the same division gets the same bytes (GPU divisions may differ by an ulp:
// tests/test_ops_int8.c allows a step at a rounding tie).
//
// spec 0: workgroup size (a power of two, <= 256).
#ifdef X_F16
#define HAS_F16
#endif
#include "core.glsl"
#include "dequant.glsl" // defines WQ for a weight variant

layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint64_t x;     // f32 / f16 [M, K], or a quantized weight's rows of K / QB_K blocks
    uint64_t q;     // int8 [M, K] (bytes, row-major)
    uint64_t scale; // f32 [M]
    uint M, K;
} pc;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer UWordRef { uint v; };

shared float red[256];

// x[m, k] as f32.
float load(uint m, uint k) {
#if defined(WQ)
    return dequant_weight(pc.x + uint64_t(m) * uint64_t(pc.K / QB_K) * uint64_t(QB_BYTES), k);
#elif defined(X_F16)
    return LOADH(pc.x, uint64_t(m) * pc.K + k);
#else
    return LOADF(pc.x, uint64_t(m) * pc.K + k);
#endif
}

void main() {
    const uint tid = gl_LocalInvocationID.x, nt = gl_WorkGroupSize.x, K4 = pc.K / 4u;
    for (uint m = gl_WorkGroupID.x; m < pc.M; m += gl_NumWorkGroups.x) {
        float amax = 0.0;
        for (uint i = tid; i < K4; i += nt)
            [[unroll]] for (uint e = 0; e < 4u; e++)
                amax = max(amax, abs(load(m, 4u * i + e)));
        red[tid] = amax;
        barrier();
        for (uint h = nt / 2u; h > 0u; h /= 2u) {
            if (tid < h)
                red[tid] = max(red[tid], red[tid + h]);
            barrier();
        }
        amax = red[0];
        barrier(); // red is rewritten by the next row
        precise float inv = 127.0 / amax;
        if (tid == 0u) {
            precise float s = amax / 127.0;
            STOREF(pc.scale, m, s);
        }
        for (uint i = tid; i < K4; i += nt) {
            uint word = 0u;
            [[unroll]] for (uint e = 0; e < 4u; e++) {
                precise float v = load(m, 4u * i + e) * inv;
                const int q = amax > 0.0 ? int(clamp(roundEven(v), -127.0, 127.0)) : 0;
                word |= (uint(q) & 0xffu) << (8u * e);
            }
            UWordRef(pc.q + uint64_t(m) * pc.K + 4ul * i).v = word;
        }
    }
}
