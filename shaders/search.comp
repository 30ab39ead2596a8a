#version 460
// search.comp — the device-resident greedy search's own kernels (src/backend/ops.h: the search ops).
// Every kernel reads hypothesis b's state from state[b] (search.glsl); a hypothesis that is done is
// skipped. Tensors arrive as addresses in push constants.
//
// -DJOINT: first the commit of the last emission's LSTM step (h_old[:, b] = h_new[:, b] where S_EMIT
//   is set), then z[b, r, :] = relu(f[F0_b + min(t_b + r, T_b - 1), :] + q[b, :]) for the W rows of a
//   window (f packs the hypotheses' frames: b's start at row F0_b): the arithmetic of op_binary (ADD,
//   ReLU, alpha = beta = 1). Grid-stride over the elements (x) and the hypotheses (y).
// -DSTEP: G workgroups per hypothesis (x: the chunk of columns, y: hypotheses; both grid-stride).
//   Phase 1: the token argmax (columns 0..V) and the duration argmax (V+1..J-1) of each of the
//   window's rows, WG / W invocations per row, first index on ties and NaN never winning as op_argmax.
//   With G > 1 the token columns are cut in G chunks (chunk 0 also takes the durations): a workgroup
//   writes its chunk's winners of each row to part [B, W, G] and counts itself in the state's
//   S_ARRIVED (an atomic after a device-scope memory barrier); the one that arrives last merges the G
//   winners of each row (the same comparison, so the result does not depend on G), sets the count
//   back to 0 and goes on alone. Phase 2: invocation 0 walks the rows as the host decoder does (spec
//   §6.4 TDT: a blank skips its duration, at least one frame; §6.5 RNN-T: a blank advances one frame)
//   until the first emission, appends it to the token ring, advances the frame by the max_symbols rule
//   and sets S_EMIT. Phase 3: on an emission, x0[b] = Emb[token] (the input of the LSTM steps gated by
//   S_EMIT).
// push: see PC; W is a power of two <= the workgroup size. spec 0: workgroup size (STEP: a power of two).
#include "core.glsl"
#include "search.glsl"
layout(local_size_x_id = 0) in;

#if defined(JOINT)

layout(push_constant) uniform PC {
    uint64_t f, q, z, h_old, h_new, state; // f [Tf, P]; q [B, P]; z [B*W, P]; h_old, h_new [L, B, P]
    uint P, W, B, Tf, L;
} pc;

void main() {
    // 32-bit element indices: W * P and L * P stay below 2^31 (ops.c bounds P).
    const uint P = pc.P, W = pc.W, B = pc.B;
    for (uint hyp = gl_WorkGroupID.y; hyp < B; hyp += gl_NumWorkGroups.y) {
        const uint64_t st = search_state(pc.state, hyp);
        if (LOADI(st, S_DONE) != 0)
            continue;
        if (LOADI(st, S_EMIT) != 0) { // commit: the LSTM state after the last emission becomes current
            for (uint i = gl_GlobalInvocationID.x; i < pc.L * P; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
                const uint l = i / P;
                const uint64_t o = (uint64_t(l) * uint64_t(B) + uint64_t(hyp)) * uint64_t(P) + uint64_t(i - l * P);
                STOREF(pc.h_old, o, LOADF(pc.h_new, o));
            }
        }
        const int t = LOADI(st, S_T), T = LOADI(st, S_FRAMES), f0 = LOADI(st, S_F0);
        const uint64_t z0 = uint64_t(hyp) * uint64_t(W), q0 = uint64_t(hyp) * P;
        for (uint i = gl_GlobalInvocationID.x; i < W * P; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
            const uint r = i / P, p = i - r * P;
            // the row of f, clamped into it: a bad state never reads outside f
            const uint64_t fr = uint64_t(clamp(f0 + min(t + int(r), T - 1), 0, int(pc.Tf) - 1));
            const float v = LOADF(pc.f, fr * P + p) + LOADF(pc.q, q0 + p);
            STOREF(pc.z, (z0 + r) * P + p, act_apply(v, ACT_RELU));
        }
    }
}

#elif defined(STEP)

layout(push_constant) uniform PC {
    uint64_t y, state, tokens, durations, embed, x0; // y [B*W, J]; tokens [B, capacity, 3]; x0 [B, P]
    uint64_t part;                                   // [B, W, G] ivec4 winners of the chunks (G > 1)
    uint64_t live;                                   // [1] hypotheses not done (0: not counted)
    uint B, W;
    int V, J, ND, max_symbols, capacity, P;
    uint G, unused;
} pc;

// A chunk's winners of a row: (token value bits, column, duration value bits, index), written by one
// workgroup and read by another of the same dispatch: coherent, around device-scope barriers.
layout(buffer_reference, std430, buffer_reference_align = 16) coherent buffer PartRef { ivec4 v; };

#define MAX_WINDOW 32 // SEARCH_MAX_WINDOW
shared float red_v[gl_WorkGroupSize.x], red_dv[gl_WorkGroupSize.x];
shared int red_i[gl_WorkGroupSize.x], red_di[gl_WorkGroupSize.x]; // -1: no candidate (empty or all NaN)
shared int row_tok[MAX_WINDOW], row_dur[MAX_WINDOW]; // per row: token argmax, duration (frames)
shared int emitted; // the token of this step's emission, -1: none
shared int last_group; // this workgroup arrived last among its hypothesis's G

// NaN test on the bits: a compiler assuming no NaN cannot fold it away.
bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }

// Does candidate (v, i) beat (bv, bi)? Larger value wins; equal values go to the lower column.
bool better(float v, int i, float bv, int bi) { return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi)); }

// Each row's candidates (red_*[tid], tpr invocations per row) to its lane 0 by a tree. Called by the
// whole workgroup after the candidates are written.
void reduce_rows(uint tid, uint lane, uint tpr) {
    barrier();
    for (uint s = tpr >> 1; s > 0u; s >>= 1) {
        if (lane < s) {
            if (better(red_v[tid + s], red_i[tid + s], red_v[tid], red_i[tid])) {
                red_v[tid] = red_v[tid + s];
                red_i[tid] = red_i[tid + s];
            }
            if (better(red_dv[tid + s], red_di[tid + s], red_dv[tid], red_di[tid])) {
                red_dv[tid] = red_dv[tid + s];
                red_di[tid] = red_di[tid + s];
            }
        }
        barrier();
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.x, W = pc.W, tpr = gl_WorkGroupSize.x / W;
    const uint r = tid / tpr, lane = tid % tpr;
    const int V = pc.V, J = pc.J, ND = pc.ND;
    const uint G = pc.G;
    const int cw = (V + int(G)) / int(G); // token columns per chunk
    // (hypothesis, chunk) pairs grid-stride: chunks in x, hypotheses in y
    for (uint hyp = gl_WorkGroupID.y; hyp < pc.B; hyp += gl_NumWorkGroups.y)
    for (uint g = gl_WorkGroupID.x; g < G; g += gl_NumWorkGroups.x) {
        const int c_lo = int(g) * cw, c_hi = min(c_lo + cw, V + 1); // this chunk's token columns
        const uint64_t st = search_state(pc.state, hyp);
        if (LOADI(st, S_DONE) != 0) { // the same value for the whole workgroup
            if (tid == 0u && g == 0u)
                STOREI(st, S_EMIT, 0);
            continue;
        }
        // The state's counters the walk updates, loaded now so that their latency overlaps the rows'
        // (only the last workgroup of the hypothesis writes them, after every other one arrived).
        int run = 0, last_t = 0, steps = 0, ntok = 0, iters = 0, span = 0;
        if (tid == 0u) {
            run = LOADI(st, S_RUN);
            last_t = LOADI(st, S_LAST_T);
            steps = LOADI(st, S_STEPS);
            ntok = LOADI(st, S_NTOK);
            iters = LOADI(st, S_ITERS);
            span = LOADI(st, S_SPAN);
        }
        const int t0 = LOADI(st, S_T), T = LOADI(st, S_FRAMES);
        const int n = min(int(W), T - t0);
        // Phase 1: each invocation scans its columns in increasing order (strict > keeps the first of
        // equal values), then a tree over the row's invocations.
        float bv = 0.0, dv = 0.0;
        int bi = -1, di = -1;
        if (int(r) < n) {
            const uint64_t row = (uint64_t(hyp) * uint64_t(W) + uint64_t(r)) * uint64_t(J);
            // eight columns' loads in flight at once (a window of 8 rows leaves 64 columns per
            // invocation of a 1024-wide group: one load at a time, their latencies added up)
            for (int c0 = c_lo + int(lane); c0 < c_hi; c0 += 8 * int(tpr)) {
                float v[8];
                [[unroll]] for (int u = 0; u < 8; u++) {
                    const int c = c0 + u * int(tpr);
                    v[u] = c < c_hi ? LOADF(pc.y, row + uint64_t(c)) : 0.0;
                }
                [[unroll]] for (int u = 0; u < 8; u++) {
                    const int c = c0 + u * int(tpr);
                    if (c < c_hi && !is_nan(v[u]) && (bi < 0 || v[u] > bv)) {
                        bv = v[u];
                        bi = c;
                    }
                }
            }
            for (int c = int(lane); g == 0u && c < ND; c += int(tpr)) {
                const float v = LOADF(pc.y, row + uint64_t(V + 1 + c));
                if (!is_nan(v) && (di < 0 || v > dv)) {
                    dv = v;
                    di = c;
                }
            }
        }
        red_v[tid] = bv;
        red_i[tid] = bi;
        red_dv[tid] = dv;
        red_di[tid] = di;
        reduce_rows(tid, lane, tpr);
        if (G > 1u) {
            // the chunk's winners out, then the count; the last to arrive merges every chunk's
            const uint64_t part = pc.part + (uint64_t(hyp) * uint64_t(W) + uint64_t(r)) * uint64_t(G) * 16ul;
            if (lane == 0u && int(r) < n)
                PartRef(part + uint64_t(g) * 16ul).v =
                    ivec4(floatBitsToInt(red_v[tid]), red_i[tid], floatBitsToInt(red_dv[tid]), red_di[tid]);
            memoryBarrierBuffer();
            barrier();
            if (tid == 0u) { // fences around the count: release the workgroup's winners, acquire the others'
                memoryBarrierBuffer();
                last_group = atomicAdd(I32Ref(st + uint64_t(S_ARRIVED) * 4ul).v, 1) == int(G) - 1 ? 1 : 0;
                memoryBarrierBuffer();
            }
            barrier();
            if (last_group == 0) // the same value for the whole workgroup
                continue;
            memoryBarrierBuffer();
            bv = dv = 0.0;
            bi = di = -1;
            if (int(r) < n) {
                for (uint k = lane; k < G; k += tpr) {
                    const ivec4 p = PartRef(part + uint64_t(k) * 16ul).v;
                    if (better(intBitsToFloat(p.x), p.y, bv, bi)) {
                        bv = intBitsToFloat(p.x);
                        bi = p.y;
                    }
                    if (better(intBitsToFloat(p.z), p.w, dv, di)) {
                        dv = intBitsToFloat(p.z);
                        di = p.w;
                    }
                }
            }
            red_v[tid] = bv;
            red_i[tid] = bi;
            red_dv[tid] = dv;
            red_di[tid] = di;
            reduce_rows(tid, lane, tpr);
            if (tid == 0u)
                STOREI(st, S_ARRIVED, 0); // every workgroup of the hypothesis has counted itself
        }
        if (lane == 0u && int(r) < n) {
            // all NaN -> 0, as op_argmax (clamped: a column read back from memory never indexes
            // outside Emb or the durations)
            row_tok[r] = clamp(red_i[tid], 0, V);
            // the duration itself (the walk below then reads no device memory)
            row_dur[r] = ND > 0 ? LOADI(pc.durations, clamp(red_di[tid], 0, ND - 1)) : 1;
        }
        barrier();
        // Phase 2: the walk to the first emission.
        if (tid == 0u) {
            int t = t0, token = -1, te = t0;
            while (t < t0 + n) {
                const int k = row_tok[t - t0];
                const int d = row_dur[t - t0];
                steps++;
                if (k == V) {
                    if (ND > 0) {
                        t += max(d, 1); // a blank with duration 0 advances one frame
                    } else {
                        t += 1;
                        run = 0;
                    }
                    continue;
                }
                const uint64_t slot = pc.tokens + (uint64_t(hyp) * uint64_t(pc.capacity) +
                                                  uint64_t(ntok % pc.capacity)) * 12ul;
                te = t;
                STOREI(slot, 0, k);
                STOREI(slot, 1, t);
                STOREI(slot, 2, d);
                STOREI(st, S_NTOK, ntok + 1);
                if (ND > 0) {
                    run = t == last_t ? run + 1 : 1;
                    last_t = t;
                    t += d; // d may be 0: stay on the frame
                    if (d == 0 && run >= pc.max_symbols)
                        t += 1; // cap on symbols emitted at one frame (NeMo label-looping)
                } else if (++run >= pc.max_symbols) {
                    t += 1;
                    run = 0;
                }
                STOREI(st, S_TOKEN, k);
                token = k;
                break;
            }
            emitted = token;
            STOREI(st, S_T, t);
            STOREI(st, S_RUN, run);
            STOREI(st, S_LAST_T, last_t);
            STOREI(st, S_STEPS, steps);
            STOREI(st, S_EMIT, token >= 0 && t < T ? 1 : 0); // no LSTM step after the last frame
            STOREI(st, S_DONE, t >= T ? 1 : 0);
            if (t >= T && pc.live != 0ul)
                atomicAdd(I32Ref(pc.live).v, -1);
            STOREI(st, S_ITERS, iters + 1);
            STOREI(st, S_SPAN, span + (token >= 0 ? te - t0 + 1 : n));
        }
        barrier();
        // Phase 3: the emitted token's embedding, the first LSTM layer's input.
        const int token = emitted;
        if (token >= 0) {
            const uint64_t P = uint64_t(pc.P), e0 = uint64_t(token) * P, x0 = uint64_t(hyp) * P;
            for (uint p = tid; p < uint(pc.P); p += gl_WorkGroupSize.x)
                STOREF(pc.x0, x0 + p, LOADF(pc.embed, e0 + p));
        }
        barrier(); // the next hypothesis rewrites the shared arrays
    }
}

#else
#error define JOINT or STEP
#endif
