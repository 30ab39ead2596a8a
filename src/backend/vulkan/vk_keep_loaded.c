/* vk_keep_loaded.c — AddressSanitizer builds only (VKASR_KEEP_DRIVERS_LOADED): the shared objects the
 * Vulkan loader brought in with an instance (the driver, lavapipe's LLVM) stay mapped until the process
 * exits. The loader unloads the driver at vkDestroyInstance, and what the driver allocated once and keeps
 * in its own static variables becomes unreachable; LeakSanitizer would report it in a module it can no
 * longer name, so no suppression could select it. Pinned here, only in processes that open Vulkan. */
#define _GNU_SOURCE
#include "vk_internal.h"

#ifdef VKASR_KEEP_DRIVERS_LOADED
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

struct names {
    char **v;
    size_t n, cap;
};

static int collect(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct names *s = arg;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return 1;
        s->v = v;
        s->cap = cap;
    }
    if ((s->v[s->n] = strdup(info->dlpi_name)))
        s->n++;
    return 0;
}

void vk_keep_drivers_loaded(void) {
    struct names s = {0};
    dl_iterate_phdr(collect, &s); /* dlopen outside the iteration, which holds the loader's lock */
    for (size_t i = 0; i < s.n; i++) {
        /* RTLD_NOLOAD: nothing new is loaded; the handle is kept on purpose (never closed) */
        (void)dlopen(s.v[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        free(s.v[i]);
    }
    free(s.v);
}
#else
void vk_keep_drivers_loaded(void) {}
#endif
