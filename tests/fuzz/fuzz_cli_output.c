/* fuzz_cli_output.c — the CLI's transcript writers (tools/cli/output.c: txt, JSON; SRT and WebVTT through
 * the library's cue maker, src/api/subtitles.c) fed a result whose file name and token, word and segment
 * texts are arbitrary bytes from the input (word times in order, as the library gives them). The result
 * comes through stand-ins for the public accessors defined here (the writers use nothing else), so text
 * the library itself never produces (invalid UTF-8, control characters) reaches them too.
 * Checked by parsing the output back: JSON must be valid UTF-8 that cJSON reads, with every count and
 * every valid text intact; SRT and VTT must be valid UTF-8 cues, each with its number (SRT) and times
 * (in order, starting at a word's start), one or two lines of text without control characters, and (VTT)
 * no "-->" and no unescaped '<' or '&'; where every word is plain text, the cues' lines are the words
 * in order, and lines over 42 characters are single words.
 * Seeds: any bytes (tests/fuzz/seeds.sh uses text files of tests/data). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>

#include "cli.h"
#include "fuzz.h"

/* ---- the result, from the input --------------------------------------------------------------- */

struct vkasr_result {
    char *text;
    double duration;
    bool partial;
    vkasr_attention attention;
    int window;
    vkasr_token *tokens;
    size_t nt;
    vkasr_word *words;
    size_t nw;
    vkasr_segment *segments;
    size_t ns;
    char *language;
    vkasr_event *events;
    size_t ne;
};

const char *vkasr_result_text(const vkasr_result *r) { return r->text; }
void vkasr_free(void *p) { free(p); }
double vkasr_result_duration(const vkasr_result *r) { return r->duration; }
bool vkasr_result_partial(const vkasr_result *r) { return r->partial; }
vkasr_attention vkasr_result_attention(const vkasr_result *r, int *window) {
    if (window)
        *window = r->window;
    return r->attention;
}
const vkasr_token *vkasr_result_tokens(const vkasr_result *r, size_t *n) {
    *n = r->nt;
    return r->tokens;
}
const vkasr_word *vkasr_result_words(const vkasr_result *r, size_t *n) {
    *n = r->nw;
    return r->words;
}
const vkasr_segment *vkasr_result_segments(const vkasr_result *r, size_t *n) {
    *n = r->ns;
    return r->segments;
}
const char *vkasr_result_language(const vkasr_result *r) { return r->language; }
const vkasr_event *vkasr_result_events(const vkasr_result *r, size_t *n) {
    *n = r->ne;
    return r->events;
}

/* A span [start, end] in seconds as the library gives them: finite, 0 <= start <= end, up to ~4.7 h. */
static void times(struct fuzz_reader *in, double *start, double *end) {
    uint32_t ms = fuzz_u16(in) | fuzz_u8(in) << 16;
    *start = ms / 1000.0;
    *end = *start + fuzz_u16(in) / 1000.0;
}

static void build(struct fuzz_reader *in, char **file, struct vkasr_result *r) {
    uint32_t flags = fuzz_u8(in);
    r->partial = flags & 1;
    r->attention = (vkasr_attention)(flags >> 1 & 3) % 3;
    r->window = fuzz_u16(in);
    r->nt = fuzz_u8(in) % 17;
    r->nw = fuzz_u8(in) % 9;
    r->ns = fuzz_u8(in) % 9;
    *file = fuzz_str(in, 255);
    r->text = fuzz_str(in, 255);
    r->duration = fuzz_u16(in) / 16.0;
    r->tokens = calloc(r->nt + 1, sizeof *r->tokens);
    r->words = calloc(r->nw + 1, sizeof *r->words);
    r->segments = calloc(r->ns + 1, sizeof *r->segments);
    FUZZ_CHECK(r->tokens && r->words && r->segments, "out of memory");
    for (size_t i = 0; i < r->nt; i++) {
        vkasr_token *t = &r->tokens[i];
        t->id = (int32_t)fuzz_u16(in);
        t->piece = fuzz_str(in, 64);
        t->text = fuzz_str(in, 64);
        t->frame = fuzz_u16(in);
        t->duration = (int32_t)fuzz_u8(in);
        times(in, &t->start, &t->end);
    }
    double at = 0;
    for (size_t i = 0; i < r->nw; i++) { /* in time order, with pauses of up to 2 s and words up to 8 s */
        r->words[i].text = fuzz_str(in, 64);
        r->words[i].start = at + fuzz_u16(in) % 2048 / 1024.0;
        r->words[i].end = r->words[i].start + fuzz_u16(in) % 8192 / 1024.0;
        at = r->words[i].start;
    }
    for (size_t i = 0; i < r->ns; i++) {
        r->segments[i].text = fuzz_str(in, 255);
        times(in, &r->segments[i].start, &r->segments[i].end);
    }
    /* last, so that older seeds keep their meaning: the language and the events */
    r->language = flags & 8 ? fuzz_str(in, 64) : NULL;
    r->ne = fuzz_u8(in) % 4;
    r->events = calloc(r->ne + 1, sizeof *r->events);
    FUZZ_CHECK(r->events, "out of memory");
    for (size_t i = 0; i < r->ne; i++) {
        vkasr_event *ev = &r->events[i];
        ev->kind = (vkasr_event_kind)(fuzz_u8(in) % 3);
        ev->text = fuzz_str(in, 64);
        ev->frame = fuzz_u16(in);
        double end;
        times(in, &ev->time, &end);
        ev->n_segments = fuzz_u8(in) % (r->ns + 1);
    }
}

static void release(char *file, struct vkasr_result *r) {
    for (size_t i = 0; i < r->nt; i++) {
        free((char *)r->tokens[i].piece);
        free((char *)r->tokens[i].text);
    }
    for (size_t i = 0; i < r->nw; i++)
        free((char *)r->words[i].text);
    for (size_t i = 0; i < r->ns; i++)
        free((char *)r->segments[i].text);
    free(r->tokens);
    free(r->words);
    free(r->segments);
    for (size_t i = 0; i < r->ne; i++)
        free((char *)r->events[i].text);
    free(r->events);
    free(r->language);
    free(r->text);
    free(file);
}

/* ---- the output, parsed back ------------------------------------------------------------------- */

static char *render(enum fmt fm, const char *file, const vkasr_result *r, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    FUZZ_CHECK(f != NULL, "open_memstream");
    write_format(f, fm, file, r);
    FUZZ_CHECK(fclose(f) == 0 && buf, "writing to memory");
    return buf;
}

/* A JSON string value equals the original where the original is valid UTF-8 (else it was repaired). */
static void json_text(const cJSON *j, const char *orig, const char *what) {
    FUZZ_CHECK(cJSON_IsString(j), "%s is not a JSON string", what);
    if (fuzz_utf8_ok(orig, strlen(orig)))
        FUZZ_CHECK(strcmp(j->valuestring, orig) == 0, "%s changed: \"%s\" -> \"%s\"", what, orig, j->valuestring);
}

static const cJSON *json_array(const cJSON *o, const char *key, size_t n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    FUZZ_CHECK(cJSON_IsArray(a) && (size_t)cJSON_GetArraySize(a) == n, "\"%s\": not an array of %zu", key, n);
    return a;
}

static void check_json(const char *out, size_t len, const char *file, const vkasr_result *r) {
    FUZZ_CHECK(len > 0 && out[len - 1] == '\n' && memchr(out, '\n', len) == out + len - 1, "not one line");
    FUZZ_CHECK(fuzz_utf8_ok(out, len), "JSON output is not valid UTF-8");
    cJSON *o = cJSON_ParseWithLength(out, len);
    FUZZ_CHECK(cJSON_IsObject(o), "JSON output does not parse: %s", out);
    json_text(cJSON_GetObjectItemCaseSensitive(o, "file"), file, "file");
    json_text(cJSON_GetObjectItemCaseSensitive(o, "text"), r->text, "text");
    FUZZ_CHECK(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "partial")) &&
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "partial")) == r->partial,
               "partial");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "duration");
    FUZZ_CHECK(cJSON_IsNumber(d) && fabs(d->valuedouble - r->duration) <= 1e-6, "duration");
    /* attention: absent for AUTO (nothing ran), else its mode, and the window of local attention */
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(o, "attention");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(att, "mode"), *w = cJSON_GetObjectItemCaseSensitive(att, "window");
    if (r->attention == VKASR_ATTENTION_AUTO)
        FUZZ_CHECK(att == NULL, "attention for a result without one");
    else
        FUZZ_CHECK(cJSON_IsString(mode) &&
                       !strcmp(mode->valuestring, r->attention == VKASR_ATTENTION_LOCAL ? "local" : "full") &&
                       (r->attention == VKASR_ATTENTION_FULL ? w == NULL : cJSON_IsNumber(w) && w->valueint == r->window),
                   "attention");
    const cJSON *a = json_array(o, "tokens", r->nt), *it;
    size_t i = 0;
    cJSON_ArrayForEach(it, a) {
        const vkasr_token *t = &r->tokens[i++];
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        FUZZ_CHECK(cJSON_IsNumber(id) && id->valuedouble == t->id, "token id");
        json_text(cJSON_GetObjectItemCaseSensitive(it, "piece"), t->piece, "token piece");
        json_text(cJSON_GetObjectItemCaseSensitive(it, "text"), t->text, "token text");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "start");
        FUZZ_CHECK(cJSON_IsNumber(s) && fabs(s->valuedouble - t->start) <= 0.0005 + 1e-9, "token start");
    }
    i = 0;
    a = json_array(o, "words", r->nw);
    cJSON_ArrayForEach(it, a) json_text(cJSON_GetObjectItemCaseSensitive(it, "text"), r->words[i++].text, "word");
    i = 0;
    a = json_array(o, "segments", r->ns);
    cJSON_ArrayForEach(it, a) {
        const vkasr_segment *s = &r->segments[i++];
        json_text(cJSON_GetObjectItemCaseSensitive(it, "text"), s->text, "segment");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(it, "end");
        FUZZ_CHECK(cJSON_IsNumber(e) && fabs(e->valuedouble - s->end) <= 0.0005 + 1e-9, "segment end");
    }
    cJSON_Delete(o);
}

/* "HH:MM:SS,mmm" (SRT) or "HH:MM:SS.mmm" (VTT), hours of two or more digits, as milliseconds. */
static int parse_time(const char **p, char sep, long long *ms) {
    const char *s = *p;
    long long h = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 12)
        h = h * 10 + (*s++ - '0'), digits++;
    if (digits < 2 || s[0] != ':' || s[3] != ':' || s[6] != sep)
        return 0;
    const char *f[3] = {s + 1, s + 4, s + 7};
    int n[3] = {2, 2, 3}, v[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < n[k]; j++) {
            if (f[k][j] < '0' || f[k][j] > '9')
                return 0;
            v[k] = v[k] * 10 + (f[k][j] - '0');
        }
    if (v[0] > 59 || v[1] > 59)
        return 0;
    *ms = ((h * 60 + v[0]) * 60 + v[1]) * 1000 + v[2];
    *p = s + 10;
    return 1;
}

static long long to_ms(double sec) { return (long long)(sec * 1000.0 + 0.5); }

/* Cue text as it should appear where nothing needed repairing or escaping. */
static int plain(const char *s, bool vtt) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (vtt && (*p == '<' || *p == '&' || *p == '>')))
            return 0;
    return fuzz_utf8_ok(s, strlen(s));
}

static size_t code_points(const char *s) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80;
    return n;
}

static void check_subtitles(char *out, size_t len, const vkasr_result *r, bool vtt) {
    FUZZ_CHECK(fuzz_utf8_ok(out, len), "%s output is not valid UTF-8", vtt ? "VTT" : "SRT");
    FUZZ_CHECK(strlen(out) == len, "NUL byte in the output");
    /* plain words: valid UTF-8 without controls, spaces or (VTT) markup; then the cues' lines, joined by
     * spaces, are the non-empty words joined by spaces */
    bool all_plain = true;
    size_t want_len = 0;
    for (size_t i = 0; i < r->nw; i++) {
        all_plain = all_plain && plain(r->words[i].text, vtt) && !strchr(r->words[i].text, ' ');
        want_len += strlen(r->words[i].text) + 1;
    }
    char *want = calloc(want_len + 1, 1), *got = calloc(len + 1, 1);
    FUZZ_CHECK(want && got, "out of memory");
    for (size_t i = 0; i < r->nw; i++)
        if (r->words[i].text[0])
            strcat(strcat(want, *want ? " " : ""), r->words[i].text);
    char *p = out;
    if (vtt) {
        FUZZ_CHECK(strncmp(p, "WEBVTT\n\n", 8) == 0, "no WEBVTT header");
        p += 8;
    }
    /* cues: maximal runs of non-empty lines */
    size_t cue = 0;
    long long last_start = -1;
    while (*p) {
        FUZZ_CHECK(*p != '\n', "a blank line where a cue should start");
        FUZZ_CHECK(cue < r->nw, "more cues than the %zu words", r->nw);
        char *end = strstr(p, "\n\n");
        FUZZ_CHECK(end != NULL, "cue %zu is not followed by a blank line", cue + 1);
        *end = '\0';
        if (!vtt) {
            char num[32];
            snprintf(num, sizeof num, "%zu\n", cue + 1);
            FUZZ_CHECK(strncmp(p, num, strlen(num)) == 0, "cue %zu: no number line", cue + 1);
            p += strlen(num);
        }
        const char *q = p;
        long long a, b;
        FUZZ_CHECK(parse_time(&q, vtt ? '.' : ',', &a) && strncmp(q, " --> ", 5) == 0 &&
                       (q += 5, parse_time(&q, vtt ? '.' : ',', &b)) && *q == '\n',
                   "cue %zu: bad timing line: %.40s", cue + 1, p);
        FUZZ_CHECK(a <= b && a >= last_start, "cue %zu: times %lld --> %lld after a start at %lld", cue + 1, a, b,
                   last_start);
        bool at_word = false;
        for (size_t i = 0; i < r->nw; i++)
            at_word = at_word || to_ms(r->words[i].start) == a;
        FUZZ_CHECK(at_word, "cue %zu: starts at %lld ms, no word's start", cue + 1, a);
        last_start = a;
        char *text = (char *)q + 1, *nl = strchr(text, '\n');
        FUZZ_CHECK(*text && (!nl || (nl > text && nl[1] && !strchr(nl + 1, '\n'))), "cue %zu: not 1 or 2 lines of text",
                   cue + 1);
        if (vtt)
            FUZZ_CHECK(!strstr(text, "-->"), "cue %zu: \"-->\" in the text", cue + 1);
        for (const unsigned char *c = (const unsigned char *)text; *c; c++)
            FUZZ_CHECK((*c >= 0x20 || *c == '\n') && *c != 0x7f, "cue %zu: control character 0x%02x in the text",
                       cue + 1, *c);
        if (vtt)
            FUZZ_CHECK(!strchr(text, '<'), "cue %zu: unescaped '<'", cue + 1);
        if (vtt)
            for (const char *amp = strchr(text, '&'); amp; amp = strchr(amp + 1, '&'))
                FUZZ_CHECK(!strncmp(amp, "&amp;", 5) || !strncmp(amp, "&lt;", 4) || !strncmp(amp, "&gt;", 4),
                           "cue %zu: unescaped '&'", cue + 1);
        if (all_plain) {
            if (nl)
                *nl = '\0';
            for (char *line = text; line; line = nl ? nl + 1 : NULL, nl = NULL) {
                FUZZ_CHECK(code_points(line) <= 42 || !strchr(text, ' '), "cue %zu: a line of %zu characters: %s",
                           cue + 1, code_points(line), line);
                strcat(strcat(got, *got ? " " : ""), line);
            }
        }
        p = end + 2;
        cue++;
    }
    if (all_plain)
        FUZZ_CHECK(strcmp(got, want) == 0, "the cues' words \"%s\", not the words \"%s\"", got, want);
    free(want);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct fuzz_reader in = {data, size};
    struct vkasr_result r = {0};
    char *file = NULL;
    build(&in, &file, &r);
    size_t len;
    char *out = render(FMT_TXT, file, &r, &len);
    FUZZ_CHECK(len == strlen(r.text) + 1 && memcmp(out, r.text, len - 1) == 0 && out[len - 1] == '\n', "txt");
    free(out);
    out = render(FMT_JSON, file, &r, &len);
    check_json(out, len, file, &r);
    free(out);
    for (int vtt = 0; vtt < 2; vtt++) {
        out = render(vtt ? FMT_VTT : FMT_SRT, file, &r, &len);
        check_subtitles(out, len, &r, vtt);
        free(out);
    }
    release(file, &r);
    return 0;
}
