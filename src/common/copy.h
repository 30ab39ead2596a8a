/* copy.h — large host copies on several threads. */
#ifndef VKASR_COPY_H
#define VKASR_COPY_H

#include <stddef.h>

/* memcpy(dst, src, n) for regions that do not overlap; from 8 MiB on, split over up to 4 threads (one
 * core's memcpy reaches a fraction of a server's memory bandwidth: staging a model's weights for the
 * device). Falls back to one thread when threads cannot start. */
void copy_large(void *dst, const void *src, size_t n);

#endif
