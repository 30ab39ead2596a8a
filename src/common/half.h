/* half.h — IEEE 754 binary16 <-> binary32 conversion (round to nearest even), and bfloat16. */
#ifndef VKASR_HALF_H
#define VKASR_HALF_H

#include <stdint.h>
#include <string.h>

/* A float's bits and back (the conversions below, and tests that build or compare values bit by bit). */
static inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float float_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float half_to_float(uint16_t h);
/* out[i] = half_to_float(h[i]) for n values, branch-free (vectorised: loading a model). */
void half_to_float_row(const uint16_t *h, float *out, uint64_t n);
uint16_t float_to_half(float f);
/* out[i] = float_to_half(f[i]) for n values, branch-free (vectorised: an f16 session loading f32 matrices);
 * relies on the default rounding mode (to nearest even) without flushing subnormals. */
void float_to_half_row(const float *f, uint16_t *out, uint64_t n);
float bf16_to_float(uint16_t h);

#endif
