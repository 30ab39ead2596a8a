/* hub_cache.c — a model name's files in the Hugging Face hub's cache, the layout huggingface_hub writes:
 * <cache>/models--ORG--NAME/refs/REVISION holds a commit, snapshots/COMMIT/FILE is a relative symlink
 * to ../../blobs/ETAG. Reads only (no network, no lock: a snapshot entry appears by an atomic rename
 * once its blob is complete); the rule choosing among a repository's files is here too. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "hub.h"
#include "model_file.h"

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *hub_cache_dir(char *buf, size_t size) {
    const char *v;
    int n;
    if ((v = env("HF_HUB_CACHE")))
        n = snprintf(buf, size, "%s", v);
    else if ((v = env("HF_HOME")))
        n = snprintf(buf, size, "%s/hub", v);
    else if ((v = env("XDG_CACHE_HOME")))
        n = snprintf(buf, size, "%s/huggingface/hub", v);
    else if ((v = env("HOME")))
        n = snprintf(buf, size, "%s/.cache/huggingface/hub", v);
    else
        return NULL;
    return n >= 0 && (size_t)n < size ? buf : NULL;
}

/* ---- the choice among a repository's files ---- */

/* Whether the GGUF file's name carries the type q (a token between '.', '-' or '_'). */
static bool gguf_of_type(const char *file, const char *q) {
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    size_t bn = strlen(base), qn = strlen(q);
    if (bn < 5 || strcasecmp(base + bn - 5, ".gguf") != 0 || qn == 0)
        return false;
    for (size_t i = 1; i + qn + 5 <= bn; i++) {
        char before = base[i - 1], after = base[i + qn];
        if (strchr(".-_", before) && strchr(".-_", after) && strncasecmp(base + i, q, qn) == 0)
            return true;
    }
    return false;
}

static bool suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcasecmp(s + n - k, suf) == 0;
}

/* The first (by name) of the files matching want, or -1. */
static int first_by_name(const char *const *files, size_t n, bool (*want)(const char *, const char *),
                         const char *arg) {
    int best = -1;
    for (size_t i = 0; i < n; i++)
        if (want(files[i], arg) && (best < 0 || strcmp(files[i], files[best]) < 0))
            best = (int)i;
    return best;
}

static bool is_gguf(const char *f, const char *unused) { return suffix(f, ".gguf"); }
static bool is_nemo(const char *f, const char *unused) { return suffix(f, ".nemo"); }

int hub_pick(const char *const *files, size_t n, const char *quant) {
    if (!files)
        return -2;
    if (quant && *quant) {
        int q = first_by_name(files, n, gguf_of_type, quant);
        return q >= 0 ? q : -2;
    }
    static const char *const pref[] = {"f16", "f32", "q8_0"};
    for (size_t p = 0; p < sizeof pref / sizeof pref[0]; p++) {
        int i = first_by_name(files, n, gguf_of_type, pref[p]);
        if (i >= 0)
            return i;
    }
    int i = first_by_name(files, n, is_gguf, NULL);
    if (i < 0)
        i = first_by_name(files, n, is_nemo, NULL);
    if (i >= 0)
        return i;
    bool config = false, weights = false;
    for (size_t k = 0; k < n; k++) {
        config |= strcmp(files[k], "config.json") == 0;
        weights |= !strchr(files[k], '/') && suffix(files[k], ".safetensors");
    }
    return config && weights ? -1 : -2;
}

/* ---- the cache ---- */

static bool is_commit(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n]))
            return false;
    return n == 40;
}

/* The commit refs/REVISION of repo_dir names (into commit, 41 bytes), or false. */
static bool read_ref(const char *repo_dir, const char *revision, char *commit) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s/refs/%s", repo_dir, revision) >= (int)sizeof p)
        return false;
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    size_t n = fread(commit, 1, 40, f);
    fclose(f);
    commit[n] = '\0';
    return n == 40 && is_commit(commit);
}

/* The names of a snapshot directory's entries that exist (a dangling link, a blob not yet there,
 * is skipped), malloc'd. */
static vkasr_status list_snapshot(const char *dir, char ***out, size_t *n, struct err *e) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return VKASR_OK;
    size_t cap = 0;
    vkasr_status st = VKASR_OK;
    struct dirent *de;
    while (st == VKASR_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *p = path_join(dir, de->d_name);
        struct stat sb;
        bool ok = p && stat(p, &sb) == 0;
        free(p);
        if (!ok)
            continue;
        if (*n == cap) {
            char **g = realloc(*out, (cap = cap ? cap * 2 : 16) * sizeof *g);
            if (!g) {
                st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
                break;
            }
            *out = g;
        }
        if (!((*out)[*n] = strdup(de->d_name)))
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        else
            (*n)++;
    }
    closedir(d);
    return st;
}

static void free_list(char **l, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* What snapshot directory snap holds for m: its file, the picked one, or itself (transformers).
 * *out NULL when none; *why says why (for the message). */
static vkasr_status from_snapshot(const vkasr_hub_model *m, const char *snap, char **out, char *why, size_t wn,
                                  struct err *e) {
    *out = NULL;
    struct stat sb;
    if (stat(snap, &sb) != 0)
        return VKASR_OK;
    if (m->file[0]) {
        char *p = path_join(snap, m->file);
        if (!p)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            *out = p;
        else {
            snprintf(why, wn, "%s: not there", p);
            free(p);
        }
        return VKASR_OK;
    }
    char **l = NULL;
    size_t n = 0;
    TRY(list_snapshot(snap, &l, &n, e));
    int i = hub_pick((const char *const *)l, n, m->quant);
    if (i >= -1 && !(*out = i >= 0 ? path_join(snap, l[i]) : strdup(snap))) {
        free_list(l, n);
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    }
    if (i == -2 && m->quant[0])
        snprintf(why, wn, "%s holds no GGUF of type %s", snap, m->quant);
    else if (i == -2)
        snprintf(why, wn, "%s holds no model vkasr reads (a .gguf, a .nemo, or config.json with *.safetensors)",
                 snap);
    free_list(l, n);
    return VKASR_OK;
}

vkasr_status hub_resolve(const char *name, char **out, struct err *e) {
    *out = NULL;
    vkasr_hub_model m;
    TRY(hub_lookup(name, &m, e));
    char cache[4096], repo_dir[4096], snap[4096 + 64], commit[41];
    if (!hub_cache_dir(cache, sizeof cache))
        return err_set(e, VKASR_ERR_IO, "model '%s': no Hugging Face cache directory (set HF_HUB_CACHE or HOME)",
                       name);
    const char *slash = strchr(m.repo, '/');
    if (snprintf(repo_dir, sizeof repo_dir, "%s/models--%.*s--%s", cache, (int)(slash - m.repo), m.repo, slash + 1) >=
        (int)sizeof repo_dir)
        return err_set(e, VKASR_ERR_IO, "model '%s': the cache path is too long", name);
    /* The revision's snapshot; an index entry pinned to a commit falls back to refs/main's, so that a
     * file Python tools fetched at another commit serves too. */
    char why[4096 + 256] = "";
    for (int pass = 0; pass < 2 && !*out; pass++) {
        const char *rev = pass == 0 ? m.revision : "main";
        if (pass == 1 && (!is_commit(m.revision) || !m.file[0]))
            break;
        if (is_commit(rev))
            snprintf(commit, sizeof commit, "%s", rev);
        else if (!read_ref(repo_dir, rev, commit)) {
            if (!why[0])
                snprintf(why, sizeof why, "no refs/%s in %s", rev, repo_dir);
            continue;
        }
        snprintf(snap, sizeof snap, "%s/snapshots/%s", repo_dir, commit);
        TRY(from_snapshot(&m, snap, out, why, sizeof why, e));
        if (!*out && !why[0])
            snprintf(why, sizeof why, "no snapshot %s", snap);
    }
    if (*out)
        return VKASR_OK;
    return err_set(e, VKASR_ERR_IO, "model '%s' is not in the Hugging Face cache (%s): run `vkasr pull %s` (%s)",
                   name, cache, name, why);
}
