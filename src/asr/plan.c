/* plan.c — the memory plan of a run (one input or a packed batch), made before anything is allocated:
 * the attention for the length (the longest input's), then the largest chunks (up to preferred sizes)
 * each phase can take within the scratch memory the device (or the caller's cap) leaves beside the
 * weights. Each phase's bytes are measured by running its stages on a measuring backend (backend.h:
 * be_measure) from an empty stack, as asr_run_batch runs them:
 *   features     a batch's offset tables, x [T, D], feat [L, M], then the front end of the longest input
 *   subsampling  the tables, x, feat, then the halo tiles
 *   encoder      the tables, x, then the conformer stack
 *   decoder      the tables, x, then the decoder (one transducer input: either search)
 * plus, above the largest, what one op of the backend may take for itself (be_memory.op_scratch).
 * A pure function of the model's configuration and the work: tested on shapes of hours without a
 * device. */
#include <stdio.h>
#include <stdlib.h>

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
/* On a host device (CPU backends) a tile stays within the second-level caches' reach and its pages are
 * few: fresh pages cost the kernel's zeroing, which at 192 MiB was a quarter of a short run's time. */
#define PREF_SUB_STAGE1_HOST (4ull << 20)
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

enum phase { PH_FEATURES, PH_SUBSAMPLING, PH_ENCODER, PH_DECODER };

/* The stages on the measuring backend (backend.h: be_measure): a weightless copy of the model (its
 * configuration and precision; the encoder's measuring run takes one block), the work's batch with its
 * device tables there, and the first error of a measurement. */
struct meas {
    struct be_measure mb;
    struct asr_model m;
    struct asr_layer layer;
    struct asr_batch b;
    const struct asr_options *opt;
    struct asr_output *out;  /* the decoder's outputs, one per input (it writes their frame counts) */
    vkasr_status st;
    struct err *e;
};

struct shape {
    const struct model_config *c;
    int64_t n, L, T, window; /* totals: samples, mel frames, encoder frames                      */
    int64_t max_n, max_T;    /* the longest input's samples and encoder frames                    */
    int64_t inputs;
    bool host;               /* tensors in host memory (the CPU and reference backends)         */
    struct meas *meas;
    uint64_t largest;        /* the largest tensor of the last measurement                       */
};

/* Bytes phase ph holds with chunk parameter v (spectrum frames, tile frames or rows): the peak of the
 * phase run on the measuring backend from an empty stack, as asr_run_batch runs it (the batch's tables,
 * x [T, D], feat [L, M] while it lives, then the stage; the decoder of one transducer input: both
 * searches, either of which may run); UINT64_MAX after an error (kept in s->meas). */
static uint64_t phase_bytes(struct shape *s, enum phase ph, int64_t v) {
    struct meas *ms = s->meas;
    struct backend *be = &ms->mb.be;
    const struct model_config *c = &ms->m.cfg;
    struct err *e = ms->e;
    if (ms->st != VKASR_OK)
        return UINT64_MAX;
    be_release(be, 0);
    vkasr_status st = be_reserve(be, be->dev->info.max_alloc, UINT64_MAX);
    if (st == VKASR_OK && ms->b.n > 1)
        st = asr_batch_upload(be, c, &ms->b, e);
    be_tensor x = {0}, feat = {0};
    if (st == VKASR_OK)
        st = asr_batch_tensor(be, c, &ms->b, ASR_FRAMES, &x);
    if (st == VKASR_OK && (ph == PH_FEATURES || ph == PH_SUBSAMPLING))
        st = asr_batch_tensor(be, c, &ms->b, ASR_MEL, &feat);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    switch (ph) {
    case PH_FEATURES: { /* one input at a time: the longest */
        const be_tensor rows = be_tensor_rows(&feat, 0, ms->b.max[ASR_MEL]);
        if (st == VKASR_OK)
            st = asr_features(&ms->m, be, NULL, (size_t)ms->b.max[ASR_SAMPLES], v, &rows, NULL, e);
        break;
    }
    case PH_SUBSAMPLING:
        if (st == VKASR_OK && x.ne[0] > 0)
            st = asr_subsample_tiled(&ms->m, be, &feat, &x, v, &ms->b, NULL, e);
        break;
    case PH_ENCODER: {
        const struct asr_plan p = {.window = s->window, .chunks.rows = v};
        const struct asr_segments segs = {asr_batch_seg(&ms->b, ASR_FRAMES), ms->b.max[ASR_FRAMES]};
        if (st == VKASR_OK)
            st = asr_encode(&ms->m, be, &p, &x, ms->b.n > 1 ? &segs : NULL, NULL, NULL, e);
        break;
    }
    case PH_DECODER: {
        const bool both = ms->b.n == 1 && c->head != VKASR_HEAD_CTC;
        struct asr_options o = ms->opt ? *ms->opt : (struct asr_options){0};
        for (int host = both; st == VKASR_OK && host >= 0; host--) {
            o.host_decoder = host;
            st = asr_decode(&ms->m, be, &x, &o, NULL, &ms->b, ms->out, e);
        }
        break;
    }
    }
    if (st != VKASR_OK) {
        if (e->code == VKASR_OK)
            err_set(e, st, "%s", be->err.msg);
        ms->st = st;
        return UINT64_MAX;
    }
    s->largest = be_scratch_largest(be);
    return be_scratch_peak(be);
}

/* The largest v = min(top, unit * k) for k from lo / unit (at least 1) to ceil(pref / unit) whose phase
 * fits in avail; the smallest when none does (the caller reports it). Costs grow with v: a binary
 * search. */
static int64_t fit(struct shape *s, enum phase ph, int64_t unit, int64_t lo, int64_t pref, int64_t top,
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

/* The plan of a shape whose totals and maxima are filled in (struct shape without window). */
static vkasr_status plan_shape(struct shape s, const struct asr_options *opt, uint64_t weights, uint64_t available,
                               uint64_t max_tensor, uint64_t op_scratch, const char *limit, struct asr_plan *out,
                               struct err *e) {
    s.meas->opt = opt;
    s.meas->e = e;
    const struct model_config *c = s.c;
    struct asr_plan p = {.inputs = s.inputs, .samples = s.n, .mel_frames = s.L, .frames = s.T, .max_frames = s.max_T,
                         .weights = weights, .available = available, .op_scratch = op_scratch};
    /* what the phases themselves may hold: the backend's op scratch sits above each of them */
    const uint64_t avail = available > op_scratch ? available - op_scratch : 0;
    TRY(asr_attention_choose(c, s.max_T, opt, &p.attention, &p.window, e));
    const int64_t L = p.mel_frames, T = p.frames;
    s.window = p.window;

    /* chunks: forced (tests), else the largest that fit up to the preferred sizes */
    const int64_t F1 = (c->n_mels + 1) / 2, C = c->sub_channels;
    const uint64_t stage1_frame = (uint64_t)4 * F1 * C * 4; /* f32 bytes of the first conv per encoder frame */
    const uint64_t pref = s.host ? PREF_SUB_STAGE1_HOST : PREF_SUB_STAGE1;
    const uint64_t floor = s.host ? PREF_SUB_STAGE1_HOST : PREF_SUB_STAGE1_FLOOR;
    const int64_t pref_tile = max64(MIN_SUB_TILE, (int64_t)(pref / stage1_frame) - 1);
    const int64_t floor_tile = max64(MIN_SUB_TILE, (int64_t)(floor / stage1_frame) - 1);
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
    /* the largest tensor of every phase at its chunks */
    uint64_t largest = 0;
    p.features = phase_bytes(&s, PH_FEATURES, p.chunks.stft_frames);
    largest = maxu(largest, s.largest);
    p.encoder = phase_bytes(&s, PH_ENCODER, p.chunks.rows);
    largest = maxu(largest, s.largest);
    p.decoder = phase_bytes(&s, PH_DECODER, 0);
    largest = maxu(largest, s.largest);
    if (!forced) { /* subsampling within the other phases' peak, or the floor tile's */
        const uint64_t others = maxu(maxu(p.features, p.encoder), p.decoder);
        const uint64_t cap = maxu(others, phase_bytes(&s, PH_SUBSAMPLING, min64(floor_tile, max64(1, T))));
        p.chunks.sub_tile = fit(&s, PH_SUBSAMPLING, 1, MIN_SUB_TILE, pref_tile, max64(1, T), cap < avail ? cap : avail);
    }
    p.subsampling = phase_bytes(&s, PH_SUBSAMPLING, p.chunks.sub_tile);
    p.largest = maxu(largest, s.largest);
    if (s.meas->st != VKASR_OK)
        return s.meas->st;
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

static void log_plan(const struct logger *log, const struct model_config *c, const struct asr_plan *plan) {
    const struct asr_chunks *k = &plan->chunks;
    const double seconds = (double)plan->samples / c->sample_rate;
    if (plan->inputs > 1)
        LOG_INFO(log, "packed batch: %lld inputs, %.1f s of audio, %lld encoder frames (longest %lld)",
                 (long long)plan->inputs, seconds, (long long)plan->frames, (long long)plan->max_frames);
    const double frame_s = (double)c->sub_factor * c->hop_length / c->sample_rate;
    if (c->n_ctx > 0) { /* the trained chunked mask (asr_attention_choose), whatever plan->attention says */
        const int L = c->ctx[c->ctx_sel][0], R = c->ctx[c->ctx_sel][1];
        LOG_INFO(log,
                 "attention: chunked [%d, %d] (chunks of %d frames, each query sees its own and %d before it; "
                 "lookahead %.0f ms; %.1f s of audio)",
                 L, R, R + 1, L / (R + 1), (R + 1) * frame_s * 1000.0, seconds);
    } else if (plan->attention == ASR_ATT_FULL)
        LOG_INFO(log, "attention: full (%.1f s of audio)", seconds);
    else
        LOG_INFO(log, "attention: local [%lld, %lld] (%.2f s each side; %.1f s of audio)", (long long)plan->window,
                 (long long)plan->window, (double)plan->window * frame_s, seconds);
    char op[64] = "";
    if (plan->op_scratch)
        snprintf(op, sizeof op, ", op scratch %.1f above each", mib(plan->op_scratch));
    LOG_INFO(log,
             "memory plan: %.1f MiB of device memory = weights %.1f + activations %.1f (features %.1f, subsampling "
             "%.1f, encoder %.1f, decoder %.1f%s; %lld encoder frames in chunks of %lld rows, subsampling tiles of "
             "%lld frames, spectra of %lld frames) of %.1f MiB available (%s)",
             mib(plan->weights + plan->scratch), mib(plan->weights), mib(plan->scratch), mib(plan->features),
             mib(plan->subsampling), mib(plan->encoder), mib(plan->decoder), op, (long long)plan->frames,
             (long long)k->rows, (long long)k->sub_tile, (long long)k->stft_frames,
             mib(plan->weights + plan->available), plan->limit);
}

vkasr_status asr_plan(const struct asr_model *m, const struct asr_work *w, struct asr_plan *out, struct err *e) {
    const struct model_config *c = &m->cfg;
    const struct asr_batch *b = w->batch;
    struct shape s = {.c = c, .n = asr_batch_total(b, ASR_SAMPLES),
                      .L = asr_batch_total(b, ASR_MEL), .T = asr_batch_total(b, ASR_FRAMES),
                      .max_n = b->max[ASR_SAMPLES], .max_T = b->max[ASR_FRAMES], .inputs = b->n,
                      .host = m->dev && m->dev->info.host};
    struct meas ms = {.b = *b, .st = VKASR_OK};
    ms.m.cfg = *c;
    ms.m.precision = m->precision;
    ms.m.quantized = m->quantized; /* with int8 rows, the layernorms' int8 rows (conformer.c) */
    ms.m.layers = &ms.layer;
    ms.out = calloc((size_t)b->n, sizeof *ms.out);
    if (!ms.out)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory (the plan of %lld inputs)", (long long)b->n);
    be_measure_init(&ms.mb);
    ms.mb.be.int8_rows = w->int8_rows;
    s.meas = &ms;
    vkasr_status st = plan_shape(s, w->opt, w->weights, w->available, w->max_tensor, w->op_scratch,
                                 w->limit[0] ? w->limit : NULL, out, e);
    be_measure_fini(&ms.mb);
    free(ms.out);
    if (st == VKASR_OK && w->log)
        log_plan(w->log, c, out);
    return st;
}
