/* serve_queue.c — the request queue of `vkasr serve`: each request (decoded by its connection's thread)
 * queues a turn on the worker pool (pool.c, a worker per device session, two per GPU by default), and the
 * worker that runs it takes the next turn as soon as it is free: the requests waiting then (after
 * --batch-wait-ms, 0 by default; while another session of its device runs a turn, after letting the
 * requests still arriving join), packed in one vkasr_transcribe_batch call; inputs over --solo-seconds,
 * and streamed answers (stream=true: events as segments complete), run alone, in turns alternating with
 * the short. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

struct serve_queue {
    pthread_mutex_t mu;
    pthread_cond_t work;           /* a job arrived, or stop (ends a turn's batch wait)         */
    pthread_cond_t answered;       /* some job is done                                          */
    struct serve_job *head, *tail; /* FIFO of waiting jobs                                      */
    size_t count;
    bool stopping, last_long;
    size_t nready, nworkers;       /* workers whose warm-up has run, of those started           */
    const vkasr_model **running;   /* [nslots], by worker index: the model (device) of the turn
                                    * the worker runs, or NULL                                  */
    size_t nslots;                 /* the pool's workers                                        */
    double t_arrival;              /* when the newest request joined                            */
    atomic_bool abort;
    struct pool *pool;
    const struct serve_opts *o;
};

static bool is_long(const struct serve_queue *q, const struct serve_job *j) {
    return j->stream || (double)j->n / VKASR_SAMPLE_RATE > q->o->solo_seconds;
}

/* Absolute CLOCK_REALTIME time `s` seconds from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(double s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (!(s > 0)) /* already past: a tv_nsec out of [0, 1e9) would make the wait fail at once, forever */
        return ts;
    long long ns = (long long)ts.tv_nsec + (long long)(s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

/* Unlinks job j (whose predecessor is prev, NULL at the head). Lock held. */
static void unlink_job(struct serve_queue *q, struct serve_job *prev, struct serve_job *j) {
    if (prev)
        prev->next = j->next;
    else
        q->head = j->next;
    if (q->tail == j)
        q->tail = prev;
    j->next = NULL;
    q->count--;
}

/* The next turn, taken off the queue into jobs[] (at most max_batch): the oldest long input alone when
 * the previous turn was not a long one or no short input waits, else the oldest short inputs of the
 * oldest one's language (a batch has one). Lock held. */
static size_t take_turn(struct serve_queue *q, struct serve_job **jobs) {
    bool any_short = false, any_long = false;
    for (struct serve_job *j = q->head; j; j = j->next)
        *(is_long(q, j) ? &any_long : &any_short) = true;
    bool take_long = any_long && (!q->last_long || !any_short);
    size_t n = 0;
    struct serve_job *prev = NULL, *j = q->head;
    while (j && n < q->o->max_batch) {
        struct serve_job *next = j->next;
        if (is_long(q, j) == take_long && (n == 0 || !strcmp(j->lang, jobs[0]->lang))) {
            unlink_job(q, prev, j);
            jobs[n++] = j;
            if (take_long)
                break;
        } else {
            prev = j;
        }
        j = next;
    }
    q->last_long = take_long;
    return n;
}

/* What the batch call's result callback needs. */
struct turn {
    struct serve_queue *q;
    const struct pool_worker *w;
    struct serve_job **jobs;
    bool *answered;
    size_t n;
    double t_start;
};

static const char *device_name(const struct pool_worker *w) { return w->device ? w->device : "default"; }

/* Fills a job's error answer (message copied). */
static void answer_error(struct serve_job *j, int status, const char *message, const char *type) {
    j->status = status;
    j->body = serve_error_json(message, type, NULL, NULL, &j->body_len);
    j->content_type = "application/json";
}

static void answer(struct turn *t, size_t i, const vkasr_result *r) {
    struct serve_job *j = t->jobs[i];
    vkasr_status st = r ? vkasr_result_status(r) : VKASR_ERR_INTERNAL;
    j->compute_ms = (now_s() - t->t_start) * 1e3;
    j->queue_ms = (t->t_start - j->t_enqueue) * 1e3;
    j->batch_size = t->n;
    j->worker = t->w->index;
    j->device = device_name(t->w);
    if (st == VKASR_OK) {
        j->status = 200;
        j->body = serve_format(j, r, &j->body_len, &j->content_type);
        if (!j->body)
            answer_error(j, 500, "out of memory formatting the transcript", "server_error");
    } else if (st == VKASR_ABORTED) {
        answer_error(j, 503, "the server is shutting down", "server_error");
    } else if (st == VKASR_ERR_AUDIO || st == VKASR_ERR_INVALID_ARG) {
        answer_error(j, 400, vkasr_result_error(r), "invalid_request_error");
    } else {
        char msg[1200];
        snprintf(msg, sizeof msg, "transcription failed: %s", r ? vkasr_result_error(r) : "no result");
        answer_error(j, 500, msg, "server_error");
    }
    pthread_mutex_lock(&t->q->mu);
    j->done = true;
    t->answered[i] = true;
    pthread_cond_broadcast(&t->q->answered);
    pthread_mutex_unlock(&t->q->mu);
}

static void on_result(size_t index, const vkasr_result *result, void *ud) {
    struct turn *t = ud;
    if (index < t->n && !t->answered[index])
        answer(t, index, result);
}

static bool on_abort(void *ud) {
    struct serve_queue *q = ud;
    return atomic_load(&q->abort);
}

/* ---- streamed answers ---- */

struct stream_turn {
    struct serve_queue *q;
    struct serve_job *j;
    bool failed;                   /* an event could not be made (out of memory)                */
};

/* Appends an event (malloc'd, taken; NULL: out of memory) to the job's and wakes its reader. */
static void push_event(struct stream_turn *t, char *ev, size_t len) {
    struct serve_job *j = t->j;
    pthread_mutex_lock(&t->q->mu);
    if (ev && j->events_len + len > j->events_cap) {
        size_t cap = j->events_cap ? 2 * j->events_cap : 4096;
        while (cap < j->events_len + len)
            cap *= 2;
        char *p = realloc(j->events, cap);
        if (p) {
            j->events = p;
            j->events_cap = cap;
        }
    }
    if (ev && j->events_len + len <= j->events_cap) {
        memcpy(j->events + j->events_len, ev, len);
        j->events_len += len;
    } else {
        t->failed = true;
    }
    pthread_cond_broadcast(&t->q->answered);
    pthread_mutex_unlock(&t->q->mu);
    free(ev);
}

/* A segment is complete: its text goes out as a transcript.text.delta (after a space but the first). */
static void on_segment(const vkasr_result *partial, size_t index, void *ud) {
    struct stream_turn *t = ud;
    size_t ns = 0, len = 0;
    const vkasr_segment *s = vkasr_result_segments(partial, &ns);
    if (index < ns) {
        char *ev = serve_sse_event("transcript.text.delta", "delta", index ? " " : "", s[index].text, &len);
        push_event(t, ev, len);
    }
}

static bool on_abort_stream(void *ud) {
    struct stream_turn *t = ud;
    pthread_mutex_lock(&t->q->mu);
    bool gone = t->j->gone;
    pthread_mutex_unlock(&t->q->mu);
    return gone || atomic_load(&t->q->abort);
}

/* Runs a stream job alone on worker w: deltas as segments complete, then transcript.text.done; a failure
 * before the first event is an ordinary error answer, after it an error event. */
static void run_stream(struct serve_queue *q, const struct pool_worker *w, struct serve_job *j) {
    double t0 = now_s();
    struct stream_turn t = {q, j, false};
    float *samples = j->samples; /* the worker's from now on */
    j->samples = NULL;
    vkasr_transcribe_params tp = q->o->tp;
    tp.language = j->lang[0] ? j->lang : NULL;
    tp.abort_callback = on_abort_stream;
    tp.abort_user_data = &t;
    tp.segment_callback = on_segment;
    tp.segment_user_data = &t;
    const vkasr_result *r = NULL;
    vkasr_status st = vkasr_transcribe_pcm(w->session, samples, j->n, VKASR_SAMPLE_RATE, 1, &tp, &r);
    vkasr_free(samples);
    char msg[1200] = "";
    int status = 200;
    if (st == VKASR_OK) {
        size_t len = 0;
        char *ev = serve_sse_event("transcript.text.done", "text", "", vkasr_result_text(r), &len);
        push_event(&t, ev, len);
    }
    if (st == VKASR_ABORTED) {
        status = 503;
        snprintf(msg, sizeof msg, "the server is shutting down");
    } else if (st != VKASR_OK) {
        status = st == VKASR_ERR_AUDIO || st == VKASR_ERR_INVALID_ARG ? 400 : 500;
        snprintf(msg, sizeof msg, "transcription failed: %s", vkasr_session_last_error(w->session));
    } else if (t.failed) {
        status = 500;
        snprintf(msg, sizeof msg, "out of memory streaming the transcript");
    }
    j->compute_ms = (now_s() - t0) * 1e3;
    j->queue_ms = (t0 - j->t_enqueue) * 1e3;
    j->batch_size = 1;
    j->worker = w->index;
    j->device = device_name(w);
    pthread_mutex_lock(&q->mu);
    bool started = j->events_len > 0, gone = j->gone;
    pthread_mutex_unlock(&q->mu);
    if (status != 200 && started && !gone) { /* the answer's 200 is sent: the error goes as an event */
        size_t len = 0;
        char *e = serve_error_json(msg, status >= 500 ? "server_error" : "invalid_request_error", NULL, NULL, &len);
        char *ev = e ? malloc(len + 8) : NULL;
        if (ev)
            len = (size_t)snprintf(ev, len + 8, "data: %s\n", e);
        free(e);
        push_event(&t, ev, len);
    } else if (status != 200) {
        answer_error(j, status, msg, status >= 500 ? "server_error" : "invalid_request_error");
    } else {
        j->status = 200;
    }
    fprintf(stderr, "vkasr serve: streamed turn, %.2f s audio, %.0f ms: %s (worker %d, device %s)\n",
            (double)j->n / VKASR_SAMPLE_RATE, j->compute_ms, vkasr_status_string(st), w->index, device_name(w));
    pthread_mutex_lock(&q->mu);
    j->done = true;
    pthread_cond_broadcast(&q->answered);
    pthread_mutex_unlock(&q->mu);
}

bool serve_queue_wait_events(struct serve_queue *q, struct serve_job *job) {
    pthread_mutex_lock(&q->mu);
    while (!job->done && job->events_len == 0)
        pthread_cond_wait(&q->answered, &q->mu);
    bool events = job->events_len > 0 || job->status == 200; /* status is final once done */
    pthread_mutex_unlock(&q->mu);
    return events;
}

size_t serve_queue_read_events(struct serve_queue *q, struct serve_job *job, size_t pos, char *buf, size_t max) {
    pthread_mutex_lock(&q->mu);
    while (!job->done && job->events_len <= pos)
        pthread_cond_wait(&q->answered, &q->mu);
    size_t n = job->events_len > pos ? job->events_len - pos : 0;
    if (n > max)
        n = max;
    if (n)
        memcpy(buf, job->events + pos, n);
    pthread_mutex_unlock(&q->mu);
    return n;
}

void serve_queue_forget(struct serve_queue *q, struct serve_job *job) {
    pthread_mutex_lock(&q->mu);
    job->gone = true;
    while (!job->done)
        pthread_cond_wait(&q->answered, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

/* Runs one turn on worker w: every job gets its answer, whatever happens. */
static void run_turn(struct serve_queue *q, const struct pool_worker *w, struct serve_job **jobs, size_t n) {
    if (n == 1 && jobs[0]->stream) {
        run_stream(q, w, jobs[0]);
        return;
    }
    vkasr_batch_input *in = calloc(n, sizeof *in);
    const vkasr_result **res = calloc(n, sizeof *res);
    bool *answered = calloc(n, sizeof *answered);
    float **samples = calloc(n, sizeof *samples);
    struct turn t = {q, w, jobs, answered, n, now_s()};
    double audio = 0;
    vkasr_status st = VKASR_ERR_NO_MEMORY;
    if (in && res && answered && samples) {
        for (size_t i = 0; i < n; i++) {
            samples[i] = jobs[i]->samples; /* the worker's from now on */
            jobs[i]->samples = NULL;
            in[i] = (vkasr_batch_input){NULL, samples[i], jobs[i]->n, VKASR_SAMPLE_RATE, 1};
            audio += (double)jobs[i]->n / VKASR_SAMPLE_RATE;
        }
        vkasr_transcribe_params tp = q->o->tp;
        tp.language = jobs[0]->lang[0] ? jobs[0]->lang : NULL; /* take_turn: one language a turn */
        tp.abort_callback = on_abort;
        tp.abort_user_data = q;
        vkasr_batch_params bp = vkasr_batch_params_default();
        bp.result_callback = on_result;
        bp.result_user_data = &t;
        st = vkasr_transcribe_batch(w->session, in, n, &tp, &bp, res);
        fprintf(stderr, "vkasr serve: turn of %zu request%s, %.2f s audio, %.0f ms: %s (worker %d, device %s)\n", n,
                n == 1 ? "" : "s", audio, (now_s() - t.t_start) * 1e3, vkasr_status_string(st), w->index,
                device_name(w));
    }
    for (size_t i = 0; i < n; i++) {
        if (answered && answered[i])
            continue;
        if (res && res[i]) { /* a result the callback did not see */
            answer(&t, i, res[i]);
            continue;
        }
        struct serve_job *j = jobs[i];
        char msg[1200];
        snprintf(msg, sizeof msg, "transcription failed: %s",
                 st == VKASR_ERR_NO_MEMORY && !in ? "out of host memory" : vkasr_session_last_error(w->session));
        j->queue_ms = (t.t_start - j->t_enqueue) * 1e3;
        j->batch_size = n;
        j->worker = w->index;
        j->device = device_name(w);
        answer_error(j, st == VKASR_ABORTED ? 503 : 500, msg, "server_error");
        pthread_mutex_lock(&q->mu);
        j->done = true;
        pthread_cond_broadcast(&q->answered);
        pthread_mutex_unlock(&q->mu);
    }
    for (size_t i = 0; samples && i < n; i++)
        vkasr_free(samples[i]);
    free(samples);
    free(answered);
    free(res);
    free(in);
}

/* Batches of silence shaped like the turns of a loaded server, for --warm-up batches: a few inputs (the
 * decoder's kernels for 2 and 4 hypotheses), a dozen of 10 s (about 1500 encoder rows: the middle GEMM
 * tiles; 12 hypotheses) and 40 of 10 s (5000 rows: the largest tiles, the tall one included; 40
 * hypotheses). A half-second warm-up creates none of their pipelines, so the first loaded turns created
 * them, 0.2-0.5 s each on an H100 without a pipeline cache (docs/server.md, "Warm-up"). */
static const struct {
    unsigned inputs, seconds;
} warm_turns[] = {{2, 5}, {4, 5}, {12, 10}, {40, 10}};

/* The warm-up's batches on worker w; the audio they held (seconds), or -1 (after a warning) when one
 * failed. */
static double warm_up_batches(struct pool_worker *w, const struct serve_queue *q) {
    enum { MAX_INPUTS = 40, MAX_SECONDS = 10 };
    float *silence = calloc((size_t)MAX_SECONDS * VKASR_SAMPLE_RATE, sizeof *silence);
    vkasr_batch_input in[MAX_INPUTS];
    double audio = 0;
    bool ok = silence != NULL;
    for (size_t t = 0; ok && t < sizeof warm_turns / sizeof *warm_turns; t++) {
        size_t n = warm_turns[t].inputs < q->o->max_batch ? warm_turns[t].inputs : q->o->max_batch;
        for (size_t i = 0; i < n; i++)
            in[i] = (vkasr_batch_input){NULL, silence, (size_t)warm_turns[t].seconds * VKASR_SAMPLE_RATE,
                                        VKASR_SAMPLE_RATE, 1};
        const vkasr_result *res[MAX_INPUTS] = {NULL};
        vkasr_batch_params bp = vkasr_batch_params_default();
        ok = vkasr_transcribe_batch(w->session, in, n, &q->o->tp, &bp, res) == VKASR_OK;
        audio += (double)n * warm_turns[t].seconds;
    }
    if (!ok)
        fprintf(stderr, "vkasr serve: warning: device %s: a warm-up batch failed: %s\n", device_name(w),
                silence ? vkasr_session_last_error(w->session) : "out of memory");
    free(silence);
    return ok ? audio : -1;
}

/* The start of each pool worker: a warm-up transcription (and on a GPU, or with --warm-up batches, the
 * batches above), then the worker counts as ready. */
static void warm_up(struct pool_worker *w, void *arg) {
    struct serve_queue *q = arg;
    const double t0 = now_s();
    static const float silence[VKASR_SAMPLE_RATE / 2];
    const vkasr_result *r = NULL;
    vkasr_status st =
        vkasr_transcribe_pcm(w->session, silence, VKASR_SAMPLE_RATE / 2, VKASR_SAMPLE_RATE, 1, &q->o->tp, &r);
    if (st != VKASR_OK)
        fprintf(stderr, "vkasr serve: warning: device %s: the warm-up transcription failed: %s\n", device_name(w),
                vkasr_session_last_error(w->session));
    const enum serve_warm mode = q->o->warm_up;
    double batches = 0;
    if (st == VKASR_OK &&
        (mode == SERVE_WARM_BATCHES || (mode == SERVE_WARM_AUTO && !vkasr_model_on_cpu(w->model))))
        batches = warm_up_batches(w, q);
    if (batches > 0)
        fprintf(stderr, "vkasr serve: worker %d warmed up in %.0f ms: 0.5 s alone, then batches of %.0f s of audio "
                        "(device %s)\n", w->index, (now_s() - t0) * 1e3, batches, device_name(w));
    else
        fprintf(stderr, "vkasr serve: worker %d warmed up in %.0f ms: 0.5 s alone (device %s)\n", w->index,
                (now_s() - t0) * 1e3, device_name(w));
    pthread_mutex_lock(&q->mu);
    if (++q->nready == q->nworkers)
        fprintf(stderr, "vkasr serve: ready\n");
    pthread_mutex_unlock(&q->mu);
}

/* Whether a worker other than w runs a turn on w's device (its model). Lock held. */
static bool device_busy(const struct serve_queue *q, const struct pool_worker *w) {
    for (size_t i = 0; i < q->nslots; i++)
        if ((int)i != w->index && q->running[i] == w->model)
            return true;
    return false;
}

/* While another session of the device runs a turn, a free worker lets the requests that are still
 * arriving join (each within GATHER_GAP_S of the last, for GATHER_MAX_S at most) instead of taking the
 * first one or two alone: the clients answered by a turn send their next requests over a few
 * milliseconds, and a turn of one request ties its session up for most of a turn's decoding (on the
 * H100, 64 clients: turns of 1-3 requests took 45-55 ms, of 30 about 110 ms). A device with no turn
 * running takes the waiting requests at once (a lone request's latency is unchanged). */
#define GATHER_GAP_S 0.004
#define GATHER_MAX_S 0.025

/* A turn, the pool's job queued with each request: a free worker takes the requests waiting (none: it
 * waits for one) — at once where its device runs no other turn, else after the gathering above
 * (--batch-wait-ms 0), or after giving others the batch wait from the oldest's arrival unless the turn
 * is full. Another worker may have taken the requests meanwhile: each request queues one turn and each
 * turn takes at least one request while any waits, so none is left without a turn to run it. */
static void next_turn(struct pool_worker *w, void *arg) {
    struct serve_queue *q = arg;
    struct serve_job *jobs[SERVE_MAX_BATCH];
    pthread_mutex_lock(&q->mu);
    size_t n = 0;
    if (q->head && q->o->batch_wait_ms == 0) {
        const double t_end = now_s() + GATHER_MAX_S;
        while (q->head && !q->stopping && q->count < q->o->max_batch && device_busy(q, w)) {
            const double until = q->t_arrival + GATHER_GAP_S < t_end ? q->t_arrival + GATHER_GAP_S : t_end;
            struct timespec ts = deadline_in(until - now_s());
            if (pthread_cond_timedwait(&q->work, &q->mu, &ts) != 0 && now_s() >= until)
                break;
        }
        n = take_turn(q, jobs);
    } else if (q->head) {
        struct timespec until = deadline_in(q->head->t_enqueue + q->o->batch_wait_ms * 1e-3 - now_s());
        while (!q->stopping && q->count < q->o->max_batch && pthread_cond_timedwait(&q->work, &q->mu, &until) == 0) {
        }
        n = take_turn(q, jobs);
    }
    if (n)
        q->running[w->index] = w->model;
    pthread_mutex_unlock(&q->mu);
    if (!n)
        return;
    run_turn(q, w, jobs, n);
    pthread_mutex_lock(&q->mu);
    q->running[w->index] = NULL;
    pthread_cond_broadcast(&q->work); /* the device is free: a gathering worker stops waiting */
    pthread_mutex_unlock(&q->mu);
}

struct serve_queue *serve_queue_start(struct pool *pool, const struct serve_opts *o) {
    struct serve_queue *q = calloc(1, sizeof *q);
    if (!q || o->max_batch > SERVE_MAX_BATCH) {
        fprintf(stderr, "vkasr serve: %s\n", q ? "--max-batch is too large" : "out of memory");
        free(q);
        return NULL;
    }
    q->pool = pool;
    q->o = o;
    q->nworkers = (size_t)pool_size(pool);
    q->nslots = q->nworkers;
    q->running = calloc(q->nslots ? q->nslots : 1, sizeof *q->running);
    if (!q->running) {
        fprintf(stderr, "vkasr serve: out of memory\n");
        free(q);
        return NULL;
    }
    atomic_init(&q->abort, false);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->answered, NULL);
    /* the count is final before any warm-up ends; a worker that did not start is left out of it */
    pthread_mutex_lock(&q->mu);
    int started = pool_start(pool, warm_up, q);
    q->nworkers = (size_t)started;
    pthread_mutex_unlock(&q->mu);
    if (started == 0) {
        serve_queue_stop(q);
        return NULL;
    }
    return q;
}

bool serve_queue_ready(struct serve_queue *q) {
    pthread_mutex_lock(&q->mu);
    bool r = q->nready == q->nworkers;
    pthread_mutex_unlock(&q->mu);
    return r;
}

/* The request joins the FIFO with a turn queued on the pool for it (lock order: the queue's, then the
 * pool's). */
bool serve_queue_push(struct serve_queue *q, struct serve_job *job) {
    pthread_mutex_lock(&q->mu);
    bool ok = !q->stopping && q->count < q->o->max_queue && pool_submit(q->pool, next_turn, q);
    if (ok) {
        job->next = NULL;
        job->done = false;
        if (q->tail)
            q->tail->next = job;
        else
            q->head = job;
        q->tail = job;
        q->count++;
        q->t_arrival = now_s();
        pthread_cond_broadcast(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

void serve_queue_wait(struct serve_queue *q, struct serve_job *job) {
    pthread_mutex_lock(&q->mu);
    while (!job->done)
        pthread_cond_wait(&q->answered, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

void serve_queue_abort(struct serve_queue *q) { atomic_store(&q->abort, true); }

void serve_queue_stop(struct serve_queue *q) {
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
    pool_stop(q->pool); /* the turns queued run (no batch wait now), then the threads end */
    pthread_cond_destroy(&q->answered);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->mu);
    free(q->running);
    free(q);
}
