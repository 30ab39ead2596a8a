/* test_plan.c — memory plans on the shapes of hours, without a device (src/asr/plan.c measures the stages
 * on a counting backend: a pure function of the shape): the attention choice (auto by length and
 * threshold, a model's own local context, asked windows, an unsupported asymmetric context); for the
 * 0.6B shape in f16: the 51-minute input whose first subsampling convolution would hold 2,521,890,816
 * elements is tiled below 2^31 per tile; three hours with auto attention within 4 GiB and with full
 * attention within 6 GiB; an hour and three hours under a 3 GiB cap; smaller budgets give smaller chunks
 * and never a plan above the budget; budgets below the smallest chunks and tensors above the device's
 * largest allocation fail with VKASR_ERR_DEVICE_MEMORY naming the bytes; a backend's op scratch is
 * planned above every phase; a sweep over heads (TDT, RNN-T, CTC, a model's local context), precisions,
 * lengths, budgets, attention and batches stays within each budget; planning three hours costs well
 * under a millisecond. Packed batches: the host offsets of every stage (the planner's side of the
 * offsets scan) for 1, 2 and 100,000 inputs whose totals pass 2^32 and 2^46, against sums computed
 * here; lengths that would take a total past 2^62, or are negative, are refused naming the input;
 * batches of 20 s inputs of the 0.6B shape (256 of them within the H100's memory). Prints the plans
 * (docs/long-audio.md and docs/batch.md quote them). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "asr/asr.h"
#include "common/clock.h"
#include "expect.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024ull * 1024 * 1024)

/* parakeet-tdt-0.6b's shape (tools/fixtures/bench_pytorch.py makes it with random weights) */
static struct model_config shape_06b(void) {
    struct model_config c = {
        .head = VKASR_HEAD_TDT, .d_model = 1024, .n_layers = 24, .n_heads = 8, .ff_size = 4096, .conv_kernel = 9,
        .n_mels = 128, .sub_channels = 256, .sub_factor = 8, .att_left = -1, .att_right = -1, .vocab_size = 8192,
        .pred_hidden = 640, .pred_layers = 2, .n_durations = 5, .durations = {0, 1, 2, 3, 4}, .max_symbols = 10,
        .sample_rate = 16000, .n_fft = 512, .win_length = 400, .hop_length = 160, .preemph = 0.97f,
    };
    return c;
}

/* the 0.6B shape's f16 weights on the device (docs/gpu-results.md: the GGUF is 1.29 GB) */
static const uint64_t W06 = 1290000000ull;

/* A plan through the one entry: a weightless model of the shape, a layout of one input. */
static vkasr_status plan_prec(const struct model_config *c, vkasr_precision prec, const int64_t *lens, int64_t n,
                              const struct asr_options *opt, uint64_t available, uint64_t max_tensor,
                              uint64_t op_scratch, struct asr_plan *p, struct err *e) {
    memset(e, 0, sizeof *e);
    struct asr_batch b;
    TRY(asr_batch_layout(c, lens, n, &b, e));
    struct asr_model m = {0};
    m.cfg = *c;
    m.precision = prec;
    struct asr_work w = {.batch = &b, .opt = opt, .weights = W06, .available = available, .max_tensor = max_tensor,
                         .op_scratch = op_scratch, .limit = "test budget"};
    vkasr_status st = asr_plan(&m, &w, p, e);
    asr_batch_free(&b);
    return st;
}

static vkasr_status plan_op(const struct model_config *c, double seconds, const struct asr_options *opt,
                            uint64_t available, uint64_t max_tensor, uint64_t op_scratch, struct asr_plan *p,
                            struct err *e) {
    const int64_t n = (int64_t)(seconds * c->sample_rate);
    return plan_prec(c, VKASR_PRECISION_F16, &n, 1, opt, available, max_tensor, op_scratch, p, e);
}

static vkasr_status plan(const struct model_config *c, double seconds, const struct asr_options *opt,
                         uint64_t available, uint64_t max_tensor, struct asr_plan *p, struct err *e) {
    return plan_op(c, seconds, opt, available, max_tensor, 0, p, e);
}

static void show(const char *what, const struct asr_plan *p) {
    printf("%-34s %s%-4lld T %6lld: rows %5lld, tiles %4lld, spectra %5lld; planned %7.1f MiB (weights %.1f + "
           "features %.1f / subsampling %.1f / encoder %.1f / decoder %.1f)\n",
           what, p->attention == ASR_ATT_FULL ? "full " : "local ", (long long)p->window, (long long)p->frames,
           (long long)p->chunks.rows, (long long)p->chunks.sub_tile, (long long)p->chunks.stft_frames,
           (p->weights + p->scratch) / MIB, p->weights / MIB, p->features / MIB, p->subsampling / MIB,
           p->encoder / MIB, p->decoder / MIB);
}

static void test_attention_choice(void) {
    struct model_config c = shape_06b();
    struct err e = {0};
    enum asr_attention m;
    int64_t w;
    const int64_t t24 = 1440 * 100 / 8; /* 24 minutes of encoder frames */
    struct asr_options o = {0};
    EXPECT(asr_attention_choose(&c, t24, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_FULL && w == 0, "24 min: full");
    EXPECT(asr_attention_choose(&c, t24 + 1, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_LOCAL && w == 128,
           "past 24 min: local 128");
    o.auto_full_seconds = 60;
    EXPECT(asr_attention_choose(&c, 751, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_LOCAL && w == 128,
           "threshold 60 s, 60.08 s: local");
    o.window = 256;
    EXPECT(asr_attention_choose(&c, 751, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_LOCAL && w == 256,
           "auto with an asked window");
    o = (struct asr_options){.attention = ASR_ATT_FULL};
    EXPECT(asr_attention_choose(&c, 10 * t24, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_FULL, "full asked");
    o = (struct asr_options){.attention = ASR_ATT_LOCAL};
    EXPECT(asr_attention_choose(&c, 10, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_LOCAL && w == 128, "local asked");
    c.att_left = c.att_right = 64; /* a model that ships local attention keeps it under auto */
    o = (struct asr_options){0};
    EXPECT(asr_attention_choose(&c, 10, &o, &m, &w, &e) == VKASR_OK && m == ASR_ATT_LOCAL && w == 64,
           "model context [64, 64]");
    c.att_right = 32;
    EXPECT(asr_attention_choose(&c, 10, &o, &m, &w, &e) == VKASR_ERR_UNSUPPORTED && strstr(e.msg, "[64, 32]"),
           "asymmetric context refused: %s", e.msg);
    c = shape_06b();
    o.window = -3;
    EXPECT(asr_attention_choose(&c, 10, &o, &m, &w, &e) == VKASR_ERR_INVALID_ARG, "negative window refused");
}

static void test_06b_plans(void) {
    const struct model_config c = shape_06b();
    struct asr_plan p;
    struct err e;
    const uint64_t h100 = 79ull * GIB, alloc = 4094ull << 20; /* what the H100 reports */
    struct asr_options o = {0};

    /* 51 min 18.5 s: L1 = 153924 rows of the first convolution, 153924 x 64 x 256 = 2,521,890,816 */
    const double s51 = 307848.0 * 160 / 16000;
    EXPECT(plan(&c, s51, &o, h100 - W06, alloc, &p, &e) == VKASR_OK, "51 min: %s", e.msg);
    const int64_t L1 = (p.mel_frames + 1) / 2, per_tile = (4 * p.chunks.sub_tile + 3) * 64 * 256;
    EXPECT(L1 * 64 * 256 == 2521890816ll, "51 min: whole first conv %lld elements", (long long)(L1 * 64 * 256));
    EXPECT(p.chunks.sub_tile < p.frames && per_tile < (1ll << 31), "51 min: tiles of %lld frames, %lld elements each",
           (long long)p.chunks.sub_tile, (long long)per_tile);
    printf("51 min: the first conv's %lld elements in %lld tiles of <= %lld elements\n", (long long)(L1 * 64 * 256),
           (long long)((p.frames + p.chunks.sub_tile - 1) / p.chunks.sub_tile), (long long)per_tile);
    show("51 min 18.5 s, auto", &p);

    /* subsampling tiles: within the other phases' peak, down to the floor tile (first conv 32 MiB in
     * f32: 127 frames at this shape), and up to the preferred one (192 MiB: 767 frames) */
    EXPECT(plan(&c, 60, &o, h100 - W06, alloc, &p, &e) == VKASR_OK, "60 s: %s", e.msg);
    show("60 s, auto", &p);
    EXPECT(p.chunks.sub_tile == 127, "60 s: subsampling tiles of %lld frames, want the floor 127",
           (long long)p.chunks.sub_tile);
    EXPECT(plan(&c, 600, &o, h100 - W06, alloc, &p, &e) == VKASR_OK && p.chunks.sub_tile == 767 &&
               p.subsampling <= p.encoder,
           "10 min: subsampling tiles of %lld frames (want 767), %.1f MiB against the encoder's %.1f",
           (long long)p.chunks.sub_tile, p.subsampling / MIB, p.encoder / MIB);
    static const double mins[] = {10, 60, 180};
    for (int i = 0; i < 3; i++) {
        char what[64];
        EXPECT(plan(&c, mins[i] * 60, &o, h100 - W06, alloc, &p, &e) == VKASR_OK, "%.0f min: %s", mins[i], e.msg);
        snprintf(what, sizeof what, "%.0f min, auto", mins[i]);
        show(what, &p);
    }
    EXPECT(p.attention == ASR_ATT_LOCAL && p.weights + p.scratch <= 4 * GIB, "180 min auto: %.1f MiB (target 4 GiB)",
           (p.weights + p.scratch) / MIB);
    o.attention = ASR_ATT_FULL;
    EXPECT(plan(&c, 180 * 60, &o, h100 - W06, alloc, &p, &e) == VKASR_OK, "180 min full: %s", e.msg);
    show("180 min, full", &p);
    EXPECT(p.attention == ASR_ATT_FULL && p.weights + p.scratch <= 6 * GIB, "180 min full: %.1f MiB (target 6 GiB)",
           (p.weights + p.scratch) / MIB);
    o.attention = ASR_ATT_AUTO;
    for (int i = 1; i < 3; i++) {
        char what[64];
        EXPECT(plan(&c, mins[i] * 60, &o, 3 * GIB - W06, alloc, &p, &e) == VKASR_OK, "%.0f min under 3 GiB: %s",
               mins[i], e.msg);
        EXPECT(p.weights + p.scratch <= 3 * GIB, "%.0f min under 3 GiB: %.1f MiB", mins[i], (p.weights + p.scratch) / MIB);
        snprintf(what, sizeof what, "%.0f min, auto, max-memory 3G", mins[i]);
        show(what, &p);
    }

    /* shrinking budgets: chunks shrink, the plan never exceeds the budget, then a clean failure */
    uint64_t avail = 2 * GIB;
    int64_t last_rows = INT64_MAX, last_tile = INT64_MAX;
    int ok_plans = 0;
    for (; avail > (64ull << 20); avail = avail * 4 / 5) {
        vkasr_status st = plan(&c, 60 * 60, &o, avail, alloc, &p, &e);
        if (st != VKASR_OK) {
            EXPECT(st == VKASR_ERR_DEVICE_MEMORY && strstr(e.msg, "needs") && strstr(e.msg, "available") &&
                       strstr(e.msg, "test budget"),
                   "60 min, %.0f MiB: %d %s", avail / MIB, (int)st, e.msg);
            printf("60 min with %.0f MiB: %s\n", avail / MIB, e.msg);
            break;
        }
        ok_plans++;
        EXPECT(p.scratch <= avail, "60 min: %.1f MiB planned in %.1f MiB", p.scratch / MIB, avail / MIB);
        EXPECT(p.chunks.rows <= last_rows && p.chunks.sub_tile <= last_tile, "chunks grow as the budget shrinks");
        last_rows = p.chunks.rows;
        last_tile = p.chunks.sub_tile;
    }
    EXPECT(ok_plans >= 2 && avail > (64ull << 20), "60 min: %d plans before failing at %.0f MiB", ok_plans, avail / MIB);

    /* a tensor above the device's largest allocation: x [T, D] of ten hours is 1.7 GiB */
    vkasr_status st = plan(&c, 10 * 3600, &o, h100, 1ull << 30, &p, &e);
    EXPECT(st == VKASR_ERR_DEVICE_MEMORY && strstr(e.msg, "largest allocation"), "largest allocation: %s", e.msg);
    /* scratch over several blocks: room for one extra largest tensor per block boundary */
    EXPECT(plan(&c, 3 * 3600, &o, h100, 900ull << 20, &p, &e) == VKASR_OK && p.scratch >= p.encoder + p.largest,
           "several blocks: %.1f MiB planned, encoder %.1f, largest %.1f (%s)", p.scratch / MIB, p.encoder / MIB,
           p.largest / MIB, e.msg);
    /* forced chunks (tests) are taken as given, clamped to the input */
    struct asr_chunks f = {5, 3, 7};
    o.force = &f;
    EXPECT(plan(&c, 10, &o, h100, alloc, &p, &e) == VKASR_OK && p.chunks.rows == 7 && p.chunks.sub_tile == 3 &&
               p.chunks.stft_frames == 5,
           "forced chunks");
    /* a backend's op scratch (CUDA: 32 MiB) sits above every phase: the same chunks when the budget has
     * room for it, smaller ones within the same budget when not, and the error names it */
    o.force = NULL;
    const uint64_t op = 32ull << 20;
    struct asr_plan q;
    EXPECT(plan(&c, 60 * 60, &o, h100, alloc, &p, &e) == VKASR_OK &&
               plan_op(&c, 60 * 60, &o, h100, alloc, op, &q, &e) == VKASR_OK && q.scratch == p.scratch + op &&
               q.op_scratch == op && q.chunks.rows == p.chunks.rows && q.encoder == p.encoder,
           "op scratch on a roomy budget: %.1f MiB planned, %.1f without (%s)", q.scratch / MIB, p.scratch / MIB, e.msg);
    EXPECT(plan(&c, 60 * 60, &o, 1ull << 30, alloc, &p, &e) == VKASR_OK &&
               plan_op(&c, 60 * 60, &o, 1ull << 30, alloc, op, &q, &e) == VKASR_OK && q.scratch <= (1ull << 30) &&
               q.chunks.rows <= p.chunks.rows && q.scratch - op <= p.scratch,
           "op scratch within 1 GiB: %.1f MiB planned, rows %lld (%lld without) (%s)", q.scratch / MIB,
           (long long)q.chunks.rows, (long long)p.chunks.rows, e.msg);
    st = plan_op(&c, 60 * 60, &o, 400ull << 20, alloc, 300ull << 20, &q, &e);
    EXPECT(st == VKASR_ERR_DEVICE_MEMORY && strstr(e.msg, "op scratch 300.0"), "op scratch above the budget: %s",
           e.msg);
    /* nothing to do: no audio */
    EXPECT(plan(&c, 0, &o, h100, alloc, &p, &e) == VKASR_OK && p.frames == 0, "empty input: %s", e.msg);
}

/* The host offsets of a batch: stage k's length is ceil(floor(n / 160) / 2^k) per input (k = 0: mel
 * frames), summed here with other arithmetic (division rounding up) and compared at every input. */
static void check_layout(const int64_t *len, int64_t n, const char *what) {
    const struct model_config c = shape_06b();
    struct asr_batch b;
    struct err e = {0};
    if (asr_batch_layout(&c, len, n, &b, &e) != VKASR_OK) {
        EXPECT(0, "%s: %s", what, e.msg);
        return;
    }
    uint64_t sum[ASR_STAGES] = {0}, mx[ASR_STAGES] = {0};
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        for (int k = 0; k < ASR_STAGES; k++) {
            const uint64_t mel = (uint64_t)len[i] / 160, d = k > ASR_MEL ? 1ull << (k - ASR_MEL) : 1;
            const uint64_t l = k == ASR_SAMPLES ? (uint64_t)len[i] : (mel + d - 1) / d;
            ok = ok && (uint64_t)b.off[k][i] == sum[k] && asr_batch_len(&b, (enum asr_stage)k, i) == (int64_t)l;
            sum[k] += l;
            mx[k] = l > mx[k] ? l : mx[k];
        }
    }
    for (int k = 0; k < ASR_STAGES; k++)
        ok = ok && (uint64_t)asr_batch_total(&b, (enum asr_stage)k) == sum[k] && (uint64_t)b.max[k] == mx[k];
    EXPECT(ok, "%s: host offsets differ from the sums", what);
    printf("%s: %lld inputs, totals: %llu samples, %llu mel frames, %llu encoder frames\n", what, (long long)n,
           (unsigned long long)sum[ASR_SAMPLES], (unsigned long long)sum[ASR_MEL],
           (unsigned long long)sum[ASR_FRAMES]);
    asr_batch_free(&b);
}

static void test_batches(void) {
    const struct model_config c = shape_06b();
    struct err e = {0};
    enum { N = 100000 };
    static int64_t len[N];
    for (int64_t i = 0; i < N; i++) /* 2^30 samples (18.6 hours) and a little more: 1.07e14 in all */
        len[i] = ((int64_t)1 << 30) + i * 7919;
    check_layout(len, 1, "one input");
    check_layout(len, 2, "two inputs");
    check_layout(len, N, "100,000 inputs past 2^46 samples");
    for (int64_t i = 0; i < N; i++) /* 1 .. 20 s, and empty inputs */
        len[i] = (i * 104729) % (20 * 16000 + 1);
    check_layout(len, N, "100,000 inputs of 0-20 s");
    /* totals of 2^62 and negative lengths are refused, naming the input */
    struct asr_batch b;
    int64_t big[3] = {(int64_t)1 << 61, (int64_t)1 << 60, (int64_t)1 << 61};
    EXPECT(asr_batch_layout(&c, big, 3, &b, &e) == VKASR_ERR_INVALID_ARG && strstr(e.msg, "batch input 2"),
           "a total past 2^62: %s", e.msg);
    int64_t neg[2] = {16000, -1};
    EXPECT(asr_batch_layout(&c, neg, 2, &b, &e) == VKASR_ERR_INVALID_ARG && strstr(e.msg, "batch input 1"),
           "a negative length: %s", e.msg);
    const uint64_t h100 = 79ull * GIB, alloc = 4094ull << 20;
    struct asr_plan pb;
    struct asr_options o = {0};
    /* 0.6B shape, batches of 20 s inputs: full attention over each, positions of the longest */
    static const int sizes[] = {16, 64, 256};
    for (int k = 0; k < 3; k++) {
        int64_t l20[256];
        for (int i = 0; i < sizes[k]; i++)
            l20[i] = 20 * 16000 - i * 160;
        char what[64];
        EXPECT(plan_prec(&c, VKASR_PRECISION_F16, l20, sizes[k], &o, h100 - W06, alloc, 0, &pb, &e) == VKASR_OK &&
                   pb.attention == ASR_ATT_FULL && pb.max_frames == 250 && pb.inputs == sizes[k],
               "batch of %d x 20 s: %s", sizes[k], e.msg);
        snprintf(what, sizeof what, "batch of %d x 20 s", sizes[k]);
        show(what, &pb);
    }
}

/* Plans of every head, precision, length, budget and attention, and of batches: within the budget, each
 * phase above the run's buffers (x [T, D], feat [L, M] for features and subsampling), or a failure that
 * names the bytes. */
static void test_sweep(void) {
    const uint64_t alloc = 4094ull << 20;
    static const double secs[] = {0, 0.05, 1, 20, 60, 61, 600, 1440, 3600, 3 * 3600};
    static const uint64_t avails[] = {79ull * GIB - W06, 3 * GIB - W06, 1 * GIB, 400ull << 20};
    int plans = 0, failed = 0;
    for (int head = 0; head < 4; head++)
        for (int prec = 0; prec < 2; prec++) {
            struct model_config c = shape_06b();
            c.head = head == 0 ? VKASR_HEAD_TDT : head == 1 ? VKASR_HEAD_RNNT : VKASR_HEAD_CTC;
            if (head == 3) /* a model that ships local attention */
                c.att_left = c.att_right = 64;
            const vkasr_precision pr = prec ? VKASR_PRECISION_F32 : VKASR_PRECISION_F16;
            for (unsigned i = 0; i < sizeof secs / sizeof *secs; i++)
                for (unsigned j = 0; j < sizeof avails / sizeof *avails; j++)
                    for (int att = 0; att < 3; att++)
                        for (int k = 0; k < 2; k++) {
                            const int64_t n = (int64_t)(secs[i] * 16000);
                            int64_t lens[64];
                            const int64_t inputs = k ? 64 : 1;
                            for (int64_t q = 0; q < inputs; q++)
                                lens[q] = n / inputs + q * 160;
                            if (k && (secs[i] < 60 || att == ASR_ATT_AUTO))
                                continue; /* batches: inputs long enough, one attention for all */
                            struct asr_options o = {.attention = (enum asr_attention)att};
                            struct asr_plan p = {0};
                            struct err e;
                            const uint64_t op = j == 2 ? 32ull << 20 : 0;
                            vkasr_status st = plan_prec(&c, pr, lens, inputs, &o, avails[j], alloc, op, &p, &e);
                            plans++;
                            const uint64_t x = be_scratch_bytes((uint64_t)p.frames * c.d_model * 4),
                                           feat = be_scratch_bytes((uint64_t)p.mel_frames * c.n_mels * 4);
                            if (st == VKASR_OK)
                                EXPECT(p.scratch <= avails[j] && p.features >= x + feat && p.subsampling >= x + feat &&
                                           p.encoder >= x && p.decoder >= x && p.largest >= x &&
                                           p.scratch >= p.encoder + op,
                                       "head %d %s %.2f s x %lld, %.0f MiB, attention %d: %.1f MiB planned", head,
                                       prec ? "f32" : "f16", secs[i], (long long)inputs, avails[j] / MIB, att,
                                       p.scratch / MIB);
                            else
                                EXPECT(st == VKASR_ERR_DEVICE_MEMORY && strstr(e.msg, "test budget"),
                                       "head %d %.2f s: %d %s", head, secs[i], (int)st, e.msg);
                            failed += st != VKASR_OK;
                        }
        }
    printf("sweep: %d plans, %d beyond their budget\n", plans, failed);
}

/* Planning is cheap: three hours of the 0.6B shape, auto attention, the best of five within 5 ms (it
 * takes a few hundredths of one; running every encoder block or subsampling tile would take ~10 ms). */
static void test_cost(void) {
    const struct model_config c = shape_06b();
    static const uint64_t avail[2] = {79ull * GIB - W06, 3 * GIB - W06};
    for (int k = 0; k < 2; k++) {
        struct asr_plan p;
        struct err e;
        double best = 1e9;
        for (int i = 0; i < 5; i++) {
            const double t0 = clock_ms();
            EXPECT(plan(&c, 3 * 3600, NULL, avail[k], 4094ull << 20, &p, &e) == VKASR_OK, "%s", e.msg);
            const double t = clock_ms() - t0;
            best = t < best ? t : best;
        }
        printf("planning 3 h (%.0f MiB available): %.3f ms\n", avail[k] / MIB, best);
        EXPECT(best < 5.0, "planning 3 h took %.3f ms", best);
    }
}

int main(void) {
    test_cost();
    test_sweep();
    test_attention_choice();
    test_06b_plans();
    test_batches();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
