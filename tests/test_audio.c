/* test_audio.c — audio input (src/audio/audio_io.c): formats, channel mixing, resampling accuracy,
 * bit-exact 16 kHz input, memory == path, bad inputs with their statuses and messages. No GPU.
 * Fixtures: tests/data/audio (tools/make_test_audio.sh). Expected values come from the fixture
 * generator (frame counts), from an independent WAV parser below, or from analytic signals.
 * Modes: no arguments = all tests; `--stdin FILE [NAME]` = load NAME (default "-") with FILE on
 * standard input (ctest runs it through a redirect and through a pipe) and compare with FILE. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* tests/data/audio, from the command line (CTest passes it: the build tree may be moved). */
static const char *audio_dir = "";

/* The path of a file in audio_dir (a few rotating buffers: two may be used in one expression). */
static const char *A(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", audio_dir, name);
    return buf[k];
}

static int failures;

#define CHECK(cond, ...)                                                                               \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            failures++;                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
            fprintf(stderr, __VA_ARGS__);                                                              \
            fputc('\n', stderr);                                                                       \
        }                                                                                              \
    } while (0)

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (;;) {
        if (n == cap)
            b = realloc(b, cap *= 2);
        size_t r = fread(b + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *size = n;
    return b;
}

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Independent reader for 16-bit PCM WAV: returns int16 samples (interleaved), frames, channels. */
static int16_t *wav16(const char *path, size_t *frames, int *channels) {
    size_t size;
    unsigned char *b = read_file(path, &size);
    if (!b || size < 12 || memcmp(b, "RIFF", 4) || memcmp(b + 8, "WAVE", 4)) {
        free(b);
        return NULL;
    }
    int ch = 0, bits = 0;
    int16_t *out = NULL;
    for (size_t p = 12; p + 8 <= size;) {
        uint32_t len = le32(b + p + 4);
        if (!memcmp(b + p, "fmt ", 4)) {
            ch = b[p + 10] | b[p + 11] << 8;
            bits = b[p + 22] | b[p + 23] << 8;
        } else if (!memcmp(b + p, "data", 4) && ch > 0 && bits == 16) {
            size_t n = len / 2;
            out = malloc(n * 2 + 2);
            for (size_t i = 0; i < n; i++)
                out[i] = (int16_t)(b[p + 8 + 2 * i] | b[p + 9 + 2 * i] << 8);
            *frames = n / (size_t)ch;
            *channels = ch;
            break;
        }
        p += 8 + len + (len & 1);
    }
    free(b);
    return out;
}

static vkasr_status load(const char *path, int rate, struct audio *a, struct err *e) {
    err_clear(e);
    return audio_load_file(path, rate, a, e);
}

/* ---- formats ----------------------------------------------------------------------------------- */

struct fixture {
    const char *file;
    int rate, channels;
    size_t frames;
};

/* Frame counts printed by tools/make_test_audio.sh (and by soxi). */
static const struct fixture fixtures[] = {
    {"speech_16k_mono.wav", 16000, 1, 27572},   {"speech_16k_mono.aiff", 16000, 1, 27572},
    {"speech_16k_mono.opus", 16000, 1, 27572},  {"speech_44k_stereo.wav", 44100, 2, 75995},
    {"speech_44k_stereo.flac", 44100, 2, 75995}, {"speech_44k_stereo.ogg", 44100, 2, 75995},
    {"speech_44k_stereo.mp3", 44100, 2, 75995}, {"speech_8k_f32.wav", 8000, 1, 13786},
    {"silence_1s.wav", 16000, 1, 16000},        {"clipped.wav", 16000, 1, 8000},
    {"short_100.wav", 16000, 1, 100},           {"empty.wav", 16000, 1, 0},
    {"truncated.wav", 16000, 1, 4000},
};

/* Signal-to-error ratio (dB) of b against a over the overlap, allowing no shift. */
static double snr_db(const float *a, const float *b, size_t n) {
    double s = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)a[i] * a[i];
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    }
    return 10 * log10(s / (d > 0 ? d : 1e-300));
}

static void test_formats(void) {
    struct err e;
    for (size_t f = 0; f < sizeof fixtures / sizeof *fixtures; f++) {
        const struct fixture *fx = &fixtures[f];
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", audio_dir, fx->file);
        struct audio a;
        vkasr_status st = load(path, fx->rate, &a, &e);
        CHECK(st == VKASR_OK, "%s: %s", fx->file, e.msg);
        CHECK(a.source_rate == fx->rate && a.source_channels == fx->channels && a.rate == fx->rate,
              "%s: %d Hz %d ch", fx->file, a.source_rate, a.source_channels);
        CHECK(a.n == fx->frames, "%s: %zu frames, expected %zu", fx->file, a.n, fx->frames);
        CHECK((a.n == 0) == (a.samples == NULL), "%s: samples pointer vs n", fx->file);

        /* Same file from memory: identical samples. */
        size_t size = 0;
        unsigned char *img = read_file(path, &size);
        struct audio m;
        err_clear(&e);
        st = audio_load_memory(img, size, fx->file, fx->rate, &m, &e);
        CHECK(st == VKASR_OK && m.n == a.n && (a.n == 0 || !memcmp(m.samples, a.samples, a.n * sizeof(float))),
              "%s: memory decode differs from path decode (%s)", fx->file, e.msg);
        audio_free(&m);
        free(img);

        /* Resampled to 16 kHz: length is the rate ratio of the source length (soxr streams with
         * its delay compensated and flushed). */
        struct audio r;
        st = load(path, 16000, &r, &e);
        double want = (double)fx->frames * 16000.0 / fx->rate;
        CHECK(st == VKASR_OK && fabs((double)r.n - want) <= 1.0, "%s at 16 kHz: %zu samples, expected %.1f (%s)",
              fx->file, r.n, want, e.msg);
        CHECK(r.rate == 16000 && r.source_rate == fx->rate, "%s: rates %d/%d", fx->file, r.rate, r.source_rate);
        audio_free(&r);
        audio_free(&a);
    }

    /* Content: lossless formats equal the WAV exactly, lossy ones stay close. */
    struct audio w16, w44, x;
    load(A("speech_16k_mono.wav"), 16000, &w16, &e);
    load(A("speech_44k_stereo.wav"), 44100, &w44, &e);
    CHECK(load(A("speech_16k_mono.aiff"), 16000, &x, &e) == VKASR_OK && x.n == w16.n &&
              !memcmp(x.samples, w16.samples, x.n * sizeof(float)),
          "AIFF != WAV");
    audio_free(&x);
    CHECK(load(A("speech_44k_stereo.flac"), 44100, &x, &e) == VKASR_OK && x.n == w44.n &&
              !memcmp(x.samples, w44.samples, x.n * sizeof(float)),
          "FLAC != WAV");
    audio_free(&x);
    static const struct {
        const char *file;
        int stereo;
        double min_snr;
    } lossy[] = {{"speech_44k_stereo.ogg", 1, 10}, {"speech_44k_stereo.mp3", 1, 10}, {"speech_16k_mono.opus", 0, 10}};
    for (size_t i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", audio_dir, lossy[i].file);
        const struct audio *ref = lossy[i].stereo ? &w44 : &w16;
        if (load(path, ref->rate, &x, &e) != VKASR_OK || x.n != ref->n) {
            CHECK(0, "%s: %s", lossy[i].file, e.msg);
        } else {
            double snr = snr_db(ref->samples, x.samples, x.n);
            printf("%-24s SNR vs WAV %.1f dB\n", lossy[i].file, snr);
            CHECK(snr >= lossy[i].min_snr, "%s: SNR %.1f dB", lossy[i].file, snr);
        }
        audio_free(&x);
    }
    /* 8 kHz float: upsampled to 16 kHz it resembles the 16 kHz original (band-limited to 4 kHz). */
    if (load(A("speech_8k_f32.wav"), 16000, &x, &e) == VKASR_OK) {
        size_t n = x.n < w16.n ? x.n : w16.n;
        double snr = snr_db(w16.samples, x.samples, n);
        printf("%-24s SNR vs 16k WAV after 8k->16k %.1f dB\n", "speech_8k_f32.wav", snr);
        CHECK(snr >= 10, "8 kHz float WAV upsampled: SNR %.1f dB", snr);
    } else {
        CHECK(0, "speech_8k_f32.wav: %s", e.msg);
    }
    audio_free(&x);
    audio_free(&w16);
    audio_free(&w44);
}

/* 16 kHz input passes through untouched: samples are int16 / 32768 exactly (independent parser). */
static void test_bit_exact(void) {
    struct err e;
    size_t frames = 0;
    int ch = 0;
    int16_t *raw = wav16(A("speech_16k_mono.wav"), &frames, &ch);
    CHECK(raw && ch == 1 && frames == 27572, "independent WAV parse");
    struct audio a;
    CHECK(load(A("speech_16k_mono.wav"), 16000, &a, &e) == VKASR_OK, "%s", e.msg);
    size_t bad = 0;
    for (size_t i = 0; raw && i < frames && i < a.n; i++)
        bad += a.samples[i] != (float)raw[i] / 32768.0f;
    CHECK(a.n == frames && bad == 0, "16 kHz WAV not bit-exact: %zu of %zu samples differ", bad, frames);
    audio_free(&a);
    free(raw);

    /* Full-scale clipped square: exactly -1 and 32767/32768, nothing outside. */
    CHECK(load(A("clipped.wav"), 16000, &a, &e) == VKASR_OK, "%s", e.msg);
    float lo = 0, hi = 0;
    for (size_t i = 0; i < a.n; i++) {
        lo = fminf(lo, a.samples[i]);
        hi = fmaxf(hi, a.samples[i]);
    }
    CHECK(lo == -1.0f && hi == 32767.0f / 32768.0f, "clipped.wav range [%.9g, %.9g]", lo, hi);
    audio_free(&a);

    CHECK(load(A("silence_1s.wav"), 16000, &a, &e) == VKASR_OK && a.n == 16000, "%s", e.msg);
    for (size_t i = 0; i < a.n; i++)
        if (a.samples[i] != 0) {
            CHECK(0, "silence sample %zu = %g", i, a.samples[i]);
            break;
        }
    audio_free(&a);
}

/* Stereo -> mono is the mean of the channels (independent parser for the reference). */
static void test_mixdown(void) {
    struct err e;
    size_t frames = 0;
    int ch = 0;
    int16_t *raw = wav16(A("speech_44k_stereo.wav"), &frames, &ch);
    CHECK(raw && ch == 2, "independent WAV parse");
    struct audio a;
    CHECK(load(A("speech_44k_stereo.wav"), 44100, &a, &e) == VKASR_OK, "%s", e.msg);
    size_t bad = 0;
    double rl = 0, rr = 0;
    for (size_t i = 0; raw && i < frames && i < a.n; i++) {
        float l = (float)raw[2 * i] / 32768.0f, r = (float)raw[2 * i + 1] / 32768.0f;
        bad += a.samples[i] != (l + r) / 2;
        rl += fabs(l);
        rr += fabs(r);
    }
    CHECK(a.n == frames && bad == 0, "stereo mean: %zu of %zu samples differ", bad, frames);
    CHECK(rr > 0.4 * rl && rr < 0.6 * rl, "fixture right channel should be half the left (%g vs %g)", rr, rl);
    audio_free(&a);
    free(raw);

    /* Three channels through audio_from_pcm: mean of (1, 2, 6) = 3 (exact in float). */
    float pcm[3 * 5];
    for (int i = 0; i < 5; i++) {
        pcm[3 * i] = 0.125f * i;
        pcm[3 * i + 1] = 0.25f * i;
        pcm[3 * i + 2] = 0.75f * i;
    }
    CHECK(audio_from_pcm(pcm, 5, 16000, 3, 16000, &a, &e) == VKASR_OK && a.n == 5, "%s", e.msg);
    for (int i = 0; i < 5 && a.n == 5; i++)
        CHECK(a.samples[i] == 0.375f * i, "pcm mean[%d] = %g", i, a.samples[i]);
    CHECK(a.source_channels == 3 && a.source_rate == 16000, "pcm format");
    audio_free(&a);
}

/* 1 kHz sine at 44.1 kHz -> 16 kHz: amplitude within 1 %, frequency exact, length by the ratio. */
static void test_resample_sine(void) {
    struct err e;
    const int sr = 44100, n = 2 * sr;
    const double amp = 0.5, f0 = 1000;
    float *x = malloc(n * sizeof *x);
    for (int i = 0; i < n; i++)
        x[i] = (float)(amp * sin(2 * M_PI * f0 * i / sr));
    struct audio a;
    CHECK(audio_from_pcm(x, (size_t)n, sr, 1, 16000, &a, &e) == VKASR_OK, "%s", e.msg);
    CHECK(a.n == 32000, "resampled length %zu, expected 32000", a.n);
    if (a.n == 32000) {
        /* Middle second (away from the edges' filter transients). */
        size_t i0 = 8000, i1 = 24000;
        double ss = 0, maxerr = 0, re = 0, im = 0;
        int crossings = 0;
        for (size_t i = i0; i < i1; i++) {
            double v = a.samples[i], ideal = amp * sin(2 * M_PI * f0 * (double)i / 16000);
            ss += v * v;
            maxerr = fmax(maxerr, fabs(v - ideal));
            re += v * cos(2 * M_PI * f0 * (double)i / 16000);
            im += v * sin(2 * M_PI * f0 * (double)i / 16000);
            if (i > i0 && (a.samples[i - 1] < 0) != (v < 0))
                crossings++;
        }
        double rms_amp = sqrt(2 * ss / (double)(i1 - i0));
        double dft_amp = 2 * sqrt(re * re + im * im) / (double)(i1 - i0);
        double phase_deg = atan2(-re, im) * 180 / M_PI; /* 0 when aligned with the ideal sine */
        printf("resample 44.1k->16k 1 kHz sine: amplitude %.6f (rms) %.6f (DFT), max |err| vs ideal %.2e, "
               "phase %.4f deg, %d zero crossings/s\n",
               rms_amp, dft_amp, maxerr, phase_deg, crossings);
        CHECK(fabs(rms_amp / amp - 1) < 0.01 && fabs(dft_amp / amp - 1) < 0.01, "amplitude %g / %g", rms_amp,
              dft_amp);
        CHECK(crossings >= 1999 && crossings <= 2001, "zero crossings %d, expected 2000", crossings);
        /* The DFT bin at 1 kHz holds all the energy: a wrong frequency would leave it near 0. */
        CHECK(maxerr < 1e-3, "max error vs ideal sine %g (time alignment or aliasing)", maxerr);
    }
    audio_free(&a);

    /* Band edges: 7 kHz (inside the 16 kHz passband) keeps its amplitude; 10 kHz (above the new
     * Nyquist) is removed instead of aliasing to 6 kHz. */
    const double tones[2] = {7000, 10000};
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < n; i++)
            x[i] = (float)(amp * sin(2 * M_PI * tones[j] * i / sr));
        CHECK(audio_from_pcm(x, (size_t)n, sr, 1, 16000, &a, &e) == VKASR_OK && a.n == 32000, "%s", e.msg);
        double ss = 0;
        for (size_t i = 8000; i < 24000 && a.n == 32000; i++)
            ss += (double)a.samples[i] * a.samples[i];
        double level = sqrt(2 * ss / 16000) / amp;
        printf("resample 44.1k->16k %.0f Hz sine: relative level %.3g\n", tones[j], level);
        if (j == 0)
            CHECK(fabs(level - 1) < 0.01, "7 kHz level %g", level);
        else
            CHECK(level < 1e-4, "10 kHz not rejected: level %g", level);
        audio_free(&a);
    }
    free(x);
}

/* ---- bad inputs ------------------------------------------------------------------------------- */

static void expect_fail(const char *what, vkasr_status st, vkasr_status want, const struct err *e,
                        const char *needle1, const char *needle2) {
    CHECK(st == want, "%s: status %d (%s), expected %d", what, st, e->msg, want);
    CHECK(!needle1 || strstr(e->msg, needle1), "%s: message '%s' lacks '%s'", what, e->msg, needle1);
    CHECK(!needle2 || strstr(e->msg, needle2), "%s: message '%s' lacks '%s'", what, e->msg, needle2);
    printf("%-22s -> %s\n", what, e->msg);
}

/* Canonical WAV header with the given format and a data-chunk size that may lie. */
static void wav_header(unsigned char *h, int fmt, int bits, uint32_t data_bytes) {
    int block = bits / 8;
    uint32_t riff = data_bytes > 0xFFFFFFFFu - 36 ? 0xFFFFFFFFu : 36 + data_bytes;
    memcpy(h, "RIFF", 4);
    for (int i = 0; i < 4; i++)
        h[4 + i] = (unsigned char)(riff >> (8 * i));
    memcpy(h + 8, "WAVEfmt ", 8);
    const uint32_t v[] = {16, (uint32_t)fmt | 1u << 16, 16000, 16000u * (uint32_t)block,
                          (uint32_t)block | (uint32_t)bits << 16};
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 4; i++)
            h[16 + 4 * k + i] = (unsigned char)(v[k] >> (8 * i));
    memcpy(h + 36, "data", 4);
    for (int i = 0; i < 4; i++)
        h[40 + i] = (unsigned char)(data_bytes >> (8 * i));
}

static void test_bad_inputs(void) {
    struct err e;
    struct audio a;
    vkasr_status st;

    st = load(A("no_such_file.wav"), 16000, &a, &e);
    expect_fail("missing file", st, VKASR_ERR_IO, &e, "no_such_file.wav", "No such file");
    st = load(A("not_audio.wav"), 16000, &a, &e);
    expect_fail("text file", st, VKASR_ERR_AUDIO, &e, "not_audio.wav", "not recognised");
    st = load(A("nan_f32.wav"), 16000, &a, &e);
    expect_fail("NaN sample", st, VKASR_ERR_AUDIO, &e, "nan_f32.wav", "sample 1234 ");
    CHECK(a.n == 0 && a.samples == NULL, "failed load leaves an empty audio");
    st = load(A("nan_f32.wav"), 8000, &a, &e); /* same answer on the resampling path */
    expect_fail("NaN sample resampled", st, VKASR_ERR_AUDIO, &e, "nan_f32.wav", "NaN");
    /* finite samples near FLT_MAX overflow the resampler's filter (found by tests/fuzz/fuzz_audio.c;
     * its input is tests/data/fuzz/audio/resample_overflow_f32.wav) */
    float huge[256];
    for (int i = 0; i < 256; i++)
        huge[i] = FLT_MAX;
    err_clear(&e);
    st = audio_from_pcm(huge, 256, 8000, 1, 16000, &a, &e);
    expect_fail("resampler overflow", st, VKASR_ERR_AUDIO, &e, "PCM input", "overflowed");
    st = load(audio_dir, 16000, &a, &e);
    expect_fail("directory", st, VKASR_ERR_IO, &e, audio_dir, "directory");
    st = audio_load_memory("", 0, "zero.wav", 16000, &a, &e);
    expect_fail("0-byte input", st, VKASR_ERR_AUDIO, &e, "zero.wav", "empty");
    st = audio_load_memory("RIFF1234WAVEjunkjunk", 20, "junk.wav", 16000, &a, &e);
    expect_fail("malformed header", st, VKASR_ERR_AUDIO, &e, "junk.wav", NULL);
    err_clear(&e);
    st = audio_load_file(NULL, 16000, &a, &e);
    expect_fail("NULL path", st, VKASR_ERR_INVALID_ARG, &e, NULL, NULL);
    st = load(A("speech_16k_mono.wav"), 0, &a, &e);
    expect_fail("target rate 0", st, VKASR_ERR_INVALID_ARG, &e, "speech_16k_mono.wav", NULL);
    float pcm[4] = {0, 0.5f, INFINITY, 0};
    err_clear(&e);
    st = audio_from_pcm(pcm, 2, 16000, 2, 16000, &a, &e);
    expect_fail("inf in PCM", st, VKASR_ERR_AUDIO, &e, "sample 1 (channel 0", "infinite");
    err_clear(&e);
    st = audio_from_pcm(pcm, 4, 0, 1, 16000, &a, &e);
    expect_fail("PCM rate 0", st, VKASR_ERR_INVALID_ARG, &e, NULL, NULL);
    /* Mono at the target rate: checked and borrowed, not copied (audio_free leaves the caller's array). */
    float mono[3] = {0.25f, -1.5f, 3.0f};
    err_clear(&e);
    st = audio_from_pcm(mono, 3, 16000, 1, 16000, &a, &e);
    CHECK(st == VKASR_OK && a.n == 3 && a.samples == mono && a.rate == 16000 && a.source_channels == 1,
          "mono PCM at the target rate: status %d, %zu samples, %s (%s)", st, a.n,
          a.samples == mono ? "borrowed" : "copied", e.msg);
    audio_free(&a);
    mono[1] = NAN;
    st = audio_from_pcm(mono, 3, 16000, 1, 16000, &a, &e);
    expect_fail("NaN in mono PCM", st, VKASR_ERR_AUDIO, &e, "sample 1 (channel 0", "NaN");

    /* A header claiming 4 GiB of data with 1000 samples present: decodes what is there, allocates
     * only for that. */
    size_t n = 1000;
    unsigned char *img = calloc(1, 44 + 2 * n);
    wav_header(img, 1, 16, 0xFFFFFFF0u);
    for (size_t i = 0; i < n; i++)
        img[44 + 2 * i + 1] = 0x40; /* 0x4000 = 16384 -> 0.5 */
    err_clear(&e);
    st = audio_load_memory(img, 44 + 2 * n, "huge_claim.wav", 16000, &a, &e);
    CHECK(st == VKASR_OK && a.n == n && a.samples[0] == 0.5f && a.samples[n - 1] == 0.5f,
          "huge-claim WAV: status %d, %zu samples (%s)", st, a.n, e.msg);
    audio_free(&a);
    free(img);

    /* Float WAV values beyond [-1, 1] are kept (no clipping in the loader). */
    float big[4] = {1.5f, -2.0f, 0.25f, 100.0f};
    img = calloc(1, 44 + sizeof big);
    wav_header(img, 3, 32, sizeof big);
    memcpy(img + 44, big, sizeof big); /* little-endian host assumed (x86, ARM) */
    err_clear(&e);
    st = audio_load_memory(img, 44 + sizeof big, "loud.wav", 16000, &a, &e);
    CHECK(st == VKASR_OK && a.n == 4 && !memcmp(a.samples, big, sizeof big), "float WAV beyond [-1,1] altered (%s)",
          e.msg);
    audio_free(&a);
    free(img);

    /* Sample rates below 1 kHz are refused: a 2.4 KB WAV declaring 1 Hz decoded to ten minutes of audio
     * (found by tests/fuzz/fuzz_audio.c: tests/data/fuzz/audio/rate_1hz_stereo.wav). 1000 Hz is fine. */
    n = 100;
    img = calloc(1, 44 + 2 * n);
    wav_header(img, 1, 16, (uint32_t)(2 * n));
    for (uint32_t rate = 999; rate <= 1000; rate++) {
        for (int i = 0; i < 4; i++) {
            img[24 + i] = (unsigned char)(rate >> (8 * i));
            img[28 + i] = (unsigned char)((2 * rate) >> (8 * i));
        }
        err_clear(&e);
        st = audio_load_memory(img, 44 + 2 * n, "low_rate.wav", 16000, &a, &e);
        if (rate == 999)
            expect_fail("999 Hz WAV", st, VKASR_ERR_AUDIO, &e, "low_rate.wav", "999 Hz");
        else
            CHECK(st == VKASR_OK && a.source_rate == 1000 && a.n >= 1590 && a.n <= 1610,
                  "1000 Hz WAV: status %d, %zu samples (%s)", st, a.n, e.msg);
        audio_free(&a);
    }
    free(img);
    float quiet[10] = {0};
    err_clear(&e);
    st = audio_from_pcm(quiet, 10, 999, 1, 16000, &a, &e);
    expect_fail("999 Hz PCM", st, VKASR_ERR_INVALID_ARG, &e, "PCM input", "999 Hz");

    /* Empty PCM and an empty WAV resampled: OK with nothing. */
    err_clear(&e);
    CHECK(audio_from_pcm(NULL, 0, 44100, 2, 16000, &a, &e) == VKASR_OK && a.n == 0 && !a.samples, "%s", e.msg);
    CHECK(load(A("empty.wav"), 16000, &a, &e) == VKASR_OK && a.n == 0, "%s", e.msg);
    audio_free(&a);
    audio_free(&a); /* double free of a cleared audio is harmless */
}

static int stdin_mode(const char *file, const char *name) {
    struct err e;
    struct audio a, b;
    err_clear(&e);
    vkasr_status st = audio_load_file(name, 16000, &a, &e);
    CHECK(st == VKASR_OK, "%s: %s", name, e.msg);
    CHECK(load(file, 16000, &b, &e) == VKASR_OK, "%s: %s", file, e.msg);
    CHECK(st != VKASR_OK || (a.n == b.n && a.n > 0 && !memcmp(a.samples, b.samples, a.n * sizeof(float))),
          "%s differs from %s (%zu vs %zu samples)", name, file, a.n, b.n);
    printf("%s: %zu samples, equal to %s\n", name, a.n, file);
    audio_free(&a);
    audio_free(&b);
    return failures ? 1 : 0;
}

/* Loads on several threads at once (the CLI decodes the next files ahead while the library decodes
 * one; the batch API decodes on up to 8 threads). A failed open must neither disturb another thread's
 * file (libsndfile's sf_open_fd closed the descriptor on failure and vkasr closed the number again,
 * which could be another thread's file by then) nor report another file's reason (libsndfile keeps
 * open errors in one library-global value: "No Error.", or a different format's). Two threads load a
 * text file and two load good files, over and over: every text-file load must fail with its own
 * reason, and every good-file load must succeed. */
enum { RACE_ROUNDS = 500 };
struct race {
    const char *path;
    bool bad;
    int wrong; /* failures whose message lacks the bad file's reason, or good files that failed */
};
static void *race_loads(void *arg) {
    struct race *r = arg;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        struct audio a = {0};
        struct err e = {0};
        const vkasr_status st = audio_load_file(r->path, 16000, &a, &e);
        if (r->bad ? st != VKASR_ERR_AUDIO || !strstr(e.msg, "not recognised") : st != VKASR_OK) {
            if (r->wrong++ == 0)
                fprintf(stderr, "%s: status %d: %s\n", r->path, st, e.msg);
        }
        audio_free(&a);
    }
    return NULL;
}
static void test_concurrent_errors(void) {
    struct race r[4] = {{A("not_audio.wav"), true, 0},
                        {A("speech_16k_mono.wav"), false, 0},
                        {A("not_audio.wav"), true, 0},
                        {A("speech_44k_stereo.flac"), false, 0}};
    pthread_t th[4];
    int started = 0;
    for (; started < 4; started++)
        if (pthread_create(&th[started], NULL, race_loads, &r[started]) != 0)
            break;
    CHECK(started == 4, "could start only %d threads", started);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < started; i++)
        CHECK(r[i].wrong == 0, "%s on 4 threads: %d of %d loads reported the wrong result", r[i].path, r[i].wrong,
              RACE_ROUNDS);
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--stdin"))
        return stdin_mode(argv[2], argc >= 4 ? argv[3] : "-");
    if (argc != 2) {
        fprintf(stderr, "usage: test_audio AUDIO_DIR | test_audio --stdin FILE [PATH]\n");
        return 2;
    }
    audio_dir = argv[1];
    test_formats();
    test_bit_exact();
    test_mixdown();
    test_resample_sine();
    test_bad_inputs();
    test_concurrent_errors();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all audio checks passed\n");
    return failures ? 1 : 0;
}
