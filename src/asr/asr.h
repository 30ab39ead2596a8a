/* asr.h — the Parakeet network on the backend interface: device weights, the encoder (front end,
 * subsampling, conformer stack) and the greedy decoders. src/api drives it; it never touches Vulkan. */
#ifndef VKASR_ASR_H
#define VKASR_ASR_H

#include "backend/backend.h"
#include "model/model.h"

struct asr_layer {
    be_tensor ff1_norm_w, ff1_norm_b, ff1_w1, ff1_b1, ff1_w2, ff1_b2;
    be_tensor att_norm_w, att_norm_b, wq, bq, wk, bk, wv, bv, wo, bo, wpos, bias_u, bias_v;
    be_tensor conv_norm_w, conv_norm_b, pw1_w, pw1_b, dw_w, dw_b, pw2_w, pw2_b;
    be_tensor ff2_norm_w, ff2_norm_b, ff2_w1, ff2_b1, ff2_w2, ff2_b2;
    be_tensor out_norm_w, out_norm_b;
};

struct asr_model {
    struct model_config cfg;
    struct tokenizer tok;            /* moved out of the model file                            */
    vkasr_precision precision;       /* F32 or F16 (never AUTO)                               */
    struct be_device *dev;
    /* front end */
    be_tensor window;                /* [win_length]                                          */
    be_tensor melbank;               /* [n_mels, n_fft/2+1] f32 (a linear weight)             */
    /* subsampling: convs 0 (1->C), 2/5 depthwise, 3/6 pointwise, then the linear             */
    be_tensor sub_w0, sub_b0, sub_w2, sub_b2, sub_w3, sub_b3, sub_w5, sub_b5, sub_w6, sub_b6;
    be_tensor sub_lin_w, sub_lin_b;
    struct asr_layer *layers;
    /* CTC head */
    be_tensor ctc_w, ctc_b;
    /* transducer: prediction net, joint */
    be_tensor embed;                 /* [V+1, P]                                              */
    be_tensor lstm_wih[8], lstm_whh[8], lstm_b[8];
    be_tensor pred_proj_w, pred_proj_b, enc_proj_w, enc_proj_b, joint_w, joint_b;
    uint64_t n_params;
};

vkasr_status asr_model_load(struct be_device *dev, struct model_file *mf, vkasr_precision precision,
                            struct asr_model **out, struct err *e);
void asr_model_free(struct asr_model *m);

/* Host-side callbacks of one run (progress in [0,1] over encoder + decoder, abort polling). */
struct asr_hooks {
    void (*progress)(void *ud, const char *stage, double fraction, double audio_seconds_done);
    bool (*should_abort)(void *ud);
    /* Called after tokens were appended to the output during decoding (segment callbacks). */
    void (*tokens_added)(void *ud);
    /* Stage taps (vkasr_stage in vkasr.h): NULL costs nothing; set, each tapped tensor is copied out. */
    void (*stage)(void *ud, const vkasr_stage *s);
    void *ud;
};

/* Hands a copy of the device tensor t ([rows, cols]) to hooks->stage as stage `name`, `index`;
 * returns at once without a tap. */
vkasr_status asr_tap(const struct asr_hooks *hooks, struct backend *be, const char *name, int64_t index,
                     const be_tensor *t, struct err *e);
static inline bool asr_tapped(const struct asr_hooks *hooks) { return hooks && hooks->stage; }

/* Per-session state kept between runs: the positional table cache. */
struct asr_cache {
    float *pos_host;                 /* sinusoid table rows for r = Tmax-1 .. -(Tmax-1)        */
    int64_t pos_tmax;
};
void asr_cache_free(struct asr_cache *c);

struct asr_token {
    int32_t id;
    int64_t frame;
    int32_t duration;                /* frames the token spans (TDT duration; 1 for RNN-T; CTC run) */
};

struct asr_output {
    struct asr_token *tokens;
    size_t ntokens, captokens;
    int64_t frames;                  /* encoder frames                                        */
    int64_t mel_frames;
    float *mel;                      /* [mel_frames][n_mels] when keep_features               */
    float *encoder;                  /* [frames][d_model] when keep_features                  */
    double features_ms, encoder_ms, decoder_ms;
};
void asr_output_free(struct asr_output *o);

struct asr_options {
    int max_symbols;                 /* 0: model default                                      */
    bool keep_features;
    const vkasr_decoder_step *forced; /* transducers: teacher forcing of the first nforced steps */
    size_t nforced;
    bool host_decoder;               /* transducers: walk the search on the host (VKASR_DECODER=host);
                                        taps and teacher forcing always do                       */
    int decoder_window;              /* device decoder: frames per joint window (1, 2, 4 or 8); 0:
                                        chosen per batch (transducer_device.c). Tests set it.     */
};

/* Runs the whole network on 16 kHz mono samples. On VKASR_ABORTED the tokens decoded so far are kept.
 * Scratch memory of `be` is released before returning. */
vkasr_status asr_run(const struct asr_model *m, struct backend *be, struct asr_cache *cache, const float *samples,
                     size_t n, const struct asr_options *opt, const struct asr_hooks *hooks, struct asr_output *out,
                     struct err *e);

/* Pieces of asr_run, exposed for tests. */
vkasr_status asr_features(const struct asr_model *m, struct backend *be, const float *samples, size_t n,
                          be_tensor *feat, struct err *e);
vkasr_status asr_encode(const struct asr_model *m, struct backend *be, struct asr_cache *cache, const be_tensor *feat,
                        const struct asr_hooks *hooks, be_tensor *enc, struct err *e);
vkasr_status asr_decode(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_options *opt,
                        const struct asr_hooks *hooks, struct asr_output *out, struct err *e);

/* Subsampling of features [L, M] into x [T, D] in halo tiles of `tile` encoder frames (asr_subsample
 * picks the tile from a memory budget); any tile size gives bit-identical results. */
vkasr_status asr_subsample(const struct asr_model *m, struct backend *be, const be_tensor *feat, be_tensor *x,
                           struct err *e);
vkasr_status asr_subsample_tiled(const struct asr_model *m, struct backend *be, const be_tensor *feat, be_tensor *x,
                                 int64_t tile, struct err *e);

/* Sinusoid rows PE(r) for r = T-1 down to -(T-1): out [2T-1][D] (spec §3.2/3.3; argument rounded to
 * float32 like both reference implementations, sin/cos evaluated in double). */
vkasr_status asr_posenc_table(struct asr_cache *c, int64_t T, int D, const float **rows, struct err *e);

/* Subsampling output length: ceil(L/8) for factor 8 (each stride-2 stage: ceil(l/2)). */
int64_t asr_encoder_frames(const struct model_config *cfg, int64_t mel_frames);

#endif
