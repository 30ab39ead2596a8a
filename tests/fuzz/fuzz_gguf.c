/* fuzz_gguf.c — a GGUF model image through the reader the library uses for .gguf files (header, metadata
 * keys and values, tensor infos, offsets, configuration, vocabulary, then the tensor set against the
 * configuration). A failure must be a model error naming the file; a success must hold only tensors
 * inside the image (every byte is read here; quantized ones in whole rows of blocks) and a vocabulary
 * that decodes to valid UTF-8.
 * Seeds: the .gguf files of tests/data/malformed (tools/make_malformed_models.py). */
#include "fuzz.h"
#include "model/model_types.h"
#include "model/quant.h"
#include "model/tokenizer.h"

#define NAME "fuzz.gguf"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct err e = {0};
    struct model_file *mf = NULL;
    vkasr_status st = model_open_gguf_memory(data, size, NAME, &mf, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_MODEL && !mf, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, NAME) != NULL, "the message does not name the file: %s", e.msg);
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        const uint8_t *p = t->data;
        FUZZ_CHECK(p >= data && t->nbytes <= size && (size_t)(p - data) <= size - t->nbytes,
                   "tensor '%s' [%td, +%llu) lies outside the %zu-byte image", t->name, p - data,
                   (unsigned long long)t->nbytes, size);
        if (MT_IS_QUANT(t->type)) { /* whole blocks along the row */
            const uint32_t qt = quant_type_of_mt(t->type);
            const int64_t k = t->ne[t->nd - 1];
            FUZZ_CHECK(k % quant_traits(qt)->block == 0 && t->nbytes % quant_row_bytes(qt, k) == 0,
                       "tensor '%s': %llu bytes are not whole rows of %lld", t->name, (unsigned long long)t->nbytes,
                       (long long)k);
        }
        for (uint64_t k = 0; k < t->nbytes; k++)
            sink ^= p[k];
    }
    (void)sink;
    FUZZ_CHECK(mf->tok.n == mf->cfg.vocab_size, "%d pieces for vocab_size %d", mf->tok.n, mf->cfg.vocab_size);
    for (int32_t id = 0; id < mf->tok.n; id++) {
        char *text = NULL;
        st = tok_piece_text(&mf->tok, id, &text, &e);
        FUZZ_CHECK(st == VKASR_OK && fuzz_utf8_ok(text, strlen(text)), "piece %d decodes to invalid UTF-8", id);
        free(text);
    }
    model_close(mf);
    return 0;
}
