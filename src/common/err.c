/* err.c — formatting of internal error messages and status strings. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

vkasr_status err_set(struct err *e, vkasr_status code, const char *fmt, ...) {
    if (!e)
        return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

vkasr_status err_prefix(struct err *e, const char *fmt, ...) {
    if (!e)
        return VKASR_ERR_INTERNAL;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
    return e->code;
}

void err_clear(struct err *e) {
    if (e) {
        e->code = VKASR_OK;
        e->msg[0] = '\0';
    }
}

void err_export(const struct err *e, vkasr_error *out) {
    if (!out)
        return;
    out->status = e ? e->code : VKASR_OK;
    snprintf(out->message, sizeof out->message, "%s", e ? e->msg : "");
}

const char *vkasr_status_string(vkasr_status s) {
    switch (s) {
    case VKASR_OK: return "ok";
    case VKASR_ABORTED: return "aborted";
    case VKASR_ERR_INVALID_ARG: return "invalid argument";
    case VKASR_ERR_NO_MEMORY: return "out of host memory";
    case VKASR_ERR_IO: return "input/output error";
    case VKASR_ERR_MODEL: return "invalid or unsupported model";
    case VKASR_ERR_AUDIO: return "invalid or unsupported audio";
    case VKASR_ERR_NO_DEVICE: return "no usable Vulkan device";
    case VKASR_ERR_VULKAN: return "Vulkan error";
    case VKASR_ERR_DEVICE_MEMORY: return "out of device memory";
    case VKASR_ERR_DEVICE_LOST: return "device lost";
    case VKASR_ERR_UNSUPPORTED: return "unsupported";
    case VKASR_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
