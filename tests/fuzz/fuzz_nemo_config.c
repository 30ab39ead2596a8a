/* fuzz_nemo_config.c — model_config.yaml through libyaml and the NeMo -> model_config mapping: a
 * configuration is either refused with a message naming the file or passes the range checks every
 * model configuration passes. Seeds: the model_config.yaml of the .nemo fixtures
 * (tests/data/fuzz/nemo_config). */
#include "fuzz.h"
#include "model/model_internal.h"
#include "model/nemo_internal.h"

#define NAME "fuzz/model_config.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct nemo_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    char *tp = NULL;
    struct err e = {0};
    vkasr_status st = nemo_config_parse(NAME, (const char *)data, size, &ck, &tp, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_MODEL || st == VKASR_ERR_NO_MEMORY, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, NAME) != NULL, "the message names no file: %s", e.msg);
        FUZZ_CHECK(tp == NULL, "a tokenizer path after an error");
    } else {
        FUZZ_CHECK(config_check(&ck.cfg, NAME, &e) == VKASR_OK, "accepted configuration fails config_check: %s",
                   e.msg);
        FUZZ_CHECK(ck.has_transducer || ck.has_ctc, "no head");
    }
    free(tp);
    free(ck.model_class);
    return 0;
}
