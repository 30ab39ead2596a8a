/* transcript.c — decoded tokens -> text, per-token timestamps, words and segments (spec §6.7, NeMo's
 * rules): TDT tokens span [t, t+d) with punctuation snapped to the previous token's end, RNN-T tokens one
 * frame, CTC tokens their run; words start at pieces carrying U+2581 and absorb punctuation; segments
 * close after a word ending in . ? ! — and, for models without punctuation, before a word that follows
 * a silence of at least TRANSCRIPT_SEGMENT_GAP_S or would stretch the segment beyond TRANSCRIPT_SEGMENT_MAX_S. */
#include "transcript.h"

#include <stdlib.h>
#include <string.h>

struct sbuf {
    char *p;
    size_t n, cap;
};

static bool sb_put(struct sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return false;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

/* ---- UTF-8 helpers -------------------------------------------------------------------------------- */

static size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

static uint32_t utf8_cp(const char *s, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = utf8_len(u[0]);
    uint32_t cp = n == 1 ? u[0] : n == 2 ? (u[0] & 0x1fu) : n == 3 ? (u[0] & 0x0fu) : (u[0] & 0x07u);
    for (size_t i = 1; i < n; i++)
        cp = (cp << 6) | (u[i] & 0x3fu);
    *len = n;
    return cp;
}

/* The punctuation characters the vocabulary can produce (NeMo's supported_punctuation): the
 * tokenizer's own (tok_index), or collected here for one not indexed (owned). */
struct punct_set {
    const uint32_t *cp;
    size_t n;
    uint32_t *owned;
};

static bool punct_has(const struct punct_set *s, uint32_t cp) {
    for (size_t i = 0; i < s->n; i++)
        if (s->cp[i] == cp)
            return true;
    return false;
}

static vkasr_status punct_collect(const struct tokenizer *tok, struct punct_set *s, struct err *e) {
    *s = (struct punct_set){tok->punct_cp, tok->n_punct_cp, NULL};
    if (tok->punct)
        return VKASR_OK;
    /* a tokenizer built by hand, not indexed: index a shallow copy for this call */
    struct tokenizer idx = {.n = tok->n, .piece = tok->piece, .type = tok->type};
    vkasr_status st = tok_index(&idx, e);
    free(idx.punct);
    *s = (struct punct_set){idx.punct_cp, idx.n_punct_cp, idx.punct_cp};
    return st;
}

/* NeMo: remove one whitespace character right before any supported punctuation character. */
static void strip_space_before_punct(char *s, const struct punct_set *ps) {
    char *w = s;
    for (const char *r = s; *r;) {
        if ((*r == ' ') && r[1]) {
            size_t len;
            uint32_t next = utf8_cp(r + 1, &len);
            if (punct_has(ps, next)) {
                r++;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = '\0';
}

/* ---- events --------------------------------------------------------------------------------------- */

/* A language tag piece: "<" 2-3 lowercase letters "-" 2-4 letters or digits ">" (<en-US>, <zh-CN>). */
static bool is_language_tag(const char *p) {
    size_t n = strlen(p), i = 1, a = 0, b = 0;
    if (n < 7 || p[0] != '<' || p[n - 1] != '>')
        return false;
    for (; i < n - 1 && p[i] >= 'a' && p[i] <= 'z'; i++)
        a++;
    if (a < 2 || a > 3 || p[i++] != '-')
        return false;
    for (; i < n - 1 && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9'));
         i++)
        b++;
    return b >= 2 && b <= 4 && i == n - 1;
}

int transcript_event_kind(const struct tokenizer *tok, const struct model_config *cfg, int32_t id) {
    if (id < 0 || id >= tok->n)
        return -1;
    const char *p = tok->piece[id];
    if (!strcmp(p, "<EOU>"))
        return VKASR_EVENT_END_OF_UTTERANCE;
    if (!strcmp(p, "<EOB>"))
        return VKASR_EVENT_BACKCHANNEL;
    if (cfg->n_prompts > 0 && is_language_tag(p))
        return VKASR_EVENT_LANGUAGE;
    return -1;
}

/* ---- building ------------------------------------------------------------------------------------- */

/* Text of tokens t[0..n), event tokens left out (the join NeMo-Speech.cpp's extract_lang_tags makes by
 * removing the tags and the doubled space). */
static vkasr_status decode_span(const struct tokenizer *tok, const struct model_config *cfg, const struct asr_token *t,
                                size_t n, const struct punct_set *ps, char **out, struct err *e) {
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (transcript_event_kind(tok, cfg, t[i].id) < 0)
            ids[m++] = t[i].id;
    vkasr_status st = tok_decode(tok, ids, m, 1, out, e);
    free(ids);
    if (st == VKASR_OK)
        strip_space_before_punct(*out, ps);
    return st;
}

void transcript_free(struct transcript *tr) {
    for (size_t i = 0; i < tr->ntokens; i++)
        free((char *)tr->tokens[i].text);
    for (size_t i = 0; i < tr->nwords; i++)
        free((char *)tr->words[i].text);
    for (size_t i = 0; i < tr->nsegments; i++)
        free((char *)tr->segments[i].text);
    free(tr->tokens);
    free(tr->words);
    free(tr->segments);
    for (size_t i = 0; i < tr->nevents; i++)
        free((char *)tr->events[i].text);
    free(tr->events);
    free(tr->language);
    free(tr->text);
    memset(tr, 0, sizeof *tr);
}

bool transcript_piece_starts_word(const char *piece) { return strncmp(piece, "\xe2\x96\x81", 3) == 0; }

static vkasr_status build_tokens(const struct tokenizer *tok, const struct model_config *cfg,
                                 const struct asr_token *t, size_t n, struct transcript *tr, struct err *e) {
    const double fs = (double)cfg->sub_factor * cfg->hop_length / cfg->sample_rate;
    tr->tokens = calloc(n ? n : 1, sizeof *tr->tokens);
    if (!tr->tokens)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        vkasr_token *o = &tr->tokens[i];
        char *text = NULL;
        TRY(tok_piece_text(tok, t[i].id, &text, e));
        tr->ntokens = i + 1;
        o->text = text;
        o->id = t[i].id;
        o->piece = (t[i].id >= 0 && t[i].id < tok->n) ? tok->piece[t[i].id] : "";
        o->frame = t[i].frame;
        o->duration = t[i].duration;
        int64_t start = t[i].frame, end = t[i].frame + (cfg->head == VKASR_HEAD_RNNT ? 1 : t[i].duration);
        o->start = (double)start * fs;
        o->end = (double)end * fs;
        /* TDT: punctuation is often emitted late; snap it to the previous token's end. */
        if (cfg->head == VKASR_HEAD_TDT && i > 0 && tok_is_punct(tok, t[i].id))
            o->start = o->end = tr->tokens[i - 1].end;
    }
    return VKASR_OK;
}

/* The time span of tokens [first, first + count) that produce text. Special pieces (CONTROL, UNUSED:
 * <pad>, <s>, ... decoded as nothing) are left out: a random or undertrained model can emit them after
 * the last word, and they must not stretch its end (or a segment's start) over seconds of nothing.
 * Returns false when every token of the range is special. */
static bool text_span(const struct tokenizer *tok, const struct model_config *cfg, const struct transcript *tr,
                      size_t first, size_t count, double *start, double *end) {
    bool any = false;
    for (size_t i = first; i < first + count; i++) {
        int32_t id = tr->tokens[i].id;
        if (id >= 0 && id < tok->n && (tok->type[id] == TOK_CONTROL || tok->type[id] == TOK_UNUSED))
            continue;
        if (transcript_event_kind(tok, cfg, id) >= 0)
            continue;
        if (!any)
            *start = tr->tokens[i].start;
        *end = tr->tokens[i].end;
        any = true;
    }
    return any;
}

static vkasr_status push_word(struct transcript *tr, const struct tokenizer *tok, const struct model_config *cfg,
                              const struct asr_token *t, size_t first, size_t count, const struct punct_set *ps,
                              size_t *cap, struct err *e) {
    if (tr->nwords == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        vkasr_word *nw = realloc(tr->words, *cap * sizeof *nw);
        if (!nw)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        tr->words = nw;
    }
    char *text = NULL;
    TRY(decode_span(tok, cfg, t + first, count, ps, &text, e));
    vkasr_word *w = &tr->words[tr->nwords++];
    w->text = text;
    w->first_token = first;
    w->n_tokens = count;
    if (!text_span(tok, cfg, tr, first, count, &w->start, &w->end)) { /* only special tokens: their own span */
        w->start = tr->tokens[first].start;
        w->end = tr->tokens[first + count - 1].end;
    }
    if (w->end < w->start)
        w->end = w->start;
    return VKASR_OK;
}

static vkasr_status build_words(const struct tokenizer *tok, const struct model_config *cfg, const struct asr_token *t,
                                size_t n, const struct punct_set *ps, struct transcript *tr, struct err *e) {
    size_t cap = 0, first = 0;
    bool open = false;
    for (size_t i = 0; i < n; i++) {
        if (transcript_event_kind(tok, cfg, t[i].id) >= 0) { /* an event ends the word and joins none */
            if (open)
                TRY(push_word(tr, tok, cfg, t, first, i - first, ps, &cap, e));
            open = false;
            continue;
        }
        const char *piece = tr->tokens[i].piece;
        bool punct = tok_is_punct(tok, t[i].id);
        bool boundary = transcript_piece_starts_word(piece) && !punct;
        if (boundary && strcmp(piece, "\xe2\x96\x81") == 0) {
            /* a lone "▁" starts a word unless punctuation follows */
            size_t j = i + 1;
            while (j < n && strcmp(tr->tokens[j].piece, "\xe2\x96\x81") == 0)
                j++;
            if (j < n && tok_is_punct(tok, t[j].id))
                boundary = false;
        }
        if (open && boundary) {
            TRY(push_word(tr, tok, cfg, t, first, i - first, ps, &cap, e));
            open = false;
        }
        if (!open) {
            first = i;
            open = true;
        }
    }
    if (open)
        TRY(push_word(tr, tok, cfg, t, first, n - first, ps, &cap, e));
    return VKASR_OK;
}

bool transcript_utterance_ends_after(const struct tokenizer *tok, const struct model_config *cfg,
                                     const struct transcript *tr, size_t w) {
    const vkasr_word *a = &tr->words[w];
    size_t end = w + 1 < tr->nwords ? tr->words[w + 1].first_token : tr->ntokens;
    for (size_t i = a->first_token + a->n_tokens; i < end; i++) {
        int k = transcript_event_kind(tok, cfg, tr->tokens[i].id);
        if (k == VKASR_EVENT_END_OF_UTTERANCE || k == VKASR_EVENT_BACKCHANNEL)
            return true;
    }
    return false;
}

bool transcript_ends_sentence(const char *text) {
    size_t n = strlen(text);
    return n && (text[n - 1] == '.' || text[n - 1] == '?' || text[n - 1] == '!');
}

static vkasr_status build_segments(const struct tokenizer *tok, const struct model_config *cfg,
                                   const struct asr_token *t, const struct punct_set *ps, struct transcript *tr,
                                   struct err *e) {
    size_t cap = 0, first = 0;
    for (size_t w = 0; w < tr->nwords; w++) {
        bool last = w + 1 == tr->nwords;
        bool close = last || transcript_ends_sentence(tr->words[w].text) ||
                     transcript_utterance_ends_after(tok, cfg, tr, w);
        if (!close) {
            const vkasr_word *nx = &tr->words[w + 1];
            close = nx->start - tr->words[w].end >= TRANSCRIPT_SEGMENT_GAP_S ||
                    nx->end - tr->words[first].start > TRANSCRIPT_SEGMENT_MAX_S;
        }
        if (!close)
            continue;
        if (tr->nsegments == cap) {
            cap = cap ? 2 * cap : 16;
            vkasr_segment *ns = realloc(tr->segments, cap * sizeof *ns);
            if (!ns)
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
            tr->segments = ns;
        }
        const vkasr_word *a = &tr->words[first], *b = &tr->words[w];
        size_t ntok = b->first_token + b->n_tokens - a->first_token;
        double start = a->start, end = b->end; /* a segment of special tokens only keeps their span */
        if (text_span(tok, cfg, tr, a->first_token, ntok, &start, &end) && end < start)
            end = start;
        char *text = NULL;
        TRY(decode_span(tok, cfg, t + a->first_token, ntok, ps, &text, e));
        tr->segments[tr->nsegments++] =
            (vkasr_segment){.text = text, .start = start, .end = end, .first_word = first, .n_words = w - first + 1};
        first = w + 1;
    }
    return VKASR_OK;
}

/* The event tokens in order, each with the segments that end before it; the first language tag is the
 * transcript's language ("<de-DE>" -> "de-DE"). */
static vkasr_status build_events(const struct tokenizer *tok, const struct model_config *cfg, struct transcript *tr,
                                 struct err *e) {
    size_t cap = 0, seg = 0;
    for (size_t i = 0; i < tr->ntokens; i++) {
        int k = transcript_event_kind(tok, cfg, tr->tokens[i].id);
        if (k < 0)
            continue;
        while (seg < tr->nsegments) { /* segments whose last token comes before token i */
            const vkasr_segment *s = &tr->segments[seg];
            const vkasr_word *lw = &tr->words[s->first_word + s->n_words - 1];
            if (lw->first_token + lw->n_tokens > i)
                break;
            seg++;
        }
        if (tr->nevents == cap) {
            cap = cap ? 2 * cap : 8;
            vkasr_event *ne = realloc(tr->events, cap * sizeof *ne);
            if (!ne)
                return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
            tr->events = ne;
        }
        const char *piece = tok->piece[tr->tokens[i].id];
        size_t len = strlen(piece);
        char *text = k == VKASR_EVENT_LANGUAGE ? strndup(piece + 1, len - 2) : strdup(piece);
        if (!text || (k == VKASR_EVENT_LANGUAGE && !tr->language && !(tr->language = strdup(text)))) {
            free(text);
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        }
        tr->events[tr->nevents++] = (vkasr_event){.kind = (vkasr_event_kind)k, .text = text,
                                                  .frame = tr->tokens[i].frame, .time = tr->tokens[i].start,
                                                  .n_segments = seg};
    }
    return VKASR_OK;
}

vkasr_status transcript_build(const struct tokenizer *tok, const struct model_config *cfg, const struct asr_token *t,
                              size_t n, struct transcript *tr, struct err *e) {
    memset(tr, 0, sizeof *tr);
    struct punct_set ps;
    vkasr_status st = punct_collect(tok, &ps, e);
    if (st == VKASR_OK)
        st = build_tokens(tok, cfg, t, n, tr, e);
    if (st == VKASR_OK)
        st = decode_span(tok, cfg, t, n, &ps, &tr->text, e);
    if (st == VKASR_OK)
        st = build_words(tok, cfg, t, n, &ps, tr, e);
    if (st == VKASR_OK)
        st = build_segments(tok, cfg, t, &ps, tr, e);
    if (st == VKASR_OK)
        st = build_events(tok, cfg, tr, e);
    free(ps.owned);
    if (st != VKASR_OK)
        transcript_free(tr);
    return st;
}

/* Moves the first nseg segments of `part` (with their words and tokens) to the end of `dst`, fixing
 * indices; the strings change owner. Used to publish completed segments while decoding continues. */
vkasr_status transcript_append(struct transcript *dst, struct transcript *part, size_t nseg, struct err *e) {
    if (nseg == 0)
        return VKASR_OK;
    const vkasr_segment *last = &part->segments[nseg - 1];
    size_t nw = last->first_word + last->n_words;
    size_t nt = part->words[nw - 1].first_token + part->words[nw - 1].n_tokens;
    vkasr_token *tk = realloc(dst->tokens, (dst->ntokens + nt) * sizeof *tk);
    if (tk)
        dst->tokens = tk;
    vkasr_word *wd = tk ? realloc(dst->words, (dst->nwords + nw) * sizeof *wd) : NULL;
    if (wd)
        dst->words = wd;
    vkasr_segment *sg = wd ? realloc(dst->segments, (dst->nsegments + nseg) * sizeof *sg) : NULL;
    if (sg)
        dst->segments = sg;
    struct sbuf text = {dst->text, dst->text ? strlen(dst->text) : 0, dst->text ? strlen(dst->text) + 1 : 0};
    bool ok = sg != NULL;
    for (size_t i = 0; ok && i < nseg; i++)
        ok = (text.n == 0 || sb_put(&text, " ", 1)) && sb_put(&text, part->segments[i].text, strlen(part->segments[i].text));
    dst->text = text.p;
    if (!ok)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (size_t i = 0; i < nt; i++) {
        dst->tokens[dst->ntokens + i] = part->tokens[i];
        part->tokens[i].text = NULL;
    }
    for (size_t i = 0; i < nw; i++) {
        vkasr_word w = part->words[i];
        w.first_token += dst->ntokens;
        dst->words[dst->nwords + i] = w;
        part->words[i].text = NULL;
    }
    for (size_t i = 0; i < nseg; i++) {
        vkasr_segment s = part->segments[i];
        s.first_word += dst->nwords;
        dst->segments[dst->nsegments + i] = s;
        part->segments[i].text = NULL;
    }
    dst->ntokens += nt;
    dst->nwords += nw;
    dst->nsegments += nseg;
    return VKASR_OK;
}
