/* cmd_pull.c — `vkasr pull NAME` (download a model by name into the Hugging Face cache, optionally
 * converting it once into a GGUF beside it) and `vkasr models` (what the cache holds). The downloading
 * is pull.c's; the names and the cache's reading are the library's (vkasr_hub_*). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "pull.h"

static const char *const type_names[] = {"f32", "f16", "q8_0", "q6_k", "q5_k", "q4_k"}; /* vkasr_weight_type order */

static void print_aliases(FILE *f) {
    size_t n = vkasr_hub_index(NULL, 0);
    vkasr_hub_model *all = calloc(n ? n : 1, sizeof *all);
    if (!all)
        return;
    n = vkasr_hub_index(all, n);
    fprintf(f, "\naliases (the index; $VKASR_PULL_INDEX adds entries):\n");
    for (size_t i = 0; i < n; i++) {
        char size[32] = "size unknown";
        if (all[i].size)
            snprintf(size, sizeof size, "%.0f MB", all[i].size / 1e6);
        fprintf(f, "  %s\n      %s/%s (%s)\n", all[i].aliases, all[i].repo, all[i].file, size);
    }
    free(all);
}

static void pull_intro(FILE *f) {
    char cache[4096];
    fprintf(f,
            "usage: vkasr pull NAME [--convert [TYPE]] [--offline]\n"
            "\n"
            "Downloads a model into the Hugging Face cache, where Python's huggingface_hub finds it too, and\n"
            "prints the path vkasr loads. NAME is an alias of the index (below) or org/repo, org/repo:FILE\n"
            "or org/repo:QUANT (a GGUF type such as q8_0). A repository's file is chosen as vkasr loads it:\n"
            "a GGUF (the QUANT asked, else f16, f32, q8_0), else a .nemo checkpoint, else a transformers\n"
            "directory (config.json, *.json and *.safetensors). Afterwards `-m NAME` works in transcribe,\n"
            "live, serve and bench without the network.\n"
            "\n"
            "Downloads resume where an interrupted one stopped (blobs/ETAG.incomplete and an HTTP Range),\n"
            "are retried, and are checked against the index's sha256, else the hub's X-Linked-Etag (an LFS\n"
            "file's sha256), before they enter the cache; a lock keeps two pulls of one file apart.\n"
            "\n"
            "cache: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else\n"
            "       ~/.cache/huggingface/hub (here: %s)\n"
            "environment: $HF_TOKEN (gated or private repositories; else the token file $HF_TOKEN_PATH or\n"
            "       $HF_HOME/token), $HF_ENDPOINT (a mirror; default https://huggingface.co),\n"
            "       $HF_HUB_OFFLINE=1 (as --offline), $VKASR_PULL_INDEX (a JSON index file: see README),\n"
            "       $VKASR_PULL_RETRIES (default 5) and $VKASR_PULL_BACKOFF_MS (the first wait, default\n"
            "       1000, doubling), proxies as libcurl reads them ($https_proxy, ...)\n",
            vkasr_hub_cache_dir(cache, sizeof cache) ? cache : "(no home: set HF_HUB_CACHE)");
    print_aliases(f);
}

static void pull_outro(FILE *f) {
    fputs("\nexit codes: 0 success, 1 download failed (network, HTTP, checksum, interrupted), 2 usage,\n"
          "            3 not found (or not cached, offline), 4 the cache cannot be written (disk full, ...)\n",
          f);
}

struct pull_cli {
    const char *name;
    bool convert, offline, no_progress, quiet;
    bool type_given;
    vkasr_weight_type type;
};

static int take_name(void *ctx, const char *arg) {
    struct pull_cli *o = ctx;
    vkasr_weight_type t;
    for (size_t i = 0; o->convert && !o->type_given && i < sizeof type_names / sizeof type_names[0]; i++)
        if (!strcmp(arg, type_names[i]) && arg_weight_type("--convert", arg, &t) == EXIT_OK) {
            o->type = t;
            o->type_given = true;
            return EXIT_OK;
        }
    if (o->name) {
        fprintf(stderr, "vkasr: pull takes one NAME ('%s' is extra)\n", arg);
        return EXIT_USAGE;
    }
    o->name = arg;
    return EXIT_OK;
}

static const struct cli_opt pull_table[] = {
    OPT_FLAG("--convert", ARG_FIELD(struct pull_cli, convert),
             "[TYPE] also convert the download once into a GGUF of TYPE (f16 by\n"
             "default; f32, q8_0, q6_k, q5_k, q4_k as in vkasr convert) written\n"
             "beside it in the snapshot, NAME.TYPE.gguf; -m REPO or -m REPO:TYPE\n"
             "then loads it"),
    OPT_FLAG("--offline", ARG_FIELD(struct pull_cli, offline),
             "no network (also $HF_HUB_OFFLINE=1): only say whether NAME is cached"),
    OPT_FLAG("--no-progress", ARG_FIELD(struct pull_cli, no_progress), "no progress line"),
    OPT_FLAG("-q, --quiet", ARG_FIELD(struct pull_cli, quiet), "print nothing on stderr but errors"),
};

static const struct cli_command pull_command = {
    CMD_PULL, "pull", pull_intro, pull_outro, pull_table, sizeof pull_table / sizeof pull_table[0], take_name,
};

/* The GGUF beside a download: DIR/STEM.TYPE.gguf (a file's stem, or a transformers snapshot's repository
 * name), converted once. */
static int convert_once(const char *name, const char *src, vkasr_weight_type type, vkasr_decoder decoder, bool quiet,
                        char *dst, size_t size) {
    struct stat sb;
    char dir[4096], stem[1024];
    bool is_dir = stat(src, &sb) == 0 && S_ISDIR(sb.st_mode);
    vkasr_hub_model m;
    vkasr_error err;
    if (is_dir) {
        snprintf(dir, sizeof dir, "%s", src);
        snprintf(stem, sizeof stem, "%s",
                 vkasr_hub_lookup(name, &m, &err) == VKASR_OK ? strchr(m.repo, '/') + 1 : "model");
    } else {
        snprintf(dir, sizeof dir, "%s", src);
        char *slash = strrchr(dir, '/');
        snprintf(stem, sizeof stem, "%s", slash ? slash + 1 : src);
        if (slash)
            *slash = '\0';
        char *dot = strrchr(stem, '.');
        if (dot && dot != stem)
            *dot = '\0';
        char done[64]; /* the converted file itself (offline, where the name resolves to it) */
        snprintf(done, sizeof done, ".%s", type_names[type]);
        if (strlen(stem) > strlen(done) && !strcmp(stem + strlen(stem) - strlen(done), done)) {
            snprintf(dst, size, "%s", src);
            if (!quiet)
                fprintf(stderr, "vkasr: %s: already converted\n", dst);
            return EXIT_OK;
        }
    }
    if (snprintf(dst, size, "%s/%s.%s.gguf", dir, stem, type_names[type]) >= (int)size) {
        fprintf(stderr, "vkasr: pull %s: the converted file's path is too long\n", name);
        return EXIT_USAGE;
    }
    if (stat(dst, &sb) == 0) {
        if (!quiet)
            fprintf(stderr, "vkasr: %s: already converted\n", dst);
        return EXIT_OK;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.incomplete.%ld.gguf", dst, (long)getpid());
    if (!quiet)
        fprintf(stderr, "vkasr: converting %s to %s\n", src, dst);
    /* A snapshot directory is named by its commit, and the GGUF takes its general.name from the source's
     * last path component: a transformers snapshot converts through a link named after the repository. */
    char named[4096] = "", tdir[64] = "";
    bool made = false;
    if (is_dir) {
        const char *t = getenv("TMPDIR");
        snprintf(tdir, sizeof tdir, "%s/vkasr-convert-XXXXXX", t && *t && strlen(t) < 32 ? t : "/tmp");
        made = mkdtemp(tdir) != NULL;
        if (made && snprintf(named, sizeof named, "%s/%s", tdir, stem) < (int)sizeof named &&
            symlink(src, named) == 0)
            src = named;
        else
            named[0] = '\0';
    }
    vkasr_status st = vkasr_convert_decoder(src, tmp, type, decoder, &err);
    if (named[0])
        unlink(named);
    if (made)
        rmdir(tdir);
    if (st == VKASR_OK && rename(tmp, dst) != 0)
        st = VKASR_ERR_IO, snprintf(err.message, sizeof err.message, "cannot rename %s to %s: %s", tmp, dst,
                                    strerror(errno));
    if (st != VKASR_OK) {
        unlink(tmp);
        fprintf(stderr, "vkasr: pull %s: --convert: %s\n", name, err.message);
        return st == VKASR_ERR_IO ? EXIT_AUDIO : exit_code_for(st, 1);
    }
    return EXIT_OK;
}

int cmd_pull(int argc, char **argv) {
    struct cli_common c = cli_common_default();
    struct pull_cli o = {.type = VKASR_WEIGHTS_F16};
    int rc = cli_parse(&pull_command, &c, &o, argc, argv);
    if (rc != EXIT_OK)
        return rc == ARGS_HELP ? EXIT_OK : rc;
    if (!o.name) {
        fprintf(stderr, "vkasr: pull needs a NAME (see vkasr pull --help)\n");
        return EXIT_USAGE;
    }
    catch_interrupts();
    struct pull_opts po = {.offline = o.offline || hub_offline_env(), .progress = !o.no_progress, .quiet = o.quiet};
    char path[4096], fetched[4096], conv[4096];
    rc = pull_model(o.name, &po, path, sizeof path, fetched);
    if (rc == EXIT_OK && o.convert) {
        rc = convert_once(o.name, fetched, o.type, c.decoder, o.quiet, conv, sizeof conv);
        if (rc == EXIT_OK)
            snprintf(path, sizeof path, "%s", conv);
    }
    if (rc != EXIT_OK)
        return rc;
    printf("%s\n", path);
    return stdout_check();
}

/* ---- vkasr models ---- */

static void models_intro(FILE *f) {
    fputs("usage: vkasr models\n"
          "\n"
          "Lists the models in the Hugging Face cache (see vkasr pull --help for where it is): per repository\n"
          "and snapshot, its files with their sizes, the refs pointing at it and the aliases that name it;\n"
          "partial downloads (blobs/*.incomplete) are listed too.\n",
          f);
}

static const struct cli_command models_command = {CMD_MODELS, "models", models_intro, NULL, NULL, 0, NULL};

static void human(double b, char *buf, size_t n) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4)
        b /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

/* The refs of a repository naming commit, comma-separated, into buf. */
static void refs_of(const char *repo_dir, const char *commit, char *buf, size_t size) {
    char p[8192];
    snprintf(p, sizeof p, "%s/refs", repo_dir);
    buf[0] = '\0';
    DIR *d = opendir(p);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char rp[8448], c[64] = "";
        snprintf(rp, sizeof rp, "%s/%s", p, de->d_name);
        FILE *f = de->d_name[0] != '.' ? fopen(rp, "r") : NULL;
        if (f && fgets(c, sizeof c, f) && !strncmp(c, commit, 40))
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "," : "", de->d_name);
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
}

static void list_repo(const char *cache, const char *entry, const vkasr_hub_model *idx, size_t nidx) {
    char repo[256], dir[8192], sdir[8448];
    snprintf(repo, sizeof repo, "%s", entry + 8); /* models--ORG--NAME */
    char *sep = strstr(repo, "--");
    if (!sep)
        return;
    *sep = '/';
    memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
    snprintf(dir, sizeof dir, "%s/%s", cache, entry);
    snprintf(sdir, sizeof sdir, "%s/snapshots", dir);
    printf("%s\n", repo);
    DIR *d = opendir(sdir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char refs[256], snap[8704];
        refs_of(dir, de->d_name, refs, sizeof refs);
        printf("  snapshot %.12s%s%s%s\n", de->d_name, refs[0] ? " (" : "", refs, refs[0] ? ")" : "");
        snprintf(snap, sizeof snap, "%s/%s", sdir, de->d_name);
        DIR *s = opendir(snap);
        struct dirent *fe;
        while (s && (fe = readdir(s))) {
            char fp[8960], size[32], names[192] = "";
            struct stat sb;
            snprintf(fp, sizeof fp, "%s/%s", snap, fe->d_name);
            if (fe->d_name[0] == '.' || stat(fp, &sb) != 0)
                continue;
            for (size_t i = 0; i < nidx; i++)
                if (!names[0] && !strcmp(idx[i].repo, repo) && !strcmp(idx[i].file, fe->d_name))
                    snprintf(names, sizeof names, "  [%s]", idx[i].aliases); /* the first: $VKASR_PULL_INDEX's */
            human(S_ISDIR(sb.st_mode) ? 0 : (double)sb.st_size, size, sizeof size);
            printf("    %-48s %10s%s\n", fe->d_name, S_ISDIR(sb.st_mode) ? "dir" : size, names);
        }
        if (s)
            closedir(s);
    }
    if (d)
        closedir(d);
    snprintf(sdir, sizeof sdir, "%s/blobs", dir);
    if ((d = opendir(sdir)))
        while ((de = readdir(d))) {
            size_t n = strlen(de->d_name);
            char fp[8960], size[32];
            struct stat sb;
            snprintf(fp, sizeof fp, "%s/%s", sdir, de->d_name);
            if (n > 11 && !strcmp(de->d_name + n - 11, ".incomplete") && stat(fp, &sb) == 0) {
                human((double)sb.st_size, size, sizeof size);
                printf("  partial download: blobs/%s, %s (`vkasr pull` resumes it)\n", de->d_name, size);
            }
        }
    if (d)
        closedir(d);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cmd_models(int argc, char **argv) {
    struct cli_common c = cli_common_default();
    int rc = cli_parse(&models_command, &c, NULL, argc, argv);
    if (rc != EXIT_OK)
        return rc == ARGS_HELP ? EXIT_OK : rc;
    char cache[4096];
    if (!vkasr_hub_cache_dir(cache, sizeof cache)) {
        fprintf(stderr, "vkasr: models: no cache directory: set HF_HUB_CACHE or HOME\n");
        return EXIT_USAGE;
    }
    size_t nidx = vkasr_hub_index(NULL, 0);
    vkasr_hub_model *idx = calloc(nidx ? nidx : 1, sizeof *idx);
    nidx = idx ? vkasr_hub_index(idx, nidx) : 0;
    printf("cache: %s\n", cache);
    DIR *d = opendir(cache);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, "models--", 8)) {
            if (n == cap) {
                char **g = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *g);
                if (!g)
                    break;
                names = g;
            }
            if ((names[n] = strdup(de->d_name)))
                n++;
        }
    if (d)
        closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        list_repo(cache, names[i], idx, nidx);
        free(names[i]);
    }
    if (!n)
        printf("(no models: vkasr pull NAME downloads one)\n");
    free(names);
    free(idx);
    return stdout_check();
}
