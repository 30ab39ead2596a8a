/* tokenizer.h — the SentencePiece vocabulary of a model and id -> text decoding with SentencePiece
 * semantics (spec §7.2): pieces with U+2581 as the word boundary, CONTROL pieces dropped, <0xHH> byte
 * pieces joined and decoded as UTF-8 (invalid sequences -> U+FFFD), the leading space removed.
 * Output is always valid UTF-8. */
#ifndef VKASR_TOKENIZER_H
#define VKASR_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* SentencePiece piece types (sentencepiece_model.proto). */
enum tok_type { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

struct tokenizer {
    int32_t n;               /* number of pieces (ids 0..n-1)                                  */
    char **piece;            /* UTF-8, validated                                                */
    uint8_t *type;           /* enum tok_type                                                   */
    /* Derived once by the loaders (tok_index), so that a transcript does not sweep the vocabulary
     * (8192 pieces in the v3 models: ~0.3 ms per transcript); NULL where a tokenizer was built by hand
     * and not indexed: then computed per call. */
    uint8_t *punct;          /* per id: tok_is_punct                                            */
    uint32_t *punct_cp;      /* the punctuation characters the pieces can produce, each once,  */
    size_t n_punct_cp;       /* in id order (NeMo's supported_punctuation)                      */
};

void tok_free(struct tokenizer *t);

/* Decodes ids (blank and out-of-range ids skipped) into a NUL-terminated malloc'd UTF-8 string.
 * strip_leading_space: drop the one leading space of the first word (SentencePiece decode). */
vkasr_status tok_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int strip_leading_space,
                        char **out, struct err *e);

/* The text of one piece decoded alone ("▁hello" -> "hello"); for word/segment building. */
vkasr_status tok_piece_text(const struct tokenizer *t, int32_t id, char **out, struct err *e);

/* True when piece id is punctuation in NeMo's sense (spec §6.7): its text consists of Unicode
 * punctuation (category P*) characters only, and it is not a special piece. */
int tok_is_punct(const struct tokenizer *t, int32_t id);

/* Derives punct and punct_cp from the pieces (every loader calls it last). */
vkasr_status tok_index(struct tokenizer *t, struct err *e);

/* Checks that s[0..n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int utf8_valid(const char *s, size_t n);

#endif
