#version 460
// conv2d.comp — the subsampling's strided 3x3 convolutions (stride 2, pad 1), channels-last:
//   default:    conv2d_s2,   x [Hx, W] (one input channel)  -> y [Hy, ceil(W/2), C]
//   DEPTHWISE:  dwconv2d_s2, x [Hx, W, C]                   -> y [Hy, ceil(W/2), C]
// w [C, 9], b [C]. Rows are global: x holds rows x_row0.., y holds rows y_row0..; output row R reads
// input rows 2R-1..2R+1 and a row outside [0, x_len) reads as zero. Causal (pc.pad 2): rows 2R-2..2R
// and columns 2o-2..2o, y [Hy, floor(W/2)+1, C] (pad 2 before, 1 after, in time and frequency).
// Every output element is computed by the same instruction sequence whatever the tile (no
// tile-dependent fast paths), so halo tiles are bit-identical to an untiled run.
// A packed batch (nseg > 0): x_seg, y_seg [nseg+1] hold the images' first rows in x's and y's row space;
// output row R of image s reads that image's local rows 2r-1..2r+1 (r = R - y_seg[s]), zero outside
// [0, x_seg[s+1] - x_seg[s]): each image is computed exactly as alone. Rows outside the tile read as
// zero too, so a bad table cannot reach outside x.
// Grid: x over channels (an invocation owns CPT of them: 4 for conv2d_s2, whose channels read the same
// input elements, 1 for the depthwise conv), y over output columns, z over output rows; all three
// grid-stride. Channel is the outermost loop so a thread keeps its taps in registers. Each output's
// arithmetic (bias, then the valid taps in row-major order) is the same whatever CPT.
// The channel loop counter is 32-bit (the host checks C <= 2^30): Mesa 22.3's lavapipe loses work when a
// 64-bit loop counter that differs between invocations encloses another loop. Offsets stay 64-bit.
// x and y f32, or each f16 with -DIO_F16 (io.glsl); w, b f32.
// push: see PC. spec 0: workgroup size; 7: tensor types (IO_F16).
#ifdef IO_F16
#define HAS_F16
#endif
#include "core.glsl"
#include "io.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t x, w, b, y;
    int64_t x_row0, x_len, y_row0;
    int64_t hx, hy, wx, wo, c;
    uint act;
    uint nseg;
    uint64_t x_seg, y_seg;
    uint pad, unused; // rows and columns before the image: 1, or 2 (causal: NeMo's causal_downsampling)
} pc;

#ifdef DEPTHWISE
#define CPT 1
#else
#define CPT 4 // channels per invocation: they read the same input elements, loaded once for all
#endif

void main() {
    // Rows inside the tile: global rows [tlo, thi) (validation guarantees that the rows a tile's outputs
    // need lie there; the check keeps a bad call from reading outside x).
    const int64_t tlo = pc.x_row0, thi = pc.x_row0 + pc.hx;
    const uint C = uint(pc.c), groups = (C + CPT - 1u) / CPT;
    const int64_t pad = int64_t(pc.pad);
    for (uint grp = gl_GlobalInvocationID.x; grp < groups; grp += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        // channels grp*CPT .. : one past C takes the last channel's taps and stores nothing
        float wk[9 * CPT], bias[CPT];
        [[unroll]] for (uint u = 0u; u < CPT; u++) {
            const uint64_t c = uint64_t(min(grp * CPT + u, C - 1u));
            [[unroll]] for (int k = 0; k < 9; k++)
                wk[u * 9u + uint(k)] = LOADF(pc.w, c * 9ul + uint64_t(k));
            bias[u] = LOADF(pc.b, c);
        }
        const uint64_t c0 = uint64_t(grp * CPT);
        for (int64_t r = int64_t(gl_WorkGroupID.z); r < pc.hy; r += int64_t(gl_NumWorkGroups.z)) {
            // output row R of the image: its row Rl, whose input rows are global rows base + (2Rl-1 ..),
            // valid inside [0, len) of the image
            int64_t Rl = pc.y_row0 + r, base = 0, len = pc.x_len;
            if (pc.nseg > 0u) {
                const uint s = seg_find(pc.y_seg, pc.nseg, Rl);
                Rl -= LOADL(pc.y_seg, s);
                base = LOADL(pc.x_seg, s);
                len = LOADL(pc.x_seg, s + 1u) - base;
            }
            for (int64_t o = int64_t(gl_WorkGroupID.y); o < pc.wo; o += int64_t(gl_NumWorkGroups.y)) {
                float acc[CPT];
                [[unroll]] for (uint u = 0u; u < CPT; u++)
                    acc[u] = bias[u];
                [[unroll]] for (int i = 0; i < 3; i++) {
                    const int64_t gl = 2 * Rl - pad + i, g = base + gl;
                    if (gl < 0 || gl >= len || g < tlo || g >= thi)
                        continue;
                    [[unroll]] for (int j = 0; j < 3; j++) {
                        const int64_t col = 2 * o - pad + j;
                        if (col < 0 || col >= pc.wx)
                            continue;
#ifdef DEPTHWISE
                        const uint64_t xi = (uint64_t((g - pc.x_row0) * pc.wx + col)) * uint64_t(pc.c) + c0;
#else
                        const uint64_t xi = uint64_t((g - pc.x_row0) * pc.wx + col);
#endif
                        const float xv = load_in(pc.x, xi);
                        [[unroll]] for (uint u = 0u; u < CPT; u++)
                            acc[u] += wk[u * 9u + uint(i * 3 + j)] * xv;
                    }
                }
                const uint64_t yo = uint64_t(r * pc.wo + o) * uint64_t(pc.c);
                [[unroll]] for (uint u = 0u; u < CPT; u++)
                    if (c0 + u < uint64_t(C))
                        store_out(pc.y, yo + c0 + u, act_apply(acc[u], pc.act));
            }
        }
    }
}
