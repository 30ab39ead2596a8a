/* batch_prefetch.h — the batched path's file decoding ahead of the workers: a thread decodes the next
 * window's files (on a few threads of its own) while the windows before it transcribe. */
#ifndef VKASR_CLI_BATCH_PREFETCH_H
#define VKASR_CLI_BATCH_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>

/* One window's decoded inputs: pcm[i] (16 kHz mono, n[i] samples), or NULL where decoding failed or was
 * not tried ("-"): such an input goes to the library by its path, which reports its error. */
struct decoded {
    float **pcm;
    size_t *n;
    double wall_ms, cpu_ms; /* decoding the window: elapsed, summed over its files */
};

struct prefetch;

/* Starts decoding windows 0 .. nw - 1 (window w: paths[first[w] .. first[w] + count[w])) in order, each
 * at most one window ahead of those taken: the samples of the running windows and one more are held.
 * threads: decoding threads per window (< 1: one per core, at most 8). NULL when out of memory or no
 * thread starts. */
struct prefetch *prefetch_start(const char *const *paths, const size_t *first, const size_t *count, size_t nw,
                                int threads);
/* Window w's decoded inputs, waiting for them (*waited_ms: how long); windows are taken in order, each
 * once. NULL when out of memory (the window then goes by paths). Release with prefetch_release(). */
struct decoded *prefetch_take(struct prefetch *p, size_t w, double *waited_ms);
void prefetch_release(struct decoded *d, size_t count);
/* The decoding threads per window. */
int prefetch_threads(const struct prefetch *p);
/* Stops decoding, waits for the thread, frees the windows never taken. NULL is a no-op. */
void prefetch_stop(struct prefetch *p);

#endif
