#version 460
// scan.comp — the packed batch's offsets (src/backend/ops.h op_offsets_scan): from N lengths x [N]
// (int64), up to five int64 offset arrays in one launch, each an inclusive scan of its own transform
// of the lengths, len(i) = stride * ceil(floor(x[i] / div) / 2^halvings) (or, causal, floor((l + 2^(h+1)
// - 2) / 2^h)), after an optional leading 0.
// One workgroup scans one output (grid-stride over the outputs, so any grid of >= 1 workgroups works):
// it walks the lengths in chunks of WG, scans each chunk in shared memory (Hillis-Steele, log2(WG)
// steps) and carries the chunk's total into the next. A batch's N is in the thousands at most, so one
// workgroup per output takes microseconds; a cross-workgroup scan (decoupled look-back) would need
// forward-progress guarantees Vulkan does not give.
// 64-bit sums throughout; the chunk loop's counter is 32-bit and workgroup-uniform (N < 2^31, host).
// push: see PC. spec 0: workgroup size (a power of two).
#include "core.glsl"
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint64_t x;
    uint n, nout;
    // per output: y (address), div, stride, flags (bits 0..7: halvings; bit 8: leading zero; bit 9: causal,
    // floor(n/2)+1 per halving)
    uint64_t y0, y1, y2, y3, y4;
    uint div0, div1, div2, div3, div4;
    uint stride0, stride1, stride2, stride3, stride4;
    uint flags0, flags1, flags2, flags3, flags4;
    uint pad_;
} pc;

shared uint64_t part[gl_WorkGroupSize.x];

void main() {
    const uint tid = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
    for (uint k = gl_WorkGroupID.x; k < pc.nout; k += gl_NumWorkGroups.x) {
        const uint64_t y = k == 0u ? pc.y0 : k == 1u ? pc.y1 : k == 2u ? pc.y2 : k == 3u ? pc.y3 : pc.y4;
        const uint div = k == 0u ? pc.div0 : k == 1u ? pc.div1 : k == 2u ? pc.div2 : k == 3u ? pc.div3 : pc.div4;
        const uint stride = k == 0u ? pc.stride0 : k == 1u ? pc.stride1 : k == 2u ? pc.stride2
                          : k == 3u ? pc.stride3 : pc.stride4;
        const uint flags = k == 0u ? pc.flags0 : k == 1u ? pc.flags1 : k == 2u ? pc.flags2
                         : k == 3u ? pc.flags3 : pc.flags4;
        const uint h = flags & 0xffu, lead = (flags >> 8) & 1u, causal = (flags >> 9) & 1u;
        const uint64_t mask = (uint64_t(1) << h) - 1ul;
        if (lead != 0u && tid == 0u)
            STOREL(y, 0, 0l);
        uint64_t carry = 0ul;
        for (uint base = 0u; base < pc.n; base += WG) {
            const uint i = base + tid;
            uint64_t v = 0ul;
            if (i < pc.n) {
                const uint64_t l = uint64_t(LOADL(pc.x, i)) / uint64_t(div);
                const uint64_t up = causal != 0u ? (l + (uint64_t(2) << h) - 2ul) >> h
                                                 : (l >> h) + ((l & mask) != 0ul ? 1ul : 0ul);
                v = up * uint64_t(stride);
            }
            part[tid] = v;
            barrier();
            for (uint s = 1u; s < WG; s <<= 1) {
                const uint64_t add = tid >= s ? part[tid - s] : 0ul;
                barrier();
                part[tid] += add;
                barrier();
            }
            if (i < pc.n)
                STOREL(y, uint64_t(lead + i), int64_t(carry + part[tid]));
            carry += part[WG - 1u];
            barrier(); // part is rewritten by the next chunk
        }
    }
}
