/* nemo.h — NVIDIA NeMo .nemo checkpoints (a tar, sometimes gzip-compressed, of model_config.yaml,
 * model_weights.ckpt and the SentencePiece tokenizer.model) read into a configuration, a vocabulary and
 * tensors under vkasr's canonical (HF transformers) names, for the model loader to take over.
 */
#ifndef VKASR_NEMO_H
#define VKASR_NEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model_types.h"

struct nemo_tensor {
    char *name;              /* HF name (nemo_map_name); preprocessor buffers keep their NeMo name  */
    enum mt_dtype type;
    int nd;
    int64_t ne[4];           /* row-major, outermost first                                         */
    const void *data;        /* into the mapped .nemo, or owned                                    */
    uint64_t nbytes;
    void *owned;             /* non-NULL when data was copied (compressed archive, strided view)    */
};

struct nemo_checkpoint {
    struct model_config cfg; /* head: the transducer's (TDT / RNNT) when there is one, else CTC     */
    bool has_transducer;     /* decoder.* / joint.* / encoder_projector.* present                    */
    bool has_ctc;            /* ctc_head.{weight,bias} present (a CTC model, or a hybrid's aux head) */
    char *model_class;       /* model_config.yaml's target, e.g. EncDecHybridRNNTCTCBPEModel        */
    struct tokenizer tok;
    struct model_langs langs; /* a prompt model's model_defaults.prompt_dictionary                   */
    struct nemo_tensor *tensors;
    int ntensors;
    /* private */
    void *map;               /* the mapped file (NULL for a borrowed memory image)                   */
    size_t map_size;
    void *archive;           /* struct nemo_archive: members the tensors may point into            */
};

/* Opens a .nemo file: maps it, reads the archive, maps the configuration (every option vkasr does not
 * implement is an error naming the key), reads the tokenizer and the state dict, renames the tensors
 * and checks that every tensor the configuration needs is present with its shape. Errors name the
 * file, the member and the field or tensor. *out is zeroed first and empty after an error. */
vkasr_status nemo_open(const char *path, struct nemo_checkpoint *out, struct err *e);
/* The same for an image in memory (borrowed: it must outlive out); name stands for the path. */
vkasr_status nemo_open_memory(const void *data, size_t size, const char *name, struct nemo_checkpoint *out,
                              struct err *e);
void nemo_close(struct nemo_checkpoint *ck);

/* Opens path into mf (nemo_model.c): the head `want` (MODEL_HEAD_AUTO or a vkasr_head), the
 * configuration, tokenizer and tensors; mf->nemo keeps the checkpoint (nemo_model_close frees it). The
 * caller validates and closes mf (also after an error). */
vkasr_status nemo_model_open(struct model_file *mf, const char *path, int want, struct err *e);
void nemo_model_close(void *nemo);

const struct nemo_tensor *nemo_find(const struct nemo_checkpoint *ck, const char *name);

#endif
