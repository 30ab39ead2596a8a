/* cmd_bench.c — `vkasr bench`: how fast a model transcribes synthetic speech of each length here: a
 * warm-up (at least one run, and runs until a given time has passed), N timed runs, median and spread
 * of encoder, decoder and wall time, RTFx and peak memory. --streams: many live streams of a
 * cache-aware model at once (bench_streams.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

#define MAX_LENGTHS 16

static void intro(FILE *f) {
    fputs("usage: vkasr bench [-m MODEL] [options]\n"
          "\n"
          "Times transcriptions of synthetic speech-like audio (a voiced, syllable-rate signal: no files\n"
          "needed) of each length: a warm-up (its first run pays for creating the GPU pipelines, unless\n"
          "they are cached; it repeats until --warmup-ms have passed, so that the timed runs follow a\n"
          "second of the same work rather than an idle GPU) and N timed runs, then prints per length the\n"
          "median and the spread (min-max) of the encoder, decoder and wall time of a transcription, its\n"
          "RTFx (audio seconds per wall second) and the peak device memory (weights + the session's\n"
          "scratch high-water mark).\n"
          "\n"
          "With --streams N[,N...] (cache-aware streaming models only): for each N, N live streams of the\n"
          "model (a session and a stream each, as `vkasr serve` holds them) are fed synthetic speech at\n"
          "real time, each at its own phase within the chunk period, for --seconds S (one length, default\n"
          "10), after 1.5 s of the same streaming to warm up (pipelines are created on first use), not\n"
          "counted; prints per N the p50/p95/max time from a chunk's arrival (its last needed sample) to its\n"
          "tokens, the mean time of a step (one batched step over the ready streams of a pool: the device\n"
          "computing and the host waiting on it), the streams per step, the share of the wall time spent in\n"
          "steps, the time to open the streams, and whether real time holds (every chunk decoded, the steps\n"
          "shorter than the audio, p95 under a second). The stream caches are planned for the largest N\n"
          "(vkasr_model_params.stream_slots: a pool of 1 slot and one of N-1, as `vkasr serve --max-streams`\n"
          "does). --lookahead MS picks the trained chunk; --runs and --warmup-ms do not apply. Without -m it\n"
          "runs the streaming default model (as vkasr live does).\n"
          "\n"
          "--profile (Vulkan; GPU timestamps around every dispatch, which slow the run a little): the GPU\n"
          "time by op, per timed run of each length (on stderr), or per step of each stream count (after\n"
          "its row; in JSON its \"ops\").\n",
          f);
}

static void outro(FILE *f) {
    fputs("\n"
          "JSON: {\"model\", \"device\", \"precision\", \"runs\", \"load_ms\", \"lengths\": [{\"seconds\",\n"
          "\"first_ms\" (the first warm-up run's wall), \"warmup_runs\", \"warmup_ms\" (the whole warm-up's\n"
          "wall), \"encoder_ms\", \"decoder_ms\", \"wall_ms\", \"rtfx\" (each {\"median\", \"min\", \"max\"}),\n"
          "\"peak_device_mib\", \"tokens\"}]}. With --streams: {\"model\", \"device\", \"precision\",\n"
          "\"lookahead_ms\", \"seconds\", \"streams\": [{\"streams\", \"latency_ms\": {\"p50\", \"p95\", \"max\"},\n"
          "\"step_ms\", \"streams_per_step\", \"steps_percent\", \"setup_ms\", \"real_time\", with --profile\n"
          "\"ops\": [{\"op\", \"calls\", \"gpu_ms\"}] (the count's measured steps together)}]}.\n"
          "\n"
          "exit codes: 0 success, 1 transcription failed, 2 usage error, 3 model error,\n"
          "            5 no usable device (or no NVIDIA driver for cuda), 130 interrupted.\n",
          f);
}

/* bench's own options. */
struct bench_opts {
    double lengths[MAX_LENGTHS];
    int nlengths, runs, warmup_ms;
    int streams[MAX_LENGTHS];      /* --streams; nstreams 0: whole transcriptions */
    int nstreams;
    bool profile;                  /* --profile */
};

/* "60,600" -> {60, 600}; the count, or -1 for anything but positive numbers up to 24 hours. */
static int parse_lengths(const char *s, double *out, int cap) {
    int n = 0;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v > 0.0 && v <= 86400.0) || n == cap || (*end && *end != ','))
            return -1;
        out[n++] = v;
        s = *end ? end + 1 : end;
        if (*end && !*s)
            return -1; /* a trailing comma */
    }
    return n;
}

static int arg_lengths(const char *opt, const char *v, void *field) {
    struct bench_opts *o = field;
    if ((o->nlengths = parse_lengths(v, o->lengths, MAX_LENGTHS)) < 1) {
        fprintf(stderr, "vkasr: %s needs up to %d positive lengths, e.g. 60,600 (got '%s')\n", opt, MAX_LENGTHS, v);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static int arg_runs(const char *opt, const char *v, void *field) {
    long r;
    if (!cli_parse_long(v, 1, 256, &r)) {
        fprintf(stderr, "vkasr: %s needs an integer from 1 to 256\n", opt);
        return EXIT_USAGE;
    }
    *(int *)field = (int)r;
    return EXIT_OK;
}

static int arg_warmup(const char *opt, const char *v, void *field) {
    long ms;
    if (!cli_parse_long(v, 0, 600000, &ms)) {
        fprintf(stderr, "vkasr: %s needs milliseconds from 0 to 600000 (got '%s')\n", opt, v);
        return EXIT_USAGE;
    }
    *(int *)field = (int)ms;
    return EXIT_OK;
}

static int arg_streams(const char *opt, const char *v, void *field) {
    struct bench_opts *o = field;
    o->nstreams = 0;
    for (const char *p = v; *p;) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 100000 || o->nstreams == MAX_LENGTHS || (*end && (*end != ',' || !end[1]))) {
            fprintf(stderr, "vkasr: %s needs up to %d stream counts from 1 to 100000, e.g. 1,16,256 (got '%s')\n",
                    opt, MAX_LENGTHS, v);
            return EXIT_USAGE;
        }
        o->streams[o->nstreams++] = (int)n;
        p = *end ? end + 1 : end;
    }
    return o->nstreams > 0 ? EXIT_OK : (fprintf(stderr, "vkasr: %s needs stream counts\n", opt), EXIT_USAGE);
}

static const struct cli_opt bench_table[] = {
    OPT_VALUE("-s, --seconds", "LIST", 0, arg_lengths, "audio lengths in seconds, comma-separated (default 60,600)"),
    OPT_VALUE("-r, --runs", "N", ARG_FIELD(struct bench_opts, runs), arg_runs,
     "timed runs per length (default 5)"),
    OPT_VALUE("-w, --warmup-ms", "MS", ARG_FIELD(struct bench_opts, warmup_ms), arg_warmup,
     "warm-up per length: runs until MS ms have passed (default 1000; 0: one run)"),
    OPT_VALUE("--streams", "N[,N...]", 0, arg_streams,
     "N live streams of a cache-aware model at real time, per N (see above)"),
    OPT_FLAG("--profile", ARG_FIELD(struct bench_opts, profile),
     "per-op GPU time (Vulkan): of the timed runs per length, or of a step per stream count"),
};

static const struct cli_command bench_command = {
    CMD_BENCH, "bench", intro, outro, bench_table, sizeof bench_table / sizeof bench_table[0], NULL,
};

struct spread {
    double median, min, max;
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static struct spread spread_of(const double *v, int n) {
    double s[256];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    return (struct spread){med, s[0], s[n - 1]};
}

struct length_result {
    double seconds, first_ms, warmup_ms, peak_mib;
    int warmup_runs;
    size_t tokens;
    struct spread enc, dec, wall, rtfx;
};

static void print_spread_json(const char *name, struct spread s, bool comma) {
    printf("\"%s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}%s", name, s.median, s.min, s.max,
           comma ? ", " : "");
}

static void print_json(const char *model, const vkasr_model_info *info, int runs, double load_ms,
                       const struct length_result *r, int n) {
    printf("{\"model\": ");
    json_str(stdout, model);
    printf(", \"device\": ");
    json_str(stdout, info->device_name);
    printf(", \"precision\": \"%s\", \"runs\": %d, \"load_ms\": %.3f, \"lengths\": [",
           info->precision == VKASR_PRECISION_F16 ? "f16" : "f32", runs, load_ms);
    for (int i = 0; i < n; i++) {
        printf("%s{\"seconds\": %g, \"first_ms\": %.3f, \"warmup_runs\": %d, \"warmup_ms\": %.3f, ", i ? ", " : "",
               r[i].seconds, r[i].first_ms, r[i].warmup_runs, r[i].warmup_ms);
        print_spread_json("encoder_ms", r[i].enc, true);
        print_spread_json("decoder_ms", r[i].dec, true);
        print_spread_json("wall_ms", r[i].wall, true);
        print_spread_json("rtfx", r[i].rtfx, true);
        printf("\"peak_device_mib\": %.1f, \"tokens\": %zu}", r[i].peak_mib, r[i].tokens);
    }
    printf("]}\n");
}

static void print_table(const char *model, const vkasr_model_info *info, int runs, int warmup_ms, double load_ms,
                        const struct length_result *r, int n) {
    printf("model %s on %s, %s, %d timed run%s per length after a warm-up of at least %d ms; model load %.0f ms\n",
           model, info->device_name, info->precision == VKASR_PRECISION_F16 ? "f16" : "f32", runs, runs == 1 ? "" : "s",
           warmup_ms, load_ms);
    printf("median (min-max) per transcription:\n");
    printf("%10s  %-22s  %-22s  %-22s  %-20s  %9s  %9s\n", "audio", "encoder ms", "decoder ms", "wall ms", "RTFx",
           "peak MiB", "first ms");
    for (int i = 0; i < n; i++) {
        char c[4][64];
        const struct spread *s[4] = {&r[i].enc, &r[i].dec, &r[i].wall, &r[i].rtfx};
        for (int k = 0; k < 4; k++)
            snprintf(c[k], sizeof c[k], "%.1f (%.1f-%.1f)", s[k]->median, s[k]->min, s[k]->max);
        printf("%9gs  %-22s  %-22s  %-22s  %-20s  %9.1f  %9.1f\n", r[i].seconds, c[0], c[1], c[2], c[3], r[i].peak_mib,
               r[i].first_ms);
    }
}

/* --profile: the timed runs' GPU time per run by op, on stderr (the table or JSON goes to stdout). */
static void print_session_profile(vkasr_session *s, double seconds, int runs) {
    vkasr_op_profile ops[64];
    size_t n = 0;
    if (vkasr_session_profile(s, ops, 64, &n) != VKASR_OK || n == 0)
        return;
    char head[96];
    snprintf(head, sizeof head, "vkasr: %g s, GPU time per run by op (%d run%s)", seconds, runs, runs == 1 ? "" : "s");
    bench_print_ops(stderr, head, "vkasr:   ", ops, n < 64 ? n : 64, runs);
    vkasr_session_profile_reset(s);
}

int cmd_bench(int argc, char **argv) {
    char default_path[4096];
    struct cli_common c = cli_common_default();
    struct bench_opts o = {.lengths = {60, 600}, .nlengths = 0, .runs = 5, .warmup_ms = 1000};
    int prc = cli_parse(&bench_command, &c, &o, argc, argv);
    if (prc != EXIT_OK)
        return prc == ARGS_HELP ? EXIT_OK : prc;
    if (o.nstreams > 0 && o.nlengths > 1) {
        fprintf(stderr, "vkasr: --streams takes one --seconds length (got %d)\n", o.nlengths);
        return EXIT_USAGE;
    }
    if (o.nlengths == 0) /* the defaults */
        o.nlengths = o.nstreams > 0 ? (o.lengths[0] = 10, 1) : 2;
    const char *model = NULL;
    const int mrc = o.nstreams > 0 ? stream_model_or_default(c.model, default_path, sizeof default_path, &model)
                                   : model_or_default(c.model, default_path, sizeof default_path, &model);
    if (mrc != EXIT_OK)
        return mrc;
    const double *lengths = o.lengths;
    int nlengths = o.nlengths, runs = o.runs;
    bool json = c.json;

    catch_interrupts();
    vkasr_model_params mp = cli_model_params(&c);
    mp.profile |= o.profile;
    for (int k = 0; k < o.nstreams; k++) /* the stream caches planned for the largest count */
        mp.stream_slots = o.streams[k] > mp.stream_slots ? o.streams[k] : mp.stream_slots;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    double t0 = now_s();
    int orc = pool_open_single(model, &mp, &m, &s);
    double load_ms = (now_s() - t0) * 1e3;
    if (orc != EXIT_OK)
        return orc;
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    if (o.nstreams > 0) {
        int brc = bench_streams(m, model, o.streams, o.nstreams, o.lengths[0], json);
        vkasr_session_free(s);
        vkasr_model_free(m);
        return brc;
    }

    struct length_result res[MAX_LENGTHS];
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.abort_callback = cli_should_abort;
    int rc = EXIT_OK;
    for (int li = 0; li < nlengths && rc == EXIT_OK; li++) {
        size_t n = (size_t)llround(lengths[li] * VKASR_SAMPLE_RATE);
        float *audio = malloc((n ? n : 1) * sizeof *audio);
        if (!audio) {
            fprintf(stderr, "vkasr: out of memory for %g s of audio\n", lengths[li]);
            rc = EXIT_FAIL;
            break;
        }
        synth_speech(audio, n, 0);
        double enc[256], dec[256], wall[256], rtfx[256], peak = 0;
        struct length_result *r = &res[li];
        memset(r, 0, sizeof *r);
        r->seconds = lengths[li];
        const double w0 = now_s();
        for (int k = -1; k < runs && rc == EXIT_OK; k++) { /* k = -1: the warm-up, until warmup_ms have passed */
            const vkasr_result *out = NULL;
            double t = now_s();
            vkasr_status st = vkasr_transcribe_pcm(s, audio, n, VKASR_SAMPLE_RATE, 1, &tp, &out);
            double ms = (now_s() - t) * 1e3;
            if (st != VKASR_OK) {
                if (st == VKASR_ABORTED)
                    fprintf(stderr, "vkasr: interrupted\n");
                else
                    fprintf(stderr, "vkasr: %g s of audio: %s\n", lengths[li], vkasr_session_last_error(s));
                rc = st == VKASR_ABORTED ? 128 + (int)interrupted : exit_code_for(st, 0);
                break;
            }
            vkasr_timings tm = vkasr_result_timings(out);
            if (k < 0) {
                if (r->warmup_runs++ == 0) {
                    r->first_ms = ms;
                    vkasr_result_tokens(out, &r->tokens);
                }
                r->warmup_ms = (now_s() - w0) * 1e3;
                if (r->warmup_ms < o.warmup_ms && !interrupted)
                    k--; /* another warm-up run */
                else
                    vkasr_session_profile_reset(s); /* --profile: the timed runs only */
                continue;
            }
            enc[k] = tm.encoder_ms;
            dec[k] = tm.decoder_ms;
            wall[k] = ms;
            rtfx[k] = ms > 0 ? lengths[li] * 1e3 / ms : 0;
            peak = fmax(peak, tm.peak_device_bytes / 1048576.0);
        }
        free(audio);
        if (rc != EXIT_OK)
            break;
        r->enc = spread_of(enc, runs);
        r->dec = spread_of(dec, runs);
        r->wall = spread_of(wall, runs);
        r->rtfx = spread_of(rtfx, runs);
        r->peak_mib = peak;
        if (!json)
            fprintf(stderr, "vkasr: %g s done\n", lengths[li]);
        if (o.profile)
            print_session_profile(s, lengths[li], runs);
    }
    if (rc == EXIT_OK) {
        if (json)
            print_json(model, &info, runs, load_ms, res, nlengths);
        else
            print_table(model, &info, runs, o.warmup_ms, load_ms, res, nlengths);
    }
    vkasr_session_free(s);
    vkasr_model_free(m);
    return rc;
}
