/* transcribe_batch.c — the batched path of `vkasr transcribe`: windows of consecutive inputs, each a job
 * of the worker pool (pool.c: --sessions per device, a session and thread each) through
 * vkasr_transcribe_batch(); outputs are written in input order as soon as the windows before them are. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "batch_prefetch.h"
#include "cli.h"
#include "vkasr_debug.h"
#include "wer.h"

/* Windows: at most this many inputs (4 device batches of an explicit --batch), and, where the manifest
 * gives durations, this much audio (the samples of a window are held in host memory: 64 KB/s). */
#define WINDOW_AUTO_INPUTS 256
#define WINDOW_SECONDS 7200.0

/* What one input leaves to be written in order. */
struct record {
    char *out;        /* stdout text in --format                        */
    size_t out_len;
    char *err;        /* messages for stderr                           */
    char *mline;      /* output manifest line (no newline)             */
    int code;         /* EXIT_OK or the input's exit code              */
    bool partial, done, has_ref;
    struct wer_counts wer;
    double seconds;   /* audio seconds of a transcribed input           */
};

struct shared;
struct window {
    struct shared *sh;
    size_t first, n;
    bool done;
    struct record *rec;
};

/* Where the time of the windows went (seconds, summed over windows; -v prints it at the end). */
struct stages {
    double decode, decode_cpu; /* decoding the files ahead: elapsed, summed over the files      */
    double waited;             /* workers waiting for a window's decoding                        */
    double call;               /* in vkasr_transcribe_batch()                                    */
    double features, encoder, decoder; /* its packed batches' stages                             */
    size_t batches;
    double outputs;            /* formatting the results, writing files, the ordered writes      */
};

struct shared {
    pthread_mutex_t mu;
    const struct batch_run *o;
    const struct manifest_entry *in;
    size_t ninputs;
    struct window *w;
    size_t nw, written;
    FILE *mf;             /* the output manifest                               */
    int rc;               /* exit code of the inputs (EXIT_AUDIO wins)          */
    bool stop;            /* stdout or the output manifest cannot be written     */
    size_t inputs_done, failed, with_ref;
    size_t partials;      /* inputs an interrupt cut short                     */
    double seconds;       /* audio transcribed                                 */
    uint64_t peak;        /* device memory, the most any result reported         */
    struct wer_counts wer;
    double t0;
    struct prefetch *pf;  /* decoding the windows ahead (NULL: the library decodes the files) */
    struct stages st;     /* where the workers' time went                                    */
};

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* Appends a message to a record's stderr text. */
static void rec_err(struct record *r, const char *msg) {
    size_t a = r->err ? strlen(r->err) : 0, b = strlen(msg);
    char *s = realloc(r->err, a + b + 1);
    if (!s)
        return;
    memcpy(s + a, msg, b + 1);
    r->err = s;
}

/* The outputs of a transcribed (or partial) input, into its record; files (-o*, --dump) are written here. */
static void finish_input(const struct batch_run *o, const struct manifest_entry *e, size_t index,
                         const vkasr_result *res, struct record *r) {
    FILE *mem = open_memstream(&r->out, &r->out_len);
    if (mem) {
        write_format(mem, o->stdout_fmt, e->audio, res);
        fclose(mem);
    }
    char msg[4400];
    if (r->partial) {
        size_t nt = 0;
        const vkasr_token *tk = vkasr_result_tokens(res, &nt);
        snprintf(msg, sizeof msg, "vkasr: interrupted: %s: partial transcript, %zu tokens up to %.1f s of %.1f s\n",
                 e->audio, nt, nt ? tk[nt - 1].end : 0.0, vkasr_result_duration(res));
        rec_err(r, msg);
    }
    for (int k = 0; k < FMT_COUNT; k++) {
        if (!o->write[k])
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", e->audio, fmt_ext[k]);
        FILE *f = fopen(path, "w");
        if (!f || (write_format(f, (enum fmt)k, e->audio, res), fclose(f)) != 0) {
            snprintf(msg, sizeof msg, "vkasr: cannot write %s: %s\n", path, strerror(errno));
            rec_err(r, msg);
            r->code = EXIT_AUDIO;
        } else if (!o->no_prints) {
            snprintf(msg, sizeof msg, "vkasr: wrote %s\n", path);
            rec_err(r, msg);
        }
    }
    if (o->dump) {
        char dir[4096], path[4200];
        snprintf(dir, sizeof dir, "%s/%zu", o->dump, index);
        size_t fr, dim;
        const char *failed = NULL;
        if (mkdir_p(dir) != 0)
            failed = dir;
        const float *mel = vkasr_result_mel(res, &fr, &dim);
        snprintf(path, sizeof path, "%s/mel.npy", dir);
        if (!failed && write_npy(path, mel, fr, dim) != 0)
            failed = path;
        const float *enc = vkasr_result_encoder(res, &fr, &dim);
        snprintf(path, sizeof path, "%s/encoder.npy", dir);
        if (!failed && write_npy(path, enc, fr, dim) != 0)
            failed = path;
        if (failed) {
            snprintf(msg, sizeof msg, "vkasr: cannot write %s: %s\n", failed, strerror(errno));
            rec_err(r, msg);
            r->code = EXIT_AUDIO;
        }
    }
    const char *text = vkasr_result_text(res);
    if (o->out_manifest && !(r->mline = manifest_line(e, text))) {
        rec_err(r, "vkasr: out of memory for the output manifest\n");
        r->code = EXIT_FAIL;
    }
    if (e->text && wer_count(e->text, text, &r->wer) == 0)
        r->has_ref = true;
    r->seconds = vkasr_result_duration(res);
}

/* Writes the finished windows in order (the caller holds the lock). */
static void flush_windows(struct shared *sh) {
    const struct batch_run *o = sh->o;
    while (sh->written < sh->nw && sh->w[sh->written].done) {
        struct window *w = &sh->w[sh->written];
        for (size_t i = 0; i < w->n; i++) {
            struct record *r = &w->rec[i];
            if (!r->done)
                continue; /* never started (interrupted) */
            if (r->err && (!o->no_prints || r->code != EXIT_OK || r->partial))
                fputs(r->err, stderr);
            if (r->partial)
                sh->partials++;
            if (r->out && !sh->stop) {
                fwrite(r->out, 1, r->out_len, stdout);
                if (stdout_check() != EXIT_OK) {
                    sh->rc = EXIT_AUDIO;
                    sh->stop = true;
                }
            }
            if (r->mline && sh->mf && !sh->stop && fprintf(sh->mf, "%s\n", r->mline) < 0) {
                fprintf(stderr, "vkasr: cannot write %s: %s\n", o->out_manifest, strerror(errno));
                sh->rc = EXIT_AUDIO;
                sh->stop = true;
            }
            if (r->code != EXIT_OK) {
                sh->failed++;
                if (sh->rc == EXIT_OK || r->code == EXIT_AUDIO)
                    sh->rc = r->code;
            } else {
                sh->seconds += r->seconds;
            }
            if (r->has_ref) {
                sh->with_ref++;
                sh->wer.errors += r->wer.errors;
                sh->wer.sub += r->wer.sub;
                sh->wer.del += r->wer.del;
                sh->wer.ins += r->wer.ins;
                sh->wer.ref_words += r->wer.ref_words;
            }
            sh->inputs_done++;
            free(r->out);
            free(r->err);
            free(r->mline);
            r->out = r->err = r->mline = NULL;
        }
        free(w->rec);
        w->rec = NULL;
        sh->written++;
        if (o->progress) {
            double el = now_s() - sh->t0;
            fprintf(stderr, "\rvkasr: %zu/%zu inputs, %.1f s of audio in %.1f s (RTFx %.1f)   ", sh->inputs_done,
                    sh->ninputs, sh->seconds, el, el > 0 ? sh->seconds / el : 0.0);
        }
    }
}

/* The packed batches behind a call's results: their stage times into *st (the inputs of a batch report
 * the same features, encoder and decoder times, which tell the batches apart). */
static void count_batches(const vkasr_result **res, size_t n, struct stages *st) {
    double(*seen)[3] = malloc((n ? n : 1) * sizeof *seen);
    if (!seen)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!res[i] || vkasr_result_status(res[i]) != VKASR_OK)
            continue;
        const vkasr_timings t = vkasr_result_timings(res[i]);
        size_t j = 0;
        while (j < k && !(seen[j][0] == t.features_ms && seen[j][1] == t.encoder_ms && seen[j][2] == t.decoder_ms))
            j++;
        if (j < k)
            continue;
        seen[k][0] = t.features_ms;
        seen[k][1] = t.encoder_ms;
        seen[k][2] = t.decoder_ms;
        k++;
        st->features += t.features_ms / 1e3;
        st->encoder += t.encoder_ms / 1e3;
        st->decoder += t.decoder_ms / 1e3;
    }
    st->batches += k;
    free(seen);
}

static void add_stages(struct stages *a, const struct stages *b) {
    a->decode += b->decode;
    a->decode_cpu += b->decode_cpu;
    a->waited += b->waited;
    a->call += b->call;
    a->features += b->features;
    a->encoder += b->encoder;
    a->decoder += b->decoder;
    a->batches += b->batches;
    a->outputs += b->outputs;
}

/* Transcribes window w on this worker's session; its records, then the ordered flush. */
static void run_window(struct pool_worker *wk, struct window *w) {
    struct shared *sh = w->sh;
    const struct batch_run *o = sh->o;
    const size_t wi = (size_t)(w - sh->w);
    struct record *rec = calloc(w->n, sizeof *rec);
    vkasr_batch_input *in = calloc(w->n, sizeof *in);
    const vkasr_result **res = calloc(w->n, sizeof *res);
    if (!rec || !in || !res) {
        fprintf(stderr, "vkasr: out of memory\n");
        free(rec);
        free(in);
        free(res);
        pthread_mutex_lock(&sh->mu);
        sh->rc = EXIT_FAIL;
        sh->stop = true;
        pthread_mutex_unlock(&sh->mu);
        return;
    }
    /* the files decoded ahead go as samples (16 kHz mono: the library copies them bit for bit); the others
     * by their path, for the library to decode (and to report why a file fails) */
    double waited = 0;
    struct decoded *d = sh->pf ? prefetch_take(sh->pf, wi, &waited) : NULL;
    for (size_t i = 0; i < w->n; i++) {
        if (d && d->pcm[i])
            in[i] = (vkasr_batch_input){.samples = d->pcm[i], .n_frames = d->n[i], .sample_rate = VKASR_SAMPLE_RATE,
                                        .channels = 1};
        else
            in[i].path = sh->in[w->first + i].audio;
    }
    vkasr_transcribe_params tp = o->tp;
    tp.abort_callback = cli_should_abort;
    vkasr_batch_params bp = vkasr_batch_params_default();
    bp.max_batch = o->batch;
    const double t0 = now_s();
    vkasr_status st = vkasr_transcribe_batch(wk->session, in, w->n, &tp, &bp, res);
    const double secs = now_s() - t0;
    double audio = 0;
    struct stages ws = {.waited = waited / 1e3, .call = secs};
    if (d) {
        ws.decode = d->wall_ms / 1e3;
        ws.decode_cpu = d->cpu_ms / 1e3;
    }
    count_batches(res, w->n, &ws);
    uint64_t peak = 0;
    for (size_t i = 0; i < w->n; i++) {
        struct record *r = &rec[i];
        const vkasr_result *x = res[i];
        if (!x) { /* the call failed before any input ran */
            char *m = dupf("vkasr: %s: %s\n", sh->in[w->first + i].audio, vkasr_session_last_error(wk->session));
            if (m)
                rec_err(r, m);
            free(m);
            r->code = exit_code_for(st, 0);
            r->done = true;
            continue;
        }
        vkasr_status si = vkasr_result_status(x);
        const bool started = si != VKASR_ABORTED || vkasr_result_partial(x);
        if (si == VKASR_ABORTED && !started)
            continue; /* an input the interrupt kept from starting: not printed */
        r->done = true;
        if (si == VKASR_OK || si == VKASR_ABORTED) {
            r->partial = si == VKASR_ABORTED;
            finish_input(o, &sh->in[w->first + i], w->first + i, x, r);
            audio += vkasr_result_duration(x);
            vkasr_timings tm = vkasr_result_timings(x);
            peak = tm.peak_device_bytes > peak ? tm.peak_device_bytes : peak;
        } else {
            /* the library's messages name the input: its path, or for samples its index in the call */
            const char *msg = vkasr_result_error(x);
            char pcm_name[64];
            int k = snprintf(pcm_name, sizeof pcm_name, "input %zu (PCM)", i);
            char *m = in[i].path || strncmp(msg, pcm_name, (size_t)k) != 0
                          ? dupf("vkasr: %s\n", msg)
                          : dupf("vkasr: %s%s\n", sh->in[w->first + i].audio, msg + k);
            if (m)
                rec_err(r, m);
            free(m);
            r->code = exit_code_for(si, 0);
        }
    }
    prefetch_release(d, w->n);
    ws.outputs = now_s() - t0 - secs;
    if (o->verbose || o->profile) {
        char *m = dupf("vkasr: worker %d (%s): window of %zu inputs (%zu..%zu, %.1f s of audio) in %.2f s (RTFx %.1f), "
                       "peak device memory %.1f MiB; decoded ahead in %.3f s (waited %.3f s), %zu batches: features "
                       "%.3f s, encoder %.3f s, decoder %.3f s; outputs %.3f s\n",
                       wk->index, wk->device ? wk->device : "default device", w->n, w->first, w->first + w->n - 1,
                       audio, secs, secs > 0 ? audio / secs : 0.0, peak / 1048576.0, ws.decode, ws.waited, ws.batches,
                       ws.features, ws.encoder, ws.decoder, ws.outputs);
        if (m && w->n)
            rec_err(&rec[w->n - 1], m);
        free(m);
    }
    if (o->profile) {
        vkasr_op_profile ops[64];
        size_t n = 0;
        vkasr_session_profile(wk->session, ops, 64, &n);
        for (size_t k = 0; k < n && k < 64 && w->n; k++) {
            char *m = dupf("vkasr: profile %-20s %8llu calls %10.3f ms\n", ops[k].name,
                           (unsigned long long)ops[k].calls, ops[k].gpu_ms);
            if (m)
                rec_err(&rec[w->n - 1], m);
            free(m);
        }
        vkasr_session_profile_reset(wk->session);
    }
    free(in);
    free(res);
    const double t_flush = now_s();
    pthread_mutex_lock(&sh->mu);
    w->rec = rec;
    w->done = true;
    if (peak > sh->peak)
        sh->peak = peak;
    flush_windows(sh);
    ws.outputs += now_s() - t_flush;
    add_stages(&sh->st, &ws);
    pthread_mutex_unlock(&sh->mu);
}

/* A window's job: run unless stdout failed or an interrupt came (then the windows left are skipped). */
static void window_job(struct pool_worker *wk, void *arg) {
    struct window *w = arg;
    pthread_mutex_lock(&w->sh->mu);
    const bool go = !w->sh->stop && !interrupted;
    pthread_mutex_unlock(&w->sh->mu);
    if (go)
        run_window(wk, w);
}

/* A worker session's debug hooks: the features kept for --dump, and VKASR_TEST_BATCH_FAIL_ABOVE=N (a
 * test hook: every packed batch of more than N inputs fails, so that test_cli.sh can watch the halving). */
static void set_debug(vkasr_session *s, bool dump) {
    const char *v = getenv("VKASR_TEST_BATCH_FAIL_ABOVE");
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.keep_features = dump;
    dp.batch_fail_above = v && *v ? strtoul(v, NULL, 10) : 0;
    vkasr_session_set_debug(s, &dp);
}

/* Cuts the inputs into windows (see WINDOW_*; with several workers small enough that each gets a few:
 * three per worker across devices, so that a faster device takes more; two per session of one device,
 * which share it, so that batches stay large). */
static struct window *make_windows(const struct batch_run *o, const struct manifest_entry *in, size_t n, int workers,
                                   size_t *nw) {
    size_t cap = o->batch ? 4 * o->batch : WINDOW_AUTO_INPUTS;
    if (workers > 1) {
        const size_t per = (o->devices->n > 1 ? 3 : 2) * (size_t)workers;
        size_t share = (n + per - 1) / per, least = o->batch ? o->batch : 64;
        share = share > least ? share : least;
        cap = share < cap ? share : cap;
    }
    struct window *w = calloc(n ? n : 1, sizeof *w);
    if (!w)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        double secs = 0;
        size_t j = i;
        while (j < n && j - i < cap && (j == i || in[j].duration < 0 || secs + in[j].duration <= WINDOW_SECONDS)) {
            secs += in[j].duration > 0 ? in[j].duration : 0;
            j++;
        }
        w[k++] = (struct window){.first = i, .n = j - i};
        i = j;
    }
    *nw = k;
    return w;
}

int transcribe_batch(const struct batch_run *o, const struct manifest_entry *in, size_t n) {
    const double t_start = now_s();
    struct shared sh = {.o = o, .in = in, .ninputs = n, .rc = EXIT_OK, .t0 = t_start};
    pthread_mutex_init(&sh.mu, NULL);
    int rc = EXIT_OK;
    /* the windows are cut for the workers planned (an auto count on a CPU device shrinks at the load) */
    int nd = o->devices->n * pool_sessions(o->devices, o->sessions);
    sh.w = make_windows(o, in, n, nd, &sh.nw);
    if (!sh.w) {
        fprintf(stderr, "vkasr: out of memory\n");
        rc = EXIT_FAIL;
    }
    for (size_t i = 0; i < sh.nw; i++)
        sh.w[i].sh = &sh;
    /* the files of the first window decode while the model loads, each next one while the windows
     * before it transcribe; without the prefetcher (out of memory, no thread) the library decodes them */
    const char **paths = rc == EXIT_OK ? calloc(n ? n : 1, sizeof *paths) : NULL;
    size_t *wfirst = rc == EXIT_OK ? calloc(sh.nw ? sh.nw : 1, sizeof *wfirst) : NULL;
    size_t *wcount = rc == EXIT_OK ? calloc(sh.nw ? sh.nw : 1, sizeof *wcount) : NULL;
    if (paths && wfirst && wcount) {
        for (size_t i = 0; i < n; i++)
            paths[i] = in[i].audio;
        for (size_t i = 0; i < sh.nw; i++) {
            wfirst[i] = sh.w[i].first;
            wcount[i] = sh.w[i].n;
        }
        sh.pf = prefetch_start(paths, wfirst, wcount, sh.nw, 0);
    }
    if (rc == EXIT_OK && o->out_manifest && !(sh.mf = fopen(o->out_manifest, "w"))) {
        fprintf(stderr, "vkasr: cannot write %s: %s\n", o->out_manifest, strerror(errno));
        rc = EXIT_AUDIO;
    }
    struct pool *pool = NULL;
    int nmodels = 0, prefetch_threads_used = 0;
    if (rc == EXIT_OK) {
        const struct pool_params pp = {
            .model = o->model, .mp = o->mp, .devices = o->devices, .sessions = o->sessions, .verbose = o->verbose,
        };
        rc = pool_open(&pp, &pool);
    }
    if (rc == EXIT_OK) {
        nd = pool_size(pool);
        nmodels = pool_models(pool);
        for (int i = 0; i < nd; i++)
            set_debug(pool_worker(pool, i)->session, o->dump != NULL);
        vkasr_model_info info;
        vkasr_model_get_info(pool_worker(pool, 0)->model, &info);
        output_set_head(info.head);
        rc = cli_check_language(pool_worker(pool, 0)->model, o->tp.language);
    }
    /* the progress line's RTFx counts from here: transcription only */
    sh.t0 = now_s();
    const double load_s = sh.t0 - t_start;
    if (rc == EXIT_OK) {
        catch_interrupts();
        /* the windows in input order, each taken by the next free worker */
        if (pool_start(pool, NULL, NULL) == 0)
            sh.rc = EXIT_FAIL;
        for (size_t i = 0; sh.rc == EXIT_OK && i < sh.nw; i++)
            if (!pool_submit(pool, window_job, &sh.w[i])) {
                fprintf(stderr, "vkasr: out of memory\n");
                pthread_mutex_lock(&sh.mu);
                sh.rc = EXIT_FAIL;
                sh.stop = true;
                pthread_mutex_unlock(&sh.mu);
            }
        pool_wait(pool);
        prefetch_threads_used = prefetch_threads(sh.pf);
        prefetch_stop(sh.pf);
        sh.pf = NULL;
        pthread_mutex_lock(&sh.mu);
        /* windows an interrupt kept from starting are skipped: the ones that finished still print */
        for (size_t i = sh.written; i < sh.nw; i++)
            if (!sh.w[i].done) {
                sh.w[i].done = true;
                sh.w[i].n = 0;
            }
        flush_windows(&sh);
        pthread_mutex_unlock(&sh.mu);
        if (o->progress)
            fprintf(stderr, "\n");
        const double t_end = now_s(), el = t_end - t_start, work = t_end - sh.t0;
        if (interrupted && sh.written < sh.nw)
            fprintf(stderr, "vkasr: interrupted: the inputs after %zu are skipped\n", sh.inputs_done);
        /* the whole command's figure, then the same without loading the model(s) */
        if (!o->no_prints)
            fprintf(stderr, "vkasr: %zu inputs, %.1f s of audio in %.2f s on %d worker(s): RTFx %.1f, peak device "
                            "memory %.1f MiB; %zu failed; loading the model%s %.2f s, RTFx %.1f after it\n",
                    sh.inputs_done, sh.seconds, el, nd, el > 0 ? sh.seconds / el : 0.0, sh.peak / 1048576.0, sh.failed,
                    nmodels > 1 ? "s" : "", load_s, work > 0 ? sh.seconds / work : 0.0);
        if (o->verbose) {
            /* where the workers' time went; idle: the rest of their time (starting, waiting on each other) */
            const struct stages *g = &sh.st;
            const double busy = g->waited + g->call + g->outputs, other = g->call - g->features - g->encoder - g->decoder;
            fprintf(stderr, "vkasr: stages: decoding files %.2f s ahead of the workers (%d threads, %.2f s summed), "
                            "workers waiting for it %.2f s; vkasr_transcribe_batch %.2f s: %zu batches, features %.2f s, "
                            "encoder %.2f s, decoder %.2f s, other %.2f s; outputs %.2f s; idle %.2f s\n",
                    g->decode, prefetch_threads_used, g->decode_cpu, g->waited, g->call, g->batches, g->features,
                    g->encoder, g->decoder, other, g->outputs, nd * work - busy);
        }
        if (sh.with_ref && !o->no_prints)
            fprintf(stderr, "vkasr: WER %.2f %% (%zu errors: %zu substitutions, %zu deletions, %zu insertions, over %zu "
                            "reference words of %zu inputs with text)\n",
                    sh.wer.ref_words ? 100.0 * (double)sh.wer.errors / (double)sh.wer.ref_words : 0.0, sh.wer.errors,
                    sh.wer.sub, sh.wer.del, sh.wer.ins, sh.wer.ref_words, sh.with_ref);
        rc = sh.rc;
        if (!interrupted)
            cli_test_hold_exit();
    }
    if (sh.mf && fclose(sh.mf) != 0 && rc == EXIT_OK) {
        fprintf(stderr, "vkasr: cannot write %s: %s\n", o->out_manifest, strerror(errno));
        rc = EXIT_AUDIO;
    }
    pool_free(pool);
    prefetch_stop(sh.pf);
    free(paths);
    free(wfirst);
    free(wcount);
    for (size_t i = 0; sh.w && i < sh.nw; i++)
        free(sh.w[i].rec);
    free(sh.w);
    pthread_mutex_destroy(&sh.mu);
    /* 128 + the signal when it cut the work short (an input partial or skipped), as in cmd_transcribe.c */
    if (interrupted && (sh.partials > 0 || sh.inputs_done < sh.ninputs))
        return 128 + interrupted;
    return rc;
}
