/* test_planner.c — host-side planning on index spaces beyond 2^31 and 2^32 elements, without
 * allocating: tensor sizes and views in 64 bits, grid sizes capped by the device limit, grid-stride
 * iteration counts that cover every element exactly, conv halo-row rules. */
#include <inttypes.h>
#include <stdio.h>

#include "backend/vulkan/vk_internal.h"

static int failures, checks;

#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        checks++;                                                                                      \
        if (!(cond)) {                                                                                 \
            failures++;                                                                                \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                     \
        }                                                                                              \
    } while (0)

/* Simulates a grid-stride loop: which items does workgroup g cover? Checks that the union of all
 * workgroups' blocks is exactly [0, blocks) by counting, and that the maximum iteration count equals
 * the planner's. Arithmetic only (no loop over items). */
static void check_cover(uint64_t items, uint64_t per_group, uint32_t max_groups) {
    uint32_t g = vk_grid_groups(items, per_group, max_groups);
    EXPECT(g >= 1 && g <= max_groups);
    uint64_t blocks = items / per_group + (items % per_group != 0);
    uint64_t it = vk_grid_iterations(items, per_group, g);
    /* workgroup k covers blocks k, k+g, k+2g, ...: count = ceil((blocks - k) / g) for k < blocks */
    uint64_t covered = 0, most = 0;
    for (uint32_t k = 0; k < g && k < 4096; k++) {
        uint64_t c = k < blocks ? (blocks - k + g - 1) / g : 0;
        covered += c;
        most = c > most ? c : most;
    }
    if (g <= 4096) {
        EXPECT(covered == blocks);
        EXPECT(most == it || (blocks == 0 && it == 0));
    }
    /* the planned iterations times the grid always reach the last block, and never need a launch
     * above the cap */
    EXPECT(it * g >= blocks && (it == 0 || (it - 1) * g < blocks));
    if (blocks >= max_groups)
        EXPECT(g == max_groups);
}

int main(void) {
    /* tensor sizes beyond 32 bits */
    be_tensor big = be_tensor_1d(0x100000000ull, BE_F32, 2600000000ll);
    EXPECT(be_numel(&big) == 2600000000ull);
    EXPECT(be_nbytes(&big) == 10400000000ull);
    be_tensor big2 = be_tensor_3d(0, BE_F16, 70000, 64, 1 << 20);
    EXPECT(be_numel(&big2) == 70000ull * 64 * (1ull << 20));
    EXPECT(be_nbytes(&big2) == 2 * 70000ull * 64 * (1ull << 20));
    /* row views: byte offsets in 64 bits */
    be_tensor m = be_tensor_2d(1ull << 40, BE_F32, 3000000, 1024);
    be_tensor r = be_tensor_row(&m, 2999999);
    EXPECT(r.nd == 1 && r.ne[0] == 1024 && r.addr == (1ull << 40) + 2999999ull * 1024 * 4);
    be_tensor rs = be_tensor_rows(&m, 2100000, 900000);
    EXPECT(rs.ne[0] == 900000 && rs.addr == (1ull << 40) + 2100000ull * 4096);
    EXPECT(rs.addr + be_nbytes(&rs) == m.addr + be_nbytes(&m));

    /* grid planning: lavapipe caps every dimension at 65535, NVIDIA x at 2^31-1; tests force 3 */
    const uint64_t sizes[] = {0, 1, 255, 256, 257, (1ull << 31) - 1, 1ull << 31, (1ull << 31) + 1, 1ull << 32,
                              (1ull << 32) + 7, 2600000000ull, 1ull << 40};
    const uint64_t per[] = {1, 64, 256, 1024};
    const uint32_t caps[] = {1, 3, 65535, 2147483647u};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (unsigned j = 0; j < sizeof per / sizeof *per; j++)
            for (unsigned k = 0; k < sizeof caps / sizeof *caps; k++)
                check_cover(sizes[i], per[j], caps[k]);
    /* 2.6e9 elements at 256 per group on lavapipe: 65535 groups, each loops 155 times */
    EXPECT(vk_grid_groups(2600000000ull, 256, 65535) == 65535);
    EXPECT(vk_grid_iterations(2600000000ull, 256, 65535) == 155);
    /* no truncation to 32 bits anywhere: 2^40 items at 1 per group */
    EXPECT(vk_grid_iterations(1ull << 40, 1, 65535) == ((1ull << 40) + 65534) / 65535);

    /* op rules on huge shapes: a valid linear with M = 2^31 + 1 rows validates (planning only) */
    struct err e = {0};
    /* (addresses are synthetic: far enough apart that the tensors do not overlap) */
    struct op_linear lin = {.x = be_tensor_2d(1ull << 44, BE_F32, (1ll << 31) + 1, 1024),
                            .w = be_tensor_2d(2ull << 44, BE_F16, 4096, 1024),
                            .y = be_tensor_2d(3ull << 44, BE_F32, (1ll << 31) + 1, 4096),
                            .alpha = 1.0f};
    EXPECT(op_validate(OP_linear, &lin, &e) == VKASR_OK);
    lin.res = lin.y; /* the residual may be the output itself ... */
    EXPECT(op_validate(OP_linear, &lin, &e) == VKASR_OK);
    lin.res.addr += 4; /* ... but not shifted against it */
    EXPECT(op_validate(OP_linear, &lin, &e) == VKASR_ERR_INTERNAL);
    lin.res = (be_tensor){0};
    lin.y.addr = lin.x.addr + 4096; /* nor may the output overlap x */
    EXPECT(op_validate(OP_linear, &lin, &e) == VKASR_ERR_INTERNAL);
    lin.y.addr = 3ull << 44;
    lin.w.ne[1] = 1023;
    EXPECT(op_validate(OP_linear, &lin, &e) == VKASR_ERR_INTERNAL);
    /* conv tiles: a tile missing halo rows is rejected */
    struct op_conv2d_s2 cv = {.x = be_tensor_2d(1ull << 40, BE_F32, 100, 128),
                              .w = be_tensor_2d(2ull << 40, BE_F32, 256, 9),
                              .b = be_tensor_1d(3ull << 40, BE_F32, 256),
                              .y = be_tensor_3d(4ull << 40, BE_F32, 10, 64, 256),
                              .x_row0 = 1000, .x_len = 1 << 30, .y_row0 = 500};
    /* output rows 500..509 read input rows 999..1019: a tile starting at 1000 lacks row 999 */
    EXPECT(op_validate(OP_conv2d_s2, &cv, &e) == VKASR_ERR_INTERNAL);
    cv.x_row0 = 999;
    EXPECT(op_validate(OP_conv2d_s2, &cv, &e) == VKASR_OK);
    cv.x_row0 = 919; /* rows 919..1018: lacks row 1019 */
    EXPECT(op_validate(OP_conv2d_s2, &cv, &e) == VKASR_ERR_INTERNAL);
    cv.x_len = 1019; /* ... unless row 1019 is past the valid length (reads as zero) */
    EXPECT(op_validate(OP_conv2d_s2, &cv, &e) == VKASR_OK);

    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
