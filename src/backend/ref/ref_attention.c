/* ref_attention.c — reference relative-position attention (ops.h op_relpos_attention; spec §5.1-5.2)
 * in double. With the op's f16 flag, q+u, q+v, k, p and v enter the products rounded to f16 as the
 * tensor-core kernels take them; the softmax weights stay exact. */
#include <math.h>
#include <stdlib.h>

#include "ref_internal.h"

/* x as the products take it: itself, or rounded to f16 in f16 mode. */
static double in(float x, bool f16) {
    return f16 ? (double)half_to_float(float_to_half(x)) : (double)x;
}

/* Element i of an f32 or f16 tensor. */
static float elem(const be_tensor *t, int64_t i) {
    return t->type == BE_F16 ? half_to_float(ref_u16(t)[i]) : ref_f32(t)[i];
}

/* y[i] = x in y's type (f16: rounded to nearest even, from the f32 value the kernels also round). */
static void put(const be_tensor *t, int64_t i, double x) {
    if (t->type == BE_F16)
        ref_u16(t)[i] = float_to_half((float)x);
    else
        ref_f32(t)[i] = (float)x;
}

vkasr_status ref_relpos_attention(struct backend *b, const struct op_relpos_attention *a) {
    int64_t Tq = a->q.ne[0], Tk = a->k.ne[0], D = a->q.ne[1], H = a->heads, dk = D / H, P = a->p.ne[0];
    int64_t center = (P - 1) / 2;
    const float *u = ref_f32(&a->bias_u), *bv = ref_f32(&a->bias_v);
    double *s = malloc((size_t)(Tk > 0 ? Tk : 1) * sizeof *s);
    if (!s)
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    double scale = 1.0 / sqrt((double)dk);
    for (int64_t h = 0; h < H; h++)
        for (int64_t li = 0; li < Tq; li++) {
            const int64_t i = a->q_pos.addr ? ref_i64(&a->q_pos)[li] : a->q_pos0 + li, yo = li * D + h * dk;
            if (i >= a->n_valid) {
                for (int64_t d = 0; d < dk; d++)
                    put(&a->y, yo + d, 0.0);
                continue;
            }
            int64_t s_lo = 0, s_hi = INT64_MAX; /* the query's segment */
            if (a->seg.addr) {
                const int64_t sg = ref_seg_find(&a->seg, i);
                s_lo = ref_i64(&a->seg)[sg];
                s_hi = ref_i64(&a->seg)[sg + 1];
            }
            int64_t c_lo = 0, c_hi = INT64_MAX; /* the chunked mask's keys */
            if (a->chunk > 0) {
                const int64_t base = a->seg.addr ? s_lo : 0, ci = (i - base) / a->chunk;
                c_lo = base + a->chunk * (ci > a->left_chunks ? ci - a->left_chunks : 0);
                c_hi = base + a->chunk * (ci + 1);
            }
            double mx = -INFINITY;
            for (int64_t lj = 0; lj < Tk; lj++) {
                const int64_t j = a->k_pos0 + lj, r = i - j;
                if (j >= a->n_valid || (a->window > 0 && llabs(r) > a->window) || j < s_lo || j >= s_hi ||
                    j < c_lo || j >= c_hi || center - r < 0 || center - r >= P) {
                    s[lj] = -INFINITY;
                    continue;
                }
                const int64_t qi = li * D + h * dk, kj = lj * D + h * dk, pr = (center - r) * D + h * dk;
                double ac = 0, bd = 0;
                for (int64_t d = 0; d < dk; d++) {
                    const float qd = elem(&a->q, qi + d);
                    ac += in(qd + u[h * dk + d], a->f16) * in(elem(&a->k, kj + d), a->f16);
                    bd += in(qd + bv[h * dk + d], a->f16) * in(elem(&a->p, pr + d), a->f16);
                }
                s[lj] = (ac + bd) * scale;
                mx = fmax(mx, s[lj]);
            }
            double sum = 0;
            if (mx == -INFINITY) { /* no key at all: only a bad segment table gets here */
                for (int64_t d = 0; d < dk; d++)
                    put(&a->y, yo + d, 0.0);
                continue;
            }
            for (int64_t lj = 0; lj < Tk; lj++) {
                s[lj] = isinf(s[lj]) ? 0.0 : exp(s[lj] - mx);
                sum += s[lj];
            }
            for (int64_t d = 0; d < dk; d++) {
                double acc = 0;
                for (int64_t lj = 0; lj < Tk; lj++)
                    acc += s[lj] * in(elem(&a->v, lj * D + h * dk + d), a->f16);
                put(&a->y, yo + d, acc / sum);
            }
        }
    free(s);
    return VKASR_OK;
}
