/* test_api.c — the public API's contract on the tiny random-weight models (lavapipe): argument and
 * file errors, device selection errors, edge-case audio, audio from memory, PCM vs file input, features,
 * abort with partial results, progress, segment callbacks, one model shared by concurrent sessions,
 * params struct versioning, stage taps and teacher forcing, and that every failure leaves a message
 * naming what failed.
 * usage: test_api DATA_DIR (tests/data) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "fixture_io.h"
#include "validation_log.h"
#include "vkasr.h"
#include "vkasr_debug.h"

static const char *data;

static const char *path(const char *fmt, ...) {
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ % 8];
    int n = snprintf(p, 4096, "%s/", data);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p + n, 4096 - (size_t)n, fmt, ap);
    va_end(ap);
    return p;
}

static vkasr_model *load(const char *dir, vkasr_precision prec) {
    vkasr_model_params mp = vkasr_model_params_default();
    mp.validation = tv_wanted();
    mp.log_callback = tv_log; /* any validation report fails the run (tv_check in main) */
    mp.precision = prec;
    vkasr_model *m = NULL;
    vkasr_error e;
    vkasr_status st = vkasr_model_load(dir, &mp, &m, &e);
    EXPECT(st == VKASR_OK && m, "load %s: %s", dir, e.message);
    return m;
}

/* A copy of a result's token ids (results die with the next call). */
struct ids {
    int32_t v[4096];
    size_t n;
};

static void take_ids(const vkasr_result *r, struct ids *out) {
    size_t n;
    const vkasr_token *t = vkasr_result_tokens(r, &n);
    out->n = n < 4096 ? n : 4096;
    for (size_t i = 0; i < out->n; i++)
        out->v[i] = t[i].id;
}

static void test_errors(void) {
    vkasr_error e;
    vkasr_model *m = (vkasr_model *)1;
    EXPECT(vkasr_model_load(NULL, NULL, &m, &e) == VKASR_ERR_INVALID_ARG && m == NULL, "NULL path");
    EXPECT(strlen(e.message) > 0, "message for NULL path");
    vkasr_status st = vkasr_model_load(path("no/such/model"), NULL, &m, &e);
    EXPECT(st != VKASR_OK && m == NULL && strstr(e.message, "no/such/model"), "missing model: %d %s", st, e.message);
    st = vkasr_model_load(path("malformed/gguf_bad_magic.gguf"), NULL, &m, &e);
    EXPECT(st == VKASR_ERR_MODEL && strstr(e.message, "gguf_bad_magic.gguf"), "malformed: %d %s", st, e.message);
    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = "99";
    st = vkasr_model_load(path("tiny/tdt"), &mp, &m, &e);
    EXPECT(st == VKASR_ERR_NO_DEVICE && strstr(e.message, "99"), "device 99: %d %s", st, e.message);
    mp.device = "no-such-gpu-name";
    st = vkasr_model_load(path("tiny/tdt"), &mp, &m, &e);
    EXPECT(st == VKASR_ERR_NO_DEVICE && strstr(e.message, "no-such-gpu-name"), "device name: %d %s", st, e.message);
    mp = vkasr_model_params_default();
    mp.precision = (vkasr_precision)9;
    EXPECT(vkasr_model_load(path("tiny/tdt"), &mp, &m, &e) == VKASR_ERR_INVALID_ARG, "bad precision");
    mp = vkasr_model_params_default();
    mp.stream_slots = -1;
    st = vkasr_model_load(path("tiny/tdt"), &mp, &m, &e);
    EXPECT(st == VKASR_ERR_INVALID_ARG && strstr(e.message, "stream_slots"), "stream_slots -1: %d %s", st, e.message);
    vkasr_model_free(NULL);
    vkasr_session_free(NULL);
    vkasr_session *s = (vkasr_session *)1;
    EXPECT(vkasr_session_create(NULL, &s, &e) == VKASR_ERR_INVALID_ARG && s == NULL, "NULL model");
    EXPECT(strcmp(vkasr_status_string(VKASR_ERR_AUDIO), "invalid or unsupported audio") == 0, "status string");
    EXPECT(vkasr_version_number() == VKASR_VERSION_NUMBER, "version %d", vkasr_version_number());
}

static void test_audio_edge_cases(vkasr_session *s) {
    const vkasr_result *r = NULL;
    vkasr_status st = vkasr_transcribe_file(s, path("audio/empty.wav"), NULL, &r);
    size_t n = 99;
    EXPECT(st == VKASR_OK && r && strcmp(vkasr_result_text(r), "") == 0 && vkasr_result_tokens(r, &n) && n == 0,
           "empty: %d %s", st, vkasr_session_last_error(s));
    st = vkasr_transcribe_file(s, path("audio/short_100.wav"), NULL, &r);
    EXPECT(st == VKASR_OK && r && vkasr_result_duration(r) < 0.01, "100 samples: %d %s", st, vkasr_session_last_error(s));
    st = vkasr_transcribe_file(s, path("audio/silence_1s.wav"), NULL, &r);
    EXPECT(st == VKASR_OK && r && fabs(vkasr_result_duration(r) - 1.0) < 1e-3, "silence: %d %s", st,
           vkasr_session_last_error(s));
    st = vkasr_transcribe_file(s, path("audio/clipped.wav"), NULL, &r);
    EXPECT(st == VKASR_OK, "clipped: %d %s", st, vkasr_session_last_error(s));
    st = vkasr_transcribe_file(s, path("audio/nan_f32.wav"), NULL, &r);
    EXPECT(st == VKASR_ERR_AUDIO && r == NULL && strstr(vkasr_session_last_error(s), "nan_f32.wav"), "NaN: %d %s", st,
           vkasr_session_last_error(s));
    st = vkasr_transcribe_file(s, path("audio/not_audio.wav"), NULL, &r);
    EXPECT(st == VKASR_ERR_AUDIO && strstr(vkasr_session_last_error(s), "not_audio.wav"), "not audio: %d", st);
    st = vkasr_transcribe_file(s, path("audio/missing.wav"), NULL, &r);
    EXPECT(st == VKASR_ERR_IO && strstr(vkasr_session_last_error(s), "missing.wav"), "missing: %d", st);
    float x[4] = {0};
    EXPECT(vkasr_transcribe_pcm(s, x, 4, 0, 1, NULL, &r) == VKASR_ERR_INVALID_ARG, "rate 0");
    EXPECT(vkasr_transcribe_pcm(s, NULL, 4, 16000, 1, NULL, &r) == VKASR_ERR_INVALID_ARG, "NULL samples");
    EXPECT(vkasr_transcribe_pcm(s, x, 0, 16000, 1, NULL, &r) == VKASR_OK, "zero frames");
    x[2] = NAN;
    EXPECT(vkasr_transcribe_pcm(s, x, 4, 16000, 1, NULL, &r) == VKASR_ERR_AUDIO, "NaN pcm");
}

/* A whole file's bytes (NULL on failure, reported). */
static unsigned char *read_bytes(const char *file, size_t *size) {
    *size = 0;
    unsigned char *b = (unsigned char *)fixture_read_file(file, size);
    EXPECT(b, "read %s", file);
    return b;
}

/* vkasr_audio_load_memory: the bytes of a file decode to the file path's samples, bit for bit (a 16 kHz
 * mono WAV, also checked against its own 16-bit PCM data / 32768, and a 44.1 kHz stereo FLAC, mixed and
 * resampled); bad input fails with a message naming "audio bytes". */
static void test_audio_memory(void) {
    static const char *const files[] = {"audio/speech_16k_mono.wav", "audio/speech_44k_stereo.flac"};
    vkasr_error e;
    for (int f = 0; f < 2; f++) {
        size_t size, nf = 0, nm = 0;
        unsigned char *bytes = read_bytes(path("%s", files[f]), &size);
        float *xf = NULL, *xm = NULL;
        EXPECT(vkasr_audio_load(path("%s", files[f]), &xf, &nf, &e) == VKASR_OK, "%s: %s", files[f], e.message);
        EXPECT(bytes && vkasr_audio_load_memory(bytes, size, &xm, &nm, &e) == VKASR_OK && e.message[0] == '\0',
               "%s from memory: %s", files[f], e.message);
        EXPECT(xf && xm && nf == nm && nf > 16000 && memcmp(xf, xm, nf * sizeof *xf) == 0,
               "%s: memory = file (%zu, %zu samples)", files[f], nm, nf);
        if (f == 0 && bytes && xm && size > 44 && !memcmp(bytes + 36, "data", 4)) {
            /* the canonical 44-byte header of this fixture, then little-endian 16-bit samples */
            size_t n = (size - 44) / 2, bad = n;
            for (size_t i = 0; i < n && i < nm && bad == n; i++) {
                int16_t v = (int16_t)(bytes[44 + 2 * i] | bytes[45 + 2 * i] << 8);
                if (xm[i] != (float)v / 32768.0f)
                    bad = i;
            }
            EXPECT(nm == n && bad == n, "memory WAV = its PCM / 32768 (%zu samples, first difference %zu)", nm, bad);
        }
        vkasr_free(xf);
        vkasr_free(xm);
        free(bytes);
    }
    float *x = (float *)1;
    size_t n = 1;
    static const char garbage[] = "This is a text file, not a WAV file.\n";
    vkasr_status st = vkasr_audio_load_memory(garbage, sizeof garbage - 1, &x, &n, &e);
    EXPECT(st == VKASR_ERR_AUDIO && e.status == st && x == NULL && n == 0 &&
               strncmp(e.message, "audio bytes: ", 13) == 0 && strstr(e.message, "ecognised"),
           "garbage bytes: %d %s", st, e.message);
    st = vkasr_audio_load_memory(garbage, 0, &x, &n, &e);
    EXPECT(st == VKASR_ERR_AUDIO && x == NULL && strstr(e.message, "audio bytes: empty input (0 bytes)"),
           "size 0: %d %s", st, e.message);
    st = vkasr_audio_load_memory(NULL, 0, &x, &n, &e);
    EXPECT(st == VKASR_ERR_AUDIO && strstr(e.message, "audio bytes: empty"), "NULL, 0: %d %s", st, e.message);
    st = vkasr_audio_load_memory(NULL, 10, &x, &n, &e);
    EXPECT(st == VKASR_ERR_INVALID_ARG && strstr(e.message, "audio bytes: NULL data with size 10"),
           "NULL with size 10: %d %s", st, e.message);
    st = vkasr_audio_load_memory(garbage, SIZE_MAX, &x, &n, &e);
    EXPECT(st == VKASR_ERR_AUDIO && strstr(e.message, "audio bytes: input too large"), "SIZE_MAX bytes: %d %s", st,
           e.message);
    st = vkasr_audio_load_memory(garbage, sizeof garbage, NULL, &n, &e);
    EXPECT(st == VKASR_ERR_INVALID_ARG && strstr(e.message, "audio bytes") && strstr(e.message, "out_samples"),
           "NULL output: %d %s", st, e.message);
    /* a valid WAV of 0 frames is no error: no samples */
    size_t size;
    unsigned char *empty = read_bytes(path("audio/empty.wav"), &size);
    x = (float *)1;
    st = vkasr_audio_load_memory(empty, size, &x, &n, &e);
    EXPECT(st == VKASR_OK && x == NULL && n == 0, "0-frame WAV: %d %s", st, e.message);
    free(empty);
}

/* The WAV's samples, read through the same public API path as a file, compared with PCM input. */
static void test_pcm_matches_file(vkasr_session *s) {
    const vkasr_result *r = NULL;
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = true;
    EXPECT(vkasr_session_set_debug(s, &dp) == VKASR_OK, "keep features");
    vkasr_status st = vkasr_transcribe_file(s, path("audio/speech_16k_mono.wav"), NULL, &r);
    EXPECT(vkasr_session_set_debug(s, NULL) == VKASR_OK, "debug params cleared");
    EXPECT(st == VKASR_OK, "file: %s", vkasr_session_last_error(s));
    if (st != VKASR_OK)
        return;
    struct ids a;
    take_ids(r, &a);
    size_t fr, dim, efr, edim;
    const float *mel = vkasr_result_mel(r, &fr, &dim);
    const float *enc = vkasr_result_encoder(r, &efr, &edim);
    double dur = vkasr_result_duration(r);
    EXPECT(mel && fr == (size_t)(dur * 16000 + 0.5) / 160 && dim == 16, "mel [%zu, %zu]", fr, dim);
    EXPECT(enc && efr == (fr + 7) / 8 && edim == 16, "encoder [%zu, %zu] for %zu mel frames", efr, edim, fr);
    /* features gone once the debug params are cleared */
    st = vkasr_transcribe_file(s, path("audio/speech_16k_mono.wav"), NULL, &r);
    EXPECT(st == VKASR_OK && vkasr_result_mel(r, &fr, &dim) == NULL && fr == 0, "no features by default");
    /* stereo 44.1 kHz of the same speech goes through mixing and resampling */
    st = vkasr_transcribe_file(s, path("audio/speech_44k_stereo.wav"), NULL, &r);
    EXPECT(st == VKASR_OK && fabs(vkasr_result_duration(r) - dur) < 0.01, "44.1k stereo: %s", vkasr_session_last_error(s));
    /* PCM input of a synthetic stereo signal equals the same mono signal */
    size_t n = 16000;
    float *mono = malloc(n * sizeof *mono), *st2 = malloc(2 * n * sizeof *st2);
    for (size_t i = 0; i < n; i++) {
        mono[i] = 0.3f * sinf((float)i * 0.05f) + 0.1f * sinf((float)i * 0.31f);
        st2[2 * i] = st2[2 * i + 1] = mono[i];
    }
    struct ids b, c;
    EXPECT(vkasr_transcribe_pcm(s, mono, n, 16000, 1, NULL, &r) == VKASR_OK, "pcm mono");
    take_ids(r, &b);
    EXPECT(vkasr_transcribe_pcm(s, st2, n, 16000, 2, NULL, &r) == VKASR_OK, "pcm stereo");
    take_ids(r, &c);
    EXPECT(b.n == c.n && memcmp(b.v, c.v, b.n * 4) == 0, "stereo of identical channels = mono (%zu vs %zu)", b.n, c.n);
    free(mono);
    free(st2);
}

struct progress_log {
    int calls;
    float last;
    bool monotonic;
    int polls, abort_after;
};

static void on_progress(const vkasr_progress *p, void *ud) {
    struct progress_log *l = ud;
    if (p->fraction + 1e-6f < l->last)
        l->monotonic = false;
    l->last = p->fraction;
    l->calls++;
}

static bool on_abort(void *ud) {
    struct progress_log *l = ud;
    return ++l->polls > l->abort_after;
}

static void test_progress_and_abort(vkasr_model *m) {
    vkasr_session *s = NULL;
    vkasr_error e;
    EXPECT(vkasr_session_create(m, &s, &e) == VKASR_OK, "session: %s", e.message);
    const char *wav = path("audio/speech_44k_stereo.wav");
    const vkasr_result *r = NULL;
    struct progress_log pl = {.monotonic = true, .abort_after = 1 << 30};
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.progress_callback = on_progress;
    tp.progress_user_data = &pl;
    tp.abort_callback = on_abort;
    tp.abort_user_data = &pl;
    EXPECT(vkasr_transcribe_file(s, wav, &tp, &r) == VKASR_OK, "full run: %s", vkasr_session_last_error(s));
    EXPECT(pl.calls >= 3 && pl.monotonic && fabsf(pl.last - 1.0f) < 1e-6f, "progress: %d calls, last %g", pl.calls,
           pl.last);
    struct ids full;
    take_ids(r, &full);
    int total_polls = pl.polls;
    EXPECT(total_polls >= 2 && full.n > 0, "polls %d, tokens %zu", total_polls, full.n);
    EXPECT(!vkasr_result_partial(r), "a complete run's result is marked partial");
    /* abort at every poll position: ABORTED, a result with a prefix of the full token list */
    for (int k = 0; k < total_polls; k++) {
        struct progress_log al = {.monotonic = true, .abort_after = k};
        tp.progress_user_data = &al;
        tp.abort_user_data = &al;
        vkasr_status st = vkasr_transcribe_file(s, wav, &tp, &r);
        EXPECT(st == VKASR_ABORTED && r, "abort after %d polls: status %d", k, st);
        EXPECT(strstr(vkasr_session_last_error(s), "abort") != NULL, "abort message: %s", vkasr_session_last_error(s));
        EXPECT(vkasr_result_partial(r), "an aborted run's result (abort after %d polls) is not marked partial", k);
        if (r) {
            struct ids part;
            take_ids(r, &part);
            EXPECT(part.n <= full.n && memcmp(part.v, full.v, part.n * 4) == 0, "partial tokens (%zu of %zu) are a prefix",
                   part.n, full.n);
        }
    }
    /* the session stays usable after aborted calls: the next full run gives the same tokens */
    tp.progress_user_data = tp.abort_user_data = &(struct progress_log){.monotonic = true, .abort_after = 1 << 30};
    EXPECT(vkasr_transcribe_file(s, wav, &tp, &r) == VKASR_OK, "a full run after aborted ones: %s",
           vkasr_session_last_error(s));
    if (r) {
        struct ids again;
        take_ids(r, &again);
        EXPECT(again.n == full.n && memcmp(again.v, full.v, full.n * 4) == 0, "tokens after aborted runs differ");
    }
    vkasr_session_free(s);
}

struct seg_log {
    int calls;
    size_t next_index;
    bool in_order;
    char text[64][256];
};

static void on_segment(const vkasr_result *partial, size_t index, void *ud) {
    struct seg_log *l = ud;
    size_t n;
    const vkasr_segment *segs = vkasr_result_segments(partial, &n);
    if (index != l->next_index || index >= n)
        l->in_order = false;
    if (index < 64 && index < n)
        snprintf(l->text[index], sizeof l->text[index], "%s", segs[index].text);
    l->next_index = index + 1;
    l->calls++;
}

static void test_segments(vkasr_session *s) {
    struct seg_log sl = {.in_order = true};
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.segment_callback = on_segment;
    tp.segment_user_data = &sl;
    const vkasr_result *r = NULL;
    EXPECT(vkasr_transcribe_file(s, path("audio/speech_44k_stereo.wav"), &tp, &r) == VKASR_OK, "segments run");
    size_t n;
    const vkasr_segment *segs = vkasr_result_segments(r, &n);
    EXPECT(sl.in_order && (size_t)sl.calls == n, "%d callbacks for %zu segments", sl.calls, n);
    for (size_t i = 0; i < n && i < 64; i++)
        EXPECT(strcmp(sl.text[i], segs[i].text) == 0, "segment %zu: callback \"%s\", final \"%s\"", i, sl.text[i],
               segs[i].text);
    /* words and segments cover the tokens in order, times are ordered */
    size_t nw, nt;
    const vkasr_word *w = vkasr_result_words(r, &nw);
    vkasr_result_tokens(r, &nt);
    size_t next_tok = 0;
    for (size_t i = 0; i < nw; i++) {
        EXPECT(w[i].first_token == next_tok && w[i].n_tokens > 0 && w[i].start <= w[i].end, "word %zu", i);
        next_tok = w[i].first_token + w[i].n_tokens;
    }
    EXPECT(next_tok == nt, "words cover %zu of %zu tokens", next_tok, nt);
}

/* One shared model, several sessions on threads: identical results. */
struct worker {
    vkasr_model *m;
    const char *file; /* made before the threads start: path() shares its buffers */
    struct ids ids;
    vkasr_status st;
};

static void *work(void *arg) {
    struct worker *w = arg;
    vkasr_session *s = NULL;
    vkasr_error e;
    w->st = vkasr_session_create(w->m, &s, &e);
    for (int rep = 0; rep < 3 && w->st == VKASR_OK; rep++) {
        const vkasr_result *r = NULL;
        w->st = vkasr_transcribe_file(s, w->file, NULL, &r);
        if (w->st == VKASR_OK)
            take_ids(r, &w->ids);
    }
    vkasr_session_free(s);
    return NULL;
}

static void test_threads(vkasr_model *m) {
    struct worker ws[3];
    pthread_t th[3];
    const char *file = path("audio/speech_44k_stereo.wav");
    for (int i = 0; i < 3; i++) {
        ws[i] = (struct worker){.m = m, .file = file};
        pthread_create(&th[i], NULL, work, &ws[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        EXPECT(ws[i].st == VKASR_OK, "thread %d: %d", i, ws[i].st);
        EXPECT(ws[i].ids.n == ws[0].ids.n && memcmp(ws[i].ids.v, ws[0].ids.v, ws[0].ids.n * 4) == 0,
               "thread %d tokens differ", i);
    }
}

/* What the stage taps of one run delivered. */
struct tap_log {
    vkasr_model_info info;
    char names[64][16];            /* the stages before the decoder, in order                   */
    int64_t index[64];
    size_t nnames;
    float *mel, *enc, *last_layer;
    size_t mel_n, enc_n, layer_n;
    vkasr_decoder_step steps[4096];
    size_t nsteps;
    bool contiguous, argmax, logits_last;
};

static float *keep_copy(const vkasr_stage *st, size_t *n) {
    *n = st->rows * st->cols;
    float *c = malloc(*n * sizeof *c + 4);
    if (c)
        memcpy(c, st->data, *n * sizeof *c);
    return c;
}

/* Whether column c is a maximum of row[lo, hi). */
static bool row_max(const float *row, size_t lo, size_t hi, long long c) {
    if (c < (long long)lo || c >= (long long)hi)
        return false;
    for (size_t j = lo; j < hi; j++)
        if (row[j] > row[c])
            return false;
    return true;
}

static void on_stage(const vkasr_stage *st, void *ud) {
    struct tap_log *t = ud;
    const vkasr_model_info *mi = &t->info;
    if (strcmp(st->name, "logits") != 0) {
        t->logits_last &= t->nsteps == 0;
        if (t->nnames < 64) {
            snprintf(t->names[t->nnames], 16, "%s", st->name);
            t->index[t->nnames++] = st->index;
        }
        if (!strcmp(st->name, "mel"))
            t->mel = keep_copy(st, &t->mel_n);
        else if (!strcmp(st->name, "encoder"))
            t->enc = keep_copy(st, &t->enc_n);
        else if (!strcmp(st->name, "layer") && st->index == mi->n_layers - 1)
            t->last_layer = keep_copy(st, &t->layer_n);
        return;
    }
    const size_t V1 = (size_t)mi->vocab_size + 1;
    t->contiguous &= st->index == (int64_t)t->nsteps && st->steps && st->cols == V1 + (size_t)mi->n_durations;
    for (size_t i = 0; i < st->rows && t->contiguous; i++) {
        const float *row = st->data + i * st->cols;
        const vkasr_decoder_step *c = &st->steps[i];
        bool ok = row_max(row, 0, V1, c->token);
        if (mi->head == VKASR_HEAD_TDT) {
            int j = 0;
            while (j < mi->n_durations && mi->durations[j] != c->duration)
                j++;
            ok &= row_max(row, V1, st->cols, (long long)(V1 + (size_t)j));
        }
        t->argmax &= ok;
        if (t->nsteps < 4096)
            t->steps[t->nsteps++] = *c;
    }
}

static void tap_log_free(struct tap_log *t) {
    free(t->mel);
    free(t->enc);
    free(t->last_layer);
}

/* Stage taps and teacher forcing (vkasr compare's mechanism): the stages arrive in order, the mel and
 * encoder taps equal the result's features bit for bit and the encoder the last layer's output, each
 * decoder step's choice is the argmax of its logits (checked here on the host) and the emitted steps are
 * the result's tokens; taps change nothing; forcing a run with its own steps changes nothing, forcing
 * another token puts it in the result, and forced steps at the wrong frame are refused. */
static void test_stage_taps(vkasr_model *m) {
    vkasr_session *s = NULL;
    vkasr_error e;
    if (vkasr_session_create(m, &s, &e) != VKASR_OK)
        return;
    struct tap_log *t = calloc(1, sizeof *t);
    vkasr_model_get_info(m, &t->info);
    t->contiguous = t->argmax = t->logits_last = true;
    const vkasr_model_info *mi = &t->info;
    const char *wav = path("audio/speech_16k_mono.wav");
    struct ids plain, tapped, forced;
    const vkasr_result *r = NULL;
    EXPECT(vkasr_transcribe_file(s, wav, NULL, &r) == VKASR_OK, "untapped run");
    take_ids(r, &plain);
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = true;
    dp.stage_callback = on_stage;
    dp.stage_user_data = t;
    EXPECT(vkasr_session_set_debug(s, &dp) == VKASR_OK, "taps set: %s", vkasr_session_last_error(s));
    EXPECT(vkasr_transcribe_file(s, wav, NULL, &r) == VKASR_OK, "tapped run: %s", vkasr_session_last_error(s));
    take_ids(r, &tapped);
    EXPECT(plain.n == tapped.n && memcmp(plain.v, tapped.v, plain.n * 4) == 0, "taps change the tokens");
    /* order: mel, subsampling, layer 0 .. n-1, encoder, then only logits */
    bool order = t->nnames == (size_t)mi->n_layers + 3 && !strcmp(t->names[0], "mel") &&
                 !strcmp(t->names[1], "subsampling") && !strcmp(t->names[t->nnames - 1], "encoder") && t->logits_last;
    for (int i = 0; order && i < mi->n_layers; i++)
        order = !strcmp(t->names[2 + i], "layer") && t->index[2 + i] == i;
    EXPECT(order, "stage order (%zu stages)", t->nnames);
    size_t fr, dim, efr, edim;
    const float *mel = vkasr_result_mel(r, &fr, &dim), *enc = vkasr_result_encoder(r, &efr, &edim);
    EXPECT(t->mel && mel && t->mel_n == fr * dim && memcmp(t->mel, mel, fr * dim * 4) == 0, "mel tap = result mel");
    EXPECT(t->enc && enc && t->enc_n == efr * edim && memcmp(t->enc, enc, efr * edim * 4) == 0,
           "encoder tap = result encoder");
    EXPECT(t->last_layer && t->enc && t->layer_n == t->enc_n && memcmp(t->last_layer, t->enc, t->enc_n * 4) == 0,
           "encoder tap = last layer tap");
    EXPECT(t->contiguous && t->nsteps > 0, "logits steps numbered from 0 with choices (%zu)", t->nsteps);
    EXPECT(t->argmax, "every step's choice is the argmax of its logits");
    /* the emitted steps are the tokens (CTC: frame argmaxes, repeats collapsed) */
    size_t nt, k = 0;
    const vkasr_token *tok = vkasr_result_tokens(r, &nt);
    bool same = true;
    for (size_t i = 0; i < t->nsteps && same; i++) {
        const vkasr_decoder_step *c = &t->steps[i];
        if (c->token == mi->vocab_size || (mi->head == VKASR_HEAD_CTC && i > 0 && t->steps[i - 1].token == c->token))
            continue;
        same = k < nt && tok[k].id == c->token && tok[k].frame == c->frame &&
               (mi->head != VKASR_HEAD_TDT || tok[k].duration == c->duration);
        k++;
    }
    EXPECT(same && k == nt, "emitted steps = result tokens (%zu of %zu)", k, nt);
    /* batches take kept features, but neither taps nor forcing */
    const vkasr_batch_input in = {.path = wav};
    EXPECT(vkasr_transcribe_batch(s, &in, 1, NULL, NULL, &r) == VKASR_ERR_INVALID_ARG &&
               strstr(vkasr_session_last_error(s), "stage callbacks"),
           "batch with taps: %s", vkasr_session_last_error(s));
    /* teacher forcing with its own steps: the same tokens */
    vkasr_debug_params fp = vkasr_debug_params_default();
    fp.forced_steps = t->steps;
    fp.n_forced_steps = t->nsteps;
    EXPECT(vkasr_session_set_debug(s, &fp) == VKASR_OK &&
               vkasr_transcribe_file(s, wav, NULL, &r) == VKASR_OK && vkasr_result_mel(r, NULL, NULL) == NULL,
           "forced run, taps and features off: %s", vkasr_session_last_error(s));
    take_ids(r, &forced);
    EXPECT(forced.n == plain.n && memcmp(forced.v, plain.v, plain.n * 4) == 0, "forced with its own steps");
    if (mi->head != VKASR_HEAD_CTC) {
        /* another token at step 0 comes out first */
        vkasr_decoder_step one = t->steps[0];
        one.token = one.token == 0 ? 1 : 0;
        fp.forced_steps = &one;
        fp.n_forced_steps = 1;
        EXPECT(vkasr_session_set_debug(s, &fp) == VKASR_OK, "forcing set");
        EXPECT(vkasr_transcribe_file(s, wav, NULL, &r) == VKASR_OK && vkasr_result_tokens(r, &nt) && nt > 0 &&
                   vkasr_result_tokens(r, &nt)[0].id == one.token &&
                   vkasr_result_tokens(r, &nt)[0].frame == one.frame,
               "forced token %d at step 0", one.token);
        one = t->steps[0];
        one.frame++;
        EXPECT(vkasr_transcribe_file(s, wav, NULL, &r) == VKASR_ERR_INVALID_ARG &&
                   strstr(vkasr_session_last_error(s), "frame"),
               "forced step at the wrong frame: %s", vkasr_session_last_error(s));
    }
    fp.forced_steps = NULL;
    EXPECT(vkasr_session_set_debug(s, &fp) == VKASR_ERR_INVALID_ARG &&
               strstr(vkasr_session_last_error(s), "forced_steps"),
           "n_forced_steps without steps: %s", vkasr_session_last_error(s));
    EXPECT(vkasr_session_set_debug(NULL, NULL) == VKASR_ERR_INVALID_ARG, "NULL session");
    tap_log_free(t);
    free(t);
    vkasr_session_free(s);
}

/* A caller built against an older header passes a smaller struct: fields past it are defaults. */
static void test_params_versioning(vkasr_session *s) {
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.attention = VKASR_ATTENTION_LOCAL;
    tp.attention_window = -1; /* out of range: refused when read */
    tp.struct_size = (uint32_t)offsetof(vkasr_transcribe_params, attention);
    const vkasr_result *r = NULL;
    EXPECT(vkasr_transcribe_file(s, path("audio/speech_16k_mono.wav"), &tp, &r) == VKASR_OK &&
               vkasr_result_attention(r, NULL) == VKASR_ATTENTION_FULL,
           "transcribe params beyond struct_size ignored: %s", vkasr_session_last_error(s));
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = true;
    dp.struct_size = (uint32_t)offsetof(vkasr_debug_params, keep_features);
    size_t fr = 1;
    EXPECT(vkasr_session_set_debug(s, &dp) == VKASR_OK &&
               vkasr_transcribe_file(s, path("audio/speech_16k_mono.wav"), NULL, &r) == VKASR_OK &&
               vkasr_result_mel(r, &fr, NULL) == NULL && fr == 0,
           "debug params beyond struct_size ignored");
    vkasr_session_set_debug(s, NULL);
}

static void test_info(vkasr_model *m, vkasr_head head) {
    vkasr_model_info info;
    EXPECT(vkasr_model_get_info(m, &info) == VKASR_OK, "info");
    EXPECT(info.head == head && info.d_model == 16 && info.n_layers == 2 && info.n_mels == 16 && info.n_params > 0 &&
               info.precision != VKASR_PRECISION_AUTO && info.device_name[0],
           "info for head %d", (int)head);
    /* on a CPU exactly where the device listing says the model's device is one (the reference backend,
     * which the listing leaves out, is) */
    vkasr_device_info dev[16];
    size_t n = 0;
    vkasr_error err;
    bool cpu = true;
    if (vkasr_list_devices(dev, 16, &n, &err) == VKASR_OK)
        for (size_t i = 0; i < n && i < 16; i++)
            if (!strcmp(dev[i].name, info.device_name)) {
                cpu = !strcmp(dev[i].type, "cpu");
                break;
            }
    EXPECT(vkasr_model_on_cpu(m) == cpu, "vkasr_model_on_cpu on %s: want %d", info.device_name, (int)cpu);
    EXPECT(!vkasr_model_on_cpu(NULL), "vkasr_model_on_cpu(NULL)");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_api DATA_DIR\n");
        return 2;
    }
    data = argv[1];
    test_errors();
    test_audio_memory();
    static const char *const heads[] = {"tdt", "rnnt", "ctc"};
    for (int h = 0; h < 3; h++) {
        vkasr_model *m = load(path("tiny/%s", heads[h]), h == 1 ? VKASR_PRECISION_F16 : VKASR_PRECISION_F32);
        if (!m)
            continue;
        test_info(m, (vkasr_head)h);
        vkasr_session *s = NULL;
        vkasr_error e;
        EXPECT(vkasr_session_create(m, &s, &e) == VKASR_OK, "session: %s", e.message);
        test_audio_edge_cases(s);
        test_pcm_matches_file(s);
        test_segments(s);
        test_params_versioning(s);
        vkasr_session_free(s);
        test_progress_and_abort(m);
        test_threads(m);
        test_stage_taps(m);
        vkasr_model_free(m);
    }
    failures += tv_check();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
