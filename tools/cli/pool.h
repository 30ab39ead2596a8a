/* pool.h — the CLI's worker pool: the devices of -d / --devices, a model per distinct device shared by
 * its sessions, and a thread per session taking jobs (a callback and its data) from one FIFO queue.
 * Batched transcription (transcribe_batch.c) and the server (serve/) run on it; a job sees its worker's
 * session and device, so a scheduler can queue any unit of work (a window, a turn, a stream's step). */
#ifndef VKASR_CLI_POOL_H
#define VKASR_CLI_POOL_H

#include <stdbool.h>

#include "vkasr.h"

#define POOL_MAX_SESSIONS 8 /* --sessions: sessions per device at most */

/* The devices a command runs on: --devices split, or the one device of -d (or the default). */
struct pool_devices {
    const char **names; /* n entries as named; a single NULL: the default device (neither option) */
    int n;
    char *buf;          /* --devices, split in place */
};
/* Splits `list` (--devices, its syntax checked by arg_devices; NULL: the one device `device`, -d's value
 * or NULL) and checks each entry as -d is (check_device_backend). EXIT_OK, or EXIT_USAGE after a message
 * (both options given; a backend this build lacks), EXIT_FAIL when out of memory. */
int pool_devices_parse(const char *list, const char *device, struct pool_devices *d);
void pool_devices_free(struct pool_devices *d);

/* A worker: one session on its device's model, one thread. Jobs and the start callback get it. */
struct pool_worker {
    int index;              /* the first session of every device entry come first, then the second ... */
    const char *device;     /* as named; NULL: the default device */
    vkasr_model *model;     /* shared with the other workers on the same device */
    vkasr_session *session;
};

/* A job, or the start callback: runs on the worker's thread. */
typedef void (*pool_fn)(struct pool_worker *w, void *arg);

struct pool_params {
    const char *model;                  /* the model's path                                          */
    vkasr_model_params mp;              /* its device is set per entry                               */
    const struct pool_devices *devices;
    int sessions;                       /* per device entry; 0: auto (pool_sessions)                 */
    bool verbose;                       /* a line per worker on stderr: device, precision, sharing   */
};

/* Sessions per device entry for `sessions` (0: auto: two where one device is named and it is a GPU
 * through Vulkan, whose queue takes one session's work while the other's host work and decoder run; one
 * on the CPU backend, on CUDA and with several devices). A CPU device through Vulkan (lavapipe) is known
 * only once loaded: pool_open then keeps one session per entry. */
int pool_sessions(const struct pool_devices *d, int sessions);

struct pool;
/* Loads the model once per distinct device (the devices at the same time, a thread each) and opens the
 * workers' sessions; no job runs before pool_start. EXIT_OK, or the exit code of the first failure after
 * a message naming its device; *out is then NULL and everything is freed. */
int pool_open(const struct pool_params *p, struct pool **out);
int pool_size(const struct pool *p);   /* workers                    */
int pool_models(const struct pool *p); /* models loaded (devices)    */
struct pool_worker *pool_worker(struct pool *p, int i);

/* Starts the workers' threads: each runs start(worker, arg) (NULL: nothing), then takes jobs. Returns
 * the number started (a message for each that did not); the others take no jobs. */
int pool_start(struct pool *p, pool_fn start, void *arg);
/* Queues fn(worker, arg) for the next free worker, jobs taken in the order queued. false when out of
 * memory or stopping (the job will not run). */
bool pool_submit(struct pool *p, pool_fn fn, void *arg);
/* Waits until every queued job has run. */
void pool_wait(struct pool *p);
/* Runs what is queued, then joins the threads; the sessions stay open. */
void pool_stop(struct pool *p);
/* pool_stop, then frees the sessions and models. NULL is a no-op. */
void pool_free(struct pool *p);

/* The single-device commands' model and session: loads `model` with mp and opens a session; on failure
 * frees both (*m and *s NULL), says why on stderr and returns the exit code. */
int pool_open_single(const char *model, const vkasr_model_params *mp, vkasr_model **m, vkasr_session **s);

#endif
