#version 460
// lstm.comp — one LSTM step (PyTorch gate order i, f, g, o) in one launch:
//   G[q*P + j] = b[q*P + j] + w_ih[q*P + j, :] . x + w_hh[q*P + j, :] . h      (q = 0..3)
//   c_out[j] = sigmoid(G_f) * c[j] + sigmoid(G_i) * tanh(G_g);  h_out[j] = sigmoid(G_o) * tanh(c_out[j])
// A workgroup owns hidden unit j (grid-stride over j): its threads stride over In and P for the four
// gate rows at once (loads contiguous across the workgroup), a shared-memory tree sums the partials,
// and thread 0 applies the cell update. h_out / c_out are only written, never read; c_out may alias c
// (unit j reads c[j] before writing c_out[j], and no other workgroup touches index j).
// No subgroup operations: the reduction works for any subgroup and workgroup size.
// Per-invocation loop counters are 32-bit (the host checks In, P <= 2^30): Mesa 22.3's lavapipe loses
// work with 64-bit loop counters that differ between invocations inside other loops. Offsets are 64-bit.
// push: see PC. spec 0: workgroup size.
#include "core.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t x, h, c, w_ih, w_hh, b, h_out, c_out;
    int64_t in_dim, p;
} pc;

shared vec4 red[gl_WorkGroupSize.x];

void main() {
    const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint64_t P = uint64_t(pc.p), IN = uint64_t(pc.in_dim);
    // Largest power of two below wg: first stride of a tree that also handles non-power-of-two sizes.
    const uint first = wg > 1u ? 1u << findMSB(wg - 1u) : 0u;
    for (uint64_t j = gl_WorkGroupID.x; j < P; j += gl_NumWorkGroups.x) {
        vec4 acc = vec4(0.0);
        const uint64_t ri = j * IN, rh = j * P; // row j of each gate block; gate q adds q*P rows
        for (uint k = lid; k < uint(pc.in_dim); k += wg) {
            const float xv = LOADF(pc.x, k);
            acc.x += LOADF(pc.w_ih, ri + k) * xv;
            acc.y += LOADF(pc.w_ih, ri + P * IN + k) * xv;
            acc.z += LOADF(pc.w_ih, ri + 2ul * P * IN + k) * xv;
            acc.w += LOADF(pc.w_ih, ri + 3ul * P * IN + k) * xv;
        }
        for (uint k = lid; k < uint(pc.p); k += wg) {
            const float hv = LOADF(pc.h, k);
            acc.x += LOADF(pc.w_hh, rh + k) * hv;
            acc.y += LOADF(pc.w_hh, rh + P * P + k) * hv;
            acc.z += LOADF(pc.w_hh, rh + 2ul * P * P + k) * hv;
            acc.w += LOADF(pc.w_hh, rh + 3ul * P * P + k) * hv;
        }
        red[lid] = acc;
        barrier();
        for (uint s = first; s > 0u; s >>= 1) {
            if (lid < s && lid + s < wg)
                red[lid] += red[lid + s];
            barrier();
        }
        if (lid == 0u) {
            const vec4 g = red[0] + vec4(LOADF(pc.b, j), LOADF(pc.b, P + j), LOADF(pc.b, 2ul * P + j),
                                         LOADF(pc.b, 3ul * P + j));
            const float ig = sigmoid_f(g.x), fg = sigmoid_f(g.y), gg = tanh_f(g.z), og = sigmoid_f(g.w);
            const float cn = fg * LOADF(pc.c, j) + ig * gg;
            STOREF(pc.c_out, j, cn);
            STOREF(pc.h_out, j, og * tanh_f(cn));
        }
        // red[0] is read above; no thread may overwrite red before that read of the next j.
        barrier();
    }
}
