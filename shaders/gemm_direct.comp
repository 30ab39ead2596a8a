#version 460
// gemm_direct.comp — the linear op without shared memory or barriers, for CPU Vulkan drivers
// (lavapipe): y = res + alpha * act(x w^T + bias); x, w, y f32, or each f16 with -DF16_TYPES
// (linear.glsl; an f32 x is rounded to f16 when w is f16, as the op defines). llvmpipe runs a
// workgroup's invocations as SIMD lanes and switches between them at every barrier, so the
// shared-memory tiles of gemm.comp cost it more than they save; here each invocation computes TM x TN
// outputs straight from global memory (the CPU's caches do the tiling). Each output is one f32 FMA
// chain over k = 0 .. K-1, exactly as in gemm.comp, so the two kernels give bit-identical results and
// may be mixed freely.
//
// ACT_GLU: an invocation's TN (even) columns are consecutive in pair order (linear.glsl), so it holds
// both sums of each of its TN/2 outputs.
// -DWQ_<type> (dequant.glsl): w holds rows of K / QB_K quantized blocks (K a multiple of them, so of
// 8). Each weight is dequantized to its f32 value (bit for bit the host's, as gemm.comp's quantized
// tiles take it while staging) and enters the output's FMA chain in k order, 8 k at a time; the chain
// depends on K only, so a row never depends on M (the matvec hint's rule).
//
// spec 0: workgroup size; 4 TM; 5 TN (outputs per invocation, at most 8 each; a workgroup covers
// WG*TN columns of TM rows, looping grid-stride over those tiles); 7 tensor types (linear.glsl).
// push: linear.glsl; flags bit 0: K % 8 == 0 and x, w 16-byte aligned (vector loads allowed).
#ifdef F16_TYPES
#define HAS_F16
#endif
#include "core.glsl"
#include "linear.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

// 4 consecutive elements at element i (a multiple of 4, 8- or 16-byte aligned), widened.
vec4 load4(uint64_t base, bool f16, uint64_t i) {
#ifdef F16_TYPES
    if (f16) {
        const uvec2 u = U2Ref(base + i * 2ul).v;
        return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    }
#endif
    return V4Ref(base + i * 4ul).v;
}
vec4 load_x4(uint64_t i) {
    const vec4 v = load4(pc.x, X16, i);
    return W16 && !X16 ? round_to_f16(v) : v;
}
vec4 load_w4(uint64_t i) { return load4(pc.w, W16, i); }

void main() {
    const uint WG = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint BN = WG * TN;
    const uint tiles_n = (N + BN - 1u) / BN;
    const uint ntiles = ((M + TM - 1u) / TM) * tiles_n;
    for (uint tile = gl_WorkGroupID.x; tile < ntiles; tile += gl_NumWorkGroups.x) {
        const uint m0 = (tile / tiles_n) * TM, n0 = (tile % tiles_n) * BN + tid * TN;
        float acc[64];
        [[unroll]] for (uint i = 0; i < 64u; i++)
            acc[i] = 0.0;
        // rows / columns past the matrix read row M-1 / N-1 (no branch in the loop) and are not stored
        uint64_t xr[8], wr[8];
        [[unroll]] for (uint i = 0; i < 8u; i++) {
            xr[i] = uint64_t(min(m0 + i, M - 1u)) * K;
            wr[i] = uint64_t(glu_row(min(n0 + i, N - 1u))) * K;
        }
#ifdef WQ
        for (uint i = 0; i < 8u; i++) // the rows' blocks
            wr[i] = pc.w + uint64_t(glu_row(min(n0 + i, N - 1u))) * uint64_t(K / QB_K) * uint64_t(QB_BYTES);
        for (uint k = 0; k < K; k += 8u) {
            float b[64];
            [[unroll]] for (uint j = 0; j < 8u; j++)
                if (j < TN) {
                    float v[8];
                    dequant8(wr[j], k, v);
                    [[unroll]] for (uint e = 0; e < 8u; e++)
                        b[j * 8u + e] = v[e];
                }
            [[unroll]] for (uint i = 0; i < 8u; i++)
                if (i < TM) {
                    float a[8];
                    [[unroll]] for (uint e = 0; e < 8u; e++)
                        a[e] = load_x(xr[i] + k + e);
                    [[unroll]] for (uint j = 0; j < 8u; j++)
                        if (j < TN) {
                            float s = acc[i * 8u + j]; // one k at a time
                            [[unroll]] for (uint e = 0; e < 8u; e++)
                                s = fma(a[e], b[j * 8u + e], s);
                            acc[i * 8u + j] = s;
                        }
                }
        }
#else
        uint k = 0;
        if ((pc.flags & FLAG_VEC) != 0u) { // K % 8 == 0, x and w 16-byte aligned: 4 k per load
            for (; k < K; k += 4u) {
                vec4 a[8], b[8];
                [[unroll]] for (uint i = 0; i < 8u; i++) {
                    a[i] = i < TM ? load_x4(xr[i] + k) : vec4(0.0);
                    b[i] = i < TN ? load_w4(wr[i] + k) : vec4(0.0);
                }
                [[unroll]] for (uint i = 0; i < 8u; i++)
                    [[unroll]] for (uint j = 0; j < 8u; j++)
                        if (i < TM && j < TN) {
                            float s = acc[i * 8u + j]; // the same FMA chain as one k at a time
                            s = fma(a[i].x, b[j].x, s);
                            s = fma(a[i].y, b[j].y, s);
                            s = fma(a[i].z, b[j].z, s);
                            acc[i * 8u + j] = fma(a[i].w, b[j].w, s);
                        }
            }
        }
        for (; k < K; k++) {
            float a[8], b[8];
            [[unroll]] for (uint i = 0; i < 8u; i++) {
                a[i] = i < TM ? load_x(xr[i] + k) : 0.0;
                b[i] = i < TN ? load_w(wr[i] + k) : 0.0;
            }
            [[unroll]] for (uint i = 0; i < 8u; i++)
                [[unroll]] for (uint j = 0; j < 8u; j++)
                    if (i < TM && j < TN)
                        acc[i * 8u + j] = fma(a[i], b[j], acc[i * 8u + j]);
        }
#endif
        // Epilogue (linear.glsl), in the reference's order, in rolled loops over a copy of the sums so
        // that its code exists once (unrolled over the 64 outputs, with GLU's pairs, it made llvmpipe
        // take half as long again to compile the kernel, on every run: lavapipe caches no pipelines).
        float sum[64];
        [[unroll]] for (uint i = 0; i < 64u; i++)
            sum[i] = acc[i];
        const bool glu = pc.act == ACT_GLU;
        [[dont_unroll]] for (uint i = 0; i < TM && m0 + i < M; i++)
            [[dont_unroll]] for (uint j = 0; j < TN && n0 + j < N; j += glu ? 2u : 1u) {
                if (glu) // n0 + j even, and N even: its gate column n0 + j + 1 is inside too
                    linear_epilogue_glu(m0 + i, (n0 + j) / 2u, sum[i * 8u + j], sum[i * 8u + j + 1u]);
                else
                    linear_epilogue(m0 + i, n0 + j, sum[i * 8u + j]);
            }
    }
}
