/* output.c — the transcript formats of the CLI (txt, JSON; SRT and WebVTT from the library's cue maker,
 * vkasr_subtitles) and NumPy dumps. */
#include <stdint.h>
#include <string.h>

#include "cli.h"
#include "utf8.h"

/* Length of the well-formed UTF-8 sequence at NUL-terminated p (1..4), or 0 if it is not one. */
static size_t utf8_seq_len(const unsigned char *p) {
    uint32_t cp;
    return utf8_decode(p, 4, &cp);
}

/* A JSON string. File names are arbitrary bytes: each byte that does not start a well-formed UTF-8
 * sequence becomes U+FFFD, so the output is always valid UTF-8 JSON (RFC 8259). */
void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_seq_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
        p++;
    }
    fputc('"', f);
}

/* The head every model of this process loaded (one model file and --decoder per run), for the JSON. */
static const char *json_head;

void output_set_head(vkasr_head h) {
    json_head = h == VKASR_HEAD_TDT ? "tdt" : h == VKASR_HEAD_RNNT ? "rnnt" : h == VKASR_HEAD_CTC ? "ctc" : NULL;
}

static void write_json(FILE *f, const char *input, const vkasr_result *r) {
    size_t nt, nw, ns;
    const vkasr_token *t = vkasr_result_tokens(r, &nt);
    const vkasr_word *w = vkasr_result_words(r, &nw);
    const vkasr_segment *s = vkasr_result_segments(r, &ns);
    fputs("{\"file\":", f);
    json_str(f, input);
    fputs(",\"text\":", f);
    json_str(f, vkasr_result_text(r));
    fprintf(f, ",\"duration\":%.6f,\"partial\":%s", vkasr_result_duration(r), vkasr_result_partial(r) ? "true" : "false");
    if (json_head)
        fprintf(f, ",\"head\":\"%s\"", json_head);
    int window = 0;
    vkasr_attention att = vkasr_result_attention(r, &window);
    if (att == VKASR_ATTENTION_LOCAL)
        fprintf(f, ",\"attention\":{\"mode\":\"local\",\"window\":%d}", window);
    else if (att == VKASR_ATTENTION_FULL)
        fputs(",\"attention\":{\"mode\":\"full\"}", f);
    /* language-prompt and end-of-utterance models: what the model detected, when it did */
    const char *lang = vkasr_result_language(r);
    if (lang) {
        fputs(",\"language\":", f);
        json_str(f, lang);
    }
    size_t ne;
    const vkasr_event *ev = vkasr_result_events(r, &ne);
    for (size_t i = 0; i < ne; i++) {
        static const char *const kinds[] = {"end_of_utterance", "backchannel", "language"};
        fprintf(f, "%s{\"kind\":\"%s\",\"text\":", i ? "," : ",\"events\":[", kinds[ev[i].kind]);
        json_str(f, ev[i].text);
        fprintf(f, ",\"frame\":%lld,\"time\":%.3f,\"segment\":%zu}%s", (long long)ev[i].frame, ev[i].time,
                ev[i].n_segments, i + 1 == ne ? "]" : "");
    }
    fputs(",\"tokens\":[", f);
    for (size_t i = 0; i < nt; i++) {
        fprintf(f, "%s{\"id\":%d,\"piece\":", i ? "," : "", (int)t[i].id);
        json_str(f, t[i].piece);
        fputs(",\"text\":", f);
        json_str(f, t[i].text);
        fprintf(f, ",\"frame\":%lld,\"duration\":%d,\"start\":%.3f,\"end\":%.3f}", (long long)t[i].frame,
                (int)t[i].duration, t[i].start, t[i].end);
    }
    fputs("],\"words\":[", f);
    for (size_t i = 0; i < nw; i++) {
        fputs(i ? ",{\"text\":" : "{\"text\":", f);
        json_str(f, w[i].text);
        fprintf(f, ",\"start\":%.3f,\"end\":%.3f}", w[i].start, w[i].end);
    }
    fputs("],\"segments\":[", f);
    for (size_t i = 0; i < ns; i++) {
        fputs(i ? ",{\"text\":" : "{\"text\":", f);
        json_str(f, s[i].text);
        fprintf(f, ",\"start\":%.3f,\"end\":%.3f}", s[i].start, s[i].end);
    }
    fputs("]}\n", f);
}

/* The subtitle limits of this process (--max-line-chars ...). */
static vkasr_subtitle_params subtitle_params;
static bool subtitle_params_set;

void output_set_subtitles(const vkasr_subtitle_params *p) {
    subtitle_params = *p;
    subtitle_params_set = true;
}

int write_subtitles(FILE *f, const vkasr_result *r, const vkasr_subtitle_params *p, bool vtt) {
    size_t nw = 0, len = 0;
    const vkasr_word *w = vkasr_result_words(r, &nw);
    char *text = NULL;
    vkasr_error err;
    vkasr_status st = vkasr_subtitles(w, nw, p, vtt ? VKASR_SUBTITLE_VTT : VKASR_SUBTITLE_SRT, &text, &len, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        return -1;
    }
    size_t put = fwrite(text, 1, len, f);
    vkasr_free(text);
    return put == len ? 0 : -1;
}

const char *const fmt_ext[FMT_COUNT] = {"txt", "json", "srt", "vtt"};

void write_format(FILE *f, enum fmt fm, const char *input, const vkasr_result *r) {
    switch (fm) {
    case FMT_TXT: fprintf(f, "%s\n", vkasr_result_text(r)); break;
    case FMT_JSON: write_json(f, input, r); break;
    case FMT_SRT:
    case FMT_VTT: write_subtitles(f, r, subtitle_params_set ? &subtitle_params : NULL, fm == FMT_VTT); break;
    default: break;
    }
}

/* NumPy .npy v1.0: float32, C order. */
int write_npy(const char *path, const float *data, size_t rows, size_t cols) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    unsigned short hlen = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    size_t n_el = rows * cols;
    bool ok = n_el == 0 || fwrite(data, sizeof(float), n_el, f) == n_el;
    ok = !ferror(f) && ok;
    return fclose(f) == 0 && ok ? 0 : -1;
}
