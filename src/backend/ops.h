/* ops.h — the op library contract: every op the network uses, registered once in VKASR_OPS. An op is
 * an argument struct (op_<name>), a validation rule (ops.c), a plain-C reference (backend/ref) and a
 * kernel per backend; the tables come from the X-macro, so a missing implementation is a link error.
 * Tensors are contiguous, row-major (ne[0] outermost), int64-shaped; optional ones have addr == 0. F16
 * tensors are read widened exactly, computed in f32 (the reference: double) and an F16 output is
 * rounded once, at the store, to nearest even. */
#ifndef VKASR_OPS_H
#define VKASR_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vkasr.h"

/* BE_Q8_0 .. BE_Q6_K: ggml's block-quantized weights (src/common/qblock.h), blocks along the innermost
 * dimension, which the block size must divide; only linear's w takes them. */
typedef enum be_dtype {
    BE_F32 = 0, BE_F16 = 1, BE_I32 = 2, BE_I64 = 3, BE_Q8_0 = 4, BE_Q4_K = 5, BE_Q5_K = 6, BE_Q6_K = 7
} be_dtype;

#define BE_MAX_DIMS 4

typedef struct be_tensor {
    uint64_t addr;           /* device address (Vulkan) or host address (ref) of element 0 */
    be_dtype type;
    int32_t nd;              /* 0 .. BE_MAX_DIMS; nd == 0 is a scalar                      */
    int64_t ne[BE_MAX_DIMS]; /* shape, outermost first                                    */
} be_tensor;

/* Activations fused into epilogues. */
enum be_act {
    ACT_NONE = 0, ACT_RELU = 1, ACT_SILU = 2, ACT_SIGMOID = 3, ACT_TANH = 4, ACT_LOG_GUARD = 5, ACT_GLU = 6
};
/* ACT_LOG_GUARD: y = ln(x + 2^-24), the mel front end's log with its additive guard.
 * ACT_GLU: the gated linear unit over a product's columns, linear only (see op_linear). */

/* ---- element-wise ----------------------------------------------------------------------------- */

/* y = act(alpha * x). x and y have the same element count and type F32; may alias. */
struct op_unary {
    be_tensor x, y;
    int act;
    float alpha;
};

enum { BINARY_ADD = 0, BINARY_MUL = 1 };
/* ADD: y = act(alpha*a + beta*b);  MUL: y = act(alpha * a*b).
 * b is broadcast cyclically: element i of a pairs with element i % numel(b) (bias rows, per-channel
 * vectors); numel(b) must divide numel(a). y may alias a. All F32. */
struct op_binary {
    be_tensor a, b, y;
    int kind;
    int act;
    float alpha, beta;
};

/* Gated linear unit over the last dimension: x [R, 2C] -> y [R, C], y = x[:, :C] * sigmoid(x[:, C:]).
 * x and y each F32 or F16. (The network fuses it into the product before it: linear's ACT_GLU.) */
struct op_glu {
    be_tensor x, y;
};

/* Constant pad: y.ne[d] >= x.ne[d] + before[d] for every d; x lands at offset before[], the rest of y is
 * value. x and y have the same nd and type (F32 or F16 or I32). */
struct op_pad {
    be_tensor x, y;
    int64_t before[BE_MAX_DIMS];
    float value;
};

/* y = x.permute(perm) made contiguous: y.ne[d] = x.ne[perm[d]]. Identity perm = copy. Same type. */
struct op_permute {
    be_tensor x, y;
    int32_t perm[BE_MAX_DIMS];
};

/* Rows of the relative positional encoding (spec §3.2): y [n, C] F32, row i = PE(r), r = r0 - i:
 * y[i][2j] = sin(x) (negated for r < 0), y[i][2j+1] = cos(x), x = fl32(|r| * inv_freq[j]); inv_freq
 * [C/2] F32 comes from the caller (pow differs between devices). C even, |r| < POSENC_MAX_R (93 hours).
 * The reference rounds double sin/cos once; a device may be off by a few units of 2^-24. A row depends
 * only on its r. */
#define POSENC_MAX_R ((int64_t)1 << 22)
struct op_posenc {
    be_tensor inv_freq, y;
    int64_t r0;
};

/* ---- row ops ---------------------------------------------------------------------------------- */

/* LayerNorm over the last dimension with affine gamma/beta [C]: biased variance, eps inside sqrt.
 * x [R, C] F32, y [R, C] F32 or F16 (statistics and normalisation in f32, y rounded once); gamma, beta
 * F32. y may alias x (both F32).
 * y8 (optional, only on a backend with int8_rows; C % 4 == 0): also y's int8 rows, the operand of the
 * int8 products that read y (op_linear.x8), made in the same pass: be_rows8_bytes(R, C) bytes, R*C
 * int8 (row r at byte r*C, q = clamp(roundEven(y * (127 / max|y row|)), -127, 127)), then R f32 scales
 * max|y row| / 127 (0 and zeros for a row of zeros), from y's stored (rounded) values: bit for bit
 * what the product's own quantization of y would make. */
struct op_layernorm {
    be_tensor x, gamma, beta, y;
    float eps;
    uint64_t y8;
};

/* Bytes of the int8 rows of a [rows, cols] tensor: the rows, then one f32 scale per row. */
static inline uint64_t be_rows8_bytes(int64_t rows, int64_t cols) {
    return (uint64_t)rows * (uint64_t)cols + 4u * (uint64_t)rows;
}

/* Softmax over the last dimension of scale*x, max-subtracted. y may alias x. */
struct op_softmax {
    be_tensor x, y;
    float scale;
};

/* Per-row argmax over columns [c0, c1) of x [R, C] (F32); y [R] (I32) receives index - c0. Ties pick the
 * first index; NaN never wins. */
struct op_argmax {
    be_tensor x, y;
    int64_t c0, c1;
};

/* ---- matrix products -------------------------------------------------------------------------- */

/* y = res + alpha * act(x w^T + bias): x [M, K] F32 or F16; w [N, K] F32, F16 or a block type (K a
 * multiple of its block); bias [N] F32 optional; y [M, N] F32 or F16; res optional, y's type, may alias y.
 * ACT_GLU: v = x w^T + bias, y [M, N/2] = res + alpha * v[:, :N/2] * sigmoid(v[:, N/2:]) (N even), in f32
 * the arithmetic of linear then glu. With F16 w an F32 x is rounded to F16; a quantized w is its
 * dequantized f32 values, except on tensor cores, which round those and an F32 x to F16 (bounded by the
 * f16 NMSE, 5e-4). Accumulation and epilogue are F32. A row's result never depends on M (halo tiles,
 * batches): the matvec hint (the decoder's few weight-bound rows) may select a kernel that rounds
 * differently, and splits of K may depend on N and K only. x_f32: an f32 session's product whose F16 w
 * is an f16 file's weights read in place (the CPU backend's loader keeps them so; the reference honours
 * it too): x is not rounded, the product is that of w's exact f32 values. */
struct op_linear {
    be_tensor x, w, bias, res, y;
    int act;
    float alpha;
    bool matvec;
    bool x_f32;
    /* x8 (optional, only on a backend with int8_rows): x's int8 rows as op_layernorm.y8 made them from x,
     * which a product on the int8 path reads instead of quantizing x itself (same bytes: same result);
     * other paths ignore it. */
    uint64_t x8;
};

/* ---- convolutions (channels-last) ------------------------------------------------------------- */

/* First subsampling conv: 3x3, stride 2, pad 1, one input channel -> C. x [Hx, W] holds global rows
 * x_row0 .. of an image with valid rows [0, x_len); w [C, 9], b [C] F32; y [Hy, ceil(W/2), C] holds
 * global output rows y_row0 ..; x and y F32 or F16. Output row r reads input rows 2r-1 .. 2r+1, zero
 * outside [0, x_len) (inside, they must lie in x): halo tiles are bit-identical to the untiled run.
 * A packed batch (x_seg, y_seg: I64 [S+1] row offsets of S images, leading 0) computes each image as
 * alone, zero outside its own rows; x_len is unused and the halo rule is the caller's. */
struct op_conv2d_s2 {
    be_tensor x, w, b, y;
    int64_t x_row0, x_len, y_row0;
    int act;
    be_tensor x_seg, y_seg;
    bool causal; /* as op_dwconv2d_s2's below */
};

/* Depthwise 3x3, stride 2, pad 1 on channels-last x [Hx, W, C] -> y [Hy, ceil(W/2), C]; w [C, 9], b [C]
 * F32; x and y each F32 or F16. Same global-row convention (and packed batches) as op_conv2d_s2. */
struct op_dwconv2d_s2 {
    be_tensor x, w, b, y;
    int64_t x_row0, x_len, y_row0;
    int act;
    be_tensor x_seg, y_seg;
    bool causal;
};
/* causal (both stride-2 convs; NeMo's causal_downsampling): pad 2 before and 1 after in time and in
 * width instead of 1 and 1, so output row r reads input rows 2r-2 .. 2r and column c input columns
 * 2c-2 .. 2c; y [Hy, floor(W/2)+1, C]; a packed batch's y_seg then counts floor(n/2)+1 rows per image.
 * The halo rule is the same with rows 2r-2 .. 2r. */

/* Depthwise conv over time, kernel K odd, 'same' zero padding, channels-last: x [T, C], w [C, K], b [C]
 * (batch-norm folded in) F32, y [T, C] = act(conv(x)); x and y F32 or F16. A packed batch (seg: I64
 * [S+1] segment starts, leading 0; x's row t is position row0 + t) reads zero across a segment's edge.
 * causal: padding [K-1, 0] instead (NeMo's conv_context_size "causal"): y row t reads x rows t-K+1 .. t,
 * tap k of w weighting row t-K+1+k. */
struct op_dwconv1d {
    be_tensor x, w, b, y;
    int act;
    be_tensor seg;
    int64_t row0;
    bool causal;
};

/* ---- attention -------------------------------------------------------------------------------- */

/* Transformer-XL / NeMo relative-position multi-head self-attention core (after the projections) on a
 * slice of the sequence: q, y [Tq, H*dk] at positions q_pos0 ..; k, v [Tk, H*dk] at k_pos0 ..; p [P,
 * H*dk], row (P-1)/2 - (i - j) for query i and key j; bias_u, bias_v [H, dk] F32; q, k, v, p, y F32 or
 * F16, q + u and q + v formed in f32.
 *   S[h,i,j] = ((q_i + u_h).k_j + (q_i + v_h).p_row) / sqrt(dk),  y[i, h*dk..] = softmax_j(S) . v
 * over the keys present in k with j < n_valid and, when window > 0, |i - j| <= window (NeMo's
 * rel_pos_local_attn [w, w]), or when chunk > 0 (window 0), NeMo's chunked_limited mask: with positions
 * counted from the start s of the query's segment (s = 0 without seg), key j is scored iff
 * 0 <= (i-s)/chunk - (j-s)/chunk <= left_chunks (integer division: chunks of `chunk` frames anchored at
 * s; a query sees its own chunk and left_chunks chunks before it, i.e. keys [s + chunk*max(0, c -
 * left_chunks), s + chunk*(c+1)) for c = (i-s)/chunk); query positions >= n_valid get zeros. Every
 * valid query position must be present in k, and p must cover every i - j scored. A row's result
 * depends only on its position and the keys it scores, so row chunks are bit-identical to one call; no
 * backend materialises T x T. */
struct op_relpos_attention {
    be_tensor q, k, v, p, bias_u, bias_v, y;
    int32_t heads;
    int64_t n_valid;
    int64_t window;
    int64_t chunk, left_chunks; /* chunked_limited: chunk = R+1, left_chunks = L/(R+1); chunk 0: off */
    int64_t q_pos0, k_pos0; /* positions of q's and k's row 0 */
    bool f16; /* products may round q+u, q+v, k, p, v and the softmax weights to f16 (the reference
               * alike); false: f32 throughout */
    /* A packed batch (seg: I64 [S+1] sequence starts, leading 0): block-diagonal, each segment's rows
     * exactly as a call on that segment alone; seg_max (the longest) bounds the positions p covers. */
    be_tensor seg;
    int64_t seg_max;
    /* Queries at given positions (optional, I64 [Tq], with seg; positions < 2^30): query row r is at
     * position q_pos[r] instead of q_pos0 + r. The streaming session's form: each stream's segment of
     * keys is [its cache | its chunk], its chunk's queries the last rows of it, so every stream of a
     * batch attends to its own keys in one call. The caller keeps each query's position inside k and
     * its segment no longer than seg_max (not checked: the table is on the device). */
    be_tensor q_pos;
};

/* Row copies (gather and scatter): y row dst[r] = x row src[r] for r < n; src and dst I64 [n],
 * optional (absent: the identity r). x [Rx, W] and y [Ry, W] of one type (F32, F16 or I32), rows of a
 * whole number of 4-byte words, 4-byte aligned. A pair whose index lies outside x's or y's rows is
 * skipped. x and y may be the same tensor when no pair's destination row is another pair's source;
 * destination rows must be distinct. */
struct op_copy_rows {
    be_tensor x, y, src, dst;
    int64_t n;
};

/* ---- decoder ---------------------------------------------------------------------------------- */

/* One LSTM step (PyTorch gate order i, f, g, o) of B independent rows: x [B, In], h, c [B, P] ->
 * h_out, c_out [B, P] (B = 1 may be 1-D); w_ih [4P, In], w_hh [4P, P] F32, F16 or a block type (their
 * exact f32 values, x and h not rounded); b [4P] = b_ih + b_hh. gate (I32, optional): a row whose
 * gate[r * gate_stride] is 0 is not written. A row's result does not depend on B or the other rows. */
struct op_lstm_step {
    be_tensor x, h, c, w_ih, w_hh, b, h_out, c_out;
    be_tensor gate;
    int64_t gate_stride;
};

/* ---- greedy transducer search on the device ------------------------------------------------- */

/* The greedy TDT / RNN-T search (spec §6.4, §6.5) on the device (src/asr/transducer_device.c) for B
 * hypotheses at once. An iteration is this sequence of ops, recorded once and replayed without the host:
 *   search_joint   commits the last emission's LSTM state (h_old = h_new where S_EMIT is set) and
 *                  builds the joint input of a window of W frames: z [B*W, P] = relu(f[t_b + r] + q_b)
 *   linear         y [B*W, J] = z Wo^T + bo                        (J = V + 1 + ND)
 *   search_step    per hypothesis: the argmaxes of the window's rows, the walk over blanks and TDT
 *                  duration skips to the first emission, which is appended to the token ring; on an
 *                  emission S_EMIT is set and x0 = Emb[token]
 *   lstm_step      per layer, B rows each gated by its S_EMIT: (h_old, c) -> (h_new, c) from x0 or the
 *                  layer below's h_new
 *   linear         q [B, P] = h_new[L-1] Wp^T + bp
 * Every changing value lives in device memory (state[b], SEARCH_S_* below); a hypothesis that is done
 * is left alone, and its frames are rows S_F0 .. of the packed f. A batch decodes each input exactly
 * as alone. Tensor addresses (at most six) go in push constants: llvmpipe treats addresses loaded from
 * memory as varying per invocation (docs/gpu-results.md, "Without a GPU: lavapipe"). */
#define SEARCH_MAX_WINDOW 32        /* W: a power of two                                          */
#define SEARCH_STATE_INTS 16        /* per hypothesis                                              */
/* The state of a hypothesis (I32). */
enum {
    SEARCH_S_T = 0,      /* next frame to evaluate (0 .. T_b)                                       */
    SEARCH_S_FRAMES,     /* frames of this hypothesis (T_b)                                         */
    SEARCH_S_LAST_T,     /* frame of the last emission (-1: none yet)                               */
    SEARCH_S_RUN,        /* symbols emitted at the current frame (the max_symbols rule)             */
    SEARCH_S_DONE,       /* 1 once t >= T_b                                                         */
    SEARCH_S_EMIT,       /* 1: the last step emitted and frames remain (the LSTM runs; the next
                          * search_joint commits); a step past the end changes nothing            */
    SEARCH_S_TOKEN,      /* the last emitted token                                                  */
    SEARCH_S_NTOK,       /* tokens emitted so far; token i is in ring slot i % capacity             */
    SEARCH_S_STEPS,      /* joint evaluations the search consumed (rows walked)                     */
    SEARCH_S_ITERS,      /* search_step calls that found the hypothesis not done                    */
    SEARCH_S_SPAN,       /* window rows the steps needed: up to the emission, or all of a window    */
    SEARCH_S_F0,         /* the hypothesis's first row of f                                         */
    SEARCH_S_ARRIVED     /* 0 between ops (a backend's search_step may count its workgroups here)   */
};

/* The search's tensors and constants: one description shared by its ops. */
struct be_search {
    be_tensor state;     /* I32 [B, SEARCH_STATE_INTS]                                               */
    be_tensor tokens;    /* I32 [B, capacity, 3]: ring of emitted (token, frame, duration)           */
    be_tensor f;         /* F32 [Tf, P]: the encoder half of the joint, f = E We^T + be, of every
                          * hypothesis (packed: rows S_F0 .. of hypothesis b)                        */
    be_tensor q;         /* F32 [B, P]: the projected prediction output                              */
    be_tensor z;         /* F32 [B * Wmax, P]: joint input of a window                               */
    be_tensor y;         /* F32 [B * Wmax, J]: joint logits of a window                              */
    be_tensor x0;        /* F32 [B, P]: Emb[last token], the first LSTM layer's input                */
    be_tensor h_old, h_new; /* F32 [L, B, P]: LSTM h before and after the last emission's step     */
    be_tensor embed;     /* F32 [V+1, P]: the prediction network's embedding                         */
    be_tensor durations; /* I32 [ND]: TDT durations; absent (addr 0) for RNN-T                      */
    be_tensor live;      /* I32 [1], optional: hypotheses not done. be_search_init sets it to B and
                          * search_step lowers it by one as each hypothesis becomes done, so it can
                          * predicate the recorded iteration (be_graph_begin_predicated)              */
    int32_t max_symbols; /* per frame                                                                */
};

/* Commit (h_old = h_new where S_EMIT is set), then z rows for window W of every hypothesis (frames
 * past T_b read row T_b - 1). */
struct op_search_joint {
    const struct be_search *s;
    int32_t window;
};

/* The step: consumes y [B*W, J] (same W as the search_joint before it). Token argmax over columns
 * [0, V] and duration argmax over [V+1, J) as op_argmax (first index on ties, NaN never wins). */
struct op_search_step {
    const struct be_search *s;
    int32_t window;
};

/* ---- packed batches --------------------------------------------------------------------------- */

/* A packed batch's offsets in one launch: from the lengths x [N] (I64 >= 0), up to SCAN_MAX_OUT arrays
 * y_k [N + lead_k] holding the inclusive scan of len_k(i) = stride_k * ceil(floor(x[i] / div_k) /
 * 2^halvings_k), after a leading zero when lead_k is set (div: samples -> mel frames; halvings: the
 * stride-2 subsampling; stride: a row's width). causal_k: floor(n/2)+1 per halving instead of
 * ceil(n/2) (causal subsampling), i.e. floor((l + 2^(h+1) - 2) / 2^h) for l = floor(x[i] / div_k).
 * 64-bit; the caller keeps totals below 2^63. */
#define SCAN_MAX_OUT 5
struct op_offsets_scan_out {
    be_tensor y;          /* I64 [N + lead]                                                        */
    uint32_t div;         /* >= 1                                                                  */
    uint32_t halvings;    /* 0 .. 62                                                               */
    uint32_t stride;      /* >= 1                                                                  */
    bool lead;
    bool causal;
};
struct op_offsets_scan {
    be_tensor x;          /* I64 [N]                                                               */
    int32_t nout;         /* 1 .. SCAN_MAX_OUT                                                     */
    struct op_offsets_scan_out out[SCAN_MAX_OUT];
};

/* ---- audio front end -------------------------------------------------------------------------- */

/* Power spectrum of pre-emphasised (e[n] = x[n] - preemph x[n-1], e[0] = x[0]), centred, windowed
 * frames: x [N] F32; window [win] F32 centred in n_fft; y [F, n_fft/2+1] F32 holds frames f0 .., frame t
 * covering samples hop t - n_fft/2 .. hop t + n_fft/2 - 1 (zero outside [0, N)); y = (sqrt(re^2 +
 * im^2))^2 as transformers computes it. */
struct op_stft_power {
    be_tensor x, window, y;
    int64_t f0;
    int32_t n_fft, hop;
    float preemph;
    /* A packed batch (optional): seg I64 [S, 4], segment s = (row0, x0, n, f0), row0 ascending from 0:
     * y's rows row0_s .. row0_{s+1} - 1 (the last segment's: to F) are the frames f0_s .. of the signal
     * x[x0_s, x0_s + n_s) as a call on that slice alone (the call's f0 unused). A streaming step's form:
     * every stream's frames in one call. */
    be_tensor seg;
};
/* Row f of stft_power's y on a host backend: its signal x[*x0, *x0 + *n) and its frame *t in it (the
 * call's x and f0, or its segment's). */
void op_stft_frame(const struct op_stft_power *a, int64_t f, int64_t *x0, int64_t *n, int64_t *t);

/* Per-column standardisation over rows (mel bins over time): x [L, M] -> y [L, M],
 * y = (x - mean) / (std + eps) with the unbiased std (L-1); L == 1 gives std = 0. y may alias x. */
struct op_feature_norm {
    be_tensor x, y;
    float eps;
};

/* ---- the registry ----------------------------------------------------------------------------- */

#define VKASR_OPS(X)                                                                                   \
    X(unary)                                                                                           \
    X(binary)                                                                                          \
    X(glu)                                                                                             \
    X(pad)                                                                                             \
    X(permute)                                                                                         \
    X(posenc)                                                                                          \
    X(layernorm)                                                                                       \
    X(softmax)                                                                                         \
    X(argmax)                                                                                          \
    X(linear)                                                                                          \
    X(conv2d_s2)                                                                                       \
    X(dwconv2d_s2)                                                                                     \
    X(dwconv1d)                                                                                        \
    X(relpos_attention)                                                                                \
    X(copy_rows)                                                                                       \
    X(lstm_step)                                                                                       \
    X(search_joint)                                                                                    \
    X(search_step)                                                                                     \
    X(stft_power)                                                                                      \
    X(feature_norm)                                                                                    \
    X(offsets_scan)

enum op_id {
#define X(name) OP_##name,
    VKASR_OPS(X)
#undef X
        OP_COUNT
};

/* ---- tensor helpers (ops.c) ------------------------------------------------------------------- */

size_t be_dtype_size(be_dtype t);         /* bytes per element; 0 for the block types */
bool be_dtype_is_quant(be_dtype t);      /* BE_Q8_0 .. BE_Q6_K */
int be_dtype_block(be_dtype t);          /* elements per block: 1 for F32/F16/I32/I64 */
int be_dtype_block_bytes(be_dtype t);    /* bytes per block (be_dtype_size for the plain types) */
uint32_t be_dtype_ggml(be_dtype t);      /* GGML type id of a block type (qblock.h); 0 for the others */
const char *be_dtype_name(be_dtype t);   /* "f32", "q4_k", ... (the CLI's --type names); "?" if unknown */
uint64_t be_numel(const be_tensor *t);   /* product of ne[0..nd-1]; 1 for nd == 0 */
uint64_t be_nbytes(const be_tensor *t);
be_tensor be_tensor_make(uint64_t addr, be_dtype type, int nd, const int64_t *ne);
be_tensor be_tensor_1d(uint64_t addr, be_dtype type, int64_t n0);
be_tensor be_tensor_2d(uint64_t addr, be_dtype type, int64_t n0, int64_t n1);
be_tensor be_tensor_3d(uint64_t addr, be_dtype type, int64_t n0, int64_t n1, int64_t n2);
/* Row r of a 2-D tensor (or the slice r of the outermost dimension), as a tensor of nd-1 dims. */
be_tensor be_tensor_row(const be_tensor *t, int64_t r);
/* Rows [r0, r0+n) of the outermost dimension. */
be_tensor be_tensor_rows(const be_tensor *t, int64_t r0, int64_t n);
const char *op_name(enum op_id id);

struct err;
/* Checks an op's arguments (shapes, types, required tensors); fills e and returns an error status
 * naming the op and the offending field. Both backends call it before running an op. */
vkasr_status op_validate(enum op_id id, const void *args, struct err *e);
/* Validates a search's description (be_search_init) and makes its initial state on the host: *state
 * (malloc'd, *bytes long; the caller frees it) for the B hypotheses of frames[b] frames each. */
vkasr_status op_search_init_state(const struct be_search *s, const int64_t *frames, int32_t **state, uint64_t *bytes,
                                  struct err *e);
/* Workgroups (blocks) per hypothesis a GPU backend's search_step splits the token argmax over: enough
 * for B hypotheses to cover `units` compute units (SMs), chunks of at least 64 of the V + 1 token
 * columns, at most 64, at least 1. The tokens chosen do not depend on it. */
int64_t op_search_step_chunks(int64_t units, int64_t B, int64_t V);

#endif
