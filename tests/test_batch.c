/* test_batch.c — many inputs in one call (vkasr_transcribe_batch: packed batches) against one call per
 * input, through the public API on lavapipe (validation on):
 *  - the parity fixtures' TDT, RNN-T and CTC models (f32) on the parity clips, the default
 *    model (f16 on lavapipe) on the held-out clips: every input's tokens (id, frame, duration) and text
 *    identical, its mel features and encoder output bit-identical, with automatic batches and with device
 *    batches of 2 and 3 inputs (several batches, inputs sorted by length), and with batches of more
 *    than 2 failing (the debug hook batch_fail_above: halved until they run, one warning);
 *  - local attention (a window shorter than the inputs): the same;
 *  - a corrupt file and a missing one among the inputs: each its own error result (audio, I/O) naming
 *    it, the others unaffected; an input given as PCM; results in input order; the result callback
 *    once per input; the call's status; abort stops the call and reports partial or skipped inputs.
 * usage: test_batch DATA_DIR DEFAULT_MODEL */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "validation_log.h"
#include "vkasr.h"
#include "vkasr_debug.h"

#define MAX_IN 24

/* What one call on one input gave (copied: results live until the session's next call). */
struct got {
    vkasr_status status;
    char *text;
    vkasr_token *tokens;
    size_t ntokens;
    float *mel, *enc;
    size_t mel_n, enc_n;
};

static void got_free(struct got *g) {
    free(g->text);
    free(g->tokens);
    free(g->mel);
    free(g->enc);
    memset(g, 0, sizeof *g);
}

static float *copy_floats(const float *p, size_t n) {
    float *q = malloc(n * sizeof *q + 4);
    if (q && n)
        memcpy(q, p, n * sizeof *q);
    return q;
}

static void take(const vkasr_result *r, struct got *g) {
    memset(g, 0, sizeof *g);
    g->status = vkasr_result_status(r);
    g->text = strdup(vkasr_result_text(r));
    const vkasr_token *t = vkasr_result_tokens(r, &g->ntokens);
    g->tokens = malloc(g->ntokens * sizeof *t + 1);
    if (g->tokens && g->ntokens)
        memcpy(g->tokens, t, g->ntokens * sizeof *t);
    size_t fr, dim;
    const float *mel = vkasr_result_mel(r, &fr, &dim);
    g->mel_n = fr * dim;
    g->mel = mel ? copy_floats(mel, g->mel_n) : NULL;
    const float *enc = vkasr_result_encoder(r, &fr, &dim);
    g->enc_n = fr * dim;
    g->enc = enc ? copy_floats(enc, g->enc_n) : NULL;
}

/* An input of a batch equals the same input alone. */
static bool same(const struct got *a, const struct got *b, const char *what) {
    bool ok = a->status == VKASR_OK && b->status == VKASR_OK && strcmp(a->text, b->text) == 0 &&
              a->ntokens == b->ntokens;
    for (size_t i = 0; ok && i < a->ntokens; i++)
        ok = a->tokens[i].id == b->tokens[i].id && a->tokens[i].frame == b->tokens[i].frame &&
             a->tokens[i].duration == b->tokens[i].duration;
    EXPECT(ok, "%s: tokens differ from the input alone (status %d/%d, '%s' / '%s')", what, a->status, b->status,
           a->text, b->text);
    bool mel = a->mel && b->mel && a->mel_n == b->mel_n && memcmp(a->mel, b->mel, a->mel_n * sizeof(float)) == 0;
    EXPECT(mel, "%s: mel features differ from the input alone (%zu / %zu values)", what, a->mel_n, b->mel_n);
    bool enc = a->enc && b->enc && a->enc_n == b->enc_n && memcmp(a->enc, b->enc, a->enc_n * sizeof(float)) == 0;
    EXPECT(enc, "%s: encoder output differs from the input alone, not bit-identical (%zu / %zu values)", what,
           a->enc_n, b->enc_n);
    return ok && mel && enc;
}

/* The .wav files of a directory, sorted, appended to paths. */
static int add_dir(const char *dir, char **paths, int n) {
    struct dirent **ents = NULL;
    int ne = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < ne; i++) {
        const char *f = ents[i]->d_name;
        size_t len = strlen(f);
        if (n < MAX_IN && len > 4 && strcmp(f + len - 4, ".wav") == 0) {
            paths[n] = malloc(strlen(dir) + len + 2);
            sprintf(paths[n++], "%s/%s", dir, f);
        }
        free(ents[i]);
    }
    free(ents);
    return n;
}

struct cb {
    int calls[MAX_IN + 4];
    int total;
    int abort_after; /* -1: never */
};

static void on_result(size_t index, const vkasr_result *r, void *ud) {
    struct cb *c = ud;
    (void)r;
    if (index < MAX_IN + 4)
        c->calls[index]++;
    c->total++;
}

static bool on_abort(void *ud) {
    const struct cb *c = ud;
    return c->abort_after >= 0 && c->total > c->abort_after;
}

/* One model: every input alone, then batches of several sizes (and local attention) compared with them. */
/* sizes: the first 1 .. 3 of auto, 2, 3; local: also local attention; abort: the abort case too. */
/* Counts the library's warnings of batches failed by the debug hook (vkasr_debug_params.batch_fail_above),
 * then logs as tv_log does. */
static int hook_splits;
static void log_splits(vkasr_log_level level, const char *message, void *user_data) {
    if (strstr(message, "failed (batch_fail_above="))
        hook_splits++;
    tv_log(level, message, user_data);
}

static void model_case(const char *model, vkasr_precision prec, char **paths, int n, const char *bad_file,
                       const char *name, int nsizes, bool local_too, bool abort_too) {
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_model_params mp = vkasr_model_params_default();
    mp.precision = prec;
    mp.validation = tv_wanted();
    mp.log_callback = log_splits;
    if (vkasr_model_load(model, &mp, &m, &err) != VKASR_OK) {
        EXPECT(0, "%s: load %s: %s", name, model, err.message);
        return;
    }
    vkasr_session *s = NULL;
    EXPECT(vkasr_session_create(m, &s, &err) == VKASR_OK, "%s: session: %s", name, err.message);
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = true; /* the encoder outputs are compared, batched against alone */
    EXPECT(!s || vkasr_session_set_debug(s, &dp) == VKASR_OK, "%s: keep features", name);
    for (int local = 0; s && local < (local_too ? 2 : 1); local++) {
        vkasr_transcribe_params tp = vkasr_transcribe_params_default();
        if (local) {
            tp.attention = VKASR_ATTENTION_LOCAL;
            tp.attention_window = 4;
        }
        struct got alone[MAX_IN];
        for (int i = 0; i < n; i++) {
            const vkasr_result *r = NULL;
            vkasr_status st = vkasr_transcribe_file(s, paths[i], &tp, &r);
            EXPECT(st == VKASR_OK, "%s: %s alone: %s", name, paths[i], vkasr_session_last_error(s));
            if (st == VKASR_OK)
                take(r, &alone[i]);
            else
                memset(&alone[i], 0, sizeof alone[i]);
        }
        /* the inputs of the batch: every clip, the first one again as PCM, a corrupt and a missing file */
        vkasr_batch_input in[MAX_IN + 3];
        int nb = 0, bad = -1, missing = -1, pcm_of = 0;
        float *pcm = NULL;
        size_t npcm = 0;
        EXPECT(vkasr_audio_load(paths[pcm_of], &pcm, &npcm, &err) == VKASR_OK, "%s: load audio: %s", name,
               err.message);
        for (int i = 0; i < n; i++) {
            if (i == n / 2) {
                bad = nb;
                in[nb++] = (vkasr_batch_input){.path = bad_file};
                missing = nb;
                in[nb++] = (vkasr_batch_input){.path = "no/such/file.wav"};
            }
            in[nb++] = (vkasr_batch_input){.path = paths[i]};
        }
        const int pcm_at = nb;
        in[nb++] = (vkasr_batch_input){.samples = pcm, .n_frames = npcm, .sample_rate = 16000, .channels = 1};
        static const size_t sizes[] = {0, 2, 3};
        /* with abort_too, one more run: automatic batches, each of more than 2 inputs failing by the
         * debug hook, so that they are halved until they run */
        const int nruns = local ? 1 : nsizes + (abort_too ? 1 : 0);
        for (int k = 0; k < nruns; k++) {
            const bool hook = k == nsizes;
            char what[512];
            snprintf(what, sizeof what, "%s%s, batches of %s", name, local ? ", local attention [4, 4]" : "",
                     hook ? "auto, those above 2 failing" : sizes[k] ? (sizes[k] == 2 ? "2" : "3") : "auto");
            dp.batch_fail_above = hook ? 2 : 0;
            EXPECT(vkasr_session_set_debug(s, &dp) == VKASR_OK, "%s: debug params", what);
            hook_splits = 0;
            vkasr_batch_params bp = vkasr_batch_params_default();
            bp.max_batch = hook ? 0 : sizes[k];
            struct cb cb = {.abort_after = -1};
            bp.result_callback = on_result;
            bp.result_user_data = &cb;
            const vkasr_result *res[MAX_IN + 3];
            vkasr_status st = vkasr_transcribe_batch(s, in, (size_t)nb, &tp, &bp, res);
            /* the missing file is an I/O error, the corrupt one an audio error: the first of them decides */
            EXPECT(st == VKASR_ERR_AUDIO || st == VKASR_ERR_IO, "%s: call status %d (%s), want the first input error",
                   what, st, vkasr_session_last_error(s));
            int j = 0;
            for (int i = 0; i < nb; i++) {
                EXPECT(cb.calls[i] == 1, "%s: result callback called %d times for input %d", what, cb.calls[i], i);
                if (i == bad || i == missing) {
                    vkasr_status sb = vkasr_result_status(res[i]);
                    EXPECT(sb == (i == bad ? VKASR_ERR_AUDIO : VKASR_ERR_IO) &&
                               strstr(vkasr_result_error(res[i]), in[i].path),
                           "%s: input %d: status %d, error '%s' (want its own error naming %s)", what, i, sb,
                           vkasr_result_error(res[i]), in[i].path);
                    continue;
                }
                char w2[600];
                struct got g;
                take(res[i], &g);
                const int src = i == pcm_at ? pcm_of : j++;
                snprintf(w2, sizeof w2, "%s, input %d (%s)", what, i, i == pcm_at ? "PCM" : paths[src]);
                same(&g, &alone[src], w2);
                EXPECT(!strcmp(vkasr_result_error(res[i]), ""), "%s: an error message on a good input", w2);
                got_free(&g);
            }
            EXPECT(cb.total == nb, "%s: %d result callbacks for %d inputs", what, cb.total, nb);
            EXPECT(hook ? hook_splits == 1 : hook_splits == 0, "%s: %d warnings of batches failed by the hook", what,
                   hook_splits);
            printf("%s: %d inputs, each as alone (tokens, mel and encoder bit for bit), bad inputs their own errors\n",
                   what, nb);
        }
        dp.batch_fail_above = 0;
        EXPECT(vkasr_session_set_debug(s, &dp) == VKASR_OK, "%s: debug params", name);
        if (!local && abort_too) { /* abort after the first batch's results: the call stops */
            vkasr_batch_params bp = vkasr_batch_params_default();
            bp.max_batch = 2;
            struct cb cb = {.abort_after = 0};
            bp.result_callback = on_result;
            bp.result_user_data = &cb;
            tp.abort_callback = on_abort;
            tp.abort_user_data = &cb;
            const vkasr_result *res[MAX_IN + 3];
            vkasr_status st = vkasr_transcribe_batch(s, in, (size_t)nb, &tp, &bp, res);
            int aborted = 0, ok = 0;
            for (int i = 0; i < nb; i++) {
                aborted += vkasr_result_status(res[i]) == VKASR_ABORTED;
                ok += vkasr_result_status(res[i]) == VKASR_OK;
            }
            EXPECT(st == VKASR_ABORTED && aborted > 0 && ok < nb - 2, "%s: abort: status %d, %d aborted, %d done", name,
                   st, aborted, ok);
            EXPECT(cb.total == nb, "%s: abort: %d result callbacks for %d inputs", name, cb.total, nb);
        }
        free(pcm);
        for (int i = 0; i < n; i++)
            got_free(&alone[i]);
    }
    vkasr_session_free(s);
    vkasr_model_free(m);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_batch DATA_DIR DEFAULT_MODEL\n");
        return 2;
    }
    char dir[4096], model[4096], bad[4096];
    char *paths[MAX_IN];
    snprintf(bad, sizeof bad, "%s/audio/not_audio.wav", argv[1]);
    snprintf(dir, sizeof dir, "%s/audio/parity", argv[1]);
    int n = add_dir(dir, paths, 0);
    snprintf(dir, sizeof dir, "%s/audio/heldout", argv[1]);
    const int n_parity = n;
    n = add_dir(dir, paths, n);
    static const char *const heads[] = {"tdt", "rnnt", "ctc"};
    for (int h = 0; h < 3; h++) {
        snprintf(model, sizeof model, "%s/fixtures/%s", argv[1], heads[h]);
        char name[64];
        snprintf(name, sizeof name, "fixture %s f32", heads[h]);
        model_case(model, VKASR_PRECISION_F32, paths, n_parity, bad, name, h == 0 ? 3 : 1, true, h == 0);
    }
    /* the default model (f16 where the device has it) on the held-out clips */
    model_case(argv[2], VKASR_PRECISION_AUTO, paths + n_parity, n - n_parity, bad, "default model", 1, false, false);
    for (int i = 0; i < n; i++)
        free(paths[i]);
    failures += tv_check();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
