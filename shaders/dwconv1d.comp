#version 460
// dwconv1d.comp — depthwise convolution over time, odd kernel K, 'same' zero padding, channels-last:
//   y[t, c] = act(b[c] + sum_k w[c, k] * x[t - lpad + k, c]),  x, y [T, C], w [C, K], b [C],
// lpad = K/2, or K-1 for a causal conv (padding [K-1, 0]).
// Grid: x over channels (one thread per channel: loads along c are contiguous across a workgroup),
// y over blocks of TT time steps; both grid-stride. The K input rows a thread reads for consecutive t
// overlap, so they come from cache after the first output of a block.
// The channel loop counter is 32-bit (the host checks C <= 2^30): Mesa 22.3's lavapipe loses work when a
// 64-bit loop counter that differs between invocations encloses another loop. Offsets stay 64-bit.
// A packed batch (nseg > 0): x's row t is position row0 + t of a sequence of segments starting at
// seg[] [nseg+1]; taps never read across the boundary of t's segment (zeros, as at x's ends).
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
    int64_t t, c, k;
    uint act;
    uint nseg;
    uint64_t seg;
    int64_t row0;
    int64_t lpad;
} pc;

const int64_t TT = 8; // time steps per block (mirrors DWCONV1D_TT in vk_op_conv.c)

void main() {
    const int64_t half_k = pc.lpad;
    const uint64_t C = uint64_t(pc.c);
    for (uint c32 = gl_GlobalInvocationID.x; c32 < uint(pc.c); c32 += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        const uint64_t c = c32;
        const float bias = LOADF(pc.b, c);
        const uint64_t wrow = c * uint64_t(pc.k);
        for (int64_t t0 = int64_t(gl_WorkGroupID.y) * TT; t0 < pc.t; t0 += int64_t(gl_NumWorkGroups.y) * TT) {
            const int64_t t1 = min(t0 + TT, pc.t);
            for (int64_t t = t0; t < t1; t++) {
                // The rows a tap may read: [lo, hi) = x's, or those of t's segment.
                int64_t lo = 0, hi = pc.t;
                if (pc.nseg > 0u) {
                    const uint s = seg_find(pc.seg, pc.nseg, pc.row0 + t);
                    lo = max(LOADL(pc.seg, s) - pc.row0, 0l);
                    hi = min(LOADL(pc.seg, s + 1u) - pc.row0, pc.t);
                }
                // Taps whose input row lies in [lo, hi): k in [k0, k1).
                const int64_t k0 = max(half_k - (t - lo), 0l), k1 = min(pc.k, hi - t + half_k);
                float acc = bias;
                for (int64_t k = k0; k < k1; k++)
                    acc += LOADF(pc.w, wrow + uint64_t(k)) * load_in(pc.x, uint64_t(t - half_k + k) * C + c);
                store_out(pc.y, uint64_t(t) * C + c, act_apply(acc, pc.act));
            }
        }
    }
}
