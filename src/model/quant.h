/* quant.h — ggml's block-quantized weight formats (Q8_0, Q4_K, Q5_K, Q6_K: same type ids and byte
 * layouts as ggml-common.h, so GGUF tools read vkasr's files): type traits, quantizing rows of f32,
 * dequantizing them back, and which tensor gets which type. Host only; docs/model-format.md. */
#ifndef VKASR_QUANT_H
#define VKASR_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/qblock.h"

/* GGML tensor type ids (the values GGUF stores) of the types vkasr reads and writes. */
enum qtype { QT_F32 = 0, QT_F16 = 1, QT_Q8_0 = 8, QT_Q4_K = 12, QT_Q5_K = 13, QT_Q6_K = 14 };

/* QK8_0, QK_K and the dequantizers: src/common/qblock.h (the backends read blocks too). */

struct qtraits {
    const char *name; /* "q8_0", "q4_k", ... (the CLI's --type names) */
    int block;        /* weights per block (1 for f32 / f16) */
    int bytes;        /* bytes per block */
};

/* Traits of a GGML type id; NULL when vkasr does not handle that id. */
const struct qtraits *quant_traits(uint32_t type);
bool quant_is_block(uint32_t type); /* Q8_0 / Q4_K / Q5_K / Q6_K */
/* Bytes of a row of k weights (k a multiple of the block size). */
uint64_t quant_row_bytes(uint32_t type, int64_t k);

/* The GGML type id of a model tensor type (enum mt_dtype: F32, F16, Q*), UINT32_MAX for the others;
 * and back (-1 for ids vkasr does not handle). */
uint32_t quant_type_of_mt(int mt);
int quant_mt_of_type(uint32_t type);

/* Largest weight magnitude the block types accept (f16's largest value: their scales are f16). */
#define QUANT_MAX_ABS 65504.0f

/* Quantizes one row of k floats (k a multiple of the type's block) into dst (quant_row_bytes bytes).
 * Round-to-nearest with ggml's scale search for the k-quants; deterministic. Returns 0, or -1 when the
 * row holds a value that is not finite or above QUANT_MAX_ABS in magnitude (dst then undefined). */
int quant_row(uint32_t type, const float *x, void *dst, int64_t k);
/* Dequantizes one row of k weights back to f32 (block types: qblock_dequant_row). */
void dequant_row(uint32_t type, const void *src, float *y, int64_t k);

/* Block-type kernels (quant_k.c); the same contract as quant_row for one type. */
int quant_row_q4_k(const float *x, uint8_t *dst, int64_t k);
int quant_row_q5_k(const float *x, uint8_t *dst, int64_t k);
int quant_row_q6_k(const float *x, uint8_t *dst, int64_t k);


/* The type a tensor of the canonical set is stored in when a file of `requested` weights is written
 * (QT_F32, QT_F16 or a block type): the encoder's matrix weights (model_is_matrix_weight) take f16 or
 * a block type, the decoder's matrices (model_is_decoder_matrix) a block type only, the rest stays
 * f32. A row length (innermost dimension) that the block does not divide falls back: q4_k/q5_k/q6_k
 * -> q8_0 when k % 256 != 0, q8_0 -> f16 when k % 32 != 0 (a decoder matrix: f32). */
uint32_t quant_tensor_type(const char *name, int64_t row_len, uint32_t requested);

/* Quantizes nrows rows of k weights, src f32 (src_f16 false) or f16 bits, into dst, on up to nthreads
 * threads (rows split in contiguous ranges; a thread that cannot start leaves its range to the caller:
 * the bytes never depend on the threads). Returns 0, 1 + the index of the first row quant_row refused,
 * or -1 when out of memory. */
int64_t quant_rows(uint32_t type, const void *src, bool src_f16, int64_t nrows, int64_t k, void *dst, int nthreads);

#endif
