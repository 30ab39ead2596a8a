/* model_internal.h — declarations shared by the files of src/model only: file mapping, the readers
 * (safetensors, HF JSON configs, tokenizer.json, GGUF), the expected-tensor table and dtype helpers.
 * Not part of the interface src/asr uses (that is model.h / tokenizer.h).
 */
#ifndef VKASR_MODEL_INTERNAL_H
#define VKASR_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Largest JSON file we read into memory (tokenizer.json of an 8192-piece model is well under 1 MB). */
#define MODEL_MAX_JSON_BYTES (256u << 20)

/* --- model.c: files, tensors, dtypes --------------------------------------------------------- */

size_t mt_dtype_size(enum mt_dtype t);
const char *mt_dtype_name(enum mt_dtype t);
int mt_dtype_is_float(enum mt_dtype t);

/* "dir/name", malloc'd; NULL on allocation failure. */
char *path_join(const char *dir, const char *name);
/* Reads a whole (small) file into a NUL-terminated malloc'd buffer. A missing file gives
 * VKASR_ERR_MODEL when missing_is_model_error (a required member of a model directory), else
 * VKASR_ERR_IO. */
vkasr_status read_small_file(const char *path, int missing_is_model_error, char **out, size_t *len, struct err *e);
/* Maps a whole file read-only and records it in mf (unmapped by model_close). *idx receives the map
 * index. Empty files are rejected (nothing to map). */
vkasr_status model_map_file(struct model_file *mf, const char *path, int *idx, struct err *e);
/* Records a memory image of a file (borrowed: it must outlive mf, and is never unmapped) as if it
 * were mapped; name stands for its path in messages. For parsers run on memory (tests, fuzzing). */
vkasr_status model_map_memory(struct model_file *mf, const void *data, size_t size, const char *name, int *idx,
                              struct err *e);
/* Appends a tensor (name copied). */
vkasr_status model_add_tensor(struct model_file *mf, const char *name, size_t name_len, enum mt_dtype type, int nd,
                              const int64_t *ne, const void *data, uint64_t nbytes, int map, struct err *e);
/* Most tensors a model file may hold (a 42-layer Parakeet has ~1700): bounds the work hostile files
 * can cause. */
#define MODEL_MAX_TENSORS 65536
/* Sorts the tensor names for model_find; a name present twice is an error naming it (src: the file or
 * directory for the message). */
vkasr_status model_index_names(struct model_file *mf, const char *src, struct err *e);
/* Formats a shape as "[a, b, c]" into buf. */
const char *shape_str(char *buf, size_t cap, int nd, const int64_t *ne);
/* The file a tensor came from (for messages). */
const char *model_tensor_file(const struct model_file *mf, const struct model_tensor *t);

/* The tensor set a configuration requires, in a fixed order. canonical: the kernel layout written by
 * model_prepare (and stored in GGUF); otherwise the HF transformers layout. */
struct tensor_spec {
    char name[96];
    int nd;
    int64_t ne[4];
    const char *why; /* config fields the shape comes from, for messages */
};
vkasr_status model_expected_tensors(const struct model_config *cfg, int canonical, struct tensor_spec **out, int *count,
                                    struct err *e);
/* Checks the tensor set of an opened model against its configuration (names, shapes, dtypes, and the
 * presence of tensors the configuration says are absent). */
vkasr_status model_validate(const struct model_file *mf, struct err *e);

/* --- hf_config.c ----------------------------------------------------------------------------- */

/* Reads config.json and preprocessor_config.json / processor_config.json of an HF directory. */
vkasr_status hf_config_load(const char *dir, struct model_config *cfg, struct err *e);
/* The same from the texts of config.json and of the feature extractor's file (names for messages). */
vkasr_status hf_config_parse(const char *cfg_name, const char *cfg_text, size_t cfg_len, const char *fe_name,
                             const char *fe_text, size_t fe_len, struct model_config *cfg, struct err *e);
/* Range checks shared by the HF and GGUF readers; src names the file for messages. */
vkasr_status config_check(const struct model_config *cfg, const char *src, struct err *e);

/* --- safetensors.c --------------------------------------------------------------------------- */

/* Maps model.safetensors (or the shards of model.safetensors.index.json) of dir and appends their
 * tensors to mf. */
vkasr_status st_load_dir(struct model_file *mf, const char *dir, struct err *e);
/* Parses one mapped safetensors file (exposed for tests of the parser alone). */
vkasr_status st_parse(struct model_file *mf, int map, struct err *e);

/* --- tokenizer.c ----------------------------------------------------------------------------- */

/* Reads an HF tokenizer.json (ParakeetConverter layout) into pieces 0..n_pieces-1. */
vkasr_status tok_load_hf_json(const char *path, int32_t n_pieces, struct tokenizer *t, struct err *e);
/* The same from the file's text (name for messages). */
vkasr_status tok_parse_hf_json(const char *name, const char *text, size_t len, int32_t n_pieces, struct tokenizer *t,
                               struct err *e);
/* Checks a tokenizer built by another reader (GGUF): every piece valid UTF-8, types in range. */
vkasr_status tok_check(const struct tokenizer *t, const char *src, struct err *e);

/* --- gguf.c ---------------------------------------------------------------------------------- */

/* Maps path and parses it (gguf_parse). */
vkasr_status gguf_load(struct model_file *mf, const char *path, struct err *e);
/* Parses a mapped GGUF image: header, metadata, tensor infos and offsets, configuration, vocabulary. */
vkasr_status gguf_parse(struct model_file *mf, int map, struct err *e);

#endif
