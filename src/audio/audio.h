/* audio.h — audio input: any format libsndfile decodes (files, standard input, memory), channels
 * averaged to mono, resampled to the model rate with libsoxr. Non-finite samples are rejected. */
#ifndef VKASR_AUDIO_H
#define VKASR_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct audio {
    const float *samples;    /* mono, at `rate` (NULL when n == 0): malloc'd, or, where audio_from_pcm got
                              * mono samples at the target rate, the caller's own (borrowed: no copy)   */
    size_t n;
    int rate;
    int source_rate;         /* as decoded                                                     */
    int source_channels;
    bool borrowed;           /* samples are the caller's: audio_free leaves them                */
};

/* Statuses (messages name the file, or `name`, "standard input", "PCM input"):
 *   OK             also for a valid file with 0 frames (n == 0, samples NULL) and for a truncated file
 *                  (what is present is decoded, as libsndfile reports it);
 *   ERR_IO         a path that cannot be opened (missing, permissions) or is a directory; stdin read errors;
 *   ERR_AUDIO      0-byte input, unknown/malformed format (libsndfile's reason quoted), a sample rate
 *                  outside 1000 Hz .. 2^24 Hz, a decode error,
 *                  a NaN/Inf sample (its frame, channel and time are named), finite samples so large
 *                  that resampling overflows (the time is named);
 *   ERR_NO_MEMORY  decoding is incremental, so only the real content is allocated;
 *   ERR_INVALID_ARG NULL pointers, a target rate outside 1..2^24, a PCM rate outside 1000..2^24.
 * Integer formats scale to s / 2^(bits-1); float formats are kept as stored (no clipping). Channels are
 * averaged; resampling uses libsoxr SOXR_HQ (librosa's default "soxr_hq") and is skipped when the rates
 * match, so 16 kHz input is bit-exact. On failure *out is left empty. */

/* Decodes a file ("-" = standard input, read fully into memory first) and converts it. */
vkasr_status audio_load_file(const char *path, int rate, struct audio *out, struct err *e);
/* Decodes an encoded file image in memory (WAV, FLAC, OGG, MP3, ... bytes). */
vkasr_status audio_load_memory(const void *data, size_t size, const char *name, int rate, struct audio *out,
                               struct err *e);
/* Converts interleaved float samples (frames x channels at src_rate). Mono samples at `rate` are checked
 * and borrowed, not copied: *out then points into `interleaved`, which must outlive it. */
vkasr_status audio_from_pcm(const float *interleaved, size_t frames, int src_rate, int channels, int rate,
                            struct audio *out, struct err *e);
void audio_free(struct audio *a);

/* Incremental conversion for live input: interleaved float frames in (any rate and channel count, the
 * checks and conversions above), mono samples at `rate` out as they become available. The resampler
 * holds back a few milliseconds of output until more input arrives or audio_conv_drain() ends it. */
struct audio_conv;
vkasr_status audio_conv_create(const char *name, int src_rate, int channels, int rate, struct audio_conv **out,
                               struct err *e);
vkasr_status audio_conv_push(struct audio_conv *c, const float *interleaved, size_t frames, struct err *e);
/* End of input: flushes what the resampler holds. */
vkasr_status audio_conv_drain(struct audio_conv *c, struct err *e);
/* The converted samples not consumed yet (*n of them; the pointer is valid until the next call). */
const float *audio_conv_output(const struct audio_conv *c, size_t *n);
void audio_conv_consume(struct audio_conv *c);
int audio_conv_source_rate(const struct audio_conv *c);
void audio_conv_free(struct audio_conv *c); /* NULL is a no-op */

#endif
