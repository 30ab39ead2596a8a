/* vkasr.c — the command-line tool: `vkasr transcribe`, `vkasr devices`, `vkasr convert`.
 * Uses nothing but the public API (include/vkasr.h). Transcripts go to stdout; logs and the progress
 * bar to stderr. Exit codes: 0 ok, 1 transcription failure, 2 usage, 3 model, 4 audio/IO, 5 no device. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vkasr.h"

#ifndef VKASR_DEFAULT_MODELS
#define VKASR_DEFAULT_MODELS ""
#endif

/* The first path of VKASR_DEFAULT_MODELS (':'-separated) that exists, copied into buf; "" if none. */
static const char *default_model(char *buf, size_t size) {
    const char *p = VKASR_DEFAULT_MODELS;
    buf[0] = '\0';
    while (*p) {
        size_t n = strcspn(p, ":");
        if (n > 0 && n < size) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            if (access(buf, R_OK) == 0)
                return buf;
        }
        p += n + (p[n] == ':');
    }
    buf[0] = '\0';
    return buf;
}

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_MODEL = 3, EXIT_AUDIO = 4, EXIT_DEVICE = 5 };

static int exit_code_for(vkasr_status st, int model_stage) {
    switch (st) {
    case VKASR_OK: return EXIT_OK;
    case VKASR_ERR_NO_DEVICE: return EXIT_DEVICE;
    case VKASR_ERR_AUDIO: return EXIT_AUDIO;
    case VKASR_ERR_IO: return model_stage ? EXIT_MODEL : EXIT_AUDIO;
    case VKASR_ERR_MODEL: return EXIT_MODEL;
    default: return model_stage ? EXIT_MODEL : EXIT_FAIL;
    }
}

/* Flushes stdout and reports a failed write once (a full disk, a closed pipe): a transcript that did not
 * reach its destination must not exit 0. Returns EXIT_AUDIO (I/O error) on failure. */
static int stdout_check(void) {
    static bool reported;
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return EXIT_OK;
    if (!reported)
        fprintf(stderr, "vkasr: cannot write to standard output: %s\n", errno ? strerror(errno) : "write error");
    reported = true;
    return EXIT_AUDIO;
}

/* ---- help ----------------------------------------------------------------------------------------- */

static void usage_main(FILE *f) {
    fprintf(f,
            "usage: vkasr <command> [options]\n"
            "\n"
            "Speech recognition with NVIDIA Parakeet models (TDT, RNN-T, CTC) on any Vulkan GPU.\n"
            "\n"
            "commands:\n"
            "  transcribe   transcribe audio files (vkasr transcribe --help)\n"
            "  devices      list Vulkan devices and the features vkasr uses\n"
            "  convert      convert a Hugging Face model directory to vkasr's GGUF file\n"
            "\n"
            "  --version    print the version\n"
            "  --help       print this help\n"
            "\n"
            "exit codes: 0 success, 1 transcription failed, 2 usage error, 3 model error,\n"
            "            4 audio or I/O error, 5 no usable Vulkan device\n");
}

static void usage_transcribe(FILE *f) {
    fprintf(f,
            "usage: vkasr transcribe [-m MODEL] [options] AUDIO...\n"
            "\n"
            "Transcribes each AUDIO file (any format libsndfile reads: WAV, FLAC, OGG, MP3, ...; any sample\n"
            "rate and channel count; \"-\" reads from standard input) and prints the transcript on stdout.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH        Hugging Face Parakeet directory or vkasr .gguf file\n"
            "                          (default: $VKASR_MODEL, else the first that exists of\n"
            "                          %s)\n"
            "  -f, --file PATH         an input file (same as a positional AUDIO)\n"
            "      --format FMT        what goes to stdout: txt (default), json, srt, vtt\n"
            "  -otxt, --output-txt     also write <input>.txt (or BASE.txt with -of)\n"
            "  -ojson, -oj, --output-json   write <input>.json\n"
            "  -osrt, --output-srt     write <input>.srt\n"
            "  -ovtt, --output-vtt     write <input>.vtt\n"
            "  -of, --output-file BASE base name of the output files (one input only)\n"
            "      --dump DIR          write DIR/mel.npy (normalized features) and DIR/encoder.npy (encoder\n"
            "                          output), float32 [frames, dim]; DIR/<n>/ per input when several\n"
            "  -d, --device N|NAME     Vulkan device index or name substring (also $VKASR_DEVICE);\n"
            "                          \"cpu\" runs the slow plain-C reference backend\n"
            "  -p, --precision P       f16 (default where supported) or f32\n"
            "      --max-symbols N     transducers: most symbols emitted at one frame (default: model's)\n"
            "      --profile           print per-op GPU time on stderr after each file (also\n"
            "                          $VKASR_PROFILE=1)\n"
            "  -np, --no-prints        print nothing on stderr but errors\n"
            "  -pp, --print-progress   show progress even when stderr is not a terminal\n"
            "  -v, --verbose           more log messages\n"
            "  -h, --help              this help\n"
            "\n"
            "--format json prints one JSON object per input on one line: text, duration, partial, tokens\n"
            "(id, piece, text, frame, start, end), words and segments (text, start, end). Times are in\n"
            "seconds.\n"
            "\n"
            "Ctrl-C (SIGINT) or SIGTERM stops the transcription: what was decoded so far is printed and\n"
            "written as usual, marked partial (\"partial\": true in JSON, a line on stderr), the remaining\n"
            "inputs are skipped and vkasr exits 130 (143 for SIGTERM). Decoding starts after the encoder has\n"
            "run over a whole file, so a stop during the encoder keeps no words of that file. A second\n"
            "Ctrl-C ends vkasr at once.\n"
            "\n"
            "exit codes: 0 success, 1 transcription failed, 2 usage error, 3 model error,\n"
            "            4 audio or I/O error, 5 no usable Vulkan device, 130 interrupted. With several\n"
            "            inputs, vkasr keeps going past a bad one and exits non-zero at the end.\n",
            VKASR_DEFAULT_MODELS[0] ? VKASR_DEFAULT_MODELS : "(none built in)");
}

static void usage_convert(FILE *f) {
    fprintf(f, "usage: vkasr convert MODEL -o OUT.gguf [--type f32|f16]\n"
               "\n"
               "Converts a Hugging Face Parakeet directory (or a vkasr GGUF) into vkasr's single-file GGUF:\n"
               "batch norm folded, layouts ready for the kernels, hyper-parameters and vocabulary included.\n"
               "--type f16 (default) stores the encoder's matrix weights in f16 (about half the size);\n"
               "norms, biases and the decoder stay f32. Needs no GPU.\n");
}

static void usage_devices(FILE *f) {
    fprintf(f, "usage: vkasr devices\n\nLists the Vulkan devices, their memory and the features vkasr uses.\n");
}

/* ---- output formats ------------------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 if it is not one (stray continuation byte,
 * overlong form, surrogate, beyond U+10FFFF, truncated). */
static size_t utf8_valid(const unsigned char *p) {
    size_t n;
    uint32_t cp;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1fu;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0fu;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string. File names are arbitrary bytes: each byte that does not start a well-formed UTF-8
 * sequence becomes U+FFFD, so the output is always valid UTF-8 JSON (RFC 8259). */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_valid(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
        p++;
    }
    fputc('"', f);
}

static void write_json(FILE *f, const char *input, const vkasr_result *r) {
    size_t nt, nw, ns;
    const vkasr_token *t = vkasr_result_tokens(r, &nt);
    const vkasr_word *w = vkasr_result_words(r, &nw);
    const vkasr_segment *s = vkasr_result_segments(r, &ns);
    fputs("{\"file\":", f);
    json_str(f, input);
    fputs(",\"text\":", f);
    json_str(f, vkasr_result_text(r));
    fprintf(f, ",\"duration\":%.6f,\"partial\":%s,\"tokens\":[", vkasr_result_duration(r),
            vkasr_result_partial(r) ? "true" : "false");
    for (size_t i = 0; i < nt; i++) {
        fprintf(f, "%s{\"id\":%d,\"piece\":", i ? "," : "", (int)t[i].id);
        json_str(f, t[i].piece);
        fputs(",\"text\":", f);
        json_str(f, t[i].text);
        fprintf(f, ",\"frame\":%lld,\"duration\":%d,\"start\":%.3f,\"end\":%.3f}", (long long)t[i].frame,
                (int)t[i].duration, t[i].start, t[i].end);
    }
    fputs("],\"words\":[", f);
    for (size_t i = 0; i < nw; i++) {
        fputs(i ? ",{\"text\":" : "{\"text\":", f);
        json_str(f, w[i].text);
        fprintf(f, ",\"start\":%.3f,\"end\":%.3f}", w[i].start, w[i].end);
    }
    fputs("],\"segments\":[", f);
    for (size_t i = 0; i < ns; i++) {
        fputs(i ? ",{\"text\":" : "{\"text\":", f);
        json_str(f, s[i].text);
        fprintf(f, ",\"start\":%.3f,\"end\":%.3f}", s[i].start, s[i].end);
    }
    fputs("]}\n", f);
}

static void timestamp(FILE *f, double sec, char frac_sep) {
    long long ms = (long long)(sec * 1000.0 + 0.5);
    fprintf(f, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, frac_sep, ms % 1000);
}

static void write_subtitles(FILE *f, const vkasr_result *r, bool vtt) {
    size_t ns;
    const vkasr_segment *s = vkasr_result_segments(r, &ns);
    if (vtt)
        fputs("WEBVTT\n\n", f);
    for (size_t i = 0; i < ns; i++) {
        if (!vtt)
            fprintf(f, "%zu\n", i + 1);
        timestamp(f, s[i].start, vtt ? '.' : ',');
        fputs(" --> ", f);
        timestamp(f, s[i].end, vtt ? '.' : ',');
        fprintf(f, "\n%s\n\n", s[i].text);
    }
}

enum fmt { FMT_TXT, FMT_JSON, FMT_SRT, FMT_VTT, FMT_COUNT };
static const char *const fmt_ext[FMT_COUNT] = {"txt", "json", "srt", "vtt"};

static void write_format(FILE *f, enum fmt fm, const char *input, const vkasr_result *r) {
    switch (fm) {
    case FMT_TXT: fprintf(f, "%s\n", vkasr_result_text(r)); break;
    case FMT_JSON: write_json(f, input, r); break;
    case FMT_SRT: write_subtitles(f, r, false); break;
    case FMT_VTT: write_subtitles(f, r, true); break;
    default: break;
    }
}

/* NumPy .npy v1.0: float32, C order. */
static int write_npy(const char *path, const float *data, size_t rows, size_t cols) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    unsigned short hlen = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    size_t n_el = rows * cols;
    bool ok = n_el == 0 || fwrite(data, sizeof(float), n_el, f) == n_el;
    ok = !ferror(f) && ok;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---- progress bar --------------------------------------------------------------------------------- */

struct progress_ctx {
    bool enabled;
    double t0;
    int last_pct;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_progress(const vkasr_progress *p, void *ud) {
    struct progress_ctx *c = ud;
    int pct = (int)(p->fraction * 100.0f + 0.5f);
    if (!c->enabled || pct == c->last_pct)
        return;
    c->last_pct = pct;
    double el = now_s() - c->t0;
    double rtf = p->audio_seconds_done > 0 ? el / p->audio_seconds_done : 0.0;
    int fill = pct / 4;
    fprintf(stderr, "\r[%.*s%*s] %3d%%  %.1f/%.1f s  RTF %.3f  %-8s", fill, "=========================", 25 - fill, "",
            pct, p->audio_seconds_done, p->audio_seconds_total, rtf, p->stage);
    fflush(stderr);
}

/* ---- interruption --------------------------------------------------------------------------------- */

/* The first SIGINT or SIGTERM asks the library to stop (its abort callback) so that what was transcribed
 * so far is still printed and written; a second one ends the process at once. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    if (interrupted) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    interrupted = sig;
}

static bool should_abort(void *ud) { return interrupted != 0; }

static void catch_interrupts(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- commands ------------------------------------------------------------------------------------- */

static int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

static const char *arg_value(int argc, char **argv, int *i, const char *opt) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "vkasr: %s needs a value\n", opt);
        return NULL;
    }
    return argv[++*i];
}

static void log_to_stderr(vkasr_log_level level, const char *msg, void *ud) {
    static const char *const names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "vkasr: %s: %s\n", level < 4 ? names[level] : "log", msg);
}

static int cmd_transcribe(int argc, char **argv) {
    const char *model = getenv("VKASR_MODEL");
    char default_path[4096];
    const char *device = NULL, *of = NULL, *dump = NULL;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    if (!inputs)
        return EXIT_FAIL;
    int ninputs = 0, max_symbols = 0;
    enum fmt stdout_fmt = FMT_TXT;
    bool write[FMT_COUNT] = {false}, no_prints = false, force_progress = false, verbose = false, profile = false;
    vkasr_precision precision = VKASR_PRECISION_AUTO;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_transcribe(stdout);
            free(inputs);
            return EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            rc = (model = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if ((v = arg_value(argc, argv, &i, a)))
                inputs[ninputs++] = v;
            else
                rc = EXIT_USAGE;
        } else if (!strcmp(a, "--format")) {
            if (!(v = arg_value(argc, argv, &i, a))) {
                rc = EXIT_USAGE;
            } else {
                int k = 0;
                while (k < FMT_COUNT && strcmp(v, fmt_ext[k]))
                    k++;
                if (k == FMT_COUNT) {
                    fprintf(stderr, "vkasr: unknown --format '%s' (txt, json, srt, vtt)\n", v);
                    rc = EXIT_USAGE;
                }
                stdout_fmt = (enum fmt)k;
            }
        } else if (!strcmp(a, "-otxt") || !strcmp(a, "--output-txt")) {
            write[FMT_TXT] = true;
        } else if (!strcmp(a, "-ojson") || !strcmp(a, "-oj") || !strcmp(a, "--output-json")) {
            write[FMT_JSON] = true;
        } else if (!strcmp(a, "-osrt") || !strcmp(a, "--output-srt")) {
            write[FMT_SRT] = true;
        } else if (!strcmp(a, "-ovtt") || !strcmp(a, "--output-vtt")) {
            write[FMT_VTT] = true;
        } else if (!strcmp(a, "-of") || !strcmp(a, "--output-file")) {
            rc = (of = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "--dump")) {
            rc = (dump = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--device")) {
            rc = (device = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--precision")) {
            if (!(v = arg_value(argc, argv, &i, a)))
                rc = EXIT_USAGE;
            else if (!strcmp(v, "f32"))
                precision = VKASR_PRECISION_F32;
            else if (!strcmp(v, "f16"))
                precision = VKASR_PRECISION_F16;
            else {
                fprintf(stderr, "vkasr: unknown --precision '%s' (f32, f16)\n", v);
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--max-symbols")) {
            char *end = NULL;
            if (!(v = arg_value(argc, argv, &i, a)) || (max_symbols = (int)strtol(v, &end, 10)) < 1 || *end) {
                fprintf(stderr, "vkasr: --max-symbols needs a positive integer\n");
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--profile")) {
            profile = true;
        } else if (!strcmp(a, "-np") || !strcmp(a, "--no-prints")) {
            no_prints = true;
        } else if (!strcmp(a, "-pp") || !strcmp(a, "--print-progress")) {
            force_progress = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vkasr: unknown option '%s' (see vkasr transcribe --help)\n", a);
            rc = EXIT_USAGE;
        } else {
            inputs[ninputs++] = a;
        }
    }
    if (rc == EXIT_OK && ninputs == 0) {
        fprintf(stderr, "vkasr: no audio input given (see vkasr transcribe --help)\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && (!model || !*model)) {
        model = default_model(default_path, sizeof default_path);
        if (!*model) {
            fprintf(stderr, "vkasr: no model given and the default model is not installed (looked for %s): "
                            "use -m MODEL or set VKASR_MODEL\n",
                    VKASR_DEFAULT_MODELS[0] ? VKASR_DEFAULT_MODELS : "nothing");
            rc = EXIT_USAGE;
        }
    }
    if (rc == EXIT_OK && of && ninputs > 1) {
        fprintf(stderr, "vkasr: -of names the outputs of one input; %d inputs given\n", ninputs);
        rc = EXIT_USAGE;
    }
    if (rc != EXIT_OK) {
        free(inputs);
        return rc;
    }
    /* $VKASR_PROFILE=1 turns timestamps on in the library; print the report then too (same rule as the
     * library: set, non-empty and not "0"). */
    const char *env_profile = getenv("VKASR_PROFILE");
    if (env_profile && *env_profile && strcmp(env_profile, "0") != 0)
        profile = true;

    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = device;
    mp.precision = precision;
    mp.profile = profile;
    mp.log_level = no_prints ? VKASR_LOG_ERROR : verbose ? VKASR_LOG_INFO : VKASR_LOG_WARN;
    mp.log_callback = log_to_stderr;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_status st = vkasr_model_load(model, &mp, &m, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        free(inputs);
        return exit_code_for(st, 1);
    }
    vkasr_session *s = NULL;
    st = vkasr_session_create(m, &s, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        vkasr_model_free(m);
        free(inputs);
        return exit_code_for(st, 1);
    }
    if (verbose) {
        vkasr_model_info info;
        vkasr_model_get_info(m, &info);
        fprintf(stderr, "vkasr: device %s, precision %s, %.1fM parameters\n", info.device_name,
                info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", info.n_params / 1e6);
    }
    struct progress_ctx pc = {.enabled = !no_prints && (force_progress || isatty(2)), .last_pct = -1};
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.progress_callback = on_progress;
    tp.progress_user_data = &pc;
    tp.max_symbols_per_step = max_symbols;
    tp.keep_features = dump != NULL;
    tp.abort_callback = should_abort;
    catch_interrupts();
    int final_rc = EXIT_OK, i = 0;
    for (; i < ninputs && !interrupted; i++) {
        const char *in = inputs[i];
        pc.t0 = now_s();
        pc.last_pct = -1;
        const vkasr_result *r = NULL;
        st = vkasr_transcribe_file(s, in, &tp, &r);
        if (pc.enabled)
            fprintf(stderr, "\r%*s\r", 79, "");
        if (st == VKASR_ABORTED) {
            size_t nt = 0;
            const vkasr_token *tk = vkasr_result_tokens(r, &nt);
            fprintf(stderr, "vkasr: interrupted: %s: partial transcript, %zu tokens up to %.1f s of %.1f s%s\n",
                    strcmp(in, "-") ? in : "standard input", nt, nt ? tk[nt - 1].end : 0.0, vkasr_result_duration(r),
                    i + 1 < ninputs ? "; the remaining inputs are skipped" : "");
        } else if (st != VKASR_OK) {
            /* The library's audio messages already start with "<file>: " ("standard input" for "-");
             * name the file here only when the message does not. */
            const char *msg = vkasr_session_last_error(s), *name = strcmp(in, "-") ? in : "standard input";
            size_t nl = strlen(name);
            if (strncmp(msg, name, nl) == 0 && msg[nl] == ':')
                fprintf(stderr, "vkasr: %s\n", msg);
            else
                fprintf(stderr, "vkasr: %s: %s\n", name, msg);
            int code = exit_code_for(st, 0);
            if (final_rc == EXIT_OK || code == EXIT_AUDIO)
                final_rc = code;
            continue;
        }
        write_format(stdout, stdout_fmt, in, r);
        if (stdout_check() != EXIT_OK) {
            final_rc = EXIT_AUDIO;
            break; /* the transcripts cannot be delivered: do not transcribe the remaining inputs */
        }
        const char *base = of ? of : (!strcmp(in, "-") ? "stdin" : in);
        for (int k = 0; k < FMT_COUNT; k++) {
            if (!write[k])
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s.%s", base, fmt_ext[k]);
            FILE *f = fopen(path, "w");
            if (!f || (write_format(f, (enum fmt)k, in, r), fclose(f)) != 0) {
                fprintf(stderr, "vkasr: cannot write %s: %s\n", path, strerror(errno));
                final_rc = EXIT_AUDIO;
            } else if (!no_prints) {
                fprintf(stderr, "vkasr: wrote %s\n", path);
            }
        }
        if (dump) {
            char dir[4096], path[4200];
            if (ninputs > 1)
                snprintf(dir, sizeof dir, "%s/%d", dump, i);
            else
                snprintf(dir, sizeof dir, "%s", dump);
            size_t fr, dim;
            const char *failed = NULL; /* the directory or file that could not be written */
            if (mkdir_p(dir) != 0)
                failed = dir;
            if (!failed) {
                const float *mel = vkasr_result_mel(r, &fr, &dim);
                snprintf(path, sizeof path, "%s/mel.npy", dir);
                if (write_npy(path, mel, fr, dim) != 0)
                    failed = path;
            }
            if (!failed) {
                const float *enc = vkasr_result_encoder(r, &fr, &dim);
                snprintf(path, sizeof path, "%s/encoder.npy", dir);
                if (write_npy(path, enc, fr, dim) != 0)
                    failed = path;
            }
            if (failed) {
                fprintf(stderr, "vkasr: cannot write %s: %s\n", failed, strerror(errno));
                final_rc = EXIT_AUDIO;
            }
        }
        vkasr_timings tm = vkasr_result_timings(r);
        if (!no_prints && (verbose || profile))
            fprintf(stderr,
                    "vkasr: %s: %.2f s audio in %.1f ms (RTF %.4f): load %.1f, features %.1f, encoder %.1f, decoder "
                    "%.1f ms; peak device memory %.1f MiB\n",
                    in, tm.audio_seconds, tm.total_ms, tm.audio_seconds > 0 ? tm.total_ms / 1e3 / tm.audio_seconds : 0,
                    tm.load_ms, tm.features_ms, tm.encoder_ms, tm.decoder_ms, tm.peak_device_bytes / 1048576.0);
        if (profile) {
            vkasr_op_profile ops[64];
            size_t n = 0;
            vkasr_session_profile(s, ops, 64, &n);
            double sum = 0;
            unsigned long long calls = 0;
            for (size_t k = 0; k < n && k < 64; k++) {
                fprintf(stderr, "vkasr: profile %-20s %8llu calls %10.3f ms\n", ops[k].name,
                        (unsigned long long)ops[k].calls, ops[k].gpu_ms);
                sum += ops[k].gpu_ms;
                calls += ops[k].calls;
            }
            fprintf(stderr, "vkasr: profile %-20s %8llu calls %10.3f ms\n", "(all ops)", calls, sum);
            vkasr_session_profile_reset(s);
        }
    }
    if (interrupted && st != VKASR_ABORTED && i < ninputs)
        fprintf(stderr, "vkasr: interrupted between inputs: the remaining %d are skipped\n", ninputs - i);
    vkasr_session_free(s);
    vkasr_model_free(m);
    free(inputs);
    if (interrupted)
        return 128 + interrupted; /* the shell's status for a death by that signal: 130 for SIGINT */
    return final_rc;
}

static int cmd_devices(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage_devices(stdout);
            return EXIT_OK;
        }
        fprintf(stderr, "vkasr: devices takes no arguments ('%s')\n", argv[i]);
        return EXIT_USAGE;
    }
    vkasr_device_info info[16];
    size_t n = 0;
    vkasr_error err;
    vkasr_status st = vkasr_list_devices(info, 16, &n, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        return EXIT_DEVICE;
    }
    bool any = false;
    for (size_t i = 0; i < n && i < 16; i++) {
        const vkasr_device_info *d = &info[i];
        any |= d->usable;
        printf("device %d: %s\n", d->index, d->name);
        printf("  type        %s\n", d->type);
        printf("  driver      %s\n", d->driver);
        printf("  vulkan      %u.%u.%u\n", d->api_version >> 22, (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff);
        for (uint32_t h = 0; h < d->heap_count; h++)
            printf("  heap %u      %.1f GiB%s\n", h, d->heap_size[h] / 1073741824.0, d->heap_device_local[h] ? " (device local)" : "");
        printf("  limits      subgroup %u, workgroups %u x %u x %u, shared memory %u KiB, storage buffer range %.0f MiB, "
               "allocation %.0f MiB\n",
               d->subgroup_size, d->max_workgroup_count[0], d->max_workgroup_count[1], d->max_workgroup_count[2],
               d->max_shared_memory / 1024, d->max_storage_buffer_range / 1048576.0, d->max_allocation_size / 1048576.0);
        printf("  features    shaderInt64 %s, bufferDeviceAddress %s, float16 %s, NV cooperative matrix %s, "
               "KHR cooperative matrix %s, timestamps %s\n",
               d->shader_int64 ? "yes" : "no", d->buffer_device_address ? "yes" : "no", d->shader_float16 ? "yes" : "no",
               d->cooperative_matrix_nv ? "yes" : "no", d->cooperative_matrix_khr ? "yes" : "no",
               d->timestamps ? "yes" : "no");
        if (d->usable)
            printf("  usable      yes%s\n", d->cooperative_matrix_nv ? " (tensor cores)" : "");
        else
            printf("  usable      no: lacks %s\n", d->missing);
    }
    if (!any) {
        fprintf(stderr, "vkasr: no Vulkan device meets vkasr's requirements\n");
        return EXIT_DEVICE;
    }
    return EXIT_OK;
}

static int cmd_convert(int argc, char **argv) {
    const char *src = NULL, *dst = NULL;
    vkasr_weight_type type = VKASR_WEIGHTS_F16;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_convert(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(dst = arg_value(argc, argv, &i, a)))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--type")) {
            if (!(v = arg_value(argc, argv, &i, a)))
                return EXIT_USAGE;
            if (!strcmp(v, "f32"))
                type = VKASR_WEIGHTS_F32;
            else if (!strcmp(v, "f16"))
                type = VKASR_WEIGHTS_F16;
            else {
                fprintf(stderr, "vkasr: unknown --type '%s' (f32, f16)\n", v);
                return EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vkasr: unknown option '%s' (see vkasr convert --help)\n", a);
            return EXIT_USAGE;
        } else if (!src) {
            src = a;
        } else {
            fprintf(stderr, "vkasr: convert takes one model ('%s' is extra)\n", a);
            return EXIT_USAGE;
        }
    }
    if (!src || !dst) {
        fprintf(stderr, "vkasr: convert needs MODEL and -o OUT.gguf (see vkasr convert --help)\n");
        return EXIT_USAGE;
    }
    vkasr_error err;
    vkasr_status st = vkasr_convert(src, dst, type, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        /* vkasr_convert reports source problems as model errors (exit 3) and keeps VKASR_ERR_IO for the
         * destination (exit 4). */
        return st == VKASR_ERR_IO ? EXIT_AUDIO : exit_code_for(st, 1);
    }
    fprintf(stderr, "vkasr: wrote %s\n", dst);
    return EXIT_OK;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage_main(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vkasr %s\n", vkasr_version_string());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "transcribe"))
        return cmd_transcribe(argc - 2, argv + 2);
    if (!strcmp(cmd, "devices"))
        return cmd_devices(argc - 2, argv + 2);
    if (!strcmp(cmd, "convert"))
        return cmd_convert(argc - 2, argv + 2);
    fprintf(stderr, "vkasr: unknown command '%s'\n\n", cmd);
    usage_main(stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    /* Every command's output (help, device list, transcripts) must have reached stdout; fclose also
     * catches errors a file system reports only on close. EBADF there means stdout was closed by the
     * caller and nothing was written (a write would have failed the flush): not an error. */
    if (stdout_check() != EXIT_OK)
        return EXIT_AUDIO;
    if (fclose(stdout) != 0 && errno != EBADF) {
        fprintf(stderr, "vkasr: cannot write to standard output: %s\n", strerror(errno));
        return EXIT_AUDIO;
    }
    return rc;
}
