/* half.c — binary16 and bfloat16 conversions used by loaders, the converter and the reference. */
#include "half.h"

float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f)
        return float_from_bits(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (man == 0)
            return float_from_bits(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return float_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

void half_to_float_row(const uint16_t *h, float *out, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        /* the magnitude's bits in a float's place, times 2^112: the exponent rebiased, a subnormal half
         * scaled exactly; infinities and NaNs set apart; then the sign */
        const uint32_t em = h[i] & 0x7fffu;
        const float v = float_from_bits(em << 13) * 0x1p112f;
        const uint32_t bits = em >= 0x7c00u ? 0x7f800000u | ((em & 0x3ffu) << 13) : float_bits(v);
        out[i] = float_from_bits(bits | (uint32_t)(h[i] & 0x8000u) << 16);
    }
}

uint16_t float_to_half(float f) {
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or nan (keep nan quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    if (a >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (a < 0x33000000u) /* < 2^-25: rounds to zero */
            return (uint16_t)sign;
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14 .. 24 */
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((a - 0x38000000u) >> 13);
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

void float_to_half_row(const float *f, uint16_t *out, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t u = float_bits(f[i]), a = u & 0x7fffffffu;
        /* a normal half: the exponent rebiased (-112 << 23) and the 13 dropped bits rounded to nearest even,
         * by adding just under half a unit plus the kept part's lowest bit (a carry into the exponent is
         * right, up to infinity from 65520 on) */
        const uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
        /* below 2^-14: a subnormal half, rounded by the FPU: adding 0.5 leaves x * 2^24 rounded to an
         * integer in the low mantissa bits (2^-24 is the ulp of 0.5) */
        const uint32_t subnormal = float_bits(float_from_bits(a) + 0.5f) - 0x3f000000u;
        /* 2^16 and above: infinity; NaN stays a quiet NaN */
        const uint32_t big = 0x7c00u | (uint32_t)(a > 0x7f800000u) << 9;
        /* chosen by masks rather than branches, so that the loop vectorises */
        const uint32_t is_big = 0u - (uint32_t)(a >= 0x47800000u), is_sub = 0u - (uint32_t)(a < 0x38800000u);
        const uint32_t h = (big & is_big) | (subnormal & is_sub & ~is_big) | (normal & ~(is_sub | is_big));
        out[i] = (uint16_t)(h | ((u >> 16) & 0x8000u));
    }
}

float bf16_to_float(uint16_t h) { return float_from_bits((uint32_t)h << 16); }
