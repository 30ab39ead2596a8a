/* asr.h — the Parakeet network on the backend interface: device weights, the encoder (front end,
 * subsampling, conformer stack) and the greedy decoders. src/api drives it; it never touches Vulkan. */
#ifndef VKASR_ASR_H
#define VKASR_ASR_H

#include "backend/backend.h"
#include "model/model_types.h"
#include "vkasr_debug.h"

struct asr_layer {
    be_tensor ff1_norm_w, ff1_norm_b, ff1_w1, ff1_b1, ff1_w2, ff1_b2;
    be_tensor att_norm_w, att_norm_b, wq, bq, wk, bk, wv, bv, wo, bo, wpos, bias_u, bias_v;
    be_tensor conv_norm_w, conv_norm_b, pw1_w, pw1_b, dw_w, dw_b, pw2_w, pw2_b;
    be_tensor dw_ln_w, dw_ln_b;      /* conv_ln models: the LayerNorm after the depthwise conv    */
    be_tensor ff2_norm_w, ff2_norm_b, ff2_w1, ff2_b1, ff2_w2, ff2_b2;
    be_tensor out_norm_w, out_norm_b;
};

struct asr_model {
    struct model_config cfg;
    struct tokenizer tok;            /* moved out of the model file                            */
    vkasr_precision precision;       /* F32 or F16 (never AUTO)                               */
    struct be_device *dev;
    /* front end */
    be_tensor window;                /* [win_length]                                          */
    be_tensor melbank;               /* [n_mels, n_fft/2+1] f32 (a linear weight)             */
    /* subsampling: convs 0 (1->C), 2/5 depthwise, 3/6 pointwise, then the linear             */
    be_tensor sub_w0, sub_b0, sub_w2, sub_b2, sub_w3, sub_b3, sub_w5, sub_b5, sub_w6, sub_b6;
    be_tensor sub_lin_w, sub_lin_b;
    struct asr_layer *layers;
    be_tensor pos_freq;              /* [D/2] f32: the positional encoding's frequencies        */
    /* CTC head */
    be_tensor ctc_w, ctc_b;
    /* transducer: prediction net, joint */
    be_tensor embed;                 /* [V+1, P]                                              */
    be_tensor lstm_wih[8], lstm_whh[8], lstm_b[8];
    be_tensor pred_proj_w, pred_proj_b, enc_proj_w, enc_proj_b, joint_w, joint_b;
    /* the language prompt (cfg.n_prompts > 0): first Linear's encoder columns [Hp, D], its one-hot
     * columns as rows [n_prompts, Hp], its bias [Hp]; the second Linear [D, Hp], [D] */
    be_tensor prompt_w1, prompt_lang, prompt_b1, prompt_w2, prompt_b2;
    struct model_langs langs;        /* the language map (moved out of the model file)          */
    uint64_t n_params;
    struct model_file *file;         /* the file host weights are read from in place (NULL: none) */
    bool quantized;                  /* some weights are block-quantized (be_memory.op_scratch_quant) */
};

/* Uploads mf's weights to dev. A host device (the CPU and reference backends) reads them in place
 * where their layout allows (f32, quantized blocks, and on the CPU backend f16 matrices in an f32
 * session too): the model then takes the file (*mf becomes NULL, closed with the model); else *mf
 * stays the caller's to close. */
vkasr_status asr_model_load(struct be_device *dev, struct model_file **mf, vkasr_precision precision,
                            struct asr_model **out, struct err *e);
/* An f32 session's products take x unrounded even where w is f16 (op_linear.x_f32). */
static inline bool asr_x_f32(const struct asr_model *m) { return m->precision == VKASR_PRECISION_F32; }
void asr_model_free(struct asr_model *m);

/* Host-side callbacks of one run (progress in [0,1] over encoder + decoder, abort polling). */
struct asr_hooks {
    void (*progress)(void *ud, const char *stage, double fraction, double audio_seconds_done);
    bool (*should_abort)(void *ud);
    /* Called after tokens were appended to the output during decoding (segment callbacks). */
    void (*tokens_added)(void *ud);
    /* Stage taps (vkasr_stage in vkasr_debug.h): NULL costs nothing; set, each tapped tensor is copied out. */
    void (*stage)(void *ud, const vkasr_stage *s);
    void *ud;
};

/* The types of the tensors between the encoder's ops, by precision (the rule: conformer.c). The
 * residual stream, the encoder's output and the subsampling's input are f32 in every precision. */
struct asr_types {
    be_dtype sub;        /* the subsampling's activations between its convolutions               */
    be_dtype norm;       /* LayerNorm outputs that feed products                                 */
    be_dtype hidden;     /* the feed-forward hidden, the convolution module's GLU and depthwise outputs */
    be_dtype q, k, v, p; /* attention's projected queries, keys, values and positions            */
    be_dtype att;        /* attention's output                                                   */
};
struct asr_types asr_types_for(vkasr_precision precision);

/* Abort polls of one run (steps.c): work is counted in estimated multiply-adds and every `budget` of
 * them the recorded work is started, the step before it awaited and the abort hook asked. On a CPU
 * device (be_device_info.cpu) chunks are cut to about one step. NULL everywhere: no polls, no cuts. */
#define ASR_STEP_MACS_CPU (128ll << 20)  /* ~0.1-0.3 s of lavapipe on 2 cores                     */
/* GPU: ~0.1 s on a 1-TFLOP/s GPU, chunks as planned; each poll waits for the step before it, so a
 * smaller step costs throughput (docs/gpu-results.md, "Tried and not kept") */
#define ASR_STEP_MACS_GPU (64ll << 30)
struct asr_steps {
    struct backend *be;
    const struct asr_hooks *hooks;
    int64_t budget;                  /* multiply-adds per step                                 */
    bool cut;                        /* chunks cut to a step (CPU devices, chunks not forced)  */
    int64_t done;                    /* recorded since the last poll                           */
};
void asr_steps_init(struct asr_steps *s, struct backend *be, const struct asr_hooks *hooks, bool cut);
/* Rows per chunk of work costing `fixed` + rows x `per_row` multiply-adds: `rows`, or where chunks are
 * cut the most that fit a step (a multiple of `align`, at least `align`), whichever is fewer. */
int64_t asr_steps_rows(const struct asr_steps *s, int64_t rows, int64_t fixed, int64_t per_row, int64_t align);
/* Counts `macs` of recorded work; polls once a step's worth has accumulated. VKASR_ABORTED: stop. */
vkasr_status asr_steps_add(struct asr_steps *s, int64_t macs);
/* Polls now (end of a block): flush, wait for the previous step, ask the hook. */
vkasr_status asr_steps_poll(struct asr_steps *s);

/* Hands a copy of the device tensor t ([rows, cols]) to hooks->stage as stage `name`, `index`;
 * returns at once without a tap. */
vkasr_status asr_tap(const struct asr_hooks *hooks, struct backend *be, const char *name, int64_t index,
                     const be_tensor *t, struct err *e);
static inline bool asr_tapped(const struct asr_hooks *hooks) { return hooks && hooks->stage; }

struct asr_token {
    int32_t id;
    int64_t frame;
    int32_t duration;                /* frames the token spans (TDT duration; 1 for RNN-T; CTC run) */
};

/* Attention of a run (spec §5.1-5.3): NeMo's full rel_pos attention, its local rel_pos_local_attn
 * with a symmetric context [w, w], or auto: full up to a length, local beyond. */
enum asr_attention { ASR_ATT_AUTO = 0, ASR_ATT_FULL = 1, ASR_ATT_LOCAL = 2 };
#define ASR_AUTO_FULL_SECONDS 1440.0 /* NeMo's guidance: full attention up to 24 minutes          */
#define ASR_DEFAULT_WINDOW 128       /* NeMo's documented context for long audio: [128, 128]      */

/* A packed batch (batch.c): n inputs concatenated along time at every stage of the network, no
 * padding anywhere. Offsets at each stage ([n+1] with a leading 0: input i holds rows off[i] ..
 * off[i+1]-1), on the host (the planner's) and on the device (the offsets scan's, which the ops take as
 * their segment tables). A batch of one input uses no tables: the single-input path is the batch path
 * with n = 1. */
enum asr_stage {
    ASR_SAMPLES = 0, /* audio samples                                                             */
    ASR_MEL,         /* valid mel frames: floor(samples / hop)                                    */
    ASR_SUB1,        /* rows after the first stride-2 subsampling stage: ceil(mel / 2)            */
    ASR_SUB2,        /* after the second: ceil(mel / 4)                                           */
    ASR_FRAMES,      /* encoder frames: ceil(mel / 8)                                             */
    ASR_STAGES
};
struct asr_batch {
    int64_t n;
    int64_t *off[ASR_STAGES];    /* host offsets [n+1] of every stage                            */
    int64_t max[ASR_STAGES];     /* the longest input's length at each stage                     */
    be_tensor dev[ASR_STAGES];   /* the same offsets on the device (I64 [n+1]); addr 0 until
                                    asr_batch_upload                                              */
};
/* The host offsets of n inputs of samples[i] samples each; VKASR_ERR_INVALID_ARG naming the input when
 * a length is negative or a total would reach 2^62 (the planner's side of the scan: 64-bit throughout,
 * tested on totals above 2^32). */
vkasr_status asr_batch_layout(const struct model_config *c, const int64_t *samples, int64_t n, struct asr_batch *out,
                              struct err *e);
void asr_batch_free(struct asr_batch *b);
static inline int64_t asr_batch_len(const struct asr_batch *b, enum asr_stage s, int64_t i) {
    return b->off[s][i + 1] - b->off[s][i];
}
static inline int64_t asr_batch_total(const struct asr_batch *b, enum asr_stage s) { return b->off[s][b->n]; }
/* The device tables: the lengths uploaded once and every stage's offsets written by one offsets_scan
 * (ops.h), on the scratch stack for the rest of the run. */
vkasr_status asr_batch_upload(struct backend *be, const struct model_config *c, struct asr_batch *b, struct err *e);
/* The rows of every input at stage s on the scratch stack, f32: ASR_MEL the features [L, n_mels],
 * ASR_FRAMES the encoder's residual stream [T, d_model] (the run's buffers, and the plan's). */
vkasr_status asr_batch_tensor(struct backend *be, const struct model_config *c, const struct asr_batch *b,
                              enum asr_stage s, be_tensor *out);
/* The segment table an op of `stage` takes: the device offsets for a batch of several inputs, none
 * (addr 0) for one input. */
static inline be_tensor asr_batch_seg(const struct asr_batch *b, enum asr_stage s) {
    return b && b->n > 1 ? b->dev[s] : (be_tensor){0};
}

/* How a run is cut into pieces (memory scales with these, never results). */
struct asr_chunks {
    int64_t stft_frames;             /* mel frames per spectrum tile (features)                  */
    int64_t sub_tile;                /* encoder frames per subsampling tile                      */
    int64_t rows;                    /* encoder rows per chunk of every conformer sublayer       */
};

/* The memory plan of one run, made before anything is allocated (plan.c). */
struct asr_plan {
    int64_t inputs;                  /* 1, or a packed batch's inputs                            */
    int64_t samples, mel_frames, frames; /* totals over the inputs                               */
    int64_t max_frames;              /* the longest input's encoder frames                       */
    enum asr_attention attention;    /* FULL or LOCAL: the choice made                           */
    int64_t window;                  /* LOCAL: w                                                 */
    struct asr_chunks chunks;
    uint64_t weights;                /* device bytes of the weights (already held)               */
    uint64_t scratch;                /* planned session scratch: the largest phase below         */
    uint64_t features, subsampling, encoder, decoder; /* scratch of each phase                   */
    uint64_t op_scratch;             /* the backend's own temporaries of one op, above each phase    */
    uint64_t available;              /* scratch the run may use                                  */
    char limit[192];                 /* what set `available` (the device's budget, max_memory)   */
    uint64_t largest;                /* its largest single tensor                                */
};

struct asr_output {
    struct asr_token *tokens;
    size_t ntokens, captokens;
    int64_t frames;                  /* encoder frames                                        */
    int64_t mel_frames;
    float *mel;                      /* [mel_frames][n_mels] when keep_features               */
    float *encoder;                  /* [frames][d_model] when keep_features                  */
    double features_ms, encoder_ms, decoder_ms;
    struct asr_plan plan;            /* what the run planned                                  */
};
void asr_output_free(struct asr_output *o);

struct asr_options {
    int max_symbols;                 /* 0: model default                                      */
    bool keep_features;
    enum asr_attention attention;
    int64_t window;                  /* LOCAL: w; 0 = the model's context, else 128           */
    double auto_full_seconds;        /* AUTO: full attention up to this much audio; 0 = 1440  */
    uint64_t max_memory;             /* device bytes, weights included; 0 = the device budget */
    const struct asr_chunks *force;  /* tests: these chunks instead of planned ones           */
    const vkasr_decoder_step *forced; /* transducers: teacher forcing of the first nforced steps */
    size_t nforced;
    bool host_decoder;               /* transducers: walk the search on the host (VKASR_DECODER=host);
                                        taps and teacher forcing always do                       */
    int decoder_window;              /* device decoder: frames per joint window (1, 2, 4 or 8); 0:
                                        chosen per batch (transducer_device.c). Tests set it.     */
    int prompt;                      /* language-prompt models: 1 + the slot fused before the joint
                                        (the caller resolves the language); 0: none, an error there */
};

/* Runs the whole network on 16 kHz mono samples: plans the memory (failing with
 * VKASR_ERR_DEVICE_MEMORY before allocating when even the smallest chunks do not fit), reserves it,
 * then features -> subsampling -> conformer stack -> decoder. On VKASR_ABORTED the tokens decoded so
 * far are kept. Scratch memory of `be` is released before returning. */
vkasr_status asr_run(const struct asr_model *m, struct backend *be, const float *samples, size_t n,
                     const struct asr_options *opt, const struct asr_hooks *hooks, struct asr_output *out,
                     struct err *e);
/* The same for a packed batch of n >= 1 inputs (samples[i], ns[i] samples each; every input at least
 * one encoder frame long, and all taking the same attention): out[i] receives input i's results,
 * identical to asr_run on that input alone (the plan, timings and the batch's status are shared).
 * Stage taps and teacher forcing need n = 1. */
vkasr_status asr_run_batch(const struct asr_model *m, struct backend *be, const float *const *samples,
                           const size_t *ns, int64_t n, const struct asr_options *opt,
                           const struct asr_hooks *hooks, struct asr_output *out, struct err *e);

/* What a plan is made for (asr_plan). */
struct asr_work {
    const struct asr_batch *batch;   /* the inputs (asr_batch_layout; one input: a batch of one)   */
    const struct asr_options *opt;   /* attention, forced chunks, decoder; NULL: the defaults      */
    uint64_t weights;                /* device bytes of the weights (already held; reported)       */
    uint64_t available;              /* scratch bytes the run may hold                             */
    uint64_t max_tensor;             /* the device's largest single allocation (0: no limit)       */
    uint64_t op_scratch;             /* what one op of the backend takes for itself above any phase
                                        (be_memory.op_scratch and the parts that apply)             */
    bool int8_rows;                  /* the backend's layernorms make int8 rows (backend.int8_rows) */
    char limit[192];                 /* what set `available`, for messages ("": the device's budget) */
    const struct logger *log;        /* the plan is logged here at info level (NULL: not logged)   */
};
/* The work of a batch on this backend (pipeline.c): within the device's budget less what others hold
 * (weights, other sessions; this session's own scratch is replaced) and the caller's max_memory, with
 * the backend's op scratch for this model and batch; logged on the device's logger. */
vkasr_status asr_work_for(const struct asr_model *m, struct backend *be, const struct asr_batch *b,
                          const struct asr_options *opt, struct asr_work *out, struct err *e);
/* The memory plan of a run (plan.c), made before anything is allocated: the attention for the longest
 * input, then the largest chunks (up to preferred sizes) each phase can take within w->available, each
 * phase's bytes measured by running its stage on a measuring backend (backend.h: be_measure);
 * VKASR_ERR_DEVICE_MEMORY naming the bytes needed and available (and w->limit) when even the smallest
 * do not fit. Reads only the model's configuration and precision: a pure function, tested on shapes
 * of hours without a device. */
vkasr_status asr_plan(const struct asr_model *m, const struct asr_work *w, struct asr_plan *out, struct err *e);
/* The attention a run of `frames` encoder frames uses (window 0 for full). */
vkasr_status asr_attention_choose(const struct model_config *c, int64_t frames, const struct asr_options *opt,
                                  enum asr_attention *mode, int64_t *window, struct err *e);

/* Pieces of asr_run, exposed for tests and run by the planner on a measuring backend (backend.h:
 * be_measure); each allocates its temporaries on top of the scratch stack and releases them. */
/* feat [mel_frames(n), M] (allocated by the caller) = normalised log-mel features, spectra computed in
 * tiles of `stft_frames` frames from blocks of samples uploaded as needed (a measuring backend reads no
 * samples: they may be NULL there). */
vkasr_status asr_features(const struct asr_model *m, struct backend *be, const float *samples, size_t n,
                          int64_t stft_frames, const be_tensor *feat, struct asr_steps *steps, struct err *e);
/* Subsampling of features [L, M] into x [T, D] in halo tiles of `tile` encoder frames; any tile size
 * gives bit-identical results. A packed batch (batch: NULL for one input) is subsampled as its inputs
 * alone would be: tiles follow the packed rows across inputs, each stage sees zeros at every input's
 * edges. */
vkasr_status asr_subsample_tiled(const struct asr_model *m, struct backend *be, const be_tensor *feat, be_tensor *x,
                                 int64_t tile, const struct asr_batch *batch, struct asr_steps *steps, struct err *e);
/* The segments of a packed batch as the encoder's ops take them: the encoder-frame offsets on the
 * device (addr 0: one sequence) and the longest segment. */
struct asr_segments {
    be_tensor seg;
    int64_t max_frames;
};
/* The conformer stack on x [T, D] in place (x: the subsampled input, then the encoder output); segs
 * NULL for one input. */
vkasr_status asr_encode(const struct asr_model *m, struct backend *be, const struct asr_plan *plan, be_tensor *x,
                        const struct asr_segments *segs, const struct asr_hooks *hooks, struct asr_steps *steps,
                        struct err *e);
/* One conformer block on the residual stream *x [T, D] (f32); *y [T, D] (f32) is the second residual
 * buffer (and full attention's keys, of type asr_types.k, in its first bytes), v [T, D] full attention's
 * values (asr_types.v; unused for local attention, window > 0); pos [P, D] (f32) the sinusoid rows of
 * the attention's reach, p [P, D] (asr_types.p) scratch for their projection. The block's output is in
 * *x on return: full attention swaps *x and *y. segs: a packed batch's segments (NULL for one input). */
vkasr_status asr_conformer_block(const struct asr_model *m, struct backend *be, const struct asr_layer *L,
                                 be_tensor *x, be_tensor *y, const be_tensor *v, const be_tensor *pos, const be_tensor *p,
                                 int64_t window, int64_t rows, const struct asr_segments *segs, struct asr_steps *steps,
                                 struct err *e);
/* Greedy decoding of enc [T, D] into out (a packed batch: rows of input i are batch->off[ASR_FRAMES][i]
 * .., into out[i]; batch NULL for one input). */
vkasr_status asr_decode(const struct asr_model *m, struct backend *be, const be_tensor *enc, const struct asr_options *opt,
                        const struct asr_hooks *hooks, const struct asr_batch *batch, struct asr_output *out,
                        struct err *e);

/* Subsampling output length: ceil(L/8) for factor 8 (each stride-2 stage: ceil(l/2)). */
int64_t asr_encoder_frames(const struct model_config *cfg, int64_t mel_frames);

#endif
