/* pool.c — the CLI's worker pool (pool.h): device list → a model per distinct device → sessions → a
 * thread per session running queued jobs. It knows nothing of what the jobs do; batched transcription
 * and the server schedule their work on it. */
#define _POSIX_C_SOURCE 200809L
#include "pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- the device list ---- */

int pool_devices_parse(const char *list, const char *device, struct pool_devices *d) {
    *d = (struct pool_devices){0};
    if (list && device) {
        fprintf(stderr, "vkasr: --devices and -d both name devices: use one\n");
        return EXIT_USAGE;
    }
    d->names = calloc(list ? strlen(list) + 1 : 1, sizeof *d->names);
    if (!d->names || (list && !(d->buf = strdup(list)))) {
        fprintf(stderr, "vkasr: out of memory\n");
        return EXIT_FAIL;
    }
    if (!list) {
        d->names[d->n++] = device;
        return check_device_backend(device);
    }
    char *save = NULL;
    for (char *tok = strtok_r(d->buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        d->names[d->n++] = tok;
        if (check_device_backend(tok) != EXIT_OK)
            return EXIT_USAGE;
    }
    return EXIT_OK;
}

void pool_devices_free(struct pool_devices *d) {
    free(d->names);
    free(d->buf);
    *d = (struct pool_devices){0};
}

static bool same_name(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

int pool_sessions(const struct pool_devices *d, int sessions) {
    if (sessions > 0)
        return sessions;
    if (d->n > 1)
        return 1;
    const char *dev = d->names[0];
    if (!dev || !*dev)
        dev = getenv("VKASR_DEVICE");
    return dev && (!strncmp(dev, "cpu", 3) || !strcmp(dev, "ref") || !strncmp(dev, "cuda", 4)) ? 1 : 2;
}

/* ---- the pool ---- */

struct job {
    pool_fn fn;
    void *arg;
    struct job *next;
};

struct slot {
    struct pool *p;
    struct pool_worker w;
    pthread_t thread;
    bool started;
};

struct pool {
    struct slot *s;
    int n, nmodels;
    pthread_mutex_t mu;
    pthread_cond_t work;       /* a job was queued, or stop                 */
    pthread_cond_t idle;       /* the queue is empty and no job runs        */
    struct job *head, *tail;
    int running;               /* jobs being run                            */
    bool stopping;
    pool_fn start;
    void *start_arg;
};

/* Loading one device's model, on a thread of its own where several devices load at once. */
struct load {
    const struct pool_params *pp;
    const char *device;
    vkasr_model *model;
    vkasr_status st;
    vkasr_error err;
    pthread_t thread;
    bool threaded;
};

static void *load_model(void *arg) {
    struct load *l = arg;
    vkasr_model_params mp = l->pp->mp;
    if (l->device)
        mp.device = l->device;
    l->st = vkasr_model_load(l->pp->model, &mp, &l->model, &l->err);
    return NULL;
}

/* The worker before i on the same device as worker i (they share its model), or -1. */
static int shares_with(const struct pool *p, int i) {
    for (int j = 0; j < i; j++)
        if (same_name(p->s[j].w.device, p->s[i].w.device))
            return j;
    return -1;
}

/* Reports a device's failure: its name first when one was given; mp: the load's params, or NULL. */
static int device_failed(const char *device, vkasr_status st, const char *msg, const vkasr_model_params *mp) {
    const bool named = device && *device;
    fprintf(stderr, "vkasr: %s%s%s\n", named ? device : "", named ? ": " : "", msg);
    return exit_code_for_load(st, mp);
}

/* A model per distinct device among the workers, loaded at the same time on as many threads (the first
 * here); EXIT_OK or the first failure's exit code after saying why. */
static int load_models(struct pool *p, const struct pool_params *pp) {
    struct load *l = calloc(p->n > 0 ? (size_t)p->n : 1, sizeof *l);
    if (!l) {
        fprintf(stderr, "vkasr: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = p->n - 1; i >= 0; i--)
        if (shares_with(p, i) < 0) {
            l[i] = (struct load){.pp = pp, .device = p->s[i].w.device, .st = VKASR_OK};
            l[i].threaded = i > 0 && pthread_create(&l[i].thread, NULL, load_model, &l[i]) == 0;
        }
    load_model(&l[0]);
    int rc = EXIT_OK;
    for (int i = 0; i < p->n; i++) {
        if (shares_with(p, i) >= 0)
            continue;
        p->nmodels++;
        if (l[i].threaded)
            pthread_join(l[i].thread, NULL);
        else if (i > 0)
            load_model(&l[i]);
        p->s[i].w.model = l[i].model;
        if (l[i].st != VKASR_OK && rc == EXIT_OK)
            rc = device_failed(l[i].device, l[i].st, l[i].err.message, &l[i].pp->mp);
    }
    free(l);
    return rc;
}

int pool_open(const struct pool_params *pp, struct pool **out) {
    *out = NULL;
    const int ne = pp->devices->n, spd = pool_sessions(pp->devices, pp->sessions);
    struct pool *p = calloc(1, sizeof *p);
    if (p)
        p->s = calloc((size_t)(ne * spd), sizeof *p->s);
    if (!p || !p->s) {
        fprintf(stderr, "vkasr: out of memory\n");
        free(p);
        return EXIT_FAIL;
    }
    p->n = ne * spd;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    /* the first session of every device entry, then the second of every entry, and so on */
    for (int i = 0; i < p->n; i++)
        p->s[i] = (struct slot){.p = p, .w = {.index = i, .device = pp->devices->names[i % ne]}};
    int rc = load_models(p, pp);
    if (rc == EXIT_OK && pp->sessions == 0 && p->n > ne && vkasr_model_on_cpu(p->s[0].w.model))
        p->n = ne; /* auto on a CPU device: one session each (the workers left out share the models) */
    for (int i = 0; rc == EXIT_OK && i < p->n; i++) {
        struct pool_worker *w = &p->s[i].w;
        const int same = shares_with(p, i);
        if (same >= 0)
            w->model = p->s[same].w.model;
        if (pp->verbose) {
            vkasr_model_info info;
            vkasr_model_get_info(w->model, &info);
            fprintf(stderr, "vkasr: worker %d: device %s, precision %s", i, info.device_name,
                    info.precision == VKASR_PRECISION_F16 ? "f16" : "f32");
            if (same >= 0)
                fprintf(stderr, ", sharing worker %d's model", same);
            fprintf(stderr, "\n");
        }
        vkasr_error err;
        vkasr_status st = vkasr_session_create(w->model, &w->session, &err);
        if (st != VKASR_OK)
            rc = device_failed(w->device, st, err.message, NULL);
    }
    if (rc != EXIT_OK) {
        pool_free(p);
        return rc;
    }
    *out = p;
    return EXIT_OK;
}

int pool_size(const struct pool *p) { return p->n; }
int pool_models(const struct pool *p) { return p->nmodels; }
struct pool_worker *pool_worker(struct pool *p, int i) { return &p->s[i].w; }

static void *worker_main(void *arg) {
    struct slot *s = arg;
    struct pool *p = s->p;
    if (p->start)
        p->start(&s->w, p->start_arg);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->work, &p->mu);
        struct job *j = p->head;
        if (!j)
            break; /* stopping, nothing left */
        if (!(p->head = j->next))
            p->tail = NULL;
        p->running++;
        pthread_mutex_unlock(&p->mu);
        j->fn(&s->w, j->arg);
        free(j);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0 && !p->head)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pool_start(struct pool *p, pool_fn start, void *arg) {
    p->start = start;
    p->start_arg = arg;
    int started = 0;
    for (int i = 0; i < p->n; i++) {
        int e = pthread_create(&p->s[i].thread, NULL, worker_main, &p->s[i]);
        if (e) {
            fprintf(stderr, "vkasr: cannot start worker %d (device %s): %s\n", i,
                    p->s[i].w.device ? p->s[i].w.device : "default", strerror(e));
            continue;
        }
        p->s[i].started = true;
        started++;
    }
    return started;
}

bool pool_submit(struct pool *p, pool_fn fn, void *arg) {
    struct job *j = malloc(sizeof *j);
    if (!j)
        return false;
    *j = (struct job){fn, arg, NULL};
    pthread_mutex_lock(&p->mu);
    const bool ok = !p->stopping;
    if (ok) {
        if (p->tail)
            p->tail->next = j;
        else
            p->head = j;
        p->tail = j;
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->mu);
    if (!ok)
        free(j);
    return ok;
}

static bool any_started(const struct pool *p) {
    for (int i = 0; i < p->n; i++)
        if (p->s[i].started)
            return true;
    return false;
}

void pool_wait(struct pool *p) {
    if (!any_started(p))
        return; /* no thread would run them */
    pthread_mutex_lock(&p->mu);
    while (p->head || p->running)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void pool_stop(struct pool *p) {
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++)
        if (p->s[i].started) {
            pthread_join(p->s[i].thread, NULL);
            p->s[i].started = false;
        }
    /* jobs no thread ran (none started) are dropped */
    for (struct job *j = p->head, *next; j; j = next) {
        next = j->next;
        free(j);
    }
    p->head = p->tail = NULL;
}

void pool_free(struct pool *p) {
    if (!p)
        return;
    pool_stop(p);
    for (int i = 0; i < p->n; i++) /* the sessions before the models they share */
        vkasr_session_free(p->s[i].w.session);
    for (int i = 0; i < p->n; i++)
        if (shares_with(p, i) < 0)
            vkasr_model_free(p->s[i].w.model);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p->s);
    free(p);
}

/* ---- one device, one session ---- */

int pool_open_single(const char *model, const vkasr_model_params *mp, vkasr_model **m, vkasr_session **s) {
    vkasr_error err;
    *m = NULL;
    *s = NULL;
    vkasr_status st = vkasr_model_load(model, mp, m, &err);
    if (st == VKASR_OK && (st = vkasr_session_create(*m, s, &err)) != VKASR_OK) {
        vkasr_model_free(*m);
        *m = NULL;
    }
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        return exit_code_for_load(st, mp);
    }
    return EXIT_OK;
}
