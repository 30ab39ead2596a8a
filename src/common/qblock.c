/* qblock.c — dequantization of ggml's block types Q8_0, Q4_K, Q5_K and Q6_K (byte layouts of
 * ggml-common.h; docs/model-format.md has the table). The shaders' twin is shaders/common/dequant.glsl. */
#include "qblock.h"

#include "half.h"

static float get_half(const uint8_t *p) { return half_to_float((uint16_t)(p[0] | p[1] << 8)); }

int qblock_size(uint32_t type) {
    switch (type) {
    case QB_Q8_0: return QK8_0;
    case QB_Q4_K:
    case QB_Q5_K:
    case QB_Q6_K: return QK_K;
    default: return 0;
    }
}

int qblock_bytes(uint32_t type) {
    switch (type) {
    case QB_Q8_0: return QB_BYTES_Q8_0;
    case QB_Q4_K: return QB_BYTES_Q4_K;
    case QB_Q5_K: return QB_BYTES_Q5_K;
    case QB_Q6_K: return QB_BYTES_Q6_K;
    default: return 0;
    }
}

static void row_q8_0(const uint8_t *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / QK8_0; b++, y += QK8_0, src += 2 + QK8_0) {
        const float d = get_half(src);
        for (int i = 0; i < QK8_0; i++)
            y[i] = d * (float)(int8_t)src[2 + i];
    }
}

/* Sub-block j's 6-bit scale and min of the 12 scale bytes: sub-blocks 0-3 in the low 6 bits of bytes
 * j and j+4; 4-7 their low 4 bits in byte j+4 and their top 2 bits in the top bits of bytes j-4, j. */
void qblock_unpack_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q4_K (144 bytes): d, dmin, scales[12], qs[128]; 64-weight group g: low nibbles then high nibbles
 * of qs[32g .. 32g+32). */
static void row_q4_k(const uint8_t *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / QK_K; b++, src += 144) {
        const float d = get_half(src), dmin = get_half(src + 2);
        const uint8_t *q = src + 16;
        for (int j = 0; j < 8; j += 2, q += 32) {
            int s0, m0, s1, m1;
            qblock_unpack_scale_min(src + 4, j, &s0, &m0);
            qblock_unpack_scale_min(src + 4, j + 1, &s1, &m1);
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)s0 * (float)(q[l] & 0xf) - dmin * (float)m0;
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)s1 * (float)(q[l] >> 4) - dmin * (float)m1;
        }
    }
}

/* Q5_K (176 bytes): d, dmin, scales[12], qh[32], qs[128]: the Q4_K nibbles plus a fifth bit per
 * weight; for 64-weight group g, bit 2g of qh[l] belongs to weight l and bit 2g+1 to weight l + 32. */
static void row_q5_k(const uint8_t *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / QK_K; b++, src += 176) {
        const float d = get_half(src), dmin = get_half(src + 2);
        const uint8_t *qh = src + 16, *ql = src + 48;
        for (int g = 0; g < 4; g++, ql += 32) {
            int s0, m0, s1, m1;
            qblock_unpack_scale_min(src + 4, 2 * g, &s0, &m0);
            qblock_unpack_scale_min(src + 4, 2 * g + 1, &s1, &m1);
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)s0 * (float)((ql[l] & 0xf) | ((qh[l] >> (2 * g)) & 1) << 4) - dmin * (float)m0;
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)s1 * (float)((ql[l] >> 4) | ((qh[l] >> (2 * g + 1)) & 1) << 4) - dmin * (float)m1;
        }
    }
}

/* Q6_K (210 bytes): ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], d; two halves of
 * 128 weights, each four runs of 32 (docs/model-format.md). */
static void row_q6_k(const uint8_t *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / QK_K; b++, src += 210) {
        const float d = get_half(src + 208);
        const int8_t *sc = (const int8_t *)(src + 192);
        const uint8_t *ql = src, *qh = src + 128;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128)
            for (int l = 0; l < 32; l++) {
                const int s = l / 16;
                const int q0 = ((ql[l] & 0xf) | (qh[l] & 3) << 4) - 32;
                const int q1 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * (float)sc[s] * (float)q0;
                y[l + 32] = d * (float)sc[s + 2] * (float)q1;
                y[l + 64] = d * (float)sc[s + 4] * (float)q2;
                y[l + 96] = d * (float)sc[s + 6] * (float)q3;
            }
    }
}

int qblock_dequant_row(uint32_t type, const void *src, float *y, int64_t k) {
    switch (type) {
    case QB_Q8_0: row_q8_0(src, y, k); return 0;
    case QB_Q4_K: row_q4_k(src, y, k); return 0;
    case QB_Q5_K: row_q5_k(src, y, k); return 0;
    case QB_Q6_K: row_q6_k(src, y, k); return 0;
    default: return -1;
    }
}
