#version 460
// gemm_coopmat.comp — the linear op on tensor cores (GL_NV_cooperative_matrix, 16x16x16 f16 x f16 ->
// f32): y = res + alpha * act(x w^T + bias) with w [N,K] f16, x [M,K] f16 or f32 (rounded to f16 while
// staged), y and res f32 or f16 (linear.glsl: specialization constant 7). Needs VK_NV_cooperative_matrix
// and 32-wide subgroups; the portable path is gemm.comp.
//
// Tiling (compile-time: one SPIR-V variant per configuration, named in vk_gemm_configs.c): WARPS_M x
// WARPS_N subgroups of 32 invocations, each owning FM x FN accumulator fragments (16x16 f32), so a
// workgroup computes a BM x BN = (WARPS_M*FM*16) x (WARPS_N*FN*16) tile, looping grid-stride over the
// tiles (and K slices). K advances by BK (32 or 64) halves: every invocation fetches its 16-byte
// chunks of the next x and w blocks into registers with 16-byte loads (f32 x: two), raw, and converts
// them to f16 only when it stores them to shared memory, so the loads' latency hides behind the
// products of the current block. A tile whose blocks lie wholly inside x and w (all but the edge
// tiles) fetches from addresses planned once per tile, without bounds checks: with one workgroup per
// SM the fetches' integer work competes with the products for issue slots (docs/gpu-results.md,
// "GEMM").
//
// K pipeline. STAGES = 2: two shared blocks; block kt+1 is stored from registers into the other stage
// while block kt is multiplied, and block kt+2 is fetched into registers right after: one barrier per K
// step. STAGES = 1 (configurations whose two stages would not fit): store, barrier, fetch the next,
// multiply, barrier: two barriers per step.
//
// Shared layout (uvec4 units: cooperative-matrix loads and stores need 16-byte aligned pointers and
// strides): a stage is the A block (BM rows of BK halves, k contiguous: row-major A fragments) followed
// by the B block (BN weight rows of BK halves: column-major K x N B fragments). Each row is padded by
// one uvec4 (SK_PAD) so the 8 rows of 16 bytes a fragment load reads at once fall in distinct banks
// (pitch 80 or 144 bytes = 5 or 9 16-byte bank groups, coprime with the 8 groups of 128 bytes). After
// the K loop the same memory stages accumulators: a fragment's element -> lane mapping is opaque, so
// each subgroup stores one row of its fragments (16 x WN f32, pitch WN/4 + SK_PAD uvec4), and the whole
// workgroup then applies the epilogue 4 columns per invocation: coalesced 16-byte reads of the stage and
// 16-byte (f32) or 8-byte (f16) stores of y, bounds-checked.
//
// Shared-memory budget (NVIDIA: 48 KiB per workgroup): the larger of the K stages, (BM + BN) * (BK/8 +
// SK_PAD) * 16 bytes each, and the epilogue stage, NWARPS * 16 * (WN/4 + SK_PAD) * 16 bytes; the host
// computes it per configuration (GEMM_CM_SHARED in vk_gemm.h).
//
// Fetch passes: the workgroup fetches RPP = NT / (BK/8) block rows per pass; the x block must be whole
// passes, the w block may end in a partial one (192x128: 48 rows per pass, 128 w rows = 2 passes and 32
// rows), whose invocations past the block fetch and store nothing (B_ROW_OK).
//
// ACT_GLU: the B block's rows are the product's columns in pair order (linear.glsl: fetch_w reads
// weight row glu_row(gn)), so the epilogue's 4 columns are two (value, gate) pairs.
//
// Split-K (pc.splits > 1): item i of the grid-stride loop is tile i % tiles of K slice i / tiles
// (k_slice elements, a multiple of BK); the raw f32 sums go to y = workspace [splits, M, N] and
// gemm_reduce.comp adds the slices in order and applies the epilogue.
//
// -DEMULATE_COOPMAT replaces the fragment operations with plain loops ("virtual subgroups" of 32
// consecutive invocations) and shared memory with a slice of device memory per workgroup (pc.emu_sh,
// pc.emu_stride bytes each), so the identical staging, tiling, pipelining and epilogue code runs on any
// f16 device whatever its shared-memory size (lavapipe: 32 KiB) and the tests can check every
// configuration. The real and emulated fragment operations read and write the same layout.
//
// -DWQ_Q8_0, -DWQ_Q4_K, -DWQ_Q5_K, -DWQ_Q6_K: w holds block-quantized rows (dequant.glsl). Each
// invocation fetches the words of its 8-weight chunks (one piece of a 32-weight sub-block: K is a multiple
// of the block, so of BK) with q_fetch8 when it fetches a block, and dequantizes them with q_unpack8 (bit
// for bit the host's f32 values) and rounds them to f16 with packHalf2x16, as it rounds f32 x, only when
// it stores the block: the loads' latency hides behind the products as f16 weights' does. The tile,
// products and epilogue are the f16 path's.
//
// spec 0: workgroup size, must be WARPS_M*WARPS_N*32; 7: tensor types (linear.glsl).
// push: linear.glsl; flags: FLAG_VEC (16-byte loads along K), FLAG_YVEC (4-column epilogue).
#define HAS_F16
#define F16_TYPES
#extension GL_KHR_shader_subgroup_basic : require
#ifndef EMULATE_COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#include "core.glsl"
#include "linear.glsl"

#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef FM
#define FM 2
#endif
#ifndef FN
#define FN 2
#endif
#ifndef BK
#define BK 32
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef SK_PAD
#define SK_PAD 1
#endif

#define NWARPS (WARPS_M * WARPS_N)
#define NT (NWARPS * 32)              // invocations per workgroup
#define WM (FM * 16)                  // subgroup tile
#define WN (FN * 16)
#define BM (WARPS_M * WM)             // workgroup tile
#define BN (WARPS_N * WN)
#define CPR (BK / 8)                  // 16-byte chunks (8 halves) per staged row
#define SK (CPR + SK_PAD)             // row pitch of the staged blocks, in uvec4
#define STAGE_SIZE ((BM + BN) * SK)   // one stage: A block, then B block
#define A_OFF(s) ((s) * STAGE_SIZE)
#define B_OFF(s) ((s) * STAGE_SIZE + BM * SK)
#define EP (WN / 4 + SK_PAD)          // row pitch of the epilogue stage, in uvec4 (4 f32)
#define EPI_SIZE (NWARPS * 16 * EP)
#define AB_SIZE (STAGES * STAGE_SIZE)
#define A_CHUNKS (BM * CPR / NT)      // 16-byte chunks of the A block each invocation fetches
#define RPP (NT / CPR)                // rows of a block one pass of the workgroup fetches
#define B_CHUNKS ((BN + RPP - 1) / RPP) // the w block's passes: the last may be partial (BN % RPP != 0)
// Whether pass i's w row exists: every pass's, except in a partial last pass (a 192x128 tile on 12
// subgroups fetches 48 rows per pass: 128 w rows are two passes and a third of 32 rows).
#define B_ROW_OK(i) (BN % RPP == 0u || (i) + 1u < B_CHUNKS || r0 + (i) * RPP < BN)

#if BK != 32 && BK != 64 && BK != 128
#error "tile config: BK must be 32, 64 or 128"
#endif
#if STAGES != 1 && STAGES != 2
#error "tile config: STAGES must be 1 or 2"
#endif
#if (BM * CPR) % NT != 0 || NT % CPR != 0 || (BN % RPP) % 16 != 0
#error "tile config: the x block must split evenly over the workgroup, the w block into whole fragments' rows"
#endif
#if FM != 1 && FM != 2 && FM != 4
#error "tile config: FM must be 1, 2 or 4 (the epilogue stores rows through a switch)"
#endif
#if AB_SIZE * 16 > 49152 || EPI_SIZE * 16 > 49152
#error "tile config: more than 48 KiB of shared memory"
#endif
#if AB_SIZE > EPI_SIZE
#define SH_SIZE AB_SIZE
#else
#define SH_SIZE EPI_SIZE
#endif

layout(local_size_x_id = 0) in;

// ---- shared memory and fragment operations ---------------------------------------------------------
#ifndef EMULATE_COOPMAT
shared uvec4 sh[SH_SIZE];
#define SH(i) sh[i]
#define BARRIER() barrier()
#define FragAB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
// A fragment: 16 rows (m) x 16 k at uvec4 offset `off`, rows SK apart (row-major).
#define LOAD_A(f, off) coopMatLoadNV(f, sh, off, SK, false)
// B fragment (K x N): column n is weight row n, 16 contiguous k at `off` + n*SK (column-major).
#define LOAD_B(f, off) coopMatLoadNV(f, sh, off, SK, true)
#define MMA(c, a, b) c = coopMatMulAddNV(a, b, c)
#define ZERO_C(c) c = FragC(0.0)
// Row-major f32 16x16 at uvec4 offset `off`, rows EP uvec4 apart.
#define STORE_C(c, off) coopMatStoreNV(c, sh, off, EP, false)
#define WARP_ID gl_SubgroupID
#define UNROLL [[unroll]]
#else
// This workgroup's stand-in for shared memory (coherent: invocations of the workgroup exchange data
// through it, ordered by the barriers below).
layout(buffer_reference, std430, buffer_reference_align = 16) coherent buffer ShArr { uvec4 d[]; };
uint64_t sh_base;
#define SH(i) ShArr(sh_base).d[i]
#define BARRIER()                                                                                 \
    do {                                                                                          \
        memoryBarrierBuffer();                                                                    \
        barrier();                                                                                \
    } while (false)
// An A/B fragment is the uvec4 offset of its first row/column; an accumulator holds the 8 elements
// e = lane + 32*i (row e/16, column e%16) of a virtual subgroup's 16x16 tile.
#define FragAB uint
struct FragC {
    float v[8];
};
#define LOAD_A(f, off) f = (off)
#define LOAD_B(f, off) f = (off)
#define MMA(c, a, b) emu_mma(c, a, b)
#define ZERO_C(c) emu_zero(c)
#define STORE_C(c, off) emu_store(c, off)
#define WARP_ID (gl_LocalInvocationID.x / 32u)
// The loops stay rolled: this path only has to be right, and llvmpipe (lavapipe's compiler) takes
// minutes over the fully unrolled FM*FN*BK/16 products per K step.
#define UNROLL [[dont_unroll]]

float sh_half(uint h) {
    const vec2 p = unpackHalf2x16(SH(h >> 3)[(h >> 1) & 3u]);
    return (h & 1u) != 0u ? p.y : p.x;
}
void emu_zero(inout FragC c) {
    [[unroll]] for (uint i = 0; i < 8; i++)
        c.v[i] = 0.0;
}
// The k loop is unrolled: llvmpipe limits an invocation's loop iterations (65535, docs/architecture.md);
// with this loop rolled, a forced tiny grid (many tiles per workgroup) gave sums that differed in the
// last bits after about 60,000 iterations, and unrolled they agree.
void emu_mma(inout FragC c, uint a, uint b) {
    const uint lane = gl_LocalInvocationID.x % 32u;
    [[dont_unroll]] for (uint i = 0; i < 8; i++) {
        const uint e = lane + 32u * i, r = e / 16u, col = e % 16u;
        float s = c.v[i];
        [[unroll]] for (uint k = 0; k < 16u; k++)
            s += sh_half((a + r * SK) * 8u + k) * sh_half((b + col * SK) * 8u + k);
        c.v[i] = s;
    }
}
void emu_store(FragC c, uint off) {
    const uint lane = gl_LocalInvocationID.x % 32u;
    [[unroll]] for (uint i = 0; i < 8; i++) {
        const uint e = lane + 32u * i, r = e / 16u, col = e % 16u;
        const uint f = (off + r * EP) * 4u + col;
        SH(f >> 2)[f & 3u] = floatBitsToUint(c.v[i]);
    }
}
#endif

// ---- global fetches into registers (zero outside the matrices) ---------------------------------------
uint kc, r0;                                        // this invocation's chunk column and first row
uvec4 xlo[A_CHUNKS], xhi[A_CHUNKS], wreg[B_CHUNKS]; // the next blocks, raw (xhi: f32 x only)
#ifdef WQ
QChunk wq[B_CHUNKS]; // the next w block's words (dequant.glsl), dequantized when stored
#endif

// min(n, 8) halves at address a, zero-padded to 8, element by element (the last chunk of a row, or
// unaligned data: a rare path, so a rolled loop).
uvec4 tail_halves(uint64_t a, uint n) {
    uvec4 r = uvec4(0);
    [[dont_unroll]] for (uint e = 0; e < 8u && e < n; e++) {
        const uint h = packFloat2x16(f16vec2(F16Ref(a + 2ul * e).v, float16_t(0.0)));
        r[e >> 1] |= h << ((e & 1u) * 16u);
    }
    return r;
}

// x[gm, gk .. gk+7] as raw bits: f16 x: 8 halves in lo; f32 x: 4 floats in lo, 4 in hi.
void fetch_x(uint gm, uint gk, out uvec4 lo, out uvec4 hi) {
    lo = uvec4(0);
    hi = uvec4(0);
    if (gm >= pc.M || gk >= pc.K)
        return;
    const bool vec = (pc.flags & FLAG_VEC) != 0u && gk + 8u <= pc.K;
    if (X16) {
        const uint64_t a = pc.x + (uint64_t(gm) * pc.K + gk) * 2ul;
        if (vec) {
            lo = U4Ref(a).v;
            return;
        }
        lo = tail_halves(a, pc.K - gk);
    } else {
        const uint64_t a = pc.x + (uint64_t(gm) * pc.K + gk) * 4ul;
        if (vec) {
            lo = U4Ref(a).v;
            hi = U4Ref(a + 16ul).v;
            return;
        }
        // the last chunk of a row, or unaligned: element by element (a rolled loop: a rare path)
        [[dont_unroll]] for (uint e = 0; e < 8u && gk + e < pc.K; e++) {
            const uint u = floatBitsToUint(F32Ref(a + 4ul * e).v);
            if (e < 4u)
                lo[e] = u;
            else
                hi[e - 4u] = u;
        }
    }
}

// The 8 halves of a fetched x chunk (f32 x rounded to nearest f16 here, after the loads have landed).
uvec4 x_half8(uvec4 lo, uvec4 hi) {
    if (X16)
        return lo;
    const vec4 a = uintBitsToFloat(lo), b = uintBitsToFloat(hi);
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

#ifdef WQ
// The loads of w[gn, gk .. gk+7]'s blocks (zeros past the matrix); store_block dequantizes them and
// rounds to f16 as f32 x is.
QChunk fetch_wq(uint gn, uint gk) {
    if (gn >= pc.N || gk >= pc.K)
        return q_zero8();
    return q_fetch8(pc.w + uint64_t(glu_row(gn)) * uint64_t(pc.K / QB_K) * uint64_t(QB_BYTES), gk);
}
#endif

// w[gn, gk .. gk+7] (f16).
uvec4 fetch_w(uint gn, uint gk) {
    if (gn >= pc.N || gk >= pc.K)
        return uvec4(0);
    const uint64_t a = pc.w + (uint64_t(glu_row(gn)) * pc.K + gk) * 2ul;
    if ((pc.flags & FLAG_VEC) != 0u && gk + 8u <= pc.K)
        return U4Ref(a).v;
    return tail_halves(a, pc.K - gk);
}

// The current tile's fetch plan. interior: every row of its x and w blocks is inside the matrices,
// K is a multiple of BK and 16-byte loads are allowed. Then xbase and wbase address this invocation's
// first x and w chunk at K offset 0, and xstep and wstep (bytes) the distance to its next chunk, RPP
// rows on (with ACT_GLU, RPP rows of the pair order are RPP/2 weight rows: RPP is even, so every
// chunk of an invocation is a value row, or every one a gate row).
bool interior;
uint64_t xbase, wbase, xstep, wstep;

void plan_fetch(uint m0, uint n0) {
    const uint xes = X16 ? 2u : 4u;
    interior = (pc.flags & FLAG_VEC) != 0u && pc.K % BK == 0u && m0 + BM <= pc.M && n0 + BN <= pc.N;
    xbase = pc.x + (uint64_t(m0 + r0) * pc.K + kc * 8u) * xes;
    wbase = pc.w + (uint64_t(glu_row(n0 + r0)) * pc.K + kc * 8u) * 2ul;
    xstep = uint64_t(RPP * xes) * pc.K;
    wstep = uint64_t(pc.act == ACT_GLU ? RPP : 2u * RPP) * pc.K;
}

// Issues the loads of the x and w blocks at K offset k into registers.
void fetch_block(uint m0, uint n0, uint k) {
    if (interior) {
        const uint64_t xk = xbase + uint64_t(k) * (X16 ? 2ul : 4ul), wk = wbase + uint64_t(k) * 2ul;
        UNROLL for (uint i = 0; i < A_CHUNKS; i++) {
            xlo[i] = U4Ref(xk + i * xstep).v;
            if (!X16)
                xhi[i] = U4Ref(xk + i * xstep + 16ul).v;
        }
#ifdef WQ
        UNROLL for (uint i = 0; i < B_CHUNKS; i++)
            if (B_ROW_OK(i))
                wq[i] = fetch_wq(n0 + r0 + i * RPP, k + kc * 8u);
#else
        UNROLL for (uint i = 0; i < B_CHUNKS; i++)
            if (B_ROW_OK(i))
                wreg[i] = U4Ref(wk + i * wstep).v;
#endif
        return;
    }
    UNROLL for (uint i = 0; i < A_CHUNKS; i++)
        fetch_x(m0 + r0 + i * RPP, k + kc * 8u, xlo[i], xhi[i]);
    UNROLL for (uint i = 0; i < B_CHUNKS; i++)
        if (B_ROW_OK(i))
#ifdef WQ
            wq[i] = fetch_wq(n0 + r0 + i * RPP, k + kc * 8u);
#else
            wreg[i] = fetch_w(n0 + r0 + i * RPP, k + kc * 8u);
#endif
}

// Stores the fetched blocks into stage s.
void store_block(uint s) {
    UNROLL for (uint i = 0; i < A_CHUNKS; i++)
        SH(A_OFF(s) + (r0 + i * RPP) * SK + kc) = x_half8(xlo[i], xhi[i]);
    UNROLL for (uint i = 0; i < B_CHUNKS; i++) {
        if (!B_ROW_OK(i))
            continue;
#ifdef WQ
        float v[8];
        q_unpack8(wq[i], v);
        wreg[i] = uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
                        packHalf2x16(vec2(v[6], v[7])));
#endif
        SH(B_OFF(s) + (r0 + i * RPP) * SK + kc) = wreg[i];
    }
}

// The products of the block in stage s: each subgroup's FM x FN fragments over BK/16 k-steps, in k order.
// The k-steps stay a loop, and one A fragment is live at a time (the FN B fragments, then each A
// fragment and its FN products): fewer registers, a third of the code of the unrolled form, and faster
// on every tile (figures: docs/gpu-results.md, "GEMM").
#define COMPUTE_BLOCK(s)                                                                          \
    [[dont_unroll]] for (uint ks = 0; ks < BK / 16; ks++) {                                       \
        FragAB fb[FN];                                                                            \
        UNROLL for (uint j = 0; j < FN; j++)                                                      \
            LOAD_B(fb[j], B_OFF(s) + (wn * WN + j * 16u) * SK + ks * 2u);                         \
        UNROLL for (uint i = 0; i < FM; i++) {                                                    \
            FragAB fa;                                                                            \
            LOAD_A(fa, A_OFF(s) + (wm * WM + i * 16u) * SK + ks * 2u);                            \
            UNROLL for (uint j = 0; j < FN; j++)                                                  \
                MMA(acc[i * FN + j], fa, fb[j]);                                                  \
        }                                                                                         \
    }

// ---- epilogue ----------------------------------------------------------------------------------------
// Row i of every subgroup's fragments is staged (subgroup s: 16 x WN f32 at uvec4 s*16*EP, pitch EP);
// each invocation takes 4 consecutive columns of a row. Split-K: raw sums into slice `slice` of the
// workspace; otherwise the op's epilogue (linear.glsl).
void epilogue_stage(uint i, uint m0, uint n0, uint slice) {
    const uint Q = WN / 4u; // 4-column groups per staged row
    for (uint e = gl_LocalInvocationID.x; e < NWARPS * 16u * Q; e += NT) {
        const uint s = e / (16u * Q), r = (e / Q) % 16u, c = (e % Q) * 4u;
        const vec4 v = uintBitsToFloat(SH(s * 16u * EP + r * EP + c / 4u));
        const uint gm = m0 + (s / WARPS_N) * WM + i * 16u + r;
        const uint gn = n0 + (s % WARPS_N) * WN + c;
        if (gm >= pc.M || gn >= pc.N)
            continue;
        if (pc.splits > 1u) {
            const uint64_t o = (uint64_t(slice) * pc.M + gm) * pc.N + gn;
            if (pc.N % 4u == 0u) { // the workspace is 16-byte aligned: gn + 4 <= N here
                V4Ref(pc.y + o * 4ul).v = v;
            } else {
                [[dont_unroll]] for (uint q = 0; q < 4u && gn + q < pc.N; q++)
                    STOREF(pc.y, o + q, v[q]);
            }
        } else if (pc.act == ACT_GLU) { // gn is a multiple of 4 and N even: (gn, gn+1) is inside when gn is
            linear_epilogue_glu(gm, gn / 2u, v[0], v[1]);
            if (gn + 2u < pc.N)
                linear_epilogue_glu(gm, gn / 2u + 1u, v[2], v[3]);
        } else if ((pc.flags & FLAG_YVEC) != 0u) { // N % 4 == 0: gn + 4 <= N
            linear_epilogue4(gm, gn, v);
        } else { // element-wise (N % 4 != 0 or unaligned tensors: a rare path, rolled)
            [[dont_unroll]] for (uint q = 0; q < 4u && gn + q < pc.N; q++)
                linear_epilogue(gm, gn + q, v[q]);
        }
    }
}

// Stores row i of the subgroup's fragments into its epilogue stage (constant accumulator indices: a
// dynamically indexed accumulator array would leave registers).
#define STORE_ROW(i)                                                                              \
    [[unroll]] for (uint j = 0; j < FN; j++)                                                      \
        STORE_C(acc[(i) * FN + j], warp * 16u * EP + j * 4u)

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint warp = WARP_ID;
    const uint wm = warp / WARPS_N, wn = warp % WARPS_N;
#ifdef EMULATE_COOPMAT
    // A stand-in of another size than this variant's layout would overlap the neighbouring
    // workgroup's: write nothing (the tests then fail) rather than corrupt memory.
    if (pc.emu_stride != SH_SIZE * 16)
        return;
    sh_base = pc.emu_sh + uint64_t(gl_WorkGroupID.x) * uint64_t(pc.emu_stride);
#endif
    kc = tid % CPR;
    r0 = tid / CPR;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint tiles_n = (N + BN - 1u) / BN;
    const uint ntiles = ((M + BM - 1u) / BM) * tiles_n;
    const uint splits = max(pc.splits, 1u);

    for (uint item = gl_WorkGroupID.x; item < ntiles * splits; item += gl_NumWorkGroups.x) {
        const uint tile = item % ntiles, slice = item / ntiles;
        const uint m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        // This item's K range [k0, k1): the whole of K, or one slice (k_slice is a multiple of BK).
        const uint k0 = splits > 1u ? slice * pc.k_slice : 0u;
        const uint k1 = splits > 1u ? min(K, k0 + pc.k_slice) : K;
        const uint nk = k1 > k0 ? (k1 - k0 + BK - 1u) / BK : 0u;
        FragC acc[FM * FN];
        [[unroll]] for (uint f = 0; f < FM * FN; f++)
            ZERO_C(acc[f]);
        plan_fetch(m0, n0);

#if STAGES == 2
        BARRIER(); // the previous item's epilogue is done with the shared memory
        if (nk > 0u) {
            fetch_block(m0, n0, k0);
            store_block(0u);
            if (nk > 1u)
                fetch_block(m0, n0, k0 + BK);
        }
        BARRIER();
        for (uint kt = 0; kt < nk; kt++) {
            const uint s = kt & 1u;
            COMPUTE_BLOCK(s)
            if (kt + 1u < nk) {
                store_block(s ^ 1u); // its readers (step kt-1) passed the barrier below
                if (kt + 2u < nk)
                    fetch_block(m0, n0, k0 + (kt + 2u) * BK);
            }
            BARRIER();
        }
#else
        if (nk > 0u)
            fetch_block(m0, n0, k0);
        for (uint kt = 0; kt < nk; kt++) {
            BARRIER(); // every subgroup is done with the previous block (or the epilogue stage)
            store_block(0u);
            BARRIER();
            if (kt + 1u < nk) // fetch the next block while this one is multiplied
                fetch_block(m0, n0, k0 + (kt + 1u) * BK);
            COMPUTE_BLOCK(0u)
        }
#endif

        // Epilogue, one row of fragments at a time: wait until nobody reads the shared memory any more
        // (blocks or the previous row), store the row, wait until every subgroup has, apply. The loop
        // stays rolled so that the epilogue's code exists once.
        [[dont_unroll]] for (uint i = 0; i < FM; i++) {
            BARRIER();
            switch (i) {
            case 0: STORE_ROW(0); break;
#if FM > 1
            case 1: STORE_ROW(1); break;
#endif
#if FM > 2
            case 2: STORE_ROW(2); break;
            case 3: STORE_ROW(3); break;
#endif
            }
            BARRIER();
            epilogue_stage(i, m0, n0, slice);
        }
    }
}
