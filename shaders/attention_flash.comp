#version 460
// attention_flash.comp — the fused relative-position attention (ops.h op_relpos_attention) as a
// flash-attention kernel on tensor cores (GL_NV_cooperative_matrix, 16x16x16 f16 x f16 -> f32), for
// the op's f16 mode: q+u, q+v, k, p, v and the softmax weights enter the products as f16; scores,
// softmax statistics and the output stay f32. q, k, v, p and y may be f32 or f16 (attention.glsl).
// The older attention_coopmat.comp does the same with 16-key blocks and the softmax in shared memory.
//
//   s(i,j) = ((q_i + u_h).k_j + (q_i + v_h).p[center - (i - j)]) * scale,   y_i = softmax_j(s) . v
// over key positions j in [k0, k0+Tk), j < n_valid, |i - j| <= w; query positions >= n_valid get zeros.
//
// Work: a workgroup of NWARP subgroups (32 invocations each) owns BQ = 16*NWARP query rows of one head
// (grid-stride over query blocks in x and heads in y); subgroup ("warp") w owns rows 16w .. 16w+15,
// keeps their q+u and q+v as NDK A-fragments and their output O (16 x DKP f32) as NDK accumulators
// in registers, and walks key blocks of BK keys (16, 32 or 64) starting at multiples of BK of the key
// position. Per key block the workgroup stages k and v (BK rows) and the new position rows as f16 in
// shared memory (16-byte loads; f32 inputs are converted while staged); everything after that is
// per warp, synchronised with subgroup barriers only: two workgroup barriers per key block in all.
//
// The position term, per block, from the band of position rows it needs. Score (r, c) of a warp's
// 16 x BK tile (row i = i_w + r, key j = j0 + c) uses position row center - i + j = nw + (c - r + 15)
// with nw = center - (i_w + 15) + j0: the warp's "window" of 16 + BK consecutive position rows, the
// rows W_0 .. W_{BK+15}. So BD' = (q+v) W^T is an ordinary product (16 x (BK+16), NFB+1 fragments)
// and the score needs BD'(r, c - r + 15): a shift that differs per row (Transformer-XL's rel_shift).
// The product is exact work: the window of the next key block starts BK rows later, so its first
// fragment is this block's last one, kept in registers; a block computes NFB = BK/16 new fragments,
// as many as AC = (q+u) k^T. The shift goes through shared memory: the warp stores a BD' fragment
// (coopMatStore) and each invocation reads, for each of its own accumulator elements, the one value
// that element needs. That needs each element's (row, column), which cooperative matrices keep
// opaque: at start the kernel loads a 16 x 16 matrix holding r*16 + c into an accumulator and reads
// its elements back, so element e of any accumulator of that type is at (ROW(e), COL(e)) (a type has
// one layout: component-wise operations between matrices depend on it). Everything per element —
// the shift, masking, the softmax — then works on accumulator elements in registers whatever the
// driver's layout. The workgroup's union of the warps' windows is BQ + BK - 1 position rows, staged
// in a ring of NWIN = BQ + BK rows that advances BK rows per block (only the new rows are staged).
//
// Online softmax, per row, with a lazily moved reference max. Scores are scaled into the log2 domain
// (s * scale * log2 e); each row has a reference m (held per element: every element of a row holds
// the same value) and weights are exp2(s - m). m moves only when a block's score exceeds m + TAU2
// (2^11 = 2048: weights stay far below the f16 maximum): a warp checks its elements, and when any
// exceeds (subgroupAny; always in a row's first block with keys) it takes the slow path: per-row
// block maxima through shared-memory atomics (order-independent), m := block max for the rows whose
// max exceeded m + TAU2, and those rows' O and partial sums scaled by exp2(m_old - m_new). Otherwise
// no row statistics are computed at all. The sum l is kept per element (the sum over the key columns
// that element covers) and added up across the 16 columns once, at the end. The weights become f16
// A-fragments either by converting the accumulator (P_REG 1; the driver maps layouts) or through the
// warp's shared scratch (P_REG 0), then O += P V.
//
// Exactness and row chunks: every decision about a row (its m, when it moves, its weights, the order
// of its sums) depends only on its own scores; a key keeps its accumulator column (j mod 16) and its
// block (the BK grid of positions) whatever the call; a block holding none of a row's keys leaves its
// O, m and sums exactly unchanged (its weights are 0; absent keys are staged as zeros). So a row's
// result does not depend on the rows sharing its call, and row chunks of the op are bit-identical to
// one call.
// A packed batch (nseg > 0: seg [nseg+1] holds the segments' start positions): a query sees only the
// keys of its segment, on a BK grid from the segment's start (so a key keeps the column and block it
// has in the segment alone); a query block whose rows span several segments takes one pass per
// segment over that segment's keys (rows of other segments masked), each pass with fresh O, m, sums.
//
// Shared memory (uvec4 units; 16-byte aligned rows for cooperative-matrix loads, rows padded by one
// uvec4 so 8 rows of 16 bytes hit distinct banks): k and v blocks (BK rows of DKP halves each), the
// position ring (NWIN rows), and per warp a scratch for BD' fragments (BD_WHOLE 1: the window's NFB+1
// fragments, one store round trip per block; 0: one fragment at a time, two subgroup barriers per
// fragment, 1/(NFB+1) of the space), reused for the weights when P_REG is 0 and for the sums at the
// end; plus 16 uints per warp for the row maxima. DKP 128 (row pitch 272 bytes):
//   NWARP 4, BK 32, BD_WHOLE 0: (32 + 32 + 96) rows * 272 + 4 * 1280 + 256 = 48,896 bytes (NVIDIA: 48 KiB)
//   NWARP 4, BK 16, BD_WHOLE 1: (16 + 16 + 80) rows * 272 + 4 * 2304 + 256 = 39,936 bytes
// vk_op_attention.c lists each variant's figure (vk_att_cfg.shared_bytes); the #error below guards it.
// Eight warps (BQ 128) do not fit with DKP 128: the ring (144 rows) and the smallest k and v blocks
// take 47.9 KiB, leaving nothing for the warps' scratch.
// Double-buffering k, v and the ring in shared memory does not fit with BK >= 32 at DKP 128; instead,
// PREFETCH 1: the next block's k, v and position rows are loaded into registers before this block's
// products and stored after them (latency hidden, more registers); 0: loaded after the barrier (other
// workgroups on the SM cover it).
//
// -DEMULATE_COOPMAT replaces the fragment operations with plain code ("virtual subgroups" of 32
// consecutive invocations; element e of lane L's accumulator at row L/2, column 8(L%2)+e), the
// subgroup barriers and votes with workgroup ones (so warp-uniform decisions become
// workgroup-uniform: a warp may then run a block that holds none of its keys, which changes nothing),
// and shared memory with a slice of device memory per workgroup (pc.emu_sh, pc.emu_stride), so the
// identical staging, ring, shift, softmax and epilogue code of every configuration runs on any f16
// device (lavapipe included) and the tests check it.
//
// Defines: NWARP, BK, DKP (padded head width, a multiple of 16 >= dk), BD_WHOLE, P_REG, PREFETCH.
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
#ifndef PREFETCH
#define PREFETCH 0
#endif

#define NT (NWARP * 32)      // invocations per workgroup
#define BQ (NWARP * 16)      // query rows per workgroup
#define NDK (DKP / 16)       // fragments across the padded head width
#define NFB (BK / 16)        // score fragments per key block
#define DKC (DKP / 8)        // 16-byte chunks of a staged f16 row
#define DKS (DKC + 1)        // row pitch of staged rows, uvec4
#define NWIN (BQ + BK)       // ring of position rows
#define CLEN 8               // elements of a 16x16 accumulator per invocation (32-wide subgroups)
#if BD_WHOLE
#define BDC (16 * (NFB + 1)) // BD' columns a warp's scratch holds
#else
#define BDC 16
#endif
#define BDP (BDC / 4 + 1)    // row pitch of the BD' scratch, uvec4 (4 f32)
#define PSP (BK / 8 + 1)     // row pitch of the staged weights (16 x BK f16), uvec4
#if P_REG || 16 * BDP >= 16 * PSP
#define WSW (16 * BDP)       // a warp's scratch, uvec4
#else
#define WSW (16 * PSP)
#endif
#define K_OFF 0
#define V_OFF (K_OFF + BK * DKS)
#define WIN_OFF (V_OFF + BK * DKS)
#define WS_OFF (WIN_OFF + NWIN * DKS)
#define SH_SIZE (WS_OFF + NWARP * WSW)
#define KCH ((BK * DKC + NT - 1) / NT) // 16-byte chunks of a BK-row block each invocation stages (at most)
#define RPP (NT / DKC)       // rows of a block one pass of the workgroup stages

#if DKP % 16 != 0 || (BK != 16 && BK != 32 && BK != 64)
#error "attention_flash: DKP must be a multiple of 16 and BK 16, 32 or 64"
#endif
#if NT % DKC != 0
#error "attention_flash: the workgroup must cover whole staged rows"
#endif
#if (SH_SIZE * 16 + NWARP * 64) > 49152
#error "attention_flash: more than 48 KiB of shared memory"
#endif

// Masked scores: a finite sentinel (no infinities: fast-math drivers may mishandle them).
#define MASKED (-3.0e38)
#define MASKED_CMP (-1.0e38)
#define TAU2 11.0            // the reference max moves when a score exceeds it by 2^11 (log2 domain)
#define LOG2E 1.4426950408889634

layout(local_size_x_id = 0) in;

shared uint sh_rows[NWARP * 16]; // per warp and row: block max (ordered bits), then 1 / l

// ---- shared memory and fragment operations ---------------------------------------------------------
// Offsets and pitches in uvec4 units (8 halves or 4 floats).
#ifndef EMULATE_COOPMAT
shared uvec4 sh[SH_SIZE];
#define SH(i) sh[i]
#define WARP gl_SubgroupID
#define LANE gl_SubgroupInvocationID
#define WARP_SYNC() subgroupBarrier()
#define WARP_ANY(x) subgroupAny(x)
#define WARP_UNIFORM(x) (x)          // already uniform in the warp
#define FragA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragBT FragB
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define LOAD_A(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
// an A fragment that must outlive the shared memory it is loaded from (the emulation copies it)
#define KEEP_A(f, off, pitch, slot) coopMatLoadNV(f, sh, off, pitch, false)
#define STORE_A(f, off, pitch) coopMatStoreNV(f, sh, off, pitch, false)
// B = M^T for row-major M (k rows, position rows: dk contiguous): column n is row n of M.
#define LOAD_BT(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, true)
// B row-major (v rows: key x dk).
#define LOAD_B(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define LOAD_C(f, off, pitch) coopMatLoadNV(f, sh, off, pitch, false)
#define STORE_C(f, off, pitch) coopMatStoreNV(f, sh, off, pitch, false)
#define MMA(c, a, b) c = coopMatMulAddNV(a, b, c)
#define ZERO_C(c) c = FragC(0.0)
#define ELEM(c, e) c[e]
#define TO_A(c, slot) FragA(c)
// Loops over fragments stay unrolled: arrays of cooperative matrices want constant indices.
#define FRAG_LOOP [[unroll]]
#else
// Device memory standing in for this workgroup's shared memory (coherent: the workgroup's
// invocations exchange data through it, ordered by the barriers).
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
#define WARP_UNIFORM(x) emu_any(x)
#define FRAG_LOOP [[dont_unroll]]
// A fragments live in the stand-in shared memory: element (r, k) at half (off + r*pitch)*8 + k. The
// ones kept across staging (q+u, q+v) and the weights are copied to slots of the warp's own area
// behind the kernel's layout (EMU_A_OFF; the host counts it in the stride).
struct FragA {
    uint off, pitch;
};
struct FragB {  // row-major B in shared memory: element (k, n) at half (off + k*pitch)*8 + n
    uint off, pitch;
};
struct FragBT { // B = M^T: element (k, n) at half (off + n*pitch)*8 + k
    uint off, pitch;
};
struct FragC {
    float v[8]; // lane L: row L/2, columns 8(L%2) + e
};
#define EMU_A_OFF SH_SIZE
#define EMU_AW ((2 * NDK + NFB) * 32) // a warp's slots: q+u, q+v, the weights; 16 rows of 2 uvec4 each
shared uint emu_flag;

// Every invocation of the workgroup calls these in the same order (uniform control flow).
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
// Copies this lane's part (row L/2, half L%2) of an A fragment to a slot; read after later barriers.
FragA emu_keep_a(uint off, uint pitch, uint slot) {
    const uint dst = emu_slot(slot), r = LANE / 2u, hf = LANE % 2u;
    SH(dst + 2u * r + hf) = SH(off + r * pitch + hf);
    return FragA(dst, 2u);
}
// An accumulator as an f16 A fragment (the lane's 8 elements are row L/2, columns 8(L%2) ..).
FragA emu_to_a(FragC c, uint slot) {
    const uint dst = emu_slot(slot), r = LANE / 2u, hf = LANE % 2u;
    SH(dst + 2u * r + hf) = uvec4(packHalf2x16(vec2(c.v[0], c.v[1])), packHalf2x16(vec2(c.v[2], c.v[3])),
                                  packHalf2x16(vec2(c.v[4], c.v[5])), packHalf2x16(vec2(c.v[6], c.v[7])));
    WARP_SYNC(); // the whole fragment is written before a product reads it
    return FragA(dst, 2u);
}
// Row L/2 of A as 16 floats.
void emu_row_a(FragA a, out vec4 ar[4]) {
    const uint r = LANE / 2u;
    const uvec4 u0 = SH(a.off + r * a.pitch), u1 = SH(a.off + r * a.pitch + 1u);
    ar[0] = lo4(u0);
    ar[1] = hi4(u0);
    ar[2] = lo4(u1);
    ar[3] = hi4(u1);
}
void emu_mma(inout FragC c, FragA a, FragB b) {
    vec4 ar[4];
    emu_row_a(a, ar);
    const uint c0 = LANE % 2u;
    [[unroll]] for (uint k = 0; k < 16u; k++) {
        const uvec4 u = SH(b.off + k * b.pitch + c0);
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
        const uint o = b.off + (n0 + i) * b.pitch;
        const uvec4 u0 = SH(o), u1 = SH(o + 1u);
        c.v[i] += dot(ar[0], lo4(u0)) + dot(ar[1], hi4(u0)) + dot(ar[2], lo4(u1)) + dot(ar[3], hi4(u1));
    }
}
void emu_store_c(FragC c, uint off, uint pitch) {
    const uint r = LANE / 2u, c0 = 2u * (LANE % 2u); // uvec4 column of the lane's 8 floats
    SH(off + r * pitch + c0) = floatBitsToUint(vec4(c.v[0], c.v[1], c.v[2], c.v[3]));
    SH(off + r * pitch + c0 + 1u) = floatBitsToUint(vec4(c.v[4], c.v[5], c.v[6], c.v[7]));
}
void emu_load_c(out FragC c, uint off, uint pitch) {
    const uint r = LANE / 2u, c0 = 2u * (LANE % 2u); // uvec4 column of the lane's 8 floats
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
#define LOAD_BT(f, off, pitch) f = FragBT(off, pitch)
#define LOAD_B(f, off, pitch) f = FragB(off, pitch)
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

// ---- staging ---------------------------------------------------------------------------------------------
// Elements hd+d .. hd+d+7 of row `row` of a [rows, D] tensor, raw: an f16 tensor's 8 halves in lo; an f32
// tensor's 8 floats in lo and hi. Zeros past dk and for rows that are not valid.
void fetch_raw(uint64_t base, bool h16, uint row, uint hd, uint d, bool valid, out uvec4 lo, out uvec4 hi) {
    lo = uvec4(0);
    hi = uvec4(0);
    if (!valid || d >= pc.dk)
        return;
    const uint64_t off = uint64_t(row) * pc.D + hd + d;
    if (h16) {
        if ((pc.flags & FLAG_VEC8) != 0u && d + 8u <= pc.dk) {
            lo = U4Ref(base + off * 2ul).v;
            return;
        }
        // the last chunk of a row, or unaligned: element by element (a rare path: a rolled loop)
        [[dont_unroll]] for (uint e = 0; e < 8u && d + e < pc.dk; e++) {
            const uint h = packFloat2x16(f16vec2(F16Ref(base + (off + e) * 2ul).v, float16_t(0.0))) & 0xffffu;
            lo[e >> 1] |= h << ((e & 1u) * 16u);
        }
    } else {
        if ((pc.flags & FLAG_VEC) != 0u && d + 8u <= pc.dk) {
            lo = U4Ref(base + off * 4ul).v;
            hi = U4Ref(base + off * 4ul + 16ul).v;
            return;
        }
        [[dont_unroll]] for (uint e = 0; e < 8u && d + e < pc.dk; e++) {
            const uint u = floatBitsToUint(F32Ref(base + (off + e) * 4ul).v);
            if (e < 4u)
                lo[e] = u;
            else
                hi[e - 4u] = u;
        }
    }
}

// The 8 halves of a fetched chunk (f32 rounded to nearest f16 here, once the loads have landed).
uvec4 half8(uvec4 lo, uvec4 hi, bool h16) {
    if (h16)
        return lo;
    const vec4 a = uintBitsToFloat(lo), b = uintBitsToFloat(hi);
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

// Rows row0 .. row0+n-1 of a [rows, D] tensor (head columns) to staged rows (dst0 + r) % ring at dst;
// rows outside [lo, hi) are zeros. With bias (q + u or q + v): the sum in f32, then rounded to f16.
void stage_rows(uint dst, uint dst0, uint ring, uint64_t base, bool h16, uint64_t bias, int row0, uint n, uint hd,
                int lo, int hi) {
    for (uint e = gl_LocalInvocationID.x; e < n * DKC; e += NT) {
        const uint r = e / DKC, c = e % DKC;
        const int row = row0 + int(r);
        uvec4 a, b;
        fetch_raw(base, h16, uint(max(row, 0)), hd, 8u * c, row >= lo && row < hi, a, b);
        uvec4 hv;
        if (bias == 0ul) {
            hv = half8(a, b, h16);
        } else {
            float x[8];
            if (h16) {
                const vec4 l = vec4(unpackHalf2x16(a.x), unpackHalf2x16(a.y)),
                           h = vec4(unpackHalf2x16(a.z), unpackHalf2x16(a.w));
                x = float[8](l.x, l.y, l.z, l.w, h.x, h.y, h.z, h.w);
            } else {
                const vec4 l = uintBitsToFloat(a), h = uintBitsToFloat(b);
                x = float[8](l.x, l.y, l.z, l.w, h.x, h.y, h.z, h.w);
            }
            const bool in_row = row >= lo && row < hi;
            [[unroll]] for (uint i = 0; i < 8u; i++)
                if (in_row && 8u * c + i < pc.dk)
                    x[i] += LOADF(bias, hd + 8u * c + i);
            hv = uvec4(packHalf2x16(vec2(x[0], x[1])), packHalf2x16(vec2(x[2], x[3])), packHalf2x16(vec2(x[4], x[5])),
                       packHalf2x16(vec2(x[6], x[7])));
        }
        SH(dst + ((dst0 + r) % ring) * DKS + c) = hv;
    }
}

// A key block's k rows, v rows and BK new position rows, fetched raw into registers: chunk c of this
// invocation is row t / DKC + c * RPP, 16-byte column t % DKC.
uvec4 rk[KCH], rkh[KCH], rv[KCH], rvh[KCH], rp[KCH], rph[KCH];

// Key positions j0 .. j0+BK-1 (row j - k0 of k and v; present below jend) and position rows nb ..
void fetch_block(uint j0, uint jend, int nb, uint hd) {
    const uint t = gl_LocalInvocationID.x, d = 8u * (t % DKC);
    [[unroll]] for (uint c = 0; c < KCH; c++) {
        const uint r = t / DKC + c * RPP, j = j0 + r;
        const bool kin = r < BK && j >= pc.k0 && j < jend;
        fetch_raw(pc.k, K16, kin ? j - pc.k0 : 0u, hd, d, kin, rk[c], rkh[c]);
        fetch_raw(pc.v, V16, kin ? j - pc.k0 : 0u, hd, d, kin, rv[c], rvh[c]);
        const int n = nb + int(r);
        fetch_raw(pc.p, P16, uint(max(n, 0)), hd, d, r < BK && n >= 0 && n < int(pc.P), rp[c], rph[c]);
    }
}

// Stores a fetched block: k and v rows 0 .. BK-1, position rows at ring rows ring0 + r.
void store_block(uint ring0) {
    const uint t = gl_LocalInvocationID.x, cc = t % DKC;
    [[unroll]] for (uint c = 0; c < KCH; c++) {
        const uint r = t / DKC + c * RPP;
        if (r >= BK)
            break;
        SH(K_OFF + r * DKS + cc) = half8(rk[c], rkh[c], K16);
        SH(V_OFF + r * DKS + cc) = half8(rv[c], rvh[c], V16);
        SH(WIN_OFF + ((ring0 + r) % NWIN) * DKS + cc) = half8(rp[c], rph[c], P16);
    }
}

void main() {
    const uint t = gl_LocalInvocationID.x, warp = WARP, lane = LANE;
#ifdef EMULATE_COOPMAT
    sh_base = pc.emu_sh + uint64_t(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * pc.emu_stride;
#endif
    const uint WSB = WS_OFF + warp * WSW; // this warp's scratch
    const float c2 = pc.scale * LOG2E;

    // ---- element -> (row, column) of the accumulator type, and what each element reads of BD' -------
    // pe[e]: bits 0-3 row, 4-7 column, 8 whether the shifted column lies in the next BD' fragment
    // (column > row), 16-31 the float offset of the value in a fragment stored with pitch BDP.
    for (uint e = t; e < 256u; e += NT)
        sh_set_f32((K_OFF + (e / 16u) * 5u) * 4u + e % 16u, float(e));
    barrier();
    uint pe[CLEN];
    {
        FragC ix;
        LOAD_C(ix, K_OFF, 5u);
#ifndef EMULATE_COOPMAT
        if (ix.length() != CLEN) { // a layout this kernel does not know: refuse loudly
            for (uint i = gl_WorkGroupID.x * NT + t; i < pc.Tq * pc.D; i += gl_NumWorkGroups.x * NT)
                att_store_y(i, uintBitsToFloat(0x7fc00000u));
            return;
        }
#endif
        [[unroll]] for (uint e = 0; e < CLEN; e++) {
            const uint rc = uint(ELEM(ix, e)), r = rc / 16u, c = rc % 16u;
            pe[e] = r | (c << 4) | (c > r ? 256u : 0u) | ((r * BDP * 4u + ((c + 15u - r) & 15u)) << 16);
        }
    }
#define ROW(e) (pe[e] & 15u)
#define COL(e) ((pe[e] >> 4) & 15u)
#define HI(e) ((pe[e] >> 8) & 1u)
#define OFF(e) (pe[e] >> 16)

    const uint nqb = (pc.Tq + BQ - 1u) / BQ;
    const uint nvq = min(pc.Tq, pc.n_valid > pc.q0 ? pc.n_valid - pc.q0 : 0u); // valid query rows
    const uint kend = min(pc.k0 + pc.Tk, pc.n_valid); // key positions present and valid: [k0, kend)
    for (uint h = gl_WorkGroupID.y; h < ATT_H; h += gl_NumWorkGroups.y) {
        const uint hd = h * pc.dk; // < D <= INT32_MAX (host)
        for (uint qb = gl_WorkGroupID.x; qb < nqb; qb += gl_NumWorkGroups.x) {
            const uint i0 = qb * BQ, iend = max(i0, min(i0 + BQ, nvq)); // valid rows of the block: [i0, iend)
            const uint i0w = i0 + 16u * warp, pw = pc.q0 + i0w; // this warp's first row and its position

            // ---- q + u and q + v of this warp's rows into registers (staged through the ring) ---------
            FragA qu[NDK], qv[NDK];
            barrier(); // the previous query block's readers of shared memory are done
            stage_rows(WIN_OFF, 0u, NWIN, pc.q, Q16, pc.bu, int(i0), BQ, hd, 0, int(iend));
            barrier();
            FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                KEEP_A(qu[kk], WIN_OFF + 16u * warp * DKS + 2u * kk, DKS, kk);
            barrier();
            stage_rows(WIN_OFF, 0u, NWIN, pc.q, Q16, pc.bv, int(i0), BQ, hd, 0, int(iend));
            barrier();
            FRAG_LOOP for (uint kk = 0; kk < NDK; kk++)
                KEEP_A(qv[kk], WIN_OFF + 16u * warp * DKS + 2u * kk, DKS, NDK + kk);

            // One pass per segment the valid rows reach (one pass without segments, or for padding):
            // rows [ilo, ihi) of segment sg, whose positions are [slo, shi).
            uint sg = pc.nseg > 0u && i0 < iend ? seg_find(pc.seg, pc.nseg, int64_t(pc.q0 + i0)) : 0u;
            for (uint ilo = i0;; sg++) {
                uint slo = 0u, shi = 0xffffffffu;
                if (pc.nseg > 0u) { // positions < 2^29 (host): clamping keeps a bad table harmless
                    slo = uint(clamp(LOADL(pc.seg, sg), 0l, int64_t(pc.q0 + ilo)));
                    if (sg + 1u < pc.nseg)
                        shi = uint(clamp(LOADL(pc.seg, sg + 1u), int64_t(pc.q0 + ilo), int64_t(0x7fffffff)));
                }
                const uint ihi = min(iend, shi - pc.q0); // rows of this pass: [ilo, ihi)
                const bool last = ihi >= iend;
                // Key positions any row of the pass can see: [jlo, jend), jlo on the segment's BK grid
                // (the global grid without segments); empty when the pass has no rows.
                uint jlo = 0u, jend = 0u;
                if (ilo < ihi) {
                    const uint p0 = pc.q0 + ilo; // positions < 2^29 and w < 2^30 (host): no overflow
                    jlo = max(max(pc.k0, slo), p0 > pc.w ? p0 - pc.w : 0u);
                    jlo -= (jlo - slo) % BK;
                    jend = min(min(kend, shi), pc.q0 + ihi + pc.w);
                }
                // this warp's rows of the pass: [i0w + rlo, i0w + rhi)
                const uint rlo = min(ilo > i0w ? ilo - i0w : 0u, 16u);
                const uint rhi = max(rlo, min(ihi > i0w ? ihi - i0w : 0u, 16u));

                FragC o[NDK], lsum, bdk;
                FRAG_LOOP for (uint n = 0; n < NDK; n++)
                    ZERO_C(o[n]);
                ZERO_C(lsum);
                ZERO_C(bdk);
                float m[CLEN];
                [[unroll]] for (uint e = 0; e < CLEN; e++)
                    m[e] = MASKED;
                bool keep = false; // bdk holds this block's first BD' fragment (the previous block's last)

                const int nbase0 = int(ATT_CENTER) - int(pc.q0 + i0) + int(jlo) - (BQ - 1); // window row 0, block 0
                const uint ws = BQ - 16u - 16u * warp; // this warp's first window row
                uint kb = 0u;
                for (uint j0 = jlo; j0 < jend; j0 += BK, kb++) {
                    // ---- stage k, v and the new position rows ---------------------------------------------
                    barrier(); // readers of the previous block (or of the staged q) are done
                    const int nb = nbase0 + int(BK * kb);
    #if PREFETCH
                    if (kb == 0u) {
    #endif
                        const int krow = int(j0) - int(pc.k0), kvalid = int(jend) - int(pc.k0);
                        stage_rows(K_OFF, 0u, BK, pc.k, K16, 0ul, krow, BK, hd, 0, kvalid);
                        stage_rows(V_OFF, 0u, BK, pc.v, V16, 0ul, krow, BK, hd, 0, kvalid);
                        const uint nrows = kb == 0u ? uint(NWIN) : uint(BK); // the whole ring first
                        const uint w0 = uint(NWIN) - nrows;
                        stage_rows(WIN_OFF, (w0 + BK * kb) % NWIN, NWIN, pc.p, P16, 0ul, nb + int(w0), nrows, hd, 0,
                                   int(pc.P));
    #if PREFETCH
                    } else {
                        store_block(NWIN - BK + BK * kb);
                    }
    #endif
                    barrier();
    #if PREFETCH
                    if (j0 + BK < jend) // the next block's loads fly during this block's products
                        fetch_block(j0 + BK, jend, nb + BK + NWIN - BK, hd);
    #endif
                    // Does this block hold keys of this warp's rows (band and rows), and all of them?
                    const bool act = rhi > rlo && j0 <= pw + rhi - 1u + pc.w && j0 + BK + pc.w > pw + rlo;
                    if (!WARP_UNIFORM(act)) {
                        keep = false;
                        continue;
                    }
                    const bool inner = rlo == 0u && rhi == 16u && j0 >= pc.k0 && j0 + BK <= jend &&
                                       pw + 15u <= j0 + pc.w && j0 + BK - 1u <= pw + pc.w;

                    // ---- AC = (q+u) k^T ------------------------------------------------------------------
                    FragC s[NFB];
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        ZERO_C(s[f]);
                        FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                            FragBT fb;
                            LOAD_BT(fb, K_OFF + 16u * f * DKS + 2u * kk, DKS);
                            MMA(s[f], qu[kk], fb);
                        }
                    }

                    // ---- BD' window fragments and the shift: s(r, c) += BD'(r, c - r + 15) ------------------
                    // window fragment g: rows ws + 16g .. of the window, at ring rows (.. + BK*kb) % NWIN
                    if (!keep) {
                        ZERO_C(bdk);
                        FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                            FragBT fb;
                            LOAD_BT(fb, WIN_OFF + ((ws + BK * kb) % NWIN) * DKS + 2u * kk, DKS);
                            MMA(bdk, qv[kk], fb);
                        }
                    }
    #if BD_WHOLE
                    STORE_C(bdk, WSB, BDP);
                    FRAG_LOOP for (uint g = 1; g <= NFB; g++) {
                        FragC bn;
                        ZERO_C(bn);
                        FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                            FragBT fb;
                            LOAD_BT(fb, WIN_OFF + ((ws + 16u * g + BK * kb) % NWIN) * DKS + 2u * kk, DKS);
                            MMA(bn, qv[kk], fb);
                        }
                        STORE_C(bn, WSB + 4u * g, BDP);
                        if (g == NFB)
                            bdk = bn;
                    }
                    WARP_SYNC();
                    FRAG_LOOP for (uint f = 0; f < NFB; f++)
                        [[unroll]] for (uint e = 0; e < CLEN; e++)
                            ELEM(s[f], e) += sh_f32(WSB * 4u + OFF(e) + 16u * (f + HI(e)));
    #else
                    STORE_C(bdk, WSB, BDP);
                    WARP_SYNC();
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        [[unroll]] for (uint e = 0; e < CLEN; e++) // the part in fragment f
                            if (HI(e) == 0u)
                                ELEM(s[f], e) += sh_f32(WSB * 4u + OFF(e));
                        FragC bn;
                        ZERO_C(bn);
                        FRAG_LOOP for (uint kk = 0; kk < NDK; kk++) {
                            FragBT fb;
                            LOAD_BT(fb, WIN_OFF + ((ws + 16u * (f + 1u) + BK * kb) % NWIN) * DKS + 2u * kk, DKS);
                            MMA(bn, qv[kk], fb);
                        }
                        WARP_SYNC(); // everyone has read fragment f
                        STORE_C(bn, WSB, BDP);
                        WARP_SYNC();
                        [[unroll]] for (uint e = 0; e < CLEN; e++) // the part in fragment f + 1
                            if (HI(e) != 0u)
                                ELEM(s[f], e) += sh_f32(WSB * 4u + OFF(e));
                        if (f == NFB - 1u)
                            bdk = bn;
                    }
    #endif
                    keep = true;

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
    #if P_REG
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        FragA pa = TO_A(s[f], 2u * NDK + f);
                        FRAG_LOOP for (uint n = 0; n < NDK; n++) {
                            FragB fb;
                            LOAD_B(fb, V_OFF + 16u * f * DKS + 2u * n, DKS);
                            MMA(o[n], pa, fb);
                        }
                    }
    #else
                    WARP_SYNC(); // the shift's reads of the scratch are done
                    FRAG_LOOP for (uint f = 0; f < NFB; f++)
                        STORE_A(TO_A(s[f], 2u * NDK + f), WSB + 2u * f, PSP);
                    WARP_SYNC();
                    FRAG_LOOP for (uint f = 0; f < NFB; f++) {
                        FragA pa;
                        LOAD_A(pa, WSB + 2u * f, PSP);
                        FRAG_LOOP for (uint n = 0; n < NDK; n++) {
                            FragB fb;
                            LOAD_B(fb, V_OFF + 16u * f * DKS + 2u * n, DKS);
                            MMA(o[n], pa, fb);
                        }
                    }
    #endif
                }

                // ---- y = O / l for the pass's rows (after the last pass, zeros for padded rows) ------
                WARP_SYNC(); // the last block's readers of the scratch are done
                STORE_C(lsum, WSB, BDP);
                WARP_SYNC();
                if (lane < 16u) {
                    float l = 0.0;
                    for (uint c = 0; c < 16u; c++)
                        l += sh_f32((WSB + lane * BDP) * 4u + c);
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
                if (last)
                    break;
                ilo = ihi;
                WARP_SYNC(); // sh_rows is read before the next pass writes it
            }
            WARP_SYNC(); // sh_rows is read before the next query block writes it
        }
    }
}
