/* wer.h — word error rate, as `vkasr transcribe --output-manifest` reports it and the tests measure it.
 *
 * Normalisation (identical to tools/train/wer.py; both are tested on the same cases):
 *   - ASCII A-Z -> a-z (no other case folding);
 *   - apostrophes U+0027 and U+2019 are removed ("don't" -> "dont");
 *   - every other ASCII byte that is not a-z or 0-9 separates words;
 *   - non-ASCII characters belong to words, except no-break space and Latin-1 punctuation
 *     (U+00A0 A1 A7 AB B6 B7 BB BF), U+2000-U+206F and U+3000-U+303F, which separate words;
 *   - bytes that are not valid UTF-8 separate words.
 * WER = (S + D + I) / N over N reference words. Among equal-cost alignments the split prefers match or
 * substitution, then deletion, then insertion (as wer.py does). */
#ifndef VKASR_CLI_WER_H
#define VKASR_CLI_WER_H

#include <stddef.h>

struct wer_counts {
    size_t errors, ref_words, hyp_words, sub, del, ins;
};

/* The normalised text: words separated by single spaces; malloc'd, NULL when out of memory. NULL is "". */
char *wer_normalize(const char *text);
/* Counts for one reference/hypothesis pair; 0, or -1 when out of memory. */
int wer_count(const char *ref, const char *hyp, struct wer_counts *c);
/* errors / ref_words; an empty reference gives 0 for no errors and 1 otherwise. */
double wer_rate(size_t errors, size_t ref_words);

#endif
