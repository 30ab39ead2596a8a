/* cmd_live.c — `vkasr live`: live transcription of raw PCM or WAV arriving on standard input (a microphone
 * through arecord, a call), or of a file fed at real time with --simulate. Its input: live_input.c; its
 * output: live_output.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "live.h"

/* live's own options. */
struct live_opts {
    vkasr_stream_params sp;
    struct live_input in;
    const char *simulate;
    double speed;
    bool speed_given, timestamps;
};
#define OPT(member) ARG_FIELD(struct live_opts, member)

static void intro(FILE *f) {
    fputs("usage: vkasr live [-m MODEL] [options]                        (audio on standard input)\n"
          "       vkasr live [-m MODEL] [options] --simulate FILE [--speed X]\n"
          "\n"
          "Transcribes audio as it arrives. Standard input carries raw PCM (default: 16-bit little-endian,\n"
          "16000 Hz, mono) or a WAV stream, whose header is recognised, e.g.\n"
          "  arecord -q -f S16_LE -r 16000 -c 1 -t raw | vkasr live\n"
          "  arecord -q -f S16_LE -r 16000 -t wav | vkasr live --timestamps\n"
          "Final text goes to stdout, one line per segment (a sentence, or speech up to a pause of 1 s).\n"
          "When stdout is a terminal, the segment being spoken is shown on the last line as it is\n"
          "recognised (words still open to change dimmed) and rewritten until it is final.\n"
          "Without -m (and without $VKASR_MODEL), live runs the cache-aware streaming default model\n"
          "vkasr-rnnt-stream-tiny-en.gguf (English, synthetic speech only; its first trained lookahead,\n"
          "640 ms), else the default model.\n"
          "A cache-aware streaming model (NVIDIA's chunked_limited ones) computes each frame once, a\n"
          "chunk at a time: --lookahead chooses its latency, --hop, --left and --right do not apply,\n"
          "and a word is final once the next one begins (docs/live.md).\n",
          f);
}

static void outro(FILE *f) {
    fputs("\n"
          "Ctrl-C (SIGINT) or SIGTERM stops reading: what was received is finished (its last words printed)\n"
          "and vkasr exits 130 (143 for SIGTERM). A second Ctrl-C ends vkasr at once.\n"
          "\n"
          "exit codes: 0 success (end of input), 1 transcription failed, 2 usage error, 3 model error,\n"
          "            4 audio or I/O error, 5 no usable device (or no NVIDIA driver for cuda), 130 interrupted\n",
          f);
}

/* --hop, --left, --right: their defaults come from the library. */
static void describe_hop(char *buf, size_t size) {
    snprintf(buf, size, "new audio per window, seconds (default %.2f)", vkasr_stream_params_default().hop_seconds);
}

static void describe_left(char *buf, size_t size) {
    snprintf(buf, size, "left context a window repeats, seconds (default %.2f)",
             vkasr_stream_params_default().left_context_seconds);
}

static void describe_right(char *buf, size_t size) {
    vkasr_stream_params d = vkasr_stream_params_default();
    snprintf(buf, size, "right context after the part a window decides, seconds (default %.2f);\n"
                        "a word becomes final %.2f-%.2f s after it ends, plus compute time",
             d.right_context_seconds, d.right_context_seconds, d.hop_seconds + d.right_context_seconds);
}

static int arg_rate(const char *opt, const char *v, void *field) {
    long r;
    if (!cli_parse_long(v, 1000, 768000, &r)) {
        fprintf(stderr, "vkasr: %s needs a sample rate in Hz (1000 to 768000)\n", opt);
        return EXIT_USAGE;
    }
    *(int *)field = (int)r;
    return EXIT_OK;
}

static int arg_channels(const char *opt, const char *v, void *field) {
    long c;
    if (!cli_parse_long(v, 1, 64, &c)) {
        fprintf(stderr, "vkasr: %s needs a channel count (1 to 64)\n", opt);
        return EXIT_USAGE;
    }
    *(int *)field = (int)c;
    return EXIT_OK;
}

static int arg_sample_format(const char *opt, const char *v, void *field) {
    static const enum sample_fmt fmts[] = {SAMPLE_S16, SAMPLE_S32, SAMPLE_F32};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
        if (!strcmp(v, live_input_format_name(fmts[i]))) {
            *(enum sample_fmt *)field = fmts[i];
            return EXIT_OK;
        }
    fprintf(stderr, "vkasr: unknown %s '%s' (s16le, s32le, f32le)\n", opt, v);
    return EXIT_USAGE;
}

static int arg_speed(const char *opt, const char *v, void *field) {
    struct live_opts *o = field;
    char *end = NULL;
    o->speed = strtod(v, &end);
    o->speed_given = true;
    if (*end || !(o->speed >= 0) || o->speed > 1000) {
        fprintf(stderr, "vkasr: %s needs a factor (0 for as fast as possible, up to 1000)\n", opt);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static int arg_seconds(const char *opt, const char *v, void *field) {
    char *end = NULL;
    double d = strtod(v, &end);
    if (!*v || *end || !(d > 0) || d > 3600) {
        fprintf(stderr, "vkasr: %s needs a duration in seconds (> 0)\n", opt);
        return EXIT_USAGE;
    }
    *(double *)field = d;
    return EXIT_OK;
}

static const struct cli_opt live_table[] = {
    OPT_VALUE("--rate", "HZ", OPT(in.rate), arg_rate,
              "sample rate of raw input (default 16000; other rates are resampled)"),
    OPT_VALUE("--channels", "N", OPT(in.channels), arg_channels,
              "channels of raw input, interleaved (default 1; averaged)"),
    OPT_VALUE("--format", "F", OPT(in.fmt), arg_sample_format,
              "sample format of raw input: s16le (default), s32le, f32le"),
    OPT_STRING("--simulate", "FILE", OPT(simulate),
               "read FILE (any format libsndfile reads) instead of standard input,\n"
               "at real-time speed: for demos and tests"),
    OPT_VALUE("--speed", "X", 0, arg_speed,
              "with --simulate: X times real time (default 1); 0: as fast as\n"
              "possible, with --no-catch-up implied (the text then depends only on\n"
              "the audio, not on timing)"),
    {.names = "--hop", .meta = "S", .kind = ARG_VALUE, .field = OPT(sp.hop_seconds), .parse = arg_seconds,
     .describe = describe_hop},
    {.names = "--left", .meta = "S", .kind = ARG_VALUE, .field = OPT(sp.left_context_seconds), .parse = arg_seconds,
     .describe = describe_left},
    {.names = "--right", .meta = "S", .kind = ARG_VALUE, .field = OPT(sp.right_context_seconds),
     .parse = arg_seconds, .describe = describe_right},
    OPT_ACTION("--no-catch-up", OPT(sp.catch_up), arg_clear,
               "transcribe every hop in turn even when the device falls behind\n"
               "(default: a late window takes all the audio that arrived meanwhile)"),
    OPT_FLAG("--timestamps", OPT(timestamps), "prefix each line with [start --> end]"),
};

static const struct cli_command live_command = {
    CMD_LIVE, "live", intro, outro, live_table, sizeof live_table / sizeof live_table[0], NULL,
};

/* Parses and checks the command line. EXIT_OK, ARGS_HELP or EXIT_USAGE. */
static int live_args(int argc, char **argv, struct cli_common *c, struct live_opts *o, char *model_buf,
                     size_t model_size) {
    *c = cli_common_default();
    *o = (struct live_opts){
        .sp = vkasr_stream_params_default(),
        .in = {.fd = STDIN_FILENO, .fmt = SAMPLE_S16, .rate = VKASR_SAMPLE_RATE, .channels = 1},
        .speed = 1.0,
    };
    int rc = cli_parse(&live_command, c, o, argc, argv);
    if (rc != EXIT_OK)
        return rc;
    if (o->speed_given && !o->simulate) {
        fprintf(stderr, "vkasr: --speed applies to --simulate only\n");
        return EXIT_USAGE;
    }
    if (!o->simulate && isatty(STDIN_FILENO)) {
        fprintf(stderr, "vkasr: standard input is a terminal: pipe audio into vkasr live, e.g. arecord -q -f S16_LE "
                        "-r 16000 -t raw | vkasr live (see vkasr live --help)\n");
        return EXIT_USAGE;
    }
    int mrc = stream_model_or_default(c->model, model_buf, model_size, &c->model);
    if (mrc != EXIT_OK)
        return mrc;
    if (o->simulate && o->speed == 0)
        o->sp.catch_up = false;
    return EXIT_OK;
}

static void sleep_until(double t) {
    double d = t - now_s();
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
        nanosleep(&ts, NULL); /* a signal cuts it short: the caller checks `interrupted` */
    }
}

/* --simulate: the file's 16 kHz samples in 20 ms pieces at `speed` times real time. */
static vkasr_status feed_samples(vkasr_stream *st, const float *x, size_t n, double speed, struct live_out *o) {
    const size_t piece = VKASR_SAMPLE_RATE / 50;
    vkasr_status s = VKASR_OK;
    double t0 = now_s();
    for (size_t i = 0; i < n && !interrupted && s == VKASR_OK; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        if (speed > 0)
            sleep_until(t0 + (double)(i + k) / VKASR_SAMPLE_RATE / speed);
        if (interrupted)
            break;
        s = vkasr_stream_push(st, x + i, k, VKASR_SAMPLE_RATE);
        live_note_push(o, (double)(i + k) / VKASR_SAMPLE_RATE);
    }
    return s;
}

/* Standard input: whatever has arrived, in whole frames, as soon as it arrives. */
static vkasr_status feed_input(vkasr_stream *st, struct live_input *in, struct live_out *o, int *rc) {
    float mono[8192];
    uint64_t frames_in = 0;
    vkasr_status s = VKASR_OK;
    while (!interrupted && s == VKASR_OK) {
        size_t n = 0;
        int r = live_input_read(in, mono, sizeof mono / sizeof mono[0], &n);
        if (n) {
            s = vkasr_stream_push(st, mono, n, in->rate);
            frames_in += n;
            live_note_push(o, (double)frames_in / in->rate);
        }
        if (r < 0)
            *rc = EXIT_AUDIO;
        if (r <= 0)
            break;
    }
    return s;
}

/* The model and a session; an exit code after a message when either fails. */
static int open_session(const struct cli_common *c, const struct live_opts *o, vkasr_model **m, vkasr_session **s) {
    vkasr_model_params mp = cli_model_params(c);
    int rc = pool_open_single(c->model, &mp, m, s);
    if (rc == EXIT_OK)
        rc = cli_check_language(*m, c->language);
    if (rc != EXIT_OK)
        return rc;
    if (c->verbose && !c->no_prints) {
        vkasr_model_info info;
        vkasr_model_get_info(*m, &info);
        fprintf(stderr, "vkasr: device %s, precision %s, %.1fM parameters\n", info.device_name,
                info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", info.n_params / 1e6);
        if (!o->simulate)
            fprintf(stderr, "vkasr: input %d Hz, %d channel%s, %s\n", o->in.rate, o->in.channels,
                    o->in.channels > 1 ? "s" : "", live_input_format_name(o->in.fmt));
    }
    return EXIT_OK;
}

/* The stream over the session: fed until the input ends or Ctrl-C, then finished. Returns the exit code. */
static int run_stream(const struct cli_common *c, struct live_opts *o, vkasr_session *s, const float *sim,
                      size_t nsim) {
    struct live_out out;
    bool ok = live_out_init(&out, o->timestamps, c->json);
    o->sp.language = c->language;
    o->sp.final_callback = live_on_final;
    o->sp.partial_callback = live_on_partial;
    o->sp.user_data = &out;
    vkasr_error err;
    vkasr_stream *stream = NULL;
    vkasr_status st = ok ? vkasr_stream_create(s, &o->sp, &stream, &err) : VKASR_ERR_NO_MEMORY;
    int rc = EXIT_OK;
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", ok ? err.message : "out of memory");
        live_out_free(&out);
        return st == VKASR_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    }
    st = o->simulate ? feed_samples(stream, sim, nsim, o->speed, &out) : feed_input(stream, &o->in, &out, &rc);
    vkasr_status fin = vkasr_stream_finish(stream);
    if (st == VKASR_OK)
        st = fin;
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: live transcription failed: %s\n",
                *vkasr_stream_last_error(stream) ? vkasr_stream_last_error(stream) : vkasr_status_string(st));
        if (rc == EXIT_OK)
            rc = exit_code_for(st, 0);
    }
    if (out.tty && !out.json && out.partial && *out.partial) /* nothing is left open after finish; clear anyway */
        fputs("\r\033[K", stdout);
    if (c->verbose && !c->no_prints)
        live_report(&out, stream, o->simulate && o->speed != 1 ? " (at this --speed)" : "");
    vkasr_stream_free(stream);
    if (out.write_failed && rc == EXIT_OK)
        rc = stdout_check();
    live_out_free(&out);
    return rc;
}

int cmd_live(int argc, char **argv) {
    char default_path[4096];
    struct cli_common c;
    struct live_opts o;
    int rc = live_args(argc, argv, &c, &o, default_path, sizeof default_path);
    if (rc != EXIT_OK)
        return rc == ARGS_HELP ? EXIT_OK : rc;
    catch_interrupts();
    /* --simulate: the file is decoded (by the library) before the model is loaded, so a bad file fails at
     * once. Standard input: its WAV header, if any, is read first. */
    float *sim = NULL;
    size_t nsim = 0;
    if (o.simulate) {
        vkasr_error aerr;
        vkasr_status as = vkasr_audio_load(o.simulate, &sim, &nsim, &aerr);
        if (as != VKASR_OK) {
            fprintf(stderr, "vkasr: %s\n", aerr.message);
            return exit_code_for(as, 0);
        }
    } else if ((rc = live_input_start(&o.in)) != EXIT_OK) {
        return rc;
    }
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    rc = open_session(&c, &o, &m, &s);
    if (rc == EXIT_OK)
        rc = run_stream(&c, &o, s, sim, nsim);
    vkasr_free(sim);
    vkasr_session_free(s);
    vkasr_model_free(m);
    if (interrupted)
        return 128 + interrupted;
    return rc;
}
