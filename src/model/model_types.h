/* model_types.h — a loaded checkpoint on the host: configuration, tokenizer and named tensors, from a
 * Hugging Face transformers Parakeet directory or from vkasr's GGUF. Also the canonical "kernel
 * layout" transform (model_prepare) shared by the converter and the HF loader, and the GGUF writer.
 *
 * Nothing here touches a GPU: src/asr uploads the prepared tensors to a backend. Its functions live in
 * several files (model.c, model_prepare.c, gguf.c), so the header is not named after one of them.
 */
#ifndef VKASR_MODEL_TYPES_H
#define VKASR_MODEL_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "tokenizer.h"

/* Source element types of checkpoint tensors; MT_Q* are ggml's block-quantized types (quant.h), whose
 * rows (innermost dimension) are whole blocks and whose nbytes is blocks x block bytes. */
enum mt_dtype { MT_F32 = 0, MT_F16 = 1, MT_BF16 = 2, MT_F64 = 3, MT_I64 = 4, MT_I32 = 5, MT_I16 = 6, MT_I8 = 7, MT_U8 = 8,
                MT_BOOL = 9, MT_Q8_0 = 10, MT_Q4_K = 11, MT_Q5_K = 12, MT_Q6_K = 13 };
#define MT_IS_QUANT(t) ((t) >= MT_Q8_0 && (t) <= MT_Q6_K)

struct model_tensor {
    char *name;
    enum mt_dtype type;
    int nd;
    int64_t ne[4];           /* row-major, outermost first (PyTorch order)                   */
    const void *data;        /* into a mapped file or an owned buffer                         */
    uint64_t nbytes;
    void *owned;             /* non-NULL when data was allocated by model_prepare             */
    int map;                 /* private: index of the mapped file holding data, -1 if owned   */
};

#define MODEL_MAX_CTX 8 /* [L, R] pairs of a chunked_limited model's menu */

struct model_config {
    int head;                /* vkasr_head: VKASR_HEAD_TDT / RNNT / CTC                       */
    /* encoder */
    int d_model, n_layers, n_heads, ff_size, conv_kernel;
    int n_mels, sub_channels, sub_factor;
    bool xscaling;           /* HF scale_input / NeMo xscaling                                */
    bool attention_bias;     /* q/k/v/o and feed-forward biases present                       */
    bool conv_bias;          /* conv-module pointwise/depthwise biases present                */
    int att_left, att_right; /* local attention context; -1, -1 = full attention              */
    /* NeMo's cache-aware streaming models (att_context_style chunked_limited); all false/0 otherwise */
    bool causal_sub;         /* causal_downsampling: stride-2 convs padded 2 before, 1 after    */
    bool causal_conv;        /* conv_context_size causal: depthwise conv padded [K-1, 0]        */
    bool conv_ln;            /* conv_norm_type layer_norm: conv.norm is a LayerNorm after the
                              * depthwise conv (no running statistics, nothing folded)         */
    int n_ctx;               /* chunked_limited: the trained [L, R] pairs, the first the
                              * default; L % (R+1) == 0. 0: not a chunked model                 */
    int ctx[MODEL_MAX_CTX][2];
    int ctx_sel;             /* the pair a run uses (model_select_lookahead); not stored in files */
    bool no_feature_norm;    /* normalize "NA": the mel features are not standardised          */
    /* Nemotron 3.5's language prompt: a one-hot of n_prompts slots joined to every encoder frame and
     * fused by a 2-layer MLP (prompt_hidden wide) before the joint; 0 = none */
    int n_prompts, prompt_hidden;
    /* vocabulary and heads */
    int vocab_size;          /* V: SentencePiece pieces, blank excluded; blank id = V         */
    int pred_hidden, pred_layers;
    int n_durations;
    int durations[16];
    int max_symbols;         /* per frame (transducers)                                       */
    /* feature extractor */
    int sample_rate, n_fft, win_length, hop_length;
    float preemph;
};

/* A prompt model's language map (NeMo's model_defaults.prompt_dictionary): locale names and aliases
 * ("en-US", "en", "auto") to prompt slots, in the checkpoint's order (model_langs.c). */
struct model_lang {
    char *name;
    int slot;
};
struct model_langs {
    struct model_lang *v;
    int n;
};
#define MODEL_LANG_MAX 64 /* bytes of a language name, NUL included */

struct model_file {
    char *path;              /* directory or .gguf file as given                              */
    struct model_config cfg;
    struct tokenizer tok;
    struct model_langs langs; /* cfg.n_prompts > 0: the language map (never empty)             */
    struct model_tensor *tensors;
    int ntensors;
    bool canonical;          /* tensors already in kernel layout (GGUF written by vkasr)       */
    /* private: mappings to unmap on close */
    void **maps;
    uint64_t *map_sizes;
    char **map_paths;        /* the mapped files' paths, for error messages                   */
    bool *map_borrowed;      /* a caller's memory image (model_map_memory): not unmapped       */
    int nmaps;
    int *by_name;            /* tensor indices sorted by name (model_find's binary search)      */
    int nby_name;            /* == ntensors when by_name is current                            */
    void *nemo;              /* private: the .nemo checkpoint tensors point into (struct nemo_checkpoint) */
};

/* Opens a model: a directory (HF transformers: config.json, model.safetensors or sharded index,
 * tokenizer.json, preprocessor_config.json or processor_config.json), a .gguf file or a NeMo .nemo
 * checkpoint (model_open_head with MODEL_HEAD_AUTO). Validates every
 * field and tensor (names, shapes, dtypes, offsets) against the configuration; errors name the file
 * and the field or tensor. */
vkasr_status model_open(const char *path, struct model_file **out, struct err *e);
/* Which head model_open_head loads: MODEL_HEAD_AUTO (the only one, or a hybrid's transducer) or a
 * vkasr_head. A head the checkpoint lacks is a VKASR_ERR_MODEL naming the heads it has. */
#define MODEL_HEAD_AUTO (-1)
/* model_open, also for a .nemo file (recognised by content: a tar or gzip archive), with a choice of
 * head: a hybrid TDT/RNN-T + CTC .nemo loads either; other models only the head they have. */
vkasr_status model_open_head(const char *path, int head, struct model_file **out, struct err *e);
/* The same for a GGUF image in memory (borrowed: it must outlive the model); name stands for the path
 * in messages. */
vkasr_status model_open_gguf_memory(const void *data, size_t size, const char *name, struct model_file **out,
                                    struct err *e);
void model_close(struct model_file *mf);

const struct model_tensor *model_find(const struct model_file *mf, const char *name);
/* Enters the mapped files' pages into the page tables, one call per file (MADV_POPULATE_READ, Linux
 * 5.14 and later; elsewhere nothing): the weights' upload that reads them all then takes no page fault
 * per 64 KiB. A hint: failure changes nothing. */
void model_prefault(const struct model_file *mf);

/* Frequency bins after the three stride-2 subsampling convs: ceil(n/2) thrice, or floor(n/2)+1 thrice
 * (causal_sub: 128 -> 65 -> 33 -> 17). */
int model_sub_freq(const struct model_config *c);
/* The lookahead of pair i of the menu: (R + 1) encoder frames, in ms. */
int model_ctx_lookahead_ms(const struct model_config *c, int i);
/* Picks the pair whose lookahead is ms (0: the first) for ctx_sel; an unknown value, or one given for
 * a model without a menu, is VKASR_ERR_INVALID_ARG naming the menu. */
vkasr_status model_select_lookahead(struct model_config *c, int ms, struct err *e);
/* Checks a chunked_limited menu (n_ctx pairs, L % (R+1) == 0, L >= 1, R >= 0); `src` and `field` name
 * where it came from in the error. */
vkasr_status model_check_ctx(const struct model_config *c, const char *src, const char *field, struct err *e);

/* Appends name -> slot to a language map, checking the entry (a name of 1..MODEL_LANG_MAX-1 bytes of
 * letters, digits, '-' and '_', not already there; 0 <= slot < n_prompts); `src` and `field` name where
 * it came from in the error. */
vkasr_status model_langs_add(struct model_langs *l, const char *name, long long slot, int n_prompts, const char *src,
                             const char *field, struct err *e);
/* Checks a prompt model's map after reading (at least one entry); VKASR_ERR_MODEL naming src/field. */
vkasr_status model_langs_check(const struct model_langs *l, const struct model_config *c, const char *src,
                               const char *field, struct err *e);
/* The slot of `name` (exact match, then ASCII case-insensitive); -1 when the map lacks it. */
int model_langs_find(const struct model_langs *l, const char *name);
/* The map's names, comma-separated, into buf (truncated with "..."). */
void model_langs_list(const struct model_langs *l, char *buf, size_t size);
void model_langs_free(struct model_langs *l);

/* Transforms an HF checkpoint in place into the canonical kernel layout (no-op when canonical):
 *  - depthwise conv: BN folded in double precision -> conv.depthwise_conv.weight [D, K] f32 and
 *    conv.depthwise_conv.bias [D] f32 (always present); conv.norm.* removed;
 *  - subsampling convs: layers.{0,2,5}.weight [C, 9]; pointwise layers.{3,6}.weight [C, C];
 *  - subsampling linear: columns permuted from (channel, freq) to (freq, channel) order, because the
 *    engine keeps the subsampling activations channels-last: [D, F*C];
 *  - conv module pointwise convs: [2D, D] and [D, D]; CTC head: [V+1, D];
 *  - LSTM: decoder.lstm.bias_l{k} = bias_ih_l{k} + bias_hh_l{k} [4P] (the two originals removed);
 *  - every tensor converted to f32 (bf16/f16/f64 widened), int tensors dropped.
 * Tensor names are otherwise the HF names (see docs/model-format.md). */
vkasr_status model_prepare(struct model_file *mf, struct err *e);

/* True for canonical tensors that hold encoder matrix weights (stored f16 by `vkasr convert --type f16`
 * and uploaded as f16 in f16 precision): attention/feed-forward/conv-module pointwise projections
 * (encoder.layers.*), subsampling pointwise convs (layers.3/.6) and linear. NOT the heads: CTC head,
 * encoder/decoder projectors, joint head, embedding and LSTM stay f32 (spec §10: argmax decisions are
 * fragile; they are a small share of the parameters). */
bool model_is_matrix_weight(const char *name);

/* The decoder's and joint's matrices a quantized file stores in a block type (never f16): the LSTM's
 * w_ih and w_hh, the prediction and encoder projections, the joint head (not the embedding: a row
 * lookup). */
bool model_is_decoder_matrix(const char *name);

/* Writes a prepared model as GGUF v3: matrix weights in `type` (f16 or a quantized type, with the
 * fallbacks of quant_tensor_type), the rest f32. The source's tensors must be f32 or f16. */
vkasr_status model_write_gguf(const struct model_file *mf, const char *path, vkasr_weight_type type,
                              struct err *e);
/* What model_write_gguf_stats wrote: every tensor's weights and data bytes, those of the matrix
 * weights, and the matrix weights that fell back to another type (row length not a block multiple). */
struct gguf_write_stats {
    uint64_t file_bytes, n_weights, data_bytes, matrix_weights, matrix_bytes;
    int n_fallback;
};
vkasr_status model_write_gguf_stats(const struct model_file *mf, const char *path, vkasr_weight_type type,
                                    struct gguf_write_stats *stats, struct err *e);

#endif
