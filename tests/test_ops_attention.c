/* test_ops_attention.c — relpos_attention (fused flash-style kernels) on the device under test (Vulkan,
 * or CUDA with VKASR_TEST_DEVICE) vs the C reference:
 * sequence lengths around the tiles, head widths 1 .. 256, padding (n_valid < T), local windows with a
 * short position table, position tables longer than needed, large inputs (online-softmax rescaling),
 * zero-length input, and the errors the kernel reports (dk too wide, y overlapping an input). The f32
 * cases run the automatic choice (the scalar kernel); the f16 cases run every tensor-core
 * configuration the device can (on lavapipe the emulated twins) against the reference with the same
 * f16 rounding of the inputs, and the automatic f16 choice (on CUDA: the tensor-core kernel up to
 * dk 128, the f32 kernel with rounded inputs above). Vulkan kernel selection is checked on synthetic
 * devices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_attention.h"
#include "op_harness.h"

#define TOL 1e-6
/* f16 mode: inputs rounded alike on both sides; what remains is the f16 softmax weights and the f32
 * accumulation order. The bound is the suite's f16 tolerance. */
#define TOL_F16 5e-4

static double worst_nmse, worst_nmse_f16;

/* NMSE of the Vulkan output against the reference (th_check leaves the reference in y->host). */
static double measured_nmse(struct th *h, struct th_tensor *y) {
    uint64_t bytes = be_nbytes(&TH_T(y, TH_REF)), n = bytes / 4;
    float *vk = malloc(bytes ? bytes : 4);
    if (!vk || be_download(h->be[TH_DEV], vk, TH_T(y, TH_DEV).addr, bytes)) {
        free(vk);
        return INFINITY;
    }
    const float *ref = y->host;
    double se = 0, sr = 0;
    for (uint64_t i = 0; i < n; i++) {
        se += ((double)vk[i] - ref[i]) * ((double)vk[i] - ref[i]);
        sr += (double)ref[i] * ref[i];
    }
    free(vk);
    return sr > 0 ? se / sr : se;
}

static vkasr_status record_att(struct backend *vk, const void *args, const void *cfg) {
    return vk_att_record((struct vk_backend *)vk, args, cfg);
}

/* P == 0 means the minimum the span needs (2 * reach + 1). f16: the op's f16 flag; cfg: force a Vulkan
 * configuration (NULL: the automatic choice). */
static void attn_case_cfg(struct th *h, int64_t T, int64_t D, int heads, int64_t P, int64_t n_valid, int64_t window,
                          float mag, bool f16, const struct vk_att_cfg *cfg) {
    int64_t reach = T > 0 ? T - 1 : 0;
    if (window > 0 && window < reach)
        reach = window;
    if (P == 0)
        P = 2 * reach + 1;
    th_case(h, "relpos_attention %s%s T=%lld D=%lld H=%d P=%lld n_valid=%lld window=%lld mag=%g",
            cfg ? cfg->name : "auto", f16 ? " f16" : "", (long long)T, (long long)D, heads, (long long)P,
            (long long)n_valid, (long long)window, mag);
    int64_t dk = D / heads;
    struct th_tensor *q = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -mag, mag);
    struct th_tensor *k = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -mag, mag);
    struct th_tensor *v = th_input(h, BE_F32, 2, TH_SHAPE(T, D), -1.0f, 1.0f);
    struct th_tensor *p = th_input(h, BE_F32, 2, TH_SHAPE(P, D), -mag, mag);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -mag, mag);
    struct th_tensor *bv = th_input(h, BE_F32, 2, TH_SHAPE(heads, dk), -mag, mag);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(T, D));
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
            .f16 = f16,
        };
    if (!th_run_forced(h, OP_relpos_attention, &a[0], &a[1], cfg ? record_att : NULL, cfg))
        return;
    bool ok = th_check(h, y, f16 ? TOL_F16 : TOL);
    ok = th_check_guards(h) && ok;
    double nmse = measured_nmse(h, y);
    double *worst = f16 ? &worst_nmse_f16 : &worst_nmse;
    if (nmse > *worst)
        *worst = nmse;
    printf("%s %-100s nmse %.2e\n", ok ? "ok  " : "FAIL", h->name, nmse);
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
}

/* Kernel selection on synthetic devices (a pure function of the capabilities). */
static void expect_choice(struct th *h, const char *dev, const struct vk_caps *caps, int64_t dk, bool f16,
                          const char *want) {
    h->checks++;
    const struct vk_att_cfg *c = vk_att_choose(caps, dk, f16);
    const char *got = c ? c->name : "(none)";
    if (strcmp(got, want) != 0) {
        printf("FAIL [choice %s dk=%lld f16=%d]: got %s, want %s\n", dev, (long long)dk, f16, got, want);
        h->failures++;
    } else {
        printf("ok   choice %s dk=%lld f16=%d: %s\n", dev, (long long)dk, f16, got);
    }
}

static void choice_cases(struct th *h) {
    const struct vk_caps gpu = {.subgroup_size = 8, .max_wg_invocations = 1024, .max_shared = 32768, .f16 = true};
    struct vk_caps nv = {.subgroup_size = 32, .max_wg_invocations = 1024, .max_shared = 49152, .f16 = true,
                         .coopmat_nv = true};
    expect_choice(h, "gpu", &gpu, 128, true, "scalar"); /* no tensor cores */
    expect_choice(h, "gpu", &gpu, 256, false, "scalar");
    expect_choice(h, "gpu", &gpu, 257, false, "(none)");
    struct vk_caps lvp = gpu; /* a CPU driver: the barrier-free kernel */
    lvp.cpu = true;
    expect_choice(h, "lavapipe", &lvp, 128, true, "rows");
    expect_choice(h, "lavapipe", &lvp, 44, false, "rows");
    expect_choice(h, "lavapipe", &lvp, 257, false, "(none)");
#ifdef VKASR_HAVE_NV_COOPMAT_SHADERS
    expect_choice(h, "nvidia", &nv, 128, false, "scalar");
    expect_choice(h, "nvidia", &nv, 20, true, "cm_dk32");
    expect_choice(h, "nvidia", &nv, 44, true, "cm_dk64");
    expect_choice(h, "nvidia", &nv, 128, true, "cm_dk128");
    expect_choice(h, "nvidia", &nv, 129, true, "scalar");
    nv.subgroup_size = 64;
    expect_choice(h, "nvidia-subgroup-64", &nv, 128, true, "scalar");
    nv.subgroup_size = 32;
    nv.max_shared = 32768;
    expect_choice(h, "nvidia-32k-shared", &nv, 128, true, "scalar");
    expect_choice(h, "nvidia-32k-shared", &nv, 64, true, "scalar"); /* cm_dk64 needs 34308 bytes */
    expect_choice(h, "nvidia-32k-shared", &nv, 32, true, "cm_dk32");
#else
    expect_choice(h, "nvidia", &nv, 128, true, "scalar");
#endif
}

/* Errors the Vulkan kernel itself reports (argument rules are tested with ops.c). */
static void error_cases(struct th *h) {
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
}

int main(void) {
    struct th h;
    th_open(&h, true);

    /* f32: every f32 configuration this device can run (the tiled scalar kernel, the barrier-free one
     * for CPU drivers), forced, then the automatic choice on a few shapes. CUDA: its own choice. */
    size_t ncfg = 0;
    const struct vk_att_cfg *cfgs = h.vulkan ? vk_att_configs(&ncfg) : NULL;
    const struct vk_caps *caps = h.vulkan ? &((struct vk_device *)h.dev[TH_DEV])->caps : NULL;
    for (size_t i = 0; i < ncfg; i++)
        if ((cfgs[i].kind == VK_ATT_SCALAR || cfgs[i].kind == VK_ATT_ROWS) && vk_att_cfg_usable(&cfgs[i], caps))
            f32_cases(&h, &cfgs[i]);
    if (!h.vulkan) {
        th_skip(&h, "forced Vulkan attention configurations (the same cases run with the backend's choice)");
        f32_cases(&h, NULL);
    }
    attn_case(&h, NULL, 130, 64, 2, 0, 97, 0, 1.0f);
    attn_case(&h, NULL, 33, 48, 3, 0, 33, 4, 1.0f);
    attn_case(&h, NULL, 0, 8, 2, 1, 0, 0, 1.0f);

    /* f16 products: every tensor-core configuration this device can run, then the automatic choice. */
    for (size_t i = 0; i < ncfg; i++) {
        if (cfgs[i].kind == VK_ATT_SCALAR || cfgs[i].kind == VK_ATT_ROWS)
            continue;
        if (!vk_att_cfg_usable(&cfgs[i], caps)) {
            printf("config %s: not usable on this device, skipped\n", cfgs[i].name);
            continue;
        }
        f16_cases(&h, &cfgs[i]);
    }
    f16_cases(&h, NULL);
    /* f16 flag on narrow heads (the narrowest tensor-core variants) and on heads too wide for them */
    attn_case_cfg(&h, 77, 40, 2, 0, 70, 0, 1.0f, true, NULL);
    attn_case_cfg(&h, 77, 88, 2, 0, 77, 9, 1.0f, true, NULL);
    attn_case_cfg(&h, 40, 256, 1, 0, 40, 0, 1.0f, true, NULL);
    attn_case_cfg(&h, 33, 400, 2, 0, 30, 5, 1.0f, true, NULL);

    if (h.vulkan)
        choice_cases(&h);
    else
        th_skip(&h, "Vulkan attention kernel selection on synthetic devices");
    error_cases(&h);
    printf("worst nmse: f32 %.2e (tolerance %.0e), f16 %.2e (tolerance %.0e)\n", worst_nmse, TOL, worst_nmse_f16,
           TOL_F16);
    return th_close(&h);
}
