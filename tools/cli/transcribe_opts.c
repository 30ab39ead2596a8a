/* transcribe_opts.c — the options of `vkasr transcribe`: their table, value parsers, help text and the
 * checks across options (transcribe_args). cmd_transcribe.c runs what they ask for. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

#define OPT(member) ARG_FIELD(struct transcribe_opts, member)

static void intro(FILE *f) {
    fputs("usage: vkasr transcribe [-m MODEL] [options] AUDIO...\n"
          "       vkasr transcribe [-m MODEL] [options] --manifest FILE\n"
          "\n"
          "Transcribes each AUDIO file (any format libsndfile reads: WAV, FLAC, OGG, MP3, ...; any sample\n"
          "rate from 1 kHz and any channel count; \"-\" reads from standard input) and prints the\n"
          "transcript on stdout.\n",
          f);
}

static void outro(FILE *f) {
    fputs("\n"
          "--format json prints one JSON object per input on one line: text, duration, partial,\n"
          "attention (mode \"full\" or \"local\" and its window), tokens (id, piece, text, frame, start,\n"
          "end), words and segments (text, start, end). Times are in seconds.\n"
          "\n"
          "Ctrl-C (SIGINT) or SIGTERM stops the transcription: what was decoded so far is printed and\n"
          "written as usual, marked partial (\"partial\": true in JSON, a line on stderr), the remaining\n"
          "inputs are skipped and vkasr exits 130 (143 for SIGTERM). Decoding starts after the encoder has\n"
          "run over a whole file, so a stop during the encoder keeps no words of that file. A signal that\n"
          "comes after the last input was transcribed stops nothing: the exit code is the run's. A second\n"
          "Ctrl-C ends vkasr at once.\n",
          f);
    fputs("\n"
          "exit codes: 0 success, 1 transcription failed, 2 usage error, 3 model error,\n"
          "            4 audio or I/O error, 5 no usable device (or no NVIDIA driver for cuda),\n"
          "            130 interrupted. With several inputs, vkasr keeps going past a bad one\n"
          "            and exits non-zero at the end.\n"
          "\n"
          "Batched, outputs still come in input order (one line per input with txt and json), -o* files are\n"
          "written beside each input, --dump writes DIR/<n>/ for the n-th input (0-based), and a summary\n"
          "(inputs, audio seconds, RTFx, peak device memory) ends the run on stderr.\n",
          f);
}

/* ---- value parsers ---- */

static int take_input(void *ctx, const char *arg) {
    struct transcribe_opts *o = ctx;
    o->inputs[o->ninputs++] = arg;
    return EXIT_OK;
}

static int arg_file(const char *opt, const char *v, void *field) {
    (void)opt;
    return take_input(field, v);
}

static int arg_format(const char *opt, const char *v, void *field) {
    int k = 0;
    while (k < FMT_COUNT && strcmp(v, fmt_ext[k]))
        k++;
    if (k == FMT_COUNT) {
        fprintf(stderr, "vkasr: unknown %s '%s' (txt, json, srt, vtt)\n", opt, v);
        return EXIT_USAGE;
    }
    *(enum fmt *)field = (enum fmt)k;
    return EXIT_OK;
}

/* "full", "auto", "local" or "local:W" (W >= 1). */
static int arg_attention(const char *opt, const char *s, void *field) {
    struct transcribe_opts *o = field;
    o->attention_window = 0;
    if (!strcmp(s, "full") || !strcmp(s, "auto") || !strcmp(s, "local")) {
        o->attention = !strcmp(s, "full")   ? VKASR_ATTENTION_FULL
                       : !strcmp(s, "auto") ? VKASR_ATTENTION_AUTO
                                            : VKASR_ATTENTION_LOCAL;
        return EXIT_OK;
    }
    char *end = NULL;
    errno = 0;
    long w = strncmp(s, "local:", 6) ? 0 : strtol(s + 6, &end, 10);
    if (!end || errno || end == s + 6 || *end || w < 1 || w > 1000000) {
        fprintf(stderr, "vkasr: unknown %s '%s' (full, local, local:W with W >= 1, auto)\n", opt, s);
        return EXIT_USAGE;
    }
    o->attention = VKASR_ATTENTION_LOCAL;
    o->attention_window = (int)w;
    return EXIT_OK;
}

static int arg_threshold(const char *opt, const char *v, void *field) {
    char *end = NULL;
    double t = strtod(v, &end);
    if (!(t > 0) || *end || t > 1e9) {
        fprintf(stderr, "vkasr: %s needs a positive number of seconds\n", opt);
        return EXIT_USAGE;
    }
    *(double *)field = t;
    return EXIT_OK;
}

static int arg_size(const char *opt, const char *v, void *field) {
    if (cli_parse_size(v, field))
        return EXIT_OK;
    fprintf(stderr, "vkasr: %s needs a size such as 3G, 800M or a number of bytes\n", opt);
    return EXIT_USAGE;
}

static int arg_max_symbols(const char *opt, const char *v, void *field) {
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (n < 1 || n > INT_MAX || *end) {
        fprintf(stderr, "vkasr: %s needs a positive integer\n", opt);
        return EXIT_USAGE;
    }
    *(int *)field = (int)n;
    return EXIT_OK;
}

static int arg_batch(const char *opt, const char *v, void *field) {
    struct transcribe_opts *o = field;
    char *end = NULL;
    o->batched = true;
    if (!strcmp(v, "auto")) {
        o->batch = 0;
        return EXIT_OK;
    }
    if ((o->batch = (size_t)strtoul(v, &end, 10)) < 1 || *end || v[0] == '-' || o->batch > 1000000) {
        fprintf(stderr, "vkasr: %s needs a positive number of inputs or auto\n", opt);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static int arg_sessions(const char *opt, const char *v, void *field) {
    struct transcribe_opts *o = field;
    char *end = NULL;
    long n = strcmp(v, "auto") ? strtol(v, &end, 10) : 0;
    if (end && (n < 1 || n > POOL_MAX_SESSIONS || *end)) {
        fprintf(stderr, "vkasr: %s needs 1 to %d sessions per device, or auto\n", opt, POOL_MAX_SESSIONS);
        return EXIT_USAGE;
    }
    o->sessions = (int)n;
    return EXIT_OK;
}

static int arg_shard(const char *opt, const char *v, void *field) {
    struct transcribe_opts *o = field;
    if (parse_shard(v, &o->shard_k, &o->shard_n))
        return EXIT_OK;
    fprintf(stderr, "vkasr: %s needs K/N with 0 <= K < N (the K-th of N slices)\n", opt);
    return EXIT_USAGE;
}

/* ---- the table ---- */

static const struct cli_opt transcribe_table[] = {
    OPT_VALUE("-f, --file", "PATH", 0, arg_file, "an input file (same as a positional AUDIO)"),
    OPT_VALUE("--format", "FMT", OPT(stdout_fmt), arg_format, "what goes to stdout: txt (default), json, srt, vtt"),
    OPT_FLAG("-otxt, --output-txt", OPT(write[FMT_TXT]),
     "also write <input>.txt (or BASE.txt with -of)"),
    OPT_FLAG("-ojson, -oj, --output-json", OPT(write[FMT_JSON]), "write <input>.json"),
    OPT_FLAG("-osrt, --output-srt", OPT(write[FMT_SRT]), "write <input>.srt"),
    OPT_FLAG("-ovtt, --output-vtt", OPT(write[FMT_VTT]), "write <input>.vtt"),
    OPT_STRING("-of, --output-file", "BASE", OPT(of), "base name of the output files (one input only)"),
    OPT_STRING("--dump", "DIR", OPT(dump),
     "write DIR/mel.npy (normalized features) and DIR/encoder.npy (encoder\n"
     "output), float32 [frames, dim]; DIR/<n>/ per input when several"),
    ARGS_SHARED,
    OPT_VALUE("--attention", "MODE", 0, arg_attention,
     "auto (default): full attention up to --attention-threshold, local\n"
     "beyond; full: every frame sees every frame (what the models were\n"
     "trained with; time grows with the square of the length); local[:W]:\n"
     "NeMo's local attention, W frames of 80 ms on each side (default:\n"
     "the model's context, else 128)"),
    OPT_VALUE("--attention-threshold", "SECONDS", OPT(attention_threshold), arg_threshold,
     "auto: the longest audio given full attention\n"
     "(default 1440, NeMo's 24 minutes)"),
    OPT_VALUE("--max-memory", "SIZE", OPT(max_memory), arg_size,
     "device memory to use at most, weights included (K, M, G suffixes:\n"
     "KiB, MiB, GiB; default: what the device offers). Long audio runs\n"
     "in smaller chunks to fit, with the same results; below what even\n"
     "the smallest chunks need, the file fails with a message naming\n"
     "the bytes needed and available (exit 1)"),
    OPT_VALUE("--max-symbols", "N", OPT(max_symbols), arg_max_symbols,
     "transducers: most symbols emitted at one frame (default: model's)"),
    OPT_FLAG("--profile", OPT(profile),
     "print per-op GPU time on stderr after each file, with its\n"
     "timings and planned and peak device memory (also\n"
     "$VKASR_PROFILE=1)"),
    OPT_FLAG("-pp, --print-progress", OPT(force_progress),
     "show progress even when stderr is not a terminal"),
    OPT_HEADING("many inputs (a data set, an archive):"),
    OPT_VALUE("--batch", "N|auto", 0, arg_batch,
     "transcribe N inputs at a time in packed batches (no padding; each input\n"
     "as alone, the same tokens); auto: as many as the device's memory holds\n"
     "(the default with --manifest, --devices, --shard); 1: one at a time"),
    OPT_STRING("--manifest", "FILE", OPT(manifest),
     "the inputs of a NeMo manifest: JSON lines with audio_filepath (relative\n"
     "to the manifest's directory), optional duration and text"),
    OPT_STRING("--output-manifest", "FILE", OPT(out_manifest),
     "each input's manifest line with pred_text added, in input order; with\n"
     "text in the input manifest, a WER summary on stderr at the end"),
    OPT_VALUE("--devices", "LIST", OPT(devices_arg), arg_devices,
     "several devices in one process (comma-separated, as -d takes them: 0,1\n"
     "or cuda:0,cuda:1), a session each (the devices load the model at the\n"
     "same time); each takes the next window of inputs when it is free. A\n"
     "device named twice gets two sessions on one model"),
    OPT_VALUE("--sessions", "N|auto", 0, arg_sessions,
     "sessions per device, each a worker on a thread of its own taking the\n"
     "next window (1 to 8); auto (the default): 2 on a GPU through Vulkan\n"
     "when one device is named (one session's host work and decoder run\n"
     "while the other's encoder keeps the GPU busy), else 1"),
    OPT_VALUE("--shard", "K/N", 0, arg_shard,
     "only the K-th (0 .. N-1) of N contiguous slices of the inputs, for a job\n"
     "array (Slurm, Kubernetes indexed jobs, GNU parallel)"),
};

static const struct cli_command transcribe_command = {
    CMD_TRANSCRIBE, "transcribe", intro, outro, transcribe_table,
    sizeof transcribe_table / sizeof transcribe_table[0], take_input,
};

/* ---- checks across options ---- */

static int usage_error(const char *msg) {
    fprintf(stderr, "vkasr: %s\n", msg);
    return EXIT_USAGE;
}

/* The rules between options; EXIT_OK or EXIT_USAGE after a message. */
static int check_combinations(const struct cli_common *c, struct transcribe_opts *o) {
    /* the batched path: --batch, or anything that makes sense only for many inputs (auto batches) */
    if (!o->batched && (o->manifest || o->out_manifest || o->devices_arg || o->sessions || o->shard_n > 1)) {
        o->batched = true;
        o->batch = 0;
    }
    if (o->ninputs == 0 && !o->manifest)
        return usage_error("no audio input given (see vkasr transcribe --help)");
    if (o->manifest && o->ninputs > 0)
        return usage_error("--manifest names the inputs: no audio files besides it");
    if (o->batched && o->of)
        return usage_error("-of names the outputs of one input, not of batches (-otxt and the like write "
                           "<input>.txt beside each input)");
    return EXIT_OK;
}

int transcribe_args(int argc, char **argv, struct cli_common *c, struct transcribe_opts *o, char *model_buf,
                    size_t model_size) {
    *c = cli_common_default();
    *o = (struct transcribe_opts){.stdout_fmt = FMT_TXT, .attention = VKASR_ATTENTION_AUTO, .batch = 1, .shard_n = 1};
    if (!(o->inputs = calloc((size_t)argc + 1, sizeof *o->inputs)))
        return EXIT_FAIL;
    int rc = cli_parse(&transcribe_command, c, o, argc, argv);
    if (rc == EXIT_OK)
        rc = check_combinations(c, o);
    if (rc == EXIT_OK)
        rc = model_or_default(c->model, model_buf, model_size, &c->model);
    if (rc == EXIT_OK && o->of && o->ninputs > 1) {
        fprintf(stderr, "vkasr: -of names the outputs of one input; %d inputs given\n", o->ninputs);
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK)
        rc = pool_devices_parse(o->devices_arg, c->device, &o->devices);
    /* $VKASR_PROFILE=1 turns timestamps on in the library; print the report then too (same rule as the
     * library: set, non-empty and not "0"). */
    const char *env_profile = getenv("VKASR_PROFILE");
    if (env_profile && *env_profile && strcmp(env_profile, "0") != 0)
        o->profile = true;
    return rc;
}

void transcribe_opts_free(struct transcribe_opts *o) {
    free(o->inputs);
    pool_devices_free(&o->devices);
}
