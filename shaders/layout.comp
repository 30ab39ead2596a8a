#version 460
// layout.comp — bit-exact data movement of 2- or 4-byte elements (f32, i32, f16 alike): constant pad
// (compiled with -DPAD) and permute (-DPERMUTE). Tensors have up to 4 dims, padded with leading 1s.
//
// Each invocation owns whole 32-bit words of y: one element when esize == 4, two when esize == 2. For
// 16-bit elements this avoids 16-bit stores (storageBuffer16BitAccess is optional and only enabled
// with f16 arithmetic) and never lets two invocations race on the halves of one word. A tensor may
// start or end in the middle of a word (an f16 row of odd width): the neighbour's half belongs to
// someone else, so those boundary words are updated with atomicAnd/atomicOr on our half only.
//
// The coordinates of the current element are carried along the grid-stride loop as mixed-radix
// digits (add with carry): 64-bit divisions happen once per invocation, not per element. What depends
// only on the outer three coordinates (is the row inside x, where does it start in x) is recomputed
// only when they change, so a long innermost dimension costs a few 64-bit adds per element.
// push: see PC. spec 0: workgroup size.
#include "core.glsl"
layout(local_size_x_id = 0) in;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32Ref { uint v; };

#if defined(PAD)
layout(push_constant) uniform PC {
    uint64_t x, y;
    uint64_t yne[4];    // shape of y, outermost first
    uint64_t xne[4];    // shape of x
    uint64_t before[4]; // offset of x inside y
    uint value;         // fill bit pattern: f32 bits, i32, or f16 bits in the low half
    uint esize;         // element size in bytes: 2 or 4
} pc;
#elif defined(PERMUTE)
layout(push_constant) uniform PC {
    uint64_t x, y;
    uint64_t yne[4];    // shape of y, outermost first
    uint64_t xst[4];    // element stride in x of y's dimension d (x's stride of dimension perm[d])
    uint esize;
    uint unused;
} pc;
#else
#error define PAD or PERMUTE
#endif

// Coordinates of flat index i in y's shape. The outermost digit is not reduced (i may be a stride
// beyond numel).
u64vec4 digits_of(uint64_t i) {
    u64vec4 c;
    c.w = i % pc.yne[3];
    i /= pc.yne[3];
    c.z = i % pc.yne[2];
    i /= pc.yne[2];
    c.y = i % pc.yne[1];
    c.x = i / pc.yne[1];
    return c;
}

// Adds s to the outer digits of c plus a carry k out of the innermost digit (digits below radix).
u64vec4 advance_row(u64vec4 c, u64vec4 s, uint64_t k) {
    c.z += s.z + k;
    k = c.z >= pc.yne[2] ? 1ul : 0ul;
    c.z -= k * pc.yne[2];
    c.y += s.y + k;
    k = c.y >= pc.yne[1] ? 1ul : 0ul;
    c.y -= k * pc.yne[1];
    c.x += s.x + k;
    return c;
}

// c - 1 (c is not the origin).
u64vec4 decrement(u64vec4 c) {
    if (c.w > 0ul) {
        c.w -= 1ul;
    } else {
        c.w = pc.yne[3] - 1ul;
        if (c.z > 0ul) {
            c.z -= 1ul;
        } else {
            c.z = pc.yne[2] - 1ul;
            if (c.y > 0ul) {
                c.y -= 1ul;
            } else {
                c.y = pc.yne[1] - 1ul;
                c.x -= 1ul;
            }
        }
    }
    return c;
}

// What a row of y (outer coordinates c.xyz) needs: whether it lies inside x, and the x element its
// innermost coordinate is added to.
struct Row {
    bool in_x;
    uint64_t base;
};

Row row_of(u64vec4 c) {
    Row r;
#if defined(PAD)
    r.in_x = c.x >= pc.before[0] && c.x - pc.before[0] < pc.xne[0] && c.y >= pc.before[1] &&
             c.y - pc.before[1] < pc.xne[1] && c.z >= pc.before[2] && c.z - pc.before[2] < pc.xne[2];
    r.base = r.in_x ? (((c.x - pc.before[0]) * pc.xne[1] + (c.y - pc.before[1])) * pc.xne[2] + (c.z - pc.before[2])) *
                          pc.xne[3]
                    : 0ul;
#else
    r.in_x = true;
    r.base = c.x * pc.xst[0] + c.y * pc.xst[1] + c.z * pc.xst[2];
#endif
    return r;
}

// Bits of element xi of x (a 16-bit element comes back in the low half).
uint load_elem(uint64_t xi, bool two) {
    if (!two)
        return U32Ref(pc.x + xi * 4ul).v;
    // The aligned word holding the element lies inside the allocation (allocations are 4-aligned).
    uint64_t a = pc.x + xi * 2ul;
    uint w = U32Ref(a & ~3ul).v;
    return (a & 2ul) != 0ul ? w >> 16 : w & 0xffffu;
}

// Bits of y at innermost coordinate w of row r.
uint value_at(Row r, uint64_t w, bool two) {
#if defined(PAD)
    if (!r.in_x || w < pc.before[3] || w - pc.before[3] >= pc.xne[3])
        return pc.value;
    return load_elem(r.base + (w - pc.before[3]), two);
#else
    return load_elem(r.base + w * pc.xst[3], two);
#endif
}

void main() {
    uint64_t n = pc.yne[0] * pc.yne[1] * pc.yne[2] * pc.yne[3], inner = pc.yne[3];
    uint64_t stride = grid_stride_x();
    bool two = pc.esize == 2u;
    // Unit u: element u (4-byte types), or aligned word u of y (2-byte types), holding elements
    // 2u - off (low half) and 2u + 1 - off (high half); off = 1 when y starts mid-word.
    uint64_t off = two ? (pc.y >> 1) & 1ul : 0ul;
    uint64_t units = two ? (n + off + 1ul) / 2ul : n;
    uint64_t epu = two ? 2ul : 1ul; // elements per unit
    uint64_t u = grid_id_x();
    if (u >= units)
        return;
    uint64_t e = epu * u + epu - 1ul - off; // tracked element: the unit's last (== n in a half-used last word)
    u64vec4 c = digits_of(e), s = digits_of(epu * stride);
    bool row_step = (s.x | s.y | s.z) != 0ul;
    Row row = row_of(c);
    for (; u < units; u += stride, e += epu * stride) {
        if (!two) {
            U32Ref(pc.y + u * 4ul).v = value_at(row, c.w, false);
        } else {
            bool hi_ok = e < n;
            bool lo_ok = e >= 1ul; // e <= n, so the low element is always < n
            uint hi = hi_ok ? value_at(row, c.w, true) : 0u;
            uint lo = 0u;
            if (lo_ok) {
                if (c.w > 0ul) {
                    lo = value_at(row, c.w - 1ul, true);
                } else {
                    u64vec4 p = decrement(c);
                    lo = value_at(row_of(p), p.w, true);
                }
            }
            U32Ref p = U32Ref(pc.y - 2ul * off + u * 4ul);
            if (hi_ok && lo_ok) {
                p.v = (lo & 0xffffu) | (hi << 16);
            } else if (lo_ok) {
                atomicAnd(p.v, 0xffff0000u);
                atomicOr(p.v, lo & 0xffffu);
            } else {
                atomicAnd(p.v, 0x0000ffffu);
                atomicOr(p.v, hi << 16);
            }
        }
        c.w += s.w;
        uint64_t k = c.w >= inner ? 1ul : 0ul;
        c.w -= k * inner;
        if (row_step || k != 0ul) {
            c = advance_row(c, s, k);
            row = row_of(c);
        }
    }
}
