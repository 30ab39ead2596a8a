/* transcript.h — tokens -> text, token/word/segment timestamps (public vkasr_* record types). */
#ifndef VKASR_TRANSCRIPT_H
#define VKASR_TRANSCRIPT_H

#include "asr.h"

/* Segments close after a word ending a sentence (. ? !), before a word that follows a silence of at
 * least GAP seconds, or before one that would stretch the segment beyond MAX seconds. */
#define TRANSCRIPT_SEGMENT_GAP_S 1.0
#define TRANSCRIPT_SEGMENT_MAX_S 30.0

struct transcript {
    char *text;
    vkasr_token *tokens;             /* piece points into the tokenizer; text is owned        */
    size_t ntokens;
    vkasr_word *words;               /* text owned                                            */
    size_t nwords;
    vkasr_segment *segments;         /* text owned                                            */
    size_t nsegments;
    vkasr_event *events;             /* event tokens (transcript_event_kind), text owned      */
    size_t nevents;
    char *language;                  /* the first language event's text; NULL: none          */
};

/* What token id is: -1 text, or a vkasr_event_kind: the pieces <EOU> and <EOB> (NVIDIA's end-of-
 * utterance models), and for language-prompt models (cfg->n_prompts > 0) language tags <xx-XX>. Event
 * tokens stay in the token list but never in the text, a word or a segment; an end of utterance or a
 * backchannel ends the segment before it.
 * The decoder state after <EOU>: an offline run keeps it, as NeMo's transcribe() does. NVIDIA's live
 * runtime for these models (NeMo nemo/agents/voice_agent/pipecat/services/nemo/streaming_asr.py,
 * NemoStreamingASRService.transcribe -> reset_state) resets the decoder hypothesis, the encoder caches
 * and the audio buffer after each chunk whose tokens hold <EOU> or <EOB>; a cache-aware stream session
 * applies its decoder part per chunk (stream_decoder.c; the encoder caches are kept). NeMo-Speech.cpp
 * does not reset on the token (src/asr/runner.cpp fire_eou clears only the utterance's output: "model
 * context belongs to the stream"). */
int transcript_event_kind(const struct tokenizer *tok, const struct model_config *cfg, int32_t id);

vkasr_status transcript_build(const struct tokenizer *tok, const struct model_config *cfg, const struct asr_token *t,
                              size_t n, struct transcript *tr, struct err *e);
void transcript_free(struct transcript *tr);
vkasr_status transcript_append(struct transcript *dst, struct transcript *part, size_t nseg, struct err *e);
/* True when a piece starts a word (begins with U+2581). */
bool transcript_piece_starts_word(const char *piece);
/* True when a word's text ends a sentence (its last character is . ? or !). */
bool transcript_ends_sentence(const char *text);
/* Whether an end of utterance or a backchannel lies between word w's last token and the next word. */
bool transcript_utterance_ends_after(const struct tokenizer *tok, const struct model_config *cfg,
                                     const struct transcript *tr, size_t w);

#endif
