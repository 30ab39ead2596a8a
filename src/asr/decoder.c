/* decoder.c — greedy decoding's entry point (spec §6): CTC (decoder_ctc.c) or a transducer search,
 * on the device (transducer_device.c, every input of a packed batch at once) or walked on the host
 * (transducer_host.c: stage taps, teacher forcing, comparisons; one input). */
#include "decoder_common.h"
#include "decoder_ctc.h"
#include "transducer.h"

uint64_t asr_decode_scratch(const struct model_config *c, int64_t frames, int64_t inputs) {
    const int64_t T = frames;
    if (T == 0)
        return 0;
    if (c->head == VKASR_HEAD_CTC)
        return dec_ctc_scratch(c, T);
    /* either transducer search may run for one input (taps, forcing and VKASR_DECODER=host take the host
     * walk); a batch takes the device loop */
    const uint64_t device = dec_transducer_device_scratch(c, T, inputs);
    if (inputs > 1)
        return device;
    const uint64_t host = dec_transducer_host_scratch(c, T);
    return host > device ? host : device;
}

vkasr_status asr_decode(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_options *opt,
                        const struct asr_hooks *hooks, const struct asr_batch *batch, struct asr_output *out,
                        struct err *e) {
    const int64_t n_in = batch ? batch->n : 1;
    for (int64_t i = 0; i < n_in; i++) {
        int64_t r0, n;
        dec_input_rows(batch, enc->ne[0], i, &r0, &n);
        out[i].frames = n;
    }
    if (enc->ne[0] == 0)
        return VKASR_OK;
    if (m->cfg.head == VKASR_HEAD_CTC)
        return dec_ctc(m, be, enc, hooks, batch, out, e);
    /* Stage taps want each step's logits and teacher forcing replaces the search's choices step by
     * step: both need the host in the loop (one input). */
    if (n_in == 1 && ((opt && (opt->host_decoder || opt->nforced)) || asr_tapped(hooks)))
        return dec_transducer_host(m, be, enc, opt, hooks, out, e);
    return dec_transducer_device(m, be, enc, opt, hooks, batch, out, e);
}
