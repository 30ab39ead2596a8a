/* bench_streams.c — `vkasr bench --streams N[,N...]`: N live streams of a cache-aware model through the
 * public stream API (a session and a vkasr_stream each, as a server holds them), fed synthetic speech at
 * real time, each at its own phase within the chunk period. Per N: the time from a chunk's arrival (its
 * last needed sample) to the stream's stats showing its frames decoded, the steps' time and whether
 * real time holds. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "vkasr_debug.h"

struct bstream {
    vkasr_session *ses;
    vkasr_stream *st;
    double phase;                    /* ms after the start when its sample 0 arrives                  */
    int64_t pushed;                  /* samples pushed                                                */
    int64_t push_f, ack_f;           /* the end frame of the next chunk to push, to see decoded      */
};

#define WARMUP_S 1.5 /* seconds of audio streamed before each count's measured run */

#define MAX_OPS 64

struct bench_row {
    int n;
    double p50, p95, max, step_ms, per_step, steps_pct, setup_ms;
    bool real_time;
    vkasr_op_profile ops[MAX_OPS];   /* --profile: the measured steps' GPU time per op              */
    size_t nops;
    double steps;
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-quantile (nearest rank) of sorted v[n]; NAN for none. */
static double quantile(const double *v, size_t n, double p) {
    if (n == 0)
        return NAN;
    size_t i = (size_t)ceil(p * (double)n);
    return v[i > 0 ? (i <= n ? i - 1 : n - 1) : 0];
}

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    nanosleep(&ts, NULL);
}

/* The samples a step ending at encoder frame f needs (vkasr_stream_steps.need_offset), at most total. */
static int64_t need(const vkasr_stream_steps *g, int64_t f, int64_t total) {
    const int64_t k = (int64_t)g->frame_samples * (f - 1) + g->need_offset;
    return k < total ? k : total;
}

/* --profile: the ops' GPU time by op, the largest first, per one of `per` units (steps, runs): a line
 * "HEAD: X ms in all", then a line per op after ROW. */
static int cmp_op(const void *a, const void *b) {
    double x = ((const vkasr_op_profile *)a)->gpu_ms, y = ((const vkasr_op_profile *)b)->gpu_ms;
    return x > y ? -1 : x < y;
}

void bench_print_ops(FILE *f, const char *head, const char *row, vkasr_op_profile *ops, size_t n, double per) {
    if (n == 0 || per <= 0)
        return;
    qsort(ops, n, sizeof *ops, cmp_op);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += ops[i].gpu_ms;
    fprintf(f, "%s: %.3f ms in all\n", head, sum / per);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%-24s %9.1f dispatches %10.3f ms %5.1f %%\n", row, ops[i].name, (double)ops[i].calls / per,
                ops[i].gpu_ms / per, sum > 0 ? 100.0 * ops[i].gpu_ms / sum : 0.0);
}

/* One count: n streams, `total` samples each. Returns the exit code; r filled on success. */
static int run_count(vkasr_model *m, int n, const float *audio, int64_t total, struct bench_row *r) {
    vkasr_stream_steps g0, g1;
    vkasr_model_stream_steps(m, &g0);
    const double chunk_ms = 1000.0 * g0.chunk_frames * g0.frame_samples / VKASR_SAMPLE_RATE;
    const int64_t chunk = g0.chunk_frames;
    /* full chunks only: the last, partial one comes with vkasr_stream_finish after feeding ends */
    const int64_t chunks = (total - g0.need_offset + g0.frame_samples) / ((int64_t)g0.frame_samples * chunk);
    struct bstream *b = calloc((size_t)n, sizeof *b);
    double *lat = malloc((size_t)n * (size_t)chunks * sizeof *lat);
    size_t nlat = 0;
    int rc = b && lat ? EXIT_OK : EXIT_FAIL;
    if (rc != EXIT_OK)
        fprintf(stderr, "vkasr: out of memory for %d streams\n", n);
    const double t_setup = now_s();
    vkasr_stream_params sp = vkasr_stream_params_default();
    for (int i = 0; rc == EXIT_OK && i < n; i++) {
        vkasr_error err;
        vkasr_status st = vkasr_session_create(m, &b[i].ses, &err);
        if (st == VKASR_OK)
            st = vkasr_stream_create(b[i].ses, &sp, &b[i].st, &err);
        if (st != VKASR_OK) {
            fprintf(stderr, "vkasr: stream %d of %d: %s\n", i + 1, n, err.message);
            rc = exit_code_for(st, 0);
        }
        b[i].phase = chunk_ms * (double)(((int64_t)i * 7919) % n) / n; /* arrivals spread over the period */
        b[i].push_f = b[i].ack_f = chunk;
    }
    r->setup_ms = (now_s() - t_setup) * 1e3;
    vkasr_model_stream_steps(m, &g0);
    size_t nops = 0;
    vkasr_model_stream_profile(m, NULL, 0, &nops); /* --profile: the measured steps' only */
    const double t0 = now_s();
    /* a device far slower than real time: give up once the backlog passes a minute */
    const double give_up_ms = 1000.0 * (double)total / VKASR_SAMPLE_RATE + 60000.0;
    for (bool done = false; rc == EXIT_OK && !done;) {
        if (interrupted) {
            fprintf(stderr, "vkasr: interrupted\n");
            rc = 128 + (int)interrupted;
            break;
        }
        const double now = (now_s() - t0) * 1e3;
        if (now > give_up_ms) {
            fprintf(stderr, "vkasr: %d streams: chunks still undecoded a minute after the audio ended\n", n);
            break;
        }
        done = true;
        for (int i = 0; rc == EXIT_OK && i < n; i++) {
            struct bstream *s = &b[i];
            // push each chunk's samples when its last one arrives
            while (s->pushed < total) {
                const int64_t to = need(&g0, s->push_f, total);
                if (now < s->phase + 1000.0 * (double)to / VKASR_SAMPLE_RATE)
                    break;
                vkasr_status st = vkasr_stream_push(s->st, audio + s->pushed, (size_t)(to - s->pushed), VKASR_SAMPLE_RATE);
                if (st != VKASR_OK) {
                    fprintf(stderr, "vkasr: stream %d: %s\n", i + 1, vkasr_stream_last_error(s->st));
                    rc = exit_code_for(st, 0);
                    break;
                }
                s->pushed = to;
                s->push_f += chunk;
            }
            // the chunks whose frames its stats show decoded
            vkasr_stream_stats ss;
            vkasr_stream_get_stats(s->st, &ss);
            const int64_t frames = llround(ss.window_seconds * VKASR_SAMPLE_RATE / g0.frame_samples);
            for (; s->ack_f <= frames && s->ack_f <= chunk * chunks; s->ack_f += chunk)
                lat[nlat++] = now - (s->phase + 1000.0 * (double)need(&g0, s->ack_f, total) / VKASR_SAMPLE_RATE);
            done &= s->ack_f > chunk * chunks;
        }
        if (!done)
            sleep_ms(1);
    }
    const double wall = (now_s() - t0) * 1e3;
    vkasr_model_stream_steps(m, &g1);
    vkasr_model_stream_profile(m, r->ops, MAX_OPS, &r->nops);
    r->nops = r->nops < MAX_OPS ? r->nops : MAX_OPS;
    for (int i = 0; b && i < n; i++) {
        if (rc == EXIT_OK && b[i].pushed < total && /* the tail after the last whole chunk */
            vkasr_stream_push(b[i].st, audio + b[i].pushed, (size_t)(total - b[i].pushed), VKASR_SAMPLE_RATE) != VKASR_OK) {
            fprintf(stderr, "vkasr: stream %d: %s\n", i + 1, vkasr_stream_last_error(b[i].st));
            rc = EXIT_FAIL;
        }
        if (rc == EXIT_OK && b[i].st && vkasr_stream_finish(b[i].st) != VKASR_OK) {
            fprintf(stderr, "vkasr: stream %d: %s\n", i + 1, vkasr_stream_last_error(b[i].st));
            rc = EXIT_FAIL;
        }
        vkasr_stream_free(b[i].st);
        vkasr_session_free(b[i].ses);
    }
    if (rc == EXIT_OK) {
        qsort(lat, nlat, sizeof *lat, cmp_double);
        const double steps = (double)(g1.steps - g0.steps), busy = 1e3 * (g1.step_seconds - g0.step_seconds);
        r->n = n;
        r->p50 = quantile(lat, nlat, 0.5);
        r->p95 = quantile(lat, nlat, 0.95);
        r->max = quantile(lat, nlat, 1.0);
        r->step_ms = steps > 0 ? busy / steps : 0;
        r->steps = steps;
        r->per_step = steps > 0 ? (double)(g1.rows - g0.rows) / steps : 0;
        r->steps_pct = 100.0 * busy / wall;
        /* real time: every chunk decoded, the steps took less time than the audio, no backlog */
        r->real_time = nlat == (size_t)n * (size_t)chunks && busy < wall && r->p95 < 1000.0;
    }
    free(b);
    free(lat);
    return rc;
}

int bench_streams(vkasr_model *m, const char *model, const int *streams, int nstreams, double seconds, bool json) {
    vkasr_stream_steps g;
    vkasr_model_stream_steps(m, &g);
    if (!g.cache_aware) {
        fprintf(stderr,
                "vkasr: --streams: %s is not a cache-aware streaming model (att_context_style chunked_limited); "
                "its live streams transcribe overlapping windows, which this benchmark does not measure\n",
                model);
        return EXIT_USAGE;
    }
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    const int64_t total = llround(seconds * VKASR_SAMPLE_RATE);
    if (total < need(&g, g.chunk_frames, INT64_MAX)) {
        fprintf(stderr, "vkasr: --seconds %g is shorter than the model's first chunk (%.3f s)\n", seconds,
                (double)need(&g, g.chunk_frames, INT64_MAX) / VKASR_SAMPLE_RATE);
        return EXIT_USAGE;
    }
    float *audio = malloc((size_t)total * sizeof *audio);
    struct bench_row *rows = calloc((size_t)nstreams, sizeof *rows);
    if (!audio || !rows) {
        fprintf(stderr, "vkasr: out of memory for %g s of audio\n", seconds);
        free(audio);
        free(rows);
        return EXIT_FAIL;
    }
    synth_speech(audio, (size_t)total, 1);
    const int lookahead_ms = g.chunk_frames * g.frame_samples * 1000 / VKASR_SAMPLE_RATE;
    if (!json) {
        printf("model %s on %s, %s, lookahead %d ms (right context %d), %g s of audio per stream at real time\n",
               model, info.device_name, info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", lookahead_ms,
               g.chunk_frames - 1, seconds);
        printf("latency: a chunk's last sample to its tokens; step: one batched step of a stream pool; each "
               "count after %.1f s of warm-up\n", WARMUP_S);
        printf("%7s %9s %9s %9s %9s %9s %8s %9s %-5s\n", "streams", "p50 ms", "p95 ms", "max ms", "step ms",
               "per step", "steps %", "setup ms", "real time");
        fflush(stdout);
    }
    int rc = EXIT_OK;
    /* each count first streams WARMUP_S of audio, not measured: the pipelines its steps' shapes need
     * are created on first use (hundreds of ms each on a fresh machine), and its pools made */
    const int64_t warm_max = (int64_t)(WARMUP_S * VKASR_SAMPLE_RATE), warm = total < warm_max ? total : warm_max;
    for (int k = 0; k < nstreams && rc == EXIT_OK; k++) {
        struct bench_row scratch;
        rc = warm >= need(&g, g.chunk_frames, INT64_MAX) ? run_count(m, streams[k], audio, warm, &scratch) : EXIT_OK;
        if (rc == EXIT_OK)
            rc = run_count(m, streams[k], audio, total, &rows[k]);
        struct bench_row *r = &rows[k];
        if (rc == EXIT_OK && !json) {
            printf("%7d %9.1f %9.1f %9.1f %9.2f %9.1f %8.1f %9.1f %-5s\n", r->n, r->p50, r->p95, r->max, r->step_ms,
                   r->per_step, r->steps_pct, r->setup_ms, r->real_time ? "yes" : "NO");
            char head[64];
            snprintf(head, sizeof head, "        GPU time per step by op (%.0f steps)", r->steps);
            bench_print_ops(stdout, head, "        ", r->ops, r->nops, r->steps);
            fflush(stdout);
        }
    }
    if (rc == EXIT_OK && json) {
        printf("{\"model\": ");
        json_str(stdout, model);
        printf(", \"device\": ");
        json_str(stdout, info.device_name);
        printf(", \"precision\": \"%s\", \"lookahead_ms\": %d, \"seconds\": %g, \"streams\": [",
               info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", lookahead_ms, seconds);
        for (int k = 0; k < nstreams; k++) {
            const struct bench_row *r = &rows[k];
            printf("%s{\"streams\": %d, \"latency_ms\": {\"p50\": %.3f, \"p95\": %.3f, \"max\": %.3f}, "
                   "\"step_ms\": %.3f, \"streams_per_step\": %.2f, \"steps_percent\": %.2f, "
                   "\"setup_ms\": %.3f, \"real_time\": %s",
                   k ? ", " : "", r->n, r->p50, r->p95, r->max, r->step_ms, r->per_step, r->steps_pct,
                   r->setup_ms, r->real_time ? "true" : "false");
            if (r->nops) {
                printf(", \"ops\": [");
                for (size_t i = 0; i < r->nops; i++) {
                    printf("%s{\"op\": ", i ? ", " : "");
                    json_str(stdout, r->ops[i].name);
                    printf(", \"calls\": %llu, \"gpu_ms\": %.4f}", (unsigned long long)r->ops[i].calls,
                           r->ops[i].gpu_ms);
                }
                printf("]");
            }
            printf("}");
        }
        printf("]}\n");
    }
    free(audio);
    free(rows);
    return rc;
}
