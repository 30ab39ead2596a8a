/* ref_internal.h — declarations shared by the reference backend's files. */
#ifndef VKASR_REF_INTERNAL_H
#define VKASR_REF_INTERNAL_H

#include <pthread.h>
#include <stdio.h>

#include "../backend.h"
#include "common/half.h"

#define X(name) vkasr_status ref_##name(struct backend *b, const struct op_##name *a);
VKASR_OPS(X)
#undef X

/* Host views of tensors. */
static inline float *ref_f32(const be_tensor *t) { return (float *)(uintptr_t)t->addr; }
static inline int32_t *ref_i32(const be_tensor *t) { return (int32_t *)(uintptr_t)t->addr; }
static inline uint16_t *ref_u16(const be_tensor *t) { return (uint16_t *)(uintptr_t)t->addr; }


/* Element k of a weight tensor in F32 or F16, widened to double. */
static inline double ref_weight(const be_tensor *w, uint64_t k) {
    return w->type == BE_F16 ? (double)half_to_float(ref_u16(w)[k]) : (double)ref_f32(w)[k];
}

/* Element i of an F32 or F16 tensor, widened to double. */
static inline double ref_get(const be_tensor *t, uint64_t i) {
    return t->type == BE_F16 ? (double)half_to_float(ref_u16(t)[i]) : (double)ref_f32(t)[i];
}

/* Stores v into element i of an F32 or F16 tensor as the devices do: the f32 value (the device's
 * arithmetic), rounded once to the nearest F16 (ties to even) for an F16 tensor. */
static inline void ref_put(const be_tensor *t, uint64_t i, double v) {
    if (t->type == BE_F16)
        ref_u16(t)[i] = float_to_half((float)v);
    else
        ref_f32(t)[i] = (float)v;
}

double ref_act(double x, int act);

#endif
