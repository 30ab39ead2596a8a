/* serve.h — what the files of `vkasr serve` share: the options, the request queue whose turns run on
 * the worker pool (serve_queue.c), the response formats (serve_format.c) and the HTTP front end
 * (serve_http.c). */
#ifndef VKASR_SERVE_H
#define VKASR_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "../cli.h"

#define SERVE_MAX_BATCH 256 /* --max-batch at most */

/* --warm-up: what each worker transcribes before the server is ready. */
enum serve_warm {
    SERVE_WARM_AUTO,               /* batches on a GPU, short on the host's CPU                 */
    SERVE_WARM_SHORT,              /* half a second of silence alone                            */
    SERVE_WARM_BATCHES,            /* that, then batches of silence shaped like loaded turns    */
};

/* The options of `vkasr serve` (cmd_serve.c fills them). */
struct serve_opts {
    const char *host;              /* numeric address to bind                                   */
    int port;                      /* 0: any free port (printed once bound)                     */
    const char *api_key;           /* NULL: no authentication                                   */
    const char *model_name;        /* what /v1/models lists and `model` must name               */
    size_t max_upload;             /* bytes of one request body at most                         */
    unsigned max_concurrent;       /* open connections at most                                  */
    unsigned timeout_s;            /* a connection idle this long is closed                     */
    size_t max_queue;              /* requests waiting for the worker at most                   */
    int batch_wait_ms;             /* how long a free worker lets the oldest request wait for
                                    * others to join its turn (0: none)                         */
    size_t max_batch;              /* requests packed into one turn at most (SERVE_MAX_BATCH)   */
    double solo_seconds;           /* inputs longer than this run alone, in their own turn      */
    enum serve_warm warm_up;       /* --warm-up                                                 */
    vkasr_transcribe_params tp;    /* no callbacks                                              */
    vkasr_subtitle_params subs;    /* srt, vtt: the cues' limits unless a request sets its own  */
    /* live: the Realtime WebSocket (serve_realtime.c) and the page (serve_ui.c) */
    unsigned max_streams;          /* Realtime streams at once (each holds a session)           */
    unsigned max_streams_per_key;  /* of them per API key (per client address without a key)    */
    double stream_max_s;           /* a Realtime session's length at most                       */
    double stream_idle_s;          /* a Realtime session without a message this long is closed  */
    size_t ws_max_message;         /* bytes of one WebSocket message at most                    */
    const char *cors_origin;       /* NULL: no CORS; else the one origin allowed ("*": any)     */
    bool no_ui;                    /* GET / is the plain-text page                              */
    struct pool *pool;             /* set by cmd_serve: the workers (GET /status)               */
    struct serve_realtime *realtime; /* set by cmd_serve                                        */
};

/* The response formats of POST /v1/audio/transcriptions. */
enum serve_fmt { SFMT_JSON, SFMT_TEXT, SFMT_SRT, SFMT_VTT, SFMT_VERBOSE };

/* One transcription request. The HTTP thread fills the input fields, enqueues it and waits; the worker
 * fills the output fields, sets done and broadcasts the queue's condition; after that the worker no
 * longer touches it. */
struct serve_job {
    /* input */
    float *samples;                /* 16 kHz mono (vkasr_audio_load); the worker takes and frees them: the
                                      waiting thread frees what is left after the answer          */
    size_t n;
    enum serve_fmt fmt;
    bool words;                    /* verbose_json: words too                                   */
    bool segments;                 /* verbose_json: segments (default)                          */
    const char *language;          /* verbose_json's language (as requested)                     */
    char lang[64];                 /* the model's language for it (serve_language; "": default) */
    vkasr_subtitle_params subs;    /* srt, vtt: the cues' limits                                 */
    bool stream;                   /* stream=true: server-sent events as segments complete (the
                                      turn runs alone, with a segment callback)                  */
    double t_enqueue;
    /* output */
    bool done;
    int status;                    /* HTTP status                                               */
    char *body;                    /* malloc'd response body (the error's message when status != 200) */
    size_t body_len;
    const char *content_type;
    double queue_ms, compute_ms;
    size_t batch_size;             /* requests in the turn that ran it                          */
    int worker;                    /* the pool's worker that ran it (its place in --devices)    */
    const char *device;            /* that worker's device, as named ("default": none named)    */
    /* stream output: the events so far, appended by the worker under the queue's lock; when done
     * with none, status and body hold an ordinary answer */
    char *events;
    size_t events_len, events_cap;
    bool gone;                     /* the client left: the worker stops the transcription        */
    struct serve_job *next;
};

struct serve_queue;

/* Starts the pool's workers on a new queue: each warms its device up, then runs the next turn when free
 * (a turn is a job of the pool, queued with each request). NULL on failure (a message on stderr). */
struct serve_queue *serve_queue_start(struct pool *pool, const struct serve_opts *o);
/* Whether every worker's warm-up transcription has run (the server is ready). */
bool serve_queue_ready(struct serve_queue *q);
/* Adds a job; false when the queue is full or stopping (the job was not taken). */
bool serve_queue_push(struct serve_queue *q, struct serve_job *job);
/* Waits until the worker has answered `job`. */
void serve_queue_wait(struct serve_queue *q, struct serve_job *job);
/* A stream job: waits until it has its first event or is done; true when its answer is the events (200),
 * false when it is an ordinary error answer (status, body). */
bool serve_queue_wait_events(struct serve_queue *q, struct serve_job *job);
/* A stream job: copies up to max bytes of its events from pos into buf, waiting for them; 0 once the
 * job is done and every event was read. */
size_t serve_queue_read_events(struct serve_queue *q, struct serve_job *job, size_t pos, char *buf, size_t max);
/* A queued job whose client left: tells the worker to stop it and waits until the worker is done with it. */
void serve_queue_forget(struct serve_queue *q, struct serve_job *job);
/* Asks the workers to abandon the turns in progress (their jobs answer 503). */
void serve_queue_abort(struct serve_queue *q);
/* Lets the workers finish what is queued, stops the pool's threads and frees the queue (not the pool). */
void serve_queue_stop(struct serve_queue *q);

/* The body of a successful answer in `fmt` (malloc'd, *len its length, *type its content type); NULL
 * when out of memory. */
char *serve_format(const struct serve_job *job, const vkasr_result *r, size_t *len, const char **type);
/* A server-sent event `data: {"type": TYPE, KEY: PREFIX TEXT}` and its blank line (OpenAI's
 * transcript.text.delta and .done); malloc'd; NULL when out of memory. */
char *serve_sse_event(const char *type, const char *key, const char *prefix, const char *text, size_t *len);
/* {"error": {...}} in OpenAI's shape; malloc'd; NULL when out of memory. param and code may be NULL. */
char *serve_error_json(const char *message, const char *type, const char *param, const char *code, size_t *len);

/* A request's language for model m (serve_lang.c): true with the name to pass as
 * vkasr_transcribe_params.language / vkasr_stream_params.language in out ("" for the model's default:
 * none asked, or a model without a prompt asked its own language), false with the reason in msg. */
bool serve_language(const vkasr_model *m, const char *req, char *out, size_t out_size, char *msg, size_t msg_size);

struct serve_http;
/* Binds and starts the HTTP server (one thread per connection); *port receives the bound port. NULL on
 * failure, with a message on stderr. */
struct serve_http *serve_http_start(const struct serve_opts *o, struct serve_queue *q, int *port);
/* Stops accepting connections; the requests already in progress go on. */
void serve_http_quiesce(struct serve_http *h);
/* Requests in progress (from their first byte to their answer's last). */
unsigned serve_http_active(struct serve_http *h);
/* Closes every connection and frees the server. */
void serve_http_stop(struct serve_http *h);

#endif
