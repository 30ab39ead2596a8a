/* fuzz_safetensors.c — a model.safetensors image through the library's path for HF directories: the
 * header (length, JSON, dtypes, shapes, data_offsets, overlaps), the tensor set against a fixed
 * configuration, and the canonical transform, which reads the tensor data (BN folding, the subsampling
 * permutation, widening to f32). A failure must be a model error naming the file or directory; every
 * tensor must lie inside the image (each byte is read here), every prepared one be f32 of its shape.
 * Seeds: the model.safetensors of tests/data/malformed/{base,st_*}, whose configuration is the one
 * below (tools/make_malformed_models.py: MICRO), and of tests/data/tiny. */
#include "fuzz.h"
#include "model/model_file.h"
#include "model/model_internal.h"
#include "model/model_schema.h"

#define DIR_NAME "fuzz"
#define FILE_NAME DIR_NAME "/model.safetensors"

/* tests/data/malformed/base/config.json and preprocessor_config.json */
static const struct model_config micro_ctc = {
    .head = VKASR_HEAD_CTC, .d_model = 8, .n_layers = 1, .n_heads = 2, .ff_size = 16, .conv_kernel = 3,
    .n_mels = 8, .sub_channels = 4, .sub_factor = 8, .xscaling = true, .attention_bias = true,
    .conv_bias = true, .att_left = -1, .att_right = -1, .vocab_size = 20, .sample_rate = 16000,
    .n_fft = 512, .win_length = 400, .hop_length = 160, .preemph = 0.97f};

static void check_failure(vkasr_status st, const struct err *e) {
    FUZZ_CHECK(st == VKASR_ERR_MODEL, "status %d: %s", (int)st, e->msg);
    FUZZ_CHECK(strstr(e->msg, DIR_NAME "/") != NULL, "the message names no file: %s", e->msg);
}

static void touch(const struct model_tensor *t) {
    volatile uint8_t sink = 0;
    const uint8_t *p = t->data;
    for (uint64_t k = 0; k < t->nbytes; k++)
        sink ^= p[k];
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct err e = {0};
    struct model_file *mf = calloc(1, sizeof *mf);
    FUZZ_CHECK(mf && (mf->path = strdup(DIR_NAME)), "out of memory");
    mf->cfg = micro_ctc;
    int map;
    vkasr_status st = model_map_memory(mf, data, size, FILE_NAME, &map, &e);
    if (st == VKASR_OK)
        st = st_parse(mf, map, &e);
    if (st == VKASR_OK)
        st = model_index_names(mf, FILE_NAME, &e);
    if (st != VKASR_OK) {
        check_failure(st, &e);
        model_close(mf);
        return 0;
    }
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        const uint8_t *p = t->data;
        FUZZ_CHECK(p >= data && t->nbytes <= size && (size_t)(p - data) <= size - t->nbytes,
                   "tensor '%s' [%td, +%llu) lies outside the %zu-byte image", t->name, p - data,
                   (unsigned long long)t->nbytes, size);
        touch(t);
    }
    st = model_validate(mf, &e);
    if (st == VKASR_OK)
        st = model_prepare(mf, &e);
    if (st != VKASR_OK) {
        check_failure(st, &e);
        model_close(mf);
        return 0;
    }
    for (int i = 0; i < mf->ntensors; i++) {
        const struct model_tensor *t = &mf->tensors[i];
        uint64_t numel = 1;
        for (int k = 0; k < t->nd; k++)
            numel *= (uint64_t)t->ne[k];
        FUZZ_CHECK(t->type == MT_F32 && t->nbytes == numel * 4, "prepared tensor '%s'", t->name);
        touch(t);
    }
    model_close(mf);
    return 0;
}
