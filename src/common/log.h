/* log.h — a logger value owned by a model (level + callback); no global state. */
#ifndef VKASR_LOG_H
#define VKASR_LOG_H

#include "vkasr.h"

struct logger {
    vkasr_log_level level;
    vkasr_log_callback cb; /* NULL: stderr */
    void *ud;
};

void log_msg(const struct logger *lg, vkasr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_DEBUG(lg, ...) log_msg((lg), VKASR_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(lg, ...) log_msg((lg), VKASR_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(lg, ...) log_msg((lg), VKASR_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(lg, ...) log_msg((lg), VKASR_LOG_ERROR, __VA_ARGS__)

#endif
