/* stream.h — the cache-aware streaming session (NeMo's cache_aware_stream_step) inside src/asr:
 * stream_encoder.c advances streams' encoders a chunk of R+1 frames at a time against their caches on
 * the device, many streams of one model in one step; stream_decoder.c carries each stream's greedy
 * transducer search across chunks. Internal to vkasr; src/api drives it. */
#ifndef VKASR_ASR_STREAM_H
#define VKASR_ASR_STREAM_H

#include "asr.h"

/* ---- the transducer search carried across chunks (stream_decoder.c) ---------------------------- */

/* A slot's search state between steps (host): the next frame, the frame of the last emission, the
 * symbols emitted at the current frame, the cap on them. */
struct asr_stream_slot {
    int64_t t, last_t;
    int run, max_sym;
};
/* The greedy TDT / RNN-T search (spec §6.4, §6.5) of a pool's S slots, walked on the host over the
 * frames of each step as they come, all streams of a step together: its prediction-network state lives
 * in the slots' rows of h, c and q (device, the scratch stack of the backend it was made on), the rest in
 * slot[], so that the frames of all chunks decode exactly as one offline search over them. */
struct asr_stream_search {
    int64_t S;
    be_tensor h[8], c[8];            /* [S, P] per LSTM layer                                       */
    be_tensor q;                     /* [S, P] the prediction network's projected output            */
    struct asr_stream_slot *slot;    /* [S]                                                         */
    int max_sym;                     /* symbols per frame of a stream that names none               */
    int32_t reset_id[2];             /* an end-of-utterance model's <EOU> and <EOB>: a chunk that
                                        emits one is followed by a fresh prediction network (zero
                                        LSTM state, the blank step), as NVIDIA's live runtime for these
                                        models (NeMo's voice agent, streaming_asr.py) resets its
                                        hypothesis after such a chunk; the encoder caches are kept, so
                                        the frames stay the offline run's                            */
    int nreset;
};
vkasr_status asr_stream_search_init(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                    int64_t slots, int max_symbols, struct err *e);
void asr_stream_search_fini(struct asr_stream_search *d);
/* Slot `slot` starts a new stream: zero state, the start-of-sequence step (max_symbols 0: the pool's). */
vkasr_status asr_stream_search_reset(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                     int64_t slot, int max_symbols, struct err *e);
/* Decodes a step: enc [N, D] (f32) holds B streams' frames, stream b's rows off[b] .. off[b+1]-1 its
 * frames t0[b] .., its state in slot slots[b]; tokens (with those frame numbers) appended to out[b]. */
vkasr_status asr_stream_search_run(const struct asr_model *m, struct backend *be, struct asr_stream_search *d,
                                   const be_tensor *enc, const int64_t *slots, const int64_t *off, const int64_t *t0,
                                   int64_t B, struct asr_output *const *out, struct err *e);

/* ---- the encoder with caches, many streams a step (stream_encoder.c) --------------------------- */

/* The geometry of the trained [L, R] pair in use (cfg->ctx_sel): chunks of R+1 encoder frames; step 0
 * takes 1+8R mel frames, every later step the 9 before it again and 8(R+1) new ones, dropping its 2
 * first subsampled frames. */
struct asr_stream_geometry {
    int64_t left, chunk;             /* L, R+1 (encoder frames)                                     */
    int64_t mel_first, mel_step;     /* 1+8R, 8(R+1) new mel frames per step                        */
    int64_t mel_cache, drop;         /* 9, 2                                                        */
};
vkasr_status asr_stream_geometry(const struct model_config *c, struct asr_stream_geometry *g, struct err *e);

/* A pool: the caches of `slots` streams of one model on one backend, every stream's in a slot of the
 * same device tensors, so that one step advances any set of them together (the linears over all their
 * rows at once, the attention over each stream's own keys in one call). Everything is taken from the
 * top of be's scratch stack at creation and stays there until asr_stream_pool_free (nothing else may
 * release below it meanwhile); streams join and leave without allocating. One thread at a time. */
struct asr_stream_pool;
vkasr_status asr_stream_pool_create(const struct asr_model *m, struct backend *be, int64_t slots, int max_symbols,
                                    struct asr_stream_pool **out, struct err *e);
void asr_stream_pool_free(struct asr_stream_pool *p);
int64_t asr_stream_pool_slots(const struct asr_stream_pool *p);
int64_t asr_stream_pool_free_slots(const struct asr_stream_pool *p);

struct asr_stream;
struct asr_stream_opts {
    bool keep_encoder;               /* copy every step's encoder frames to the host (tests)        */
    int max_symbols;                 /* symbols per frame (0: the pool's)                           */
    int prompt;                      /* a language-prompt model: its slot + 1 (api_language); 0 none */
};
/* A stream in a free slot of the pool (VKASR_ERR_DEVICE_MEMORY naming the pool's size when none is
 * free); its state starts as a new stream's. */
vkasr_status asr_stream_create(struct asr_stream_pool *p, const struct asr_stream_opts *o, struct asr_stream **out,
                               struct err *e);
/* Gives the slot back and frees the stream. NULL: no-op. */
void asr_stream_free(struct asr_stream *s);
/* Takes the samples received so far: samples[i] is stream sample s0 + i, total samples in all (s0 at
 * most asr_stream_keep_from). Computes every mel frame whose right half-window has arrived (on the
 * pool's backend). final: the input ends at total, and the stream takes no more audio. */
vkasr_status asr_stream_feed(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, bool final,
                             struct err *e);
/* Whether the stream has the mel frames of a step (or its last, partial one). */
bool asr_stream_ready(const struct asr_stream *s);
/* Whether the stream has ended: its input ended and every frame was computed. */
bool asr_stream_done(const struct asr_stream *s);
/* One step of the pool over n >= 1 ready streams of it, each one chunk (a stream's last may be
 * shorter): their subsampling, conformer layers and the greedy search of their frames, tokens
 * appended to out[i] (frames counted from stream i's start). A stream's results do not depend on the
 * others in the step. */
vkasr_status asr_stream_step(struct asr_stream_pool *p, struct asr_stream *const *streams, int64_t n,
                             struct asr_output *const *out, struct err *e);
/* feed, then steps of this stream alone while it is ready. */
vkasr_status asr_stream_advance(struct asr_stream *s, const float *samples, int64_t s0, int64_t total, bool final,
                                struct asr_output *out, struct err *e);
/* The first sample a later feed still reads (samples before it may be dropped). */
int64_t asr_stream_keep_from(const struct asr_stream *s);
/* The samples in all that the next step needs (the right half-window of its last mel frame). */
int64_t asr_stream_samples_needed(const struct asr_stream *s);
/* Encoder frames computed so far, and steps run. */
int64_t asr_stream_frames(const struct asr_stream *s);
int64_t asr_stream_steps(const struct asr_stream *s);
/* keep_encoder: the frames computed so far, [asr_stream_frames, d_model] f32 on the host. */
const float *asr_stream_encoder(const struct asr_stream *s);

#endif
