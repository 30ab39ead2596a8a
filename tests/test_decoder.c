/* test_decoder.c — the greedy transducer decoders on lavapipe (validation on) and the C reference:
 *  - hand-built transducers whose joint is a constant (Wo = 0, the decision in the bias): no speech
 *    (always blank; blank with duration 0) gives no tokens, a token with duration 0 at every frame gives
 *    max_symbols tokens per frame, a token with duration 3 every third frame — the expected tokens come
 *    from the rules of spec §6.4 / §6.5, on the device loop and the host walk, Vulkan (recorded graphs
 *    and, while profiling, ops run directly) and the reference backend; with VKASR_TEST_DEVICE=cuda the
 *    CUDA backend instead (CUDA graphs, and ops run directly while profiling);
 *  - random small transducers around the window sizes (1 .. 150 frames, 1 and 2 LSTM layers,
 *    max_symbols 2 and 10, device windows of 1, 2, 4 and 16 frames): the device loop against the host
 *    walk, token for token;
 *  - batches: random transducers decoding 1 .. 9 inputs of 1 .. 150 frames packed together (the device
 *    loop with B hypotheses) give each input exactly the tokens it gets decoded alone; the same with a
 *    joint large enough for the adaptive window (a batch's capped below an input's alone);
 *  - a batch's adaptive window grows back after a burst of emissions: a burst then blanks, far fewer
 *    iterations than frames, the expected tokens, device loop against host walk;
 *  - abort after the first round trip keeps a prefix of the tokens; progress rises to 1;
 *  - the parity fixtures' TDT and RNN-T models (f32, f16) on the parity clips and the default model (f16)
 *    on the held-out clips and the README sample: device loop against host walk.
 * usage: test_decoder DATA_DIR DEFAULT_MODEL SAMPLE_WAV [quick]
 *   quick: of the models from files, the TDT fixture in f32 only, and no adaptive-window cases (the
 *   forced-grid run) */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr/asr.h"
#include "audio/audio.h"
#include "expect.h"
#include "validation_log.h"

/* Counts validation reports (tv_log, which prints warnings and errors); keeps the device decoder's
 * summary line for window_recovery_case, which lowers the level to info while it decodes. */
static char decoder_summary[512];
static void test_log(vkasr_log_level level, const char *message, void *ud) {
    if (strncmp(message, "device decoder:", 15) == 0)
        snprintf(decoder_summary, sizeof decoder_summary, "%s", message);
    if (level >= VKASR_LOG_WARN)
        tv_log(level, message, ud);
}
static struct logger quiet = {VKASR_LOG_WARN, test_log, NULL};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(float lo, float hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) * (1.0 / 16777216.0));
}

/* ---- decoding and comparing ---------------------------------------------------------------------- */

struct tokens {
    struct asr_token *t;
    size_t n;
};

static bool same(const struct asr_output *a, const struct tokens *b, const char *what) {
    size_t n = a->ntokens < b->n ? a->ntokens : b->n;
    for (size_t i = 0; i < n; i++)
        if (a->tokens[i].id != b->t[i].id || a->tokens[i].frame != b->t[i].frame ||
            a->tokens[i].duration != b->t[i].duration) {
            printf("  %s: token %zu is (%d, frame %lld, duration %d), expected (%d, %lld, %d)\n", what, i,
                   a->tokens[i].id, (long long)a->tokens[i].frame, a->tokens[i].duration, b->t[i].id,
                   (long long)b->t[i].frame, b->t[i].duration);
            return false;
        }
    if (a->ntokens != b->n)
        printf("  %s: %zu tokens, expected %zu\n", what, a->ntokens, b->n);
    return a->ntokens == b->n;
}

struct probe {
    double last;
    int calls;
    bool monotonic;
    int abort_after; /* abort at the first poll after this many progress calls (-1: never) */
    size_t added;
};

static void on_progress(void *ud, const char *stage, double fraction, double seconds) {
    struct probe *p = ud;
    (void)seconds;
    if (strcmp(stage, "decoder") != 0)
        return;
    p->monotonic &= fraction >= p->last;
    p->last = fraction;
    p->calls++;
}
static bool on_abort(void *ud) {
    struct probe *p = ud;
    return p->abort_after >= 0 && p->calls > p->abort_after;
}
static void on_tokens(void *ud) { ((struct probe *)ud)->added++; }

/* Decodes enc with the device loop (host = false) or the host walk; checks the progress and token
 * callbacks of a complete run. */
static int window; /* the device decoder's window (asr_options.decoder_window; 0: its own choice) */

static vkasr_status decode(const struct asr_model *m, struct backend *be, const be_tensor *enc, bool host, int max_sym,
                           struct asr_output *out, struct err *e) {
    struct probe p = {.monotonic = true, .abort_after = -1};
    struct asr_hooks hooks = {.progress = on_progress, .should_abort = on_abort, .tokens_added = on_tokens, .ud = &p};
    struct asr_options opt = {.max_symbols = max_sym, .host_decoder = host, .decoder_window = window};
    memset(out, 0, sizeof *out);
    vkasr_status st = asr_decode(m, be, enc, &opt, &hooks, NULL, out, e);
    if (st == VKASR_OK) {
        EXPECT(p.monotonic && p.last == 1.0 && p.calls >= 1, "%s decoder: progress %s, last %g after %d calls",
               host ? "host" : "device", p.monotonic ? "rising" : "not monotonic", p.last, p.calls);
        EXPECT(p.added == out->ntokens, "tokens_added called %zu times for %zu tokens", p.added, out->ntokens);
    }
    return st;
}

/* The device loop and the host walk on one encoder output: the same tokens. Returns the count. */
static size_t device_vs_host(const struct asr_model *m, struct backend *be, const be_tensor *enc, int max_sym,
                             const char *what) {
    struct asr_output dev, host;
    struct err e = {0};
    size_t n = 0;
    vkasr_status sd = decode(m, be, enc, false, max_sym, &dev, &e);
    EXPECT(sd == VKASR_OK, "%s: device decoder: %s", what, e.msg);
    vkasr_status sh = decode(m, be, enc, true, max_sym, &host, &e);
    EXPECT(sh == VKASR_OK, "%s: host decoder: %s", what, e.msg);
    if (sd == VKASR_OK && sh == VKASR_OK) {
        struct tokens ht = {host.tokens, host.ntokens};
        EXPECT(same(&dev, &ht, what), "%s: the device loop's tokens differ from the host walk's", what);
        n = host.ntokens;
    }
    asr_output_free(&dev);
    asr_output_free(&host);
    return n;
}

/* ---- hand-built transducers ---------------------------------------------------------------------- */

static vkasr_status weight(struct backend *be, be_tensor *t, int nd, const int64_t *ne, float scale,
                           bool zero_last_row) {
    TRY(be_alloc_tensor(be, BE_POOL_WEIGHTS, BE_F32, nd, ne, t));
    uint64_t n = be_numel(t);
    float *h = malloc(n * sizeof *h);
    if (!h)
        return VKASR_ERR_NO_MEMORY;
    for (uint64_t i = 0; i < n; i++)
        h[i] = uniform(-scale, scale);
    if (zero_last_row) /* the blank's embedding row: the zero start-of-sequence input */
        memset(h + n - (uint64_t)ne[nd - 1], 0, (size_t)ne[nd - 1] * sizeof *h);
    vkasr_status st = be_upload(be, t->addr, h, n * sizeof *h);
    free(h);
    return st;
}

/* A transducer of vocabulary V (blank = V), prediction width P over L layers, encoder width D; TDT with
 * durations 0..4 or RNN-T. Joint weights scaled by wscale (0: the joint is its bias); bias_at[] adds
 * `lift` to those joint outputs (-1 ends the list). */
static bool build(struct backend *be, int head, int V, int P, int L, int D, float wscale, const int *bias_at,
                  float lift, struct asr_model *m) {
    memset(m, 0, sizeof *m);
    struct model_config *c = &m->cfg;
    c->head = head;
    c->vocab_size = V;
    c->pred_hidden = P;
    c->pred_layers = L;
    c->d_model = D;
    c->n_durations = head == VKASR_HEAD_TDT ? 5 : 0;
    for (int i = 0; i < c->n_durations; i++)
        c->durations[i] = i;
    c->max_symbols = 10;
    c->sub_factor = 8;
    c->hop_length = 160;
    c->sample_rate = 16000;
    const int64_t J = V + 1 + c->n_durations;
    vkasr_status st = weight(be, &m->embed, 2, (int64_t[]){V + 1, P}, 1.0f, true);
    for (int l = 0; l < L && st == VKASR_OK; l++) {
        st = weight(be, &m->lstm_wih[l], 2, (int64_t[]){4 * P, P}, 0.5f, false);
        if (st == VKASR_OK)
            st = weight(be, &m->lstm_whh[l], 2, (int64_t[]){4 * P, P}, 0.5f, false);
        if (st == VKASR_OK)
            st = weight(be, &m->lstm_b[l], 1, (int64_t[]){4 * P}, 0.5f, false);
    }
    if (st == VKASR_OK)
        st = weight(be, &m->pred_proj_w, 2, (int64_t[]){P, P}, 0.5f, false);
    if (st == VKASR_OK)
        st = weight(be, &m->pred_proj_b, 1, (int64_t[]){P}, 0.5f, false);
    if (st == VKASR_OK)
        st = weight(be, &m->enc_proj_w, 2, (int64_t[]){P, D}, 0.5f, false);
    if (st == VKASR_OK)
        st = weight(be, &m->enc_proj_b, 1, (int64_t[]){P}, 0.5f, false);
    if (st == VKASR_OK)
        st = weight(be, &m->joint_w, 2, (int64_t[]){J, P}, wscale, false);
    float *bias = calloc((size_t)J, sizeof *bias);
    if (st == VKASR_OK && bias) {
        for (int64_t j = 0; j < J; j++)
            bias[j] = uniform(-0.5f, 0.5f);
        for (int i = 0; bias_at && bias_at[i] >= 0; i++)
            bias[bias_at[i]] += lift;
        st = be_alloc_tensor(be, BE_POOL_WEIGHTS, BE_F32, 1, (int64_t[]){J}, &m->joint_b);
        if (st == VKASR_OK)
            st = be_upload(be, m->joint_b.addr, bias, (uint64_t)J * sizeof *bias);
    }
    free(bias);
    EXPECT(st == VKASR_OK && bias, "building a transducer: %s", be->err.msg);
    return st == VKASR_OK && bias;
}

static bool random_enc(struct backend *be, int64_t T, int D, be_tensor *enc) {
    if (be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, D}, enc) != VKASR_OK)
        return false;
    float *h = malloc((size_t)(T * D) * sizeof *h);
    for (int64_t i = 0; h && i < T * D; i++)
        h[i] = uniform(-1.0f, 1.0f);
    bool ok = h && be_upload(be, enc->addr, h, (uint64_t)(T * D) * sizeof *h) == VKASR_OK;
    free(h);
    return ok;
}

/* Spec §6.4 / §6.5 with a constant decision (token k, duration d; k = V is the blank). */
static struct tokens expected(int head, int V, int64_t T, int k, int d, int max_sym) {
    struct tokens x = {malloc((size_t)(T * max_sym + 1) * sizeof *x.t), 0};
    for (int64_t t = 0, last = -1, run = 0; x.t && t < T;) {
        if (k == V) {
            t += head == VKASR_HEAD_TDT && d > 0 ? d : 1;
            continue;
        }
        x.t[x.n++] = (struct asr_token){k, t, head == VKASR_HEAD_TDT ? d : 1};
        if (head == VKASR_HEAD_TDT) {
            run = t == last ? run + 1 : 1;
            last = t;
            t += d;
            if (d == 0 && run >= max_sym)
                t += 1;
        } else if (++run >= max_sym) {
            t += 1;
            run = 0;
        }
    }
    return x;
}

/* Constant decisions on one backend, through both decoders. */
static void constant_cases(struct backend *be, const char *name) {
    static const struct {
        int head, k, d, max_sym;
        const char *what;
    } cases[] = {
        {VKASR_HEAD_TDT, -1, 2, 10, "no speech (blank, duration 2)"},
        {VKASR_HEAD_TDT, -1, 0, 10, "no speech (blank, duration 0 advances one frame)"},
        {VKASR_HEAD_RNNT, -1, 1, 10, "no speech"},
        {VKASR_HEAD_TDT, 3, 0, 10, "a token with duration 0 at every frame: max_symbols"},
        {VKASR_HEAD_TDT, 3, 0, 1, "max_symbols 1"},
        {VKASR_HEAD_TDT, 3, 0, 3, "max_symbols 3"},
        {VKASR_HEAD_RNNT, 3, 1, 10, "a token at every frame: max_symbols"},
        {VKASR_HEAD_RNNT, 3, 1, 2, "max_symbols 2"},
        {VKASR_HEAD_TDT, 3, 3, 10, "a token with duration 3"},
    };
    const int V = 12, P = 16, D = 8;
    const int64_t T = 23;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int k = cases[i].k < 0 ? V : cases[i].k;
        const int bias_at[] = {k, cases[i].head == VKASR_HEAD_TDT ? V + 1 + cases[i].d : -1, -1};
        struct asr_model m;
        uint64_t mark = be_mark(be);
        be_tensor enc;
        if (!build(be, cases[i].head, V, P, 2, D, 0.0f, bias_at, 50.0f, &m) || !random_enc(be, T, D, &enc)) {
            be_release(be, mark);
            continue;
        }
        struct tokens want = expected(cases[i].head, V, T, k, cases[i].d, cases[i].max_sym);
        for (int host = 0; host < 2; host++) {
            struct asr_output out;
            struct err e = {0};
            char what[160];
            snprintf(what, sizeof what, "%s, %s: %s decoder", name, cases[i].what, host ? "host" : "device");
            EXPECT(decode(&m, be, &enc, host, cases[i].max_sym, &out, &e) == VKASR_OK, "%s: %s", what, e.msg);
            EXPECT(same(&out, &want, what), "%s: tokens differ from the spec's", what);
            asr_output_free(&out);
        }
        printf("%s, %s %s: %zu tokens over %lld frames\n", name, cases[i].head == VKASR_HEAD_TDT ? "TDT" : "RNN-T",
               cases[i].what, want.n, (long long)T);
        free(want.t);
        be_release(be, mark);
    }
}

/* Random transducers: the device loop against the host walk (all = false: one configuration). */
static void random_cases(struct backend *be, const char *name, bool all) {
    static const int64_t lengths[] = {1, 7, 8, 9, 61, 150};
    static const int windows[] = {0, 1, 2, 4}; /* the device loop's window: its own choice (16 here), 1, 2, 4 */
    for (int head = 0; head < 2; head++)
        for (int L = 1; L <= 2; L++) {
            if (!all && (head || L == 1))
                continue;
            struct asr_model m;
            const int hd = head ? VKASR_HEAD_RNNT : VKASR_HEAD_TDT;
            /* a blank lift so that emissions and blanks (and TDT's skips) mix */
            const int bias_at[] = {20, -1};
            rng = 0x9e3779b97f4a7c15ull + (uint64_t)(2 * head + L); /* the same model on every backend */
            if (!build(be, hd, 20, 100, L, 12, 0.5f, bias_at, head ? 4.0f : 1.0f, &m))
                continue;
            size_t total = 0;
            int64_t frames = 0;
            for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
                for (int ms = 2; ms <= 10; ms += 8) {
                    uint64_t mark = be_mark(be);
                    be_tensor enc;
                    char what[160];
                    window = windows[(i + (size_t)ms) % 4];
                    snprintf(what, sizeof what, "%s, random %s, %d layer(s), %lld frames, max_symbols %d, window %d",
                             name, head ? "RNN-T" : "TDT", L, (long long)lengths[i], ms, window);
                    if (random_enc(be, lengths[i], 12, &enc))
                        total += device_vs_host(&m, be, &enc, ms, what);
                    frames += lengths[i];
                    be_release(be, mark);
                }
            window = 0;
            printf("%s, random %s, %d layer(s): %zu tokens over %lld frames, device loop = host walk\n", name,
                   head ? "RNN-T" : "TDT", L, total, (long long)frames);
            EXPECT(total > 50, "%s: random %s emitted only %zu tokens (the comparison needs emissions)", name,
                   head ? "RNN-T" : "TDT", total);
        }
}

/* Decodes n inputs of lengths[] encoder frames (random, width D) packed in one batch (the device loop's
 * n hypotheses) and each input alone: the same tokens, input by input; with host_check, the first input
 * alone on the host walk too. Returns the tokens of all inputs; label names the case. */
static size_t batch_vs_alone(const struct asr_model *m, struct backend *be, const int64_t *lengths, int64_t n, int D,
                             bool host_check, const char *label) {
    uint64_t mark = be_mark(be);
    int64_t T = 0, samples[16];
    for (int64_t i = 0; i < n && i < 16; i++) {
        T += lengths[i];
        samples[i] = lengths[i] * 8 * 160; /* exactly lengths[i] encoder frames */
    }
    be_tensor enc;
    struct asr_batch b;
    struct err e = {0};
    struct asr_output outs[16], alone;
    memset(outs, 0, sizeof outs);
    bool ok = n <= 16 && random_enc(be, T, D, &enc) && asr_batch_layout(&m->cfg, samples, n, &b, &e) == VKASR_OK;
    EXPECT(ok, "%s: batch setup: %s", label, e.msg);
    if (!ok) {
        be_release(be, mark);
        return 0;
    }
    struct asr_options opt = {0};
    vkasr_status st = asr_decode(m, be, &enc, &opt, NULL, &b, outs, &e);
    EXPECT(st == VKASR_OK, "%s: batch of %lld: %s", label, (long long)n, e.msg);
    size_t tokens = 0;
    for (int64_t i = 0; st == VKASR_OK && i < n; i++) {
        char what[200];
        snprintf(what, sizeof what, "%s, batch of %lld, input %lld (%lld frames)", label, (long long)n, (long long)i,
                 (long long)lengths[i]);
        const be_tensor rows = be_tensor_rows(&enc, b.off[ASR_FRAMES][i], lengths[i]);
        memset(&alone, 0, sizeof alone);
        EXPECT(asr_decode(m, be, &rows, &opt, NULL, NULL, &alone, &e) == VKASR_OK, "%s: %s", what, e.msg);
        struct tokens want = {alone.tokens, alone.ntokens};
        EXPECT(same(&outs[i], &want, what), "%s: the batch's tokens differ from the input's alone", what);
        EXPECT(outs[i].frames == lengths[i], "%s: %lld frames", what, (long long)outs[i].frames);
        if (host_check && i == 0) {
            struct asr_output host;
            memset(&host, 0, sizeof host);
            const struct asr_options ho = {.host_decoder = true};
            EXPECT(asr_decode(m, be, &rows, &ho, NULL, NULL, &host, &e) == VKASR_OK, "%s: host: %s", what, e.msg);
            EXPECT(same(&host, &want, what), "%s: the device loop's tokens differ from the host walk's", what);
            asr_output_free(&host);
        }
        tokens += alone.ntokens;
        asr_output_free(&alone);
    }
    for (int64_t i = 0; i < n; i++)
        asr_output_free(&outs[i]);
    printf("%s, batch of %lld inputs (%lld frames): %zu tokens, each as alone\n", label, (long long)n, (long long)T,
           tokens);
    asr_batch_free(&b);
    be_release(be, mark);
    return tokens;
}

/* Random transducers decoding a packed batch of inputs (the device loop's B hypotheses) against each
 * input decoded alone: the same tokens, input by input. */
static void batch_cases(struct backend *be, const char *name) {
    static const int64_t lengths[] = {61, 1, 150, 8, 9, 7, 33, 2, 100};
    for (int head = 0; head < 2; head++) {
        struct asr_model m;
        const int hd = head ? VKASR_HEAD_RNNT : VKASR_HEAD_TDT, bias_at[] = {20, -1};
        rng = 0x51ed270b27dbd11bull + (uint64_t)head;
        if (!build(be, hd, 20, 100, 2, 12, 0.5f, bias_at, head ? 2.0f : 1.0f, &m))
            continue;
        for (int64_t n = 1; n <= 9; n += 4) {
            char label[96];
            snprintf(label, sizeof label, "%s, %s", name, head ? "RNN-T" : "TDT");
            const size_t tokens = batch_vs_alone(&m, be, lengths, n, 12, false, label);
            EXPECT(n == 1 || tokens > 20, "%s: the batch emitted only %zu tokens", label, tokens);
        }
    }
}

/* A joint above ROW_MACS_FREE (transducer_device.c: 4106 x 256 multiply-adds a row), where the device
 * loop picks each batch's window from the rows the steps needed, capped for B hypotheses so that B x W
 * stays within 32 rows: blanks with durations make steps walk several frames, so an input alone takes
 * windows of up to 8 and a batch of 5 at most 4. A packed batch must still give each input exactly the
 * tokens it gets alone, and the device loop the host walk's. */
static void adaptive_cases(struct backend *be, const char *name) {
    static const int64_t lengths[] = {150, 61, 120, 33, 100};
    enum { V = 4100, P = 256, D = 12, N = 5 };
    struct asr_model m;
    /* a weak joint and the blank lifted by 1.38: about one emission in seven frames, the rest walked
     * (lavapipe: 65 tokens; the batch's windows reach their cap of 4 frames) */
    const int bias_at[] = {V, -1};
    rng = 0x2545f4914f6cdd1dull;
    if (!build(be, VKASR_HEAD_TDT, V, P, 1, D, 0.05f, bias_at, 1.38f, &m))
        return;
    char label[96];
    snprintf(label, sizeof label, "%s, adaptive window, TDT", name);
    const size_t tokens = batch_vs_alone(&m, be, lengths, N, D, true, label);
    int64_t T = 0;
    for (int i = 0; i < N; i++)
        T += lengths[i];
    /* emissions and walks both: neither every frame nor none */
    EXPECT(tokens > 20 && tokens < (size_t)T / 2, "%s: %zu tokens over %lld frames (a mix of emissions and "
           "multi-frame walks is needed)", label, tokens, (long long)T);
}

/* Uploads n floats to a weight (the rest of the hand-built model stays as build() made it). */
static bool set_weight(struct backend *be, const be_tensor *t, const float *h, size_t n) {
    return n == be_numel(t) && be_upload(be, t->addr, h, n * sizeof *h) == VKASR_OK;
}

/* A burst of emissions, then a long blank run, with a joint large enough for the adaptive window (a
 * batch's: one input alone keeps the joint's free rows): the window drops to one frame during the burst
 * (every window emits at its first row) and must grow again for the blanks, whose frames a window of one
 * walks one per iteration. RNN-T, max_symbols 1, q = 0 (zero projection), z[t] = relu(enc[t] We^T) with
 * We reading enc[t][0] into unit 0 only; the joint gives the blank 10 z0 and token 5 a bias of 5:
 * enc[t][0] = 0 for the first K frames (token 5 each) and 1 after (blank). Decoded as a batch of two
 * copies: each gets K tokens at frames 0 .. K-1, in far fewer iterations than frames (the windows stayed
 * at one frame before: one iteration per frame); alone, the host walk's tokens. */
static void window_recovery_case(struct backend *be, const char *name) {
    enum { V = 4100, P = 256, D = 8, T = 2000, K = 40, TOKEN = 5 };
    const int64_t J = V + 1;
    struct asr_model m;
    rng = 0x9e3779b97f4a7c15ull;
    const uint64_t mark = be_mark(be);
    float *h = calloc((size_t)(J * P + 2 * T * D), sizeof *h);
    if (!h || !build(be, VKASR_HEAD_RNNT, V, P, 1, D, 0.0f, NULL, 0.0f, &m)) {
        EXPECT(h, "out of memory");
        free(h);
        be_release(be, mark);
        return;
    }
    bool ok = set_weight(be, &m.pred_proj_w, h, (size_t)P * P) && set_weight(be, &m.pred_proj_b, h, P) &&
              set_weight(be, &m.enc_proj_b, h, P);
    h[0] = 1.0f; /* We[0][0] */
    ok = ok && set_weight(be, &m.enc_proj_w, h, (size_t)P * D);
    h[0] = 0.0f;
    h[(size_t)V * P] = 10.0f; /* Wo[blank][0] */
    ok = ok && set_weight(be, &m.joint_w, h, (size_t)(J * P));
    h[(size_t)V * P] = 0.0f;
    h[TOKEN] = 5.0f;
    ok = ok && set_weight(be, &m.joint_b, h, (size_t)J);
    h[TOKEN] = 0.0f;
    for (int64_t t = K; t < T; t++)
        h[t * D] = h[(T + t) * D] = 1.0f;
    be_tensor enc; /* two copies of the input, packed */
    ok = ok && be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){2 * T, D}, &enc) == VKASR_OK &&
         be_upload(be, enc.addr, h, (uint64_t)(2 * T * D) * sizeof *h) == VKASR_OK;
    free(h);
    EXPECT(ok, "%s, window recovery: building the transducer: %s", name, be->err.msg);
    if (!ok) {
        be_release(be, mark);
        return;
    }
    char label[96];
    snprintf(label, sizeof label, "%s, window recovery", name);
    struct asr_output out[2];
    struct asr_batch b;
    struct err e = {0};
    memset(out, 0, sizeof out);
    const int64_t samples[2] = {(int64_t)T * 8 * 160, (int64_t)T * 8 * 160}; /* T encoder frames each */
    vkasr_status st = asr_batch_layout(&m.cfg, samples, 2, &b, &e);
    EXPECT(st == VKASR_OK, "%s: batch layout: %s", label, e.msg);
    if (st != VKASR_OK) {
        be_release(be, mark);
        return;
    }
    decoder_summary[0] = 0;
    quiet.level = VKASR_LOG_INFO;
    const struct asr_options opt = {.max_symbols = 1};
    st = asr_decode(&m, be, &enc, &opt, NULL, &b, out, &e);
    quiet.level = VKASR_LOG_WARN;
    asr_batch_free(&b);
    EXPECT(st == VKASR_OK, "%s: %s", label, e.msg);
    if (st == VKASR_OK) {
        struct tokens want = expected(VKASR_HEAD_RNNT, V, K, TOKEN, 1, 1);
        for (int i = 0; i < 2; i++)
            EXPECT(same(&out[i], &want, label), "%s: input %d: not %d tokens %d at frames 0 .. %d", label, i, K, TOKEN,
                   K - 1);
        free(want.t);
        long long iters = -1;
        const char *at = strstr(decoder_summary, " walked in ");
        if (at)
            iters = strtoll(at + 11, NULL, 10);
        printf("%s: %s\n", label, decoder_summary);
        /* the summary counts the iterations of both hypotheses */
        EXPECT(iters > 0 && iters / 2 < T / 2, "%s: %lld iterations per input for %d frames (the window did not grow "
               "back after the burst; summary: \"%s\")", label, iters / 2, T, decoder_summary);
    }
    for (int i = 0; i < 2; i++)
        asr_output_free(&out[i]);
    const be_tensor one = be_tensor_rows(&enc, 0, T);
    device_vs_host(&m, be, &one, 1, label);
    be_release(be, mark);
}

/* Abort at the first poll: a prefix of the full run's tokens, VKASR_ABORTED. */
static void abort_case(struct backend *be) {
    const int V = 12, k = 3, bias_at[] = {k, V + 1, -1};
    const int64_t T = 300;
    struct asr_model m;
    uint64_t mark = be_mark(be);
    be_tensor enc;
    if (!build(be, VKASR_HEAD_TDT, V, 16, 1, 8, 0.0f, bias_at, 50.0f, &m) || !random_enc(be, T, 8, &enc)) {
        be_release(be, mark);
        return;
    }
    struct tokens want = expected(VKASR_HEAD_TDT, V, T, k, 0, 10);
    struct probe p = {.monotonic = true, .abort_after = 0};
    struct asr_hooks hooks = {.progress = on_progress, .should_abort = on_abort, .tokens_added = on_tokens, .ud = &p};
    struct asr_output out = {0};
    struct err e = {0};
    vkasr_status st = asr_decode(&m, be, &enc, &(struct asr_options){0}, &hooks, NULL, &out, &e);
    EXPECT(st == VKASR_ABORTED, "abort: status %d (%s)", st, e.msg);
    EXPECT(out.ntokens > 0 && out.ntokens < want.n, "abort: %zu of %zu tokens", out.ntokens, want.n);
    struct tokens prefix = {want.t, out.ntokens < want.n ? out.ntokens : want.n};
    EXPECT(same(&out, &prefix, "abort"), "abort: the tokens kept are not a prefix of the full run's");
    printf("abort after the first round trip: %zu of %zu tokens kept\n", out.ntokens, want.n);
    asr_output_free(&out);
    free(want.t);
    be_release(be, mark);
}

/* ---- models from files ----------------------------------------------------------------------------- */

struct rig {
    struct be_device *dev;
    struct backend *be;
    struct asr_model *m;
};

static bool load_model(struct rig *r, const char *model, vkasr_precision prec) {
    struct model_file *mf = NULL;
    struct err e = {0};
    bool ok = model_open(model, &mf, &e) == VKASR_OK && asr_model_load(r->dev, &mf, prec, &r->m, &e) == VKASR_OK;
    model_close(mf);
    EXPECT(ok, "open %s: %s", model, e.msg);
    return ok;
}

/* One audio file through the encoder, then both decoders. */
static size_t clip(struct rig *r, const char *wav, const char *what) {
    struct audio a = {0};
    struct err e = {0};
    if (audio_load_file(wav, 16000, &a, &e) != VKASR_OK) {
        EXPECT(0, "%s: %s", wav, e.msg);
        return 0;
    }
    /* the encoder output of a whole run (its own decoder's tokens are not used here) */
    struct asr_output o = {0};
    struct asr_options opt = {.keep_features = true};
    vkasr_status st = asr_run(r->m, r->be, a.samples, a.n, &opt, NULL, &o, &e);
    EXPECT(st == VKASR_OK, "%s: encoder: %s", wav, e.msg);
    size_t n = 0;
    uint64_t mark = be_mark(r->be);
    be_tensor enc;
    if (st == VKASR_OK)
        st = be_alloc_tensor(r->be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){o.frames, r->m->cfg.d_model}, &enc);
    if (st == VKASR_OK)
        st = be_upload(r->be, enc.addr, o.encoder, be_nbytes(&enc));
    if (st == VKASR_OK)
        n = device_vs_host(r->m, r->be, &enc, 0, what);
    be_release(r->be, mark);
    asr_output_free(&o);
    audio_free(&a);
    return n;
}

/* Every .wav of a directory (sorted names), then the extra file if any. */
static void model_case(struct rig *r, const char *model, vkasr_precision prec, const char *dir, const char *extra,
                       const char *name) {
    if (!load_model(r, model, prec))
        return;
    struct dirent **ents = NULL;
    int ne = scandir(dir, &ents, NULL, alphasort);
    size_t clips = 0, tokens = 0;
    for (int i = 0; i < ne; i++) {
        const char *f = ents[i]->d_name;
        size_t len = strlen(f);
        if (len > 4 && strcmp(f + len - 4, ".wav") == 0) {
            char path[4096], what[512];
            snprintf(path, sizeof path, "%s/%s", dir, f);
            snprintf(what, sizeof what, "%s %s", name, f);
            tokens += clip(r, path, what);
            clips++;
        }
        free(ents[i]);
    }
    free(ents);
    if (extra) {
        char what[512];
        snprintf(what, sizeof what, "%s %s", name, extra);
        tokens += clip(r, extra, what);
        clips++;
    }
    printf("%s: %zu clips, %zu tokens, device loop = host walk\n", name, clips, tokens);
    EXPECT(clips > 0 && tokens > 0, "%s: nothing compared (%zu clips, %zu tokens)", name, clips, tokens);
    asr_model_free(r->m);
    r->m = NULL;
}

/* quick: without the adaptive-window cases, whose joints of 4100 classes are the slowest here and use
 * the kernels the other cases already run (the forced tiny grid's run). */
static void backend_cases(const char *device, bool profile, bool quick, const char *name) {
    struct be_device *dev = NULL;
    struct backend *be = NULL;
    struct err e = {0};
    struct be_device_options o = {.device = device, .validation = tv_wanted(), .profile = profile, .log = &quiet};
    if (be_device_open(&o, &dev, &e) != VKASR_OK || be_backend_create(dev, &be, &e) != VKASR_OK) {
        EXPECT(0, "open %s: %s", name, e.msg);
        be_device_close(dev);
        return;
    }
    constant_cases(be, name);
    random_cases(be, name, !profile);
    batch_cases(be, name);
    if (!profile && !quick && (device == NULL || strcmp(device, "cuda") == 0)) {
        adaptive_cases(be, name);
        window_recovery_case(be, name);
    }
    abort_case(be);
    be_backend_destroy(be);
    be_device_close(dev);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: test_decoder DATA_DIR DEFAULT_MODEL SAMPLE_WAV [quick]\n");
        return 2;
    }
    const bool quick = argc > 4 && strcmp(argv[4], "quick") == 0;
    /* VKASR_TEST_DEVICE=cuda: the CUDA backend instead of Vulkan (CUDA graphs, and ops run directly
     * while profiling), the reference's cases left to the Vulkan run */
    const char *tdev = getenv("VKASR_TEST_DEVICE");
    const char *cuda = tdev && strcmp(tdev, "cuda") == 0 ? "cuda" : NULL;
    if (cuda) {
        backend_cases(cuda, false, quick, "cuda (graphs)");
        backend_cases(cuda, true, quick, "cuda, ops run directly (profiling)");
    } else {
        backend_cases(NULL, false, quick, "vulkan");
        backend_cases(NULL, true, quick, "vulkan, ops run directly (profiling)");
        backend_cases("ref", false, quick, "reference");
        backend_cases("cpu:2", false, quick, "cpu");
    }
    /* The models from files share one device (f16 enabled; f32 models do not use it). */
    struct rig r = {0};
    struct err e = {0};
    struct be_device_options o = {.device = cuda, .validation = tv_wanted(), .want_f16 = true, .log = &quiet};
    if (be_device_open(&o, &r.dev, &e) == VKASR_OK && be_backend_create(r.dev, &r.be, &e) == VKASR_OK) {
        char model[4096], clips[4096];
        snprintf(clips, sizeof clips, "%s/audio/parity", argv[1]);
        static const char *const heads[] = {"tdt", "rnnt"};
        for (int h = 0; h < 2; h++)
            for (int f16 = 0; f16 < 2; f16++) {
                if (quick && (h || f16))
                    continue;
                char name[64];
                snprintf(model, sizeof model, "%s/fixtures/%s", argv[1], heads[h]);
                snprintf(name, sizeof name, "fixture %s %s", heads[h], f16 ? "f16" : "f32");
                model_case(&r, model, f16 ? VKASR_PRECISION_F16 : VKASR_PRECISION_F32, clips, NULL, name);
            }
        if (!quick) {
            snprintf(clips, sizeof clips, "%s/audio/heldout", argv[1]);
            model_case(&r, argv[2], VKASR_PRECISION_F16, clips, argv[3], "default model f16");
        }
    } else {
        EXPECT(0, "open the device: %s", e.msg);
    }
    be_backend_destroy(r.be);
    be_device_close(r.dev);
    failures += tv_check(); /* every device is closed by now */
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
