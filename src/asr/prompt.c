/* prompt.c — Nemotron 3.5's language prompt before the joint (NVIDIA-NeMo/Speech
 * rnnt_bpe_models_prompt.py; transformers' Nemotron3_5AsrPromptProjector): every encoder frame joined
 * with the one-hot of the chosen slot, then Linear -> ReLU -> Linear. The one-hot's product with the
 * first Linear is its slot's column, so the join is that column added to the first bias
 * (prompt_projector.language holds the columns as rows); the rest is two products on any backend. */
#include "prompt.h"

/* Rows fused per pass: the hidden activations of a pass are rows x prompt_hidden f32. */
#define PROMPT_ROWS 4096

vkasr_status asr_prompt_fuse(const struct asr_model *m, struct backend *be, const be_tensor *enc, int slot,
                             struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t T = enc->ne[0], H = c->prompt_hidden;
    if (!be_measuring(be) && (slot < 0 || slot >= c->n_prompts))
        return err_set(e, VKASR_ERR_INVALID_ARG, "language prompt slot %d is outside the model's %d slots", slot,
                       c->n_prompts);
    const int64_t rows = T < PROMPT_ROWS ? T : PROMPT_ROWS;
    const uint64_t mark = be_mark(be);
    be_tensor bias, h;
    vkasr_status st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 1, (int64_t[]){H}, &bias);
    if (st == VKASR_OK)
        st = be_alloc_tensor(be, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){rows > 0 ? rows : 1, H}, &h);
    if (st != VKASR_OK || be_measuring(be)) { /* a measuring run (plan.c) counts the two and ends here */
        be_release(be, mark);
        return st;
    }
    // bias: [H] = b1 + W1[:, D + slot]  (the one-hot's contribution)
    const be_tensor lang = be_tensor_row(&m->prompt_lang, slot);
    st = be_binary(be, &(struct op_binary){.a = m->prompt_b1, .b = lang, .y = bias, .kind = BINARY_ADD,
                                            .alpha = 1.0f, .beta = 1.0f});
    for (int64_t r0 = 0; st == VKASR_OK && r0 < T; r0 += rows) {
        const int64_t n = T - r0 < rows ? T - r0 : rows;
        const be_tensor x = be_tensor_rows(enc, r0, n), hn = be_tensor_rows(&h, 0, n);
        // h: [n, H] = relu(x W1^T + bias);  x: [n, D] = h W2^T + b2 (in place: h holds what x was)
        st = be_linear(be, &(struct op_linear){.x = x, .w = m->prompt_w1, .bias = bias, .y = hn, .act = ACT_RELU,
                                                .alpha = 1.0f});
        if (st == VKASR_OK)
            st = be_linear(be, &(struct op_linear){.x = hn, .w = m->prompt_w2, .bias = m->prompt_b2, .y = x,
                                                    .alpha = 1.0f});
    }
    if (st != VKASR_OK && e->code == VKASR_OK)
        err_set(e, st, "%s", be->err.msg);
    be_release(be, mark);
    return st;
}
