/* decoder_ctc.h — greedy CTC decoding (decoder_ctc.c, spec §6): argmax, collapse, drop blank.
 * Internal to src/asr. */
#ifndef VKASR_DECODER_CTC_H
#define VKASR_DECODER_CTC_H

#include "asr.h"

/* CTC over every row of enc, each input of the batch (NULL: one) into out[i]. */
vkasr_status dec_ctc(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_hooks *hooks,
                     const struct asr_batch *batch, struct asr_output *out, struct err *e);

#endif
