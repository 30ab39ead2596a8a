/* test_wer.c — tools/cli/wer.h: normalisation (case, punctuation, apostrophes, UTF-8) and the word-level
 * alignment counts (substitution, insertion, deletion, empty reference/hypothesis). The table mirrors
 * tools/train/wer.py's CASES so that the C and Python scorers are held to the same answers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wer.h"

static int failures;

#define CHECK(cond, ...)                                                                                      \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                              \
            fprintf(stderr, __VA_ARGS__);                                                                     \
            fputc('\n', stderr);                                                                              \
            failures++;                                                                                       \
        }                                                                                                     \
    } while (0)

static void check_norm(const char *in, const char *want) {
    char *got = wer_normalize(in);
    CHECK(got && strcmp(got, want) == 0, "normalize(\"%s\") = \"%s\", want \"%s\"", in ? in : "(null)",
          got ? got : "(null)", want);
    free(got);
}

static void check_pair(const char *ref, const char *hyp, size_t errors, size_t words, size_t sub, size_t del,
                       size_t ins) {
    struct wer_counts c;
    int rc = wer_count(ref, hyp, &c);
    CHECK(rc == 0, "wer_count(\"%s\", \"%s\") failed", ref, hyp);
    CHECK(c.errors == errors && c.ref_words == words,
          "wer_count(\"%s\", \"%s\"): %zu errors / %zu words, want %zu / %zu", ref, hyp, c.errors, c.ref_words,
          errors, words);
    if (sub != (size_t)-1)
        CHECK(c.sub == sub && c.del == del && c.ins == ins, "wer_count(\"%s\", \"%s\"): S %zu D %zu I %zu, want %zu %zu %zu",
              ref, hyp, c.sub, c.del, c.ins, sub, del, ins);
    CHECK(c.errors == c.sub + c.del + c.ins, "S+D+I != errors");
}

#define ANY ((size_t)-1)

int main(void) {
    /* the cases of tools/train/wer.py CASES: (ref, hyp, errors, reference words) */
    check_pair("the cat sat", "the cat sat", 0, 3, 0, 0, 0);
    check_pair("the cat sat", "the dog sat", 1, 3, 1, 0, 0);
    check_pair("the cat sat", "the cat", 1, 3, 0, 1, 0);
    check_pair("the cat sat", "the cat sat down", 1, 3, 0, 0, 1);
    check_pair("", "", 0, 0, 0, 0, 0);
    check_pair("", "hello there", 2, 0, 0, 0, 2);
    check_pair("hello there", "", 2, 2, 0, 2, 0);
    check_pair("Hello, World!", "hello world", 0, 2, 0, 0, 0);
    check_pair("Don't STOP", "dont stop", 0, 2, 0, 0, 0);
    check_pair("it\xe2\x80\x99s fine", "its fine", 0, 2, 0, 0, 0);                      /* U+2019 */
    check_pair("caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9 naive", 1, 2, 1, 0, 0);         /* é, ï kept */
    check_pair("\xc3\xbc" "ber  alles\xe2\x80\x94ja", "\xc3\xbc" "ber alles ja", 0, 3, 0, 0, 0); /* em dash */
    check_pair("a b c d", "b c d e", 2, 4, ANY, 0, 0);
    check_pair("twenty-three", "twenty three", 0, 2, 0, 0, 0);
    check_pair("\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82\xe4\xb8\x96\xe7\x95\x8c", "\xe4\xbd\xa0\xe5\xa5\xbd \xe4\xb8\x96\xe7\x95\x8c",
               0, 2, 0, 0, 0); /* CJK full stop U+3002 separates */
    /* alignment split and larger edits */
    check_pair("a b c", "a x c d", 2, 3, 1, 0, 1);
    check_pair("one two three four five", "one three four five six", 2, 5, 0, 1, 1);
    check_pair("x", "y z w", 3, 1, 1, 0, 2);

    /* normalisation */
    check_norm("  A\tb\nC  ", "a b c");
    check_norm(NULL, "");
    check_norm("...!?", "");
    check_norm("It's  the 2nd-best; \"OK\"?", "its the 2nd best ok");
    check_norm("\xc3\x89T\xc3\x89", "\xc3\x89t\xc3\x89"); /* only ASCII is case-folded */
    check_norm("a\xc2\xa0" "b", "a b");                    /* no-break space */
    check_norm("x\xe2\x80\xa6y", "x y");                   /* ellipsis U+2026 */
    check_norm("\xe2\x81\x87 ok", "ok");                   /* SentencePiece's unknown surface U+2047 */
    check_norm("ab\xffgh\xc3", "ab gh");                   /* invalid UTF-8 bytes separate, never join */
    check_norm("\xed\xa0\x80x", "x");                      /* UTF-16 surrogate encoded: invalid */
    check_norm("\xf0\x9f\x98\x80smile", "\xf0\x9f\x98\x80smile"); /* 4-byte character kept */

    /* rates */
    CHECK(wer_rate(0, 0) == 0.0 && wer_rate(2, 0) == 1.0, "empty reference rates");
    CHECK(fabs(wer_rate(1, 3) - 1.0 / 3.0) < 1e-15, "1/3");
    struct wer_counts c;
    CHECK(wer_count(NULL, NULL, &c) == 0 && c.errors == 0 && c.ref_words == 0, "NULL inputs");

    if (failures) {
        fprintf(stderr, "test_wer: %d failures\n", failures);
        return 1;
    }
    printf("test_wer: all checks passed\n");
    return 0;
}
