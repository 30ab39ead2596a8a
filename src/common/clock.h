/* clock.h — the monotonic clock, for durations (timings, logs, polling limits). */
#ifndef VKASR_CLOCK_H
#define VKASR_CLOCK_H

#include <time.h>

/* Milliseconds since an arbitrary start; only differences mean anything. */
static inline double clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#endif
