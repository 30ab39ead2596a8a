/* ref_eltwise.c — reference element-wise and layout ops: unary, binary, glu, pad, permute; and posenc,
 * the positional encoding's rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

double ref_act(double x, int act) {
    switch (act) {
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_SILU: return x / (1.0 + exp(-x));
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_LOG_GUARD: return log(x + 5.9604644775390625e-08);
    default: return x;
    }
}

vkasr_status ref_unary(struct backend *b, const struct op_unary *a) {
    const float *x = ref_f32(&a->x);
    float *y = ref_f32(&a->y);
    uint64_t n = be_numel(&a->x);
    for (uint64_t i = 0; i < n; i++)
        y[i] = (float)ref_act((double)a->alpha * x[i], a->act);
    return VKASR_OK;
}

vkasr_status ref_binary(struct backend *b, const struct op_binary *a) {
    const float *x = ref_f32(&a->a), *z = ref_f32(&a->b);
    float *y = ref_f32(&a->y);
    uint64_t n = be_numel(&a->a), nb = be_numel(&a->b);
    for (uint64_t i = 0; i < n; i++) {
        double u = x[i], v = z[i % nb];
        double r = a->kind == BINARY_ADD ? (double)a->alpha * u + (double)a->beta * v : (double)a->alpha * u * v;
        y[i] = (float)ref_act(r, a->act);
    }
    return VKASR_OK;
}

vkasr_status ref_glu(struct backend *b, const struct op_glu *a) {
    int64_t R = a->y.ne[0], C = a->y.ne[1];
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            double v = ref_get(&a->x, (uint64_t)(r * 2 * C + c)), g = ref_get(&a->x, (uint64_t)(r * 2 * C + C + c));
            ref_put(&a->y, (uint64_t)(r * C + c), v / (1.0 + exp(-g)));
        }
    return VKASR_OK;
}

/* Row-major strides of a shape, in elements. */
static void strides_of(const be_tensor *t, int64_t *st) {
    int64_t s = 1;
    for (int d = t->nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= t->ne[d];
    }
}

static void put(const be_tensor *t, uint64_t i, const void *src) {
    size_t es = be_dtype_size(t->type);
    memcpy((char *)(uintptr_t)t->addr + i * es, src, es);
}

vkasr_status ref_pad(struct backend *b, const struct op_pad *a) {
    int nd = a->y.nd;
    int64_t ys[BE_MAX_DIMS], xs[BE_MAX_DIMS];
    strides_of(&a->y, ys);
    strides_of(&a->x, xs);
    uint64_t n = be_numel(&a->y);
    size_t es = be_dtype_size(a->y.type);
    unsigned char fill[4];
    if (a->y.type == BE_F32)
        memcpy(fill, &a->value, 4);
    else if (a->y.type == BE_F16) {
        uint16_t h = float_to_half(a->value);
        memcpy(fill, &h, 2);
    } else {
        int32_t v = (int32_t)a->value;
        memcpy(fill, &v, 4);
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t rem = i, xi = 0;
        bool inside = true;
        for (int d = 0; d < nd; d++) {
            int64_t c = (int64_t)(rem / (uint64_t)ys[d]);
            rem %= (uint64_t)ys[d];
            int64_t xc = c - a->before[d];
            if (xc < 0 || xc >= a->x.ne[d])
                inside = false;
            else
                xi += (uint64_t)xc * (uint64_t)xs[d];
        }
        if (inside)
            put(&a->y, i, (const char *)(uintptr_t)a->x.addr + xi * es);
        else
            put(&a->y, i, fill);
    }
    return VKASR_OK;
}

vkasr_status ref_permute(struct backend *b, const struct op_permute *a) {
    int nd = a->y.nd;
    int64_t ys[BE_MAX_DIMS], xs[BE_MAX_DIMS];
    strides_of(&a->y, ys);
    strides_of(&a->x, xs);
    uint64_t n = be_numel(&a->y);
    size_t es = be_dtype_size(a->y.type);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t rem = i, xi = 0;
        for (int d = 0; d < nd; d++) {
            uint64_t c = rem / (uint64_t)ys[d];
            rem %= (uint64_t)ys[d];
            xi += c * (uint64_t)xs[a->perm[d]];
        }
        put(&a->y, i, (const char *)(uintptr_t)a->x.addr + xi * es);
    }
    return VKASR_OK;
}

vkasr_status ref_copy_rows(struct backend *b, const struct op_copy_rows *a) {
    (void)b;
    const size_t row = (size_t)a->x.ne[1] * be_dtype_size(a->x.type);
    const int64_t *src = a->src.addr ? ref_i64(&a->src) : NULL, *dst = a->dst.addr ? ref_i64(&a->dst) : NULL;
    for (int64_t r = 0; r < a->n; r++) {
        const int64_t s = src ? src[r] : r, d = dst ? dst[r] : r;
        if (s < 0 || d < 0 || s >= a->x.ne[0] || d >= a->y.ne[0])
            continue;
        memmove((char *)(uintptr_t)a->y.addr + (size_t)d * row, (const char *)(uintptr_t)a->x.addr + (size_t)s * row,
                row);
    }
    return VKASR_OK;
}

/* sin and cos of the float argument in double, rounded once (PE(-r) = (-sin, cos): fl32 rounding is
 * symmetric). */
vkasr_status ref_posenc(struct backend *b, const struct op_posenc *a) {
    const float *w = ref_f32(&a->inv_freq);
    float *y = ref_f32(&a->y);
    const int64_t n = a->y.ne[0], C = a->y.ne[1];
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = a->r0 - i;
        const float ar = (float)llabs(r);
        for (int64_t j = 0; j < C / 2; j++) {
            const float x = ar * w[j];
            const double s = sin((double)x);
            y[i * C + 2 * j] = (float)(r < 0 ? -s : s);
            y[i * C + 2 * j + 1] = (float)cos((double)x);
        }
    }
    return VKASR_OK;
}
