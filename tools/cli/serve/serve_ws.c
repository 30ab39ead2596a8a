/* serve_ws.c — WebSocket connections of `vkasr serve`: the opening handshake on libmicrohttpd's connection
 * upgrade (RFC 6455 §4.2: the accept key from SHA-1 and base64) and the framing, done by Debian's wslay
 * over the upgraded socket (non-blocking, polled by the caller's thread). No protocol logic: that is
 * serve_realtime.c's. */
#define _DEFAULT_SOURCE /* strcasestr */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <wslay/wslay.h>

#include "serve_rt.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct ws {
    int fd;
    wslay_event_context_ptr ctx;
    char *extra;                   /* bytes the HTTP parser read past the handshake: read first    */
    size_t extra_len, extra_off;
    ws_message_fn on_message;
    void *ud;
    bool failed;                   /* the socket failed or the peer closed it                      */
};

bool ws_has_token(const char *value, const char *token) {
    size_t n = strlen(token);
    for (const char *p = value; p && *p;) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, ",");
        size_t t = len;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t == n && !strncasecmp(p, token, n))
            return true;
        p += len;
    }
    return false;
}

const char *ws_check_handshake(struct MHD_Connection *c, const char *method) {
    if (strcmp(method, "GET") != 0)
        return "a WebSocket opens with GET";
    const char *up = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);
    const char *conn = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION);
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_SEC_WEBSOCKET_KEY);
    const char *ver = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_SEC_WEBSOCKET_VERSION);
    if (!up || !ws_has_token(up, "websocket") || !conn || !ws_has_token(conn, "upgrade"))
        return "this endpoint is a WebSocket: Upgrade: websocket and Connection: Upgrade are required";
    if (!key || strlen(key) != 24)
        return "Sec-WebSocket-Key: missing or not 16 bytes in base64";
    if (!ver || strcmp(ver, "13") != 0)
        return "Sec-WebSocket-Version: must be 13";
    return NULL;
}

enum MHD_Result ws_accept(struct MHD_Connection *c, const char *protocol, MHD_UpgradeHandler fn, void *cls) {
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_SEC_WEBSOCKET_KEY);
    char buf[64];
    unsigned char digest[SHA_DIGEST_LENGTH];
    char accept[32];
    snprintf(buf, sizeof buf, "%s%s", key ? key : "", WS_GUID);
    SHA1((const unsigned char *)buf, strlen(buf), digest);
    EVP_EncodeBlock((unsigned char *)accept, digest, SHA_DIGEST_LENGTH); /* 28 characters and a NUL */
    struct MHD_Response *resp = MHD_create_response_for_upgrade(fn, cls);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_SEC_WEBSOCKET_ACCEPT, accept);
    if (protocol)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SEC_WEBSOCKET_PROTOCOL, protocol);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- wslay's I/O on the socket ---- */

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user_data) {
    struct ws *w = user_data;
    (void)flags;
    if (w->extra_off < w->extra_len) {
        size_t n = w->extra_len - w->extra_off < len ? w->extra_len - w->extra_off : len;
        memcpy(buf, w->extra + w->extra_off, n);
        w->extra_off += n;
        return (ssize_t)n;
    }
    ssize_t r;
    while ((r = recv(w->fd, buf, len, 0)) < 0 && errno == EINTR) {
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (r <= 0) { /* the peer closed the connection, or it failed */
        w->failed = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return r;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user_data) {
    struct ws *w = user_data;
    (void)flags;
    ssize_t r;
    while ((r = send(w->fd, data, len, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (r < 0) {
        w->failed = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return r;
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user_data) {
    struct ws *w = user_data;
    (void)ctx;
    if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
        w->on_message(w->ud, arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length);
}

struct ws *ws_open(int fd, const char *extra, size_t extra_len, size_t max_message, ws_message_fn on_message,
                   void *ud) {
    struct ws *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->fd = fd;
    w->on_message = on_message;
    w->ud = ud;
    if (extra_len) {
        w->extra = malloc(extra_len);
        if (!w->extra) {
            free(w);
            return NULL;
        }
        memcpy(w->extra, extra, extra_len);
        w->extra_len = extra_len;
    }
    const struct wslay_event_callbacks cb = {recv_cb, send_cb, NULL, NULL, NULL, NULL, msg_cb};
    if (wslay_event_context_server_init(&w->ctx, &cb, w) != 0) {
        free(w->extra);
        free(w);
        return NULL;
    }
    /* a message over the limit (one frame or the sum of a fragmented one's) closes with 1009 */
    wslay_event_config_set_max_recv_msg_length(w->ctx, max_message);
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return w;
}

bool ws_send_text(struct ws *w, const char *text, size_t len) {
    struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)text, len};
    return wslay_event_queue_msg(w->ctx, &m) == 0; /* wslay copies the message */
}

void ws_close(struct ws *w, int code, const char *reason) {
    wslay_event_queue_close(w->ctx, (uint16_t)code, (const uint8_t *)reason, reason ? strlen(reason) : 0);
}

size_t ws_queued_bytes(struct ws *w) { return wslay_event_get_queued_msg_length(w->ctx); }

bool ws_open_for_reading(struct ws *w) { return !w->failed && wslay_event_want_read(w->ctx); }

bool ws_done(struct ws *w) {
    return w->failed || (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx));
}

int ws_poll(struct ws *w, int wake_fd, int timeout_ms) {
    struct pollfd p[2] = {{w->fd, 0, 0}, {wake_fd, POLLIN, 0}};
    bool rd = wslay_event_want_read(w->ctx), wr = wslay_event_want_write(w->ctx);
    if (rd || w->extra_off < w->extra_len)
        p[0].events |= POLLIN;
    if (wr)
        p[0].events |= POLLOUT;
    int n = poll(p, wake_fd >= 0 ? 2 : 1, w->extra_off < w->extra_len ? 0 : timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    int woke = wake_fd >= 0 && (p[1].revents & POLLIN);
    if ((rd && ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) || w->extra_off < w->extra_len)) &&
        wslay_event_recv(w->ctx) != 0)
        w->failed = true;
    if (!w->failed && wslay_event_want_write(w->ctx) && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)) &&
        wslay_event_send(w->ctx) != 0)
        w->failed = true;
    /* messages queued by the callbacks of this round go out when the socket takes them */
    if (!w->failed && wslay_event_want_write(w->ctx) && wslay_event_send(w->ctx) != 0)
        w->failed = true;
    return woke;
}

void ws_linger(struct ws *w, double seconds) {
    shutdown(w->fd, SHUT_WR);
    char buf[65536];
    for (double until = now_s() + seconds, left; (left = until - now_s()) > 0;) {
        struct pollfd p = {w->fd, POLLIN, 0};
        int n = poll(&p, 1, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR)
            return;
        if (n > 0) {
            ssize_t r = recv(w->fd, buf, sizeof buf, 0);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                return; /* the peer closed its side too */
        }
    }
}

void ws_free(struct ws *w) {
    if (!w)
        return;
    wslay_event_context_free(w->ctx);
    free(w->extra);
    free(w);
}
