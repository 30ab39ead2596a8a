/* live_input.c — `vkasr live`'s standard input: raw PCM in a given format, or a WAV stream whose header
 * is read as it arrives (a whole-file decoder would wait for the end of a microphone's stream). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "live.h"

static size_t sample_bytes(enum sample_fmt f) { return f == SAMPLE_S16 ? 2 : f == SAMPLE_U8 ? 1 : 4; }

const char *live_input_format_name(enum sample_fmt f) {
    return f == SAMPLE_S16 ? "s16le" : f == SAMPLE_S32 ? "s32le" : f == SAMPLE_F32 ? "f32le" : "u8";
}

/* Reads exactly n bytes (a short count only at end of input); -1 on error or interruption. */
static ssize_t read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR && !interrupted)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* The WAV chunks after "RIFF????WAVE" up to the data chunk. 0, or -1 with a message printed. */
static int parse_wav(struct live_input *in) {
    unsigned char h[8], fmt[40];
    bool have_fmt = false;
    for (;;) {
        if (read_full(in->fd, h, 8) != 8) {
            fprintf(stderr, "vkasr: standard input: WAV header ends before its data chunk\n");
            return -1;
        }
        uint32_t size = le32(h + 4);
        if (!memcmp(h, "data", 4))
            break;
        if (!memcmp(h, "fmt ", 4) && size >= 16 && size <= sizeof fmt) {
            if (read_full(in->fd, fmt, size) != (ssize_t)size)
                return fprintf(stderr, "vkasr: standard input: truncated WAV fmt chunk\n"), -1;
            have_fmt = true;
            size = 0;
        }
        for (unsigned char skip[256]; size > 0;) { /* other chunks (LIST, fact, ...) and padding */
            size_t k = size < sizeof skip ? size : sizeof skip;
            if (read_full(in->fd, skip, k) != (ssize_t)k)
                return fprintf(stderr, "vkasr: standard input: truncated WAV chunk\n"), -1;
            size -= (uint32_t)k;
        }
    }
    if (!have_fmt)
        return fprintf(stderr, "vkasr: standard input: WAV stream without a fmt chunk\n"), -1;
    unsigned tag = le16(fmt), channels = le16(fmt + 2), bits = le16(fmt + 14);
    uint32_t rate = le32(fmt + 4);
    if (tag == 0xFFFE) /* WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes are the tag */
        tag = le16(fmt + 24);
    if (tag == 1 && bits == 16)
        in->fmt = SAMPLE_S16;
    else if (tag == 1 && bits == 32)
        in->fmt = SAMPLE_S32;
    else if (tag == 1 && bits == 8)
        in->fmt = SAMPLE_U8;
    else if (tag == 3 && bits == 32)
        in->fmt = SAMPLE_F32;
    else
        return fprintf(stderr, "vkasr: standard input: WAV format %u with %u bits per sample is not supported "
                               "(16- or 32-bit integer, 32-bit float)\n", tag, bits), -1;
    if (channels < 1 || channels > 64 || rate < 1000 || rate > 768000)
        return fprintf(stderr, "vkasr: standard input: WAV header has %u channels at %u Hz\n", channels, rate), -1;
    in->channels = (int)channels;
    in->rate = (int)rate;
    return 0;
}

int live_input_start(struct live_input *in) {
    ssize_t r = read_full(in->fd, in->buf, 12);
    if (r < 0) {
        if (interrupted)
            return 128 + interrupted;
        fprintf(stderr, "vkasr: standard input: read failed: %s\n", strerror(errno));
        return EXIT_AUDIO;
    }
    in->have = (size_t)r;
    if (in->have == 12 && !memcmp(in->buf, "RIFF", 4) && !memcmp(in->buf + 8, "WAVE", 4)) {
        if (parse_wav(in) != 0)
            return interrupted ? 128 + interrupted : EXIT_AUDIO;
        in->have = 0;
    }
    in->frame_bytes = sample_bytes(in->fmt) * (size_t)in->channels;
    return EXIT_OK;
}

/* Converts whole frames to mono floats. */
static void to_mono(const struct live_input *in, const unsigned char *p, size_t frames, float *out) {
    size_t sb = sample_bytes(in->fmt);
    for (size_t f = 0; f < frames; f++) {
        double acc = 0;
        for (int c = 0; c < in->channels; c++, p += sb) {
            switch (in->fmt) {
            case SAMPLE_S16: acc += (int16_t)le16(p) / 32768.0; break;
            case SAMPLE_S32: acc += (int32_t)le32(p) / 2147483648.0; break;
            case SAMPLE_U8: acc += (p[0] - 128) / 128.0; break;
            case SAMPLE_F32: {
                uint32_t u = le32(p);
                float v;
                memcpy(&v, &u, sizeof v);
                acc += isfinite(v) ? v : 0.0f; /* a stray NaN from a device must not stop a live stream */
                break;
            }
            }
        }
        out[f] = (float)(acc / in->channels);
    }
}

int live_input_read(struct live_input *in, float *out, size_t max, size_t *n) {
    size_t fb = in->frame_bytes;
    *n = 0;
    for (;;) {
        size_t frames = in->have / fb;
        if (frames > max)
            frames = max;
        if (frames) {
            to_mono(in, in->buf, frames, out);
            memmove(in->buf, in->buf + frames * fb, in->have - frames * fb);
            in->have -= frames * fb;
            *n = frames;
            return 1;
        }
        ssize_t r = read(in->fd, in->buf + in->have, (sizeof in->buf / fb) * fb - in->have);
        if (r < 0 && errno == EINTR)
            return 1; /* a signal: the caller looks at `interrupted` */
        if (r < 0) {
            fprintf(stderr, "vkasr: standard input: read failed: %s\n", strerror(errno));
            return -1;
        }
        if (r == 0)
            return 0;
        in->have += (size_t)r;
    }
}
