/* test_threads.c — the C API's thread contract (include/vkasr.h): one model, read-only once loaded,
 * shared by sessions on several threads at once. On a freshly loaded model (what is set up on first
 * use, such as compute pipelines, is set up by the workers, concurrently), each worker creates its own
 * session, transcribes different files in a different order, with progress and log callbacks, and one
 * worker also aborts a call through its abort callback and goes on; then a batch call, which decodes its
 * inputs on several threads; then models loaded on several threads at once (what `vkasr transcribe
 * --devices` does), each transcribing on its own thread, freed once all of them have ended. Every
 * transcript must equal the one made on a single thread with a model of its own. Run under
 * ThreadSanitizer by scripts/test.sh --sanitize.
 * usage: test_threads MODEL AUDIO_DIR [DEVICE] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "vkasr.h"

enum { NFILES = 3, NWORKERS = 4, REPS = 2, MAXIDS = 2048 };
static const char *const files[NFILES] = {"speech_16k_mono.wav", "speech_44k_stereo.flac", "short_100.wav"};
static char paths[NFILES][4096];

struct ids {
    int32_t v[MAXIDS];
    size_t n;
    char text[1024];
};
static struct ids want[NFILES];

static atomic_int log_calls;
static void on_log(vkasr_log_level level, const char *msg, void *ud) {
    (void)level;
    (void)msg;
    atomic_fetch_add((atomic_int *)ud, 1);
}

static void take(const vkasr_result *r, struct ids *out) {
    size_t n;
    const vkasr_token *t = vkasr_result_tokens(r, &n);
    out->n = n < MAXIDS ? n : MAXIDS;
    for (size_t i = 0; i < out->n; i++)
        out->v[i] = t[i].id;
    snprintf(out->text, sizeof out->text, "%s", vkasr_result_text(r));
}

static int same(const struct ids *a, const struct ids *b) {
    return a->n == b->n && memcmp(a->v, b->v, a->n * sizeof a->v[0]) == 0 && strcmp(a->text, b->text) == 0;
}

struct worker {
    vkasr_model *model;
    int index;
    int progress_calls;  /* this worker's own: its callbacks run on its thread */
    int polls;
    int mismatches, errors, aborted;
    char error[512];
};

static void on_progress(const vkasr_progress *p, void *ud) {
    struct worker *w = ud;
    if (p->fraction >= 0.0f && p->fraction <= 1.0f)
        w->progress_calls++;
}

/* Stops the call at its first poll. */
static bool stop_now(void *ud) {
    struct worker *w = ud;
    w->polls++;
    return true;
}

/* A model loaded on this thread, then one file transcribed with it. The loader keeps its model and
 * session for main to free after joining every loader: NVIDIA's driver (580) deadlocked when a thread
 * that had used the GPU exited while another destroyed a device (include/vkasr.h, "Lifetimes"). */
struct loader {
    const char *path;
    vkasr_model_params mp;
    int file;
    vkasr_model *model;
    vkasr_session *session;
    struct ids got;
    char error[512];
};

static void *load_and_transcribe(void *arg) {
    struct loader *l = arg;
    vkasr_error e;
    const vkasr_result *r = NULL;
    if (vkasr_model_load(l->path, &l->mp, &l->model, &e) != VKASR_OK)
        snprintf(l->error, sizeof l->error, "load: %s", e.message);
    else if (vkasr_session_create(l->model, &l->session, &e) != VKASR_OK)
        snprintf(l->error, sizeof l->error, "session: %s", e.message);
    else if (vkasr_transcribe_file(l->session, paths[l->file], NULL, &r) != VKASR_OK)
        snprintf(l->error, sizeof l->error, "%s: %s", files[l->file], vkasr_session_last_error(l->session));
    else
        take(r, &l->got);
    return NULL;
}

static void *work(void *arg) {
    struct worker *w = arg;
    vkasr_session *s = NULL;
    vkasr_error e;
    if (vkasr_session_create(w->model, &s, &e) != VKASR_OK) {
        snprintf(w->error, sizeof w->error, "session: %s", e.message);
        w->errors++;
        return NULL;
    }
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.progress_callback = on_progress;
    tp.progress_user_data = w;
    for (int rep = 0; rep < REPS; rep++) {
        if (w->index == 0 && rep == 1) { /* an aborted call in the middle: the session stays usable */
            vkasr_transcribe_params ab = tp;
            ab.abort_callback = stop_now;
            ab.abort_user_data = w;
            const vkasr_result *r = NULL;
            vkasr_status st = vkasr_transcribe_file(s, paths[0], &ab, &r);
            w->aborted += st == VKASR_ABORTED && r && vkasr_result_partial(r);
        }
        for (int k = 0; k < NFILES; k++) {
            int f = (k + w->index) % NFILES;
            const vkasr_result *r = NULL;
            vkasr_status st = vkasr_transcribe_file(s, paths[f], &tp, &r);
            if (st != VKASR_OK) {
                snprintf(w->error, sizeof w->error, "%s: %s", files[f], vkasr_session_last_error(s));
                w->errors++;
                continue;
            }
            struct ids got;
            take(r, &got);
            w->mismatches += !same(&got, &want[f]);
        }
    }
    vkasr_session_free(s);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: test_threads MODEL AUDIO_DIR [DEVICE]\n");
        return 2;
    }
    for (int f = 0; f < NFILES; f++)
        snprintf(paths[f], sizeof paths[f], "%s/%s", argv[2], files[f]);
    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = argc == 4 ? argv[3] : NULL;
    vkasr_error e;

    /* the reference: each file on this thread alone, with a model of its own */
    vkasr_model *m = NULL;
    if (vkasr_model_load(argv[1], &mp, &m, &e) != VKASR_OK) {
        printf("FAIL: load %s: %s\n", argv[1], e.message);
        return 1;
    }
    vkasr_session *s = NULL;
    EXPECT(vkasr_session_create(m, &s, &e) == VKASR_OK, "session: %s", e.message);
    for (int f = 0; s && f < NFILES; f++) {
        const vkasr_result *r = NULL;
        EXPECT(vkasr_transcribe_file(s, paths[f], NULL, &r) == VKASR_OK, "%s: %s", files[f],
               vkasr_session_last_error(s));
        if (r)
            take(r, &want[f]);
    }
    vkasr_session_free(s);
    vkasr_model_free(m);
    EXPECT(want[0].n > 0, "precondition: %s gives tokens", files[0]);

    /* the shared model, fresh: what is set up on first use (pipelines, staging) is set up by the workers */
    mp.log_callback = on_log;
    mp.log_user_data = &log_calls;
    mp.log_level = VKASR_LOG_DEBUG; /* log calls from every thread */
    if (vkasr_model_load(argv[1], &mp, &m, &e) != VKASR_OK) {
        printf("FAIL: load %s: %s\n", argv[1], e.message);
        return 1;
    }

    struct worker ws[NWORKERS];
    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++) {
        ws[i] = (struct worker){.model = m, .index = i};
        EXPECT(pthread_create(&th[i], NULL, work, &ws[i]) == 0, "thread %d", i);
    }
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NWORKERS; i++) {
        EXPECT(ws[i].errors == 0, "worker %d: %d error(s), last: %s", i, ws[i].errors, ws[i].error);
        EXPECT(ws[i].mismatches == 0, "worker %d: %d transcript(s) differ from the single-thread ones", i,
               ws[i].mismatches);
        EXPECT(ws[i].progress_calls > 0, "worker %d: no progress callback", i);
    }
    EXPECT(ws[0].aborted == 1 && ws[0].polls > 0, "worker 0: the abort callback did not stop a call (%d polls)",
           ws[0].polls);
    EXPECT(atomic_load(&log_calls) > 0, "no log message reached the callback");

    /* a batch call decodes its inputs on several threads (the files resampled and not, in every
     * order): each transcript equals the single-thread one */
    enum { NBATCH = 12 };
    vkasr_batch_input in[NBATCH];
    const vkasr_result *res[NBATCH];
    memset(in, 0, sizeof in);
    for (int i = 0; i < NBATCH; i++)
        in[i].path = paths[(i * 7) % NFILES];
    s = NULL;
    EXPECT(vkasr_session_create(m, &s, &e) == VKASR_OK, "session: %s", e.message);
    if (s) {
        vkasr_status st = vkasr_transcribe_batch(s, in, NBATCH, NULL, NULL, res);
        EXPECT(st == VKASR_OK, "batch of %d: %s", NBATCH, vkasr_session_last_error(s));
        for (int i = 0; st == VKASR_OK && i < NBATCH; i++) {
            struct ids got;
            take(res[i], &got);
            EXPECT(same(&got, &want[(i * 7) % NFILES]), "batch input %d (%s): transcript differs from the "
                   "single-thread one", i, files[(i * 7) % NFILES]);
        }
        vkasr_session_free(s);
    }
    vkasr_model_free(m);

    /* models loaded at the same time on several threads, each transcribing one file */
    enum { NLOADERS = 3 };
    struct loader ld[NLOADERS];
    pthread_t lt[NLOADERS];
    bool started[NLOADERS];
    mp.log_callback = NULL;
    for (int i = 0; i < NLOADERS; i++) {
        ld[i] = (struct loader){.path = argv[1], .mp = mp, .file = i % NFILES};
        started[i] = pthread_create(&lt[i], NULL, load_and_transcribe, &ld[i]) == 0;
        EXPECT(started[i], "loader thread %d", i);
    }
    for (int i = 0; i < NLOADERS; i++) {
        if (!started[i])
            continue;
        pthread_join(lt[i], NULL);
        EXPECT(!ld[i].error[0], "loader %d: %s", i, ld[i].error);
        EXPECT(ld[i].error[0] || same(&ld[i].got, &want[ld[i].file]),
               "loader %d (%s): transcript differs from the single-thread one", i, files[ld[i].file]);
    }
    for (int i = 0; i < NLOADERS; i++) {
        vkasr_session_free(ld[i].session);
        vkasr_model_free(ld[i].model);
    }
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
