#version 460
// lstm.comp — one LSTM step (PyTorch gate order i, f, g, o) in one launch:
//   G[q*P + j] = b[q*P + j] + w_ih[q*P + j, :] . x + w_hh[q*P + j, :] . h      (q = 0..3)
//   c_out[j] = sigmoid(G_f) * c[j] + sigmoid(G_i) * tanh(G_g);  h_out[j] = sigmoid(G_o) * tanh(c_out[j])
// A group of LPU consecutive invocations ("lanes") owns hidden unit j; a workgroup holds WG / LPU
// groups and loops grid-stride over blocks of WG / LPU units. The group's lanes stride over In and P
// for the four gate rows at once (each row is contiguous, so a group's loads are too), a tree in
// shared memory adds their partial sums, and lane 0 applies the cell update. The host picks LPU: the
// whole workgroup on a GPU (many loads in flight per unit), 32 lanes on a CPU driver, where every
// barrier makes llvmpipe switch between invocations (one unit per 256-wide workgroup cost lavapipe
// ~9 ms per step at P = 256, eight units 2.5 ms). h_out / c_out are only written, never read; c_out
// may alias c (unit j reads c[j] before writing c_out[j], and no other invocation touches index j).
// No subgroup operations: groups are plain ranges of invocations, for any subgroup size.
// Per-invocation loop counters are 32-bit (the host checks In, P <= 2^30): Mesa 22.3's lavapipe loses
// work with 64-bit loop counters that differ between invocations inside other loops. Offsets are 64-bit.
// -DSEARCH: the device-resident search's layer step (op search_lstm): the same unit code, with the
// tensors taken from the search's argument block for the hypotheses (workgroup y, grid-stride) whose
// S_EMIT is set: input Emb[S_TOKEN] (layer 0) or the layer below's new h, state read from side
// S_SIDE ^ 1 and written to side S_SIDE; the top layer also writes g (the projection's input).
// push: see PC. spec 0: workgroup size; 1: LPU, a power of two dividing it.
#include "core.glsl"
#ifdef SEARCH
#include "search.glsl"
#endif
layout(local_size_x_id = 0) in;
#ifdef SEARCH
layout(push_constant) uniform PC {
    uint64_t args;
    uint layer;
    uint unused;
} pc;
#else
layout(push_constant) uniform PC {
    uint64_t x, h, c, w_ih, w_hh, b, h_out, c_out;
    int64_t in_dim, p;
} pc;
#endif

layout(constant_id = 1) const uint LPU = 32;
shared vec4 part[gl_WorkGroupSize.x];

// The step for every hidden unit; g (0: none) receives a copy of h_out. Called by whole workgroups.
void lstm_step(uint64_t x, uint64_t h, uint64_t c, uint64_t w_ih, uint64_t w_hh, uint64_t b, uint64_t h_out,
               uint64_t c_out, uint64_t g, uint in_dim, uint p) {
    const uint tid = gl_LocalInvocationID.x, lane = tid % LPU, grp = tid / LPU;
    const uint NG = gl_WorkGroupSize.x / LPU;
    const uint64_t P = uint64_t(p), IN = uint64_t(in_dim);
    for (uint jb = gl_WorkGroupID.x * NG; jb < p; jb += gl_NumWorkGroups.x * NG) {
        const uint j = jb + grp;
        vec4 acc = vec4(0.0);
        if (j < p) {
            const uint64_t ri = uint64_t(j) * IN, rh = uint64_t(j) * P; // row j of each gate block
            for (uint k = lane; k < in_dim; k += LPU) {
                const float xv = LOADF(x, k);
                acc.x += LOADF(w_ih, ri + k) * xv;
                acc.y += LOADF(w_ih, ri + P * IN + k) * xv;
                acc.z += LOADF(w_ih, ri + 2ul * P * IN + k) * xv;
                acc.w += LOADF(w_ih, ri + 3ul * P * IN + k) * xv;
            }
            for (uint k = lane; k < p; k += LPU) {
                const float hv = LOADF(h, k);
                acc.x += LOADF(w_hh, rh + k) * hv;
                acc.y += LOADF(w_hh, rh + P * P + k) * hv;
                acc.z += LOADF(w_hh, rh + 2ul * P * P + k) * hv;
                acc.w += LOADF(w_hh, rh + 3ul * P * P + k) * hv;
            }
        }
        part[tid] = acc;
        barrier();
        for (uint s = LPU / 2u; s > 0u; s >>= 1) {
            if (lane < s)
                part[tid] += part[tid + s];
            barrier();
        }
        if (lane == 0u && j < p) {
            const vec4 gt = part[tid] + vec4(LOADF(b, j), LOADF(b, P + j), LOADF(b, 2ul * P + j),
                                             LOADF(b, 3ul * P + j));
            const float ig = sigmoid_f(gt.x), fg = sigmoid_f(gt.y), gg = tanh_f(gt.z), og = sigmoid_f(gt.w);
            const float cn = fg * LOADF(c, j) + ig * gg;
            const float hn = og * tanh_f(cn);
            STOREF(c_out, j, cn);
            STOREF(h_out, j, hn);
            if (g != 0ul)
                STOREF(g, j, hn);
        }
        barrier(); // the next block overwrites the partial sums
    }
}

void main() {
#ifdef SEARCH
    SearchArgs a = SearchArgs(pc.args);
    const uint l = pc.layer, B = uint(a.hyps);
    const uint64_t P = uint64_t(a.P), F = 4ul;
    for (uint hyp = gl_WorkGroupID.y; hyp < B; hyp += gl_NumWorkGroups.y) {
        const uint64_t st = search_state(a, hyp);
        if (LOADI(st, S_EMIT) == 0) // the same value for the whole workgroup
            continue;
        const int side = LOADI(st, S_SIDE) & 1, old = side ^ 1;
        const uint64_t plane = (uint64_t(l) * uint64_t(B) + uint64_t(hyp)) * P * F; // bytes into h / c
        const uint64_t x = l == 0u ? a.embed + uint64_t(LOADI(st, S_TOKEN)) * P * F
                                   : a.h[side] + (uint64_t(l - 1u) * uint64_t(B) + uint64_t(hyp)) * P * F;
        const uint64_t g = l + 1u == uint(a.layers) ? a.g + uint64_t(hyp) * P * F : 0ul;
        lstm_step(x, a.h[old] + plane, a.c[old] + plane, a.w_ih[l], a.w_hh[l], a.b[l], a.h[side] + plane,
                  a.c[side] + plane, g, uint(a.P), uint(a.P));
    }
#else
    lstm_step(pc.x, pc.h, pc.c, pc.w_ih, pc.w_hh, pc.b, pc.h_out, pc.c_out, 0ul, uint(pc.in_dim), uint(pc.p));
#endif
}
