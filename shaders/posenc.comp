#version 460
// posenc.comp — rows of the relative positional encoding (ops.h, op_posenc): y [n, C] f32, row i for
// r = r0 - i, pair j: x = fl32(|r| * inv_freq[j]), y[i][2j] = sin(x) (negated for r < 0),
// y[i][2j+1] = cos(x). One invocation per pair, grid-stride.
// sin and cos are evaluated here rather than with GLSL's sin/cos, whose precision Vulkan leaves loose
// (2^-11 absolute, and only on [-pi, pi]): x (below 2^23) is reduced modulo pi/2 exactly in integer
// arithmetic, x * 2/pi = m 2^e * (2/pi) with 96 bits of 2/pi (Payne-Hanek), then sin and cos of the
// remainder in [-pi/4, pi/4] are Cephes' single-precision polynomials. Within 2 units of 2^-24 of the
// rounded exact values over |r| < 2^22 at C = 1024 (test_ops_eltwise bounds it by 4).
// push: inv_freq, y, n (rows), half (C/2), r0. spec 0: workgroup size.
#include "core.glsl"
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint64_t inv_freq, y, n, half_c;
    int64_t r0;
} pc;

// sin and cos of x >= 0, x < 2^23.
vec2 sincos_reduced(float x) {
    float a;
    uint q;
    if (x < 0.5) { // already inside [-pi/4, pi/4]
        a = x;
        q = 0u;
    } else {
        // x = m 2^e, e in [-24, -1]; P = m * floor(2^96 * 2/pi), 120 bits in two words; x * 2/pi is
        // P 2^(e-96): its integer part's low two bits are the quadrant, the 64 bits below the point
        // the remainder's fraction
        const uint bits = floatBitsToUint(x);
        const int e = int(bits >> 23) - 150;
        const uint64_t m = uint64_t((bits & 0x7fffffu) | 0x800000u);
        uint64_t t = m * 0xFC2757D1ul;
        const uint p0 = uint(t);
        t = m * 0x4E441529ul + (t >> 32);
        const uint p1 = uint(t);
        t = m * 0xA2F9836Eul + (t >> 32);
        const uint64_t lo = (uint64_t(p1) << 32) | uint64_t(p0), hi = t;
        const int s = 96 - e; // 97 .. 120
        const uint64_t f = (lo >> (s - 64)) | (hi << (128 - s));
        // a fraction of 1/2 or more is the next quadrant's negative remainder: f as a signed number
        q = uint(hi >> (s - 64)) + uint(f >> 63);
        a = ldexp(float(int64_t(f)), -64) * 1.57079632679489662;
    }
    const float z = a * a;
    const float sn = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * a + a;
    const float cs = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z -
                     0.5 * z + 1.0;
    switch (q & 3u) {
    case 0u: return vec2(sn, cs);
    case 1u: return vec2(cs, -sn);
    case 2u: return vec2(-sn, -cs);
    default: return vec2(-cs, sn);
    }
}

void main() {
    const uint64_t pairs = pc.n * pc.half_c;
    for (uint64_t i = grid_id_x(); i < pairs; i += grid_stride_x()) {
        const uint64_t row = i / pc.half_c, j = i - row * pc.half_c;
        const int64_t r = pc.r0 - int64_t(row);
        precise float x = float(r < 0 ? -r : r) * LOADF(pc.inv_freq, j); // the references' float32 product
        const vec2 sc = sincos_reduced(x);
        STOREF(pc.y, 2ul * i, r < 0 ? -sc.x : sc.x);
        STOREF(pc.y, 2ul * i + 1ul, sc.y);
    }
}
