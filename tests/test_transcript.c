/* test_transcript.c — word and segment timing from decoded tokens (src/asr/transcript.c), on the host with
 * a hand-made vocabulary: special tokens (<pad>, decoded as nothing) keep their place and times in the
 * token list but do not stretch the time span of the word or segment around them.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr/transcript.h"
#include "expect.h"


static int near(double a, double b) { return fabs(a - b) < 1e-9; }

enum { UNK, PAD, HI, COMMA, THERE };

/* One frame is 8 * 160 / 16000 = 0.08 s. indexed: the tokenizer's punctuation tables derived first
 * (tok_index, as every loader does), else computed per call: the same transcript either way. */
static void test_special_tokens(vkasr_head head, bool indexed) {
    char *pieces[] = {"<unk>", "<pad>", "\xE2\x96\x81hi", ",", "\xE2\x96\x81there"};
    uint8_t types[] = {TOK_UNKNOWN, TOK_CONTROL, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL};
    struct tokenizer tok = {.n = 5, .piece = pieces, .type = types};
    if (indexed) {
        struct err ei = {0};
        EXPECT(tok_index(&tok, &ei) == VKASR_OK && tok.punct && tok.punct[COMMA] && !tok.punct[HI] &&
                   tok.n_punct_cp == 1 && tok.punct_cp[0] == ',',
               "tok_index: %s", ei.msg);
    }
    struct model_config cfg = {.head = head, .sub_factor = 8, .hop_length = 160, .sample_rate = 16000};
    /* <pad> hi <pad> , there <pad> <pad>: leading, inner and trailing special tokens */
    const struct asr_token t[] = {{PAD, 0, 3},   {HI, 3, 2},     {PAD, 5, 3},   {COMMA, 8, 1},
                                  {THERE, 9, 2}, {PAD, 11, 10}, {PAD, 21, 10}};
    const size_t n = sizeof t / sizeof t[0];
    struct transcript tr;
    struct err e;
    err_clear(&e);
    vkasr_status st = transcript_build(&tok, &cfg, t, n, &tr, &e);
    EXPECT(st == VKASR_OK, "transcript_build: %s", e.msg);
    if (st != VKASR_OK) {
        free(tok.punct);
        free(tok.punct_cp);
        return;
    }
    const double fs = 0.08;
    const char *hn = head == VKASR_HEAD_TDT ? "TDT" : head == VKASR_HEAD_RNNT ? "RNN-T" : "CTC";

    /* tokens: all of them, in order, each with its own span */
    EXPECT(tr.ntokens == n, "%s: %zu tokens, expected %zu", hn, tr.ntokens, n);
    for (size_t i = 0; i < tr.ntokens && i < n; i++) {
        EXPECT(tr.tokens[i].id == t[i].id && tr.tokens[i].frame == t[i].frame, "%s: token %zu", hn, i);
        if (t[i].id == PAD)
            EXPECT(near(tr.tokens[i].start, t[i].frame * fs) && tr.tokens[i].text[0] == '\0',
                   "%s: token %zu (<pad>) start %g", hn, i, tr.tokens[i].start);
    }
    EXPECT(strcmp(tr.text, "hi, there") == 0, "%s: text \"%s\"", hn, tr.text);

    /* words: "" (the leading <pad>, its own span), "hi,", "there" */
    EXPECT(tr.nwords == 3, "%s: %zu words", hn, tr.nwords);
    if (tr.nwords == 3) {
        double dur = head == VKASR_HEAD_RNNT ? 1 : 2; /* RNN-T tokens last one frame */
        const vkasr_word *hi = &tr.words[1], *there = &tr.words[2];
        EXPECT(strcmp(hi->text, "hi,") == 0 && strcmp(there->text, "there") == 0, "%s: words \"%s\" \"%s\"", hn,
               hi->text, there->text);
        EXPECT(near(hi->start, 3 * fs), "%s: \"hi,\" starts at %g, expected %g", hn, hi->start, 3 * fs);
        /* ends with the comma (TDT snaps punctuation to the previous token's end, i.e. the <pad>'s) */
        double comma_end = tr.tokens[3].end;
        EXPECT(near(hi->end, comma_end), "%s: \"hi,\" ends at %g, expected %g", hn, hi->end, comma_end);
        EXPECT(near(there->start, 9 * fs) && near(there->end, (9 + dur) * fs),
               "%s: \"there\" spans %g..%g, expected %g..%g (the trailing <pad>s must not count)", hn, there->start,
               there->end, 9 * fs, (9 + dur) * fs);
        EXPECT(near(tr.words[0].start, 0.0) && tr.words[0].text[0] == '\0', "%s: leading <pad> word", hn);
    }
    /* one segment from "hi" to "there": neither the leading nor the trailing <pad>s count */
    EXPECT(tr.nsegments == 1, "%s: %zu segments", hn, tr.nsegments);
    if (tr.nsegments == 1 && tr.nwords == 3)
        EXPECT(near(tr.segments[0].start, 3 * fs) && near(tr.segments[0].end, tr.words[2].end),
               "%s: segment spans %g..%g, expected %g..%g", hn, tr.segments[0].start, tr.segments[0].end, 3 * fs,
               tr.words[2].end);
    transcript_free(&tr);
    free(tok.punct);
    free(tok.punct_cp);
}

/* Only special tokens: words and segments keep the tokens' own span (nothing better to report). */
static void test_only_special(void) {
    char *pieces[] = {"<unk>", "<pad>"};
    uint8_t types[] = {TOK_UNKNOWN, TOK_CONTROL};
    struct tokenizer tok = {.n = 2, .piece = pieces, .type = types};
    struct model_config cfg = {.head = VKASR_HEAD_TDT, .sub_factor = 8, .hop_length = 160, .sample_rate = 16000};
    const struct asr_token t[] = {{PAD, 0, 2}, {PAD, 2, 3}};
    struct transcript tr;
    struct err e;
    err_clear(&e);
    vkasr_status st = transcript_build(&tok, &cfg, t, 2, &tr, &e);
    EXPECT(st == VKASR_OK, "transcript_build: %s", e.msg);
    if (st != VKASR_OK)
        return;
    EXPECT(tr.ntokens == 2 && tr.nwords == 1 && tr.nsegments == 1, "%zu tokens, %zu words, %zu segments", tr.ntokens,
           tr.nwords, tr.nsegments);
    if (tr.nwords == 1 && tr.nsegments == 1)
        EXPECT(near(tr.words[0].start, 0.0) && near(tr.words[0].end, 0.4) && near(tr.segments[0].end, 0.4),
               "special-only word %g..%g", tr.words[0].start, tr.words[0].end);
    transcript_free(&tr);
}

int main(void) {
    for (int indexed = 0; indexed < 2; indexed++) {
        test_special_tokens(VKASR_HEAD_TDT, indexed);
        test_special_tokens(VKASR_HEAD_RNNT, indexed);
        test_special_tokens(VKASR_HEAD_CTC, indexed);
    }
    test_only_special();
    printf("test_transcript: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
