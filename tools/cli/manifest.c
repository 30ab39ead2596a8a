/* manifest.c — NeMo-style manifests for `vkasr transcribe`: JSON lines with audio_filepath (relative
 * paths are resolved against the manifest's directory, as NeMo does), optional duration and text; the
 * output manifest repeats each line with pred_text added; the K-th of N deterministic slices (--shard). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void manifest_free(struct manifest_entry *e, size_t n) {
    for (size_t i = 0; e && i < n; i++) {
        free(e[i].audio);
        free(e[i].line);
        free(e[i].text);
    }
    free(e);
}

/* path joined to the directory of `base` (path itself when absolute or base has no directory). */
static char *resolve(const char *base, const char *path) {
    const char *slash = strrchr(base, '/');
    if (path[0] == '/' || !slash)
        return strdup(path);
    size_t d = (size_t)(slash - base) + 1, n = strlen(path);
    char *r = malloc(d + n + 1);
    if (r) {
        memcpy(r, base, d);
        memcpy(r + d, path, n + 1);
    }
    return r;
}

int manifest_read(const char *path, struct manifest_entry **out, size_t *count) {
    *out = NULL;
    *count = 0;
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        fprintf(stderr, "vkasr: cannot open the manifest %s: %s\n", path, strerror(errno));
        return EXIT_AUDIO;
    }
    struct manifest_entry *e = NULL;
    size_t n = 0, cap = 0, lineno = 0, len = 0;
    char *line = NULL;
    ssize_t got;
    int rc = EXIT_OK;
    while (rc == EXIT_OK && (got = getline(&line, &len, f)) >= 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        size_t skip = strspn(line, " \t");
        if (line[skip] == '\0')
            continue; /* blank lines are allowed */
        cJSON *j = cJSON_Parse(line);
        const cJSON *a = j ? cJSON_GetObjectItemCaseSensitive(j, "audio_filepath") : NULL;
        const cJSON *d = j ? cJSON_GetObjectItemCaseSensitive(j, "duration") : NULL;
        const cJSON *t = j ? cJSON_GetObjectItemCaseSensitive(j, "text") : NULL;
        if (!cJSON_IsObject(j) || !cJSON_IsString(a) || !a->valuestring[0] || (d && !cJSON_IsNumber(d)) ||
            (t && !cJSON_IsString(t))) {
            fprintf(stderr, "vkasr: %s:%zu: %s\n", path, lineno,
                    !cJSON_IsObject(j) ? "not a JSON object"
                    : !cJSON_IsString(a) || !a->valuestring[0] ? "no audio_filepath (a non-empty string)"
                    : d && !cJSON_IsNumber(d) ? "duration is not a number"
                                              : "text is not a string");
            rc = EXIT_USAGE;
        } else if (n == cap && !(cap = cap ? 2 * cap : 256, e = realloc(e, cap * sizeof *e))) {
            fprintf(stderr, "vkasr: out of memory reading %s\n", path);
            rc = EXIT_FAIL;
        } else {
            struct manifest_entry *m = &e[n];
            *m = (struct manifest_entry){.audio = resolve(strcmp(path, "-") ? path : "", a->valuestring),
                                         .line = strdup(line), .duration = d ? d->valuedouble : -1.0,
                                         .text = t ? strdup(t->valuestring) : NULL};
            n++;
            if (!m->audio || !m->line || (t && !m->text)) {
                fprintf(stderr, "vkasr: out of memory reading %s\n", path);
                rc = EXIT_FAIL;
            }
        }
        cJSON_Delete(j);
    }
    if (rc == EXIT_OK && ferror(f)) {
        fprintf(stderr, "vkasr: cannot read the manifest %s: %s\n", path, strerror(errno));
        rc = EXIT_AUDIO;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc != EXIT_OK) {
        manifest_free(e, n);
        return rc;
    }
    *out = e;
    *count = n;
    return EXIT_OK;
}

char *manifest_line(const struct manifest_entry *e, const char *pred_text) {
    cJSON *j = e->line ? cJSON_Parse(e->line) : cJSON_CreateObject();
    if (!j)
        return NULL;
    if (!e->line && !cJSON_AddStringToObject(j, "audio_filepath", e->audio)) {
        cJSON_Delete(j);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(j, "pred_text"); /* a manifest that has one gets ours */
    char *s = cJSON_AddStringToObject(j, "pred_text", pred_text) ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}

bool parse_shard(const char *s, size_t *k, size_t *n) {
    char *end = NULL;
    errno = 0;
    unsigned long long a = strtoull(s, &end, 10);
    if (errno || end == s || *end != '/' || s[0] == '-')
        return false;
    const char *t = end + 1;
    unsigned long long b = strtoull(t, &end, 10);
    if (errno || end == t || *end || t[0] == '-' || b < 1 || a >= b || b > 1000000)
        return false;
    *k = (size_t)a;
    *n = (size_t)b;
    return true;
}

void shard_range(size_t total, size_t k, size_t n, size_t *first, size_t *count) {
    /* contiguous slices whose sizes differ by at most one: [k * total / n, (k + 1) * total / n) */
    const size_t a = (size_t)((unsigned long long)k * total / n), b = (size_t)((unsigned long long)(k + 1) * total / n);
    *first = a;
    *count = b - a;
}
