/* app.h — vkasr-gtk, the example desktop application: a GTK 4 window that transcribes an audio file or
 * the microphone live. main.c builds the window and updates it (the UI thread only); engine.c runs vkasr
 * on worker threads and hands results to the UI thread (g_idle_add); capture.c reads the microphone. */
#ifndef VKASR_GTK_APP_H
#define VKASR_GTK_APP_H

#include <gtk/gtk.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <vkasr.h>

/* A word shown in the text view: its characters in the buffer and its time in the audio. */
struct word_ref {
    int start_offset, end_offset;
    double start, end;
};

struct app {
    GtkApplication *gtk;
    GtkWidget *win, *open_btn, *live_btn, *cancel_btn, *progress, *status, *view, *partial, *position;
    GtkTextBuffer *buf;
    GArray *words;                   /* struct word_ref, in buffer order                          */
    bool line_open;                  /* live: the last line has words and no end yet               */
    double duration;                 /* of the file being transcribed (0 live)                     */

    /* command line */
    char *model_path, *device, *file, *screenshot;
    bool quit_when_done, print_text;
    int select_word;                 /* -1: none */
    int exit_status;

    /* engine.c: owned by the UI thread except where noted */
    vkasr_model *model;
    vkasr_session *session;          /* used by one worker at a time                                */
    GThread *worker;                 /* model loading, a file, or live capture                      */
    atomic_bool cancel;              /* read by the worker's abort callback / capture loop          */
    atomic_bool stop_live;           /* end live capture and finish the stream                      */
    bool busy, live;
};

/* ---- main.c: UI updates, called on the UI thread by engine.c's events ---- */

void ui_model_ready(struct app *a, bool ok, const char *message);
void ui_progress(struct app *a, double fraction, double done_s, double total_s);
/* Appends words (each: text, start, end); a file's segment or a live final update. */
struct ev_word {
    char *text;
    double start, end;
};
void ui_words(struct app *a, const struct ev_word *w, size_t n, bool line_end);
void ui_partial(struct app *a, const char *text);
void ui_done(struct app *a, vkasr_status st, const char *message);

/* ---- engine.c ---- */

void engine_load(struct app *a);                           /* the model, in the background          */
void engine_transcribe_file(struct app *a, const char *path);
bool engine_live_start(struct app *a, char *error, size_t size);
void engine_live_stop(struct app *a);                      /* finish: the last words still come    */
void engine_cancel(struct app *a);                         /* stop now                              */
void engine_worker_done(struct app *a);                    /* after its EV_DONE / EV_READY: joins it */
void engine_shutdown(struct app *a);                       /* waits for the worker, frees vkasr    */

/* ---- capture.c: 16 kHz mono 16-bit samples from the default capture device ---- */

struct capture;
bool capture_available(void);
struct capture *capture_open(char *error, size_t size);
/* Blocks until `frames` samples were read; returns the count, or -1 (error says why). */
long capture_read(struct capture *c, short *samples, size_t frames, char *error, size_t size);
void capture_close(struct capture *c);

#endif
