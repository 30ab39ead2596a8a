/* quant_k.c — the k-quants Q4_K, Q5_K and Q6_K: 256-weight super-blocks with 6- or 8-bit sub-block
 * scales under one f16 scale (ggml-common.h's block_q4_K / block_q5_K / block_q6_K byte layouts). The
 * quantizer is round-to-nearest after ggml's reference scale search: each sub-block's scale (and min)
 * is the weighted least-squares fit over a small sweep of step sizes, then the scales are themselves
 * quantized and every weight is rounded to the nearest level its stored scales give. */
#include <math.h>
#include <string.h>

#include "common/half.h"
#include "quant.h"

#define GROUP_EPS 1e-15f

/* Round half to even (the default rounding mode), clamped so that huge ratios stay defined. */
static int nearest(float v) {
    return (int)lrintf(fminf(fmaxf(v, -4194303.0f), 4194303.0f));
}

static int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

static int row_ok(const float *x, int64_t k) {
    for (int64_t i = 0; i < k; i++)
        if (!(fabsf(x[i]) <= QUANT_MAX_ABS)) /* NaN fails too */
            return 0;
    return 1;
}

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

/* ---------------------------------------------------------------------------------------------- */
/* Q4_K and Q5_K: 8 sub-blocks of 32, x = d*sc*q - dmin*m, sc and m 6-bit, q 4- or 5-bit             */

/* Fits x[0..n) by scale*L + lo (lo <= 0, L in 0..nmax) minimising sum w*(err)^2: first the plain
 * min/max grid, then steps (nmax + rmin + rdelta*is)/(max - min) for is = 0..nstep, each with the
 * least-squares scale and offset of its levels; keeps the best. The candidates' levels are all taken
 * from the min/max grid's origin (ggml moves it to the best fit so far). Returns scale, *neg_lo = -lo. */
static float fit_asym(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_lo, float rmin,
                      float rdelta, int nstep) {
    float lo = x[0], hi = x[0], sw = 0.0f, swx = 0.0f;
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
        sw += w[i];
        swx += w[i] * x[i];
    }
    if (lo > 0.0f)
        lo = 0.0f;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_lo = -lo;
        return 0.0f;
    }
    float inv = (float)nmax / (hi - lo), scale = 1.0f / inv, best = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest(inv * (x[i] - lo)), 0, nmax);
        const float r = scale * L[i] + lo - x[i];
        best += w[i] * r * r;
    }
    const float lo0 = lo;
    uint8_t cand[32];
    for (int is = 0; is <= nstep; is++) {
        const float ic = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo0);
        float sl = 0.0f, sl2 = 0.0f, sxl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest(ic * (x[i] - lo0)), 0, nmax);
            cand[i] = (uint8_t)l;
            sl += w[i] * (float)l;
            sl2 += w[i] * (float)(l * l);
            sxl += w[i] * (float)l * x[i];
        }
        const float det = sw * sl2 - sl * sl;
        if (!(det > 0.0f))
            continue;
        float s = (sw * sxl - swx * sl) / det, m = (sl2 * swx - sl * sxl) / det;
        if (m > 0.0f) { /* the offset must not be positive: refit the scale alone */
            m = 0.0f;
            s = sxl / sl2;
        }
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            const float r = s * cand[i] + m - x[i];
            err += w[i] * r * r;
        }
        if (err < best) {
            memcpy(L, cand, (size_t)n);
            best = err;
            scale = s;
            lo = m;
        }
    }
    *neg_lo = -lo;
    return scale;
}

/* The 12 scale bytes: sub-blocks 0-3 keep scale and min in the low 6 bits of bytes j and j+4; 4-7
 * put their low 4 bits in byte j+4 (scale low nibble, min high nibble) and their top 2 bits in the
 * top bits of bytes j-4 (scale) and j (min). */
static void pack_sm(uint8_t *s, int j, int sc, int m) {
    if (j < 4) {
        s[j] |= (uint8_t)sc;
        s[j + 4] |= (uint8_t)m;
    } else {
        s[j + 4] = (uint8_t)((sc & 0xf) | (m & 0xf) << 4);
        s[j - 4] |= (uint8_t)((sc >> 4) << 6);
        s[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* One super-block of Q4_K (nmax 15) or Q5_K (nmax 31): fills the 4 bytes d, dmin, the 12 scale bytes
 * and the levels L. */
static void kx_block(const float *x, int nmax, float rmin, int nstep, uint8_t *head, uint8_t L[QK_K]) {
    float sc[8], mn[8], w[32], smax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float s2 = 0.0f;
        for (int i = 0; i < 32; i++)
            s2 += xs[i] * xs[i];
        const float rms = sqrtf(s2 / 32.0f);
        for (int i = 0; i < 32; i++)
            w[i] = rms + fabsf(xs[i]); /* larger weights matter more */
        sc[j] = fit_asym(32, nmax, xs, w, L + 32 * j, &mn[j], rmin, 0.1f, nstep);
        smax = fmaxf(smax, sc[j]);
        mmax = fmaxf(mmax, mn[j]);
    }
    const float is = smax > 0.0f ? 63.0f / smax : 0.0f, im = mmax > 0.0f ? 63.0f / mmax : 0.0f;
    uint8_t *s = head + 4;
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++)
        pack_sm(s, j, clampi(nearest(is * sc[j]), 0, 63), clampi(nearest(im * mn[j]), 0, 63));
    const uint16_t dh = float_to_half(smax / 63.0f), mh = float_to_half(mmax / 63.0f);
    put_u16(head, dh);
    put_u16(head + 2, mh);
    const float d = half_to_float(dh), dmin = half_to_float(mh);
    /* the levels again, now for the scales as stored */
    for (int j = 0; j < 8; j++) {
        int q, m;
        qblock_unpack_scale_min(s, j, &q, &m);
        const float ds = d * (float)q, dm = dmin * (float)m;
        if (ds == 0.0f)
            continue;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)clampi(nearest((x[32 * j + i] + dm) / ds), 0, nmax);
    }
}

/* Q4_K block (144 bytes): d, dmin (f16), scales[12], qs[128]; in each 64-weight group, byte l holds
 * weight l (low nibble) and weight l + 32 (high nibble). */
int quant_row_q4_k(const float *x, uint8_t *dst, int64_t k) {
    if (!row_ok(x, k))
        return -1;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K, dst += 144) {
        kx_block(x, 15, -1.0f, 20, dst, L);
        uint8_t *q = dst + 16;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
    return 0;
}


/* Q5_K block (176 bytes): d, dmin, scales[12], qh[32], qs[128]: the Q4_K nibbles plus a fifth bit per
 * weight; for 64-weight group g, bit 2g of qh[l] belongs to weight l and bit 2g+1 to weight l + 32. */
int quant_row_q5_k(const float *x, uint8_t *dst, int64_t k) {
    if (!row_ok(x, k))
        return -1;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K, dst += 176) {
        kx_block(x, 31, -0.5f, 15, dst, L);
        uint8_t *qh = dst + 16, *ql = dst + 48;
        memset(qh, 0, 32);
        for (int g = 0; g < 4; g++, ql += 32)
            for (int l = 0; l < 32; l++) {
                const int a = L[64 * g + l], c = L[64 * g + l + 32];
                qh[l] |= (uint8_t)((a >> 4) << (2 * g) | (c >> 4) << (2 * g + 1));
                ql[l] = (uint8_t)((a & 0xf) | (c & 0xf) << 4);
            }
    }
    return 0;
}


/* ---------------------------------------------------------------------------------------------- */
/* Q6_K: 16 sub-blocks of 16, x = d*sc*(q - 32), sc int8, q 6-bit                                 */

/* Fits x[0..n) by scale*(L - nmax) with L - nmax in [-nmax, nmax - 1], weights x^2: the step that maps
 * the largest magnitude to -nmax, then 18 nearby steps, keeping the best least-squares fit. */
static float fit_sym(int n, int nmax, const float *x, uint8_t *L) {
    float amax = 0.0f, vmax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            vmax = x[i];
        }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float slx = 0.0f, sl2 = 0.0f;
    float inv = -(float)nmax / vmax;
    for (int i = 0; i < n; i++) {
        const int l = clampi(nearest(inv * x[i]), -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        const float w = x[i] * x[i];
        slx += w * x[i] * (float)l;
        sl2 += w * (float)(l * l);
    }
    float scale = sl2 != 0.0f ? slx / sl2 : 0.0f, best = scale * slx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        inv = -((float)nmax + 0.1f * (float)is) / vmax;
        slx = sl2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest(inv * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            slx += w * x[i] * (float)l;
            sl2 += w * (float)(l * l);
        }
        if (sl2 > 0.0f && slx * slx > best * sl2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(clampi(nearest(inv * x[i]), -nmax, nmax - 1) + nmax);
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    return scale;
}

/* Q6_K block (210 bytes): ql[128], qh[64], scales[16] (int8), d (f16). Per 128-weight half: ql byte
 * l holds weights l (low) and l + 64 (high), byte l + 32 weights l + 32 and l + 96; qh byte l holds
 * the top 2 bits of weights l, l + 32, l + 64, l + 96 at bits 0, 2, 4, 6. */
int quant_row_q6_k(const float *x, uint8_t *dst, int64_t k) {
    if (!row_ok(x, k))
        return -1;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K, dst += 210) {
        float sc[16], smax = 0.0f, sabs = 0.0f;
        for (int j = 0; j < 16; j++) {
            sc[j] = fit_sym(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(sc[j]) > sabs) {
                sabs = fabsf(sc[j]);
                smax = sc[j];
            }
        }
        memset(dst, 0, 210);
        if (sabs < GROUP_EPS)
            continue; /* all zero: d = 0 */
        const float inv = -128.0f / smax;
        const uint16_t dh = float_to_half(1.0f / inv);
        put_u16(dst + 208, dh);
        const float d = half_to_float(dh);
        int8_t *scales = (int8_t *)(dst + 192);
        for (int j = 0; j < 16; j++)
            scales[j] = (int8_t)clampi(nearest(inv * sc[j]), -128, 127);
        for (int j = 0; j < 16; j++) {
            const float ds = d * (float)scales[j];
            if (ds == 0.0f)
                continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (uint8_t)(clampi(nearest(x[16 * j + i] / ds), -32, 31) + 32);
        }
        uint8_t *ql = dst, *qh = dst + 128;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32) {
            const uint8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xf) | (Lh[l + 64] & 0xf) << 4);
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xf) | (Lh[l + 96] & 0xf) << 4);
                qh[l] = (uint8_t)(Lh[l] >> 4 | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 |
                                  (Lh[l + 96] >> 4) << 6);
            }
        }
    }
    return 0;
}

