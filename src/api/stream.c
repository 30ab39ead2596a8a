/* stream.c — live transcription (vkasr_stream_*): pushed audio is queued under a lock, a worker thread
 * owned by the stream transcribes it with the session and calls the final and partial callbacks. A
 * cache-aware model advances its streaming session (asr/stream.h) one chunk at a time, each frame
 * computed once; any other model transcribes overlapping windows (asr_run) merged by word frames
 * (asr/merge.c). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "asr/merge.h"
#include "asr/stream.h"
#include "audio/audio.h"
#include "common/clock.h"

struct vkasr_stream {
    vkasr_session *session;
    vkasr_stream_params p;
    int64_t hop, left, right;        /* encoder frames                                               */
    int64_t frame_samples;           /* samples per encoder frame (1280 for Parakeet)               */
    double frame_s;                  /* seconds per encoder frame                                    */
    int prompt;                      /* the language prompt (api_language)                           */

    /* Shared between the pushing threads and the worker: under `lock`. */
    pthread_mutex_t lock;
    pthread_cond_t wake;             /* audio arrived, finish or cancel requested                    */
    struct audio_conv *conv;         /* created by the first push (its rate fixes the stream's)      */
    float *buf;                      /* 16 kHz samples [base, base + n)                               */
    size_t n, cap;
    int64_t base;
    int64_t keep_from;               /* samples before it are no longer needed (worker sets it)      */
    bool finishing;                  /* vkasr_stream_finish() was called                              */
    vkasr_status status;             /* the worker's failure (or VKASR_ABORTED); OK while running   */
    struct err err;                  /* its message                                                   */
    vkasr_stream_stats stats;
    atomic_bool cancel;

    pthread_t thread;
    pthread_mutex_t join_lock;       /* finish and free may race from several threads: one joins  */
    bool joined;

    /* A cache-aware model's stream (NULL: the window path), a member of its model's pools, which their
     * stepper thread feeds and steps (pools_round): cas and sout are the stepper's (under the pools'
     * lock); what it publishes for the worker is under `lock`. */
    struct stream_pools *pools;
    int pool_index;                  /* its pool: pools->pool[pool_index]                             */
    struct asr_stream *cas;
    struct asr_output sout;          /* the tokens of its last step, on the stepper                   */
    struct asr_output inbox;         /* under `lock`: tokens stepped, not yet taken by the worker     */
    int64_t need;                    /* under `lock`: the samples its next step needs (kicks the stepper) */
    int64_t fed;                     /* under `lock`: samples fed to cas; fed_last: the end among them */
    bool fed_last;
    int64_t cas_frames, cas_steps;   /* under `lock`: cas's frames and steps, as of the last publish   */
    bool cas_done;
    bool stepped;                    /* under `lock`: news for the worker (tokens, done or step_st)   */
    vkasr_status step_st;            /* under `lock`: a failed step's or feed's status and message     */
    struct err step_err;

    /* The worker's own state. */
    struct asr_output pend;          /* its tokens not yet delivered as final                         */
    struct merge_state merge;
    int64_t horizon;                 /* frames: the horizon of the last window                       */
    float *win;                      /* the window's samples                                          */
    size_t win_cap;
    bool seg_open;                   /* final words were delivered since the last segment end        */
    int64_t seg_start;               /* frame of the open segment's first word                        */
    int64_t last_end;                /* frame where the last final word ends                          */
    char *partial;                   /* the last partial text delivered                               */
    struct err werr;                 /* the worker's errors, copied to `err` under the lock           */
};

/* A late window takes at most this many hops: on a device slower than real time the stream falls
 * behind whatever it does, and windows must not grow with the backlog (attention is quadratic). */
#define MAX_CATCH_UP_HOPS 16

vkasr_stream_params vkasr_stream_params_default(void) {
    return (vkasr_stream_params){.struct_size = sizeof(vkasr_stream_params),
                                 .hop_seconds = 0.64,
                                 .left_context_seconds = 2.56,
                                 .right_context_seconds = 0.32,
                                 .catch_up = true};
}

/* ---- one window ---------------------------------------------------------------------------------- */

/* A window's hypothesis: tokens with stream frames, their words, and the merge's view of the words. */
struct window_hyp {
    struct asr_output out;
    struct transcript tr;
    int32_t *ids;                    /* token ids, contiguous (merge_word.ids points into it)         */
    struct merge_word *mw;
};

static void hyp_free(struct window_hyp *h) {
    asr_output_free(&h->out);
    transcript_free(&h->tr);
    free(h->ids);
    free(h->mw);
    memset(h, 0, sizeof *h);
}

static vkasr_status hyp_words(struct vkasr_stream *s, struct window_hyp *h, struct err *e) {
    const struct asr_model *am = s->session->model->am;
    TRY(transcript_build(&am->tok, &am->cfg, h->out.tokens, h->out.ntokens, &h->tr, e));
    h->ids = malloc((h->out.ntokens ? h->out.ntokens : 1) * sizeof *h->ids);
    h->mw = malloc((h->tr.nwords ? h->tr.nwords : 1) * sizeof *h->mw);
    if (!h->ids || !h->mw)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    for (size_t i = 0; i < h->out.ntokens; i++)
        h->ids[i] = h->out.tokens[i].id;
    for (size_t w = 0; w < h->tr.nwords; w++) {
        const vkasr_word *wd = &h->tr.words[w];
        const struct asr_token *t = h->out.tokens + wd->first_token;
        int64_t start = t[0].frame, end = start + 1;
        for (size_t k = 0; k < wd->n_tokens; k++) {
            int64_t e_k = t[k].frame + (t[k].duration > 1 ? t[k].duration : 1);
            end = e_k > end ? e_k : end;
        }
        h->mw[w] = (struct merge_word){start, end, h->ids + wd->first_token, wd->n_tokens};
    }
    return VKASR_OK;
}

/* The end of the tokens that go with the words before w1 (w1 > 0): word w1 - 1's, then the event tokens
 * after it up to the first end of utterance or backchannel, which ends the update (the later ones, with
 * no word before them, go on their own: deliver_leading_events). */
static size_t part_end(const struct vkasr_stream *s, const struct window_hyp *h, size_t w1) {
    const struct asr_model *am = s->session->model->am;
    size_t t1 = h->tr.words[w1 - 1].first_token + h->tr.words[w1 - 1].n_tokens;
    while (t1 < h->out.ntokens) {
        const int kind = transcript_event_kind(&am->tok, &am->cfg, h->out.tokens[t1].id);
        if (kind < 0)
            break;
        t1++;
        if (kind != VKASR_EVENT_LANGUAGE)
            break;
    }
    return t1;
}

/* The words [w0, w1) of the hypothesis rebuilt on their own: text, tokens and words; with the event tokens
 * after them (part_end), and for the first word those before it (a language tag). */
static vkasr_status build_part(const struct vkasr_stream *s, const struct window_hyp *h, size_t w0, size_t w1,
                               struct transcript *part, struct err *e) {
    const struct asr_model *am = s->session->model->am;
    size_t t0 = 0, t1 = 0;
    if (w1 > w0) {
        t0 = w0 == 0 ? 0 : h->tr.words[w0].first_token;
        t1 = part_end(s, h, w1);
    }
    /* a window without tokens has no token array (NULL): nothing to offset */
    return transcript_build(&am->tok, &am->cfg, t1 > t0 ? h->out.tokens + t0 : NULL, t1 - t0, part, e);
}

static void call(const struct vkasr_stream *s, vkasr_stream_callback cb, const struct transcript *part,
                 bool segment_end, double audio_end) {
    if (!cb)
        return;
    vkasr_stream_update u = {.text = part->text ? part->text : "",
                             .tokens = part->tokens,
                             .n_tokens = part->ntokens,
                             .words = part->words,
                             .n_words = part->nwords,
                             .segment_end = segment_end,
                             .audio_end = audio_end,
                             .events = part->events,
                             .n_events = part->nevents};
    /* a final end of utterance or backchannel ends its segment */
    for (size_t i = 0; cb == s->p.final_callback && i < part->nevents; i++)
        if (part->events[i].kind != VKASR_EVENT_LANGUAGE)
            u.segment_end = true;
    cb(&u, s->p.user_data);
}

/* Calls the final callback with the words [w0, w1). */
static vkasr_status deliver_final(struct vkasr_stream *s, const struct window_hyp *h, size_t w0, size_t w1,
                                  bool segment_end, double audio_end, struct err *e) {
    struct transcript part;
    TRY(build_part(s, h, w0, w1, &part, e));
    call(s, s->p.final_callback, &part, segment_end, audio_end);
    transcript_free(&part);
    return VKASR_OK;
}

/* Calls the partial callback with the tentative words [w0, n) when their text changed or `force`. */
static vkasr_status deliver_partial(struct vkasr_stream *s, const struct window_hyp *h, size_t w0, bool force,
                                    double audio_end, struct err *e) {
    struct transcript part;
    TRY(build_part(s, h, w0, h->tr.nwords, &part, e));
    const char *text = part.text ? part.text : "";
    vkasr_status st = VKASR_OK;
    if (force || strcmp(text, s->partial ? s->partial : "") != 0) {
        char *keep = strdup(text);
        if (!keep) {
            st = err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        } else {
            free(s->partial);
            s->partial = keep;
            call(s, s->p.partial_callback, &part, false, audio_end);
        }
    }
    transcript_free(&part);
    return st;
}

/* Delivers the words [w0, w1) that became final, split where segments end (transcript.h's rules: a
 * sentence end, a pause of TRANSCRIPT_SEGMENT_GAP_S before the next word, TRANSCRIPT_SEGMENT_MAX_S; and
 * an end of utterance). */
static vkasr_status deliver_finals(struct vkasr_stream *s, const struct window_hyp *h, size_t w0, size_t w1,
                                   int64_t horizon, bool last, double audio_end, struct err *e) {
    const struct asr_model *am = s->session->model->am;
    const struct merge_word *w = h->mw;
    size_t n = h->tr.nwords, a = w0;
    for (size_t k = w0; k < w1; k++) {
        if (s->seg_open && (double)(w[k].end - s->seg_start) * s->frame_s > TRANSCRIPT_SEGMENT_MAX_S) {
            /* word k would stretch the open segment too far: it ends before it */
            TRY(deliver_final(s, h, a, k, true, audio_end, e));
            a = k;
            s->seg_open = false;
        }
        if (!s->seg_open) {
            s->seg_open = true;
            s->seg_start = w[k].start;
        }
        s->last_end = w[k].end;
        /* the next word: a final one, else the first tentative one, else none seen before the horizon */
        int64_t next = k + 1 < n ? w[k + 1].start : horizon;
        bool close = transcript_ends_sentence(h->tr.words[k].text) ||
                     transcript_utterance_ends_after(&am->tok, &am->cfg, &h->tr, k) ||
                     (double)(next - w[k].end) * s->frame_s >= TRANSCRIPT_SEGMENT_GAP_S || (last && k + 1 == w1);
        if (!close && k + 1 < w1)
            continue;
        TRY(deliver_final(s, h, a, k + 1, close, audio_end, e));
        a = k + 1;
        if (close)
            s->seg_open = false;
    }
    if (w1 == w0 && s->seg_open) {
        /* Nothing new: the open segment ends when the pause after its last word has grown long enough. */
        int64_t next = w1 < n ? w[w1].start : horizon;
        if (last || (double)(next - s->last_end) * s->frame_s >= TRANSCRIPT_SEGMENT_GAP_S) {
            TRY(deliver_final(s, h, w0, w0, true, audio_end, e));
            s->seg_open = false;
        }
    }
    return VKASR_OK;
}

static bool window_should_abort(void *ud) { return atomic_load(&((struct vkasr_stream *)ud)->cancel); }

/* Transcribes s->win (n samples starting at stream frame w_start) and reports what it decided. */
static vkasr_status run_window(struct vkasr_stream *s, int64_t w_start, size_t n, int64_t horizon, bool last,
                               struct err *e) {
    const struct asr_model *am = s->session->model->am;
    struct window_hyp h = {0};
    struct asr_hooks hooks = {.should_abort = window_should_abort, .ud = s};
    /* windows are seconds long: the automatic attention (full) and the device's memory budget */
    struct asr_options opt = {.max_symbols = s->p.max_symbols_per_step, .attention = ASR_ATT_AUTO,
                              .host_decoder = s->session->host_decoder, .prompt = s->prompt};
    vkasr_status st = VKASR_OK;
    if (n > 0) /* the last window may hold no audio: it then only closes the open segment */
        st = asr_run(am, s->session->be, s->win, n, &opt, &hooks, &h.out, e);
    for (size_t i = 0; st == VKASR_OK && i < h.out.ntokens; i++)
        h.out.tokens[i].frame += w_start;
    if (st == VKASR_OK)
        st = hyp_words(s, &h, e);
    if (st == VKASR_OK) {
        struct merge_split sp;
        merge_window(&s->merge, h.mw, h.tr.nwords, horizon, last, &sp);
        double audio_end = (double)(w_start * s->frame_samples + (int64_t)n) / VKASR_SAMPLE_RATE;
        st = deliver_finals(s, &h, sp.first_new, sp.first_tentative, horizon, last, audio_end, e);
        if (st == VKASR_OK)
            st = deliver_partial(s, &h, sp.first_tentative, sp.first_tentative > sp.first_new, audio_end, e);
    }
    hyp_free(&h);
    return st;
}

/* ---- the worker ----------------------------------------------------------------------------------- */

/* The next window, decided under the lock: its horizon (frames) and whether it is the last one.
 * Returns false when there is nothing to do yet. */
static bool next_window(struct vkasr_stream *s, int64_t *horizon, bool *last) {
    int64_t total = s->base + (int64_t)s->n;         /* samples received                   */
    int64_t avail = total / s->frame_samples - s->right; /* horizons up to here are complete  */
    int64_t h = s->horizon + s->hop;
    if (h <= avail && (!s->finishing || !s->p.catch_up)) {
        if (s->p.catch_up) { /* take everything that arrived: the largest whole number of hops */
            int64_t hops = (avail - s->horizon) / s->hop;
            h = s->horizon + (hops < MAX_CATCH_UP_HOPS ? hops : MAX_CATCH_UP_HOPS) * s->hop;
        }
        *horizon = h;
        *last = false;
        return true;
    }
    if (s->finishing) {
        *horizon = (total + s->frame_samples - 1) / s->frame_samples;
        *last = true;
        return true;
    }
    return false;
}

static vkasr_status grow(float **p, size_t *cap, size_t need) {
    if (need <= *cap)
        return VKASR_OK;
    size_t c = *cap ? *cap : 16384;
    while (c < need)
        c *= 2;
    float *np = realloc(*p, c * sizeof *np);
    if (!np)
        return VKASR_ERR_NO_MEMORY;
    *p = np;
    *cap = c;
    return VKASR_OK;
}

/* ---- the cache-aware session ------------------------------------------------------------------ */

/* Removes the first n pending tokens (delivered). */
static void pend_drop(struct vkasr_stream *s, size_t n) {
    if (n == 0)
        return;
    memmove(s->pend.tokens, s->pend.tokens + n, (s->pend.ntokens - n) * sizeof *s->pend.tokens);
    s->pend.ntokens -= n;
}

/* The pending tokens' leading events (before any word), an update for each end of utterance or
 * backchannel (with the language tags before it): they end no word, so no later token changes them. */
static vkasr_status deliver_leading_events(struct vkasr_stream *s, double audio_end, struct err *e) {
    const struct asr_model *am = s->session->model->am;
    for (;;) {
        size_t n = 0;
        for (size_t t = 0; t < s->pend.ntokens && n == 0; t++) {
            const int kind = transcript_event_kind(&am->tok, &am->cfg, s->pend.tokens[t].id);
            if (kind < 0)
                break;
            if (kind != VKASR_EVENT_LANGUAGE)
                n = t + 1;
        }
        if (n == 0)
            return VKASR_OK;
        struct transcript part;
        TRY(transcript_build(&am->tok, &am->cfg, s->pend.tokens, n, &part, e));
        call(s, s->p.final_callback, &part, true, audio_end);
        transcript_free(&part);
        s->seg_open = false;
        pend_drop(s, n);
    }
}

/* Delivers the undelivered tokens that are complete and keeps the rest, so that the updates depend only
 * on the tokens, not on which steps they came in (one chunk or several caught up):
 * - an end of utterance or backchannel before any word goes at once, an update of its own;
 * - a word is complete once any token follows it (the next word's first, or an event, which ends its word);
 *   every one is when `last`; an end of utterance ends the update and the segment after its word;
 * - a language tag waits for the first word after it (build_part), or the end.
 * The open word goes to the partial callback. */
static vkasr_status deliver_cached(struct vkasr_stream *s, bool last, int64_t frames, double audio_end,
                                   struct err *e) {
    const struct asr_model *am = s->session->model->am;
    for (;;) {
        TRY(deliver_leading_events(s, audio_end, e));
        struct window_hyp h = {0};
        h.out = s->pend; /* borrowed: handed back below */
        vkasr_status st = hyp_words(s, &h, e);
        size_t nfinal = h.tr.nwords, drop = 0;
        bool more = false; /* an end of utterance cut the words: the rest in the next round */
        if (st == VKASR_OK && !last && nfinal > 0) {
            const vkasr_word *lw = &h.tr.words[nfinal - 1];
            if (lw->first_token + lw->n_tokens >= s->pend.ntokens)
                nfinal--; /* nothing after the last word yet: it may go on */
        }
        for (size_t k = 0; st == VKASR_OK && k < nfinal; k++)
            if (transcript_utterance_ends_after(&am->tok, &am->cfg, &h.tr, k)) {
                nfinal = k + 1;
                more = part_end(s, &h, nfinal) < s->pend.ntokens;
                break;
            }
        if (st == VKASR_OK && last && h.tr.nwords == 0 && h.tr.nevents > 0) {
            call(s, s->p.final_callback, &h.tr, true, audio_end); /* language tags that no word followed */
            s->seg_open = false;
            drop = s->pend.ntokens;
        } else if (st == VKASR_OK) {
            st = deliver_finals(s, &h, 0, nfinal, frames, last && !more, audio_end, e);
            drop = nfinal > 0 ? part_end(s, &h, nfinal) : last ? s->pend.ntokens : 0;
        }
        if (st == VKASR_OK && !more)
            st = deliver_partial(s, &h, nfinal, nfinal > 0, audio_end, e);
        if (st == VKASR_OK)
            pend_drop(s, drop);
        h.out = (struct asr_output){0};
        hyp_free(&h);
        if (st != VKASR_OK || !more)
            return st;
    }
}

#define STREAM_POOLS 16 /* pools per model (pool_add: of 1, 4, 16, ... slots) */

/* The cache-aware streams of one model advance together: their caches live in pools of slots
 * (asr/stream.h) on one backend of the model's device, made with the first stream and shared by every
 * later one (pools of 1, 4, 16, ... slots, a new one when all are full). One stepper thread per model
 * owns that backend: in rounds (pools_round) it takes each stream's audio once its next chunk has
 * arrived (mel frames, subsampling and every layer are the step's, on the device), steps each pool
 * over its streams whose chunks wait, and hands each stream its tokens; the streams' workers only
 * deliver them (callbacks on their own threads). Pushes never wait for a step: a stream's lock is held
 * for copies only, and the stepper is kicked through a lock of its own. */
struct stream_pools {
    /* under the model's pools_lock, which the stepper holds while it feeds and steps */
    struct backend *be;
    struct asr_stream_pool *pool[STREAM_POOLS];
    int npool;
    struct vkasr_stream **member;    /* the streams, any pool                                         */
    size_t nmember, capmember;
    uint64_t steps, rows;            /* the steps run and the streams they advanced (vkasr_debug.h)   */
    double step_ms;
    double waiting_since[STREAM_POOLS]; /* clock_ms() since a chunk of the pool waits (0: none)      */
    double last_ms[STREAM_POOLS];    /* the time of each pool's last step                             */
    double round_start;              /* clock_ms() at the last round's start                          */
    double gather_ms;                /* a waiting chunk waits at most this long for others (pools_round) */
    /* the stepper: kicked under kick_lock (a stream's next chunk arrived, or its end) */
    pthread_t stepper;
    bool started;
    pthread_mutex_t kick_lock;
    pthread_cond_t kick;             /* on CLOCK_MONOTONIC                                            */
    bool kicked, stop;
};

static void pools_kick(struct stream_pools *sp) {
    pthread_mutex_lock(&sp->kick_lock);
    sp->kicked = true;
    pthread_cond_signal(&sp->kick);
    pthread_mutex_unlock(&sp->kick_lock);
}

void api_stream_pools_free(vkasr_model *m) {
    struct stream_pools *sp = m->pools;
    if (!sp)
        return;
    if (sp->started) {
        pthread_mutex_lock(&sp->kick_lock);
        sp->stop = true;
        pthread_cond_signal(&sp->kick);
        pthread_mutex_unlock(&sp->kick_lock);
        pthread_join(sp->stepper, NULL);
    }
    for (int i = sp->npool - 1; i >= 0; i--) /* the scratch stack: the last made first */
        asr_stream_pool_free(sp->pool[i]);
    be_backend_destroy(sp->be);
    pthread_cond_destroy(&sp->kick);
    pthread_mutex_destroy(&sp->kick_lock);
    free(sp->member);
    free(sp);
    m->pools = NULL;
}

vkasr_status vkasr_model_stream_steps(vkasr_model *m, vkasr_stream_steps *out) {
    if (!m || !out)
        return VKASR_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    const struct model_config *c = &m->am->cfg;
    if (c->n_ctx == 0)
        return VKASR_OK;
    struct asr_stream_geometry g;
    struct err e = {0};
    TRY(asr_stream_geometry(c, &g, &e));
    out->cache_aware = true;
    out->chunk_frames = (int)g.chunk;
    out->frame_samples = c->sub_factor * c->hop_length;
    /* asr_stream_samples_needed of step 0, which ends at frame `chunk` (every later step adds a chunk
     * of frames and as many samples) */
    out->need_offset = (int)(c->hop_length * (g.mel_first - 1) + c->n_fft / 2 - out->frame_samples * (g.chunk - 1));
    pthread_mutex_lock(&m->pools_lock);
    if (m->pools) {
        out->steps = m->pools->steps;
        out->rows = m->pools->rows;
        out->step_seconds = m->pools->step_ms * 1e-3;
    }
    pthread_mutex_unlock(&m->pools_lock);
    return VKASR_OK;
}

vkasr_status vkasr_model_stream_profile(vkasr_model *m, vkasr_op_profile *out, size_t capacity, size_t *count) {
    if (!m || !count)
        return VKASR_ERR_INVALID_ARG;
    *count = 0;
    pthread_mutex_lock(&m->pools_lock); /* the stepper records into the pools' backend under it */
    struct stream_pools *sp = m->pools;
    if (sp) {
        *count = api_profile_copy(sp->be, out, capacity);
        sp->be->vt->profile_reset(sp->be);
    }
    pthread_mutex_unlock(&m->pools_lock);
    return VKASR_OK;
}

static void *stepper_main(void *arg);

/* The model's pools and their stepper, made with its first cache-aware stream (the pools' lock held). */
static vkasr_status pools_create(vkasr_model *m, struct err *e) {
    struct stream_pools *sp = calloc(1, sizeof *sp);
    if (!sp)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
    struct asr_stream_geometry g;
    vkasr_status st = asr_stream_geometry(&m->am->cfg, &g, e);
    if (st == VKASR_OK)
        st = be_backend_create(m->dev, &sp->be, e);
    if (st != VKASR_OK) {
        free(sp);
        return st;
    }
    /* an eighth of a chunk's period: 20 ms at 160 ms of lookahead */
    const struct model_config *c = &m->am->cfg;
    sp->gather_ms = 1000.0 * (double)(g.chunk * c->sub_factor * c->hop_length) / VKASR_SAMPLE_RATE / 8.0;
    pthread_condattr_t ca;
    bool ok = pthread_condattr_init(&ca) == 0;
    bool cond = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&sp->kick, &ca) == 0;
    if (ok)
        pthread_condattr_destroy(&ca);
    bool mutex = cond && pthread_mutex_init(&sp->kick_lock, NULL) == 0;
    m->pools = sp;
    sp->started = mutex && pthread_create(&sp->stepper, NULL, stepper_main, m) == 0;
    if (!sp->started) {
        if (mutex)
            pthread_mutex_destroy(&sp->kick_lock);
        if (cond)
            pthread_cond_destroy(&sp->kick);
        be_backend_destroy(sp->be);
        free(sp);
        m->pools = NULL;
        return err_set(e, VKASR_ERR_NO_MEMORY, "live stream: cannot start the model's stream stepper thread");
    }
    return VKASR_OK;
}

/* The slots of the model's next pool without a plan: 1, 4, then 4x the last. */
static int64_t pool_slots_default(const struct stream_pools *sp) {
    return sp->npool == 0 ? 1 : sp->npool == 1 ? 4 : 4 * asr_stream_pool_slots(sp->pool[sp->npool - 1]);
}

/* Makes the model's next pool (the pools' lock held): its second pool holds the streams the model was
 * told to plan for (vkasr_model_params.stream_slots) but one, where they fit; else the default size. */
static vkasr_status pool_add(vkasr_model *m, struct stream_pools *sp, struct err *e) {
    const int64_t dflt = pool_slots_default(sp);
    const int64_t planned = sp->npool == 1 && m->stream_slots - 1 > dflt ? m->stream_slots - 1 : dflt;
    vkasr_status st = asr_stream_pool_create(m->am, sp->be, planned, 0, &sp->pool[sp->npool], e);
    if (st == VKASR_ERR_DEVICE_MEMORY && planned > dflt) {
        LOG_WARN(&m->log, "live streams: the caches of %lld planned streams do not fit the device (%s): pools of "
                 "%lld, then 4x, as streams arrive", (long long)m->stream_slots, e->msg, (long long)dflt);
        *e = (struct err){0};
        st = asr_stream_pool_create(m->am, sp->be, dflt, 0, &sp->pool[sp->npool], e);
    }
    if (st == VKASR_OK)
        sp->npool++;
    return st;
}

/* Joins s to a pool of its model (the pools' lock held). */
static vkasr_status pools_join(struct vkasr_stream *s, struct err *e) {
    vkasr_model *m = s->session->model;
    if (!m->pools)
        TRY(pools_create(m, e));
    struct stream_pools *sp = m->pools;
    if (sp->nmember == sp->capmember) {
        size_t cap = sp->capmember ? 2 * sp->capmember : 16;
        struct vkasr_stream **nm = realloc(sp->member, cap * sizeof *nm);
        if (!nm)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        sp->member = nm;
        sp->capmember = cap;
    }
    int i = 0;
    while (i < sp->npool && asr_stream_pool_free_slots(sp->pool[i]) == 0)
        i++;
    if (i == sp->npool) {
        if (sp->npool == STREAM_POOLS)
            return err_set(e, VKASR_ERR_DEVICE_MEMORY, "live stream: the model's stream pools are full");
        TRY(pool_add(m, sp, e));
    }
    struct asr_stream_opts o = {.max_symbols = s->p.max_symbols_per_step, .prompt = s->prompt};
    TRY(asr_stream_create(sp->pool[i], &o, &s->cas, e));
    s->pools = sp;
    s->pool_index = i;
    s->need = asr_stream_samples_needed(s->cas);
    sp->member[sp->nmember++] = s;
    return VKASR_OK;
}

/* Takes s out of its pool (the pools' lock held). */
static void pools_leave(struct vkasr_stream *s) {
    struct stream_pools *sp = s->pools;
    for (size_t i = 0; sp && i < sp->nmember; i++)
        if (sp->member[i] == s) {
            sp->member[i] = sp->member[--sp->nmember];
            break;
        }
    asr_stream_free(s->cas);
    s->cas = NULL;
}

/* Appends from's tokens to to's and empties from. */
static vkasr_status tokens_move(struct asr_output *to, struct asr_output *from, struct err *e) {
    if (from->ntokens == 0)
        return VKASR_OK;
    if (to->ntokens + from->ntokens > to->captokens) {
        size_t cap = 2 * (to->ntokens + from->ntokens);
        struct asr_token *nt = realloc(to->tokens, cap * sizeof *nt);
        if (!nt)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of host memory");
        to->tokens = nt;
        to->captokens = cap;
    }
    memcpy(to->tokens + to->ntokens, from->tokens, from->ntokens * sizeof *from->tokens);
    to->ntokens += from->ntokens;
    from->ntokens = 0;
    return VKASR_OK;
}

/* Whether the stepper still feeds and steps o (o's lock held). */
static bool member_live(const struct vkasr_stream *o) {
    return o->status == VKASR_OK && o->step_st == VKASR_OK && !atomic_load(&o->cancel);
}

/* What o's worker and pushes read of its session, after a feed or step (o's lock held); st: the step's
 * or feed's status. */
static void member_publish(struct vkasr_stream *o, vkasr_status st, const struct err *e) {
    struct err me = {0};
    if (st == VKASR_OK)
        st = tokens_move(&o->inbox, &o->sout, &me);
    else
        me = *e;
    if (st != VKASR_OK && o->step_st == VKASR_OK) { /* the first failure is the one reported */
        o->step_st = st;
        o->step_err = me;
    }
    o->cas_frames = asr_stream_frames(o->cas);
    o->cas_steps = asr_stream_steps(o->cas);
    o->cas_done = asr_stream_done(o->cas);
    o->need = asr_stream_samples_needed(o->cas);
    const int64_t keep = asr_stream_keep_from(o->cas); /* pushes drop the samples before it */
    if (keep > o->keep_from)
        o->keep_from = keep;
    o->stepped = true;
    pthread_cond_signal(&o->wake);
}

/* Feeds o's audio to its session once its next chunk, or its end, has arrived (the pools' lock held).
 * Returns whether o now waits for a step; *live: whether it is live and not done. */
static bool member_feed(struct vkasr_stream *o, bool *live) {
    pthread_mutex_lock(&o->lock);
    const int64_t total = o->base + (int64_t)o->n;
    const bool last = o->finishing;
    if (member_live(o) && !o->fed_last && (last || (total > o->fed && total >= asr_stream_samples_needed(o->cas)))) {
        int64_t from = asr_stream_keep_from(o->cas);
        if (from < o->base) /* cannot happen: keep_from trails the session; stay safe */
            from = o->base;
        struct err e = {0};
        vkasr_status st = asr_stream_feed(o->cas, o->buf + (from - o->base), from, total, last, &e);
        o->fed = total;
        o->fed_last = last;
        if (st != VKASR_OK || asr_stream_done(o->cas)) /* a failure, or the end with nothing left to step */
            member_publish(o, st, &e);
    }
    *live = member_live(o) && !asr_stream_done(o->cas);
    const bool waits = *live && asr_stream_ready(o->cas);
    pthread_mutex_unlock(&o->lock);
    return waits;
}

/* One step of pool i over every stream of it whose chunk waits (the pools' lock held); each stream gets
 * its tokens, its share of the step's time and a wake-up. */
static void pools_step(struct stream_pools *sp, int i) {
    struct asr_stream **ready = malloc(sp->nmember * sizeof *ready);
    struct asr_output **out = malloc(sp->nmember * sizeof *out);
    struct vkasr_stream **who = malloc(sp->nmember * sizeof *who);
    struct err e = {0};
    vkasr_status st = ready && out && who ? VKASR_OK : err_set(&e, VKASR_ERR_NO_MEMORY, "out of host memory");
    int64_t n = 0;
    for (size_t k = 0; st == VKASR_OK && k < sp->nmember; k++) {
        struct vkasr_stream *o = sp->member[k];
        if (o->pool_index != i)
            continue;
        pthread_mutex_lock(&o->lock);
        const bool live = member_live(o);
        pthread_mutex_unlock(&o->lock);
        if (live && asr_stream_ready(o->cas)) {
            ready[n] = o->cas;
            out[n] = &o->sout;
            who[n++] = o;
        }
    }
    double ms = 0;
    if (st == VKASR_OK && n > 0) {
        const double t0 = clock_ms();
        st = asr_stream_step(sp->pool[i], ready, n, out, &e);
        ms = clock_ms() - t0;
        sp->step_ms += ms;
        sp->steps++;
        sp->rows += (uint64_t)n;
    }
    for (int64_t k = 0; k < n; k++) {
        struct vkasr_stream *o = who[k];
        pthread_mutex_lock(&o->lock);
        o->stats.compute_seconds += 1e-3 * ms / (double)n;
        member_publish(o, st, &e);
        pthread_mutex_unlock(&o->lock);
    }
    if (st != VKASR_OK && n == 0) /* no memory for the lists: every stream of the pool fails */
        for (size_t k = 0; k < sp->nmember; k++)
            if (sp->member[k]->pool_index == i) {
                pthread_mutex_lock(&sp->member[k]->lock);
                member_publish(sp->member[k], st, &e);
                pthread_mutex_unlock(&sp->member[k]->lock);
            }
    free(ready);
    free(out);
    free(who);
}

/* One round of the stepper (the pools' lock held): every stream's arrived chunk fed, then a step of each
 * pool that is due. Dynamic batching: a pool steps at once when every live stream of it waits (one
 * stream alone: at once), else once its first waiting chunk has waited as long as the pool's last step
 * took, at most gather_ms, so that a step takes every chunk that arrived meanwhile. A step's time is
 * mostly fixed (small products, one dispatch each, the decoder's round trips), so steps of whatever
 * arrived during the one before stay at one or two streams and cannot keep up with many streams;
 * waiting one step's time for company at most doubles a chunk's wait where steps are cheap (a few
 * streams: no batching to gain), and while the device is busier than gather_ms, rounds follow each
 * other and each step takes what arrived during the last round. A chunk first seen waiting has waited
 * since the last round's start (it came during that round's steps), or since now when the stepper
 * slept before this round (a push woke it). Returns the milliseconds until a pool is due, 0 for now, -1
 * for none waiting. */
static double pools_round(struct stream_pools *sp, bool slept) {
    int waiting[STREAM_POOLS] = {0}, live[STREAM_POOLS] = {0};
    double now = clock_ms();
    const double since = slept || sp->round_start == 0 ? now : sp->round_start;
    sp->round_start = now;
    for (size_t k = 0; k < sp->nmember; k++) {
        struct vkasr_stream *o = sp->member[k];
        bool alive = false;
        waiting[o->pool_index] += member_feed(o, &alive);
        live[o->pool_index] += alive;
    }
    double next = -1;
    for (int i = 0; i < sp->npool; i++) {
        if (waiting[i] == 0) {
            sp->waiting_since[i] = 0;
            continue;
        }
        if (sp->waiting_since[i] == 0)
            sp->waiting_since[i] = since;
        const double wait = sp->last_ms[i] < sp->gather_ms ? sp->last_ms[i] : sp->gather_ms;
        const double due = waiting[i] >= live[i] ? 0 : sp->waiting_since[i] + wait - now;
        if (due > 0) {
            next = next < 0 || due < next ? due : next;
            continue;
        }
        const double t0 = clock_ms();
        pools_step(sp, i);
        now = clock_ms();
        sp->last_ms[i] = now - t0;
        /* streams with more chunks waiting (a backlog) have waited since this step at least */
        sp->waiting_since[i] = 0;
        for (size_t k = 0; k < sp->nmember && sp->waiting_since[i] == 0; k++) {
            struct vkasr_stream *o = sp->member[k];
            if (o->pool_index == i && asr_stream_ready(o->cas)) {
                pthread_mutex_lock(&o->lock);
                if (member_live(o))
                    sp->waiting_since[i] = t0;
                pthread_mutex_unlock(&o->lock);
            }
        }
        if (sp->waiting_since[i] != 0)
            next = 0;
    }
    return next;
}

/* The stepper thread: rounds while chunks wait, else sleeps until a kick or a pool's gather time. */
static void *stepper_main(void *arg) {
    vkasr_model *m = arg;
    pthread_mutex_lock(&m->pools_lock);
    struct stream_pools *sp = m->pools;
    pthread_mutex_unlock(&m->pools_lock);
    for (bool slept = true;;) {
        pthread_mutex_lock(&m->pools_lock);
        const double wait_ms = pools_round(sp, slept);
        pthread_mutex_unlock(&m->pools_lock);
        pthread_mutex_lock(&sp->kick_lock);
        slept = !sp->kicked && wait_ms != 0;
        if (wait_ms > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            const double ns = (double)ts.tv_nsec + wait_ms * 1e6;
            ts.tv_sec += (time_t)(ns / 1e9);
            ts.tv_nsec = (long)fmod(ns, 1e9);
            while (!sp->kicked && !sp->stop && pthread_cond_timedwait(&sp->kick, &sp->kick_lock, &ts) == 0) {
            }
        } else if (wait_ms < 0) {
            while (!sp->kicked && !sp->stop)
                pthread_cond_wait(&sp->kick, &sp->kick_lock);
        }
        const bool stop = sp->stop;
        sp->kicked = false;
        pthread_mutex_unlock(&sp->kick_lock);
        if (stop)
            return NULL;
    }
}

/* The worker of a cache-aware stream: delivers the words of the tokens the stepper hands it. */
static void cached_worker(struct vkasr_stream *s) {
    for (;;) {
        while (s->status == VKASR_OK && !atomic_load(&s->cancel) && !s->stepped)
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->status != VKASR_OK || atomic_load(&s->cancel))
            break;
        s->stepped = false;
        vkasr_status st = s->step_st;
        if (st != VKASR_OK)
            s->werr = s->step_err;
        const bool news = s->inbox.ntokens > 0;
        if (st == VKASR_OK)
            st = tokens_move(&s->pend, &s->inbox, &s->werr);
        const int64_t frames = s->cas_frames, steps = s->cas_steps, total = s->fed;
        const bool last = s->fed_last, done = s->cas_done;
        pthread_mutex_unlock(&s->lock);
        if (st == VKASR_OK && (news || (last && done)))
            st = deliver_cached(s, last && done, frames, (double)total / VKASR_SAMPLE_RATE, &s->werr);
        pthread_mutex_lock(&s->lock);
        s->stats.windows = (uint64_t)steps;
        s->stats.window_seconds = (double)frames * s->frame_s;
        s->stats.final_seconds = last && done ? (double)total / VKASR_SAMPLE_RATE : (double)frames * s->frame_s;
        if (st != VKASR_OK) {
            s->status = st;
            s->err = s->werr;
            break;
        }
        if (last && done)
            break;
    }
}

static void *worker_main(void *arg) {
    struct vkasr_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    if (s->cas)
        cached_worker(s);
    for (; !s->cas;) {
        int64_t horizon = 0;
        bool last = false;
        while (s->status == VKASR_OK && !atomic_load(&s->cancel) && !next_window(s, &horizon, &last))
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->status != VKASR_OK || atomic_load(&s->cancel))
            break;
        /* The window: left context before the cut, up to the horizon plus the right context. Early
         * windows are shorter: NeMo pads its first buffers with zeros instead, which made the default
         * model mishear short utterances (digital silence is a signal it never heard). */
        int64_t cut = merge_cut(&s->merge);
        int64_t w_start = cut - s->left > 0 ? cut - s->left : 0;
        int64_t total = s->base + (int64_t)s->n;
        int64_t from = w_start * s->frame_samples;
        int64_t to = last ? total : (horizon + s->right) * s->frame_samples;
        if (from < s->base) /* cannot happen: keep_from trails the cut; stay safe */
            from = s->base;
        if (to < from)
            to = from;
        size_t n = (size_t)(to - from);
        vkasr_status st = grow(&s->win, &s->win_cap, n ? n : 1);
        if (st == VKASR_OK && n)
            memcpy(s->win, s->buf + (from - s->base), n * sizeof *s->win);
        pthread_mutex_unlock(&s->lock);

        const double t0 = clock_ms();
        if (st != VKASR_OK)
            err_set(&s->werr, st, "live stream: out of host memory for a window of %zu samples", n);
        else
            st = run_window(s, w_start, n, horizon, last, &s->werr);
        const double dt = (clock_ms() - t0) * 1e-3; /* seconds */

        pthread_mutex_lock(&s->lock);
        s->horizon = horizon;
        s->stats.windows++;
        s->stats.window_seconds += (double)n / VKASR_SAMPLE_RATE;
        s->stats.compute_seconds += dt;
        int64_t new_cut = merge_cut(&s->merge);
        s->stats.final_seconds = last ? (double)total / VKASR_SAMPLE_RATE : (double)new_cut * s->frame_s;
        /* audio before the next window's left context is no longer needed */
        int64_t keep = (new_cut - s->left) * s->frame_samples;
        if (keep > s->keep_from)
            s->keep_from = keep;
        if (st != VKASR_OK) {
            s->status = st;
            s->err = s->werr;
            if (st == VKASR_ABORTED)
                err_set(&s->err, VKASR_ABORTED, "live stream cancelled");
            break;
        }
        if (last)
            break;
    }
    if (s->status == VKASR_OK && atomic_load(&s->cancel)) {
        s->status = VKASR_ABORTED;
        err_set(&s->err, VKASR_ABORTED, "live stream cancelled");
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- the public calls ----------------------------------------------------------------------------- */

/* Gives a cache-aware stream's slot back. */
static void leave(struct vkasr_stream *s) {
    if (!s->cas)
        return;
    pthread_mutex_lock(&s->session->model->pools_lock);
    pools_leave(s);
    pthread_mutex_unlock(&s->session->model->pools_lock);
}

static vkasr_status fail_create(struct err *e, vkasr_error *error, vkasr_status st) {
    err_export(e, error);
    return st;
}

vkasr_status vkasr_stream_create(vkasr_session *session, const vkasr_stream_params *params, vkasr_stream **out,
                                 vkasr_error *error) {
    struct err e = {0};
    if (out)
        *out = NULL;
    if (!session || !out)
        return fail_create(&e, error,
                           err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_stream_create: session and out_stream must not be NULL"));
    if (session->stream)
        return fail_create(&e, error, err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_stream_create: the session already has a stream"));
    vkasr_stream_params p;
    READ_PARAMS(p, params, vkasr_stream_params_default());
    const struct model_config *c = &session->model->am->cfg;
    int64_t frame_samples = (int64_t)c->sub_factor * c->hop_length;
    double frame_s = (double)frame_samples / c->sample_rate;
    if (!(p.hop_seconds >= frame_s * 0.5 && p.hop_seconds <= 3600) ||
        !(p.left_context_seconds >= frame_s * 0.5 && p.left_context_seconds <= 3600) ||
        !(p.right_context_seconds >= frame_s * 0.5 && p.right_context_seconds <= 3600))
        return fail_create(&e, error,
                           err_set(&e, VKASR_ERR_INVALID_ARG,
                                   "vkasr_stream_create: hop %g s, left context %g s, right context %g s: each must be "
                                   "at least one encoder frame (%g s) and at most an hour",
                                   p.hop_seconds, p.left_context_seconds, p.right_context_seconds, frame_s));
    int prompt = 0;
    if (api_language(session->model->am, p.language, &prompt, &e) != VKASR_OK)
        return fail_create(&e, error, e.code);
    p.language = NULL; /* resolved: the caller's string need not outlive this call */
    struct vkasr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return fail_create(&e, error, err_set(&e, VKASR_ERR_NO_MEMORY, "out of host memory"));
    s->session = session;
    s->p = p;
    s->prompt = prompt;
    s->frame_samples = frame_samples;
    s->frame_s = frame_s;
    s->hop = (int64_t)llround(p.hop_seconds / frame_s);
    s->left = (int64_t)llround(p.left_context_seconds / frame_s);
    s->right = (int64_t)llround(p.right_context_seconds / frame_s);
    merge_init(&s->merge);
    atomic_init(&s->cancel, false);
    /* the locks first: once a member of its pools, the stepper thread may take the stream's lock */
    vkasr_status st = VKASR_OK;
    int made = 0;
    if (pthread_mutex_init(&s->lock, NULL) == 0)
        made++;
    if (made == 1 && pthread_cond_init(&s->wake, NULL) == 0)
        made++;
    if (made == 2 && pthread_mutex_init(&s->join_lock, NULL) == 0)
        made++;
    if (made < 3)
        st = err_set(&e, VKASR_ERR_NO_MEMORY, "live stream: cannot create a mutex or condition variable");
    if (st == VKASR_OK && c->n_ctx > 0) { /* a cache-aware model: a slot in its pools, each frame computed once */
        pthread_mutex_lock(&session->model->pools_lock);
        st = pools_join(s, &e);
        pthread_mutex_unlock(&session->model->pools_lock);
    }
    if (st == VKASR_OK && pthread_create(&s->thread, NULL, worker_main, s) != 0) {
        leave(s);
        st = err_set(&e, VKASR_ERR_NO_MEMORY, "live stream: cannot start its worker thread");
    }
    if (st != VKASR_OK) {
        if (made > 2)
            pthread_mutex_destroy(&s->join_lock);
        if (made > 1)
            pthread_cond_destroy(&s->wake);
        if (made > 0)
            pthread_mutex_destroy(&s->lock);
        free(s);
        return fail_create(&e, error, st);
    }
    session->stream = s;
    *out = s;
    err_export(&e, error);
    return VKASR_OK;
}

/* Moves the converter's output into the queue and drops audio no window needs any more. Under the lock. */
static vkasr_status take_converted(struct vkasr_stream *s, struct err *e) {
    size_t m = 0;
    const float *x = audio_conv_output(s->conv, &m);
    if (s->keep_from > s->base && s->keep_from - s->base >= (int64_t)(s->n / 2)) {
        size_t drop = (size_t)(s->keep_from - s->base) < s->n ? (size_t)(s->keep_from - s->base) : s->n;
        memmove(s->buf, s->buf + drop, (s->n - drop) * sizeof *s->buf);
        s->n -= drop;
        s->base += (int64_t)drop;
    }
    if (grow(&s->buf, &s->cap, s->n + m) != VKASR_OK)
        return err_set(e, VKASR_ERR_NO_MEMORY, "live stream: out of host memory for %zu queued samples", s->n + m);
    if (m)
        memcpy(s->buf + s->n, x, m * sizeof *x);
    s->n += m;
    s->stats.audio_seconds = (double)(s->base + (int64_t)s->n) / VKASR_SAMPLE_RATE;
    audio_conv_consume(s->conv);
    return VKASR_OK;
}

vkasr_status vkasr_stream_push(vkasr_stream *s, const float *samples, size_t n, int sample_rate) {
    if (!s)
        return VKASR_ERR_INVALID_ARG;
    pthread_mutex_lock(&s->lock);
    vkasr_status st = s->status;
    struct err e = {0};
    if (st == VKASR_OK && atomic_load(&s->cancel))
        st = VKASR_ABORTED;
    else if (st == VKASR_OK && s->finishing)
        st = VKASR_ERR_INVALID_ARG; /* a caller's mistake: the stream itself is fine, no message kept */
    else if (st == VKASR_OK && ((!samples && n) || sample_rate <= 0))
        st = VKASR_ERR_INVALID_ARG;
    else if (st == VKASR_OK && s->conv && audio_conv_source_rate(s->conv) != sample_rate)
        st = VKASR_ERR_INVALID_ARG;
    for (size_t i = 0; st == VKASR_OK && i < n; i++) /* all or nothing: a bad sample rejects the push */
        if (!isfinite(samples[i]))
            st = VKASR_ERR_AUDIO;
    if (st == VKASR_OK && !s->conv)
        st = audio_conv_create("live stream", sample_rate, 1, VKASR_SAMPLE_RATE, &s->conv, &e);
    if (st == VKASR_OK && n)
        st = audio_conv_push(s->conv, samples, n, &e);
    if (st == VKASR_OK)
        st = take_converted(s, &e);
    /* A failed push (its status says why) leaves the stream going on with what it had. */
    pthread_cond_signal(&s->wake);
    const bool kick = s->pools && s->base + (int64_t)s->n >= s->need;
    pthread_mutex_unlock(&s->lock);
    if (kick)
        pools_kick(s->pools);
    return st;
}

static bool on_worker(const struct vkasr_stream *s) { return pthread_equal(pthread_self(), s->thread); }

static void join_worker(struct vkasr_stream *s) {
    pthread_mutex_lock(&s->join_lock);
    if (!s->joined) {
        pthread_join(s->thread, NULL);
        s->joined = true;
    }
    pthread_mutex_unlock(&s->join_lock);
}

vkasr_status vkasr_stream_finish(vkasr_stream *s) {
    if (!s || on_worker(s))
        return VKASR_ERR_INVALID_ARG;
    pthread_mutex_lock(&s->lock);
    if (!s->finishing && s->status == VKASR_OK && s->conv) {
        struct err e = {0};
        vkasr_status st = audio_conv_drain(s->conv, &e);
        if (st == VKASR_OK)
            st = take_converted(s, &e);
        if (st != VKASR_OK && s->status == VKASR_OK) {
            s->status = st;
            s->err = e;
        }
    }
    s->finishing = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (s->pools)
        pools_kick(s->pools);
    join_worker(s);
    return s->status;
}

void vkasr_stream_cancel(vkasr_stream *s) {
    if (!s)
        return;
    atomic_store(&s->cancel, true);
    pthread_mutex_lock(&s->lock);
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

vkasr_status vkasr_stream_get_stats(vkasr_stream *s, vkasr_stream_stats *out) {
    if (!s || !out)
        return VKASR_ERR_INVALID_ARG;
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->lock);
    return VKASR_OK;
}

const char *vkasr_stream_last_error(vkasr_stream *s) { return s ? s->err.msg : "no stream"; }

void vkasr_stream_free(vkasr_stream *s) {
    if (!s || on_worker(s))
        return;
    vkasr_stream_cancel(s);
    join_worker(s);
    s->session->stream = NULL;
    leave(s);
    asr_output_free(&s->pend);
    asr_output_free(&s->sout);
    asr_output_free(&s->inbox);
    audio_conv_free(s->conv);
    pthread_mutex_destroy(&s->join_lock);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->buf);
    free(s->win);
    free(s->partial);
    free(s);
}
