/* live_harness.h — what the live-transcription test and benchmark share (header-only, public API only):
 * - live_audio_build(): a long recording made of held-out clips (a directory with WAV files and refs.tsv,
 *   as test_model_wer.c reads it): `rounds` passes over the clips, each pass in a different order, each
 *   clip after a pause of 0.16-1.6 s drawn from a fixed seed, so window seams fall at many places
 *   within words and pauses. Pauses hold white noise at the level of the clip's last 50 ms (the clips
 *   carry light noise, as a microphone does; digital silence would be a signal no recording has);
 * - live_run(): feeds samples to a stream in 20 ms pieces at `speed` times real time (0: as fast as
 *   possible) and collects the final text, each final word's latency and the callbacks' bookkeeping. */
#ifndef VKASR_TESTS_LIVE_HARNESS_H
#define VKASR_TESTS_LIVE_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkasr.h"

struct live_audio {
    float *samples;                  /* 16 kHz mono                                                  */
    size_t n;
    char *ref;                       /* the clips' reference texts in order, space-separated          */
    size_t clips;                    /* clips placed                                                  */
};

static inline void live_audio_free(struct live_audio *a) {
    free(a->samples);
    free(a->ref);
    memset(a, 0, sizeof *a);
}

/* xorshift32: the same pauses and orders everywhere */
static inline unsigned live_audio_rand(unsigned *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* A standard normal deviate (Box-Muller on two xorshift draws). */
static inline double live_audio_gauss(unsigned *s) {
    double u = ((double)live_audio_rand(s) + 1.0) / 4294967297.0, v = (double)live_audio_rand(s) / 4294967296.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Appends n samples of x, or of white noise of RMS `noise` when x is NULL. */
static inline int live_audio_append(struct live_audio *a, size_t *cap, const float *x, size_t n, double noise,
                                    unsigned *seed) {
    if (a->n + n > *cap) {
        size_t c = *cap ? *cap : 1 << 20;
        while (c < a->n + n)
            c *= 2;
        float *p = realloc(a->samples, c * sizeof *p);
        if (!p)
            return -1;
        a->samples = p;
        *cap = c;
    }
    if (x)
        memcpy(a->samples + a->n, x, n * sizeof *x);
    else
        for (size_t i = 0; i < n; i++)
            a->samples[a->n + i] = (float)(noise * live_audio_gauss(seed));
    a->n += n;
    return 0;
}

/* Builds the recording; 0 on success, -1 with a message in msg. */
static inline int live_audio_build(const char *dir, int rounds, struct live_audio *a, char *msg, size_t msg_size) {
    enum { MAX_CLIPS = 256 };
    char *files[MAX_CLIPS], *texts[MAX_CLIPS];
    size_t nclips = 0, cap = 0, ref_len = 0;
    memset(a, 0, sizeof *a);
    char path[4096], line[4096];
    snprintf(path, sizeof path, "%s/refs.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, msg_size, "cannot open %s", path);
        return -1;
    }
    int rc = 0;
    if (!fgets(line, sizeof line, f)) /* header */
        line[0] = '\0';
    while (nclips < MAX_CLIPS && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        char *tab3 = tab2 ? strchr(tab2 + 1, '\t') : NULL;
        if (!tab3)
            continue;
        *tab1 = '\0';
        files[nclips] = strdup(line);
        texts[nclips] = strdup(tab3 + 1);
        if (!files[nclips] || !texts[nclips]) {
            free(files[nclips]);
            free(texts[nclips]);
            rc = -1;
            snprintf(msg, msg_size, "out of memory");
            break;
        }
        ref_len += strlen(texts[nclips]) + 1;
        nclips++;
    }
    fclose(f);
    if (rc == 0 && nclips == 0) {
        snprintf(msg, msg_size, "no clips listed in %s", path);
        rc = -1;
    }
    float *clip[MAX_CLIPS] = {0};
    size_t clip_n[MAX_CLIPS] = {0};
    for (size_t i = 0; rc == 0 && i < nclips; i++) {
        vkasr_error err;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (vkasr_audio_load(path, &clip[i], &clip_n[i], &err) != VKASR_OK) {
            snprintf(msg, msg_size, "%s", err.message);
            rc = -1;
        }
    }
    if (rc == 0 && !(a->ref = calloc(ref_len * (size_t)(rounds > 0 ? rounds : 1) + 1, 1))) {
        snprintf(msg, msg_size, "out of memory");
        rc = -1;
    }
    unsigned seed = 0x5eed1234u;
    size_t order[MAX_CLIPS];
    for (size_t i = 0; i < nclips; i++)
        order[i] = i;
    for (int r = 0; rc == 0 && r < rounds; r++) {
        for (size_t i = nclips; i > 1; i--) { /* a new order each pass (Fisher-Yates) */
            size_t j = live_audio_rand(&seed) % i, t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        for (size_t k = 0; rc == 0 && k < nclips; k++) {
            size_t i = order[k];
            size_t pause = 2560 + live_audio_rand(&seed) % 23041; /* 0.16 .. 1.6 s */
            double noise = 0;
            size_t tail = clip_n[i] < 800 ? clip_n[i] : 800;
            for (size_t q = clip_n[i] - tail; q < clip_n[i]; q++)
                noise += (double)clip[i][q] * clip[i][q];
            noise = tail ? sqrt(noise / (double)tail) : 0;
            if (live_audio_append(a, &cap, NULL, pause, noise, &seed) ||
                live_audio_append(a, &cap, clip[i], clip_n[i], 0, &seed)) {
                snprintf(msg, msg_size, "out of memory");
                rc = -1;
                break;
            }
            if (a->clips++)
                strcat(a->ref, " ");
            strcat(a->ref, texts[i]);
        }
    }
    if (rc == 0 && live_audio_append(a, &cap, NULL, 8000, 0.003, &seed)) { /* half a second of quiet at the end */
        snprintf(msg, msg_size, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; i < nclips; i++) {
        vkasr_free(clip[i]);
        free(files[i]);
        free(texts[i]);
    }
    if (rc != 0)
        live_audio_free(a);
    return rc;
}


/* ---- running a stream ---------------------------------------------------------------------------- */

struct live_result {
    char *text;                      /* final updates' texts, space-separated                          */
    size_t len, cap;
    double *latency;                 /* per final word: seconds from its end being pushed to the update */
    size_t n_latency, cap_latency;
    size_t finals, partials, segment_ends, words;
    int order_errors;                /* a final word starting before the previous final word's start   */
    int duplicates;                  /* a final word with the previous one's text, overlapping it by more
                                        than half the shorter one: the same word made final twice       */
    double prev_start, prev_end;
    char prev[256];
    int bad_updates;                 /* word/token indices or times inconsistent within an update      */
    double last_start;
    double t0, speed;
    vkasr_stream_stats stats;
    vkasr_status status;
    char error[1024];
};

static inline double live_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void live_result_free(struct live_result *r) {
    free(r->text);
    free(r->latency);
    memset(r, 0, sizeof *r);
}

static inline int live_text_put(struct live_result *r, const char *s) {
    size_t n = strlen(s);
    if (r->len + n + 2 > r->cap) {
        size_t c = r->cap ? r->cap : 4096;
        while (c < r->len + n + 2)
            c *= 2;
        char *p = realloc(r->text, c);
        if (!p)
            return -1;
        r->text = p;
        r->cap = c;
    }
    if (r->len)
        r->text[r->len++] = ' ';
    memcpy(r->text + r->len, s, n + 1);
    r->len += n;
    return 0;
}

static inline void live_on_final(const vkasr_stream_update *u, void *ud) {
    struct live_result *r = ud;
    double now = live_now();
    r->finals++;
    r->segment_ends += u->segment_end;
    if (u->n_words && live_text_put(r, u->text))
        r->bad_updates++;
    for (size_t i = 0; i < u->n_words; i++) {
        const vkasr_word *w = &u->words[i];
        if (w->first_token + w->n_tokens > u->n_tokens || !(w->start <= w->end))
            r->bad_updates++;
        if (w->start < r->last_start)
            r->order_errors++;
        r->last_start = w->start;
        double lo = w->start > r->prev_start ? w->start : r->prev_start;
        double hi = w->end < r->prev_end ? w->end : r->prev_end;
        double shorter = w->end - w->start < r->prev_end - r->prev_start ? w->end - w->start : r->prev_end - r->prev_start;
        if (r->words && strcmp(w->text, r->prev) == 0 && shorter > 0 && hi - lo > 0.5 * shorter)
            r->duplicates++;
        r->prev_start = w->start;
        r->prev_end = w->end;
        snprintf(r->prev, sizeof r->prev, "%s", w->text);
        r->words++;
        if (r->speed > 0 && r->n_latency < r->cap_latency)
            r->latency[r->n_latency++] = now - (r->t0 + w->end / r->speed);
    }
}

static inline void live_on_partial(const vkasr_stream_update *u, void *ud) {
    struct live_result *r = ud;
    r->partials++;
    if (u->segment_end)
        r->bad_updates++;
}

/* Feeds x[0, n) (16 kHz) through a new stream on session s with params p (its callbacks are replaced)
 * and finishes it. Returns the stream's final status (also in r->status). */
static inline vkasr_status live_run(vkasr_session *s, const float *x, size_t n, vkasr_stream_params p, double speed,
                                    struct live_result *r) {
    memset(r, 0, sizeof *r);
    r->speed = speed;
    r->cap_latency = n / 1600 + 16; /* more than one word per 0.1 s never happens */
    r->latency = malloc(r->cap_latency * sizeof *r->latency);
    r->last_start = -1e300;
    p.final_callback = live_on_final;
    p.partial_callback = live_on_partial;
    p.user_data = r;
    vkasr_stream *st = NULL;
    vkasr_error err;
    if (!r->latency) {
        r->status = VKASR_ERR_NO_MEMORY;
        return r->status;
    }
    r->status = vkasr_stream_create(s, &p, &st, &err);
    if (r->status != VKASR_OK) {
        snprintf(r->error, sizeof r->error, "%s", err.message);
        return r->status;
    }
    const size_t piece = 320; /* 20 ms, what audio callbacks typically deliver */
    r->t0 = live_now();
    for (size_t i = 0; i < n && r->status == VKASR_OK; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        if (speed > 0) { /* wait until this piece has "arrived" */
            double due = r->t0 + (double)(i + k) / VKASR_SAMPLE_RATE / speed, wait = due - live_now();
            if (wait > 0) {
                struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        r->status = vkasr_stream_push(st, x + i, k, VKASR_SAMPLE_RATE);
    }
    vkasr_status fin = vkasr_stream_finish(st);
    if (r->status == VKASR_OK)
        r->status = fin;
    if (r->status != VKASR_OK)
        snprintf(r->error, sizeof r->error, "%s", vkasr_stream_last_error(st));
    vkasr_stream_get_stats(st, &r->stats);
    vkasr_stream_free(st);
    if (!r->text)
        live_text_put(r, "");
    return r->status;
}

static inline int live_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of v[0, n) by the nearest rank; sorts v. */
static inline double live_quantile(double *v, size_t n, double q) {
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, live_cmp_double);
    size_t k = (size_t)ceil(q * (double)n);
    return v[k ? k - 1 : 0];
}

#endif
