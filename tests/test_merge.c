/* test_merge.c — merging overlapping windows by word frames (src/asr/merge.c), on the host: a known word
 * sequence is "heard" by simulated windows that shift every word boundary by up to a frame or two, turn
 * the words cut by a window's edges into garbage, and see consecutive repeated words; the merged final
 * words must be the sequence exactly — nothing duplicated, nothing dropped, in order. */
#include <stdlib.h>
#include <string.h>

#include "asr/merge.h"
#include "expect.h"

#define MAX_WORDS 4096

struct truth {
    int64_t start[MAX_WORDS], end[MAX_WORDS];
    int32_t id[MAX_WORDS];
    size_t n;
};

static unsigned rnd(unsigned *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Words with gaps of 0-40 frames (often none), lengths [min_len, min_len + 8), ids from a small
 * vocabulary so that neighbours repeat ("the the"; merge.h: a repeat must start more than 2 MERGE_SHIFT
 * frames after the word it repeats). */
static void make_truth(struct truth *t, size_t n, int64_t min_len, unsigned seed) {
    static const int gaps[] = {0, 0, 0, 1, 2, 3, 5, 8, 15, 40};
    int64_t f = 3;
    t->n = n;
    for (size_t i = 0; i < n; i++) {
        f += gaps[rnd(&seed) % 10];
        t->start[i] = f;
        f += min_len + (int64_t)(rnd(&seed) % 8);
        t->end[i] = f;
        t->id[i] = (int32_t)(rnd(&seed) % 6);
    }
}

/* What one window [w0, w1) hears: each whole word with its start moved later by 0..sj frames and its end
 * by -ej..ej (keeping start < end and the order), words cut by an edge as garbage (id 100+) clipped to
 * the window. Two windows thus place a start up to sj frames apart (a transducer: about one) and an end
 * up to 2 ej. */
static size_t hear(const struct truth *t, int64_t w0, int64_t w1, int sj, int ej, unsigned *seed,
                   struct merge_word *out, int32_t *ids) {
    size_t n = 0;
    int64_t prev_end = w0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->end[i] <= w0 || t->start[i] >= w1)
            continue;
        int64_t s = t->start[i], e = t->end[i];
        int32_t id = t->id[i];
        if (s < w0 || e > w1) { /* cut by the window: a different word, within the window */
            s = s < w0 ? w0 : s;
            e = e > w1 ? w1 : e;
            id = 100 + (int32_t)(rnd(seed) % 50);
        } else {
            s += (int64_t)(rnd(seed) % (unsigned)(sj + 1));
            e += (int64_t)(rnd(seed) % (unsigned)(2 * ej + 1)) - ej;
        }
        if (s < prev_end - 1) /* a model's words do not run backwards */
            s = prev_end - 1;
        if (e <= s)
            e = s + 1;
        prev_end = e;
        ids[n] = id;
        out[n] = (struct merge_word){s, e, &ids[n], 1};
        n++;
    }
    return n;
}

/* Runs a stream over the truth with hop H, left context L, right context R (frames) and returns the
 * number of mismatches between the merged finals and the truth. */
static int run(const struct truth *t, int64_t H, int64_t L, int64_t R, int sj, int ej, unsigned seed, const char *name) {
    static struct merge_word w[MAX_WORDS];
    static int32_t ids[MAX_WORDS], got[MAX_WORDS];
    static int64_t got_start[MAX_WORDS];
    size_t ngot = 0;
    struct merge_state st;
    merge_init(&st);
    int64_t total = t->end[t->n - 1] + 10;
    bool last = false;
    int64_t prev_cut = 0;
    for (int64_t h = H; !last; h += H) {
        last = h + R >= total;
        int64_t w0 = merge_cut(&st) - L, w1 = last ? total : h + R;
        size_t n = hear(t, w0, w1, sj, ej, &seed, w, ids);
        struct merge_split sp;
        merge_window(&st, w, n, last ? total : h, last, &sp);
        EXPECT(sp.first_new <= sp.first_tentative && sp.first_tentative <= n, "%s: split %zu %zu of %zu", name,
               sp.first_new, sp.first_tentative, n);
        EXPECT(merge_cut(&st) >= prev_cut && merge_cut(&st) <= h, "%s: cut %lld after %lld, horizon %lld", name,
               (long long)merge_cut(&st), (long long)prev_cut, (long long)h);
        prev_cut = merge_cut(&st);
        for (size_t k = sp.first_new; k < sp.first_tentative && ngot < MAX_WORDS; k++) {
            got_start[ngot] = w[k].start;
            got[ngot++] = w[k].ids[0];
        }
    }
    int bad = 0;
    if (ngot != t->n)
        bad++;
    for (size_t i = 0; i < ngot && i < t->n; i++)
        if (got[i] != t->id[i] || (i && got_start[i] < got_start[i - 1]))
            bad++;
    EXPECT(bad == 0, "%s: %zu final words for %zu spoken, %d mismatches", name, ngot, t->n, bad);
    if (bad) {
        for (size_t i = 0; i < (ngot > t->n ? ngot : t->n) && i < 40; i++)
            printf("  %3zu: spoken %3d [%lld, %lld)  final %3d\n", i, i < t->n ? t->id[i] : -1,
                   (long long)(i < t->n ? t->start[i] : -1), (long long)(i < t->n ? t->end[i] : -1),
                   i < ngot ? got[i] : -1);
    }
    return bad;
}

/* The split itself on hand-made windows. */
static void test_split(void) {
    int32_t a = 1, b = 2, c = 3;
    struct merge_word w[] = {{0, 4, &a, 1}, {5, 9, &b, 1}, {10, 16, &c, 1}};
    struct merge_state st;
    merge_init(&st);
    struct merge_split sp;
    merge_window(&st, w, 3, 12, false, &sp); /* "c" ends after the horizon: tentative */
    EXPECT(sp.first_new == 0 && sp.first_tentative == 2, "split %zu %zu", sp.first_new, sp.first_tentative);
    EXPECT(merge_cut(&st) == 7, "cut %lld: between the starts of b (5) and c (10)", (long long)merge_cut(&st));
    /* the next window places b a frame later: it is the last final word again; c becomes final */
    struct merge_word w2[] = {{0, 4, &a, 1}, {6, 10, &b, 1}, {10, 16, &c, 1}};
    merge_window(&st, w2, 3, 20, false, &sp);
    EXPECT(sp.first_new == 2 && sp.first_tentative == 3, "next window: split %zu %zu", sp.first_new,
           sp.first_tentative);
    /* a repeated word right after the last final one is new */
    struct merge_word w3[] = {{10, 16, &c, 1}, {16, 20, &c, 1}};
    merge_window(&st, w3, 2, 28, false, &sp);
    EXPECT(sp.first_new == 1 && sp.first_tentative == 2, "repeat: split %zu %zu", sp.first_new, sp.first_tentative);
    /* the last window: everything new is final, whatever its end */
    struct merge_word w4[] = {{16, 20, &c, 1}, {30, 99, &a, 1}};
    merge_window(&st, w4, 2, 40, true, &sp);
    EXPECT(sp.first_new == 1 && sp.first_tentative == 2, "last window: split %zu %zu", sp.first_new,
           sp.first_tentative);
}

/* In silence the cut follows the horizon (windows must not grow without bound). */
static void test_silence(void) {
    struct merge_state st;
    merge_init(&st);
    struct merge_split sp;
    for (int64_t h = 8; h <= 800; h += 8)
        merge_window(&st, NULL, 0, h, false, &sp);
    EXPECT(merge_cut(&st) >= 800 - 16 && merge_cut(&st) <= 800, "cut %lld after silence up to 800",
           (long long)merge_cut(&st));
}

int main(void) {
    test_split();
    test_silence();
    static struct truth t;
    unsigned seeds[] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        char name[96];
        make_truth(&t, 400, 3, seeds[k]);
        /* the defaults (hop 8, left 32, right 4 frames), a hop of one frame, a long hop, the least right
         * context; starts a frame apart between windows (merge.h: MERGE_SHIFT), ends up to 4 */
        snprintf(name, sizeof name, "seed %u, defaults", seeds[k]);
        run(&t, 8, 32, 4, 1, 2, seeds[k], name);
        snprintf(name, sizeof name, "seed %u, hop 1", seeds[k]);
        run(&t, 1, 32, 4, 1, 2, seeds[k], name);
        snprintf(name, sizeof name, "seed %u, hop 30", seeds[k]);
        run(&t, 30, 32, 8, 1, 2, seeds[k], name);
        snprintf(name, sizeof name, "seed %u, right context of one frame", seeds[k]);
        run(&t, 8, 32, 1, 1, 2, seeds[k], name);
        snprintf(name, sizeof name, "seed %u, no jitter", seeds[k]);
        run(&t, 8, 32, 4, 0, 0, seeds[k], name);
    }
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
