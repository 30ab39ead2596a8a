/* err.h — internal error reporting: a status code plus a message naming what failed.
 * Every object that can fail owns a struct err; functions return vkasr_status and fill it. */
#ifndef VKASR_ERR_H
#define VKASR_ERR_H

#include "vkasr.h"

struct err {
    vkasr_status code;
    char msg[1024];
};

/* Sets code and a printf-style message; returns code so callers can `return err_set(...)`. */
vkasr_status err_set(struct err *e, vkasr_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes the existing message with "prefix: " (used to add a file or stage name). */
vkasr_status err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_clear(struct err *e);
/* Copies an internal error into a public vkasr_error (which may be NULL). */
void err_export(const struct err *e, vkasr_error *out);

/* Returns VKASR_ERR_INTERNAL naming the file and line when cond is false. For invariants that input
 * cannot violate but that must not crash when a bug does. */
#define CHECK_OR_RETURN(e, cond)                                                                       \
    do {                                                                                               \
        if (!(cond))                                                                                   \
            return err_set((e), VKASR_ERR_INTERNAL, "internal check failed at %s:%d: %s", __FILE__,    \
                           __LINE__, #cond);                                                           \
    } while (0)

#define TRY(expr)                                                                                      \
    do {                                                                                               \
        vkasr_status try_st_ = (expr);                                                                 \
        if (try_st_ != VKASR_OK)                                                                       \
            return try_st_;                                                                            \
    } while (0)

#endif
