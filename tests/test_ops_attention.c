/* test_ops_attention.c — relpos_attention (fused flash-style kernel) on Vulkan vs the C reference:
 * sequence lengths around the 32-row tiles, head widths 1 .. 256, padding (n_valid < T), local windows
 * with a short position table, position tables longer than needed, large inputs (online-softmax
 * rescaling), and the errors the kernel reports (dk too wide, y overlapping an input). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

#define TOL 1e-6

static double worst_nmse;

/* NMSE of the Vulkan output against the reference (th_check leaves the reference in y->host). */
static double measured_nmse(struct th *h, struct th_tensor *y) {
    uint64_t bytes = be_nbytes(&TH_T(y, TH_REF)), n = bytes / 4;
    float *vk = malloc(bytes ? bytes : 4);
    if (!vk || be_download(h->be[TH_VK], vk, TH_T(y, TH_VK).addr, bytes)) {
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

/* P == 0 means the minimum the span needs (2 * reach + 1). */
static void attn_case(struct th *h, int64_t T, int64_t D, int heads, int64_t P, int64_t n_valid, int64_t window,
                      float mag) {
    int64_t reach = T > 0 ? T - 1 : 0;
    if (window > 0 && window < reach)
        reach = window;
    if (P == 0)
        P = 2 * reach + 1;
    th_case(h, "relpos_attention T=%lld D=%lld H=%d P=%lld n_valid=%lld window=%lld mag=%g", (long long)T,
            (long long)D, heads, (long long)P, (long long)n_valid, (long long)window, mag);
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
        };
    if (!th_run(h, OP_relpos_attention, &a[0], &a[1]))
        return;
    bool ok = th_check(h, y, TOL);
    ok = th_check_guards(h) && ok;
    double nmse = measured_nmse(h, y);
    if (nmse > worst_nmse)
        worst_nmse = nmse;
    printf("%s %-80s nmse %.2e\n", ok ? "ok  " : "FAIL", h->name, nmse);
}

/* Errors the Vulkan kernel itself reports (argument rules are tested with ops.c). */
static void error_cases(struct th *h) {
    th_case(h, "relpos_attention dk=257 unsupported");
    struct th_tensor *q = th_input(h, BE_F32, 2, TH_SHAPE(2, 257), -1, 1);
    struct th_tensor *p = th_input(h, BE_F32, 2, TH_SHAPE(3, 257), -1, 1);
    struct th_tensor *bu = th_input(h, BE_F32, 2, TH_SHAPE(1, 257), -1, 1);
    struct th_tensor *y = th_output(h, BE_F32, 2, TH_SHAPE(2, 257));
    struct op_relpos_attention a = {
        .q = TH_T(q, TH_VK),
        .k = TH_T(q, TH_VK),
        .v = TH_T(q, TH_VK),
        .p = TH_T(p, TH_VK),
        .bias_u = TH_T(bu, TH_VK),
        .bias_v = TH_T(bu, TH_VK),
        .y = TH_T(y, TH_VK),
        .heads = 1,
        .n_valid = 2,
    };
    h->checks++;
    vkasr_status st = be_relpos_attention(h->be[TH_VK], &a);
    if (st != VKASR_ERR_UNSUPPORTED || !strstr(h->be[TH_VK]->err.msg, "dk = 257")) {
        printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, h->be[TH_VK]->err.msg);
        h->failures++;
    } else {
        printf("ok   %s: %s\n", h->name, h->be[TH_VK]->err.msg);
    }

    th_case(h, "relpos_attention y overlapping q");
    q = th_input(h, BE_F32, 2, TH_SHAPE(4, 8), -1, 1);
    p = th_input(h, BE_F32, 2, TH_SHAPE(7, 8), -1, 1);
    bu = th_input(h, BE_F32, 2, TH_SHAPE(2, 4), -1, 1);
    a = (struct op_relpos_attention){
        .q = TH_T(q, TH_VK),
        .k = TH_T(q, TH_VK),
        .v = TH_T(q, TH_VK),
        .p = TH_T(p, TH_VK),
        .bias_u = TH_T(bu, TH_VK),
        .bias_v = TH_T(bu, TH_VK),
        .y = TH_T(q, TH_VK),
        .heads = 2,
        .n_valid = 4,
    };
    h->checks++;
    st = be_relpos_attention(h->be[TH_VK], &a);
    /* rejected by the op table's validation rules (src/backend/ops.c), before any backend runs */
    if (st != VKASR_ERR_INTERNAL || !strstr(h->be[TH_VK]->err.msg, "overlap")) {
        printf("FAIL [%s]: status %d, message '%s'\n", h->name, (int)st, h->be[TH_VK]->err.msg);
        h->failures++;
    } else {
        printf("ok   %s: %s\n", h->name, h->be[TH_VK]->err.msg);
    }
}

int main(void) {
    struct th h;
    th_open(&h, false);

    /* Full attention: lengths around the 32-row blocks x head layouts (dk 4, 16, 128, 64). */
    static const int64_t Ts[] = {1, 2, 7, 33, 130};
    static const struct {
        int64_t D;
        int heads;
    } geo[] = {{8, 2}, {48, 3}, {256, 2}, {64, 1}};
    for (unsigned g = 0; g < sizeof geo / sizeof *geo; g++)
        for (unsigned i = 0; i < sizeof Ts / sizeof *Ts; i++)
            attn_case(&h, Ts[i], geo[g].D, geo[g].heads, 0, Ts[i], 0, 1.0f);

    /* Other head widths: 1, 3, 256 (the limit), and 8 heads (heads grid-stride under a 3-group cap). */
    attn_case(&h, 33, 3, 3, 0, 33, 0, 1.0f);
    attn_case(&h, 33, 6, 2, 0, 33, 0, 1.0f);
    attn_case(&h, 40, 256, 1, 0, 40, 0, 1.0f);
    attn_case(&h, 130, 64, 8, 0, 130, 0, 1.0f);

    /* Padding: keys >= n_valid excluded, query rows >= n_valid zero. */
    attn_case(&h, 33, 48, 3, 0, 20, 0, 1.0f);
    attn_case(&h, 130, 64, 2, 0, 97, 0, 1.0f);
    attn_case(&h, 130, 64, 2, 0, 31, 0, 1.0f);
    attn_case(&h, 7, 8, 2, 0, 1, 0, 1.0f);
    attn_case(&h, 7, 8, 2, 0, 0, 0, 1.0f);

    /* Local attention: band |i - j| <= window with the short table P = 2*window+1, and windows that
     * cover the whole sequence. */
    attn_case(&h, 33, 48, 3, 0, 33, 1, 1.0f);
    attn_case(&h, 33, 48, 3, 0, 33, 4, 1.0f);
    attn_case(&h, 130, 64, 2, 0, 130, 4, 1.0f);
    attn_case(&h, 130, 64, 2, 0, 130, 40, 1.0f);
    attn_case(&h, 130, 256, 2, 0, 101, 20, 1.0f);
    attn_case(&h, 33, 48, 3, 0, 33, 40, 1.0f);
    attn_case(&h, 33, 48, 3, 0, 33, 32, 1.0f);

    /* Position tables longer than needed: the centre moves. */
    attn_case(&h, 33, 48, 3, 2 * 33 + 5, 33, 0, 1.0f);
    attn_case(&h, 130, 64, 2, 2 * 130 + 5, 120, 0, 1.0f);
    attn_case(&h, 33, 48, 3, 2 * 33 + 5, 33, 4, 1.0f);

    /* Large inputs: wide score range, the running max changes between key blocks. */
    attn_case(&h, 130, 64, 2, 0, 130, 0, 4.0f);
    attn_case(&h, 130, 256, 2, 0, 125, 0, 4.0f);
    attn_case(&h, 130, 64, 2, 0, 130, 9, 4.0f);

    error_cases(&h);
    printf("worst nmse %.2e (tolerance %.0e)\n", worst_nmse, TOL);
    return th_close(&h);
}
