/* batch.c — the layout of a packed batch: n inputs concatenated along time at every stage of the
 * network (samples, mel frames, the two inner subsampling stages, encoder frames), no padding. The
 * host computes the offsets for planning and tiling; the device gets the same from one offsets_scan
 * over the uploaded lengths (ops.h), which the ops then take as their segment tables. */
#include <stdlib.h>

#include "asr.h"

/* Totals stay below this: sums of two offsets never overflow, and the scan's 64-bit sums are exact. */
#define TOTAL_LIMIT ((int64_t)1 << 62)

/* An input's length at each stage (spec §1.4, §2.2): floor(samples / hop), then ceil(l / 2) per
 * stride-2 stage (causal subsampling: floor(l/2)+1); the same transform the scan applies (div = hop,
 * halvings = stage). */
static int64_t stage_len(const struct model_config *c, int64_t samples, enum asr_stage s) {
    if (s == ASR_SAMPLES)
        return samples;
    const int64_t l = samples / c->hop_length;
    const int h = (int)s - (int)ASR_MEL;
    if (c->causal_sub)
        return (l + ((int64_t)2 << h) - 2) >> h;
    return h ? (l >> h) + ((l & (((int64_t)1 << h) - 1)) != 0) : l;
}

void asr_batch_free(struct asr_batch *b) {
    free(b->off[0]);
    *b = (struct asr_batch){0};
}

vkasr_status asr_batch_layout(const struct model_config *c, const int64_t *samples, int64_t n, struct asr_batch *out,
                              struct err *e) {
    *out = (struct asr_batch){0};
    if (n < 1 || n > ((int64_t)1 << 30))
        return err_set(e, VKASR_ERR_INVALID_ARG, "a batch of %lld inputs: need 1 .. 2^30", (long long)n);
    if (c->sub_factor != 8 || c->hop_length < 1)
        return err_set(e, VKASR_ERR_UNSUPPORTED, "packed batches need x8 subsampling (model has %d)", c->sub_factor);
    int64_t *all = malloc((size_t)(n + 1) * ASR_STAGES * sizeof *all);
    if (!all)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory for the offsets of %lld inputs", (long long)n);
    out->n = n;
    for (int s = 0; s < ASR_STAGES; s++) {
        out->off[s] = all + (size_t)s * (size_t)(n + 1);
        out->off[s][0] = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        if (samples[i] < 0 || samples[i] >= TOTAL_LIMIT - out->off[ASR_SAMPLES][i]) {
            asr_batch_free(out);
            return err_set(e, VKASR_ERR_INVALID_ARG, "batch input %lld: %lld samples %s", (long long)i,
                           (long long)samples[i], samples[i] < 0 ? "(negative)" : "take the batch past 2^62 samples");
        }
        for (int s = 0; s < ASR_STAGES; s++) { /* every stage is at most as long as the samples */
            const int64_t l = stage_len(c, samples[i], (enum asr_stage)s);
            out->off[s][i + 1] = out->off[s][i] + l;
            if (l > out->max[s])
                out->max[s] = l;
        }
    }
    return VKASR_OK;
}

vkasr_status asr_batch_tensor(struct backend *be, const struct model_config *c, const struct asr_batch *b,
                              enum asr_stage s, be_tensor *out) {
    const int64_t width = s == ASR_MEL ? c->n_mels : c->d_model;
    return be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){asr_batch_total(b, s), width}, out);
}

vkasr_status asr_batch_upload(struct backend *be, const struct model_config *c, struct asr_batch *b, struct err *e) {
    be_tensor len;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I64, 1, (int64_t[]){b->n}, &len);
    for (int s = 0; s < ASR_STAGES && st == VKASR_OK; s++)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_I64, 1, (int64_t[]){b->n + 1}, &b->dev[s]);
    int64_t *samples = st == VKASR_OK ? malloc((size_t)b->n * sizeof *samples) : NULL;
    if (!samples && st == VKASR_OK)
        st = err_set(&be->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (int64_t i = 0; st == VKASR_OK && i < b->n; i++)
        samples[i] = asr_batch_len(b, ASR_SAMPLES, i);
    if (st == VKASR_OK)
        st = be_upload(be, len.addr, samples, (uint64_t)b->n * sizeof *samples);
    free(samples);
    // every stage's offsets in one launch: samples as they are; mel frames floor(samples / hop), halved
    // (rounding up, or floor(n/2)+1 for causal subsampling) once per subsampling stage
    struct op_offsets_scan scan = {.x = len, .nout = ASR_STAGES};
    for (int s = 0; s < ASR_STAGES; s++)
        scan.out[s] = (struct op_offsets_scan_out){.y = b->dev[s],
                                                   .div = s == ASR_SAMPLES ? 1u : (uint32_t)c->hop_length,
                                                   .halvings = s > ASR_MEL ? (uint32_t)(s - ASR_MEL) : 0u,
                                                   .stride = 1, .lead = true, .causal = c->causal_sub};
    if (st == VKASR_OK)
        st = be_offsets_scan(be, &scan);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "batch offsets: %s", be->err.msg);
    return st;
}
