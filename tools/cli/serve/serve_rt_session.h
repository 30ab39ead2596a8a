/* serve_rt_session.h — the state of one Realtime connection, shared by its two halves: the protocol
 * (serve_rt_events.c: the client's events, the stream's callbacks, the server's events) and the
 * connection (serve_realtime.c: the registry, the handshake, the thread, the limits). Private to them. */
#ifndef VKASR_SERVE_RT_SESSION_H
#define VKASR_SERVE_RT_SESSION_H

#include <stdatomic.h>

#include <cjson/cJSON.h>

#include "serve_rt.h"

/* One event waiting for the connection's thread. */
struct out_msg {
    char *text;
    size_t len;
    struct out_msg *next;
};

/* A session: one WebSocket connection. */
struct rt_sess {
    struct serve_realtime *rt;
    unsigned long id;
    char who[96];                  /* what the per-key limit counts: the key, or the client address */
    bool refused;                  /* over a limit: told so and closed                             */
    const char *refusal;
    int fd;
    struct MHD_UpgradeResponseHandle *urh;
    char *extra;
    size_t extra_len;
    struct ws *ws;
    int wake[2];                   /* the callbacks' events are waiting                            */
    pthread_t thread;
    bool started, finished;
    struct rt_sess *next;
    double t_open, t_last;
    /* the connection's settings (session.update) */
    int rate;                      /* Hz of the PCM16 the client sends                             */
    bool vad;                      /* turn detection: items end where the stream ends a segment    */
    bool partial;                  /* include "vkasr.partial": tentative words as they change      */
    char language[32];             /* as the client sent it (echoed)                               */
    char lang[64];                 /* the model's language for it (serve_language; "": default)    */
    bool ga_names;                 /* the client speaks GA names (session.*), else the beta ones   */
    /* the stream of the uncommitted audio */
    vkasr_session *vs;
    int model_index;
    vkasr_stream *stream;
    size_t stream_samples;         /* samples pushed to it, at `rate`                              */
    double offset_s;               /* audio of the streams before it                               */
    double audio_s;                /* audio received in all                                        */
    unsigned items;
    bool fatal;                    /* the stream failed: end the session                           */
    /* shared with the stream's callbacks (under mu) */
    pthread_mutex_t mu;
    struct out_msg *out_head, *out_tail;
    size_t out_bytes;
    atomic_ulong next_event;
    unsigned long next_item;
    bool item_open, committing;
    char item_id[48], prev_item_id[48];
    char *item_text;               /* the item's final text so far (malloc'd)                      */
    cJSON *item_words;             /* [{word, start, end}]                                          */
    char *last_partial;
};

struct serve_realtime {
    struct pool *pool;
    const vkasr_model *model;      /* the served model (its languages: serve_language)             */
    const struct serve_opts *o;
    pthread_mutex_t mu;
    struct rt_sess *sessions;      /* every session whose thread has not been joined               */
    unsigned active;               /* sessions holding a stream slot (refused ones excluded)       */
    unsigned long next_id;
    vkasr_session **idle;          /* sessions (vkasr_session) kept for the next stream            */
    int *idle_model;
    unsigned n_idle;
    unsigned long opened;          /* vkasr sessions opened so far (round-robin over the models)   */
    atomic_bool stopping;
};

/* ---- serve_rt_events.c ---- */

/* An error event in OpenAI's shape (message copied); any thread. */
void rt_emit_error(struct rt_sess *s, const char *type, const char *code, const char *param, const char *message,
                   const char *client_event_id);
/* session.created / .updated (what: "created", "updated"), named as the client names its events. */
void rt_emit_session(struct rt_sess *s, const char *what);
/* A whole WebSocket message from the client (ws_message_fn). */
void rt_on_message(void *ud, bool binary, const unsigned char *data, size_t len);
/* input_audio_buffer.commit: the audio so far transcribed to the end, its events queued. */
void rt_commit(struct rt_sess *s, const char *client_event_id);

#endif
