/* live_output.c — what `vkasr live` shows: final segments on stdout (text, timestamps or JSON lines),
 * the segment being spoken redrawn on a terminal, and the figures -v prints at the end. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "live.h"

bool live_out_init(struct live_out *o, bool timestamps, bool json) {
    *o = (struct live_out){.tty = isatty(STDOUT_FILENO), .timestamps = timestamps, .json = json, .cols = 80};
    struct winsize ws;
    if (o->tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        o->cols = ws.ws_col;
    o->cap_lat = 1 << 16;
    o->lat = malloc(o->cap_lat * sizeof *o->lat);
    pthread_mutex_init(&o->lock, NULL);
    return o->lat != NULL;
}

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
    printf(",\"start\":%.3f,\"end\":%.3f", o->seg_start, o->seg_end);
    if (o->seg_eou)
        fputs(",\"end_of_utterance\":true", stdout);
    if (o->seg_eob)
        fputs(",\"backchannel\":true", stdout);
    if (o->seg_lang[0]) {
        fputs(",\"language\":", stdout);
        json_str(stdout, o->seg_lang);
    }
    fputs(",\"words\":[", stdout);
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

void live_on_final(const vkasr_stream_update *u, void *ud) {
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
    for (size_t i = 0; i < u->n_events; i++) { /* end-of-utterance models, language-prompt models */
        o->seg_eou |= u->events[i].kind == VKASR_EVENT_END_OF_UTTERANCE;
        o->seg_eob |= u->events[i].kind == VKASR_EVENT_BACKCHANNEL;
        if (u->events[i].kind == VKASR_EVENT_LANGUAGE)
            snprintf(o->seg_lang, sizeof o->seg_lang, "%s", u->events[i].text);
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
        o->seg_has_words = o->seg_eou = o->seg_eob = false;
        o->seg_lang[0] = '\0';
        if (fflush(stdout) != 0)
            o->write_failed = 1;
    }
}

void live_on_partial(const vkasr_stream_update *u, void *ud) {
    struct live_out *o = ud;
    free(o->partial);
    o->partial = strdup(u->text);
    if (o->tty && !o->json)
        redraw(o);
}

void live_note_push(struct live_out *o, double audio_s) {
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

void live_report(struct live_out *o, vkasr_stream *stream, const char *note) {
    vkasr_stream_stats ss;
    vkasr_stream_get_stats(stream, &ss);
    fprintf(stderr, "vkasr: %.1f s of audio in %llu windows (%.2f s each on average); compute %.3f s per "
                    "audio second\n",
            ss.audio_seconds, (unsigned long long)ss.windows, ss.windows ? ss.window_seconds / (double)ss.windows : 0.0,
            ss.audio_seconds > 0 ? ss.compute_seconds / ss.audio_seconds : 0.0);
    if (!o->n_lat)
        return;
    qsort(o->lat, o->n_lat, sizeof *o->lat, cmp_double);
    fprintf(stderr, "vkasr: finalisation latency over %zu words: median %.3f s, 95th percentile %.3f s, max %.3f s%s\n",
            o->n_lat, o->lat[(o->n_lat - 1) / 2], o->lat[(size_t)ceil(0.95 * (double)o->n_lat) - 1],
            o->lat[o->n_lat - 1], note);
}

void live_out_free(struct live_out *o) {
    free(o->seg);
    words_clear(o);
    free(o->words);
    free(o->partial);
    free(o->push_s);
    free(o->push_wall);
    free(o->lat);
    pthread_mutex_destroy(&o->lock);
}
