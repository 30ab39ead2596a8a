/* ref_internal.h — declarations shared by the reference backend's files. */
#ifndef VKASR_REF_INTERNAL_H
#define VKASR_REF_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../backend.h"
#include "common/half.h"

#define X(name) vkasr_status ref_##name(struct backend *b, const struct op_##name *a);
VKASR_OPS(X)
#undef X

/* The host-memory device: tensors are host pointers in blocks from aligned_alloc, counted against
 * VKASR_MAX_DEVICE_MEMORY_MIB where it is set. The CPU backend (cpu/) builds its device on it too. */
struct ref_device {
    struct be_device base;
    atomic_uint_fast64_t allocated; /* bytes of every arena's blocks (weights, all backends' scratch) */
    uint64_t budget;                /* VKASR_MAX_DEVICE_MEMORY_MIB, else UINT64_MAX                   */
};
/* Sets up d's weights arena, budget and the host fields of its info (cpu, host, limits). */
void ref_host_device_init(struct ref_device *d, const struct be_device_options *opt);
void ref_host_memory(const struct be_device *bd, struct be_memory *out);
vkasr_status ref_host_upload(struct backend *bb, uint64_t dst, const void *src, uint64_t bytes);
vkasr_status ref_host_download(struct backend *bb, void *dst, uint64_t src, uint64_t bytes);

/* Host views of tensors. */
static inline float *ref_f32(const be_tensor *t) { return (float *)(uintptr_t)t->addr; }
static inline int32_t *ref_i32(const be_tensor *t) { return (int32_t *)(uintptr_t)t->addr; }
static inline uint16_t *ref_u16(const be_tensor *t) { return (uint16_t *)(uintptr_t)t->addr; }
static inline int64_t *ref_i64(const be_tensor *t) { return (int64_t *)(uintptr_t)t->addr; }

/* The segment of a packed batch holding position pos: the last s of 0 .. S-1 whose start seg[s] is at
 * most pos (seg [S+1]: starts with a leading 0, the total last; empty segments are skipped). */
static inline int64_t ref_seg_find(const be_tensor *seg, int64_t pos) {
    const int64_t *o = ref_i64(seg), S = seg->ne[0] - 1;
    int64_t lo = 0, hi = S - 1; /* invariant: the answer lies in [lo, hi] */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (o[mid] <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}


/* The radix-2 FFT's input permutation (bit-reversed order) of n = 2^k complex values, in place. */
void ref_fft_bit_reverse(double *re, double *im, int n);

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
