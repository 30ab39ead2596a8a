/* nemo_internal.h — what the .nemo reader's files share: the outer archive's members, the PyTorch zip
 * checkpoint, the YAML tree and its mapping onto struct model_config, the SentencePiece model reader.
 * nemo.h is the interface the model loader calls.
 */
#ifndef VKASR_NEMO_INTERNAL_H
#define VKASR_NEMO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nemo.h"

/* --- nemo_archive.c: the tar (or tar.gz) container ------------------------------------------ */

struct nemo_member {
    char *name;              /* without a leading "./"                                          */
    const uint8_t *data;     /* into the archive's image when stored there contiguously, else owned */
    uint64_t size;
    void *owned;
};

struct nemo_archive {
    struct nemo_member *m;
    int n;
};

/* Reads every regular file of a tar or gzip-compressed tar image (src names it in messages). Members
 * stored uncompressed point into image, which must outlive the archive; compressed ones are copied. */
vkasr_status nemo_archive_read(const char *src, const void *image, size_t size, struct nemo_archive *a,
                               struct err *e);
void nemo_archive_free(struct nemo_archive *a);
const struct nemo_member *nemo_archive_find(const struct nemo_archive *a, const char *name);

/* --- nemo_ckpt.c: model_weights.ckpt (PyTorch zip: data.pkl + one record per storage) ----------- */

/* Reads the state dict of a PyTorch zip checkpoint image into tensors named as stored (NeMo names).
 * Contiguous tensors point into the image; strided views are copied. A pre-zip (legacy) checkpoint
 * is refused by name. */
vkasr_status nemo_ckpt_read(const char *src, const uint8_t *image, uint64_t size, struct nemo_tensor **out,
                            int *count, struct err *e);
void nemo_tensors_free(struct nemo_tensor *t, int count);

/* --- nemo_yaml.c: a YAML document as a tree ----------------------------------------------------- */

enum ny_kind { NY_SCALAR, NY_SEQ, NY_MAP };

struct ny_node {
    enum ny_kind kind;
    char *str;               /* SCALAR: its text                                                 */
    bool plain;              /* SCALAR: unquoted (so null/true/numbers are typed)                 */
    int line;                /* 1-based, for messages                                            */
    struct ny_node **kids;   /* SEQ items; MAP values                                            */
    char **keys;             /* MAP keys                                                         */
    int n, cap;
};

vkasr_status ny_parse(const char *src, const char *text, size_t len, struct ny_node **root, struct err *e);
void ny_free(struct ny_node *n);
/* The value of key in a mapping (NULL when absent or when map is not a mapping). */
const struct ny_node *ny_get(const struct ny_node *map, const char *key);
/* A plain scalar spelling YAML's null (null, Null, NULL, ~) or an empty value. */
bool ny_is_null(const struct ny_node *n);

/* --- nemo_config.c: model_config.yaml -> struct model_config ---------------------------------- */

/* Maps a parsed model_config.yaml (src for messages) onto ck->cfg, ck->has_transducer, ck->has_ctc
 * and ck->model_class; *tokenizer_path receives tokenizer.model_path without its "nemo:" prefix (malloc'd,
 * NULL when absent). Every option vkasr does not implement is an error naming the key and value. */
vkasr_status nemo_config_map(const char *src, const struct ny_node *root, struct nemo_checkpoint *ck,
                             char **tokenizer_path, struct err *e);
/* The same from the YAML text. */
vkasr_status nemo_config_parse(const char *src, const char *text, size_t len, struct nemo_checkpoint *ck,
                               char **tokenizer_path, struct err *e);

/* --- sentencepiece.c: a SentencePiece ModelProto -> pieces and types --------------------------- */

vkasr_status spm_parse(const char *src, const uint8_t *data, size_t size, struct tokenizer *t, struct err *e);

/* --- nemo_names.c: NeMo -> vkasr (HF) tensor names -------------------------------------------- */

/* The canonical (HF transformers) name of a NeMo state-dict key, malloc'd; NULL with *unknown set
 * when the key is not one vkasr knows, NULL alone when out of memory. Preprocessor buffers keep their
 * NeMo names. */
char *nemo_map_name(const char *nemo, bool *unknown);

#endif
