/* audio_io.c — audio input: decoding with libsndfile (paths, standard input, memory images),
 * channel averaging to mono and resampling with libsoxr to the requested rate.
 * Decoding is incremental: a header's frame count is never trusted for an allocation, so a file that
 * claims 2^40 frames costs only what it really contains. This file does no feature computation. */
#include "audio/audio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Decoded frames per libsndfile read call, divided by the channel count: bounds the scratch buffers
 * (256 KiB of interleaved floats) whatever the file says. */
#define CHUNK_SAMPLES 65536
/* Output samples reserved at once, at most (2^27: 2.3 hours at 16 kHz): a header's frame count is only
 * a claim, and a rate far below the output's multiplies it (a 337-byte FLAC file announcing 2^27 frames
 * at about 3 kHz asked for 2.7 GB) */
#define RESERVE_MAX ((uint64_t)1 << 27)
/* Sample rates we accept (libsndfile formats top out far below; soxr needs positive rates). Below
 * MIN_RATE there is no speech to recognise, and each input sample would become up to 16000 output
 * samples: a 2.4 KB WAV declaring 1 Hz decoded to ten minutes of audio. */
#define MIN_RATE 1000
#define MAX_RATE (1 << 24)

/* ---- the conversion sink: interleaved floats in, mono at the target rate out -------------------- */

struct sink {
    const char *name;   /* for messages: the path, "standard input", a caller's name */
    int channels, src_rate, rate;
    double ratio;       /* rate / src_rate */
    soxr_t sx;          /* NULL when src_rate == rate: samples are copied, bit-exact */
    float *mono;        /* scratch: one chunk mixed to mono */
    size_t mono_cap;
    float *out;         /* result at `rate` */
    size_t n, cap;
    uint64_t frames_in; /* source frames consumed so far (positions in messages) */
};

/* Room for the output of `frames` source frames at once (the decoder knows them up front), so that the
 * buffer is not grown and copied chunk by chunk; up to RESERVE_MAX output samples. A hint: without the
 * memory (or past RESERVE_MAX), growth happens as before. */
static void sink_reserve(struct sink *s, uint64_t frames) {
    if (frames == 0)
        return;
    double want = (double)frames * s->ratio + 64.0;
    if (want > (double)RESERVE_MAX)
        want = (double)RESERVE_MAX;
    float *p = realloc(s->out, (size_t)want * sizeof *p);
    if (p) {
        s->out = p;
        s->cap = (size_t)want;
    }
}

static vkasr_status sink_grow(struct sink *s, size_t need, struct err *e) {
    if (need <= s->cap)
        return VKASR_OK;
    size_t cap = s->cap < 4096 ? 4096 : s->cap;
    while (cap < need) {
        if (cap > SIZE_MAX / 2 / sizeof(float)) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    if (cap > SIZE_MAX / sizeof(float))
        return err_set(e, VKASR_ERR_NO_MEMORY, "%s: audio too long (%zu samples)", s->name, need);
    float *p = realloc(s->out, cap * sizeof *p);
    if (!p)
        return err_set(e, VKASR_ERR_NO_MEMORY, "%s: out of host memory for %zu decoded samples", s->name, need);
    s->out = p;
    s->cap = cap;
    return VKASR_OK;
}

static vkasr_status sink_init(struct sink *s, const char *name, int src_rate, int channels, int rate,
                              struct err *e) {
    memset(s, 0, sizeof *s);
    s->name = name;
    if (channels < 1)
        return err_set(e, VKASR_ERR_AUDIO, "%s: invalid channel count %d", name, channels);
    if (src_rate < MIN_RATE || src_rate > MAX_RATE)
        return err_set(e, VKASR_ERR_AUDIO, "%s: sample rate %d Hz is outside the %d Hz to %d Hz vkasr accepts", name,
                       src_rate, MIN_RATE, MAX_RATE);
    if (rate < 1 || rate > MAX_RATE)
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: invalid target sample rate %d Hz", name, rate);
    s->channels = channels;
    s->src_rate = src_rate;
    s->rate = rate;
    s->ratio = (double)rate / (double)src_rate;
    if (src_rate != rate) {
        /* SOXR_HQ (20-bit, linear phase, passband to ~0.91 of the lower Nyquist): the quality librosa
         * uses by default (res_type "soxr_hq"), which is how NeMo-style loaders resample; float32 in and
         * out so nothing is clipped or dithered; one thread so results are deterministic. */
        soxr_error_t se = NULL;
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
        soxr_runtime_spec_t rt = soxr_runtime_spec(1);
        s->sx = soxr_create((double)src_rate, (double)rate, 1, &se, &io, &q, &rt);
        if (!s->sx || se)
            return err_set(e, VKASR_ERR_AUDIO, "%s: cannot resample %d Hz -> %d Hz: %s", name, src_rate, rate,
                           se ? se : "soxr_create failed");
    }
    return VKASR_OK;
}

static void sink_free(struct sink *s) {
    if (s->sx)
        soxr_delete(s->sx);
    free(s->mono);
    free(s->out);
    memset(s, 0, sizeof *s);
}

/* Feeds ilen mono samples to soxr (in == NULL: end of input, drains the filter) and appends what
 * it returns. soxr may hold output back when the buffer is short, so this loops until the input is
 * consumed and the last call left room to spare. */
static vkasr_status sink_resample(struct sink *s, const float *in, size_t ilen, struct err *e) {
    size_t used = 0;
    for (;;) {
        size_t want = (size_t)((double)(ilen - used) * s->ratio) + 1024;
        TRY(sink_grow(s, s->n + want, e));
        size_t olen = s->cap - s->n, idone = 0, odone = 0;
        soxr_error_t se = soxr_process(s->sx, in ? in + used : NULL, in ? ilen - used : 0, &idone, s->out + s->n,
                                       olen, &odone);
        if (se)
            return err_set(e, VKASR_ERR_AUDIO, "%s: resampling %d Hz -> %d Hz failed: %s", s->name, s->src_rate,
                           s->rate, se);
        used += idone;
        /* Finite input can still overflow the filter: float files may hold values up to FLT_MAX. */
        for (size_t k = s->n; k < s->n + odone; k++)
            if (!isfinite(s->out[k]))
                return err_set(e, VKASR_ERR_AUDIO,
                               "%s: resampling %d Hz -> %d Hz overflowed at %.6f s: sample values too large for "
                               "audio",
                               s->name, s->src_rate, s->rate, (double)k / s->rate);
        s->n += odone;
        if (odone == olen)
            continue; /* output was cut short: more is waiting */
        if (!in)
            return VKASR_OK; /* drained */
        if (used >= ilen)
            return VKASR_OK;
        if (idone == 0 && odone == 0)
            return err_set(e, VKASR_ERR_INTERNAL, "%s: resampler made no progress (%zu of %zu samples used)",
                           s->name, used, ilen);
    }
}

/* Rejects a non-finite sample among `frames` interleaved frames of C channels, the first of which is
 * frame `first` of the input (named in the message). */
static vkasr_status check_finite(const char *name, const float *x, size_t frames, int C, uint64_t first, int src_rate,
                                 struct err *e) {
    for (size_t i = 0; i < frames * (size_t)C; i++)
        if (!isfinite(x[i])) {
            uint64_t f = first + i / (size_t)C;
            return err_set(e, VKASR_ERR_AUDIO, "%s: sample %llu (channel %d, %.6f s) is %s; audio must be finite",
                           name, (unsigned long long)f, (int)(i % (size_t)C), (double)f / src_rate,
                           isnan(x[i]) ? "NaN" : "infinite");
        }
    return VKASR_OK;
}

/* Appends `frames` interleaved frames: rejects non-finite samples (naming the first), averages the
 * channels (mean, like transformers), resamples or copies. */
static vkasr_status sink_push(struct sink *s, const float *x, size_t frames, struct err *e) {
    int C = s->channels;
    TRY(check_finite(s->name, x, frames, C, s->frames_in, s->src_rate, e));
    s->frames_in += frames;
    const float *mono = x;
    if (C > 1) {
        if (s->mono_cap < frames) {
            float *p = realloc(s->mono, frames * sizeof *p);
            if (!p)
                return err_set(e, VKASR_ERR_NO_MEMORY, "%s: out of host memory", s->name);
            s->mono = p;
            s->mono_cap = frames;
        }
        /* Sum in double, one rounding at the end: for two channels this equals float32 (a+b)/2. */
        for (size_t f = 0; f < frames; f++) {
            double acc = 0;
            for (int c = 0; c < C; c++)
                acc += x[f * (size_t)C + (size_t)c];
            s->mono[f] = (float)(acc / C);
        }
        mono = s->mono;
    }
    if (s->sx)
        return sink_resample(s, mono, frames, e);
    TRY(sink_grow(s, s->n + frames, e));
    memcpy(s->out + s->n, mono, frames * sizeof *mono);
    s->n += frames;
    return VKASR_OK;
}

/* Drains the resampler and hands the buffer to `out` (the sink no longer owns it). */
static vkasr_status sink_finish(struct sink *s, struct audio *out, struct err *e) {
    if (s->sx)
        TRY(sink_resample(s, NULL, 0, e));
    if (s->n && s->cap - s->n > s->n / 8) { /* give back the geometric-growth slack; failure is harmless */
        float *p = realloc(s->out, s->n * sizeof *p);
        if (p)
            s->out = p;
    }
    out->samples = s->n ? s->out : NULL;
    out->borrowed = false;
    if (!s->n)
        free(s->out);
    out->n = s->n;
    out->rate = s->rate;
    out->source_rate = s->src_rate;
    out->source_channels = s->channels;
    s->out = NULL;
    s->n = s->cap = 0;
    return VKASR_OK;
}

/* ---- libsndfile decoding ------------------------------------------------------------------------ */

static vkasr_status decode_sndfile(SNDFILE *sf, const SF_INFO *info, const char *name, int rate,
                                   struct audio *out, struct err *e) {
    struct sink s;
    vkasr_status st = sink_init(&s, name, info->samplerate, info->channels, rate, e);
    if (st != VKASR_OK) {
        sink_free(&s);
        return st;
    }
    /* Integer formats become s / 2^(bits-1) (16-bit: s / 32768), the default, set explicitly because
     * the model's input scale depends on it. Float formats are returned as stored: values beyond
     * [-1, 1] are kept (clipping is the caller's business). */
    sf_command(sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
    /* the header's frame count (a truncated or malformed file may claim more: sink_reserve bounds it) */
    sink_reserve(&s, info->frames > 0 ? (uint64_t)info->frames : 0);
    sf_count_t chunk = CHUNK_SAMPLES / info->channels;
    if (chunk < 1)
        chunk = 1;
    float *buf = malloc((size_t)chunk * (size_t)info->channels * sizeof *buf);
    if (!buf) {
        sink_free(&s);
        return err_set(e, VKASR_ERR_NO_MEMORY, "%s: out of host memory", name);
    }
    for (;;) {
        sf_count_t got = sf_readf_float(sf, buf, chunk);
        if (got <= 0)
            break;
        st = sink_push(&s, buf, (size_t)got, e);
        if (st != VKASR_OK)
            break;
    }
    free(buf);
    if (st == VKASR_OK && sf_error(sf) != SF_ERR_NO_ERROR)
        st = err_set(e, VKASR_ERR_AUDIO, "%s: decoding failed after %llu frames: %s", name,
                     (unsigned long long)s.frames_in, sf_strerror(sf));
    if (st == VKASR_OK)
        st = sink_finish(&s, out, e);
    sink_free(&s);
    return st;
}

/* libsndfile reads every input through virtual I/O on our side (a memory image or a descriptor we own,
 * read with pread), never through sf_open_fd: that closes the descriptor on some failed opens even when
 * told not to, and closing it again here could close a file another thread had just opened under the
 * same number (so decoding a bad file could break, or silently replace, another thread's input).
 * Open failures are reported only through a library-global error (sf_strerror(NULL)) that an open on
 * another thread overwrites, so opens are serialised and a failed open's reason is copied before the
 * lock is released: the message is the input's own. Only the opens take the lock, not the decoding;
 * code outside vkasr that opens files through libsndfile at the same time can still overwrite it. */
static pthread_mutex_t sf_open_mu = PTHREAD_MUTEX_INITIALIZER;

/* A seekable input: a memory image (p) or a regular file's descriptor (fd, p NULL). */
struct vsrc {
    const unsigned char *p;
    int fd;
    sf_count_t size, pos;
    int read_errno; /* the first failed read of fd (0: none) */
};

static sf_count_t vio_len(void *u) { return ((struct vsrc *)u)->size; }

static sf_count_t vio_seek(sf_count_t off, int whence, void *u) {
    struct vsrc *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->size;
    if ((off > 0 && base > INT64_MAX - off) || base + off < 0)
        return -1;
    m->pos = base + off; /* past the end is allowed, as for files: reads then return 0 */
    return m->pos;
}

static sf_count_t vio_read(void *dst, sf_count_t count, void *u) {
    struct vsrc *m = u;
    if (count <= 0 || m->pos >= m->size)
        return 0;
    sf_count_t n = m->size - m->pos < count ? m->size - m->pos : count;
    if (m->p) {
        memcpy(dst, m->p + m->pos, (size_t)n);
    } else {
        sf_count_t got = 0;
        while (got < n) {
            ssize_t r = pread(m->fd, (unsigned char *)dst + got, (size_t)(n - got), (off_t)(m->pos + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) { /* an error, or the file shrank since it was measured */
                if (r < 0 && !m->read_errno)
                    m->read_errno = errno;
                break;
            }
            got += r;
        }
        n = got;
    }
    m->pos += n;
    return n;
}

static sf_count_t vio_write(const void *src, sf_count_t count, void *u) { return 0; }

static sf_count_t vio_tell(void *u) { return ((struct vsrc *)u)->pos; }

/* Opens a source through libsndfile and decodes it. */
static vkasr_status load_vsrc(struct vsrc *src, const char *name, int rate, struct audio *out, struct err *e) {
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    pthread_mutex_lock(&sf_open_mu);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, src);
    vkasr_status st = VKASR_OK;
    if (!sf)
        st = err_set(e, VKASR_ERR_AUDIO, "%s: cannot decode audio: %s", name, sf_strerror(NULL));
    pthread_mutex_unlock(&sf_open_mu);
    if (sf) {
        st = decode_sndfile(sf, &info, name, rate, out, e);
        sf_close(sf);
    }
    if (src->read_errno) { /* the reason libsndfile saw a short or malformed file */
        audio_free(out);
        st = err_set(e, VKASR_ERR_IO, "%s: read failed: %s", name, strerror(src->read_errno));
    }
    return st;
}

static vkasr_status load_memory_named(const void *data, size_t size, const char *name, int rate,
                                      struct audio *out, struct err *e) {
    if (size == 0)
        return err_set(e, VKASR_ERR_AUDIO, "%s: empty input (0 bytes), not an audio file", name);
    if (size > (size_t)INT64_MAX)
        return err_set(e, VKASR_ERR_AUDIO, "%s: input too large", name);
    struct vsrc m = {.p = data, .fd = -1, .size = (sf_count_t)size};
    return load_vsrc(&m, name, rate, out, e);
}

/* Reads a whole descriptor (a pipe, standard input) into memory: libsndfile needs to seek. */
static vkasr_status read_all(int fd, const char *name, unsigned char **data, size_t *size, struct err *e) {
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    if (!buf)
        return err_set(e, VKASR_ERR_NO_MEMORY, "%s: out of host memory", name);
    for (;;) {
        if (n == cap) {
            if (cap > SIZE_MAX / 2) {
                free(buf);
                return err_set(e, VKASR_ERR_NO_MEMORY, "%s: input too large", name);
            }
            unsigned char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                return err_set(e, VKASR_ERR_NO_MEMORY, "%s: out of host memory after %zu bytes", name, n);
            }
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int er = errno;
            free(buf);
            return err_set(e, VKASR_ERR_IO, "%s: read failed: %s", name, strerror(er));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *data = buf;
    *size = n;
    return VKASR_OK;
}

static vkasr_status load_fd_stream(int fd, const char *name, int rate, struct audio *out, struct err *e) {
    unsigned char *data = NULL;
    size_t size = 0;
    TRY(read_all(fd, name, &data, &size, e));
    vkasr_status st = load_memory_named(data, size, name, rate, out, e);
    free(data);
    return st;
}

/* ---- public entry points ------------------------------------------------------------------------ */

vkasr_status audio_load_file(const char *path, int rate, struct audio *out, struct err *e) {
    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return err_set(e, VKASR_ERR_INVALID_ARG, "audio_load_file: NULL %s", path ? "output" : "path");
    if (strcmp(path, "-") == 0)
        return load_fd_stream(STDIN_FILENO, "standard input", rate, out, e);

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, VKASR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat stt;
    vkasr_status st;
    if (fstat(fd, &stt) != 0) {
        st = err_set(e, VKASR_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(stt.st_mode)) {
        st = err_set(e, VKASR_ERR_IO, "%s: is a directory", path);
    } else if (!S_ISREG(stt.st_mode)) {
        st = load_fd_stream(fd, path, rate, out, e); /* FIFO, /dev/stdin, <(...): not seekable */
    } else if (stt.st_size == 0) {
        st = err_set(e, VKASR_ERR_AUDIO, "%s: file is empty (0 bytes), not an audio file", path);
    } else {
        struct vsrc src = {.p = NULL, .fd = fd, .size = (sf_count_t)stt.st_size};
        st = load_vsrc(&src, path, rate, out, e);
    }
    close(fd);
    return st;
}

vkasr_status audio_load_memory(const void *data, size_t size, const char *name, int rate, struct audio *out,
                               struct err *e) {
    if (out)
        memset(out, 0, sizeof *out);
    if (!name)
        name = "(memory)";
    if (!out || (!data && size))
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: audio_load_memory: NULL %s", name, out ? "data" : "output");
    return load_memory_named(data, size, name, rate, out, e);
}

vkasr_status audio_from_pcm(const float *interleaved, size_t frames, int src_rate, int channels, int rate,
                            struct audio *out, struct err *e) {
    const char *name = "PCM input";
    if (out)
        memset(out, 0, sizeof *out);
    if (!out || (!interleaved && frames))
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: NULL %s", name, out ? "samples" : "output");
    if (channels < 1 || src_rate < MIN_RATE || src_rate > MAX_RATE)
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: invalid format (%d channels, %d Hz; rates from %d Hz to %d Hz)",
                       name, channels, src_rate, MIN_RATE, MAX_RATE);
    if (frames > SIZE_MAX / sizeof(float) / (size_t)channels)
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: %zu frames x %d channels is too large", name, frames,
                       channels);
    if (channels == 1 && src_rate == rate) { /* nothing to convert: the caller's samples, checked */
        TRY(check_finite(name, interleaved, frames, 1, 0, src_rate, e));
        *out = (struct audio){.samples = frames ? interleaved : NULL, .n = frames, .rate = rate,
                              .source_rate = src_rate, .source_channels = 1, .borrowed = true};
        return VKASR_OK;
    }
    struct sink s;
    vkasr_status st = sink_init(&s, name, src_rate, channels, rate, e);
    if (st == VKASR_OK)
        sink_reserve(&s, frames);
    size_t chunk = CHUNK_SAMPLES / (size_t)channels;
    if (chunk < 1)
        chunk = 1;
    for (size_t f = 0; st == VKASR_OK && f < frames; f += chunk) {
        size_t k = frames - f < chunk ? frames - f : chunk;
        st = sink_push(&s, interleaved + f * (size_t)channels, k, e);
    }
    if (st == VKASR_OK)
        st = sink_finish(&s, out, e);
    sink_free(&s);
    return st;
}

void audio_free(struct audio *a) {
    if (!a)
        return;
    if (!a->borrowed)
        free((void *)a->samples);
    memset(a, 0, sizeof *a);
}

/* ---- incremental conversion (live streams) ------------------------------------------------------ */

struct audio_conv {
    struct sink sink;
    char name[64];
};

vkasr_status audio_conv_create(const char *name, int src_rate, int channels, int rate, struct audio_conv **out,
                               struct err *e) {
    *out = NULL;
    struct audio_conv *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    snprintf(c->name, sizeof c->name, "%s", name ? name : "PCM input");
    vkasr_status st = sink_init(&c->sink, c->name, src_rate, channels, rate, e);
    if (st != VKASR_OK) {
        audio_conv_free(c);
        return st;
    }
    *out = c;
    return VKASR_OK;
}

vkasr_status audio_conv_push(struct audio_conv *c, const float *interleaved, size_t frames, struct err *e) {
    if (frames > SIZE_MAX / sizeof(float) / (size_t)c->sink.channels)
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: %zu frames x %d channels is too large", c->name, frames,
                       c->sink.channels);
    size_t chunk = CHUNK_SAMPLES / (size_t)c->sink.channels;
    if (chunk < 1)
        chunk = 1;
    for (size_t f = 0; f < frames; f += chunk) {
        size_t k = frames - f < chunk ? frames - f : chunk;
        TRY(sink_push(&c->sink, interleaved + f * (size_t)c->sink.channels, k, e));
    }
    return VKASR_OK;
}

vkasr_status audio_conv_drain(struct audio_conv *c, struct err *e) {
    return c->sink.sx ? sink_resample(&c->sink, NULL, 0, e) : VKASR_OK;
}

const float *audio_conv_output(const struct audio_conv *c, size_t *n) {
    *n = c->sink.n;
    return c->sink.out;
}

void audio_conv_consume(struct audio_conv *c) { c->sink.n = 0; }

int audio_conv_source_rate(const struct audio_conv *c) { return c->sink.src_rate; }

void audio_conv_free(struct audio_conv *c) {
    if (!c)
        return;
    sink_free(&c->sink);
    free(c);
}
