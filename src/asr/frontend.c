/* frontend.c — the mel front end on the backend (spec §1): pre-emphasised centred power spectra,
 * the Slaney filterbank as a matrix product with the log fused, then per-bin normalisation over the
 * valid frames. Frames are processed in tiles so memory stays bounded for any input length. */
#include "asr.h"

/* Frames per spectrum tile: 32768 frames x 257 bins x 4 B = 34 MB. */
#define FRAMES_PER_TILE 32768

vkasr_status asr_features(const struct asr_model *m, struct backend *be, const float *samples, size_t n,
                          be_tensor *feat, struct err *e) {
    const struct model_config *c = &m->cfg;
    int64_t L = (int64_t)n / c->hop_length; /* valid frames: the last STFT frame is dropped (§1.4) */
    int nb = c->n_fft / 2 + 1;
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){L, c->n_mels}, feat));
    if (L == 0)
        return VKASR_OK;
    be_tensor x;
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){(int64_t)n}, &x));
    TRY(be_upload(be, x.addr, samples, n * sizeof(float)));
    int64_t tile = L < FRAMES_PER_TILE ? L : FRAMES_PER_TILE;
    be_tensor power;
    TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){tile, nb}, &power));
    for (int64_t f0 = 0; f0 < L; f0 += tile) {
        int64_t F = L - f0 < tile ? L - f0 : tile;
        be_tensor pw = be_tensor_rows(&power, 0, F);
        // power: [F, n_fft/2+1] for frames f0 .. f0+F-1
        TRY(be_stft_power(be, &(struct op_stft_power){.x = x, .window = m->window, .y = pw, .f0 = f0,
                                                       .n_fft = c->n_fft, .hop = c->hop_length, .preemph = c->preemph}));
        // log-mel: [F, M] = ln(power . fb^T + 2^-24)
        TRY(be_linear(be, &(struct op_linear){.x = pw, .w = m->melbank, .y = be_tensor_rows(feat, f0, F),
                                               .act = ACT_LOG_GUARD, .alpha = 1.0f}));
    }
    // per mel bin: (x - mean) / (std + 1e-5) over the L valid frames
    return be_feature_norm(be, &(struct op_feature_norm){.x = *feat, .y = *feat, .eps = 1e-5f});
}
