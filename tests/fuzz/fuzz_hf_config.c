/* fuzz_hf_config.c — config.json and the feature extractor's file (preprocessor_config.json or
 * processor_config.json) of an HF directory through the library's reader: model type and architectures,
 * the nested encoder_config, head fields and durations, the front-end sizes and the range checks.
 * Input: config.json, a NUL byte, then the feature extractor's file. A failure must be a model error
 * naming the file; an accepted configuration must be internally consistent and give a tensor set.
 * Seeds: those two files of each model directory under tests/data (tests/fuzz/seeds.sh). */
#include "fuzz.h"
#include "model/model_internal.h"
#include "model/model_schema.h"

#define CFG_NAME "fuzz/config.json"
#define FE_NAME "fuzz/preprocessor_config.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t cfg_len = nul ? (size_t)(nul - data) : size;
    const char *fe = nul ? (const char *)nul + 1 : "";
    size_t fe_len = nul ? size - cfg_len - 1 : 0;
    struct model_config c;
    struct err e = {0};
    vkasr_status st = hf_config_parse(CFG_NAME, (const char *)data, cfg_len, FE_NAME, fe, fe_len, &c, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_MODEL, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, CFG_NAME) || strstr(e.msg, FE_NAME), "the message names no file: %s", e.msg);
        return 0;
    }
    /* what the rest of the library relies on, checked apart from config_check */
    FUZZ_CHECK(c.head >= VKASR_HEAD_TDT && c.head <= VKASR_HEAD_CTC, "head %d", c.head);
    FUZZ_CHECK(c.d_model >= 1 && c.n_heads >= 1 && c.d_model % c.n_heads == 0, "d_model %d, %d heads", c.d_model,
               c.n_heads);
    FUZZ_CHECK(c.n_mels >= 8 && c.n_mels % 8 == 0 && c.sub_factor == 8, "%d mels, factor %d", c.n_mels, c.sub_factor);
    FUZZ_CHECK(c.vocab_size >= 1 && c.conv_kernel % 2 == 1, "vocab %d, kernel %d", c.vocab_size, c.conv_kernel);
    FUZZ_CHECK(c.sample_rate == VKASR_SAMPLE_RATE && c.hop_length >= 1 && c.hop_length <= c.win_length &&
                   c.win_length <= c.n_fft,
               "front end %d/%d/%d/%d", c.sample_rate, c.n_fft, c.win_length, c.hop_length);
    FUZZ_CHECK(c.preemph >= 0.0f && c.preemph < 1.0f, "preemphasis %g", (double)c.preemph);
    if (c.head == VKASR_HEAD_CTC) {
        FUZZ_CHECK(c.n_durations == 0 && c.pred_layers == 0, "CTC with a prediction network");
    } else {
        FUZZ_CHECK(c.pred_hidden >= 1 && c.pred_layers >= 1 && c.max_symbols >= 1, "prediction network");
        FUZZ_CHECK((c.head == VKASR_HEAD_TDT) == (c.n_durations > 0) && c.n_durations <= 16, "%d durations",
                   c.n_durations);
        for (int i = 0; i < c.n_durations; i++)
            FUZZ_CHECK(c.durations[i] >= 0, "duration %d", c.durations[i]);
    }
    for (int canonical = 0; canonical < 2; canonical++) {
        struct tensor_spec *sp = NULL;
        int n = 0;
        st = model_expected_tensors(&c, canonical, &sp, &n, &e);
        FUZZ_CHECK(st == VKASR_OK && n > 0, "tensor set: %s", e.msg);
        for (int i = 0; i < n; i++) {
            FUZZ_CHECK(sp[i].nd >= 1 && sp[i].nd <= 4, "'%s': %d dims", sp[i].name, sp[i].nd);
            for (int k = 0; k < sp[i].nd; k++)
                FUZZ_CHECK(sp[i].ne[k] >= 1, "'%s': dimension %d is %lld", sp[i].name, k, (long long)sp[i].ne[k]);
        }
        free(sp);
    }
    return 0;
}
