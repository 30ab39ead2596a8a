/* subsampling.c — dw_striding x8 subsampling (spec §2) in halo tiles: each tile of encoder frames
 * [a, b) evaluates every stage only at the global rows it needs (7 mel frames of left halo), with
 * out-of-range rows read as zero, so tiles are bit-identical to one untiled pass and memory is
 * bounded by the tile, not the audio length. A packed batch is tiled along its packed rows, across
 * inputs: each stage's convolution takes the batch's offsets at its input and output stage and reads
 * zeros at every input's edges, so each input comes out as alone. Activations are channels-last:
 * [rows, freq, C], of asr_types.sub (f16 in f16 precision); the mel input and the output x [T, D] are
 * f32. Each tile counts as work between abort polls (steps.c), and on a CPU device tiles are cut to
 * about one step. */
#include "asr.h"

static int64_t half_up(int64_t v) { return (v + 1) / 2; }
/* A stride-2 stage's output length: ceil(n/2), or floor(n/2)+1 with causal padding (2 before, 1 after). */
static int64_t s2len(const struct model_config *c, int64_t v) { return c->causal_sub ? v / 2 + 1 : half_up(v); }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t asr_encoder_frames(const struct model_config *cfg, int64_t mel_frames) {
    int64_t l = mel_frames;
    for (int f = cfg->sub_factor; f > 1; f /= 2)
        l = s2len(cfg, l);
    return l;
}

/* A channels-last activation [rows, W, C] seen as [rows*W, C] for the pointwise convs, or as
 * [rows, W*C] for the final linear. */
static be_tensor flat2(const be_tensor *t, int64_t r, int64_t c) { return be_tensor_2d(t->addr, t->type, r, c); }

/* Rows each stage holds for a tile of encoder frames [a, a+tile): stage 1 [4a-3, 4b), stage 2
 * [2a-1, 2b), stage 3 [a, b) (causal: [4a-6, 4b-3), [2a-2, 2b-1): as many), clipped to the stage's
 * length (the most any tile of that size needs). */
static void tile_rows(const struct model_config *c, int64_t L, int64_t tile, int64_t *n1, int64_t *n2, int64_t *n3) {
    const int64_t L1 = s2len(c, L), L2 = s2len(c, L1), T = s2len(c, L2);
    tile = max64(1, min64(tile, T));
    *n1 = min64(L1, 4 * tile + 3);
    *n2 = min64(L2, 2 * tile + 1);
    *n3 = tile;
}

/* The packed rows of stage `in` that stage `in + 1` rows [a, b) read (each output row r of an input
 * reads its rows 2r-1 .. 2r+1, or 2r-2 .. 2r causal, those inside the input): [*lo, *hi). The inputs
 * between the first and the last row's need all their rows, so the range is contiguous. One input:
 * b == NULL. */
static void rows_needed(const struct asr_batch *bt, bool causal, enum asr_stage in, int64_t len_in, int64_t a,
                        int64_t b, int64_t *lo, int64_t *hi) {
    const int64_t before = causal ? 2 : 1, after = causal ? 1 : 2; /* [2a - before, 2(b-1) + after) */
    if (!bt || bt->n == 1) {
        *lo = max64(0, 2 * a - before);
        *hi = min64(len_in, 2 * (b - 1) + after);
        return;
    }
    const int64_t *oo = bt->off[in + 1], *oi = bt->off[in];
    int64_t sa = 0, sb = 0; /* the inputs of rows a and b - 1 (the last whose start is at most the row) */
    for (int64_t l = 0, h = bt->n - 1; l < h;) {
        int64_t mid = l + (h - l + 1) / 2;
        if (oo[mid] <= a)
            l = sa = mid;
        else
            h = mid - 1;
    }
    for (int64_t l = 0, h = bt->n - 1; l < h;) {
        int64_t mid = l + (h - l + 1) / 2;
        if (oo[mid] <= b - 1)
            l = sb = mid;
        else
            h = mid - 1;
    }
    *lo = oi[sa] + max64(0, 2 * (a - oo[sa]) - before);
    *hi = oi[sb] + min64(oi[sb + 1] - oi[sb], 2 * (b - 1 - oo[sb]) + after);
}

/* Multiply-adds per encoder frame, roughly: 4 rows of the first convolution (9 taps a channel), 2 of
 * the second stage's depthwise + pointwise pair, 1 of the third's and of the linear. */
static int64_t frame_macs(const struct model_config *c, int64_t F1, int64_t F2, int64_t F3) {
    const int64_t C = c->sub_channels;
    return 4 * F1 * C * 9 + 2 * F2 * C * (9 + C) + F3 * C * (9 + C) + F3 * C * c->d_model;
}

vkasr_status asr_subsample_tiled(const struct asr_model *m, struct backend *be, const be_tensor *feat, be_tensor *x,
                                 int64_t tile, const struct asr_batch *batch, struct asr_steps *steps, struct err *e) {
    const struct model_config *c = &m->cfg;
    const int64_t M = feat->ne[1], C = c->sub_channels;
    const int64_t F1 = s2len(c, M), F2 = s2len(c, F1), F3 = s2len(c, F2);
    const bool causal = c->causal_sub;
    /* lengths of every stage: the whole sequence, or the batch's totals (rows of all inputs) */
    const bool packed = batch && batch->n > 1;
    const int64_t L = feat->ne[0];
    const int64_t L1 = packed ? asr_batch_total(batch, ASR_SUB1) : s2len(c, L);
    const int64_t L2 = packed ? asr_batch_total(batch, ASR_SUB2) : s2len(c, L1);
    const int64_t T = packed ? asr_batch_total(batch, ASR_FRAMES) : s2len(c, L2);
    CHECK_OR_RETURN(e, c->sub_factor == 8 && x->ne[0] == T && x->ne[1] == c->d_model);
    CHECK_OR_RETURN(e, !packed || (L == asr_batch_total(batch, ASR_MEL) && batch->dev[ASR_FRAMES].addr));
    const be_tensor seg0 = asr_batch_seg(batch, ASR_MEL), seg1 = asr_batch_seg(batch, ASR_SUB1);
    const be_tensor seg2 = asr_batch_seg(batch, ASR_SUB2), seg3 = asr_batch_seg(batch, ASR_FRAMES);
    tile = asr_steps_rows(steps, max64(1, min64(tile, T)), 0, frame_macs(c, F1, F2, F3), 16);
    const be_dtype st = asr_types_for(m->precision).sub;
    if (T > 0) {
        int64_t n1, n2, n3;
        tile_rows(c, L, tile, &n1, &n2, &n3);
        const long long whole = (long long)(L1 * F1 * C), per = (long long)(n1 * F1 * C);
        if (tile < T)
            LOG_INFO(be->dev->log,
                     "subsampling: %lld tiles of up to %lld encoder frames; first conv %lld x %lld x %lld = %lld elements "
                     "per tile, the whole %lld x %lld x %lld = %lld never materialised",
                     (long long)((T + tile - 1) / tile), (long long)tile, (long long)n1, (long long)F1, (long long)C, per,
                     (long long)L1, (long long)F1, (long long)C, whole);
        else
            LOG_INFO(be->dev->log, "subsampling: one tile of %lld encoder frames; first conv %lld x %lld x %lld = %lld elements",
                     (long long)T, (long long)L1, (long long)F1, (long long)C, whole);
    }
    for (int64_t a = 0; a < T; a += tile) {
        const int64_t b = min64(T, a + tile);
        // rows each stage needs for encoder frames [a, b): stage k row r reads rows 2r-1..2r+1 of its input
        // (causal: 2r-2..2r)
        int64_t r2, h2, r1, h1;
        rows_needed(batch, causal, ASR_SUB2, L2, a, b, &r2, &h2);
        rows_needed(batch, causal, ASR_SUB1, L1, r2, h2, &r1, &h1);
        const int64_t n1 = h1 - r1, n2 = h2 - r2, n3 = b - a;
        uint64_t mark = be_mark(be);
        be_tensor s1, s2a, s2, s3a, s3;
        TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, st, 3, (int64_t[]){n1, F1, C}, &s1));
        TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, st, 3, (int64_t[]){n2, F2, C}, &s2a));
        TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, st, 3, (int64_t[]){n2, F2, C}, &s2));
        TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, st, 3, (int64_t[]){n3, F3, C}, &s3a));
        TRY(be_alloc_tensor(be, BE_POOL_SCRATCH, st, 3, (int64_t[]){n3, F3, C}, &s3));
        // conv 0 + ReLU: mel [L, M] -> s1 [n1, F1, C] (rows r1 ..)
        TRY(be_conv2d_s2(be, &(struct op_conv2d_s2){.x = *feat, .w = m->sub_w0, .b = m->sub_b0, .y = s1,
                                                     .x_row0 = 0, .x_len = L, .y_row0 = r1, .act = ACT_RELU,
                                                     .x_seg = seg0, .y_seg = seg1, .causal = causal}));
        // conv 2 (depthwise) -> conv 3 (pointwise) + ReLU: s2 [n2, F2, C] (rows r2 ..)
        TRY(be_dwconv2d_s2(be, &(struct op_dwconv2d_s2){.x = s1, .w = m->sub_w2, .b = m->sub_b2, .y = s2a,
                                                         .x_row0 = r1, .x_len = L1, .y_row0 = r2,
                                                         .x_seg = seg1, .y_seg = seg2, .causal = causal}));
        TRY(be_linear(be, &(struct op_linear){.x = flat2(&s2a, n2 * F2, C), .w = m->sub_w3, .bias = m->sub_b3,
                                               .y = flat2(&s2, n2 * F2, C), .act = ACT_RELU, .alpha = 1.0f,
                                               .x_f32 = asr_x_f32(m)}));
        // conv 5 (depthwise) -> conv 6 (pointwise) + ReLU: s3 [n3, F3, C] (rows a .. b-1)
        TRY(be_dwconv2d_s2(be, &(struct op_dwconv2d_s2){.x = s2, .w = m->sub_w5, .b = m->sub_b5, .y = s3a,
                                                         .x_row0 = r2, .x_len = L2, .y_row0 = a,
                                                         .x_seg = seg2, .y_seg = seg3, .causal = causal}));
        TRY(be_linear(be, &(struct op_linear){.x = flat2(&s3a, n3 * F3, C), .w = m->sub_w6, .bias = m->sub_b6,
                                               .y = flat2(&s3, n3 * F3, C), .act = ACT_RELU, .alpha = 1.0f,
                                               .x_f32 = asr_x_f32(m)}));
        // linear: [n3, F3*C] -> x rows [a, b) of [T, D]
        TRY(be_linear(be, &(struct op_linear){.x = flat2(&s3, n3, F3 * C), .w = m->sub_lin_w, .bias = m->sub_lin_b,
                                               .y = be_tensor_rows(x, a, n3), .alpha = 1.0f, .x_f32 = asr_x_f32(m)}));
        be_release(be, mark);
        TRY(asr_steps_add(steps, n3 * frame_macs(c, F1, F2, F3)));
        /* one input's tiles from the second to the one before the last hold alike (4 tile + 3, 2 tile
         * + 1 and tile rows): a measuring run (plan.c) skips to the last */
        if (be_measuring(be) && !packed && a == tile)
            a = max64(a, (T - 1) / tile * tile - tile);
    }
    return VKASR_OK;
}
