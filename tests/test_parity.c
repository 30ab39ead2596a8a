/* test_parity.c — vkasr against Hugging Face transformers (fixtures made by
 * tools/fixtures/make_fixtures.py on a GPU machine; random-weight TDT, RNN-T and CTC models and speech
 * clips): normalized mel (max-abs error), encoder output (relative error) and exact greedy token ids,
 * through the public API only.
 *
 * usage: test_parity MODEL CLIPS_DIR EXPECTED_DIR PRECISION MEL_TOL ENC_TOL
 *   MODEL         HF directory or .gguf
 *   CLIPS_DIR     directory of <clip>.wav
 *   EXPECTED_DIR  directory of <clip>/{mel.npy, encoder.npy, tokens.json}
 *   PRECISION     f32 | f16
 *   MEL_TOL       bound on max |mel - mel_hf|
 *   ENC_TOL       bound on ||enc - enc_hf|| / ||enc_hf||
 *   lookahead=MS  optional, before TOKENS: vkasr_model_params.lookahead_ms (cache-aware models' context)
 *   language=L    optional, before TOKENS: vkasr_transcribe_params.language (language-prompt models)
 *   decoder=H     optional, before TOKENS: the head to load, rnnt or ctc (a hybrid's)
 * tokens.json may also give "language" (what vkasr_result_language() must return, null for none) and
 * "events" ([[kind, frame], ...]: vkasr_result_events()).
 *   TOKENS        optional: "exact" (default: ids, frames and text must equal transformers'), "report"
 *                 (print the agreement only; for f16, whose rounding may flip a close argmax) or "min=F"
 *                 (the aligned agreement below, over all clips, must be at least F; quantized weights)
 * Aligned agreement: the longest common subsequence of the ids over the longer sequence's length, summed
 * over the clips (one flipped token costs one token, not the rest of the clip as a common prefix would).  */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_io.h"
#include "validation_log.h"
#include "vkasr.h"
#include "vkasr_debug.h"

static int failures;
static int token_report_only;
static size_t tok_total, tok_same, tok_lcs, tok_longer;

static void fail(const char *clip, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *clip, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL [%s]: ", clip);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

static void compare_mel(const char *clip, const vkasr_result *r, const char *exp_dir, double tol) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/mel.npy", exp_dir, clip);
    size_t er, ec, gr, gc;
    float *ref = fixture_read_npy(path, &er, &ec);
    const float *got = vkasr_result_mel(r, &gr, &gc);
    if (!ref) {
        fail(clip, "cannot read %s", path);
        return;
    }
    if (!got || er != gr || ec != gc) {
        fail(clip, "mel shape [%zu, %zu], expected [%zu, %zu]", gr, gc, er, ec);
        free(ref);
        return;
    }
    double maxabs = 0;
    size_t worst = 0;
    for (size_t i = 0; i < er * ec; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= maxabs)) {
            maxabs = d;
            worst = i;
        }
    }
    printf("  %-28s mel     [%zu x %zu] max-abs error %.3g (bound %.3g)\n", clip, er, ec, maxabs, tol);
    if (!(maxabs <= tol))
        fail(clip, "mel max-abs error %.3g > %.3g at frame %zu bin %zu (vkasr %.6f, transformers %.6f)", maxabs, tol,
             worst / ec, worst % ec, got[worst], ref[worst]);
    free(ref);
}

static void compare_encoder(const char *clip, const vkasr_result *r, const char *exp_dir, double tol) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/encoder.npy", exp_dir, clip);
    size_t er, ec, gr, gc;
    float *ref = fixture_read_npy(path, &er, &ec);
    const float *got = vkasr_result_encoder(r, &gr, &gc);
    if (!ref) {
        fail(clip, "cannot read %s", path);
        return;
    }
    if (!got || er != gr || ec != gc) {
        fail(clip, "encoder shape [%zu, %zu], expected [%zu, %zu]", gr, gc, er, ec);
        free(ref);
        return;
    }
    double se = 0, sr = 0, maxabs = 0;
    for (size_t i = 0; i < er * ec; i++) {
        double d = (double)got[i] - ref[i];
        se += d * d;
        sr += (double)ref[i] * ref[i];
        if (!(fabs(d) <= maxabs))
            maxabs = fabs(d);
    }
    double rel = sr > 0 ? sqrt(se / sr) : sqrt(se);
    printf("  %-28s encoder [%zu x %zu] relative error %.3g (bound %.3g), max-abs %.3g\n", clip, er, ec, rel, tol, maxabs);
    if (!(rel <= tol))
        fail(clip, "encoder relative error %.3g > %.3g", rel, tol);
    free(ref);
}

/* Length of the longest common subsequence of got[0..n) and want[0..ne); 0 when out of memory (the caller
 * then under-reports the agreement, which can only fail a bound). */
static size_t lcs_ids(const vkasr_token *got, size_t n, const cJSON *want, size_t ne) {
    size_t *row = calloc(ne + 1, sizeof *row);
    int *w = malloc((ne + 1) * sizeof *w);
    size_t best = 0;
    if (row && w) {
        for (size_t j = 0; j < ne; j++)
            w[j] = cJSON_GetArrayItem(want, (int)j)->valueint;
        for (size_t i = 0; i < n; i++) {
            size_t diag = 0; /* row[j] of the previous i, before overwriting */
            for (size_t j = 1; j <= ne; j++) {
                size_t up = row[j];
                row[j] = got[i].id == w[j - 1] ? diag + 1 : (row[j - 1] > up ? row[j - 1] : up);
                diag = up;
            }
        }
        best = row[ne];
    }
    free(row);
    free(w);
    return best;
}

static void compare_tokens(const char *clip, const vkasr_result *r, const char *exp_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/tokens.json", exp_dir, clip);
    char *js = fixture_read_file(path, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    cJSON *ids = root ? cJSON_GetObjectItemCaseSensitive(root, "ids") : NULL;
    cJSON *frames = root ? cJSON_GetObjectItemCaseSensitive(root, "frames") : NULL;
    cJSON *text = root ? cJSON_GetObjectItemCaseSensitive(root, "text") : NULL;
    if (!cJSON_IsArray(ids)) {
        fail(clip, "cannot read ids from %s", path);
        cJSON_Delete(root);
        return;
    }
    size_t n;
    const vkasr_token *t = vkasr_result_tokens(r, &n);
    size_t ne = (size_t)cJSON_GetArraySize(ids);
    printf("  %-28s tokens  %zu emitted, %zu expected\n", clip, n, ne);
    size_t same = 0;
    while (same < n && same < ne && t[same].id == cJSON_GetArrayItem(ids, (int)same)->valueint)
        same++;
    tok_total += ne;
    tok_same += same;
    tok_lcs += lcs_ids(t, n, ids, ne);
    tok_longer += n > ne ? n : ne;
    if ((same != n || n != ne) && token_report_only)
        printf("  %-28s tokens  differ from position %zu (report only)\n", clip, same);
    else if (same != n || n != ne)
        fail(clip, "token ids differ from transformers at position %zu (vkasr %d, transformers %d; %zu vs %zu tokens)",
             same, same < n ? t[same].id : -1, same < ne ? cJSON_GetArrayItem(ids, (int)same)->valueint : -1, n, ne);
    if (cJSON_IsArray(frames) && (size_t)cJSON_GetArraySize(frames) == n && same == n && n == ne) {
        for (size_t i = 0; i < n; i++)
            if (t[i].frame != cJSON_GetArrayItem(frames, (int)i)->valueint) {
                fail(clip, "token %zu emitted at frame %lld, transformers at frame %d", i, (long long)t[i].frame,
                     cJSON_GetArrayItem(frames, (int)i)->valueint);
                break;
            }
    }
    const cJSON *lang = root ? cJSON_GetObjectItemCaseSensitive(root, "language") : NULL;
    if (lang) {
        const char *got = vkasr_result_language(r);
        printf("  %-28s language vkasr %s, expected %s\n", clip, got ? got : "(none)",
               cJSON_IsString(lang) ? lang->valuestring : "(none)");
        if (cJSON_IsString(lang) ? !got || strcmp(got, lang->valuestring) != 0 : got != NULL)
            fail(clip, "detected language differs");
    }
    const cJSON *events = root ? cJSON_GetObjectItemCaseSensitive(root, "events") : NULL;
    if (cJSON_IsArray(events)) {
        size_t nev = 0;
        const vkasr_event *ev = vkasr_result_events(r, &nev);
        printf("  %-28s events  %zu, expected %d\n", clip, nev, cJSON_GetArraySize(events));
        if (nev != (size_t)cJSON_GetArraySize(events))
            fail(clip, "%zu events, expected %d", nev, cJSON_GetArraySize(events));
        for (size_t i = 0; i < nev && i < (size_t)cJSON_GetArraySize(events); i++) {
            const cJSON *x = cJSON_GetArrayItem(events, (int)i);
            int kind = cJSON_GetArrayItem(x, 0)->valueint, frame = cJSON_GetArrayItem(x, 1)->valueint;
            if ((int)ev[i].kind != kind || ev[i].frame != frame)
                fail(clip, "event %zu: kind %d at frame %lld, expected kind %d at frame %d", i, (int)ev[i].kind,
                     (long long)ev[i].frame, kind, frame);
        }
    }
    if (cJSON_IsString(text)) {
        printf("  %-28s text    vkasr \"%s\"\n  %-28s         transformers \"%s\"\n", clip, vkasr_result_text(r), "",
               text->valuestring);
        if (!token_report_only && strcmp(vkasr_result_text(r), text->valuestring) != 0)
            fail(clip, "transcript differs from transformers' decoding");
    }
    cJSON_Delete(root);
}

int main(int argc, char **argv) {
    int lookahead_ms = 0;
    const char *language = NULL;
    vkasr_decoder decoder = VKASR_DECODER_AUTO;
    while (argc >= 8 && strchr(argv[7], '=') && strncmp(argv[7], "min=", 4) != 0) { /* options: drop them */
        if (strncmp(argv[7], "lookahead=", 10) == 0)
            lookahead_ms = atoi(argv[7] + 10);
        else if (strncmp(argv[7], "language=", 9) == 0)
            language = argv[7] + 9;
        else if (strcmp(argv[7], "decoder=ctc") == 0)
            decoder = VKASR_DECODER_CTC;
        else if (strcmp(argv[7], "decoder=rnnt") == 0)
            decoder = VKASR_DECODER_RNNT;
        else {
            fprintf(stderr, "test_parity: unknown option %s\n", argv[7]);
            return 2;
        }
        for (int i = 7; i + 1 < argc; i++)
            argv[i] = argv[i + 1];
        argc--;
    }
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: test_parity MODEL CLIPS_DIR EXPECTED_DIR f32|f16 MEL_TOL ENC_TOL [lookahead=MS] "
                        "[language=L] [decoder=rnnt|ctc] [exact|report|min=F]\n");
        return 2;
    }
    double min_agree = -1; /* >= 0: the bound on the aligned agreement ("min=F") */
    if (argc == 8 && strncmp(argv[7], "min=", 4) == 0) {
        char *end;
        min_agree = strtod(argv[7] + 4, &end);
        if (*end || !(min_agree >= 0 && min_agree <= 1)) {
            fprintf(stderr, "test_parity: TOKENS %s: F must be a fraction in [0, 1]\n", argv[7]);
            return 2;
        }
    } else if (argc == 8 && strcmp(argv[7], "report") != 0 && strcmp(argv[7], "exact") != 0) {
        fprintf(stderr, "test_parity: TOKENS %s: expected exact, report or min=F\n", argv[7]);
        return 2;
    }
    token_report_only = argc == 8 && strcmp(argv[7], "exact") != 0;
    const char *model = argv[1], *clips = argv[2], *expected = argv[3];
    double mel_tol = atof(argv[5]), enc_tol = atof(argv[6]);
    vkasr_model_params mp = vkasr_model_params_default();
    mp.precision = strcmp(argv[4], "f16") == 0 ? VKASR_PRECISION_F16 : VKASR_PRECISION_F32;
    mp.lookahead_ms = lookahead_ms;
    mp.decoder = decoder;
    mp.validation = tv_wanted();
    mp.log_callback = tv_log; /* any validation report fails the run (tv_check at the end) */
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    if (vkasr_model_load(model, &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &s, &err) != VKASR_OK) {
        printf("FAIL: %s\n", err.message);
        vkasr_model_free(m);
        return 1;
    }
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    printf("model %s on %s, precision %s\n", model, info.device_name, info.precision == VKASR_PRECISION_F16 ? "f16" : "f32");
    DIR *dir = opendir(expected);
    if (!dir) {
        printf("FAIL: cannot open %s\n", expected);
        return 1;
    }
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.language = language;
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = true; /* the mel and the encoder output are compared with the fixtures */
    vkasr_session_set_debug(s, &dp);
    int nclips = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        char wav[4096];
        snprintf(wav, sizeof wav, "%s/%s.wav", clips, de->d_name);
        const vkasr_result *r = NULL;
        if (vkasr_transcribe_file(s, wav, &tp, &r) != VKASR_OK) {
            fail(de->d_name, "%s", vkasr_session_last_error(s));
            continue;
        }
        nclips++;
        compare_mel(de->d_name, r, expected, mel_tol);
        compare_encoder(de->d_name, r, expected, enc_tol);
        compare_tokens(de->d_name, r, expected);
    }
    closedir(dir);
    vkasr_session_free(s);
    vkasr_model_free(m);
    if (nclips == 0) {
        printf("FAIL: no clips found in %s\n", expected);
        return 1;
    }
    double agree = tok_longer ? (double)tok_lcs / (double)tok_longer : 1.0;
    if (min_agree >= 0 && !(agree >= min_agree))
        fail("all clips", "aligned token agreement %.3f < %.3f", agree, min_agree);
    failures += tv_check();
    printf("%d clip(s), token ids agreeing with transformers: %zu of %zu as a common prefix, aligned %zu of %zu "
           "(%.3f), %d failure(s)\n",
           nclips, tok_same, tok_total, tok_lcs, tok_longer, agree, failures);
    return failures ? 1 : 0;
}
