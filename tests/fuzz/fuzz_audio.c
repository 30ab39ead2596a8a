/* fuzz_audio.c — an encoded audio file in memory through the library's decoder (audio_load_memory:
 * libsndfile's virtual I/O over the bytes, incremental decoding, channel mixing, libsoxr resampling to
 * the model's 16 kHz). A failure must be an audio error (or out of memory) naming the input; a success
 * must give finite mono samples at 16 kHz.
 * Seeds: the files of tests/data/audio (WAV, FLAC, OGG, Opus, MP3, AIFF, and the broken ones). */
#include <math.h>

#include "audio/audio.h"
#include "fuzz.h"

#define NAME "fuzz.audio"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct audio a;
    struct err e = {0};
    vkasr_status st = audio_load_memory(data, size, NAME, 16000, &a, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_AUDIO || st == VKASR_ERR_NO_MEMORY, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, NAME) != NULL, "the message names no input: %s", e.msg);
        FUZZ_CHECK(a.samples == NULL && a.n == 0, "a failure left samples");
        return 0;
    }
    FUZZ_CHECK(a.rate == 16000 && a.source_rate >= 1 && a.source_channels >= 1, "rate %d from %d Hz, %d channels",
               a.rate, a.source_rate, a.source_channels);
    FUZZ_CHECK((a.n == 0) == (a.samples == NULL), "%zu samples at %p", a.n, (void *)a.samples);
    for (size_t i = 0; i < a.n; i++)
        FUZZ_CHECK(isfinite(a.samples[i]), "sample %zu of %zu is %g", i, a.n, (double)a.samples[i]);
    audio_free(&a);
    return 0;
}
