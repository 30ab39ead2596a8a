#version 460
// gemm_coopmat_i8.comp — the linear op on int8 tensor cores (GL_NV_integer_cooperative_matrix,
// 16x16x32 s8 x s8 -> s32): y = res + alpha * act(float(sum_k x8[m,k] w8[n,k]) * sx[m] * sw[n] + bias)
// with x8 [M,K] and w8 [N,K] int8 rows (quantize_rows.comp: one f32 scale per row of each, stored right
// after the rows: sx [M] at byte M*K of x8, sw [N] at byte N*K of w8), the int32
// sums exact over the whole of K, scaled once per output before the epilogue (bias, activation, alpha,
// residual; y and res f32 or f16, linear.glsl). K must be a multiple of 32 and x8, w8 16-byte aligned
// (the host's own buffers). Needs VK_NV_cooperative_matrix with the int8 shape, shaderInt8 and 32-wide
// subgroups.
//
// The structure is gemm_coopmat.comp's (see there for the why): WARPS_M x WARPS_N subgroups of FM x FN
// accumulator fragments, a grid-stride loop over BM x BN tiles, K advanced by BK bytes (64 or 128)
// fetched into registers with 16-byte loads (16 values) and stored to shared memory one block ahead of
// the products (STAGES 2) or store-then-multiply (STAGES 1), rows padded by SK_PAD uvec4 so a
// fragment's 8 rows of 16 bytes fall in distinct bank groups (pitch 80 or 144 bytes), the epilogue
// staging one row of fragments at a time through the same shared memory. Differences: no conversion
// when staging (the bytes are the operands), a chunk lies wholly inside or outside K (K % 16 == 0), no
// split-K, and the epilogue reads int32 sums and multiplies them by the two row scales first.
//
// -DEMULATE_COOPMAT: plain-loop fragments and device memory standing in for shared memory, exactly as
// in gemm_coopmat.comp (pc.emu_sh, pc.emu_stride), so lavapipe runs this staging, tiling and epilogue;
// its integer products are exact, so it gives the real kernel's results bit for bit.
//
// spec 0: workgroup size, must be WARPS_M*WARPS_N*32; 7: tensor types (the y bit: y and res f16).
// push: linear.glsl (x = x8, w = w8, each followed by its scales); flags: FLAG_YVEC (4-column epilogue).
#define HAS_F16
#define F16_TYPES
#extension GL_KHR_shader_subgroup_basic : require
#ifndef EMULATE_COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#endif
#include "core.glsl"
#include "linear.glsl"

#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef FM
#define FM 4
#endif
#ifndef FN
#define FN 2
#endif
#ifndef BK
#define BK 64
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
#define CPR (BK / 16)                 // 16-byte chunks (16 int8) per staged row
#define SK (CPR + SK_PAD)             // row pitch of the staged blocks, in uvec4
#define STAGE_SIZE ((BM + BN) * SK)   // one stage: A block, then B block
#define A_OFF(s) ((s) * STAGE_SIZE)
#define B_OFF(s) ((s) * STAGE_SIZE + BM * SK)
#define EP (WN / 4 + SK_PAD)          // row pitch of the epilogue stage, in uvec4 (4 int32)
#define EPI_SIZE (NWARPS * 16 * EP)
#define AB_SIZE (STAGES * STAGE_SIZE)
#define A_CHUNKS (BM * CPR / NT)      // 16-byte chunks of the A block each invocation fetches
#define RPP (NT / CPR)                // rows of a block one pass of the workgroup fetches
#define B_CHUNKS (BN * CPR / NT)

#if BK != 64 && BK != 128
#error "tile config: BK must be 64 or 128 (bytes)"
#endif
#if STAGES != 1 && STAGES != 2
#error "tile config: STAGES must be 1 or 2"
#endif
#if (BM * CPR) % NT != 0 || (BN * CPR) % NT != 0 || NT % CPR != 0
#error "tile config: the x and w blocks must split evenly over the workgroup"
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
#define FragA icoopmatNV<8, gl_ScopeSubgroup, 16, 32>
#define FragB icoopmatNV<8, gl_ScopeSubgroup, 32, 16>
#define FragC icoopmatNV<32, gl_ScopeSubgroup, 16, 16>
// A fragment: 16 rows (m) x 32 k at uvec4 offset `off`, rows SK apart (row-major).
#define LOAD_A(f, off) coopMatLoadNV(f, sh, off, SK, false)
// B fragment (K x N): column n is weight row n, 32 contiguous k at `off` + n*SK (column-major).
#define LOAD_B(f, off) coopMatLoadNV(f, sh, off, SK, true)
#define MMA(c, a, b) c = coopMatMulAddNV(a, b, c)
#define ZERO_C(c) c = FragC(0)
// Row-major int32 16x16 at uvec4 offset `off`, rows EP uvec4 apart.
#define STORE_C(c, off) coopMatStoreNV(c, sh, off, EP, false)
#define WARP_ID gl_SubgroupID
#define UNROLL [[unroll]]
#else
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
#define FragA uint
#define FragB uint
struct FragC {
    int v[8];
};
#define LOAD_A(f, off) f = (off)
#define LOAD_B(f, off) f = (off)
#define MMA(c, a, b) emu_mma(c, a, b)
#define ZERO_C(c) emu_zero(c)
#define STORE_C(c, off) emu_store(c, off)
#define WARP_ID (gl_LocalInvocationID.x / 32u)
#define UNROLL [[dont_unroll]]

// The signed byte at byte offset i of the stand-in.
int sh_s8(uint i) { return bitfieldExtract(int(SH(i >> 4)[(i >> 2) & 3u]), int((i & 3u) * 8u), 8); }
void emu_zero(inout FragC c) {
    [[unroll]] for (uint i = 0; i < 8; i++)
        c.v[i] = 0;
}
void emu_mma(inout FragC c, uint a, uint b) {
    const uint lane = gl_LocalInvocationID.x % 32u;
    [[dont_unroll]] for (uint i = 0; i < 8; i++) {
        const uint e = lane + 32u * i, r = e / 16u, col = e % 16u;
        int s = c.v[i];
        [[unroll]] for (uint k = 0; k < 32u; k++)
            s += sh_s8((a + r * SK) * 16u + k) * sh_s8((b + col * SK) * 16u + k);
        c.v[i] = s;
    }
}
void emu_store(FragC c, uint off) {
    const uint lane = gl_LocalInvocationID.x % 32u;
    [[unroll]] for (uint i = 0; i < 8; i++) {
        const uint e = lane + 32u * i, r = e / 16u, col = e % 16u;
        const uint f = (off + r * EP) * 4u + col;
        SH(f >> 2)[f & 3u] = uint(c.v[i]);
    }
}
#endif

// ---- global fetches into registers (zero outside the matrices) ---------------------------------------
uint kc, r0;                              // this invocation's chunk column and first row
uvec4 xreg[A_CHUNKS], wreg[B_CHUNKS];     // the next blocks
bool interior;                            // the tile's x and w rows all exist (K is checked per block)
uint64_t xbase, wbase, xstep, wstep;

void plan_fetch(uint m0, uint n0) {
    interior = m0 + BM <= pc.M && n0 + BN <= pc.N;
    xbase = pc.x + uint64_t(m0 + r0) * pc.K + kc * 16u;
    wbase = pc.w + uint64_t(glu_row(n0 + r0)) * pc.K + kc * 16u;
    xstep = uint64_t(RPP) * pc.K;
    // ACT_GLU: RPP rows of the pair order are RPP/2 weight rows (RPP is even: every chunk of an
    // invocation is a value row, or every one a gate row)
    wstep = uint64_t(pc.act == ACT_GLU ? RPP / 2u : RPP) * pc.K;
}

// Issues the loads of the x and w blocks at K offset k into registers.
void fetch_block(uint m0, uint n0, uint k) {
    const uint gk = k + kc * 16u;
    const bool kin = gk < pc.K; // K % 16 == 0: the chunk is wholly inside or outside
    if (interior) {
        UNROLL for (uint i = 0; i < A_CHUNKS; i++)
            xreg[i] = kin ? U4Ref(xbase + k + i * xstep).v : uvec4(0);
        UNROLL for (uint i = 0; i < B_CHUNKS; i++)
            wreg[i] = kin ? U4Ref(wbase + k + i * wstep).v : uvec4(0);
        return;
    }
    UNROLL for (uint i = 0; i < A_CHUNKS; i++) {
        const uint gm = m0 + r0 + i * RPP;
        xreg[i] = kin && gm < pc.M ? U4Ref(pc.x + uint64_t(gm) * pc.K + gk).v : uvec4(0);
    }
    UNROLL for (uint i = 0; i < B_CHUNKS; i++) {
        const uint gn = n0 + r0 + i * RPP;
        wreg[i] = kin && gn < pc.N ? U4Ref(pc.w + uint64_t(glu_row(gn)) * pc.K + gk).v : uvec4(0);
    }
}

// Stores the fetched blocks into stage s.
void store_block(uint s) {
    UNROLL for (uint i = 0; i < A_CHUNKS; i++)
        SH(A_OFF(s) + (r0 + i * RPP) * SK + kc) = xreg[i];
    UNROLL for (uint i = 0; i < B_CHUNKS; i++)
        SH(B_OFF(s) + (r0 + i * RPP) * SK + kc) = wreg[i];
}

// The products of the block in stage s: each subgroup's FM x FN fragments over BK/32 k-steps (two
// uvec4 each), in k order; one A fragment live at a time.
#define COMPUTE_BLOCK(s)                                                                          \
    [[dont_unroll]] for (uint ks = 0; ks < BK / 32; ks++) {                                       \
        FragB fb[FN];                                                                             \
        UNROLL for (uint j = 0; j < FN; j++)                                                      \
            LOAD_B(fb[j], B_OFF(s) + (wn * WN + j * 16u) * SK + ks * 2u);                         \
        UNROLL for (uint i = 0; i < FM; i++) {                                                    \
            FragA fa;                                                                             \
            LOAD_A(fa, A_OFF(s) + (wm * WM + i * 16u) * SK + ks * 2u);                            \
            UNROLL for (uint j = 0; j < FN; j++)                                                  \
                MMA(acc[i * FN + j], fa, fb[j]);                                                  \
        }                                                                                         \
    }

// ---- epilogue ----------------------------------------------------------------------------------------
// The scaled sum of output (gm, gn) from its int32 sum: float(sum) * sx[gm] * sw[weight row], in that
// order and not contracted with the epilogue's bias add (the reference's operations).
float scaled(int acc, uint gm, uint gn) {
    precise float v = float(acc) * LOADF(pc.x + uint64_t(pc.M) * pc.K, gm);
    precise float r = v * LOADF(pc.w + uint64_t(pc.N) * pc.K, glu_row(gn));
    return r;
}

// Row i of every subgroup's fragments is staged (subgroup s: 16 x WN int32 at uvec4 s*16*EP, pitch
// EP); each invocation takes 4 consecutive columns of a row and applies the op's epilogue.
void epilogue_stage(uint i, uint m0, uint n0) {
    const uint Q = WN / 4u; // 4-column groups per staged row
    for (uint e = gl_LocalInvocationID.x; e < NWARPS * 16u * Q; e += NT) {
        const uint s = e / (16u * Q), r = (e / Q) % 16u, c = (e % Q) * 4u;
        const ivec4 a = ivec4(SH(s * 16u * EP + r * EP + c / 4u));
        const uint gm = m0 + (s / WARPS_N) * WM + i * 16u + r;
        const uint gn = n0 + (s % WARPS_N) * WN + c;
        if (gm >= pc.M || gn >= pc.N)
            continue;
        if (pc.act == ACT_GLU) { // gn is a multiple of 4 and N even: (gn, gn+1) is inside when gn is
            linear_epilogue_glu(gm, gn / 2u, scaled(a[0], gm, gn), scaled(a[1], gm, gn + 1u));
            if (gn + 2u < pc.N)
                linear_epilogue_glu(gm, gn / 2u + 1u, scaled(a[2], gm, gn + 2u), scaled(a[3], gm, gn + 3u));
        } else if ((pc.flags & FLAG_YVEC) != 0u) { // N % 4 == 0: gn + 4 <= N
            linear_epilogue4(gm, gn, vec4(scaled(a[0], gm, gn), scaled(a[1], gm, gn + 1u), scaled(a[2], gm, gn + 2u),
                                          scaled(a[3], gm, gn + 3u)));
        } else { // element-wise (N % 4 != 0 or unaligned tensors: a rare path, rolled)
            [[dont_unroll]] for (uint q = 0; q < 4u && gn + q < pc.N; q++)
                linear_epilogue(gm, gn + q, scaled(a[q], gm, gn + q));
        }
    }
}

#define STORE_ROW(i)                                                                              \
    [[unroll]] for (uint j = 0; j < FN; j++)                                                      \
        STORE_C(acc[(i) * FN + j], warp * 16u * EP + j * 4u)

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint warp = WARP_ID;
    const uint wm = warp / WARPS_N, wn = warp % WARPS_N;
#ifdef EMULATE_COOPMAT
    if (pc.emu_stride != SH_SIZE * 16)
        return;
    sh_base = pc.emu_sh + uint64_t(gl_WorkGroupID.x) * uint64_t(pc.emu_stride);
#endif
    kc = tid % CPR;
    r0 = tid / CPR;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint tiles_n = (N + BN - 1u) / BN;
    const uint ntiles = ((M + BM - 1u) / BM) * tiles_n;
    const uint nk = (K + BK - 1u) / BK;

    for (uint tile = gl_WorkGroupID.x; tile < ntiles; tile += gl_NumWorkGroups.x) {
        const uint m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        FragC acc[FM * FN];
        [[unroll]] for (uint f = 0; f < FM * FN; f++)
            ZERO_C(acc[f]);
        plan_fetch(m0, n0);

#if STAGES == 2
        BARRIER(); // the previous tile's epilogue is done with the shared memory
        if (nk > 0u) {
            fetch_block(m0, n0, 0u);
            store_block(0u);
            if (nk > 1u)
                fetch_block(m0, n0, BK);
        }
        BARRIER();
        for (uint kt = 0; kt < nk; kt++) {
            const uint s = kt & 1u;
            COMPUTE_BLOCK(s)
            if (kt + 1u < nk) {
                store_block(s ^ 1u); // its readers (step kt-1) passed the barrier below
                if (kt + 2u < nk)
                    fetch_block(m0, n0, (kt + 2u) * BK);
            }
            BARRIER();
        }
#else
        if (nk > 0u)
            fetch_block(m0, n0, 0u);
        for (uint kt = 0; kt < nk; kt++) {
            BARRIER(); // every subgroup is done with the previous block (or the epilogue stage)
            store_block(0u);
            BARRIER();
            if (kt + 1u < nk) // fetch the next block while this one is multiplied
                fetch_block(m0, n0, (kt + 1u) * BK);
            COMPUTE_BLOCK(0u)
        }
#endif

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
            epilogue_stage(i, m0, n0);
        }
    }
}
