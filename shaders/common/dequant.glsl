// dequant.glsl — one weight of a row of ggml block-quantized weights (Q8_0, Q4_K, Q5_K, Q6_K; byte
// layouts of ggml-common.h, docs/model-format.md), the shaders' twin of src/common/qblock.c: the same
// f32 arithmetic in the same order (precise: no contraction into an FMA), so a dequantized weight is
// bit for bit the host's. Select the type with -DWQ_Q8_0, -DWQ_Q4_K, -DWQ_Q5_K or -DWQ_Q6_K; defines
// WQ. Include after core.glsl. Reads 32-bit words only (no 8-bit storage needed): a byte is taken
// from its aligned word, which stays inside the tensor's allocation (arena blocks are 16-byte aligned).
#if defined(WQ_Q8_0) || defined(WQ_Q4_K) || defined(WQ_Q5_K) || defined(WQ_Q6_K)
#define WQ

layout(buffer_reference, std430, buffer_reference_align = 4) buffer QWordRef { uint v; };

#if defined(WQ_Q8_0)
const uint QB_K = 32u, QB_BYTES = 34u;
#elif defined(WQ_Q4_K)
const uint QB_K = 256u, QB_BYTES = 144u;
#elif defined(WQ_Q5_K)
const uint QB_K = 256u, QB_BYTES = 176u;
#else
const uint QB_K = 256u, QB_BYTES = 210u;
#endif

uint q_byte(uint64_t a) {
    const uint w = QWordRef(a & ~3ul).v;
    return (w >> ((uint(a) & 3u) * 8u)) & 0xffu;
}

// The little-endian f16 at byte address a.
float q_half(uint64_t a) { return unpackHalf2x16(q_byte(a) | (q_byte(a + 1ul) << 8)).x; }

#if defined(WQ_Q4_K) || defined(WQ_Q5_K)
// Sub-block j's 6-bit scale (x) and min (y) from the 12 scale bytes at s (qblock.c's unpack_sm).
uvec2 q_scale_min(uint64_t s, uint j) {
    if (j < 4u)
        return uvec2(q_byte(s + j) & 63u, q_byte(s + j + 4u) & 63u);
    const uint b = q_byte(s + j + 4u);
    return uvec2((b & 15u) | ((q_byte(s + j - 4u) >> 6) << 4), (b >> 4) | ((q_byte(s + j) >> 6) << 4));
}
#endif

// Weight k of the row starting at byte address row.
float dequant_weight(uint64_t row, uint k) {
    const uint64_t blk = row + uint64_t(k / QB_K) * uint64_t(QB_BYTES);
    const uint i = k % QB_K;
#if defined(WQ_Q8_0)
    precise float v = q_half(blk) * float(bitfieldExtract(int(q_byte(blk + 2u + i)), 0, 8));
    return v;
#elif defined(WQ_Q4_K) || defined(WQ_Q5_K)
    // 64-weight group g = i / 64: low nibbles for its first 32 weights, high for the rest
    const uint s = i / 32u, g = i / 64u, l = i % 32u, hi = s & 1u;
    const uvec2 sm = q_scale_min(blk + 4ul, s);
#if defined(WQ_Q4_K)
    const uint q = (q_byte(blk + 16u + 32u * g + l) >> (4u * hi)) & 15u;
#else
    const uint q = ((q_byte(blk + 48u + 32u * g + l) >> (4u * hi)) & 15u) | (((q_byte(blk + 16u + l) >> s) & 1u) << 4);
#endif
    precise float a = q_half(blk) * float(sm.x);
    precise float b = a * float(q);
    precise float c = q_half(blk + 2ul) * float(sm.y);
    precise float v = b - c;
    return v;
#else
    // two halves h of 128; in a half, run c = r / 32 takes ql[l + 32 (c & 1)] >> 4 (c >> 1) and
    // qh[l] >> 2c, scale sc[l / 16 + 2c]
    const uint h = i / 128u, r = i % 128u, c = r / 32u, l = r % 32u;
    const uint lo = (q_byte(blk + 64u * h + l + 32u * (c & 1u)) >> (4u * (c >> 1))) & 15u;
    const uint hb = (q_byte(blk + 128u + 32u * h + l) >> (2u * c)) & 3u;
    const int q = int(lo | (hb << 4)) - 32;
    const int sc = bitfieldExtract(int(q_byte(blk + 192u + 8u * h + l / 16u + 2u * c)), 0, 8);
    precise float a = q_half(blk + 208ul) * float(sc);
    precise float v = a * float(q);
    return v;
#endif
}

// Byte e (0..7) of 8 bytes held as two little-endian words.
uint q_b8(uvec2 q, uint e) { return (q[e >> 2] >> ((e & 3u) * 8u)) & 0xffu; }

// ---- A chunk's loads apart from its arithmetic ------------------------------------------------------
// q_fetch8 issues the loads of weights k .. k+7 of a row (k a multiple of 8) and nothing else;
// q_unpack8 then computes them, bit for bit dequant_weight's values (the same precise f32 operations on
// the same bytes). The tensor-core GEMM fetches the next K block with q_fetch8 before the products of the
// current one and unpacks only when it stores the block to shared memory, so the loads' latency hides
// behind the products, as it does for f16 weights. Blocks start at even byte addresses (their sizes are
// even and tensors 16-byte aligned), so an f16 never straddles two words.
#if defined(WQ_Q8_0)
#define QC_WORDS 4 // the scale's word, the words covering the 8 quants
#elif defined(WQ_Q4_K)
#define QC_WORDS 6 // d and dmin, the 12 scale bytes, 8 aligned quant bytes
#else
#define QC_WORDS 8 // Q5_K: as Q4_K plus 8 aligned high-bit bytes; Q6_K: ql and qh (3 words each), sc, d
#endif
// meta: bits 0-7 k % QB_K; 8-12 the quants' bit shift (0 or 16: 2-byte aligned blocks); 13 the f16
// scale in the word's high half; 14-15 the Q6_K scale byte's index in its word; 31 zero weights (past
// the matrix).
struct QChunk {
    uint w[QC_WORDS];
    uint meta;
};

const uint QC_ZERO = 0x80000000u;

// The aligned words covering the 8 bytes at a (a 2-byte aligned): the third only when a is not 4-byte
// aligned, so no load leaves the 8 bytes' words.
void q_fetch_words8(uint64_t a, out uint w0, out uint w1, out uint w2) {
    const uint64_t b = a & ~3ul;
    w0 = QWordRef(b).v;
    w1 = QWordRef(b + 4ul).v;
    w2 = (uint(a) & 3u) != 0u ? QWordRef(b + 8ul).v : 0u;
}

// The 8 bytes as two little-endian words, from the words and the shift (bits) q_fetch_words8 left.
uvec2 q_join8(uint w0, uint w1, uint w2, uint sh) {
    if (sh == 0u)
        return uvec2(w0, w1);
    return uvec2((w0 >> sh) | (w1 << (32u - sh)), (w1 >> sh) | (w2 << (32u - sh)));
}

float q_half_of(uint w, bool high) { return unpackHalf2x16(high ? w >> 16 : w & 0xffffu).x; }

QChunk q_fetch8(uint64_t row, uint k) {
    QChunk c;
    const uint64_t blk = row + uint64_t(k / QB_K) * uint64_t(QB_BYTES);
    const uint i = k % QB_K;
    c.meta = i;
#if defined(WQ_Q8_0)
    c.w[0] = QWordRef(blk & ~3ul).v;
    q_fetch_words8(blk + 2ul + i, c.w[1], c.w[2], c.w[3]);
    c.meta |= (((uint(blk) + 2u) & 3u) * 8u) << 8 | ((uint(blk) & 2u) != 0u ? 1u << 13 : 0u);
#elif defined(WQ_Q4_K) || defined(WQ_Q5_K)
    // 16-byte aligned blocks (144 and 176 bytes)
    const uint g = i / 64u, l = i % 32u;
    [[unroll]] for (uint j = 0; j < 4u; j++)
        c.w[j] = QWordRef(blk + 4ul * j).v;
#if defined(WQ_Q4_K)
    const uint64_t qa = blk + 16ul + 32u * g + l;
    c.w[4] = QWordRef(qa).v;
    c.w[5] = QWordRef(qa + 4ul).v;
#else
    const uint64_t qa = blk + 48ul + 32u * g + l, ha = blk + 16ul + l;
    c.w[4] = QWordRef(qa).v;
    c.w[5] = QWordRef(qa + 4ul).v;
    c.w[6] = QWordRef(ha).v;
    c.w[7] = QWordRef(ha + 4ul).v;
#endif
#else
    const uint h = i / 128u, r = i % 128u, cc = r / 32u, l = r % 32u;
    q_fetch_words8(blk + 64u * h + l + 32u * (cc & 1u), c.w[0], c.w[1], c.w[2]);
    q_fetch_words8(blk + 128u + 32u * h + l, c.w[3], c.w[4], c.w[5]);
    const uint64_t sa = blk + 192u + 8u * h + l / 16u + 2u * cc, da = blk + 208ul;
    c.w[6] = QWordRef(sa & ~3ul).v;
    c.w[7] = QWordRef(da & ~3ul).v;
    c.meta |= ((uint(blk) & 3u) * 8u) << 8 | ((uint(da) & 2u) != 0u ? 1u << 13 : 0u) | (uint(sa) & 3u) << 14;
#endif
    return c;
}

QChunk q_zero8() {
    QChunk c;
    [[unroll]] for (uint j = 0; j < QC_WORDS; j++)
        c.w[j] = 0u;
    c.meta = QC_ZERO;
    return c;
}

#if defined(WQ_Q4_K) || defined(WQ_Q5_K)
// Byte m of the 12 scale bytes (words 1-3).
uint qc_sbyte(QChunk c, uint m) { return (c.w[1u + m / 4u] >> ((m & 3u) * 8u)) & 0xffu; }
#endif

void q_unpack8(QChunk c, out float v[8]) {
    if ((c.meta & QC_ZERO) != 0u) {
        [[unroll]] for (uint e = 0; e < 8u; e++)
            v[e] = 0.0;
        return;
    }
    const uint i = c.meta & 0xffu, sh = (c.meta >> 8) & 31u;
    const bool dhigh = (c.meta & (1u << 13)) != 0u;
#if defined(WQ_Q8_0)
    const float d = q_half_of(c.w[0], dhigh);
    const uvec2 q = q_join8(c.w[1], c.w[2], c.w[3], sh);
    [[unroll]] for (uint e = 0; e < 8u; e++) {
        precise float t = d * float(bitfieldExtract(int(q_b8(q, e)), 0, 8));
        v[e] = t;
    }
#elif defined(WQ_Q4_K) || defined(WQ_Q5_K)
    const uint s = i / 32u, hi = s & 1u;
    uvec2 sm;
    if (s < 4u)
        sm = uvec2(qc_sbyte(c, s) & 63u, qc_sbyte(c, s + 4u) & 63u);
    else {
        const uint b = qc_sbyte(c, s + 4u);
        sm = uvec2((b & 15u) | ((qc_sbyte(c, s - 4u) >> 6) << 4), (b >> 4) | ((qc_sbyte(c, s) >> 6) << 4));
    }
    precise float a = q_half_of(c.w[0], false) * float(sm.x);
    precise float cm = q_half_of(c.w[0], true) * float(sm.y);
    const uvec2 ql = uvec2(c.w[4], c.w[5]);
#if defined(WQ_Q5_K)
    const uvec2 qh = uvec2(c.w[6], c.w[7]);
#endif
    [[unroll]] for (uint e = 0; e < 8u; e++) {
#if defined(WQ_Q4_K)
        const uint q = (q_b8(ql, e) >> (4u * hi)) & 15u;
#else
        const uint q = ((q_b8(ql, e) >> (4u * hi)) & 15u) | (((q_b8(qh, e) >> s) & 1u) << 4);
#endif
        precise float b = a * float(q);
        precise float t = b - cm;
        v[e] = t;
    }
#else
    const uint r = i % 128u, cc = r / 32u;
    const uvec2 ql = q_join8(c.w[0], c.w[1], c.w[2], sh), qh = q_join8(c.w[3], c.w[4], c.w[5], sh);
    const int sc = bitfieldExtract(int((c.w[6] >> (((c.meta >> 14) & 3u) * 8u)) & 0xffu), 0, 8);
    precise float a = q_half_of(c.w[7], dhigh) * float(sc);
    [[unroll]] for (uint e = 0; e < 8u; e++) {
        const uint lo = (q_b8(ql, e) >> (4u * (cc >> 1))) & 15u;
        const uint hb = (q_b8(qh, e) >> (2u * cc)) & 3u;
        const int q = int(lo | (hb << 4)) - 32;
        precise float t = a * float(q);
        v[e] = t;
    }
#endif
}
// Weights k .. k+7 of the row at byte address row (k a multiple of 8: one piece of one 32-weight
// sub-block), each bit for bit dequant_weight's (the same precise f32 operations), reading the block's
// scales once and its quants as whole words.
void dequant8(uint64_t row, uint k, out float v[8]) { q_unpack8(q_fetch8(row, k), v); }
#endif
