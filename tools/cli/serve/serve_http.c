/* serve_http.c — the HTTP front end of `vkasr serve` on libmicrohttpd (one thread per connection): routes,
 * the API key, multipart/form-data uploads (held in memory, within --max-upload, and decoded with
 * vkasr_audio_load_memory), the wait for the worker's answer (or, with stream=true, its server-sent
 * events as they come) and one log line per request. */
#define _DEFAULT_SOURCE /* strncasecmp, open_memstream */
#include <ctype.h>
#include <math.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "serve_rt.h"

#define TRANSCRIBE_PATH "/v1/audio/transcriptions"

struct serve_http {
    struct MHD_Daemon *d;
    const struct serve_opts *o;
    struct serve_queue *q;
    pthread_mutex_t mu;
    unsigned active;
};

/* The state of one request, from its headers to the end of its answer. */
struct req {
    struct serve_http *h;
    double t0;
    char method[16], url[128];
    int status;                    /* the answer's; 0: none was sent                            */
    struct MHD_PostProcessor *pp;
    size_t body_bytes;
    bool bad_form;                 /* the body is not well-formed multipart/form-data           */
    char field_error[160];         /* a field that is too long or repeated                      */
    /* the upload: the file's bytes (within the body, so within --max-upload) */
    char *file;
    size_t file_bytes, file_cap;
    bool have_file, store_failed;
    /* the other fields (prompt is accepted and ignored) */
    char model[256], format[32], language[32], temperature[64], gran[64], stream[16];
    char subs[5][24];              /* max_line_chars, max_lines, max_cue_seconds, min_cue_seconds, cue_pause */
    char subs_error[1100];
    char lang_error[900];
    bool have_model, unauthorized;
    /* the closing delimiter "\r\n--BOUNDARY--": the body is fed to the post processor up to it only
     * (libmicrohttpd 0.9.75 fails on an epilogue, such as the CRLF the OpenAI Node SDK sends after it) */
    char delim[96], carry[96];
    size_t delim_len, carry_len;
    bool closed;
    struct serve_job job;
    bool job_queued;
};

/* ---- answers ---- */

static enum MHD_Result send_body(struct MHD_Connection *c, struct req *r, int status, char *body, size_t len,
                                 const char *type, const char *allow) {
    if (!body)
        return MHD_NO; /* out of memory: drop the connection */
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    serve_cors_headers(resp, r->h->o);
    if (allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->status = status;
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *c, struct req *r, int status, const char *text,
                                 const char *type) {
    size_t len = strlen(text);
    char *body = malloc(len + 1);
    if (body)
        memcpy(body, text, len + 1);
    return send_body(c, r, status, body, len, type, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, struct req *r, int status, const char *message,
                                  const char *param, const char *code) {
    const char *type = status == 401 ? "invalid_request_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    size_t len = 0;
    char *body = serve_error_json(message, type, param, code, &len);
    const char *allow = status == 405 ? (!strcmp(r->url, TRANSCRIBE_PATH) ? "POST" : "GET, HEAD") : NULL;
    return send_body(c, r, status, body, len, "application/json", allow);
}

/* stream=true: the job's events as they come (chunked), from the connection's own thread. */
static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max) {
    struct req *r = cls;
    size_t n = serve_queue_read_events(r->h->q, &r->job, (size_t)pos, buf, max);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static enum MHD_Result send_stream(struct MHD_Connection *c, struct req *r) {
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, read_events, r, NULL);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    r->status = 200;
    return ret;
}

/* ---- the form's fields ---- */

/* Copies a piece of a field's value at offset off into buf (its size), or names the field as too long. */
static void field_append(struct req *r, char *buf, size_t size, const char *key, const char *data, uint64_t off,
                         size_t n) {
    if (off == 0)
        buf[0] = '\0';
    size_t have = strlen(buf);
    if (have + n >= size) {
        snprintf(r->field_error, sizeof r->field_error, "%s: too long (at most %zu bytes)", key, size - 1);
        return;
    }
    memcpy(buf + have, data, n);
    buf[have + n] = '\0';
}

/* Appends a piece of the uploaded file to its buffer, which grows by doubling up to --max-upload (the
 * body's bound, and so the file's). false when out of memory. */
static bool file_append(struct req *r, const char *data, size_t n) {
    if (r->file_bytes + n > r->file_cap) {
        const size_t limit = r->h->o->max_upload;
        size_t cap = r->file_cap ? 2 * r->file_cap : 64 * 1024;
        if (cap < r->file_bytes + n)
            cap = r->file_bytes + n;
        if (cap > limit && limit >= r->file_bytes + n)
            cap = limit;
        char *p = realloc(r->file, cap);
        if (!p)
            return false;
        r->file = p;
        r->file_cap = cap;
    }
    memcpy(r->file + r->file_bytes, data, n);
    r->file_bytes += n;
    return true;
}

/* The subtitle fields, in struct req's subs order. */
static const char *const sub_fields[5] = {"max_line_chars", "max_lines", "max_cue_seconds", "min_cue_seconds",
                                          "cue_pause"};

static int sub_field(const char *key) {
    for (int i = 0; i < 5; i++)
        if (!strcmp(key, sub_fields[i]))
            return i;
    return -1;
}

/* The subtitle fields given over the server's defaults into j->subs; NULL, or a message naming the field. */
static const char *check_subs(struct req *r, const char **param) {
    vkasr_subtitle_params *p = &r->job.subs;
    *p = r->h->o->subs;
    for (int i = 0; i < 5; i++) {
        if (!r->subs[i][0])
            continue;
        *param = sub_fields[i];
        char *end = NULL;
        double v = strtod(r->subs[i], &end);
        if (*end || !isfinite(v) || v < 0 || v > 1e6 || (i < 2 && v != floor(v))) {
            snprintf(r->subs_error, sizeof r->subs_error, "%s: must be a %s", sub_fields[i],
                     i < 2 ? "whole number" : "number of seconds");
            return r->subs_error;
        }
        if (i == 0)
            p->max_line_chars = (int)v;
        else if (i == 1)
            p->max_lines = (int)v;
        else
            *(i == 2 ? &p->max_duration : i == 3 ? &p->min_duration : &p->pause) = v;
    }
    vkasr_cue *c = NULL;
    size_t n = 0;
    vkasr_error err;
    if (vkasr_subtitle_cues(NULL, 0, p, &c, &n, &err) == VKASR_OK)
        return NULL;
    /* the message names vkasr_subtitle_params' field (in sub_fields order): the request's field set it */
    static const char *const c_names[5] = {"max_line_chars", "max_lines", "max_duration", "min_duration", "pause"};
    *param = "max_line_chars";
    for (int i = 0; i < 5; i++) {
        char head[64];
        snprintf(head, sizeof head, "subtitles: %s ", c_names[i]);
        if (!strncmp(err.message, head, strlen(head)))
            *param = sub_fields[i];
    }
    snprintf(r->subs_error, sizeof r->subs_error, "%s: %s", *param, err.message);
    return r->subs_error;
}

static enum MHD_Result on_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                const char *content_type, const char *transfer_encoding, const char *data,
                                uint64_t off, size_t size) {
    struct req *r = cls;
    (void)kind, (void)filename, (void)content_type, (void)transfer_encoding;
    if (!strcmp(key, "file")) {
        if (off == 0 && r->have_file && r->file_bytes > 0) {
            snprintf(r->field_error, sizeof r->field_error, "file: given more than once");
            return MHD_YES;
        }
        r->have_file = true;
        if (!r->store_failed && size && !file_append(r, data, size))
            r->store_failed = true;
    } else if (!strcmp(key, "model")) {
        r->have_model = true;
        field_append(r, r->model, sizeof r->model, key, data, off, size);
    } else if (!strcmp(key, "response_format")) {
        field_append(r, r->format, sizeof r->format, key, data, off, size);
    } else if (!strcmp(key, "language")) {
        field_append(r, r->language, sizeof r->language, key, data, off, size);
    } else if (!strcmp(key, "temperature")) {
        field_append(r, r->temperature, sizeof r->temperature, key, data, off, size);
    } else if (!strcmp(key, "stream")) {
        field_append(r, r->stream, sizeof r->stream, key, data, off, size);
    } else if (sub_field(key) >= 0) {
        field_append(r, r->subs[sub_field(key)], sizeof r->subs[0], key, data, off, size);
    } else if (!strcmp(key, "timestamp_granularities[]") || !strcmp(key, "timestamp_granularities")) {
        /* repeated: the values, comma-separated */
        size_t have = strlen(r->gran);
        if (off == 0 && have && have + 1 < sizeof r->gran)
            strcat(r->gran, ",");
        field_append(r, r->gran, sizeof r->gran, key, data, 1, size);
    }
    return MHD_YES;
}

/* ---- the transcription request ---- */

/* Checks the fields into r->job; NULL, or the message of a 400 answer with *param the field. */
static const char *check_fields(struct req *r, const char **param) {
    struct serve_job *j = &r->job;
    const struct serve_opts *o = r->h->o;
    static const char *const aliases[] = {"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe"};
    *param = "model";
    if (!r->have_model || !r->model[0])
        return "model: required (the loaded model's name, see GET /v1/models, or whisper-1)";
    bool known = !strcmp(r->model, o->model_name);
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        known = known || !strcmp(r->model, aliases[i]);
    if (!known)
        return "model: not served here (see GET /v1/models)";
    *param = "response_format";
    static const char *const fmts[] = {"json", "text", "srt", "vtt", "verbose_json"};
    const char *f = r->format[0] ? r->format : "json";
    size_t k = 0;
    while (k < 5 && strcmp(f, fmts[k]))
        k++;
    if (k == 5)
        return "response_format: must be json, text, srt, vtt or verbose_json";
    j->fmt = (enum serve_fmt)k;
    *param = "temperature";
    if (r->temperature[0]) {
        char *end = NULL;
        double t = strtod(r->temperature, &end);
        if (*end || !isfinite(t) || t < 0 || t > 1)
            return "temperature: must be a number from 0 to 1";
    }
    *param = "language";
    for (const char *p = r->language; *p; p++)
        if (!isalpha((unsigned char)*p) && *p != '-')
            return "language: must be a language code such as en";
    j->language = r->language;
    if (!serve_language(pool_worker(o->pool, 0)->model, r->language, j->lang, sizeof j->lang, r->lang_error,
                        sizeof r->lang_error))
        return r->lang_error;
    *param = "stream";
    j->stream = !strcmp(r->stream, "true");
    if (!j->stream && r->stream[0] && strcmp(r->stream, "false"))
        return "stream: must be true or false";
    if (j->stream && j->fmt != SFMT_JSON && j->fmt != SFMT_TEXT)
        return "stream: streamed answers (server-sent events) come with response_format json or text only";
    const char *sub_msg = check_subs(r, param);
    if (sub_msg)
        return sub_msg;
    *param = "timestamp_granularities[]";
    j->segments = !r->gran[0];
    char *save = NULL;
    for (char *tok = strtok_r(r->gran, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "word"))
            j->words = true;
        else if (!strcmp(tok, "segment"))
            j->segments = true;
        else
            return "timestamp_granularities[]: must be word or segment";
    }
    return NULL;
}

static enum MHD_Result transcribe(struct MHD_Connection *c, struct req *r) {
    bool form_ok = MHD_destroy_post_processor(r->pp) == MHD_YES && !r->bad_form;
    r->pp = NULL;
    if (!form_ok)
        return send_error(c, r, 400, "the body is not well-formed multipart/form-data", NULL, NULL);
    if (r->field_error[0])
        return send_error(c, r, 400, r->field_error, NULL, NULL);
    if (r->store_failed)
        return send_error(c, r, 500, "out of memory holding the upload", NULL, NULL);
    if (!r->have_file)
        return send_error(c, r, 400, "file: required (the audio, as a multipart/form-data file)", "file", NULL);
    const char *param = NULL, *msg = check_fields(r, &param);
    if (msg)
        return send_error(c, r, 400, msg, param, !strcmp(param, "model") ? "model_not_found" : NULL);
    if (r->file_bytes == 0)
        return send_error(c, r, 400, "file: empty", "file", "invalid_audio");
    vkasr_error err;
    vkasr_status st = vkasr_audio_load_memory(r->file, r->file_bytes, &r->job.samples, &r->job.n, &err);
    free(r->file); /* the samples from now on */
    r->file = NULL;
    if (st != VKASR_OK || r->job.n == 0) {
        char m[1200];
        snprintf(m, sizeof m, "file: cannot decode the audio: %s", st != VKASR_OK ? err.message : "no samples");
        return send_error(c, r, st == VKASR_ERR_NO_MEMORY ? 500 : 400, m, "file", "invalid_audio");
    }
    r->job.t_enqueue = now_s();
    if (!serve_queue_push(r->h->q, &r->job))
        return send_error(c, r, 503, "the queue is full (or the server is stopping): retry later", NULL, "queue_full");
    r->job_queued = true;
    if (r->job.stream) {
        if (serve_queue_wait_events(r->h->q, &r->job))
            return send_stream(c, r);
    } else {
        serve_queue_wait(r->h->q, &r->job);
    }
    enum MHD_Result ret = send_body(c, r, r->job.status, r->job.body, r->job.body_len, r->job.content_type, NULL);
    r->job.body = NULL; /* the response owns it */
    return ret;
}

/* ---- routing ---- */

/* Whether the request carries the configured key (Authorization: Bearer KEY), compared in constant time. */
static bool authorized(struct MHD_Connection *c, const char *key) {
    if (!key || !*key)
        return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncasecmp(a, "Bearer ", 7) != 0)
        return false;
    a += 7;
    while (*a == ' ')
        a++;
    size_t n = strlen(key), m = strlen(a);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(key[i] ^ (i < m ? a[i] : 0));
    return diff == 0;
}

static enum MHD_Result get_page(struct MHD_Connection *c, struct req *r) {
    struct serve_http *h = r->h;
    if (!strcmp(r->url, "/"))
        return send_text(c, r, 200,
                         "vkasr serve: speech recognition (NVIDIA Parakeet models on Vulkan) behind an\n"
                         "OpenAI-compatible API.\n\n"
                         "  POST /v1/audio/transcriptions   multipart/form-data: file, model, response_format, ...\n"
                         "  GET  /v1/models                 the model served\n"
                         "  GET  /health                    200 once the model is ready\n",
                         "text/plain; charset=utf-8");
    if (!strcmp(r->url, "/health"))
        return serve_queue_ready(h->q) ? send_text(c, r, 200, "{\"status\":\"ok\"}\n", "application/json")
                                       : send_text(c, r, 503, "{\"status\":\"loading\"}\n", "application/json");
    if (!authorized(c, h->o->api_key))
        return send_error(c, r, 401, "missing or wrong API key (Authorization: Bearer KEY)", NULL, "invalid_api_key");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return MHD_NO;
    fputs("{\"object\":\"list\",\"data\":[{\"id\":", f);
    json_str(f, h->o->model_name);
    fputs(",\"object\":\"model\",\"created\":0,\"owned_by\":\"vkasr\"}]}\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return MHD_NO;
    }
    return send_body(c, r, 200, buf, len, "application/json", NULL);
}

/* Feeds a piece of the body to the post processor, up to the closing delimiter (then a CRLF after it). */
static bool feed(struct req *r, const char *data, size_t n) {
    size_t take = n;
    if (r->delim_len) {
        /* look for the delimiter in the last bytes of the previous pieces followed by this one */
        size_t head = n < r->delim_len ? n : r->delim_len;
        char probe[2 * sizeof r->carry];
        memcpy(probe, r->carry, r->carry_len);
        memcpy(probe + r->carry_len, data, head);
        size_t pn = r->carry_len + head;
        const char *hit = NULL;
        for (size_t i = 0; !hit && i + r->delim_len <= pn; i++)
            if (!memcmp(probe + i, r->delim, r->delim_len))
                hit = data + (i + r->delim_len - r->carry_len);
        for (size_t i = 0; !hit && i + r->delim_len <= n; i++)
            if (!memcmp(data + i, r->delim, r->delim_len))
                hit = data + i + r->delim_len;
        if (hit) {
            take = (size_t)(hit - data);
            r->closed = true;
        } else { /* keep the last delim_len - 1 bytes */
            size_t keep = r->delim_len - 1;
            if (n >= keep) {
                memcpy(r->carry, data + n - keep, keep);
            } else {
                size_t drop = r->carry_len + n > keep ? r->carry_len + n - keep : 0;
                memmove(r->carry, r->carry + drop, r->carry_len - drop);
                memcpy(r->carry + r->carry_len - drop, data, n);
            }
            r->carry_len = r->carry_len + n < keep ? r->carry_len + n : keep;
        }
    }
    if (take && MHD_post_process(r->pp, data, take) != MHD_YES)
        return false;
    return !r->closed || MHD_post_process(r->pp, "\r\n", 2) == MHD_YES;
}

static bool is_get(const char *m) { return !strcmp(m, "GET") || !strcmp(m, "HEAD"); }

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    struct serve_http *h = cls;
    struct req *r = *con_cls;
    (void)version;
    if (!r) { /* the headers: route, check, and answer at once what needs no body */
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->h = h;
        r->t0 = now_s();
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->url, sizeof r->url, "%s", url);
        *con_cls = r;
        pthread_mutex_lock(&h->mu);
        h->active++;
        pthread_mutex_unlock(&h->mu);
        if (!strcmp(url, "/v1/realtime"))
            return serve_realtime_request(h->o->realtime, c, method, &r->status);
        enum MHD_Result ui_ret;
        if (serve_ui_request(c, method, url, h->o, &ui_ret, &r->status))
            return ui_ret;
        bool known_get = !strcmp(url, "/") || !strcmp(url, "/health") || !strcmp(url, "/v1/models");
        if (known_get)
            return is_get(method) ? get_page(c, r) : send_error(c, r, 405, "method not allowed", NULL, NULL);
        if (strcmp(url, TRANSCRIBE_PATH) != 0)
            return send_error(c, r, 404, "no such endpoint", NULL, NULL);
        if (strcmp(method, "POST") != 0)
            return send_error(c, r, 405, "method not allowed: POST multipart/form-data here", NULL, NULL);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->o->max_upload) {
            char m[160];
            snprintf(m, sizeof m, "the upload exceeds the server's limit of %zu bytes", h->o->max_upload);
            return send_error(c, r, 413, m, "file", "file_too_large");
        }
        if (!authorized(c, h->o->api_key)) { /* answered once the body (within the limit) is read and
                                               dropped: a client still sending would miss an early answer */
            r->unauthorized = true;
            return MHD_YES;
        }
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        const char *b = ct ? strstr(ct, "boundary=") : NULL;
        if (b) {
            b += 9;
            size_t n = strcspn(b, "; \t");
            if (n >= 2 && *b == '"' && b[n - 1] == '"')
                b++, n -= 2;
            if (n + 6 < sizeof r->delim)
                r->delim_len = (size_t)snprintf(r->delim, sizeof r->delim, "\r\n--%.*s--", (int)n, b);
        }
        r->pp = MHD_create_post_processor(c, 64 * 1024, on_field, r);
        if (!r->pp)
            return send_error(c, r, 400, "the body must be multipart/form-data", NULL, NULL);
        return MHD_YES;
    }
    if (*upload_data_size) { /* a piece of the body */
        r->body_bytes += *upload_data_size;
        if (r->body_bytes > h->o->max_upload)
            return MHD_NO; /* a body without Content-Length past the limit: drop the connection */
        if (r->pp && !r->bad_form && !r->closed && !feed(r, upload_data, *upload_data_size))
            r->bad_form = true;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->status) /* answered at the headers */
        return MHD_YES;
    if (r->unauthorized)
        return send_error(c, r, 401, "missing or wrong API key (Authorization: Bearer KEY)", NULL, "invalid_api_key");
    return transcribe(c, r);
}

/* The end of a request, answered or not (a client gone, a timeout): frees it, logs one line. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    struct serve_http *h = cls;
    struct req *r = *con_cls;
    (void)c;
    if (!r)
        return;
    if (r->pp)
        MHD_destroy_post_processor(r->pp);
    if (r->job_queued && r->job.stream) /* the worker may still be at it (a client gone mid-stream) */
        serve_queue_forget(h->q, &r->job);
    free(r->job.events);
    free(r->file);
    vkasr_free(r->job.samples);
    free(r->job.body);
    double ms = (now_s() - r->t0) * 1e3;
    if (r->job_queued)
        fprintf(stderr,
                "vkasr serve: %s %s %d audio %.2f s queue %.0f ms compute %.0f ms batch %zu total %.0f ms "
                "device %s worker %d\n",
                r->method, r->url, r->status, (double)r->job.n / VKASR_SAMPLE_RATE, r->job.queue_ms,
                r->job.compute_ms, r->job.batch_size, ms, r->job.device ? r->job.device : "-", r->job.worker);
    else if (r->status && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        fprintf(stderr, "vkasr serve: %s %s %d total %.0f ms\n", r->method, r->url, r->status, ms);
    else
        fprintf(stderr, "vkasr serve: %s %s dropped after %.0f ms (%s)\n", r->method, r->url, ms,
                toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out"
                : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT  ? "the client closed the connection"
                : r->status                                   ? "the answer was not sent whole"
                                                              : "the request was refused");
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&h->mu);
    h->active--;
    pthread_mutex_unlock(&h->mu);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    fprintf(stderr, "vkasr serve: http: %s\n", msg);
}

struct serve_http *serve_http_start(const struct serve_opts *o, struct serve_queue *q, int *port) {
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", o->port);
    int e = getaddrinfo(o->host, ps, &hints, &ai);
    if (e) {
        fprintf(stderr, "vkasr serve: --host %s: %s\n", o->host, gai_strerror(e));
        return NULL;
    }
    struct serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return NULL;
    }
    h->o = o;
    h->q = q;
    pthread_mutex_init(&h->mu, NULL);
    /* poll(), not select(): a server of a thousand streams holds sockets numbered past FD_SETSIZE (1024),
     * which select() cannot watch (libmicrohttpd would refuse those connections) */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
                            on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
                            o->max_concurrent, MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        fprintf(stderr, "vkasr serve: cannot listen on %s port %d (in use, or not an address of this host)\n",
                o->host, o->port);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : o->port;
    return h;
}

void serve_http_quiesce(struct serve_http *h) {
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET)
        close(s);
}

unsigned serve_http_active(struct serve_http *h) {
    pthread_mutex_lock(&h->mu);
    unsigned n = h->active;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void serve_http_stop(struct serve_http *h) {
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
