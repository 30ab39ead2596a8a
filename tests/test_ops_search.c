/* test_ops_search.c — the device-resident search's ops (search_joint, search_step) on Vulkan vs the C
 * reference, bit for bit: every tensor the ops may write (state, token ring, z, x0, h_old) starts with
 * the same contents on both sides and must end identical, guards intact. search_step: TDT and RNN-T,
 * windows of 1..32 rows, the window reaching past T, the max_symbols cap at the window's first row,
 * logits with ties, NaNs and all-NaN rows (first index on ties, NaN never wins, all NaN -> 0), a done
 * hypothesis. search_joint: the commit of h_new (S_EMIT set or not), rows clamped at T - 1, P and L
 * from 1 to 300 and 3. Batches of hypotheses (a packed batch's): 3 and 37 hypotheses of different
 * lengths packed in f, at different frames, some done. Recorded sequences (be_graph_*: Vulkan command
 * buffers, CUDA graphs): iterations of joint and step recorded once and replayed end exactly where the
 * reference running them one by one does, also after an op failed while recording (the backend still
 * runs ops afterwards), replays past the end predicated on the count of hypotheses not done (`live`,
 * which search_step lowers as each becomes done: compared too), and a replay while that count is 0
 * skipped where the device says predicated replays skip (Vulkan with VK_EXT_conditional_rendering),
 * run otherwise; a predicate that is not one I32 and a count that is not [1] are refused. The decoders
 * built on them: test_decoder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

enum pattern { RANDOM, TIES, NANS };

struct rig {
    struct be_search s[2];
    struct th_tensor *state, *tokens, *f, *q, *z, *y, *x0, *h_old, *h_new, *embed, *durations, *live;
};

/* A search of B hypotheses of frames[b] frames each (NULL: one of T), packed in f: every tensor an input
 * (identical contents on both sides). */
static bool make(struct th *h, struct rig *r, int64_t B, const int64_t *frames, int64_t T, int64_t P, int64_t V,
                 int64_t L, int nd, int64_t wmax, int64_t cap, int max_sym, enum pattern pat) {
    const int64_t J = V + 1 + nd;
    int64_t Tf = 0;
    for (int64_t b = 0; b < B; b++)
        Tf += frames ? frames[b] : T;
    r->state = th_input(h, BE_I32, 2, TH_SHAPE(B, SEARCH_STATE_INTS), 0, 1);
    r->live = th_input(h, BE_I32, 1, TH_SHAPE(1), 0, 1); /* be_search_init sets it */
    r->tokens = th_input(h, BE_I32, 3, TH_SHAPE(B, cap, 3), -5, 5);
    r->f = th_input(h, BE_F32, 2, TH_SHAPE(Tf, P), -1.0f, 1.0f);
    r->q = th_input(h, BE_F32, 2, TH_SHAPE(B, P), -1.0f, 1.0f);
    r->z = th_input(h, BE_F32, 2, TH_SHAPE(B * wmax, P), -1.0f, 1.0f);
    r->x0 = th_input(h, BE_F32, 2, TH_SHAPE(B, P), -1.0f, 1.0f);
    r->h_old = th_input(h, BE_F32, 3, TH_SHAPE(L, B, P), -1.0f, 1.0f);
    r->h_new = th_input(h, BE_F32, 3, TH_SHAPE(L, B, P), -1.0f, 1.0f);
    r->embed = th_input(h, BE_F32, 2, TH_SHAPE(V + 1, P), -1.0f, 1.0f);
    float *y = malloc((size_t)(B * wmax * J) * sizeof *y);
    if (!y)
        exit(1);
    for (int64_t i = 0; i < B * wmax * J; i++) {
        float v = th_uniform(h, -3.0f, 3.0f);
        if (pat == TIES) /* few distinct values: ties within a row are common */
            v = floorf(v);
        else if (pat == NANS && th_rand(h) % 3 == 0)
            v = NAN;
        y[i] = v;
    }
    if (pat == NANS && wmax > 1) /* an all-NaN row */
        for (int64_t j = 0; j < J; j++)
            y[J + j] = NAN;
    r->y = th_input_data(h, BE_F32, 2, TH_SHAPE(B * wmax, J), y);
    free(y);
    const int32_t durations[5] = {0, 1, 2, 3, 4};
    r->durations = nd ? th_input_data(h, BE_I32, 1, TH_SHAPE(nd), durations) : NULL;
    for (int s = 0; s < 2; s++) {
        r->s[s] = (struct be_search){
            .state = TH_T(r->state, s), .tokens = TH_T(r->tokens, s), .f = TH_T(r->f, s),
            .q = TH_T(r->q, s), .z = TH_T(r->z, s), .y = TH_T(r->y, s), .x0 = TH_T(r->x0, s),
            .h_old = TH_T(r->h_old, s), .h_new = TH_T(r->h_new, s), .embed = TH_T(r->embed, s),
            .durations = nd ? TH_T(r->durations, s) : (be_tensor){0}, .live = TH_T(r->live, s),
            .max_symbols = max_sym,
        };
        if (be_search_init(h->be[s], &r->s[s], frames) != VKASR_OK) {
            printf("FAIL [%s]: be_search_init: %s\n", h->name, h->be[s]->err.msg);
            h->failures++;
            return false;
        }
    }
    return true;
}

/* Overwrites the states of the first n hypotheses on both sides. */
static void set_states(struct th *h, struct rig *r, const int32_t *st, int64_t n) {
    for (int s = 0; s < 2; s++)
        if (be_upload(h->be[s], TH_T(r->state, s).addr, st, (uint64_t)n * SEARCH_STATE_INTS * sizeof *st) != VKASR_OK)
            exit(1);
}

static void set_state(struct th *h, struct rig *r, const int32_t *st) { set_states(h, r, st, 1); }

static void check_all(struct th *h, struct rig *r) {
    struct th_tensor *outs[] = {r->state, r->tokens, r->z, r->x0, r->h_old, r->live};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        th_check(h, outs[i], 0);
    th_check_guards(h);
}

static void step_case(struct th *h, bool tdt, int64_t T, int32_t t, int W, int run, int32_t last_t, int max_sym,
                      bool done, enum pattern pat, int64_t V) {
    static const char *const pats[] = {"random", "ties", "NaNs"};
    th_case(h, "search_step %s T=%lld t=%d W=%d run=%d last_t=%d max_symbols=%d%s %s V=%lld", tdt ? "TDT" : "RNN-T",
            (long long)T, t, W, run, last_t, max_sym, done ? " done" : "", pats[pat], (long long)V);
    struct rig r;
    if (!make(h, &r, 1, NULL, T, 5, V, 1, tdt ? 5 : 0, W, 7, max_sym, pat))
        return;
    int32_t st[SEARCH_STATE_INTS] = {0};
    st[SEARCH_S_T] = t;
    st[SEARCH_S_FRAMES] = (int32_t)T;
    st[SEARCH_S_LAST_T] = last_t;
    st[SEARCH_S_RUN] = run;
    st[SEARCH_S_DONE] = done;
    st[SEARCH_S_EMIT] = 1;
    st[SEARCH_S_TOKEN] = 4;
    st[SEARCH_S_NTOK] = 12; /* the ring wraps: slot 12 % 7 */
    st[SEARCH_S_STEPS] = 100;
    st[SEARCH_S_ITERS] = 50;
    set_state(h, &r, st);
    struct op_search_step a[2] = {{.s = &r.s[0], .window = W}, {.s = &r.s[1], .window = W}};
    if (th_run(h, OP_search_step, &a[0], &a[1]))
        check_all(h, &r);
}

static void joint_case(struct th *h, int64_t T, int32_t t, int W, int64_t P, int64_t L, bool emit, bool done) {
    th_case(h, "search_joint T=%lld t=%d W=%d P=%lld L=%lld%s%s", (long long)T, t, W, (long long)P, (long long)L,
            emit ? " emit" : "", done ? " done" : "");
    struct rig r;
    if (!make(h, &r, 1, NULL, T, P, 4, L, 5, W, 3, 10, RANDOM))
        return;
    int32_t st[SEARCH_STATE_INTS] = {0};
    st[SEARCH_S_T] = t;
    st[SEARCH_S_FRAMES] = (int32_t)T;
    st[SEARCH_S_EMIT] = emit;
    st[SEARCH_S_DONE] = done;
    set_state(h, &r, st);
    struct op_search_joint a[2] = {{.s = &r.s[0], .window = W}, {.s = &r.s[1], .window = W}};
    if (th_run(h, OP_search_joint, &a[0], &a[1]))
        check_all(h, &r);
}

/* B hypotheses of different lengths packed in f, each at its own frame (every fourth done, every third
 * just emitted): one search_joint and one search_step over all of them. */
static void batch_case(struct th *h, int64_t B, bool tdt, int W, int64_t P, int64_t L, enum pattern pat, int64_t V) {
    th_case(h, "search batch of %lld %s W=%d P=%lld L=%lld V=%lld", (long long)B, tdt ? "TDT" : "RNN-T", W,
            (long long)P, (long long)L, (long long)V);
    int64_t *frames = malloc((size_t)B * sizeof *frames);
    int32_t *st = calloc((size_t)B, SEARCH_STATE_INTS * sizeof *st);
    if (!frames || !st)
        exit(1);
    int64_t f0 = 0;
    for (int64_t b = 0; b < B; b++)
        frames[b] = 1 + (b * 7) % 23;
    struct rig r;
    if (!make(h, &r, B, frames, 0, P, V, L, tdt ? 5 : 0, W, 5, 3, pat)) {
        free(frames);
        free(st);
        return;
    }
    for (int64_t b = 0; b < B; b++) {
        int32_t *sb = st + b * SEARCH_STATE_INTS;
        sb[SEARCH_S_FRAMES] = (int32_t)frames[b];
        sb[SEARCH_S_F0] = (int32_t)f0;
        sb[SEARCH_S_T] = (int32_t)((b * 5) % frames[b]);
        sb[SEARCH_S_LAST_T] = b % 2 ? sb[SEARCH_S_T] : -1;
        sb[SEARCH_S_RUN] = b % 2 ? 2 : 0;
        sb[SEARCH_S_DONE] = b % 4 == 3;
        sb[SEARCH_S_EMIT] = b % 3 == 0;
        sb[SEARCH_S_NTOK] = (int32_t)b;
        f0 += frames[b];
    }
    set_states(h, &r, st, B);
    struct op_search_joint j[2] = {{.s = &r.s[0], .window = W}, {.s = &r.s[1], .window = W}};
    struct op_search_step k[2] = {{.s = &r.s[0], .window = W}, {.s = &r.s[1], .window = W}};
    if (th_run(h, OP_search_joint, &j[0], &j[1]) && th_run(h, OP_search_step, &k[0], &k[1]))
        check_all(h, &r);
    free(frames);
    free(st);
}

/* Replays: `iters` iterations of (search_joint, search_step) recorded once on the device under test and
 * replayed `times` times, against the reference running the iterations one by one; fail_first: an op
 * with invalid arguments is called first while recording (the recording is then abandoned and redone). */
static void graph_case(struct th *h, int64_t B, bool tdt, int W, int iters, uint32_t times, bool fail_first, int64_t V) {
    if (!h->be[TH_DEV]->vt->graph_begin) { /* the CPU backend runs each op at once, as the reference */
        th_skip(h, "recorded op sequences (the backend has none)");
        return;
    }
    th_case(h, "search graph of %lld %s W=%d, %d iterations replayed %u times%s V=%lld", (long long)B,
            tdt ? "TDT" : "RNN-T", W, iters, times, fail_first ? ", after a failed recording" : "", (long long)V);
    int64_t frames[5] = {40, 3, 17, 64, 29};
    struct rig r;
    if (!make(h, &r, B, frames, 0, 12, V, 2, tdt ? 5 : 0, W, 256, 3, RANDOM))
        return;
    int32_t st[5 * SEARCH_STATE_INTS] = {0};
    int64_t f0 = 0;
    for (int64_t b = 0; b < B; b++) {
        int32_t *sb = st + b * SEARCH_STATE_INTS;
        sb[SEARCH_S_FRAMES] = (int32_t)frames[b];
        sb[SEARCH_S_F0] = (int32_t)f0;
        sb[SEARCH_S_LAST_T] = -1;
        sb[SEARCH_S_EMIT] = 1;
        f0 += frames[b];
    }
    set_states(h, &r, st, B);
    struct backend *dev = h->be[TH_DEV], *ref = h->be[TH_REF];
    struct op_search_joint j[2] = {{.s = &r.s[0], .window = W}, {.s = &r.s[1], .window = W}};
    struct op_search_step k[2] = {{.s = &r.s[0], .window = W}, {.s = &r.s[1], .window = W}};
    vkasr_status st_ref = VKASR_OK;
    for (uint32_t i = 0; st_ref == VKASR_OK && i < (uint32_t)iters * times; i++) {
        st_ref = be_search_joint(ref, &j[TH_REF]);
        if (st_ref == VKASR_OK)
            st_ref = be_search_step(ref, &k[TH_REF]);
    }
    struct be_graph *g = NULL;
    vkasr_status st_dev = VKASR_OK;
    h->checks++;
    if (fail_first) { /* a window beyond SEARCH_MAX_WINDOW is refused; the recording must end cleanly */
        struct op_search_step bad = {.s = &r.s[TH_DEV], .window = 2 * SEARCH_MAX_WINDOW};
        st_dev = be_graph_begin_predicated(dev, &TH_T(r.live, TH_DEV));
        vkasr_status sb = st_dev == VKASR_OK ? be_search_step(dev, &bad) : VKASR_OK;
        if (st_dev == VKASR_OK)
            be_graph_end(dev, &g); /* a graph or an error: either way nothing is left recording */
        be_graph_free(dev, g);
        g = NULL;
        if (st_dev != VKASR_OK || sb == VKASR_OK) {
            printf("FAIL [%s]: the invalid op %s while recording (%s)\n", h->name,
                   sb == VKASR_OK ? "was accepted" : "could not be tried", dev->err.msg);
            h->failures++;
        }
        err_clear(&dev->err);
    }
    st_dev = be_graph_begin_predicated(dev, &TH_T(r.live, TH_DEV));
    for (int i = 0; st_dev == VKASR_OK && i < iters; i++) {
        st_dev = be_search_joint(dev, &j[TH_DEV]);
        if (st_dev == VKASR_OK)
            st_dev = be_search_step(dev, &k[TH_DEV]);
    }
    if (st_dev == VKASR_OK) {
        st_dev = be_graph_end(dev, &g);
        if (st_dev == VKASR_OK)
            st_dev = be_graph_run(dev, g, times);
        if (st_dev == VKASR_OK)
            st_dev = be_sync(dev);
    }
    be_graph_free(dev, g);
    if (st_ref != VKASR_OK || st_dev != VKASR_OK) {
        printf("FAIL [%s]: %s\n", h->name, st_ref != VKASR_OK ? ref->err.msg : dev->err.msg);
        h->failures++;
        return;
    }
    check_all(h, &r);
}

/* A predicated replay while the count of hypotheses not done is 0 (as past the end of the work, here
 * forced with the hypothesis not done): skipped where the device says predicated replays skip, run
 * otherwise; then, with the count back at 1, run. */
static void predicate_case(struct th *h) {
    if (!h->be[TH_DEV]->vt->graph_begin) {
        th_skip(h, "predicated op sequences (the backend records none)");
        return;
    }
    th_case(h, "search graph predicated on a count of 0, then of 1");
    struct rig r;
    if (!make(h, &r, 1, NULL, 40, 5, 9, 1, 5, 4, 7, 3, RANDOM))
        return;
    struct backend *dev = h->be[TH_DEV], *ref = h->be[TH_REF];
    struct op_search_joint j[2] = {{.s = &r.s[0], .window = 4}, {.s = &r.s[1], .window = 4}};
    struct op_search_step k[2] = {{.s = &r.s[0], .window = 4}, {.s = &r.s[1], .window = 4}};
    /* refused on every backend as misuse (VKASR_ERR_INTERNAL, as every op argument the library itself
     * gets wrong): a predicate that is not one I32, a live count that is not [1] */
    for (int s = 0; s < 2; s++) {
        be_tensor f32 = TH_T(r.live, s), two = TH_T(r.tokens, s);
        f32.type = BE_F32;
        two = be_tensor_1d(two.addr, BE_I32, 2);
        struct be_search bad = r.s[s];
        bad.live = two;
        const vkasr_status sp = be_graph_begin_predicated(h->be[s], &f32), sl = be_search_init(h->be[s], &bad, NULL);
        h->checks += 2;
        if (sp != VKASR_ERR_INTERNAL || sl != VKASR_ERR_INTERNAL) {
            printf("FAIL [%s]: %s: an F32 predicate gave status %d, a live count of 2 status %d (want %d)\n", h->name,
                   s == TH_DEV ? "device" : "reference", sp, sl, VKASR_ERR_INTERNAL);
            h->failures++;
        }
        err_clear(&h->be[s]->err);
    }
    struct be_graph *g = NULL;
    vkasr_status st = be_graph_begin_predicated(dev, &TH_T(r.live, TH_DEV));
    if (st == VKASR_OK) {
        st = be_search_joint(dev, &j[TH_DEV]);
        if (st == VKASR_OK)
            st = be_search_step(dev, &k[TH_DEV]);
        vkasr_status se = be_graph_end(dev, &g); /* ends the recording either way */
        st = st == VKASR_OK ? se : st;
    }
    h->checks++;
    if (st != VKASR_OK) {
        printf("FAIL [%s]: recording: %s\n", h->name, dev->err.msg);
        h->failures++;
        be_graph_free(dev, g);
        return;
    }
    for (int32_t count = 0; count < 2; count++) {
        const bool skip = count == 0 && dev->dev->predicated_graphs;
        for (int s = 0; s < 2; s++)
            if (be_upload(h->be[s], TH_T(r.live, s).addr, &count, sizeof count) != VKASR_OK)
                exit(1);
        if (!skip && (be_search_joint(ref, &j[TH_REF]) != VKASR_OK || be_search_step(ref, &k[TH_REF]) != VKASR_OK))
            exit(1);
        if (be_graph_run(dev, g, 1) != VKASR_OK || be_sync(dev) != VKASR_OK) {
            printf("FAIL [%s]: replay: %s\n", h->name, dev->err.msg);
            h->failures++;
            break;
        }
        check_all(h, &r); /* after a skipped replay: nothing written, as the reference did nothing */
    }
    be_graph_free(dev, g);
}

int main(void) {
    struct th h;
    th_open(&h, false);
    static const int windows[] = {1, 2, 8, 32};
    /* V = 9: one workgroup per hypothesis everywhere; V = 1000: several on a GPU (and on lavapipe with
     * VKASR_GPU_ROW_SHAPES: test_ops_search_gpu_shapes), merged by the last to arrive. */
    static const int64_t vocabs[] = {9, 1000};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        const int64_t V = vocabs[v];
        for (int tdt = 0; tdt < 2; tdt++)
            for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++)
                for (int pat = RANDOM; pat <= NANS; pat++) {
                    const int W = windows[w];
                    step_case(&h, tdt, 40, 3, W, 0, -1, 10, false, (enum pattern)pat, V);
                    step_case(&h, tdt, 40, 38, W, 0, -1, 10, false, (enum pattern)pat, V); /* window past T */
                    step_case(&h, tdt, 40, 39, W, 2, 39, 3, false, (enum pattern)pat, V);  /* at the cap */
                    step_case(&h, tdt, 1, 0, W, 0, -1, 1, false, (enum pattern)pat, V);
                }
        step_case(&h, true, 40, 40, 8, 0, 39, 10, true, RANDOM, V);
        step_case(&h, false, 40, 41, 4, 0, 39, 10, true, TIES, V);
        batch_case(&h, 3, true, 4, 5, 2, RANDOM, V);
        batch_case(&h, 3, false, 1, 7, 1, TIES, V);
        batch_case(&h, 37, true, 8, 33, 2, NANS, V);
        batch_case(&h, 37, false, 2, 16, 2, RANDOM, V);
        graph_case(&h, 1, true, 4, 8, 3, false, V);
        graph_case(&h, 5, false, 2, 8, 5, false, V);
        graph_case(&h, 5, true, 8, 1, 40, true, V);
        graph_case(&h, 5, false, 1, 8, 9, true, V);
    }
    joint_case(&h, 40, 3, 8, 5, 1, true, false);
    joint_case(&h, 40, 37, 8, 7, 2, false, false); /* rows past T read row T - 1 */
    joint_case(&h, 5, 0, 32, 300, 3, true, false);
    joint_case(&h, 1, 0, 1, 1, 1, true, false);
    joint_case(&h, 40, 40, 8, 5, 2, true, true); /* done: nothing written */
    predicate_case(&h);
    return th_close(&h);
}
