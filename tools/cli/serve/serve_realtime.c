/* serve_realtime.c — GET /v1/realtime: OpenAI's Realtime API in transcription mode over a WebSocket
 * (serve_ws.c). One thread and one vkasr_stream per connection; the stream's callbacks turn final words
 * into transcription deltas, its segment ends into turns (items), and queue the events for the
 * connection's thread, so a slow client never blocks a stream or another client. Limits: streams per
 * server and per key, session length, idle time, message size, unread output (docs/server.md). */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <openssl/evp.h>

#include "serve_rt.h"

#define OUT_MIN_LIMIT (1u << 20) /* unsent output a session may hold at least before it is dropped  */
#define END_FLUSH_S 2.0          /* how long a closing session waits for its last events to go out */

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
    char language[32];
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

/* ---- events ---- */

/* Queues an event for the connection's thread (mu held). Takes obj. */
static void emit_locked(struct rt_sess *s, cJSON *obj) {
    if (!obj)
        return;
    char *text = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    struct out_msg *m = text ? malloc(sizeof *m) : NULL;
    if (!m) {
        free(text);
        return;
    }
    *m = (struct out_msg){text, strlen(text), NULL};
    if (s->out_tail)
        s->out_tail->next = m;
    else
        s->out_head = m;
    s->out_tail = m;
    s->out_bytes += m->len;
    ssize_t w = write(s->wake[1], "", 1); /* non-blocking: a full pipe already wakes the thread */
    (void)w;
}

static void emit(struct rt_sess *s, cJSON *obj) {
    pthread_mutex_lock(&s->mu);
    emit_locked(s, obj);
    pthread_mutex_unlock(&s->mu);
}

/* A new event: event_id (numbered per connection), then type, as OpenAI writes them. */
static cJSON *event(struct rt_sess *s, const char *type) {
    cJSON *o = cJSON_CreateObject();
    if (o) {
        char id[48];
        snprintf(id, sizeof id, "event_%lu_%lu", s->id, (unsigned long)atomic_fetch_add(&s->next_event, 1) + 1);
        cJSON_AddStringToObject(o, "event_id", id);
        cJSON_AddStringToObject(o, "type", type);
    }
    return o;
}

/* An error event in OpenAI's shape: {type: "error", error: {type, code, message, param, event_id}}. */
static void emit_error(struct rt_sess *s, const char *type, const char *code, const char *param, const char *message,
                       const char *client_event_id) {
    cJSON *o = event(s, "error"), *e = cJSON_CreateObject();
    if (!o || !e) {
        cJSON_Delete(o);
        cJSON_Delete(e);
        return;
    }
    cJSON_AddStringToObject(e, "type", type);
    code ? (void)cJSON_AddStringToObject(e, "code", code) : (void)cJSON_AddNullToObject(e, "code");
    cJSON_AddStringToObject(e, "message", message);
    param ? (void)cJSON_AddStringToObject(e, "param", param) : (void)cJSON_AddNullToObject(e, "param");
    client_event_id ? (void)cJSON_AddStringToObject(e, "event_id", client_event_id)
                    : (void)cJSON_AddNullToObject(e, "event_id");
    cJSON_AddItemToObject(o, "error", e);
    emit(s, o);
}

/* ---- items: the turns of a connection ---- */

/* Opens an item (mu held); with turn detection, speech_started marks where its first word starts. */
static void item_open(struct rt_sess *s, double start_s, bool announce) {
    snprintf(s->item_id, sizeof s->item_id, "item_%lu_%lu", s->id, ++s->next_item);
    s->item_open = true;
    free(s->item_text);
    s->item_text = NULL;
    cJSON_Delete(s->item_words);
    s->item_words = cJSON_CreateArray();
    if (announce) {
        cJSON *o = event(s, "input_audio_buffer.speech_started");
        if (o) {
            cJSON_AddNumberToObject(o, "audio_start_ms", floor(start_s * 1000 + 0.5));
            cJSON_AddStringToObject(o, "item_id", s->item_id);
        }
        emit_locked(s, o);
    }
}

static void emit_committed_locked(struct rt_sess *s) {
    cJSON *o = event(s, "input_audio_buffer.committed");
    if (o) {
        s->prev_item_id[0] ? (void)cJSON_AddStringToObject(o, "previous_item_id", s->prev_item_id)
                           : (void)cJSON_AddNullToObject(o, "previous_item_id");
        cJSON_AddStringToObject(o, "item_id", s->item_id);
    }
    emit_locked(s, o);
}

/* .completed for the open item, with its words and their times (seconds from the connection's first
 * sample), then closes it (mu held). */
static void item_complete(struct rt_sess *s) {
    cJSON *o = event(s, "conversation.item.input_audio_transcription.completed");
    if (o) {
        cJSON_AddStringToObject(o, "item_id", s->item_id);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON_AddStringToObject(o, "transcript", s->item_text ? s->item_text : "");
        cJSON_AddItemToObject(o, "words", s->item_words ? s->item_words : cJSON_CreateArray());
        s->item_words = NULL;
    }
    emit_locked(s, o);
    snprintf(s->prev_item_id, sizeof s->prev_item_id, "%s", s->item_id);
    s->item_open = false;
    s->items++;
}

/* Words that became final: a delta of the open item (opened if none is). */
static void on_final(const vkasr_stream_update *u, void *ud) {
    struct rt_sess *s = ud;
    pthread_mutex_lock(&s->mu);
    if (u->n_words) {
        if (!s->item_open)
            item_open(s, s->offset_s + u->words[0].start, s->vad && !s->committing);
        size_t have = s->item_text ? strlen(s->item_text) : 0, add = 0;
        for (size_t i = 0; i < u->n_words; i++)
            add += strlen(u->words[i].text) + 1;
        char *piece = malloc(add + 1), *text = realloc(s->item_text, have + add + 1);
        if (text)
            s->item_text = text;
        if (piece && text) {
            size_t k = 0;
            for (size_t i = 0; i < u->n_words; i++) {
                if (have + k > 0)
                    piece[k++] = ' ';
                size_t n = strlen(u->words[i].text);
                memcpy(piece + k, u->words[i].text, n);
                k += n;
                cJSON *w = cJSON_CreateObject();
                if (w) {
                    cJSON_AddStringToObject(w, "word", u->words[i].text);
                    cJSON_AddNumberToObject(w, "start", floor((s->offset_s + u->words[i].start) * 1000 + 0.5) / 1000);
                    cJSON_AddNumberToObject(w, "end", floor((s->offset_s + u->words[i].end) * 1000 + 0.5) / 1000);
                    if (!cJSON_AddItemToArray(s->item_words, w))
                        cJSON_Delete(w);
                }
            }
            piece[k] = '\0';
            memcpy(s->item_text + have, piece, k + 1);
            cJSON *o = event(s, "conversation.item.input_audio_transcription.delta");
            if (o) {
                cJSON_AddStringToObject(o, "item_id", s->item_id);
                cJSON_AddNumberToObject(o, "content_index", 0);
                cJSON_AddStringToObject(o, "delta", piece);
            }
            emit_locked(s, o);
        }
        free(piece);
    }
    /* with turn detection, the stream's segment end (a sentence end, a pause of a second, 30 s) ends the
     * turn: speech_stopped, committed, completed */
    if (u->segment_end && s->vad && !s->committing && s->item_open) {
        cJSON *o = event(s, "input_audio_buffer.speech_stopped");
        if (o) {
            int n = cJSON_GetArraySize(s->item_words);
            cJSON *last = n ? cJSON_GetArrayItem(s->item_words, n - 1) : NULL;
            double end = last ? cJSON_GetNumberValue(cJSON_GetObjectItem(last, "end")) : s->offset_s + u->audio_end;
            cJSON_AddNumberToObject(o, "audio_end_ms", floor(end * 1000 + 0.5));
            cJSON_AddStringToObject(o, "item_id", s->item_id);
        }
        emit_locked(s, o);
        emit_committed_locked(s);
        item_complete(s);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Tentative words (the "vkasr.partial" event, when the client included it): they may change. */
static void on_partial(const vkasr_stream_update *u, void *ud) {
    struct rt_sess *s = ud;
    pthread_mutex_lock(&s->mu);
    if (s->partial && (!s->last_partial || strcmp(s->last_partial, u->text) != 0)) {
        free(s->last_partial);
        s->last_partial = strdup(u->text);
        cJSON *o = event(s, "vkasr.partial");
        if (o) {
            s->item_open ? (void)cJSON_AddStringToObject(o, "item_id", s->item_id)
                         : (void)cJSON_AddNullToObject(o, "item_id");
            cJSON_AddStringToObject(o, "text", u->text);
        }
        emit_locked(s, o);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- sessions (vkasr_session) for the streams ---- */

/* A session for a new connection: one kept from an earlier connection, else a new one on the next model
 * (round-robin over the pool's workers, whose devices differ with --devices). */
static vkasr_session *session_take(struct serve_realtime *rt, int *model_index, char *err, size_t errsize) {
    pthread_mutex_lock(&rt->mu);
    if (rt->n_idle) {
        rt->n_idle--;
        *model_index = rt->idle_model[rt->n_idle];
        vkasr_session *s = rt->idle[rt->n_idle];
        pthread_mutex_unlock(&rt->mu);
        return s;
    }
    int i = (int)(rt->opened++ % (unsigned long)pool_size(rt->pool));
    pthread_mutex_unlock(&rt->mu);
    vkasr_session *s = NULL;
    vkasr_error e;
    if (vkasr_session_create(pool_worker(rt->pool, i)->model, &s, &e) != VKASR_OK) {
        snprintf(err, errsize, "cannot open a session for the stream: %s", e.message);
        return NULL;
    }
    *model_index = i;
    return s;
}

static void session_give_back(struct serve_realtime *rt, vkasr_session *s, int model_index) {
    if (!s)
        return;
    pthread_mutex_lock(&rt->mu);
    if (rt->n_idle < rt->o->max_streams) {
        rt->idle[rt->n_idle] = s;
        rt->idle_model[rt->n_idle++] = model_index;
        s = NULL;
    }
    pthread_mutex_unlock(&rt->mu);
    vkasr_session_free(s);
}

/* ---- the client's events ---- */

static const char *const model_aliases[] = {"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe",
                                            "gpt-4o-transcribe-latest", "gpt-realtime"};

/* The rate of an input_audio_format / audio.input.format value: "pcm16" (OpenAI's: 24 kHz) or
 * {"type": "audio/pcm", "rate": R} with R from 8000 to 48000 (OpenAI takes 24000 only); 0 if neither. */
static int format_rate(const cJSON *f) {
    if (cJSON_IsString(f))
        return !strcmp(f->valuestring, "pcm16") ? 24000 : 0;
    const cJSON *t = cJSON_GetObjectItem(f, "type"), *r = cJSON_GetObjectItem(f, "rate");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "audio/pcm") != 0)
        return 0;
    if (!r)
        return 24000;
    double v = cJSON_GetNumberValue(r);
    return cJSON_IsNumber(r) && v >= 8000 && v <= 48000 && v == floor(v) ? (int)v : 0;
}

/* The session object of session.created/updated: the beta's fields and the GA's audio.input. */
static cJSON *session_object(const struct rt_sess *s) {
    cJSON *o = cJSON_CreateObject(), *tr = cJSON_CreateObject(), *fmt = cJSON_CreateObject();
    cJSON *audio = cJSON_CreateObject(), *in = cJSON_CreateObject(), *inc = cJSON_CreateArray();
    if (!o || !tr || !fmt || !audio || !in || !inc) {
        cJSON_Delete(o), cJSON_Delete(tr), cJSON_Delete(fmt), cJSON_Delete(audio), cJSON_Delete(in), cJSON_Delete(inc);
        return NULL;
    }
    char id[40];
    snprintf(id, sizeof id, "sess_%lu", s->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "realtime.transcription_session");
    cJSON_AddStringToObject(o, "type", "transcription");
    cJSON_AddStringToObject(tr, "model", s->rt->o->model_name);
    cJSON_AddStringToObject(tr, "language", s->language);
    cJSON_AddStringToObject(tr, "prompt", "");
    cJSON_AddStringToObject(fmt, "type", "audio/pcm");
    cJSON_AddNumberToObject(fmt, "rate", s->rate);
    if (s->rate == 24000)
        cJSON_AddStringToObject(o, "input_audio_format", "pcm16");
    else
        cJSON_AddItemToObject(o, "input_audio_format", cJSON_Duplicate(fmt, true));
    cJSON_AddItemToObject(o, "input_audio_transcription", cJSON_Duplicate(tr, true));
    cJSON *td = NULL;
    if (s->vad) {
        td = cJSON_CreateObject();
        cJSON_AddStringToObject(td, "type", "server_vad");
        cJSON_AddNumberToObject(td, "silence_duration_ms", 1000);
    }
    cJSON_AddItemToObject(o, "turn_detection", td ? cJSON_Duplicate(td, true) : cJSON_CreateNull());
    cJSON_AddNullToObject(o, "input_audio_noise_reduction");
    if (s->partial)
        cJSON_AddItemToArray(inc, cJSON_CreateString("vkasr.partial"));
    cJSON_AddItemToObject(o, "include", inc);
    cJSON_AddItemToObject(in, "format", fmt);
    cJSON_AddItemToObject(in, "transcription", tr);
    cJSON_AddItemToObject(in, "turn_detection", td ? td : cJSON_CreateNull());
    cJSON_AddItemToObject(audio, "input", in);
    cJSON_AddItemToObject(o, "audio", audio);
    return o;
}

static void emit_session(struct rt_sess *s, const char *what) {
    char type[64];
    snprintf(type, sizeof type, "%s.%s", s->ga_names ? "session" : "transcription_session", what);
    cJSON *o = event(s, type);
    if (o)
        cJSON_AddItemToObject(o, "session", session_object(s));
    emit(s, o);
}

/* session.update / transcription_session.update: format, transcription model and language, turn
 * detection, include. Nothing changes when any field is wrong (an error names it). */
static void on_session_update(struct rt_sess *s, const cJSON *ev, const char *eid) {
    const cJSON *ss = cJSON_GetObjectItem(ev, "session");
    if (!cJSON_IsObject(ss)) {
        emit_error(s, "invalid_request_error", "missing_required_parameter", "session", "session: an object is required", eid);
        return;
    }
    const cJSON *ai = cJSON_GetObjectItem(cJSON_GetObjectItem(ss, "audio"), "input");
    const cJSON *fmt = cJSON_GetObjectItem(ss, "input_audio_format");
    const char *fmt_param = "session.input_audio_format";
    if (!fmt && ai) {
        fmt = cJSON_GetObjectItem(ai, "format");
        fmt_param = "session.audio.input.format";
    }
    int rate = s->rate;
    if (fmt) {
        rate = format_rate(fmt);
        if (!rate) {
            char m[200];
            snprintf(m, sizeof m, "%s: must be \"pcm16\" (24 kHz) or {\"type\": \"audio/pcm\", \"rate\": 8000 to 48000}",
                     fmt_param);
            emit_error(s, "invalid_request_error", "invalid_value", fmt_param, m, eid);
            return;
        }
        if (rate != s->rate && s->stream_samples) {
            emit_error(s, "invalid_request_error", "invalid_value", fmt_param,
                       "the audio format cannot change while the buffer holds audio: commit or clear it first", eid);
            return;
        }
    }
    const cJSON *tr = cJSON_GetObjectItem(ss, "input_audio_transcription");
    if (!tr && ai)
        tr = cJSON_GetObjectItem(ai, "transcription");
    const cJSON *model = cJSON_GetObjectItem(tr, "model"), *lang = cJSON_GetObjectItem(tr, "language");
    if (cJSON_IsString(model)) {
        bool known = !strcmp(model->valuestring, s->rt->o->model_name);
        for (size_t i = 0; i < sizeof model_aliases / sizeof model_aliases[0]; i++)
            known = known || !strcmp(model->valuestring, model_aliases[i]);
        if (!known) {
            emit_error(s, "invalid_request_error", "model_not_found", "session.input_audio_transcription.model",
                       "input_audio_transcription.model: not served here (see GET /v1/models)", eid);
            return;
        }
    }
    if (lang && !cJSON_IsNull(lang) &&
        (!cJSON_IsString(lang) || strlen(lang->valuestring) >= sizeof s->language ||
         strspn(lang->valuestring, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") != strlen(lang->valuestring))) {
        emit_error(s, "invalid_request_error", "invalid_value", "session.input_audio_transcription.language",
                   "input_audio_transcription.language: must be a language code such as en", eid);
        return;
    }
    const cJSON *td = cJSON_GetObjectItem(ss, "turn_detection");
    if (!td && ai)
        td = cJSON_GetObjectItem(ai, "turn_detection");
    const cJSON *inc = cJSON_GetObjectItem(ss, "include");
    if (inc && !cJSON_IsArray(inc) && !cJSON_IsNull(inc)) {
        emit_error(s, "invalid_request_error", "invalid_type", "session.include", "include: must be an array", eid);
        return;
    }
    s->rate = rate;
    if (cJSON_IsString(lang))
        snprintf(s->language, sizeof s->language, "%s", lang->valuestring);
    if (td) {
        pthread_mutex_lock(&s->mu);
        s->vad = !cJSON_IsNull(td);
        pthread_mutex_unlock(&s->mu);
    }
    if (inc) {
        bool p = false;
        const cJSON *x;
        cJSON_ArrayForEach(x, inc) p = p || (cJSON_IsString(x) && !strcmp(x->valuestring, "vkasr.partial"));
        pthread_mutex_lock(&s->mu);
        s->partial = p;
        pthread_mutex_unlock(&s->mu);
    }
    emit_session(s, "updated");
}

/* Appends PCM16 (little-endian, mono) to the stream, which starts with the first audio. */
static void append_pcm(struct rt_sess *s, const unsigned char *b, size_t len, const char *eid) {
    if (len % 2) {
        emit_error(s, "invalid_request_error", "invalid_value", "audio",
                   "audio: PCM16 has 2 bytes a sample: an odd number of bytes came", eid);
        return;
    }
    size_t n = len / 2;
    if (n == 0)
        return;
    if (!s->stream) {
        vkasr_stream_params sp = vkasr_stream_params_default();
        sp.final_callback = on_final;
        sp.partial_callback = on_partial;
        sp.user_data = s;
        vkasr_error e;
        if (vkasr_stream_create(s->vs, &sp, &s->stream, &e) != VKASR_OK) {
            char m[600];
            snprintf(m, sizeof m, "cannot start the stream: %s", e.message);
            emit_error(s, "server_error", "stream_failed", NULL, m, eid);
            s->fatal = true;
            return;
        }
    }
    float *f = malloc(n * sizeof *f);
    if (!f) {
        emit_error(s, "server_error", NULL, NULL, "out of memory for the audio", eid);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        long v = (long)b[2 * i] | (long)b[2 * i + 1] << 8;
        f[i] = (float)(v >= 32768 ? v - 65536 : v) / 32768.0f;
    }
    vkasr_status st = vkasr_stream_push(s->stream, f, n, s->rate);
    free(f);
    if (st != VKASR_OK) {
        char m[600];
        snprintf(m, sizeof m, "the stream failed: %s", vkasr_stream_last_error(s->stream));
        emit_error(s, "server_error", "stream_failed", NULL, m, eid);
        s->fatal = true;
        return;
    }
    s->stream_samples += n;
    s->audio_s += (double)n / s->rate;
}

/* Ends the stream of the uncommitted audio: everything becomes final; committed (before the last
 * deltas, as OpenAI orders them), then completed. */
static void commit(struct rt_sess *s, const char *eid) {
    if (!s->stream || !s->stream_samples) {
        emit_error(s, "invalid_request_error", "input_audio_buffer_commit_empty", NULL,
                   "the input audio buffer is empty: nothing to commit", eid);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->committing = true;
    if (!s->item_open)
        item_open(s, s->offset_s, false);
    emit_committed_locked(s);
    pthread_mutex_unlock(&s->mu);
    vkasr_status st = vkasr_stream_finish(s->stream);
    pthread_mutex_lock(&s->mu);
    item_complete(s);
    s->committing = false;
    pthread_mutex_unlock(&s->mu);
    if (st != VKASR_OK) {
        char m[600];
        snprintf(m, sizeof m, "the transcription failed: %s", vkasr_stream_last_error(s->stream));
        emit_error(s, "server_error", "stream_failed", NULL, m, eid);
        s->fatal = true;
    }
    vkasr_stream_free(s->stream); /* the session is back for the next stream */
    s->stream = NULL;
    s->offset_s += (double)s->stream_samples / s->rate;
    s->stream_samples = 0;
}

static void clear(struct rt_sess *s) {
    if (s->stream) {
        vkasr_stream_cancel(s->stream);
        vkasr_stream_free(s->stream);
        s->stream = NULL;
        s->offset_s += (double)s->stream_samples / s->rate;
        s->stream_samples = 0;
    }
    pthread_mutex_lock(&s->mu);
    s->item_open = false; /* its deltas stand; it never completes */
    pthread_mutex_unlock(&s->mu);
    emit(s, event(s, "input_audio_buffer.cleared"));
}

static void on_message(void *ud, bool binary, const unsigned char *data, size_t len) {
    struct rt_sess *s = ud;
    s->t_last = now_s();
    if (s->refused || s->fatal)
        return;
    if (binary) { /* a shortcut for append: raw PCM16 */
        append_pcm(s, data, len, NULL);
        return;
    }
    cJSON *ev = cJSON_ParseWithLength((const char *)data, len);
    if (!cJSON_IsObject(ev)) {
        emit_error(s, "invalid_request_error", "invalid_json", NULL, "the message is not a JSON object", NULL);
        cJSON_Delete(ev);
        return;
    }
    const cJSON *t = cJSON_GetObjectItem(ev, "type"), *id = cJSON_GetObjectItem(ev, "event_id");
    const char *type = cJSON_IsString(t) ? t->valuestring : NULL, *eid = cJSON_IsString(id) ? id->valuestring : NULL;
    if (!type) {
        emit_error(s, "invalid_request_error", "missing_required_parameter", "type", "type: a string is required", eid);
    } else if (!strcmp(type, "input_audio_buffer.append")) {
        const cJSON *a = cJSON_GetObjectItem(ev, "audio");
        size_t n = cJSON_IsString(a) ? strlen(a->valuestring) : 0;
        unsigned char *pcm = n % 4 == 0 ? malloc(n / 4 * 3 + 1) : NULL;
        int got = pcm ? EVP_DecodeBlock(pcm, (const unsigned char *)a->valuestring, (int)n) : -1;
        if (!cJSON_IsString(a) || got < 0) {
            emit_error(s, "invalid_request_error", "invalid_value", "audio", "audio: must be base64 of PCM16 samples", eid);
        } else {
            size_t bytes = (size_t)got; /* EVP_DecodeBlock counts the padding's zero bytes too */
            if (n >= 1 && a->valuestring[n - 1] == '=')
                bytes--;
            if (n >= 2 && a->valuestring[n - 2] == '=')
                bytes--;
            append_pcm(s, pcm, bytes, eid);
        }
        free(pcm);
    } else if (!strcmp(type, "input_audio_buffer.commit")) {
        commit(s, eid);
    } else if (!strcmp(type, "input_audio_buffer.clear")) {
        clear(s);
    } else if (!strcmp(type, "session.update") || !strcmp(type, "transcription_session.update")) {
        s->ga_names = !strcmp(type, "session.update");
        on_session_update(s, ev, eid);
    } else {
        char m[200];
        snprintf(m, sizeof m, "unknown or unsupported event type '%.80s' (this server transcribes: session.update, "
                              "input_audio_buffer.append, .commit, .clear)", type);
        emit_error(s, "invalid_request_error", "unknown_event", "type", m, eid);
    }
    cJSON_Delete(ev);
}

/* ---- the connection's thread ---- */

/* Moves the events the callbacks queued to the WebSocket. */
static void flush_out(struct rt_sess *s) {
    pthread_mutex_lock(&s->mu);
    struct out_msg *m = s->out_head;
    s->out_head = s->out_tail = NULL;
    s->out_bytes = 0;
    pthread_mutex_unlock(&s->mu);
    char drain[64];
    while (read(s->wake[0], drain, sizeof drain) > 0) {
    }
    while (m) {
        struct out_msg *next = m->next;
        ws_send_text(s->ws, m->text, m->len);
        free(m->text);
        free(m);
        m = next;
    }
}

/* Sends what is queued, then a close frame (wslay sends control frames ahead of queued messages, so
 * the close waits until they are out), for at most END_FLUSH_S. */
static void close_and_drain(struct rt_sess *s, int code, const char *reason) {
    flush_out(s);
    double until = now_s() + END_FLUSH_S;
    while (ws_queued_bytes(s->ws) && !ws_done(s->ws) && now_s() < until && ws_poll(s->ws, -1, 100) >= 0) {
    }
    ws_close(s->ws, code, reason);
    while (!ws_done(s->ws) && now_s() < until && ws_poll(s->ws, -1, 100) >= 0) {
    }
}

static void *session_main(void *arg) {
    struct rt_sess *s = arg;
    struct serve_realtime *rt = s->rt;
    const struct serve_opts *o = rt->o;
    const char *end = "the client closed the connection";
    char err[600] = "";
    s->ws = ws_open(s->fd, s->extra, s->extra_len, o->ws_max_message, on_message, s);
    free(s->extra);
    s->extra = NULL;
    if (!s->ws) {
        end = "out of memory";
        goto done;
    }
    if (s->refused) {
        emit_error(s, "invalid_request_error", "rate_limit_exceeded", NULL, s->refusal, NULL);
        close_and_drain(s, 1013, "try again later");
        end = s->refusal;
        goto done;
    }
    s->vs = session_take(rt, &s->model_index, err, sizeof err);
    if (!s->vs) {
        emit_error(s, "server_error", "session_failed", NULL, err, NULL);
        close_and_drain(s, 1011, "no session");
        end = err;
        goto done;
    }
    emit_session(s, "created");
    size_t out_limit = o->ws_max_message > OUT_MIN_LIMIT ? o->ws_max_message : OUT_MIN_LIMIT;
    for (;;) {
        flush_out(s);
        double now = now_s();
        double idle_left = s->t_last + o->stream_idle_s - now, life_left = s->t_open + o->stream_max_s - now;
        double wait = idle_left < life_left ? idle_left : life_left;
        if (ws_poll(s->ws, s->wake[0], wait > 1 ? 1000 : wait > 0 ? (int)(wait * 1000) + 1 : 0) < 0) {
            end = "poll failed";
            break;
        }
        if (ws_done(s->ws))
            break; /* closed (a close frame both ways, or a message over the limit answered 1009) or dropped */
        pthread_mutex_lock(&s->mu);
        size_t unsent = s->out_bytes;
        pthread_mutex_unlock(&s->mu);
        if (unsent + ws_queued_bytes(s->ws) > out_limit) { /* the client does not read: drop it */
            end = "the client stopped reading (unsent events over the limit): dropped";
            break;
        }
        const char *why = NULL, *code = NULL;
        int close_code = 1000;
        if (atomic_load(&rt->stopping))
            why = "the server is shutting down", code = "server_shutdown", close_code = 1001;
        else if (s->fatal)
            why = "the stream failed", close_code = 1011;
        else if (now_s() - s->t_open >= o->stream_max_s)
            why = "the session reached the server's maximum length (--stream-max-seconds)", code = "session_expired";
        else if (now_s() - s->t_last >= o->stream_idle_s)
            why = "no message for --stream-idle seconds: closed", code = "idle_timeout";
        if (why) { /* the audio received so far ends with its final text */
            if (s->stream && s->stream_samples && !s->fatal)
                commit(s, NULL);
            if (code)
                emit_error(s, close_code == 1001 ? "server_error" : "invalid_request_error", code, NULL, why, NULL);
            close_and_drain(s, close_code, why);
            end = why;
            break;
        }
    }
done:
    if (s->stream) {
        vkasr_stream_cancel(s->stream);
        vkasr_stream_free(s->stream);
        s->stream = NULL;
    }
    if (s->vs)
        session_give_back(rt, s->vs, s->model_index);
    s->vs = NULL;
    fprintf(stderr, "vkasr serve: realtime session %lu (%s): %.2f s audio, %u item%s, %.1f s: %s\n", s->id, s->who,
            s->audio_s, s->items, s->items == 1 ? "" : "s", now_s() - s->t_open, end);
    if (s->ws)
        ws_linger(s->ws, 1.0);
    ws_free(s->ws);
    s->ws = NULL;
    shutdown(s->fd, SHUT_RDWR);
    MHD_upgrade_action(s->urh, MHD_UPGRADE_ACTION_CLOSE);
    pthread_mutex_lock(&rt->mu);
    if (!s->refused)
        rt->active--;
    s->finished = true;
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

static void sess_free(struct rt_sess *s) {
    while (s->out_head) {
        struct out_msg *m = s->out_head;
        s->out_head = m->next;
        free(m->text);
        free(m);
    }
    close(s->wake[0]);
    close(s->wake[1]);
    free(s->extra);
    free(s->item_text);
    free(s->last_partial);
    cJSON_Delete(s->item_words);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Joins and frees sessions: REAP_ENDED those whose threads have ended; REAP_RUNNING those too whose
 * threads run (waiting for them); REAP_ALL also those whose upgrade has not come, once libmicrohttpd has
 * stopped and no upgrade can come. */
enum reap_mode { REAP_ENDED, REAP_RUNNING, REAP_ALL };
static void reap(struct serve_realtime *rt, enum reap_mode mode) {
    for (;;) {
        pthread_mutex_lock(&rt->mu);
        struct rt_sess **pp = &rt->sessions, *s = NULL;
        while (*pp && !((*pp)->finished || (mode >= REAP_RUNNING && (*pp)->started) || mode == REAP_ALL))
            pp = &(*pp)->next;
        if (*pp) {
            s = *pp;
            *pp = s->next;
        }
        pthread_mutex_unlock(&rt->mu);
        if (!s)
            return;
        if (s->started)
            pthread_join(s->thread, NULL);
        sess_free(s);
    }
}

/* The upgrade is done: the limits are checked here, where a slot is taken only by a connection that
 * exists (one whose client left before the upgrade never takes one). */
static void on_upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra, size_t extra_len,
                        MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
    struct rt_sess *s = cls;
    struct serve_realtime *rt = s->rt;
    const struct serve_opts *o = rt->o;
    (void)c;
    (void)req_cls;
    s->fd = sock;
    s->urh = urh;
    s->t_open = s->t_last = now_s();
    if (extra_len && (s->extra = malloc(extra_len)) != NULL) {
        memcpy(s->extra, extra, extra_len);
        s->extra_len = extra_len;
    }
    pthread_mutex_lock(&rt->mu);
    unsigned mine = 0;
    for (struct rt_sess *x = rt->sessions; x; x = x->next)
        mine += x->started && !x->finished && !x->refused && !strcmp(x->who, s->who);
    if (rt->active >= o->max_streams)
        s->refused = true, s->refusal = "the server holds --max-streams streams already: try again later";
    else if (mine >= o->max_streams_per_key)
        s->refused = true, s->refusal = "this key (or address) holds --max-streams-per-key streams already";
    else
        rt->active++;
    s->started = pthread_create(&s->thread, NULL, session_main, s) == 0;
    if (!s->started) { /* no thread: the connection closes at once */
        if (!s->refused)
            rt->active--;
        s->finished = true;
    }
    pthread_mutex_unlock(&rt->mu);
    if (!s->started)
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

/* ---- the handshake ---- */

/* The key a request carries: Authorization: Bearer, ?api_key= (browsers cannot set headers on a
 * WebSocket) or the subprotocol openai-insecure-api-key.KEY (OpenAI's browser convention). */
static bool key_matches(const char *key, const char *given) {
    if (!given)
        return false;
    size_t n = strlen(key), m = strlen(given);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(key[i] ^ (i < m ? given[i] : 0));
    return diff == 0;
}

static bool rt_authorized(struct MHD_Connection *c, const char *key) {
    if (!key)
        return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (a && !strncasecmp(a, "Bearer ", 7)) {
        a += 7;
        while (*a == ' ')
            a++;
        if (key_matches(key, a))
            return true;
    }
    if (key_matches(key, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "api_key")))
        return true;
    const char *p = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_SEC_WEBSOCKET_PROTOCOL);
    static const char prefix[] = "openai-insecure-api-key.";
    const char *k = p ? strstr(p, prefix) : NULL;
    if (k) {
        char buf[512];
        k += sizeof prefix - 1;
        size_t n = strcspn(k, ", \t");
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), k);
        return key_matches(key, buf);
    }
    return false;
}

/* A browser's Origin must be the server's own (http://HOST where HOST is the request's Host header) or
 * --cors-origin; clients that send no Origin (SDKs, curl) are not browsers and pass. */
static bool origin_allowed(struct MHD_Connection *c, const struct serve_opts *o) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
    if (!origin)
        return true;
    if (o->cors_origin && (!strcmp(o->cors_origin, "*") || !strcmp(origin, o->cors_origin)))
        return true;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *rest = !strncmp(origin, "http://", 7) ? origin + 7 : !strncmp(origin, "https://", 8) ? origin + 8 : NULL;
    return host && rest && !strcasecmp(rest, host);
}

/* Who the per-key limit counts: the key given, or the client's address when the server takes none. */
static void client_id(struct MHD_Connection *c, const struct serve_opts *o, char *buf, size_t size) {
    if (o->api_key) {
        snprintf(buf, size, "key");
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char a[INET6_ADDRSTRLEN] = "?";
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, a, sizeof a);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, a, sizeof a);
    }
    snprintf(buf, size, "%s", a);
}

static enum MHD_Result refuse(struct MHD_Connection *c, int status, const char *message, const char *code, int *out) {
    size_t len = 0;
    char *body = serve_error_json(message, status >= 500 ? "server_error" : "invalid_request_error", NULL, code, &len);
    if (!body)
        return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    *out = status;
    return ret;
}

enum MHD_Result serve_realtime_request(struct serve_realtime *rt, struct MHD_Connection *c, const char *method,
                                       int *status) {
    const struct serve_opts *o = rt->o;
    const char *why = ws_check_handshake(c, method);
    if (why)
        return refuse(c, strcmp(method, "GET") ? 405 : 426, why, NULL, status);
    if (!origin_allowed(c, o))
        return refuse(c, 403, "Origin: not allowed (the page's own origin, or --cors-origin)", "origin_not_allowed", status);
    if (!rt_authorized(c, o->api_key))
        return refuse(c, 401, "missing or wrong API key (Authorization: Bearer KEY, or ?api_key=KEY)", "invalid_api_key",
                      status);
    const char *intent = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "intent");
    if (intent && strcmp(intent, "transcription") != 0)
        return refuse(c, 400, "intent: this server does transcription only (?intent=transcription)", "invalid_value",
                      status);
    if (atomic_load(&rt->stopping))
        return refuse(c, 503, "the server is shutting down", NULL, status);
    reap(rt, REAP_ENDED);
    struct rt_sess *s = calloc(1, sizeof *s);
    if (!s)
        return MHD_NO;
    if (pipe(s->wake) != 0) {
        free(s);
        return MHD_NO;
    }
    fcntl(s->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(s->wake[1], F_SETFL, O_NONBLOCK);
    pthread_mutex_init(&s->mu, NULL);
    s->rt = rt;
    s->rate = 24000;
    s->vad = true;
    snprintf(s->language, sizeof s->language, "en");
    client_id(c, o, s->who, sizeof s->who);
    pthread_mutex_lock(&rt->mu);
    s->id = ++rt->next_id;
    s->next = rt->sessions;
    rt->sessions = s;
    pthread_mutex_unlock(&rt->mu);
    /* the subprotocol: "realtime" when offered, else the first offered (browsers require one back) */
    const char *offered = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_SEC_WEBSOCKET_PROTOCOL);
    char proto[64] = "";
    if (offered) {
        const char *p = offered + strspn(offered, " \t,");
        size_t n = strcspn(p, ", \t");
        if (strstr(offered, "realtime") && (!strncmp(p, "realtime", 8) || strstr(offered, "realtime,") ||
                                            strstr(offered, ", realtime") || strstr(offered, ",realtime")))
            snprintf(proto, sizeof proto, "realtime");
        else if (n < sizeof proto)
            snprintf(proto, sizeof proto, "%.*s", (int)n, p);
    }
    enum MHD_Result ret = ws_accept(c, proto[0] ? proto : NULL, on_upgraded, s);
    if (ret != MHD_YES) { /* no upgrade will come: the session ends here */
        pthread_mutex_lock(&rt->mu);
        s->finished = true;
        pthread_mutex_unlock(&rt->mu);
    } else {
        *status = 101;
    }
    return ret;
}

struct serve_realtime *serve_realtime_new(struct pool *pool, const struct serve_opts *o) {
    struct serve_realtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return NULL;
    rt->idle = calloc(o->max_streams ? o->max_streams : 1, sizeof *rt->idle);
    rt->idle_model = calloc(o->max_streams ? o->max_streams : 1, sizeof *rt->idle_model);
    if (!rt->idle || !rt->idle_model) {
        free(rt->idle);
        free(rt->idle_model);
        free(rt);
        return NULL;
    }
    rt->pool = pool;
    rt->o = o;
    atomic_init(&rt->stopping, false);
    pthread_mutex_init(&rt->mu, NULL);
    return rt;
}

unsigned serve_realtime_active(struct serve_realtime *rt) {
    pthread_mutex_lock(&rt->mu);
    unsigned n = rt->active;
    pthread_mutex_unlock(&rt->mu);
    return n;
}

void serve_realtime_shutdown(struct serve_realtime *rt) {
    if (!rt)
        return;
    atomic_store(&rt->stopping, true);
    pthread_mutex_lock(&rt->mu);
    for (struct rt_sess *s = rt->sessions; s; s = s->next) {
        ssize_t w = write(s->wake[1], "", 1);
        (void)w;
    }
    pthread_mutex_unlock(&rt->mu);
}

void serve_realtime_end(struct serve_realtime *rt) {
    if (!rt)
        return;
    serve_realtime_shutdown(rt);
    reap(rt, REAP_RUNNING);
}

void serve_realtime_free(struct serve_realtime *rt) {
    if (!rt)
        return;
    serve_realtime_end(rt);
    reap(rt, REAP_ALL);
    for (unsigned i = 0; i < rt->n_idle; i++)
        vkasr_session_free(rt->idle[i]);
    free(rt->idle);
    free(rt->idle_model);
    pthread_mutex_destroy(&rt->mu);
    free(rt);
}
