/* half.h — IEEE 754 binary16 <-> binary32 conversion (round to nearest even), and bfloat16. */
#ifndef VKASR_HALF_H
#define VKASR_HALF_H

#include <stdint.h>

float half_to_float(uint16_t h);
/* out[i] = half_to_float(h[i]) for n values, branch-free (vectorised: loading a model). */
void half_to_float_row(const uint16_t *h, float *out, uint64_t n);
uint16_t float_to_half(float f);
/* out[i] = float_to_half(f[i]) for n values, branch-free (vectorised: an f16 session loading f32 matrices);
 * relies on the default rounding mode (to nearest even) without flushing subnormals. */
void float_to_half_row(const float *f, uint16_t *out, uint64_t n);
float bf16_to_float(uint16_t h);

#endif
