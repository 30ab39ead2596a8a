/* cmd_transcribe.c — `vkasr transcribe`: audio files to transcripts on stdout and in files,
 * with progress, profiles, feature dumps and Ctrl-C keeping partial results; one file per call, or
 * (--batch, --manifest, --devices, --shard) packed batches through transcribe_batch.c. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"

static void usage_transcribe(FILE *f) {
    fprintf(f,
            "usage: vkasr transcribe [-m MODEL] [options] AUDIO...\n"
            "       vkasr transcribe [-m MODEL] [options] --manifest FILE\n"
            "\n"
            "Transcribes each AUDIO file (any format libsndfile reads: WAV, FLAC, OGG, MP3, ...; any sample\n"
            "rate from 1 kHz and any channel count; \"-\" reads from standard input) and prints the\n"
            "transcript on stdout.\n"
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
            "  -d, --device DEV        the device (also $VKASR_DEVICE): cpu (the slow plain-C reference\n"
            "                          backend), cuda[:N] (the CUDA backend, in builds with it),\n"
            "                          vulkan[:N|NAME], N (Vulkan device index) or NAME (a Vulkan\n"
            "                          device name substring); default: the best Vulkan device\n"
            "  -p, --precision P       f16 (default where supported) or f32\n"
            "      --attention MODE    auto (default): full attention up to --attention-threshold, local\n"
            "                          beyond; full: every frame sees every frame (what the models were\n"
            "                          trained with; time grows with the square of the length); local[:W]:\n"
            "                          NeMo's local attention, W frames of 80 ms on each side (default:\n"
            "                          the model's context, else 128)\n"
            "      --attention-threshold SECONDS  auto: the longest audio given full attention\n"
            "                          (default 1440, NeMo's 24 minutes)\n"
            "      --max-memory SIZE   device memory to use at most, weights included (K, M, G suffixes:\n"
            "                          KiB, MiB, GiB; default: what the device offers). Long audio runs\n"
            "                          in smaller chunks to fit, with the same results; below what even\n"
            "                          the smallest chunks need, the file fails with a message naming\n"
            "                          the bytes needed and available (exit 1)\n"
            "      --max-symbols N     transducers: most symbols emitted at one frame (default: model's)\n"
            "      --profile           print per-op GPU time on stderr after each file, with its\n"
            "                          timings and planned and peak device memory (also\n"
            "                          $VKASR_PROFILE=1)\n"
            "  -np, --no-prints        print nothing on stderr but errors\n"
            "  -pp, --print-progress   show progress even when stderr is not a terminal\n"
            "  -v, --verbose           more log messages: the attention chosen, the memory plan and the\n"
            "                          subsampling tiles, and per file its timings, planned and peak\n"
            "                          device memory and the process's peak host memory; with --batch,\n"
            "                          each packed batch's features, encoder and decoder times\n"
            "  -h, --help              this help\n"
            "\n"
            "many inputs (a data set, an archive):\n"
            "      --batch N|auto      transcribe N inputs at a time in packed batches (no padding; each input\n"
            "                          as alone, the same tokens); auto: as many as the device's memory holds\n"
            "                          (the default with --manifest, --devices, --shard); 1: one at a time\n",
            VKASR_DEFAULT_MODELS[0] ? VKASR_DEFAULT_MODELS : "(none built in)");
    fputs("      --manifest FILE     the inputs of a NeMo manifest: JSON lines with audio_filepath (relative\n"
          "                          to the manifest's directory), optional duration and text\n"
          "      --output-manifest FILE  each input's manifest line with pred_text added, in input order; with\n"
          "                          text in the input manifest, a WER summary on stderr at the end\n"
          "      --devices LIST      several devices in one process (comma-separated, as -d takes them: 0,1\n"
          "                          or cuda:0,cuda:1), a session each (the devices load the model at the\n"
          "                          same time); each takes the next window of inputs when it is free. A\n"
          "                          device named twice gets two sessions on one model\n"
          "      --shard K/N         only the K-th (0 .. N-1) of N contiguous slices of the inputs, for a job\n"
          "                          array (Slurm, Kubernetes indexed jobs, GNU parallel)\n",
          f);
    /* a second call: one string literal of the whole text would exceed C99's 4095 characters */
    fputs("\n"
          "--format json prints one JSON object per input on one line: text, duration, partial,\n"
          "attention (mode \"full\" or \"local\" and its window), tokens (id, piece, text, frame, start,\n"
          "end), words and segments (text, start, end). Times are in seconds.\n"
          "\n"
          "Ctrl-C (SIGINT) or SIGTERM stops the transcription: what was decoded so far is printed and\n"
          "written as usual, marked partial (\"partial\": true in JSON, a line on stderr), the remaining\n"
          "inputs are skipped and vkasr exits 130 (143 for SIGTERM). Decoding starts after the encoder has\n"
          "run over a whole file, so a stop during the encoder keeps no words of that file. A second\n"
          "Ctrl-C ends vkasr at once.\n"
          "\n"
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

/* "full", "auto", "local" or "local:W" (W >= 1). */
static bool parse_attention(const char *s, vkasr_attention *mode, int *window) {
    *window = 0;
    if (!strcmp(s, "full") || !strcmp(s, "auto") || !strcmp(s, "local")) {
        *mode = !strcmp(s, "full") ? VKASR_ATTENTION_FULL : !strcmp(s, "auto") ? VKASR_ATTENTION_AUTO : VKASR_ATTENTION_LOCAL;
        return true;
    }
    if (strncmp(s, "local:", 6) != 0)
        return false;
    char *end = NULL;
    errno = 0;
    long w = strtol(s + 6, &end, 10);
    if (errno || end == s + 6 || *end || w < 1 || w > 1000000)
        return false;
    *mode = VKASR_ATTENTION_LOCAL;
    *window = (int)w;
    return true;
}

/* A size in bytes: a number with an optional K, M, G or T (KiB .. TiB, optionally followed by "B" or
 * "iB"), e.g. 3G, 1.5GiB, 800M, 2000000000. */
static bool parse_size(const char *s, uint64_t *out) {
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

/* The process's peak resident memory (host), in bytes. */
static double host_peak_bytes(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss * 1024.0 : 0.0;
}

int cmd_transcribe(int argc, char **argv) {
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
    vkasr_attention attention = VKASR_ATTENTION_AUTO;
    int attention_window = 0;
    double attention_threshold = 0;
    uint64_t max_memory = 0;
    /* the batched path */
    bool batched = false;
    size_t batch = 1, shard_k = 0, shard_n = 1;
    const char *manifest = NULL, *out_manifest = NULL, *devices_arg = NULL;
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
        } else if (!strcmp(a, "--attention")) {
            if (!(v = arg_value(argc, argv, &i, a))) {
                rc = EXIT_USAGE;
            } else if (!parse_attention(v, &attention, &attention_window)) {
                fprintf(stderr, "vkasr: unknown --attention '%s' (full, local, local:W with W >= 1, auto)\n", v);
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--attention-threshold")) {
            char *end = NULL;
            if (!(v = arg_value(argc, argv, &i, a)) || !((attention_threshold = strtod(v, &end)) > 0) || *end ||
                attention_threshold > 1e9) {
                fprintf(stderr, "vkasr: --attention-threshold needs a positive number of seconds\n");
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--max-memory")) {
            if (!(v = arg_value(argc, argv, &i, a)) || !parse_size(v, &max_memory)) {
                fprintf(stderr, "vkasr: --max-memory needs a size such as 3G, 800M or a number of bytes\n");
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--max-symbols")) {
            char *end = NULL;
            if (!(v = arg_value(argc, argv, &i, a)) || (max_symbols = (int)strtol(v, &end, 10)) < 1 || *end) {
                fprintf(stderr, "vkasr: --max-symbols needs a positive integer\n");
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--batch")) {
            char *end = NULL;
            batched = true;
            if (!(v = arg_value(argc, argv, &i, a)))
                rc = EXIT_USAGE;
            else if (!strcmp(v, "auto"))
                batch = 0;
            else if ((batch = (size_t)strtoul(v, &end, 10)) < 1 || *end || v[0] == '-' || batch > 1000000) {
                fprintf(stderr, "vkasr: --batch needs a positive number of inputs or auto\n");
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--manifest")) {
            rc = (manifest = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "--output-manifest")) {
            rc = (out_manifest = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "--devices")) {
            if (!(devices_arg = arg_value(argc, argv, &i, a)))
                rc = EXIT_USAGE;
            else if (!*devices_arg || strstr(devices_arg, ",,") || devices_arg[strlen(devices_arg) - 1] == ',' ||
                     devices_arg[0] == ',') {
                fprintf(stderr, "vkasr: --devices needs a comma-separated list of devices (0,1 or cuda:0,cuda:1)\n");
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--shard")) {
            if (!(v = arg_value(argc, argv, &i, a)) || !parse_shard(v, &shard_k, &shard_n)) {
                fprintf(stderr, "vkasr: --shard needs K/N with 0 <= K < N (the K-th of N slices)\n");
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
    /* the batched path: --batch, or anything that makes sense only for many inputs (auto batches) */
    if (!batched && (manifest || out_manifest || devices_arg || shard_n > 1)) {
        batched = true;
        batch = 0;
    }
    if (rc == EXIT_OK && ninputs == 0 && !manifest) {
        fprintf(stderr, "vkasr: no audio input given (see vkasr transcribe --help)\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && manifest && ninputs > 0) {
        fprintf(stderr, "vkasr: --manifest names the inputs: no audio files besides it\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && batched && of) {
        fprintf(stderr, "vkasr: -of names the outputs of one input, not of batches (-otxt and the like write "
                        "<input>.txt beside each input)\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && devices_arg && device) {
        fprintf(stderr, "vkasr: --devices and -d both name devices: use one\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && !(model = model_or_default(model, default_path, sizeof default_path)))
        rc = EXIT_USAGE;
    if (rc == EXIT_OK && of && ninputs > 1) {
        fprintf(stderr, "vkasr: -of names the outputs of one input; %d inputs given\n", ninputs);
        rc = EXIT_USAGE;
    }
    /* the devices of --devices (each checked as -d would be) */
    char *devbuf = devices_arg ? strdup(devices_arg) : NULL;
    const char **devices = devices_arg ? calloc(strlen(devices_arg) + 1, sizeof *devices) : NULL;
    int ndevices = 0;
    if (devices_arg && (!devbuf || !devices))
        rc = EXIT_FAIL;
    for (char *tok = devbuf, *save = NULL; rc == EXIT_OK && devbuf && (tok = strtok_r(tok, ",", &save)); tok = NULL) {
        devices[ndevices++] = tok;
        rc = check_device_backend(tok);
    }
    if (rc == EXIT_OK)
        rc = check_device_backend(device);
    if (rc != EXIT_OK) {
        free(inputs);
        free(devbuf);
        free(devices);
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
    if (batched) {
        struct manifest_entry *entries = NULL;
        size_t n = 0;
        if (manifest) {
            rc = manifest_read(manifest, &entries, &n);
        } else if ((entries = calloc((size_t)ninputs, sizeof *entries))) {
            for (int i = 0; i < ninputs; i++)
                if (!(entries[n++] = (struct manifest_entry){.audio = strdup(inputs[i]), .duration = -1}).audio)
                    rc = EXIT_FAIL;
        } else {
            rc = EXIT_FAIL;
        }
        if (rc == EXIT_OK) {
            size_t first = 0, count = n;
            shard_range(n, shard_k, shard_n, &first, &count);
            if (shard_n > 1 && verbose)
                fprintf(stderr, "vkasr: shard %zu of %zu: inputs %zu .. %zu of %zu\n", shard_k, shard_n, first,
                        first + count, n);
            struct batch_run o = {
                .model = model, .devices = devices, .ndevices = ndevices, .mp = mp,
                .tp = vkasr_transcribe_params_default(),
                .batch = batch, .stdout_fmt = stdout_fmt, .dump = dump, .out_manifest = out_manifest,
                .no_prints = no_prints, .verbose = verbose, .profile = profile,
                .progress = !no_prints && (force_progress || isatty(2)),
            };
            memcpy(o.write, write, sizeof o.write);
            o.tp.max_symbols_per_step = max_symbols;
            o.tp.keep_features = dump != NULL;
            o.tp.attention = attention;
            o.tp.attention_window = attention_window;
            o.tp.auto_full_seconds = attention_threshold;
            o.tp.max_memory = max_memory;
            rc = transcribe_batch(&o, entries + first, count);
        }
        manifest_free(entries, n);
        free(inputs);
        free(devbuf);
        free(devices);
        return rc;
    }
    free(devbuf);
    free(devices);
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
    tp.attention = attention;
    tp.attention_window = attention_window;
    tp.auto_full_seconds = attention_threshold;
    tp.max_memory = max_memory;
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
                    "%.1f ms; device memory planned %.1f MiB, peak %.1f MiB; host peak %.1f MiB\n",
                    in, tm.audio_seconds, tm.total_ms, tm.audio_seconds > 0 ? tm.total_ms / 1e3 / tm.audio_seconds : 0,
                    tm.load_ms, tm.features_ms, tm.encoder_ms, tm.decoder_ms, tm.planned_device_bytes / 1048576.0,
                    tm.peak_device_bytes / 1048576.0, host_peak_bytes() / 1048576.0);
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
