#version 460
// rows.comp — f32 reductions along the last dimension of x [R, C]: layernorm (-DLAYERNORM; its y f32,
// or f16 with -DIO_F16: io.glsl; where asked, also y's int8 rows: op_layernorm.y8), softmax (-DSOFTMAX)
// and argmax (-DARGMAX).
//
// A row belongs to a segment of `tpr` consecutive invocations (a power of two <= the workgroup size,
// chosen by the host from the row width), so a workgroup handles wg/tpr rows at a time: narrow rows
// (C = 3) do not leave most of a workgroup idle and wide rows (C = 4097) are split over the whole
// workgroup. Each invocation accumulates its strided columns in f32, then a shared-memory tree combines
// the segment (no subgroup operations, so nothing depends on the subgroup size). Rows are grid-stride.
// push: see PC. spec 0: workgroup size (a power of two); 7: tensor types (IO_F16).
#ifdef IO_F16
#define HAS_F16
#endif
#include "core.glsl"
#include "io.glsl"
layout(local_size_x_id = 0) in;

#if defined(LAYERNORM)
layout(push_constant) uniform PC {
    uint64_t x, gamma, beta, y, rows, cols;
    uint tpr;
    float eps, inv_cols; // inv_cols: 1/cols, rounded once on the host
    uint64_t y8;          // 0, or y's int8 rows: int8 [R, C] (bytes, row-major), then f32 [R] scales
} pc;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer UWordRef { uint v; };
#elif defined(SOFTMAX)
layout(push_constant) uniform PC {
    uint64_t x, y, rows, cols;
    uint tpr;
    float scale;
} pc;
#elif defined(ARGMAX)
layout(push_constant) uniform PC {
    uint64_t x, y, rows, cols, c0, c1;
    uint tpr;
    uint unused;
} pc;
#else
#error define LAYERNORM, SOFTMAX or ARGMAX
#endif

shared float red[gl_WorkGroupSize.x];
#ifdef ARGMAX
shared int red_i[gl_WorkGroupSize.x]; // column of red[], -1 = no candidate (empty or all NaN)
#endif

#ifdef LAYERNORM
// Column c of the row at base, normalised: precise (no contraction or reassociation), so the value is
// the same bits wherever it is computed (the int8 rows may compute it twice).
float ln_value(uint64_t base, uint64_t c, float mean, float inv) {
    precise float v = (LOADF(pc.x, base + c) - mean) * inv * LOADF(pc.gamma, c) + LOADF(pc.beta, c);
    return v;
}

// v as y stores it, widened back to f32 (an f16 y: rounded to nearest even as STOREH_RNE does, by the
// same packHalf2x16, then widened on the bits: round_to_f16, which the compiler cannot fold back to v):
// what quantize_rows.comp would read from y.
float stored_y(float v) {
#ifdef IO_F16
    if (OUT16)
        return round_to_f16(v);
#endif
    return v;
}
#endif

#define OP_SUM 0
#define OP_MAX 1

// Reduces v over the segment of invocation lid (lane = position in the segment). Every invocation of
// the workgroup must call it (it contains barriers).
float seg_reduce(float v, uint lid, uint lane, int op) {
    red[lid] = v;
    barrier();
    for (uint s = pc.tpr >> 1; s > 0u; s >>= 1) {
        if (lane < s)
            red[lid] = op == OP_SUM ? red[lid] + red[lid + s] : max(red[lid], red[lid + s]);
        barrier();
    }
    float t = red[lid - lane];
    barrier(); // red is rewritten by the next reduction
    return t;
}

#ifdef ARGMAX
// NaN test on the bits: a compiler assuming no NaN cannot fold it away.
bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }

// Does candidate (v, i) beat (bv, bi)? Larger value wins; equal values go to the lower column.
bool better(float v, int i, float bv, int bi) {
    return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}
#endif

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint tpr = pc.tpr;
    uint lane = lid & (tpr - 1u);
    uint rpw = gl_WorkGroupSize.x / tpr; // rows per workgroup pass
    uint sub = lid / tpr;
    for (uint64_t rb = gl_WorkGroupID.x; rb * rpw < pc.rows; rb += gl_NumWorkGroups.x) {
        uint64_t row = rb * rpw + sub;
        bool live = row < pc.rows; // inactive invocations still take part in the barriers
        uint64_t base = row * pc.cols;
#if defined(LAYERNORM)
        // Mean and variance of d = x - x0 (x0: the row's first element, so a row far from zero, x in
        // [99, 101), keeps its precision), in two passes of sums. Only exactly rounded operations
        // (`precise`), 1/C from the host and inversesqrt: nothing a compiler may approximate its own way.
        precise float x0 = live ? LOADF(pc.x, base) : 0.0;
        precise float sd = 0.0;
        if (live)
            for (uint64_t c = lane; c < pc.cols; c += tpr)
                sd += LOADF(pc.x, base + c) - x0;
        precise float mu = seg_reduce(sd, lid, lane, OP_SUM) * pc.inv_cols;
        precise float m2 = 0.0;
        if (live)
            for (uint64_t c = lane; c < pc.cols; c += tpr) {
                precise float d = (LOADF(pc.x, base + c) - x0) - mu;
                m2 += d * d;
            }
        precise float var = seg_reduce(m2, lid, lane, OP_SUM) * pc.inv_cols;
        precise float mean = x0 + mu;
        precise float inv = inversesqrt(var + pc.eps);
        // y by words of 4 columns where C % 4 == 0, with int8 rows or without: one piece of code, so y
        // has the same bits either way (two pipelines did not, on NVIDIA); other widths by columns.
        const bool words = pc.cols % 4u == 0u;
        const bool one_word = pc.cols <= 4u * uint64_t(tpr);
        vec4 kept = vec4(0.0);
        float amax = 0.0;
        if (live && words)
            for (uint64_t w = lane; w < pc.cols / 4u; w += tpr)
                [[unroll]] for (uint e = 0; e < 4u; e++) {
                    const uint64_t c = 4u * w + e;
                    const float v = ln_value(base, c, mean, inv);
                    store_out(pc.y, base + c, v);
                    kept[e] = stored_y(v);
                    amax = max(amax, abs(kept[e]));
                }
        if (live && !words)
            for (uint64_t c = lane; c < pc.cols; c += tpr)
                store_out(pc.y, base + c, ln_value(base, c, mean, inv));
        if (pc.y8 != 0ul) {
            // y's int8 rows (op_layernorm.y8; the host checks C % 4 == 0): quantize_rows.comp's rule on
            // y as stored, so the bytes and scale of that pass. The values come from registers (one
            // word an invocation: C <= 4 tpr) or are computed again, never read back from y.
            amax = seg_reduce(amax, lid, lane, OP_MAX);
            precise float qinv = 127.0 / amax;
            if (live && lane == 0u) {
                precise float s = amax / 127.0;
                STOREF(pc.y8 + pc.rows * pc.cols, row, s);
            }
            if (live)
                for (uint64_t w = lane; w < pc.cols / 4u; w += tpr) {
                    uint word = 0u;
                    [[unroll]] for (uint e = 0; e < 4u; e++) {
                        const float y = one_word ? kept[e] : stored_y(ln_value(base, 4u * w + e, mean, inv));
                        precise float v = y * qinv;
                        const int q = amax > 0.0 ? int(clamp(roundEven(v), -127.0, 127.0)) : 0;
                        word |= (uint(q) & 0xffu) << (8u * e);
                    }
                    UWordRef(pc.y8 + base + 4u * w).v = word;
                }
        }
#elif defined(SOFTMAX)
        float m = uintBitsToFloat(0xff800000u); // -inf
        if (live)
            for (uint64_t c = lane; c < pc.cols; c += tpr)
                m = max(m, pc.scale * LOADF(pc.x, base + c));
        m = seg_reduce(m, lid, lane, OP_MAX);
        float s = 0.0;
        if (live)
            for (uint64_t c = lane; c < pc.cols; c += tpr)
                s += exp(pc.scale * LOADF(pc.x, base + c) - m);
        s = seg_reduce(s, lid, lane, OP_SUM);
        // y may alias x: each element is read, then written, by the same invocation, after every
        // read of the row by the reductions above (they end in a barrier).
        if (live)
            for (uint64_t c = lane; c < pc.cols; c += tpr)
                STOREF(pc.y, base + c, exp(pc.scale * LOADF(pc.x, base + c) - m) / s);
#else // ARGMAX
        float bv = 0.0;
        int bi = -1;
        uint64_t n = pc.c1 - pc.c0; // < 2^31 (host check): columns fit an int
        if (live)
            for (uint64_t c = lane; c < n; c += tpr) {
                float v = LOADF(pc.x, base + pc.c0 + c);
                // Increasing c within an invocation: strict > keeps the first of equal values.
                if (!is_nan(v) && (bi < 0 || v > bv)) {
                    bv = v;
                    bi = int(c);
                }
            }
        red[lid] = bv;
        red_i[lid] = bi;
        barrier();
        for (uint s = tpr >> 1; s > 0u; s >>= 1) {
            if (lane < s && better(red[lid + s], red_i[lid + s], red[lid], red_i[lid])) {
                red[lid] = red[lid + s];
                red_i[lid] = red_i[lid + s];
            }
            barrier();
        }
        if (live && lane == 0u)
            STOREI(pc.y, row, max(red_i[lid], 0)); // all NaN -> 0, as the reference
        barrier();
#endif
    }
}
