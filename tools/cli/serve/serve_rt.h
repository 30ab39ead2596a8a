/* serve_rt.h — what the live parts of `vkasr serve` share: WebSocket connections (serve_ws.c), OpenAI's
 * Realtime transcription sessions on them (serve_realtime.c) and the browser page (serve_ui.c). */
#ifndef VKASR_SERVE_RT_H
#define VKASR_SERVE_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "serve.h"

/* ---- serve_ws.c ---- */

/* Whether a comma-separated header value holds `token` (case-insensitive). */
bool ws_has_token(const char *value, const char *token);
/* NULL when the request is a well-formed WebSocket opening handshake (RFC 6455 §4.2.1), else why not. */
const char *ws_check_handshake(struct MHD_Connection *c, const char *method);
/* Answers the handshake with 101 (protocol: the Sec-WebSocket-Protocol chosen, or NULL); libmicrohttpd
 * then calls fn(cls, ...) on the connection's thread, and the socket is fn's until
 * MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE). A client gone before that: fn is never called. */
enum MHD_Result ws_accept(struct MHD_Connection *c, const char *protocol, MHD_UpgradeHandler fn, void *cls);

struct ws;
/* A whole text or binary message (wslay reassembles fragments; control frames it answers itself). */
typedef void (*ws_message_fn)(void *ud, bool binary, const unsigned char *data, size_t len);
/* Framing on an upgraded socket (made non-blocking); messages over max_message bytes close with 1009. */
struct ws *ws_open(int fd, const char *extra, size_t extra_len, size_t max_message, ws_message_fn on_message,
                   void *ud);
/* Queues a text message (copied); false when out of memory or closing. */
bool ws_send_text(struct ws *w, const char *text, size_t len);
/* Queues a close frame; the connection ends once it is sent and the peer's has come (or it fails). */
void ws_close(struct ws *w, int code, const char *reason);
/* Bytes queued and not yet sent (a peer that stops reading makes this grow). */
size_t ws_queued_bytes(struct ws *w);
bool ws_open_for_reading(struct ws *w);
/* Whether the connection is over: closed both ways, or the socket failed. */
bool ws_done(struct ws *w);
/* Waits up to timeout_ms for the socket or wake_fd (-1: none), then reads (calling on_message for each
 * message) and writes what it can. 1 when wake_fd became readable, 0 otherwise, -1 when poll failed. */
int ws_poll(struct ws *w, int wake_fd, int timeout_ms);
/* Lingering close: shuts the sending side, then reads and drops what the peer still sends, until it
 * closes or `seconds` pass, so that closing does not reset a connection whose peer is mid-message (the
 * reset could destroy the close frame before the peer reads it). */
void ws_linger(struct ws *w, double seconds);
void ws_free(struct ws *w);

/* ---- serve_realtime.c ---- */

struct serve_realtime;
/* The Realtime sessions' registry: sessions (vkasr_session) are opened on the pool's models as streams
 * need them and kept for the next stream, up to --max-streams. NULL when out of memory. */
struct serve_realtime *serve_realtime_new(struct pool *pool, const struct serve_opts *o);
/* Answers GET /v1/realtime: checks the handshake, key, origin and limits, then upgrades. */
enum MHD_Result serve_realtime_request(struct serve_realtime *rt, struct MHD_Connection *c, const char *method,
                                       int *status);
/* Streams open now. */
unsigned serve_realtime_active(struct serve_realtime *rt);
/* Tells every session to end: each transcribes what it holds, sends its last events and closes. */
void serve_realtime_shutdown(struct serve_realtime *rt);
/* serve_realtime_shutdown, then waits for the sessions' threads: each closes its upgraded connection
 * (before serve_http_stop, which waits for them). NULL: no-op. */
void serve_realtime_end(struct serve_realtime *rt);
/* After serve_http_stop (no upgrade can come any more): frees everything. NULL: no-op. */
void serve_realtime_free(struct serve_realtime *rt);

/* ---- serve_ui.c ---- */

/* GET / (the page, unless --no-ui), GET /status (the model, devices, streams) and CORS preflights
 * (OPTIONS, with --cors-origin): false when the request is none of these, else the answer is queued
 * (*ret, *status). */
bool serve_ui_request(struct MHD_Connection *c, const char *method, const char *url, const struct serve_opts *o,
                      enum MHD_Result *ret, int *status);
/* The CORS header for the page's API calls from another origin (--cors-origin), added to a response. */
void serve_cors_headers(struct MHD_Response *resp, const struct serve_opts *o);

#endif
