/* copy.c — large host copies on several threads (copy.h). */
#include "copy.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define COPY_MT_MIN (8u << 20) /* below it, starting threads costs more than it saves */
#define COPY_MAX_THREADS 4

struct part {
    char *dst;
    const char *src;
    size_t n;
};

static void *copy_part(void *arg) {
    const struct part *p = arg;
    memcpy(p->dst, p->src, p->n);
    return NULL;
}

void copy_large(void *dst, const void *src, size_t n) {
    long cpus = n >= COPY_MT_MIN ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    int t = cpus >= 2 * COPY_MAX_THREADS ? COPY_MAX_THREADS : cpus >= 4 ? 2 : 1;
    if (t == 1) {
        memcpy(dst, src, n);
        return;
    }
    struct part parts[COPY_MAX_THREADS];
    pthread_t th[COPY_MAX_THREADS];
    bool started[COPY_MAX_THREADS] = {false};
    const size_t each = (n / (size_t)t + 63) & ~(size_t)63; /* cache-line aligned parts */
    for (int i = 0; i < t; i++) {
        const size_t at = (size_t)i * each < n ? (size_t)i * each : n;
        parts[i] = (struct part){(char *)dst + at, (const char *)src + at, n - at < each ? n - at : each};
    }
    for (int i = 1; i < t; i++)
        started[i] = pthread_create(&th[i], NULL, copy_part, &parts[i]) == 0;
    copy_part(&parts[0]);
    for (int i = 1; i < t; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            copy_part(&parts[i]);
    }
}
