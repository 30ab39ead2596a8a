/* fuzz_nemo_spm.c — the SentencePiece protobuf reader (sentencepiece.c): an accepted vocabulary passes
 * tok_check and decodes every piece to valid UTF-8. Seeds: the SentencePiece models of tests/data/fixtures/spm. */
#include "fuzz.h"
#include "model/model_internal.h"
#include "model/nemo_internal.h"

#define NAME "fuzz/tokenizer.model"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct tokenizer t;
    struct err e = {0};
    vkasr_status st = spm_parse(NAME, data, size, &t, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_MODEL || st == VKASR_ERR_NO_MEMORY, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, NAME) != NULL && t.n == 0, "message or state after an error: %s", e.msg);
        return 0;
    }
    FUZZ_CHECK(tok_check(&t, NAME, &e) == VKASR_OK, "accepted vocabulary fails tok_check: %s", e.msg);
    for (int32_t id = 0; id < t.n && id < 4096; id++) {
        char *text = NULL;
        FUZZ_CHECK(tok_piece_text(&t, id, &text, &e) == VKASR_OK, "piece %d: %s", (int)id, e.msg);
        FUZZ_CHECK(fuzz_utf8_ok(text, strlen(text)), "piece %d is not valid UTF-8", (int)id);
        free(text);
    }
    tok_free(&t);
    return 0;
}
