/* serve_ui.c — the browser side of `vkasr serve`: the page at / (tools/cli/serve/ui.html, embedded at build
 * time, no external assets), GET /status (model, devices, streams: what the page shows) and CORS (off
 * unless --cors-origin names the one origin whose pages may call the API). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "serve_rt.h"
#include "serve_ui_page.h" /* generated: serve_ui_page[], serve_ui_page_len */

void serve_cors_headers(struct MHD_Response *resp, const struct serve_opts *o) {
    if (!o->cors_origin)
        return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, o->cors_origin);
    if (strcmp(o->cors_origin, "*") != 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
}

static enum MHD_Result answer(struct MHD_Connection *c, const struct serve_opts *o, int status, const void *body,
                             size_t len, enum MHD_ResponseMemoryMode mode, const char *type) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free((void *)body);
        return MHD_NO;
    }
    if (type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    serve_cors_headers(resp, o);
    if (status == 204) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    if (type && !strncmp(type, "text/html", 9)) /* the page runs its own inline script only */
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; "
                                "style-src 'unsafe-inline'; connect-src 'self' ws: wss:; img-src data:");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* {"version", "model", "api_key_required", "workers": [{"worker", "device", "device_name",
 * "precision"}], "streams": {"active", "max", "max_per_key"}} */
static char *status_json(const struct serve_opts *o, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    fputs("{\"version\":", f);
    json_str(f, vkasr_version_string());
    fputs(",\"model\":", f);
    json_str(f, o->model_name);
    fprintf(f, ",\"api_key_required\":%s,\"workers\":[", o->api_key ? "true" : "false");
    int n = o->pool ? pool_size(o->pool) : 0;
    for (int i = 0; i < n; i++) {
        const struct pool_worker *w = pool_worker(o->pool, i);
        vkasr_model_info info;
        bool have = vkasr_model_get_info(w->model, &info) == VKASR_OK;
        fprintf(f, "%s{\"worker\":%d,\"device\":", i ? "," : "", w->index);
        json_str(f, w->device ? w->device : "default");
        fputs(",\"device_name\":", f);
        json_str(f, have ? info.device_name : "");
        fprintf(f, ",\"precision\":\"%s\"}",
                !have                                ? "unknown"
                : info.precision == VKASR_PRECISION_F16 ? "f16"
                                                        : "f32");
    }
    fprintf(f, "],\"streams\":{\"active\":%u,\"max\":%u,\"max_per_key\":%u}}\n",
            o->realtime ? serve_realtime_active(o->realtime) : 0, o->max_streams, o->max_streams_per_key);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

bool serve_ui_request(struct MHD_Connection *c, const char *method, const char *url, const struct serve_opts *o,
                      enum MHD_Result *ret, int *status) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!strcmp(method, "OPTIONS") && o->cors_origin) {
        *status = 204;
        *ret = answer(c, o, 204, "", 0, MHD_RESPMEM_PERSISTENT, NULL);
        return true;
    }
    if (get && !strcmp(url, "/") && !o->no_ui) {
        *status = 200;
        *ret = answer(c, o, 200, serve_ui_page, serve_ui_page_len, MHD_RESPMEM_PERSISTENT, "text/html; charset=utf-8");
        return true;
    }
    if (get && !strcmp(url, "/status")) {
        size_t len = 0;
        char *body = status_json(o, &len);
        *status = 200;
        *ret = body ? answer(c, o, 200, body, len, MHD_RESPMEM_MUST_FREE, "application/json") : MHD_NO;
        return true;
    }
    return false;
}
