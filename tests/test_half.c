/* test_half.c — the binary16 conversions (src/common/half.c), scalar and by rows, against the compiler's
 * own _Float16 conversions (round to nearest even) where it has them: every half to float; to half, every
 * half's exact value, the midpoints to its neighbours (ties), a float either side of each midpoint, a
 * stride through all 2^32 float bit patterns, and the special values (zeros, subnormals, 65504 to
 * infinity, infinities, NaNs). The row functions are checked on whole arrays, as the loader calls them. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "expect.h"

#ifdef __FLT16_MAX__
#define ORACLE "_Float16"
__extension__ typedef _Float16 f16; /* C23 / ISO TS 18661-3, a GCC extension in C11 */
static uint16_t oracle_to_half(float f) {
    f16 h = (f16)f;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static float oracle_to_float(uint16_t b) {
    f16 h;
    memcpy(&h, &b, 2);
    return (float)h;
}
#else /* no independent oracle in this compiler: the scalar conversions stand in */
#define ORACLE "the scalar conversions (no _Float16 in this compiler)"
static uint16_t oracle_to_half(float f) { return float_to_half(f); }
static float oracle_to_float(uint16_t b) { return half_to_float(b); }
#endif

static bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

/* Both conversions to half agree with the oracle on x[0..n): NaNs give a NaN of x's sign; the rest the
 * oracle's bits. */
static void check_to_half(const char *what, const float *x, size_t n) {
    uint16_t *row = malloc(n * sizeof *row);
    EXPECT(row != NULL, "out of memory");
    if (!row)
        return;
    float_to_half_row(x, row, n);
    size_t bad_scalar = 0, bad_row = 0, first_scalar = n, first_row = n;
    for (size_t i = 0; i < n; i++) {
        const uint16_t want = oracle_to_half(x[i]), s = float_to_half(x[i]);
        const bool nan = isnan(x[i]), neg = (float_bits(x[i]) >> 31) != 0;
        const bool ok_s = nan ? half_is_nan(s) && (s >> 15) == neg : s == want;
        const bool ok_r = nan ? half_is_nan(row[i]) && (row[i] >> 15) == neg : row[i] == want;
        if (!ok_s && bad_scalar++ == 0)
            first_scalar = i;
        if (!ok_r && bad_row++ == 0)
            first_row = i;
    }
    EXPECT(bad_scalar == 0, "%s: float_to_half differs from %s on %zu of %zu values (first: 0x%08x -> 0x%04x, "
           "want 0x%04x)", what, ORACLE, bad_scalar, n, first_scalar < n ? float_bits(x[first_scalar]) : 0,
           first_scalar < n ? float_to_half(x[first_scalar]) : 0,
           first_scalar < n ? oracle_to_half(x[first_scalar]) : 0);
    EXPECT(bad_row == 0, "%s: float_to_half_row differs from %s on %zu of %zu values (first: 0x%08x -> 0x%04x, "
           "want 0x%04x)", what, ORACLE, bad_row, n, first_row < n ? float_bits(x[first_row]) : 0,
           first_row < n ? row[first_row] : 0, first_row < n ? oracle_to_half(x[first_row]) : 0);
    free(row);
}

int main(void) {
    printf("oracle: %s\n", ORACLE);
    /* every half to float */
    static uint16_t all[65536];
    static float wide[65536];
    for (uint32_t i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    half_to_float_row(all, wide, 65536);
    size_t bad = 0, bad_row = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        const float want = oracle_to_float(all[i]), s = half_to_float(all[i]);
        if (isnan(want) ? !isnan(s) : float_bits(s) != float_bits(want))
            bad++;
        if (isnan(want) ? !isnan(wide[i]) : float_bits(wide[i]) != float_bits(want))
            bad_row++;
    }
    EXPECT(bad == 0, "half_to_float differs from %s on %zu of 65536 halves", ORACLE, bad);
    EXPECT(bad_row == 0, "half_to_float_row differs from %s on %zu of 65536 halves", ORACLE, bad_row);

    /* each finite half's value, the midpoint to the next one up, and a float either side of it; both signs */
    const size_t per = 4, nh = 0x7c00;
    float *x = malloc(2 * nh * per * sizeof *x);
    EXPECT(x != NULL, "out of memory");
    if (!x)
        return 1;
    size_t n = 0;
    for (uint32_t h = 0; h < nh; h++) {
        const float v = half_to_float((uint16_t)h);
        /* the next half up (0x7bff's: 65536, where rounding goes to infinity) */
        const float up = h + 1 < nh ? half_to_float((uint16_t)(h + 1)) : 65536.0f;
        const float mid = v + (up - v) / 2; /* exact: a half has 11 significant bits, a float 24 */
        const float vals[4] = {v, mid, float_from_bits(float_bits(mid) - 1), float_from_bits(float_bits(mid) + 1)};
        for (size_t k = 0; k < per; k++) {
            x[n++] = vals[k];
            x[n++] = -vals[k];
        }
    }
    check_to_half("halves and their midpoints", x, n);
    free(x);

    /* a stride through every float bit pattern (all exponents, NaNs and infinities included) */
    const size_t ns = 65537;
    x = malloc(ns * sizeof *x);
    EXPECT(x != NULL, "out of memory");
    if (!x)
        return 1;
    for (size_t i = 0; i < ns; i++)
        x[i] = float_from_bits((uint32_t)(i * 65521u + 12345u));
    check_to_half("a stride through all floats", x, ns);
    free(x);

    const float specials[] = {0.0f, -0.0f, float_from_bits(1), float_from_bits(0x807fffffu), 0x1p-25f, -0x1p-25f,
                              0x1.8p-25f, 0x1p-24f, 0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f, 65504.0f, 65519.0f,
                              65519.99f, 65520.0f, 65536.0f, 1e10f, -1e10f, INFINITY, -INFINITY, NAN, -NAN,
                              float_from_bits(0x7f800001u), float_from_bits(0xffc00001u), 3.4028235e38f, 1.0f,
                              -1.0f, 0.1f, 1.0009765625f, 1.00048828125f};
    check_to_half("special values", specials, sizeof specials / sizeof *specials);

    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
