/* model_file.h — the leaf of src/model (model_file.c): dtypes, paths and small files, file mappings,
 * the tensor table. Internal to src/model. */
#ifndef VKASR_MODEL_FILE_H
#define VKASR_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "model_types.h"

/* Largest JSON file we read into memory (tokenizer.json of an 8192-piece model is well under 1 MB). */
#define MODEL_MAX_JSON_BYTES (256u << 20)

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
/* Frees n tensors' names and owned data, then the array. */
void model_free_tensors(struct model_tensor *t, int n);
/* Whether s ends with suf. */
int ends_with(const char *s, const char *suf);

#endif
