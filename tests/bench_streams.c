/* bench_streams.c — many cache-aware streams on one device (a benchmark, not a test; docs/live.md):
 * N streams of synthetic speech-like audio arrive at real time, each at its own phase within the chunk
 * period; the host takes what has arrived, and one step of the streaming pool (asr/stream.h) advances
 * every stream with a whole chunk, again and again. Per N it prints the p50/p95/max time from a chunk's
 * arrival (its last sample, plus the 2 mel frames' right half-window) to its tokens, the wall time per
 * step (the device's time for the step, the host waiting on it), the streams per step, and whether real
 * time holds (the steps' time below the wall time, and p95 below a second: no backlog).
 * usage: bench_streams MODEL [--streams N[,N...]] [--lookahead MS] [--seconds S] [--precision f16|f32]
 *        [--profile]: per N, the GPU time of the ops above 3 % (calls) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "asr/stream.h"
#include "common/clock.h"

/* Speech-like audio (tools/cli/cmd_bench.c's): harmonics of a gliding pitch under a syllable envelope,
 * phrases and pauses, a faint noise floor; seed s varies the noise. */
static void synthesize(float *x, size_t n, uint64_t seed) {
    const double rate = VKASR_SAMPLE_RATE, two_pi = 6.283185307179586;
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    double phase = 0.0;
    for (size_t i = 0; i < n; i++) {
        double t = (double)i / rate;
        double f0 = 120.0 + 30.0 * sin(two_pi * 0.7 * t) + 10.0 * sin(two_pi * 3.1 * t);
        phase += two_pi * f0 / rate;
        if (phase > two_pi)
            phase -= two_pi;
        double syl = sin(two_pi * 4.0 * t), env = syl > 0 ? syl * syl : 0.0;
        if (fmod(t, 3.0) >= 2.5)
            env = 0.0;
        double v = 0.0;
        for (int h = 1; h <= 10; h++)
            v += sin(h * phase) / h * (1.0 + 0.5 * sin(two_pi * (0.3 + 0.1 * h) * t));
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double noise = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.01;
        x[i] = (float)(0.1 * env * v + noise);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(p * (double)n) - 1;
    return v[i < n ? i : n - 1];
}

static void sleep_ms(double ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000.0) * 1e6)};
    nanosleep(&ts, NULL);
}

/* N streams for `seconds` of audio; returns 0 when it ran. */
static int run(vkasr_session *vs, int64_t N, double seconds, const float *audio, size_t n_audio) {
    const struct asr_model *am = vs->model->am;
    struct err e = {0};
    struct asr_stream_geometry g;
    struct asr_stream_pool *pool = NULL;
    const double t_create = clock_ms();
    if (asr_stream_geometry(&am->cfg, &g, &e) != VKASR_OK || asr_stream_pool_create(am, vs->be, N, 0, &pool, &e) != VKASR_OK) {
        fprintf(stderr, "bench_streams: %s\n", e.msg);
        return 1;
    }
    const double create_ms = clock_ms() - t_create;
    struct asr_stream **st = calloc((size_t)N, sizeof *st);
    struct asr_stream **ready = calloc((size_t)N, sizeof *ready);
    struct asr_output *out = calloc((size_t)N, sizeof *out);
    struct asr_output **oo = calloc((size_t)N, sizeof *oo);
    double *phase = calloc((size_t)N, sizeof *phase);
    bool *ended = calloc((size_t)N, sizeof *ended);
    const double chunk_ms = (double)g.chunk * am->cfg.sub_factor * am->cfg.hop_length * 1000.0 / am->cfg.sample_rate;
    const size_t max_lat = (size_t)(N * (seconds * 1000.0 / chunk_ms + 2)) + 16;
    double *lat = malloc(max_lat * sizeof *lat), *step_ms = malloc(100000 * sizeof *step_ms);
    size_t nlat = 0, nsteps = 0;
    double rows = 0, busy = 0, feed = 0;
    vkasr_status s = VKASR_OK;
    for (int64_t i = 0; s == VKASR_OK && i < N; i++) {
        s = asr_stream_create(pool, NULL, &st[i], &e);
        phase[i] = chunk_ms * (double)((i * 7919) % N) / (double)N; /* arrivals spread over the period */
    }
    const int64_t total = (int64_t)(seconds * VKASR_SAMPLE_RATE);
    const double t0 = clock_ms();
    bool all_done = false;
    while (s == VKASR_OK && !all_done) {
        const double now = clock_ms() - t0;
        // what has arrived: each stream's samples up to now - its phase, fed to it
        all_done = true;
        const double tf = clock_ms();
        for (int64_t i = 0; s == VKASR_OK && i < N; i++) {
            if (asr_stream_done(st[i]) || ended[i]) {
                all_done &= asr_stream_done(st[i]);
                continue;
            }
            all_done = false;
            int64_t have = (int64_t)((now - phase[i]) * VKASR_SAMPLE_RATE / 1000.0);
            have = have < 0 ? 0 : have > total ? total : have;
            const int64_t from = asr_stream_keep_from(st[i]);
            if (have >= asr_stream_samples_needed(st[i]) || have == total) {
                s = asr_stream_feed(st[i], audio + from, from, have, have == total, &e);
                ended[i] = have == total;
            }
        }
        feed += clock_ms() - tf;
        int64_t nr = 0;
        double arrive_max = 0;
        for (int64_t i = 0; s == VKASR_OK && i < N; i++)
            if (asr_stream_ready(st[i])) {
                ready[nr] = st[i];
                oo[nr++] = &out[i];
            }
        if (nr == 0) {
            sleep_ms(1);
            continue;
        }
        // each ready chunk's arrival: when its last needed sample came
        double *arr = malloc((size_t)nr * sizeof *arr);
        for (int64_t k = 0; k < nr; k++) {
            int64_t i = 0;
            while (st[i] != ready[k])
                i++;
            const int64_t need = asr_stream_samples_needed(ready[k]);
            const double a = phase[i] + (double)(need < total ? need : total) * 1000.0 / VKASR_SAMPLE_RATE;
            arr[k] = a;
            arrive_max = a > arrive_max ? a : arrive_max;
        }
        const double ts = clock_ms();
        s = asr_stream_step(pool, ready, nr, oo, &e);
        const double te = clock_ms();
        busy += te - ts;
        rows += (double)nr;
        if (nsteps < 100000)
            step_ms[nsteps] = te - ts;
        nsteps++;
        for (int64_t k = 0; k < nr && nlat < max_lat; k++)
            lat[nlat++] = te - t0 - arr[k];
        free(arr);
    }
    const double wall = clock_ms() - t0;
    if (s != VKASR_OK) {
        fprintf(stderr, "bench_streams: %s\n", e.msg);
    } else {
        size_t ns = nsteps < 100000 ? nsteps : 100000;
        double steps_p50 = pct(step_ms, ns, 0.5), steps_p95 = pct(step_ms, ns, 0.95);
        double p50 = pct(lat, nlat, 0.5), p95 = pct(lat, nlat, 0.95), mx = pct(lat, nlat, 1.0);
        /* real time: the steps took less time than the audio and no backlog built up */
        const bool rt = busy < wall && p95 < 1000.0;
        printf("%7lld %9.1f %9.1f %9.1f %9.2f %9.2f %10.1f %8.0f %8.0f %9.1f %-5s\n", (long long)N, p50, p95, mx,
               steps_p50, steps_p95, rows / (double)(nsteps ? nsteps : 1), 100.0 * busy / wall, 100.0 * feed / wall,
               create_ms, rt ? "yes" : "NO");
        fflush(stdout);
    }
    for (int64_t i = 0; i < N; i++) {
        asr_stream_free(st[i]);
        asr_output_free(&out[i]);
    }
    asr_stream_pool_free(pool);
    free(st);
    free(ready);
    free(out);
    free(oo);
    free(phase);
    free(ended);
    free(lat);
    free(step_ms);
    return s == VKASR_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *model = NULL, *streams = "1,4,16";
    int lookahead = 0;
    double seconds = 10;
    vkasr_precision prec = VKASR_PRECISION_AUTO;
    bool profile = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--streams") == 0 && i + 1 < argc)
            streams = argv[++i];
        else if (strcmp(argv[i], "--lookahead") == 0 && i + 1 < argc)
            lookahead = atoi(argv[++i]);
        else if (strcmp(argv[i], "--profile") == 0)
            profile = true;
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
            ++i;
            prec = strcmp(argv[i], "f32") == 0 ? VKASR_PRECISION_F32 : VKASR_PRECISION_F16;
        } else if (!model)
            model = argv[i];
        else {
            fprintf(stderr, "usage: bench_streams MODEL [--streams N[,N...]] [--lookahead MS] [--seconds S] "
                            "[--precision f16|f32]\n");
            return 2;
        }
    }
    if (!model || !(seconds > 0)) {
        fprintf(stderr, "usage: bench_streams MODEL [--streams N[,N...]] [--lookahead MS] [--seconds S]\n");
        return 2;
    }
    vkasr_model_params mp = vkasr_model_params_default();
    mp.lookahead_ms = lookahead;
    mp.precision = prec;
    mp.profile = profile;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *vs = NULL;
    if (vkasr_model_load(model, &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &vs, &err) != VKASR_OK) {
        fprintf(stderr, "bench_streams: %s\n", err.message);
        vkasr_model_free(m);
        return 3;
    }
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    const size_t n_audio = (size_t)(seconds * VKASR_SAMPLE_RATE) + 16000;
    float *audio = malloc(n_audio * sizeof *audio);
    synthesize(audio, n_audio, 1);
    const struct model_config *c = &vs->model->am->cfg;
    printf("model %s on %s, %s, lookahead %d ms ([%d, %d]), %.0f s of audio per stream at real time\n", model,
           info.device_name, info.precision == VKASR_PRECISION_F16 ? "f16" : "f32",
           (c->ctx[c->ctx_sel][1] + 1) * 80, c->ctx[c->ctx_sel][0], c->ctx[c->ctx_sel][1], seconds);
    printf("%7s %9s %9s %9s %9s %9s %10s %8s %8s %9s %-5s\n", "streams", "p50 ms", "p95 ms", "max ms", "step p50",
           "step p95", "per step", "steps %", "mel %", "setup ms", "real time");
    int rc = 0;
    for (const char *p = streams; *p && rc == 0;) {
        long n = strtol(p, (char **)&p, 10);
        if (n < 1)
            break;
        if (profile)
            vkasr_session_profile_reset(vs);
        rc = run(vs, n, seconds, audio, n_audio);
        vkasr_op_profile ops[64];
        size_t nops = 0;
        if (profile && vkasr_session_profile(vs, ops, 64, &nops) == VKASR_OK) {
            double sum = 0;
            for (size_t k = 0; k < nops && k < 64; k++)
                sum += ops[k].gpu_ms;
            printf("        GPU %.0f ms in all:", sum);
            for (size_t k = 0; k < nops && k < 64; k++) /* the ops above 3 % */
                if (ops[k].gpu_ms > 0.03 * sum)
                    printf(" %s %.0f (%llu)", ops[k].name, ops[k].gpu_ms, (unsigned long long)ops[k].calls);
            printf("\n");
        }
        if (*p == ',')
            p++;
    }
    free(audio);
    vkasr_session_free(vs);
    vkasr_model_free(m);
    return rc;
}
