/* test_abort.c — abort answers promptly: a long input (the WAV repeated to SECONDS, default 180: full
 * attention, the heaviest blocks) through the shipped model on lavapipe, the abort requested from
 * another thread at points in every stage (the front end and subsampling, mid-encoder, decoding); the
 * call must return VKASR_ABORTED with a result marked partial within BOUND seconds (default 3) of the
 * request. Each case prints the measured latency. (CTest runs it on 120 s.) The request points follow
 * the call's progress, so a fast GPU meets them too; a short transcription first creates the pipelines
 * (pipeline creation, once per process, is not interrupted).
 * usage: test_abort MODEL WAV [SECONDS [BOUND]] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audio/audio.h"
#include "expect.h"
#include "validation_log.h"
#include "vkasr.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One case: once `stage` has been reported `reports` times by the progress callback, the abort is
 * requested; stage NULL: `delay` seconds into the call, or at its first progress report if sooner. */
struct abort_case {
    const char *name, *stage;
    int reports;
    double delay;
    atomic_int seen;
    atomic_bool reached, requested, done;
    _Atomic double t_request;
};

static void on_progress(const vkasr_progress *p, void *ud) {
    struct abort_case *c = ud;
    if (!c->stage || (p->stage && strcmp(p->stage, c->stage) == 0))
        if (atomic_fetch_add(&c->seen, 1) + 1 >= (c->stage ? c->reports : 1))
            atomic_store(&c->reached, true);
}

static bool on_abort(void *ud) { return atomic_load(&((struct abort_case *)ud)->requested); }

static void *requester(void *ud) {
    struct abort_case *c = ud;
    const double t0 = now_s();
    while (!atomic_load(&c->reached) && !atomic_load(&c->done) && (c->stage || now_s() - t0 < c->delay))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    if (!atomic_load(&c->done)) {
        atomic_store(&c->t_request, now_s());
        atomic_store(&c->requested, true);
    }
    return NULL;
}

static void run_case(vkasr_session *s, const float *pcm, size_t n, struct abort_case *c, double bound) {
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.progress_callback = on_progress;
    tp.progress_user_data = c;
    tp.abort_callback = on_abort;
    tp.abort_user_data = c;
    pthread_t th;
    if (pthread_create(&th, NULL, requester, c) != 0) {
        EXPECT(0, "%s: pthread_create failed", c->name);
        return;
    }
    const vkasr_result *r = NULL;
    const double t0 = now_s();
    vkasr_status st = vkasr_transcribe_pcm(s, pcm, n, VKASR_SAMPLE_RATE, 1, &tp, &r);
    const double t1 = now_s();
    atomic_store(&c->done, true);
    pthread_join(th, NULL);
    const bool requested = atomic_load(&c->requested);
    const double latency = requested ? t1 - atomic_load(&c->t_request) : -1;
    printf("%s: %.1f s of audio, abort requested %.2f s into the call, returned after %.3f s (bound %.1f s)\n",
           c->name, (double)n / VKASR_SAMPLE_RATE, requested ? atomic_load(&c->t_request) - t0 : -1.0, latency, bound);
    EXPECT(requested, "%s: the call ended (status %d) before the abort was requested", c->name, st);
    EXPECT(st == VKASR_ABORTED && r, "%s: status %d: %s", c->name, st, vkasr_session_last_error(s));
    EXPECT(r && vkasr_result_partial(r), "%s: the aborted result is not marked partial", c->name);
    EXPECT(latency <= bound, "%s: abort took %.3f s (bound %.1f s)", c->name, latency, bound);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: test_abort MODEL WAV [SECONDS [BOUND]]\n");
        return 2;
    }
    const double seconds = argc > 3 ? atof(argv[3]) : 180, bound = argc > 4 ? atof(argv[4]) : 3;
    struct audio a = {0};
    struct err ae = {0};
    if (audio_load_file(argv[2], VKASR_SAMPLE_RATE, &a, &ae) != VKASR_OK || a.n == 0) {
        printf("FAIL: %s: %s\n", argv[2], ae.msg);
        return 1;
    }
    const size_t n = (size_t)(seconds * VKASR_SAMPLE_RATE);
    float *pcm = malloc(n * sizeof *pcm);
    for (size_t i = 0; pcm && i < n; i++)
        pcm[i] = a.samples[i % a.n];
    vkasr_model_params mp = vkasr_model_params_default();
    mp.validation = tv_wanted();
    mp.log_callback = tv_log;
    vkasr_model *m = NULL;
    vkasr_error e;
    vkasr_session *s = NULL;
    if (!pcm || vkasr_model_load(argv[1], &mp, &m, &e) != VKASR_OK || vkasr_session_create(m, &s, &e) != VKASR_OK) {
        printf("FAIL: %s: %s\n", argv[1], pcm ? e.message : "out of memory");
        vkasr_model_free(m);
        free(pcm);
        audio_free(&a);
        return 1;
    }
    /* the pipelines, created once, outside the measured calls */
    const vkasr_result *warm = NULL;
    EXPECT(vkasr_transcribe_pcm(s, pcm, 2 * VKASR_SAMPLE_RATE, VKASR_SAMPLE_RATE, 1, NULL, &warm) == VKASR_OK,
           "warm-up: %s", vkasr_session_last_error(s));
    /* early: the front end or the subsampling; then mid-encoder (after its first block); decoding
     * (a shorter input, so the decoder is reached soon) */
    struct abort_case early = {.name = "front end / subsampling", .delay = 0.3};
    struct abort_case encoder = {.name = "encoder", .stage = "encoder", .reports = 1};
    struct abort_case decoder = {.name = "decoder", .stage = "decoder", .reports = 1};
    run_case(s, pcm, n, &early, bound);
    run_case(s, pcm, n, &encoder, bound);
    run_case(s, pcm, n < 40 * VKASR_SAMPLE_RATE ? n : 40 * VKASR_SAMPLE_RATE, &decoder, bound);
    vkasr_session_free(s);
    vkasr_model_free(m);
    free(pcm);
    audio_free(&a);
    failures += tv_check();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
