#version 460
// attention_rows_group.comp — relative-position attention for query rows with few keys each on GPUs:
// the streaming step's form (query positions from a table, each stream's [cache | chunk] keys under the
// chunked mask: some 70 keys a row). The same op and results (up to f32 summation order) as
// attention_rows.comp, whose one invocation per (row, head) walks its keys and head width serially;
// here a workgroup of 32 invocations owns one (row, head), its lanes splitting the head width (lane l:
// elements l, l + 32, ...), and takes the row's keys 32 at a time:
//   1. each lane sums its elements' products for each of the 32 keys, s_j = ((q + u).k_j + (q + v).p_j),
//      into shared memory; lane j then adds key j's 32 lane sums in lane order;
//   2. every lane reads the 32 scores, updates the running max m and sum l of the online softmax, and
//      accumulates exp(s_j - m) v_j for its elements (v's rows read by the 32 lanes together).
// A row's sums do not depend on the other rows of the call: a stream's results stay the same whoever
// shares its step. Grid: x over query rows from the dispatch's first row (the flags word, as
// attention_rows.comp; the host records more dispatches beyond the device's grid cap), y over heads
// (grid-stride). dk <= 256. push: attention.glsl. spec 0: workgroup size (32); 3: the chunked mask;
// 7: tensor types.
#ifdef F16_TYPES
#define HAS_F16
#endif
#include "core.glsl"
#include "attention.glsl"
layout(local_size_x_id = 0) in;

#define LANES 32u
#define KB 32u                // keys per block
#define NE 8u                 // head-width elements per lane: dk <= 256
#define NO_MAX (-3.0e38)      // finite sentinel: no infinities (fast-math drivers)

shared float part[KB][LANES + 1u]; // [key][lane] partial scores (padded: lane j reads row j)
shared float score[KB];

void main() {
    const uint lane = gl_LocalInvocationID.x;
    const uint dk = pc.dk;
    const uint64_t D = uint64_t(pc.D);
    const uint i = pc.flags + gl_WorkGroupID.x; // row of q (uniform in the workgroup)
    if (i >= pc.Tq)
        return;
    const uint pi = pc.qpos != 0ul ? uint(clamp(LOADL(pc.qpos, i), 0l, int64_t(0x3fffffff))) : pc.q0 + i;
    for (uint h = gl_WorkGroupID.y; h < ATT_H; h += gl_NumWorkGroups.y) {
        const uint64_t hc = uint64_t(h) * dk;
        const uint64_t yo = uint64_t(i) * D + hc;
        if (pi >= pc.n_valid) {
            for (uint d = lane; d < dk; d += LANES)
                att_store_y(yo + d, 0.0);
            continue;
        }
        uint j0, j1;
        att_row_keys(pi, j0, j1);
        float qu[NE], qv[NE], acc[NE];
        [[unroll]] for (uint c = 0; c < NE; c++) {
            const uint d = lane + LANES * c;
            const float qd = d < dk ? att_load(pc.q, yo + d, Q16) : 0.0;
            qu[c] = d < dk ? qd + LOADF(pc.bu, hc + d) : 0.0;
            qv[c] = d < dk ? qd + LOADF(pc.bv, hc + d) : 0.0;
            acc[c] = 0.0;
        }
        float m = NO_MAX, l = 0.0;
        for (uint jb = j0; jb < j1; jb += KB) {
            const uint nb = min(KB, j1 - jb);
            // 1. partial scores of this lane's elements, then key `lane`'s score from the 32 lane sums
            for (uint j = 0; j < nb; j++) {
                const uint64_t kb = uint64_t(jb + j - pc.k0) * D + hc;
                const uint64_t pb = uint64_t(ATT_CENTER + jb + j - pi) * D + hc; // row center - (pi - j)
                float ac = 0.0, bd = 0.0;
                [[unroll]] for (uint c = 0; c < NE; c++) {
                    const uint d = lane + LANES * c;
                    if (d < dk) {
                        ac += qu[c] * att_load(pc.k, kb + d, K16);
                        bd += qv[c] * att_load(pc.p, pb + d, P16);
                    }
                }
                part[j][lane] = ac + bd;
            }
            barrier();
            if (lane < nb) {
                float s = 0.0;
                for (uint r = 0; r < LANES; r++)
                    s += part[lane][r];
                score[lane] = s * pc.scale;
            }
            barrier();
            // 2. the online softmax over the block (every lane the same, in key order) and P.V
            float bm = m;
            for (uint j = 0; j < nb; j++)
                bm = max(bm, score[j]);
            const float c0 = exp(m - bm);
            l *= c0;
            [[unroll]] for (uint c = 0; c < NE; c++)
                acc[c] *= c0;
            m = bm;
            for (uint j = 0; j < nb; j++) {
                const float e = exp(score[j] - m);
                l += e;
                const uint64_t vb = uint64_t(jb + j - pc.k0) * D + hc;
                [[unroll]] for (uint c = 0; c < NE; c++) {
                    const uint d = lane + LANES * c;
                    if (d < dk)
                        acc[c] += e * att_load(pc.v, vb + d, V16);
                }
            }
            barrier(); // part and score are rewritten by the next block
        }
        [[unroll]] for (uint c = 0; c < NE; c++) {
            const uint d = lane + LANES * c;
            if (d < dk)
                att_store_y(yo + d, acc[c] / l);
        }
    }
}
