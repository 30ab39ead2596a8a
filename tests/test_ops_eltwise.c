/* test_ops_eltwise.c — element-wise ops (unary, binary, glu) on Vulkan vs the C reference. */
#include <stdio.h>

#include "op_harness.h"

static void unary_case(struct th *h, int64_t n, int act, float alpha) {
    th_case(h, "unary n=%lld act=%d alpha=%g", (long long)n, act, alpha);
    float lo = act == ACT_LOG_GUARD ? 0.0f : -8.0f;
    struct th_tensor *x = th_input(h, BE_F32, 1, TH_SHAPE(n), lo, 8.0f);
    struct th_tensor *y = th_output(h, BE_F32, 1, TH_SHAPE(n));
    struct op_unary a[2];
    for (int s = 0; s < 2; s++)
        a[s] = (struct op_unary){.x = TH_T(x, s), .y = TH_T(y, s), .act = act, .alpha = alpha};
    if (th_run(h, OP_unary, &a[0], &a[1]))
        th_check(h, y, 1e-7);
}

int main(void) {
    struct th h;
    th_open(&h, false);
    const int64_t sizes[] = {0, 1, 3, 255, 256, 1025, 70001};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int act = ACT_NONE; act <= ACT_LOG_GUARD; act++)
            unary_case(&h, sizes[i], act, act == ACT_NONE ? 0.5f : 1.0f);
    return th_close(&h);
}
