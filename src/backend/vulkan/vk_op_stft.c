/* vk_op_stft.c — host side of the STFT power spectrum (stft.comp): one workgroup per frame, an in-place
 * radix-2 FFT in shared memory. Power-of-two n_fft only (every Parakeet model uses 512); other even
 * sizes, which ops.c accepts, are reported as unsupported here and run on the reference backend. */
#include "vk_internal.h"

struct pc_stft {
    uint64_t x, window, y;
    int64_t n, f0, frames, hop;
    uint32_t win, off;
    float preemph;
    uint32_t pad0;
    uint64_t seg;
    int64_t nseg;
};
_Static_assert(sizeof(struct pc_stft) == 88, "mirror of stft.comp push constants");

vkasr_status vk_op_stft_power(struct vk_backend *b, const struct op_stft_power *a) {
    struct err *e = &b->base.err;
    int32_t nfft = a->n_fft;
    if (nfft & (nfft - 1))
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "op stft_power: n_fft %d is not a power of two (the Vulkan FFT supports powers of two up "
                       "to 4096)", (int)nfft);
    int64_t F = a->y.ne[0];
    if (F == 0)
        return VKASR_OK;
    uint32_t M = (uint32_t)nfft / 2, lg = 0;
    while ((1u << lg) < M)
        lg++;
    uint32_t mh = M / 2 ? M / 2 : 1;
    /* Shared memory: the frame (2M floats) and the twiddle table (2 * mh floats). */
    uint64_t shared = 4ull * (2ull * M + 2ull * mh);
    if (shared > b->d->caps.max_shared)
        return err_set(e, VKASR_ERR_UNSUPPORTED,
                       "op stft_power: n_fft %d needs %llu bytes of shared memory, the device has %u", (int)nfft,
                       (unsigned long long)shared, b->d->caps.max_shared);
    /* One butterfly per thread per stage where possible; at least 32 lanes for the load and split. */
    uint32_t wg = M / 2 < 32 ? 32 : M / 2;
    if (wg > vk_wg_size(b->d))
        wg = vk_wg_size(b->d);
    uint32_t spec[4] = {wg, M, mh, lg};
    uint32_t win = (uint32_t)a->window.ne[0];
    struct pc_stft pc = {
        .x = a->x.addr, .window = a->window.addr, .y = a->y.addr,
        .n = a->x.ne[0], .f0 = a->f0, .frames = F, .hop = a->hop,
        .win = win, .off = ((uint32_t)nfft - win) / 2,
        .preemph = a->preemph,
        .seg = a->seg.addr, .nseg = a->seg.addr ? a->seg.ne[0] : 0,
    };
    struct vk_range rd[3] = {vk_tensor_range(&a->x), vk_tensor_range(&a->window), vk_tensor_range(&a->seg)};
    struct vk_range wr = vk_tensor_range(&a->y);
    return vk_record(b, &(struct vk_dispatch){
                            .name = "stft_power",
                            .spv = SPV_stft,
                            .spec = spec,
                            .nspec = 4,
                            .pc = &pc,
                            .pc_size = sizeof pc,
                            .groups = {vk_groups_x(b->d, (uint64_t)F, 1), 1, 1},
                            .reads = rd,
                            .nreads = a->seg.addr ? 3 : 2,
                            .writes = &wr,
                            .nwrites = 1,
                        });
}
