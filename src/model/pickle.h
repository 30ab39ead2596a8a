/* pickle.h — a restricted reader for the data.pkl of a PyTorch zip checkpoint holding a state dict
 * (name -> tensor). Only the opcodes and globals torch.save writes for one are accepted; nothing is
 * ever executed. The tensors' bytes live in the checkpoint's storage records, not here.
 */
#ifndef VKASR_PICKLE_H
#define VKASR_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "model_types.h"

#define PK_MAX_DIMS 8

/* One state-dict entry: a view (offset, size, stride, in elements) into the storage record
 * `data/<storage>` of the checkpoint, whose element type is type and element count storage_numel. */
struct pk_tensor {
    char *name;
    char *storage;
    enum mt_dtype type;
    int64_t storage_numel;
    int64_t offset;
    int nd;
    int64_t size[PK_MAX_DIMS], stride[PK_MAX_DIMS];
};

/* Reads a pickled state dict (src names the file in messages). Errors name the opcode or global found
 * and its byte offset. */
vkasr_status pickle_state_dict(const char *src, const uint8_t *data, size_t n, struct pk_tensor **out, int *count,
                               struct err *e);
void pickle_free(struct pk_tensor *t, int count);

#endif
