#version 460
// gemm_coopmat.comp — the linear op on tensor cores (GL_NV_cooperative_matrix, 16x16x16 f16 x f16 ->
// f32): y = res + alpha * act(x w^T + bias), x [M,K] f32 (rounded to f16 while staged), w [N,K] f16.
// Not the portable path (gemm.comp): this needs VK_NV_cooperative_matrix and a subgroup size of 32.
//
// Shape (compile-time, one SPIR-V variant per tile config): WARPS_M x WARPS_N subgroups of 32
// invocations; each subgroup owns FM x FN accumulator fragments (16x16 f32), so a workgroup computes
// a BM x BN = (WARPS_M*FM*16) x (WARPS_N*FN*16) output tile, looping grid-stride over the tiles.
// K advances by BK = 32: every thread fetches its share of the next x and w blocks into registers
// (x converted to f16 there) while the subgroups multiply the current blocks from shared memory.
// Partial blocks are zero-padded, so any M, N, K works.
//
// Shared memory is one uvec4 array (8 halves per element; cooperative-matrix loads and stores need
// 16-byte aligned pointers and strides, which uvec4 units guarantee): the A block (BM rows of BK
// halves, k contiguous, row-major for the A fragments), the B block (BN rows = weight rows, k
// contiguous, i.e. column-major for the K x N B fragments), each row padded by one uvec4 so that the
// 8 rows a fragment load touches at once fall in distinct banks (SK_PAD=0 removes the pad). After
// the K loop the same array stages accumulators: the element -> lane mapping of a fragment is
// opaque, so each subgroup stores one row of its fragments (16 x WN f32) with coopMatStoreNV, and
// then the whole workgroup applies the epilogue (bias, act, alpha, res) element-wise with bounds
// checks and coalesced writes.
//
// -DEMULATE_COOPMAT replaces the three fragment operations with plain shared-memory loops ("virtual
// subgroups" of 32 consecutive invocations) and needs no cooperative-matrix support: it runs the
// identical staging, tiling and epilogue code on any f16 device (lavapipe included) so the tests
// can check them. The real and emulated fragment operations read and write the same shared layout.
//
// spec 0: workgroup size, must be WARPS_M*WARPS_N*32.
// push: as gemm.comp; flags bit 0: K % 8 == 0 and x, w 16-byte aligned (vector loads allowed).
#define HAS_F16
#extension GL_KHR_shader_subgroup_basic : require
#ifndef EMULATE_COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#include "core.glsl"

#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef FM
#define FM 4
#endif
#ifndef FN
#define FN 4
#endif
#ifndef SK_PAD
#define SK_PAD 1
#endif

#define NWARPS (WARPS_M * WARPS_N)
#define NT (NWARPS * 32)            // invocations per workgroup
#define WM (FM * 16)                // subgroup tile
#define WN (FN * 16)
#define BM (WARPS_M * WM)           // workgroup tile
#define BN (WARPS_N * WN)
#define BK 32
#define CPR (BK / 8)                // uvec4 chunks per staged row
#define SK (CPR + SK_PAD)           // row pitch of the staged blocks, in uvec4
#define A_OFF 0
#define B_OFF (BM * SK)
#define AB_SIZE ((BM + BN) * SK)
#define STAGE_SIZE (NWARPS * 16 * WN / 4) // one row of fragments per subgroup, f32, in uvec4
#define SH_SIZE (AB_SIZE > STAGE_SIZE ? AB_SIZE : STAGE_SIZE)
#define A_CHUNKS (BM * CPR / NT)    // uvec4 chunks of the A block each invocation fetches
#define B_CHUNKS (BN * CPR / NT)

#if (BM * CPR) % NT != 0 || (BN * CPR) % NT != 0 || NT % CPR != 0
#error "tile config: the staged blocks must split evenly over the workgroup"
#endif
#if (16 * WN) % NT != 0
#error "tile config: the epilogue rows must split evenly over the workgroup"
#endif

layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint64_t x, w, bias, res, y;
    uint M, N, K;
    uint act;
    float alpha;
    uint flags;
} pc;

#define FLAG_VEC 1u


shared uvec4 sh[SH_SIZE];

// ---- fragment operations ---------------------------------------------------------------------------
#ifndef EMULATE_COOPMAT
#define FragAB fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
// A fragment: 16 rows (m) x 16 k at uvec4 offset `off`, rows SK apart (row-major).
#define LOAD_A(f, off) coopMatLoadNV(f, sh, off, SK, false)
// B fragment (K x N): column n is weight row n, 16 contiguous k at `off` + n*SK (column-major).
#define LOAD_B(f, off) coopMatLoadNV(f, sh, off, SK, true)
#define MMA(c, a, b) c = coopMatMulAddNV(a, b, c)
#define ZERO_C(c) c = FragC(0.0)
// Row-major f32 16x16 at uvec4 offset `off`, rows `pitch` uvec4 apart.
#define STORE_C(c, off, pitch) coopMatStoreNV(c, sh, off, pitch, false)
#define WARP_ID gl_SubgroupID
#else
// Emulation: an A/B fragment is the uvec4 offset of its first row/column; an accumulator holds the
// 8 elements e = lane + 32*i (row e/16, column e%16) of a virtual subgroup's 16x16 tile.
#define FragAB uint
struct FragC {
    float v[8];
};
#define LOAD_A(f, off) f = (off)
#define LOAD_B(f, off) f = (off)
#define MMA(c, a, b) emu_mma(c, a, b)
#define ZERO_C(c) emu_zero(c)
#define STORE_C(c, off, pitch) emu_store(c, off, pitch)
#define WARP_ID (gl_LocalInvocationID.x / 32u)

float sh_half(uint h) {
    const vec2 p = unpackHalf2x16(sh[h >> 3][(h >> 1) & 3u]);
    return (h & 1u) != 0u ? p.y : p.x;
}
void emu_zero(inout FragC c) {
    [[unroll]] for (uint i = 0; i < 8; i++)
        c.v[i] = 0.0;
}
// The loops stay rolled: this path only has to be right, and llvmpipe (lavapipe's compiler) takes
// minutes over the fully unrolled FM*FN*2 products per K step.
void emu_mma(inout FragC c, uint a, uint b) {
    const uint lane = gl_LocalInvocationID.x % 32u;
    [[dont_unroll]] for (uint i = 0; i < 8; i++) {
        const uint e = lane + 32u * i, r = e / 16u, col = e % 16u;
        float s = c.v[i];
        [[dont_unroll]] for (uint k = 0; k < 16u; k++)
            s += sh_half((a + r * SK) * 8u + k) * sh_half((b + col * SK) * 8u + k);
        c.v[i] = s;
    }
}
void emu_store(FragC c, uint off, uint pitch) {
    const uint lane = gl_LocalInvocationID.x % 32u;
    [[unroll]] for (uint i = 0; i < 8; i++) {
        const uint e = lane + 32u * i, r = e / 16u, col = e % 16u;
        const uint f = (off + r * pitch) * 4u + col;
        sh[f >> 2][f & 3u] = floatBitsToUint(c.v[i]);
    }
}
#endif

// ---- global fetches (zero outside the matrices) ----------------------------------------------------
uint pack2(float a, float b) { return packFloat2x16(f16vec2(float16_t(a), float16_t(b))); }

// x[gm, gk .. gk+7] rounded to f16.
uvec4 fetch_x8(uint gm, uint gk) {
    if (gm >= pc.M)
        return uvec4(0);
    const uint64_t base = pc.x + (uint64_t(gm) * pc.K + gk) * 4ul;
    if ((pc.flags & FLAG_VEC) != 0u && gk + 8u <= pc.K) {
        const vec4 lo = V4Ref(base).v, hi = V4Ref(base + 16ul).v;
        return uvec4(pack2(lo.x, lo.y), pack2(lo.z, lo.w), pack2(hi.x, hi.y), pack2(hi.z, hi.w));
    }
    float v[8];
    [[unroll]] for (uint e = 0; e < 8u; e++)
        v[e] = gk + e < pc.K ? F32Ref(base + 4ul * e).v : 0.0;
    return uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
}

// w[gn, gk .. gk+7] (f16).
uvec4 fetch_w8(uint gn, uint gk) {
    if (gn >= pc.N)
        return uvec4(0);
    const uint64_t base = pc.w + (uint64_t(gn) * pc.K + gk) * 2ul;
    if ((pc.flags & FLAG_VEC) != 0u && gk + 8u <= pc.K)
        return U4Ref(base).v;
    float16_t h[8];
    [[unroll]] for (uint e = 0; e < 8u; e++)
        h[e] = gk + e < pc.K ? F16Ref(base + 2ul * e).v : float16_t(0.0);
    return uvec4(packFloat2x16(f16vec2(h[0], h[1])), packFloat2x16(f16vec2(h[2], h[3])),
                 packFloat2x16(f16vec2(h[4], h[5])), packFloat2x16(f16vec2(h[6], h[7])));
}

// Applies the epilogue to a staged row of fragments (row i of every subgroup's FM x FN): subgroup
// s holds 16 x WN f32 at float offset s*16*WN, row pitch WN. Bounds-checked, coalesced writes.
void epilogue_stage(uint i, uint m0, uint n0) {
    for (uint e = gl_LocalInvocationID.x; e < NWARPS * 16u * WN; e += NT) {
        const uint s = e / (16u * WN), r = (e / WN) % 16u, c = e % WN;
        const uint gm = m0 + (s / WARPS_N) * WM + i * 16u + r;
        const uint gn = n0 + (s % WARPS_N) * WN + c;
        if (gm < pc.M && gn < pc.N) {
            float v = uintBitsToFloat(sh[e >> 2][e & 3u]);
            if (pc.bias != 0ul)
                v += LOADF(pc.bias, gn);
            v = pc.alpha * act_apply(v, pc.act);
            const uint64_t o = uint64_t(gm) * pc.N + gn;
            if (pc.res != 0ul)
                v += LOADF(pc.res, o); // res may be y: read before the write, same invocation
            STOREF(pc.y, o, v);
        }
    }
}

// Row i of fragments: wait until nobody reads the shared array any more (blocks or the previous
// stage), store, wait until every subgroup has stored, apply.
#define EPILOGUE_ROW(i)                                                                           \
    do {                                                                                          \
        barrier();                                                                                \
        [[unroll]] for (uint j = 0; j < FN; j++)                                                  \
            STORE_C(acc[(i) * FN + j], warp * (4u * WN) + j * 4u, WN / 4u);                       \
        barrier();                                                                                \
        epilogue_stage(i, m0, n0);                                                                \
    } while (false)

#if FM != 1 && FM != 2 && FM != 4
#error "FM must be 1, 2 or 4 (the epilogue is unrolled by hand)"
#endif

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint warp = WARP_ID;
    const uint wm = warp / WARPS_N, wn = warp % WARPS_N;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint tiles_n = (N + BN - 1u) / BN;
    const uint ntiles = ((M + BM - 1u) / BM) * tiles_n;
    const uint nk = (K + BK - 1u) / BK;
    // This invocation's chunks: column chunk kc of rows r0 + i*(NT/CPR).
    const uint kc = tid % CPR, r0 = tid / CPR;

    for (uint tile = gl_WorkGroupID.x; tile < ntiles; tile += gl_NumWorkGroups.x) {
        const uint m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        FragC acc[FM * FN];
        [[unroll]] for (uint f = 0; f < FM * FN; f++)
            ZERO_C(acc[f]);

        uvec4 ra[A_CHUNKS], rb[B_CHUNKS];
        [[unroll]] for (uint i = 0; i < A_CHUNKS; i++)
            ra[i] = fetch_x8(m0 + r0 + i * (NT / CPR), kc * 8u);
        [[unroll]] for (uint i = 0; i < B_CHUNKS; i++)
            rb[i] = fetch_w8(n0 + r0 + i * (NT / CPR), kc * 8u);

        for (uint kt = 0; kt < nk; kt++) {
            barrier(); // every subgroup is done reading the previous block (or the epilogue stage)
            [[unroll]] for (uint i = 0; i < A_CHUNKS; i++)
                sh[A_OFF + (r0 + i * (NT / CPR)) * SK + kc] = ra[i];
            [[unroll]] for (uint i = 0; i < B_CHUNKS; i++)
                sh[B_OFF + (r0 + i * (NT / CPR)) * SK + kc] = rb[i];
            barrier();
            if (kt + 1u < nk) { // fetch the next block while this one is multiplied
                const uint gk = (kt + 1u) * BK + kc * 8u;
                [[unroll]] for (uint i = 0; i < A_CHUNKS; i++)
                    ra[i] = fetch_x8(m0 + r0 + i * (NT / CPR), gk);
                [[unroll]] for (uint i = 0; i < B_CHUNKS; i++)
                    rb[i] = fetch_w8(n0 + r0 + i * (NT / CPR), gk);
            }
            [[unroll]] for (uint ks = 0; ks < BK / 16; ks++) {
                FragAB fa[FM], fb[FN];
                [[unroll]] for (uint i = 0; i < FM; i++)
                    LOAD_A(fa[i], A_OFF + (wm * WM + i * 16u) * SK + ks * 2u);
                [[unroll]] for (uint j = 0; j < FN; j++)
                    LOAD_B(fb[j], B_OFF + (wn * WN + j * 16u) * SK + ks * 2u);
                [[unroll]] for (uint i = 0; i < FM; i++)
                    [[unroll]] for (uint j = 0; j < FN; j++)
                        MMA(acc[i * FN + j], fa[i], fb[j]);
            }
        }

        // Epilogue, one row of fragments at a time (unrolled by hand: spirv-opt does not unroll a loop
        // that contains another loop, and a dynamically indexed accumulator array would leave
        // registers).
        EPILOGUE_ROW(0);
#if FM > 1
        EPILOGUE_ROW(1);
#endif
#if FM > 2
        EPILOGUE_ROW(2);
        EPILOGUE_ROW(3);
#endif
    }
}
