/* batch.c — vkasr_transcribe_batch(): many inputs in one call. The inputs are decoded (a bad one gets
 * its own error result), sorted by length and cut into device batches that fit the memory plan; each
 * batch runs packed through the network (src/asr: asr_run_batch, every input computed as alone) and a
 * batch that fails on the device is retried as two halves, each halved again while it fails, down to
 * single inputs. Results are per input, in input order. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "audio/audio.h"
#include "common/clock.h"

/* The automatic batch (max_batch 0): at most this many inputs and this much audio, within memory. */
#define AUTO_MAX_INPUTS 256
#define AUTO_MAX_SECONDS 3600.0

vkasr_batch_params vkasr_batch_params_default(void) {
    return (vkasr_batch_params){.struct_size = sizeof(vkasr_batch_params)};
}

/* One input of the call. */
struct item {
    struct audio a;
    int64_t frames;  /* encoder frames */
    double load_ms;  /* decoding it */
    vkasr_status st; /* of decoding it */
    struct err e;
};

/* Decoding the inputs: threads take the next undecoded input until none is left (files are independent:
 * each has its own libsndfile handle, descriptor and resampler; audio_io.c serialises only the opens). */
#define DECODE_THREADS_MAX 8
struct decode_job {
    const vkasr_batch_input *inputs;
    struct item *items;
    size_t n;
    int rate;
    atomic_size_t next;
};

static void *decode_inputs(void *arg) {
    struct decode_job *j = arg;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
        const vkasr_batch_input *in = &j->inputs[i];
        struct item *it = &j->items[i];
        const double t0 = clock_ms();
        it->st = in->path ? audio_load_file(in->path, j->rate, &it->a, &it->e)
                          : audio_from_pcm(in->samples, in->n_frames, in->sample_rate, in->channels, j->rate, &it->a,
                                           &it->e);
        it->load_ms = clock_ms() - t0;
    }
    return NULL;
}

/* Decodes every input into items[i] (status in items[i].st): on up to DECODE_THREADS_MAX threads (one
 * per core) next to the calling one when there are several inputs, else on the calling thread alone.
 * Returns the number of threads that decoded (the calling one included). */
static size_t decode_all(const vkasr_batch_input *inputs, struct item *items, size_t n, int rate) {
    struct decode_job j = {.inputs = inputs, .items = items, .n = n, .rate = rate};
    atomic_init(&j.next, 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t extra = cores > 1 ? (size_t)cores - 1 : 0;
    extra = extra < DECODE_THREADS_MAX - 1 ? extra : DECODE_THREADS_MAX - 1;
    extra = extra < n / 4 ? extra : n / 4; /* a few inputs are not worth a thread */
    pthread_t th[DECODE_THREADS_MAX];
    size_t started = 0;
    for (; started < extra; started++)
        if (pthread_create(&th[started], NULL, decode_inputs, &j) != 0)
            break; /* fewer threads: the calling one decodes what is left */
    decode_inputs(&j);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    return started + 1;
}

/* The call in progress: progress over all inputs' audio, abort; where its time goes (ms, summed over
 * the batches: the breakdown logged at INFO at the end of the call). */
struct call {
    vkasr_session *s;
    const vkasr_transcribe_params *p;
    double total, done, cur; /* audio seconds: all inputs, those finished, the running batch's */
    size_t batches;          /* packed batches that ran (not those that failed and were halved)        */
    size_t splits;           /* failed batches run as two halves                                       */
    double features_ms, encoder_ms, decoder_ms; /* asr_run_batch's stages (host preparation and uploads
                                                   count in features: the first stage)               */
    double results_ms;                          /* finishing the results, the result callbacks      */
};

static void batch_progress(void *ud, const char *stage, double fraction, double audio_done) {
    struct call *c = ud;
    (void)audio_done;
    if (!c->p->progress_callback || !(c->total > 0))
        return;
    /* within a batch as for one input: features 5 %, encoder 65 %, decoder 30 % */
    double f = strcmp(stage, "features") == 0 ? 0.05 * fraction
               : strcmp(stage, "encoder") == 0 ? 0.05 + 0.65 * fraction
                                                 : 0.70 + 0.30 * fraction;
    double done = c->done + f * c->cur;
    vkasr_progress pr = {(float)(done / c->total), done, c->total, stage};
    c->p->progress_callback(&pr, c->p->progress_user_data);
}

static bool on_abort(void *ud) {
    struct call *c = ud;
    return c->p->abort_callback && c->p->abort_callback(c->p->abort_user_data);
}

/* A failed input's result: status and message. */
static void fail_input(struct vkasr_result *r, vkasr_status st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(r->error);
    r->error = strdup(msg);
    r->status = st;
    r->partial = st == VKASR_ABORTED;
}

/* The name of input i in messages. */
static void input_name(const vkasr_batch_input *in, size_t i, char *buf, size_t n) {
    if (in->path)
        snprintf(buf, n, "%s", strcmp(in->path, "-") ? in->path : "standard input");
    else
        snprintf(buf, n, "input %zu (PCM)", i);
}

/* Runs the inputs idx[0 .. k) as one packed batch (k == 1: alone); their results are finished and
 * reported. A batch of several that fails on the device (memory taken meanwhile, a driver error) is run
 * as two halves, each halved again while it fails: a batch too large for what is left of the device
 * finds the largest halves that fit (a log2 k deep search instead of k single runs), and one input that
 * cannot run sinks no other. */
static vkasr_status run_group(struct call *c, struct item *items, const size_t *idx, size_t k,
                              const vkasr_batch_input *inputs, const vkasr_batch_params *bp) {
    vkasr_session *s = c->s;
    const float **pcm = malloc(k * sizeof *pcm);
    size_t *ns = malloc(k * sizeof *ns);
    struct asr_output *outs = calloc(k, sizeof *outs);
    if (!pcm || !ns || !outs) {
        free(pcm);
        free(ns);
        free(outs);
        return err_set(&s->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    c->cur = 0;
    for (size_t j = 0; j < k; j++) {
        pcm[j] = items[idx[j]].a.samples;
        ns[j] = items[idx[j]].a.n;
        c->cur += (double)items[idx[j]].a.n / items[idx[j]].a.rate;
    }
    const double t0 = clock_ms();
    struct asr_options opt = api_options(s, c->p);
    struct asr_hooks hooks = {.progress = batch_progress, .should_abort = on_abort, .ud = c};
    struct err e = {0};
    const size_t fail_above = s->debug.batch_fail_above; /* vkasr_debug.h: tests of the halving below */
    vkasr_status st = fail_above && k > fail_above
                          ? err_set(&e, VKASR_ERR_DEVICE_MEMORY, "batch_fail_above=%zu (a debug hook)", fail_above)
                          : asr_run_batch(s->model->am, s->be, pcm, ns, (int64_t)k, &opt, &hooks, outs, &e);
    free(pcm);
    free(ns);
    const double t_run = clock_ms() - t0, f_ms = outs[0].features_ms, e_ms = outs[0].encoder_ms,
                 d_ms = outs[0].decoder_ms;
    if (st == VKASR_OK) {
        c->batches++;
        c->features_ms += f_ms;
        c->encoder_ms += e_ms;
        c->decoder_ms += d_ms;
    }
    /* (a lost device fails every later batch too: its inputs get the error at once) */
    if (st != VKASR_OK && st != VKASR_ABORTED && st != VKASR_ERR_DEVICE_LOST && k > 1) {
        const size_t h = k / 2;
        /* the first split of a call warns; the halves' own splits are details */
        log_msg(s->model->dev->log, c->splits++ == 0 ? VKASR_LOG_WARN : VKASR_LOG_INFO,
                "a batch of %zu inputs failed (%s); running it as batches of %zu and %zu", k, e.msg, h, k - h);
        for (size_t j = 0; j < k; j++)
            asr_output_free(&outs[j]);
        free(outs);
        const vkasr_status s1 = run_group(c, items, idx, h, inputs, bp);
        if (s1 == VKASR_ABORTED)
            return s1;
        const vkasr_status s2 = run_group(c, items, idx + h, k - h, inputs, bp);
        return s2 == VKASR_ABORTED || s1 == VKASR_OK ? s2 : s1;
    }
    const double t_res = clock_ms();
    for (size_t j = 0; j < k; j++) {
        struct vkasr_result *r = &s->batch[idx[j]];
        r->out = outs[j];
        vkasr_status sr = api_result_finish(s, r, st, items[idx[j]].load_ms, t0);
        if (sr != VKASR_OK) {
            char name[512];
            input_name(&inputs[idx[j]], idx[j], name, sizeof name);
            fail_input(r, sr, "%s: %s", name, sr == VKASR_ABORTED ? s->err.msg : e.msg[0] ? e.msg : s->err.msg);
        }
        if (bp->result_callback)
            bp->result_callback(idx[j], r, bp->result_user_data);
    }
    const double results_ms = clock_ms() - t_res;
    c->results_ms += results_ms;
    if (st == VKASR_OK)
        LOG_INFO(s->model->dev->log,
                 "batch of %zu inputs, %.1f s of audio: %.1f ms (features %.1f, encoder %.1f, decoder %.1f), results "
                 "%.1f ms",
                 k, c->cur, t_run, f_ms, e_ms, d_ms, results_ms);
    free(outs);
    c->done += c->cur;
    c->cur = 0;
    return st;
}

/* Sorting: longest first (the first batch plans the most memory), then input order. */
struct by_len {
    size_t n, index;
};
static int by_length(const void *a, const void *b) {
    const struct by_len *x = a, *y = b;
    return x->n != y->n ? (x->n < y->n ? 1 : -1) : (x->index > y->index) - (x->index < y->index);
}

/* Whether a packed batch of the first n of lens fits the device's memory (smaller chunks are fine). */
static bool batch_fits(vkasr_session *s, const int64_t *lens, size_t n, const struct asr_options *opt) {
    const struct asr_model *m = s->model->am;
    struct err e = {0};
    struct asr_batch b;
    struct asr_plan plan;
    struct asr_work work;
    bool fits = asr_batch_layout(&m->cfg, lens, (int64_t)n, &b, &e) == VKASR_OK &&
                asr_work_for(m, s->be, &b, opt, &work, &e) == VKASR_OK;
    work.log = NULL; /* probes, not runs */
    fits = fits && asr_plan(m, &work, &plan, &e) == VKASR_OK;
    asr_batch_free(&b);
    return fits;
}

/* How many of idx[0 .. left) (sorted) start the next batch: up to max inputs (auto: also an hour of
 * audio), one attention for all, and a memory plan that fits. A plan measures its stages (plan.c), so
 * the memory rule is a search, not a probe per input: a batch's memory grows with every input added,
 * so the longest prefix that fits is found by bisection below the longest the other rules allow (one
 * plan where that whole prefix fits). */
static size_t next_group(vkasr_session *s, const struct item *items, const size_t *idx, size_t left, size_t max,
                         const struct asr_options *opt) {
    const struct asr_model *m = s->model->am;
    const bool automatic = max == 0;
    size_t lim = automatic ? AUTO_MAX_INPUTS : max;
    lim = lim < left ? lim : left;
    if (lim <= 1)
        return lim;
    enum asr_attention mode0;
    int64_t w0;
    struct err e = {0};
    if (asr_attention_choose(&m->cfg, items[idx[0]].frames, opt, &mode0, &w0, &e) != VKASR_OK)
        return 1; /* the error comes back from the run */
    int64_t *lens = malloc(lim * sizeof *lens);
    if (!lens)
        return 1;
    size_t k = 1;
    double seconds = (double)items[idx[0]].a.n / m->cfg.sample_rate;
    lens[0] = (int64_t)items[idx[0]].a.n;
    for (; k < lim; k++) {
        const struct item *it = &items[idx[k]];
        enum asr_attention mode;
        int64_t w;
        seconds += (double)it->a.n / m->cfg.sample_rate;
        if (it->frames < 1 || (automatic && seconds > AUTO_MAX_SECONDS) ||
            asr_attention_choose(&m->cfg, it->frames, opt, &mode, &w, &e) != VKASR_OK || mode != mode0 || w != w0)
            break;
        lens[k] = (int64_t)it->a.n;
    }
    /* the first input goes alone whatever its plan (the run reports what does not fit) */
    size_t lo = 1, hi = k;
    if (hi > 1 && !batch_fits(s, lens, hi, opt)) {
        hi--;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo + 1) / 2;
            if (batch_fits(s, lens, mid, opt))
                lo = mid;
            else
                hi = mid - 1;
        }
    }
    free(lens);
    return hi;
}

vkasr_status vkasr_transcribe_batch(vkasr_session *s, const vkasr_batch_input *inputs, size_t n,
                                    const vkasr_transcribe_params *params, const vkasr_batch_params *batch_params,
                                    const vkasr_result **out) {
    if (!s)
        return VKASR_ERR_INVALID_ARG;
    if (s->stream)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "the session is in use by a live stream (vkasr_stream_free() gives it back)");
    const double t_call = clock_ms();
    s->call_start_ms = t_call;
    api_first_call_begin(s);
    err_clear(&s->err);
    api_result_clear(&s->result);
    for (size_t i = 0; i < s->nbatch; i++)
        api_result_clear(&s->batch[i]);
    free(s->batch);
    s->batch = NULL;
    s->nbatch = 0;
    if (!out || (!inputs && n))
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "vkasr_transcribe_batch: inputs and out_results must not be NULL");
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    vkasr_transcribe_params p;
    READ_PARAMS(p, params, vkasr_transcribe_params_default());
    vkasr_batch_params bp;
    READ_PARAMS(bp, batch_params, vkasr_batch_params_default());
    TRY(api_check_params(s, &p));
    if (p.segment_callback || s->debug.stage_callback || s->debug.n_forced_steps)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "vkasr_transcribe_batch: segment and stage callbacks and teacher forcing take one input at a "
                       "time (vkasr_transcribe_file / _pcm)");
    for (size_t i = 0; i < n; i++)
        if (!inputs[i].path && ((!inputs[i].samples && inputs[i].n_frames) || inputs[i].sample_rate <= 0 ||
                                inputs[i].channels <= 0))
            return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                           "vkasr_transcribe_batch: input %zu: a path, or samples (or n_frames 0) with sample_rate > 0 "
                           "and channels > 0",
                           i);
    if (n == 0)
        return VKASR_OK;
    s->batch = calloc(n, sizeof *s->batch);
    struct item *items = calloc(n, sizeof *items);
    size_t *idx = malloc(n * sizeof *idx);
    if (!s->batch || !items || !idx) {
        free(s->batch);
        s->batch = NULL;
        free(items);
        free(idx);
        return err_set(&s->err, VKASR_ERR_NO_MEMORY, "out of host memory for %zu inputs", n);
    }
    s->nbatch = n;
    const struct asr_model *m = s->model->am;
    struct call c = {.s = s, .p = &p};
    vkasr_status st = VKASR_OK, first_err = VKASR_OK;
    /* decode every input; a bad one is its own error */
    const double t_decode = clock_ms();
    const size_t decoders = decode_all(inputs, items, n, m->cfg.sample_rate);
    const double decode_ms = clock_ms() - t_decode;
    double decode_cpu_ms = 0;
    for (size_t i = 0; i < n; i++)
        decode_cpu_ms += items[i].load_ms;
    size_t nrun = 0;
    for (size_t i = 0; i < n; i++) {
        struct vkasr_result *r = &s->batch[i];
        out[i] = r;
        const struct err e = items[i].e;
        const vkasr_batch_input *in = &inputs[i];
        const vkasr_status si = items[i].st;
        if (si != VKASR_OK) {
            char name[512];
            input_name(in, i, name, sizeof name);
            /* audio messages start with the file's name already */
            if (strncmp(e.msg, name, strlen(name)) == 0)
                fail_input(r, si, "%s", e.msg);
            else
                fail_input(r, si, "%s: %s", name, e.msg);
            r->timings.load_ms = items[i].load_ms;
            if (first_err == VKASR_OK)
                first_err = si;
            if (bp.result_callback)
                bp.result_callback(i, r, bp.result_user_data);
            continue;
        }
        r->duration = (double)items[i].a.n / items[i].a.rate;
        items[i].frames = asr_encoder_frames(&m->cfg, (int64_t)(items[i].a.n / (size_t)m->cfg.hop_length));
        c.total += r->duration;
        idx[nrun++] = i;
    }
    /* longest first; one at a time where the session walks transducers on the host (comparisons) */
    struct by_len *order = malloc((nrun ? nrun : 1) * sizeof *order);
    if (!order) {
        for (size_t i = 0; i < n; i++)
            audio_free(&items[i].a);
        free(items);
        free(idx);
        return err_set(&s->err, VKASR_ERR_NO_MEMORY, "out of host memory for %zu inputs", n);
    }
    for (size_t j = 0; j < nrun; j++)
        order[j] = (struct by_len){items[idx[j]].a.n, idx[j]};
    qsort(order, nrun, sizeof *order, by_length);
    for (size_t j = 0; j < nrun; j++)
        idx[j] = order[j].index;
    free(order);
    const size_t max = s->host_decoder ? 1 : bp.max_batch;
    struct asr_options opt = api_options(s, &p);
    double group_ms = 0;
    size_t pos = 0;
    while (pos < nrun && st != VKASR_ABORTED) {
        /* inputs without an encoder frame run alone (an empty transcript, as a call of their own) */
        const double tg = clock_ms();
        const size_t k = items[idx[pos]].frames < 1 ? 1 : next_group(s, items, idx + pos, nrun - pos, max, &opt);
        group_ms += clock_ms() - tg;
        vkasr_status sg = run_group(&c, items, idx + pos, k, inputs, &bp);
        if (sg == VKASR_ABORTED)
            st = VKASR_ABORTED;
        else if (sg != VKASR_OK && first_err == VKASR_OK)
            first_err = sg;
        pos += k;
    }
    /* where the call's time went; "other": sorting, freeing, what the stages above do not cover */
    const double call_ms = clock_ms() - t_call,
                 other = call_ms - decode_ms - group_ms - c.features_ms - c.encoder_ms - c.decoder_ms - c.results_ms;
    LOG_INFO(s->model->dev->log,
             "%zu inputs in %zu batches, call %.1f ms: decoding %.1f ms (%zu threads, %.1f ms summed), forming the "
             "batches %.1f, features %.1f, encoder %.1f, decoder %.1f, results %.1f, other %.1f",
             n, c.batches, call_ms, decode_ms, decoders, decode_cpu_ms, group_ms, c.features_ms, c.encoder_ms,
             c.decoder_ms, c.results_ms, other);
    api_first_call_end(s, call_ms);
    /* inputs never started after an abort */
    for (; pos < nrun; pos++) {
        struct vkasr_result *r = &s->batch[idx[pos]];
        char name[512];
        input_name(&inputs[idx[pos]], idx[pos], name, sizeof name);
        fail_input(r, VKASR_ABORTED, "%s: not transcribed: aborted by the abort callback", name);
        if (bp.result_callback)
            bp.result_callback(idx[pos], r, bp.result_user_data);
    }
    for (size_t i = 0; i < n; i++)
        audio_free(&items[i].a);
    free(items);
    free(idx);
    if (st == VKASR_ABORTED)
        return err_set(&s->err, VKASR_ABORTED, "transcription aborted by the abort callback");
    if (first_err != VKASR_OK) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += s->batch[i].status != VKASR_OK;
        return err_set(&s->err, first_err, "%zu of %zu inputs failed (vkasr_result_error says why)", bad, n);
    }
    return VKASR_OK;
}
