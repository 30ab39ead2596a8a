/* cpu_lstm_cache.c — the LSTM step's input half, b + W_ih x, kept per distinct x: the first layer's x is
 * an embedding row, a function of the last token, so a transcription computes each token's half once
 * and then adds only W_hh h (a quarter of the decoder's weights per step less to read). Entries hold
 * the very sums the step computes, so a hit gives the same bits. A weight whose inputs never repeat
 * (the upper layers' x is the layer below's state) stops being looked up after LOOKUPS_PROBE misses. */
#include <string.h>

#include "cpu_internal.h"

#define CACHE_BYTES_MAX ((size_t)64 << 20) /* entries' memory per backend at most (then no more inserts) */
#define SLOTS 8192                          /* hash slots (a power of two; entries at most SLOTS / 2)   */
#define WEIGHTS_MAX 16                      /* weights tracked                                         */
#define LOOKUPS_PROBE 64                    /* lookups without a hit before a weight is given up        */

struct entry {
    uint64_t hash;
    const void *w, *b;  /* the step's w_ih and b (the model's tensors: fixed for the backend's life) */
    int64_t in, g;      /* x's length and the gates'                                              */
    float *x, *y;       /* x [in], then y [g] = b + W_ih x; one allocation; NULL: an empty slot      */
    bool ready;         /* y written (cpu_lstm_cache_commit): a step's own inserts are no hits      */
};

struct wstat {
    const void *w;
    int64_t lookups, hits;
    bool off;
};

struct cpu_lstm_cache {
    struct entry slot[SLOTS];
    int64_t used;
    size_t bytes;
    struct wstat ws[WEIGHTS_MAX];
    int nws;
};

void cpu_lstm_cache_destroy(struct cpu_lstm_cache *c) {
    if (!c)
        return;
    for (int i = 0; i < SLOTS; i++)
        free(c->slot[i].x);
    free(c);
}

static uint64_t hash_x(const void *w, const void *b, const float *x, int64_t in) {
    uint64_t h = 0x9e3779b97f4a7c15u ^ (uint64_t)(uintptr_t)w ^ ((uint64_t)(uintptr_t)b << 1) ^ (uint64_t)in;
    uint32_t u;
    for (int64_t i = 0; i < in; i++) {
        memcpy(&u, x + i, sizeof u);
        h = (h ^ u) * 0x100000001b3u;
    }
    return h ^ (h >> 29);
}

static struct wstat *wstat_of(struct cpu_lstm_cache *c, const void *w) {
    for (int i = 0; i < c->nws; i++)
        if (c->ws[i].w == w)
            return &c->ws[i];
    if (c->nws == WEIGHTS_MAX)
        return NULL;
    c->ws[c->nws] = (struct wstat){.w = w};
    return &c->ws[c->nws++];
}

const float *cpu_lstm_cache_find(struct cpu_lstm_cache **cp, const void *w, const void *b, const float *x, int64_t in,
                                 int64_t g, float **store, int *slot) {
    *store = NULL;
    *slot = -1;
    if (!*cp && !(*cp = calloc(1, sizeof **cp)))
        return NULL; /* no cache: every step computes its half */
    struct cpu_lstm_cache *c = *cp;
    struct wstat *s = wstat_of(c, w);
    if (!s || s->off)
        return NULL;
    s->lookups++;
    const uint64_t h = hash_x(w, b, x, in);
    size_t i = (size_t)h & (SLOTS - 1);
    for (; c->slot[i].x; i = (i + 1) & (SLOTS - 1)) {
        const struct entry *e = &c->slot[i];
        if (e->hash == h && e->w == w && e->b == b && e->in == in && e->g == g &&
            memcmp(e->x, x, (size_t)in * sizeof *x) == 0) {
            if (!e->ready)
                return NULL; /* another row of the same step computes it */
            s->hits++;
            return e->y;
        }
    }
    if (s->hits == 0 && s->lookups >= LOOKUPS_PROBE) {
        s->off = true;
        return NULL;
    }
    const size_t bytes = (size_t)(in + g) * sizeof(float);
    if (c->used >= SLOTS / 2 || c->bytes + bytes > CACHE_BYTES_MAX)
        return NULL;
    float *mem = malloc(bytes);
    if (!mem)
        return NULL;
    memcpy(mem, x, (size_t)in * sizeof *x);
    /* the slot is taken now; the step writes y and commits it (a step that fails leaves it never
     * ready: no hit, its memory kept until the backend goes) */
    c->slot[i] = (struct entry){.hash = h, .w = w, .b = b, .in = in, .g = g, .x = mem, .y = mem + in};
    c->used++;
    c->bytes += bytes;
    *store = mem + in;
    *slot = (int)i;
    return NULL;
}

void cpu_lstm_cache_commit(struct cpu_lstm_cache *c, int slot) {
    if (c && slot >= 0 && slot < SLOTS)
        c->slot[slot].ready = true;
}
