/* frontend.c — the mel front end on the backend (spec §1): pre-emphasised centred power spectra,
 * the Slaney filterbank as a matrix product with the log fused, then per-bin normalisation over the
 * valid frames. Spectra are computed in tiles of frames, each from a block of samples uploaded for
 * it, so device memory beyond the features themselves is bounded for any input length; each tile
 * counts as work between abort polls (steps.c). */
#include "asr.h"

/* Frames before a tile's first frame whose samples its block must start at: the first frame reads
 * samples from hop*f0 - n_fft/2, pre-emphasis one more (blocks start on a hop boundary). */
static int64_t lead_frames(const struct model_config *c) { return (c->n_fft / 2 + 1 + c->hop_length - 1) / c->hop_length; }

/* Samples of the block behind a tile of F frames (at most; never more than the input). */
static int64_t block_samples(const struct model_config *c, int64_t samples, int64_t F) {
    int64_t b = (int64_t)c->hop_length * (F - 1 + lead_frames(c)) + c->n_fft / 2;
    return b < samples ? b : samples;
}

static int64_t tile_frames(int64_t L, int64_t stft_frames) {
    return stft_frames < 1 ? 1 : stft_frames > L ? L : stft_frames;
}

/* Multiply-adds of a frame, roughly: its FFT (n_fft log2 n_fft) and its row of the mel product. */
static int64_t frame_macs(const struct model_config *c) {
    int64_t lg = 0;
    while ((1ll << lg) < c->n_fft)
        lg++;
    return (int64_t)c->n_fft * lg + (int64_t)(c->n_fft / 2 + 1) * c->n_mels;
}

vkasr_status asr_features(const struct asr_model *m, struct backend *be, const float *samples, size_t n,
                          int64_t stft_frames, const be_tensor *feat, struct asr_steps *steps, struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t L = (int64_t)n / c->hop_length; /* valid frames: the last STFT frame is dropped (§1.4) */
    const int nb = c->n_fft / 2 + 1;
    CHECK_OR_RETURN(e, feat->nd == 2 && feat->ne[0] == L && feat->ne[1] == c->n_mels);
    if (L == 0)
        return VKASR_OK;
    const int64_t F = asr_steps_rows(steps, tile_frames(L, stft_frames), 0, frame_macs(c), 64), hop = c->hop_length;
    uint64_t mark = be_mark(be);
    be_tensor block, power;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){block_samples(c, (int64_t)n, F)}, &block);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){F, nb}, &power);
    if (be_measuring(be)) { /* the tiles allocate nothing more (and a measuring run has no samples) */
        be_release(be, mark);
        return st;
    }
    for (int64_t f0 = 0; st == VKASR_OK && f0 < L; f0 += F) {
        const int64_t nf = L - f0 < F ? L - f0 : F;
        /* samples [s0, s1) serve frames f0 .. f0+nf-1; the op sees them as frames f0 - s0/hop .. of the
         * block (s0 is on a hop boundary) with zeros outside it, which is exact: before s0 there are
         * none or they are never read, after s1 none or the input's end */
        const int64_t s0 = f0 > lead_frames(c) ? hop * (f0 - lead_frames(c)) : 0;
        const int64_t s1e = hop * (f0 + nf - 1) + c->n_fft / 2, s1 = s1e < (int64_t)n ? s1e : (int64_t)n;
        be_tensor blk = be_tensor_rows(&block, 0, s1 - s0), pw = be_tensor_rows(&power, 0, nf);
        st = be_upload(be, blk.addr, samples + s0, (uint64_t)(s1 - s0) * sizeof(float));
        // power: [nf, n_fft/2+1] for frames f0 .. f0+nf-1
        if (st == VKASR_OK)
            st = be_stft_power(be, &(struct op_stft_power){.x = blk, .window = m->window, .y = pw, .f0 = f0 - s0 / hop,
                                                           .n_fft = c->n_fft, .hop = c->hop_length, .preemph = c->preemph});
        // log-mel: [nf, M] = ln(power . fb^T + 2^-24)
        if (st == VKASR_OK)
            st = be_linear(be, &(struct op_linear){.x = pw, .w = m->melbank, .y = be_tensor_rows(feat, f0, nf),
                                                   .act = ACT_LOG_GUARD, .alpha = 1.0f});
        if (st == VKASR_OK)
            st = asr_steps_add(steps, nf * frame_macs(c));
    }
    /* the block is rewritten by the next tile's upload: let each tile finish first (uploads wait for
     * recorded work on mapped memory; staged ones are ordered), then release */
    be_release(be, mark);
    if (st != VKASR_OK)
        return st;
    // per mel bin: (x - mean) / (std + 1e-5) over the L valid frames; none for normalize "NA" (the
    // cache-aware streaming models: a chunk's features must not depend on later audio)
    if (c->no_feature_norm)
        return VKASR_OK;
    return be_feature_norm(be, &(struct op_feature_norm){.x = *feat, .y = *feat, .eps = 1e-5f});
}
