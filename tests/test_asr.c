/* test_asr.c — the network layer on the device $VKASR_DEVICE names (lavapipe in CI; the CUDA backend in
 * test_asr_cuda) and the C reference:
 *  - halo-tiled subsampling with tiles of 1, 2, 3, 7 frames is bit-identical to one untiled pass;
 *  - the relative positional rows against a direct double evaluation of sin/cos(fl32(r * w_j)),
 *    including r near 50000 (an hour of audio), row order, and blocks of rows equal to longer calls;
 *  - chunked runs (spectra, subsampling tiles, conformer rows of a few frames) bit-identical to one
 *    chunk, with full and local attention, and every run inside its memory plan;
 *  - full attention bit-identical to local attention with a window as long as the sequence (the two
 *    network paths), with one block and with two;
 *  - the stage taps on chunked runs: in order, equal to the one-chunk run's, the subsampling tapped
 *    before the input scaling, the mel tap taken before the features are released;
 *  - the whole network (features, encoder, tokens) on the device in f32 against the C reference
 *    backend, with full attention and with local attention.
 * usage: test_asr DATA_DIR */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asr/asr.h"
#include "audio/audio.h"
#include "expect.h"
#include "validation_log.h"


static const struct logger quiet = {VKASR_LOG_WARN, tv_log, NULL}; /* counts validation reports */

struct rig {
    struct be_device *dev;
    struct backend *be;
    struct asr_model *m;
};

static bool open_rig(struct rig *r, const char *device, const char *model_dir, struct err *e) {
    memset(r, 0, sizeof *r);
    struct model_file *mf = NULL;
    struct be_device_options o = {.device = device, .validation = tv_wanted(), .log = &quiet};
    if (model_open(model_dir, &mf, e) || be_device_open(&o, &r->dev, e) || be_backend_create(r->dev, &r->be, e) ||
        asr_model_load(r->dev, &mf, VKASR_PRECISION_F32, &r->m, e)) {
        model_close(mf);
        return false;
    }
    model_close(mf);
    return true;
}

static void close_rig(struct rig *r) {
    asr_model_free(r->m);
    be_backend_destroy(r->be);
    be_device_close(r->dev);
}

static float *download(struct backend *be, const be_tensor *t) {
    float *h = malloc(be_nbytes(t) + 4);
    if (h && be_download(be, h, t->addr, be_nbytes(t)) != VKASR_OK) {
        free(h);
        return NULL;
    }
    return h;
}

static void test_tiling(const char *model_dir, const struct audio *a) {
    struct rig r;
    struct err e = {0};
    if (!open_rig(&r, NULL, model_dir, &e)) {
        EXPECT(0, "open %s: %s", model_dir, e.msg);
        return;
    }
    be_tensor feat, x;
    const int64_t L = (int64_t)a->n / r.m->cfg.hop_length;
    vkasr_status st = be_alloc_tensor(r.be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){L, r.m->cfg.n_mels}, &feat);
    if (st == VKASR_OK)
        st = asr_features(r.m, r.be, a->samples, a->n, L, &feat, NULL, &e);
    int64_t T = asr_encoder_frames(&r.m->cfg, L);
    if (st == VKASR_OK)
        st = be_alloc_tensor(r.be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, r.m->cfg.d_model}, &x);
    if (st == VKASR_OK)
        st = asr_subsample_tiled(r.m, r.be, &feat, &x, T, NULL, NULL, &e);
    float *whole = st == VKASR_OK ? download(r.be, &x) : NULL;
    EXPECT(whole != NULL, "untiled subsampling: %s", e.msg);
    const int64_t tiles[] = {1, 2, 3, 7};
    for (int k = 0; whole && k < 4; k++) {
        st = asr_subsample_tiled(r.m, r.be, &feat, &x, tiles[k], NULL, NULL, &e);
        float *tiled = st == VKASR_OK ? download(r.be, &x) : NULL;
        EXPECT(tiled && memcmp(tiled, whole, be_nbytes(&x)) == 0,
               "%s: subsampling in tiles of %lld frames differs from one pass (T = %lld)", model_dir,
               (long long)tiles[k], (long long)T);
        free(tiled);
    }
    printf("tiling: %s, T = %lld encoder frames: tiles of 1, 2, 3, 7 frames bit-identical\n", model_dir, (long long)T);
    free(whole);
    close_rig(&r);
}

/* The most scratch the last run_hooked had in use at once (be_scratch_peak). */
static uint64_t last_peak;

/* One run on a fresh backend of the rig's device (so the memory it reserves is this run's alone). */
static vkasr_status run_hooked(struct rig *r, const float *pcm, size_t n, const struct asr_options *opt,
                               const struct asr_hooks *hooks, struct asr_output *out, uint64_t *held, struct err *e) {
    struct backend *be = NULL;
    vkasr_status st = be_backend_create(r->dev, &be, e);
    if (st == VKASR_OK)
        st = asr_run(r->m, be, pcm, n, opt, hooks, out, e);
    if (be) {
        *held = be_peak_bytes(be);
        last_peak = be_scratch_peak(be);
    }
    be_backend_destroy(be);
    return st;
}

static vkasr_status run_fresh(struct rig *r, const float *pcm, size_t n, const struct asr_options *opt,
                              struct asr_output *out, uint64_t *held, struct err *e) {
    return run_hooked(r, pcm, n, opt, NULL, out, held, e);
}

/* A run with forced chunks (not cut to steps) measured by its plan: its peak is the largest of the
 * measured features, subsampling and encoder phases, or the decoder's (the plan's decoder phase holds
 * either transducer search, the run one of them). */
static bool peak_as_planned(const struct asr_plan *p, uint64_t peak) {
    uint64_t enc = p->features > p->subsampling ? p->features : p->subsampling;
    enc = enc > p->encoder ? enc : p->encoder;
    return peak <= p->scratch && (peak == enc || (peak > enc && peak <= p->decoder));
}

/* Chunked runs are bit-identical to unchunked ones (f32, on the device): spectra, subsampling tiles and
 * conformer rows forced to a few frames against one chunk each, with full and local attention; and
 * every run stays inside its memory plan (the scratch it reserved never had to grow) and has the peak
 * its plan measured. */
static void test_chunking(const char *model_dir, const float *pcm, size_t n) {
    struct rig r;
    struct err e = {0};
    if (!open_rig(&r, NULL, model_dir, &e)) {
        EXPECT(0, "open %s: %s", model_dir, e.msg);
        return;
    }
    const int64_t L = (int64_t)n / r.m->cfg.hop_length, T = asr_encoder_frames(&r.m->cfg, L);
    const struct asr_chunks whole = {L, T, T};
    const struct asr_chunks tiny[] = {{37, 5, 7}, {160, 3, 1}, {L - 1, T - 2, 64}};
    const struct {
        enum asr_attention mode;
        int64_t window;
    } atts[] = {{ASR_ATT_FULL, 0}, {ASR_ATT_LOCAL, 12}, {ASR_ATT_LOCAL, 1}};
    for (int a = 0; a < 3; a++) {
        struct asr_options opt = {.keep_features = true, .attention = atts[a].mode, .window = atts[a].window,
                                  .force = &whole};
        struct asr_output ref = {0};
        uint64_t held = 0;
        vkasr_status st = run_fresh(&r, pcm, n, &opt, &ref, &held, &e);
        EXPECT(st == VKASR_OK, "%s: unchunked run: %s", model_dir, e.msg);
        EXPECT(st != VKASR_OK || held == be_scratch_bytes(ref.plan.scratch),
               "%s: unchunked run held %llu bytes of scratch, planned %llu", model_dir, (unsigned long long)held,
               (unsigned long long)ref.plan.scratch);
        EXPECT(st != VKASR_OK || peak_as_planned(&ref.plan, last_peak),
               "%s: unchunked run's peak %llu bytes, planned %llu / %llu / %llu / %llu", model_dir,
               (unsigned long long)last_peak, (unsigned long long)ref.plan.features,
               (unsigned long long)ref.plan.subsampling, (unsigned long long)ref.plan.encoder,
               (unsigned long long)ref.plan.decoder);
        for (int k = 0; st == VKASR_OK && k < 3; k++) {
            opt.force = &tiny[k];
            struct asr_output o = {0};
            st = run_fresh(&r, pcm, n, &opt, &o, &held, &e);
            EXPECT(st == VKASR_OK, "%s: chunked run: %s", model_dir, e.msg);
            bool same = st == VKASR_OK && o.mel_frames == ref.mel_frames && o.frames == ref.frames &&
                        memcmp(o.mel, ref.mel, (size_t)L * r.m->cfg.n_mels * 4) == 0 &&
                        memcmp(o.encoder, ref.encoder, (size_t)T * r.m->cfg.d_model * 4) == 0 &&
                        o.ntokens == ref.ntokens;
            for (size_t i = 0; same && i < o.ntokens; i++)
                same = o.tokens[i].id == ref.tokens[i].id && o.tokens[i].frame == ref.tokens[i].frame;
            EXPECT(same, "%s: %s attention w=%lld: spectra of %lld, tiles of %lld, rows of %lld differ from one chunk",
                   model_dir, atts[a].mode == ASR_ATT_FULL ? "full" : "local", (long long)atts[a].window,
                   (long long)tiny[k].stft_frames, (long long)tiny[k].sub_tile, (long long)tiny[k].rows);
            EXPECT(st != VKASR_OK || held == be_scratch_bytes(o.plan.scratch),
                   "%s: chunked run held %llu bytes of scratch, planned %llu", model_dir, (unsigned long long)held,
                   (unsigned long long)o.plan.scratch);
            EXPECT(st != VKASR_OK || peak_as_planned(&o.plan, last_peak),
                   "%s: chunked run's peak %llu bytes, planned %llu / %llu / %llu / %llu", model_dir,
                   (unsigned long long)last_peak, (unsigned long long)o.plan.features,
                   (unsigned long long)o.plan.subsampling, (unsigned long long)o.plan.encoder,
                   (unsigned long long)o.plan.decoder);
            asr_output_free(&o);
        }
        printf("chunking: %s, T = %lld, %s attention w=%lld: 3 chunkings bit-identical to one chunk (mel, encoder, "
               "%zu tokens); plans held\n",
               model_dir, (long long)T, atts[a].mode == ASR_ATT_FULL ? "full" : "local", (long long)atts[a].window,
               ref.ntokens);
        asr_output_free(&ref);
    }
    close_rig(&r);
}

/* What the stage taps of one run delivered: copies of the stages before the decoder in order, and a
 * hash of every "logits" tap (name, index, shape, data, the decoder's choices). */
struct taps {
    struct tap {
        char name[16];
        int64_t index;
        size_t rows, cols;
        float *data;
    } t[64];
    int n;
    uint64_t logits_hash, nlogits;
    bool logits_last, oom;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static void on_stage(void *ud, const vkasr_stage *s) {
    struct taps *k = ud;
    const size_t n = s->rows * s->cols;
    if (!strcmp(s->name, "logits")) {
        k->logits_hash = fnv(k->logits_hash, &s->index, sizeof s->index);
        k->logits_hash = fnv(k->logits_hash, s->data, n * sizeof *s->data);
        k->logits_hash = fnv(k->logits_hash, s->steps, s->rows * sizeof *s->steps);
        k->nlogits++;
        return;
    }
    k->logits_last &= k->nlogits == 0;
    if (k->n == 64)
        return;
    struct tap *t = &k->t[k->n++];
    snprintf(t->name, sizeof t->name, "%s", s->name);
    t->index = s->index;
    t->rows = s->rows;
    t->cols = s->cols;
    t->data = malloc(n * sizeof *t->data + 4);
    if (t->data)
        memcpy(t->data, s->data, n * sizeof *t->data);
    k->oom |= !t->data;
}

static void taps_free(struct taps *k) {
    for (int i = 0; i < k->n; i++)
        free(k->t[i].data);
}

/* The stage taps on the chunked network (what vkasr compare reads): the stages fire in order (mel,
 * subsampling, every layer, encoder, then the decoder's logits) whatever the chunks; every tap of a run
 * in tiny chunks equals the tap of the one-chunk run bit for bit (logits included); the mel tap is the
 * result's features (taken before the features are released), the encoder tap its encoder output and
 * the last layer's; the subsampling tap is the subsampling of the mel tap computed on its own, i.e.
 * before the x sqrt(D) input scaling (switched on here: the tiny models do not scale); and a tapped run
 * holds exactly the scratch it planned. Full and local attention. */
static void test_taps_chunked(const char *model_dir, const float *pcm, size_t n) {
    struct rig r;
    struct err e = {0};
    if (!open_rig(&r, NULL, model_dir, &e)) {
        EXPECT(0, "open %s: %s", model_dir, e.msg);
        return;
    }
    r.m->cfg.xscaling = true;
    const struct model_config *c = &r.m->cfg;
    const int64_t L = (int64_t)n / c->hop_length, T = asr_encoder_frames(c, L), D = c->d_model;
    const struct asr_chunks whole = {L, T, T}, tiny = {37, 5, 7};
    const int64_t windows[] = {0, 12};
    for (int a = 0; a < 2; a++) {
        struct taps *k = calloc(2, sizeof *k);
        struct asr_output o[2] = {{0}};
        vkasr_status st = k ? VKASR_OK : VKASR_ERR_NO_MEMORY;
        for (int run = 0; st == VKASR_OK && run < 2; run++) {
            struct asr_options opt = {.keep_features = true, .attention = windows[a] ? ASR_ATT_LOCAL : ASR_ATT_FULL,
                                      .window = windows[a], .force = run ? &tiny : &whole};
            struct asr_hooks hooks = {.stage = on_stage, .ud = &k[run]};
            k[run].logits_last = true;
            uint64_t held = 0;
            st = run_hooked(&r, pcm, n, &opt, &hooks, &o[run], &held, &e);
            EXPECT(st == VKASR_OK && !k[run].oom, "%s: tapped run: %s", model_dir, e.msg);
            EXPECT(st != VKASR_OK || held == be_scratch_bytes(o[run].plan.scratch),
                   "%s: a tapped run held %llu bytes of scratch, planned %llu", model_dir, (unsigned long long)held,
                   (unsigned long long)o[run].plan.scratch);
        }
        bool order = st == VKASR_OK && k[1].n == c->n_layers + 3 && !strcmp(k[1].t[0].name, "mel") &&
                     !strcmp(k[1].t[1].name, "subsampling") && !strcmp(k[1].t[k[1].n - 1].name, "encoder") &&
                     k[1].logits_last && k[1].nlogits > 0;
        for (int i = 0; order && i < c->n_layers; i++)
            order = !strcmp(k[1].t[2 + i].name, "layer") && k[1].t[2 + i].index == i;
        EXPECT(order, "%s: stage order in chunks (%d stages, %llu logits taps)", model_dir, k ? k[1].n : 0,
               (unsigned long long)(k ? k[1].nlogits : 0));
        bool same = order && k[0].n == k[1].n && k[0].nlogits == k[1].nlogits && k[0].logits_hash == k[1].logits_hash;
        for (int i = 0; same && i < k[1].n; i++) {
            const struct tap *x = &k[0].t[i], *y = &k[1].t[i];
            same = !strcmp(x->name, y->name) && x->index == y->index && x->rows == y->rows && x->cols == y->cols &&
                   !memcmp(x->data, y->data, x->rows * x->cols * sizeof *x->data);
        }
        EXPECT(same, "%s, window %lld: taps in chunks differ from the one-chunk run's", model_dir,
               (long long)windows[a]);
        if (order) {
            const struct tap *mel = &k[1].t[0], *sub = &k[1].t[1], *last = &k[1].t[k[1].n - 2],
                             *enc = &k[1].t[k[1].n - 1];
            EXPECT(mel->rows == (size_t)L && mel->cols == (size_t)c->n_mels &&
                       !memcmp(mel->data, o[1].mel, (size_t)L * c->n_mels * 4),
                   "%s: mel tap = the result's features", model_dir);
            EXPECT(enc->rows == (size_t)T && enc->cols == (size_t)D && !memcmp(enc->data, o[1].encoder, (size_t)T * D * 4) &&
                       !memcmp(last->data, enc->data, (size_t)T * D * 4),
                   "%s: encoder tap = the result's encoder output = the last layer's tap", model_dir);
            // x [T, D] = subsample(the mel tap), on its own: the subsampling tap precedes the scaling
            be_tensor feat, x;
            uint64_t mark = be_mark(r.be);
            float *want = NULL;
            vkasr_status s2 = be_alloc_tensor(r.be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){L, c->n_mels}, &feat);
            if (s2 == VKASR_OK)
                s2 = be_alloc_tensor(r.be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, D}, &x);
            if (s2 == VKASR_OK)
                s2 = be_upload(r.be, feat.addr, mel->data, be_nbytes(&feat));
            if (s2 == VKASR_OK)
                s2 = asr_subsample_tiled(r.m, r.be, &feat, &x, T, NULL, NULL, &e);
            if (s2 == VKASR_OK)
                want = download(r.be, &x);
            be_release(r.be, mark);
            EXPECT(want && sub->rows == (size_t)T && sub->cols == (size_t)D &&
                       !memcmp(sub->data, want, (size_t)T * D * 4),
                   "%s: the subsampling tap is not the subsampled features before scaling", model_dir);
            free(want);
        }
        printf("taps: %s, T = %lld, %s attention: %d stages and %llu logits taps in order, chunked = one chunk bit "
               "for bit, subsampling tapped before the x sqrt(D) scaling\n",
               model_dir, (long long)T, windows[a] ? "local" : "full", k ? k[1].n : 0,
               (unsigned long long)(k ? k[1].nlogits : 0));
        for (int run = 0; k && run < 2; run++) {
            taps_free(&k[run]);
            asr_output_free(&o[run]);
        }
        free(k);
    }
    close_rig(&r);
}

/* Full attention equals local attention with a window as long as the sequence (w = T - 1: every pair
 * in the band), bit for bit (on the device, f32): the two take different paths through the network (full: keys
 * and values of all rows first, residual updates in place, buffers swapped by every block and the
 * output copied back after an odd block count; local: the band of each chunk, x -> y -> x). One block
 * and the model's two. */
static void test_full_is_widest_local(const char *model_dir, const float *pcm, size_t n) {
    struct rig r;
    struct err e = {0};
    if (!open_rig(&r, NULL, model_dir, &e)) {
        EXPECT(0, "open %s: %s", model_dir, e.msg);
        return;
    }
    const int64_t T = asr_encoder_frames(&r.m->cfg, (int64_t)n / r.m->cfg.hop_length);
    const struct asr_chunks chunks = {100, 17, 33};
    const int all = r.m->cfg.n_layers;
    for (int layers = 1; layers <= all; layers += all - 1) {
        r.m->cfg.n_layers = layers;
        struct asr_options full = {.keep_features = true, .attention = ASR_ATT_FULL, .force = &chunks};
        struct asr_options local = {.keep_features = true, .attention = ASR_ATT_LOCAL, .window = T - 1, .force = &chunks};
        struct asr_output a = {0}, b = {0};
        uint64_t held;
        vkasr_status st = run_fresh(&r, pcm, n, &full, &a, &held, &e);
        if (st == VKASR_OK)
            st = run_fresh(&r, pcm, n, &local, &b, &held, &e);
        EXPECT(st == VKASR_OK, "%s: %s", model_dir, e.msg);
        EXPECT(st == VKASR_OK && a.plan.attention == ASR_ATT_FULL && b.plan.attention == ASR_ATT_LOCAL &&
                   a.frames == b.frames && !memcmp(a.encoder, b.encoder, (size_t)T * r.m->cfg.d_model * 4),
               "%s, %d layer(s): full attention differs from local attention with w = T - 1", model_dir, layers);
        printf("full = local w=T-1: %s, %d layer(s), T = %lld: encoder outputs bit-identical\n", model_dir, layers,
               (long long)T);
        asr_output_free(&a);
        asr_output_free(&b);
    }
    r.m->cfg.n_layers = all;
    close_rig(&r);
}

/* layers: run only the first `layers` blocks on both sides (0: all). */
static void test_backends(const char *model_dir, const struct audio *a, int64_t window, int layers) {
    struct rig dv, ref;
    struct err e = {0};
    if (!open_rig(&dv, NULL, model_dir, &e) || !open_rig(&ref, "ref", model_dir, &e)) {
        EXPECT(0, "open %s: %s", model_dir, e.msg);
        return;
    }
    if (layers > 0 && layers < dv.m->cfg.n_layers)
        dv.m->cfg.n_layers = ref.m->cfg.n_layers = layers;
    struct asr_options opt = {.keep_features = true, .attention = window ? ASR_ATT_LOCAL : ASR_ATT_FULL,
                              .window = window};
    struct asr_output ov = {0}, orf = {0};
    EXPECT(asr_run(dv.m, dv.be, a->samples, a->n, &opt, NULL, &ov, &e) == VKASR_OK, "device run: %s", e.msg);
    EXPECT(be_peak_bytes(dv.be) == be_scratch_bytes(ov.plan.scratch),
           "%s: the run held %llu bytes of scratch, planned %llu", model_dir,
           (unsigned long long)be_peak_bytes(dv.be), (unsigned long long)ov.plan.scratch);
    EXPECT(asr_run(ref.m, ref.be, a->samples, a->n, &opt, NULL, &orf, &e) == VKASR_OK, "reference run: %s", e.msg);
    if (ov.mel && orf.mel && ov.mel_frames == orf.mel_frames && ov.frames == orf.frames) {
        double mel = 0, se = 0, sr = 0;
        for (int64_t i = 0; i < ov.mel_frames * dv.m->cfg.n_mels; i++)
            mel = fmax(mel, fabs((double)ov.mel[i] - orf.mel[i]));
        for (int64_t i = 0; i < ov.frames * dv.m->cfg.d_model; i++) {
            double d = (double)ov.encoder[i] - orf.encoder[i];
            se += d * d;
            sr += (double)orf.encoder[i] * orf.encoder[i];
        }
        double rel = sqrt(se / (sr > 0 ? sr : 1));
        printf("backends: %s, %s attention, %d layers: mel max-abs %.3g, encoder relative %.3g, %zu vs %zu tokens\n",
               model_dir, window ? "local" : "full", dv.m->cfg.n_layers, mel, rel, ov.ntokens, orf.ntokens);
        EXPECT(mel < 1e-3, "%s: mel differs by %.3g", model_dir, mel);
        EXPECT(rel < 1e-4, "%s: encoder relative difference %.3g", model_dir, rel);
        bool same = ov.ntokens == orf.ntokens;
        for (size_t i = 0; same && i < ov.ntokens; i++)
            same = ov.tokens[i].id == orf.tokens[i].id && ov.tokens[i].frame == orf.tokens[i].frame &&
                   ov.tokens[i].duration == orf.tokens[i].duration;
        EXPECT(same, "%s: tokens differ between the device and the reference", model_dir);
    } else {
        EXPECT(0, "%s: outputs missing or shapes differ", model_dir);
    }
    asr_output_free(&ov);
    asr_output_free(&orf);
    close_rig(&dv);
    close_rig(&ref);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_asr DATA_DIR\n");
        return 2;
    }
    char wav[4096], dir[4096];
    snprintf(wav, sizeof wav, "%s/audio/speech_16k_mono.wav", argv[1]);
    struct audio a = {0};
    struct err e = {0};
    if (audio_load_file(wav, 16000, &a, &e) != VKASR_OK) {
        printf("FAIL: %s\n", e.msg);
        return 1;
    }
    /* 14 s of speech (the clip eight times): T = 172 encoder frames, longer than the local windows */
    const size_t reps = 8, n = a.n * reps;
    float *longer = malloc(n * sizeof *longer);
    for (size_t i = 0; longer && i < n; i++)
        longer[i] = a.samples[i % a.n];
    struct audio la = {.samples = longer, .n = longer ? n : 0, .rate = 16000};
    static const char *const heads[] = {"tdt", "rnnt", "ctc"};
    for (int h = 0; h < 3; h++) {
        snprintf(dir, sizeof dir, "%s/tiny/%s", argv[1], heads[h]);
        if (h == 0) {
            test_tiling(dir, &a);
            if (longer)
                test_chunking(dir, longer, n);
            if (longer)
                test_full_is_widest_local(dir, longer, n);
            if (longer)
                test_taps_chunked(dir, longer, n);
            /* local attention (spec §5.2) through the whole network against the C reference */
            test_backends(dir, &la, 8, 0);
        }
        test_backends(dir, &a, 0, 0);
    }
    EXPECT(longer != NULL, "out of host memory");
    free(longer);
    audio_free(&a);
    failures += tv_check(); /* every device is closed by now */
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
