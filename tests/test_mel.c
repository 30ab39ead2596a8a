/* test_mel.c — host mel front end (src/audio/mel.c): window and filterbank against the spec's spot
 * values (§1.3), frame counts, and the double-precision reference: framing checked against a naive
 * DFT written here from the spec's formula, a tone's mel bin, normalisation statistics, L = 1 and
 * L = 0. No GPU. (Parity with transformers' feature extractor comes from GPU-generated fixtures.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mel_reference.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

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

static struct mel_config cfg(int n_mels) {
    struct mel_config c = {16000, 512, 400, 160, n_mels, 0.97f};
    return c;
}

static int close_rel(double got, double want, double rel) { return fabs(got - want) <= rel * fabs(want); }

/* Deterministic pseudo-random numbers in [-1, 1) (xorshift; no libc rand state). */
static double rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

static void test_window(void) {
    struct mel_config c = cfg(128);
    float w[400];
    mel_window(&c, w);
    double sum = 0;
    for (int i = 0; i < 400; i++)
        sum += w[i];
    CHECK(w[0] == 0.0f && w[399] == 0.0f, "endpoints %g %g", w[0], w[399]);
    CHECK(close_rel(w[1], 6.19933e-05, 1e-5), "w[1] = %.9g", w[1]);
    CHECK(w[199] == w[200] && fabs(w[199] - 0.9999845) < 1e-7, "w[199] = %.9g, w[200] = %.9g", w[199], w[200]);
    CHECK(fabs(sum - 199.5) < 1e-4, "sum = %.9g", sum);
    int asym = 0;
    for (int i = 0; i < 400; i++)
        asym += fabsf(w[i] - w[399 - i]) > 6e-8f;
    CHECK(asym == 0, "window not symmetric at %d taps", asym);
}

struct spot {
    int M, row, first, last;
    double v[4];
    int nv;
};

/* Spec §1.3 table (the spec's own evaluation of librosa's algorithm). */
static const struct spot spots[] = {
    {128, 0, 1, 1, {0.0283775423}, 1},
    {128, 1, 1, 2, {0.0143890083, 0.0139885349}, 2},
    {128, 64, 54, 56, {0.0112167057, 0.0188182835, 0.000649144524}, 3},
    {128, 127, 244, 255, {4.76413406e-05, 0.000939419959}, 2},
    {80, 0, 1, 2, {0.0225345604, 0.00863771047}, 2},
    {80, 40, 54, 57, {0.00715944124, 0.0144441761, 0.00876147859, 0.00175120181}, 4},
    {80, 79, 238, 255, {0.000337596139, 0.000701915182}, 2},
};

static void test_filterbank(void) {
    struct err e;
    for (int pass = 0; pass < 2; pass++) {
        int M = pass ? 80 : 128;
        struct mel_config c = cfg(M);
        float *fb = malloc((size_t)M * 257 * sizeof *fb);
        err_clear(&e);
        CHECK(mel_filterbank(&c, fb, &e) == VKASR_OK, "%s", e.msg);
        for (size_t s = 0; s < sizeof spots / sizeof *spots; s++) {
            if (spots[s].M != M)
                continue;
            const float *row = fb + (size_t)spots[s].row * 257;
            int first = -1, last = -1;
            for (int k = 0; k < 257; k++)
                if (row[k] != 0) {
                    if (first < 0)
                        first = k;
                    last = k;
                }
            CHECK(first == spots[s].first && last == spots[s].last, "M=%d row %d: non-zero bins %d..%d, spec %d..%d", M,
                  spots[s].row, first, last, spots[s].first, spots[s].last);
            for (int j = 0; j < spots[s].nv; j++)
                CHECK(close_rel(row[spots[s].first + j], spots[s].v[j], 1e-6), "M=%d row %d bin %d: %.9g, spec %.9g", M,
                      spots[s].row, spots[s].first + j, row[spots[s].first + j], spots[s].v[j]);
        }
        int bad = 0;
        double area_sum = 0;
        for (int i = 0; i < M; i++) {
            bad += fb[(size_t)i * 257] != 0 || fb[(size_t)i * 257 + 256] != 0;
            double area = 0;
            int nz = 0;
            for (int k = 0; k < 257; k++) {
                bad += !(fb[(size_t)i * 257 + k] >= 0);
                area += fb[(size_t)i * 257 + k] * 31.25;
                nz += fb[(size_t)i * 257 + k] != 0;
            }
            /* Slaney norm: each triangle has unit area in Hz. Sampled every 31.25 Hz the sum is off by
             * up to ~1/(bins covered); the errors alternate, so the upper half averages to ~1. */
            if (i >= M / 2) {
                CHECK(fabs(area - 1) < 1.5 / (nz + 1), "M=%d row %d: area %g over %d bins", M, i, area, nz);
                area_sum += area;
            }
        }
        CHECK(fabs(area_sum / (M - M / 2) - 1) < 0.01, "M=%d: mean area of the upper filters %g", M,
              area_sum / (M - M / 2));
        CHECK(bad == 0, "M=%d: %d rows with weight at bin 0 / 256 or negative weights", M, bad);
        free(fb);
    }
    struct mel_config c = cfg(128);
    c.n_fft = 0;
    float dummy[1];
    err_clear(&e);
    CHECK(mel_filterbank(&c, dummy, &e) == VKASR_ERR_INVALID_ARG && strstr(e.msg, "n_fft"), "bad n_fft: %s", e.msg);
}

static void test_frames(void) {
    struct mel_config c = cfg(128);
    const int64_t cases[][2] = {{16000, 100}, {0, 0}, {-5, 0}, {159, 0}, {160, 1}, {319, 1},
                                {320, 2},     {16001, 100}, {27572, 172}, {(int64_t)1 << 40, ((int64_t)1 << 40) / 160}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(mel_frames(&c, cases[i][0]) == cases[i][1], "mel_frames(%lld) = %lld, expected %lld",
              (long long)cases[i][0], (long long)mel_frames(&c, cases[i][0]), (long long)cases[i][1]);
}

/* Log-mel of frame t written straight from spec §1.2: naive DFT, window formula evaluated here. */
static void naive_logmel(const struct mel_config *c, const float *fb, const float *x, int64_t n, int64_t t,
                         double *out) {
    int nfft = c->n_fft, win = c->win_length, nb = nfft / 2 + 1, off = (nfft - win) / 2;
    double *seg = malloc(nfft * sizeof *seg), *p = malloc(nb * sizeof *p);
    for (int m = 0; m < nfft; m++) {
        int64_t s = t * c->hop - nfft / 2 + m;
        double y = 0;
        if (s >= 0 && s < n)
            y = s == 0 ? x[0] : (double)x[s] - (double)c->preemph * x[s - 1];
        double w = (m >= off && m < off + win) ? (float)(0.5 - 0.5 * cos(2 * M_PI * (m - off) / (win - 1))) : 0;
        seg[m] = y * w;
    }
    for (int k = 0; k < nb; k++) {
        double re = 0, im = 0;
        for (int m = 0; m < nfft; m++) {
            re += seg[m] * cos(2 * M_PI * (double)k * m / nfft);
            im -= seg[m] * sin(2 * M_PI * (double)k * m / nfft);
        }
        p[k] = re * re + im * im;
    }
    for (int i = 0; i < c->n_mels; i++) {
        double acc = 0;
        for (int k = 0; k < nb; k++)
            acc += fb[(size_t)i * nb + k] * p[k];
        out[i] = log(acc + 5.9604644775390625e-08);
    }
    free(seg);
    free(p);
}

static void check_against_naive(struct mel_config c, int64_t n, const char *what) {
    struct err e;
    int M = c.n_mels, nb = c.n_fft / 2 + 1;
    uint64_t seed = 12345;
    float *x = malloc(n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(0.3 * rnd(&seed) + 0.2 * sin(0.05 * i));
    int64_t L = mel_frames(&c, n);
    float *lm = malloc((size_t)L * M * sizeof *lm), *fb = malloc((size_t)M * nb * sizeof *fb);
    double *ref = malloc(M * sizeof *ref);
    err_clear(&e);
    CHECK(mel_filterbank(&c, fb, &e) == VKASR_OK && mel_reference_logmel(&c, x, n, lm, &e) == VKASR_OK, "%s: %s",
          what, e.msg);
    const int64_t ts[] = {0, 1, 2, L / 2, L - 2, L - 1};
    double worst = 0;
    for (size_t j = 0; j < sizeof ts / sizeof *ts; j++) {
        naive_logmel(&c, fb, x, n, ts[j], ref);
        for (int i = 0; i < M; i++)
            worst = fmax(worst, fabs(lm[(size_t)ts[j] * M + i] - ref[i]));
    }
    printf("%s: log-mel vs naive DFT, max |diff| %.2e over 6 frames\n", what, worst);
    CHECK(worst < 1e-5, "%s: log-mel differs from the naive DFT by %g", what, worst);
    free(x);
    free(lm);
    free(fb);
    free(ref);
}

static void test_reference(void) {
    struct err e;
    struct mel_config c = cfg(128);

    /* Framing, pre-emphasis, window placement, power and mel against the spec formula. */
    check_against_naive(c, 8000 + 77, "n_fft 512, M 128");
    struct mel_config c80 = cfg(80);
    check_against_naive(c80, 4000, "n_fft 512, M 80");
    struct mel_config codd = cfg(80);
    codd.n_fft = 500; /* exercises the direct-DFT path */
    check_against_naive(codd, 3000, "n_fft 500, M 80");

    /* Silence: ln(2^-24) everywhere, normalised to finite values (0 up to rounding). */
    int64_t n = 16000, L = 100;
    float *x = calloc(n, sizeof *x), *out = malloc(L * 128 * sizeof *out);
    err_clear(&e);
    CHECK(mel_reference_logmel(&c, x, n, out, &e) == VKASR_OK, "%s", e.msg);
    CHECK(fabs(out[0] - log(5.9604644775390625e-08)) < 1e-6 && fabs(out[L * 128 - 1] - (-16.6355323)) < 1e-5,
          "silence log-mel %g", out[0]);
    CHECK(mel_reference(&c, x, n, out, &e) == VKASR_OK, "%s", e.msg);
    int nonfinite = 0;
    float big = 0;
    for (int64_t i = 0; i < L * 128; i++) {
        nonfinite += !isfinite(out[i]);
        big = fmaxf(big, fabsf(out[i]));
    }
    CHECK(nonfinite == 0 && big < 1e-3, "silence: %d non-finite, max |v| %g", nonfinite, big);

    /* 1 kHz tone: the largest log-mel bin is the filter whose Slaney centre is nearest 1 kHz. For M=128
     * the centres are mel_to_hz((i+1) * mel(8000)/129): row 41 ~ 982 Hz, row 42 ~ 1005.7 Hz. */
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(0.5 * sin(2 * M_PI * 1000 * i / 16000.0));
    CHECK(mel_reference_logmel(&c, x, n, out, &e) == VKASR_OK, "%s", e.msg);
    const float *f = out + 50 * 128;
    int arg = 0;
    for (int i = 1; i < 128; i++)
        if (f[i] > f[arg])
            arg = i;
    CHECK(arg == 42, "1 kHz tone peaks in mel bin %d, expected 42", arg);
    CHECK(f[42] - f[20] > 10 && f[42] - f[80] > 10, "tone not dominant: %g vs %g, %g", f[42], f[20], f[80]);

    /* Normalised features of a non-stationary signal: per-bin mean 0, unbiased std 1. */
    uint64_t seed = 99;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(0.5 * sin(2 * M_PI * (300 + 0.2 * i) * i / 16000.0) * (0.2 + (i % 4000) / 4000.0) +
                       0.01 * rnd(&seed));
    CHECK(mel_reference(&c, x, n, out, &e) == VKASR_OK, "%s", e.msg);
    double worst_mean = 0, worst_sd = 0;
    for (int i = 0; i < 128; i++) {
        double s = 0, ss = 0;
        for (int64_t t = 0; t < L; t++)
            s += out[t * 128 + i];
        double mean = s / L;
        for (int64_t t = 0; t < L; t++)
            ss += (out[t * 128 + i] - mean) * (out[t * 128 + i] - mean);
        worst_mean = fmax(worst_mean, fabs(mean));
        worst_sd = fmax(worst_sd, fabs(sqrt(ss / (L - 1)) - 1));
    }
    CHECK(worst_mean < 1e-5 && worst_sd < 1e-4, "normalised stats: |mean| %g, |std-1| %g", worst_mean, worst_sd);

    /* L = 1 (n = 200): std 0 -> every feature (x - mean) / 1e-5 = 0. */
    float one[128];
    for (int i = 0; i < 128; i++)
        one[i] = 7;
    CHECK(mel_reference(&c, x, 200, one, &e) == VKASR_OK, "%s", e.msg);
    int nz = 0;
    for (int i = 0; i < 128; i++)
        nz += one[i] != 0;
    CHECK(nz == 0, "L=1: %d non-zero features", nz);
    /* L = 0 (n = 159, n = 0): OK, output untouched, NULL output allowed. */
    one[0] = 7;
    CHECK(mel_reference(&c, x, 159, one, &e) == VKASR_OK && one[0] == 7, "L=0 wrote output");
    CHECK(mel_reference(&c, NULL, 0, NULL, &e) == VKASR_OK, "n=0: %s", e.msg);
    err_clear(&e);
    CHECK(mel_reference(&c, NULL, 1600, out, &e) == VKASR_ERR_INVALID_ARG, "NULL input accepted");
    c.hop = 0;
    CHECK(mel_reference(&c, x, 1600, out, &e) == VKASR_ERR_INVALID_ARG && strstr(e.msg, "hop"), "hop 0: %s",
          e.msg);
    free(x);
    free(out);
}

int main(void) {
    test_window();
    test_filterbank();
    test_frames();
    test_reference();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all mel checks passed\n");
    return failures ? 1 : 0;
}
