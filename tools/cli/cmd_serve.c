/* cmd_serve.c — `vkasr serve`: an OpenAI-compatible transcription server (POST /v1/audio/transcriptions)
 * with cross-request packed batching. Options, model and session, and the orderly stop on SIGINT/SIGTERM;
 * serve_http.c, serve_queue.c and serve_format.c do the rest (docs/server.md). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

static void usage_serve(FILE *f) {
    fprintf(f,
            "usage: vkasr serve [-m MODEL] [--host ADDR] [--port N] [options]\n"
            "\n"
            "Serves transcriptions over HTTP with OpenAI's API: POST /v1/audio/transcriptions\n"
            "(multipart/form-data: file, model, response_format json|text|srt|vtt|verbose_json,\n"
            "timestamp_granularities[], language, prompt, temperature), GET /v1/models, GET /health.\n"
            "Requests that arrive together run together in packed batches; each answer is what\n"
            "`vkasr transcribe` gives for that file alone. See docs/server.md.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH        Parakeet directory or vkasr .gguf file (default: $VKASR_MODEL, else\n"
            "                          the installed default model)\n"
            "      --model-name NAME   the model's name in the API (default: the file name without\n"
            "                          .gguf); `model` may also be whisper-1, gpt-4o-transcribe or\n"
            "                          gpt-4o-mini-transcribe\n"
            "      --host ADDR         the address to listen on (default 127.0.0.1: this machine only)\n"
            "      --port N            the port (default 8080; 0: any free port, printed on stderr)\n"
            "      --api-key KEY       require Authorization: Bearer KEY on /v1/ (default: $VKASR_API_KEY;\n"
            "                          neither: no key)\n"
            "      --max-upload SIZE   the largest request body (K, M, G suffixes; default 256M): 413 beyond\n"
            "      --max-concurrent N  open connections at most (default 64); more wait for the kernel's\n"
            "                          backlog or are refused\n"
            "      --timeout S         close a connection idle for S seconds, e.g. a client that stopped\n"
            "                          sending its body (default 30)\n"
            "      --max-queue N       requests waiting for the device at most (default 256): 503 beyond\n"
            "      --batch-wait-ms MS  how long a request waits for others to share its batch (default 5)\n"
            "      --max-batch N       requests in one batch turn at most (default 256)\n"
            "      --solo-seconds S    inputs longer than S seconds run alone, in turns alternating with\n"
            "                          the batches of shorter ones (default 60)\n"
            "  -d, --device DEV        the device, as `vkasr transcribe -d` takes it\n"
            "  -p, --precision P       f16 (default where supported) or f32\n"
            "  -v, --verbose           more log messages\n"
            "  -h, --help              this help\n"
            "\n"
            "One log line per request on stderr (status, audio seconds, queue wait, compute time, batch\n"
            "size). SIGINT or SIGTERM stops accepting connections, finishes the requests in progress and\n"
            "exits 0; a second signal abandons the transcriptions in progress (answered 503).\n");
}

/* A byte count with an optional K, M or G suffix (binary units). */
static bool parse_bytes(const char *s, size_t *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return false;
    if (*end == 'K' || *end == 'k')
        v *= 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1048576.0, end++;
    else if (*end == 'G' || *end == 'g')
        v *= 1073741824.0, end++;
    if (*end || v >= 1.8e19)
        return false;
    *out = (size_t)v;
    return true;
}

/* An integer in [lo, hi]. */
static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* The model's name in the API: the last path component, without a trailing / or .gguf. */
static void default_model_name(const char *path, char *buf, size_t size) {
    snprintf(buf, size, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    const char *slash = strrchr(buf, '/');
    if (slash)
        memmove(buf, slash + 1, strlen(slash + 1) + 1);
    n = strlen(buf);
    if (n > 5 && !strcmp(buf + n - 5, ".gguf"))
        buf[n - 5] = '\0';
}

/* Waits for SIGINT/SIGTERM (blocked in every thread) for at most `seconds` (< 0: forever); true if one came. */
static bool wait_signal(const sigset_t *set, double seconds) {
    if (seconds < 0) {
        int sig = 0;
        return sigwait(set, &sig) == 0;
    }
    struct timespec ts = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
    return sigtimedwait(set, NULL, &ts) > 0;
}

int cmd_serve(int argc, char **argv) {
    const char *model = getenv("VKASR_MODEL"), *device = NULL, *model_name = NULL;
    char default_path[4096], name_buf[256];
    vkasr_precision precision = VKASR_PRECISION_AUTO;
    bool verbose = false;
    struct serve_opts o = {
        .host = "127.0.0.1", .port = 8080, .api_key = getenv("VKASR_API_KEY"), .max_upload = 256u << 20,
        .max_concurrent = 64, .timeout_s = 30, .max_queue = 256, .batch_wait_ms = 5, .max_batch = 256,
        .solo_seconds = 60, .tp = vkasr_transcribe_params_default(),
    };
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        long n = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_serve(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
            continue;
        }
        if (!(v = arg_value(argc, argv, &i, a)))
            return EXIT_USAGE;
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--model-name"))
            model_name = v, ok = *v != '\0';
        else if (!strcmp(a, "--host"))
            o.host = v;
        else if (!strcmp(a, "--port"))
            ok = parse_long(v, 0, 65535, &n), o.port = (int)n;
        else if (!strcmp(a, "--api-key"))
            o.api_key = v;
        else if (!strcmp(a, "--max-upload"))
            ok = parse_bytes(v, &o.max_upload);
        else if (!strcmp(a, "--max-concurrent"))
            ok = parse_long(v, 1, 100000, &n), o.max_concurrent = (unsigned)n;
        else if (!strcmp(a, "--timeout"))
            ok = parse_long(v, 1, 86400, &n), o.timeout_s = (unsigned)n;
        else if (!strcmp(a, "--max-queue"))
            ok = parse_long(v, 1, 1000000, &n), o.max_queue = (size_t)n;
        else if (!strcmp(a, "--batch-wait-ms"))
            ok = parse_long(v, 0, 60000, &n), o.batch_wait_ms = (int)n;
        else if (!strcmp(a, "--max-batch"))
            ok = parse_long(v, 1, 256, &n), o.max_batch = (size_t)n;
        else if (!strcmp(a, "--solo-seconds")) {
            char *end = NULL;
            o.solo_seconds = strtod(v, &end);
            ok = *v && !*end && o.solo_seconds > 0 && isfinite(o.solo_seconds);
        } else if (!strcmp(a, "-d") || !strcmp(a, "--device"))
            device = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--precision")) {
            ok = !strcmp(v, "f32") || !strcmp(v, "f16");
            precision = !strcmp(v, "f32") ? VKASR_PRECISION_F32 : VKASR_PRECISION_F16;
        } else {
            fprintf(stderr, "vkasr: serve: unknown option '%s' (vkasr serve --help)\n", a);
            return EXIT_USAGE;
        }
        if (!ok) {
            fprintf(stderr, "vkasr: serve: bad value '%s' for %s (vkasr serve --help)\n", v, a);
            return EXIT_USAGE;
        }
    }
    if (!(model = model_or_default(model, default_path, sizeof default_path)))
        return EXIT_USAGE;
    if (check_device_backend(device) != EXIT_OK)
        return EXIT_USAGE;
    if (o.api_key && !*o.api_key)
        o.api_key = NULL;
    default_model_name(model, name_buf, sizeof name_buf);
    o.model_name = model_name ? model_name : name_buf;

    /* Signals are taken by sigwait below: blocked here, before any thread starts, so every thread
     * (the library's too) inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-answer is an error of that write only */

    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = device;
    mp.precision = precision;
    mp.log_level = verbose ? VKASR_LOG_INFO : VKASR_LOG_WARN;
    mp.log_callback = log_to_stderr;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *session = NULL;
    vkasr_status st = vkasr_model_load(model, &mp, &m, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        return exit_code_for(st, 1);
    }
    if ((st = vkasr_session_create(m, &session, &err)) != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        vkasr_model_free(m);
        return exit_code_for(st, 1);
    }
    int rc = EXIT_OK, port = 0;
    struct serve_queue *q = serve_queue_start(session, &o);
    struct serve_http *h = q ? serve_http_start(&o, q, &port) : NULL;
    if (!h) {
        rc = EXIT_FAIL;
    } else {
        fprintf(stderr, "vkasr serve: listening on http://%s%s%s:%d/ (model %s%s)\n", strchr(o.host, ':') ? "[" : "",
                o.host, strchr(o.host, ':') ? "]" : "", port, o.model_name, o.api_key ? ", API key required" : "");
        wait_signal(&sigs, -1);
        fprintf(stderr, "vkasr serve: stopping: no new connections; finishing %u request(s) in progress\n",
                serve_http_active(h));
        serve_http_quiesce(h);
        bool aborted = false;
        while (serve_http_active(h) > 0)
            if (wait_signal(&sigs, 0.05) && !aborted) {
                fprintf(stderr, "vkasr serve: second signal: abandoning the transcriptions in progress\n");
                serve_queue_abort(q);
                aborted = true;
            }
    }
    serve_http_stop(h);
    serve_queue_stop(q);
    vkasr_session_free(session);
    vkasr_model_free(m);
    fprintf(stderr, "vkasr serve: stopped\n");
    return rc;
}
