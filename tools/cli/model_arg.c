/* model_arg.c — the model a command loads: -m as given (a path, or a name the library finds in the
 * Hugging Face cache), after --pull a name downloaded first (pull.c), else the installed default model
 * (for vkasr live the cache-aware streaming default first). */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "pull.h"

static bool pull_first; /* --pull */

int arg_pull(const char *opt, const char *value, void *field) {
    pull_first = true;
    return EXIT_OK;
}

int model_or_default(const char *model, char *buf, size_t size, const char **out) {
    struct stat sb;
    *out = NULL;
    if (model && *model && pull_first && stat(model, &sb) != 0) { /* a name: into the cache first */
        const struct pull_opts po = {.offline = hub_offline_env(), .progress = true};
        const int rc = pull_model(model, &po, buf, size, NULL);
        if (rc == EXIT_OK)
            *out = buf;
        return rc;
    }
    if (model && *model) {
        *out = model;
        return EXIT_OK;
    }
    *out = vkasr_default_model_path(buf, size);
    if (!*out) {
        fprintf(stderr, "vkasr: no model given and the default model is not installed (looked for %s): "
                        "use -m MODEL or set VKASR_MODEL\n",
                VKASR_DEFAULT_MODELS[0] ? VKASR_DEFAULT_MODELS : "nothing");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

#ifndef VKASR_DEFAULT_STREAM_MODELS
#define VKASR_DEFAULT_STREAM_MODELS ""
#endif

int stream_model_or_default(const char *model, char *buf, size_t size, const char **out) {
    const char *env = getenv("VKASR_MODEL");
    if ((model && *model) || (env && *env))
        return model_or_default(model, buf, size, out);
    for (const char *p = VKASR_DEFAULT_STREAM_MODELS; *p;) { /* ':'-separated, set by the build */
        const size_t n = strcspn(p, ":");
        if (n > 0 && n < size) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            if (access(buf, R_OK) == 0) {
                *out = buf;
                return EXIT_OK;
            }
        }
        p += n + (p[n] == ':');
    }
    return model_or_default(NULL, buf, size, out);
}
