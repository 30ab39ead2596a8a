/* check_cli_output.c — validates vkasr CLI outputs for test_cli.sh:
 *   check_cli_output json FILE   each line is a JSON object with text, duration, tokens (id, piece, text,
 *                                frame, start, end), words and segments (text, start, end), in valid UTF-8
 *                                (RFC 8259; cJSON itself accepts any bytes)
 *                                and attention (mode "full", or "local" with a window >= 1)
 *   check_cli_output attention FILE MODE [W]   every line's attention is MODE (full, local) with window W
 *   check_cli_output frames FILE N   no encoder frame carries more than N tokens; prints the largest count
 *   check_cli_output npy FILE COLS   a float32 C-order 2-D .npy with COLS columns and >= 1 row */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(const char *why, const char *file) {
    printf("FAIL %s: %s\n", file, why);
    return 1;
}

static int has(const cJSON *o, const char *k, int (*is)(const cJSON *)) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && is(v);
}

static int isnum(const cJSON *v) { return cJSON_IsNumber(v); }
static int isstr(const cJSON *v) { return cJSON_IsString(v); }
static int isarr(const cJSON *v) { return cJSON_IsArray(v); }

/* Strict UTF-8: no overlongs, surrogates, values above U+10FFFF or truncated sequences. */
static int utf8_ok(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = p[i], len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                               : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (len == 0 || i + len > n)
            return 0;
        unsigned cp = len == 1 ? c : c & (0x7f >> len);
        for (unsigned k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

/* {"mode": "full"} or {"mode": "local", "window": W >= 1}; with want, that mode (and window, if > 0). */
static int attention_ok(const cJSON *a, const char *want, long window) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "mode"), *w = cJSON_GetObjectItemCaseSensitive(a, "window");
    if (!cJSON_IsObject(a) || !cJSON_IsString(m))
        return 0;
    if (want && strcmp(m->valuestring, want) != 0)
        return 0;
    if (!strcmp(m->valuestring, "full"))
        return w == NULL;
    if (strcmp(m->valuestring, "local") != 0 || !cJSON_IsNumber(w) || w->valuedouble < 1)
        return 0;
    return window <= 0 || (long)w->valuedouble == window;
}

/* Every line's attention is `mode` (and its window `window` when > 0). */
static int check_attention(const char *file, const char *mode, long window) {
    FILE *f = fopen(file, "r");
    if (!f)
        return bad("cannot open", file);
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, rc = 0;
    while (getline(&line, &cap, f) > 0 && rc == 0) {
        cJSON *o = cJSON_Parse(line);
        lines++;
        if (!attention_ok(cJSON_GetObjectItemCaseSensitive(o, "attention"), mode, window))
            rc = bad("attention differs from the expected one", file);
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    return rc == 0 && lines == 0 ? bad("no output", file) : rc;
}

static int check_json(const char *file) {
    FILE *f = fopen(file, "r");
    if (!f)
        return bad("cannot open", file);
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, rc = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0 && rc == 0) {
        cJSON *o = cJSON_Parse(line);
        lines++;
        if (!utf8_ok((const unsigned char *)line, (size_t)len)) {
            rc = bad("a line is not valid UTF-8", file);
        } else if (!cJSON_IsObject(o)) {
            rc = bad("a line is not a JSON object", file);
        } else if (!has(o, "text", isstr) || !has(o, "duration", isnum) || !has(o, "tokens", isarr) ||
                   !has(o, "words", isarr) || !has(o, "segments", isarr)) {
            rc = bad("missing text/duration/tokens/words/segments", file);
        } else if (!attention_ok(cJSON_GetObjectItemCaseSensitive(o, "attention"), NULL, 0)) {
            rc = bad("attention is not {\"mode\": \"full\"} or {\"mode\": \"local\", \"window\": W >= 1}", file);
        } else {
            const cJSON *t;
            cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(o, "tokens")) {
                if (!has(t, "id", isnum) || !has(t, "piece", isstr) || !has(t, "text", isstr) || !has(t, "frame", isnum) ||
                    !has(t, "start", isnum) || !has(t, "end", isnum))
                    rc = bad("a token lacks id/piece/text/frame/start/end", file);
                else if (cJSON_GetObjectItemCaseSensitive(t, "end")->valuedouble <
                         cJSON_GetObjectItemCaseSensitive(t, "start")->valuedouble)
                    rc = bad("a token ends before it starts", file);
            }
            const char *lists[2] = {"words", "segments"};
            for (int k = 0; k < 2; k++)
                cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(o, lists[k])) {
                    if (!has(t, "text", isstr) || !has(t, "start", isnum) || !has(t, "end", isnum))
                        rc = bad("a word/segment lacks text/start/end", file);
                }
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (rc == 0 && lines == 0)
        rc = bad("no output", file);
    if (rc == 0)
        printf("%s: %d JSON line(s) ok\n", file, lines);
    return rc;
}

/* Tokens per encoder frame of every JSON line: fails when a frame has more than cap. */
static int check_frames(const char *file, long cap_per_frame) {
    FILE *f = fopen(file, "r");
    if (!f)
        return bad("cannot open", file);
    char *line = NULL;
    size_t cap = 0;
    long most = 0;
    int rc = 0;
    while (getline(&line, &cap, f) > 0 && rc == 0) {
        cJSON *o = cJSON_Parse(line), *t;
        long run = 0, prev = -1;
        if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "tokens")))
            rc = bad("no tokens array", file);
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(o, "tokens")) {
            const cJSON *fr = cJSON_GetObjectItemCaseSensitive(t, "frame");
            long v = cJSON_IsNumber(fr) ? (long)fr->valuedouble : -1;
            if (v < prev)
                rc = bad("token frames go backwards", file);
            run = v == prev ? run + 1 : 1;
            prev = v;
            most = run > most ? run : most;
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    printf("%s: at most %ld token(s) per frame\n", file, most);
    if (rc == 0 && most > cap_per_frame)
        rc = bad("a frame has more tokens than the cap", file);
    return rc;
}

static int check_npy(const char *file, long cols) {
    FILE *f = fopen(file, "rb");
    if (!f)
        return bad("cannot open", file);
    unsigned char h[10];
    char hdr[256] = {0};
    int rc = 0;
    if (fread(h, 1, 10, f) != 10 || memcmp(h, "\x93NUMPY\x01\x00", 8) != 0) {
        rc = bad("not an .npy v1 file", file);
    } else {
        size_t hl = h[8] | (size_t)h[9] << 8;
        long rows = 0, c = 0;
        if (hl >= sizeof hdr || fread(hdr, 1, hl, f) != hl || (10 + hl) % 64 != 0 || !strstr(hdr, "'<f4'") ||
            !strstr(hdr, "'fortran_order': False") || sscanf(strstr(hdr, "(") ? strstr(hdr, "(") : "", "(%ld, %ld)", &rows, &c) != 2)
            rc = bad("bad header", file);
        else if (c != cols || rows < 1)
            rc = bad("unexpected shape", file);
        else {
            fseek(f, 0, SEEK_END);
            if (ftell(f) != (long)(10 + hl) + rows * c * 4)
                rc = bad("size does not match the shape", file);
            else
                printf("%s: [%ld, %ld] ok\n", file, rows, c);
        }
    }
    fclose(f);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "json"))
        return check_json(argv[2]);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "attention"))
        return check_attention(argv[2], argv[3], argc == 5 ? strtol(argv[4], NULL, 10) : 0);
    if (argc == 4 && !strcmp(argv[1], "npy"))
        return check_npy(argv[2], atol(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "frames"))
        return check_frames(argv[2], atol(argv[3]));
    fprintf(stderr, "usage: check_cli_output json FILE | attention FILE MODE [W] | npy FILE COLS | frames FILE MAX\n");
    return 2;
}
