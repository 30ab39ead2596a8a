#version 460
// gemv.comp — the linear op for products with few rows: y = res + alpha * act(x w^T + bias), f32
// accumulation; x, w, y f32, or each f16 with -DF16_TYPES (linear.glsl; an f32 x is rounded to f16 when
// w is f16, as the op defines). The decoder's products (the joint over a window of a few frames, the
// prediction network's projection) are matrix-vector products: bound by reading w once, and with only
// N / 128 tiles the tiled GEMM leaves most of a GPU idle (9 workgroups for a 1,000-class joint).
//
// Here one group of 32 consecutive invocations owns one output column n and sweeps its weight row
// (K-contiguous: each load of the group reads 32 consecutive elements, or 32 x 8 with vector loads)
// for MR rows of x at once (8, or 32 for a batch's rows with quantized weights: spec 1); a
// workgroup holds WG / 32 such groups, i.e. a tile of MR rows x WG/32 columns, and loops grid-stride
// over the tiles (row-major: neighbouring workgroups read the same x rows and neighbouring weight
// rows). The 32 partial sums of each output go through shared memory and are added in lane order by
// one invocation, which applies the epilogue. Any M works (row blocks of MR re-read w). A lane's
// partial sum and the order of the lane sums do not depend on MR or M: a row's result is the same
// in every tile shape and batch.
//
// ACT_GLU: columns in pair order (linear.glsl); the invocations of an even group apply the epilogue to
// the sums of their own column (value) and of the next group's (gate).
// Wide groups (spec 5: NC > 1, even, f32 or f16 w): a group owns NC consecutive columns (ACT_GLU:
// NC / 2 whole value-gate pairs) and loads each x chunk once for all of them, so x's traffic is
// M x N x K / NC instead of M x N x K (a batch's rows; figures: docs/gpu-results.md, "Decoder"). Every
// output keeps its lane's sum and the lane-order addition, so a wide group's result is bit for bit a
// one-column group's (test_ops_linear). The one-column path below serves one hypothesis's rows.
// spec 0: workgroup size, a multiple of 32 (of 64 for ACT_GLU); 1: MR, at most 32 (one invocation
// per row adds the lane sums); 5: NC (1: one column per group); 7: tensor types (linear.glsl).
// push: linear.glsl; flags bit 0: K % 8 == 0 and x, w 16-byte aligned (vector loads allowed).
//
// -DWQ_<type> (dequant.glsl): w holds rows of K / QB_K quantized blocks, read as they are. A lane sweeps
// 8-weight pieces (k = 8 lane + 256 i: one piece of one 32-weight sub-block), dequantizes each with
// dequant8 (bit for bit the host's f32 values, no f16 rounding) and accumulates it times x in f32 as
// the f32 path does: the reference's dequantize-then-f32-product up to f32 summation order. The
// pieces of a lane do not depend on MR or M, so neither does a row.
#ifdef F16_TYPES
#define HAS_F16
#endif
#include "core.glsl"
#include "linear.glsl"

layout(local_size_x_id = 0) in;

#define LANES 32u
layout(constant_id = 1) const uint MR = 8;
layout(constant_id = 5) const uint NC = 1; // quantized weights (-DWQ_*): always 1

shared float part[gl_WorkGroupSize.x * MR * NC];

// 8 consecutive elements of a K-contiguous tensor at element i (a multiple of 8, 16-byte aligned), widened.
void load8(uint64_t base, bool f16, uint64_t i, out vec4 lo, out vec4 hi) {
#ifdef F16_TYPES
    if (f16) {
        const uvec4 u = U4Ref(base + i * 2ul).v;
        lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
        hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
        return;
    }
#endif
    lo = V4Ref(base + i * 4ul).v;
    hi = V4Ref(base + i * 4ul + 16ul).v;
}

#ifdef WQ
// x[i .. i+7] (i a multiple of 8) as the product takes them: vector loads when aligned.
void load_x8(uint64_t i, bool vec, out vec4 lo, out vec4 hi) {
    if (vec) {
        load8(pc.x, X16, i, lo, hi);
        return;
    }
    lo = vec4(load_x(i), load_x(i + 1ul), load_x(i + 2ul), load_x(i + 3ul));
    hi = vec4(load_x(i + 4ul), load_x(i + 5ul), load_x(i + 6ul), load_x(i + 7ul));
}
#endif

void main() {
    const uint WG = gl_WorkGroupSize.x, CPW = WG / LANES;
    const uint tid = gl_LocalInvocationID.x, lane = tid % LANES, grp = tid / LANES;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint tiles_n = (N + CPW * NC - 1u) / (CPW * NC);
    const uint ntiles = ((M + MR - 1u) / MR) * tiles_n;
    const bool vec = (pc.flags & FLAG_VEC) != 0u;

    for (uint tile = gl_WorkGroupID.x; tile < ntiles; tile += gl_NumWorkGroups.x) {
        const uint m0 = (tile / tiles_n) * MR, n = ((tile % tiles_n) * CPW + grp) * NC; // the group's first column
        const uint rows = min(MR, M - m0);
#ifndef WQ
        if (NC > 1u) { // wide groups: acc[r * NC + c] for row m0 + r, column n + c
            float acc[MR * NC];
            [[unroll]] for (uint i = 0; i < MR * NC; i++)
                acc[i] = 0.0;
            if (vec) {
                for (uint k = lane * 8u; k < K; k += LANES * 8u) {
                    vec4 wlo[NC], whi[NC];
                    [[unroll]] for (uint c = 0; c < NC; c++) {
                        wlo[c] = vec4(0.0);
                        whi[c] = vec4(0.0);
                        if (n + c < N)
                            load8(pc.w, W16, uint64_t(glu_row(n + c)) * K + k, wlo[c], whi[c]);
                    }
                    [[unroll]] for (uint r = 0; r < MR; r++) {
                        if (r < rows) {
                            vec4 xlo, xhi;
                            load8(pc.x, X16, uint64_t(m0 + r) * K + k, xlo, xhi);
                            if (W16 && !X16) { // the op rounds an f32 x to f16 when w is f16
                                xlo = round_to_f16(xlo);
                                xhi = round_to_f16(xhi);
                            }
                            [[unroll]] for (uint c = 0; c < NC; c++)
                                acc[r * NC + c] += dot(xlo, wlo[c]) + dot(xhi, whi[c]);
                        }
                    }
                }
            } else {
                for (uint k = lane; k < K; k += LANES) {
                    [[unroll]] for (uint c = 0; c < NC; c++) {
                        const float wv = n + c < N ? load_w(uint64_t(glu_row(n + c)) * K + k) : 0.0;
                        [[unroll]] for (uint r = 0; r < MR; r++)
                            if (r < rows)
                                acc[r * NC + c] = fma(load_x(uint64_t(m0 + r) * K + k), wv, acc[r * NC + c]);
                    }
                }
            }
            [[unroll]] for (uint i = 0; i < MR * NC; i++)
                part[(grp * MR * NC + i) * LANES + lane] = acc[i];
            barrier();
            const bool glu = pc.act == ACT_GLU;
            for (uint o = lane; o < MR * NC; o += LANES) {
                const uint r = o / NC, c = o % NC;
                if (r < rows && n + c < N && (!glu || c % 2u == 0u)) {
                    const uint base = (grp * MR * NC + o) * LANES;
                    float v = 0.0;
                    for (uint l = 0; l < LANES; l++)
                        v += part[base + l];
                    if (glu) { // the gate: column c + 1's sums (n + c even and N even: n + c + 1 < N)
                        float g = 0.0;
                        for (uint l = 0; l < LANES; l++)
                            g += part[base + LANES + l];
                        linear_epilogue_glu(m0 + r, (n + c) / 2u, v, g);
                    } else {
                        linear_epilogue(m0 + r, n + c, v);
                    }
                }
            }
            barrier(); // the next tile overwrites the partial sums
            continue;
        }
#endif
        float acc[MR];
        [[unroll]] for (uint r = 0; r < MR; r++)
            acc[r] = 0.0;
        if (n < N) {
#ifdef WQ
            const uint64_t wq = pc.w + uint64_t(glu_row(n)) * uint64_t(K / QB_K) * uint64_t(QB_BYTES);
            for (uint k = lane * 8u; k < K; k += LANES * 8u) {
                float wv[8];
                dequant8(wq, k, wv);
                const vec4 wlo = vec4(wv[0], wv[1], wv[2], wv[3]), whi = vec4(wv[4], wv[5], wv[6], wv[7]);
                [[unroll]] for (uint r = 0; r < MR; r++) {
                    if (r < rows) {
                        vec4 xlo, xhi;
                        load_x8(uint64_t(m0 + r) * K + k, vec, xlo, xhi);
                        acc[r] += dot(xlo, wlo) + dot(xhi, whi);
                    }
                }
            }
#else
            const uint64_t wrow = uint64_t(glu_row(n)) * K;
            if (vec) {
                for (uint k = lane * 8u; k < K; k += LANES * 8u) {
                    vec4 wlo, whi;
                    load8(pc.w, W16, wrow + k, wlo, whi);
                    [[unroll]] for (uint r = 0; r < MR; r++) {
                        if (r < rows) {
                            vec4 xlo, xhi;
                            load8(pc.x, X16, uint64_t(m0 + r) * K + k, xlo, xhi);
                            if (W16 && !X16) { // the op rounds an f32 x to f16 when w is f16
                                xlo = round_to_f16(xlo);
                                xhi = round_to_f16(xhi);
                            }
                            acc[r] += dot(xlo, wlo) + dot(xhi, whi);
                        }
                    }
                }
            } else {
                for (uint k = lane; k < K; k += LANES) {
                    const float wv = load_w(wrow + k);
                    [[unroll]] for (uint r = 0; r < MR; r++)
                        if (r < rows)
                            acc[r] = fma(load_x(uint64_t(m0 + r) * K + k), wv, acc[r]);
                }
            }
#endif
        }
        [[unroll]] for (uint r = 0; r < MR; r++)
            part[(grp * MR + r) * LANES + lane] = acc[r];
        barrier();
        // Epilogue (linear.glsl), in the reference's order.
        const bool glu = pc.act == ACT_GLU;
        if (lane < rows && n < N && (!glu || grp % 2u == 0u)) {
            const uint base = (grp * MR + lane) * LANES;
            float v = 0.0;
            for (uint l = 0; l < LANES; l++)
                v += part[base + l];
            if (glu) { // the gate: the next group's sums (n even and N even: n + 1 < N)
                const uint gbase = ((grp + 1u) * MR + lane) * LANES;
                float g = 0.0;
                for (uint l = 0; l < LANES; l++)
                    g += part[gbase + l];
                linear_epilogue_glu(m0 + lane, n / 2u, v, g);
            } else {
                linear_epilogue(m0 + lane, n, v);
            }
        }
        barrier(); // the next tile overwrites the partial sums
    }
}
