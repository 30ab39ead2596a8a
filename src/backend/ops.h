/* ops.h — the op library contract: every op the network uses, registered once in VKASR_OPS.
 *
 * An op = an argument struct here (struct op_<name>), a validation rule (ops.c), a plain-C reference
 * (backend/ref), and a Vulkan implementation (backend/vulkan, one GLSL kernel family). Backends provide
 * `<prefix>_<name>(backend, const struct op_<name> *)` for every entry; the tables are generated from
 * the X-macro so a missing implementation is a link error.
 *
 * Tensors are contiguous and row-major (PyTorch order: ne[0] is the outermost dimension). Shapes are
 * int64: nothing here is limited to 2^31 elements. Optional tensors have addr == 0.
 *
 * F16 tensors (IEEE binary16) where an op allows them: an op reads them widened exactly, computes in
 * f32 (the reference: double, rounded to float), and rounds an F16 output once, at the store, to the
 * nearest F16 (ties to even; overflow to infinity). Nothing in between is rounded to f16.
 */
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

/* Rows of the relative positional encoding (spec §3.2): y [n, C] F32, row i = PE(r) for r = r0 - i:
 * y[i][2j] = sin(x), negated for r < 0, and y[i][2j+1] = cos(x), where x = fl32(|r| * inv_freq[j]) is
 * the float32 product the reference implementations form (inv_freq [C/2] F32: transformers'
 * 1 / 10000^(2j/C) in float32, made by the caller, since pow differs between devices). C even; every
 * |r| < POSENC_MAX_R (2^22 frames: 93 hours at 80 ms). sin and cos are of the float x: the reference
 * evaluates them in double and rounds once, a device may be off by a few units of 2^-24. A row
 * depends only on its r, never on n or r0. */
#define POSENC_MAX_R ((int64_t)1 << 22)
struct op_posenc {
    be_tensor inv_freq, y;
    int64_t r0;
};

/* ---- row ops ---------------------------------------------------------------------------------- */

/* LayerNorm over the last dimension with affine gamma/beta [C]: biased variance, eps inside sqrt.
 * x [R, C] F32, y [R, C] F32 or F16 (statistics and normalisation in f32, y rounded once); gamma, beta
 * F32. y may alias x (both F32). */
struct op_layernorm {
    be_tensor x, gamma, beta, y;
    float eps;
};

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

/* y = res + alpha * act(x w^T + bias)
 *   x [M, K] F32 or F16;  w [N, K] F32, F16 or a block type (BE_Q8_0 ..; K a multiple of its block) (a
 *   PyTorch Linear weight);  bias [N] F32 optional;
 *   y [M, N] F32 or F16;  res [M, N] optional, of y's type (may alias y).
 * act = ACT_GLU: the product's N columns are GLU's value and gate halves (N even; PyTorch's
 * glu(dim=-1)): with v = x w^T + bias [M, N], y [M, N/2] = res + alpha * v[:, :N/2] * sigmoid(v[:, N/2:])
 * (res [M, N/2]); in f32 the same arithmetic as linear then glu, without v in memory.
 * With w in F16, an F32 x is rounded to F16 for the product (tensor-core path); an F16 x is used as
 * it is. A quantized w is its dequantized f32 values (qblock_dequant_row), x used as it is; except
 * on tensor cores, which round each dequantized weight and an F32 x to the nearest F16 (as for F16 w;
 * the op tests bound that path by the f16 products' NMSE, 5e-4). Accumulation and the epilogue are
 * F32; an F16 y receives the result rounded to the nearest F16 (ties to even). Any combination of the three types is valid.
 * A row's result does not depend on M (how many rows the call has): halo tiles rely on that. The
 * matvec hint marks a weight-bound product of a few rows per hypothesis (the decoder's joint and
 * projection): a backend may then compute it with a matrix-vector kernel whose rounding differs from
 * the unhinted kernels', but a row's result must still not depend on M (the rows of B hypotheses
 * decoded together come out as each hypothesis alone). Without the hint a backend may split K, but
 * only by N and K, never by M. */
struct op_linear {
    be_tensor x, w, bias, res, y;
    int act;
    float alpha;
    bool matvec;
};

/* ---- convolutions (channels-last) ------------------------------------------------------------- */

/* First subsampling conv: 3x3, stride 2, pad 1, one input channel -> C channels.
 *   x [Hx, W] holds global rows x_row0 .. x_row0+Hx-1 of an image whose valid rows are [0, x_len)
 *   w [C, 9] F32, b [C] F32;  y [Hy, ceil(W/2), C] holds global output rows y_row0 .. y_row0+Hy-1.
 *   x and y each F32 or F16.
 * Output row r reads input rows 2r-1 .. 2r+1; rows outside [0, x_len) read as zero (they must lie in
 * x when inside [0, x_len)). This is what makes halo tiles bit-identical to the untiled run.
 * A packed batch (x_seg, y_seg present, I64 [S+1] each: the offsets of S images concatenated along
 * rows, a leading 0 and the total last): output row R of image s, local row r = R - y_seg[s], reads
 * the local rows 2r-1 .. 2r+1 of image s (global rows x_seg[s] + ..), those outside [0, x_seg[s+1] -
 * x_seg[s]) as zero: each image is computed exactly as alone. x_len is then unused, and the halo rule
 * (the rows needed lie in x) is the caller's: the offsets live on the device. */
struct op_conv2d_s2 {
    be_tensor x, w, b, y;
    int64_t x_row0, x_len, y_row0;
    int act;
    be_tensor x_seg, y_seg;
};

/* Depthwise 3x3, stride 2, pad 1 on channels-last x [Hx, W, C] -> y [Hy, ceil(W/2), C]; w [C, 9], b [C]
 * F32; x and y each F32 or F16. Same global-row convention (and packed batches) as op_conv2d_s2. */
struct op_dwconv2d_s2 {
    be_tensor x, w, b, y;
    int64_t x_row0, x_len, y_row0;
    int act;
    be_tensor x_seg, y_seg;
};

/* Depthwise conv over time with kernel K (odd), 'same' zero padding, channels-last:
 *   x [T, C], w [C, K], b [C] (batch-norm folded in), y [T, C] = act(conv(x)); x and y each F32 or F16,
 *   w and b F32.
 * A packed batch (seg present, I64 [S+1]: segment start positions, a leading 0, the total last): x's
 * row t is position row0 + t, and a tap that would read across the boundary of the row's segment
 * reads zero, as at the ends of x: no segment leaks into another. */
struct op_dwconv1d {
    be_tensor x, w, b, y;
    int act;
    be_tensor seg;
    int64_t row0;
};

/* ---- attention -------------------------------------------------------------------------------- */

/* Transformer-XL / NeMo relative-position multi-head self-attention core (after the projections), on
 * a slice of the sequence (positions are sequence indices; one call over the whole sequence has
 * q_pos0 = k_pos0 = 0 and q, k, v of the same length T):
 *   q, y [Tq, H*dk] hold the queries at positions q_pos0 .. q_pos0+Tq-1;
 *   k, v [Tk, H*dk] hold the keys at positions k_pos0 .. k_pos0+Tk-1;
 *   p [P, H*dk], projected positions: row n encodes relative position (P-1)/2 - n, so query
 *   position i and key position j use row (P-1)/2 - (i - j);  bias_u, bias_v [H, dk] F32.
 *   q, k, v, p and y are each F32 or F16 (F16 inputs are exact values to the op; an F16 y receives the
 *   result rounded to nearest); q + u and q + v are formed in f32.
 *   S[h,i,j] = ((q_i + u_h).k_j + (q_i + v_h).p_row) / sqrt(dk) over the keys j present in k with
 *   j < n_valid and, when window > 0, |i - j| <= window (NeMo's rel_pos_local_attn [w, w]: keys
 *   outside the sequence simply do not exist); y[i, h*dk..] = softmax_j(S) . v.
 *   Query positions >= n_valid get zeros. Rules: every valid query position must be present in k
 *   (so each valid row scores at least its own key), and p must have a row for every (i - j) scored.
 * A row's result depends only on its position and the keys it scores, never on which other rows the
 * call has or how far k extends past its band: the network computes attention in row chunks (k, v
 * holding the chunk's band) bit-identically to one call. Never materialises more than a bounded block
 * of scores. */
struct op_relpos_attention {
    be_tensor q, k, v, p, bias_u, bias_v, y;
    int32_t heads;
    int64_t n_valid;
    int64_t window;
    int64_t q_pos0, k_pos0; /* positions of q's and k's row 0 */
    bool f16; /* products may take q+u, q+v, k, p, v and the softmax weights rounded to f16 (tensor
               * cores); the reference rounds the inputs alike. false: f32 throughout. */
    /* A packed batch (seg present, I64 [S+1]: the start positions of S sequences concatenated along
     * time, a leading 0 and the total last): attention is block-diagonal, a query scoring only the keys
     * of its own segment (with the band, n_valid and k's extent as above), and i - j, the relative
     * position, is the same as in the segment alone. seg_max (the longest segment, which the host
     * knows) bounds the relative positions p must cover. Each segment's rows come out exactly as a call
     * on that segment alone would give them (key blocks start on the segment's grid). */
    be_tensor seg;
    int64_t seg_max;
};

/* ---- decoder ---------------------------------------------------------------------------------- */

/* One LSTM step (PyTorch gate order i, f, g, o) of B independent rows (hypotheses):
 *   x [B, In], h, c [B, P] -> h_out, c_out [B, P] (B = 1 may be given as 1-D [In], [P]);
 *   w_ih [4P, In], w_hh [4P, P] F32, F16 or a block type (BE_Q8_0 ..; In, P multiples of its block: a
 *   quantized w is its dequantized f32 values, as for linear; an F16 w its exact f32 values, x and h
 *   not rounded);  b [4P] = b_ih + b_hh.
 * gate (I32, optional): row r's gate is gate[r * gate_stride]; when it is 0 the op writes nothing
 * for that row (the device-resident search's step for a hypothesis that did not emit). A row's
 * result does not depend on B or on the other rows. */
struct op_lstm_step {
    be_tensor x, h, c, w_ih, w_hh, b, h_out, c_out;
    be_tensor gate;
    int64_t gate_stride;
};

/* ---- greedy transducer search on the device ------------------------------------------------- */

/* The greedy TDT / RNN-T search (spec §6.4, §6.5) with its loop over frames and emitted tokens on the
 * device (src/asr/transducer_device.c), for B hypotheses (the inputs of a batch) at once. One
 * iteration of the search is this sequence of ops, recorded once and replayed many times without the
 * host looking at any result:
 *   search_joint   commits the last emission's LSTM state (h_old = h_new where S_EMIT is set) and
 *                  builds the joint input of a window of W frames: z [B*W, P] = relu(f[t_b + r] + q_b)
 *   linear         y [B*W, J] = z Wo^T + bo                        (J = V + 1 + ND)
 *   search_step    per hypothesis: the argmaxes of the window's rows, the walk over blanks and TDT
 *                  duration skips to the first emission, which is appended to the token ring; on an
 *                  emission S_EMIT is set and x0 = Emb[token]
 *   lstm_step      per layer, B rows each gated by its S_EMIT: (h_old, c) -> (h_new, c) from x0 or the
 *                  layer below's h_new
 *   linear         q [B, P] = h_new[L-1] Wp^T + bp
 * Every changing value lives in device memory: the search state of hypothesis b is state[b]
 * (SEARCH_S_* below), and a hypothesis that is done is left alone (its rows of z and y are not read).
 * The hypotheses' encoder frames are packed in f (no padding): hypothesis b owns rows S_F0 ..
 * S_F0 + S_FRAMES - 1. A hypothesis's arithmetic is the same whatever B: a batch decodes each input
 * exactly as alone. The kernels take their tensors' addresses (at most six) in push constants, not
 * from an argument block in memory: llvmpipe treats addresses loaded from memory as different per
 * invocation, which made search_joint 5x slower on lavapipe. */
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

/* The offsets of a packed batch (N inputs concatenated along time, no padding anywhere) in one
 * launch: from the inputs' lengths x [N] (I64, >= 0), up to SCAN_MAX_OUT int64 offset arrays, each
 * taking every length through its own transform
 *     len_k(i) = stride_k * ceil(floor(x[i] / div_k) / 2^halvings_k)
 * (samples -> mel frames: div = hop; each stride-2 subsampling stage halves, rounding up; a tensor's
 * row width: stride) and holding its inclusive scan, after a leading zero when lead_k is set:
 *     y_k [N + lead_k],   y_k[lead_k + i] = len_k(0) + .. + len_k(i)   (y_k[0] = 0 with lead_k).
 * 64-bit throughout; the caller keeps the totals below 2^63 (the planner computes them too). */
#define SCAN_MAX_OUT 5
struct op_offsets_scan_out {
    be_tensor y;          /* I64 [N + lead]                                                        */
    uint32_t div;         /* >= 1                                                                  */
    uint32_t halvings;    /* 0 .. 62                                                               */
    uint32_t stride;      /* >= 1                                                                  */
    bool lead;
};
struct op_offsets_scan {
    be_tensor x;          /* I64 [N]                                                               */
    int32_t nout;         /* 1 .. SCAN_MAX_OUT                                                     */
    struct op_offsets_scan_out out[SCAN_MAX_OUT];
};

/* ---- audio front end -------------------------------------------------------------------------- */

/* Power spectrum of pre-emphasised, centred (zero-padded), windowed frames:
 *   x [N] F32 raw samples; window [win] F32 (win <= n_fft, centred in n_fft);
 *   y [F, n_fft/2+1] F32 holds frames f0 .. f0+F-1:
 *   frame t covers samples 160t - n_fft/2 .. 160t + n_fft/2 - 1 (hop given), pre-emphasis
 *   e[n] = x[n] - preemph*x[n-1] (e[0] = x[0]), samples outside [0, N) are zero;
 *   y = (sqrt(re^2 + im^2))^2 as transformers computes it. */
struct op_stft_power {
    be_tensor x, window, y;
    int64_t f0;
    int32_t n_fft, hop;
    float preemph;
};

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
