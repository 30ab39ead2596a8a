/* api.h — the public objects' internals, shared by the files of src/api (vkasr.c: models, sessions,
 * results; stream.c: live streams). Nothing outside src/api includes it. */
#ifndef VKASR_API_H
#define VKASR_API_H

#include "asr/asr.h"
#include "asr/transcript.h"

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

struct vkasr_model {
    struct logger log;
    struct be_device *dev;
    struct asr_model *am;
    vkasr_model_info info;
};

struct vkasr_result {
    struct transcript tr;
    struct asr_output out;
    double duration;
    bool partial;                    /* the call was aborted: tokens cover the audio only in part */
    vkasr_timings timings;
    size_t mel_dim, enc_dim;
};

struct vkasr_session {
    vkasr_model *model;
    struct backend *be;
    struct asr_cache cache;
    struct err err;
    struct vkasr_result result;
    /* the call in progress */
    const vkasr_transcribe_params *params;
    size_t seg_token0;               /* first token not yet published in a completed segment */
    double call_start_ms;
    bool host_decoder;               /* VKASR_DECODER=host at creation: transducers walked on the host */
    struct vkasr_stream *stream;     /* a live stream owns the session while it exists (stream.c) */
};

#endif
