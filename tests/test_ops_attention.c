/* test_ops_attention.c — relpos_attention (the fused kernels) on the device under test (Vulkan,
 * or CUDA with VKASR_TEST_DEVICE) vs the C reference:
 * sequence lengths around the tiles, head widths 1 .. 256, padding (n_valid < T), local windows with a
 * short position table, position tables longer than needed, large inputs (online-softmax rescaling),
 * zero-length input, slices of a sequence (queries and keys at given positions), row chunks that must
 * be bit-identical to one call, f16 tensors (q, k, v, p, y each f32 or f16), the reference against
 * NeMo's rel_pos_local_attn written out (edges of the band), and the errors the kernel reports (dk too
 * wide, y overlapping an input). The f32 cases run every f32 configuration (the scalar kernel, the
 * rows kernel); the f16 cases run every tensor-core configuration the device can (on lavapipe the
 * emulated twins of the kernels the choice takes) against the
 * reference with the same f16 rounding of the inputs, and the automatic f16 choice (on CUDA: the
 * tensor-core kernel up to dk 128, the f32 kernel with rounded inputs above). Packed batches (segment
 * tables): every kernel against the reference, each segment bit-identical to the segment alone and
 * row chunks to one call, with full and local attention and segments shorter and longer than the
 * kernels' blocks. Vulkan kernel selection is checked on synthetic devices. CUDA's unfused attention
 * for long sequences (cuBLASLt products): gemm_cases, forced by its run's VKASR_CUDA_ATT_GEMM_MIN_T.
 * NeMo's chunked_limited mask (chunked_cases): the same case kinds under several (chunk, left_chunks),
 * and the reference's mask against NeMo's written out (a query attends over its key range alone). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_attention.h"
#include "common/half.h"
#include "op_harness.h"

#define TOL 1e-6
/* f16 mode: inputs rounded alike on both sides; what remains is the f16 softmax weights and the f32
 * accumulation order. The bound is the suite's f16 tolerance. */
#define TOL_F16 5e-4

static double worst_nmse, worst_nmse_f16;
/* The chunked_limited mask every case below applies while chunked_cases runs them (chunk 0: off). */
static int64_t g_chunk, g_lchunks;

/* NMSE of the device's output against the reference (th_check leaves the reference in y->host). */
static double measured_nmse(struct th *h, struct th_tensor *y) {
    const bool h16 = y->type == BE_F16;
    uint64_t bytes = be_nbytes(&TH_T(y, TH_REF)), n = bytes / (h16 ? 2 : 4);
    void *vk = malloc(bytes ? bytes : 4);
    if (!vk || be_download(h->be[TH_DEV], vk, TH_T(y, TH_DEV).addr, bytes)) {
        free(vk);
        return INFINITY;
    }
    double se = 0, sr = 0;
    for (uint64_t i = 0; i < n; i++) {
        const double a = h16 ? half_to_float(((const uint16_t *)vk)[i]) : ((const float *)vk)[i];
        const double r = h16 ? half_to_float(((const uint16_t *)y->host)[i]) : ((const float *)y->host)[i];
        se += (a - r) * (a - r);
        sr += r * r;
    }
    free(vk);
    return sr > 0 ? se / sr : se;
}

/* Tensor types of a case: bits of the tensors that are f16 (the rest f32). */
enum { F16_Q = 1, F16_K = 2, F16_V = 4, F16_P = 8, F16_Y = 16, F16_ALL = 31 };
static be_dtype type_of(unsigned f16_tensors, unsigned bit) { return (f16_tensors & bit) ? BE_F16 : BE_F32; }

static vkasr_status record_att(struct backend *vk, const void *args, const void *cfg) {
    return vk_att_record((struct vk_backend *)vk, args, cfg);
}

/* One case: queries at positions q0 .. q0+Tq-1, keys at k0 .. k0+Tk-1 (the whole sequence: q0 = k0 = 0,
 * Tq = Tk = T). P == 0 means the minimum the scored pairs need. f16: the op's f16 flag; f16_tensors:
 * F16_* bits of the tensors stored as f16; cfg: force a Vulkan configuration (NULL: the automatic
 * choice). */
static void slice_case_t(struct th *h, const struct vk_att_cfg *cfg, int64_t Tq, int64_t q0, int64_t Tk, int64_t k0,
                         int64_t D, int heads, int64_t P, int64_t n_valid, int64_t window, float mag, bool f16,
                         unsigned f16_tensors) {
    if (P == 0) {
        int64_t qb = q0 + Tq < n_valid ? q0 + Tq : n_valid, kb = k0 + Tk < n_valid ? k0 + Tk : n_valid;
        int64_t reach = 0;
        if (q0 < qb) {
            reach = llabs(qb - 1 - k0) > llabs(q0 - (kb - 1)) ? llabs(qb - 1 - k0) : llabs(q0 - (kb - 1));
            if (window > 0 && window < reach)
                reach = window;
        }
        P = 2 * reach + 1;
    }
    th_case(h, "relpos_attention %s%s Tq=%lld@%lld Tk=%lld@%lld D=%lld H=%d P=%lld n_valid=%lld window=%lld mag=%g%s%s "
            "chunked %lld/%lld",
            cfg ? cfg->name : "auto", f16 ? " f16" : "", (long long)Tq, (long long)q0, (long long)Tk, (long long)k0,
            (long long)D, heads, (long long)P, (long long)n_valid, (long long)window, mag,
            f16_tensors ? " f16-tensors=" : "", f16_tensors == F16_ALL ? "all" : f16_tensors ? "some" : "",
            (long long)g_chunk, (long long)g_lchunks);
    int64_t dk = D / heads;
    struct th_tensor *q = th_input(h, type_of(f16_tensors, F16_Q), 2, TH_SHAPE(Tq, D), -mag, mag);
    struct th_tensor *k = th_input(h, type_of(f16_tensors, F16_K), 2, TH_SHAPE(Tk, D), -mag, mag);
    struct th_tensor *v = th_input(h, type_of(f16_tensors, F16_V), 2, TH_SHAPE(Tk, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, type_of(f16_tensors, F16_P), 2, TH_SHAPE(P, D), -mag, mag);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -mag, mag);
    struct th_tensor *bv = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -mag, mag);
    struct th_tensor *y = th_output(h, type_of(f16_tensors, F16_Y), 2, TH_SHAPE(Tq, D));
    struct op_relpos_attention a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_relpos_attention){
            .q = TH_T(q, s),
            .k = TH_T(k, s),
            .v = TH_T(v, s),
            .p = TH_T(p, s),
            .bias_u = TH_T(bu, s),
            .bias_v = TH_T(bv, s),
            .y = TH_T(y, s),
            .heads = heads,
            .n_valid = n_valid,
            .window = window,
            .chunk = g_chunk,
            .left_chunks = g_lchunks,
            .q_pos0 = q0,
            .k_pos0 = k0,
            .f16 = f16,
        };
    if (!th_run_forced(h, OP_relpos_attention, &a[0], &a[1], cfg ? record_att : NULL, cfg))
        return;
    /* an f16 y is rounded on both sides; where the two f32 values straddle a rounding point the results
     * differ by an f16 step: the f16 bound */
    const bool f16_bound = f16 || (f16_tensors & F16_Y);
    bool ok = th_check(h, y, f16_bound ? TOL_F16 : TOL);
    ok = th_check_guards(h) && ok;
    double nmse = measured_nmse(h, y);
    double *worst = f16_bound ? &worst_nmse_f16 : &worst_nmse;
    if (nmse > *worst)
        *worst = nmse;
    printf("%s %-100s nmse %.2e\n", ok ? "ok  " : "FAIL", h->name, nmse);
}

static void slice_case(struct th *h, const struct vk_att_cfg *cfg, int64_t Tq, int64_t q0, int64_t Tk, int64_t k0,
                       int64_t D, int heads, int64_t P, int64_t n_valid, int64_t window, float mag, bool f16) {
    slice_case_t(h, cfg, Tq, q0, Tk, k0, D, heads, P, n_valid, window, mag, f16, 0);
}

static void attn_case_cfg(struct th *h, int64_t T, int64_t D, int heads, int64_t P, int64_t n_valid, int64_t window,
                          float mag, bool f16, const struct vk_att_cfg *cfg) {
    slice_case(h, cfg, T, 0, T, 0, D, heads, P, n_valid, window, mag, f16);
}

static void attn_case(struct th *h, const struct vk_att_cfg *cfg, int64_t T, int64_t D, int heads, int64_t P,
                      int64_t n_valid, int64_t window, float mag) {
    attn_case_cfg(h, T, D, heads, P, n_valid, window, mag, false, cfg);
}

/* The f16 cases for one configuration (cfg NULL: the automatic choice with the f16 flag): head widths
 * the configuration's widest and a narrower one (zero padding of the staged rows), lengths around
 * its query block and the 16-key blocks, padding, local windows, a longer position table, large
 * scores (the reference max moves by more than the lazy-rescale margin), and eight heads (the head
 * dimension grid-strides under a 3-group cap). */
static void chunk_case(struct th *h, const struct vk_att_cfg *cfg, int64_t T, int64_t D, int heads, int64_t n_valid,
                       int64_t window, int64_t chunk, bool f16, unsigned f16_tensors);
#define D2F16(dk) (2 * (dk))
static void f16_cases(struct th *h, const struct vk_att_cfg *cfg) {
    const int64_t dkmax = cfg ? cfg->max_dk : 128, bq = cfg ? cfg->bq : 64;
    const int64_t dks[] = {dkmax, dkmax - 12};
    for (int w = 0; w < 2; w++) {
        int64_t dk = dks[w], D2 = 2 * dk, L = 2 * bq + 37;
        attn_case_cfg(h, 1, D2, 2, 0, 1, 0, 1.0f, true, cfg);
        attn_case_cfg(h, 17, D2, 2, 0, 17, 0, 1.0f, true, cfg);
        attn_case_cfg(h, bq + 1, D2, 2, 0, bq + 1, 0, 1.0f, true, cfg);
        attn_case_cfg(h, L, dk, 1, 0, L, 0, 1.0f, true, cfg);
        attn_case_cfg(h, bq + 40, D2, 2, 0, bq + 3, 0, 1.0f, true, cfg);
        attn_case_cfg(h, L, D2, 2, 0, L, 5, 1.0f, true, cfg);
        attn_case_cfg(h, L, D2, 2, 0, L - 17, 40, 1.0f, true, cfg);
        attn_case_cfg(h, bq + 9, D2, 2, 2 * (bq + 9) + 7, bq + 9, 0, 1.0f, true, cfg);
        attn_case_cfg(h, L, D2, 2, 0, L, 0, 3.0f, true, cfg);
        attn_case_cfg(h, L, D2, 2, 0, L - 7, 24, 3.0f, true, cfg);
    }
    attn_case_cfg(h, bq + 5, 8 * 16, 8, 0, bq + 5, 0, 1.0f, true, cfg);
    /* slices and row chunks (bit-identical to one call) in f16 mode too */
    slice_case(h, cfg, 33, 70, 51, 61, D2F16(dkmax), 2, 0, 200, 9, 1.0f, true);
    slice_case(h, cfg, bq + 3, 5, 2 * bq + 9, 0, D2F16(dkmax), 2, 0, 2 * bq + 9, 0, 1.0f, true);
    chunk_case(h, cfg, 2 * bq + 37, D2F16(dkmax), 2, 2 * bq + 37, 0, 7, true, 0);
    chunk_case(h, cfg, 2 * bq + 37, D2F16(dkmax), 2, 2 * bq + 30, 24, 33, true, 0);
    /* f16 tensors: all of them, and a mix (f16 k, v and y; f32 q and p) */
    slice_case_t(h, cfg, bq + 3, 5, 2 * bq + 9, 0, D2F16(dkmax), 2, 0, 2 * bq + 9, 0, 1.0f, true, F16_ALL);
    slice_case_t(h, cfg, 33, 70, 51, 61, D2F16(dkmax - 12), 2, 0, 200, 9, 1.0f, true, F16_K | F16_V | F16_Y);
}

/* Row chunks are bit-identical to one call: the whole sequence in one op, then in chunks of `chunk`
 * query rows whose k and v hold only the chunk's band (the way src/asr computes local attention; full
 * attention keeps every key), on the device under test with a forced Vulkan configuration (NULL: the
 * backend's own choice, the only one on CUDA). */
static void chunk_case(struct th *h, const struct vk_att_cfg *cfg, int64_t T, int64_t D, int heads, int64_t n_valid,
                       int64_t window, int64_t chunk, bool f16, unsigned f16_tensors) {
    int64_t reach = T > 0 ? T - 1 : 0;
    if (window > 0 && window < reach)
        reach = window;
    const int64_t P = 2 * reach + 1, dk = D / heads;
    th_case(h, "relpos_attention chunks %s%s T=%lld D=%lld H=%d n_valid=%lld window=%lld chunk=%lld%s chunked %lld/%lld",
            cfg ? cfg->name : "auto", f16 ? " f16" : "", (long long)T, (long long)D, heads, (long long)n_valid,
            (long long)window, (long long)chunk, f16_tensors ? " f16-tensors" : "", (long long)g_chunk,
            (long long)g_lchunks);
    const be_dtype yt = type_of(f16_tensors, F16_Y);
    struct th_tensor *q = th_input(h, type_of(f16_tensors, F16_Q), 2, TH_SHAPE(T, D), -2.0f, 2.0f);
    struct th_tensor *k = th_input(h, type_of(f16_tensors, F16_K), 2, TH_SHAPE(T, D), -2.0f, 2.0f);
    struct th_tensor *v = th_input(h, type_of(f16_tensors, F16_V), 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, type_of(f16_tensors, F16_P), 2, TH_SHAPE(P, D), -2.0f, 2.0f);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *bv = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *y1 = th_output(h, yt, 2, TH_SHAPE(T, D)), *y2 = th_output(h, yt, 2, TH_SHAPE(T, D));
    struct backend *dev = h->be[TH_DEV];
    struct op_relpos_attention a = {
        .q = TH_T(q, TH_DEV), .k = TH_T(k, TH_DEV), .v = TH_T(v, TH_DEV), .p = TH_T(p, TH_DEV),
        .bias_u = TH_T(bu, TH_DEV), .bias_v = TH_T(bv, TH_DEV), .y = TH_T(y1, TH_DEV),
        .heads = heads, .n_valid = n_valid, .window = window, .f16 = f16,
        .chunk = g_chunk, .left_chunks = g_lchunks,
    };
    vkasr_status st = cfg ? op_validate(OP_relpos_attention, &a, &dev->err) : VKASR_OK;
    if (st == VKASR_OK)
        st = cfg ? vk_att_record((struct vk_backend *)dev, &a, cfg) : be_relpos_attention(dev, &a);
    for (int64_t r0 = 0; st == VKASR_OK && r0 < T; r0 += chunk) {
        const int64_t n = T - r0 < chunk ? T - r0 : chunk;
        int64_t ka = 0, kb = T;
        if (window > 0) {
            ka = r0 - window > 0 ? r0 - window : 0;
            kb = r0 + n + window < T ? r0 + n + window : T;
        }
        if (g_chunk > 0) { /* the keys of the chunked mask only, as src/asr slices them */
            const int64_t c0 = r0 / g_chunk, c1 = (r0 + n - 1) / g_chunk + 1;
            ka = g_chunk * (c0 > g_lchunks ? c0 - g_lchunks : 0);
            kb = g_chunk * c1 < T ? g_chunk * c1 : T;
        }
        struct op_relpos_attention c = a;
        c.q = be_tensor_rows(&a.q, r0, n);
        c.y = be_tensor_rows(&TH_T(y2, TH_DEV), r0, n);
        c.k = be_tensor_rows(&a.k, ka, kb - ka);
        c.v = be_tensor_rows(&a.v, ka, kb - ka);
        c.q_pos0 = r0;
        c.k_pos0 = ka;
        st = op_validate(OP_relpos_attention, &c, &dev->err);
        if (st == VKASR_OK)
            st = cfg ? vk_att_record((struct vk_backend *)dev, &c, cfg) : be_relpos_attention(dev, &c);
    }
    if (st == VKASR_OK)
        st = be_sync(dev);
    h->checks++;
    const uint64_t esize = be_dtype_size(yt), bytes = (uint64_t)T * D * esize;
    unsigned char *w1 = malloc(bytes + 4), *w2 = malloc(bytes + 4);
    if (st == VKASR_OK && w1 && w2)
        st = be_download(dev, w1, TH_T(y1, TH_DEV).addr, bytes);
    if (st == VKASR_OK && w1 && w2)
        st = be_download(dev, w2, TH_T(y2, TH_DEV).addr, bytes);
    uint64_t diff = 0;
    for (uint64_t i = 0; st == VKASR_OK && w1 && w2 && i < bytes / esize; i++)
        diff += memcmp(w1 + i * esize, w2 + i * esize, esize) != 0;
    bool ok = st == VKASR_OK && w1 && w2 && diff == 0 && th_check_guards(h);
    if (!ok)
        h->failures++;
    printf("%s %-100s %llu element(s) differ%s%s\n", ok ? "ok  " : "FAIL", h->name, (unsigned long long)diff,
           st == VKASR_OK ? "" : ": ", st == VKASR_OK ? "" : dev->err.msg);
    free(w1);
    free(w2);
}

/* The C reference against NeMo's rel_pos_local_attn written out as NeMo computes it (spec §5.2, a
 * single item, context [w, w]): the sequence zero-padded to T' (a multiple of 2w), window column
 * c = 0 .. 2w holding key j = i - w + c, AC = (q_i + u).k_j with -inf for j outside [0, T'), the
 * positional term from PosLoc[m] = PE(L - m) (columns c < L: row c; columns c >= 2w - R: row
 * L + c - 2w + R), -10000 added for padded keys j >= T, softmax over the 2w + 1 columns, all in double.
 * The band's edges at the start and the end of the sequence are where the two formulations could
 * part; lengths around multiples of 2w and windows wider than the sequence are checked. */
static void nemo_case(struct th *h, int64_t T, int64_t D, int heads, int64_t w) {
    const int64_t L = w, R = w, P = L + R + 1, dk = D / heads, Tp = T + ((2 * w - T % (2 * w)) % (2 * w));
    th_case(h, "relpos_attention reference vs NeMo rel_pos_local_attn T=%lld D=%lld H=%d context [%lld, %lld]",
            (long long)T, (long long)D, heads, (long long)L, (long long)R);
    struct th_tensor *q = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -2.0f, 2.0f);
    struct th_tensor *k = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -2.0f, 2.0f);
    struct th_tensor *v = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, BE_F32, 2, TH_SHAPE(P, D), -2.0f, 2.0f);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *bv = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(T, D));
    struct backend *ref = h->be[TH_REF];
    struct op_relpos_attention a = {
        .q = TH_T(q, TH_REF), .k = TH_T(k, TH_REF), .v = TH_T(v, TH_REF), .p = TH_T(p, TH_REF),
        .bias_u = TH_T(bu, TH_REF), .bias_v = TH_T(bv, TH_REF), .y = TH_T(y, TH_REF),
        .heads = heads, .n_valid = T, .window = w,
    };
    h->checks++;
    if (be_relpos_attention(ref, &a) != VKASR_OK) {
        h->failures++;
        printf("FAIL %s: %s\n", h->name, ref->err.msg);
        return;
    }
    const float *Q = q->host, *K = k->host, *V = v->host, *Pl = p->host, *U = bu->host, *BV = bv->host;
    const float *Y = (const float *)(uintptr_t)TH_T(y, TH_REF).addr;
    double *sc = malloc((size_t)(2 * w + 1) * sizeof *sc), se = 0, sr = 0;
    for (int64_t hh = 0; sc && hh < heads; hh++)
        for (int64_t i = 0; i < T; i++) {
            double mx = -INFINITY;
            for (int64_t c = 0; c <= 2 * w; c++) {
                const int64_t j = i - w + c;
                if (j < 0 || j >= Tp || c < w - L || c > w + R) { /* outside the padded sequence */
                    sc[c] = -INFINITY;
                    continue;
                }
                const int64_t m = c < L ? c : L + (c - 2 * w + R); /* PosLoc row of column c */
                double ac = 0, bd = 0;
                for (int64_t d = 0; d < dk; d++) {
                    const double qd = Q[i * D + hh * dk + d];
                    ac += (qd + U[hh * dk + d]) * (j < T ? K[j * D + hh * dk + d] : 0.0); /* padding: zeros */
                    bd += (qd + BV[hh * dk + d]) * Pl[m * D + hh * dk + d];
                }
                sc[c] = (ac + bd) / sqrt((double)dk) + (j >= T ? -10000.0 : 0.0);
                mx = fmax(mx, sc[c]);
            }
            double sum = 0;
            for (int64_t c = 0; c <= 2 * w; c++)
                sum += sc[c] = isinf(sc[c]) ? 0.0 : exp(sc[c] - mx);
            for (int64_t d = 0; d < dk; d++) {
                double o = 0;
                for (int64_t c = 0; c <= 2 * w; c++) {
                    const int64_t j = i - w + c;
                    o += sc[c] * (j >= 0 && j < T ? V[j * D + hh * dk + d] : 0.0);
                }
                o /= sum;
                const double yr = Y[i * D + hh * dk + d];
                se += (yr - o) * (yr - o);
                sr += o * o;
            }
        }
    const double nmse = sr > 0 ? se / sr : se;
    const bool ok = sc && nmse < 1e-12;
    if (!ok)
        h->failures++;
    printf("%s %-100s nmse %.2e\n", ok ? "ok  " : "FAIL", h->name, nmse);
    free(sc);
}

/* Kernel selection on synthetic devices (a pure function of the capabilities). */
static void expect_forced(struct th *h, const char *dev, const struct vk_caps *caps, const struct vk_att_cfg *force,
                          int64_t dk, bool f16, const char *want) {
    h->checks++;
    const struct vk_att_cfg *c = vk_att_choose(caps, force, dk, f16);
    const char *got = c ? c->name : "(none)";
    if (strcmp(got, want) != 0) {
        printf("FAIL [choice %s dk=%lld f16=%d]: got %s, want %s\n", dev, (long long)dk, f16, got, want);
        h->failures++;
    } else {
        printf("ok   choice %s dk=%lld f16=%d: %s\n", dev, (long long)dk, f16, got);
    }
}

static void expect_choice(struct th *h, const char *dev, const struct vk_caps *caps, int64_t dk, bool f16,
                          const char *want) {
    expect_forced(h, dev, caps, NULL, dk, f16, want);
}

static void choice_cases(struct th *h) {
    const struct vk_caps gpu = {.subgroup_size = 8, .max_wg_invocations = 1024, .max_shared = 32768, .f16 = true};
    struct vk_caps nv = {.subgroup_size = 32, .max_wg_invocations = 1024, .max_shared = 49152, .f16 = true,
                         .coopmat_nv = true, .shuffle = true};
    expect_choice(h, "gpu", &gpu, 128, true, "scalar"); /* no tensor cores */
    expect_choice(h, "gpu", &gpu, 256, false, "scalar");
    expect_choice(h, "gpu", &gpu, 257, false, "(none)");
    struct vk_caps lvp = gpu; /* a CPU driver: the barrier-free kernel */
    lvp.cpu = true;
    expect_choice(h, "lavapipe", &lvp, 128, true, "rows");
    expect_choice(h, "lavapipe", &lvp, 44, false, "rows");
    expect_choice(h, "lavapipe", &lvp, 257, false, "(none)");
    /* VKASR_ATTENTION_KERNEL (vk_att_override): taken where the head fits and, for a tensor-core
     * kernel, only where the op allows f16 products */
    const struct vk_att_cfg *force = vk_att_find("emus4xqm_dk64");
    expect_forced(h, "forced-emus4xqm_dk64", &lvp, force, 64, true, "emus4xqm_dk64");
    expect_forced(h, "forced-emus4xqm_dk64", &lvp, force, 64, false, "rows");
    expect_forced(h, "forced-emus4xqm_dk64", &lvp, force, 128, true, "rows");
    force = vk_att_find("scalar");
    expect_forced(h, "forced-scalar", &lvp, force, 128, true, "scalar");
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    expect_choice(h, "nvidia", &nv, 128, false, "scalar");
    expect_choice(h, "nvidia", &nv, 20, true, "cm_dk32");
    expect_choice(h, "nvidia", &nv, 44, true, "cms4xqm_dk64");
    expect_choice(h, "nvidia", &nv, 128, true, "cms8xqmb_dk128");
    expect_choice(h, "nvidia", &nv, 129, true, "scalar");
    nv.shuffle = false; /* cms4xqm_dk64 and cms8xqmb_dk128: the softmax rows meet through subgroup shuffles */
    expect_choice(h, "nvidia-no-shuffle", &nv, 128, true, "scalar");
    expect_choice(h, "nvidia-no-shuffle", &nv, 64, true, "scalar");
    expect_choice(h, "nvidia-no-shuffle", &nv, 32, true, "cm_dk32");
    nv.shuffle = true;
    nv.subgroup_size = 64;
    expect_choice(h, "nvidia-subgroup-64", &nv, 128, true, "scalar");
    nv.subgroup_size = 32;
    nv.max_shared = 32768;
    expect_choice(h, "nvidia-32k-shared", &nv, 128, true, "scalar");
    expect_choice(h, "nvidia-32k-shared", &nv, 64, true, "cms4xqm_dk64"); /* 20612 bytes */
    expect_choice(h, "nvidia-32k-shared", &nv, 96, true, "scalar");
    expect_choice(h, "nvidia-32k-shared", &nv, 32, true, "cm_dk32");
#else
    expect_choice(h, "nvidia", &nv, 128, true, "scalar");
#endif
}

/* Errors the device's kernels themselves report (argument rules are tested with ops.c). */
static void error_cases(struct th *h) {
    if (strcmp(h->dev_name, "CPU") == 0) { /* host code: any dk */
        th_skip(h, "relpos_attention dk=257 unsupported (a GPU kernel's limit)");
        goto rest;
    }
    th_case(h, "relpos_attention dk=257 unsupported");
    struct th_tensor *q = th_input(h, BE_F32, 2, TH_SHAPE(2, 257), -1, 1);
    struct th_tensor *p = th_input(h, BE_F32, 2, TH_SHAPE(3, 257), -1, 1);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(1, 257), -1, 1);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(2, 257));
    struct op_relpos_attention a = {
        .q = TH_T(q, TH_DEV),
        .k = TH_T(q, TH_DEV),
        .v = TH_T(q, TH_DEV),
        .p = TH_T(p, TH_DEV),
        .bias_u = TH_T(bu, TH_DEV),
        .bias_v = TH_T(bu, TH_DEV),
        .y = TH_T(y, TH_DEV),
        .heads = 1,
        .n_valid = 2,
    };
    h->checks++;
    vkasr_status st = be_relpos_attention(h->be[TH_DEV], &a);
    if (st != VKASR_ERR_UNSUPPORTED || !strstr(h->be[TH_DEV]->err.msg, "dk = 257")) {
        printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, h->be[TH_DEV]->err.msg);
        h->failures++;
    } else {
        printf("ok   %s: %s\n", h->name, h->be[TH_DEV]->err.msg);
    }

rest:
    if (!h->vulkan) {
        th_skip(h, "the Vulkan rows kernel's key limit (llvmpipe's loop limit)");
    } else {
        th_case(h, "relpos_attention rows kernel: more keys per row than llvmpipe's loops allow");
        q = th_input(h, BE_F32, 2, TH_SHAPE(1, 2), -1, 1);
        struct th_tensor *kk = th_input(h, BE_F32, 2, TH_SHAPE(VK_ATT_ROWS_MAX_KEYS + 1, 2), -1, 1);
        p = th_input(h, BE_F32, 2, TH_SHAPE(2 * VK_ATT_ROWS_MAX_KEYS + 1, 2), -1, 1);
        bu = th_input(h, BE_F32, 2, TH_SHAPE(1, 2), -1, 1);
        y = th_output(h, BE_F32, 2, TH_SHAPE(1, 2));
        a = (struct op_relpos_attention){
            .q = TH_T(q, TH_DEV), .k = TH_T(kk, TH_DEV), .v = TH_T(kk, TH_DEV), .p = TH_T(p, TH_DEV),
            .bias_u = TH_T(bu, TH_DEV), .bias_v = TH_T(bu, TH_DEV), .y = TH_T(y, TH_DEV),
            .heads = 1, .n_valid = VK_ATT_ROWS_MAX_KEYS + 1,
        };
        h->checks++;
        st = op_validate(OP_relpos_attention, &a, &h->be[TH_DEV]->err);
        if (st == VKASR_OK)
            st = vk_att_record((struct vk_backend *)h->be[TH_DEV], &a, vk_att_find("rows"));
        if (st != VKASR_ERR_UNSUPPORTED || !strstr(h->be[TH_DEV]->err.msg, "local attention")) {
            printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, h->be[TH_DEV]->err.msg);
            h->failures++;
        } else {
            printf("ok   %s: %s\n", h->name, h->be[TH_DEV]->err.msg);
        }
    }

    th_case(h, "relpos_attention i32 k rejected (f32 or f16 only)");
    q = th_input(h, BE_F16, 2, TH_SHAPE(4, 8), -1, 1);
    struct th_tensor *ki = th_input(h, BE_I32, 2, TH_SHAPE(4, 8), -1, 1);
    p = th_input(h, BE_F16, 2, TH_SHAPE(7, 8), -1, 1);
    bu = th_input(h, BE_F32, 2, TH_SHAPE(2, 4), -1, 1);
    y = th_output(h, BE_F16, 2, TH_SHAPE(4, 8));
    a = (struct op_relpos_attention){
        .q = TH_T(q, TH_DEV), .k = TH_T(ki, TH_DEV), .v = TH_T(q, TH_DEV), .p = TH_T(p, TH_DEV),
        .bias_u = TH_T(bu, TH_DEV), .bias_v = TH_T(bu, TH_DEV), .y = TH_T(y, TH_DEV), .heads = 2, .n_valid = 4,
    };
    h->checks++;
    st = be_relpos_attention(h->be[TH_DEV], &a);
    if (st != VKASR_ERR_INTERNAL || !strstr(h->be[TH_DEV]->err.msg, "k [4, 8] i32: must be f32 or f16")) {
        printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, h->be[TH_DEV]->err.msg);
        h->failures++;
    } else {
        printf("ok   %s: %s\n", h->name, h->be[TH_DEV]->err.msg);
    }

    th_case(h, "relpos_attention y overlapping q");
    q = th_input(h, BE_F32, 2, TH_SHAPE(4, 8), -1, 1);
    p = th_input(h, BE_F32, 2, TH_SHAPE(7, 8), -1, 1);
    bu = th_input(h, BE_F32, 2, TH_SHAPE(2, 4), -1, 1);
    a = (struct op_relpos_attention){
        .q = TH_T(q, TH_DEV),
        .k = TH_T(q, TH_DEV),
        .v = TH_T(q, TH_DEV),
        .p = TH_T(p, TH_DEV),
        .bias_u = TH_T(bu, TH_DEV),
        .bias_v = TH_T(bu, TH_DEV),
        .y = TH_T(q, TH_DEV),
        .heads = 2,
        .n_valid = 4,
    };
    h->checks++;
    st = be_relpos_attention(h->be[TH_DEV], &a);
    /* rejected by the op table's validation rules (src/backend/ops.c), before any backend runs */
    if (st != VKASR_ERR_INTERNAL || !strstr(h->be[TH_DEV]->err.msg, "overlap")) {
        printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, h->be[TH_DEV]->err.msg);
        h->failures++;
    } else {
        printf("ok   %s: %s\n", h->name, h->be[TH_DEV]->err.msg);
    }
}

/* A packed batch of n segments of len[i] rows: the whole call against the reference, each segment
 * bit-identical to a call on the segment alone (positions from 0, the same position table), and calls
 * on row chunks of `chunk` rows (local attention: each with its band of keys) bit-identical to the whole
 * call. f16_tensors: F16_* bits of the tensors stored as f16. */
static void packed_case(struct th *h, const struct vk_att_cfg *cfg, const int64_t *len, int n, int64_t D, int heads,
                        int64_t window, int64_t chunk, bool f16, unsigned f16_tensors) {
    int64_t off[16] = {0}, T = 0, lmax = 0;
    for (int i = 0; i < n; i++) {
        off[i + 1] = off[i] + len[i];
        lmax = len[i] > lmax ? len[i] : lmax;
    }
    T = off[n];
    const int64_t reach = window > 0 && window < lmax - 1 ? window : lmax - 1, P = 2 * reach + 1, dk = D / heads;
    th_case(h,
            "relpos_attention %s%s packed batch of %d (T=%lld, longest %lld) D=%lld H=%d window=%lld chunks of %lld%s "
            "chunked %lld/%lld",
            cfg ? cfg->name : "auto", f16 ? " f16" : "", n, (long long)T, (long long)lmax, (long long)D, heads,
            (long long)window, (long long)chunk, f16_tensors ? " f16-tensors" : "", (long long)g_chunk,
            (long long)g_lchunks);
    struct th_tensor *seg = th_input_data(h, BE_I64, 1, TH_SHAPE(n + 1), off);
    const be_dtype yt = type_of(f16_tensors, F16_Y);
    struct th_tensor *q = th_input(h, type_of(f16_tensors, F16_Q), 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *k = th_input(h, type_of(f16_tensors, F16_K), 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *v = th_input(h, type_of(f16_tensors, F16_V), 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, type_of(f16_tensors, F16_P), 2, TH_SHAPE(P, D), -1.0f, 1.0f);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *bv = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *y = th_output(h, yt, 2, TH_SHAPE(T, D));
    struct op_relpos_attention a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_relpos_attention){.q = TH_T(q, s), .k = TH_T(k, s), .v = TH_T(v, s), .p = TH_T(p, s),
                                            .bias_u = TH_T(bu, s), .bias_v = TH_T(bv, s), .y = TH_T(y, s),
                                            .heads = heads, .n_valid = T, .window = window, .f16 = f16,
                                            .seg = TH_T(seg, s), .seg_max = lmax, .chunk = g_chunk,
                                            .left_chunks = g_lchunks};
    if (!th_run_forced(h, OP_relpos_attention, &a[0], &a[1], cfg ? record_att : NULL, cfg))
        return;
    bool ok = th_check(h, y, f16 || f16_tensors ? TOL_F16 : TOL);
    const uint64_t bytes = (uint64_t)(T * D) * be_dtype_size(yt);
    unsigned char *whole = malloc(bytes), *part = malloc(bytes);
    if (!whole || !part)
        exit(1);
    struct backend *dv = h->be[TH_DEV];
    struct th_tensor *y1 = th_output(h, yt, 2, TH_SHAPE(T, D));
    vkasr_status st = be_download(dv, whole, TH_T(y, TH_DEV).addr, bytes);
    /* each segment alone */
    for (int i = 0; st == VKASR_OK && i < n; i++) {
        struct op_relpos_attention one = a[TH_DEV];
        one.q = be_tensor_rows(&TH_T(q, TH_DEV), off[i], len[i]);
        one.k = be_tensor_rows(&TH_T(k, TH_DEV), off[i], len[i]);
        one.v = be_tensor_rows(&TH_T(v, TH_DEV), off[i], len[i]);
        one.y = be_tensor_rows(&TH_T(y1, TH_DEV), off[i], len[i]);
        one.n_valid = len[i];
        one.seg = (be_tensor){0};
        one.seg_max = 0;
        st = op_validate(OP_relpos_attention, &one, &dv->err);
        if (st == VKASR_OK)
            st = cfg ? vk_att_record((struct vk_backend *)dv, &one, cfg) : be_relpos_attention(dv, &one);
    }
    if (st == VKASR_OK)
        st = be_download(dv, part, TH_T(y1, TH_DEV).addr, bytes);
    h->checks++;
    if (st != VKASR_OK || memcmp(whole, part, bytes) != 0) {
        printf("FAIL [%s]: segments alone differ from the batch (%s)\n", h->name, st ? dv->err.msg : "values");
        h->failures++;
        ok = false;
    }
    /* row chunks of the batch */
    for (int64_t r0 = 0; st == VKASR_OK && r0 < T; r0 += chunk) {
        const int64_t m = T - r0 < chunk ? T - r0 : chunk;
        const int64_t ka = window > 0 && r0 > window ? r0 - window : 0;
        const int64_t kb = window > 0 && r0 + m + window < T ? r0 + m + window : T;
        struct op_relpos_attention c = a[TH_DEV];
        c.q = be_tensor_rows(&TH_T(q, TH_DEV), r0, m);
        c.k = be_tensor_rows(&TH_T(k, TH_DEV), ka, kb - ka);
        c.v = be_tensor_rows(&TH_T(v, TH_DEV), ka, kb - ka);
        c.y = be_tensor_rows(&TH_T(y1, TH_DEV), r0, m);
        c.q_pos0 = r0;
        c.k_pos0 = ka;
        st = op_validate(OP_relpos_attention, &c, &dv->err);
        if (st == VKASR_OK)
            st = cfg ? vk_att_record((struct vk_backend *)dv, &c, cfg) : be_relpos_attention(dv, &c);
    }
    if (st == VKASR_OK)
        st = be_download(dv, part, TH_T(y1, TH_DEV).addr, bytes);
    h->checks++;
    if (st != VKASR_OK || memcmp(whole, part, bytes) != 0) {
        printf("FAIL [%s]: row chunks differ from one call (%s)\n", h->name, st ? dv->err.msg : "values");
        h->failures++;
        ok = false;
    }
    ok = th_check_guards(h) && ok;
    printf("%s %s\n", ok ? "ok  " : "FAIL", h->name);
    free(whole);
    free(part);
}

static void packed_cases(struct th *h, const struct vk_att_cfg *cfg, bool f16) {
    /* segments shorter than a block, one row, and longer than two blocks; local and full */
    static const int64_t lens[] = {45, 1, 7, 70, 3, 33};
    const int64_t D = f16 ? (cfg ? 2 * cfg->max_dk : 64) : 48;
    packed_case(h, cfg, lens, 6, D, 2, 0, 33, f16, 0);
    packed_case(h, cfg, lens, 6, D, 2, 5, 64, f16, 0);
    packed_case(h, cfg, lens + 3, 2, D, 2, 0, 7, f16, 0);
    /* f16 tensors (f16 precision's q, k, v, p and output) */
    packed_case(h, cfg, lens, 6, D, 2, 5, 33, f16, F16_ALL);
}

/* NeMo's chunked_limited mask (ops.h) on one configuration: the mask of nemotron's [70, 13] scaled down
 * ((chunk, left_chunks) = (14, 5)), [8, 0] (1, 8), [8, 1] (2, 4), [8, 3] (4, 2), and chunks longer
 * than the kernels' blocks (40, 1); full sequences, padding, slices, row chunks whose keys are the
 * chunks' own (bit-identical to one call) and packed batches (chunks anchored at each segment's
 * start). */
static void chunked_cases(struct th *h, const struct vk_att_cfg *cfg, bool f16) {
    static const int64_t masks[][2] = {{14, 5}, {1, 8}, {2, 4}, {4, 2}, {40, 1}};
    static const int64_t lens[] = {45, 1, 7, 70, 3, 33};
    const int64_t D = f16 ? (cfg ? 2 * cfg->max_dk : 64) : 48;
    /* the emulated tensor-core twins are slow on a CPU: two masks there */
    const unsigned nmask = f16 && cfg && cfg->kind == VK_ATT_COOPMAT_EMU ? 2u : sizeof masks / sizeof *masks;
    for (unsigned m = 0; m < nmask; m++) {
        g_chunk = masks[m][0];
        g_lchunks = masks[m][1];
        attn_case_cfg(h, 130, D, 2, 0, 130, 0, 1.0f, f16, cfg);
        attn_case_cfg(h, 77, D, 2, 0, 61, 0, 2.0f, f16, cfg);
        slice_case(h, cfg, 33, 70, 103, 0, D, 2, 0, 200, 0, 1.0f, f16);
        chunk_case(h, cfg, 130, D, 2, 125, 0, 33, f16, 0);
        chunk_case(h, cfg, 45, D, 2, 45, 0, 7, f16, 0);
        packed_case(h, cfg, lens, 6, D, 2, 0, 33, f16, 0);
    }
    g_chunk = g_lchunks = 0;
}

/* The C reference's chunked mask against NeMo's written out (conformer_encoder.py _create_masks):
 * chunk_idx = pos // chunk, diff = chunk_idx[q] - chunk_idx[k], visible iff 0 <= diff <= left_chunks.
 * Each query row of the chunked call must equal full attention over its visible keys alone (one key
 * range per row: the row's q against the keys the boolean mask marks), so the mask, not a shared code
 * path, is what is compared. */
static void chunked_reference_case(struct th *h, int64_t T, int64_t chunk, int64_t lchunks) {
    th_case(h, "relpos_attention reference chunked mask vs NeMo's T=%lld chunk=%lld left_chunks=%lld", (long long)T,
            (long long)chunk, (long long)lchunks);
    const int64_t D = 16, heads = 2, dk = D / heads, P = 2 * T - 1;
    struct backend *ref = h->be[TH_REF];
    struct th_tensor *q = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -2.0f, 2.0f);
    struct th_tensor *k = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -2.0f, 2.0f);
    struct th_tensor *v = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, BE_F32, 2, TH_SHAPE(P, D), -2.0f, 2.0f);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -1.0f, 1.0f);
    struct th_tensor *y1 = th_output(h, BE_F32, 2, TH_SHAPE(T, D)), *y2 = th_output(h, BE_F32, 2, TH_SHAPE(T, D));
    struct op_relpos_attention a = {
        .q = TH_T(q, TH_REF), .k = TH_T(k, TH_REF), .v = TH_T(v, TH_REF), .p = TH_T(p, TH_REF),
        .bias_u = TH_T(bu, TH_REF), .bias_v = TH_T(bu, TH_REF), .y = TH_T(y1, TH_REF),
        .heads = (int32_t)heads, .n_valid = T, .chunk = chunk, .left_chunks = lchunks,
    };
    vkasr_status st = op_validate(OP_relpos_attention, &a, &ref->err);
    if (st == VKASR_OK)
        st = be_relpos_attention(ref, &a);
    for (int64_t i = 0; st == VKASR_OK && i < T; i++) {
        int64_t lo = -1, hi = -1; /* the row of NeMo's boolean mask: one run of visible keys */
        for (int64_t j = 0; j < T; j++) {
            const int64_t diff = i / chunk - j / chunk;
            if (diff >= 0 && diff <= lchunks) {
                lo = lo < 0 ? j : lo;
                hi = j + 1;
            }
        }
        struct op_relpos_attention r = a;
        r.chunk = r.left_chunks = 0;
        r.q = be_tensor_rows(&a.q, i, 1);
        r.y = be_tensor_rows(&TH_T(y2, TH_REF), i, 1);
        r.k = be_tensor_rows(&a.k, lo, hi - lo);
        r.v = be_tensor_rows(&a.v, lo, hi - lo);
        r.q_pos0 = i;
        r.k_pos0 = lo;
        st = op_validate(OP_relpos_attention, &r, &ref->err);
        if (st == VKASR_OK)
            st = be_relpos_attention(ref, &r);
    }
    h->checks++;
    const uint64_t bytes = (uint64_t)(T * D) * 4;
    float *w1 = malloc(bytes), *w2 = malloc(bytes);
    if (st == VKASR_OK)
        st = be_sync(ref);
    if (st == VKASR_OK && w1 && w2)
        st = be_download(ref, w1, TH_T(y1, TH_REF).addr, bytes);
    if (st == VKASR_OK && w1 && w2)
        st = be_download(ref, w2, TH_T(y2, TH_REF).addr, bytes);
    const bool ok = st == VKASR_OK && w1 && w2 && memcmp(w1, w2, bytes) == 0;
    free(w1);
    free(w2);
    if (!ok)
        h->failures++;
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", h->name, st ? ": " : "", st ? ref->err.msg : "");
}

/* The f32 cases for one f32 configuration (scalar, rows; cfg NULL: the automatic choice). */
static void f32_cases(struct th *h, const struct vk_att_cfg *cfg) {
    /* Full attention: lengths around the 32-row blocks x head layouts (dk 4, 16, 128, 64). */
    static const int64_t Ts[] = {1, 2, 7, 33, 130};
    static const struct {
        int64_t D;
        int heads;
    } geo[] = {{8, 2}, {48, 3}, {256, 2}, {64, 1}};
    for (unsigned g = 0; g < sizeof geo / sizeof *geo; g++)
        for (unsigned i = 0; i < sizeof Ts / sizeof *Ts; i++)
            attn_case(h, cfg, Ts[i], geo[g].D, geo[g].heads, 0, Ts[i], 0, 1.0f);

    /* Other head widths: 1, 3, 256 (the limit), and 8 heads (heads grid-stride under a 3-group cap). */
    attn_case(h, cfg, 33, 3, 3, 0, 33, 0, 1.0f);
    attn_case(h, cfg, 33, 6, 2, 0, 33, 0, 1.0f);
    attn_case(h, cfg, 40, 256, 1, 0, 40, 0, 1.0f);
    attn_case(h, cfg, 130, 64, 8, 0, 130, 0, 1.0f);

    /* Padding: keys >= n_valid excluded, query rows >= n_valid zero. */
    attn_case(h, cfg, 33, 48, 3, 0, 20, 0, 1.0f);
    attn_case(h, cfg, 130, 64, 2, 0, 97, 0, 1.0f);
    attn_case(h, cfg, 130, 64, 2, 0, 31, 0, 1.0f);
    attn_case(h, cfg, 7, 8, 2, 0, 1, 0, 1.0f);
    attn_case(h, cfg, 7, 8, 2, 0, 0, 0, 1.0f);

    /* Local attention: band |i - j| <= window with the short table P = 2*window+1, and windows that
     * cover the whole sequence. */
    attn_case(h, cfg, 33, 48, 3, 0, 33, 1, 1.0f);
    attn_case(h, cfg, 33, 48, 3, 0, 33, 4, 1.0f);
    attn_case(h, cfg, 130, 64, 2, 0, 130, 4, 1.0f);
    attn_case(h, cfg, 130, 64, 2, 0, 130, 40, 1.0f);
    attn_case(h, cfg, 130, 256, 2, 0, 101, 20, 1.0f);
    attn_case(h, cfg, 33, 48, 3, 0, 33, 40, 1.0f);
    attn_case(h, cfg, 33, 48, 3, 0, 33, 32, 1.0f);

    /* Position tables longer than needed: the centre moves. */
    attn_case(h, cfg, 33, 48, 3, 2 * 33 + 5, 33, 0, 1.0f);
    attn_case(h, cfg, 130, 64, 2, 2 * 130 + 5, 120, 0, 1.0f);
    attn_case(h, cfg, 33, 48, 3, 2 * 33 + 5, 33, 4, 1.0f);

    /* Large inputs: wide score range, the running max changes between key blocks. */
    attn_case(h, cfg, 130, 64, 2, 0, 130, 0, 4.0f);
    attn_case(h, cfg, 130, 256, 2, 0, 125, 0, 4.0f);
    attn_case(h, cfg, 130, 64, 2, 0, 130, 9, 4.0f);

    /* Zero-length sequence: nothing to write. */
    attn_case(h, cfg, 0, 8, 2, 1, 0, 0, 1.0f);

    /* Slices of a sequence: queries at q_pos0 against keys at k_pos0 (positions, the band and n_valid
     * in sequence coordinates): full attention over a longer key range, a local chunk with its band,
     * the chunk at the end with padding, keys reaching past the band, a window wider than the
     * sequence, and starts that are not multiples of any kernel block. */
    slice_case(h, cfg, 40, 50, 140, 0, 64, 2, 0, 140, 0, 1.0f, false);
    slice_case(h, cfg, 33, 70, 51, 61, 48, 3, 0, 200, 9, 1.0f, false);
    slice_case(h, cfg, 20, 110, 30, 100, 64, 2, 0, 125, 10, 1.0f, false);
    slice_case(h, cfg, 10, 37, 130, 0, 64, 2, 0, 130, 4, 1.0f, false);
    slice_case(h, cfg, 9, 5, 20, 0, 8, 2, 0, 20, 50, 1.0f, false);
    slice_case(h, cfg, 65, 63, 130, 1, 64, 2, 0, 131, 33, 4.0f, false);

    /* Rows with more keys than llvmpipe's loop limit allows with loops over dk per key (attention_rows.comp
     * unrolls those loops): 700 keys of a 43-wide head (element by element), and of a 128-wide one (four
     * elements at a time, VEC4: a quarter of the iterations, still past the limit). */
    if (cfg && cfg->kind == VK_ATT_ROWS) {
        attn_case(h, cfg, 700, 86, 2, 0, 700, 0, 1.0f);
        attn_case(h, cfg, 700, 128, 1, 0, 700, 0, 1.0f);
    }

    /* Row chunks bit-identical to one call: full and local attention, padding, a window wider than the
     * sequence, chunks of 1, 7, 33 and 64 rows (within and across the kernels' query blocks). */
    chunk_case(h, cfg, 130, 64, 2, 130, 0, 7, false, 0);
    chunk_case(h, cfg, 130, 64, 2, 130, 5, 7, false, 0);
    chunk_case(h, cfg, 130, 64, 2, 130, 40, 33, false, 0);
    chunk_case(h, cfg, 130, 64, 2, 101, 20, 64, false, 0);
    chunk_case(h, cfg, 70, 48, 3, 70, 200, 33, false, 0);
    chunk_case(h, cfg, 45, 8, 2, 45, 3, 1, false, 0);
    packed_cases(h, cfg, false);

    /* f16 tensors with f32 products (the f16 flag off): all of them, mixes, chunks */
    slice_case_t(h, cfg, 40, 50, 140, 0, 64, 2, 0, 140, 0, 1.0f, false, F16_ALL);
    slice_case_t(h, cfg, 33, 70, 51, 61, 48, 3, 0, 200, 9, 1.0f, false, F16_Q | F16_P);
    slice_case_t(h, cfg, 33, 70, 51, 61, 48, 3, 0, 200, 9, 1.0f, false, F16_K | F16_V | F16_Y);
    chunk_case(h, cfg, 70, 44, 2, 66, 9, 33, false, F16_ALL);
    chunked_cases(h, cfg, false);
}

/* The CUDA backend's unfused attention (cuBLASLt products in chunks of query rows), which it takes for
 * f16 full attention over f16 k, v, p from VKASR_CUDA_ATT_GEMM_MIN_T valid positions on (this test's
 * CUDA run sets 1, and profiling, whose totals must show the path ran for each call): several chunks
 * (up to 512 rows each), padding, slices of queries and of keys, a longer position table, large
 * scores, 1 to 8 heads of 16 to 256 columns, row chunks bit-identical to one call. */
static void gemm_cases(struct th *h) {
    struct backend *dev = h->be[TH_DEV];
    dev->vt->profile_reset(dev);
    const unsigned kvp = F16_K | F16_V | F16_P;
    int calls = 0;
    slice_case_t(h, NULL, 600, 0, 600, 0, 128, 2, 0, 600, 0, 1.0f, true, F16_ALL), calls++;
    slice_case_t(h, NULL, 300, 0, 300, 0, 128, 2, 0, 251, 0, 1.0f, true, kvp), calls++;
    slice_case_t(h, NULL, 200, 0, 200, 0, 64, 1, 0, 200, 0, 3.0f, true, kvp), calls++;
    slice_case_t(h, NULL, 40, 50, 140, 0, 64, 2, 0, 140, 0, 1.0f, true, F16_ALL), calls++;
    slice_case_t(h, NULL, 20, 110, 30, 100, 64, 2, 0, 125, 0, 1.0f, true, kvp), calls++;
    slice_case_t(h, NULL, 100, 0, 100, 0, 128, 8, 2 * 100 + 7, 100, 0, 1.0f, true, F16_ALL), calls++;
    slice_case_t(h, NULL, 150, 0, 150, 0, 256, 1, 0, 150, 0, 1.0f, true, kvp), calls++;
    slice_case_t(h, NULL, 1100, 0, 1100, 0, 256, 4, 0, 1100, 0, 1.0f, true, F16_ALL), calls++;
    chunk_case(h, NULL, 300, 128, 2, 300, 0, 7, true, F16_ALL), calls += 1 + 43;
    chunk_case(h, NULL, 700, 128, 2, 650, 0, 64, true, F16_ALL), calls += 1 + 11;
    if (be_sync(dev) != VKASR_OK)
        printf("FAIL unfused attention: sync: %s\n", dev->err.msg), h->failures++;
    struct be_op_stat stats[64];
    size_t n = dev->vt->profile(dev, stats, 64);
    uint64_t ran = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(stats[i].name, "relpos_attention_gemm") == 0)
            ran = stats[i].calls;
    h->checks++;
    const bool ok = ran == (uint64_t)calls;
    if (!ok)
        h->failures++;
    printf("%s unfused attention: %llu of %d calls took the cuBLASLt path\n", ok ? "ok  " : "FAIL",
           (unsigned long long)ran, calls);
}

int main(void) {
    struct th h;
    th_open(&h, true);
    /* the lab (tests/vk_lab.c) is registered: emulated twins of the tensor-core kernels */
    if (h.vulkan && (h.checks++, !vk_att_find("emu_dk32") || !vk_att_find("emus2xqmb_dk128") || !vk_att_find("emus4xqm_dk64"))) {
        printf("FAIL: the lab's emulated attention configurations are missing (th_lab_register)\n");
        h.failures++;
    }

    /* f32: every f32 configuration this device can run (the tiled scalar kernel, the barrier-free one
     * for CPU drivers, on GPUs the workgroup-per-row one; lavapipe runs that one's barriers slowly, and
     * its production form, q_pos, in test_ops_stream_rows_group), forced, then the automatic choice on a
     * few shapes. CUDA: its own choice. */
    size_t ncfg = 0;
    const struct vk_att_cfg *cfgs = h.vulkan ? vk_att_configs(&ncfg) : NULL;
    const struct vk_caps *caps = h.vulkan ? &((struct vk_device *)h.dev[TH_DEV])->caps : NULL;
    for (size_t i = 0; i < ncfg; i++)
        if ((cfgs[i].kind == VK_ATT_SCALAR || cfgs[i].kind == VK_ATT_ROWS ||
             (cfgs[i].kind == VK_ATT_ROWS_GROUP && !caps->cpu)) &&
            vk_att_cfg_usable(&cfgs[i], caps))
            f32_cases(&h, &cfgs[i]);
    if (!h.vulkan) {
        th_skip(&h, "forced Vulkan attention configurations (the same cases run with the backend's choice)");
        f32_cases(&h, NULL);
    }
    attn_case(&h, NULL, 130, 64, 2, 0, 97, 0, 1.0f);
    attn_case(&h, NULL, 33, 48, 3, 0, 33, 4, 1.0f);
    attn_case(&h, NULL, 0, 8, 2, 1, 0, 0, 1.0f);

    /* f16 products: every tensor-core configuration this device can run, then the automatic choice.
     * The emulated twins stand in for the real kernels on devices without cooperative matrices
     * (lavapipe in CI); where the real ones run, the twins are skipped (on a GPU they would take most of
     * the test's time). */
    for (size_t i = 0; i < ncfg; i++) {
        if (!vk_att_cfg_tensor_cores(&cfgs[i]))
            continue;
        const bool emulated = cfgs[i].kind == VK_ATT_COOPMAT_EMU;
        if (!vk_att_cfg_usable(&cfgs[i], caps) || (emulated && caps->coopmat_nv)) {
            printf("config %s: %s, skipped\n", cfgs[i].name,
                   emulated && caps->coopmat_nv ? "emulated twin of kernels this device runs"
                                                : "not usable on this device");
            continue;
        }
        f16_cases(&h, &cfgs[i]);
        packed_cases(&h, &cfgs[i], true);
        chunked_cases(&h, &cfgs[i], true);
    }
    f16_cases(&h, NULL);
    packed_cases(&h, NULL, true);
    chunked_cases(&h, NULL, true);
    static const int64_t ref_masks[][3] = {{40, 14, 5}, {23, 2, 4}, {23, 4, 2}, {9, 1, 8}, {17, 40, 1}};
    for (unsigned i = 0; i < sizeof ref_masks / sizeof *ref_masks; i++)
        chunked_reference_case(&h, ref_masks[i][0], ref_masks[i][1], ref_masks[i][2]);
    /* f16 flag on narrow heads (the narrowest tensor-core variants) and on heads too wide for them */
    attn_case_cfg(&h, 77, 40, 2, 0, 70, 0, 1.0f, true, NULL);
    attn_case_cfg(&h, 77, 88, 2, 0, 77, 9, 1.0f, true, NULL);
    attn_case_cfg(&h, 40, 256, 1, 0, 40, 0, 1.0f, true, NULL);
    attn_case_cfg(&h, 33, 400, 2, 0, 30, 5, 1.0f, true, NULL);

    /* The reference against NeMo's sliding-window formulation: lengths below, at and above multiples
     * of 2w, windows of 1 .. wider than the sequence. */
    static const int64_t nemo_T[] = {1, 5, 16, 17, 40, 63, 64, 65};
    static const int64_t nemo_w[] = {1, 4, 16, 70};
    for (unsigned i = 0; i < sizeof nemo_T / sizeof *nemo_T; i++)
        for (unsigned j = 0; j < sizeof nemo_w / sizeof *nemo_w; j++)
            nemo_case(&h, nemo_T[i], 16, 2, nemo_w[j]);

    if (h.vulkan)
        choice_cases(&h);
    else
        th_skip(&h, "Vulkan attention kernel selection on synthetic devices");
    if (!h.vulkan && getenv("VKASR_CUDA_ATT_GEMM_MIN_T"))
        gemm_cases(&h);
    else
        th_skip(&h, "the CUDA backend's unfused attention (its run sets VKASR_CUDA_ATT_GEMM_MIN_T)");
    error_cases(&h);
    printf("worst nmse: f32 %.2e (tolerance %.0e), f16 %.2e (tolerance %.0e)\n", worst_nmse, TOL, worst_nmse_f16,
           TOL_F16);
    return th_close(&h);
}
