/* batch_prefetch.c — decoding the batched path's windows ahead of the workers (batch_prefetch.h): one
 * thread walks the windows in order, each window's files decoded on a few threads, at most one window
 * ahead of the ones the workers took. */
#define _POSIX_C_SOURCE 200809L
#include "batch_prefetch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vkasr.h"

#define THREADS_MAX 8

struct prefetch {
    const char *const *paths;
    const size_t *first, *count;
    size_t nw;
    int threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t taken;            /* windows the workers took (window w is decoded once w <= taken)       */
    bool stop;
    struct decoded **slot;   /* slot[w]: window w decoded (NULL: out of memory), owned here until taken */
    bool *done;
    pthread_t thread;
};

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* One window's decoding: threads take the next file until none is left. */
struct job {
    const char *const *paths;
    struct decoded *d;
    size_t n;
    atomic_size_t next;
    _Atomic double cpu_ms;
};

static void *decode_files(void *arg) {
    struct job *j = arg;
    double mine = 0;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
        if (strcmp(j->paths[i], "-") == 0)
            continue; /* standard input: read by the library, once */
        const double t0 = ms_now();
        vkasr_error err;
        if (vkasr_audio_load(j->paths[i], &j->d->pcm[i], &j->d->n[i], &err) != VKASR_OK)
            j->d->pcm[i] = NULL; /* the library decodes it again and reports why it fails */
        mine += ms_now() - t0;
    }
    double cur = atomic_load(&j->cpu_ms);
    while (!atomic_compare_exchange_weak(&j->cpu_ms, &cur, cur + mine))
        ;
    return NULL;
}

static struct decoded *decode_window(const struct prefetch *p, size_t w) {
    const size_t n = p->count[w];
    struct decoded *d = calloc(1, sizeof *d);
    if (d) {
        d->pcm = calloc(n ? n : 1, sizeof *d->pcm);
        d->n = calloc(n ? n : 1, sizeof *d->n);
    }
    if (!d || !d->pcm || !d->n) {
        prefetch_release(d, 0);
        return NULL;
    }
    const double t0 = ms_now();
    struct job j = {.paths = p->paths + p->first[w], .d = d, .n = n};
    atomic_init(&j.next, 0);
    atomic_init(&j.cpu_ms, 0.0);
    pthread_t th[THREADS_MAX];
    size_t extra = (size_t)p->threads - 1, started = 0;
    extra = extra < n / 4 ? extra : n / 4; /* a few files are not worth a thread */
    for (; started < extra; started++)
        if (pthread_create(&th[started], NULL, decode_files, &j) != 0)
            break; /* fewer threads: this one decodes what is left */
    decode_files(&j);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    d->wall_ms = ms_now() - t0;
    d->cpu_ms = atomic_load(&j.cpu_ms);
    return d;
}

static void *prefetch_main(void *arg) {
    struct prefetch *p = arg;
    for (size_t w = 0; w < p->nw; w++) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && w > p->taken)
            pthread_cond_wait(&p->cv, &p->mu);
        const bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        struct decoded *d = decode_window(p, w);
        pthread_mutex_lock(&p->mu);
        p->slot[w] = d;
        p->done[w] = true;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

struct prefetch *prefetch_start(const char *const *paths, const size_t *first, const size_t *count, size_t nw,
                                int threads) {
    struct prefetch *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (threads < 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 1 ? (int)cores : 1;
    }
    *p = (struct prefetch){.paths = paths, .first = first, .count = count, .nw = nw,
                           .threads = threads < THREADS_MAX ? threads : THREADS_MAX};
    p->slot = calloc(nw ? nw : 1, sizeof *p->slot);
    p->done = calloc(nw ? nw : 1, sizeof *p->done);
    if (!p->slot || !p->done) {
        free(p->slot);
        free(p->done);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, prefetch_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p->slot);
        free(p->done);
        free(p);
        return NULL;
    }
    return p;
}

struct decoded *prefetch_take(struct prefetch *p, size_t w, double *waited_ms) {
    const double t0 = ms_now();
    pthread_mutex_lock(&p->mu);
    if (w + 1 > p->taken)
        p->taken = w + 1; /* the prefetcher may go on to window w + 1 */
    pthread_cond_broadcast(&p->cv);
    while (!p->done[w] && !p->stop)
        pthread_cond_wait(&p->cv, &p->mu);
    struct decoded *d = p->slot[w];
    p->slot[w] = NULL;
    pthread_mutex_unlock(&p->mu);
    *waited_ms = ms_now() - t0;
    return d;
}

void prefetch_release(struct decoded *d, size_t count) {
    if (!d)
        return;
    for (size_t i = 0; d->pcm && i < count; i++)
        vkasr_free(d->pcm[i]);
    free(d->pcm);
    free(d->n);
    free(d);
}

int prefetch_threads(const struct prefetch *p) { return p ? p->threads : 0; }

void prefetch_stop(struct prefetch *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    for (size_t w = 0; w < p->nw; w++)
        prefetch_release(p->slot[w], p->count[w]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->slot);
    free(p->done);
    free(p);
}
