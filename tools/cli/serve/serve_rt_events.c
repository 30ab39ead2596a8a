/* serve_rt_events.c — the protocol of a Realtime connection: the client's events (session.update,
 * input_audio_buffer.append/commit/clear), the stream's callbacks that turn final words into deltas and
 * segment ends into items, and the server's events in OpenAI's shapes, queued for the connection's
 * thread (serve_realtime.c sends them). */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "serve_rt_session.h"

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
void rt_emit_error(struct rt_sess *s, const char *type, const char *code, const char *param, const char *message,
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

void rt_emit_session(struct rt_sess *s, const char *what) {
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
        rt_emit_error(s, "invalid_request_error", "missing_required_parameter", "session", "session: an object is required", eid);
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
            rt_emit_error(s, "invalid_request_error", "invalid_value", fmt_param, m, eid);
            return;
        }
        if (rate != s->rate && s->stream_samples) {
            rt_emit_error(s, "invalid_request_error", "invalid_value", fmt_param,
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
            rt_emit_error(s, "invalid_request_error", "model_not_found", "session.input_audio_transcription.model",
                       "input_audio_transcription.model: not served here (see GET /v1/models)", eid);
            return;
        }
    }
    if (lang && !cJSON_IsNull(lang) &&
        (!cJSON_IsString(lang) || strlen(lang->valuestring) >= sizeof s->language ||
         strspn(lang->valuestring, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") != strlen(lang->valuestring))) {
        rt_emit_error(s, "invalid_request_error", "invalid_value", "session.input_audio_transcription.language",
                   "input_audio_transcription.language: must be a language code such as en", eid);
        return;
    }
    char lang_model[sizeof s->lang];
    if (cJSON_IsString(lang)) {
        char m[900];
        if (!serve_language(s->rt->model, lang->valuestring, lang_model, sizeof lang_model, m, sizeof m)) {
            rt_emit_error(s, "invalid_request_error", "invalid_value", "session.input_audio_transcription.language", m,
                          eid);
            return;
        }
    }
    const cJSON *td = cJSON_GetObjectItem(ss, "turn_detection");
    if (!td && ai)
        td = cJSON_GetObjectItem(ai, "turn_detection");
    const cJSON *inc = cJSON_GetObjectItem(ss, "include");
    if (inc && !cJSON_IsArray(inc) && !cJSON_IsNull(inc)) {
        rt_emit_error(s, "invalid_request_error", "invalid_type", "session.include", "include: must be an array", eid);
        return;
    }
    s->rate = rate;
    if (cJSON_IsString(lang)) { /* the next stream takes it (the one under way keeps its own) */
        snprintf(s->language, sizeof s->language, "%s", lang->valuestring);
        snprintf(s->lang, sizeof s->lang, "%s", lang_model);
    }
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
    rt_emit_session(s, "updated");
}

/* Appends PCM16 (little-endian, mono) to the stream, which starts with the first audio. */
static void append_pcm(struct rt_sess *s, const unsigned char *b, size_t len, const char *eid) {
    if (len % 2) {
        rt_emit_error(s, "invalid_request_error", "invalid_value", "audio",
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
        sp.language = s->lang[0] ? s->lang : NULL;
        vkasr_error e;
        if (vkasr_stream_create(s->vs, &sp, &s->stream, &e) != VKASR_OK) {
            char m[600];
            snprintf(m, sizeof m, "cannot start the stream: %s", e.message);
            rt_emit_error(s, "server_error", "stream_failed", NULL, m, eid);
            s->fatal = true;
            return;
        }
    }
    float *f = malloc(n * sizeof *f);
    if (!f) {
        rt_emit_error(s, "server_error", NULL, NULL, "out of memory for the audio", eid);
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
        rt_emit_error(s, "server_error", "stream_failed", NULL, m, eid);
        s->fatal = true;
        return;
    }
    s->stream_samples += n;
    s->audio_s += (double)n / s->rate;
}

/* Ends the stream of the uncommitted audio: everything becomes final; committed (before the last
 * deltas, as OpenAI orders them), then completed. */
void rt_commit(struct rt_sess *s, const char *eid) {
    if (!s->stream || !s->stream_samples) {
        rt_emit_error(s, "invalid_request_error", "input_audio_buffer_commit_empty", NULL,
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
        rt_emit_error(s, "server_error", "stream_failed", NULL, m, eid);
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

void rt_on_message(void *ud, bool binary, const unsigned char *data, size_t len) {
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
        rt_emit_error(s, "invalid_request_error", "invalid_json", NULL, "the message is not a JSON object", NULL);
        cJSON_Delete(ev);
        return;
    }
    const cJSON *t = cJSON_GetObjectItem(ev, "type"), *id = cJSON_GetObjectItem(ev, "event_id");
    const char *type = cJSON_IsString(t) ? t->valuestring : NULL, *eid = cJSON_IsString(id) ? id->valuestring : NULL;
    if (!type) {
        rt_emit_error(s, "invalid_request_error", "missing_required_parameter", "type", "type: a string is required", eid);
    } else if (!strcmp(type, "input_audio_buffer.append")) {
        const cJSON *a = cJSON_GetObjectItem(ev, "audio");
        size_t n = cJSON_IsString(a) ? strlen(a->valuestring) : 0;
        unsigned char *pcm = cJSON_IsString(a) && n % 4 == 0 ? malloc(n / 4 * 3 + 1) : NULL; /* no audio: none */
        int got = pcm ? EVP_DecodeBlock(pcm, (const unsigned char *)a->valuestring, (int)n) : -1;
        if (!cJSON_IsString(a) || got < 0) {
            rt_emit_error(s, "invalid_request_error", "invalid_value", "audio", "audio: must be base64 of PCM16 samples", eid);
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
        rt_commit(s, eid);
    } else if (!strcmp(type, "input_audio_buffer.clear")) {
        clear(s);
    } else if (!strcmp(type, "session.update") || !strcmp(type, "transcription_session.update")) {
        s->ga_names = !strcmp(type, "session.update");
        on_session_update(s, ev, eid);
    } else {
        char m[200];
        snprintf(m, sizeof m, "unknown or unsupported event type '%.80s' (this server transcribes: session.update, "
                              "input_audio_buffer.append, .commit, .clear)", type);
        rt_emit_error(s, "invalid_request_error", "unknown_event", "type", m, eid);
    }
    cJSON_Delete(ev);
}
