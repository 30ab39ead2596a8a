/* quant.c — the quantized weight types' traits, Q8_0 (32 weights, one f16 scale), the dispatch to the
 * k-quants (quant_k.c), the rule choosing each tensor's stored type, and the row-parallel quantizer
 * the GGUF writer uses. Byte layouts are ggml's (ggml-common.h); the code is vkasr's own. */
#include "quant.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "model_types.h"

static const struct qtraits T_F32 = {"f32", 1, 4}, T_F16 = {"f16", 1, 2}, T_Q8_0 = {"q8_0", QK8_0, QB_BYTES_Q8_0},
                            T_Q4_K = {"q4_k", QK_K, QB_BYTES_Q4_K}, T_Q5_K = {"q5_k", QK_K, QB_BYTES_Q5_K},
                            T_Q6_K = {"q6_k", QK_K, QB_BYTES_Q6_K};

const struct qtraits *quant_traits(uint32_t type) {
    switch (type) {
    case QT_F32: return &T_F32;
    case QT_F16: return &T_F16;
    case QT_Q8_0: return &T_Q8_0;
    case QT_Q4_K: return &T_Q4_K;
    case QT_Q5_K: return &T_Q5_K;
    case QT_Q6_K: return &T_Q6_K;
    default: return NULL;
    }
}

bool quant_is_block(uint32_t type) {
    return type == QT_Q8_0 || type == QT_Q4_K || type == QT_Q5_K || type == QT_Q6_K;
}

uint64_t quant_row_bytes(uint32_t type, int64_t k) {
    const struct qtraits *t = quant_traits(type);
    return t ? (uint64_t)(k / t->block) * (uint64_t)t->bytes : 0;
}

uint32_t quant_type_of_mt(int mt) {
    switch (mt) {
    case MT_F32: return QT_F32;
    case MT_F16: return QT_F16;
    case MT_Q8_0: return QT_Q8_0;
    case MT_Q4_K: return QT_Q4_K;
    case MT_Q5_K: return QT_Q5_K;
    case MT_Q6_K: return QT_Q6_K;
    default: return UINT32_MAX;
    }
}

int quant_mt_of_type(uint32_t type) {
    switch (type) {
    case QT_F32: return MT_F32;
    case QT_F16: return MT_F16;
    case QT_Q8_0: return MT_Q8_0;
    case QT_Q4_K: return MT_Q4_K;
    case QT_Q5_K: return MT_Q5_K;
    case QT_Q6_K: return MT_Q6_K;
    default: return -1;
    }
}

/* Q8_0: d = amax / 127 stored as f16; q = round(x / d) with the stored (rounded) d, so that every
 * weight is within d/2 of its reconstruction d*q (ggml divides by the unrounded d; both are valid
 * Q8_0 and read the same). */
static int quant_row_q8_0(const float *x, uint8_t *dst, int64_t k) {
    for (int64_t b = 0; b < k / QK8_0; b++, x += QK8_0, dst += T_Q8_0.bytes) {
        float amax = 0.0f;
        for (int i = 0; i < QK8_0; i++) {
            if (!(fabsf(x[i]) <= QUANT_MAX_ABS)) /* NaN fails too */
                return -1;
            amax = fmaxf(amax, fabsf(x[i]));
        }
        const uint16_t dh = float_to_half(amax / 127.0f);
        const float d = half_to_float(dh);
        dst[0] = (uint8_t)(dh & 0xff);
        dst[1] = (uint8_t)(dh >> 8);
        for (int i = 0; i < QK8_0; i++) {
            float q = d > 0.0f ? roundf(x[i] / d) : 0.0f;
            q = fminf(127.0f, fmaxf(-127.0f, q));
            dst[2 + i] = (uint8_t)(int8_t)q;
        }
    }
    return 0;
}

int quant_row(uint32_t type, const float *x, void *dst, int64_t k) {
    switch (type) {
    case QT_F32: memcpy(dst, x, (size_t)k * 4); return 0;
    case QT_F16:
        for (int64_t i = 0; i < k; i++) {
            const uint16_t h = float_to_half(x[i]);
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
        }
        return 0;
    case QT_Q8_0: return quant_row_q8_0(x, dst, k);
    case QT_Q4_K: return quant_row_q4_k(x, dst, k);
    case QT_Q5_K: return quant_row_q5_k(x, dst, k);
    case QT_Q6_K: return quant_row_q6_k(x, dst, k);
    default: return -1;
    }
}

void dequant_row(uint32_t type, const void *src, float *y, int64_t k) {
    switch (type) {
    case QT_F32: memcpy(y, src, (size_t)k * 4); break;
    case QT_F16:
        for (int64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, (const uint8_t *)src + 2 * i, 2);
            y[i] = half_to_float(h);
        }
        break;
    case QT_Q8_0:
    case QT_Q4_K:
    case QT_Q5_K:
    case QT_Q6_K: qblock_dequant_row(type, src, y, k); break;
    default: memset(y, 0, (size_t)k * sizeof *y); break;
    }
}

uint32_t quant_tensor_type(const char *name, int64_t row_len, uint32_t requested) {
    if (requested == QT_F32)
        return QT_F32;
    const bool dec = model_is_decoder_matrix(name);
    /* the decoder's matrices take block types only: f16 files keep them f32 */
    if (!model_is_matrix_weight(name) && !(dec && quant_is_block(requested)))
        return QT_F32;
    uint32_t t = requested;
    if ((t == QT_Q4_K || t == QT_Q5_K || t == QT_Q6_K) && row_len % QK_K != 0)
        t = QT_Q8_0;
    if (t == QT_Q8_0 && row_len % QK8_0 != 0)
        t = dec ? QT_F32 : QT_F16;
    return t;
}

/* ---------------------------------------------------------------------------------------------- */
/* Rows in parallel                                                                               */

struct qjob {
    uint32_t type;
    const uint8_t *src;
    bool src_f16;
    int64_t r0, r1, k;
    uint8_t *dst;
    int64_t bad; /* 1 + the first refused row, 0 if none, -1 out of memory */
};

static void *qjob_run(void *arg) {
    struct qjob *j = arg;
    const uint64_t rb = quant_row_bytes(j->type, j->k);
    float *row = malloc((size_t)j->k * sizeof *row);
    if (!row) {
        j->bad = -1;
        return NULL;
    }
    for (int64_t r = j->r0; r < j->r1 && !j->bad; r++) {
        if (j->src_f16)
            dequant_row(QT_F16, j->src + (uint64_t)r * (uint64_t)j->k * 2, row, j->k);
        else
            memcpy(row, j->src + (uint64_t)r * (uint64_t)j->k * 4, (size_t)j->k * 4);
        if (quant_row(j->type, row, j->dst + (uint64_t)r * rb, j->k) != 0)
            j->bad = r + 1;
    }
    free(row);
    return NULL;
}

int64_t quant_rows(uint32_t type, const void *src, bool src_f16, int64_t nrows, int64_t k, void *dst, int nthreads) {
    enum { MAX_THREADS = 64 };
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > MAX_THREADS)
        nthreads = MAX_THREADS;
    if (nthreads > nrows)
        nthreads = nrows > 0 ? (int)nrows : 1;
    struct qjob jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int i = 0; i < nthreads; i++)
        jobs[i] = (struct qjob){type, src, src_f16, nrows * i / nthreads, nrows * (i + 1) / nthreads, k, dst, 0};
    for (int i = 1; i < nthreads; i++)
        started[i] = pthread_create(&th[i], NULL, qjob_run, &jobs[i]) == 0;
    for (int i = 0; i < nthreads; i++)
        if (!started[i])
            qjob_run(&jobs[i]);
    int64_t bad = 0;
    for (int i = 0; i < nthreads; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        if (jobs[i].bad && !bad)
            bad = jobs[i].bad;
    }
    return bad;
}
