/* model_internal.h — the readers of src/model (safetensors, HF JSON configs, tokenizer.json, GGUF),
 * which model.c calls; they call only the leaf (model_file.h). Not part of the interface src/asr uses
 * (that is model_types.h / tokenizer.h). */
#ifndef VKASR_MODEL_INTERNAL_H
#define VKASR_MODEL_INTERNAL_H

#include "model_types.h"

/* --- hf_config.c ----------------------------------------------------------------------------- */

/* Reads config.json and preprocessor_config.json / processor_config.json of an HF directory. */
vkasr_status hf_config_load(const char *dir, struct model_config *cfg, struct err *e);
/* A language-prompt model's map (cfg->n_prompts > 0; else nothing): processor_config.json's
 * prompt_dictionary, checked entry by entry. */
vkasr_status hf_langs_load(const char *dir, const struct model_config *cfg, struct model_langs *langs, struct err *e);
/* The same from the texts of config.json and of the feature extractor's file (names for messages). */
vkasr_status hf_config_parse(const char *cfg_name, const char *cfg_text, size_t cfg_len, const char *fe_name,
                             const char *fe_text, size_t fe_len, struct model_config *cfg, struct err *e);
/* Range checks shared by the HF and GGUF readers; src names the file for messages. */
vkasr_status config_check(const struct model_config *cfg, const char *src, struct err *e);

/* --- safetensors.c --------------------------------------------------------------------------- */

/* Maps model.safetensors (or the shards of model.safetensors.index.json) of dir and appends their
 * tensors to mf. */
vkasr_status st_load_dir(struct model_file *mf, const char *dir, struct err *e);
/* Parses one mapped safetensors file (exposed for tests of the parser alone). */
vkasr_status st_parse(struct model_file *mf, int map, struct err *e);

/* --- tokenizer.c ----------------------------------------------------------------------------- */

/* Reads an HF tokenizer.json (ParakeetConverter layout) into pieces 0..n_pieces-1. */
vkasr_status tok_load_hf_json(const char *path, int32_t n_pieces, struct tokenizer *t, struct err *e);
/* The same from the file's text (name for messages). */
vkasr_status tok_parse_hf_json(const char *name, const char *text, size_t len, int32_t n_pieces, struct tokenizer *t,
                               struct err *e);
/* Checks a tokenizer built by another reader (GGUF, SentencePiece): every piece valid UTF-8, types in
 * range; then indexes it (tok_index). */
vkasr_status tok_check(struct tokenizer *t, const char *src, struct err *e);

/* --- gguf.c ---------------------------------------------------------------------------------- */

/* Maps path and parses it (gguf_parse). */
vkasr_status gguf_load(struct model_file *mf, const char *path, int head, struct err *e);
/* Parses a mapped GGUF image: header, metadata, tensor infos and offsets, configuration, vocabulary.
 * head: MODEL_HEAD_AUTO, or the head asked for, which only a NeMo-Speech.cpp hybrid's file chooses (its
 * auxiliary CTC head); the caller refuses a head the model lacks. */
vkasr_status gguf_parse(struct model_file *mf, int map, int head, struct err *e);

#endif
