/* test_live.c — live transcription through the public API (vkasr_stream_*) on lavapipe:
 * - quality: the held-out clips concatenated with pauses (tests/live_harness.h) fed as fast as possible
 *   with catch-up off (so the windows, and the text, depend only on the audio, not on timing): the live
 *   WER against the references must be at most MAX_GAP points above the WER of the offline transcript
 *   of the same audio, and at most MAX_WER; final words must come in order, never overlap the previous
 *   one as a duplicate would, and every update must be consistent;
 * - behaviour: argument errors, a second stream or a transcription on a busy session, non-finite
 *   samples, a changing rate, pushes after finish, cancel, an empty stream, resampled input, pushes
 *   from another thread, the session usable again after the stream, a stream freed with its session.
 * No timing is checked (the machine may be slow and loaded): latency is bench_live's business.
 * - steps (a cache-aware model): the final words and events of a clip must not depend on how the
 *   worker's steps group the chunks. The clip is streamed twice, pushed at once (the worker takes many
 *   chunks per step) and in 80 ms pieces waiting for each step (one chunk per step); both must give the
 *   same final words (text, start, end), events (kind, text, frame) and segment ends, and the language the offline
 *   transcript of the same clip detected (its own tests compare it with NeMo).
 *
 * usage: test_live quality MODEL CLIP_DIR MAX_GAP MAX_WER
 *        test_live api MODEL CLIP_DIR
 *        test_live steps MODEL CLIP... */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "expect.h"
#include "live_harness.h"
#include "validation_log.h"
#include "vkasr.h"
#include "wer.h"

/* ---- quality on the concatenated held-out clips ------------------------------------------------- */

static void test_quality(vkasr_session *s, const char *dir, double max_gap, double max_wer) {
    char msg[1024];
    struct live_audio a;
    if (live_audio_build(dir, 1, &a, msg, sizeof msg) != 0) {
        EXPECT(0, "test audio: %s", msg);
        return;
    }
    double dur = (double)a.n / VKASR_SAMPLE_RATE;
    const vkasr_result *r = NULL;
    vkasr_status st = vkasr_transcribe_pcm(s, a.samples, a.n, VKASR_SAMPLE_RATE, 1, NULL, &r);
    EXPECT(st == VKASR_OK, "offline: %s", vkasr_session_last_error(s));
    char *offline = strdup(st == VKASR_OK ? vkasr_result_text(r) : "");

    vkasr_stream_params p = vkasr_stream_params_default();
    p.catch_up = false;
    struct live_result lr;
    st = live_run(s, a.samples, a.n, p, 0, &lr);
    EXPECT(st == VKASR_OK, "live: %s", lr.error);
    struct wer_counts off, live, diff;
    wer_count(a.ref, offline, &off);
    wer_count(a.ref, lr.text, &live);
    wer_count(offline, lr.text, &diff);
    double w_off = wer_rate(off.errors, off.ref_words), w_live = wer_rate(live.errors, live.ref_words);
    printf("%zu clips, %.1f s, %zu words: offline WER %.2f%%, live WER %.2f%% (S %zu D %zu I %zu); live vs offline "
           "text: S %zu D %zu I %zu\n",
           a.clips, dur, off.ref_words, 100 * w_off, 100 * w_live, live.sub, live.del, live.ins, diff.sub, diff.del,
           diff.ins);
    printf("  ref:     %s\n  offline: %s\n  live:    %s\n", a.ref, offline, lr.text);
    printf("  %llu windows, %zu final updates (%zu segment ends), %zu partial updates\n",
           (unsigned long long)lr.stats.windows, lr.finals, lr.segment_ends, lr.partials);
    EXPECT(w_live <= w_off + max_gap, "live WER %.2f%% more than %.2f points above offline %.2f%%", 100 * w_live,
           100 * max_gap, 100 * w_off);
    EXPECT(w_live <= max_wer, "live WER %.2f%% > %.2f%%", 100 * w_live, 100 * max_wer);
    EXPECT(lr.order_errors == 0 && lr.duplicates == 0, "%d final words out of order, %d duplicated",
           lr.order_errors, lr.duplicates);
    EXPECT(lr.bad_updates == 0, "%d inconsistent updates", lr.bad_updates);
    EXPECT(lr.segment_ends >= 1 && lr.partials >= 1, "segment ends %zu, partial updates %zu", lr.segment_ends,
           lr.partials);
    EXPECT(lr.stats.windows >= (uint64_t)(dur / p.hop_seconds) - 1, "%llu windows for %.1f s at hop %.2f s",
           (unsigned long long)lr.stats.windows, dur, p.hop_seconds);
    EXPECT(lr.stats.audio_seconds > dur - 0.01 && lr.stats.audio_seconds < dur + 0.01 &&
               lr.stats.final_seconds >= dur - 0.01,
           "stats: audio %.3f s, final %.3f s of %.3f s", lr.stats.audio_seconds, lr.stats.final_seconds, dur);

    live_result_free(&lr);
    free(offline);
    live_audio_free(&a);
}

/* ---- behaviour ------------------------------------------------------------------------------------ */

struct pusher {
    vkasr_stream *st;
    const float *x;
    size_t n;
    vkasr_status status;
};

static void *push_thread(void *arg) {
    struct pusher *p = arg;
    for (size_t i = 0; i < p->n && p->status == VKASR_OK; i += 160)
        p->status = vkasr_stream_push(p->st, p->x + i, p->n - i < 160 ? p->n - i : 160, VKASR_SAMPLE_RATE);
    return NULL;
}

struct collect {
    char text[4096];
    int finals, cancel_at;
    vkasr_stream *self;
};

static void on_final_collect(const vkasr_stream_update *u, void *ud) {
    struct collect *c = ud;
    if (u->n_words) {
        size_t n = strlen(c->text);
        snprintf(c->text + n, sizeof c->text - n, "%s%s", n ? " " : "", u->text);
    }
    c->finals++;
    if (c->cancel_at && c->finals == c->cancel_at) {
        vkasr_stream_cancel(c->self); /* from inside a callback */
        EXPECT(vkasr_stream_finish(c->self) == VKASR_ERR_INVALID_ARG, "finish from a callback is refused");
    }
}

static void test_behaviour(vkasr_model *m, const char *dir) {
    vkasr_session *s = NULL;
    vkasr_error err;
    EXPECT(vkasr_session_create(m, &s, &err) == VKASR_OK, "session: %s", err.message);
    if (!s)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/h00000.wav", dir); /* "it cost four hundred nine dollars" */
    float *x = NULL;
    size_t n = 0;
    EXPECT(vkasr_audio_load(path, &x, &n, &err) == VKASR_OK && n > 16000, "load %s: %s", path, err.message);
    if (!x) {
        vkasr_session_free(s);
        return;
    }

    /* arguments */
    vkasr_stream *st = NULL;
    vkasr_stream_params p = vkasr_stream_params_default();
    EXPECT(vkasr_stream_create(NULL, &p, &st, &err) == VKASR_ERR_INVALID_ARG && !st, "NULL session");
    p.hop_seconds = 0;
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_ERR_INVALID_ARG && strstr(err.message, "hop"),
           "hop 0: %s", err.message);
    p = vkasr_stream_params_default();
    p.right_context_seconds = 0;
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_ERR_INVALID_ARG, "right context 0");
    EXPECT(vkasr_stream_push(NULL, x, 1, 16000) == VKASR_ERR_INVALID_ARG, "push to NULL");
    EXPECT(vkasr_stream_finish(NULL) == VKASR_ERR_INVALID_ARG, "finish NULL");
    vkasr_stream_free(NULL);
    vkasr_stream_cancel(NULL);

    /* a busy session; pushes from another thread; resampled input; what a push refuses */
    struct collect c = {0};
    p = vkasr_stream_params_default();
    p.catch_up = false;
    p.final_callback = on_final_collect;
    p.user_data = &c;
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    vkasr_stream *st2 = NULL;
    EXPECT(vkasr_stream_create(s, &p, &st2, &err) == VKASR_ERR_INVALID_ARG && !st2, "a second stream on the session");
    const vkasr_result *r = NULL;
    EXPECT(vkasr_transcribe_pcm(s, x, n, 16000, 1, NULL, &r) == VKASR_ERR_INVALID_ARG && !r &&
               strstr(vkasr_session_last_error(s), "stream"),
           "transcribing on a session with a stream: %s", vkasr_session_last_error(s));
    float bad[3] = {0.1f, NAN, 0.0f};
    EXPECT(vkasr_stream_push(st, bad, 3, 16000) == VKASR_ERR_AUDIO, "a NaN sample");
    EXPECT(vkasr_stream_push(st, NULL, 5, 16000) == VKASR_ERR_INVALID_ARG, "NULL samples");
    EXPECT(vkasr_stream_push(st, x, 0, 0) == VKASR_ERR_INVALID_ARG, "rate 0");
    struct pusher pu = {st, x, n, VKASR_OK};
    pthread_t th;
    pthread_create(&th, NULL, push_thread, &pu);
    pthread_join(th, NULL);
    EXPECT(pu.status == VKASR_OK, "pushes from another thread: %d", (int)pu.status);
    EXPECT(vkasr_stream_push(st, x, 10, 44100) == VKASR_ERR_INVALID_ARG, "a different rate");
    EXPECT(vkasr_stream_finish(st) == VKASR_OK, "finish: %s", vkasr_stream_last_error(st));
    EXPECT(vkasr_stream_push(st, x, 10, 16000) == VKASR_ERR_INVALID_ARG, "push after finish");
    EXPECT(vkasr_stream_finish(st) == VKASR_OK, "a second finish");
    vkasr_stream_stats ss;
    EXPECT(vkasr_stream_get_stats(st, &ss) == VKASR_OK && ss.windows > 0 &&
               ss.audio_seconds > (double)n / 16000 - 0.01,
           "stats: %llu windows, %.3f s", (unsigned long long)ss.windows, ss.audio_seconds);
    vkasr_stream_free(st);
    struct wer_counts wc;
    wer_count("it cost four hundred nine dollars", c.text, &wc);
    printf("16 kHz from another thread: \"%s\"\n", c.text);
    EXPECT(wc.errors <= 1, "16 kHz: \"%s\"", c.text);
    /* the session is free again */
    EXPECT(vkasr_transcribe_pcm(s, x, n, 16000, 1, NULL, &r) == VKASR_OK, "transcribe after the stream: %s",
           vkasr_session_last_error(s));

    /* 44.1 kHz input, resampled by the stream */
    size_t n44 = (size_t)((double)n * 44100 / 16000);
    float *x44 = malloc(n44 * sizeof *x44);
    for (size_t i = 0; x44 && i < n44; i++) { /* linear interpolation is enough for a test signal */
        double t = (double)i * 16000 / 44100;
        size_t k = (size_t)t;
        double f = t - (double)k;
        x44[i] = k + 1 < n ? (float)((1 - f) * x[k] + f * x[k + 1]) : x[n - 1];
    }
    memset(&c, 0, sizeof c);
    EXPECT(x44 && vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    for (size_t i = 0; st && x44 && i < n44; i += 441)
        vkasr_stream_push(st, x44 + i, n44 - i < 441 ? n44 - i : 441, 44100);
    EXPECT(st && vkasr_stream_finish(st) == VKASR_OK, "finish at 44.1 kHz");
    vkasr_stream_free(st);
    wer_count("it cost four hundred nine dollars", c.text, &wc);
    printf("44.1 kHz: \"%s\"\n", c.text);
    EXPECT(wc.errors <= 1, "44.1 kHz: \"%s\"", c.text);
    free(x44);

    /* an empty stream, and one of 100 samples */
    memset(&c, 0, sizeof c);
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    EXPECT(vkasr_stream_finish(st) == VKASR_OK && c.text[0] == '\0', "empty stream: %s", vkasr_stream_last_error(st));
    vkasr_stream_free(st);
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    EXPECT(vkasr_stream_push(st, x, 100, 16000) == VKASR_OK && vkasr_stream_finish(st) == VKASR_OK,
           "100 samples: %s", vkasr_stream_last_error(st));
    vkasr_stream_free(st);

    /* cancel from a callback: no more finals after it, finish reports VKASR_ABORTED, pushes too */
    memset(&c, 0, sizeof c);
    c.cancel_at = 1;
    p.hop_seconds = 0.16; /* many windows: the first final comes early */
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    c.self = st;
    vkasr_status ps = VKASR_OK;
    for (size_t i = 0; i < n && ps == VKASR_OK; i += 160)
        ps = vkasr_stream_push(st, x + i, n - i < 160 ? n - i : 160, 16000);
    EXPECT(ps == VKASR_OK || ps == VKASR_ABORTED, "push during cancel: %d", (int)ps);
    EXPECT(vkasr_stream_finish(st) == VKASR_ABORTED, "finish after cancel");
    EXPECT(vkasr_stream_push(st, x, 10, 16000) == VKASR_ABORTED || c.finals == 0, "push after cancel");
    EXPECT(c.finals <= 1, "%d final updates after a cancel at the first", c.finals);
    vkasr_stream_free(st);

    /* a stream left running is stopped by vkasr_session_free */
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    vkasr_stream_push(st, x, n, 16000);
    vkasr_free(x);
    vkasr_session_free(s);
}

/* ---- a cache-aware stream: the finals do not depend on the grouping of steps ---------------------- */

struct finals {
    char text[16384];                /* "word@start-end ", "[kind:text@frame] " and "| " (a segment's
                                        end) in callback order                                         */
    size_t len;
    char language[32];               /* the first language event's                                   */
};

static void finals_on_final(const vkasr_stream_update *u, void *ud) {
    struct finals *f = ud;
    for (size_t i = 0; i < u->n_words && f->len < sizeof f->text; i++)
        f->len += (size_t)snprintf(f->text + f->len, sizeof f->text - f->len, "%s@%.2f-%.2f ", u->words[i].text,
                                   u->words[i].start, u->words[i].end);
    for (size_t i = 0; i < u->n_events && f->len < sizeof f->text; i++) {
        const vkasr_event *ev = &u->events[i];
        f->len += (size_t)snprintf(f->text + f->len, sizeof f->text - f->len, "[%d:%s@%lld] ", (int)ev->kind,
                                   ev->text, (long long)ev->frame);
        if (ev->kind == VKASR_EVENT_LANGUAGE && !f->language[0])
            snprintf(f->language, sizeof f->language, "%s", ev->text);
    }
    if (u->segment_end && f->len < sizeof f->text)
        f->len += (size_t)snprintf(f->text + f->len, sizeof f->text - f->len, "| ");
}

/* Streams x in pieces of `piece` samples; after each piece waits (up to 50 ms) for the worker's step. */
static void stream_in_pieces(vkasr_session *s, const float *x, size_t n, size_t piece, struct finals *f) {
    vkasr_stream_params p = vkasr_stream_params_default();
    p.final_callback = finals_on_final;
    p.user_data = f;
    vkasr_stream *st = NULL;
    vkasr_error err;
    memset(f, 0, sizeof *f);
    EXPECT(vkasr_stream_create(s, &p, &st, &err) == VKASR_OK, "create: %s", err.message);
    if (!st)
        return;
    for (size_t off = 0; off < n; off += piece) {
        vkasr_stream_stats before, now;
        vkasr_stream_get_stats(st, &before);
        EXPECT(vkasr_stream_push(st, x + off, n - off < piece ? n - off : piece, 16000) == VKASR_OK, "push: %s",
               vkasr_stream_last_error(st));
        for (int ms = 0; piece < n && ms < 50; ms++) {
            vkasr_stream_get_stats(st, &now);
            if (now.windows != before.windows)
                break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    }
    EXPECT(vkasr_stream_finish(st) == VKASR_OK, "finish: %s", vkasr_stream_last_error(st));
    vkasr_stream_free(st);
}

static void test_steps(vkasr_session *s, const char *clip) {
    float *x = NULL;
    size_t n = 0;
    vkasr_error err;
    if (vkasr_audio_load(clip, &x, &n, &err) != VKASR_OK) {
        EXPECT(false, "%s: %s", clip, err.message);
        return;
    }
    const vkasr_result *r = NULL;
    EXPECT(vkasr_transcribe_pcm(s, x, n, 16000, 1, NULL, &r) == VKASR_OK, "offline: %s", vkasr_session_last_error(s));
    char lang[32]; /* the result is the session's until the streams below */
    snprintf(lang, sizeof lang, "%s", r && vkasr_result_language(r) ? vkasr_result_language(r) : "");
    static struct finals whole, pieces;
    stream_in_pieces(s, x, n, n, &whole);
    stream_in_pieces(s, x, n, 1280, &pieces);
    printf("%s\n  pushed at once: %s\n  80 ms pieces:   %s\n  offline language: \"%s\"\n", clip, whole.text,
           pieces.text, lang);
    EXPECT(whole.len > 0 && strcmp(whole.text, pieces.text) == 0, "the finals depend on the steps");
    EXPECT(strcmp(whole.language, lang) == 0 && strcmp(pieces.language, lang) == 0,
           "language: streamed \"%s\" and \"%s\", offline \"%s\"", whole.language, pieces.language, lang);
    vkasr_free(x);
}

int main(int argc, char **argv) {
    bool quality = argc == 6 && strcmp(argv[1], "quality") == 0, api = argc == 4 && strcmp(argv[1], "api") == 0;
    bool steps = argc >= 4 && strcmp(argv[1], "steps") == 0;
    if (!quality && !api && !steps) {
        fprintf(stderr, "usage: test_live quality MODEL CLIP_DIR MAX_GAP MAX_WER\n"
                        "       test_live api MODEL CLIP_DIR\n"
                        "       test_live steps MODEL CLIP...\n");
        return 2;
    }
    vkasr_model_params mp = vkasr_model_params_default();
    mp.validation = tv_wanted();
    mp.log_callback = tv_log;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    if (vkasr_model_load(argv[2], &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &s, &err) != VKASR_OK) {
        printf("FAIL: %s\n", err.message);
        vkasr_model_free(m);
        return 1;
    }
    if (quality)
        test_quality(s, argv[3], atof(argv[4]), atof(argv[5]));
    for (int i = 3; steps && i < argc; i++)
        test_steps(s, argv[i]);
    vkasr_session_free(s);
    if (api)
        test_behaviour(m, argv[3]);
    vkasr_model_free(m);
    failures += tv_check();
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
