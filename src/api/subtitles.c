/* subtitles.c — subtitle cues from timed words (vkasr_subtitle_cues) and their SubRip and WebVTT files
 * (vkasr_subtitles), by the rules of vkasr.h's "Subtitles" section. The CLI, the server and the Python
 * package all make their cues here, so the three give the same files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "vkasr.h"

#define MAX_LINE_CHARS_LIMIT 1000

vkasr_subtitle_params vkasr_subtitle_params_default(void) {
    return (vkasr_subtitle_params){.struct_size = sizeof(vkasr_subtitle_params),
                                   .max_line_chars = 42,
                                   .max_lines = 2,
                                   .max_duration = 7.0,
                                   .min_duration = 1.0,
                                   .pause = 0.5};
}

/* A growable byte string. */
struct sbuf {
    char *p;
    size_t n, cap;
};

static bool sb_put(struct sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return false;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

/* Length of the well-formed UTF-8 sequence at s (NUL-terminated), 1..4, or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A word as cues use it: its text made valid UTF-8 without controls, its length in code points and
 * what its last character is. */
struct cword {
    char *text;
    size_t chars;
    bool sentence; /* . ? !   */
    bool clause;   /* , ; :   */
};

static vkasr_status clean_word(const char *s, struct cword *w) {
    struct sbuf b = {0};
    bool ok = sb_put(&b, "", 0);
    for (const unsigned char *p = (const unsigned char *)s; ok && *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            ok = sb_put(&b, "\xef\xbf\xbd", 3);
            p++;
        } else if (n == 1 && (*p < 0x20 || *p == 0x7f)) {
            ok = sb_put(&b, " ", 1);
            p++;
        } else {
            ok = sb_put(&b, (const char *)p, n);
            p += n;
        }
        w->chars++;
    }
    if (!ok) {
        free(b.p);
        return VKASR_ERR_NO_MEMORY;
    }
    w->text = b.p;
    char last = b.n ? b.p[b.n - 1] : '\0';
    w->sentence = last == '.' || last == '?' || last == '!';
    w->clause = last == ',' || last == ';' || last == ':';
    return VKASR_OK;
}

/* The length of a text of `len` characters once a word of c characters joins it (one space between;
 * empty words add nothing). */
static size_t join_len(size_t len, size_t c) { return c == 0 ? len : len == 0 ? c : len + 1 + c; }

/* The characters of words [a, b) joined. */
static size_t span_chars(const struct cword *w, size_t a, size_t b) {
    size_t len = 0;
    for (size_t k = a; k < b; k++)
        len = join_len(len, w[k].chars);
    return len;
}

/* What a cue in the making holds: its text's length, and the longest first line of whole words that
 * fits (all words so far while `one_line`). */
struct fill {
    size_t total, line1;
    bool one_line;
};

static struct fill fill_add(struct fill f, size_t c, size_t max) {
    f.total = join_len(f.total, c);
    if (f.one_line) {
        if (join_len(f.line1, c) <= max)
            f.line1 = join_len(f.line1, c);
        else
            f.one_line = false;
    }
    return f;
}

static bool fill_fits(struct fill f, const vkasr_subtitle_params *p) {
    size_t max = (size_t)p->max_line_chars;
    if (f.total <= max)
        return true;
    return p->max_lines == 2 && f.line1 > 0 && f.total - f.line1 - 1 <= max;
}

/* The end (exclusive) of the cue starting at word a. */
static size_t cue_end(const vkasr_word *in, const struct cword *w, size_t n, size_t a, const vkasr_subtitle_params *p) {
    const size_t max = (size_t)p->max_line_chars;
    struct fill f = fill_add((struct fill){0, 0, true}, w[a].chars, max);
    double end = in[a].end;
    for (size_t j = a + 1; j < n; j++) {
        if (w[j - 1].sentence || in[j].start - end >= p->pause)
            return j;
        double e = in[j].end > end ? in[j].end : end;
        struct fill g = fill_add(f, w[j].chars, max);
        if (!fill_fits(g, p) || e - in[a].start > p->max_duration) {
            /* full: end after the last clause that closes at least half of the text, else before j */
            for (size_t k = j - 1; k > a; k--)
                if (w[k - 1].clause && 2 * span_chars(w, a, k) >= f.total)
                    return k;
            return j;
        }
        f = g;
        end = e;
    }
    return n;
}

/* The text of words [a, b): one line, or two broken at the best boundary (see vkasr.h). */
static vkasr_status cue_text(const struct cword *w, size_t a, size_t b, const vkasr_subtitle_params *p, char **out) {
    const size_t max = (size_t)p->max_line_chars;
    size_t total = span_chars(w, a, b), brk = b; /* brk: the first word of the second line; b: none */
    if (total > max && p->max_lines == 2) {
        long best = 0;
        size_t left = 0;
        for (size_t k = a; k + 1 < b; k++) {
            left = join_len(left, w[k].chars);
            if (left == 0 || left >= total)
                continue;
            size_t right = total - left - 1;
            if (left > max || right > max)
                continue;
            long cost = labs((long)left - (long)right) - ((w[k].clause || w[k].sentence) ? (long)(max / 4) : 0);
            if (brk == b || cost < best) {
                best = cost;
                brk = k + 1;
            }
        }
    }
    struct sbuf s = {0};
    bool ok = sb_put(&s, "", 0);
    bool broke = false;
    for (size_t k = a; ok && k < b; k++) {
        if (!w[k].chars)
            continue;
        if (s.n)
            ok = sb_put(&s, k >= brk && !broke ? "\n" : " ", 1);
        broke = broke || k >= brk;
        ok = ok && sb_put(&s, w[k].text, strlen(w[k].text));
    }
    if (!ok) {
        free(s.p);
        return VKASR_ERR_NO_MEMORY;
    }
    *out = s.p;
    return VKASR_OK;
}

static vkasr_status check_input(const vkasr_word *words, size_t n, const vkasr_subtitle_params *p, struct err *e) {
    if (p->max_line_chars < 1 || p->max_line_chars > MAX_LINE_CHARS_LIMIT)
        return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: max_line_chars %d: must be from 1 to %d",
                       p->max_line_chars, MAX_LINE_CHARS_LIMIT);
    if (p->max_lines != 1 && p->max_lines != 2)
        return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: max_lines %d: must be 1 or 2", p->max_lines);
    if (!isfinite(p->max_duration) || !(p->max_duration > 0))
        return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: max_duration %g: must be a number of seconds > 0",
                       p->max_duration);
    if (!isfinite(p->min_duration) || p->min_duration < 0 || p->min_duration > p->max_duration)
        return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: min_duration %g: must be from 0 to max_duration (%g)",
                       p->min_duration, p->max_duration);
    if (!isfinite(p->pause) || !(p->pause > 0))
        return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: pause %g: must be a number of seconds > 0", p->pause);
    if (n && !words)
        return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: words is NULL with %zu words", n);
    for (size_t i = 0; i < n; i++) {
        const vkasr_word *w = &words[i];
        if (!w->text)
            return err_set(e, VKASR_ERR_INVALID_ARG, "subtitles: word %zu: text is NULL", i);
        if (!isfinite(w->start) || !isfinite(w->end) || w->start < 0 || w->end < w->start)
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "subtitles: word %zu ('%.64s'): times %g..%g: must be finite with 0 <= start <= end", i,
                           w->text, w->start, w->end);
        if (i && w->start < words[i - 1].start)
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "subtitles: word %zu ('%.64s') starts at %g, before word %zu (%g): words must be in time "
                           "order",
                           i, w->text, w->start, i - 1, words[i - 1].start);
    }
    return VKASR_OK;
}

void vkasr_cues_free(vkasr_cue *cues, size_t n) {
    if (!cues)
        return;
    for (size_t i = 0; i < n; i++)
        free((char *)cues[i].text);
    free(cues);
}

static vkasr_status make_cues(const vkasr_word *words, size_t n, const vkasr_subtitle_params *p, vkasr_cue **out,
                              size_t *out_n, struct err *e) {
    *out = NULL;
    *out_n = 0;
    TRY(check_input(words, n, p, e));
    if (n == 0)
        return VKASR_OK;
    struct cword *w = calloc(n, sizeof *w);
    vkasr_cue *c = calloc(n, sizeof *c); /* at most one cue per word */
    size_t nc = 0;
    vkasr_status st = w && c ? VKASR_OK : VKASR_ERR_NO_MEMORY;
    for (size_t i = 0; st == VKASR_OK && i < n; i++)
        st = clean_word(words[i].text, &w[i]);
    for (size_t a = 0; st == VKASR_OK && a < n; nc++) {
        size_t b = cue_end(words, w, n, a, p);
        double end = words[a].end;
        for (size_t k = a; k < b; k++)
            end = words[k].end > end ? words[k].end : end;
        c[nc] = (vkasr_cue){.start = words[a].start, .end = end, .first_word = a, .n_words = b - a};
        st = cue_text(w, a, b, p, (char **)&c[nc].text);
        a = b;
    }
    for (size_t i = 0; w && i < n; i++)
        free(w[i].text);
    free(w);
    if (st != VKASR_OK) {
        vkasr_cues_free(c, nc);
        return err_set(e, st, "subtitles: out of memory making the cues of %zu words", n);
    }
    /* each cue lasts at least min(min_duration, the time to the next cue) */
    for (size_t i = 0; i < nc; i++) {
        double until = c[i].start + p->min_duration;
        if (i + 1 < nc && c[i + 1].start < until)
            until = c[i + 1].start;
        if (c[i].end < until)
            c[i].end = until;
    }
    *out = c;
    *out_n = nc;
    return VKASR_OK;
}

vkasr_status vkasr_subtitle_cues(const vkasr_word *words, size_t n, const vkasr_subtitle_params *params,
                                 vkasr_cue **out_cues, size_t *out_n, vkasr_error *error) {
    struct err e;
    err_clear(&e);
    vkasr_subtitle_params p = vkasr_subtitle_params_default();
    if (params) {
        size_t k = params->struct_size < sizeof p ? params->struct_size : sizeof p;
        memcpy(&p, params, k);
    }
    vkasr_status st = out_cues && out_n ? make_cues(words, n, &p, out_cues, out_n, &e)
                                        : err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_subtitle_cues: NULL output");
    err_export(&e, error);
    return st;
}

static bool put_time(struct sbuf *b, double sec, char frac_sep) {
    long long ms = (long long)(sec * 1000.0 + 0.5);
    char t[48];
    int k = snprintf(t, sizeof t, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60,
                     frac_sep, ms % 1000);
    return sb_put(b, t, (size_t)k);
}

/* A cue's text; in WebVTT (markup) & < > escaped. */
static bool put_text(struct sbuf *b, const char *s, bool vtt) {
    bool ok = true;
    for (; ok && *s; s++) {
        if (vtt && *s == '&')
            ok = sb_put(b, "&amp;", 5);
        else if (vtt && *s == '<')
            ok = sb_put(b, "&lt;", 4);
        else if (vtt && *s == '>')
            ok = sb_put(b, "&gt;", 4);
        else
            ok = sb_put(b, s, 1);
    }
    return ok;
}

vkasr_status vkasr_subtitles(const vkasr_word *words, size_t n, const vkasr_subtitle_params *params,
                             vkasr_subtitle_format format, char **out, size_t *out_len, vkasr_error *error) {
    struct err e;
    err_clear(&e);
    if (!out || !out_len || (format != VKASR_SUBTITLE_SRT && format != VKASR_SUBTITLE_VTT)) {
        vkasr_status st = err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_subtitles: %s",
                                  out && out_len ? "format must be VKASR_SUBTITLE_SRT or _VTT" : "NULL output");
        err_export(&e, error);
        return st;
    }
    *out = NULL;
    *out_len = 0;
    vkasr_cue *c = NULL;
    size_t nc = 0;
    vkasr_status st = vkasr_subtitle_cues(words, n, params, &c, &nc, error);
    if (st != VKASR_OK)
        return st;
    const bool vtt = format == VKASR_SUBTITLE_VTT;
    struct sbuf b = {0};
    bool ok = sb_put(&b, vtt ? "WEBVTT\n\n" : "", vtt ? 8 : 0);
    for (size_t i = 0, written = 0; ok && i < nc; i++) {
        if (!c[i].text[0]) /* words of no text: a cue without text would read as the end of a cue */
            continue;
        char num[32];
        int k = snprintf(num, sizeof num, "%zu\n", ++written);
        ok = (vtt || sb_put(&b, num, (size_t)k)) && put_time(&b, c[i].start, vtt ? '.' : ',') &&
             sb_put(&b, " --> ", 5) && put_time(&b, c[i].end, vtt ? '.' : ',') && sb_put(&b, "\n", 1) &&
             put_text(&b, c[i].text, vtt) && sb_put(&b, "\n\n", 2);
    }
    vkasr_cues_free(c, nc);
    if (!ok) {
        free(b.p);
        st = err_set(&e, VKASR_ERR_NO_MEMORY, "vkasr_subtitles: out of memory writing %zu cues", nc);
        err_export(&e, error);
        return st;
    }
    *out = b.p;
    *out_len = b.n;
    err_export(&e, error);
    return VKASR_OK;
}
