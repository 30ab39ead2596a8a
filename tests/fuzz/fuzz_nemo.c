/* fuzz_nemo.c — a whole .nemo image through nemo_open_memory: the tar / tar.gz container (libarchive),
 * model_config.yaml, the tokenizer and the zip checkpoint. An accepted checkpoint's tensors must lie
 * within the image or their own copies. Seeds: the .nemo files of tests/data/nemo. */
#include "fuzz.h"
#include "model/nemo.h"

#define NAME "fuzz.nemo"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct nemo_checkpoint ck;
    struct err e = {0};
    vkasr_status st = nemo_open_memory(data, size, NAME, &ck, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_MODEL || st == VKASR_ERR_NO_MEMORY, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, NAME) != NULL, "the message names no file: %s", e.msg);
        FUZZ_CHECK(ck.ntensors == 0 && ck.tok.n == 0, "not emptied after an error");
        return 0;
    }
    /* Touch every tensor byte, so ASan sees a tensor that points outside its archive. */
    uint8_t sum = 0;
    for (int i = 0; i < ck.ntensors; i++)
        for (uint64_t k = 0; k < ck.tensors[i].nbytes; k++)
            sum ^= ((const uint8_t *)ck.tensors[i].data)[k];
    FUZZ_SINK(sum);
    FUZZ_CHECK(ck.tok.n == ck.cfg.vocab_size, "%d pieces for a vocabulary of %d", (int)ck.tok.n, ck.cfg.vocab_size);
    nemo_close(&ck);
    return 0;
}
