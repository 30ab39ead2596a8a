#version 460
// gemm.comp — the linear op on any device: y = res + alpha * act(x w^T + bias) with scalar f32 FMA.
// Without F16_TYPES x, w and y are f32; with -DF16_TYPES each may be f16 (specialization constant 7,
// linear.glsl), and an f32 x is rounded to f16 when w is f16, as the op defines. Not the tensor-core
// path (gemm_coopmat.comp). With -DWQ_Q8_0/_Q4_K/_Q5_K/_Q6_K w holds quantized blocks, dequantized
// to f32 while its tile is staged (dequant.glsl).
//
// Each workgroup computes BM x BN output tiles, looping grid-stride over the tile index (tiles are
// numbered row-major, so neighbouring workgroups share x rows and sweep w). K advances in steps of
// BK: both operands are K-contiguous, so each step copies a BM x BK block of x and a BN x BK block
// of w into shared memory, transposed (k-major) so that the inner loop reads consecutive m (resp. n)
// for one k. Partial blocks are zero-filled, so any M, N, K works. Each thread owns a TM x TN block
// of outputs at rows ty + i*TY and columns tx + j*TX: strided so that neighbouring threads read
// neighbouring shared words (no bank conflicts) and write neighbouring outputs (coalesced).
//
// ACT_GLU (linear.glsl): a thread's columns j and j+1 (j even; TN is even) are a (value, gate) pair:
// tile column tx + j*TX holds the product's column 2*((j/2)*TX + tx) + j%2 of the tile's pair order.
//
// spec: 0 workgroup size (must be (BM/TM)*(BN/TN)), 1 BM, 2 BN, 3 BK, 4 TM, 5 TN, 7 tensor types.
// push: linear.glsl (x, w, bias, res, y, M, N, K, act, alpha; flags unused here). 32-bit tile
// coordinates: the host guarantees M, N, K < 2^31 and the tile count < 2^32; element offsets are 64-bit.
#ifdef F16_TYPES
#define HAS_F16
#endif
#include "core.glsl"
#include "linear.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

const uint TY = BM / TM;  // threads along m
const uint TX = BN / TN;  // threads along n
// Row pitch of the k-major tiles: +1 makes the transposing stores (consecutive k from consecutive
// threads) hit distinct banks.
const uint SA = BM + 1;
const uint SB = BN + 1;
shared float As[BK * SA];
shared float Bs[BK * SB];

// load_x rounds an f32 x to f16 when w is f16 (linear.glsl): the product of two f16 values is exact
// in f32, so f32 FMA then matches an f16 x f16 -> f32 MMA.

// The product's column (of the tile, in pair order with ACT_GLU) that tile column r holds.
uint tile_col(uint r) {
    if (pc.act != ACT_GLU)
        return r;
    const uint j = r / TX, t = r % TX;
    return 2u * ((j / 2u) * TX + t) + j % 2u;
}

void main() {
    const uint WG = gl_WorkGroupSize.x;
    const uint tid = gl_LocalInvocationID.x;
    const uint tx = tid % TX, ty = tid / TX;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint tiles_n = (N + BN - 1) / BN;
    const uint ntiles = ((M + BM - 1) / BM) * tiles_n;

    for (uint tile = gl_WorkGroupID.x; tile < ntiles; tile += gl_NumWorkGroups.x) {
        const uint m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        float acc[TM * TN];
        [[unroll]] for (uint i = 0; i < TM * TN; i++)
            acc[i] = 0.0;

        for (uint k0 = 0; k0 < K; k0 += BK) {
            // Stage x[m0.., k0..] and w[n0.., k0..]: consecutive threads read consecutive k.
            for (uint e = tid; e < BM * BK; e += WG) {
                const uint r = e / BK, kk = e % BK;
                const uint gm = m0 + r, gk = k0 + kk;
                As[kk * SA + r] = (gm < M && gk < K) ? load_x(uint64_t(gm) * K + gk) : 0.0;
            }
            for (uint e = tid; e < BN * BK; e += WG) {
                const uint r = e / BK, kk = e % BK;
                const uint gn = n0 + tile_col(r), gk = k0 + kk;
                Bs[kk * SB + r] = (gn < N && gk < K) ? load_w_nk(glu_row(gn), gk) : 0.0;
            }
            barrier();
            for (uint kk = 0; kk < BK; kk++) {
                float a[TM], b[TN];
                [[unroll]] for (uint i = 0; i < TM; i++)
                    a[i] = As[kk * SA + ty + i * TY];
                [[unroll]] for (uint j = 0; j < TN; j++)
                    b[j] = Bs[kk * SB + tx + j * TX];
                [[unroll]] for (uint i = 0; i < TM; i++)
                    [[unroll]] for (uint j = 0; j < TN; j++)
                        acc[i * TN + j] = fma(a[i], b[j], acc[i * TN + j]);
            }
            barrier(); // the next step overwrites the tiles
        }

        // Epilogue (linear.glsl), in the reference's order.
        if (pc.act == ACT_GLU) {
            [[unroll]] for (uint i = 0; i < TM; i++) {
                const uint gm = m0 + ty + i * TY;
                [[unroll]] for (uint j = 0; j < TN; j += 2u) {
                    const uint gn = n0 + 2u * ((j / 2u) * TX + tx); // the value column; N even: its gate is in
                    if (gm < M && gn < N)
                        linear_epilogue_glu(gm, gn / 2u, acc[i * TN + j], acc[i * TN + j + 1u]);
                }
            }
            continue;
        }
        [[unroll]] for (uint i = 0; i < TM; i++) {
            const uint gm = m0 + ty + i * TY;
            [[unroll]] for (uint j = 0; j < TN; j++) {
                const uint gn = n0 + tx + j * TX;
                if (gm < M && gn < N)
                    linear_epilogue(gm, gn, acc[i * TN + j]);
            }
        }
    }
}
