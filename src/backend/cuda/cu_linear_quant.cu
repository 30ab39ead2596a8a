/* cu_linear_quant.cu — the linear op on CUDA with a block-quantized w (Q8_0, Q4_K, Q5_K, Q6_K): w is
 * dequantized to f32 into op scratch (the same f32 arithmetic as src/common/qblock.c, so each weight is
 * the reference's bit for bit), then the f32 product of cu_linear.cu runs on it. Simple and exact, not
 * fast: a fused kernel reading the blocks is the next step. */
#include "cu_internal.h"

#define DQ_THREADS 256

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
static __device__ float dq_weight(int type, const unsigned char *row, int64_t k) {
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

static __global__ void dequant_kernel(int type, const unsigned char *w, uint64_t row_bytes, float *out, int64_t N,
                                      int64_t K) {
    CU_GRID_STRIDE(i, N * K) { out[i] = dq_weight(type, w + (uint64_t)(i / K) * row_bytes, i % K); }
}

vkasr_status cu_op_linear_quant(struct cu_backend *b, const struct op_linear *a) {
    const int64_t N = a->w.ne[0], K = a->w.ne[1];
    const uint64_t bytes = (uint64_t)N * (uint64_t)K * 4;
    if (bytes > CU_QUANT_W_BYTES - CU_TENSOR_ALIGN)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED,
                       "linear: a quantized w [%lld, %lld] dequantizes to %llu MiB, above the op's %llu MiB of scratch",
                       (long long)N, (long long)K, (unsigned long long)(bytes >> 20),
                       (unsigned long long)(CU_QUANT_W_BYTES >> 20));
    const uint64_t row_bytes = (uint64_t)(K / be_dtype_block(a->w.type)) * (uint64_t)be_dtype_block_bytes(a->w.type);
    const uint64_t mark = be_mark(&b->base);
    void *wf = NULL;
    vkasr_status st = cu_scratch(b, bytes, &wf);
    if (st == VKASR_OK) {
        dequant_kernel<<<cu_grid(b, (uint64_t)(N * K), DQ_THREADS), DQ_THREADS, 0, b->stream>>>(
            (int)a->w.type, cu_ptr<unsigned char>(a->w), row_bytes, (float *)wf, N, K);
        cudaError_t r = cudaGetLastError();
        if (r != cudaSuccess)
            st = cu_fail(&b->base.err, r, "dequant_kernel", __FILE__, __LINE__);
    }
    if (st == VKASR_OK) {
        struct op_linear f = *a;
        f.w = be_tensor_2d((uint64_t)(uintptr_t)wf, BE_F32, N, K);
        st = cu_op_linear(b, &f);
    }
    be_release(&b->base, mark);
    return st;
}
