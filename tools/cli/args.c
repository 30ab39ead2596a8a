/* args.c — the options several commands share, and the parser and help printer that every command's
 * table goes through (args.h). */
#define _POSIX_C_SOURCE 200809L
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define ALL_MODEL \
    (CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE) | CMD_BIT(CMD_BENCH) | CMD_BIT(CMD_COMPARE) | CMD_BIT(CMD_SERVE))
#define COMMON(member) ARG_FIELD(struct cli_common, member)

static void describe_model(char *buf, size_t size) {
    snprintf(buf, size, "Hugging Face Parakeet directory, vkasr .gguf or NeMo .nemo file,\n"
                        "or a name that vkasr pull fetched (alias, org/repo[:FILE|:QUANT])\n"
                        "(default: $VKASR_MODEL, else the first that exists of\n%s)",
             VKASR_DEFAULT_MODELS[0] ? VKASR_DEFAULT_MODELS : "(none built in)");
}

#define SUBTITLE_CMDS (CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_SERVE))

/* --max-line-chars, --max-lines: an integer (checked with the others by cli_check_subtitles). */
static int arg_sub_int(const char *opt, const char *value, void *field) {
    long v;
    if (cli_parse_long(value, 0, 1000000, &v)) {
        *(int *)field = (int)v;
        return EXIT_OK;
    }
    fprintf(stderr, "vkasr: %s '%s': expected a whole number\n", opt, value);
    return EXIT_USAGE;
}

/* --max-cue-seconds, --min-cue-seconds, --cue-pause: seconds. */
static int arg_sub_seconds(const char *opt, const char *value, void *field) {
    char *end = NULL;
    double v = strtod(value, &end);
    if (end != value && !*end && isfinite(v) && v >= 0 && v <= 1e6) {
        *(double *)field = v;
        return EXIT_OK;
    }
    fprintf(stderr, "vkasr: %s '%s': expected a number of seconds\n", opt, value);
    return EXIT_USAGE;
}

int cli_check_subtitles(const vkasr_subtitle_params *p) {
    vkasr_cue *c = NULL;
    size_t n = 0;
    vkasr_error err;
    if (vkasr_subtitle_cues(NULL, 0, p, &c, &n, &err) == VKASR_OK)
        return EXIT_OK;
    /* the message names vkasr_subtitle_params' field: say which option set it */
    static const char *const names[][2] = {{"max_line_chars", "--max-line-chars"}, {"max_lines", "--max-lines"},
                                           {"max_duration", "--max-cue-seconds"}, {"min_duration", "--min-cue-seconds"},
                                           {"pause", "--cue-pause"}};
    const char *opt = "the subtitle options";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "subtitles: %s ", names[i][0]);
        if (!strncmp(err.message, head, strlen(head)))
            opt = names[i][1];
    }
    fprintf(stderr, "vkasr: %s: %s\n", opt, err.message);
    return EXIT_USAGE;
}

/* The shared options, in help order; -m is listed first, the others where a command's table says. */
static const struct cli_opt shared_opts[] = {
    {.names = "-m, --model", .meta = "PATH", .kind = ARG_STRING, .field = COMMON(model), .cmds = ALL_MODEL,
     .describe = describe_model},
    {.names = "--pull", .kind = ARG_ACTION, .parse = arg_pull,
     .cmds = CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE) | CMD_BIT(CMD_BENCH) | CMD_BIT(CMD_SERVE),
     .help = "a -m NAME not yet in the Hugging Face cache is downloaded first\n"
             "(as vkasr pull NAME); without it a name loads from the cache only"},
    {.names = "-d, --device", .meta = "DEV", .kind = ARG_STRING, .field = COMMON(device),
     .cmds = CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE) | CMD_BIT(CMD_BENCH) | CMD_BIT(CMD_SERVE),
     .help = "the device (also $VKASR_DEVICE): cpu (the CPU backend), ref (the\n"
             "slow plain-C reference backend, the test oracle), cuda[:N] (the\n"
             "CUDA backend, in builds with it), vulkan[:N|NAME], N (Vulkan device\n"
             "index) or NAME (a Vulkan device name substring); default: the best\n"
             "Vulkan GPU, else (none, or only a CPU driver such as lavapipe) cpu"},
    {.names = "--threads", .meta = "N", .kind = ARG_VALUE, .field = COMMON(threads), .parse = arg_threads,
     .cmds = CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE) | CMD_BIT(CMD_BENCH) | CMD_BIT(CMD_SERVE) |
             CMD_BIT(CMD_COMPARE),
     .help = "threads of the CPU backend (sets $VKASR_THREADS); default: every\n"
             "online CPU"},
    {.names = "-p, --precision", .meta = "P", .kind = ARG_VALUE, .field = COMMON(precision), .parse = arg_precision,
     .cmds = ALL_MODEL, .help = "f16 (default where supported) or f32",
     .help_for = {[CMD_COMPARE] = "f32 (default) or f16, the same on every device"}},
    {.names = "--decoder", .meta = "D", .kind = ARG_VALUE, .field = COMMON(decoder), .parse = arg_decoder,
     .cmds = ALL_MODEL | CMD_BIT(CMD_CONVERT),
     .help = "the head to load: auto (default: the model's only head, or a hybrid\n"
             "TDT/RNN-T + CTC .nemo's transducer), tdt, rnnt or ctc (a hybrid's\n"
             "CTC head); a head the model lacks is refused (exit 3)",
     .help_for = {[CMD_CONVERT] = "the head to write: a GGUF file holds one, so a hybrid .nemo\n"
                                  "converts its transducer (auto) or, with ctc, its CTC head"}},
    {.names = "--lookahead", .meta = "MS", .kind = ARG_VALUE, .field = COMMON(lookahead_ms), .parse = arg_lookahead,
     .cmds = CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE) | CMD_BIT(CMD_SERVE) | CMD_BIT(CMD_BENCH),
     .help = "cache-aware streaming models (NVIDIA's chunked_limited ones): the\n"
             "trained attention context to run, by its lookahead (right + 1) x 80\n"
             "ms, e.g. 80, 160, 560 or 1120; default: the model's first. A value\n"
             "the model was not trained with is refused (exit 2)"},
    {.names = "--language", .meta = "L", .kind = ARG_STRING, .field = COMMON(language),
     .cmds = CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE),
     .help = "language-prompt models (Nemotron 3.5): auto (default: the model\n"
             "detects it, writes <xx-XX> tags that are kept out of the text and\n"
             "reported as the language) or one of the model's languages (en-US,\n"
             "de-DE, de, ...). A language the model lacks is refused with its list\n"
             "(exit 2); other models take only auto"},
    {.names = "--json", .kind = ARG_FLAG, .field = COMMON(json),
     .cmds = CMD_BIT(CMD_LIVE) | CMD_BIT(CMD_BENCH) | CMD_BIT(CMD_COMPARE),
     .help_for = {[CMD_LIVE] = "one JSON object per line for each final segment instead: text, start,\n"
                               "end and words (text, start, end; seconds from the stream's start),\n"
                               "with end_of_utterance / backchannel true where an end-of-utterance\n"
                               "model ended the segment so, and language where a language-prompt\n"
                               "model wrote a tag; no partial line",
                  [CMD_BENCH] = "print one JSON object instead of the table",
                  [CMD_COMPARE] = "print the comparison as one JSON object"}},
    {.names = "-v, --verbose", .kind = ARG_FLAG, .field = COMMON(verbose), .cmds = ALL_MODEL,
     .help = "more log messages",
     .help_for = {[CMD_TRANSCRIBE] = "more log messages: the start-up split (start-up: lines), the\n"
                                     "attention chosen, the memory plan and the subsampling tiles, and\n"
                                     "per file its timings, planned and peak device memory and the\n"
                                     "process's peak host memory; with --batch, each packed batch's\n"
                                     "features, encoder and decoder times",
                  [CMD_LIVE] = "model, device and, at the end, the stream's figures on stderr: windows,\n"
                               "compute per audio second, finalisation latency (median, 95th percentile)",
                  [CMD_COMPARE] = "device timings and notes on stderr"}},
    {.names = "-np, --no-prints", .kind = ARG_FLAG, .field = COMMON(no_prints),
     .cmds = CMD_BIT(CMD_TRANSCRIBE) | CMD_BIT(CMD_LIVE), .help = "print nothing on stderr but errors"},
    {.names = "--max-line-chars", .meta = "N", .kind = ARG_VALUE, .field = COMMON(subs.max_line_chars),
     .parse = arg_sub_int, .cmds = SUBTITLE_CMDS,
     .help = "subtitles (srt, vtt): characters per line at most (default 42)"},
    {.names = "--max-lines", .meta = "N", .kind = ARG_VALUE, .field = COMMON(subs.max_lines), .parse = arg_sub_int,
     .cmds = SUBTITLE_CMDS, .help = "subtitles: lines per cue, 1 or 2 (default 2)"},
    {.names = "--max-cue-seconds", .meta = "S", .kind = ARG_VALUE, .field = COMMON(subs.max_duration),
     .parse = arg_sub_seconds, .cmds = SUBTITLE_CMDS, .help = "subtitles: seconds a cue lasts at most (default 7)"},
    {.names = "--min-cue-seconds", .meta = "S", .kind = ARG_VALUE, .field = COMMON(subs.min_duration),
     .parse = arg_sub_seconds, .cmds = SUBTITLE_CMDS,
     .help = "subtitles: a cue lasts at least S seconds or until the next\n"
             "cue (default 1)"},
    {.names = "--cue-pause", .meta = "S", .kind = ARG_VALUE, .field = COMMON(subs.pause), .parse = arg_sub_seconds,
     .cmds = SUBTITLE_CMDS,
     .help = "subtitles: a silence of S seconds starts a new cue (default\n"
             "0.5); cues also end after . ? ! (see README: Subtitles)"},
    {.names = "-h, --help", .kind = ARG_HELP, .cmds = ~0u, .help = "this help"},
};
#define N_SHARED (sizeof shared_opts / sizeof shared_opts[0])

struct cli_common cli_common_default(void) {
    return (struct cli_common){
        .model = getenv("VKASR_MODEL"), .precision = VKASR_PRECISION_AUTO, .subs = vkasr_subtitle_params_default()};
}

vkasr_model_params cli_model_params(const struct cli_common *c) {
    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = c->device;
    mp.precision = c->precision;
    mp.decoder = c->decoder;
    mp.lookahead_ms = c->lookahead_ms;
    mp.log_level = c->no_prints ? VKASR_LOG_ERROR : c->verbose ? VKASR_LOG_INFO : VKASR_LOG_WARN;
    mp.log_callback = log_to_stderr;
    return mp;
}

int arg_precision(const char *opt, const char *value, void *field) {
    (void)opt;
    if (!strcmp(value, "f32") || !strcmp(value, "f16")) {
        *(vkasr_precision *)field = value[1] == '3' ? VKASR_PRECISION_F32 : VKASR_PRECISION_F16;
        return EXIT_OK;
    }
    fprintf(stderr, "vkasr: unknown --precision '%s' (f32, f16)\n", value);
    return EXIT_USAGE;
}

/* --threads N: the CPU backend reads it from $VKASR_THREADS when it opens. */
int arg_threads(const char *opt, const char *value, void *field) {
    long n = 0;
    if (!cli_parse_long(value, 1, 256, &n)) {
        fprintf(stderr, "vkasr: %s '%s': expected a thread count from 1 to 256\n", opt, value);
        return EXIT_USAGE;
    }
    *(int *)field = (int)n;
    return setenv("VKASR_THREADS", value, 1) == 0 ? EXIT_OK : EXIT_USAGE;
}

int arg_decoder(const char *opt, const char *value, void *field) {
    (void)opt;
    static const char *const names[] = {"auto", "tdt", "rnnt", "ctc"}; /* in vkasr_decoder order */
    for (int i = 0; i < 4; i++)
        if (!strcmp(value, names[i])) {
            *(vkasr_decoder *)field = (vkasr_decoder)i;
            return EXIT_OK;
        }
    fprintf(stderr, "vkasr: unknown --decoder '%s' (auto, tdt, rnnt, ctc)\n", value);
    return EXIT_USAGE;
}

int arg_lookahead(const char *opt, const char *value, void *field) {
    long v;
    if (cli_parse_long(value, 1, 1000000, &v)) {
        *(int *)field = (int)v;
        return EXIT_OK;
    }
    fprintf(stderr, "vkasr: %s '%s': a lookahead in milliseconds (>= 1)\n", opt, value);
    return EXIT_USAGE;
}

bool cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A size in bytes: a number with an optional K, M, G or T (KiB .. TiB, optionally followed by "B" or
 * "iB"), e.g. 3G, 1.5GiB, 800M, 2000000000. */
bool cli_parse_size(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return false;
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (*end && (!u || !*u))
        return false;
    if (u) {
        v *= pow(1024.0, (double)(u - units + 1));
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B')
            end++;
    }
    if (*end || v >= 1.8e19)
        return false;
    *out = (uint64_t)v;
    return *out > 0;
}

int arg_devices(const char *opt, const char *v, void *field) {
    if (!*v || strstr(v, ",,") || v[strlen(v) - 1] == ',' || v[0] == ',') {
        fprintf(stderr, "vkasr: %s needs a comma-separated list of devices (0,1 or cuda:0,cuda:1)\n", opt);
        return EXIT_USAGE;
    }
    *(const char **)field = v;
    return EXIT_OK;
}

int arg_clear(const char *opt, const char *value, void *field) {
    (void)opt, (void)value;
    *(bool *)field = false;
    return EXIT_OK;
}

/* ---- help ------------------------------------------------------------------------------------------- */

static bool is_marker(const struct cli_opt *o) { return !o->names && !o->help; }

static bool takes(const struct cli_opt *o, enum cli_cmd cmd) { return (o->cmds & CMD_BIT(cmd)) != 0; }

/* One option: names and value in a column of 24, then the help, its further lines indented to match. */
static void print_opt(FILE *f, const struct cli_opt *o, enum cli_cmd cmd) {
    char left[96], dyn[1024];
    const char *help = o->help_for[cmd] ? o->help_for[cmd] : o->help;
    if (o->describe) {
        o->describe(dyn, sizeof dyn);
        help = dyn;
    }
    snprintf(left, sizeof left, "%s%s%s%s", o->names[1] == '-' ? "    " : "", o->names, o->meta ? " " : "",
             o->meta ? o->meta : "");
    if (strlen(left) < 24)
        fprintf(f, "  %-24s", left);
    else
        fprintf(f, "  %s  ", left);
    for (const char *p = help ? help : ""; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(f, "%.*s\n", (int)n, p);
        p += n;
        if (*p == '\n' && *++p)
            fprintf(f, "%26s", "");
    }
    if (!help || !*help)
        fputc('\n', f);
}

static void print_shared(FILE *f, enum cli_cmd cmd) {
    for (size_t i = 1; i < N_SHARED; i++)
        if (takes(&shared_opts[i], cmd))
            print_opt(f, &shared_opts[i], cmd);
}

void cli_usage(const struct cli_command *c, FILE *f) {
    c->intro(f);
    fputs("\noptions:\n", f);
    if (takes(&shared_opts[0], c->id))
        print_opt(f, &shared_opts[0], c->id);
    bool shared_done = false;
    for (size_t i = 0; i < c->n_opts; i++) {
        const struct cli_opt *o = &c->opts[i];
        if (is_marker(o)) {
            print_shared(f, c->id);
            shared_done = true;
        } else if (!o->names) {
            fprintf(f, "\n%s\n", o->help);
        } else {
            print_opt(f, o, c->id);
        }
    }
    if (!shared_done)
        print_shared(f, c->id);
    if (c->outro)
        c->outro(f);
}

/* ---- parsing ---------------------------------------------------------------------------------------- */

/* Whether `arg` is one of the comma-separated spellings in names. */
static bool named(const char *names, const char *arg) {
    size_t len = strlen(arg);
    for (const char *p = names; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, arg, n))
            return true;
        p += n;
        p += strspn(p, ", ");
    }
    return false;
}

static const struct cli_opt *find(const struct cli_command *c, const char *arg, bool *shared) {
    for (size_t i = 0; i < c->n_opts; i++)
        if (c->opts[i].names && named(c->opts[i].names, arg)) {
            *shared = false;
            return &c->opts[i];
        }
    for (size_t i = 0; i < N_SHARED; i++)
        if (takes(&shared_opts[i], c->id) && named(shared_opts[i].names, arg)) {
            *shared = true;
            return &shared_opts[i];
        }
    return NULL;
}

int cli_parse(const struct cli_command *c, struct cli_common *common, void *ctx, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (!c->positional) {
                fprintf(stderr, "vkasr: unexpected argument '%s' (see vkasr %s --help)\n", a, c->name);
                return EXIT_USAGE;
            }
            int rc = c->positional(ctx, a);
            if (rc != EXIT_OK)
                return rc;
            continue;
        }
        bool shared = false;
        const struct cli_opt *o = find(c, a, &shared);
        if (!o) {
            fprintf(stderr, "vkasr: unknown option '%s' (see vkasr %s --help)\n", a, c->name);
            return EXIT_USAGE;
        }
        void *field = (char *)(shared ? (void *)common : ctx) + o->field;
        const char *v = NULL;
        if (o->kind == ARG_STRING || o->kind == ARG_VALUE) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vkasr: %s needs a value\n", a);
                return EXIT_USAGE;
            }
            v = argv[++i];
        }
        int rc = EXIT_OK;
        switch (o->kind) {
        case ARG_FLAG: *(bool *)field = true; break;
        case ARG_STRING: *(const char **)field = v; break;
        case ARG_ACTION:
        case ARG_VALUE: rc = o->parse(a, v, field); break;
        case ARG_HELP: cli_usage(c, stdout); return ARGS_HELP;
        }
        if (rc != EXIT_OK)
            return rc;
    }
    return c->id == CMD_TRANSCRIBE || c->id == CMD_SERVE ? cli_check_subtitles(&common->subs) : EXIT_OK;
}
