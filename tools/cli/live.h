/* live.h — the parts of `vkasr live` besides its command (cmd_live.c): audio from standard input
 * (live_input.c) and what the stream reports, on stdout and in figures (live_output.c). */
#ifndef VKASR_CLI_LIVE_H
#define VKASR_CLI_LIVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "vkasr.h"

/* ---- live_input.c: raw PCM or a WAV stream on a descriptor ---- */

enum sample_fmt { SAMPLE_S16, SAMPLE_S32, SAMPLE_F32, SAMPLE_U8 };

struct live_input {
    int fd;
    enum sample_fmt fmt;        /* raw input's format; a WAV header's replaces it */
    int rate, channels;
    size_t frame_bytes;
    unsigned char buf[8192];    /* bytes read, not yet whole frames converted     */
    size_t have;
};

/* Reads the start of the input: a WAV header (recognised by "RIFF....WAVE") sets the format, anything
 * else is audio in the raw format. EXIT_OK, or an exit code after a message (128 + signal when
 * interrupted). */
int live_input_start(struct live_input *in);
/* Whole frames of input as mono floats: up to `max` into out, *n of them. 1: go on (*n may be 0 after
 * a signal), 0: end of input, -1: a read error (reported). */
int live_input_read(struct live_input *in, float *out, size_t max, size_t *n);
const char *live_input_format_name(enum sample_fmt f);

/* ---- live_output.c: the stream's callbacks and figures ---- */

struct live_word {
    char *text;
    double start, end;
};

struct live_out {
    pthread_mutex_t lock;
    bool tty, timestamps, json;
    int cols;                   /* the terminal's width                                  */
    char *seg;                  /* final text of the open segment                        */
    size_t seg_len, seg_cap;
    double seg_start, seg_end;
    bool seg_has_words;
    bool seg_eou, seg_eob;      /* --json: the open segment ended an utterance / was a backchannel */
    char seg_lang[64];          /* --json: the last language tag in the open segment ("": none)   */
    struct live_word *words;    /* --json: the open segment's words                      */
    size_t n_words, cap_words;
    char *partial;
    double *push_s, *push_wall; /* when audio up to each push had arrived (wall clock)   */
    size_t n_push, cap_push;
    double *lat;                /* finalisation latency per final word                   */
    size_t n_lat, cap_lat;
    int write_failed;
};

/* Ready for stdout (terminal or not); false when out of memory. */
bool live_out_init(struct live_out *o, bool timestamps, bool json);
void live_out_free(struct live_out *o);
/* The stream's callbacks (user data: the live_out). */
void live_on_final(const vkasr_stream_update *u, void *ud);
void live_on_partial(const vkasr_stream_update *u, void *ud);
/* Audio up to audio_s seconds has been pushed now. */
void live_note_push(struct live_out *o, double audio_s);
/* -v: the stream's figures and the latency percentiles on stderr; note: appended to the latency line. */
void live_report(struct live_out *o, vkasr_stream *stream, const char *note);

#endif
