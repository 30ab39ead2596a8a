/* cmd_transcribe.c — `vkasr transcribe`: audio files to transcripts on stdout and in files, with
 * progress, profiles, feature dumps and Ctrl-C keeping partial results; one file per call, or packed
 * batches through transcribe_batch.c. Options: transcribe_opts.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "vkasr_debug.h"

/* The process's peak resident memory (host), in bytes. */
static double host_peak_bytes(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss * 1024.0 : 0.0;
}

/* The transcription parameters the options ask for (no callbacks). */
static vkasr_transcribe_params transcribe_params(const struct cli_common *c, const struct transcribe_opts *o) {
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.language = c->language;
    tp.max_symbols_per_step = o->max_symbols;
    tp.attention = o->attention;
    tp.attention_window = o->attention_window;
    tp.auto_full_seconds = o->attention_threshold;
    tp.max_memory = o->max_memory;
    return tp;
}

static bool show_progress(const struct cli_common *c, const struct transcribe_opts *o) {
    return !c->no_prints && (o->force_progress || isatty(2));
}

/* --batch, --manifest, --devices, --shard: the inputs (or the manifest's) through transcribe_batch.c. */
static int run_batched(const struct cli_common *c, const struct transcribe_opts *o, const vkasr_model_params *mp) {
    struct manifest_entry *entries = NULL;
    size_t n = 0;
    int rc = EXIT_OK;
    if (o->manifest) {
        rc = manifest_read(o->manifest, &entries, &n);
    } else if ((entries = calloc((size_t)o->ninputs, sizeof *entries))) {
        for (int i = 0; i < o->ninputs; i++)
            if (!(entries[n++] = (struct manifest_entry){.audio = strdup(o->inputs[i]), .duration = -1}).audio)
                rc = EXIT_FAIL;
    } else {
        rc = EXIT_FAIL;
    }
    if (rc == EXIT_OK) {
        size_t first = 0, count = n;
        shard_range(n, o->shard_k, o->shard_n, &first, &count);
        if (o->shard_n > 1 && c->verbose)
            fprintf(stderr, "vkasr: shard %zu of %zu: inputs %zu .. %zu of %zu\n", o->shard_k, o->shard_n, first,
                    first + count, n);
        struct batch_run b = {
            .model = c->model, .devices = &o->devices, .sessions = o->sessions, .mp = *mp,
            .tp = transcribe_params(c, o), .batch = o->batch, .stdout_fmt = o->stdout_fmt, .dump = o->dump,
            .out_manifest = o->out_manifest, .no_prints = c->no_prints, .verbose = c->verbose,
            .profile = o->profile, .progress = show_progress(c, o),
        };
        memcpy(b.write, o->write, sizeof b.write);
        rc = transcribe_batch(&b, entries + first, count);
    }
    manifest_free(entries, n);
    return rc;
}

/* The model and a session on it; an exit code after a message when either fails. */
static int open_session(const struct cli_common *c, const vkasr_model_params *mp, vkasr_model **m,
                        vkasr_session **s) {
    int rc = pool_open_single(c->model, mp, m, s);
    if (rc == EXIT_OK && (rc = cli_check_language(*m, c->language)) != EXIT_OK) {
        vkasr_session_free(*s);
        vkasr_model_free(*m);
        *s = NULL;
        *m = NULL;
    }
    if (rc != EXIT_OK)
        return rc;
    vkasr_model_info info;
    vkasr_model_get_info(*m, &info);
    output_set_head(info.head);
    if (c->verbose) {
        fprintf(stderr, "vkasr: device %s, precision %s, %.1fM parameters\n", info.device_name,
                info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", info.n_params / 1e6);
    }
    return EXIT_OK;
}

/* A failed input's message, naming the file unless the library's message already starts with it. */
static void report_failure(vkasr_session *s, const char *in) {
    const char *msg = vkasr_session_last_error(s), *name = strcmp(in, "-") ? in : "standard input";
    size_t nl = strlen(name);
    if (strncmp(msg, name, nl) == 0 && msg[nl] == ':')
        fprintf(stderr, "vkasr: %s\n", msg);
    else
        fprintf(stderr, "vkasr: %s: %s\n", name, msg);
}

/* -otxt, -ojson, -osrt, -ovtt: <input or BASE>.<ext>. EXIT_OK or EXIT_AUDIO. */
static int write_files(const struct cli_common *c, const struct transcribe_opts *o, const char *in,
                       const vkasr_result *r) {
    const char *base = o->of ? o->of : (!strcmp(in, "-") ? "stdin" : in);
    int rc = EXIT_OK;
    for (int k = 0; k < FMT_COUNT; k++) {
        if (!o->write[k])
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", base, fmt_ext[k]);
        FILE *f = fopen(path, "w");
        if (!f || (write_format(f, (enum fmt)k, in, r), fclose(f)) != 0) {
            fprintf(stderr, "vkasr: cannot write %s: %s\n", path, strerror(errno));
            rc = EXIT_AUDIO;
        } else if (!c->no_prints) {
            fprintf(stderr, "vkasr: wrote %s\n", path);
        }
    }
    return rc;
}

/* --dump: DIR (one input) or DIR/<index>/, mel.npy and encoder.npy. EXIT_OK or EXIT_AUDIO. */
static int write_dump(const struct transcribe_opts *o, int index, const vkasr_result *r) {
    char dir[4096], path[4200];
    if (o->ninputs > 1)
        snprintf(dir, sizeof dir, "%s/%d", o->dump, index);
    else
        snprintf(dir, sizeof dir, "%s", o->dump);
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
    if (!failed)
        return EXIT_OK;
    fprintf(stderr, "vkasr: cannot write %s: %s\n", failed, strerror(errno));
    return EXIT_AUDIO;
}

/* -v, --profile: the input's timings and memory; --profile: per-op GPU time (then reset). */
static void report_timings(const struct cli_common *c, const struct transcribe_opts *o, vkasr_session *s,
                           const char *in, const vkasr_result *r) {
    vkasr_timings tm = vkasr_result_timings(r);
    if (!c->no_prints && (c->verbose || o->profile))
        fprintf(stderr,
                "vkasr: %s: %.2f s audio in %.1f ms (RTF %.4f): load %.1f, features %.1f, encoder %.1f, decoder "
                "%.1f ms; device memory planned %.1f MiB, peak %.1f MiB; host peak %.1f MiB\n",
                in, tm.audio_seconds, tm.total_ms, tm.audio_seconds > 0 ? tm.total_ms / 1e3 / tm.audio_seconds : 0,
                tm.load_ms, tm.features_ms, tm.encoder_ms, tm.decoder_ms, tm.planned_device_bytes / 1048576.0,
                tm.peak_device_bytes / 1048576.0, host_peak_bytes() / 1048576.0);
    if (!o->profile)
        return;
    vkasr_op_profile ops[64];
    size_t n = 0;
    vkasr_session_profile(s, ops, 64, &n);
    double sum = 0;
    unsigned long long calls = 0;
    for (size_t k = 0; k < n && k < 64; k++) {
        fprintf(stderr, "vkasr: profile %-20s %8llu calls %10.3f ms\n", ops[k].name, (unsigned long long)ops[k].calls,
                ops[k].gpu_ms);
        sum += ops[k].gpu_ms;
        calls += ops[k].calls;
    }
    fprintf(stderr, "vkasr: profile %-20s %8llu calls %10.3f ms\n", "(all ops)", calls, sum);
    vkasr_session_profile_reset(s);
}

/* One input after it was transcribed (maybe partially): stdout, files, dump, timings. Returns the exit
 * code it adds; *stop when stdout cannot take transcripts any more. */
static int deliver(const struct cli_common *c, const struct transcribe_opts *o, vkasr_session *s, int index,
                   const vkasr_result *r, bool *stop) {
    const char *in = o->inputs[index];
    int rc = EXIT_OK;
    write_format(stdout, o->stdout_fmt, in, r);
    if (stdout_check() != EXIT_OK) {
        *stop = true; /* the transcripts cannot be delivered: do not transcribe the remaining inputs */
        return EXIT_AUDIO;
    }
    if (write_files(c, o, in, r) != EXIT_OK)
        rc = EXIT_AUDIO;
    if (o->dump && write_dump(o, index, r) != EXIT_OK)
        rc = EXIT_AUDIO;
    report_timings(c, o, s, in, r);
    return rc;
}

/* The inputs one at a time on one session; Ctrl-C keeps the partial transcript and skips the rest. */
static int run_files(const struct cli_common *c, const struct transcribe_opts *o, const vkasr_model_params *mp) {
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    int rc = open_session(c, mp, &m, &s);
    if (rc != EXIT_OK)
        return rc;
    if (o->dump) /* the features stay in the results (write_dump) */
        vkasr_session_set_debug(s, &(vkasr_debug_params){.struct_size = sizeof(vkasr_debug_params),
                                                         .keep_features = true});
    struct progress_ctx pc = {.enabled = show_progress(c, o), .last_pct = -1};
    vkasr_transcribe_params tp = transcribe_params(c, o);
    tp.progress_callback = on_progress;
    tp.progress_user_data = &pc;
    tp.abort_callback = cli_should_abort;
    catch_interrupts();
    vkasr_status st = VKASR_OK;
    bool stop = false, aborted = false;
    int i = 0;
    for (; i < o->ninputs && !interrupted; i++) {
        const char *in = o->inputs[i];
        pc.t0 = now_s();
        pc.last_pct = -1;
        const vkasr_result *r = NULL;
        st = vkasr_transcribe_file(s, in, &tp, &r);
        if (pc.enabled)
            fprintf(stderr, "\r%*s\r", 79, "");
        if (st == VKASR_ABORTED) {
            aborted = true;
            size_t nt = 0;
            const vkasr_token *tk = vkasr_result_tokens(r, &nt);
            fprintf(stderr, "vkasr: interrupted: %s: partial transcript, %zu tokens up to %.1f s of %.1f s%s\n",
                    strcmp(in, "-") ? in : "standard input", nt, nt ? tk[nt - 1].end : 0.0, vkasr_result_duration(r),
                    i + 1 < o->ninputs ? "; the remaining inputs are skipped" : "");
        } else if (st != VKASR_OK) {
            report_failure(s, in);
            int code = exit_code_for(st, 0);
            if (rc == EXIT_OK || code == EXIT_AUDIO)
                rc = code;
            continue;
        }
        int code = deliver(c, o, s, i, r, &stop);
        if (code != EXIT_OK)
            rc = code;
        if (stop)
            break;
    }
    if (interrupted && st != VKASR_ABORTED && i < o->ninputs)
        fprintf(stderr, "vkasr: interrupted between inputs: the remaining %d are skipped\n", o->ninputs - i);
    else if (!interrupted)
        cli_test_hold_exit();
    vkasr_session_free(s);
    vkasr_model_free(m);
    /* the shell's status for a death by that signal (130 for SIGINT) when the signal cut the work short;
     * one that came after the last input was delivered (while the device is released) lost nothing */
    if (interrupted && (aborted || i < o->ninputs))
        return 128 + interrupted;
    return rc;
}

int cmd_transcribe(int argc, char **argv) {
    char default_path[4096];
    struct cli_common c;
    struct transcribe_opts o;
    int rc = transcribe_args(argc, argv, &c, &o, default_path, sizeof default_path);
    if (rc == EXIT_OK) {
        vkasr_model_params mp = cli_model_params(&c);
        mp.profile = o.profile;
        output_set_subtitles(&c.subs);
        rc = o.batched ? run_batched(&c, &o, &mp) : run_files(&c, &o, &mp);
    }
    transcribe_opts_free(&o);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}
