/* qblock.h — reading ggml's block-quantized weight rows (Q8_0, Q4_K, Q5_K, Q6_K; ggml-common.h's byte
 * layouts): block sizes and dequantization to f32. Shared by the model's converter (src/model/quant.c)
 * and the backends' reference linear; the quantizers live in src/model. */
#ifndef VKASR_QBLOCK_H
#define VKASR_QBLOCK_H

#include <stdint.h>

/* GGML type ids of the block types (the values GGUF stores). */
enum { QB_Q8_0 = 8, QB_Q4_K = 12, QB_Q5_K = 13, QB_Q6_K = 14 };

#define QK8_0 32 /* weights per Q8_0 block */
#define QK_K 256 /* weights per k-quant super-block */
/* Bytes per block: f16 scale(s), the 12 packed 6-bit scales and mins of the k-quants, the levels. */
#define QB_BYTES_Q8_0 (2 + QK8_0)
#define QB_BYTES_Q4_K (4 + 12 + QK_K / 2)
#define QB_BYTES_Q5_K (4 + 12 + QK_K / 8 + QK_K / 2)
#define QB_BYTES_Q6_K (QK_K / 2 + QK_K / 4 + QK_K / 16 + 2)

/* Weights per block and bytes per block of a block type id; 0 for other ids. */
int qblock_size(uint32_t type);
int qblock_bytes(uint32_t type);

/* Dequantizes one row of k weights (k a multiple of the block) to f32: the values d*q (Q8_0),
 * d*sc*q - dmin*m (Q4_K, Q5_K), d*sc*(q - 32) (Q6_K), each computed in f32 in that order. Returns -1
 * (y untouched) for a type that is not a block type, else 0. */
int qblock_dequant_row(uint32_t type, const void *src, float *y, int64_t k);
/* Q4_K / Q5_K: sub-block j's (0..7) 6-bit scale and min from the 12 scale bytes s. */
void qblock_unpack_scale_min(const uint8_t *s, int j, int *sc, int *m);

#endif
