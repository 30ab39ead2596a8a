#version 460
// attention_fa2.comp — the fused relative-position attention (ops.h op_relpos_attention) in the op's f16
// mode as a FlashAttention-2-style kernel on tensor cores (GL_NV_cooperative_matrix, 16x16x16 f16 x f16
// -> f32) whose subgroups never wait for each other: no workgroup barrier anywhere.
//
//   s(i,j) = ((q_i + u_h).k_j + (q_i + v_h).p[center - (i - j)]) * scale,   y_i = softmax_j(s) . v
// over key positions j in [k0, k0+Tk), j < n_valid, |i - j| <= w; query positions >= n_valid get zeros.
//
// Work: every subgroup ("warp", 32 invocations) is independent. Warp g of the grid (workgroup x * NWARP
// + subgroup) owns 16-row query blocks g, g + NWARP * groups, ... of head y (grid-stride; heads over y),
// keeps their q+u and q+v as NDK f16 A-fragments (built once through the warp's scratch) and O (16 x DKP
// f32) as NDK accumulators, and walks key blocks of BK keys (16 or 32) on the BK grid of key positions.
// Per block, k, v and the warp's window of 16 + BK position rows are loaded as fragments straight from
// the f16 tensors in device memory (coopMatLoadNV on a buffer reference; neighbouring warps read the same
// keys, which L1/L2 serve). A 16-row fragment that is not wholly inside its tensor's valid rows (keys
// outside [max(k0, segment start), min(kend, segment end)), position rows outside [0, P)) is staged
// through the warp's scratch instead, absent rows zero-filled, so no value beyond n_valid, Tk or the
// segment ever enters a product (no NaN * 0). So k, v and p must be f16 with D a multiple of 8, dk a
// multiple of 16 and 16-byte aligned bases (the host checks); q and y may be f32 or f16.
//
// Scores as attention_flash.comp computes them: AC = (q+u) k^T; BD' = (q+v) W^T over the warp's window
// W of position rows center - (i_w + 15) + j0 + 0 .. BK + 15 (the next block's first window fragment is
// this block's last one, kept in registers); the relative shift s(r, c) += BD'(r, c - r + 15) through the
// warp's scratch (subgroup barriers only), each accumulator element at (ROW(e), COL(e)) from a layout probe
// at start. Masking, then the online softmax in registers with the lazily moved reference max (TAU2; the
// slow path's per-row maxima through shared-memory atomics of the warp's own 16 rows), the per-element
// partial sums added up once at the end; weights to f16 A-fragments directly (P_REG 1) or through the
// scratch (P_REG 0); O += P V.
//
// Exactness: every decision about a row depends only on its own scores; a key keeps its accumulator
// column (j mod 16) and block (the BK grid from the segment's start) whatever the call; staged and direct
// fragments hold the same f16 values; a masked score weighs exactly 0 and multiplies a finite v value (or
// a staged zero). So row chunks are bit-identical to one call, and a packed batch's segments to the
// segment alone (a warp whose rows span several segments takes one pass per segment, fresh O, m, sums).
//
// Shared memory per warp (uvec4 units): a row scratch of 16 staged rows (pitch DKS; q+u and q+v, edge
// fragments) and a shift scratch (BD' fragments: the whole window with BD_WHOLE 1, one at a time with 0;
// the weights with P_REG 0; the sums at the end), plus 16 uints of row maxima. DKP 128:
//   BK 32, BD_WHOLE 0: (272 + 80) * 16 + 64 = 5,696 bytes a warp (8 warps: 45,568)
//   BK 16, BD_WHOLE 1: (272 + 144) * 16 + 64 = 6,720 bytes a warp (4 warps: 26,880)
// tests/vk_lab.c mirrors the figure (vk_att_cfg.shared_bytes); the #error below guards 48 KiB.
//
// -DEMULATE_COOPMAT: fragments emulated by plain code (as in attention_flash.comp: lane L's accumulator
// elements at row L/2, columns 8(L%2) + e), B fragments as (device address, pitch) — the direct loads
// read the very elements the real ones do, the scratch lives in device memory (pc.emu_sh, emu_stride per
// workgroup) — and subgroup barriers and votes as workgroup ones; built with NWARP 1 (warps are
// independent, so a workgroup of one warp runs exactly the per-warp code of the real variants).
//
// Defines: NWARP, BK, DKP (padded head width, a multiple of 16), BD_WHOLE, P_REG.
// spec 0: workgroup size, 32 * NWARP; 7: tensor types (attention.glsl). push: attention.glsl.
#define F16_TYPES
#define HAS_F16
#extension GL_KHR_shader_subgroup_basic : require
#ifndef EMULATE_COOPMAT
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#include "core.glsl"
#include "attention.glsl"

#ifndef NWARP
#define NWARP 4
#endif
#ifndef BK
#define BK 32
#endif
#ifndef DKP
#define DKP 128
#endif
#ifndef BD_WHOLE
#define BD_WHOLE 0
#endif
#ifndef P_REG
#define P_REG 1
#endif

#define NDK (DKP / 16)       // fragments across the padded head width
#define NFB (BK / 16)        // score fragments per key block
#define DKC (DKP / 8)        // 16-byte chunks of a staged f16 row
#define DKS (DKC + 1)        // row pitch of staged rows, uvec4
#define CLEN 8               // elements of a 16x16 accumulator per invocation (32-wide subgroups)
#if BD_WHOLE
#define BDC (16 * (NFB + 1)) // BD' columns the shift scratch holds
#else
#define BDC 16
#endif
#define BDP (BDC / 4 + 1)    // row pitch of the BD' scratch, uvec4 (4 f32)
#define PSP (BK / 8 + 1)     // row pitch of the staged weights (16 x BK f16), uvec4
#define WSR (16 * DKS)       // a warp's row scratch, uvec4
#if P_REG || BDP >= PSP
#define WSS (16 * BDP)       // a warp's shift scratch, uvec4
#else
#define WSS (16 * PSP)
#endif
#define WSW (WSR + WSS)
#define SH_SIZE (NWARP * WSW)

#if DKP % 16 != 0 || (BK != 16 && BK != 32)
#error "attention_fa2: DKP must be a multiple of 16 and BK 16 or 32"
#endif
#if (SH_SIZE * 16 + NWARP * 64) > 49152
#error "attention_fa2: more than 48 KiB of shared memory"
#endif

// Masked scores: a finite sentinel (no infinities: fast-math drivers may mishandle them).
#define MASKED (-3.0e38)
#define MASKED_CMP (-1.0e38)
#define TAU2 11.0            // the reference max moves when a score exceeds it by 2^11 (log2 domain)
#define LOG2E 1.4426950408889634

layout(local_size_x_id = 0) in;

shared uint sh_rows[NWARP * 16]; // per warp and row: block max (ordered bits), then 1 / l

// ---- shared memory and fragment operations ---------------------------------------------------------
// Offsets and pitches in uvec4 units (8 halves or 4 floats). GLOAD_*: from device memory at a byte
// address (16-byte aligned), element offset and pitch in uvec4 units.
#ifndef EMULATE_COOPMAT
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer U4Arr { uvec4 d[]; };
shared uvec4 sh[SH_SIZE];
#define SH(i) sh[i]
#define WARP gl_SubgroupID
#define LANE gl_SubgroupInvocationID
#define WARP_SYNC() subgroupBarrier()
#define WARP_ANY(x) subgroupAny(x)
#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragBT FragB
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define LOAD_A(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define KEEP_A(f, off, pitch, slot) coopMatLoadNV(f, sh, off, pitch, false)
#define STORE_A(f, off, pitch) coopMatStoreNV(f, sh, off, pitch, false)
// B = M^T for row-major M (k rows, position rows: dk contiguous): column n is row n of M.
#define LOAD_BT(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, true)
#define GLOAD_BT(f, addr, off, pitch) coopMatLoadNV(f, U4Arr(addr).d, off, pitch, true)
// B row-major (v rows: key x dk).
#define LOAD_B(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define GLOAD_B(f, addr, off, pitch) coopMatLoadNV(f, U4Arr(addr).d, off, pitch, false)
#define LOAD_C(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define STORE_C(f, off, pitch) coopMatStoreNV(f, sh, off, pitch, false)
#define MMA(c, a, b) c = coopMatMulAddNV(a, b, c)
#define ZERO_C(c) c = FragC(0.0)
#define ELEM(c, e) c[e]
#define TO_A(c, slot) FragA(c)
#define FRAG_LOOP [[unroll]]
#else
// Device memory standing in for this workgroup's shared memory (coherent: exchanged within the warp).
layout(buffer_reference, std430, buffer_reference_align = 16) coherent buffer ShArr { uvec4 d[]; };
uint64_t sh_base;
#define SH(i) ShArr(sh_base).d[i]
#define WARP (gl_LocalInvocationID.x / 32u)
#define LANE (gl_LocalInvocationID.x % 32u)
#define WARP_SYNC()                                                                                   \
    do {                                                                                              \
        memoryBarrierBuffer();                                                                        \
        memoryBarrierShared();                                                                        \
        barrier();                                                                                    \
    } while (false)
#define WARP_ANY(x) emu_any(x)
#define FRAG_LOOP [[dont_unroll]]
// A fragments in the stand-in shared memory: element (r, k) at half (off + r*pitch)*8 + k; the ones kept
// (q+u, q+v) and the weights are copied to slots behind the kernel's layout (EMU_A_OFF).
struct FragA {
    uint off, pitch;
};
struct FragB {  // row-major B at a device address: element (k, n) at half (k*pitch)*8 + n
    uint64_t a;
    uint pitch;
};
struct FragBT { // B = M^T: element (k, n) at half (n*pitch)*8 + k
    uint64_t a;
    uint pitch;
};
struct FragC {
    float v[8]; // lane L: row L/2, columns 8(L%2) + e
};
#define EMU_A_OFF SH_SIZE
#define EMU_AW ((2 * NDK + NFB) * 32) // a warp's slots: q+u, q+v, the weights; 16 rows of 2 uvec4 each
shared uint emu_flag;

bool emu_any(bool x) {
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        emu_flag = 0u;
    barrier();
    if (x)
        emu_flag = 1u;
    barrier();
    return emu_flag != 0u;
}
vec4 lo4(uvec4 u) { return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y)); }
vec4 hi4(uvec4 u) { return vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w)); }
uint emu_slot(uint slot) { return EMU_A_OFF + WARP * EMU_AW + slot * 32u; }
FragA emu_keep_a(uint off, uint pitch, uint slot) {
    const uint dst = emu_slot(slot), r = LANE / 2u, hf = LANE % 2u;
    SH(dst + 2u * r + hf) = SH(off + r * pitch + hf);
    return FragA(dst, 2u);
}
FragA emu_to_a(FragC c, uint slot) {
    const uint dst = emu_slot(slot), r = LANE / 2u, hf = LANE % 2u;
    SH(dst + 2u * r + hf) = uvec4(packHalf2x16(vec2(c.v[0], c.v[1])), packHalf2x16(vec2(c.v[2], c.v[3])),
                                  packHalf2x16(vec2(c.v[4], c.v[5])), packHalf2x16(vec2(c.v[6], c.v[7])));
    WARP_SYNC(); // the whole fragment is written before a product reads it
    return FragA(dst, 2u);
}
void emu_row_a(FragA a, out vec4 ar[4]) {
    const uint r = LANE / 2u;
    const uvec4 u0 = SH(a.off + r * a.pitch), u1 = SH(a.off + r * a.pitch + 1u);
    ar[0] = lo4(u0);
    ar[1] = hi4(u0);
    ar[2] = lo4(u1);
    ar[3] = hi4(u1);
}
uvec4 emu_u4(uint64_t a, uint i) { return U4Ref(a + uint64_t(i) * 16ul).v; }
void emu_mma(inout FragC c, FragA a, FragB b) {
    vec4 ar[4];
    emu_row_a(a, ar);
    const uint c0 = LANE % 2u;
    [[unroll]] for (uint k = 0; k < 16u; k++) {
        const uvec4 u = emu_u4(b.a, k * b.pitch + c0);
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
    emu_row_a(a, ar);
    const uint n0 = 8u * (LANE % 2u);
    [[unroll]] for (uint i = 0; i < 8u; i++) {
        const uvec4 u0 = emu_u4(b.a, (n0 + i) * b.pitch), u1 = emu_u4(b.a, (n0 + i) * b.pitch + 1u);
        c.v[i] += dot(ar[0], lo4(u0)) + dot(ar[1], hi4(u0)) + dot(ar[2], lo4(u1)) + dot(ar[3], hi4(u1));
    }
}
void emu_store_c(FragC c, uint off, uint pitch) {
    const uint r = LANE / 2u, c0 = 2u * (LANE % 2u);
    SH(off + r * pitch + c0) = floatBitsToUint(vec4(c.v[0], c.v[1], c.v[2], c.v[3]));
    SH(off + r * pitch + c0 + 1u) = floatBitsToUint(vec4(c.v[4], c.v[5], c.v[6], c.v[7]));
}
void emu_load_c(out FragC c, uint off, uint pitch) {
    const uint r = LANE / 2u, c0 = 2u * (LANE % 2u);
    const vec4 a = uintBitsToFloat(SH(off + r * pitch + c0)), b = uintBitsToFloat(SH(off + r * pitch + c0 + 1u));
    c.v = float[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
}
void emu_store_a(FragA a, uint off, uint pitch) {
    const uint r = LANE / 2u, hf = LANE % 2u;
    SH(off + r * pitch + hf) = SH(a.off + r * a.pitch + hf);
}
#define LOAD_A(f, off, pitch) f = FragA(off, pitch)
#define KEEP_A(f, off, pitch, slot) f = emu_keep_a(off, pitch, slot)
#define STORE_A(f, off, pitch) emu_store_a(f, off, pitch)
#define LOAD_BT(f, off, pitch) f = FragBT(sh_base + uint64_t(off) * 16ul, pitch)
#define GLOAD_BT(f, addr, off, pitch) f = FragBT((addr) + uint64_t(off) * 16ul, pitch)
#define LOAD_B(f, off, pitch) f = FragB(sh_base + uint64_t(off) * 16ul, pitch)
#define GLOAD_B(f, addr, off, pitch) f = FragB((addr) + uint64_t(off) * 16ul, pitch)
#define LOAD_C(f, off, pitch) emu_load_c(f, off, pitch)
#define STORE_C(f, off, pitch) emu_store_c(f, off, pitch)
#define MMA(c, a, b) emu_mma(c, a, b)
#define ZERO_C(c) [[unroll]] for (uint z_ = 0; z_ < 8u; z_++) c.v[z_] = 0.0
#define ELEM(c, e) c.v[e]
#define TO_A(c, slot) emu_to_a(c, slot)
#endif

float sh_f32(uint f) { return uintBitsToFloat(SH(f >> 2)[f & 3u]); }
void sh_set_f32(uint f, float x) { SH(f >> 2)[f & 3u] = floatBitsToUint(x); }

// Floats as uints that compare in the same order (atomicMax on them).
uint ord(float x) {
    const uint u = floatBitsToUint(x);
    return (u & 0x80000000u) != 0u ? ~u : u | 0x80000000u;
}
float unord(uint o) { return uintBitsToFloat((o & 0x80000000u) != 0u ? o & 0x7fffffffu : ~o); }

// ---- staging through the warp's row scratch --------------------------------------------------------------
// Rows i0 .. i0+15 of q (head columns, rows >= iend zeros) plus a bias, as f16 rows at dst: the sum in
// f32, then rounded to f16 (q f32 or f16).
void stage_q(uint dst, uint64_t bias, uint i0, uint iend, uint hd) {
    for (uint e = LANE; e < 16u * DKC; e += 32u) {
        const uint r = e / DKC, c = e % DKC, i = i0 + r;
        float x[8];
        [[unroll]] for (uint k = 0; k < 8u; k++) {
            const uint d = 8u * c + k;
            x[k] = 0.0;
            if (i < iend && d < pc.dk)
                x[k] = att_load(pc.q, uint64_t(i) * pc.D + hd + d, Q16) + LOADF(bias, hd + d);
        }
        SH(dst + r * DKS + c) = uvec4(packHalf2x16(vec2(x[0], x[1])), packHalf2x16(vec2(x[2], x[3])),
                                      packHalf2x16(vec2(x[4], x[5])), packHalf2x16(vec2(x[6], x[7])));
    }
}

// Rows row0 .. row0+15 of an f16 [rows, D] tensor (head columns) to dst; rows outside [lo, hi) zeros.
void stage_frag(uint dst, uint64_t base, int row0, uint hd, int lo, int hi) {
    for (uint e = LANE; e < 16u * DKC; e += 32u) {
        const uint r = e / DKC, c = e % DKC;
        const int row = row0 + int(r);
        uvec4 x = uvec4(0);
        if (row >= lo && row < hi && 8u * c < pc.dk)
            x = U4Ref(base + (uint64_t(row) * pc.D + hd + 8u * c) * 2ul).v;
        SH(dst + r * DKS + c) = x;
    }
}

// Byte address of element (row, hd) of an f16 [rows, D] tensor (row clamped at 0: only direct loads,
// whose rows are valid, use it).
uint64_t row_addr(uint64_t base, int row, uint hd) { return base + (uint64_t(max(row, 0)) * pc.D + hd) * 2ul; }

// acc += (q+v) W_g^T for the window fragment of position rows n0 .. n0+15 (direct when all lie in [0, P)).
#define BD_FRAG(acc, n0)                                                                              \
    do {                                                                                              \
        const bool dir_ = (n0) >= 0 && (n0) + 16 <= int(pc.P);                                        \
        if (!dir_) {                                                                                  \
            WARP_SYNC();                                                                              \
            stage_frag(WSB, pc.p, (n0), hd, 0, int(pc.P));                                            \
            WARP_SYNC();                                                                              \
        }                                                                                             \
        const uint64_t pa_ = row_addr(pc.p, (n0), hd);                                                \
        FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {                                                 \
            if (16u * kk < pc.dk) {                                                                   \
                FragBT fb;                                                                            \
                if (dir_)                                                                             \
                    GLOAD_BT(fb, pa_, 2u * kk, dstr);                                                 \
                else                                                                                  \
                    LOAD_BT(fb, WSB + 2u * kk, DKS);                                                  \
                MMA(acc, qv[kk], fb);                                                                 \
            }                                                                                         \
        }                                                                                             \
    } while (false)

void main() {
    const uint warp = WARP, lane = LANE;
#ifdef EMULATE_COOPMAT
    sh_base = pc.emu_sh + uint64_t(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * pc.emu_stride;
#endif
    const uint WSB = warp * WSW, WSD = WSB + WSR; // this warp's row scratch and shift scratch
    const float c2 = pc.scale * LOG2E;
    const uint dstr = pc.D / 8u; // row pitch of the tensors, uvec4

    // ---- element -> (row, column) of the accumulator type, and what each element reads of BD' -------
    // pe[e]: bits 0-3 row, 4-7 column, 8 whether the shifted column lies in the next BD' fragment
    // (column > row), 16-31 the float offset of the value in a fragment stored with pitch BDP.
    for (uint e = lane; e < 256u; e += 32u)
        sh_set_f32((WSB + (e / 16u) * 5u) * 4u + e % 16u, float(e));
    WARP_SYNC();
    uint pe[CLEN];
    {
        FragC ix;
        LOAD_C(ix, WSB, 5u);
#ifndef EMULATE_COOPMAT
        if (ix.length() != CLEN) { // a layout this kernel does not know: refuse loudly
            for (uint i = (gl_WorkGroupID.x * NWARP + warp) * 32u + lane; i < pc.Tq * pc.D;
                 i += gl_NumWorkGroups.x * NWARP * 32u)
                att_store_y(i, uintBitsToFloat(0x7fc00000u));
            return;
        }
#endif
        [[unroll]] for (uint e = 0; e < CLEN; e++) {
            const uint rc = uint(ELEM(ix, e)), r = rc / 16u, c = rc % 16u;
            pe[e] = r | (c << 4) | (c > r ? 256u : 0u) | ((r * BDP * 4u + ((c + 15u - r) & 15u)) << 16);
        }
    }
    WARP_SYNC(); // the probe is read before the scratch is reused
#define ROW(e) (pe[e] & 15u)
#define COL(e) ((pe[e] >> 4) & 15u)
#define HI(e) ((pe[e] >> 8) & 1u)
#define OFF(e) (pe[e] >> 16)

    const uint nqb = (pc.Tq + 15u) / 16u; // 16-row query blocks
    const uint nvq = min(pc.Tq, pc.n_valid > pc.q0 ? pc.n_valid - pc.q0 : 0u); // valid query rows
    const uint kend = min(pc.k0 + pc.Tk, pc.n_valid); // key positions present and valid: [k0, kend)
    for (uint h = gl_WorkGroupID.y; h < ATT_H; h += gl_NumWorkGroups.y) {
        const uint hd = h * pc.dk; // < D <= INT32_MAX (host)
        for (uint qb = gl_WorkGroupID.x * NWARP + warp; qb < nqb; qb += gl_NumWorkGroups.x * NWARP) {
            const uint i0w = 16u * qb, pw = pc.q0 + i0w; // the warp's first row and its position
            const uint iend = max(i0w, min(i0w + 16u, nvq)); // valid rows of the block: [i0w, iend)

            // ---- q + u and q + v into registers (through the row scratch) ---------------------------
            FragA qu[NDK], qv[NDK];
            stage_q(WSB, pc.bu, i0w, iend, hd);
            WARP_SYNC();
            FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                KEEP_A(qu[kk], WSB + 2u * kk, DKS, kk);
            WARP_SYNC();
            stage_q(WSB, pc.bv, i0w, iend, hd);
            WARP_SYNC();
            FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                KEEP_A(qv[kk], WSB + 2u * kk, DKS, NDK + kk);
            WARP_SYNC();

            // One pass per segment the valid rows reach (one pass without segments, or for padding):
            // rows [ilo, ihi) of segment sg, whose positions are [slo, shi).
            uint sg = pc.nseg > 0u && i0w < iend ? seg_find(pc.seg, pc.nseg, int64_t(pw)) : 0u;
            for (uint ilo = i0w;; sg++) {
                uint slo = 0u, shi = 0xffffffffu;
                if (pc.nseg > 0u) { // positions < 2^29 (host): clamping keeps a bad table harmless
                    slo = uint(clamp(LOADL(pc.seg, sg), 0l, int64_t(pc.q0 + ilo)));
                    if (sg + 1u < pc.nseg)
                        shi = uint(clamp(LOADL(pc.seg, sg + 1u), int64_t(pc.q0 + ilo), int64_t(0x7fffffff)));
                }
                const uint ihi = min(iend, shi - pc.q0); // rows of this pass: [ilo, ihi)
                const bool last = ihi >= iend;
                // Keys the pass may load, [kvlo, kvhi), and those any of its rows sees, [jlo, jend): jlo on
                // the segment's BK grid (the global grid without segments); empty when there are no rows.
                const uint kvlo = max(pc.k0, slo), kvhi = min(kend, shi);
                uint jlo = 0u, jend = 0u;
                if (ilo < ihi) {
                    const uint p0 = pc.q0 + ilo; // positions < 2^29 and w < 2^30 (host): no overflow
                    jlo = max(kvlo, p0 > pc.w ? p0 - pc.w : 0u);
                    jlo -= (jlo - slo) % BK;
                    jend = min(kvhi, pc.q0 + ihi + pc.w);
                }
                const uint rlo = ilo - i0w, rhi = ihi > ilo ? ihi - i0w : rlo; // the pass's rows of the block

                FragC o[NDK], lsum, bdk;
                FRAG_LOOP for (uint n = 0; n < NDK; n++)
                    ZERO_C(o[n]);
                ZERO_C(lsum);
                ZERO_C(bdk);
                float m[CLEN];
                [[unroll]] for (uint e = 0; e < CLEN; e++)
                    m[e] = MASKED;

                // window row 0 of the first block: p row center - (pw + 15) + jlo
                const int nb0 = int(ATT_CENTER) - int(pw) - 15 + int(jlo);
                uint kb = 0u;
                for (uint j0 = jlo; j0 < jend; j0 += BK, kb++) {
                    const int nb = nb0 + int(BK * kb);
                    const bool inner = rlo == 0u && rhi == 16u && j0 >= pc.k0 && j0 + BK <= jend &&
                                       pw + 15u <= j0 + pc.w && j0 + BK - 1u <= pw + pc.w;

                    // ---- AC = (q+u) k^T ------------------------------------------------------------------
                    FragC s[NFB];
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        ZERO_C(s[f]);
                        const uint jf = j0 + 16u * f;
                        const bool dir = jf >= kvlo && jf + 16u <= kvhi;
                        const int kr = int(jf) - int(pc.k0); // k's row of the fragment's first key
                        if (!dir) {
                            WARP_SYNC();
                            stage_frag(WSB, pc.k, kr, hd, int(kvlo) - int(pc.k0), int(kvhi) - int(pc.k0));
                            WARP_SYNC();
                        }
                        const uint64_t ka = row_addr(pc.k, kr, hd);
                        FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                            if (16u * kk < pc.dk) {
                                FragBT fb;
                                if (dir)
                                    GLOAD_BT(fb, ka, 2u * kk, dstr);
                                else
                                    LOAD_BT(fb, WSB + 2u * kk, DKS);
                                MMA(s[f], qu[kk], fb);
                            }
                        }
                    }

                    // ---- BD' window fragments and the shift: s(r, c) += BD'(r, c - r + 15) ------------------
                    if (kb == 0u) {
                        ZERO_C(bdk);
                        BD_FRAG(bdk, nb);
                    }
    #if BD_WHOLE
                    STORE_C(bdk, WSD, BDP);
                    FRAG_LOOP for (uint g = 1; g <= NFB; g++) {
                        FragC bn;
                        ZERO_C(bn);
                        BD_FRAG(bn, nb + int(16u * g));
                        STORE_C(bn, WSD + 4u * g, BDP);
                        if (g == NFB)
                            bdk = bn;
                    }
                    WARP_SYNC();
                    FRAG_LOOP for (uint f = 0; f < NFB; f++)
                        [[unroll]] for (uint e = 0; e < CLEN; e++)
                            ELEM(s[f], e) += sh_f32(WSD * 4u + OFF(e) + 16u * (f + HI(e)));
                    WARP_SYNC(); // the shift's reads are done before the scratch is written again
    #else
                    STORE_C(bdk, WSD, BDP);
                    WARP_SYNC();
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        [[unroll]] for (uint e = 0; e < CLEN; e++) // the part in fragment f
                            if (HI(e) == 0u)
                                ELEM(s[f], e) += sh_f32(WSD * 4u + OFF(e));
                        FragC bn;
                        ZERO_C(bn);
                        BD_FRAG(bn, nb + int(16u * (f + 1u)));
                        WARP_SYNC(); // everyone has read fragment f
                        STORE_C(bn, WSD, BDP);
                        WARP_SYNC();
                        [[unroll]] for (uint e = 0; e < CLEN; e++) // the part in fragment f + 1
                            if (HI(e) != 0u)
                                ELEM(s[f], e) += sh_f32(WSD * 4u + OFF(e));
                        if (f == NFB - 1u)
                            bdk = bn;
                    }
                    WARP_SYNC(); // the shift's reads are done before the scratch is written again
    #endif

                    // ---- scores in the log2 domain, masks, and whether a reference max must move -----------
                    bool over = false;
                    FRAG_LOOP for (uint f = 0; f < NFB; f++)
                        [[unroll]] for (uint e = 0; e < CLEN; e++) {
                            float x = ELEM(s[f], e) * c2;
                            if (!inner) {
                                const uint r = ROW(e), j = j0 + 16u * f + COL(e), pi = pw + r;
                                const bool ok = r >= rlo && r < rhi && j >= pc.k0 && j < jend &&
                                                (pi > j ? pi - j : j - pi) <= pc.w;
                                x = ok ? x : MASKED;
                            }
                            ELEM(s[f], e) = x;
                            over = over || x > m[e] + TAU2;
                        }
                    if (WARP_ANY(over)) {
                        // per-row block maxima (atomics: order-independent), then the rows that must move
                        if (lane < 16u)
                            sh_rows[warp * 16u + lane] = ord(MASKED);
                        WARP_SYNC();
                        [[unroll]] for (uint e = 0; e < CLEN; e++) {
                            float mx = ELEM(s[0], e);
                            FRAG_LOOP for (uint f = 1; f < NFB; f++)
                                mx = max(mx, ELEM(s[f], e));
                            atomicMax(sh_rows[warp * 16u + ROW(e)], ord(mx));
                        }
                        WARP_SYNC();
                        [[unroll]] for (uint e = 0; e < CLEN; e++) {
                            const float bm = unord(sh_rows[warp * 16u + ROW(e)]);
                            if (bm > m[e] + TAU2) {
                                const float a = exp2(m[e] - bm); // 0 for a row's first keys (O, l are zero)
                                m[e] = bm;
                                ELEM(lsum, e) *= a;
                                FRAG_LOOP for (uint n = 0; n < NDK; n++)
                                    ELEM(o[n], e) *= a;
                            }
                        }
                        WARP_SYNC(); // the maxima are read before anyone writes sh_rows again
                    }

                    // ---- weights, their sums, O += P V -------------------------------------------------------
                    FRAG_LOOP for (uint f = 0; f < NFB; f++)
                        [[unroll]] for (uint e = 0; e < CLEN; e++) {
                            const float x = ELEM(s[f], e), wgt = x > MASKED_CMP ? exp2(x - m[e]) : 0.0;
                            ELEM(s[f], e) = wgt;
                            ELEM(lsum, e) += wgt;
                        }
    #if !P_REG
                    FRAG_LOOP for (uint f = 0; f < NFB; f++)
                        STORE_A(TO_A(s[f], 2u * NDK + f), WSD + 2u * f, PSP);
                    WARP_SYNC();
    #endif
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        const uint jf = j0 + 16u * f;
                        const bool dir = jf >= kvlo && jf + 16u <= kvhi;
                        const int vr = int(jf) - int(pc.k0);
                        if (!dir) {
                            WARP_SYNC();
                            stage_frag(WSB, pc.v, vr, hd, int(kvlo) - int(pc.k0), int(kvhi) - int(pc.k0));
                            WARP_SYNC();
                        }
    #if P_REG
                        FragA pa = TO_A(s[f], 2u * NDK + f);
    #else
                        FragA pa;
                        LOAD_A(pa, WSD + 2u * f, PSP);
    #endif
                        const uint64_t va = row_addr(pc.v, vr, hd);
                        FRAG_LOOP for (uint n = 0; n < NDK; n++) {
                            if (16u * n < pc.dk) {
                                FragB fb;
                                if (dir)
                                    GLOAD_B(fb, va, 2u * n, dstr);
                                else
                                    LOAD_B(fb, WSB + 2u * n, DKS);
                                MMA(o[n], pa, fb);
                            }
                        }
                    }
    #if !P_REG
                    WARP_SYNC(); // the weights are read before the scratch is written again
    #endif
                }

                // ---- y = O / l for the pass's rows (after the last pass, zeros for padded rows) ------
                STORE_C(lsum, WSD, BDP);
                WARP_SYNC();
                if (lane < 16u) {
                    float l = 0.0;
                    for (uint c = 0; c < 16u; c++)
                        l += sh_f32((WSD + lane * BDP) * 4u + c);
                    // a valid row sees key i itself, so l > 0 there; other rows have O = 0
                    sh_rows[warp * 16u + lane] = floatBitsToUint(l > 0.0 ? 1.0 / l : 0.0);
                }
                WARP_SYNC();
                FRAG_LOOP for (uint n = 0; n < NDK; n++)
                    [[unroll]] for (uint e = 0; e < CLEN; e++) {
                        const uint i = i0w + ROW(e), d = 16u * n + COL(e);
                        if (i < pc.Tq && d < pc.dk && ((i >= ilo && i < ihi) || (last && i >= iend)))
                            att_store_y(uint64_t(i) * pc.D + hd + d,
                                        ELEM(o[n], e) * uintBitsToFloat(sh_rows[warp * 16u + ROW(e)]));
                    }
                WARP_SYNC(); // sh_rows and the scratch are read before they are written again
                if (last)
                    break;
                ilo = ihi;
            }
        }
    }
}
