/* gguf_internal.h — what the GGUF reader (gguf.c) shares with the key look-ups (gguf_kv.c) and the
 * readers of other engines' GGUF layouts (gguf_nemo_speech.c): the value types, a parsed file's keys
 * (every value bounds-checked when the file was parsed) and typed look-ups. Internal to src/model. */
#ifndef VKASR_GGUF_INTERNAL_H
#define VKASR_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "model_types.h"

/* GGUF metadata value types; tensor types are GGML ids (quant.h: F32, F16 and the block types) */
enum {
    GT_U8 = 0,
    GT_I8 = 1,
    GT_U16 = 2,
    GT_I16 = 3,
    GT_U32 = 4,
    GT_I32 = 5,
    GT_F32 = 6,
    GT_BOOL = 7,
    GT_STR = 8,
    GT_ARR = 9,
    GT_U64 = 10,
    GT_I64 = 11,
    GT_F64 = 12,
    GT_COUNT = 13
};

/* GGML's id of bfloat16 tensors (read for other engines' layouts; vkasr's own files never hold it). */
#define GGML_TYPE_BF16 30u

/* A parsed file (gguf.c): the image and the reader's position, and every key-value pair. */
struct rd {
    const uint8_t *p;
    uint64_t size, pos;
    const char *path;
    struct err *e;
};

struct gkv {
    const char *key;
    uint64_t klen;
    uint32_t type;
    uint64_t vpos;  /* the value (for arrays: after the element type and count) */
    uint32_t atype; /* arrays */
    uint64_t alen;
};

struct gguf {
    struct rd r;
    struct gkv *kv;
    uint64_t nkv;
};

/* --- gguf_kv.c -------------------------------------------------------------------------------- */

/* The file's name for messages; a value type's name ("uint32"). */
const char *gguf_path(const struct gguf *g);
const char *gguf_type_name(uint32_t t);
const struct gkv *gguf_kv_find(const struct gguf *g, const char *key);
bool gguf_has(const struct gguf *g, const char *key);
/* Typed values. A missing key is an error naming it when required, else *out = def (strings: *s =
 * NULL). Integers of any integer type, range-checked; floats f32 or f64. */
vkasr_status gguf_get_int(const struct gguf *g, const char *key, int required, int def, int lo, int hi, int *out,
                          struct err *e);
vkasr_status gguf_get_bool(const struct gguf *g, const char *key, int required, bool def, bool *out, struct err *e);
vkasr_status gguf_get_f32(const struct gguf *g, const char *key, int required, float def, float *out, struct err *e);
vkasr_status gguf_get_str(const struct gguf *g, const char *key, int required, const char **s, uint64_t *len,
                          struct err *e);
/* An array (required): its element type, count and first element's bytes. Strings are stored as a
 * u64 length and the bytes; every element lies inside the file. */
vkasr_status gguf_get_array(const struct gguf *g, const char *key, uint32_t *atype, uint64_t *n, const uint8_t **data,
                            struct err *e);
/* Little-endian integer of n bytes at p; an integer element of GGUF type t at p as int64. */
uint64_t gguf_le(const uint8_t *p, int n);
int64_t gguf_int_at(const uint8_t *p, uint32_t t);
bool gguf_is_int_type(uint32_t t);

/* --- gguf_nemo_speech.c ----------------------------------------------------------------------- */

/* A file in NVIDIA NeMo-Speech.cpp's layout (general.architecture "asr"): maps its keys onto mf->cfg,
 * its SentencePiece model onto mf->tok, and renames the tensors parsed from it (mf->tensors, NeMo
 * names) to the HF names model_prepare takes; mf stays non-canonical. head: MODEL_HEAD_AUTO (the file's
 * head) or VKASR_HEAD_CTC, which loads a hybrid's auxiliary CTC head instead of its transducer. */
vkasr_status gguf_nemo_speech_read(struct model_file *mf, const struct gguf *g, int head, struct err *e);

#endif
