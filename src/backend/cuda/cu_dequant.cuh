/* cu_dequant.cuh — one weight of a row of ggml block-quantized weights on CUDA (Q8_0, Q4_K, Q5_K, Q6_K):
 * the same f32 arithmetic as src/common/qblock.c (no FMA contraction), shared by the quantized linear
 * (cu_linear_quant.cu), the matrix-vector linear (cu_gemv.cu) and the LSTM step (cu_lstm.cu); and the
 * 8-weight pieces of any weight type those two read. */
#ifndef VKASR_CU_DEQUANT_CUH
#define VKASR_CU_DEQUANT_CUH

#include "cu_internal.h"

static __device__ float dq_half(const unsigned char *p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* Sub-block j's 6-bit scale and min of the 12 scale bytes at s (qblock.c's unpack_sm). */
static __device__ void dq_scale_min(const unsigned char *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Weight k of a row of blocks (dequant.glsl's layout walk; no FMA contraction: __fmul_rn/__fsub_rn). */
static __device__ __forceinline__ float dq_weight(int type, const unsigned char *row, int64_t k) {
    if (type == BE_Q8_0) {
        const unsigned char *blk = row + (k / 32) * 34;
        return __fmul_rn(dq_half(blk), (float)(signed char)blk[2 + k % 32]);
    }
    const int i = (int)(k % 256);
    if (type == BE_Q6_K) {
        const unsigned char *blk = row + (k / 256) * 210;
        const int h = i / 128, r = i % 128, c = r / 32, l = r % 32;
        const int lo = (blk[64 * h + l + 32 * (c & 1)] >> (4 * (c >> 1))) & 15;
        const int hb = (blk[128 + 32 * h + l] >> (2 * c)) & 3;
        const int sc = (signed char)blk[192 + 8 * h + l / 16 + 2 * c];
        return __fmul_rn(__fmul_rn(dq_half(blk + 208), (float)sc), (float)((lo | hb << 4) - 32));
    }
    const int bytes = type == BE_Q4_K ? 144 : 176;
    const unsigned char *blk = row + (k / 256) * bytes;
    const int s = i / 32, g = i / 64, l = i % 32, hi = s & 1;
    int sc, m;
    dq_scale_min(blk + 4, s, &sc, &m);
    int q;
    if (type == BE_Q4_K)
        q = (blk[16 + 32 * g + l] >> (4 * hi)) & 15;
    else
        q = ((blk[48 + 32 * g + l] >> (4 * hi)) & 15) | ((blk[16 + l] >> s) & 1) << 4;
    const float a = __fmul_rn(__fmul_rn(dq_half(blk), (float)sc), (float)q);
    return __fsub_rn(a, __fmul_rn(dq_half(blk + 2), (float)m));
}

/* Weights k .. k+7 of a row of blocks of type T (k a multiple of 8: one piece of one block), each
 * dq_weight's value; T a constant, so the block walk folds (the matrix-vector and LSTM kernels). */
template <int T> static __device__ __forceinline__ void dq_piece8(const unsigned char *row, int64_t k, float v[8]) {
#pragma unroll
    for (int i = 0; i < 8; i++)
        v[i] = dq_weight(T, row, k + i);
}

/* 8 consecutive elements at p (16-byte aligned), widened. */
static __device__ __forceinline__ void dq_load8(const float *p, float v[8]) {
    const float4 a = ((const float4 *)p)[0], c = ((const float4 *)p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
}
static __device__ __forceinline__ float dq_lo(unsigned u) { return __half2float(__ushort_as_half((unsigned short)(u & 0xffffu))); }
static __device__ __forceinline__ float dq_hi(unsigned u) { return __half2float(__ushort_as_half((unsigned short)(u >> 16))); }
static __device__ __forceinline__ void dq_load8(const __half *p, float v[8]) {
    const uint4 u = *(const uint4 *)p; /* element 0 in the low half of u.x (little-endian) */
    v[0] = dq_lo(u.x), v[1] = dq_hi(u.x), v[2] = dq_lo(u.y), v[3] = dq_hi(u.y);
    v[4] = dq_lo(u.z), v[5] = dq_hi(u.z), v[6] = dq_lo(u.w), v[7] = dq_hi(u.w);
}

/* Weights k .. k+7 of a row of type WT: f32, f16 (k a multiple of 8, the row 16-byte aligned) or a block
 * type (dq_piece8). */
template <int WT> static __device__ __forceinline__ void dq_w8(const unsigned char *row, int64_t k, float v[8]) {
    if (WT == BE_F32)
        dq_load8((const float *)row + k, v);
    else if (WT == BE_F16)
        dq_load8((const __half *)row + k, v);
    else
        dq_piece8<WT>(row, k, v);
}

/* Bytes of a row of k weights of block type `type`. */
static inline uint64_t dq_row_bytes(be_dtype type, int64_t k) {
    return (uint64_t)(k / be_dtype_block(type)) * (uint64_t)be_dtype_block_bytes(type);
}

#endif
