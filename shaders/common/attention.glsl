// attention.glsl — what the relative-position attention kernels share (attention.comp,
// attention_rows.comp, attention_coopmat.comp): the push constants (mirror of
// struct pc_attention in src/backend/vulkan/vk_op_attention.c) and the tensor types. Include after
// core.glsl.
//
// Types: kernels built with -DF16_TYPES (which define HAS_F16 before core.glsl; the tensor-core kernels
// always are) take them from specialization constant 7, set by the host per call: bit 0 q is f16, 1 k,
// 2 v, 3 p, 4 y. bias_u and bias_v are always f32. Without F16_TYPES every tensor is f32 and the module
// needs no 16-bit storage, so it runs on devices without it.
#ifdef F16_TYPES
#ifndef HAS_F16
#error "F16_TYPES kernels define HAS_F16 before including core.glsl"
#endif
layout(constant_id = 7) const uint TYPES = 0;
#else
const uint TYPES = 0;
#endif
const bool Q16 = (TYPES & 1u) != 0u;
const bool K16 = (TYPES & 2u) != 0u;
const bool V16 = (TYPES & 4u) != 0u;
const bool P16 = (TYPES & 8u) != 0u;
const bool Y16 = (TYPES & 16u) != 0u;

// q, y [Tq, D] (positions q0 ..), k, v [Tk, D] (positions k0 ..), p [P, D], bu, bv [H, dk].
// 128 bytes, the most every device offers: the head count and p's centre row, which follow from the
// rest, are derived (ATT_H, ATT_CENTER) to leave room for a packed batch's segment table.
layout(push_constant) uniform PC {
    uint64_t q, k, v, p, bu, bv, y;
    uint Tq, Tk, q0, k0, D, dk, P, n_valid, w;
    float scale;
    uint flags;       // FLAG_* below; attention_rows.comp: the first query row of the dispatch
    uint nseg;        // segments of a packed batch (0: one sequence)
    uint64_t seg;     // I64 [nseg + 1]: the segments' start positions, a leading 0, the total last
    uint chunk;       // the chunked_limited mask (ops.h): chunks of this many positions; 0: off
    uint lchunks;     // ... the chunks before its own a query sees
    uint64_t qpos;    // I64 [Tq]: each query row's position (0: q0 + row); attention_rows.comp only
} pc;
#define ATT_H (pc.D / pc.dk)            // heads
#define ATT_CENTER ((pc.P - 1u) / 2u)   // p's row of relative position 0 (P is odd)

// The chunked_limited mask (specialization constant 3, set by the host when the call's chunk is
// non-zero): pipelines of models without it compile these tests out, so the per-key tests of the
// tensor-core kernels' inner loop cost them nothing.
layout(constant_id = 3) const bool CHUNKED = false;

// The chunked_limited mask's keys of query position pi, whose segment starts at position slo: [lo, hi)
// (ops.h). With the mask off, everything. No early return: with one here, lavapipe (Mesa 22.3) computed
// wrong results in the emulated split tensor-core kernel.
uint att_chunk_lo(uint pi, uint slo) {
    uint lo = 0u;
    if (CHUNKED && pc.chunk != 0u) {
        const uint c = (pi - slo) / pc.chunk;
        lo = slo + pc.chunk * (c > pc.lchunks ? c - pc.lchunks : 0u);
    }
    return lo;
}
uint att_chunk_hi(uint pi, uint slo) {
    uint hi = 0xffffffffu;
    if (CHUNKED && pc.chunk != 0u)
        hi = slo + pc.chunk * ((pi - slo) / pc.chunk + 1u);
    return hi;
}
bool att_chunk_ok(uint pi, uint j, uint slo) {
    bool ok = true;
    if (CHUNKED && pc.chunk != 0u)
        ok = j >= att_chunk_lo(pi, slo) && j < att_chunk_hi(pi, slo);
    return ok;
}

// The keys of query position pi for the kernels that take one row at a time (attention_rows.comp,
// attention_rows_group.comp): [j0, j1), the band [pi - w, pi + w] within the keys present [k0, k0 + Tk),
// below n_valid, inside the row's segment of a packed batch and its chunked mask. Positions and w are
// below 2^30 (host): no overflow; a bad segment table is clamped, so it cannot reach outside k.
void att_row_keys(uint pi, out uint j0, out uint j1) {
    uint slo = 0u, shi = 0xffffffffu;
    if (pc.nseg > 0u) {
        const uint sg = seg_find(pc.seg, pc.nseg, int64_t(pi));
        slo = uint(clamp(LOADL(pc.seg, sg), 0l, int64_t(pi)));
        if (sg + 1u < pc.nseg)
            shi = uint(clamp(LOADL(pc.seg, sg + 1u), int64_t(pi) + 1l, int64_t(0x7fffffff)));
    }
    j0 = max(max(max(pc.k0, slo), pi > pc.w ? pi - pc.w : 0u), att_chunk_lo(pi, slo));
    j1 = min(min(min(min(pc.n_valid, pc.k0 + pc.Tk), pi + pc.w + 1u), shi), att_chunk_hi(pi, slo));
}

#define FLAG_VEC 1u  // D, dk multiples of 4 and q, k, v, p 16-byte aligned: 16-byte loads of 4 f32
#define FLAG_VEC8 2u // D, dk multiples of 8 and q, k, v, p 16-byte aligned: 16-byte loads of 8 f16

// Element i of a tensor of the given type, as f32.
float att_load(uint64_t base, uint64_t i, bool h16) {
#ifdef F16_TYPES
    if (h16)
        return LOADH(base, i);
#endif
    return LOADF(base, i);
}

// y[i] = v in y's type (f16: rounded to nearest even by packHalf2x16 first, see round_to_f16).
void att_store_y(uint64_t i, float v) {
#ifdef F16_TYPES
    if (Y16) {
        STOREH(pc.y, i, round_to_f16(v));
        return;
    }
#endif
    STOREF(pc.y, i, v);
}
