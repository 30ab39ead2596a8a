/* transcribe.c — the smallest useful vkasr program (README "C API"): transcribes one file and prints
 * the text and the word timestamps.   cc transcribe.c $(pkg-config --cflags --libs vkasr)
 * usage: transcribe MODEL AUDIO */
#include <stdio.h>
#include <vkasr.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL AUDIO\n", argv[0]);
        return 2;
    }
    vkasr_error err;
    vkasr_model *model = NULL;
    vkasr_model_params mp = vkasr_model_params_default(); /* device: $VKASR_DEVICE or the best one */
    if (vkasr_model_load(argv[1], &mp, &model, &err) != VKASR_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    vkasr_session *session = NULL; /* one per thread; the model is shared */
    if (vkasr_session_create(model, &session, &err) != VKASR_OK) {
        fprintf(stderr, "%s\n", err.message);
        vkasr_model_free(model);
        return 1;
    }
    const vkasr_result *result = NULL; /* owned by the session */
    vkasr_status st = vkasr_transcribe_file(session, argv[2], NULL, &result);
    if (st == VKASR_OK) {
        printf("%s\n", vkasr_result_text(result));
        size_t n = 0;
        const vkasr_word *words = vkasr_result_words(result, &n);
        for (size_t i = 0; i < n; i++)
            printf("%8.2f %8.2f  %s\n", words[i].start, words[i].end, words[i].text);
    } else {
        fprintf(stderr, "%s\n", vkasr_session_last_error(session));
    }
    vkasr_session_free(session);
    vkasr_model_free(model);
    return st == VKASR_OK ? 0 : 1;
}
