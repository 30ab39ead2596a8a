/* log.c — dispatches log messages to the user's callback or to stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void log_msg(const struct logger *lg, vkasr_log_level level, const char *fmt, ...) {
    vkasr_log_level min = lg ? lg->level : VKASR_LOG_WARN;
    if (level < min || level >= VKASR_LOG_NONE)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (lg && lg->cb) {
        lg->cb(level, buf, lg->ud);
        return;
    }
    static const char *const names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "vkasr: %s: %s\n", names[level], buf);
}
