/* hub.c — the public face of models by name (vkasr_hub_*): thin wrappers over src/model's alias index
 * and Hugging Face cache reader (hub.h). */
#include <stdlib.h>
#include <string.h>

#include "model/hub.h"

vkasr_status vkasr_hub_lookup(const char *name, vkasr_hub_model *out, vkasr_error *error) {
    struct err e = {0};
    vkasr_status st = hub_lookup(name, out, &e);
    err_export(&e, error);
    return st;
}

size_t vkasr_hub_index(vkasr_hub_model *out, size_t max) {
    struct err e = {0};
    size_t n = 0;
    if (hub_index(out, max, &n, &e) != VKASR_OK) /* a malformed $VKASR_PULL_INDEX: vkasr_hub_lookup says why */
        return 0;
    return n;
}

const char *vkasr_hub_cache_dir(char *buf, size_t size) { return buf && size ? hub_cache_dir(buf, size) : NULL; }

int vkasr_hub_pick(const char *const *files, size_t n, const char *quant) { return hub_pick(files, n, quant); }

vkasr_status vkasr_hub_resolve(const char *name, char *path, size_t size, vkasr_error *error) {
    struct err e = {0};
    char *p = NULL;
    vkasr_status st = path && size ? hub_resolve(name, &p, &e)
                                   : err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_hub_resolve: path is NULL or empty");
    if (st == VKASR_OK && strlen(p) >= size)
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_hub_resolve: '%s' does not fit %zu bytes", p, size);
    if (st == VKASR_OK)
        memcpy(path, p, strlen(p) + 1);
    free(p);
    err_export(&e, error);
    return st;
}
