/* posenc.c — the relative positional table (spec §3.2-3.3): PE(r)[2j] = sin(r w_j),
 * PE(r)[2j+1] = cos(r w_j), rows ordered r = T-1 down to -(T-1). Like both reference implementations,
 * w_j and the argument r*w_j are rounded to float32; sin/cos of that argument are evaluated in double
 * by angle addition from small tables plus a correction for the argument's rounding (sin/cos of
 * the rounding error to third order), so
 * an hour of audio (T = 45000) costs tens of milliseconds. The table is cached per session for the
 * largest T seen: any smaller T is a contiguous slice of it. */
#include <math.h>
#include <stdlib.h>

#include "asr.h"

#define POS_BLOCK 256

void asr_cache_free(struct asr_cache *c) {
    free(c->pos_host);
    c->pos_host = NULL;
    c->pos_tmax = 0;
}

static vkasr_status build(struct asr_cache *c, int64_t tmax, int D, struct err *e) {
    const int64_t rows = 2 * tmax - 1, half = D / 2, nhi = (tmax - 1) / POS_BLOCK + 1;
    float *tab = malloc((size_t)rows * (size_t)D * sizeof *tab);
    double *w = malloc((size_t)half * sizeof *w);
    double *hs = malloc((size_t)(nhi * half) * 2 * sizeof *hs), *hc = hs ? hs + nhi * half : NULL;
    double *ls = malloc((size_t)(POS_BLOCK * half) * 2 * sizeof *ls), *lc = ls ? ls + POS_BLOCK * half : NULL;
    if (!tab || !w || !hs || !ls) {
        free(tab);
        free(w);
        free(hs);
        free(ls);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory for a positional table of %lld rows",
                       (long long)rows);
    }
    for (int64_t j = 0; j < half; j++) {
        /* transformers: inv_freq = 1 / (10000 ** (arange(0, D, 2) / D)) in float32 */
        float wf = 1.0f / powf(10000.0f, (float)(2 * j) / (float)D);
        w[j] = wf;
        for (int64_t a = 0; a < nhi; a++) {
            hs[a * half + j] = sin((double)(a * POS_BLOCK) * w[j]);
            hc[a * half + j] = cos((double)(a * POS_BLOCK) * w[j]);
        }
        for (int64_t b = 0; b < POS_BLOCK; b++) {
            ls[b * half + j] = sin((double)b * w[j]);
            lc[b * half + j] = cos((double)b * w[j]);
        }
    }
    for (int64_t r = 0; r < tmax; r++) {
        float *pos = tab + (tmax - 1 - r) * D; /* row of +r */
        float *neg = tab + (tmax - 1 + r) * D; /* row of -r */
        const int64_t a = r / POS_BLOCK, b = r % POS_BLOCK;
        for (int64_t j = 0; j < half; j++) {
            double s = hs[a * half + j] * lc[b * half + j] + hc[a * half + j] * ls[b * half + j];
            double co = hc[a * half + j] * lc[b * half + j] - hs[a * half + j] * ls[b * half + j];
            /* the references evaluate sin(fl32(r*w)); r*w is exact in double */
            double exact = (double)r * w[j];
            double delta = (double)(float)exact - exact; /* |delta| <= ulp/2: 0.002 at r = 50000 */
            double sdel = delta - delta * delta * delta / 6.0, cdel = 1.0 - delta * delta / 2.0;
            double sd = s * cdel + co * sdel, cd = co * cdel - s * sdel;
            pos[2 * j] = (float)sd;
            pos[2 * j + 1] = (float)cd;
            neg[2 * j] = (float)-sd; /* fl32 rounding is symmetric: PE(-r) = (-sin, cos) */
            neg[2 * j + 1] = (float)cd;
        }
    }
    free(w);
    free(hs);
    free(ls);
    free(c->pos_host);
    c->pos_host = tab;
    c->pos_tmax = tmax;
    return VKASR_OK;
}

vkasr_status asr_posenc_table(struct asr_cache *c, int64_t T, int D, const float **rows, struct err *e) {
    if (T > c->pos_tmax)
        TRY(build(c, T, D, e));
    *rows = c->pos_host + (c->pos_tmax - T) * D;
    return VKASR_OK;
}
