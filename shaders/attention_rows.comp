#version 460
// attention_rows.comp — fused relative-position multi-head self-attention for CPU drivers (lavapipe):
// the same op as attention.comp (spec §5.1, the band |i - j| <= w or the chunked mask over key positions
// present in k and below n_valid, query positions >= n_valid get zeros), f32 arithmetic (q, k, v, p, y may be f16 in the
// F16_TYPES variant, attention.glsl), but with no shared memory and no barriers: one invocation owns one
// (query row, head) and walks its keys in order with an online softmax,
//   s_j = ((q_i + u_h).k_j + (q_i + v_h).p[center - (i - j)]) * scale,
//   m = running max, l = running sum of exp(s - m), acc = running sum of exp(s - m) v_j,
// rescaling l and acc when the max grows; y_i = acc / l. llvmpipe runs a workgroup's invocations as
// SIMD lanes and switches between them at every barrier, which the tiled GPU kernel pays for at each
// key block. Scores never reach memory: memory stays linear in T.
// Grid: x over query rows row0 .. row0 + groups*WG - 1, one row per invocation (the host records
// more dispatches when the device's grid cap is smaller: a grid-stride loop over rows here gave
// garbage on its second pass under lavapipe), y over heads (grid-stride). dk <= 256 (host-checked);
// spec 1: DK below; at most VK_ATT_ROWS_MAX_KEYS keys per row (host-checked).
// spec 2: VEC4, set by the host when D and dk are multiples of 4 and q, k, v, p are 16-byte aligned:
// the rows are read 4 elements at a time (one 16-byte load of f32, one 8-byte load of f16) into vec4
// registers: a quarter of the loads, which llvmpipe makes per lane (figures: docs/gpu-results.md,
// "Without a GPU: lavapipe"). The products are summed in the scalar loops' order, so results are
// bit-identical (a row chunk whose rows are not 16-byte aligned takes the scalar loops).
// Loop counters are 32-bit (lavapipe loses work with 64-bit counters that differ between invocations
// inside other loops); offsets are 64-bit. push: attention.glsl (the flags word holds the dispatch's
// first row). spec 0: workgroup size; 7: tensor types.
#ifdef F16_TYPES
#define HAS_F16
#endif
#include "core.glsl"
#include "attention.glsl"
layout(local_size_x_id = 0) in;

// llvmpipe stops an invocation's loops after 65535 iterations in total (Mesa's
// LP_MAX_TGSI_LOOP_ITERATIONS) without an error; the loops over dk per key reach that at about 650 keys
// of a 44-wide head. For rows with more keys the host sets DK, the head width as a specialization
// constant, and the loops over it are unrolled when the pipeline is made: only the key loop counts
// (the host keeps keys per row below the limit). DK 0 (short rows): plain loops over pc.dk, a pipeline
// for every head width without the compile time of unrolled ones.
layout(constant_id = 1) const uint DK = 0;
layout(constant_id = 2) const bool VEC4 = false;
const uint DKA = DK > 0u ? DK : 256u; // register arrays
const uint DKA4 = (DKA + 3u) / 4u;    // ... of vec4

// The online softmax over key positions [j0, j1) of one (row, head), with loops of ND over the head
// width in chunks (UNROLL: [[unroll]] or nothing; the hint must not reach loops of unknown trip count,
// which the driver would unroll to the arrays' size with guards). DOT(d) adds chunk d's products to
// ac and bd, V_AT(d) is v's chunk d; qu, qv and acc hold one chunk per element: floats (DOT1, V1), or
// vec4 (DOT4, V4: VEC4), whose products are summed in the scalar loops' order.
#define ATTEND_KEYS(ND, UNROLL, DOT, V_AT)                                                         \
    for (uint j = j0; j < j1; j++) {                                                               \
        const uint64_t kb = uint64_t(j - pc.k0) * D + hc;                                          \
        const uint64_t pb = uint64_t(ATT_CENTER + j - pi) * D + hc; /* row center - (pi - j) */     \
        float ac = 0.0, bd = 0.0;                                                                  \
        UNROLL for (uint d = 0; d < ND; d++) {                                                     \
            DOT(d)                                                                                 \
        }                                                                                          \
        const float s = (ac + bd) * pc.scale;                                                      \
        if (s > m) {                                                                               \
            const float c = exp(m - s);                                                            \
            l *= c;                                                                                \
            UNROLL for (uint d = 0; d < ND; d++)                                                   \
                acc[d] *= c;                                                                       \
            m = s;                                                                                 \
        }                                                                                          \
        const float e = exp(s - m);                                                                \
        l += e;                                                                                    \
        UNROLL for (uint d = 0; d < ND; d++)                                                       \
            acc[d] += e * V_AT(d);                                                                 \
    }
#define DOT1(d)                                                                                    \
    ac += qu[d] * att_load(pc.k, kb + d, K16);                                                     \
    bd += qv[d] * att_load(pc.p, pb + d, P16);
#define V1(d) att_load(pc.v, kb + d, V16)
#define DOT4(c)                                                                                    \
    const vec4 k4 = load4(pc.k, kb + 4u * c, K16), p4 = load4(pc.p, pb + 4u * c, P16);              \
    ac += qu[c].x * k4.x;                                                                          \
    bd += qv[c].x * p4.x;                                                                          \
    ac += qu[c].y * k4.y;                                                                          \
    bd += qv[c].y * p4.y;                                                                          \
    ac += qu[c].z * k4.z;                                                                          \
    bd += qv[c].z * p4.z;                                                                          \
    ac += qu[c].w * k4.w;                                                                          \
    bd += qv[c].w * p4.w;
#define V4(c) load4(pc.v, kb + 4u * c, V16)

// Elements off .. off+3 of a tensor of type h16 (VEC4: 16-byte aligned f32, 8-byte aligned f16).
vec4 load4(uint64_t base, uint64_t off, bool h16) {
#ifdef F16_TYPES
    if (h16) {
        const uvec2 u = U2Ref(base + off * 2ul).v;
        return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    }
#endif
    return V4Ref(base + off * 4ul).v;
}

// The running max starts at a finite sentinel (no infinities: fast-math drivers may mishandle them);
// the first key's exp(sentinel - s) is 0.
#define NO_MAX (-3.0e38)

void main() {
    const uint dk = pc.dk;
    const uint64_t D = uint64_t(pc.D);
    const uint i = pc.flags + gl_GlobalInvocationID.x; // row of q
    if (i >= pc.Tq)
        return;
    // its position (a table's: clamped below 2^30 like every position the host passes)
    const uint pi = pc.qpos != 0ul ? uint(clamp(LOADL(pc.qpos, i), 0l, int64_t(0x3fffffff))) : pc.q0 + i;
    for (uint h = gl_WorkGroupID.y; h < ATT_H; h += gl_NumWorkGroups.y) {
        const uint64_t hc = uint64_t(h) * dk;
        const uint64_t yo = uint64_t(i) * D + hc;
        if (pi >= pc.n_valid) {
            for (uint d = 0; d < dk; d++)
                att_store_y(yo + d, 0.0);
            continue;
        }
        uint j0, j1;
        att_row_keys(pi, j0, j1);
        float m = NO_MAX, l = 0.0;
        if (VEC4) {
            vec4 qu[DKA4], qv[DKA4], acc[DKA4];
            for (uint c = 0; c < dk / 4u; c++) {
                const vec4 q4 = load4(pc.q, yo + 4u * c, Q16);
                const vec4 bu = vec4(LOADF(pc.bu, hc + 4u * c), LOADF(pc.bu, hc + 4u * c + 1u),
                                     LOADF(pc.bu, hc + 4u * c + 2u), LOADF(pc.bu, hc + 4u * c + 3u));
                const vec4 bv = vec4(LOADF(pc.bv, hc + 4u * c), LOADF(pc.bv, hc + 4u * c + 1u),
                                     LOADF(pc.bv, hc + 4u * c + 2u), LOADF(pc.bv, hc + 4u * c + 3u));
                qu[c] = q4 + bu;
                qv[c] = q4 + bv;
                acc[c] = vec4(0.0);
            }
            if (DK > 0u) {
                ATTEND_KEYS(DK / 4u, [[unroll]], DOT4, V4)
            } else {
                ATTEND_KEYS(dk / 4u, , DOT4, V4)
            }
            for (uint c = 0; c < dk / 4u; c++)
                [[unroll]] for (uint e = 0; e < 4u; e++)
                    att_store_y(yo + 4u * c + e, acc[c][e] / l);
        } else {
            float qu[DKA], qv[DKA], acc[DKA];
            for (uint d = 0; d < dk; d++) {
                const float qd = att_load(pc.q, yo + d, Q16);
                qu[d] = qd + LOADF(pc.bu, hc + d);
                qv[d] = qd + LOADF(pc.bv, hc + d);
                acc[d] = 0.0;
            }
            if (DK > 0u) {
                ATTEND_KEYS(DK, [[unroll]], DOT1, V1)
            } else {
                ATTEND_KEYS(dk, , DOT1, V1)
            }
            for (uint d = 0; d < dk; d++)
                att_store_y(yo + d, acc[d] / l);
        }
    }
}
