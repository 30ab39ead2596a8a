#version 460
// attention.comp — fused relative-position multi-head self-attention (spec §5.1; the symmetric local
// band of §5.2 via `w`), flash style: scores never reach memory, so memory stays linear in T.
// Scalar f32 arithmetic; push: attention.glsl: q,y [Tq,D] (positions q0 ..), k,v [Tk,D] (positions
// k0 ..), p [P,D], bu,bv [H,dk], f32 (or f16 but the biases in the F16_TYPES variant);
// spec 0: workgroup size, spec 1: NCH, spec 7: tensor types.
//
//   s(i,j) = ((q_i + u_h).k_j + (q_i + v_h).p[center - (i - j)]) * scale,   y_i = softmax_j(s) . v
// over key positions j in [k0, k0+Tk), j < n_valid, |i - j| <= w (i, j positions); query positions
// >= n_valid get zeros.
// One workgroup per (query block of BQ rows, head), grid-stride in x (blocks) and y (heads). For each
// key block [j0, j0+BK) intersecting the band the workgroup computes the BQ x BK score tile, then an
// online-softmax update (running max m, sum l per row in shared memory) and O += P.V with the output
// accumulator O [BQ, dk] in registers (dk in chunks of DC columns: NCH = ceil(dk/DC), spec constant).
// The position rows a tile needs are the contiguous window n = nbase .. nbase+BQ+BK-2, row
// (lj - li + BQ - 1) for tile pair (li, lj); they are staged like K, so BD costs one dot per score.
// Key blocks start at multiples of BK of the key *position*, whatever the query block: a block that
// holds none of a row's keys leaves its running max, sum and output exactly unchanged, so a row's
// result does not depend on which rows share its query block or call (row chunks are bit-identical).
// A packed batch (nseg > 0: seg [nseg+1] holds the segments' start positions): a query sees only the
// keys of its segment, and key blocks start at multiples of BK from the segment's start, so a segment
// computes exactly what it computes alone. A query block whose rows span several segments takes one
// pass per segment (rows of other segments masked), each with the keys of its own segment.
// The tensor-core kernels for the op's f16 mode are attention_coopmat.comp and attention_flash.comp
// (the host chooses, src/backend/vulkan/vk_op_attention.c).
// The workgroup size must be ATT_WG = 128: the thread -> micro-tile maps below are built for it.
#ifdef F16_TYPES
#define HAS_F16
#endif
#include "core.glsl"
#include "attention.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NCH = 4;

#define WG 128u
#define BQ 32u          // query rows per block
#define BK 32u          // keys per block
#define DC 32u          // dk chunk staged in shared memory per step
#define DCP 33u         // padded row stride of staged tiles: column reads by rows hit distinct banks
#define SP 33u          // padded row stride of the score tile
#define NP (BQ + BK - 1u)
// Masked scores: a finite sentinel (no infinities: fast-math drivers may mishandle them). Real
// scores are far above it; anything <= MASKED_CMP counts as masked.
#define MASKED (-3.0e38)
#define MASKED_CMP (-1.0e38)


// Staged tiles: 25596 bytes with the constants above (ATT_SHARED_BYTES on the host; lavapipe allows
// 32 KiB). sh_k holds the K chunk during the score phase and the V chunk during the PV phase.
shared float sh_qu[BQ * DCP];   // (q + u) chunk  [BQ][DC]
shared float sh_qv[BQ * DCP];   // (q + v) chunk  [BQ][DC]
shared float sh_k[BK * DCP];    // k or v chunk   [BK][DC]
shared float sh_p[NP * DCP];    // position rows  [BQ+BK-1][DC]
shared float sh_s[BQ * SP];     // scores, then softmax weights [BQ][BK]
shared float sh_m[BQ], sh_l[BQ], sh_alpha[BQ];

// Micro-tile of a thread (both phases): rows 2*tr + {0,1}, columns 4*tc + {0..3}.
// (BQ/2) * (BK/4) = 128 = WG threads cover the BQ x BK score tile and each BQ x DC output chunk.

// Stages chunk [d0, d0+DC) of q+u, q+v (rows i0.., valid below ihi), k (key positions j0.., present in
// [k0, jend)) and the position window (rows nbase.., valid inside [0, P)); everything else is zero.
void stage_scores(uint h, uint i0, uint ihi, uint j0, uint jend, int nbase, uint d0) {
    uint t = gl_LocalInvocationID.x;
    uint64_t hd = uint64_t(h) * pc.dk;
    for (uint e = t; e < BQ * DC; e += WG) {
        uint li = e / DC, dd = e % DC, i = i0 + li, d = d0 + dd;
        float qu = 0.0, qv = 0.0;
        if (i < ihi && d < pc.dk) {
            float x = att_load(pc.q, uint64_t(i) * pc.D + hd + d, Q16);
            qu = x + LOADF(pc.bu, hd + d);
            qv = x + LOADF(pc.bv, hd + d);
        }
        sh_qu[li * DCP + dd] = qu;
        sh_qv[li * DCP + dd] = qv;
    }
    for (uint e = t; e < BK * DC; e += WG) {
        uint lj = e / DC, dd = e % DC, j = j0 + lj, d = d0 + dd;
        sh_k[lj * DCP + dd] = (j >= pc.k0 && j < jend && d < pc.dk) ? att_load(pc.k, uint64_t(j - pc.k0) * pc.D + hd + d, K16) : 0.0;
    }
    for (uint e = t; e < NP * DC; e += WG) {
        uint r = e / DC, dd = e % DC, d = d0 + dd;
        int n = nbase + int(r);
        sh_p[r * DCP + dd] = (n >= 0 && uint(n) < pc.P && d < pc.dk) ? att_load(pc.p, uint64_t(n) * pc.D + hd + d, P16) : 0.0;
    }
}

// acc[r*4+c] += (q+u)_li . k_lj + (q+v)_li . p_(lj-li+BQ-1) over the staged chunk.
// For li = 2tr+r, lj = 4tc+c the window row is pb + (c - r + 1): five rows serve the eight scores.
void score_tile(uint tr, uint tc, inout float acc[8]) {
    uint pb = 4u * tc + BQ - 2u - 2u * tr;
    for (uint dd = 0; dd < DC; dd++) {
        float a0 = sh_qu[(2u * tr) * DCP + dd], a1 = sh_qu[(2u * tr + 1u) * DCP + dd];
        float b0 = sh_qv[(2u * tr) * DCP + dd], b1 = sh_qv[(2u * tr + 1u) * DCP + dd];
        float pw[5];
        [[unroll]] for (uint e = 0; e < 5u; e++)
            pw[e] = sh_p[(pb + e) * DCP + dd];
        [[unroll]] for (uint c = 0; c < 4u; c++) {
            float kk = sh_k[(4u * tc + c) * DCP + dd];
            acc[c] += a0 * kk + b0 * pw[c + 1u];
            acc[4u + c] += a1 * kk + b1 * pw[c];
        }
    }
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint tc = t % (BK / 4u), tr = t / (BK / 4u);
    const uint nqb = (pc.Tq + BQ - 1u) / BQ;
    // valid query rows: inside q and at positions below n_valid
    const uint nvq = min(pc.Tq, pc.n_valid > pc.q0 ? pc.n_valid - pc.q0 : 0u);
    for (uint h = gl_WorkGroupID.y; h < ATT_H; h += gl_NumWorkGroups.y)
        for (uint qb = gl_WorkGroupID.x; qb < nqb; qb += gl_NumWorkGroups.x) {
            uint i0 = qb * BQ;
            uint iend = max(i0, min(i0 + BQ, nvq)); // valid query rows of the block: [i0, iend)
            // One pass per segment the valid rows reach (one pass without segments, or for padding):
            // rows [ilo, ihi) of segment sg, whose positions are [slo, shi).
            uint sg = pc.nseg > 0u && i0 < iend ? seg_find(pc.seg, pc.nseg, int64_t(pc.q0 + i0)) : 0u;
            for (uint ilo = i0;; sg++) {
                uint slo = 0u, shi = 0xffffffffu;
                if (pc.nseg > 0u) { // positions < 2^30 (host): clamping keeps a bad table harmless
                    slo = uint(clamp(LOADL(pc.seg, sg), 0l, int64_t(pc.q0 + ilo)));
                    if (sg + 1u < pc.nseg)
                        shi = uint(clamp(LOADL(pc.seg, sg + 1u), int64_t(pc.q0 + ilo), int64_t(0x7fffffff)));
                }
                const uint ihi = min(iend, shi - pc.q0);
                const bool last = ihi >= iend;
                // Key positions any row of the pass can see: [jlo, jend), jlo on the segment's BK grid
                // (keys below k0 in the first block are absent); empty when the pass has no rows.
                uint jlo = 0u, jend = 0u;
                if (ilo < ihi) {
                    uint p0 = pc.q0 + ilo; // positions < 2^30 and w < 2^30 (host): no overflow
                    jlo = max(max(max(pc.k0, slo), p0 > pc.w ? p0 - pc.w : 0u), att_chunk_lo(p0, slo));
                    jlo -= (jlo - slo) % BK;
                    jend = min(min(min(min(pc.k0 + pc.Tk, pc.n_valid), shi), pc.q0 + ihi + pc.w),
                               att_chunk_hi(pc.q0 + ihi - 1u, slo));
                }
            float o[NCH * 8u];
            [[unroll]] for (uint x = 0; x < NCH * 8u; x++)
                o[x] = 0.0;
            barrier(); // the previous pass's readers of sh_l are done
            if (t < BQ) {
                sh_m[t] = MASKED;
                sh_l[t] = 0.0;
            }
            barrier();

            for (uint j0 = jlo; j0 < jend; j0 += BK) {
                // ---- scores of the tile, dk in chunks --------------------------------------------
                float acc[8];
                [[unroll]] for (uint x = 0; x < 8u; x++)
                    acc[x] = 0.0;
                int nbase = int(ATT_CENTER) - int(pc.q0 + i0) + int(j0) - int(BQ - 1u);
                for (uint d0 = 0; d0 < pc.dk; d0 += DC) {
                    barrier(); // the previous chunk's (or PV phase's) readers are done
                    stage_scores(h, i0, ihi, j0, jend, nbase, d0);
                    barrier();
                    score_tile(tr, tc, acc);
                }
                [[unroll]] for (uint r = 0; r < 2u; r++)
                    [[unroll]] for (uint c = 0; c < 4u; c++) {
                        uint li = 2u * tr + r, lj = 4u * tc + c, i = i0 + li, j = j0 + lj, pi = pc.q0 + i;
                        bool ok = i >= ilo && i < ihi && j >= pc.k0 && j < jend && (pi > j ? pi - j : j - pi) <= pc.w &&
                                  att_chunk_ok(pi, j, slo);
                        sh_s[li * SP + lj] = ok ? acc[r * 4u + c] * pc.scale : MASKED;
                    }
                barrier();

                // ---- online softmax, one thread per row -----------------------------------------
                if (t < BQ) {
                    float mold = sh_m[t], mx = mold;
                    for (uint lj = 0; lj < BK; lj++)
                        mx = max(mx, sh_s[t * SP + lj]);
                    float alpha = 1.0, sum = 0.0;
                    if (mx > MASKED_CMP) {
                        alpha = mold > MASKED_CMP ? exp(mold - mx) : 0.0;
                        for (uint lj = 0; lj < BK; lj++) {
                            float s = sh_s[t * SP + lj];
                            float e = s > MASKED_CMP ? exp(s - mx) : 0.0;
                            sh_s[t * SP + lj] = e;
                            sum += e;
                        }
                    } else {
                        for (uint lj = 0; lj < BK; lj++)
                            sh_s[t * SP + lj] = 0.0;
                    }
                    sh_m[t] = mx;
                    sh_l[t] = sh_l[t] * alpha + sum;
                    sh_alpha[t] = alpha;
                }
                barrier();

                // ---- O = alpha * O + P . V, dk in chunks (unrolled: o stays in registers) --------
                float al0 = sh_alpha[2u * tr], al1 = sh_alpha[2u * tr + 1u];
                [[unroll]] for (uint m = 0; m < NCH; m++)
                    [[unroll]] for (uint c = 0; c < 4u; c++) {
                        o[m * 8u + c] *= al0;
                        o[m * 8u + 4u + c] *= al1;
                    }
                uint64_t hd = uint64_t(h) * pc.dk;
                [[unroll]] for (uint m = 0; m < NCH; m++) {
                    barrier(); // readers of sh_k (scores, previous chunk) are done
                    for (uint e = t; e < BK * DC; e += WG) {
                        uint lj = e / DC, dd = e % DC, j = j0 + lj, d = m * DC + dd;
                        // Absent keys must be finite (their weight is 0): load zeros, not memory.
                        sh_k[lj * DCP + dd] = (j >= pc.k0 && j < jend && d < pc.dk) ? att_load(pc.v, uint64_t(j - pc.k0) * pc.D + hd + d, V16) : 0.0;
                    }
                    barrier();
                    for (uint lj = 0; lj < BK; lj++) {
                        float p0 = sh_s[(2u * tr) * SP + lj], p1 = sh_s[(2u * tr + 1u) * SP + lj];
                        [[unroll]] for (uint c = 0; c < 4u; c++) {
                            float vv = sh_k[lj * DCP + 4u * tc + c];
                            o[m * 8u + c] += p0 * vv;
                            o[m * 8u + 4u + c] += p1 * vv;
                        }
                    }
                }
            }

            // ---- y = O / l for the pass's rows (and, after the last pass, zeros for padded rows) ---
            [[unroll]] for (uint r = 0; r < 2u; r++) {
                uint li = 2u * tr + r, i = i0 + li;
                if (i < pc.Tq && ((i >= ilo && i < ihi) || (last && i >= iend))) {
                    // A valid row always sees key i itself, so l > 0 there.
                    float inv = i < ihi ? 1.0 / sh_l[li] : 0.0;
                    uint64_t row = uint64_t(i) * pc.D + uint64_t(h) * pc.dk;
                    [[unroll]] for (uint m = 0; m < NCH; m++)
                        [[unroll]] for (uint c = 0; c < 4u; c++) {
                            uint d = m * DC + 4u * tc + c;
                            if (d < pc.dk)
                                att_store_y(row + d, o[m * 8u + r * 4u + c] * inv);
                        }
                }
            }
                if (last)
                    break;
                ilo = ihi;
            }
            barrier(); // sh_l is read above and reset by the next block
        }
}
