/* prompt.h — the language prompt of Nemotron 3.5 models (prompt.c). Internal to src/asr. */
#ifndef VKASR_PROMPT_H
#define VKASR_PROMPT_H

#include "asr.h"

/* enc [T, D] (f32, the encoder's output) in place = the prompt MLP over [enc | one-hot(slot)], what the
 * joint takes (m->cfg.n_prompts > 0). On a measuring backend only its scratch is counted. */
vkasr_status asr_prompt_fuse(const struct asr_model *m, struct backend *be, const be_tensor *enc, int slot,
                             struct err *e);

#endif
