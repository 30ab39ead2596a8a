/* test_stream_cache.c — the cache-aware streaming session against the offline chunked run's
 * independent reference (tests/data/streaming: a float64 PyTorch model written from NeMo's source):
 * - the session (asr/stream.h) fed the clip in odd pieces: every encoder frame but the last R+1 within
 *   ENC_TOL relative error of encoder.npy, the tokens equal to tokens.json;
 * - the public stream API (vkasr_stream_*) fed the clip in odd pushes: the final updates' tokens,
 *   concatenated, equal tokens.json;
 * - many streams in one pool of 3 slots, joining at different steps, fed pieces of different sizes and
 *   stepped together, a fourth joining in the slot of the first to leave: each stream's tokens equal
 *   tokens.json and its frames are within ENC_TOL of encoder.npy, as alone; again in a pool of 17
 *   slots, whose products take no matvec hint;
 * - four public streams of the model on their own sessions and threads (sharing the model's pools of
 *   1 and 19 slots: stream_slots 20), the fourth joining after the first finished: each stream's final
 *   tokens equal tokens.json.
 * A language-prompt model (LANG1 for EXPECTED_DIR, LANG2 for EXPECTED_DIR2): only the many streams in
 * one pool, streams 1 and 3 in LANG2, so that a step's streams in slot order are runs of one language
 * (each run's rows fused with its language at once); each stream equal to its language's fixtures.
 * usage: test_stream_cache MODEL CLIPS_DIR EXPECTED_DIR LOOKAHEAD_MS ENC_TOL [LANG1 LANG2 EXPECTED_DIR2] */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/api.h"
#include "asr/stream.h"
#include "fixture_io.h"
#include "validation_log.h"

static int failures;

static void fail(const char *clip, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *clip, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", clip);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

static void compare_ids(const char *clip, const char *what, const int32_t *got, size_t ng, const int32_t *want,
                        size_t nw) {
    size_t same = 0;
    while (same < ng && same < nw && got[same] == want[same])
        same++;
    if (ng != nw || same != nw)
        fail(clip, "%s: %zu tokens, %zu expected, the first %zu equal", what, ng, nw, same);
}

/* Pieces of these many samples, in turn: odd sizes, none a multiple of the hop or of a chunk. */
static const size_t piece[] = {1, 999, 2731, 160, 4097, 37, 12800, 5, 3333};
#define NPIECE (sizeof piece / sizeof *piece)

/* The session alone: encoder frames and tokens. */
static void session_run(vkasr_session *vs, const char *clip, const float *x, size_t n, const float *enc, size_t er,
                        size_t ec, const int32_t *want, size_t nw, double tol) {
    const struct asr_model *am = vs->model->am;
    struct asr_stream_pool *pool = NULL;
    struct asr_stream *st = NULL;
    struct err e = {0};
    struct asr_output out = {0};
    struct asr_stream_geometry g;
    if (asr_stream_geometry(&am->cfg, &g, &e) != VKASR_OK ||
        asr_stream_pool_create(am, vs->be, 1, 0, &pool, &e) != VKASR_OK ||
        asr_stream_create(pool, &(struct asr_stream_opts){.keep_encoder = true}, &st, &e) != VKASR_OK) {
        fail(clip, "session: %s", e.msg);
        asr_stream_pool_free(pool);
        return;
    }
    size_t at = 0;
    vkasr_status s = VKASR_OK;
    for (size_t k = 0; s == VKASR_OK && at < n; k++) {
        size_t m = piece[k % NPIECE] < n - at ? piece[k % NPIECE] : n - at;
        at += m;
        int64_t from = asr_stream_keep_from(st); /* hand over only what the session still needs */
        s = asr_stream_advance(st, x + from, from, (int64_t)at, false, &out, &e);
    }
    int64_t from = asr_stream_keep_from(st);
    if (s == VKASR_OK)
        s = asr_stream_advance(st, x + from, from, (int64_t)n, true, &out, &e);
    if (s != VKASR_OK) {
        fail(clip, "session: %s", e.msg);
    } else {
        const size_t T = (size_t)asr_stream_frames(st), D = (size_t)am->cfg.d_model;
        if (T != er || D != ec)
            fail(clip, "session: %zu x %zu encoder frames, %zu x %zu expected", T, D, er, ec);
        const float *got = asr_stream_encoder(st);
        const size_t check = T > (size_t)g.chunk ? T - (size_t)g.chunk : 0;
        double worst = 0;
        size_t worst_t = 0;
        for (size_t t = 0; t < check && t < er; t++) {
            double num = 0, den = 0;
            for (size_t d = 0; d < D; d++) {
                double a = got[t * D + d], b = enc[t * D + d];
                num += (a - b) * (a - b);
                den += b * b;
            }
            double rel = sqrt(num / (den > 0 ? den : 1));
            if (!(rel <= worst)) {
                worst = rel;
                worst_t = t;
            }
        }
        printf("%s: session %lld steps, %zu frames, worst relative error %.3g (frame %zu) over the first %zu\n",
               clip, (long long)asr_stream_steps(st), T, worst, worst_t, check);
        if (!(worst <= tol))
            fail(clip, "session: encoder frame %zu relative error %.3g > %.3g", worst_t, worst, tol);
        int32_t *ids = malloc((out.ntokens + 1) * sizeof *ids);
        for (size_t i = 0; i < out.ntokens; i++)
            ids[i] = out.tokens[i].id;
        compare_ids(clip, "session", ids, out.ntokens, want, nw);
        free(ids);
    }
    asr_output_free(&out);
    asr_stream_free(st);
    asr_stream_pool_free(pool);
}

/* Worst relative error of frames [0, check) of got against want ([*, D] each). */
static double worst_rel(const float *got, const float *want, size_t check, size_t D, size_t *at) {
    double worst = 0;
    *at = 0;
    for (size_t t = 0; t < check; t++) {
        double num = 0, den = 0;
        for (size_t d = 0; d < D; d++) {
            double a = got[t * D + d], b = want[t * D + d];
            num += (a - b) * (a - b);
            den += b * b;
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        if (!(rel <= worst)) {
            worst = rel;
            *at = t;
        }
    }
    return worst;
}

/* A clip and its expected results. */
struct clip {
    char name[256];
    float *x;
    size_t n;
    float *enc;
    size_t er, ec;
    int32_t *want;
    size_t nw;
    int prompt; /* a language-prompt model's slot + 1 */
};

/* Many streams in one pool: NB streams over the clips (stream i on clip i % nclips), stream i joining
 * at round join[i] (or once a slot is free), each round every active stream fed its next piece (sizes
 * differ per stream) and then every ready stream stepped together until none is ready. */
#define NB 4
static void batch_run(vkasr_session *vs, const struct clip *clips, int nclips, double tol, int64_t slots) {
    const struct asr_model *am = vs->model->am;
    struct asr_stream_pool *pool = NULL;
    struct err e = {0};
    struct asr_stream_geometry g;
    if (asr_stream_geometry(&am->cfg, &g, &e) != VKASR_OK || asr_stream_pool_create(am, vs->be, slots, 0, &pool, &e) != VKASR_OK) {
        fail("batch", "%s", e.msg);
        return;
    }
    static const int join[NB] = {0, 2, 5, 0};
    struct asr_stream *st[NB] = {0};
    struct asr_output out[NB] = {{0}};
    size_t at[NB] = {0};
    bool joined[NB] = {0}, left[NB] = {0};
    int maxb = 0, steps = 0;
    vkasr_status s = VKASR_OK;
    for (int round = 0; s == VKASR_OK && round < 100000; round++) {
        for (int i = 0; s == VKASR_OK && i < NB; i++) {
            const struct clip *c = &clips[i % nclips];
            if (!joined[i] && round >= join[i] && asr_stream_pool_free_slots(pool) > 0) {
                s = asr_stream_create(pool, &(struct asr_stream_opts){.keep_encoder = true, .prompt = c->prompt},
                                      &st[i], &e);
                joined[i] = true;
            }
            if (!joined[i] || left[i] || s != VKASR_OK)
                continue;
            if (asr_stream_done(st[i]))
                continue;
            size_t m = piece[(size_t)(round + 2 * i) % NPIECE] * (size_t)(i + 1);
            m = m < c->n - at[i] ? m : c->n - at[i];
            at[i] += m;
            int64_t from = asr_stream_keep_from(st[i]);
            s = asr_stream_feed(st[i], c->x + from, from, (int64_t)at[i], at[i] == c->n, &e);
        }
        // every ready stream, together, until none is
        for (;;) {
            struct asr_stream *ready[NB];
            struct asr_output *o[NB];
            int64_t nr = 0;
            for (int i = 0; s == VKASR_OK && i < NB; i++)
                if (joined[i] && !left[i] && asr_stream_ready(st[i])) {
                    ready[nr] = st[i];
                    o[nr++] = &out[i];
                }
            if (s != VKASR_OK || nr == 0)
                break;
            maxb = nr > maxb ? (int)nr : maxb;
            steps++;
            s = asr_stream_step(pool, ready, nr, o, &e);
        }
        // streams that are done leave (their slots free for the ones waiting)
        for (int i = 0; s == VKASR_OK && i < NB; i++) {
            if (!joined[i] || left[i] || !asr_stream_done(st[i]))
                continue;
            const struct clip *c = &clips[i % nclips];
            char name[300];
            snprintf(name, sizeof name, "batch stream %d (%s)", i, c->name);
            const size_t T = (size_t)asr_stream_frames(st[i]), D = (size_t)am->cfg.d_model;
            const size_t check = T > (size_t)g.chunk ? T - (size_t)g.chunk : 0;
            size_t wt;
            /* a prompt model keeps its frames fused with the language (the joint's input): the fixture's
             * encoder output precedes that, so its count and the tokens are checked */
            double w = T != c->er                ? INFINITY
                       : c->prompt               ? 0
                                                 : worst_rel(asr_stream_encoder(st[i]), c->enc, check, D, &wt);
            if (!(w <= tol))
                fail(name, "%zu frames (%zu expected), worst relative error %.3g", T, c->er, w);
            int32_t *ids = malloc((out[i].ntokens + 1) * sizeof *ids);
            for (size_t k = 0; k < out[i].ntokens; k++)
                ids[k] = out[i].tokens[k].id;
            compare_ids(name, "tokens", ids, out[i].ntokens, c->want, c->nw);
            free(ids);
            asr_stream_free(st[i]);
            left[i] = true;
        }
        bool all = true;
        for (int i = 0; i < NB; i++)
            all &= left[i];
        if (all)
            break;
    }
    if (s != VKASR_OK)
        fail("batch", "%s", e.msg);
    for (int i = 0; i < NB; i++) {
        if (!left[i])
            fail("batch", "stream %d did not finish", i);
        if (joined[i] && !left[i])
            asr_stream_free(st[i]);
        asr_output_free(&out[i]);
    }
    printf("batch: %d streams in %lld slots, %d steps, up to %d streams a step\n", NB, (long long)slots, steps, maxb);
    if (maxb < 2)
        fail("batch", "no step took more than one stream");
    asr_stream_pool_free(pool);
}

/* The public stream: the final updates' tokens. */
struct collect {
    int32_t *ids;
    size_t n, cap;
    int finals;
};
static void on_final(const vkasr_stream_update *u, void *ud) {
    struct collect *c = ud;
    c->finals++;
    for (size_t i = 0; i < u->n_tokens; i++) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 64;
            c->ids = realloc(c->ids, c->cap * sizeof *c->ids);
        }
        c->ids[c->n++] = u->tokens[i].id;
    }
}

static void api_run(vkasr_session *vs, const char *clip, const float *x, size_t n, const int32_t *want, size_t nw) {
    struct collect c = {0};
    vkasr_stream_params p = vkasr_stream_params_default();
    p.final_callback = on_final;
    p.user_data = &c;
    vkasr_stream *st = NULL;
    vkasr_error err;
    if (vkasr_stream_create(vs, &p, &st, &err) != VKASR_OK) {
        fail(clip, "stream: %s", err.message);
        return;
    }
    size_t at = 0;
    for (size_t k = 0; at < n; k++) {
        size_t m = piece[(k + 3) % NPIECE] < n - at ? piece[(k + 3) % NPIECE] : n - at;
        if (vkasr_stream_push(st, x + at, m, 16000) != VKASR_OK)
            break;
        at += m;
    }
    if (vkasr_stream_finish(st) != VKASR_OK)
        fail(clip, "stream: %s", vkasr_stream_last_error(st));
    vkasr_stream_stats stats;
    vkasr_stream_get_stats(st, &stats);
    printf("%s: stream %llu steps, %d final updates, %zu tokens\n", clip, (unsigned long long)stats.windows, c.finals,
           c.n);
    compare_ids(clip, "stream", c.ids, c.n, want, nw);
    vkasr_stream_free(st);
    free(c.ids);
}

/* Many public streams of one model, each on its own session and pushed from its own thread, all
 * sharing the model's pools: three at once, a fourth after the first finished; each equal to tokens.json. */
struct pusher {
    vkasr_model *m;
    const struct clip *c;
    int k;
    struct collect got;
    char err[512];
};
static void *push_thread(void *arg) {
    struct pusher *u = arg;
    vkasr_session *vs = NULL;
    vkasr_stream *st = NULL;
    vkasr_error err;
    vkasr_stream_params p = vkasr_stream_params_default();
    p.final_callback = on_final;
    p.user_data = &u->got;
    if (vkasr_session_create(u->m, &vs, &err) != VKASR_OK || vkasr_stream_create(vs, &p, &st, &err) != VKASR_OK) {
        snprintf(u->err, sizeof u->err, "%s", err.message);
        vkasr_session_free(vs);
        return NULL;
    }
    size_t at = 0;
    for (size_t k = 0; at < u->c->n; k++) {
        size_t m = piece[(k + (size_t)u->k) % NPIECE] * (size_t)(u->k + 1);
        m = m < u->c->n - at ? m : u->c->n - at;
        if (vkasr_stream_push(st, u->c->x + at, m, 16000) != VKASR_OK)
            break;
        at += m;
    }
    if (vkasr_stream_finish(st) != VKASR_OK)
        snprintf(u->err, sizeof u->err, "%s", vkasr_stream_last_error(st));
    vkasr_stream_free(st);
    vkasr_session_free(vs);
    return NULL;
}

static void api_many(vkasr_model *m, const struct clip *clips, int nclips) {
    struct pusher u[4] = {{0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        u[i] = (struct pusher){.m = m, .c = &clips[i % nclips], .k = i};
        if (i < 3)
            pthread_create(&th[i], NULL, push_thread, &u[i]);
    }
    pthread_join(th[0], NULL);
    pthread_create(&th[3], NULL, push_thread, &u[3]); /* joins while the others run */
    for (int i = 1; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        char name[300];
        snprintf(name, sizeof name, "api stream %d (%s)", i, u[i].c->name);
        if (u[i].err[0])
            fail(name, "%s", u[i].err);
        compare_ids(name, "tokens", u[i].got.ids, u[i].got.n, u[i].c->want, u[i].c->nw);
        free(u[i].got.ids);
    }
    printf("api: 4 streams of one model on 4 threads, %d failure(s) so far\n", failures);
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 9) {
        fprintf(stderr, "usage: test_stream_cache MODEL CLIPS_DIR EXPECTED_DIR LOOKAHEAD_MS ENC_TOL "
                        "[LANG1 LANG2 EXPECTED_DIR2]\n");
        return 2;
    }
    const bool langs = argc == 9;
    const char *clips = argv[2], *expected = argv[3];
    vkasr_model_params mp = vkasr_model_params_default();
    mp.precision = VKASR_PRECISION_F32;
    mp.lookahead_ms = atoi(argv[4]);
    mp.stream_slots = 20; /* the public streams' pools: 1 and 19 slots (products without the matvec hint) */
    mp.validation = tv_wanted();
    mp.log_callback = tv_log;
    const double tol = atof(argv[5]);
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *s = NULL;
    if (vkasr_model_load(argv[1], &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &s, &err) != VKASR_OK) {
        printf("FAIL: %s\n", err.message);
        vkasr_model_free(m);
        return 1;
    }
    DIR *dir = opendir(expected);
    if (!dir) {
        printf("FAIL: cannot open %s\n", expected);
        return 1;
    }
    int prompt[2] = {0, 0};
    struct err le = {0};
    for (int k = 0; langs && k < 2; k++)
        if (api_language(m->am, argv[6 + k], &prompt[k], &le) != VKASR_OK || prompt[k] == 0) {
            printf("FAIL: language %s: %s\n", argv[6 + k], le.code ? le.msg : "not a language-prompt model");
            return 1;
        }
    int nclips = 0;
    struct clip kept[8];
    int nkept = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        // the clip with its expected outputs (a prompt model: in each language, one after the other)
        for (int k = 0; k < (langs ? 2 : 1); k++) {
            struct clip c = {.prompt = prompt[k]};
            const char *want_dir = k == 0 ? expected : argv[8];
            char path[4096];
            snprintf(c.name, sizeof c.name, "%s%s%s", de->d_name, langs ? " " : "", langs ? argv[6 + k] : "");
            snprintf(path, sizeof path, "%s/%s.wav", clips, de->d_name);
            if (vkasr_audio_load(path, &c.x, &c.n, &err) != VKASR_OK) {
                fail(de->d_name, "%s", err.message);
                continue;
            }
            snprintf(path, sizeof path, "%s/%s/encoder.npy", want_dir, de->d_name);
            c.enc = fixture_read_npy(path, &c.er, &c.ec);
            snprintf(path, sizeof path, "%s/%s/tokens.json", want_dir, de->d_name);
            if (!c.enc || fixture_read_ids(path, &c.want, &c.nw) != 0) {
                fail(c.name, "cannot read the expected encoder output or tokens in %s", want_dir);
            } else {
                nclips++;
                if (!langs) {
                    session_run(s, c.name, c.x, c.n, c.enc, c.er, c.ec, c.want, c.nw, tol);
                    api_run(s, c.name, c.x, c.n, c.want, c.nw);
                }
                if (nkept < 8) {
                    kept[nkept++] = c;
                    continue;
                }
            }
            free(c.enc);
            free(c.want);
            vkasr_free(c.x);
        }
    }
    closedir(dir);
    if (nkept > 0) {
        batch_run(s, kept, nkept, tol, 3);  /* slots for 3 of the 4 streams: the 4th waits for one */
        batch_run(s, kept, nkept, tol, 17); /* a pool whose products take no matvec hint (stream_encoder.c) */
        if (!langs)
            api_many(m, kept, nkept);
    }
    for (int i = 0; i < nkept; i++) {
        free(kept[i].enc);
        free(kept[i].want);
        vkasr_free(kept[i].x);
    }
    vkasr_session_free(s);
    vkasr_model_free(m);
    if (nclips == 0) {
        printf("FAIL: no clips in %s\n", expected);
        return 1;
    }
    failures += tv_check();
    printf("%d clip(s), %d failure(s)\n", nclips, failures);
    return failures ? 1 : 0;
}
