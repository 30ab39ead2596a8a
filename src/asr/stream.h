/* stream.h — the cache-aware streaming session (NeMo's cache_aware_stream_step) inside src/asr:
 * stream_encoder.c advances one stream's encoder a chunk of R+1 frames at a time against its caches
 * on the device, stream_decoder.c carries the greedy transducer search across chunks. Internal to vkasr;
 * src/api/stream.c drives it. */
#ifndef VKASR_ASR_STREAM_H
#define VKASR_ASR_STREAM_H

#include "asr.h"

/* ---- the transducer search carried across chunks (stream_decoder.c) ---------------------------- */

/* The greedy TDT / RNN-T search of one stream (spec §6.4, §6.5) walked on the host over the frames of
 * each chunk as they come: its prediction-network state, the next frame and the max_symbols count live
 * here between chunks, so that the frames of all chunks decode exactly as one offline search over
 * them. Device tensors on the scratch stack of the backend it was made on. */
struct asr_stream_dec {
    be_tensor h[2][8], c[2][8];      /* ping-pong LSTM state per layer                             */
    int cur;
    be_tensor q;                     /* [1, P] the prediction network's projected output           */
    be_tensor f, z, y, best;         /* a chunk's encoder half of the joint, its inputs, logits, argmaxes */
    int64_t rows;                    /* the most frames a chunk has                                 */
    int64_t t, last_t;               /* the next frame to evaluate; the frame of the last emission  */
    int run;                         /* symbols emitted at the current frame                        */
    int max_sym;
};
/* Allocates the state for chunks of at most `rows` frames and runs the start-of-sequence step. */
vkasr_status asr_stream_dec_init(const struct asr_model *m, struct backend *be, struct asr_stream_dec *d, int64_t rows,
                                 int max_symbols, struct err *e);
/* Decodes the chunk enc [n, D] (f32) of frames t0 .. t0+n-1, appending tokens with those frame
 * numbers to out. */
vkasr_status asr_stream_dec_run(const struct asr_model *m, struct backend *be, struct asr_stream_dec *d,
                                const be_tensor *enc, int64_t t0, struct asr_output *out, struct err *e);

/* ---- the encoder with caches (stream_encoder.c) ------------------------------------------------ */

struct asr_stream;
struct asr_stream_opts {
    int max_symbols;                 /* 0: the model's                                              */
    bool keep_encoder;               /* copy every step's encoder frames to the host (tests)        */
};
/* The geometry of the trained [L, R] pair in use (cfg->ctx_sel): chunks of R+1 encoder frames; step 0
 * takes 1+8R mel frames, every later step the 9 before it again and 8(R+1) new ones, dropping its 2
 * first subsampled frames. */
struct asr_stream_geometry {
    int64_t left, chunk;             /* L, R+1 (encoder frames)                                     */
    int64_t mel_first, mel_step;     /* 1+8R, 8(R+1) new mel frames per step                        */
    int64_t mel_cache, drop;         /* 9, 2                                                        */
};
vkasr_status asr_stream_geometry(const struct model_config *c, struct asr_stream_geometry *g, struct err *e);

/* A stream on `be`: its caches are taken from the top of be's scratch stack and stay there until
 * asr_stream_free (nothing else may release below them meanwhile). Refuses models that are not
 * cache-aware (no chunked_limited menu), naming why. */
vkasr_status asr_stream_create(const struct asr_model *m, struct backend *be, const struct asr_stream_opts *o,
                               struct asr_stream **out, struct err *e);
/* Releases the caches (back to the scratch mark of its creation) and frees the stream. NULL: no-op. */
void asr_stream_free(struct asr_stream *s);
/* Advances the stream over the samples received so far: samples[i] is stream sample s0 + i, total
 * samples in all (s0 at most asr_stream_keep_from). Computes every mel frame whose right half-window
 * has arrived, runs one encoder step per complete chunk and decodes it, appending tokens (frames
 * counted from the stream's start) to out. final: the input ends at total; the last frames are
 * flushed as the offline run computes them, and the stream takes no more audio. */
vkasr_status asr_stream_advance(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, bool final,
                                struct asr_output *out, struct err *e);
/* The first sample a later call still reads (samples before it may be dropped). */
int64_t asr_stream_keep_from(const struct asr_stream *s);
/* The samples in all that the next step needs (the right half-window of its last mel frame). */
int64_t asr_stream_samples_needed(const struct asr_stream *s);
/* Encoder frames computed so far, and steps run. */
int64_t asr_stream_frames(const struct asr_stream *s);
int64_t asr_stream_steps(const struct asr_stream *s);
/* keep_encoder: the frames computed so far, [asr_stream_frames, d_model] f32 on the host. */
const float *asr_stream_encoder(const struct asr_stream *s);

#endif
