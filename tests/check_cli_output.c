/* check_cli_output.c — validates vkasr CLI outputs for test_cli.sh:
 *   check_cli_output json FILE   each line is a JSON object with text, duration, tokens (id, piece, text,
 *                                frame, start, end), words and segments (text, start, end), in valid UTF-8
 *                                (RFC 8259; cJSON itself accepts any bytes)
 *                                and attention (mode "full", or "local" with a window >= 1)
 *   check_cli_output attention FILE MODE [W]   every line's attention is MODE (full, local) with window W
 *   check_cli_output frames FILE N   no encoder frame carries more than N tokens; prints the largest count
 *   check_cli_output npy FILE COLS   a float32 C-order 2-D .npy with COLS columns and >= 1 row
 *   check_cli_output compare FILE ok|equal|STAGE   `vkasr compare --json`: one object with every stage and
 *                                its figures; "ok": all within tolerance; "equal": that, and tokens and
 *                                transcripts equal; else STAGE ("layer 1", "logits", ...) is the first
 *                                stage past its tolerance
 *   check_cli_output bench FILE LENGTHS RUNS [WARMUP_MS]   vkasr bench --json: model, device, precision,
 *                                runs, load_ms and LENGTHS entries whose spreads are ordered (min <=
 *                                median <= max), positive, and whose RTFx is the audio length over the
 *                                wall time; a warm-up of whole runs lasting at least WARMUP_MS (0: one run)
 *   check_cli_output live FILE TXT   `vkasr live --json`: each line an object with text, start <= end and
 *                                words (text, start <= end, in order, inside the segment) whose texts
 *                                joined by spaces are the text; the lines' texts are TXT's lines (the
 *                                plain output of the same stream), in order
 *   check_cli_output manifest IN OUT JSONS   an --output-manifest: OUT's lines are IN's lines (every field
 *                                equal) with pred_text added, in order, IN's last line (a bad input) left out,
 *                                and pred_text of line k the text of line k of JSONS (--format json of the
 *                                same inputs, one file per call) */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_io.h"

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

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int isbool(const cJSON *v) { return cJSON_IsBool(v); }
static int isnum_or_null(const cJSON *v) { return cJSON_IsNumber(v) || cJSON_IsNull(v); }

/* One comparison of `vkasr compare --json`: every stage present with its figures; with want_ok, every stage
 * within tolerance (with want_equal also the tokens and transcripts equal); else the first failing stage
 * is `want_stage`. */
static int check_comparison(const cJSON *c, const char *file, int want_ok, int want_equal, const char *want_stage) {
    if (!has(c, "device", isstr) || !has(c, "name", isstr) || !has(c, "ok", isbool) || !has(c, "stages", isarr))
        return bad("a comparison lacks device/name/ok/stages", file);
    static const char *const needed[] = {"mel", "subsampling", "layer", "encoder", "logits", "tokens", "transcript"};
    int seen[7] = {0}, before_failure = 1, rc = 0;
    const cJSON *st;
    cJSON_ArrayForEach(st, item(c, "stages")) {
        const cJSON *name = item(st, "stage");
        if (!cJSON_IsString(name))
            return bad("a stage has no name", file);
        for (int k = 0; k < 7; k++)
            seen[k] |= !strcmp(name->valuestring, needed[k]);
        if (!strcmp(name->valuestring, "tokens") || !strcmp(name->valuestring, "transcript")) {
            if (!has(st, "equal", isbool))
                rc = bad("tokens/transcript without 'equal'", file);
            else if (want_equal && !cJSON_IsTrue(item(st, "equal")))
                rc = bad("tokens or transcripts differ", file);
            continue;
        }
        if (!has(st, "label", isstr) || !has(st, "rows", isnum) || !has(st, "cols", isnum) ||
            !has(st, "max_abs", isnum_or_null) || !has(st, "rel_l2", isnum_or_null) || !has(st, "tolerance", isnum) ||
            !has(st, "ok", isbool))
            return bad("a stage lacks label/rows/cols/max_abs/rel_l2/tolerance/ok", file);
        int ok = cJSON_IsTrue(item(st, "ok"));
        const char *label = item(st, "label")->valuestring;
        if (ok && cJSON_IsNumber(item(st, "rel_l2")) &&
            !(item(st, "rel_l2")->valuedouble <= item(st, "tolerance")->valuedouble))
            rc = bad("a stage passes beyond its tolerance", file);
        if (want_ok && !ok) {
            printf("stage %s not ok\n", label);
            rc = bad("a stage is past its tolerance", file);
        }
        if (!want_ok && before_failure && !ok) {
            before_failure = 0;
            if (strcmp(label, want_stage)) {
                printf("first failing stage %s, expected %s\n", label, want_stage);
                rc = bad("the first failing stage is not the expected one", file);
            }
        }
    }
    for (int k = 0; k < 7; k++)
        if (!seen[k]) {
            printf("no stage %s\n", needed[k]);
            rc = bad("a stage is missing", file);
        }
    if (!want_ok && before_failure)
        rc = bad("no stage failed", file);
    const cJSON *fs = item(c, "failed_stage");
    if (want_ok ? !cJSON_IsTrue(item(c, "ok")) || !cJSON_IsNull(fs)
                : cJSON_IsTrue(item(c, "ok")) || !cJSON_IsString(fs) || strcmp(fs->valuestring, want_stage))
        rc = bad("ok/failed_stage of a comparison do not match its stages", file);
    return rc;
}

/* `vkasr compare --json`: one JSON object; want "ok" (everything within tolerance), "equal" (that, and
 * equal tokens and transcripts) or the stage that must fail first ("layer 1", "logits", ...). */
static int check_compare(const char *file, const char *want) {
    char *text = fixture_read_file(file, NULL);
    if (!text)
        return bad("cannot read", file);
    cJSON *o = cJSON_Parse(text);
    int rc = 0, want_equal = !strcmp(want, "equal"), want_ok = want_equal || !strcmp(want, "ok");
    if (!cJSON_IsObject(o))
        rc = bad("not one JSON object", file);
    else if (!has(o, "model", isstr) || !has(o, "precision", isstr) || !has(o, "audio", isstr) ||
             !has(o, "baseline", cJSON_IsObject) || !has(o, "comparisons", isarr) || !has(o, "ok", isbool) ||
             cJSON_GetArraySize(item(o, "comparisons")) < 1)
        rc = bad("missing model/precision/audio/baseline/comparisons/ok", file);
    else if (!has(item(o, "baseline"), "device", isstr) || !has(item(o, "baseline"), "text", isstr))
        rc = bad("the baseline lacks device/text", file);
    else {
        const cJSON *c;
        cJSON_ArrayForEach(c, item(o, "comparisons")) rc |= check_comparison(c, file, want_ok, want_equal, want);
        const cJSON *failed = item(o, "failed");
        if (want_ok ? !cJSON_IsTrue(item(o, "ok")) || !cJSON_IsNull(failed)
                    : cJSON_IsTrue(item(o, "ok")) || !cJSON_IsString(item(failed, "stage")) ||
                          strcmp(item(failed, "stage")->valuestring, want))
            rc = bad("top-level ok/failed do not match", file);
    }
    if (rc == 0)
        printf("%s: compare report ok (%s)\n", file, want);
    cJSON_Delete(o);
    free(text);
    return rc;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}

/* A {median, min, max} object: ordered, and >= lo; its values in m[3]. */
static int spread_ok(const cJSON *o, const char *k, double lo, double m[3]) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    m[0] = num(v, "median");
    m[1] = num(v, "min");
    m[2] = num(v, "max");
    return cJSON_IsObject(v) && m[1] >= lo && m[1] <= m[0] && m[0] <= m[2];
}

static int check_bench(const char *file, int nlengths, int runs, double warmup) {
    char *buf = fixture_read_file(file, NULL);
    if (!buf)
        return bad("cannot read", file);
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    int rc = 0;
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "lengths"), *l;
    if (!cJSON_IsObject(o) || !has(o, "model", isstr) || !has(o, "device", isstr) || !has(o, "precision", isstr) ||
        num(o, "runs") != runs || num(o, "load_ms") < 0 || !cJSON_IsArray(ls) || cJSON_GetArraySize(ls) != nlengths)
        rc = bad("missing model/device/precision, or wrong runs/load_ms/lengths", file);
    cJSON_ArrayForEach(l, ls) {
        if (rc)
            break;
        double sec = num(l, "seconds"), enc[3], dec[3], wall[3], rtfx[3];
        const double wruns = num(l, "warmup_runs"), wms = num(l, "warmup_ms"), first = num(l, "first_ms");
        if (!(sec > 0) || !(first > 0) || !(num(l, "peak_device_mib") > 0) || num(l, "tokens") < 0)
            rc = bad("a length lacks seconds/first_ms/peak_device_mib/tokens", file);
        else if (!(wruns >= 1) || wruns != (double)(long)wruns || !(wms >= first) || (warmup > 0 && !(wms >= warmup)))
            rc = bad("the warm-up: warmup_runs not a count >= 1, or warmup_ms below first_ms or --warmup-ms", file);
        else if (warmup == 0 && wruns != 1)
            rc = bad("--warmup-ms 0 ran more than one warm-up run", file);
        else if (!spread_ok(l, "encoder_ms", 1e-9, enc) || !spread_ok(l, "decoder_ms", 0, dec) ||
                 !spread_ok(l, "wall_ms", 1e-9, wall) || !spread_ok(l, "rtfx", 1e-9, rtfx))
            rc = bad("a spread is missing, unordered or not positive", file);
        else if (fabs(rtfx[1] - sec * 1e3 / wall[2]) > 1e-3 * rtfx[1] || fabs(rtfx[2] - sec * 1e3 / wall[1]) > 1e-3 * rtfx[2])
            rc = bad("rtfx is not the audio length over the wall time", file);
        else if (enc[0] > wall[2])
            rc = bad("the encoder took longer than the whole transcription", file);
    }
    cJSON_Delete(o);
    if (rc == 0)
        printf("%s: bench JSON ok (%d lengths, %d runs)\n", file, nlengths, runs);
    return rc;
}

/* The lines of a text file (malloc'd array of malloc'd strings, no newlines). */
static char **read_lines(const char *path, size_t *n) {
    FILE *f = fopen(path, "r");
    char **v = NULL, *line = NULL;
    size_t cap = 0, len = 0;
    ssize_t got;
    *n = 0;
    if (!f)
        return NULL;
    while ((got = getline(&line, &len, f)) >= 0) {
        while (got > 0 && line[got - 1] == '\n')
            line[--got] = '\0';
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    return v;
}

/* Frees what read_lines returned. */
static void free_lines(char **v, size_t n) {
    for (size_t k = 0; k < n; k++)
        free(v[k]);
    free(v);
}

static int check_manifest(const char *in_path, const char *out_path, const char *json_path) {
    size_t ni, no, nj;
    char **in = read_lines(in_path, &ni), **out = read_lines(out_path, &no), **js = read_lines(json_path, &nj);
    int rc = 0;
    if (!in || !out || !js || ni != no + 1 || no != nj)
        rc = bad("line counts: want the input manifest's lines less its last, one per transcript", out_path);
    for (size_t k = 0; rc == 0 && k < no; k++) {
        cJSON *a = cJSON_Parse(in[k]), *b = cJSON_Parse(out[k]), *j = cJSON_Parse(js[k]);
        const cJSON *pred = cJSON_GetObjectItemCaseSensitive(b, "pred_text");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text");
        if (!cJSON_IsString(pred) || !cJSON_IsString(text) || strcmp(pred->valuestring, text->valuestring))
            rc = bad("pred_text differs from the transcript of the same input", out_path);
        cJSON_DeleteItemFromObjectCaseSensitive(b, "pred_text");
        if (rc == 0 && !cJSON_Compare(a, b, 1))
            rc = bad("a line's fields differ from the input manifest's", out_path);
        cJSON_Delete(a);
        cJSON_Delete(b);
        cJSON_Delete(j);
    }
    free_lines(in, ni);
    free_lines(out, no);
    free_lines(js, nj);
    if (rc == 0)
        printf("%s: %zu lines, each the input's with its pred_text\n", out_path, no);
    return rc;
}

static int check_live(const char *json_path, const char *txt_path) {
    size_t nj, nt;
    char **js = read_lines(json_path, &nj), **tx = read_lines(txt_path, &nt);
    int rc = 0;
    if (!js || !tx || nj != nt || nj == 0)
        rc = bad("want one JSON line per line of the plain output, and at least one", json_path);
    for (size_t k = 0; rc == 0 && k < nj; k++) {
        cJSON *o = cJSON_Parse(js[k]);
        if (!cJSON_IsObject(o) || !has(o, "text", isstr) || !has(o, "start", isnum) || !has(o, "end", isnum) ||
            !has(o, "words", isarr)) {
            rc = bad("a line is not an object with text, start, end and words", json_path);
        } else if (strcmp(item(o, "text")->valuestring, tx[k]) != 0) {
            rc = bad("a segment's text differs from the plain output's line", json_path);
        } else {
            double s0 = item(o, "start")->valuedouble, s1 = item(o, "end")->valuedouble, prev = s0;
            size_t len = 0, cap = strlen(tx[k]) + 2;
            char *joined = calloc(cap, 1);
            const cJSON *w;
            if (s1 < s0 || !joined)
                rc = bad("a segment ends before it starts", json_path);
            cJSON_ArrayForEach(w, item(o, "words")) {
                if (rc)
                    break;
                if (!has(w, "text", isstr) || !has(w, "start", isnum) || !has(w, "end", isnum)) {
                    rc = bad("a word lacks text/start/end", json_path);
                    break;
                }
                double a = item(w, "start")->valuedouble, b = item(w, "end")->valuedouble;
                if (b < a || a < prev || a < s0 || b > s1)
                    rc = bad("a word's times are out of order or outside its segment", json_path);
                prev = a;
                const char *t = item(w, "text")->valuestring;
                size_t n = strlen(t);
                if (len + n + (len ? 1 : 0) + 1 > cap) {
                    rc = bad("the words are longer than the segment's text", json_path);
                    break;
                }
                if (len)
                    joined[len++] = ' ';
                memcpy(joined + len, t, n + 1);
                len += n;
            }
            if (rc == 0 && strcmp(joined, tx[k]) != 0)
                rc = bad("the words joined by spaces are not the segment's text", json_path);
            free(joined);
        }
        cJSON_Delete(o);
    }
    free_lines(js, nj);
    free_lines(tx, nt);
    if (rc == 0)
        printf("%s: %zu segment line(s), each the plain output's line with its words\n", json_path, nj);
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
    if (argc == 4 && !strcmp(argv[1], "compare"))
        return check_compare(argv[2], argv[3]);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "bench"))
        return check_bench(argv[2], atoi(argv[3]), atoi(argv[4]), argc == 6 ? atof(argv[5]) : -1);
    if (argc == 4 && !strcmp(argv[1], "live"))
        return check_live(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "manifest"))
        return check_manifest(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: check_cli_output json FILE | attention FILE MODE [W] | npy FILE COLS | frames FILE MAX | "
                    "compare FILE ok|equal|STAGE | bench FILE LENGTHS RUNS [WARMUP_MS] | live FILE TXT | manifest IN OUT JSONS\n");
    return 2;
}
