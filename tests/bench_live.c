/* bench_live.c — live transcription figures (a benchmark, not a test): held-out clips concatenated into a
 * few minutes of audio (tests/live_harness.h), transcribed offline in one call and live through a stream
 * fed at real time; prints both WERs against the references, the live text's differences from the
 * offline one, the finalisation latency (median, 95th percentile, max) and the compute per audio second.
 *
 * usage: bench_live MODEL CLIP_DIR [--rounds N] [--speed X] [--hop S] [--left S] [--right S]
 *                   [--no-catch-up] [--device D] [--repeat N] [--text]
 *   --rounds: passes over the clips (default 8: a few minutes with the committed clips); --speed 1
 *   (default) feeds at real time: the latency figures mean something only then (0: as fast as possible);
 *   --repeat: live runs after the offline one; --text prints the reference, offline and live texts. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live_harness.h"
#include "vkasr.h"
#include "wer.h"

static void usage(void) {
    fprintf(stderr, "usage: bench_live MODEL CLIP_DIR [--rounds N] [--speed X] [--hop S] [--left S] [--right S]\n"
                    "                  [--no-catch-up] [--device D] [--repeat N] [--text]\n");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        usage();
        return 2;
    }
    const char *model_path = argv[1], *dir = argv[2], *device = NULL;
    int rounds = 8, repeat = 1;
    bool show_text = false;
    double speed = 1.0;
    vkasr_stream_params sp = vkasr_stream_params_default();
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-catch-up")) {
            sp.catch_up = false;
            continue;
        }
        if (!strcmp(a, "--text")) {
            show_text = true;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--rounds"))
            rounds = atoi(v);
        else if (!strcmp(a, "--speed"))
            speed = atof(v);
        else if (!strcmp(a, "--hop"))
            sp.hop_seconds = atof(v);
        else if (!strcmp(a, "--left"))
            sp.left_context_seconds = atof(v);
        else if (!strcmp(a, "--right"))
            sp.right_context_seconds = atof(v);
        else if (!strcmp(a, "--device"))
            device = v;
        else if (!strcmp(a, "--repeat"))
            repeat = atoi(v);
        else {
            usage();
            return 2;
        }
    }
    char msg[1024];
    struct live_audio audio;
    if (live_audio_build(dir, rounds, &audio, msg, sizeof msg) != 0) {
        fprintf(stderr, "bench_live: %s\n", msg);
        return 1;
    }
    double dur = (double)audio.n / VKASR_SAMPLE_RATE;
    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = device;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    double t = live_now();
    if (vkasr_model_load(model_path, &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &s, &err) != VKASR_OK) {
        fprintf(stderr, "bench_live: %s\n", err.message);
        vkasr_model_free(m);
        live_audio_free(&audio);
        return 1;
    }
    double load_s = live_now() - t;
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    printf("model %s (%.1fM parameters, %s) on %s; model load %.2f s\n", model_path, info.n_params / 1e6,
           info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", info.device_name, load_s);
    printf("audio: %zu clips from %s, %.1f s\n", audio.clips, dir, dur);

    /* offline: the whole recording in one call (the first call also creates the pipelines) */
    const vkasr_result *r = NULL;
    int rc = 0;
    char *offline = NULL;
    for (int k = 0; k < 2 && rc == 0; k++) {
        t = live_now();
        if (vkasr_transcribe_pcm(s, audio.samples, audio.n, VKASR_SAMPLE_RATE, 1, NULL, &r) != VKASR_OK) {
            fprintf(stderr, "bench_live: offline: %s\n", vkasr_session_last_error(s));
            rc = 1;
            break;
        }
        printf("offline %s: %.3f s (RTF %.4f)\n", k ? "again" : "first call", live_now() - t, (live_now() - t) / dur);
    }
    struct wer_counts off = {0}, lw = {0}, diff = {0};
    if (rc == 0) {
        offline = strdup(vkasr_result_text(r));
        wer_count(audio.ref, offline, &off);
        printf("offline WER %.2f%% (S %zu D %zu I %zu of %zu words)\n", 100 * wer_rate(off.errors, off.ref_words),
               off.sub, off.del, off.ins, off.ref_words);
    }
    printf("stream: hop %.2f s, left %.2f s, right %.2f s, catch-up %s, fed at %s\n", sp.hop_seconds,
           sp.left_context_seconds, sp.right_context_seconds, sp.catch_up ? "on" : "off",
           speed > 0 ? (speed == 1 ? "real time" : "a multiple of real time") : "full speed");
    for (int k = 0; k < repeat && rc == 0; k++) {
        struct live_result lr;
        if (live_run(s, audio.samples, audio.n, sp, speed, &lr) != VKASR_OK) {
            fprintf(stderr, "bench_live: live: %s\n", lr.error);
            rc = 1;
        } else {
            wer_count(audio.ref, lr.text, &lw);
            wer_count(offline, lr.text, &diff);
            printf("live WER %.2f%% (S %zu D %zu I %zu), %+.2f points vs offline; vs the offline text: S %zu D %zu "
                   "I %zu of %zu words\n",
                   100 * wer_rate(lw.errors, lw.ref_words), lw.sub, lw.del, lw.ins,
                   100 * (wer_rate(lw.errors, lw.ref_words) - wer_rate(off.errors, off.ref_words)), diff.sub,
                   diff.del, diff.ins, diff.ref_words);
            if (show_text)
                printf("ref:     %s\noffline: %s\nlive:    %s\n", audio.ref, offline, lr.text);
            const vkasr_stream_stats *st = &lr.stats;
            printf("windows %llu, %.2f s of audio each on average (%.1fx the audio); compute %.3f s per audio "
                   "second\n",
                   (unsigned long long)st->windows, st->windows ? st->window_seconds / (double)st->windows : 0.0,
                   st->window_seconds / dur, st->compute_seconds / dur);
            if (speed > 0 && lr.n_latency) {
                size_t n = lr.n_latency;
                double med = live_quantile(lr.latency, n, 0.5), p95 = live_quantile(lr.latency, n, 0.95);
                printf("finalisation latency over %zu words: median %.3f s, p95 %.3f s, max %.3f s%s\n", n, med, p95,
                       lr.latency[n - 1], speed != 1 ? " (wall seconds at this speed)" : "");
            }
        }
        live_result_free(&lr);
    }
    free(offline);
    vkasr_session_free(s);
    vkasr_model_free(m);
    live_audio_free(&audio);
    return rc;
}
