/* cmd_live.c — `vkasr live`: live transcription of raw PCM or WAV arriving on standard input (a microphone
 * through arecord, a call), or of a file fed at real time with --simulate. Final text goes to stdout one
 * segment per line; on a terminal the segment being spoken is shown as it is recognised. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage_live(FILE *f) {
    vkasr_stream_params d = vkasr_stream_params_default();
    fprintf(f,
            "usage: vkasr live [-m MODEL] [options]                        (audio on standard input)\n"
            "       vkasr live [-m MODEL] [options] --simulate FILE [--speed X]\n"
            "\n"
            "Transcribes audio as it arrives. Standard input carries raw PCM (default: 16-bit little-endian,\n"
            "16000 Hz, mono) or a WAV stream, whose header is recognised, e.g.\n"
            "  arecord -q -f S16_LE -r 16000 -c 1 -t raw | vkasr live\n"
            "  arecord -q -f S16_LE -r 16000 -t wav | vkasr live --timestamps\n"
            "Final text goes to stdout, one line per segment (a sentence, or speech up to a pause of 1 s).\n"
            "When stdout is a terminal, the segment being spoken is shown on the last line as it is\n"
            "recognised (words still open to change dimmed) and rewritten until it is final.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH        Hugging Face Parakeet directory or vkasr .gguf file\n"
            "                          (default: $VKASR_MODEL, else the first that exists of\n"
            "                          %s)\n"
            "      --rate HZ           sample rate of raw input (default 16000; other rates are resampled)\n"
            "      --channels N        channels of raw input, interleaved (default 1; averaged)\n"
            "      --format F          sample format of raw input: s16le (default), s32le, f32le\n"
            "      --simulate FILE     read FILE (any format libsndfile reads) instead of standard input,\n"
            "                          at real-time speed: for demos and tests\n"
            "      --speed X           with --simulate: X times real time (default 1); 0: as fast as\n"
            "                          possible, with --no-catch-up implied (the text then depends only on\n"
            "                          the audio, not on timing)\n"
            "      --hop S             new audio per window, seconds (default %.2f)\n"
            "      --left S            left context a window repeats, seconds (default %.2f)\n"
            "      --right S           right context after the part a window decides, seconds (default %.2f);\n"
            "                          a word becomes final %.2f-%.2f s after it ends, plus compute time\n"
            "      --no-catch-up       transcribe every hop in turn even when the device falls behind\n"
            "                          (default: a late window takes all the audio that arrived meanwhile)\n"
            "      --timestamps        prefix each line with [start --> end]\n"
            "      --json              one JSON object per line for each final segment instead: text, start,\n"
            "                          end and words (text, start, end; seconds from the stream's start); no\n"
            "                          partial line\n"
            "  -d, --device DEV        the device, as for transcribe: cpu, cuda[:N], vulkan[:N|NAME], N or NAME\n"
            "                          (also $VKASR_DEVICE; default: the best Vulkan device)\n"
            "  -p, --precision P       f16 (default where supported) or f32\n"
            "  -v, --verbose           model, device and, at the end, the stream's figures on stderr: windows,\n"
            "                          compute per audio second, finalisation latency (median, 95th percentile)\n"
            "  -np, --no-prints        print nothing on stderr but errors\n"
            "  -h, --help              this help\n"
            "\n"
            "Ctrl-C (SIGINT) or SIGTERM stops reading: what was received is finished (its last words printed)\n"
            "and vkasr exits 130 (143 for SIGTERM). A second Ctrl-C ends vkasr at once.\n"
            "\n"
            "exit codes: 0 success (end of input), 1 transcription failed, 2 usage error, 3 model error,\n"
            "            4 audio or I/O error, 5 no usable device (or no NVIDIA driver for cuda), 130 interrupted\n",
            VKASR_DEFAULT_MODELS[0] ? VKASR_DEFAULT_MODELS : "(none built in)", d.hop_seconds, d.left_context_seconds,
            d.right_context_seconds, d.right_context_seconds, d.hop_seconds + d.right_context_seconds);
}

/* ---- input: raw PCM or WAV on a descriptor -------------------------------------------------------- */

enum sample_fmt { FMT_S16, FMT_S32, FMT_F32, FMT_U8 };

struct input {
    int fd;
    enum sample_fmt fmt;
    int rate, channels;
    size_t frame_bytes;
};

static size_t sample_bytes(enum sample_fmt f) { return f == FMT_S16 ? 2 : f == FMT_U8 ? 1 : 4; }

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

/* Parses a WAV header after "RIFF????WAVE" up to the data chunk. 0, or -1 with a message printed. */
static int parse_wav(struct input *in) {
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
        in->fmt = FMT_S16;
    else if (tag == 1 && bits == 32)
        in->fmt = FMT_S32;
    else if (tag == 1 && bits == 8)
        in->fmt = FMT_U8;
    else if (tag == 3 && bits == 32)
        in->fmt = FMT_F32;
    else
        return fprintf(stderr, "vkasr: standard input: WAV format %u with %u bits per sample is not supported "
                               "(16- or 32-bit integer, 32-bit float)\n", tag, bits), -1;
    if (channels < 1 || channels > 64 || rate < 1000 || rate > 768000)
        return fprintf(stderr, "vkasr: standard input: WAV header has %u channels at %u Hz\n", channels, rate), -1;
    in->channels = (int)channels;
    in->rate = (int)rate;
    return 0;
}

/* Converts whole frames to mono floats. */
static void to_mono(const struct input *in, const unsigned char *p, size_t frames, float *out) {
    size_t sb = sample_bytes(in->fmt);
    for (size_t f = 0; f < frames; f++) {
        double acc = 0;
        for (int c = 0; c < in->channels; c++, p += sb) {
            switch (in->fmt) {
            case FMT_S16: acc += (int16_t)le16(p) / 32768.0; break;
            case FMT_S32: acc += (int32_t)le32(p) / 2147483648.0; break;
            case FMT_U8: acc += (p[0] - 128) / 128.0; break;
            case FMT_F32: {
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

/* ---- what the stream reports ---------------------------------------------------------------------- */

struct live_out {
    pthread_mutex_t lock;
    bool tty, timestamps, json;
    int cols;
    char *seg;                       /* final text of the open segment                              */
    size_t seg_len, seg_cap;
    double seg_start, seg_end;
    bool seg_has_words;
    struct live_word { char *text; double start, end; } *words; /* --json: the open segment's words   */
    size_t n_words, cap_words;
    char *partial;
    /* latency: when audio up to each push had arrived (wall clock), and per final word */
    double *push_s, *push_wall;
    size_t n_push, cap_push;
    double *lat;
    size_t n_lat, cap_lat;
    int write_failed;
};

static void seg_append(struct live_out *o, const char *t) {
    size_t n = strlen(t);
    if (o->seg_len + n + 2 > o->seg_cap) {
        size_t c = o->seg_cap ? o->seg_cap * 2 : 256;
        while (c < o->seg_len + n + 2)
            c *= 2;
        char *p = realloc(o->seg, c);
        if (!p)
            return;
        o->seg = p;
        o->seg_cap = c;
    }
    if (o->seg_len)
        o->seg[o->seg_len++] = ' ';
    memcpy(o->seg + o->seg_len, t, n + 1);
    o->seg_len += n;
}

/* --json: keeps a final word of the open segment. */
static void word_append(struct live_out *o, const vkasr_word *w) {
    if (o->n_words == o->cap_words) {
        size_t c = o->cap_words ? 2 * o->cap_words : 64;
        struct live_word *p = realloc(o->words, c * sizeof *p);
        if (!p)
            return;
        o->words = p;
        o->cap_words = c;
    }
    char *t = strdup(w->text ? w->text : "");
    if (t)
        o->words[o->n_words++] = (struct live_word){t, w->start, w->end};
}

static void words_clear(struct live_out *o) {
    for (size_t i = 0; i < o->n_words; i++)
        free(o->words[i].text);
    o->n_words = 0;
}

/* --json: the segment that just ended, as one line. */
static void print_json_segment(const struct live_out *o) {
    fputs("{\"text\":", stdout);
    json_str(stdout, o->seg ? o->seg : "");
    printf(",\"start\":%.3f,\"end\":%.3f,\"words\":[", o->seg_start, o->seg_end);
    for (size_t i = 0; i < o->n_words; i++) {
        fputs(i ? ",{\"text\":" : "{\"text\":", stdout);
        json_str(stdout, o->words[i].text);
        printf(",\"start\":%.3f,\"end\":%.3f}", o->words[i].start, o->words[i].end);
    }
    fputs("]}\n", stdout);
}

static void print_time(double t) {
    int h = (int)(t / 3600), m = (int)(fmod(t, 3600) / 60);
    printf("%02d:%02d:%06.3f", h, m, fmod(t, 60));
}

/* s, or the next character start after it when s points inside a UTF-8 sequence. */
static const char *utf8_start(const char *s) {
    while ((*s & 0xC0) == 0x80)
        s++;
    return s;
}

/* The terminal line: the open segment's final words, then the partial ones dimmed; only its tail when
 * it is wider than the terminal (a wrapped line cannot be rewritten with \r). */
static void redraw(struct live_out *o) {
    const char *f = o->seg ? o->seg : "", *p = o->partial ? o->partial : "";
    size_t lf = strlen(f), lp = strlen(p), room = o->cols > 8 ? (size_t)o->cols - 1 : 79;
    size_t total = lf + (lf && lp ? 1 : 0) + lp;
    size_t skip = total > room ? total - room : 0;
    fputs("\r\033[K", stdout);
    if (skip < lf)
        fputs(utf8_start(f + skip), stdout);
    if (lp) {
        size_t ps = skip > lf ? skip - lf - (lf ? 1 : 0) : 0;
        if (lf && skip <= lf)
            fputc(' ', stdout);
        if (ps < lp)
            printf("\033[2m%s\033[0m", utf8_start(p + ps));
    }
    fflush(stdout);
}

static double wall_for(const struct live_out *o, double audio_s) {
    size_t lo = 0, hi = o->n_push; /* first push that brought audio up to audio_s */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (o->push_s[mid] < audio_s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->n_push ? o->push_wall[lo] : NAN;
}

static void on_final(const vkasr_stream_update *u, void *ud) {
    struct live_out *o = ud;
    double now = now_s();
    pthread_mutex_lock(&o->lock);
    for (size_t i = 0; i < u->n_words; i++) {
        double w = wall_for(o, u->words[i].end);
        if (isfinite(w) && o->n_lat < o->cap_lat)
            o->lat[o->n_lat++] = now - w;
    }
    pthread_mutex_unlock(&o->lock);
    if (u->n_words) {
        if (!o->seg_has_words)
            o->seg_start = u->words[0].start;
        o->seg_end = u->words[u->n_words - 1].end;
        o->seg_has_words = true;
        seg_append(o, u->text);
        for (size_t i = 0; o->json && i < u->n_words; i++)
            word_append(o, &u->words[i]);
    }
    if (u->segment_end && o->seg_has_words) {
        if (o->tty && !o->json)
            fputs("\r\033[K", stdout);
        if (o->json) {
            print_json_segment(o);
            words_clear(o);
        } else if (o->timestamps) {
            putchar('[');
            print_time(o->seg_start);
            fputs(" --> ", stdout);
            print_time(o->seg_end);
            fputs("]  ", stdout);
        }
        if (!o->json)
            printf("%s\n", o->seg ? o->seg : "");
        o->seg_len = 0;
        if (o->seg)
            o->seg[0] = '\0';
        o->seg_has_words = false;
        if (fflush(stdout) != 0)
            o->write_failed = 1;
    }
}

static void on_partial(const vkasr_stream_update *u, void *ud) {
    struct live_out *o = ud;
    free(o->partial);
    o->partial = strdup(u->text);
    if (o->tty && !o->json)
        redraw(o);
}

static void note_push(struct live_out *o, double audio_s) {
    pthread_mutex_lock(&o->lock);
    if (o->n_push == o->cap_push) {
        size_t c = o->cap_push ? 2 * o->cap_push : 4096;
        double *a = realloc(o->push_s, c * sizeof *a);
        if (a)
            o->push_s = a;
        double *b = a ? realloc(o->push_wall, c * sizeof *b) : NULL;
        if (b) {
            o->push_wall = b;
            o->cap_push = c;
        }
    }
    if (o->n_push < o->cap_push) {
        o->push_s[o->n_push] = audio_s;
        o->push_wall[o->n_push++] = now_s();
    }
    pthread_mutex_unlock(&o->lock);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- feeding -------------------------------------------------------------------------------------- */

static void sleep_until(double t) {
    double d = t - now_s();
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
        nanosleep(&ts, NULL); /* a signal cuts it short: the caller checks `interrupted` */
    }
}

/* --simulate: the file's 16 kHz samples in 20 ms pieces at `speed` times real time. */
static vkasr_status feed_samples(vkasr_stream *st, const float *x, size_t n, double speed, struct live_out *o) {
    const size_t piece = VKASR_SAMPLE_RATE / 50;
    vkasr_status s = VKASR_OK;
    double t0 = now_s();
    for (size_t i = 0; i < n && !interrupted && s == VKASR_OK; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        if (speed > 0)
            sleep_until(t0 + (double)(i + k) / VKASR_SAMPLE_RATE / speed);
        if (interrupted)
            break;
        s = vkasr_stream_push(st, x + i, k, VKASR_SAMPLE_RATE);
        note_push(o, (double)(i + k) / VKASR_SAMPLE_RATE);
    }
    return s;
}

/* Standard input: whatever has arrived, in whole frames, as soon as it arrives. */
static vkasr_status feed_fd(vkasr_stream *st, struct input *in, const unsigned char *pre, size_t npre,
                            struct live_out *o, int *rc) {
    unsigned char buf[8192];
    float mono[8192];
    size_t have = npre, fb = in->frame_bytes;
    memcpy(buf, pre, npre);
    uint64_t frames_in = 0;
    vkasr_status s = VKASR_OK;
    while (!interrupted && s == VKASR_OK) {
        size_t frames = have / fb;
        if (frames) {
            to_mono(in, buf, frames, mono);
            s = vkasr_stream_push(st, mono, frames, in->rate);
            frames_in += frames;
            note_push(o, (double)frames_in / in->rate);
            memmove(buf, buf + frames * fb, have - frames * fb);
            have -= frames * fb;
        }
        size_t want = (sizeof buf / fb) * fb - have; /* at most as many frames as `mono` holds */
        ssize_t r = read(in->fd, buf + have, want);
        if (r < 0 && errno == EINTR)
            continue; /* a signal: `interrupted` ends the loop */
        if (r < 0) {
            fprintf(stderr, "vkasr: standard input: read failed: %s\n", strerror(errno));
            *rc = EXIT_AUDIO;
            break;
        }
        if (r == 0)
            break;
        have += (size_t)r;
    }
    return s;
}

/* ---- the command ---------------------------------------------------------------------------------- */

static int parse_seconds(const char *v, const char *opt, double *out) {
    char *end = NULL;
    double d = v ? strtod(v, &end) : NAN;
    if (!v || !*v || *end || !(d > 0) || d > 3600) {
        fprintf(stderr, "vkasr: %s needs a duration in seconds (> 0)\n", opt);
        return EXIT_USAGE;
    }
    *out = d;
    return EXIT_OK;
}

int cmd_live(int argc, char **argv) {
    const char *model = getenv("VKASR_MODEL"), *device = NULL, *simulate = NULL;
    char default_path[4096];
    vkasr_stream_params sp = vkasr_stream_params_default();
    vkasr_precision precision = VKASR_PRECISION_AUTO;
    struct input in = {.fd = STDIN_FILENO, .fmt = FMT_S16, .rate = VKASR_SAMPLE_RATE, .channels = 1};
    double speed = 1.0;
    bool verbose = false, no_prints = false, timestamps = false, json = false, speed_given = false;
    int rc = EXIT_OK;
    for (int i = 0; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v;
        char *end = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_live(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            rc = (model = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--device")) {
            rc = (device = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--precision")) {
            if (!(v = arg_value(argc, argv, &i, a)))
                rc = EXIT_USAGE;
            else if (!strcmp(v, "f32") || !strcmp(v, "f16"))
                precision = v[1] == '3' ? VKASR_PRECISION_F32 : VKASR_PRECISION_F16;
            else {
                fprintf(stderr, "vkasr: unknown --precision '%s' (f32, f16)\n", v);
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--rate")) {
            long r = (v = arg_value(argc, argv, &i, a)) ? strtol(v, &end, 10) : 0;
            if (!v || *end || r < 1000 || r > 768000) {
                fprintf(stderr, "vkasr: --rate needs a sample rate in Hz (1000 to 768000)\n");
                rc = EXIT_USAGE;
            }
            in.rate = (int)r;
        } else if (!strcmp(a, "--channels")) {
            long c = (v = arg_value(argc, argv, &i, a)) ? strtol(v, &end, 10) : 0;
            if (!v || *end || c < 1 || c > 64) {
                fprintf(stderr, "vkasr: --channels needs a channel count (1 to 64)\n");
                rc = EXIT_USAGE;
            }
            in.channels = (int)c;
        } else if (!strcmp(a, "--format")) {
            if (!(v = arg_value(argc, argv, &i, a)))
                rc = EXIT_USAGE;
            else if (!strcmp(v, "s16le"))
                in.fmt = FMT_S16;
            else if (!strcmp(v, "s32le"))
                in.fmt = FMT_S32;
            else if (!strcmp(v, "f32le"))
                in.fmt = FMT_F32;
            else {
                fprintf(stderr, "vkasr: unknown --format '%s' (s16le, s32le, f32le)\n", v);
                rc = EXIT_USAGE;
            }
        } else if (!strcmp(a, "--simulate")) {
            rc = (simulate = arg_value(argc, argv, &i, a)) ? EXIT_OK : EXIT_USAGE;
        } else if (!strcmp(a, "--speed")) {
            speed = (v = arg_value(argc, argv, &i, a)) ? strtod(v, &end) : NAN;
            if (!v || *end || !(speed >= 0) || speed > 1000) {
                fprintf(stderr, "vkasr: --speed needs a factor (0 for as fast as possible, up to 1000)\n");
                rc = EXIT_USAGE;
            }
            speed_given = true;
        } else if (!strcmp(a, "--hop")) {
            rc = parse_seconds(arg_value(argc, argv, &i, a), a, &sp.hop_seconds);
        } else if (!strcmp(a, "--left")) {
            rc = parse_seconds(arg_value(argc, argv, &i, a), a, &sp.left_context_seconds);
        } else if (!strcmp(a, "--right")) {
            rc = parse_seconds(arg_value(argc, argv, &i, a), a, &sp.right_context_seconds);
        } else if (!strcmp(a, "--no-catch-up")) {
            sp.catch_up = false;
        } else if (!strcmp(a, "--timestamps")) {
            timestamps = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else if (!strcmp(a, "-np") || !strcmp(a, "--no-prints")) {
            no_prints = true;
        } else {
            fprintf(stderr, "vkasr: %s '%s' (see vkasr live --help)\n",
                    a[0] == '-' ? "unknown option" : "unexpected argument", a);
            rc = EXIT_USAGE;
        }
    }
    if (rc == EXIT_OK && speed_given && !simulate) {
        fprintf(stderr, "vkasr: --speed applies to --simulate only\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && !simulate && isatty(STDIN_FILENO)) {
        fprintf(stderr, "vkasr: standard input is a terminal: pipe audio into vkasr live, e.g. arecord -q -f S16_LE "
                        "-r 16000 -t raw | vkasr live (see vkasr live --help)\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK && !(model = model_or_default(model, default_path, sizeof default_path)))
        rc = EXIT_USAGE;
    if (rc != EXIT_OK)
        return rc;
    if (simulate && speed == 0)
        sp.catch_up = false;
    catch_interrupts();

    /* --simulate: the file is decoded before the model is loaded (a bad file fails at once). Standard
     * input: a WAV header is recognised by its first 12 bytes; otherwise they are audio. */
    float *sim = NULL;
    size_t nsim = 0;
    unsigned char pre[12];
    size_t npre = 0;
    if (simulate) {
        vkasr_error aerr;
        vkasr_status as = vkasr_audio_load(simulate, &sim, &nsim, &aerr);
        if (as != VKASR_OK) {
            fprintf(stderr, "vkasr: %s\n", aerr.message);
            return exit_code_for(as, 0);
        }
    } else {
        ssize_t r = read_full(in.fd, pre, sizeof pre);
        if (r < 0) {
            if (interrupted)
                return 128 + interrupted;
            fprintf(stderr, "vkasr: standard input: read failed: %s\n", strerror(errno));
            return EXIT_AUDIO;
        }
        npre = (size_t)r;
        if (npre == 12 && !memcmp(pre, "RIFF", 4) && !memcmp(pre + 8, "WAVE", 4)) {
            if (parse_wav(&in) != 0)
                return interrupted ? 128 + interrupted : EXIT_AUDIO;
            npre = 0;
        }
        in.frame_bytes = sample_bytes(in.fmt) * (size_t)in.channels;
    }

    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = device;
    mp.precision = precision;
    mp.log_level = no_prints ? VKASR_LOG_ERROR : verbose ? VKASR_LOG_INFO : VKASR_LOG_WARN;
    mp.log_callback = log_to_stderr;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    vkasr_status st = vkasr_model_load(model, &mp, &m, &err);
    if (st == VKASR_OK)
        st = vkasr_session_create(m, &s, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        vkasr_model_free(m);
        vkasr_free(sim);
        return exit_code_for(st, 1);
    }
    if (verbose && !no_prints) {
        vkasr_model_info info;
        vkasr_model_get_info(m, &info);
        fprintf(stderr, "vkasr: device %s, precision %s, %.1fM parameters\n", info.device_name,
                info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", info.n_params / 1e6);
        if (!simulate)
            fprintf(stderr, "vkasr: input %d Hz, %d channel%s, %s\n", in.rate, in.channels, in.channels > 1 ? "s" : "",
                    in.fmt == FMT_S16 ? "s16le" : in.fmt == FMT_S32 ? "s32le" : in.fmt == FMT_F32 ? "f32le" : "u8");
    }

    struct live_out o = {.tty = isatty(STDOUT_FILENO), .timestamps = timestamps, .json = json, .cols = 80};
    struct winsize ws;
    if (o.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        o.cols = ws.ws_col;
    o.cap_lat = 1 << 16;
    o.lat = malloc(o.cap_lat * sizeof *o.lat);
    pthread_mutex_init(&o.lock, NULL);
    sp.final_callback = on_final;
    sp.partial_callback = on_partial;
    sp.user_data = &o;
    vkasr_stream *stream = NULL;
    st = o.lat ? vkasr_stream_create(s, &sp, &stream, &err) : VKASR_ERR_NO_MEMORY;
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", o.lat ? err.message : "out of memory");
        rc = st == VKASR_ERR_INVALID_ARG ? EXIT_USAGE : EXIT_FAIL;
    } else {
        st = simulate ? feed_samples(stream, sim, nsim, speed, &o) : feed_fd(stream, &in, pre, npre, &o, &rc);
        vkasr_status fin = vkasr_stream_finish(stream);
        if (st == VKASR_OK)
            st = fin;
        if (st != VKASR_OK) {
            fprintf(stderr, "vkasr: live transcription failed: %s\n",
                    *vkasr_stream_last_error(stream) ? vkasr_stream_last_error(stream) : vkasr_status_string(st));
            if (rc == EXIT_OK)
                rc = exit_code_for(st, 0);
        }
        if (o.tty && !o.json && o.partial && *o.partial) /* nothing is left open after finish; clear the line anyway */
            fputs("\r\033[K", stdout);
        vkasr_stream_stats ss;
        vkasr_stream_get_stats(stream, &ss);
        if (verbose && !no_prints) {
            fprintf(stderr, "vkasr: %.1f s of audio in %llu windows (%.2f s each on average); compute %.3f s per "
                            "audio second\n",
                    ss.audio_seconds, (unsigned long long)ss.windows,
                    ss.windows ? ss.window_seconds / (double)ss.windows : 0.0,
                    ss.audio_seconds > 0 ? ss.compute_seconds / ss.audio_seconds : 0.0);
            if (o.n_lat) {
                qsort(o.lat, o.n_lat, sizeof *o.lat, cmp_double);
                fprintf(stderr, "vkasr: finalisation latency over %zu words: median %.3f s, 95th percentile %.3f s, "
                                "max %.3f s%s\n",
                        o.n_lat, o.lat[(o.n_lat - 1) / 2], o.lat[(size_t)ceil(0.95 * (double)o.n_lat) - 1],
                        o.lat[o.n_lat - 1], simulate && speed != 1 ? " (at this --speed)" : "");
            }
        }
        vkasr_stream_free(stream);
    }
    if (o.write_failed && rc == EXIT_OK)
        rc = stdout_check();
    free(o.seg);
    words_clear(&o);
    free(o.words);
    free(o.partial);
    free(o.push_s);
    free(o.push_wall);
    free(o.lat);
    vkasr_free(sim);
    pthread_mutex_destroy(&o.lock);
    vkasr_session_free(s);
    vkasr_model_free(m);
    if (interrupted)
        return 128 + interrupted;
    return rc;
}
