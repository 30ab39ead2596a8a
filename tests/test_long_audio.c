/* test_long_audio.c — long audio and memory plans through the public API (lavapipe, validation on; the
 * CUDA backend in the _cuda variants):
 *  - the attention choice: auto is full for short input and local [128, 128] past auto_full_seconds,
 *    full and local[:W] when asked, reported by vkasr_result_attention; bad parameters are refused;
 *  - max_memory: a cap that forces smaller chunks gives the same tokens and, bit for bit, the same
 *    encoder output, and the call's planned and held device memory stay under it; a cap not above the
 *    weights, or below what the smallest chunks need, fails with VKASR_ERR_DEVICE_MEMORY and a message
 *    naming the bytes, and the session transcribes again afterwards;
 *  - with LONG_SECONDS: that much audio (WAV repeated) in one call completes with local attention,
 *    inside its plan, and transcribes the repeated speech all the way to the end;
 *  - with `memory`: only the max_memory checks, on the first 6 s (for models whose attention choice
 *    the default model's run already covers).
 * usage: test_long_audio MODEL WAV [LONG_SECONDS | memory] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "expect.h"
#include "validation_log.h"
#include "vkasr.h"
#include "vkasr_debug.h"

struct run {
    vkasr_status st;
    char msg[1024];
    char *text;
    size_t ntokens;
    int32_t *ids;
    float *enc;
    size_t frames, dim;
    vkasr_timings tm;
    vkasr_attention att;
    int window;
    double last_end;
};

static void run_free(struct run *r) {
    free(r->text);
    free(r->ids);
    free(r->enc);
    memset(r, 0, sizeof *r);
}

static struct run transcribe(vkasr_session *s, const float *pcm, size_t n, const vkasr_transcribe_params *tp) {
    struct run o = {0};
    const vkasr_result *r = NULL;
    o.st = vkasr_transcribe_pcm(s, pcm, n, VKASR_SAMPLE_RATE, 1, tp, &r);
    snprintf(o.msg, sizeof o.msg, "%s", vkasr_session_last_error(s));
    if (o.st != VKASR_OK)
        return o;
    o.text = strdup(vkasr_result_text(r));
    const vkasr_token *t = vkasr_result_tokens(r, &o.ntokens);
    o.ids = malloc((o.ntokens + 1) * sizeof *o.ids);
    for (size_t i = 0; o.ids && i < o.ntokens; i++)
        o.ids[i] = t[i].id;
    const float *enc = vkasr_result_encoder(r, &o.frames, &o.dim);
    if (enc && (o.enc = malloc(o.frames * o.dim * sizeof *o.enc)))
        memcpy(o.enc, enc, o.frames * o.dim * sizeof *o.enc);
    o.tm = vkasr_result_timings(r);
    o.att = vkasr_result_attention(r, &o.window);
    size_t ns = 0;
    const vkasr_segment *sg = vkasr_result_segments(r, &ns);
    o.last_end = ns ? sg[ns - 1].end : 0.0;
    return o;
}

static double mib(uint64_t b) { return (double)b / 1048576.0; }

static void test_attention_choice(vkasr_session *s, const float *pcm, size_t n) {
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    struct run r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_OK && r.att == VKASR_ATTENTION_FULL && r.window == 0, "auto on %.1f s: %d/%d (%s)",
           (double)n / VKASR_SAMPLE_RATE, (int)r.att, r.window, r.msg);
    run_free(&r);
    tp.auto_full_seconds = 5.0; /* shorter than the input: auto switches to local, NeMo's 128 */
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_OK && r.att == VKASR_ATTENTION_LOCAL && r.window == 128, "auto past its threshold: %d/%d (%s)",
           (int)r.att, r.window, r.msg);
    run_free(&r);
    tp = vkasr_transcribe_params_default();
    tp.attention = VKASR_ATTENTION_LOCAL;
    tp.attention_window = 16;
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_OK && r.att == VKASR_ATTENTION_LOCAL && r.window == 16, "local:16: %d/%d (%s)", (int)r.att,
           r.window, r.msg);
    run_free(&r);
    tp.attention = VKASR_ATTENTION_FULL;
    tp.auto_full_seconds = 1.0; /* ignored: full was asked for */
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_OK && r.att == VKASR_ATTENTION_FULL, "full: %d (%s)", (int)r.att, r.msg);
    run_free(&r);
    tp = vkasr_transcribe_params_default();
    tp.attention = (vkasr_attention)7;
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_ERR_INVALID_ARG && strstr(r.msg, "attention"), "attention 7: %d (%s)", (int)r.st, r.msg);
    tp = vkasr_transcribe_params_default();
    tp.attention_window = -1;
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_ERR_INVALID_ARG && strstr(r.msg, "attention_window"), "window -1: %d (%s)", (int)r.st, r.msg);
    printf("attention: auto full, auto past threshold local 128, local 16, full, bad values refused\n");
}

static void test_max_memory(vkasr_session *s, const float *pcm, size_t n, uint64_t weights) {
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = true; /* encoder outputs compared between capped and uncapped runs */
    vkasr_session_set_debug(s, &dp);
    struct run free_run = transcribe(s, pcm, n, &tp);
    EXPECT(free_run.st == VKASR_OK && free_run.enc, "uncapped: %s", free_run.msg);
    if (free_run.st != VKASR_OK || !free_run.enc)
        return;
    const uint64_t planned = free_run.tm.planned_device_bytes, act = planned - weights;
    EXPECT(free_run.tm.peak_device_bytes == planned, "uncapped: held %.3f MiB, planned %.3f MiB",
           mib(free_run.tm.peak_device_bytes), mib(planned));
    /* a cap below the plan: it has to take smaller chunks. Half the activations; where a fixed part of
     * them cannot shrink (the CUDA backend's op scratch) less is taken away, halving the cut until a
     * plan fits */
    struct run capped = {0};
    for (uint64_t cut = act / 2; cut >= 4096; cut /= 2) {
        tp.max_memory = planned - cut;
        capped = transcribe(s, pcm, n, &tp);
        if (capped.st != VKASR_ERR_DEVICE_MEMORY)
            break;
        run_free(&capped);
    }
    EXPECT(capped.st == VKASR_OK, "cap %.3f MiB: %s", mib(tp.max_memory), capped.msg);
    if (capped.st == VKASR_OK) {
        EXPECT(capped.tm.planned_device_bytes <= tp.max_memory && capped.tm.peak_device_bytes <= tp.max_memory,
               "cap %.3f MiB: planned %.3f, held %.3f MiB", mib(tp.max_memory), mib(capped.tm.planned_device_bytes),
               mib(capped.tm.peak_device_bytes));
        EXPECT(capped.ntokens == free_run.ntokens && !memcmp(capped.ids, free_run.ids, capped.ntokens * sizeof *capped.ids),
               "cap %.3f MiB: tokens differ from the uncapped run", mib(tp.max_memory));
        EXPECT(capped.frames == free_run.frames && capped.enc &&
                   !memcmp(capped.enc, free_run.enc, capped.frames * capped.dim * sizeof *capped.enc),
               "cap %.3f MiB: encoder output differs from the uncapped run", mib(tp.max_memory));
        printf("max_memory: uncapped %.2f MiB planned; capped at %.2f MiB: %.2f MiB planned, same %zu tokens, same "
               "encoder output\n",
               mib(planned), mib(tp.max_memory), mib(capped.tm.planned_device_bytes), capped.ntokens);
    }
    run_free(&capped);
    /* not above the weights: refused before anything is allocated */
    vkasr_session_set_debug(s, NULL);
    tp.max_memory = weights / 2;
    struct run r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_ERR_DEVICE_MEMORY && strstr(r.msg, "weights") && strstr(r.msg, "MiB"),
           "cap below the weights: %d (%s)", (int)r.st, r.msg);
    printf("cap below the weights: %s\n", r.msg);
    /* above the weights, below what the smallest chunks need */
    tp.max_memory = weights + 64 * 1024;
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_ERR_DEVICE_MEMORY && strstr(r.msg, "needs") && strstr(r.msg, "available") &&
               strstr(r.msg, "max_memory"),
           "cap below the smallest chunks: %d (%s)", (int)r.st, r.msg);
    printf("cap below the smallest chunks: %s\n", r.msg);
    /* the session is intact */
    tp = vkasr_transcribe_params_default();
    r = transcribe(s, pcm, n, &tp);
    EXPECT(r.st == VKASR_OK && r.text && !strcmp(r.text, free_run.text), "after the failures: %s", r.msg);
    run_free(&r);
    run_free(&free_run);
}

/* Occurrences of the words of `needle_text` in `hay` (space-separated words). */
static size_t count_words(const char *hay, const char *needle_text) {
    size_t hits = 0;
    char *words = strdup(needle_text), *save = NULL;
    for (char *w = words ? strtok_r(words, " ", &save) : NULL; w; w = strtok_r(NULL, " ", &save)) {
        size_t len = strlen(w);
        for (const char *p = hay; (p = strstr(p, w)); p += len)
            if ((p == hay || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0'))
                hits++;
    }
    free(words);
    return hits;
}

static void test_long(vkasr_session *s, const float *pcm, size_t n, double seconds) {
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    struct run one = transcribe(s, pcm, n, &tp);
    const size_t total = (size_t)(seconds * VKASR_SAMPLE_RATE), reps = total / n;
    float *big = malloc(total * sizeof *big);
    EXPECT(big && one.st == VKASR_OK, "setup: %s", one.msg);
    if (!big || one.st != VKASR_OK) {
        free(big);
        run_free(&one);
        return;
    }
    for (size_t i = 0; i < total; i++)
        big[i] = pcm[i % n];
    struct run r = transcribe(s, big, total, &tp);
    EXPECT(r.st == VKASR_OK, "%.0f s in one call: %s", seconds, r.msg);
    if (r.st == VKASR_OK) {
        EXPECT(r.att == VKASR_ATTENTION_LOCAL && r.window == 128, "%.0f s: attention %d/%d, want local 128", seconds,
               (int)r.att, r.window);
        EXPECT(r.tm.peak_device_bytes == r.tm.planned_device_bytes, "%.0f s: held %.1f MiB, planned %.1f MiB", seconds,
               mib(r.tm.peak_device_bytes), mib(r.tm.planned_device_bytes));
        /* the clip's words come back about once per repetition, and speech is found up to the end */
        size_t per = count_words(one.text, one.text), got = count_words(r.text, one.text);
        EXPECT(got >= per * reps * 8 / 10, "%.0f s: %zu word hits, want >= 80 %% of %zu x %zu", seconds, got, reps, per);
        EXPECT(r.last_end > seconds - 30.0, "%.0f s: the last segment ends at %.1f s", seconds, r.last_end);
        printf("long: %.0f s (%zu repetitions) in %.1f s, local attention w = %d, %.1f MiB planned and held, %zu "
               "word hits of %zu expected, last segment ends at %.1f s\n",
               seconds, reps, r.tm.total_ms / 1e3, r.window, mib(r.tm.planned_device_bytes), got, per * reps,
               r.last_end);
    }
    run_free(&r);
    run_free(&one);
    free(big);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: test_long_audio MODEL WAV [LONG_SECONDS | memory]\n");
        return 2;
    }
    struct audio a = {0};
    struct err ae = {0};
    if (audio_load_file(argv[2], VKASR_SAMPLE_RATE, &a, &ae) != VKASR_OK || a.n == 0) {
        printf("FAIL: %s: %s\n", argv[2], ae.msg);
        return 1;
    }
    vkasr_model_params mp = vkasr_model_params_default();
    mp.validation = tv_wanted();
    mp.log_callback = tv_log;
    vkasr_model *m = NULL;
    vkasr_error e;
    vkasr_session *s = NULL;
    if (vkasr_model_load(argv[1], &mp, &m, &e) != VKASR_OK || vkasr_session_create(m, &s, &e) != VKASR_OK) {
        printf("FAIL: %s: %s\n", argv[1], e.message);
        vkasr_model_free(m);
        audio_free(&a);
        return 1;
    }
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    /* 6 s are enough to cross a 5 s threshold and to chunk */
    const size_t n6 = a.n < 6 * VKASR_SAMPLE_RATE ? a.n : 6 * VKASR_SAMPLE_RATE;
    if (argc == 4 && !strcmp(argv[3], "memory")) {
        test_max_memory(s, a.samples, n6, info.weight_bytes);
    } else if (argc == 4) {
        test_long(s, a.samples, a.n, atof(argv[3]));
    } else {
        test_attention_choice(s, a.samples, n6);
        test_max_memory(s, a.samples, a.n, info.weight_bytes);
    }
    vkasr_session_free(s);
    vkasr_model_free(m);
    audio_free(&a);
    failures += tv_check();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
