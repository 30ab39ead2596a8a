/* fuzz_audio.c — an encoded audio file in memory through the public decoder, vkasr_audio_load_memory
 * (audio_load_memory: libsndfile's virtual I/O over the bytes, incremental decoding, channel mixing,
 * libsoxr resampling to 16 kHz). A failure must be an audio error (or out of memory) with a message
 * naming "audio bytes" and no samples; a success must give finite samples.
 * Seeds: the files of tests/data/audio (WAV, FLAC, OGG, Opus, MP3, AIFF, and the broken ones). */
#include <math.h>

#include "fuzz.h"
#include "vkasr.h"

#define NAME "audio bytes"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    float *x = NULL;
    size_t n = 0;
    vkasr_error e;
    vkasr_status st = vkasr_audio_load_memory(data, size, &x, &n, &e);
    FUZZ_CHECK(e.status == st, "status %d, error's status %d", (int)st, (int)e.status);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_AUDIO || st == VKASR_ERR_NO_MEMORY, "status %d: %s", (int)st, e.message);
        FUZZ_CHECK(strncmp(e.message, NAME ": ", sizeof NAME + 1) == 0, "the message names no input: %s", e.message);
        FUZZ_CHECK(x == NULL && n == 0, "a failure left samples");
        return 0;
    }
    FUZZ_CHECK((n == 0) == (x == NULL), "%zu samples at %p", n, (void *)x);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(isfinite(x[i]), "sample %zu of %zu is %g", i, n, (double)x[i]);
    vkasr_free(x);
    return 0;
}
