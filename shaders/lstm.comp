#version 460
#ifdef SG
#extension GL_KHR_shader_subgroup_shuffle_relative : require
#endif
// lstm.comp — one LSTM step (PyTorch gate order i, f, g, o) of B rows in one launch (ops.h op_lstm_step):
//   G[q*P + j] = b[q*P + j] + w_ih[q*P + j, :] . x + w_hh[q*P + j, :] . h      (q = 0..3)
//   c_out[j] = sigmoid(G_f) * c[j] + sigmoid(G_i) * tanh(G_g);  h_out[j] = sigmoid(G_o) * tanh(c_out[j])
// A group of LPU consecutive invocations ("lanes") owns hidden unit j (grid-stride over blocks of WG /
// LPU units); its lanes stride over In and P for the four gate rows at once (contiguous loads, 4 columns
// at a time with FLAG_VEC), a tree in shared memory adds their sums, and lane 0 applies the cell update
// (its bias and cell state loaded before the sums). LPU is 32 on a GPU, 1 on a CPU driver (64-wide
// workgroups: every workgroup and barrier costs there; figures: docs/gpu-results.md, "Decoder").
// c_out may alias c (unit j reads c[j] before writing c_out[j]). -DSG (subgroups of LPU = 32 with
// shuffles): the tree through subgroup shuffles, the same additions in the same order, no barriers and
// no shared memory; without it nothing depends on the subgroup size.
// A workgroup takes HB rows at a time (grid y, grid-stride), each weight load serving all of them; a
// row's sums depend on LPU only, so a batch computes each row exactly as alone. A block of rows whose
// gates are all closed skips its work (gates read by every invocation before any barrier).
// Loop counters are 32-bit (the host checks In, P <= 2^30): Mesa 22.3's lavapipe loses work with 64-bit
// counters that differ between invocations inside other loops. Offsets are 64-bit.
// -DWQ_<type> (dequant.glsl): w_ih and w_hh hold quantized blocks (In, P multiples of QB_K); a lane
// sweeps 8-weight pieces (k = 8 lane + 8 LPU i) dequantized to the host's f32 values. -DW16: f16 weights
// widened exactly (x and h stay f32); FLAG_VEC8 (In, P multiples of 8) loads 8 in 16 bytes, as the
// quantized path does.
// push: see PC. spec 0: workgroup size; 1: LPU, a power of two dividing it; 2: HB, rows per workgroup.
#ifdef W16
#define HAS_F16
#endif
#include "core.glsl"
#include "dequant.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t x, h, c, w_ih, w_hh, b, h_out, c_out, gate;
    int64_t in_dim, p;
    uint flags;
    uint rows;          // B
    int64_t gate_stride;
} pc;

#define FLAG_VEC 1u // In % 4 == 0, P % 4 == 0, x, h, w_ih, w_hh 16-byte aligned: vec4 loads (f16 w: 4 per load)
#define FLAG_VEC8 2u // also In % 8 == 0, P % 8 == 0: f16 w 8 per load (-DW16)

layout(constant_id = 1) const uint LPU = 32;
layout(constant_id = 2) const uint HB = 1;
#ifndef SG
shared vec4 part[gl_WorkGroupSize.x * HB];
#endif

#ifdef W16
// w4: 4 consecutive weights at byte address a (f16: 8-byte aligned), widened; LOADW: the weight at element i
vec4 w4(uint64_t a) {
    const uvec2 u = U2Ref(a).v;
    return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
}
#define WB 2ul // bytes per weight
// x[0..7] (two vec4) . the 8 f16 weights of u, each widened exactly
float dot8h(vec4 lo, vec4 hi, uvec4 u) {
    return dot(lo, vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y))) + dot(hi, vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w)));
}
#define LOADW(base, i) LOADH(base, i)
#else
vec4 w4(uint64_t a) { return V4Ref(a).v; }
#define WB 4ul
#define LOADW(base, i) LOADF(base, i)
#endif

#ifdef WQ
// x[0..7] . w[0..7] for x in two vec4
float dot8(vec4 lo, vec4 hi, float w[8]) {
    return dot(lo, vec4(w[0], w[1], w[2], w[3])) + dot(hi, vec4(w[4], w[5], w[6], w[7]));
}
#endif

void main() {
    const uint tid = gl_LocalInvocationID.x, lane = tid % LPU, grp = tid / LPU;
    const uint NG = gl_WorkGroupSize.x / LPU;
    const uint in_dim = uint(pc.in_dim), p = uint(pc.p);
    const uint64_t P = uint64_t(pc.p), IN = uint64_t(pc.in_dim);
    for (uint rb = gl_WorkGroupID.y * HB; rb < pc.rows; rb += gl_NumWorkGroups.y * HB) {
        const uint nr = min(HB, pc.rows - rb); // rows of this block: rb .. rb + nr - 1
        bool open[HB];
        bool any = false;
        [[unroll]] for (uint r = 0; r < HB; r++) {
            open[r] = r < nr && (pc.gate == 0ul || LOADI(pc.gate, uint64_t(rb + r) * uint64_t(pc.gate_stride)) != 0);
            any = any || open[r];
        }
        if (!any) // the same for the whole workgroup
            continue;
    for (uint jb = gl_WorkGroupID.x * NG; jb < p; jb += gl_NumWorkGroups.x * NG) {
        const uint j = jb + grp;
        vec4 acc[HB];
        [[unroll]] for (uint r = 0; r < HB; r++)
            acc[r] = vec4(0.0);
        // the cell update's other inputs, loaded before the sums so that their latency overlaps them
        vec4 bias = vec4(0.0);
        float c_old[HB];
        [[unroll]] for (uint r = 0; r < HB; r++)
            c_old[r] = 0.0;
        if (lane == 0u && j < p) {
            bias = vec4(LOADF(pc.b, j), LOADF(pc.b, P + j), LOADF(pc.b, 2ul * P + j), LOADF(pc.b, 3ul * P + j));
            [[unroll]] for (uint r = 0; r < HB; r++)
                if (open[r])
                    c_old[r] = LOADF(pc.c, uint64_t(rb + r) * P + j);
        }
        if (j < p) {
#ifdef WQ
            for (uint src = 0u; src < 2u; src++) { // w_ih . x, then w_hh . h
                const uint kd = src == 0u ? in_dim : p;
                const uint64_t v = src == 0u ? pc.x : pc.h, KD = uint64_t(kd);
                const uint64_t rowb = uint64_t(kd / QB_K) * uint64_t(QB_BYTES), g = P * rowb; // a row, a gate block
                const uint64_t row = (src == 0u ? pc.w_ih : pc.w_hh) + uint64_t(j) * rowb;
                for (uint k = 8u * lane; k < kd; k += 8u * LPU) {
                    float a0[8], a1[8], a2[8], a3[8];
                    dequant8(row, k, a0);
                    dequant8(row + g, k, a1);
                    dequant8(row + 2ul * g, k, a2);
                    dequant8(row + 3ul * g, k, a3);
                    [[unroll]] for (uint r = 0; r < HB; r++) {
                        if (r < nr) {
                            const uint64_t o = uint64_t(rb + r) * KD + uint64_t(k);
                            vec4 lo, hi;
                            if ((pc.flags & FLAG_VEC) != 0u) {
                                lo = V4Ref(v + o * 4ul).v;
                                hi = V4Ref(v + o * 4ul + 16ul).v;
                            } else {
                                lo = vec4(LOADF(v, o), LOADF(v, o + 1ul), LOADF(v, o + 2ul), LOADF(v, o + 3ul));
                                hi = vec4(LOADF(v, o + 4ul), LOADF(v, o + 5ul), LOADF(v, o + 6ul), LOADF(v, o + 7ul));
                            }
                            acc[r] += vec4(dot8(lo, hi, a0), dot8(lo, hi, a1), dot8(lo, hi, a2), dot8(lo, hi, a3));
                        }
                    }
                }
            }
#else
            const uint64_t ri = uint64_t(j) * IN, rh = uint64_t(j) * P; // row j of each gate block
#ifdef W16
            if ((pc.flags & FLAG_VEC8) != 0u) {
                // 8 consecutive f16 weights per gate row and load (16 bytes): half the loop steps
                for (uint src = 0u; src < 2u; src++) { // w_ih . x, then w_hh . h
                    const uint kd = src == 0u ? in_dim : p;
                    const uint64_t v = src == 0u ? pc.x : pc.h, KD = uint64_t(kd), g = P * KD * 2ul;
                    const uint64_t row = (src == 0u ? pc.w_ih : pc.w_hh) + (src == 0u ? ri : rh) * 2ul;
                    for (uint k = 8u * lane; k < kd; k += 8u * LPU) {
                        const uint64_t o = row + uint64_t(k) * 2ul;
                        const uvec4 u0 = U4Ref(o).v, u1 = U4Ref(o + g).v, u2 = U4Ref(o + 2ul * g).v,
                                    u3 = U4Ref(o + 3ul * g).v;
                        [[unroll]] for (uint r = 0; r < HB; r++) {
                            if (r < nr) {
                                const uint64_t xo = (uint64_t(rb + r) * KD + uint64_t(k)) * 4ul;
                                const vec4 lo = V4Ref(v + xo).v, hi = V4Ref(v + xo + 16ul).v;
                                acc[r] += vec4(dot8h(lo, hi, u0), dot8h(lo, hi, u1), dot8h(lo, hi, u2), dot8h(lo, hi, u3));
                            }
                        }
                    }
                }
            } else
#endif
            if ((pc.flags & FLAG_VEC) != 0u) {
                // 4 consecutive columns per load (byte offsets: element offsets * 4)
                for (uint k = 4u * lane; k < in_dim; k += 4u * LPU) {
                    const uint64_t o = pc.w_ih + (ri + k) * WB, g = P * IN * WB;
                    const vec4 w0 = w4(o), w1 = w4(o + g), w2 = w4(o + 2ul * g), w3 = w4(o + 3ul * g);
                    [[unroll]] for (uint r = 0; r < HB; r++) {
                        if (r < nr) {
                            const vec4 xv = V4Ref(pc.x + (uint64_t(rb + r) * IN + uint64_t(k)) * 4ul).v;
                            acc[r] += vec4(dot(w0, xv), dot(w1, xv), dot(w2, xv), dot(w3, xv));
                        }
                    }
                }
                for (uint k = 4u * lane; k < p; k += 4u * LPU) {
                    const uint64_t o = pc.w_hh + (rh + k) * WB, g = P * P * WB;
                    const vec4 w0 = w4(o), w1 = w4(o + g), w2 = w4(o + 2ul * g), w3 = w4(o + 3ul * g);
                    [[unroll]] for (uint r = 0; r < HB; r++) {
                        if (r < nr) {
                            const vec4 hv = V4Ref(pc.h + (uint64_t(rb + r) * P + uint64_t(k)) * 4ul).v;
                            acc[r] += vec4(dot(w0, hv), dot(w1, hv), dot(w2, hv), dot(w3, hv));
                        }
                    }
                }
            } else {
            for (uint k = lane; k < in_dim; k += LPU) {
                const vec4 wv = vec4(LOADW(pc.w_ih, ri + k), LOADW(pc.w_ih, ri + P * IN + k),
                                     LOADW(pc.w_ih, ri + 2ul * P * IN + k), LOADW(pc.w_ih, ri + 3ul * P * IN + k));
                [[unroll]] for (uint r = 0; r < HB; r++) {
                    if (r < nr) {
                        const float xv = LOADF(pc.x, uint64_t(rb + r) * IN + k);
                        acc[r].x += wv.x * xv;
                        acc[r].y += wv.y * xv;
                        acc[r].z += wv.z * xv;
                        acc[r].w += wv.w * xv;
                    }
                }
            }
            for (uint k = lane; k < p; k += LPU) {
                const vec4 wv = vec4(LOADW(pc.w_hh, rh + k), LOADW(pc.w_hh, rh + P * P + k),
                                     LOADW(pc.w_hh, rh + 2ul * P * P + k), LOADW(pc.w_hh, rh + 3ul * P * P + k));
                [[unroll]] for (uint r = 0; r < HB; r++) {
                    if (r < nr) {
                        const float hv = LOADF(pc.h, uint64_t(rb + r) * P + k);
                        acc[r].x += wv.x * hv;
                        acc[r].y += wv.y * hv;
                        acc[r].z += wv.z * hv;
                        acc[r].w += wv.w * hv;
                    }
                }
            }
            }
#endif
        }
#ifdef SG
        // the tree through subgroup shuffles: lane l < s adds lane l + s's sum as the shared tree does
        // (the same additions, so the same bits), without shared memory or barriers
        for (uint s = LPU / 2u; s > 0u; s >>= 1) {
            [[unroll]] for (uint r = 0; r < HB; r++)
                acc[r] += subgroupShuffleDown(acc[r], s);
        }
#define PART(r) acc[r]
#else
        [[unroll]] for (uint r = 0; r < HB; r++)
            part[r * gl_WorkGroupSize.x + tid] = acc[r];
        barrier();
        for (uint s = LPU / 2u; s > 0u; s >>= 1) {
            if (lane < s) {
                [[unroll]] for (uint r = 0; r < HB; r++)
                    part[r * gl_WorkGroupSize.x + tid] += part[r * gl_WorkGroupSize.x + tid + s];
            }
            barrier();
        }
#define PART(r) part[(r) * gl_WorkGroupSize.x + tid]
#endif
        if (lane == 0u && j < p) {
            [[unroll]] for (uint r = 0; r < HB; r++) {
                if (open[r]) {
                    const vec4 g = PART(r) + bias;
                    const float ig = sigmoid_f(g.x), fg = sigmoid_f(g.y), gg = tanh_f(g.z), og = sigmoid_f(g.w);
                    const uint64_t o = uint64_t(rb + r) * P + j;
                    const float cn = fg * c_old[r] + ig * gg;
                    STOREF(pc.c_out, o, cn);
                    STOREF(pc.h_out, o, og * tanh_f(cn));
                }
            }
        }
#ifndef SG
        barrier(); // the next block overwrites the partial sums
#endif
    }
    }
}
