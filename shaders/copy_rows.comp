#version 460
// copy_rows.comp — row copies (ops.h op_copy_rows): y row dst[r] = x row src[r], moved as 32-bit words
// (f32, i32 and f16 rows alike: a row is a whole number of words), grid-stride over pairs x words. A
// pair whose index lies outside x's or y's rows is skipped, so a bad table cannot write elsewhere.
// push: PC. spec 0: workgroup size.
#include "core.glsl"
layout(local_size_x_id = 0) in;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32Ref { uint v; };

layout(push_constant) uniform PC {
    uint64_t x, y, src, dst; // src, dst: I64 [n], or 0 for the identity
    uint64_t n, rx, ry;      // pairs, rows of x, rows of y
    uint64_t wpr;            // 32-bit words per row
} pc;

void main() {
    const uint64_t total = pc.n * pc.wpr, stride = uint64_t(gl_NumWorkGroups.x) * uint64_t(gl_WorkGroupSize.x);
    for (uint64_t i = gl_GlobalInvocationID.x; i < total; i += stride) {
        const uint64_t r = i / pc.wpr, w = i - r * pc.wpr;
        const int64_t s = pc.src != 0ul ? LOADL(pc.src, r) : int64_t(r);
        const int64_t d = pc.dst != 0ul ? LOADL(pc.dst, r) : int64_t(r);
        if (s >= 0l && d >= 0l && uint64_t(s) < pc.rx && uint64_t(d) < pc.ry)
            U32Ref(pc.y + (uint64_t(d) * pc.wpr + w) * 4ul).v = U32Ref(pc.x + (uint64_t(s) * pc.wpr + w) * 4ul).v;
    }
}
