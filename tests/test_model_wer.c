/* test_model_wer.c — the shipped default model really recognises speech: transcribes held-out clips
 * (sentences never used in training; voices seen and unseen in training, tools/train/README.md) through
 * the public API and checks the word error rate against the references, normalised by tools/cli/wer.h.
 *
 * usage: test_model_wer MODEL CLIP_DIR MAX_WER [LOOKAHEAD_MS]
 *   CLIP_DIR holds the WAV files and refs.tsv (header line, then: file, voice, seen_voice, text).
 *   LOOKAHEAD_MS: for a cache-aware streaming model, the trained attention context to run (offline,
 *   with its chunked mask); default the model's first.
 *   Fails when a clip cannot be transcribed, when no clip is listed, or when the total WER > MAX_WER. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validation_log.h"
#include "vkasr.h"
#include "wer.h"

/* Next tab-separated field of *line (modified in place), or NULL when none is left. */
static char *next_field(char **line) {
    if (!*line)
        return NULL;
    char *f = *line, *tab = strchr(f, '\t');
    if (tab) {
        *tab = '\0';
        *line = tab + 1;
    } else {
        f[strcspn(f, "\r\n")] = '\0';
        *line = NULL;
    }
    return f;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: test_model_wer MODEL CLIP_DIR MAX_WER [LOOKAHEAD_MS]\n");
        return 2;
    }
    const char *model_path = argv[1], *dir = argv[2];
    double max_wer = atof(argv[3]);
    char path[4096];
    snprintf(path, sizeof path, "%s/refs.tsv", dir);
    FILE *refs = fopen(path, "r");
    if (!refs) {
        printf("FAIL: cannot open %s\n", path);
        return 1;
    }
    vkasr_model_params mp = vkasr_model_params_default();
    mp.validation = tv_wanted();
    mp.lookahead_ms = argc == 5 ? atoi(argv[4]) : 0;
    mp.log_callback = tv_log; /* any validation report fails the run (tv_check at the end) */
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    if (vkasr_model_load(model_path, &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &s, &err) != VKASR_OK) {
        printf("FAIL: %s\n", err.message);
        vkasr_model_free(m);
        fclose(refs);
        return 1;
    }
    vkasr_model_info info;
    vkasr_model_get_info(m, &info);
    printf("model %s on %s, precision %s", model_path, info.device_name,
           info.precision == VKASR_PRECISION_F16 ? "f16" : "f32");
    if (mp.lookahead_ms)
        printf(", lookahead %d ms", mp.lookahead_ms);
    printf("\n");

    char line[4096];
    size_t clips = 0, errors = 0, words = 0;
    int failures = 0;
    if (!fgets(line, sizeof line, refs)) /* header */
        line[0] = '\0';
    while (fgets(line, sizeof line, refs)) {
        char *rest = line;
        char *file = next_field(&rest), *voice = next_field(&rest), *seen = next_field(&rest);
        char *text = next_field(&rest);
        if (!file || !*file)
            continue;
        if (!voice || !seen || !text) {
            printf("FAIL: malformed line for %s in refs.tsv\n", file);
            failures++;
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, file);
        const vkasr_result *r = NULL;
        if (vkasr_transcribe_file(s, path, NULL, &r) != VKASR_OK) {
            printf("FAIL: %s: %s\n", file, vkasr_session_last_error(s));
            failures++;
            continue;
        }
        struct wer_counts c;
        if (wer_count(text, vkasr_result_text(r), &c) != 0) {
            printf("FAIL: out of memory\n");
            failures++;
            break;
        }
        clips++;
        errors += c.errors;
        words += c.ref_words;
        printf("%-12s %-22s %-6s WER %6.2f%%  (S %zu, D %zu, I %zu of %zu)\n  ref: %s\n  hyp: %s\n", file, voice,
               strcmp(seen, "1") == 0 ? "seen" : "unseen", 100.0 * wer_rate(c.errors, c.ref_words), c.sub, c.del,
               c.ins, c.ref_words, text, vkasr_result_text(r));
    }
    fclose(refs);
    vkasr_session_free(s);
    vkasr_model_free(m);
    failures += tv_check();
    double total = wer_rate(errors, words);
    printf("%zu clip(s), %zu words: WER %.2f%% (bound %.2f%%)\n", clips, words, 100.0 * total, 100.0 * max_wer);
    if (clips == 0) {
        printf("FAIL: no clips listed in %s/refs.tsv\n", dir);
        return 1;
    }
    if (!(total <= max_wer)) {
        printf("FAIL: WER %.2f%% > %.2f%%\n", 100.0 * total, 100.0 * max_wer);
        failures++;
    }
    return failures ? 1 : 0;
}
