/* posenc.c — the relative positional encoding (spec §3.2-3.3): PE(r)[2j] = sin(r w_j),
 * PE(r)[2j+1] = cos(r w_j), generated a block of rows at a time (rows r = r_hi down). Like both
 * reference implementations, w_j and the argument r*w_j are rounded to float32; sin/cos of that
 * argument are evaluated in double by angle addition from small tables plus a correction for the
 * argument's rounding (sin/cos of the rounding error to third order), so three hours of audio
 * (2T-1 = 270,000 rows) cost a fraction of a second. The tables are cached per session for the
 * largest |r| seen; the rows themselves are never kept. */
#include <math.h>
#include <stdlib.h>

#include "asr.h"

#define POS_BLOCK 256

void asr_cache_free(struct asr_cache *c) {
    free(c->w);
    free(c->hs);
    free(c->ls);
    *c = (struct asr_cache){0};
}

/* Tables for |r| <= rmax: w_j, sin/cos of multiples of POS_BLOCK (hs, hc) and of 0..POS_BLOCK-1 (ls, lc). */
static vkasr_status build(struct asr_cache *c, int64_t rmax, int D, struct err *e) {
    const int64_t half = D / 2, nhi = rmax / POS_BLOCK + 1;
    double *w = malloc((size_t)half * sizeof *w);
    double *hs = malloc((size_t)(nhi * half) * 2 * sizeof *hs), *hc = hs ? hs + nhi * half : NULL;
    double *ls = malloc((size_t)(POS_BLOCK * half) * 2 * sizeof *ls), *lc = ls ? ls + POS_BLOCK * half : NULL;
    if (!w || !hs || !ls) {
        free(w);
        free(hs);
        free(ls);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory for positional tables up to %lld", (long long)rmax);
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
    asr_cache_free(c);
    *c = (struct asr_cache){.D = D, .rmax = nhi * POS_BLOCK - 1, .w = w, .hs = hs, .hc = hc, .ls = ls, .lc = lc};
    return VKASR_OK;
}

vkasr_status asr_posenc_rows(struct asr_cache *c, int D, int64_t r_hi, int64_t count, float *out, struct err *e) {
    if (count <= 0)
        return VKASR_OK;
    const int64_t r_lo = r_hi - count + 1, need = llabs(r_hi) > llabs(r_lo) ? llabs(r_hi) : llabs(r_lo);
    if (c->D != D || need > c->rmax)
        TRY(build(c, need, D, e));
    const int64_t half = D / 2;
    for (int64_t i = 0; i < count; i++) {
        const int64_t r = r_hi - i, ar = llabs(r), a = ar / POS_BLOCK, b = ar % POS_BLOCK;
        float *row = out + i * D;
        for (int64_t j = 0; j < half; j++) {
            double s = c->hs[a * half + j] * c->lc[b * half + j] + c->hc[a * half + j] * c->ls[b * half + j];
            double co = c->hc[a * half + j] * c->lc[b * half + j] - c->hs[a * half + j] * c->ls[b * half + j];
            /* the references evaluate sin(fl32(|r|*w)); |r|*w is exact in double */
            double exact = (double)ar * c->w[j];
            double delta = (double)(float)exact - exact; /* |delta| <= ulp/2: 0.002 at r = 50000 */
            double sdel = delta - delta * delta * delta / 6.0, cdel = 1.0 - delta * delta / 2.0;
            double sd = s * cdel + co * sdel, cd = co * cdel - s * sdel;
            /* fl32 rounding is symmetric: PE(-r) = (-sin, cos) */
            row[2 * j] = r < 0 ? (float)-sd : (float)sd;
            row[2 * j + 1] = (float)cd;
        }
    }
    return VKASR_OK;
}
