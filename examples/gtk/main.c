/* main.c — vkasr-gtk's window: Open (a file), Live (the microphone), Cancel, a progress bar, the
 * transcript with segments appearing as they are produced, and words that, clicked, select themselves
 * and move the position slider to their time. Runs on the UI thread only (engine.c posts results here).
 *
 * usage: vkasr-gtk [-m MODEL] [-d DEVICE] [FILE] [--quit-when-done] [--print-text] [--screenshot PNG]
 *                  [--select N]
 *   FILE is transcribed at start; --quit-when-done quits after it (exit status 0 if it succeeded),
 *   --print-text then prints the text the window shows on stdout, --screenshot saves the window, and
 *   --select N selects word N first as a click would (tests and the README's picture). */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the transcript ------------------------------------------------------------------------------- */

static void fmt_time(char *buf, size_t size, double t) {
    snprintf(buf, size, "%d:%05.2f", (int)(t / 60), t - 60 * (int)(t / 60));
}

void ui_words(struct app *a, const struct ev_word *w, size_t n, bool line_end) {
    GtkTextIter end;
    gtk_text_buffer_get_end_iter(a->buf, &end);
    if (n && !a->line_open) { /* a new line starts with its time */
        char t[32], prefix[48];
        fmt_time(t, sizeof t, w[0].start);
        snprintf(prefix, sizeof prefix, "[%s]  ", t);
        gtk_text_buffer_insert_with_tags_by_name(a->buf, &end, prefix, -1, "time", NULL);
        a->line_open = true;
    }
    for (size_t i = 0; i < n; i++) {
        if (i || gtk_text_iter_get_line_offset(&end) > 0) {
            GtkTextIter before = end;
            if (gtk_text_iter_backward_char(&before) && gtk_text_iter_get_char(&before) != ' ')
                gtk_text_buffer_insert(a->buf, &end, " ", 1);
        }
        struct word_ref ref = {.start_offset = gtk_text_iter_get_offset(&end), .start = w[i].start, .end = w[i].end};
        gtk_text_buffer_insert_with_tags_by_name(a->buf, &end, w[i].text, -1, "word", NULL);
        ref.end_offset = gtk_text_iter_get_offset(&end);
        g_array_append_val(a->words, ref);
    }
    if (line_end && a->line_open) {
        gtk_text_buffer_insert(a->buf, &end, "\n", 1);
        a->line_open = false;
    }
    gtk_text_view_scroll_to_mark(GTK_TEXT_VIEW(a->view), gtk_text_buffer_get_insert(a->buf), 0, FALSE, 0, 0);
    gtk_text_buffer_place_cursor(a->buf, &end);
}

void ui_partial(struct app *a, const char *text) { gtk_label_set_text(GTK_LABEL(a->partial), text); }

static void select_word(struct app *a, guint index);

/* A click on a word: select it, show its time, move the position slider there. */
static void on_click(GtkGestureClick *g, int n_press, double x, double y, gpointer data) {
    struct app *a = data;
    int bx, by;
    GtkTextIter it;
    gtk_text_view_window_to_buffer_coords(GTK_TEXT_VIEW(a->view), GTK_TEXT_WINDOW_WIDGET, (int)x, (int)y, &bx, &by);
    if (!gtk_text_view_get_iter_at_location(GTK_TEXT_VIEW(a->view), &it, bx, by))
        return;
    int off = gtk_text_iter_get_offset(&it);
    guint lo = 0, hi = a->words->len; /* the last word starting at or before the click */
    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        if (g_array_index(a->words, struct word_ref, mid).start_offset <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || off > g_array_index(a->words, struct word_ref, lo - 1).end_offset)
        return; /* before the first word, the space after one, or a time prefix */
    select_word(a, lo - 1);
}

static void select_word(struct app *a, guint index) {
    if (index >= a->words->len)
        return;
    const struct word_ref *w = &g_array_index(a->words, struct word_ref, index);
    GtkTextIter s, e;
    gtk_text_buffer_get_iter_at_offset(a->buf, &s, w->start_offset);
    gtk_text_buffer_get_iter_at_offset(a->buf, &e, w->end_offset);
    gtk_text_buffer_select_range(a->buf, &s, &e);
    char t0[32], t1[32], msg[128];
    fmt_time(t0, sizeof t0, w->start);
    fmt_time(t1, sizeof t1, w->end);
    snprintf(msg, sizeof msg, "position %s (word %s – %s)", t0, t0, t1);
    gtk_label_set_text(GTK_LABEL(a->status), msg);
    GtkAdjustment *adj = gtk_range_get_adjustment(GTK_RANGE(a->position));
    if (gtk_adjustment_get_upper(adj) < w->end)
        gtk_adjustment_set_upper(adj, w->end);
    gtk_range_set_value(GTK_RANGE(a->position), w->start);
}

/* ---- state and progress --------------------------------------------------------------------------- */

static void set_busy(struct app *a, bool busy) {
    gtk_widget_set_sensitive(a->open_btn, !busy && a->session);
    gtk_widget_set_sensitive(a->live_btn, (!busy || a->live) && a->session && capture_available());
    gtk_widget_set_sensitive(a->cancel_btn, busy && a->session);
}

void ui_progress(struct app *a, double fraction, double done_s, double total_s) {
    char text[96];
    a->duration = total_s;
    snprintf(text, sizeof text, "%.0f %%  (%.1f of %.1f s)", 100 * fraction, done_s, total_s);
    gtk_progress_bar_set_fraction(GTK_PROGRESS_BAR(a->progress), fraction);
    gtk_progress_bar_set_text(GTK_PROGRESS_BAR(a->progress), text);
}

static void start_file(struct app *a, const char *path) {
    gtk_text_buffer_set_text(a->buf, "", 0);
    g_array_set_size(a->words, 0);
    a->line_open = false;
    ui_partial(a, "");
    ui_progress(a, 0, 0, 0);
    char *msg = g_strdup_printf("transcribing %s", path);
    gtk_label_set_text(GTK_LABEL(a->status), msg);
    g_free(msg);
    engine_transcribe_file(a, path);
    set_busy(a, true);
}

static gboolean screenshot_and_quit(gpointer data);

void ui_model_ready(struct app *a, bool ok, const char *message) {
    engine_worker_done(a);
    gtk_label_set_text(GTK_LABEL(a->status), message);
    set_busy(a, false);
    if (!ok) {
        a->exit_status = 1;
        if (a->quit_when_done)
            g_application_quit(G_APPLICATION(a->gtk));
        return;
    }
    if (a->file)
        start_file(a, a->file);
}

void ui_done(struct app *a, vkasr_status st, const char *message) {
    bool was_live = a->live;
    engine_worker_done(a);
    if (a->line_open)
        ui_words(a, NULL, 0, true);
    ui_partial(a, "");
    if (gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(a->live_btn)))
        gtk_toggle_button_set_active(GTK_TOGGLE_BUTTON(a->live_btn), FALSE);
    char *msg = st == VKASR_OK        ? g_strdup_printf("%s: %u words", was_live ? "live stopped" : "done", a->words->len)
                : st == VKASR_ABORTED ? g_strdup_printf("cancelled after %u words", a->words->len)
                                      : g_strdup_printf("failed: %s", message);
    gtk_label_set_text(GTK_LABEL(a->status), msg);
    g_free(msg);
    if (st == VKASR_OK && !was_live)
        ui_progress(a, 1, a->duration, a->duration);
    gtk_range_set_range(GTK_RANGE(a->position), 0, a->duration > 0 ? a->duration : 1);
    set_busy(a, false);
    if (a->select_word >= 0)
        select_word(a, (guint)a->select_word);
    if (a->quit_when_done && !was_live) {
        a->exit_status = st == VKASR_OK ? 0 : 1;
        /* let the window draw the final state before it is captured */
        g_timeout_add(300, screenshot_and_quit, a);
    }
}

/* ---- buttons -------------------------------------------------------------------------------------- */

static void on_file_chosen(GtkNativeDialog *d, int response, gpointer data) {
    struct app *a = data;
    if (response == GTK_RESPONSE_ACCEPT) {
        GFile *f = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(d));
        char *path = f ? g_file_get_path(f) : NULL;
        if (path && !a->busy)
            start_file(a, path);
        g_free(path);
        if (f)
            g_object_unref(f);
    }
    g_object_unref(d);
}

static void on_open(GtkButton *b, gpointer data) {
    struct app *a = data;
    GtkFileChooserNative *d = gtk_file_chooser_native_new("Open audio", GTK_WINDOW(a->win),
                                                          GTK_FILE_CHOOSER_ACTION_OPEN, "_Open", "_Cancel");
    g_signal_connect(d, "response", G_CALLBACK(on_file_chosen), a);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(d));
}

static void on_live(GtkToggleButton *b, gpointer data) {
    struct app *a = data;
    bool on = gtk_toggle_button_get_active(b);
    if (on && !a->busy) {
        char error[512];
        gtk_text_buffer_set_text(a->buf, "", 0);
        g_array_set_size(a->words, 0);
        a->line_open = false;
        if (engine_live_start(a, error, sizeof error)) {
            gtk_label_set_text(GTK_LABEL(a->status), "listening — words appear within about a second");
            gtk_progress_bar_set_fraction(GTK_PROGRESS_BAR(a->progress), 0);
            gtk_progress_bar_set_text(GTK_PROGRESS_BAR(a->progress), "live");
            set_busy(a, true);
        } else {
            gtk_label_set_text(GTK_LABEL(a->status), error);
            gtk_toggle_button_set_active(b, FALSE);
        }
    } else if (!on && a->live) {
        engine_live_stop(a); /* ui_done follows once the last words are in */
    }
}

static void on_cancel(GtkButton *b, gpointer data) { engine_cancel(data); }

/* ---- screenshot ----------------------------------------------------------------------------------- */

/* Renders the window with its own renderer and writes a PNG. */
static bool save_screenshot(struct app *a, const char *path) {
    int w = gtk_widget_get_width(a->win), h = gtk_widget_get_height(a->win);
    GskRenderer *r = gtk_native_get_renderer(GTK_NATIVE(a->win));
    if (w <= 0 || h <= 0 || !r)
        return false;
    GdkPaintable *paint = gtk_widget_paintable_new(a->win);
    GtkSnapshot *snap = gtk_snapshot_new();
    gdk_paintable_snapshot(paint, GDK_SNAPSHOT(snap), w, h);
    GskRenderNode *node = gtk_snapshot_free_to_node(snap);
    bool ok = false;
    if (node) {
        GdkTexture *tex = gsk_renderer_render_texture(r, node, &GRAPHENE_RECT_INIT(0, 0, (float)w, (float)h));
        ok = tex && gdk_texture_save_to_png(tex, path);
        if (tex)
            g_object_unref(tex);
        gsk_render_node_unref(node);
    }
    g_object_unref(paint);
    return ok;
}

static gboolean screenshot_and_quit(gpointer data) {
    struct app *a = data;
    if (a->screenshot && !save_screenshot(a, a->screenshot)) {
        fprintf(stderr, "vkasr-gtk: cannot save the screenshot %s\n", a->screenshot);
        a->exit_status = 1;
    }
    if (a->print_text) { /* exactly what the transcript view shows */
        GtkTextIter s, e;
        gtk_text_buffer_get_bounds(a->buf, &s, &e);
        char *text = gtk_text_buffer_get_text(a->buf, &s, &e, FALSE);
        printf("%s", text);
        fflush(stdout);
        g_free(text);
    }
    g_application_quit(G_APPLICATION(a->gtk));
    return G_SOURCE_REMOVE;
}

/* ---- the window ----------------------------------------------------------------------------------- */

static void on_activate(GtkApplication *gtk, gpointer data) {
    struct app *a = data;
    if (a->win) {
        gtk_window_present(GTK_WINDOW(a->win));
        return;
    }
    a->win = gtk_application_window_new(gtk);
    gtk_window_set_title(GTK_WINDOW(a->win), "vkasr");
    gtk_window_set_default_size(GTK_WINDOW(a->win), 760, 480);

    GtkWidget *bar = gtk_header_bar_new();
    a->open_btn = gtk_button_new_with_label("Open…");
    a->live_btn = gtk_toggle_button_new_with_label("Live");
    a->cancel_btn = gtk_button_new_with_label("Cancel");
    gtk_widget_set_tooltip_text(a->live_btn, capture_available() ? "transcribe the microphone as you speak"
                                                                  : "built without microphone support (ALSA)");
    gtk_header_bar_pack_start(GTK_HEADER_BAR(bar), a->open_btn);
    gtk_header_bar_pack_start(GTK_HEADER_BAR(bar), a->live_btn);
    gtk_header_bar_pack_end(GTK_HEADER_BAR(bar), a->cancel_btn);
    gtk_window_set_titlebar(GTK_WINDOW(a->win), bar);
    g_signal_connect(a->open_btn, "clicked", G_CALLBACK(on_open), a);
    g_signal_connect(a->live_btn, "toggled", G_CALLBACK(on_live), a);
    g_signal_connect(a->cancel_btn, "clicked", G_CALLBACK(on_cancel), a);

    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 6);
    gtk_widget_set_margin_start(box, 10);
    gtk_widget_set_margin_end(box, 10);
    gtk_widget_set_margin_top(box, 8);
    gtk_widget_set_margin_bottom(box, 8);
    a->status = gtk_label_new("loading the model…");
    gtk_label_set_xalign(GTK_LABEL(a->status), 0);
    gtk_label_set_ellipsize(GTK_LABEL(a->status), PANGO_ELLIPSIZE_MIDDLE);
    a->progress = gtk_progress_bar_new();
    gtk_progress_bar_set_show_text(GTK_PROGRESS_BAR(a->progress), TRUE);
    gtk_progress_bar_set_text(GTK_PROGRESS_BAR(a->progress), "");
    a->view = gtk_text_view_new();
    gtk_text_view_set_editable(GTK_TEXT_VIEW(a->view), FALSE);
    gtk_text_view_set_cursor_visible(GTK_TEXT_VIEW(a->view), FALSE);
    gtk_text_view_set_wrap_mode(GTK_TEXT_VIEW(a->view), GTK_WRAP_WORD_CHAR);
    gtk_text_view_set_left_margin(GTK_TEXT_VIEW(a->view), 6);
    gtk_text_view_set_top_margin(GTK_TEXT_VIEW(a->view), 6);
    a->buf = gtk_text_view_get_buffer(GTK_TEXT_VIEW(a->view));
    gtk_text_buffer_create_tag(a->buf, "time", "foreground", "#6a737d", "family", "monospace", NULL);
    gtk_text_buffer_create_tag(a->buf, "word", "foreground", "#0b3d91", NULL);
    GtkGesture *click = gtk_gesture_click_new();
    g_signal_connect(click, "released", G_CALLBACK(on_click), a);
    gtk_widget_add_controller(a->view, GTK_EVENT_CONTROLLER(click));
    GtkWidget *scroll = gtk_scrolled_window_new();
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(scroll), a->view);
    gtk_widget_set_vexpand(scroll, TRUE);
    a->partial = gtk_label_new("");
    gtk_label_set_xalign(GTK_LABEL(a->partial), 0);
    gtk_widget_add_css_class(a->partial, "dim-label");
    a->position = gtk_scale_new_with_range(GTK_ORIENTATION_HORIZONTAL, 0, 1, 0.01);
    gtk_scale_set_draw_value(GTK_SCALE(a->position), TRUE);
    gtk_scale_set_value_pos(GTK_SCALE(a->position), GTK_POS_LEFT);
    gtk_box_append(GTK_BOX(box), a->status);
    gtk_box_append(GTK_BOX(box), a->progress);
    gtk_box_append(GTK_BOX(box), scroll);
    gtk_box_append(GTK_BOX(box), a->partial);
    gtk_box_append(GTK_BOX(box), a->position);
    gtk_window_set_child(GTK_WINDOW(a->win), box);
    set_busy(a, true);
    gtk_window_present(GTK_WINDOW(a->win));
    engine_load(a);
}

static void usage(FILE *f) {
    fprintf(f, "usage: vkasr-gtk [-m MODEL] [-d DEVICE] [FILE] [--quit-when-done] [--print-text] [--screenshot PNG]\n"
               "                 [--select N]\n"
               "  FILE                transcribe it at start (any format libsndfile reads)\n"
               "  -m, --model PATH    model (default: $VKASR_MODEL, else the installed default model)\n"
               "  -d, --device D      Vulkan device index or name substring\n"
               "  --quit-when-done    quit once FILE is transcribed (exit status 0 if it succeeded)\n"
               "  --print-text        then print the text the window shows on stdout\n"
               "  --screenshot PNG    then save a picture of the window\n"
               "  --select N          when FILE is done, select its word N as if it was clicked\n");
}

int main(int argc, char **argv) {
    struct app a = {.exit_status = 0, .select_word = -1};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if ((!strcmp(s, "-m") || !strcmp(s, "--model")) && i + 1 < argc)
            a.model_path = argv[++i];
        else if ((!strcmp(s, "-d") || !strcmp(s, "--device")) && i + 1 < argc)
            a.device = argv[++i];
        else if (!strcmp(s, "--screenshot") && i + 1 < argc)
            a.screenshot = argv[++i];
        else if (!strcmp(s, "--select") && i + 1 < argc)
            a.select_word = atoi(argv[++i]);
        else if (!strcmp(s, "--quit-when-done"))
            a.quit_when_done = true;
        else if (!strcmp(s, "--print-text"))
            a.print_text = true;
        else if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage(stdout);
            return 0;
        } else if (s[0] != '-' && !a.file)
            a.file = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (a.quit_when_done && !a.file) {
        fprintf(stderr, "vkasr-gtk: --quit-when-done needs a FILE\n");
        return 2;
    }
    a.words = g_array_new(FALSE, FALSE, sizeof(struct word_ref));
    /* NON_UNIQUE: every start is its own instance (tests run it in parallel with others) */
    a.gtk = gtk_application_new("org.vkasr.Example", G_APPLICATION_NON_UNIQUE);
    g_signal_connect(a.gtk, "activate", G_CALLBACK(on_activate), &a);
    char *gargv[] = {argv[0], NULL}; /* our options are not GTK's */
    int rc = g_application_run(G_APPLICATION(a.gtk), 1, gargv);
    engine_shutdown(&a);
    g_object_unref(a.gtk);
    g_array_free(a.words, TRUE);
    return rc ? rc : a.exit_status;
}
