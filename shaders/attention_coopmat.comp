#version 460
// attention_coopmat.comp — the fused relative-position attention of attention.comp on tensor cores
// (GL_NV_cooperative_matrix, 16x16x16 f16 x f16 -> f32) for the op's f16 mode: q+u, q+v, k, p, v and
// the softmax weights in f16; scores, softmax state and output in f32. Scores never reach memory.
//   s(i,j) = ((q_i + u_h).k_j + (q_i + v_h).p[center - (i - j)]) * scale,   y_i = softmax_j(s) . v
// over key positions j in [k0, k0+Tk), j < n_valid, |i - j| <= w; query positions >= n_valid get zeros.
// A workgroup owns BQ = 16*NG query rows of one head (grid-stride over query blocks and heads) and walks
// key blocks of BK = 16 on a grid from the keys' (or the packed segment's) start, so a row's result does
// not depend on its block-mates and row chunks are bit-identical to one call. Per block: stage k, v and
// the BK new position rows (a ring of NWIN = BQ + BK rows: each block shifts the window by BK); AC =
// (q+u) k^T and BD = (q+v) W^T (a block's second BD fragment is the next block's first, kept in
// registers); the relative shift, masks and an online softmax whose reference max moves only past TAU
// (weights fit f16; O and l always share the max, so the result is the exact softmax); O += P V. A
// packed batch (nseg > 0) takes one pass per segment a query block spans. Needs 32-wide subgroups;
// -DEMULATE_COOPMAT runs the same code with plain fragment operations on any f16 device, for the tests.
// Defines: NWARP (subgroups per workgroup); DKP (padded head width, a multiple of 16 >= dk); SPLIT (two
// subgroups per row group, one on q+u, AC and O's first half, one on q+v, BD and the second: half the
// registers); ROW_SHUFFLE (a row's softmax invocations, adjacent lanes, meet through subgroup shuffles);
// PIPE (with SPLIT and ROW_SHUFFLE: the next block staged around the softmax, two barriers per block);
// ROW_REGS (with ROW_SHUFFLE: a row's max and sum in registers); BD_FIRST (with SPLIT: the kept BD
// fragment stored before the next is computed). Why each: docs/architecture.md, "Kernel choice";
// figures: docs/gpu-results.md, "Attention".
// spec 0: workgroup size, 32 * NWARP; 7: tensor types (q, k, v, p, y f32 or f16).
// push: attention.glsl (flags: FLAG_VEC, FLAG_VEC8).
#define F16_TYPES
#define HAS_F16
#extension GL_KHR_shader_subgroup_basic : require
#ifdef ROW_SHUFFLE
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#if defined(PIPE) && !(defined(ROW_SHUFFLE) && defined(SPLIT))
#error "PIPE needs ROW_SHUFFLE and SPLIT"
#endif
#if defined(ROW_REGS) && !defined(ROW_SHUFFLE)
#error "ROW_REGS needs ROW_SHUFFLE (every invocation of a row computes m and l)"
#endif
#ifndef EMULATE_COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#include "core.glsl"
#include "attention.glsl"

#ifndef NWARP
#define NWARP 4
#endif
#ifndef DKP
#define DKP 128
#endif
#if DKP % 16 != 0
#error "DKP must be a multiple of 16"
#endif

#define NT (NWARP * 32)            // invocations per workgroup
#define BK 16                      // keys per block
#define NDK (DKP / 16)             // fragments across the padded head width
#ifdef SPLIT
#if NWARP % 2 != 0 || NDK % 2 != 0
#error "SPLIT needs an even NWARP and DKP a multiple of 32"
#endif
#define NG (NWARP / 2)             // row groups of 16 query rows: two subgroups each
#define NO (NDK / 2)               // output fragments per subgroup: half the head width
#else
#define NG NWARP                   // row groups: one subgroup each
#define NO NDK
#endif
#define BQ (NG * 16)               // query rows per workgroup
#define IPR (NT / BQ)              // invocations per query row in the softmax: 2, or 4 with SPLIT
#define KPI (BK / IPR)             // keys per invocation there
#define NWIN (BQ + BK)             // ring of position rows
#define DKC (DKP / 8)              // uvec4 chunks of a staged f16 row
#define DKS (DKC + 1)              // row pitch of staged f16 rows, uvec4 (+1: conflict-free loads)
#define SAC (BK / 4 + 1)           // row pitch of a subgroup's AC scores (16 x BK f32), uvec4
#define SBD ((BK + 16) / 4 + 1)    // row pitch of its BD scores (16 x (BK + 16) f32), uvec4
#define SO 5                       // row pitch of a 16x16 f32 fragment staged for rescaling / output
#define SW (16 * (SAC + SBD))      // a row group's score area, uvec4
#define PP (BK / 8 + 1)            // row pitch of a subgroup's softmax weights (16 x BK f16), uvec4
#define WIN_OFF 0
#define K_OFF (WIN_OFF + NWIN * DKS)
#define V_OFF (K_OFF + BK * DKS)
#define S_OFF (V_OFF + BK * DKS)
#define P_OFF (S_OFF + NG * SW)
#define SH_SIZE (P_OFF + NG * 16 * PP)
#if NWARP > NG && 2 * 16 * SO > SW
#error "a row group's score area holds its two subgroups' output fragments"
#endif
#if 2 * NT > 4 * BK * DKS
#error "the softmax's partial maxima and sums live in the k block's staging area"
#endif

// Masked scores: a finite sentinel (no infinities: fast-math drivers may mishandle them).
#define MASKED (-3.0e38)
#define MASKED_CMP (-1.0e38)
#define TAU 8.0 // e^8 ~ 2981: weights stay far below the f16 maximum (65504)

layout(local_size_x_id = 0) in;

// Shared memory: 48644 bytes at NG 4, DKP 128 (ATT_CM_SHARED on the host; NVIDIA allows 48 KiB).
shared uvec4 sh[SH_SIZE];
shared float sh_m[BQ], sh_l[BQ], sh_a[BQ]; // per query row: reference max, sum, rescale factor
shared uint sh_rescale;                      // some row's reference max moved in this block

float sh_f32(uint f) { return uintBitsToFloat(sh[f >> 2][f & 3u]); }
void sh_set_f32(uint f, float x) { sh[f >> 2][f & 3u] = floatBitsToUint(x); }

// ---- fragment operations ---------------------------------------------------------------------------
// Offsets and pitches are in uvec4 units of sh (8 halves or 4 floats).
#ifndef EMULATE_COOPMAT
#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
// A: row-major 16x16 f16.
#define LOAD_A(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
// B = M^T for a row-major M (rows of k or position rows, dk contiguous): column n is row n of M.
#define LOAD_BT(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, true)
// B row-major (rows of v: key x dk).
#define LOAD_B(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define LOAD_C(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define STORE_C(f, off, pitch) coopMatStoreNV(f, sh, off, pitch, false)
#define MMA(c, a, b) c = coopMatMulAddNV(a, b, c)
#define ZERO_C(c) c = FragC(0.0)
#define WARP gl_SubgroupID
#define FragBT FragB
// Loops over fragments stay unrolled: arrays of cooperative matrices want constant indices.
#define FRAG_LOOP [[unroll]]
#else
// Emulation. Kept small for llvmpipe's compiler (each emulated product is inlined where it is
// called): fragment loops are not unrolled, and a product works on packed f16 vectors.
#define WARP (gl_LocalInvocationID.x / 32u)
#define EMU_LANE (gl_LocalInvocationID.x % 32u)
#define FRAG_LOOP [[dont_unroll]]
struct FragA {
    uvec4 v; // elements 8L .. 8L+7 (row L/2, columns 8(L%2) ..) as f16
};
struct FragB {  // row-major B in shared memory: element (k, n) at half (off + k*pitch)*8 + n
    uint off, pitch;
};
struct FragBT { // B = M^T: element (k, n) at half (off + n*pitch)*8 + k
    uint off, pitch;
};
struct FragC {
    float v[8];
};
shared uvec4 emu_a[NWARP * 32]; // a virtual subgroup's A fragment during a product (row r: 2 uvec4)

vec4 lo4(uvec4 u) { return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
vec4 hi4(uvec4 u) { return vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w)); }

// Every invocation of the workgroup calls these in the same order (uniform control flow).
// Publishes A; returns row L/2 of it as 16 floats (four vec4).
void emu_publish(FragA a, out vec4 ar[4]) {
    const uint base = WARP * 32u, r = EMU_LANE / 2u;
    barrier(); // the previous product's readers of emu_a are done
    emu_a[base + EMU_LANE] = a.v; // row L/2, half L%2: uvec4 index 2*(L/2) + L%2 = L
    barrier();
    const uvec4 u0 = emu_a[base + 2u * r], u1 = emu_a[base + 2u * r + 1u];
    ar[0] = lo4(u0);
    ar[1] = hi4(u0);
    ar[2] = lo4(u1);
    ar[3] = hi4(u1);
}
void emu_mma(inout FragC c, FragA a, FragB b) {
    vec4 ar[4];
    emu_publish(a, ar);
    const uint c0 = EMU_LANE % 2u; // uvec4 column block of this lane's 8 outputs
    [[unroll]] for (uint k = 0; k < 16u; k++) {
        const uvec4 u = sh[b.off + k * b.pitch + c0];
        const float x = ar[k / 4u][k % 4u];
        const vec4 l = lo4(u), h = hi4(u);
        [[unroll]] for (uint i = 0; i < 4u; i++) {
            c.v[i] += x * l[i];
            c.v[4u + i] += x * h[i];
        }
    }
}
void emu_mma(inout FragC c, FragA a, FragBT b) {
    vec4 ar[4];
    emu_publish(a, ar);
    const uint n0 = 8u * (EMU_LANE % 2u);
    [[unroll]] for (uint i = 0; i < 8u; i++) {
        const uint o = b.off + (n0 + i) * b.pitch;
        const uvec4 u0 = sh[o], u1 = sh[o + 1u];
        c.v[i] += dot(ar[0], lo4(u0)) + dot(ar[1], hi4(u0)) + dot(ar[2], lo4(u1)) + dot(ar[3], hi4(u1));
    }
}
void emu_store_c(FragC c, uint off, uint pitch) {
    const uint r = EMU_LANE / 2u, c0 = 8u * (EMU_LANE % 2u);
    [[unroll]] for (uint i = 0; i < 8u; i++)
        sh_set_f32((off + r * pitch) * 4u + c0 + i, c.v[i]);
}
void emu_load_c(out FragC c, uint off, uint pitch) {
    const uint r = EMU_LANE / 2u, c0 = 8u * (EMU_LANE % 2u);
    [[unroll]] for (uint i = 0; i < 8u; i++)
        c.v[i] = sh_f32((off + r * pitch) * 4u + c0 + i);
}
#define LOAD_A(f, off, pitch) f.v = sh[(off) + (EMU_LANE / 2u) * (pitch) + EMU_LANE % 2u]
#define LOAD_BT(f, off, pitch) f = FragBT(off, pitch)
#define LOAD_B(f, off, pitch) f = FragB(off, pitch)
#define LOAD_C(f, off, pitch) emu_load_c(f, off, pitch)
#define STORE_C(f, off, pitch) emu_store_c(f, off, pitch)
#define MMA(c, a, b) emu_mma(c, a, b)
#define ZERO_C(c) [[unroll]] for (uint z_ = 0; z_ < 8u; z_++) c.v[z_] = 0.0
#endif

// ---- staging -----------------------------------------------------------------------------------------
uint pack2(float a, float b) { return packFloat2x16(f16vec2(float16_t(a), float16_t(b))); }

// Elements hd+d .. hd+d+7 of row `row` of a [rows, D] tensor of type h16 (plus bias[hd+d ..] when
// bias != 0) as eight f16; zero past dk and for rows that are not `valid`.
uvec4 fetch8(uint64_t base, bool h16, uint64_t bias, uint row, uint hd, uint d, bool valid) {
    if (!valid || d >= pc.dk)
        return uvec4(0);
    const uint64_t off = uint64_t(row) * pc.D + hd + d;
    if (h16 && bias == 0ul && (pc.flags & FLAG_VEC8) != 0u && d + 8u <= pc.dk)
        return U4Ref(base + off * 2ul).v; // 8 halves as they are
    float v[8];
    if (!h16 && (pc.flags & FLAG_VEC) != 0u && d + 8u <= pc.dk) {
        const vec4 lo = V4Ref(base + off * 4ul).v, hi = V4Ref(base + off * 4ul + 16ul).v;
        v = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
    } else {
        [[unroll]] for (uint e = 0; e < 8u; e++)
            v[e] = d + e < pc.dk ? att_load(base, off + e, h16) : 0.0;
    }
    if (bias != 0ul) {
        [[unroll]] for (uint e = 0; e < 8u; e++)
            if (d + e < pc.dk)
                v[e] += LOADF(bias, hd + d + e);
    }
    return uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
}

// Rows row0 .. row0+n-1 of a [rows, D] tensor (head columns, plus bias) to staged rows dst0 ..
// (modulo `ring` rows at `dst`); rows outside [lo, hi) are zeros.
void stage_rows(uint dst, uint dst0, uint ring, uint64_t base, bool h16, uint64_t bias, int row0, uint n, uint hd,
                int lo, int hi) {
    // four chunks per invocation in flight at a time: their loads are issued before their stores
    for (uint e0 = gl_LocalInvocationID.x; e0 < n * DKC; e0 += 4u * NT) {
        uvec4 x[4];
        [[unroll]] for (uint u = 0; u < 4u; u++) {
            const uint e = e0 + u * NT, r = e / DKC;
            const int row = row0 + int(r);
            x[u] = fetch8(base, h16, bias, uint(max(row, 0)), hd, 8u * (e % DKC), e < n * DKC && row >= lo && row < hi);
        }
        [[unroll]] for (uint u = 0; u < 4u; u++) {
            const uint e = e0 + u * NT;
            if (e < n * DKC)
                sh[dst + ((dst0 + e / DKC) % ring) * DKS + e % DKC] = x[u];
        }
    }
}

#define CH (BK * DKC)            // 16-byte chunks of BK staged rows
#define CPT ((CH + NT - 1) / NT) // per invocation
// One key block's k and v rows (key positions j0 .., valid below jend) and its BK new position rows
// (p rows prow0 .., to ring rows ring0 ..): every load is issued before the first store, so their
// latencies overlap instead of adding up. A block whose k, v and position rows all exist (every block
// but the edges), of f16 tensors with 16-byte loads allowed and heads as wide as the staged rows,
// loads without fetch8's checks and type cases (fewer instructions beside the products).
uvec4 rk[CPT], rv[CPT], rp[CPT]; // a key block's chunks between their loads and their stores

bool block_inside(uint j0, uint jend, int prow0) {
    const int kr0 = int(j0) - int(pc.k0);
    return K16 && V16 && P16 && (pc.flags & FLAG_VEC8) != 0u && pc.dk == DKP && kr0 >= 0 &&
           kr0 + BK <= int(jend) - int(pc.k0) && prow0 >= 0 && prow0 + BK <= int(pc.P);
}

// the loads of a block for which block_inside holds
void fetch_inside(uint hd, uint j0, int prow0) {
    const uint t = gl_LocalInvocationID.x;
    const int kr0 = int(j0) - int(pc.k0);
    [[unroll]] for (uint i = 0; i < CPT; i++) { // (a chunk past the block reloads its last one, unstored)
        const uint e = min(t + i * NT, CH - 1u), r = e / DKC, col = hd + 8u * (e % DKC);
        const uint64_t ko = (uint64_t(kr0 + int(r)) * pc.D + col) * 2ul;
        rk[i] = U4Ref(pc.k + ko).v;
        rv[i] = U4Ref(pc.v + ko).v;
        rp[i] = U4Ref(pc.p + (uint64_t(prow0 + int(r)) * pc.D + col) * 2ul).v;
    }
}

void fetch_block(uint hd, uint j0, uint jend, int prow0) {
    const uint t = gl_LocalInvocationID.x;
    const int khi = int(jend) - int(pc.k0);
    const int kr0 = int(j0) - int(pc.k0);
    if (block_inside(j0, jend, prow0)) {
        fetch_inside(hd, j0, prow0);
    } else {
        [[unroll]] for (uint i = 0; i < CPT; i++) {
            const uint e = t + i * NT, r = e / DKC, c = e % DKC;
            const bool in_block = e < CH;
            const int kr = kr0 + int(r), pr = prow0 + int(r);
            const bool kok = in_block && kr >= 0 && kr < khi, pok = in_block && pr >= 0 && pr < int(pc.P);
            rk[i] = fetch8(pc.k, K16, 0ul, uint(max(kr, 0)), hd, 8u * c, kok);
            rv[i] = fetch8(pc.v, V16, 0ul, uint(max(kr, 0)), hd, 8u * c, kok);
            rp[i] = fetch8(pc.p, P16, 0ul, uint(max(pr, 0)), hd, 8u * c, pok);
        }
    }
}

// The block's k rows and new position rows (ring rows ring0 ..), then its v rows.
void store_kp(uint ring0) {
    const uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < CPT; i++) {
        const uint e = t + i * NT, r = e / DKC, c = e % DKC;
        if (e < CH) {
            sh[K_OFF + r * DKS + c] = rk[i];
            sh[WIN_OFF + ((ring0 + r) % NWIN) * DKS + c] = rp[i];
        }
    }
}
void store_v() {
    const uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < CPT; i++) {
        const uint e = t + i * NT, r = e / DKC, c = e % DKC;
        if (e < CH)
            sh[V_OFF + r * DKS + c] = rv[i];
    }
}
void stage_block(uint hd, uint j0, uint jend, uint ring0, int prow0) {
    fetch_block(hd, j0, jend, prow0);
    store_kp(ring0);
    store_v();
}

// Key block kb of a pass stages window rows BK kb + NWIN - BK .. (its BK new position rows): the
// tensor row (nbase0: the pass's window row 0) and the ring row they go to.
int block_prow(int nbase0, uint kb) { return nbase0 + int(BK * kb + NWIN - BK); }
uint block_ring(uint kb) { return (NWIN - BK + BK * kb) % NWIN; }

// Where subgroup w stages an output fragment (rescaling, output): its row group's score area, the
// second subgroup of a group (SPLIT) behind the first.
uint o_area(uint w) { return S_OFF + (w % NG) * SW + (w / NG) * 16u * SO; }

void main() {
    // this subgroup's row group (rows 16 group ..) and role: 0 AC and output columns 0 .. 16 NO - 1,
    // 1 (SPLIT only) BD and the columns above
    const uint t = gl_LocalInvocationID.x, warp = WARP, group = warp % NG, role = warp / NG;
    const uint nqb = (pc.Tq + BQ - 1u) / BQ;
    // valid query rows: inside q and at positions below n_valid
    const uint nvq = min(pc.Tq, pc.n_valid > pc.q0 ? pc.n_valid - pc.q0 : 0u);
    const uint kend = min(pc.k0 + pc.Tk, pc.n_valid); // key positions present and valid: [k0, kend)
    for (uint h = gl_WorkGroupID.y; h < ATT_H; h += gl_NumWorkGroups.y) {
        const uint hd = h * pc.dk; // < D <= INT32_MAX (host)
        for (uint qb = gl_WorkGroupID.x; qb < nqb; qb += gl_NumWorkGroups.x) {
            const uint i0 = qb * BQ;
            const uint iend = max(i0, min(i0 + BQ, nvq)); // valid query rows of the block: [i0, iend)

            // ---- q + u and q + v of this subgroup's rows into registers (staged through the ring) ------
            // (SPLIT: role 0 keeps q + u in qu, role 1 q + v)
            FragA qu[NDK];
#ifndef SPLIT
            FragA qv[NDK];
#endif
            barrier(); // the previous query block's readers of shared memory are done
            stage_rows(WIN_OFF, 0u, NWIN, pc.q, Q16, pc.bu, int(i0), BQ, hd, 0, int(iend));
            barrier();
            if (role == 0u) {
                FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                    LOAD_A(qu[kk], WIN_OFF + 16u * group * DKS + 2u * kk, DKS);
            }
            barrier();
            stage_rows(WIN_OFF, 0u, NWIN, pc.q, Q16, pc.bv, int(i0), BQ, hd, 0, int(iend));
            barrier();
#ifdef SPLIT
            if (role == 1u) {
                FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                    LOAD_A(qu[kk], WIN_OFF + 16u * group * DKS + 2u * kk, DKS);
            }
#else
            FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                LOAD_A(qv[kk], WIN_OFF + 16u * group * DKS + 2u * kk, DKS);
#endif

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
            const uint ihi = min(iend, shi - pc.q0); // rows of this pass: [ilo, ihi)
            const bool last = ihi >= iend;
            // Key positions any row of the pass can see: [jlo, jend), jlo on the segment's BK grid (keys
            // below k0 in the first block are absent); empty when the pass has no rows.
            uint jlo = 0u, jend = 0u;
            if (ilo < ihi) {
                const uint p0 = pc.q0 + ilo; // positions < 2^30 and w < 2^30 (host): no overflow
                jlo = max(max(max(pc.k0, slo), p0 > pc.w ? p0 - pc.w : 0u), att_chunk_lo(p0, slo));
                jlo -= (jlo - slo) % BK;
                jend = min(min(min(kend, shi), pc.q0 + ihi + pc.w), att_chunk_hi(pc.q0 + ihi - 1u, slo));
            }
            barrier(); // the previous pass's readers of the softmax state are done
#ifndef ROW_REGS // (with ROW_REGS the row state starts in registers)
            if (t < BQ) {
                sh_m[t] = MASKED;
                sh_l[t] = 0.0;
            }
#endif
            if (t == 0u)
                sh_rescale = 0u;
            barrier();

            FragC o[NO];
            FRAG_LOOP for (uint n = 0; n < NO; n++)
                ZERO_C(o[n]);
#ifdef ROW_REGS
            float m_row = MASKED, l_row = 0.0; // this invocation's softmax row's reference max and sum
#endif

            // score (li, lj) of block kb (local row and key) uses position row nbase0 + BK kb + lj - li + BQ - 1
            const int nbase0 = int(ATT_CENTER) - int(pc.q0 + i0) + int(jlo) - (BQ - 1);
            const uint ws = BQ - 16u - 16u * group; // window row of this group's first BD column
            FragC bdn; // the next block's first BD fragment: this block's second (see the header)
            uint kb = 0u;
#ifdef PIPE
            // The pass's first block and the ring's first rows. A later block inside the tensors is
            // staged during the softmax of the block before (its k and position rows) and after its
            // own score barrier (its v: rv holds it until then, vpending); one at an edge after the
            // P V of the block before, between two barriers of its own.
            bool vpending = false;
            if (jlo < jend) {
                stage_rows(WIN_OFF, 0u, NWIN, pc.p, P16, 0ul, nbase0, NWIN - BK, hd, 0, int(pc.P));
                stage_block(hd, jlo, jend, block_ring(0u), block_prow(nbase0, 0u));
            }
            barrier();
#endif
            [[dont_unroll]] // unrolled, the pipelined loop takes more registers and code, and runs slower
            for (uint j0 = jlo; j0 < jend; j0 += BK, kb++) {
#ifndef PIPE
                // ---- stage k, v and the new position rows ---------------------------------------------
                barrier(); // readers of the previous block (or of the staged q) are done
                if (kb == 0u) // the ring's first rows; the block's own BK come with k and v
                    stage_rows(WIN_OFF, 0u, NWIN, pc.p, P16, 0ul, nbase0, NWIN - BK, hd, 0, int(pc.P));
                stage_block(hd, j0, jend, block_ring(kb), block_prow(nbase0, kb));
                barrier();
#endif // !PIPE

                // ---- AC and BD fragments -----------------------------------------------------------------
                const uint s0 = (ws + BK * kb) % NWIN, s1 = (ws + 16u + BK * kb) % NWIN; // ring slots
                const uint sw = S_OFF + group * SW;
#ifdef SPLIT
                // Role 0: AC = (q+u) k^T; role 1: BD from (q+v) and the window. The same products with
                // other operands, so the code stays uniform (the emulation's products are workgroup-wide).
#ifdef BD_FIRST
                // the block's first BD fragment is stored before the second is computed: one fragment
                // fewer live during the products
                if (kb == 0u) { // role 0 computes a fragment it drops (once per pass)
                    ZERO_C(bdn);
                    FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                        FragBT fb;
                        LOAD_BT(fb, WIN_OFF + s0 * DKS + 2u * kk, DKS);
                        MMA(bdn, qu[kk], fb);
                    }
                }
                if (role == 1u)
                    STORE_C(bdn, sw + 16u * SAC, SBD);
                FragC acc;
                ZERO_C(acc);
#else
                FragC acc, bd0;
                ZERO_C(acc);
                ZERO_C(bd0);
                if (kb == 0u) { // role 0 computes a fragment it drops (once per pass)
                    FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                        FragBT fb;
                        LOAD_BT(fb, WIN_OFF + s0 * DKS + 2u * kk, DKS);
                        MMA(bd0, qu[kk], fb);
                    }
                } else {
                    bd0 = bdn;
                }
#endif
                const uint boff = role == 0u ? K_OFF : WIN_OFF + s1 * DKS;
                FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                    FragBT fb;
                    LOAD_BT(fb, boff + 2u * kk, DKS);
                    MMA(acc, qu[kk], fb);
                }
                bdn = acc;
#ifdef BD_FIRST
                STORE_C(acc, role == 0u ? sw : sw + 16u * SAC + 4u, role == 0u ? SAC : SBD);
#else
                if (role == 0u) {
                    STORE_C(acc, sw, SAC);
                } else {
                    STORE_C(bd0, sw + 16u * SAC, SBD);
                    STORE_C(acc, sw + 16u * SAC + 4u, SBD);
                }
#endif
#else
                FragC ac, bd0, bd1;
                ZERO_C(ac);
                ZERO_C(bd0);
                ZERO_C(bd1);
                if (kb == 0u) {
                    FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                        FragBT fb;
                        LOAD_BT(fb, WIN_OFF + s0 * DKS + 2u * kk, DKS);
                        MMA(bd0, qv[kk], fb);
                    }
                } else {
                    bd0 = bdn;
                }
                FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                    FragBT fb;
                    LOAD_BT(fb, K_OFF + 2u * kk, DKS);
                    MMA(ac, qu[kk], fb);
                    LOAD_BT(fb, WIN_OFF + s1 * DKS + 2u * kk, DKS);
                    MMA(bd1, qv[kk], fb);
                }
                bdn = bd1;
                STORE_C(ac, sw, SAC);
                STORE_C(bd0, sw + 16u * SAC, SBD);
                STORE_C(bd1, sw + 16u * SAC + 4u, SBD);
#endif
                barrier();

#ifdef PIPE
                // the next block: its loads go out before the softmax when it lies inside the tensors
                // (fetch_inside: no checks, few registers beside the softmax's)
                const int prow_next = block_prow(nbase0, kb + 1u);
                const uint ring_next = block_ring(kb + 1u);
                const bool early = j0 + BK < jend && block_inside(j0 + BK, jend, prow_next);
#endif
                // ---- online softmax: IPR invocations per query row (2, or 4 with SPLIT), KPI keys each -----
                // Without ROW_SHUFFLE the row's partial maxima and sums meet in the k block's staging
                // area (k is not read again in this block; the next block restages it after a barrier).
                {
                    const uint row = t / IPR, hf = t % IPR, c0 = KPI * hf, r = row % 16u, i = i0 + row, pi = pc.q0 + i;
                    const uint acf = (S_OFF + (row / 16u) * SW + r * SAC) * 4u + c0;
                    const uint bdf = (S_OFF + (row / 16u) * SW + 16u * SAC + r * SBD) * 4u + 15u - r + c0;
#ifndef ROW_SHUFFLE
                    const uint xf = K_OFF * 4u, yf = K_OFF * 4u + NT; // partial max, partial sum [NT]
#endif
#ifdef PIPE
                    // This block's v (P V of the block before read the last one before the barrier
                    // above); the next block's loads, stored after the softmax: k is not read again in
                    // this block, and the ring rows they replace were last read by its score products.
                    if (vpending)
                        store_v();
                    if (early)
                        fetch_inside(hd, j0 + BK, prow_next);
#endif
#ifdef ROW_REGS
                    const float mold = m_row;
#else
                    const float mold = sh_m[row];
#endif
                    float s[KPI];
                    float pm = MASKED;
                    // the invocation's KPI keys all visible from a valid row (every block inside the
                    // band but its edges): no test per key
                    const uint jb = j0 + c0; // positions < 2^30 and w < 2^30 (host): no overflow
                    if (i >= ilo && i < ihi && jb >= pc.k0 && jb + KPI <= jend && pi <= jb + pc.w &&
                        jb + KPI - 1u <= pi + pc.w && att_chunk_ok(pi, jb, slo) &&
                        att_chunk_ok(pi, jb + KPI - 1u, slo)) {
#ifdef ROW_REGS
                        [[unroll]] for (uint c = 0; c < KPI; c += 4u) { // acf + c: a multiple of 4
                            const vec4 a4 = uintBitsToFloat(sh[(acf + c) >> 2u]);
                            [[unroll]] for (uint e = 0; e < 4u; e++) {
                                s[c + e] = (a4[e] + sh_f32(bdf + c + e)) * pc.scale;
                                pm = max(pm, s[c + e]);
                            }
                        }
#else
                        [[unroll]] for (uint c = 0; c < KPI; c++) {
                            s[c] = (sh_f32(acf + c) + sh_f32(bdf + c)) * pc.scale;
                            pm = max(pm, s[c]);
                        }
#endif
                    } else
                    [[unroll]] for (uint c = 0; c < KPI; c++) {
                        const uint j = j0 + c0 + c;
                        const bool ok = i >= ilo && i < ihi && j >= pc.k0 && j < jend &&
                                        (pi > j ? pi - j : j - pi) <= pc.w && att_chunk_ok(pi, j, slo);
                        s[c] = ok ? (sh_f32(acf + c) + sh_f32(bdf + c)) * pc.scale : MASKED;
                        pm = max(pm, s[c]);
                    }
#ifdef ROW_SHUFFLE
                    // a row's IPR invocations are adjacent lanes of one subgroup
                    float bm = pm;
                    [[unroll]] for (uint x = 1u; x < IPR; x <<= 1)
                        bm = max(bm, subgroupShuffleXor(bm, x));
#else
                    sh_set_f32(xf + t, pm);
                    barrier();
                    float bm = pm;
                    [[unroll]] for (uint x = 1u; x < IPR; x++)
                        bm = max(bm, sh_f32(xf + (t ^ x)));
#endif
                    float m = mold, alpha = 1.0; // both invocations of the row compute the same
                    if (bm > MASKED_CMP) {
                        if (m <= MASKED_CMP) {
                            m = bm; // the first keys this row sees: O and l are still zero
                        } else if (bm > m + TAU) {
                            alpha = exp(m - bm);
                            m = bm;
                            if (hf == 0u)
                                sh_rescale = 1u;
                        }
                    }
                    float sum = 0.0;
                    uint pk[KPI / 2u];
                    [[unroll]] for (uint c = 0; c < KPI; c += 2u) {
                        const float e0 = s[c] > MASKED_CMP ? exp(s[c] - m) : 0.0;
                        const float e1 = s[c + 1u] > MASKED_CMP ? exp(s[c + 1u] - m) : 0.0;
                        sum += e0 + e1;
                        pk[c / 2u] = packHalf2x16(vec2(e0, e1));
                    }
#if KPI == 8
                    sh[P_OFF + row * PP + hf] = uvec4(pk[0], pk[1], pk[2], pk[3]);
#elif KPI == 4
                    if (hf % 2u == 0u)
                        sh[P_OFF + row * PP + hf / 2u].xy = uvec2(pk[0], pk[1]);
                    else
                        sh[P_OFF + row * PP + hf / 2u].zw = uvec2(pk[0], pk[1]);
#else
#error "KPI is 4 or 8"
#endif
#ifdef ROW_SHUFFLE
                    float bl = sum;
                    [[unroll]] for (uint x = 1u; x < IPR; x <<= 1)
                        bl += subgroupShuffleXor(bl, x);
#ifdef ROW_REGS
                    // every invocation of the row holds the same m and l (the shuffles' results agree)
                    m_row = m;
                    l_row = l_row * alpha + bl;
                    if (hf == 0u)
                        sh_a[row] = alpha;
#else
                    if (hf == 0u) { // l = alpha l + this block's weights
                        sh_m[row] = m;
                        sh_a[row] = alpha;
                        sh_l[row] = sh_l[row] * alpha + bl;
                    }
#endif
#ifdef PIPE
                    if (early)
                        store_kp(ring_next);
#endif
                }
                barrier();
#else
                    sh_set_f32(yf + t, sum);
                    if (hf == 0u) {
                        sh_m[row] = m;
                        sh_a[row] = alpha;
                    }
                }
                barrier();
                if (t < BQ) { // l = alpha l + this block's weights (the f16 weights' sum, to f16 rounding)
                    float bl = 0.0;
                    [[unroll]] for (uint x = 0; x < IPR; x++)
                        bl += sh_f32(K_OFF * 4u + NT + IPR * t + x);
                    sh_l[t] = sh_l[t] * sh_a[t] + bl;
                }
#endif

                // ---- rescale O where a reference max moved (rare after the first blocks) ----------------
                if (sh_rescale != 0u) {
                    FRAG_LOOP for (uint n = 0; n < NO; n++) {
                        STORE_C(o[n], o_area(warp), SO);
                        barrier();
                        for (uint e = t; e < NWARP * 256u; e += NT) { // subgroup e / 256's fragment
                            const uint w = e / 256u, r = (e / 16u) % 16u;
                            const uint f = (o_area(w) + r * SO) * 4u + e % 16u;
                            sh_set_f32(f, sh_f32(f) * sh_a[16u * (w % NG) + r]);
                        }
                        barrier();
                        LOAD_C(o[n], o_area(warp), SO);
                        barrier();
                    }
                    if (t == 0u)
                        sh_rescale = 0u; // everyone read the flag before the first barrier above
                }

                // ---- O += P V ----------------------------------------------------------------------------
                FragA pa;
                LOAD_A(pa, P_OFF + 16u * group * PP, PP);
                FRAG_LOOP for (uint n = 0; n < NO; n++) {
                    FragB fb;
                    LOAD_B(fb, V_OFF + 2u * (role * NO + n), DKS);
                    MMA(o[n], pa, fb);
                }
#ifdef PIPE
                vpending = early;
                if (j0 + BK < jend && !early) { // a block at an edge: staged here, with the checks
                    barrier(); // P V's readers are done
                    stage_block(hd, j0 + BK, jend, ring_next, prow_next);
                    barrier();
                }
#endif
            }

            // ---- y = O / l for the pass's rows (and, after the last pass, zeros for padded rows) ------
#ifdef ROW_REGS
            if (t % IPR == 0u)
                sh_l[t / IPR] = l_row;
#endif
            FRAG_LOOP for (uint n = 0; n < NO; n++) {
                barrier(); // the score area's previous readers are done
                STORE_C(o[n], o_area(warp), SO);
                barrier();
                for (uint e = t; e < NWARP * 256u; e += NT) { // subgroup e / 256's fragment
                    const uint w = e / 256u, r = (e / 16u) % 16u, c = e % 16u;
                    const uint li = 16u * (w % NG) + r, i = i0 + li, d = 16u * ((w / NG) * NO + n) + c;
                    if (i < pc.Tq && d < pc.dk && ((i >= ilo && i < ihi) || (last && i >= iend))) {
                        const uint f = (o_area(w) + r * SO) * 4u + c;
                        // A valid row always sees key i itself, so l > 0 there.
                        att_store_y(uint64_t(i) * pc.D + hd + d, i < ihi ? sh_f32(f) / sh_l[li] : 0.0);
                    }
                }
            }
            if (last)
                break;
            ilo = ihi;
            }
        }
    }
}
