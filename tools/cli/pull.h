/* pull.h — downloading models by name into the Hugging Face cache: the HTTP client (hub_http.c, libcurl),
 * the cache writer (pull.c: locks, resumable .incomplete blobs, sha256, snapshots and refs), and the
 * `vkasr pull` / `vkasr models` commands (cmd_pull.c). The library reads the cache (vkasr_hub_*); only
 * the CLI touches the network. */
#ifndef VKASR_CLI_PULL_H
#define VKASR_CLI_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- hub_http.c ---- */

/* What a hub response said (headers of the first response: redirects are not followed by http_head). */
struct http_reply {
    long status;                 /* HTTP status; 0: no response                                  */
    char location[2048];         /* Location of a redirect                                       */
    char commit[64];             /* X-Repo-Commit                                                */
    char linked_etag[160];       /* X-Linked-Etag (an LFS file's sha256), quotes and W/ removed  */
    char etag[160];              /* ETag, quotes and W/ removed                                  */
    char error_code[64];         /* X-Error-Code (RepoNotFound, EntryNotFound, GatedRepo, ...)   */
    char error_message[256];     /* X-Error-Message                                              */
    int64_t linked_size;         /* X-Linked-Size; -1: absent                                    */
    int64_t content_length;      /* Content-Length; -1: absent                                   */
};

/* A download's progress line on stderr. */
struct dl_progress {
    bool enabled;
    const char *label;           /* the file's name                                              */
    int64_t total;               /* the expected size; -1: unknown                               */
    double t0, last;
    uint64_t start;              /* bytes there before this run (a resumed .incomplete)          */
};

enum dl_result {
    DL_OK,          /* the body is in the file                                            */
    DL_RETRY,       /* a transient failure (connection, timeout, 5xx, 429): try again     */
    DL_FAIL,        /* a failure that another try does not mend (4xx, a write error)      */
    DL_INTERRUPTED, /* Ctrl-C                                                             */
};

/* libcurl set up once per process; false (after a message) when it cannot be. */
bool http_init(void);
/* A HEAD request (no redirect followed); false with msg on a transport failure. */
bool http_head(const char *url, struct http_reply *r, char *msg, size_t msize);
/* A GET of a small text body (redirects followed) into *body (malloc'd, NUL-terminated). */
bool http_get_text(const char *url, char **body, struct http_reply *r, char *msg, size_t msize);
/* GETs url (redirects followed) into fd from byte offset *have on (an HTTP Range request when > 0; a
 * server that answers with the whole body restarts the file). *have counts the bytes the file holds at
 * the end; r the final response's headers; msg why it failed. */
enum dl_result http_download(const char *url, int fd, uint64_t *have, struct dl_progress *p, struct http_reply *r,
                             char *msg, size_t msize);

/* ---- pull.c ---- */

struct pull_opts {
    bool offline;        /* --offline or $HF_HUB_OFFLINE: the cache only                      */
    bool progress;       /* a progress line on stderr                                       */
    bool quiet;          /* no messages but errors                                          */
};
/* Makes the model a name stands for present in the cache (downloads what is missing) and copies the
 * path vkasr loads into path; fetched (NULL: not wanted; at least size bytes) receives what was pulled:
 * the file, or a transformers snapshot's directory. Returns an exit code (EXIT_OK, or a failure after a
 * message). */
int pull_model(const char *name, const struct pull_opts *o, char *path, size_t size, char *fetched);
/* $HF_HUB_OFFLINE set to 1, ON, YES or TRUE. */
bool hub_offline_env(void);

#endif
