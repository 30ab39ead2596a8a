/* wer.c — word error rate (wer.h): normalisation, then a word-level Levenshtein alignment. */
#include "wer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static int is_separator(uint32_t cp) {
    switch (cp) {
    case 0xA0: case 0xA1: case 0xA7: case 0xAB: case 0xB6: case 0xB7: case 0xBB: case 0xBF:
        return 1;
    default:
        return (cp >= 0x2000 && cp <= 0x206F) || (cp >= 0x3000 && cp <= 0x303F);
    }
}

char *wer_normalize(const char *text) {
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    size_t n = strlen((const char *)s);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    int pending_space = 0;
    while (n > 0) {
        uint32_t cp = 0;
        size_t len = utf8_decode(s, n, &cp);
        int word_char = 0;
        if (len == 0) {
            len = 1; /* invalid byte: separator */
        } else if (cp == 0x27 || cp == 0x2019) {
            s += len, n -= len;
            continue; /* apostrophe: removed, joins the word */
        } else if (cp < 0x80) {
            word_char = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
        } else {
            word_char = !is_separator(cp);
        }
        if (word_char) {
            if (pending_space && o > 0)
                out[o++] = ' ';
            pending_space = 0;
            if (cp >= 'A' && cp <= 'Z')
                out[o++] = (char)(cp + 32);
            else
                memcpy(out + o, s, len), o += len;
        } else {
            pending_space = 1;
        }
        s += len, n -= len;
    }
    out[o] = '\0';
    return out;
}

/* Splits a normalised string in place into words (pointers into it). Returns the word count;
 * *words is malloc'd (caller frees; NULL when there are no words). Returns (size_t)-1 on OOM. */
static size_t split_words(char *s, char ***words) {
    size_t n = 0, cap = 0;
    char **w = NULL;
    *words = NULL;
    for (char *p = s; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nw = realloc(w, cap * sizeof *w);
            if (!nw) {
                free(w);
                return (size_t)-1;
            }
            w = nw;
        }
        w[n++] = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = '\0';
    }
    *words = w;
    return n;
}

int wer_count(const char *ref, const char *hyp, struct wer_counts *c) {
    memset(c, 0, sizeof *c);
    int rc = -1;
    char *r = wer_normalize(ref), *h = wer_normalize(hyp);
    char **rw = NULL, **hw = NULL;
    size_t *d = NULL;
    if (!r || !h)
        goto done;
    size_t n = split_words(r, &rw), m = split_words(h, &hw);
    if (n == (size_t)-1 || m == (size_t)-1)
        goto done;
    /* (n+1) x (m+1) edit distances; n, m are word counts of one utterance, small */
    if (m + 1 > ((size_t)-1) / sizeof *d / (n + 1))
        goto done;
    d = malloc((n + 1) * (m + 1) * sizeof *d);
    if (!d)
        goto done;
#define WER_D(i, j) d[(i) * (m + 1) + (j)]
    for (size_t i = 0; i <= n; i++)
        WER_D(i, 0) = i;
    for (size_t j = 0; j <= m; j++)
        WER_D(0, j) = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = WER_D(i - 1, j - 1) + (strcmp(rw[i - 1], hw[j - 1]) != 0);
            if (WER_D(i - 1, j) + 1 < best)
                best = WER_D(i - 1, j) + 1;
            if (WER_D(i, j - 1) + 1 < best)
                best = WER_D(i, j - 1) + 1;
            WER_D(i, j) = best;
        }
    for (size_t i = n, j = m; i > 0 || j > 0;) {
        if (i > 0 && j > 0) {
            size_t diff = strcmp(rw[i - 1], hw[j - 1]) != 0;
            if (WER_D(i, j) == WER_D(i - 1, j - 1) + diff) {
                c->sub += diff;
                i--, j--;
                continue;
            }
        }
        if (i > 0 && WER_D(i, j) == WER_D(i - 1, j) + 1) {
            c->del++;
            i--;
        } else {
            c->ins++;
            j--;
        }
    }
#undef WER_D
    c->ref_words = n;
    c->hyp_words = m;
    c->errors = c->sub + c->del + c->ins;
    rc = 0;
done:
    free(d);
    free(rw);
    free(hw);
    free(r);
    free(h);
    return rc;
}

double wer_rate(size_t errors, size_t ref_words) {
    if (ref_words == 0)
        return errors ? 1.0 : 0.0;
    return (double)errors / (double)ref_words;
}
