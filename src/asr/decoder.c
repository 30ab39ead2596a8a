/* decoder.c — greedy decoding's entry point (spec §6): CTC (decoder_ctc.c) or a transducer search,
 * on the device (transducer_device.c, every input of a packed batch at once) or walked on the host
 * (transducer_host.c: stage taps, teacher forcing, comparisons; one input). */
#include "decoder_common.h"
#include "decoder_ctc.h"
#include "prompt.h"
#include "transducer.h"

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
    if (m->cfg.n_prompts > 0) { /* the language prompt fuses every frame before the joint */
        if (!be_measuring(be) && !(opt && opt->prompt > 0))
            return err_set(e, VKASR_ERR_INVALID_ARG, "a language-prompt model needs a language");
        TRY(asr_prompt_fuse(m, be, enc, opt && opt->prompt > 0 ? opt->prompt - 1 : 0, e));
    }
    /* Stage taps want each step's logits and teacher forcing replaces the search's choices step by
     * step: both need the host in the loop (one input). */
    if (n_in == 1 && ((opt && (opt->host_decoder || opt->nforced)) || asr_tapped(hooks)))
        return dec_transducer_host(m, be, enc, opt, hooks, out, e);
    return dec_transducer_device(m, be, enc, opt, hooks, batch, out, e);
}
