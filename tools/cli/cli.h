/* cli.h — what the vkasr commands share: exit codes, helpers, output formats, the progress
 * bar and Ctrl-C handling. Each command lives in its own cmd_<name>.c; main.c dispatches. The CLI uses
 * nothing but the public API (include/vkasr.h); options: args.h. */
#ifndef VKASR_CLI_H
#define VKASR_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pool.h"
#include "vkasr.h"

#ifndef VKASR_DEFAULT_MODELS
#define VKASR_DEFAULT_MODELS ""
#endif

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_MODEL = 3, EXIT_AUDIO = 4, EXIT_DEVICE = 5 };

/* ---- model_arg.c ---- */

/* *out = MODEL when given, else the installed default model (vkasr_default_model_path) copied into buf;
 * after --pull, a MODEL that is no path is a name pulled into the Hugging Face cache first (pull.h), its
 * path copied into buf. Returns EXIT_OK, or the exit code after saying why on stderr: EXIT_USAGE when
 * there is no model at all, the pull's own code when a pull fails. */
int model_or_default(const char *model, char *buf, size_t size, const char **out);
/* model_or_default for vkasr live: without MODEL and $VKASR_MODEL, the first that exists of the streaming
 * default models (VKASR_DEFAULT_STREAM_MODELS, the cache-aware models/vkasr-rnnt-stream-tiny-en.gguf),
 * else the default model. */
int stream_model_or_default(const char *model, char *buf, size_t size, const char **out);
/* --pull (an ARG_ACTION of the shared options). */
int arg_pull(const char *opt, const char *value, void *field);

/* ---- cli_common.c ---- */

/* The exit code for a status; model_stage: the error came from loading the model. */
int exit_code_for(vkasr_status st, int model_stage);
/* exit_code_for a model load with these params (an untrained --lookahead is a usage error, exit 2). */
int exit_code_for_load(vkasr_status st, const vkasr_model_params *mp);
/* --language checked against a loaded model: EXIT_OK, or EXIT_USAGE after a message listing the
 * model's languages. */
int cli_check_language(const vkasr_model *m, const char *language);
/* EXIT_USAGE with a message when a device string (NULL or "": $VKASR_DEVICE) names a backend this
 * build lacks ("cuda" without -DVKASR_CUDA=ON), EXIT_OK otherwise. */
int check_device_backend(const char *device);
/* Flushes stdout; EXIT_AUDIO (reported once) when the write failed, EXIT_OK otherwise. */
int stdout_check(void);
void log_to_stderr(vkasr_log_level level, const char *msg, void *ud);
double now_s(void);
int mkdir_p(const char *dir);

/* The first SIGINT/SIGTERM sets `interrupted` (the signal number); cli_should_abort() is an abort
 * callback that reports it; a second signal ends the process at once. */
extern volatile sig_atomic_t interrupted;
void catch_interrupts(void);
bool cli_should_abort(void *ud);
/* VKASR_TEST_HOLD_EXIT_MS=N, a test hook: once every input is delivered, before the device is released,
 * holds N ms (at most 60000) or until a signal, saying so on stderr, so a test can send a signal just
 * there (test_cli.sh: a late Ctrl-C loses nothing). Off when unset. */
void cli_test_hold_exit(void);

/* A progress bar on stderr (a vkasr_progress_callback; ud is a struct progress_ctx). */
struct progress_ctx {
    bool enabled;
    double t0;
    int last_pct;
};
void on_progress(const vkasr_progress *p, void *ud);

/* ---- output.c ---- */

enum fmt { FMT_TXT, FMT_JSON, FMT_SRT, FMT_VTT, FMT_COUNT };
extern const char *const fmt_ext[FMT_COUNT];
/* A JSON string literal of arbitrary bytes (invalid UTF-8 becomes U+FFFD). */
void json_str(FILE *f, const char *s);
void write_format(FILE *f, enum fmt fm, const char *input, const vkasr_result *r);
/* Names the loaded head ("head": "tdt" | "rnnt" | "ctc") in the JSON format's objects from now on. */
void output_set_head(vkasr_head h);
/* The limits of the srt and vtt formats' cues from now on (default: vkasr_subtitle_params_default()). */
void output_set_subtitles(const vkasr_subtitle_params *p);
/* The result's words as SubRip or WebVTT cues (vkasr_subtitles()); 0, or -1 after a message on stderr. */
int write_subtitles(FILE *f, const vkasr_result *r, const vkasr_subtitle_params *p, bool vtt);
/* NumPy .npy v1.0, float32 [rows, cols]; 0 or -1 (errno set). */
int write_npy(const char *path, const float *data, size_t rows, size_t cols);

/* ---- manifest.c ---- */

/* An input of the batched path: a NeMo manifest line (audio_filepath resolved against the manifest's
 * directory, optional duration and text) or a file named on the command line (line NULL). */
struct manifest_entry {
    char *audio;      /* the audio file's path                                   */
    char *line;       /* the manifest line (a JSON object), NULL for a plain file */
    double duration;  /* seconds; -1: not given                                  */
    char *text;       /* the reference transcript; NULL: none                    */
};
/* Reads a manifest ("-": standard input); messages name the file and line. EXIT_OK, EXIT_USAGE (a
 * malformed line), EXIT_AUDIO (cannot read), EXIT_FAIL (memory). */
int manifest_read(const char *path, struct manifest_entry **out, size_t *count);
void manifest_free(struct manifest_entry *e, size_t n);
/* The output manifest's line of an entry: its JSON object with pred_text (a plain file: audio_filepath
 * and pred_text); malloc'd, no newline; NULL when out of memory. */
char *manifest_line(const struct manifest_entry *e, const char *pred_text);
/* "K/N" with 0 <= K < N: the K-th of N slices. */
bool parse_shard(const char *s, size_t *k, size_t *n);
/* Slice k of n of `total` inputs: contiguous, deterministic, sizes differing by at most one. */
void shard_range(size_t total, size_t k, size_t n, size_t *first, size_t *count);

/* ---- transcribe_batch.c ---- */

/* What the batched path of `vkasr transcribe` needs from the command line. */
struct batch_run {
    const char *model;
    const struct pool_devices *devices; /* --devices, or -d's one device (pool.h)           */
    int sessions;                  /* workers (sessions) per device entry; 0: auto       */
    vkasr_model_params mp;         /* device set per worker                              */
    vkasr_transcribe_params tp;    /* no callbacks                                       */
    size_t batch;                  /* inputs per device batch; 0: chosen from memory     */
    enum fmt stdout_fmt;
    bool write[FMT_COUNT];
    const char *dump;              /* DIR/<input index>/ per input                       */
    const char *out_manifest;      /* NULL: none                                         */
    bool no_prints, verbose, profile, progress;
};
/* Transcribes the inputs in packed batches, windows of consecutive inputs taken by the workers of the
 * devices (whoever is free takes the next window), outputs in input order. Returns the exit code. */
int transcribe_batch(const struct batch_run *o, const struct manifest_entry *in, size_t n);

/* ---- transcribe_opts.c ---- */

struct cli_common;
/* What `vkasr transcribe` was asked to do. */
struct transcribe_opts {
    const char **inputs;           /* AUDIO and -f, in order                               */
    int ninputs;
    const char *of, *dump, *manifest, *out_manifest, *devices_arg;
    enum fmt stdout_fmt;
    bool write[FMT_COUNT];         /* -otxt, -ojson, -osrt, -ovtt                          */
    bool force_progress, profile;
    vkasr_attention attention;
    int attention_window, max_symbols;
    double attention_threshold;
    uint64_t max_memory;
    bool batched;                  /* the batched path (--batch, or implied)               */
    size_t batch, shard_k, shard_n;
    int sessions;                  /* --sessions; 0: auto                                  */
    struct pool_devices devices;   /* --devices split, or -d                               */
};
/* Parses and checks the command line (the model resolved into model_buf when not given). EXIT_OK,
 * ARGS_HELP, or an exit code after a message; transcribe_opts_free() in every case. */
int transcribe_args(int argc, char **argv, struct cli_common *c, struct transcribe_opts *o, char *model_buf,
                    size_t model_size);
void transcribe_opts_free(struct transcribe_opts *o);

/* ---- synth.c, bench_streams.c (vkasr bench) ---- */

/* n samples at 16 kHz of speech-like audio: 10 harmonics of a pitch gliding around 120 Hz under a 4 Hz
 * syllable envelope, 2.5 s phrases, 0.5 s pauses, a faint noise floor that the seed varies. */
void synth_speech(float *x, size_t n, uint64_t seed);
/* vkasr bench --streams: for each count in streams[], that many live streams of the loaded cache-aware
 * model fed synthetic speech at real time (`seconds` each); a table, or JSON. Returns the exit code. */
int bench_streams(vkasr_model *m, const char *model, const int *streams, int nstreams, double seconds, bool json);
/* --profile's table: the ops' GPU time per one of `per` units (steps, runs), the largest first, under a
 * line "HEAD: X ms in all", each op's line after ROW (bench_streams.c). */
void bench_print_ops(FILE *f, const char *head, const char *row, vkasr_op_profile *ops, size_t n, double per);

/* ---- commands: argv holds the arguments after the command's name ---- */

int cmd_transcribe(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_live(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* cmd_serve.c, in builds with libmicrohttpd */
int cmd_pull(int argc, char **argv);  /* cmd_pull.c */
int cmd_models(int argc, char **argv);

#endif
