/* test_device_memory.c — running out of device memory is an error, not a crash: with device memory
 * capped (VKASR_MAX_DEVICE_MEMORY_MIB, set by CTest), a short file transcribes, a long one fails with
 * VKASR_ERR_DEVICE_MEMORY and a message saying so, and the same session then transcribes the short file
 * again with the same result (lavapipe, validation on).
 * usage: test_device_memory MODEL SHORT_WAV LONG_SECONDS */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "validation_log.h"
#include "vkasr.h"

static char *text_of(vkasr_session *s, const char *wav) {
    const vkasr_result *r = NULL;
    vkasr_status st = vkasr_transcribe_file(s, wav, NULL, &r);
    EXPECT(st == VKASR_OK && r, "transcribe %s: %s", wav, vkasr_session_last_error(s));
    return st == VKASR_OK && r ? strdup(vkasr_result_text(r)) : NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_device_memory MODEL SHORT_WAV LONG_SECONDS\n");
        return 2;
    }
    const char *cap = getenv("VKASR_MAX_DEVICE_MEMORY_MIB");
    if (!cap || !*cap) {
        fprintf(stderr, "FAIL: VKASR_MAX_DEVICE_MEMORY_MIB is not set: this test would test nothing\n");
        return 1;
    }
    vkasr_model_params mp = vkasr_model_params_default();
    mp.validation = tv_wanted();
    mp.log_callback = tv_log;
    vkasr_model *m = NULL;
    vkasr_error e;
    vkasr_status st = vkasr_model_load(argv[1], &mp, &m, &e);
    if (st != VKASR_OK) {
        fprintf(stderr, "FAIL: load %s under a %s MiB cap: %s\n", argv[1], cap, e.message);
        return 1;
    }
    vkasr_session *s = NULL;
    st = vkasr_session_create(m, &s, &e);
    EXPECT(st == VKASR_OK, "session: %s", e.message);
    if (st == VKASR_OK) {
        char *before = text_of(s, argv[2]);
        /* A long input: noise, so every stage has work; its features alone outgrow the cap. */
        size_t n = (size_t)(atof(argv[3]) * VKASR_SAMPLE_RATE);
        float *pcm = malloc(n * sizeof *pcm);
        EXPECT(pcm != NULL, "out of host memory for %zu samples", n);
        uint32_t x = 12345;
        for (size_t i = 0; pcm && i < n; i++) {
            x = x * 1664525u + 1013904223u;
            pcm[i] = (float)(x >> 8) / 16777216.0f * 0.2f - 0.1f;
        }
        const vkasr_result *r = NULL;
        st = pcm ? vkasr_transcribe_pcm(s, pcm, n, VKASR_SAMPLE_RATE, 1, NULL, &r) : VKASR_ERR_NO_MEMORY;
        const char *msg = vkasr_session_last_error(s);
        EXPECT(st == VKASR_ERR_DEVICE_MEMORY, "a %s s input under a %s MiB cap: status %d (%s), want %d", argv[3], cap,
               st, msg, VKASR_ERR_DEVICE_MEMORY);
        EXPECT(strstr(msg, "device memory") != NULL, "the message names device memory: '%s'", msg);
        printf("long input: %s\n", msg);
        free(pcm);
        char *after = text_of(s, argv[2]);
        EXPECT(before && after && strcmp(before, after) == 0, "the session works after the failure: '%s' then '%s'",
               before ? before : "(failed)", after ? after : "(failed)");
        free(before);
        free(after);
    }
    vkasr_session_free(s);
    vkasr_model_free(m);
    failures += tv_check();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
