/* cpu_pool.c — the CPU backend's thread pool: one parallel loop at a time over an index range, cut into
 * chunks that the caller and the pool's workers claim in turn. The caller waits for the chunks to be
 * done, never for a worker to wake: on a busy machine it runs a short loop (a decoder step) alone
 * rather than wait for a descheduled worker. Workers sleep on a condition variable between loops (no
 * spinning: other processes share the cores). */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

struct cpu_pool {
    int threads;                 /* the caller plus threads - 1 workers                          */
    pthread_t *workers;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    uint64_t generation;         /* bumped for every loop; workers join each generation once     */
    bool quit;
    /* the current loop (written under lock before generation is bumped) */
    cpu_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    /* (generation << 40) | first index not yet claimed: a worker that joins late claims nothing of a
     * later loop (its generation no longer matches) */
    atomic_uint_fast64_t next;
    atomic_int_fast64_t done;    /* indices of the current loop finished                          */
};

/* ---- per-thread scratch (cpu_internal.h) ---------------------------------------------------------- */

struct thread_scratch {
    float *buf[CPU_SCRATCH_SLOTS];
    size_t cap[CPU_SCRATCH_SLOTS];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;
/* also held here: LeakSanitizer scans thread-local storage, not pthread_setspecific's values */
static _Thread_local struct thread_scratch *scratch_of_thread;

static void scratch_free(void *p) {
    struct thread_scratch *ts = p;
    for (int i = 0; i < CPU_SCRATCH_SLOTS; i++)
        free(ts->buf[i]);
    free(ts);
}

static void scratch_key_make(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

float *cpu_scratch_floats(int slot, size_t n) {
    struct thread_scratch *ts = scratch_of_thread;
    if (!ts) {
        pthread_once(&scratch_once, scratch_key_make);
        if (!scratch_key_ok || !(ts = calloc(1, sizeof *ts)))
            return NULL;
        if (pthread_setspecific(scratch_key, ts) != 0) {
            free(ts);
            return NULL;
        }
        scratch_of_thread = ts;
    }
    if (n > ts->cap[slot]) {
        float *nb = cpu_alloc_floats(n);
        if (!nb)
            return NULL;
        free(ts->buf[slot]);
        ts->buf[slot] = nb;
        ts->cap[slot] = n;
    }
    return ts->buf[slot];
}

/* ---- the pool -------------------------------------------------------------------------------------- */

#define IDX_BITS 40
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)

/* Claims and runs chunks of loop `gen` until none is left; the thread that finishes the last index
 * wakes the caller. */
static void drain(struct cpu_pool *p, uint64_t gen, cpu_range_fn fn, void *ctx, int64_t n, int64_t chunk) {
    uint64_t t = atomic_load(&p->next);
    for (;;) {
        if (t >> IDX_BITS != (gen & ((UINT64_C(1) << (64 - IDX_BITS)) - 1)))
            return;
        const int64_t i0 = (int64_t)(t & IDX_MASK);
        if (i0 >= n)
            return;
        const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        if (!atomic_compare_exchange_weak(&p->next, &t, t + (uint64_t)(i1 - i0)))
            continue; /* t reloaded */
        fn(ctx, i0, i1);
        if (atomic_fetch_add(&p->done, i1 - i0) + (i1 - i0) == n) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->idle);
            pthread_mutex_unlock(&p->lock);
        }
        t = atomic_load(&p->next);
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
        cpu_range_fn fn = p->fn;
        void *ctx = p->ctx;
        const int64_t n = p->n, chunk = p->chunk;
        pthread_mutex_unlock(&p->lock);
        drain(p, seen, fn, ctx, n, chunk);
        pthread_mutex_lock(&p->lock);
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
    atomic_init(&p->done, 0);
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
    if (t == 1 || n <= grain || n > (int64_t)IDX_MASK) {
        fn(ctx, 0, n);
        return;
    }
    /* about four chunks a thread: balance without many hand-offs */
    int64_t chunk = (n + 4 * t - 1) / (4 * t);
    chunk = chunk < grain ? grain : chunk;
    pthread_mutex_lock(&p->lock);
    const uint64_t gen = ++p->generation;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->done, 0);
    atomic_store(&p->next, (gen & ((UINT64_C(1) << (64 - IDX_BITS)) - 1)) << IDX_BITS);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    drain(p, gen, fn, ctx, n, chunk);
    if (atomic_load(&p->done) < n) { /* chunks still running on workers */
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->done) < n)
            pthread_cond_wait(&p->idle, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
}
