/* pull.c — `vkasr pull`'s cache writer, in huggingface_hub's layout: a file downloads into
 * blobs/ETAG.incomplete (Range, retries) under .locks/models--ORG--NAME/ETAG.lock, is checked against its
 * sha256, renamed to blobs/ETAG and only then linked from snapshots/COMMIT/FILE; refs/REVISION names the
 * commit. A failure leaves no snapshot entry, only a resumable .incomplete or nothing. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pull.h"

enum { EXIT_PULL_NOT_FOUND = EXIT_MODEL, EXIT_PULL_DISK = EXIT_AUDIO };

bool hub_offline_env(void) {
    const char *v = getenv("HF_HUB_OFFLINE");
    return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}

static const char *endpoint(char *buf, size_t size) {
    const char *e = getenv("HF_ENDPOINT");
    snprintf(buf, size, "%s", e && *e ? e : "https://huggingface.co");
    for (size_t n = strlen(buf); n > 0 && buf[n - 1] == '/'; n--)
        buf[n - 1] = '\0';
    return buf;
}

/* s percent-encoded (RFC 3986 unreserved kept, and '/' when keep_slash) onto the end of buf. */
static void url_append(char *buf, size_t size, const char *s, bool keep_slash) {
    size_t n = strlen(buf);
    for (; *s && n + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("-._~", c) || (keep_slash && c == '/'))
            buf[n++] = (char)c;
        else
            n += (size_t)snprintf(buf + n, size - n, "%%%02X", c);
    }
    buf[n] = '\0';
}

static bool is_hex(const char *s, size_t want) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n]))
            return false;
    return n == want;
}

static void lower(char *s) {
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* The sha256 of a file as lowercase hex into out (65 bytes); false with errno on a read error. */
static bool file_sha256(const char *path, char *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    static unsigned char buf[1 << 20];
    ssize_t r;
    while (ok && (r = read(fd, buf, sizeof buf)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        ok = r > 0 && EVP_DigestUpdate(ctx, buf, (size_t)r) == 1;
    }
    unsigned char md[32];
    unsigned int mdn = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdn) == 1 && mdn == 32;
    int er = errno;
    EVP_MD_CTX_free(ctx);
    close(fd);
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    errno = er;
    return ok;
}

/* Writes text to path through a temporary file and a rename (readers see the old or the new). */
static bool write_atomic(const char *path, const char *text) {
    char tmp[8192];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    return ok;
}

/* mkdir -p of the directory part of path. */
static bool parent_dirs(const char *path) {
    char d[8192];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (slash)
        *slash = '\0';
    return !slash || mkdir_p(d) == 0;
}

/* Where a repository lives in the cache. */
struct repo_loc {
    const char *name; /* as the user typed it, for messages */
    char cache[4096], dir[4352], locks[4352];
};

/* What a failed hub response means, as a message; the exit code. */
static int http_failure(const struct repo_loc *L, const char *what, const char *url, const struct http_reply *r) {
    const char *token = getenv("HF_TOKEN");
    if (r->status == 401 || r->status == 403)
        fprintf(stderr,
                "vkasr: pull %s: %s: HTTP %ld (%s): the repository is gated or private; %s\n", L->name, what,
                r->status, url,
                token && *token ? "the token in $HF_TOKEN was refused (does it have access? accept the model's "
                                  "terms on its page)"
                                : "set $HF_TOKEN to an access token of an account that may read it");
    else if (r->status == 404)
        fprintf(stderr, "vkasr: pull %s: %s: not found (HTTP 404%s%s, %s)\n", L->name, what,
                r->error_code[0] ? ", " : "", r->error_code, url);
    else
        fprintf(stderr, "vkasr: pull %s: %s: HTTP %ld%s%s (%s)\n", L->name, what, r->status,
                r->error_message[0] ? ": " : "", r->error_message, url);
    return r->status == 404 ? EXIT_PULL_NOT_FOUND : EXIT_FAIL;
}

/* $name as an integer in [lo, hi], else dflt. */
static long env_long(const char *name, long dflt, long lo, long hi) {
    const char *v = getenv(name);
    char *end = NULL;
    errno = 0;
    long x = v && *v ? strtol(v, &end, 10) : dflt;
    return v && *v && (errno || *end || x < lo || x > hi) ? dflt : x;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!interrupted && nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* The lock on one blob (flock, released when fd closes); -1 after a message. */
static int take_lock(const struct repo_loc *L, const char *etag, const char *file) {
    char lp[4608];
    snprintf(lp, sizeof lp, "%s/%s.lock", L->locks, etag);
    if (mkdir_p(L->locks) != 0) {
        fprintf(stderr, "vkasr: pull %s: cannot create %s: %s\n", L->name, L->locks, strerror(errno));
        return -1;
    }
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "vkasr: pull %s: cannot open the lock %s: %s\n", L->name, lp, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return fd;
    if (errno == EWOULDBLOCK) {
        fprintf(stderr, "vkasr: %s: another pull holds %s; waiting for it\n", file, lp);
        while (flock(fd, LOCK_EX) != 0)
            if (errno != EINTR || interrupted) {
                fprintf(stderr, "vkasr: pull %s: %s while waiting for the lock %s\n", L->name,
                        interrupted ? "interrupted" : strerror(errno), lp);
                close(fd);
                return -1;
            }
        return fd;
    }
    fprintf(stderr, "vkasr: pull %s: cannot lock %s: %s\n", L->name, lp, strerror(errno));
    close(fd);
    return -1;
}

/* Downloads url into the blob (through its .incomplete) and verifies it; the lock is held. */
static int fetch_blob(const struct repo_loc *L, const char *url, const char *file, const char *blob, int64_t size,
                      const char *sha, const struct pull_opts *o) {
    char part[4608];
    snprintf(part, sizeof part, "%s.incomplete", blob);
    int fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        fprintf(stderr, "vkasr: pull %s: cannot open %s: %s\n", L->name, part, strerror(errno));
        if (fd >= 0)
            close(fd);
        return EXIT_PULL_DISK;
    }
    uint64_t have = (uint64_t)sb.st_size;
    if (size >= 0 && have > (uint64_t)size) { /* longer than the file: not a prefix of it */
        if (ftruncate(fd, 0) != 0)
            have = (uint64_t)sb.st_size;
        else
            have = 0;
    }
    lseek(fd, (off_t)have, SEEK_SET);
    if (have > 0 && !o->quiet)
        fprintf(stderr, "vkasr: %s: resuming at byte %llu (a partial download, %s)\n", file,
                (unsigned long long)have, part);
    const long tries = env_long("VKASR_PULL_RETRIES", 5, 0, 100), backoff = env_long("VKASR_PULL_BACKOFF_MS", 1000, 0,
                                                                                     600000);
    struct dl_progress pg = {.enabled = o->progress && !o->quiet, .label = file, .total = size};
    enum dl_result res = DL_OK;
    char msg[512] = "";
    struct http_reply r;
    for (long t = 0;; t++) {
        if (size >= 0 && have == (uint64_t)size && size > 0)
            break;
        res = http_download(url, fd, &have, &pg, &r, msg, sizeof msg);
        if (res == DL_OK && size >= 0 && have < (uint64_t)size) {
            res = DL_RETRY;
            snprintf(msg, sizeof msg, "the body ended at byte %llu of %lld", (unsigned long long)have, (long long)size);
        }
        if (res != DL_RETRY || t >= tries)
            break;
        long wait = backoff << (t < 6 ? t : 6);
        fprintf(stderr, "vkasr: %s: %s at byte %llu; retrying in %.1f s (%ld of %ld)\n", file, msg,
                (unsigned long long)have, wait / 1000.0, t + 1, tries);
        sleep_ms(wait);
        if (interrupted) {
            res = DL_INTERRUPTED;
            snprintf(msg, sizeof msg, "interrupted");
            break;
        }
    }
    bool synced = fsync(fd) == 0 || errno == EINVAL;
    int cl = close(fd);
    if (res == DL_OK && (!synced || cl != 0)) {
        res = DL_FAIL;
        snprintf(msg, sizeof msg, "%s", strerror(errno));
    }
    if (res != DL_OK) {
        bool http = res == DL_FAIL && !strncmp(msg, "HTTP ", 5);
        if (http && (r.status == 401 || r.status == 403 || r.status == 404))
            http_failure(L, file, url, &r);
        else
            fprintf(stderr, "vkasr: pull %s: %s: %s\n", L->name, file, msg);
        if (have > 0)
            fprintf(stderr, "vkasr: the %llu bytes fetched are kept in %s: run `vkasr pull %s` again to resume\n",
                    (unsigned long long)have, part, L->name);
        else
            unlink(part);
        return res == DL_FAIL && !http ? EXIT_PULL_DISK : EXIT_FAIL;
    }
    if (size >= 0 && have != (uint64_t)size) {
        fprintf(stderr, "vkasr: pull %s: %s: %llu bytes arrived, the hub announced %lld: refused, nothing installed\n",
                L->name, file, (unsigned long long)have, (long long)size);
        unlink(part);
        return EXIT_FAIL;
    }
    if (sha[0]) {
        char got[65];
        if (!file_sha256(part, got)) {
            fprintf(stderr, "vkasr: pull %s: cannot read %s: %s\n", L->name, part, strerror(errno));
            return EXIT_PULL_DISK;
        }
        if (strcmp(got, sha) != 0) {
            fprintf(stderr,
                    "vkasr: pull %s: %s: sha256 %s differs from the expected %s: refused, nothing installed (the "
                    "download is removed)\n",
                    L->name, file, got, sha);
            unlink(part);
            return EXIT_FAIL;
        }
    }
    if (rename(part, blob) != 0) {
        fprintf(stderr, "vkasr: pull %s: cannot rename %s to %s: %s\n", L->name, part, blob, strerror(errno));
        return EXIT_PULL_DISK;
    }
    return EXIT_OK;
}

/* Makes snapshots/COMMIT/FILE (a link to its blob) exist; *commit receives the commit. */
static int fetch_file(const struct repo_loc *L, const char *repo, const char *revision, const char *file,
                      const char *index_sha, uint64_t index_size, const struct pull_opts *o, char *commit) {
    char ep[2048], url[8192];
    snprintf(url, sizeof url, "%s/%s/resolve/", endpoint(ep, sizeof ep), repo);
    url_append(url, sizeof url, revision, false);
    url_append(url, sizeof url, "/", true);
    url_append(url, sizeof url, file, true);

    struct http_reply r;
    char msg[512];
    const long tries = env_long("VKASR_PULL_RETRIES", 5, 0, 100);
    for (long t = 0;; t++) {
        if (http_head(url, &r, msg, sizeof msg) && r.status < 500 && r.status != 429)
            break;
        if (t >= tries || interrupted) {
            if (r.status)
                return http_failure(L, file, url, &r);
            fprintf(stderr, "vkasr: pull %s: %s\n", L->name, interrupted ? "interrupted" : msg);
            return EXIT_FAIL;
        }
        sleep_ms(env_long("VKASR_PULL_BACKOFF_MS", 1000, 0, 600000) << (t < 6 ? t : 6));
    }
    /* a renamed repository: the hub answers with a redirect on its own host, which huggingface_hub
     * follows for the metadata too (an LFS file's redirect to its storage carries the metadata) */
    if (r.status >= 300 && r.status < 400 && !r.commit[0] && r.location[0] == '/') {
        const char *host = strstr(url, "://");
        size_t origin = host ? (size_t)(strchr(host + 3, '/') ? strchr(host + 3, '/') - url : (long)strlen(url)) : 0;
        char moved[8192];
        snprintf(moved, sizeof moved, "%.*s%s", (int)origin, url, r.location);
        snprintf(url, sizeof url, "%s", moved);
        if (!http_head(url, &r, msg, sizeof msg)) {
            fprintf(stderr, "vkasr: pull %s: %s\n", L->name, msg);
            return EXIT_FAIL;
        }
    }
    if (r.status >= 400)
        return http_failure(L, file, url, &r);
    const char *etag = r.linked_etag[0] ? r.linked_etag : r.etag;
    int64_t size = r.linked_size >= 0 ? r.linked_size : r.status < 300 ? r.content_length : -1;
    if (!is_hex(r.commit, 40) || !etag[0] || strchr(etag, '/') || etag[0] == '.') {
        fprintf(stderr, "vkasr: pull %s: %s: the server's answer lacks %s (HTTP %ld from %s): is $HF_ENDPOINT a "
                        "Hugging Face hub?\n",
                L->name, file, !is_hex(r.commit, 40) ? "X-Repo-Commit" : "a usable ETag", r.status, url);
        return EXIT_FAIL;
    }
    snprintf(commit, 41, "%s", r.commit);
    lower(commit);
    /* The sha256 to check: the index's, else an LFS file's etag (its sha256); a small file kept in git
     * has a git hash there and is checked by size only. */
    char sha[65] = "";
    if (index_sha && index_sha[0])
        snprintf(sha, sizeof sha, "%s", index_sha);
    else if (is_hex(etag, 64)) {
        snprintf(sha, sizeof sha, "%s", etag);
        lower(sha);
    }
    if (index_size && size >= 0 && (uint64_t)size != index_size)
        fprintf(stderr, "vkasr: warning: %s: the hub announces %lld bytes, the index %llu\n", file, (long long)size,
                (unsigned long long)index_size);

    char snap[8192], blob[8192], rel[8192] = "../../";
    snprintf(snap, sizeof snap, "%s/snapshots/%s/%s", L->dir, commit, file);
    snprintf(blob, sizeof blob, "%s/blobs/%s", L->dir, etag);
    struct stat sb;
    if (stat(snap, &sb) == 0) {
        if (!o->quiet)
            fprintf(stderr, "vkasr: %s: already in the cache\n", file);
        return EXIT_OK;
    }
    if (!parent_dirs(blob) || !parent_dirs(snap)) {
        fprintf(stderr, "vkasr: pull %s: cannot create the directories of %s: %s\n", L->name, snap, strerror(errno));
        return EXIT_PULL_DISK;
    }
    int lock = take_lock(L, etag, file);
    if (lock < 0)
        return interrupted ? EXIT_FAIL : EXIT_PULL_DISK;
    int rc = EXIT_OK;
    if (stat(blob, &sb) != 0) {
        if (!o->quiet)
            fprintf(stderr, "vkasr: downloading %s/%s (%lld bytes) at commit %.12s into %s\n", repo, file,
                    (long long)size, commit, L->cache);
        rc = fetch_blob(L, url, file, blob, size, sha, o);
    }
    if (rc == EXIT_OK) { /* the link, relative as huggingface_hub makes it, put in place by a rename */
        for (const char *p = file; (p = strchr(p, '/')); p++)
            strcat(rel, "../");
        snprintf(rel + strlen(rel), sizeof rel - strlen(rel), "blobs/%s", etag);
        char tmp[8300];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", snap, (long)getpid());
        unlink(tmp);
        if (symlink(rel, tmp) != 0 || rename(tmp, snap) != 0) {
            fprintf(stderr, "vkasr: pull %s: cannot link %s to %s: %s\n", L->name, snap, rel, strerror(errno));
            unlink(tmp);
            rc = EXIT_PULL_DISK;
        }
    }
    close(lock);
    return rc;
}

/* The files of the repository at revision that vkasr would load (a listing from the hub's API). */
static int remote_choice(const struct repo_loc *L, const vkasr_hub_model *m, char ***files, size_t *nfiles) {
    char ep[2048], url[8192];
    snprintf(url, sizeof url, "%s/api/models/%s/revision/", endpoint(ep, sizeof ep), m->repo);
    url_append(url, sizeof url, m->revision, false);
    char *body = NULL, msg[512];
    struct http_reply r;
    if (!http_get_text(url, &body, &r, msg, sizeof msg)) {
        fprintf(stderr, "vkasr: pull %s: %s\n", L->name, msg);
        return EXIT_FAIL;
    }
    if (r.status >= 400) {
        free(body);
        return http_failure(L, "the repository's file list", url, &r);
    }
    cJSON *root = cJSON_Parse(body);
    free(body);
    const cJSON *sib = cJSON_GetObjectItemCaseSensitive(root, "siblings"), *s;
    if (!cJSON_IsArray(sib))
        sib = NULL;
    size_t n = (size_t)cJSON_GetArraySize(sib);
    const char **names = calloc(n ? n : 1, sizeof *names);
    size_t k = 0;
    cJSON_ArrayForEach(s, sib) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "rfilename");
        if (names && cJSON_IsString(f))
            names[k++] = f->valuestring;
    }
    int rc = EXIT_OK;
    if (!sib || !names) {
        fprintf(stderr, "vkasr: pull %s: %s: not a repository listing (no \"siblings\" array)\n", L->name, url);
        rc = EXIT_FAIL;
    }
    int pick = rc == EXIT_OK ? vkasr_hub_pick(names, k, m->quant) : -2;
    if (rc == EXIT_OK && pick == -2) {
        fprintf(stderr, "vkasr: pull %s: %s at %s holds %s\n", L->name, m->repo, m->revision,
                m->quant[0] ? "no GGUF of the type asked" : "no model vkasr reads (a .gguf, a .nemo, or config.json "
                                                            "with *.safetensors)");
        rc = EXIT_PULL_NOT_FOUND;
    }
    *files = NULL;
    *nfiles = 0;
    if (rc == EXIT_OK && (*files = calloc(k, sizeof **files))) {
        for (size_t i = 0; i < k; i++) { /* the pick, or a transformers directory's top-level JSON and weights */
            bool want = pick >= 0 ? (int)i == pick
                                  : !strchr(names[i], '/') && (strlen(names[i]) > 5 &&
                                                               (!strcmp(names[i] + strlen(names[i]) - 5, ".json") ||
                                                                strstr(names[i], ".safetensors")));
            if (want && !((*files)[(*nfiles)++] = strdup(names[i])))
                rc = EXIT_FAIL;
        }
    } else if (rc == EXIT_OK)
        rc = EXIT_FAIL;
    free(names);
    cJSON_Delete(root);
    return rc;
}

int pull_model(const char *name, const struct pull_opts *o, char *path, size_t size, char *fetched) {
    vkasr_hub_model m;
    vkasr_error err = {0};
    if (vkasr_hub_lookup(name, &m, &err) != VKASR_OK) {
        fprintf(stderr, "vkasr: pull: %s\n", err.message);
        return EXIT_USAGE;
    }
    /* already there: a pinned commit's file, or anything when offline */
    if ((o->offline || (is_hex(m.revision, 40) && m.file[0])) &&
        vkasr_hub_resolve(name, path, size, &err) == VKASR_OK) {
        if (fetched)
            snprintf(fetched, size, "%s", path);
        return EXIT_OK;
    }
    if (o->offline) {
        fprintf(stderr, "vkasr: pull %s: offline (--offline or $HF_HUB_OFFLINE), and %s\n", name, err.message);
        return EXIT_PULL_NOT_FOUND;
    }
    struct repo_loc L = {.name = name};
    if (!vkasr_hub_cache_dir(L.cache, sizeof L.cache)) {
        fprintf(stderr, "vkasr: pull %s: no cache directory: set HF_HUB_CACHE or HOME\n", name);
        return EXIT_USAGE;
    }
    const char *slash = strchr(m.repo, '/');
    snprintf(L.dir, sizeof L.dir, "%s/models--%.*s--%s", L.cache, (int)(slash - m.repo), m.repo, slash + 1);
    snprintf(L.locks, sizeof L.locks, "%s/.locks/models--%.*s--%s", L.cache, (int)(slash - m.repo), m.repo, slash + 1);
    if (!http_init())
        return EXIT_FAIL;

    char **files = NULL;
    size_t n = 0;
    int rc = EXIT_OK;
    if (m.file[0]) {
        if (!(files = calloc(1, sizeof *files)) || !(files[0] = strdup(m.file)))
            rc = EXIT_FAIL;
        n = files && files[0];
    } else
        rc = remote_choice(&L, &m, &files, &n);
    char commit[41] = "", first[41] = "";
    for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
        /* after the first file, the commit it resolved to: every file from one snapshot */
        rc = fetch_file(&L, m.repo, first[0] ? first : m.revision, files[i], n == 1 ? m.sha256 : "",
                        n == 1 ? m.size : 0, o, commit);
        if (!first[0])
            snprintf(first, sizeof first, "%s", commit);
    }
    if (rc == EXIT_OK && fetched && snprintf(fetched, size, "%s/snapshots/%s%s%s", L.dir, first, n == 1 ? "/" : "",
                                              n == 1 ? files[0] : "") >= (int)size) {
        fprintf(stderr, "vkasr: pull %s: the path is too long\n", name);
        rc = EXIT_USAGE;
    }
    for (size_t i = 0; i < n; i++)
        free(files[i]);
    free(files);
    if (rc == EXIT_OK && !is_hex(m.revision, 40)) {
        char ref[4608];
        snprintf(ref, sizeof ref, "%s/refs/%s", L.dir, m.revision);
        if (!parent_dirs(ref) || !write_atomic(ref, first)) {
            fprintf(stderr, "vkasr: pull %s: cannot write %s: %s\n", name, ref, strerror(errno));
            rc = EXIT_PULL_DISK;
        }
    }
    if (rc == EXIT_OK && vkasr_hub_resolve(name, path, size, &err) != VKASR_OK) {
        fprintf(stderr, "vkasr: pull %s: %s\n", name, err.message);
        rc = EXIT_FAIL;
    }
    return rc;
}
