#version 460
// gemv.comp — the linear op for products with few rows: y = res + alpha * act(x w^T + bias), x [M,K]
// f32, w [N,K] f32 (or f16 with -DW_F16, which also rounds x to f16 as the op defines), f32
// accumulation. The decoder's products (the joint over a window of a few frames, the prediction
// network's projection) are matrix-vector products: bound by reading w once, and with only N / 128
// tiles the tiled GEMM leaves most of a GPU idle (9 workgroups for a 1,000-class joint).
//
// Here one group of 32 consecutive invocations owns one output column n and sweeps its weight row
// (K-contiguous: each load of the group reads 32 consecutive elements, or 32 x 8 with vector loads)
// for MR = 8 rows of x at once; a workgroup holds WG / 32 such groups, i.e. a tile of MR rows x WG/32
// columns, and loops grid-stride over the tiles (row-major: neighbouring workgroups read the same x
// rows and neighbouring weight rows). The 32 partial sums of each output go through shared memory
// and are added in lane order by one invocation, which applies the epilogue. Any M works (row
// blocks of MR re-read w; the op picks this kernel for M <= 8 only).
//
// spec 0: workgroup size, a multiple of 32.
// push: as gemm.comp; flags bit 0: K % 8 == 0 and x, w 16-byte aligned (vector loads allowed).
#ifdef W_F16
#define HAS_F16
#endif
#include "core.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint64_t x, w, bias, res, y;
    uint M, N, K;
    uint act;
    float alpha;
    uint flags;
} pc;

#define FLAG_VEC 1u
#define LANES 32u
#define MR 8u


shared float part[gl_WorkGroupSize.x * MR];

#ifdef W_F16
float load_x(uint64_t i) { return round_to_f16(LOADF(pc.x, i)); }
float load_w(uint64_t i) { return LOADH(pc.w, i); }
vec4 round4(vec4 v) { return round_to_f16(v); }
// w[i .. i+7], i a multiple of 8 (16-byte aligned).
void load_w8(uint64_t i, out vec4 lo, out vec4 hi) {
    const uvec4 u = U4Ref(pc.w + i * 2ul).v;
    lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
}
#else
float load_x(uint64_t i) { return LOADF(pc.x, i); }
float load_w(uint64_t i) { return LOADF(pc.w, i); }
vec4 round4(vec4 v) { return v; }
void load_w8(uint64_t i, out vec4 lo, out vec4 hi) {
    lo = V4Ref(pc.w + i * 4ul).v;
    hi = V4Ref(pc.w + i * 4ul + 16ul).v;
}
#endif

void main() {
    const uint WG = gl_WorkGroupSize.x, CPW = WG / LANES;
    const uint tid = gl_LocalInvocationID.x, lane = tid % LANES, grp = tid / LANES;
    const uint M = pc.M, N = pc.N, K = pc.K;
    const uint tiles_n = (N + CPW - 1u) / CPW;
    const uint ntiles = ((M + MR - 1u) / MR) * tiles_n;
    const bool vec = (pc.flags & FLAG_VEC) != 0u;

    for (uint tile = gl_WorkGroupID.x; tile < ntiles; tile += gl_NumWorkGroups.x) {
        const uint m0 = (tile / tiles_n) * MR, n = (tile % tiles_n) * CPW + grp;
        const uint rows = min(MR, M - m0);
        float acc[MR];
        [[unroll]] for (uint r = 0; r < MR; r++)
            acc[r] = 0.0;
        if (n < N) {
            const uint64_t wrow = uint64_t(n) * K;
            if (vec) {
                for (uint k = lane * 8u; k < K; k += LANES * 8u) {
                    vec4 wlo, whi;
                    load_w8(wrow + k, wlo, whi);
                    [[unroll]] for (uint r = 0; r < MR; r++) {
                        if (r < rows) {
                            const uint64_t xa = pc.x + (uint64_t(m0 + r) * K + k) * 4ul;
                            acc[r] += dot(round4(V4Ref(xa).v), wlo) + dot(round4(V4Ref(xa + 16ul).v), whi);
                        }
                    }
                }
            } else {
                for (uint k = lane; k < K; k += LANES) {
                    const float wv = load_w(wrow + k);
                    [[unroll]] for (uint r = 0; r < MR; r++)
                        if (r < rows)
                            acc[r] = fma(load_x(uint64_t(m0 + r) * K + k), wv, acc[r]);
                }
            }
        }
        [[unroll]] for (uint r = 0; r < MR; r++)
            part[(grp * MR + r) * LANES + lane] = acc[r];
        barrier();
        // Epilogue, in the reference's order: (sum + bias) -> act -> * alpha -> + res.
        if (lane < rows && n < N) {
            const uint base = (grp * MR + lane) * LANES;
            float v = 0.0;
            for (uint l = 0; l < LANES; l++)
                v += part[base + l];
            if (pc.bias != 0ul)
                v += LOADF(pc.bias, n);
            v = pc.alpha * act_apply(v, pc.act);
            const uint64_t o = uint64_t(m0 + lane) * N + n;
            if (pc.res != 0ul)
                v += LOADF(pc.res, o); // res may be y: read before the write, same invocation
            STOREF(pc.y, o, v);
        }
        barrier(); // the next tile overwrites the partial sums
    }
}
