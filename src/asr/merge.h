/* merge.h — live transcription by buffered inference (NeMo's way for offline models): the hypotheses
 * of overlapping windows are merged by their words' encoder frames, so that each spoken word becomes
 * final exactly once. Host logic only; src/api/stream.c runs the windows and calls it. */
#ifndef VKASR_MERGE_H
#define VKASR_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A word of a window's hypothesis: encoder frames [start, end) counted from the stream's first sample,
 * and its token ids (to recognise the word that was made final last when a window places it later). */
struct merge_word {
    int64_t start, end;
    const int32_t *ids;
    size_t n_ids;
};

#define MERGE_MAX_IDS 32
/* How far (frames) two windows may place the start of the same word apart. The merge makes every word
 * final exactly once when neighbouring windows place each word's start within MERGE_SHIFT frames of
 * each other (a transducer emits a word's first token at the same frame, give or take one; its end
 * moves more) and a word that repeats the one before it ("the the") starts more than 2 MERGE_SHIFT
 * frames after it; tests/test_merge.c checks that on simulated windows. */
#define MERGE_SHIFT 1
/* In silence, the cut stays this many frames behind the horizon: a word that a window heard only in part
 * near its horizon may start a little before it in the next window. */
#define MERGE_SILENCE_LAG 4

/* What earlier windows decided. The cut is kept doubled (2 x frame) so that midpoints stay integers. */
struct merge_state {
    int64_t cut2;                    /* words starting before cut2 / 2 were decided earlier            */
    bool have_last;                  /* the last word made final:                                     */
    int64_t last_start;              /*   its first frame                                             */
    int32_t last_ids[MERGE_MAX_IDS]; /*   its first ids, and how many it has                          */
    size_t last_n_ids;
};

/* How one window's words [0, n) divide: [0, first_new) were final already, [first_new, first_tentative)
 * become final now, [first_tentative, n) are tentative (shown as partial text, decided later). */
struct merge_split {
    size_t first_new, first_tentative;
};

void merge_init(struct merge_state *st);

/* Splits the words of one window (sorted by start) and advances the state. A word is new when it
 * starts at or after the cut, unless it is the last final word again (same ids, start within
 * MERGE_SHIFT), or when it starts up to MERGE_SHIFT before the cut and more than MERGE_SHIFT after the
 * last final word (the next word, placed a frame earlier); the words after the first new one are new. A new word becomes final when
 * it ends by `horizon` (the window's end minus its right context: every final word was heard with that
 * much audio after it), or always when `last` (the stream's final window). The cut then moves to the
 * middle between the starts of the last final word and of the next word, as far as possible from both:
 * a neighbouring window that places either a frame or two differently still puts it on the same side
 * (in silence: MERGE_SILENCE_LAG behind the horizon). */
void merge_window(struct merge_state *st, const struct merge_word *w, size_t n, int64_t horizon, bool last,
                  struct merge_split *out);

/* The frame before which audio is decided: later windows need no audio before cut - left context. */
int64_t merge_cut(const struct merge_state *st);

#endif
