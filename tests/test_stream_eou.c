/* test_stream_eou.c — the decoder reset of an end-of-utterance model's cache-aware stream: after the
 * chunk that emits <EOU> or <EOB>, the stream's tokens are those of a fresh decoder on the frames from
 * the next chunk on. The expectation comes from the fixture's independent encoder output (encoder.npy,
 * the float64 PyTorch reference of make_streaming_fixtures.py) decoded by the offline greedy search from
 * a fresh state over the frames after the reset, up to the end of the chunk that holds its own first
 * event (where the stream resets again). The fixture must make the reset visible: the offline search,
 * which carries its state across the <EOU> as NeMo's transcribe() does, gives other tokens there.
 * usage: test_stream_eou MODEL CLIPS_DIR EXPECTED_DIR LOOKAHEAD_MS */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "asr/stream.h"
#include "asr/transcript.h"
#include "fixture_io.h"
#include "validation_log.h"

static int failures;

#define CHECK(cond, ...)                                                                                       \
    do {                                                                                                       \
        if (!(cond)) {                                                                                         \
            printf("FAIL ");                                                                                   \
            printf(__VA_ARGS__);                                                                               \
            printf("\n");                                                                                      \
            failures++;                                                                                        \
        }                                                                                                      \
    } while (0)

static bool is_event(const struct asr_model *am, int32_t id) {
    const int k = transcript_event_kind(&am->tok, &am->cfg, id);
    return k == VKASR_EVENT_END_OF_UTTERANCE || k == VKASR_EVENT_BACKCHANNEL;
}

/* Offline greedy search over enc rows [r0, rows) from a fresh state; frames counted from r0. */
static vkasr_status decode_from(vkasr_session *vs, const float *enc, size_t rows, size_t cols, size_t r0,
                                struct asr_output *out, struct err *e) {
    struct backend *be = vs->be;
    const uint64_t mark = be_mark(be);
    be_tensor t;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){(int64_t)(rows - r0), (int64_t)cols}, &t);
    if (st == VKASR_OK)
        st = be_upload(be, t.addr, enc + r0 * cols, (uint64_t)((rows - r0) * cols * 4));
    if (st == VKASR_OK)
        st = asr_decode(vs->model->am, be, &t, NULL, NULL, NULL, out, e);
    if (st == VKASR_OK)
        st = be_sync(be);
    be_release(be, mark);
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    return st;
}

static void run_clip(vkasr_session *vs, const char *name, const float *x, size_t n, const float *enc, size_t rows,
                     size_t cols) {
    const struct asr_model *am = vs->model->am;
    struct err e = {0};
    struct asr_stream_geometry g;
    struct asr_stream_pool *pool = NULL;
    struct asr_stream *s = NULL;
    struct asr_output out = {0}, fresh = {0}, carried = {0};
    vkasr_status st = asr_stream_geometry(&am->cfg, &g, &e);
    if (st == VKASR_OK)
        st = asr_stream_pool_create(am, vs->be, 1, 0, &pool, &e);
    if (st == VKASR_OK)
        st = asr_stream_create(pool, NULL, &s, &e);
    if (st == VKASR_OK)
        st = asr_stream_feed(s, x, 0, (int64_t)n, true, &e);
    // the stream, a step at a time: where the first chunk with an event ends
    int64_t reset_frame = -1;
    size_t reset_token = 0;
    while (st == VKASR_OK && asr_stream_ready(s)) {
        const size_t before = out.ntokens;
        struct asr_output *po = &out;
        st = asr_stream_step(pool, &s, 1, &po, &e);
        for (size_t i = before; st == VKASR_OK && reset_frame < 0 && i < out.ntokens; i++)
            if (is_event(am, out.tokens[i].id)) {
                reset_frame = asr_stream_frames(s);
                reset_token = out.ntokens;
            }
    }
    if (st != VKASR_OK) {
        CHECK(false, "%s: the stream: %s", name, e.msg);
    } else if (reset_frame < 0 || reset_frame >= (int64_t)rows) {
        CHECK(false, "%s: no chunk with <EOU> or <EOB> before the last (the fixture must have one)", name);
    } else if ((st = decode_from(vs, enc, rows, cols, (size_t)reset_frame, &fresh, &e)) != VKASR_OK ||
               (st = decode_from(vs, enc, rows, cols, 0, &carried, &e)) != VKASR_OK) {
        CHECK(false, "%s: the offline search: %s", name, e.msg);
    } else {
        // the fresh search's tokens up to the end of the chunk holding its first event
        int64_t cut = (int64_t)rows - reset_frame;
        for (size_t i = 0; i < fresh.ntokens; i++)
            if (is_event(am, fresh.tokens[i].id)) {
                cut = (fresh.tokens[i].frame / g.chunk + 1) * g.chunk;
                break;
            }
        size_t nw = 0, ng = 0, nc = 0;
        while (nw < fresh.ntokens && fresh.tokens[nw].frame < cut)
            nw++;
        while (reset_token + ng < out.ntokens && out.tokens[reset_token + ng].frame - reset_frame < cut)
            ng++;
        bool same = ng == nw;
        for (size_t i = 0; same && i < nw; i++)
            same = out.tokens[reset_token + i].id == fresh.tokens[i].id &&
                   out.tokens[reset_token + i].frame - reset_frame == fresh.tokens[i].frame;
        CHECK(same, "%s: after the reset at frame %lld the stream has %zu tokens before frame %lld, a fresh search "
                    "%zu, or they differ", name, (long long)reset_frame, ng, (long long)(reset_frame + cut), nw);
        // the offline search, which carries its state across the event, over the same frames
        size_t c0 = 0;
        while (c0 < carried.ntokens && carried.tokens[c0].frame < reset_frame)
            c0++;
        while (c0 + nc < carried.ntokens && carried.tokens[c0 + nc].frame - reset_frame < cut)
            nc++;
        bool differs = nc != nw;
        for (size_t i = 0; !differs && i < nw; i++)
            differs = carried.tokens[c0 + i].id != fresh.tokens[i].id;
        CHECK(differs, "%s: the carried and the fresh search agree after frame %lld: the reset is not visible", name,
              (long long)reset_frame);
        printf("%s: reset after the chunk ending at frame %lld; %zu tokens up to frame %lld as a fresh search "
               "(the carried search: %zu tokens there)\n",
               name, (long long)reset_frame, nw, (long long)(reset_frame + cut), nc);
    }
    asr_output_free(&out);
    asr_output_free(&fresh);
    asr_output_free(&carried);
    asr_stream_free(s);
    asr_stream_pool_free(pool);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: test_stream_eou MODEL CLIPS_DIR EXPECTED_DIR LOOKAHEAD_MS\n");
        return 2;
    }
    vkasr_model_params mp = vkasr_model_params_default();
    mp.precision = VKASR_PRECISION_F32;
    mp.lookahead_ms = atoi(argv[4]);
    mp.validation = tv_wanted();
    mp.log_callback = tv_log;
    vkasr_error err;
    vkasr_model *m = NULL;
    vkasr_session *vs = NULL;
    if (vkasr_model_load(argv[1], &mp, &m, &err) != VKASR_OK || vkasr_session_create(m, &vs, &err) != VKASR_OK) {
        printf("FAIL: %s\n", err.message);
        vkasr_model_free(m);
        return 1;
    }
    static const char *const clips[] = {"us_fox"}; /* its <EOU> ends a chunk before the last */
    for (size_t k = 0; k < sizeof clips / sizeof *clips; k++) {
        char path[4096];
        float *x = NULL;
        size_t n = 0, rows = 0, cols = 0;
        snprintf(path, sizeof path, "%s/%s.wav", argv[2], clips[k]);
        if (vkasr_audio_load(path, &x, &n, &err) != VKASR_OK) {
            CHECK(false, "%s", err.message);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s/encoder.npy", argv[3], clips[k]);
        float *enc = fixture_read_npy(path, &rows, &cols);
        if (!enc)
            CHECK(false, "cannot read %s", path);
        else
            run_clip(vs, clips[k], x, n, enc, rows, cols);
        free(enc);
        free(x);
    }
    vkasr_session_free(vs);
    vkasr_model_free(m);
    failures += tv_check();
    printf(failures ? "%d failures\n" : "all checks passed\n", failures);
    return failures ? 1 : 0;
}
