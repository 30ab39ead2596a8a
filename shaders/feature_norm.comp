#version 460
// feature_norm.comp — per-column standardisation of x [L, M] (mel bins over time), f32, in passes:
//   mode 0: part[p, c] = sum of x[r, c] - x[0, c] over the rows r of chunk p  (shifted: see below)
//   mode 1: part[p, c] = sum of (x[r, c] - mean[c])^2 over chunk p           (two-pass variance)
//   mode 2: mean[c] = x[0, c] + sum_p part[p, c] / L
//   mode 3: std[c] = sqrt(sum_p part[p, c] / (L - 1)), 0 when L == 1        (unbiased)
//   mode 4: y = (x - mean[c]) / (std[c] + eps)                               (y may alias x)
// The shift by the first row makes a constant column (digital silence: log of the guard) come out as
// exactly its value, so it normalises to exactly 0 like the double-precision reference, instead of
// +-1 ulp of the mean divided by eps; it also avoids cancellation when |mean| >> std.
// L reaches 360000 for an hour of audio: no value passes through a long serial running sum. Each
// invocation adds at most chunk/TR values, then shared-memory trees combine the rest; chunks are
// fixed by the host, so results do not depend on the grid. stats holds mean [M] then std [M].
// Modes 0/1: grid x = column tiles of TC, grid y = chunks. Modes 2/3: grid x = column tiles.
// Mode 4: grid x over L*M elements. All grid-stride. spec 0: workgroup size (multiple of TC, 2^k).
#include "core.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t x, y, part, stats;
    uint64_t rows, cols, chunk, nchunks;
    uint mode;
    float eps;
} pc;

#define TC 32u // columns per workgroup: 32 consecutive floats per row read
shared float red[gl_WorkGroupSize.x];

// Sum of s over the TR invocations of column lc; all invocations must call it (barriers).
float col_sum(float s, uint lid, uint lr, uint lc) {
    uint tr = gl_WorkGroupSize.x / TC;
    red[lid] = s;
    barrier();
    for (uint h = tr >> 1; h > 0u; h >>= 1) {
        if (lr < h)
            red[lid] += red[lid + h * TC];
        barrier();
    }
    float t = red[lc];
    barrier();
    return t;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint lc = lid % TC, lr = lid / TC, tr = gl_WorkGroupSize.x / TC;
    if (pc.mode == 4u) {
        uint64_t n = pc.rows * pc.cols, i = grid_id_x(), st = grid_stride_x();
        uint64_t c = i % pc.cols, dc = st % pc.cols; // column carried along the loop
        for (; i < n; i += st) {
            float v = LOADF(pc.x, i);
            STOREF(pc.y, i, (v - LOADF(pc.stats, c)) / (LOADF(pc.stats, pc.cols + c) + pc.eps));
            c += dc;
            if (c >= pc.cols)
                c -= pc.cols;
        }
        return;
    }
    for (uint64_t ct = gl_WorkGroupID.x; ct * TC < pc.cols; ct += gl_NumWorkGroups.x) {
        uint64_t c = ct * TC + lc;
        bool col_ok = c < pc.cols;
        if (pc.mode <= 1u) {
            for (uint64_t p = gl_WorkGroupID.y; p < pc.nchunks; p += gl_NumWorkGroups.y) {
                uint64_t r0 = p * pc.chunk, r1 = min(r0 + pc.chunk, pc.rows);
                float s = 0.0;
                if (col_ok) {
                    float mean = pc.mode == 1u ? LOADF(pc.stats, c) : LOADF(pc.x, c);
                    for (uint64_t r = r0 + lr; r < r1; r += tr) {
                        float v = LOADF(pc.x, r * pc.cols + c);
                        v -= mean;
                        if (pc.mode == 1u)
                            v *= v;
                        s += v;
                    }
                }
                s = col_sum(s, lid, lr, lc);
                if (lr == 0u && col_ok)
                    STOREF(pc.part, p * pc.cols + c, s);
            }
        } else {
            float s = 0.0;
            if (col_ok)
                for (uint64_t p = lr; p < pc.nchunks; p += tr)
                    s += LOADF(pc.part, p * pc.cols + c);
            s = col_sum(s, lid, lr, lc);
            if (lr == 0u && col_ok) {
                if (pc.mode == 2u)
                    STOREF(pc.stats, c, LOADF(pc.x, c) + s / float(pc.rows));
                else
                    STOREF(pc.stats, pc.cols + c, pc.rows > 1ul ? sqrt(s / float(pc.rows - 1ul)) : 0.0);
            }
        }
    }
}
