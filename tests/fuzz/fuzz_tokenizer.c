/* fuzz_tokenizer.c — tokenizer.json through the library's reader (model.vocab as a map or a list,
 * added_tokens, unk and byte-fallback pieces), for vocabularies of 20 and 128 pieces (the sizes of the
 * test models). An accepted vocabulary is then used as decoding uses it: every piece alone, and a token
 * sequence taken from the input through the transcript builder (text, words, segments, timestamps);
 * all text must be valid UTF-8, words must cover the tokens but events and segments the words, in time order.
 * Seeds: the tokenizer.json files under tests/data. */
#include "asr/transcript.h"
#include "fuzz.h"
#include "model/model_internal.h"

#define NAME "fuzz/tokenizer.json"

static void check_text(const char *s, const char *what) {
    FUZZ_CHECK(s && fuzz_utf8_ok(s, strlen(s)), "%s is not valid UTF-8", what);
}

static void check_transcript(const struct tokenizer *tok, const uint8_t *data, size_t size, int head) {
    struct model_config cfg = {.head = head, .sub_factor = 8, .hop_length = 160, .sample_rate = 16000};
    /* token ids (blank = n included) and durations from the input's bytes, frames increasing */
    size_t n = size < 512 ? size : 512;
    struct asr_token *t = calloc(n ? n : 1, sizeof *t);
    FUZZ_CHECK(t != NULL, "out of memory");
    int64_t frame = 0;
    for (size_t i = 0; i < n; i++) {
        t[i].id = (int32_t)(data[i] % (uint32_t)(tok->n + 1));
        t[i].duration = head == VKASR_HEAD_RNNT ? 1 : data[size - 1 - i] % 5;
        t[i].frame = frame;
        frame += data[i] & 3;
    }
    struct transcript tr;
    struct err e = {0};
    vkasr_status st = transcript_build(tok, &cfg, t, n, &tr, &e);
    FUZZ_CHECK(st == VKASR_OK, "transcript: %s", e.msg);
    check_text(tr.text, "the text");
    FUZZ_CHECK(tr.ntokens == n, "%zu tokens for %zu", tr.ntokens, n);
    size_t next = 0;
    for (size_t i = 0; i < tr.ntokens; i++) {
        check_text(tr.tokens[i].text, "a token");
        FUZZ_CHECK(tr.tokens[i].start <= tr.tokens[i].end, "token %zu ends before it starts", i);
    }
    /* words cover the tokens in order but for the event tokens (<EOU>, <EOB>, language tags), which
     * belong to no word */
    for (size_t i = 0; i < tr.nwords; i++) {
        const vkasr_word *w = &tr.words[i];
        check_text(w->text, "a word");
        FUZZ_CHECK(w->first_token >= next && w->n_tokens > 0 && w->start <= w->end, "word %zu", i);
        for (size_t j = next; j < w->first_token + w->n_tokens; j++)
            FUZZ_CHECK((j < w->first_token) == (transcript_event_kind(tok, &cfg, t[j].id) >= 0),
                       "token %zu (word %zu): an event inside a word or text outside one", j, i);
        next = w->first_token + w->n_tokens;
    }
    for (; next < n; next++)
        FUZZ_CHECK(transcript_event_kind(tok, &cfg, t[next].id) >= 0, "token %zu is in no word", next);
    next = 0;
    for (size_t i = 0; i < tr.nsegments; i++) {
        const vkasr_segment *s = &tr.segments[i];
        check_text(s->text, "a segment");
        FUZZ_CHECK(s->first_word == next && s->n_words > 0 && s->start <= s->end, "segment %zu", i);
        next += s->n_words;
    }
    FUZZ_CHECK(next == tr.nwords, "segments cover %zu of %zu words", next, tr.nwords);
    transcript_free(&tr);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int32_t sizes[] = {20, 128};
    for (int k = 0; k < 2; k++) {
        struct tokenizer tok;
        struct err e = {0};
        vkasr_status st = tok_parse_hf_json(NAME, (const char *)data, size, sizes[k], &tok, &e);
        if (st != VKASR_OK) {
            FUZZ_CHECK(st == VKASR_ERR_MODEL && tok.n == 0, "status %d: %s", (int)st, e.msg);
            FUZZ_CHECK(strstr(e.msg, NAME) != NULL, "the message names no file: %s", e.msg);
            continue;
        }
        FUZZ_CHECK(tok_check(&tok, NAME, &e) == VKASR_OK, "accepted vocabulary fails tok_check: %s", e.msg);
        for (int32_t id = 0; id < tok.n; id++) {
            char *text = NULL;
            FUZZ_CHECK(tok_piece_text(&tok, id, &text, &e) == VKASR_OK, "piece %d: %s", id, e.msg);
            check_text(text, "a piece");
            free(text);
        }
        for (int head = VKASR_HEAD_TDT; head <= VKASR_HEAD_CTC; head++)
            check_transcript(&tok, data, size, head);
        tok_free(&tok);
    }
    return 0;
}
