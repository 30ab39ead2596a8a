/* test_asr.c — the network layer on the device $VKASR_DEVICE names (lavapipe in CI; the CUDA backend in
 * test_asr_cuda) and the C reference:
 *  - halo-tiled subsampling with tiles of 1, 2, 3, 7 frames is bit-identical to one untiled pass;
 *  - the relative positional table against a direct double evaluation of sin/cos(fl32(r * w_j)),
 *    including r near 50000 (an hour of audio), row order and the per-session cache's slices;
 *  - the whole network (features, encoder, tokens) on the device in f32 against the C reference backend.
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
    struct be_device_options o = {.device = device, .validation = true, .log = &quiet};
    if (model_open(model_dir, &mf, e) || be_device_open(&o, &r->dev, e) || be_backend_create(r->dev, &r->be, e) ||
        asr_model_load(r->dev, mf, VKASR_PRECISION_F32, &r->m, e)) {
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
    vkasr_status st = asr_features(r.m, r.be, a->samples, a->n, &feat, &e);
    int64_t T = asr_encoder_frames(&r.m->cfg, feat.ne[0]);
    if (st == VKASR_OK)
        st = be_alloc_tensor(r.be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){T, r.m->cfg.d_model}, &x);
    if (st == VKASR_OK)
        st = asr_subsample_tiled(r.m, r.be, &feat, &x, T, &e);
    float *whole = st == VKASR_OK ? download(r.be, &x) : NULL;
    EXPECT(whole != NULL, "untiled subsampling: %s", e.msg);
    const int64_t tiles[] = {1, 2, 3, 7};
    for (int k = 0; whole && k < 4; k++) {
        st = asr_subsample_tiled(r.m, r.be, &feat, &x, tiles[k], &e);
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

static void test_posenc(void) {
    struct asr_cache c = {0};
    struct err e = {0};
    const int D = 64;
    const float *rows = NULL;
    const int64_t T = 50001;
    EXPECT(asr_posenc_table(&c, T, D, &rows, &e) == VKASR_OK, "table: %s", e.msg);
    double worst = 0;
    for (int64_t r = -(T - 1); rows && r <= T - 1; r += 97) {
        const float *row = rows + (T - 1 - r) * D;
        for (int j = 0; j < D / 2; j++) {
            float w = 1.0f / powf(10000.0f, (float)(2 * j) / (float)D);
            float arg = (float)r * w; /* the references' float32 argument */
            double ds = fabs(row[2 * j] - sin((double)arg)), dc = fabs(row[2 * j + 1] - cos((double)arg));
            worst = fmax(worst, fmax(ds, dc));
        }
    }
    EXPECT(worst < 1e-7, "positional table off by %.3g from direct evaluation", worst);
    /* a smaller T is a slice of the cached table: the row of r = 0 is centred */
    const float *small = NULL;
    EXPECT(asr_posenc_table(&c, 10, D, &small, &e) == VKASR_OK && small == rows + (T - 10) * D, "slice");
    EXPECT(small && small[9 * D] == 0.0f && small[9 * D + 1] == 1.0f, "PE(0) = (0, 1, ...)");
    printf("positional table: T = %lld, max error %.3g vs sin/cos(fl32(r*w)) in double\n", (long long)T, worst);
    asr_cache_free(&c);
}

static void test_backends(const char *model_dir, const struct audio *a) {
    struct rig vk, ref;
    struct err e = {0};
    if (!open_rig(&vk, NULL, model_dir, &e) || !open_rig(&ref, "cpu", model_dir, &e)) {
        EXPECT(0, "open %s: %s", model_dir, e.msg);
        return;
    }
    struct asr_cache cv = {0}, cr = {0};
    struct asr_options opt = {.keep_features = true};
    struct asr_output ov = {0}, orf = {0};
    EXPECT(asr_run(vk.m, vk.be, &cv, a->samples, a->n, &opt, NULL, &ov, &e) == VKASR_OK, "device run: %s", e.msg);
    EXPECT(asr_run(ref.m, ref.be, &cr, a->samples, a->n, &opt, NULL, &orf, &e) == VKASR_OK, "reference run: %s", e.msg);
    if (ov.mel && orf.mel && ov.mel_frames == orf.mel_frames && ov.frames == orf.frames) {
        double mel = 0, se = 0, sr = 0;
        for (int64_t i = 0; i < ov.mel_frames * vk.m->cfg.n_mels; i++)
            mel = fmax(mel, fabs((double)ov.mel[i] - orf.mel[i]));
        for (int64_t i = 0; i < ov.frames * vk.m->cfg.d_model; i++) {
            double d = (double)ov.encoder[i] - orf.encoder[i];
            se += d * d;
            sr += (double)orf.encoder[i] * orf.encoder[i];
        }
        double rel = sqrt(se / (sr > 0 ? sr : 1));
        printf("backends: %s: mel max-abs %.3g, encoder relative %.3g, %zu vs %zu tokens\n", model_dir, mel, rel,
               ov.ntokens, orf.ntokens);
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
    asr_cache_free(&cv);
    asr_cache_free(&cr);
    close_rig(&vk);
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
    test_posenc();
    static const char *const heads[] = {"tdt", "rnnt", "ctc"};
    for (int h = 0; h < 3; h++) {
        snprintf(dir, sizeof dir, "%s/tiny/%s", argv[1], heads[h]);
        if (h == 0)
            test_tiling(dir, &a);
        test_backends(dir, &a);
    }
    audio_free(&a);
    failures += tv_check(); /* every device is closed by now */
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
