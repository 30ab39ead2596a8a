/* engine.c — vkasr behind vkasr-gtk's window. Everything slow runs on a worker thread: loading the model
 * (and a warm-up transcription that creates the GPU pipelines, so the first real one starts at once),
 * transcribing a file, capturing the microphone into a live stream. vkasr calls its callbacks on those
 * threads (or on the stream's own worker); they copy what they need into an event and hand it to the UI
 * thread with g_idle_add — no widget is touched off the UI thread. */
#include "app.h"

#include <string.h>

/* ---- events: worker threads -> UI thread ---------------------------------------------------------- */

enum ev_kind { EV_READY, EV_PROGRESS, EV_WORDS, EV_PARTIAL, EV_DONE };

struct ev {
    struct app *a;
    enum ev_kind kind;
    vkasr_status status;
    bool flag;                       /* READY: loaded; WORDS: the line ends                       */
    double f, done, total;
    char *text;
    struct ev_word *words;
    size_t n;
};

static gboolean dispatch(gpointer data) {
    struct ev *e = data;
    switch (e->kind) {
    case EV_READY: ui_model_ready(e->a, e->flag, e->text); break;
    case EV_PROGRESS: ui_progress(e->a, e->f, e->done, e->total); break;
    case EV_WORDS: ui_words(e->a, e->words, e->n, e->flag); break;
    case EV_PARTIAL: ui_partial(e->a, e->text); break;
    case EV_DONE: ui_done(e->a, e->status, e->text); break;
    }
    for (size_t i = 0; i < e->n; i++)
        g_free(e->words[i].text);
    g_free(e->words);
    g_free(e->text);
    g_free(e);
    return G_SOURCE_REMOVE;
}

static void post(struct app *a, struct ev e) {
    struct ev *p = g_new(struct ev, 1);
    *p = e;
    p->a = a;
    g_idle_add(dispatch, p); /* idle sources of one priority run in the order they were added */
}

static struct ev_word *copy_words(const vkasr_word *w, size_t n) {
    struct ev_word *out = g_new0(struct ev_word, n ? n : 1);
    for (size_t i = 0; i < n; i++)
        out[i] = (struct ev_word){g_strdup(w[i].text), w[i].start, w[i].end};
    return out;
}

/* ---- the model ------------------------------------------------------------------------------------ */

static gpointer load_main(gpointer data) {
    struct app *a = data;
    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = a->device;
    vkasr_error err;
    char found[4096];
    const char *path = a->model_path ? a->model_path : vkasr_default_model_path(found, sizeof found);
    vkasr_status st = VKASR_ERR_INVALID_ARG;
    if (!path)
        snprintf(err.message, sizeof err.message, "no model given and the default model is not installed");
    else if ((st = vkasr_model_load(path, &mp, &a->model, &err)) == VKASR_OK)
        st = vkasr_session_create(a->model, &a->session, &err);
    if (st == VKASR_OK) {
        /* Warm-up: the first transcription creates the GPU pipelines it uses (hundreds of ms on some
         * drivers); doing it now on half a second of silence hides that from the user. */
        float silence[VKASR_SAMPLE_RATE / 2] = {0};
        const vkasr_result *r = NULL;
        vkasr_transcribe_pcm(a->session, silence, VKASR_SAMPLE_RATE / 2, VKASR_SAMPLE_RATE, 1, NULL, &r);
        vkasr_model_info info;
        vkasr_model_get_info(a->model, &info);
        char *msg = g_strdup_printf("%s — %.1fM parameters, %s, on %s%s", path, info.n_params / 1e6,
                                    info.precision == VKASR_PRECISION_F16 ? "f16" : "f32", info.device_name,
                                    vkasr_model_on_cpu(a->model) ? " (a CPU: slower than a GPU)" : "");
        post(a, (struct ev){.kind = EV_READY, .flag = true, .text = msg});
    } else {
        post(a, (struct ev){.kind = EV_READY, .flag = false, .text = g_strdup(err.message)});
    }
    return NULL;
}

void engine_load(struct app *a) {
    a->busy = true;
    a->worker = g_thread_new("vkasr-load", load_main, a);
}

/* ---- a file --------------------------------------------------------------------------------------- */

struct file_job {
    struct app *a;
    char *path;
    int last_permille;
};

static void on_progress(const vkasr_progress *p, void *ud) {
    struct file_job *j = ud;
    int pm = (int)(p->fraction * 1000);
    if (pm == j->last_permille)
        return; /* the UI needs no more than a thousand steps */
    j->last_permille = pm;
    post(j->a, (struct ev){.kind = EV_PROGRESS, .f = p->fraction, .done = p->audio_seconds_done,
                           .total = p->audio_seconds_total});
}

static void on_segment(const vkasr_result *r, size_t index, void *ud) {
    struct file_job *j = ud;
    size_t ns = 0, nw = 0;
    const vkasr_segment *seg = vkasr_result_segments(r, &ns);
    const vkasr_word *words = vkasr_result_words(r, &nw);
    if (index >= ns || seg[index].first_word + seg[index].n_words > nw)
        return;
    const vkasr_segment *s = &seg[index];
    post(j->a, (struct ev){.kind = EV_WORDS, .flag = true, .words = copy_words(words + s->first_word, s->n_words),
                           .n = s->n_words});
}

static bool on_abort(void *ud) { return atomic_load(&((struct app *)ud)->cancel); }

static gpointer file_main(gpointer data) {
    struct file_job *j = data;
    struct app *a = j->a;
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.progress_callback = on_progress;
    tp.progress_user_data = j;
    tp.segment_callback = on_segment; /* segments appear while the decoder runs */
    tp.segment_user_data = j;
    tp.abort_callback = on_abort;
    tp.abort_user_data = a;
    const vkasr_result *r = NULL;
    vkasr_status st = vkasr_transcribe_file(a->session, j->path, &tp, &r);
    const char *msg = st == VKASR_OK || st == VKASR_ABORTED ? "" : vkasr_session_last_error(a->session);
    post(a, (struct ev){.kind = EV_DONE, .status = st, .text = g_strdup(msg)});
    g_free(j->path);
    g_free(j);
    return NULL;
}

void engine_transcribe_file(struct app *a, const char *path) {
    struct file_job *j = g_new0(struct file_job, 1);
    j->a = a;
    j->path = g_strdup(path);
    j->last_permille = -1;
    atomic_store(&a->cancel, false);
    a->busy = true;
    a->worker = g_thread_new("vkasr-file", file_main, j);
}

/* ---- live ----------------------------------------------------------------------------------------- */

/* Called on the stream's worker thread. */
static void on_final(const vkasr_stream_update *u, void *ud) {
    post(ud, (struct ev){.kind = EV_WORDS, .flag = u->segment_end, .words = copy_words(u->words, u->n_words),
                         .n = u->n_words});
}

static void on_partial(const vkasr_stream_update *u, void *ud) {
    post(ud, (struct ev){.kind = EV_PARTIAL, .text = g_strdup(u->text)});
}

struct live_job {
    struct app *a;
    struct capture *cap;
    vkasr_stream *stream;
};

/* Reads the microphone in 20 ms pieces into the stream until stopped, then finishes or cancels it. */
static gpointer live_main(gpointer data) {
    struct live_job *j = data;
    struct app *a = j->a;
    short pcm[VKASR_SAMPLE_RATE / 50];
    float x[VKASR_SAMPLE_RATE / 50];
    char error[512] = "";
    vkasr_status st = VKASR_OK;
    while (st == VKASR_OK && !atomic_load(&a->stop_live) && !atomic_load(&a->cancel)) {
        long n = capture_read(j->cap, pcm, G_N_ELEMENTS(pcm), error, sizeof error);
        if (n < 0) {
            st = VKASR_ERR_IO;
            break;
        }
        for (long i = 0; i < n; i++)
            x[i] = pcm[i] / 32768.0f;
        st = vkasr_stream_push(j->stream, x, (size_t)n, VKASR_SAMPLE_RATE);
    }
    capture_close(j->cap);
    if (atomic_load(&a->cancel))
        vkasr_stream_cancel(j->stream);
    vkasr_status fin = vkasr_stream_finish(j->stream); /* the last words arrive before this returns */
    if (st == VKASR_OK)
        st = fin;
    if (!error[0] && st != VKASR_OK && st != VKASR_ABORTED)
        snprintf(error, sizeof error, "%s", vkasr_stream_last_error(j->stream));
    vkasr_stream_free(j->stream);
    post(a, (struct ev){.kind = EV_DONE, .status = st, .text = g_strdup(error)});
    g_free(j);
    return NULL;
}

bool engine_live_start(struct app *a, char *error, size_t size) {
    struct live_job *j = g_new0(struct live_job, 1);
    j->a = a;
    j->cap = capture_open(error, size);
    if (!j->cap) {
        g_free(j);
        return false;
    }
    vkasr_stream_params sp = vkasr_stream_params_default();
    sp.final_callback = on_final;
    sp.partial_callback = on_partial;
    sp.user_data = a;
    vkasr_error err;
    if (vkasr_stream_create(a->session, &sp, &j->stream, &err) != VKASR_OK) {
        snprintf(error, size, "%s", err.message);
        capture_close(j->cap);
        g_free(j);
        return false;
    }
    atomic_store(&a->cancel, false);
    atomic_store(&a->stop_live, false);
    a->busy = a->live = true;
    a->worker = g_thread_new("vkasr-live", live_main, j);
    return true;
}

void engine_live_stop(struct app *a) { atomic_store(&a->stop_live, true); }

void engine_cancel(struct app *a) { atomic_store(&a->cancel, true); }

/* Joins the worker whose EV_DONE / EV_READY the UI thread just received (it has returned or is about to). */
static void join(struct app *a) {
    if (a->worker)
        g_thread_join(a->worker);
    a->worker = NULL;
}

void engine_shutdown(struct app *a) {
    atomic_store(&a->cancel, true);
    atomic_store(&a->stop_live, true);
    join(a);
    vkasr_session_free(a->session);
    vkasr_model_free(a->model);
    a->session = NULL;
    a->model = NULL;
}

void engine_worker_done(struct app *a) {
    join(a);
    a->busy = a->live = false;
}
