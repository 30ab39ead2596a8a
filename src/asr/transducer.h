/* transducer.h — the greedy TDT / RNN-T searches (spec §6.4, §6.5): transducer_host.c walks windows of
 * joint logits on the host, transducer_device.c loops on the device. Internal to src/asr. */
#ifndef VKASR_TRANSDUCER_H
#define VKASR_TRANSDUCER_H

#include "asr.h"

/* The search walked on the host over windows of joint logits: every transducer run with stage taps or
 * teacher forcing, and any with asr_options.host_decoder. */
vkasr_status dec_transducer_host(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                 const struct asr_options *opt, const struct asr_hooks *hooks, struct asr_output *out,
                                 struct err *e);
/* The same search looping on the device, the host reading its tokens once per batch of iterations:
 * identical tokens. A packed batch (batch->n > 1) searches all its inputs together, each into out[i]
 * exactly as alone. */
vkasr_status dec_transducer_device(const struct asr_model *m, struct backend *be, const be_tensor *enc,
                                   const struct asr_options *opt, const struct asr_hooks *hooks,
                                   const struct asr_batch *batch, struct asr_output *out, struct err *e);

#endif
