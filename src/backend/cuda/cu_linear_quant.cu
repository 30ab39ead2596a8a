/* cu_linear_quant.cu — the linear op on CUDA with a block-quantized w (Q8_0, Q4_K, Q5_K, Q6_K): w is
 * dequantized to f32 into op scratch (the same f32 arithmetic as src/common/qblock.c, so each weight is
 * the reference's bit for bit), then the f32 product of cu_linear.cu runs on it. Simple and exact, not
 * fast: a fused kernel reading the blocks is the next step. */
#include "cu_dequant.cuh"

#define DQ_THREADS 256

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
