/* cmd_serve.c — `vkasr serve`: an OpenAI-compatible transcription server (POST /v1/audio/transcriptions)
 * with cross-request packed batching. Options, the worker pool (models and sessions of the devices), and
 * the orderly stop on SIGINT/SIGTERM; serve_http.c, serve_queue.c and serve_format.c do the rest
 * (docs/server.md). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/resource.h>

#include "../args.h"
#include "serve_rt.h"

static void intro(FILE *f) {
    fputs("usage: vkasr serve [-m MODEL] [-d DEVICE | --devices LIST] [--host ADDR] [--port N] [options]\n"
          "\n"
          "Serves transcriptions over HTTP with OpenAI's API: POST /v1/audio/transcriptions\n"
          "(multipart/form-data: file, model, response_format json|text|srt|vtt|verbose_json,\n"
          "timestamp_granularities[], language, prompt, temperature, stream; for srt and vtt also\n"
          "max_line_chars, max_lines, max_cue_seconds, min_cue_seconds, cue_pause, defaults from the\n"
          "options below), GET /v1/models, GET /health;\n"
          "OpenAI's Realtime transcription over a WebSocket at /v1/realtime?intent=transcription\n"
          "(session.update, input_audio_buffer.append/commit/clear: deltas of final words as they\n"
          "are spoken), and a page at / for a browser: upload a file, or speak into the microphone.\n"
          "Requests that arrive together run together in packed batches; each answer is what\n"
          "`vkasr transcribe` gives for that file alone. See docs/server.md.\n",
          f);
}

static void outro(FILE *f) {
    fputs("\nExit codes: 0 stopped by a signal, 1 cannot listen or start, 2 usage error, 3 model error,\n"
          "5 no usable device.\n",
          f);
    fputs("\nOne log line per request on stderr (status, audio seconds, queue wait, compute time, batch\n"
          "size, device and worker), one per Realtime session. SIGINT or SIGTERM stops accepting\n"
          "connections, finishes the requests in progress, ends each Realtime session with its final\n"
          "text and exits 0; a second signal abandons the transcriptions in progress (answered 503).\n",
          f);
}

/* The command's own options: the server's settings and the API's model name. */
struct serve_cli {
    struct serve_opts o;
    const char *model_name;
    const char *devices;           /* --devices as given                                        */
    int sessions;                  /* --sessions: per device; 0: auto (pool_sessions)           */
};
#define SO(member) ARG_FIELD(struct serve_cli, o.member)

static int bad_value(const char *opt, const char *v) {
    fprintf(stderr, "vkasr: serve: bad value '%s' for %s (vkasr serve --help)\n", v, opt);
    return EXIT_USAGE;
}

static int arg_port(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 0, 65535, &n) ? (*(int *)field = (int)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_bytes(const char *opt, const char *v, void *field) {
    uint64_t n = 0;
    if (!cli_parse_size(v, &n) || n > SIZE_MAX)
        return bad_value(opt, v);
    *(size_t *)field = (size_t)n;
    return EXIT_OK;
}
/* unsigned in [1, 100000] (connections), [1, 86400] (seconds) */
static int arg_connections(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 1, 100000, &n) ? (*(unsigned *)field = (unsigned)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_timeout(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 1, 86400, &n) ? (*(unsigned *)field = (unsigned)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_queue(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 1, 1000000, &n) ? (*(size_t *)field = (size_t)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_wait_ms(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 0, 60000, &n) ? (*(int *)field = (int)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_batch(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 1, SERVE_MAX_BATCH, &n) ? (*(size_t *)field = (size_t)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_seconds(const char *opt, const char *v, void *field) {
    char *end = NULL;
    double s = strtod(v, &end);
    if (!*v || *end || !(s > 0) || !isfinite(s))
        return bad_value(opt, v);
    *(double *)field = s;
    return EXIT_OK;
}
static int arg_streams(const char *opt, const char *v, void *field) {
    long n;
    return cli_parse_long(v, 1, 100000, &n) ? (*(unsigned *)field = (unsigned)n, EXIT_OK) : bad_value(opt, v);
}
static int arg_sessions(const char *opt, const char *v, void *field) {
    long n = 0;
    if (strcmp(v, "auto") && !cli_parse_long(v, 1, POOL_MAX_SESSIONS, &n))
        return bad_value(opt, v);
    *(int *)field = (int)n;
    return EXIT_OK;
}
static int arg_warm(const char *opt, const char *v, void *field) {
    static const char *const names[] = {"auto", "short", "batches"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i]))
            return *(enum serve_warm *)field = (enum serve_warm)i, EXIT_OK;
    return bad_value(opt, v);
}
static int arg_name(const char *opt, const char *v, void *field) {
    return *v ? (*(const char **)field = v, EXIT_OK) : bad_value(opt, v);
}

static const struct cli_opt serve_table[] = {
    OPT_VALUE("--model-name", "NAME", ARG_FIELD(struct serve_cli, model_name), arg_name,
              "the model's name in the API (default: the file name without\n"
              ".gguf); `model` may also be whisper-1, gpt-4o-transcribe or\n"
              "gpt-4o-mini-transcribe"),
    OPT_STRING("--host", "ADDR", SO(host), "the address to listen on (default 127.0.0.1: this machine only)"),
    OPT_VALUE("--port", "N", SO(port), arg_port, "the port (default 8080; 0: any free port, printed on stderr)"),
    OPT_STRING("--api-key", "KEY", SO(api_key),
               "require Authorization: Bearer KEY on /v1/ (default: $VKASR_API_KEY;\nneither: no key); "
               "the WebSocket also takes ?api_key=KEY (browsers)"),
    OPT_VALUE("--max-upload", "SIZE", SO(max_upload), arg_bytes,
              "the largest request body (K, M, G suffixes; default 256M): 413 beyond"),
    OPT_VALUE("--max-concurrent", "N", SO(max_concurrent), arg_connections,
              "open connections at most (default 64); more wait for the kernel's\nbacklog or are refused"),
    OPT_VALUE("--timeout", "S", SO(timeout_s), arg_timeout,
              "close a connection idle for S seconds, e.g. a client that stopped\nsending its body (default 30)"),
    OPT_VALUE("--max-queue", "N", SO(max_queue), arg_queue,
              "requests waiting for the device at most (default 256): 503 beyond"),
    OPT_VALUE("--batch-wait-ms", "MS", SO(batch_wait_ms), arg_wait_ms,
              "how long a free worker waits for more requests to share its turn\n"
              "(default 0: a turn starts as soon as a worker is free, with the\n"
              "requests waiting then)"),
    OPT_VALUE("--max-batch", "N", SO(max_batch), arg_batch, "requests in one batch turn at most (default 256)"),
    OPT_VALUE("--solo-seconds", "S", SO(solo_seconds), arg_seconds,
              "inputs longer than S seconds run alone, in turns alternating with\nthe batches of shorter ones (default 60)"),
    OPT_VALUE("--warm-up", "MODE", SO(warm_up), arg_warm,
              "what each session transcribes before the server is ready: short\n(half a second of silence), "
              "batches (that, then batches of silence\nshaped like a loaded server's turns, so that their GPU "
              "pipelines\nexist before the first requests), auto (default: batches on a GPU,\nshort on the "
              "host's CPU)"),
    OPT_HEADING("live (the Realtime WebSocket and the page):"),
    OPT_VALUE("--max-streams", "N", SO(max_streams), arg_streams,
              "Realtime streams at once (default 16); each holds a session of its\n"
              "own (device memory for its windows) and two threads; more are told\n"
              "so in an error event and closed (1013). A cache-aware model plans\n"
              "its stream caches for N (two pools: 1 + N-1 slots, made as used)"),
    OPT_VALUE("--max-streams-per-key", "N", SO(max_streams_per_key), arg_streams,
              "of them per API key, or per client address when no key is set\n(default: --max-streams)"),
    OPT_VALUE("--stream-max-seconds", "S", SO(stream_max_s), arg_seconds,
              "a Realtime session's length at most (default 3600): then its audio\nis transcribed to the end and it closes"),
    OPT_VALUE("--stream-idle", "S", SO(stream_idle_s), arg_seconds,
              "close a Realtime session that sent nothing for S seconds (default 60)"),
    OPT_VALUE("--ws-max-message", "SIZE", SO(ws_max_message), arg_bytes,
              "the largest WebSocket message (default 4M): closed with 1009 beyond"),
    OPT_STRING("--cors-origin", "ORIGIN", SO(cors_origin),
               "let pages of ORIGIN (e.g. https://app.example; *: any) call the API\n"
               "and open the WebSocket (default: none; the server's own page always\nmay)"),
    OPT_FLAG("--no-ui", SO(no_ui), "no page at / (the plain-text description instead)"),
    ARGS_SHARED,
    OPT_VALUE("--devices", "LIST", ARG_FIELD(struct serve_cli, devices), arg_devices,
              "several devices in one process (comma-separated, as -d takes them: 0,1\n"
              "or cuda:0,cuda:1), --sessions workers each (the devices load the model\n"
              "at the same time); each worker takes the next turn of the one queue when\n"
              "it is free. A device named twice gets its workers twice on one model"),
    OPT_VALUE("--sessions", "N|auto", ARG_FIELD(struct serve_cli, sessions), arg_sessions,
              "sessions per device, each a worker taking turns (1 to 8); auto (the\n"
              "default): 2 on a GPU through Vulkan when one device is named (one\n"
              "turn's host work and decoder run while the other's encoder keeps the\n"
              "GPU busy), else 1"),
};

static const struct cli_command serve_command = {
    CMD_SERVE, "serve", intro, outro, serve_table, sizeof serve_table / sizeof serve_table[0], NULL,
};

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

/* Each connection holds a socket (an upgraded WebSocket one more descriptor on the way): raise the soft
 * limit of open files (often 1024) towards the hard one when --max-concurrent needs more, and say when
 * the hard limit is lower. */
static void raise_open_files(unsigned max_concurrent) {
    struct rlimit rl;
    const rlim_t want = (rlim_t)max_concurrent * 2 + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    if ((setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) || rl.rlim_cur < want)
        fprintf(stderr, "vkasr serve: warning: --max-concurrent %u may need %llu open files; the limit is %llu "
                        "(ulimit -n)\n",
                max_concurrent, (unsigned long long)want, (unsigned long long)rl.rlim_cur);
}

int cmd_serve(int argc, char **argv) {
    char default_path[4096], name_buf[256];
    struct cli_common common = cli_common_default();
    struct serve_cli cli = {
        .o = {.host = "127.0.0.1", .port = 8080, .api_key = getenv("VKASR_API_KEY"), .max_upload = 256u << 20,
              .max_concurrent = 64, .timeout_s = 30, .max_queue = 256, .batch_wait_ms = 0, .max_batch = 256,
              .solo_seconds = 60, .tp = vkasr_transcribe_params_default(), .max_streams = 16,
              .stream_max_s = 3600, .stream_idle_s = 60, .ws_max_message = 4u << 20},
    };
    int rc = cli_parse(&serve_command, &common, &cli, argc, argv);
    if (rc != EXIT_OK)
        return rc == ARGS_HELP ? EXIT_OK : rc;
    struct serve_opts o = cli.o;
    o.subs = common.subs;
    const char *model = common.model, *model_name = cli.model_name;
    if ((rc = model_or_default(model, default_path, sizeof default_path, &model)) != EXIT_OK)
        return rc;
    struct pool_devices dev;
    if ((rc = pool_devices_parse(cli.devices, common.device, &dev)) != EXIT_OK) {
        pool_devices_free(&dev);
        return rc;
    }
    if (o.api_key && !*o.api_key)
        o.api_key = NULL;
    if (!o.max_streams_per_key || o.max_streams_per_key > o.max_streams)
        o.max_streams_per_key = o.max_streams;
    if (o.cors_origin && !*o.cors_origin)
        o.cors_origin = NULL;
    if (o.max_streams >= o.max_concurrent) /* a WebSocket stays one of the --max-concurrent connections */
        fprintf(stderr, "vkasr serve: warning: --max-streams %u leaves no connection for requests: --max-concurrent is %u\n",
                o.max_streams, o.max_concurrent);
    default_model_name(model, name_buf, sizeof name_buf);
    o.model_name = model_name ? model_name : name_buf;
    raise_open_files(o.max_concurrent);

    /* Signals are taken by sigwait below: blocked here, before any thread starts, so every thread
     * (the library's too) inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-answer is an error of that write only */

    /* a model per distinct device, --sessions sessions and workers per entry */
    struct pool *pool = NULL;
    vkasr_model_params mp = cli_model_params(&common);
    mp.stream_slots = (int)o.max_streams; /* a cache-aware model's streams share two pools' steps */
    const struct pool_params pp = {.model = model, .mp = mp, .devices = &dev,
                                   .sessions = pool_sessions(&dev, cli.sessions)};
    if ((rc = pool_open(&pp, &pool)) != EXIT_OK) {
        pool_devices_free(&dev);
        return rc;
    }
    int port = 0;
    o.pool = pool;
    o.realtime = serve_realtime_new(pool, &o);
    if (!o.realtime)
        fprintf(stderr, "vkasr serve: out of memory\n");
    struct serve_queue *q = o.realtime ? serve_queue_start(pool, &o) : NULL;
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
        if (serve_realtime_active(o.realtime))
            fprintf(stderr, "vkasr serve: ending %u realtime session(s) with their final text\n",
                    serve_realtime_active(o.realtime));
        serve_realtime_shutdown(o.realtime);
        bool aborted = false;
        while (serve_http_active(h) > 0)
            if (wait_signal(&sigs, 0.05) && !aborted) {
                fprintf(stderr, "vkasr serve: second signal: abandoning the transcriptions in progress\n");
                serve_queue_abort(q);
                aborted = true;
            }
    }
    serve_realtime_end(o.realtime); /* its sessions close their upgraded connections first */
    serve_http_stop(h);
    serve_realtime_free(o.realtime);
    serve_queue_stop(q);
    pool_free(pool);
    pool_devices_free(&dev);
    fprintf(stderr, "vkasr serve: stopped\n");
    return rc;
}
