/* serve_format.c — the bodies `vkasr serve` answers with: a transcript in OpenAI's response formats
 * (json, text, srt, vtt, verbose_json), the server-sent events of stream=true, and errors in OpenAI's
 * {"error": {...}} shape. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* verbose_json: task, language, duration, text, segments (OpenAI's fields; vkasr has no sampling, so
 * temperature and the probabilities are 0) and, when asked for, words. */
static void write_verbose(FILE *f, const struct serve_job *job, const vkasr_result *r) {
    size_t nt, nw, ns;
    const vkasr_token *t = vkasr_result_tokens(r, &nt);
    const vkasr_word *w = vkasr_result_words(r, &nw);
    const vkasr_segment *s = vkasr_result_segments(r, &ns);
    fputs("{\"task\":\"transcribe\",\"language\":", f);
    json_str(f, job->language && *job->language ? job->language : "unknown");
    fprintf(f, ",\"duration\":%.3f,\"text\":", vkasr_result_duration(r));
    json_str(f, vkasr_result_text(r));
    if (job->segments) {
        fputs(",\"segments\":[", f);
        for (size_t i = 0; i < ns; i++) {
            fprintf(f, "%s{\"id\":%zu,\"seek\":0,\"start\":%.3f,\"end\":%.3f,\"text\":", i ? "," : "", i, s[i].start,
                    s[i].end);
            json_str(f, s[i].text);
            fputs(",\"tokens\":[", f);
            /* the tokens of the segment's words */
            size_t first = 0, count = 0;
            if (s[i].n_words && s[i].first_word + s[i].n_words <= nw) {
                const vkasr_word *a = &w[s[i].first_word], *b = &w[s[i].first_word + s[i].n_words - 1];
                first = a->first_token;
                count = b->first_token + b->n_tokens - first;
            }
            for (size_t k = 0; k < count && first + k < nt; k++)
                fprintf(f, "%s%d", k ? "," : "", (int)t[first + k].id);
            fputs("],\"temperature\":0.0,\"avg_logprob\":0.0,\"compression_ratio\":0.0,\"no_speech_prob\":0.0}", f);
        }
        fputc(']', f);
    }
    if (job->words) {
        fputs(",\"words\":[", f);
        for (size_t i = 0; i < nw; i++) {
            fputs(i ? ",{\"word\":" : "{\"word\":", f);
            json_str(f, w[i].text);
            fprintf(f, ",\"start\":%.3f,\"end\":%.3f}", w[i].start, w[i].end);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
}

char *serve_format(const struct serve_job *job, const vkasr_result *r, size_t *len, const char **type) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    switch (job->fmt) {
    case SFMT_JSON:
        fputs("{\"text\":", f);
        json_str(f, vkasr_result_text(r));
        fputs("}\n", f);
        *type = "application/json";
        break;
    case SFMT_TEXT:
        write_format(f, FMT_TXT, "", r);
        *type = "text/plain; charset=utf-8";
        break;
    case SFMT_SRT:
    case SFMT_VTT:
        if (write_subtitles(f, r, &job->subs, job->fmt == SFMT_VTT) != 0) {
            fclose(f);
            free(buf);
            return NULL;
        }
        *type = job->fmt == SFMT_VTT ? "text/vtt; charset=utf-8" : "application/x-subrip; charset=utf-8";
        break;
    case SFMT_VERBOSE:
        write_verbose(f, job, r);
        *type = "application/json";
        break;
    }
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *serve_sse_event(const char *type, const char *key, const char *prefix, const char *text, size_t *len) {
    char *buf = NULL, *joined = malloc(strlen(prefix) + strlen(text) + 1);
    FILE *f = joined ? open_memstream(&buf, len) : NULL;
    if (!f) {
        free(joined);
        return NULL;
    }
    strcat(strcpy(joined, prefix), text);
    fputs("data: {\"type\":", f);
    json_str(f, type);
    fputc(',', f);
    json_str(f, key);
    fputc(':', f);
    json_str(f, joined);
    fputs("}\n\n", f);
    free(joined);
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *serve_error_json(const char *message, const char *type, const char *param, const char *code, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    fputs("{\"error\":{\"message\":", f);
    json_str(f, message);
    fputs(",\"type\":", f);
    json_str(f, type);
    fputs(",\"param\":", f);
    if (param)
        json_str(f, param);
    else
        fputs("null", f);
    fputs(",\"code\":", f);
    if (code)
        json_str(f, code);
    else
        fputs("null", f);
    fputs("}}\n", f);
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        free(buf);
        return NULL;
    }
    return buf;
}
