/* decoder.h — pieces shared by the greedy decoders (src/asr/decoder.c: CTC and the entry point;
 * transducer_host.c: the transducer search walked on the host; transducer_device.c: the transducer
 * search looping on the device). Internal to src/asr. */
#ifndef VKASR_DECODER_H
#define VKASR_DECODER_H

#include "asr.h"

/* Appends a token to the output. */
vkasr_status dec_push_token(struct asr_output *o, int32_t id, int64_t frame, int32_t dur, struct err *e);
/* The abort hook's answer (false without one). */
bool dec_aborted(const struct asr_hooks *h);
/* Reports decoder progress: t of T frames. */
void dec_progress(const struct asr_hooks *h, int64_t t, int64_t T, double frame_seconds);
/* Seconds per encoder frame. */
double dec_frame_seconds(const struct model_config *c);

/* Greedy TDT / RNN-T (spec §6.4, §6.5), the host walking windows of joint logits: every transducer
 * run with stage taps or teacher forcing, and any with asr_options.host_decoder. */
vkasr_status dec_transducer_host(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                 const struct asr_options *opt, const struct asr_hooks *hooks, struct asr_output *out,
                                 struct err *e);
/* The same search looping on the device, the host reading its tokens once per batch of iterations:
 * identical tokens. A packed batch (batch->n > 1) searches all its inputs together, each into out[i]
 * exactly as alone. */
vkasr_status dec_transducer_device(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                   const struct asr_options *opt, const struct asr_hooks *hooks,
                                   const struct asr_batch *batch, struct asr_output *out, struct err *e);

/* Scratch bytes each transducer search allocates for T frames (the memory plan's decoder phase). */
uint64_t dec_transducer_host_scratch(const struct model_config *c, int64_t T);
uint64_t dec_transducer_device_scratch(const struct model_config *c, int64_t T, int64_t inputs);

#endif
