/*
 * vkasr_debug.h — debugging hooks of libvkasr for vkasr's own tools and tests (vkasr compare, vkasr
 * transcribe --dump, the parity tests): stage taps, teacher forcing, kept features and a batch failure
 * hook, set on a session.
 * No stability promise: unlike vkasr.h, these change with the tools that use them, and the header is not
 * installed. Applications need none of it.
 */
#ifndef VKASR_DEBUG_H
#define VKASR_DEBUG_H

#include "vkasr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A decoder step: what the greedy search chose at one joint (transducers) or frame (CTC) evaluation. */
typedef struct vkasr_decoder_step {
    int64_t frame;                 /* encoder frame of the step                                 */
    int32_t token;                 /* vocabulary id, or vocab_size for blank                    */
    int32_t duration;              /* TDT: frames the step advances; RNN-T and CTC: 1           */
} vkasr_decoder_step;

/* Stage taps: copies of the network's intermediate results, handed to a callback as they are computed.
 * With a callback, every tapped tensor is copied to the host (the GPU waits for the host at each stage).
 * The stages of one run, in this order (T encoder frames, L mel frames, D = d_model, V = vocab_size):
 *   "mel"          [L, n_mels]   normalized log-mel features (the encoder's input)
 *   "subsampling"  [T, D]        output of the x8 subsampling, before the input scaling
 *   "layer"        [T, D]        output of conformer layer `index` (0 .. n_layers-1)
 *   "encoder"      [T, D]        encoder output (equal to the last layer's)
 *   "logits"       [rows, cols]  one row per decoder step, the first being step `index`; `steps` holds the
 *                                decoder's choice (the argmax) of each row. CTC: one step per encoder
 *                                frame, cols V+1 (blank last), several rows per call. RNN-T / TDT: one
 *                                joint evaluation the search consumed per call; cols V+1, followed for
 *                                TDT by n_durations duration logits. */
typedef struct vkasr_stage {
    const char *name;
    int64_t index;                 /* "layer": the layer; "logits": the step of the first row; else 0 */
    const float *data;             /* rows x cols, row-major float32                            */
    size_t rows, cols;
    const vkasr_decoder_step *steps; /* "logits": rows entries; NULL for the other stages      */
} vkasr_stage;

/* Receives one stage on the transcribing thread; data and steps are valid during the call only. */
typedef void (*vkasr_stage_callback)(const vkasr_stage *stage, void *user_data);

typedef struct vkasr_debug_params {
    uint32_t struct_size;
    bool keep_features;            /* keep the normalized mel and the encoder output in the result
                                      (vkasr_result_mel, vkasr_result_encoder)                     */
    vkasr_stage_callback stage_callback; /* NULL: no taps                                           */
    void *stage_user_data;
    /* Teacher forcing (RNN-T, TDT): the greedy search takes forced_steps[i] (token and, for TDT,
     * duration) at its step i instead of its own choice for the first n_forced_steps steps, then goes on
     * by itself, so that two devices can be compared at every step even where a near tie made their
     * choices differ. Each step's frame must be the frame the search is at (else the transcribe call
     * fails with VKASR_ERR_INVALID_ARG). "logits" taps still report this device's own choices; the
     * result's tokens follow the forced ones. CTC ignores it. The array is not copied. */
    const vkasr_decoder_step *forced_steps;
    size_t n_forced_steps;
    size_t batch_fail_above;       /* vkasr_transcribe_batch(): every packed batch of more than this
                                      many inputs fails as one out of device memory would, so that
                                      tests can watch failed batches halved; 0: off                 */
} vkasr_debug_params;

VKASR_API vkasr_debug_params vkasr_debug_params_default(void);

/* Applies params (copied; NULL: the defaults, i.e. none) to the session's following
 * vkasr_transcribe_pcm() and vkasr_transcribe_file() calls, and keep_features and batch_fail_above to
 * vkasr_transcribe_batch(), which refuses taps and forcing (VKASR_ERR_INVALID_ARG). Streams ignore them. forced_steps must
 * stay valid while set. Returns VKASR_ERR_INVALID_ARG (message in the session) for a NULL session,
 * n_forced_steps without forced_steps, or a session owned by a stream. */
VKASR_API vkasr_status vkasr_session_set_debug(vkasr_session *session, const vkasr_debug_params *params);

/* With keep_features: the normalized mel [frames][n_mels] and the encoder output [frames][dim], row-major
 * float32, valid as long as the result; NULL (and 0) otherwise. */
VKASR_API const float *vkasr_result_mel(const vkasr_result *result, size_t *frames, size_t *n_mels);
VKASR_API const float *vkasr_result_encoder(const vkasr_result *result, size_t *frames, size_t *dim);

/* Linear products the model's device has computed on an int8 path so far, by all of the model's sessions
 * (W8A8: a quantized weight's int8 form times x rounded to int8 per row; Vulkan where the device has
 * int8 tensor cores, or its emulated twin under VKASR_INT8=emu); 0 when none has run, and always on
 * the other backends. vkasr compare judges a device that ran any with its int8 tolerances. */
VKASR_API uint64_t vkasr_model_int8_products(const vkasr_model *model);

/* The cache-aware streaming sessions of a model (vkasr bench --streams): their geometry and the steps
 * run so far over all of the model's streams (the figures only grow; take differences). */
typedef struct vkasr_stream_steps {
    bool cache_aware;              /* the model's streams run cache-aware steps (else windows; all
                                      other fields 0)                                              */
    int chunk_frames;              /* encoder frames per step: right + 1 of the [left, right] in use */
    int frame_samples;             /* 16 kHz samples per encoder frame                             */
    int need_offset;               /* a step that ends at encoder frame F needs the samples before
                                      frame_samples * (F - 1) + need_offset (up to its last mel
                                      frame's right half-window)                                   */
    uint64_t steps;                /* steps run, each advancing every ready stream of one pool     */
    uint64_t rows;                 /* streams advanced by them, in all                             */
    double step_seconds;           /* their wall time (the device computing, the host waiting)     */
} vkasr_stream_steps;
VKASR_API vkasr_status vkasr_model_stream_steps(vkasr_model *model, vkasr_stream_steps *out);
/* The per-op GPU times of the model's stream steps since the last call (model loaded with profile =
 * true; otherwise, and before the first cache-aware stream, *count is 0): fills up to capacity entries,
 * sets *count to the number of ops, and starts the next interval. */
VKASR_API vkasr_status vkasr_model_stream_profile(vkasr_model *model, vkasr_op_profile *out, size_t capacity,
                                                  size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* VKASR_DEBUG_H */
