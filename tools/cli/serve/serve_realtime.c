/* serve_realtime.c — GET /v1/realtime, the connections of OpenAI's Realtime API in transcription mode: the
 * handshake (key, origin, intent), the limits (streams per server and per key, session length, idle
 * time, unread output), a thread per connection that moves the queued events to its WebSocket
 * (serve_ws.c), and the sessions (vkasr_session) its streams run on. The protocol is serve_rt_events.c's. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "serve_rt_session.h"

#define OUT_MIN_LIMIT (1u << 20) /* unsent output a session may hold at least before it is dropped  */
#define END_FLUSH_S 2.0          /* how long a closing session waits for its last events to go out */

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
    const char *end = "closed";
    char err[600] = "";
    s->ws = ws_open(s->fd, s->extra, s->extra_len, o->ws_max_message, rt_on_message, s);
    free(s->extra);
    s->extra = NULL;
    if (!s->ws) {
        end = "out of memory";
        goto done;
    }
    if (s->refused) {
        rt_emit_error(s, "invalid_request_error", "rate_limit_exceeded", NULL, s->refusal, NULL);
        close_and_drain(s, 1013, "try again later");
        end = s->refusal;
        goto done;
    }
    s->vs = session_take(rt, &s->model_index, err, sizeof err);
    if (!s->vs) {
        rt_emit_error(s, "server_error", "session_failed", NULL, err, NULL);
        close_and_drain(s, 1011, "no session");
        end = err;
        goto done;
    }
    rt_emit_session(s, "created");
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
                rt_commit(s, NULL);
            if (code)
                rt_emit_error(s, close_code == 1001 ? "server_error" : "invalid_request_error", code, NULL, why, NULL);
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
    if (offered && ws_has_token(offered, "realtime")) {
        snprintf(proto, sizeof proto, "realtime");
    } else if (offered) {
        const char *p = offered + strspn(offered, " \t,");
        size_t n = strcspn(p, ", \t");
        if (n < sizeof proto)
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
    rt->model = pool_worker(pool, 0)->model;
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
