/* merge.c — merging the hypotheses of overlapping windows by word frames (merge.h): which words of a
 * window were final already, which become final, which stay tentative, and where the next cut lies.
 *
 * Words are placed by their first frame: a transducer emits a word's first token at the same frame in
 * windows that overlap (measured: within a frame), while the end, which follows the last token's
 * predicted duration, moves by a few frames. */
#include "merge.h"

void merge_init(struct merge_state *st) { *st = (struct merge_state){0}; }

int64_t merge_cut(const struct merge_state *st) { return st->cut2 / 2; }

static bool same_ids(const struct merge_state *st, const struct merge_word *w) {
    if (w->n_ids != st->last_n_ids)
        return false;
    for (size_t i = 0; i < w->n_ids && i < MERGE_MAX_IDS; i++)
        if (w->ids[i] != st->last_ids[i])
            return false;
    return true;
}

/* Whether a window's word is new, i.e. was not made final by an earlier window. *seen_last: an earlier
 * word of this window was taken for the last final word (a repeat right after it is then new). */
static bool is_new(const struct merge_state *st, const struct merge_word *w, bool *seen_last) {
    if (!st->have_last)
        return 2 * w->start >= st->cut2;
    int64_t d = w->start - st->last_start;
    if (!*seen_last && d >= -MERGE_SHIFT && d <= MERGE_SHIFT && same_ids(st, w)) {
        *seen_last = true;
        return false; /* the last final word again, placed a frame off */
    }
    if (2 * w->start >= st->cut2)
        return true;
    /* just before the cut, yet after the last final word: the next word, placed a frame earlier */
    return 2 * (w->start + MERGE_SHIFT) >= st->cut2 && d > MERGE_SHIFT;
}

void merge_window(struct merge_state *st, const struct merge_word *w, size_t n, int64_t horizon, bool last,
                  struct merge_split *out) {
    size_t i = 0;
    bool seen_last = false;
    while (i < n && !is_new(st, &w[i], &seen_last))
        i++;
    size_t j = i;
    while (j < n && (last || w[j].end <= horizon))
        j++;
    out->first_new = i;
    out->first_tentative = j;
    if (last)
        return;
    if (j > i) {
        const struct merge_word *f = &w[j - 1];
        st->have_last = true;
        st->last_start = f->start;
        st->last_n_ids = f->n_ids;
        for (size_t k = 0; k < f->n_ids && k < MERGE_MAX_IDS; k++)
            st->last_ids[k] = f->ids[k];
    }
    /* The cut moves to the middle between the starts of the last final word and of the next word: as
     * far from both as possible. When no word starts before the horizon, it follows the horizon
     * MERGE_SILENCE_LAG frames behind (windows must not grow in silence). It never moves back. */
    int64_t target2 = st->cut2;
    if (j < n && w[j].start < horizon) {
        if (st->have_last)
            target2 = st->last_start + w[j].start;
    } else {
        target2 = 2 * (horizon - MERGE_SILENCE_LAG);
        if (st->have_last && st->last_start + horizon > target2)
            target2 = st->last_start + horizon;
    }
    if (target2 > st->cut2)
        st->cut2 = target2;
}
