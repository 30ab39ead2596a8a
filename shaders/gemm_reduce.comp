#version 460
// gemm_reduce.comp — the second pass of a split-K linear op (gemm_coopmat.comp with pc.splits > 1):
// y[m, n] = epilogue(ws[0, m, n] + ws[1, m, n] + ... + ws[S-1, m, n]), the slices added in order, then
// the op's epilogue (bias, act, alpha, res; y f32 or f16, linear.glsl). ws = pc.x, f32 [S, M, N]; with
// ACT_GLU its columns are in pair order (linear.glsl) and y [M, N/2] takes columns 2j and 2j+1.
// Element-wise over M*N with 64-bit offsets, grid-stride.
//
// spec 0: workgroup size; 7: tensor types (only the y bit matters).
// push: linear.glsl: x = the workspace, splits = S, bias, res, y, M, N, act, alpha as the op's.
#define HAS_F16
#define F16_TYPES
#include "core.glsl"
#include "linear.glsl"

layout(local_size_x_id = 0) in;

void main() {
    const uint64_t MN = uint64_t(pc.M) * pc.N, stride = grid_stride_x();
    const bool glu = pc.act == ACT_GLU;
    const uint ny = glu ? pc.N / 2u : pc.N; // outputs per row
    const uint64_t n_out = uint64_t(pc.M) * ny;
    // A 32-bit round counter (the 64-bit index differs between invocations and encloses the loop over
    // slices: lavapipe skips work for such 64-bit counters, docs/architecture.md).
    for (uint round = 0;; round++) {
        const uint64_t i = grid_id_x() + uint64_t(round) * stride;
        if (i >= n_out)
            break;
        const uint gm = uint(i / ny), j = uint(i % ny);
        const uint64_t w0 = uint64_t(gm) * pc.N + (glu ? 2u * j : j); // the (value) column in ws
        float v = LOADF(pc.x, w0);
        for (uint s = 1; s < pc.splits; s++)
            v += LOADF(pc.x, uint64_t(s) * MN + w0);
        if (!glu) {
            linear_epilogue(gm, j, v);
            continue;
        }
        float g = LOADF(pc.x, w0 + 1ul);
        for (uint s = 1; s < pc.splits; s++)
            g += LOADF(pc.x, uint64_t(s) * MN + w0 + 1ul);
        linear_epilogue_glu(gm, j, v, g);
    }
}
