/* audio.h — audio input: any format libsndfile decodes (files, standard input, memory), channels
 * averaged to mono, resampled to the model rate with libsoxr. Non-finite samples are rejected. */
#ifndef VKASR_AUDIO_H
#define VKASR_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct audio {
    float *samples;          /* mono, at `rate`, malloc'd (may be NULL when n == 0)           */
    size_t n;
    int rate;
    int source_rate;         /* as decoded                                                     */
    int source_channels;
};

/* Decodes a file ("-" = standard input, read fully into memory first) and converts it. */
vkasr_status audio_load_file(const char *path, int rate, struct audio *out, struct err *e);
/* Decodes an encoded file image in memory (WAV, FLAC, OGG, MP3, ... bytes). */
vkasr_status audio_load_memory(const void *data, size_t size, const char *name, int rate, struct audio *out,
                               struct err *e);
/* Converts interleaved float samples (frames x channels at src_rate). */
vkasr_status audio_from_pcm(const float *interleaved, size_t frames, int src_rate, int channels, int rate,
                            struct audio *out, struct err *e);
void audio_free(struct audio *a);

#endif
