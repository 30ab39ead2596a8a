/* plan.c — the memory plan of a run (one input or a packed batch), made before anything is allocated:
 * the attention for the length (the longest input's), then the largest chunks (up to preferred sizes)
 * each phase can take within the scratch memory the device (or the caller's cap) leaves beside the
 * weights. Tensors of all rows hold the batch's totals; positional rows follow the longest input.
 * Phases and what they hold on the session's scratch stack (bytes from the stage that allocates them,
 * asr_*_scratch; a batch's offset tables below everything):
 *   features     x [T, D], feat [L, M], a block of samples and a tile of spectra
 *   subsampling  x, feat, one halo tile of the three convolutions
 *   encoder      x, y [T, D], positional rows (full attention: k, v [T, D] too), one chunk of rows
 *   decoder      x, the decoder's state (transducers: the joint's encoder half [T, P])
 * plus, above the largest, what one op of the backend may take for itself (be_memory.op_scratch).
 * A pure function: tested on shapes of hours without a device. */
#include <stdio.h>

#include "asr.h"

/* Preferred chunks: large enough that splitting costs little, small enough that their memory is a
 * fixed few hundred MiB at any length (0.6B shape: ~170 MiB per conformer chunk). */
#define PREF_STFT_FRAMES 32768
/* Bytes of a subsampling tile's first convolution output, counted in f32: the largest tile (767 encoder
 * frames at the 0.6B shape) and the smallest one preferred to it (127 frames). Between the two, a tile
 * is as large as the phase's memory allowed by the other phases' peak: subsampling, the largest phase
 * of a minute of audio at 767 frames, then never sets a run's peak above the floor tile's. */
#define PREF_SUB_STAGE1 (192ull << 20)
#define PREF_SUB_STAGE1_FLOOR (32ull << 20)
#define PREF_ROWS 8192
/* The smallest chunks a plan falls back to before it gives up. */
#define MIN_STFT_FRAMES 256
#define MIN_SUB_TILE 16
#define MIN_ROWS 64
/* Planned chunks start at multiples of the widest attention query block (64 rows). */
#define ROW_ALIGN 64

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static uint64_t maxu(uint64_t a, uint64_t b) { return a > b ? a : b; }

enum phase { PH_FEATURES, PH_SUBSAMPLING, PH_ENCODER };

struct shape {
    const struct model_config *c;
    struct asr_types t;      /* the activations' types (the model's precision)                   */
    int64_t n, L, T, window; /* totals: samples, mel frames, encoder frames                      */
    int64_t max_n, max_T;    /* the longest input's samples and encoder frames                    */
    int64_t inputs;
    uint64_t tables;         /* a batch's offset tables (none for one input)                      */
    uint64_t fixed;          /* the tables, x and feat, below every phase's temporaries           */
};

/* Bytes a phase holds with chunk parameter v (spectrum frames, tile frames or rows). */
static uint64_t phase_bytes(const struct shape *s, enum phase ph, int64_t v) {
    const uint64_t x = s->tables + be_scratch_f32(s->T, s->c->d_model);
    switch (ph) {
    case PH_FEATURES: return s->fixed + asr_features_scratch(s->c, s->max_n, v); /* one input at a time */
    case PH_SUBSAMPLING: /* a batch's stage k holds up to (2^k - 1) rows per input more than ceil(L / 2^k):
                          * bounded by the stages of L + 7 n mel frames */
        return s->fixed + asr_subsample_scratch(s->c, &s->t, s->inputs > 1 ? s->L + 7 * s->inputs : s->L, v);
    case PH_ENCODER: return x + asr_encode_scratch(s->c, &s->t, s->T, s->max_T, s->window, v, NULL);
    }
    return 0;
}

/* The largest v = min(top, unit * k) for k from lo / unit (at least 1) to ceil(pref / unit) whose phase
 * fits in avail; the smallest when none does (the caller reports it). Costs grow with v: a binary
 * search. */
static int64_t fit(const struct shape *s, enum phase ph, int64_t unit, int64_t lo, int64_t pref, int64_t top,
                   uint64_t avail) {
    pref = min64(pref, top);
    lo = min64(lo, pref);
    int64_t klo = max64(1, lo / unit), khi = max64(klo, (pref + unit - 1) / unit);
    if (phase_bytes(s, ph, min64(top, unit * klo)) > avail)
        return min64(top, unit * klo);
    while (klo < khi) {
        int64_t mid = klo + (khi - klo + 1) / 2;
        if (phase_bytes(s, ph, min64(top, unit * mid)) <= avail)
            klo = mid;
        else
            khi = mid - 1;
    }
    return min64(top, unit * klo);
}

static double mib(uint64_t b) { return (double)b / 1048576.0; }

/* The plan of a shape whose totals, maxima and types are filled in (struct shape without window). */
static vkasr_status plan_shape(struct shape s, const struct asr_options *opt, uint64_t weights, uint64_t available,
                               uint64_t max_tensor, uint64_t op_scratch, const char *limit, struct asr_plan *out,
                               struct err *e) {
    const struct model_config *c = s.c;
    struct asr_plan p = {.inputs = s.inputs, .samples = s.n, .mel_frames = s.L, .frames = s.T, .max_frames = s.max_T,
                         .weights = weights, .available = available, .op_scratch = op_scratch};
    /* what the phases themselves may hold: the backend's op scratch sits above each of them */
    const uint64_t avail = available > op_scratch ? available - op_scratch : 0;
    TRY(asr_attention_choose(c, s.max_T, opt, &p.attention, &p.window, e));
    const int64_t L = p.mel_frames, T = p.frames, D = c->d_model;
    const uint64_t x = be_scratch_f32(T, D), feat = be_scratch_f32(L, c->n_mels);
    s.window = p.window;
    s.fixed = s.tables + x + feat;

    /* chunks: forced (tests), else the largest that fit up to the preferred sizes */
    const int64_t F1 = (c->n_mels + 1) / 2, C = c->sub_channels;
    const uint64_t stage1_frame = (uint64_t)4 * F1 * C * 4; /* f32 bytes of the first conv per encoder frame */
    const int64_t pref_tile = max64(1, (int64_t)(PREF_SUB_STAGE1 / stage1_frame) - 1);
    const int64_t floor_tile = max64(1, (int64_t)(PREF_SUB_STAGE1_FLOOR / stage1_frame) - 1);
    const bool forced = opt && opt->force;
    if (forced) {
        p.chunks.stft_frames = max64(1, min64(opt->force->stft_frames, L));
        p.chunks.sub_tile = max64(1, min64(opt->force->sub_tile, T));
        p.chunks.rows = max64(1, min64(opt->force->rows, T));
    } else {
        /* spectra come per input: a tile need not exceed the longest input's frames */
        const int64_t max_L = s.max_n / c->hop_length;
        p.chunks.stft_frames = fit(&s, PH_FEATURES, 1, MIN_STFT_FRAMES, PREF_STFT_FRAMES, max64(1, max_L), avail);
        p.chunks.rows = fit(&s, PH_ENCODER, ROW_ALIGN, MIN_ROWS, PREF_ROWS, max64(1, T), avail);
    }
    p.features = phase_bytes(&s, PH_FEATURES, p.chunks.stft_frames);
    p.encoder = phase_bytes(&s, PH_ENCODER, p.chunks.rows);
    p.decoder = s.tables + x + asr_decode_scratch(c, T, s.inputs);
    if (!forced) { /* subsampling within the other phases' peak, or the floor tile's */
        const uint64_t others = maxu(maxu(p.features, p.encoder), p.decoder);
        const uint64_t cap = maxu(others, phase_bytes(&s, PH_SUBSAMPLING, min64(floor_tile, max64(1, T))));
        p.chunks.sub_tile = fit(&s, PH_SUBSAMPLING, 1, MIN_SUB_TILE, pref_tile, max64(1, T), cap < avail ? cap : avail);
    }
    p.subsampling = phase_bytes(&s, PH_SUBSAMPLING, p.chunks.sub_tile);
    p.largest = maxu(x, feat);
    asr_encode_scratch(c, &s.t, T, s.max_T, p.window, p.chunks.rows, &p.largest);
    p.scratch = maxu(maxu(p.features, p.subsampling), maxu(p.encoder, p.decoder)) + op_scratch;
    /* Scratch beyond the largest allocation comes in several blocks; a tensor that does not fit the
     * rest of one starts the next: allow the largest tensor per block boundary. */
    if (max_tensor && p.scratch > max_tensor)
        p.scratch += (p.scratch / max_tensor) * p.largest;
    snprintf(p.limit, sizeof p.limit, "%s", limit ? limit : "the device's budget");
    *out = p;

    const double minutes = (double)s.n / c->sample_rate / 60.0;
    if (max_tensor && p.largest > max_tensor)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                       "not enough device memory for %.1f minutes of audio: one of its tensors needs %.1f MiB, more "
                       "than the device's largest allocation (%.1f MiB)",
                       minutes, mib(p.largest), mib(max_tensor));
    char op[64] = "";
    if (op_scratch)
        snprintf(op, sizeof op, "; the backend's op scratch %.1f above each", mib(op_scratch));
    if (p.scratch > available)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY,
                       "not enough device memory for %.1f minutes of audio: it needs %.1f MiB (weights %.1f MiB + "
                       "activations %.1f MiB with the smallest chunks: features %.1f, subsampling %.1f, encoder %.1f, "
                       "decoder %.1f%s), %.1f MiB available (%s)",
                       minutes, mib(weights + p.scratch), mib(weights), mib(p.scratch), mib(p.features),
                       mib(p.subsampling), mib(p.encoder), mib(p.decoder), op, mib(weights + available),
                       limit ? limit : "the device's budget");
    return VKASR_OK;
}

vkasr_status asr_plan_make(const struct model_config *c, vkasr_precision precision, int64_t samples,
                           const struct asr_options *opt, uint64_t weights, uint64_t available, uint64_t max_tensor,
                           uint64_t op_scratch, const char *limit, struct asr_plan *out, struct err *e) {
    const int64_t L = samples / c->hop_length, T = asr_encoder_frames(c, L);
    struct shape s = {.c = c, .t = asr_types_for(precision), .n = samples, .L = L, .T = T, .max_n = samples,
                      .max_T = T, .inputs = 1};
    return plan_shape(s, opt, weights, available, max_tensor, op_scratch, limit, out, e);
}

vkasr_status asr_plan_batch(const struct model_config *c, vkasr_precision precision, const struct asr_batch *b,
                            const struct asr_options *opt, uint64_t weights, uint64_t available, uint64_t max_tensor,
                            uint64_t op_scratch, const char *limit, struct asr_plan *out, struct err *e) {
    struct shape s = {.c = c, .t = asr_types_for(precision), .n = asr_batch_total(b, ASR_SAMPLES),
                      .L = asr_batch_total(b, ASR_MEL),
                      .T = asr_batch_total(b, ASR_FRAMES), .max_n = b->max[ASR_SAMPLES], .max_T = b->max[ASR_FRAMES],
                      .inputs = b->n, .tables = b->n > 1 ? asr_batch_scratch(b->n) : 0};
    return plan_shape(s, opt, weights, available, max_tensor, op_scratch, limit, out, e);
}
