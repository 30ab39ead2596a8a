/* cpu_pool.c — the CPU backend's thread pool: one parallel loop at a time over an index range, cut into
 * chunks that the caller and the pool's workers take in turn. Workers sleep on a condition variable
 * between loops (no spinning: OpenBLAS and other sessions share the cores). */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

struct cpu_pool {
    int threads;                 /* the caller plus threads - 1 workers                          */
    pthread_t *workers;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    uint64_t generation;         /* bumped for every loop; workers run each generation once      */
    int busy;                    /* workers still inside the current loop                        */
    bool quit;
    /* the current loop */
    cpu_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_int_fast64_t next;    /* first index not yet taken                                   */
};

/* Takes chunks of the current loop until none is left. */
static void drain(struct cpu_pool *p) {
    for (;;) {
        int64_t i0 = atomic_fetch_add(&p->next, p->chunk);
        if (i0 >= p->n)
            return;
        int64_t i1 = i0 + p->chunk < p->n ? i0 + p->chunk : p->n;
        p->fn(p->ctx, i0, i1);
    }
}

static void *worker(void *arg) {
    struct cpu_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->lock);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        drain(p);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

vkasr_status cpu_pool_create(int threads, struct cpu_pool **out, struct err *e) {
    struct cpu_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->workers = calloc((size_t)(threads > 1 ? threads - 1 : 1), sizeof *p->workers))) {
        free(p);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory creating the CPU backend's thread pool");
    }
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    atomic_init(&p->next, 0);
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, worker, p) != 0)
            break; /* fewer workers: the loops still complete, on fewer threads */
        p->started++;
    }
    *out = p;
    return VKASR_OK;
}

void cpu_pool_destroy(struct cpu_pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->quit = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

int cpu_pool_threads(const struct cpu_pool *p) { return p ? p->started + 1 : 1; }

void cpu_pool_run(struct cpu_pool *p, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx) {
    if (n <= 0)
        return;
    grain = grain < 1 ? 1 : grain;
    const int t = cpu_pool_threads(p);
    if (t == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    /* about four chunks a thread: balance without many hand-offs */
    int64_t chunk = (n + 4 * t - 1) / (4 * t);
    chunk = chunk < grain ? grain : chunk;
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->busy = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    drain(p);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
