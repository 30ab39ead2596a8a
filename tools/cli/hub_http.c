/* hub_http.c — the HTTP side of `vkasr pull` through libcurl (TLS, redirects, proxies from the
 * environment): HEAD of a hub file (commit, etag, size), a small GET for a repository's listing, and
 * resumable body downloads with a progress line and Ctrl-C. The token goes along as a bearer token,
 * which libcurl keeps from other hosts a redirect leads to. */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "pull.h"

bool http_init(void) {
    static int done;
    if (!done)
        done = curl_global_init(CURL_GLOBAL_DEFAULT) == 0 ? 1 : -1;
    if (done < 0)
        fprintf(stderr, "vkasr: cannot initialise libcurl\n");
    return done > 0;
}

/* "Authorization: Bearer TOKEN" from $HF_TOKEN, else the file `huggingface-cli login` writes
 * ($HF_TOKEN_PATH, else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else
 * ~/.cache/huggingface/token), into buf; false when there is none. */
static bool auth_header(char *buf, size_t size) {
    char token[512] = "";
    const char *t = getenv("HF_TOKEN");
    if (t && *t)
        snprintf(token, sizeof token, "%s", t);
    else {
        char path[4096];
        const char *tp = getenv("HF_TOKEN_PATH"), *home = getenv("HF_HOME"), *x = getenv("XDG_CACHE_HOME"),
                   *h = getenv("HOME");
        if (tp && *tp)
            snprintf(path, sizeof path, "%s", tp);
        else if (home && *home)
            snprintf(path, sizeof path, "%s/token", home);
        else if (x && *x)
            snprintf(path, sizeof path, "%s/huggingface/token", x);
        else if (h && *h)
            snprintf(path, sizeof path, "%s/.cache/huggingface/token", h);
        else
            return false;
        FILE *f = fopen(path, "r");
        if (!f)
            return false;
        if (!fgets(token, sizeof token, f))
            token[0] = '\0';
        fclose(f);
        token[strcspn(token, " \r\n")] = '\0';
    }
    return token[0] && snprintf(buf, size, "Authorization: Bearer %s", token) < (int)size;
}

/* ---- headers ---- */

static void copy_value(char *dst, size_t dn, const char *v, size_t n, bool etag) {
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
        n--;
    if (etag) { /* huggingface_hub's normalisation: no weak prefix, no quotes */
        if (n >= 2 && !strncmp(v, "W/", 2))
            v += 2, n -= 2;
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"')
            v++, n -= 2;
    }
    snprintf(dst, dn, "%.*s", (int)n, v);
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud) {
    struct http_reply *r = ud;
    size_t n = size * nitems;
    if (n >= 5 && !strncmp(line, "HTTP/", 5)) { /* a new response (after a redirect): start over */
        long keep = 0;
        sscanf(line, "HTTP/%*s %ld", &keep);
        memset(r, 0, sizeof *r);
        r->status = keep;
        r->linked_size = r->content_length = -1;
        return n;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon)
        return n;
    size_t kn = (size_t)(colon - line), vn = n - kn - 1;
    const char *v = colon + 1;
    char num[32];
#define IS(k) (kn == sizeof(k) - 1 && !strncasecmp(line, k, kn))
    if (IS("Location"))
        copy_value(r->location, sizeof r->location, v, vn, false);
    else if (IS("X-Repo-Commit"))
        copy_value(r->commit, sizeof r->commit, v, vn, false);
    else if (IS("X-Linked-Etag"))
        copy_value(r->linked_etag, sizeof r->linked_etag, v, vn, true);
    else if (IS("ETag"))
        copy_value(r->etag, sizeof r->etag, v, vn, true);
    else if (IS("X-Error-Code"))
        copy_value(r->error_code, sizeof r->error_code, v, vn, false);
    else if (IS("X-Error-Message"))
        copy_value(r->error_message, sizeof r->error_message, v, vn, false);
    else if (IS("X-Linked-Size") || IS("Content-Length")) {
        copy_value(num, sizeof num, v, vn, false);
        char *end = NULL;
        long long x = strtoll(num, &end, 10);
        if (end != num && *end == '\0' && x >= 0)
            *(IS("X-Linked-Size") ? &r->linked_size : &r->content_length) = x;
    }
#undef IS
    return n;
}

/* A handle with what every request shares; NULL after a message. */
static CURL *easy(const char *url, struct http_reply *r, struct curl_slist **hdrs) {
    if (!http_init())
        return NULL;
    CURL *c = curl_easy_init();
    if (!c) {
        fprintf(stderr, "vkasr: cannot create a libcurl handle\n");
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->linked_size = r->content_length = -1;
    char auth[600];
    *hdrs = curl_slist_append(NULL, "Accept-Encoding: identity"); /* sizes and Range refer to the raw bytes */
    if (*hdrs && auth_header(auth, sizeof auth))
        *hdrs = curl_slist_append(*hdrs, auth);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    char ua[64];
    snprintf(ua, sizeof ua, "vkasr/%s", vkasr_version_string());
    curl_easy_setopt(c, CURLOPT_USERAGENT, ua); /* copied by libcurl */
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    /* a stalled transfer (under 1 byte/s for 60 s) fails and is retried rather than hanging */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    return c;
}

static void finish(CURL *c, struct curl_slist *hdrs) {
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
}

bool http_head(const char *url, struct http_reply *r, char *msg, size_t msize) {
    struct curl_slist *h = NULL;
    CURL *c = easy(url, r, &h);
    if (!c)
        return snprintf(msg, msize, "libcurl failed"), false;
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        snprintf(msg, msize, "%s: %s", url, curl_easy_strerror(cc));
    finish(c, h);
    return cc == CURLE_OK;
}

struct text_sink {
    char *buf;
    size_t len;
};

static size_t on_text(char *p, size_t size, size_t n, void *ud) {
    struct text_sink *t = ud;
    size_t k = size * n;
    if (t->len + k > (64u << 20)) /* a listing of a repository is far smaller */
        return 0;
    char *g = realloc(t->buf, t->len + k + 1);
    if (!g)
        return 0;
    memcpy(g + t->len, p, k);
    t->buf = g;
    t->len += k;
    t->buf[t->len] = '\0';
    return k;
}

bool http_get_text(const char *url, char **body, struct http_reply *r, char *msg, size_t msize) {
    *body = NULL;
    struct curl_slist *h = NULL;
    CURL *c = easy(url, r, &h);
    if (!c)
        return snprintf(msg, msize, "libcurl failed"), false;
    struct text_sink t = {0};
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_text);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        snprintf(msg, msize, "%s: %s", url, curl_easy_strerror(cc));
        free(t.buf);
    } else
        *body = t.buf ? t.buf : strdup("");
    finish(c, h);
    return cc == CURLE_OK && *body;
}

/* ---- body downloads ---- */

struct body_sink {
    CURL *c;
    int fd;
    uint64_t *have;
    int write_errno;
    bool checked; /* the response's status was looked at */
    bool ok;      /* a 200 or 206 whose bytes go to the file */
};

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    struct body_sink *s = ud;
    size_t k = size * n;
    if (!s->checked) {
        long st = 0;
        curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &st);
        s->checked = true;
        s->ok = st == 200 || st == 206;
        if (st == 200 && *s->have > 0) { /* the server ignored Range: the whole body, from the start */
            if (ftruncate(s->fd, 0) != 0 || lseek(s->fd, 0, SEEK_SET) != 0) {
                s->write_errno = errno;
                return 0;
            }
            *s->have = 0;
        }
    }
    if (!s->ok)
        return k; /* an error page: dropped, the status says what happened */
    for (size_t off = 0; off < k;) {
        ssize_t w = write(s->fd, p + off, k - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
        *s->have += (uint64_t)w;
    }
    return k;
}

static void human(double b, char *buf, size_t n) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4)
        b /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

struct xfer {
    struct dl_progress *p;
    uint64_t *have;
    int64_t total; /* the expected size; -1: unknown */
};

/* The progress line: FILE  GOT / TOTAL  PCT%  RATE/s (RATE over this run's bytes). */
static void draw(const struct xfer *x, double t) {
    const struct dl_progress *p = x->p;
    char got[32], tot[32] = "?", rate[32];
    human((double)*x->have, got, sizeof got);
    if (x->total > 0)
        human((double)x->total, tot, sizeof tot);
    human(t > p->t0 ? (double)(*x->have - p->start) / (t - p->t0) : 0.0, rate, sizeof rate);
    double frac = x->total > 0 ? (double)*x->have / (double)x->total : 0.0;
    fprintf(stderr, "\r%s  %s / %s  %3d%%  %s/s   ", p->label, got, tot, (int)(frac * 100.0), rate);
    fflush(stderr);
}

static int on_xfer(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    struct xfer *x = ud;
    if (interrupted)
        return 1; /* CURLE_ABORTED_BY_CALLBACK: the .incomplete stays for the next pull */
    double t = now_s();
    if (x->p->enabled && t - x->p->last >= 0.2) {
        x->p->last = t;
        draw(x, t);
    }
    return 0;
}

enum dl_result http_download(const char *url, int fd, uint64_t *have, struct dl_progress *p, struct http_reply *r,
                             char *msg, size_t msize) {
    struct curl_slist *h = NULL;
    CURL *c = easy(url, r, &h);
    if (!c)
        return snprintf(msg, msize, "libcurl failed"), DL_FAIL;
    char range[64];
    snprintf(range, sizeof range, "%llu-", (unsigned long long)*have);
    struct body_sink s = {.c = c, .fd = fd, .have = have};
    struct xfer x = {.p = p, .have = have, .total = -1};
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    if (*have > 0)
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    x.total = p->total;
    p->start = *have;
    p->t0 = p->last = now_s();
    CURLcode cc = curl_easy_perform(c);
    long st = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    finish(c, h);
    if (p->enabled && s.ok) {
        draw(&x, now_s());
        fputc('\n', stderr);
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK || interrupted)
        return snprintf(msg, msize, "interrupted"), DL_INTERRUPTED;
    if (s.write_errno)
        return snprintf(msg, msize, "%s", strerror(s.write_errno)), DL_FAIL;
    if (cc == CURLE_OK && (st == 200 || st == 206))
        return DL_OK;
    if (cc == CURLE_OK && st == 416) /* the range starts at the end: the file is complete */
        return DL_OK;
    if (cc != CURLE_OK) {
        snprintf(msg, msize, "%s", curl_easy_strerror(cc));
        return cc == CURLE_OUT_OF_MEMORY || cc == CURLE_UNSUPPORTED_PROTOCOL || cc == CURLE_URL_MALFORMAT ? DL_FAIL
                                                                                                          : DL_RETRY;
    }
    snprintf(msg, msize, "HTTP %ld%s%s", st, r->error_message[0] ? ": " : "", r->error_message);
    return st >= 500 || st == 429 || st == 408 ? DL_RETRY : DL_FAIL;
}
