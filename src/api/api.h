/* api.h — the public objects' internals, shared by the files of src/api (vkasr.c: models, sessions,
 * results; stream.c: live streams; debug.c: the hooks of vkasr_debug.h). Nothing outside src/api
 * includes it. */
#ifndef VKASR_API_H
#define VKASR_API_H

#include "asr/asr.h"
#include "asr/transcript.h"
#include "vkasr_debug.h"

#include <pthread.h>
#include <string.h>

/* Copies the fields a caller's (possibly older, smaller) struct provides over the defaults. */
#define READ_PARAMS(dst, src, dflt)                                                                    \
    do {                                                                                               \
        dst = dflt;                                                                                    \
        if (src) {                                                                                     \
            size_t n_ = (src)->struct_size < sizeof(dst) ? (src)->struct_size : sizeof(dst);           \
            memcpy(&dst, src, n_);                                                                     \
            dst.struct_size = sizeof(dst);                                                             \
        }                                                                                              \
    } while (0)

/* The model loader's head (model_open_head) for a vkasr_decoder; -2 for a value out of range. */
static inline int api_model_head(vkasr_decoder d) {
    return d == VKASR_DECODER_AUTO ? MODEL_HEAD_AUTO : d == VKASR_DECODER_TDT ? VKASR_HEAD_TDT
           : d == VKASR_DECODER_RNNT ? VKASR_HEAD_RNNT : d == VKASR_DECODER_CTC ? VKASR_HEAD_CTC : -2;
}

struct stream_pools;
struct vkasr_model {
    struct logger log;
    struct be_device *dev;
    struct asr_model *am;
    vkasr_model_info info;
    /* The caches of the model's cache-aware streams (stream.c): made with the first, shared by all */
    pthread_mutex_t pools_lock;
    struct stream_pools *pools;
    int stream_slots;                /* vkasr_model_params.stream_slots                               */
};
/* Frees the model's stream pools (its streams are gone). */
void api_stream_pools_free(vkasr_model *m);

struct vkasr_result {
    struct transcript tr;
    struct asr_output out;
    double duration;
    bool partial;                    /* the call was aborted: tokens cover the audio only in part */
    vkasr_timings timings;
    size_t mel_dim, enc_dim;
    vkasr_status status;             /* a batch input's outcome (vkasr_result_status)              */
    char *error;                     /* its message (malloc'd; NULL: none)                         */
};

struct vkasr_session {
    vkasr_model *model;
    struct backend *be;
    struct err err;
    struct vkasr_result result;
    struct vkasr_result *batch;      /* vkasr_transcribe_batch()'s results, one per input          */
    size_t nbatch;
    /* the call in progress */
    const vkasr_transcribe_params *params;
    size_t seg_token0;               /* first token not yet published in a completed segment */
    double call_start_ms;
    bool host_decoder;               /* VKASR_DECODER=host at creation: transducers walked on the host */
    int prompt;                      /* the call's language prompt (asr_options.prompt; api_check_params) */
    vkasr_debug_params debug;        /* vkasr_session_set_debug(); zeroed: none                    */
    struct vkasr_stream *stream;     /* a live stream owns the session while it exists (stream.c) */
    /* -v's start-up split: the first call's pipelines and scratch blocks (api_first_call_*) */
    bool called;
    struct be_pipelines pipes0;
    double scratch_ms0;
};

/* The start-up split's last lines, for a session's first transcription (from begin to end of the call,
 * nothing after): the pipelines the device created meanwhile (another session's of the time included),
 * the scratch blocks made and the call's time. */
void api_first_call_begin(vkasr_session *s);
void api_first_call_end(vkasr_session *s, double call_ms);
/* A backend's per-op GPU times (vkasr_session_profile, vkasr_model_stream_profile): up to capacity
 * entries into out (which may be NULL); returns how many ops there are. */
size_t api_profile_copy(const struct backend *be, vkasr_op_profile *out, size_t capacity);
/* Frees what a result holds and zeroes it. */
void api_result_clear(struct vkasr_result *r);
/* Finishes a result after its run (status st): the transcript from its tokens, partial, timings
 * (total from t0_ms). Returns st, or the transcript's error. */
vkasr_status api_result_finish(vkasr_session *s, struct vkasr_result *r, vkasr_status st, double load_ms, double t0_ms);
/* The transcribe parameters checked before any audio is decoded (the message in the session). */
vkasr_status api_check_params(vkasr_session *s, const vkasr_transcribe_params *p);
/* The language prompt of a call: *prompt = 1 + the slot of `language` (NULL or "": "auto") for a
 * language-prompt model, 0 for another model (which takes only NULL, "" and "auto");
 * VKASR_ERR_INVALID_ARG naming the model's languages for a name its map lacks. */
vkasr_status api_language(const struct asr_model *am, const char *language, int *prompt, struct err *e);
/* The network's options from the transcribe parameters. */
struct asr_options api_options(const vkasr_session *s, const vkasr_transcribe_params *p);

#endif
