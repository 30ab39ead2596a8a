/* vkasr.c — the public API (include/vkasr.h): models, sessions, transcription, results, profiling.
 * A thin layer: model files come from src/model, audio from src/audio, the network from src/asr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "audio/audio.h"
#include "common/clock.h"

const char *vkasr_version_string(void) {
#define STR2(x) #x
#define STR(x) STR2(x)
    return STR(VKASR_VERSION_MAJOR) "." STR(VKASR_VERSION_MINOR) "." STR(VKASR_VERSION_PATCH);
}

int vkasr_version_number(void) { return VKASR_VERSION_NUMBER; }

vkasr_model_params vkasr_model_params_default(void) {
    return (vkasr_model_params){.struct_size = sizeof(vkasr_model_params), .log_level = VKASR_LOG_WARN};
}

vkasr_transcribe_params vkasr_transcribe_params_default(void) {
    return (vkasr_transcribe_params){.struct_size = sizeof(vkasr_transcribe_params)};
}

vkasr_status vkasr_list_devices(vkasr_device_info *out, size_t capacity, size_t *count, vkasr_error *error) {
    struct err e = {0};
    size_t n = 0;
    vkasr_status st = vk_list_devices(out, capacity, &n, &e);
    {
        /* the CPU backend after the Vulkan devices: it always exists */
        size_t filled = n < capacity ? n : capacity, nc = 0;
        struct err ce = {0};
        if (cpu_list_devices(out ? out + filled : NULL, out ? capacity - filled : 0, &nc, &ce) == VKASR_OK) {
            if (st != VKASR_OK)
                err_clear(&e);
            st = VKASR_OK;
            n = filled + nc;
        }
    }
#ifdef VKASR_HAVE_CUDA
    /* CUDA devices after the Vulkan ones; either backend alone is enough to list something. */
    size_t filled = n < capacity ? n : capacity, nc = 0;
    struct err ce = {0};
    vkasr_status cst = cuda_list_devices(out ? out + filled : NULL, out ? capacity - filled : 0, &nc, &ce);
    if (cst == VKASR_OK && nc > 0) {
        if (st != VKASR_OK)
            err_clear(&e);
        st = VKASR_OK;
        n = filled + nc; /* Vulkan entries past capacity are not listed: the CUDA ones follow those filled */
    } else if (st != VKASR_OK) {
        err_prefix(&e, "CUDA: %s; Vulkan", ce.msg);
    }
#endif
    if (count)
        *count = n;
    err_export(&e, error);
    return st;
}

bool vkasr_has_backend(const char *name) {
    if (!name)
        return false;
#ifdef VKASR_HAVE_CUDA
    if (strcmp(name, "cuda") == 0)
        return true;
#endif
    return strcmp(name, "vulkan") == 0 || strcmp(name, "cpu") == 0 || strcmp(name, "ref") == 0;
}

/* ---- model ------------------------------------------------------------------------------------- */

static void fill_info(vkasr_model *m) {
    const struct model_config *c = &m->am->cfg;
    vkasr_model_info *i = &m->info;
    i->head = (vkasr_head)c->head;
    i->d_model = c->d_model;
    i->n_layers = c->n_layers;
    i->n_heads = c->n_heads;
    i->ff_size = c->ff_size;
    i->conv_kernel = c->conv_kernel;
    i->n_mels = c->n_mels;
    i->subsampling_channels = c->sub_channels;
    i->vocab_size = c->vocab_size;
    i->pred_hidden = c->pred_hidden;
    i->pred_layers = c->pred_layers;
    i->n_durations = c->n_durations;
    for (int k = 0; k < c->n_durations && k < 16; k++)
        i->durations[k] = c->durations[k];
    i->max_symbols_per_step = c->max_symbols;
    i->xscaling = c->xscaling;
    i->n_params = m->am->n_params;
    i->precision = m->am->precision;
    snprintf(i->device_name, sizeof i->device_name, "%s", m->dev->info.name);
    i->weight_bytes = be_weight_bytes(m->dev);
}

/* The model file's read (its pages into the page tables, model_prefault) on a thread of its own while the
 * device opens: from disk, or only the page tables where the file is in the page cache, overlapped with
 * the driver's instance and device creation rather than after them. */
struct file_read {
    const struct model_file *mf;
    double ms;
};

static void *read_file(void *arg) {
    struct file_read *r = arg;
    const double t0 = clock_ms();
    model_prefault(r->mf);
    r->ms = clock_ms() - t0;
    return NULL;
}

vkasr_status vkasr_model_load(const char *path, const vkasr_model_params *params, vkasr_model **out_model,
                              vkasr_error *error) {
    struct err e = {0};
    if (out_model)
        *out_model = NULL;
    if (!path || !out_model) {
        err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_model_load: path and out_model must not be NULL");
        err_export(&e, error);
        return e.code;
    }
    vkasr_model_params p;
    READ_PARAMS(p, params, vkasr_model_params_default());
    if (p.precision < VKASR_PRECISION_AUTO || p.precision > VKASR_PRECISION_F16) {
        err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_model_load: unknown precision %d", (int)p.precision);
        err_export(&e, error);
        return e.code;
    }
    if (p.stream_slots < 0) {
        err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_model_load: stream_slots %d is negative", p.stream_slots);
        err_export(&e, error);
        return e.code;
    }
    if (api_model_head(p.decoder) == -2) {
        err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_model_load: unknown decoder %d", (int)p.decoder);
        err_export(&e, error);
        return e.code;
    }
    vkasr_model *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(&e, VKASR_ERR_NO_MEMORY, "out of host memory");
        err_export(&e, error);
        return e.code;
    }
    m->log = (struct logger){p.log_level, p.log_callback, p.log_user_data};
    m->stream_slots = p.stream_slots;
    pthread_mutex_init(&m->pools_lock, NULL);
    struct model_file *mf = NULL;
    double t0 = clock_ms();
    vkasr_status st = model_open_head(path, api_model_head(p.decoder), &mf, &e);
    if (st == VKASR_OK)
        st = model_select_lookahead(&mf->cfg, p.lookahead_ms, &e);
    if (st == VKASR_OK) {
        uint64_t mapped = 0;
        for (int i = 0; i < mf->nmaps; i++)
            mapped += mf->map_sizes[i];
        LOG_INFO(&m->log, "start-up: model file opened, mapped (%.1f MiB) and validated in %.1f ms",
                 mapped / 1048576.0, clock_ms() - t0);
    }
    if (st == VKASR_OK && strcmp(mf->path, path) != 0) /* a model name: the file in the Hugging Face cache */
        LOG_INFO(&m->log, "model '%s' from the Hugging Face cache: %s", path, mf->path);
    if (st == VKASR_OK) {
        struct be_device_options o = {.device = p.device, .validation = p.validation, .profile = p.profile,
                                      .want_f16 = p.precision != VKASR_PRECISION_F32, .log = &m->log};
        struct file_read fr = {mf, 0};
        pthread_t reader;
        const bool threaded = pthread_create(&reader, NULL, read_file, &fr) == 0;
        t0 = clock_ms();
        st = be_device_open(&o, &m->dev, &e);
        const double open_ms = clock_ms() - t0;
        if (threaded)
            pthread_join(reader, NULL);
        else
            read_file(&fr);
        if (st == VKASR_OK) {
            LOG_INFO(&m->log, "start-up: %s device opened in %.1f ms", m->dev->kind, open_ms);
            LOG_INFO(&m->log, "start-up: model file read into memory in %.1f ms (%s)", fr.ms,
                     threaded ? "while the device opened" : "after the device opened");
        }
    }
    vkasr_precision prec = VKASR_PRECISION_F32;
    if (st == VKASR_OK) {
        /* A device without a required feature is VKASR_ERR_NO_DEVICE, like device selection reports it:
         * the model is fine, another device (or f32) would serve it. */
        if (p.precision == VKASR_PRECISION_F16 && !m->dev->info.f16)
            st = err_set(&e, VKASR_ERR_NO_DEVICE,
                         "f16 precision requested but device %s lacks f16 support (shaderFloat16 and "
                         "storageBuffer16BitAccess, or VKASR_DISABLE_F16 is set); use f32",
                         m->dev->info.name);
        else if (p.precision == VKASR_PRECISION_F16 || (p.precision == VKASR_PRECISION_AUTO && m->dev->info.f16 &&
                                                        !m->dev->info.host))
            prec = VKASR_PRECISION_F16;
    }
    if (st == VKASR_OK)
        st = asr_model_load(m->dev, &mf, prec, &m->am, &e);
    model_close(mf);
    if (st != VKASR_OK) {
        vkasr_model_free(m);
        err_export(&e, error);
        return st;
    }
    fill_info(m);
    LOG_INFO(&m->log, "loaded %s: %s head, %d layers, d_model %d, %.1fM parameters, %s on %s", path,
             m->info.head == VKASR_HEAD_TDT ? "TDT" : m->info.head == VKASR_HEAD_RNNT ? "RNN-T" : "CTC", m->info.n_layers,
             m->info.d_model, m->info.n_params / 1e6, prec == VKASR_PRECISION_F16 ? "f16" : "f32", m->info.device_name);
    *out_model = m;
    err_export(&e, error);
    return VKASR_OK;
}

void vkasr_model_free(vkasr_model *m) {
    if (!m)
        return;
    const double t0 = clock_ms();
    api_stream_pools_free(m);
    pthread_mutex_destroy(&m->pools_lock);
    asr_model_free(m->am);
    be_device_close(m->dev);
    LOG_INFO(&m->log, "shut-down: model and device released in %.1f ms", clock_ms() - t0);
    free(m);
}

vkasr_status vkasr_model_get_info(const vkasr_model *m, vkasr_model_info *out) {
    if (!m || !out)
        return VKASR_ERR_INVALID_ARG;
    *out = m->info;
    out->weight_bytes = be_weight_bytes(m->dev);
    return VKASR_OK;
}

bool vkasr_model_on_cpu(const vkasr_model *m) { return m && m->dev->info.cpu; }

/* ---- sessions ---------------------------------------------------------------------------------- */

void api_result_clear(struct vkasr_result *r) {
    transcript_free(&r->tr);
    asr_output_free(&r->out);
    free(r->error);
    memset(r, 0, sizeof *r);
}

/* Frees the results of the last vkasr_transcribe_batch(). */
static void batch_clear(vkasr_session *s) {
    for (size_t i = 0; i < s->nbatch; i++)
        api_result_clear(&s->batch[i]);
    free(s->batch);
    s->batch = NULL;
    s->nbatch = 0;
}

vkasr_status vkasr_session_create(vkasr_model *model, vkasr_session **out, vkasr_error *error) {
    struct err e = {0};
    if (out)
        *out = NULL;
    if (!model || !out) {
        err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_session_create: model and out_session must not be NULL");
        err_export(&e, error);
        return e.code;
    }
    vkasr_session *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(&e, VKASR_ERR_NO_MEMORY, "out of host memory");
        err_export(&e, error);
        return e.code;
    }
    s->model = model;
    /* VKASR_DECODER=host: the transducer search walked on the host, one round trip per emitted token
     * (the decoder before the device-resident loop; for comparisons and benchmarks). */
    const char *dec = getenv("VKASR_DECODER");
    s->host_decoder = dec && strcmp(dec, "host") == 0;
    if (dec && *dec && !s->host_decoder && strcmp(dec, "device") != 0)
        LOG_WARN(model->dev->log, "VKASR_DECODER=%s is neither 'device' nor 'host': using the device decoder", dec);
    const double t0 = clock_ms();
    vkasr_status st = be_backend_create(model->dev, &s->be, &e);
    if (st != VKASR_OK) {
        free(s);
        err_export(&e, error);
        return st;
    }
    LOG_INFO(&model->log, "start-up: session created in %.1f ms", clock_ms() - t0);
    *out = s;
    err_export(&e, error);
    return VKASR_OK;
}

void vkasr_session_free(vkasr_session *s) {
    if (!s)
        return;
    vkasr_stream_free(s->stream); /* a stream left running: stopped first (it uses the session) */
    api_result_clear(&s->result);
    batch_clear(s);
    be_backend_destroy(s->be);
    free(s);
}

const char *vkasr_session_last_error(const vkasr_session *s) { return s ? s->err.msg : "no session"; }

/* ---- callbacks during a run -------------------------------------------------------------------- */

static void session_progress(void *ud, const char *stage, double fraction, double audio_done) {
    vkasr_session *s = ud;
    if (!s->params->progress_callback)
        return;
    /* Overall progress: features 5 %, encoder 65 %, decoder 30 %. */
    double f = strcmp(stage, "features") == 0 ? 0.05 * fraction
               : strcmp(stage, "encoder") == 0 ? 0.05 + 0.65 * fraction
                                                 : 0.70 + 0.30 * fraction;
    vkasr_progress p = {(float)f, f * s->result.duration, s->result.duration, stage};
    if (strcmp(stage, "decoder") == 0)
        p.audio_seconds_done = audio_done < s->result.duration ? audio_done : s->result.duration;
    s->params->progress_callback(&p, s->params->progress_user_data);
}

static bool on_should_abort(void *ud) {
    vkasr_session *s = ud;
    return s->params->abort_callback && s->params->abort_callback(s->params->abort_user_data);
}

/* Publishes segments completed since the last call: the tokens from seg_token0 are rebuilt into a
 * partial transcript; all its segments but the last (which may still grow) are final. */
static vkasr_status publish_segments(vkasr_session *s, bool final) {
    struct asr_output *o = &s->result.out;
    if (s->seg_token0 >= o->ntokens)
        return VKASR_OK;
    struct transcript part;
    TRY(transcript_build(&s->model->am->tok, &s->model->am->cfg, o->tokens + s->seg_token0, o->ntokens - s->seg_token0,
                         &part, &s->err));
    size_t done = final ? part.nsegments : (part.nsegments ? part.nsegments - 1 : 0);
    size_t first_seg = s->result.tr.nsegments, ntok = 0;
    if (done) {
        const vkasr_segment *ls = &part.segments[done - 1];
        const vkasr_word *lw = &part.words[ls->first_word + ls->n_words - 1];
        ntok = lw->first_token + lw->n_tokens;
    }
    vkasr_status st = transcript_append(&s->result.tr, &part, done, &s->err);
    transcript_free(&part);
    if (st != VKASR_OK)
        return st;
    s->seg_token0 += ntok;
    for (size_t i = first_seg; i < s->result.tr.nsegments; i++)
        s->params->segment_callback(&s->result, i, s->params->segment_user_data);
    return VKASR_OK;
}

static void on_tokens_added(void *ud) {
    vkasr_session *s = ud;
    if (!s->params->segment_callback)
        return;
    const struct asr_output *o = &s->result.out;
    const struct tokenizer *tok = &s->model->am->tok;
    int32_t id = o->tokens[o->ntokens - 1].id;
    /* A segment can only close right before a new word starts. */
    if (id >= 0 && id < tok->n && transcript_piece_starts_word(tok->piece[id]))
        publish_segments(s, false); /* best effort: a failure here resurfaces in the final build */
}

static void on_stage(void *ud, const vkasr_stage *stage) {
    vkasr_session *s = ud;
    s->debug.stage_callback(stage, s->debug.stage_user_data);
}

/* ---- transcription ----------------------------------------------------------------------------- */

/* Parameters checked before the audio is decoded (a bad one must not cost an hour of decoding). */
vkasr_status api_check_params(vkasr_session *s, const vkasr_transcribe_params *p) {
    if (p->attention < VKASR_ATTENTION_AUTO || p->attention > VKASR_ATTENTION_LOCAL || p->attention_window < 0 ||
        !(p->auto_full_seconds >= 0 && p->auto_full_seconds <= 1e12))
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "transcribe params: attention %d, attention_window %d, auto_full_seconds %g: need a "
                       "vkasr_attention value, a window >= 0 and seconds >= 0",
                       (int)p->attention, p->attention_window, p->auto_full_seconds);
    return api_language(s->model->am, p->language, &s->prompt, &s->err);
}


struct asr_options api_options(const vkasr_session *s, const vkasr_transcribe_params *p) {
    static const enum asr_attention att[] = {ASR_ATT_AUTO, ASR_ATT_FULL, ASR_ATT_LOCAL};
    return (struct asr_options){
        .max_symbols = p->max_symbols_per_step,
        .keep_features = s->debug.keep_features,
        .attention = att[p->attention],
        .window = p->attention_window,
        .auto_full_seconds = p->auto_full_seconds,
        .max_memory = p->max_memory,
        .forced = s->debug.forced_steps,
        .nforced = s->debug.n_forced_steps,
        .host_decoder = s->host_decoder,
        .prompt = s->prompt,
    };
}

static vkasr_status run(vkasr_session *s, const struct audio *a, const vkasr_transcribe_params *p, double load_ms,
                        const vkasr_result **out) {
    struct vkasr_result *r = &s->result;
    r->duration = (double)a->n / a->rate;
    r->mel_dim = (size_t)s->model->am->cfg.n_mels;
    r->enc_dim = (size_t)s->model->am->cfg.d_model;
    s->params = p;
    s->seg_token0 = 0;
    struct asr_hooks hooks = {session_progress, on_should_abort, on_tokens_added,
                              s->debug.stage_callback ? on_stage : NULL, s};
    struct asr_options opt = api_options(s, p);
    vkasr_status st = asr_run(s->model->am, s->be, a->samples, a->n, &opt, &hooks, &r->out, &s->err);
    if ((st == VKASR_OK || st == VKASR_ABORTED) && p->segment_callback) {
        /* Report what the callbacks have not seen yet (the final transcript is built below). */
        vkasr_status sp = publish_segments(s, true);
        if (sp != VKASR_OK && st == VKASR_OK)
            st = sp;
    }
    st = api_result_finish(s, r, st, load_ms, s->call_start_ms);
    api_first_call_end(s, clock_ms() - s->call_start_ms);
    s->params = NULL;
    if (st == VKASR_OK || st == VKASR_ABORTED)
        *out = r;
    return st;
}

vkasr_status api_result_finish(vkasr_session *s, struct vkasr_result *r, vkasr_status st, double load_ms, double t0_ms) {
    if (st == VKASR_OK || st == VKASR_ABORTED) {
        /* The final transcript in one pass. */
        transcript_free(&r->tr);
        vkasr_status sb = transcript_build(&s->model->am->tok, &s->model->am->cfg, r->out.tokens, r->out.ntokens,
                                           &r->tr, &s->err);
        if (sb != VKASR_OK)
            st = sb;
    }
    r->partial = st == VKASR_ABORTED;
    if (st == VKASR_ABORTED)
        err_set(&s->err, VKASR_ABORTED, "transcription aborted by the abort callback after %zu tokens",
                r->out.ntokens);
    r->mel_dim = (size_t)s->model->am->cfg.n_mels;
    r->enc_dim = (size_t)s->model->am->cfg.d_model;
    r->timings = (vkasr_timings){
        .audio_seconds = r->duration,
        .load_ms = load_ms,
        .features_ms = r->out.features_ms,
        .encoder_ms = r->out.encoder_ms,
        .decoder_ms = r->out.decoder_ms,
        .total_ms = clock_ms() - t0_ms,
        .peak_device_bytes = be_weight_bytes(s->model->dev) + be_peak_bytes(s->be),
        .planned_device_bytes = r->out.plan.weights + r->out.plan.scratch,
    };
    r->status = st;
    return st;
}

void api_first_call_begin(vkasr_session *s) {
    if (s->called)
        return;
    be_device_pipelines(s->model->dev, &s->pipes0);
    s->scratch_ms0 = s->be->scratch.make_ms;
}

void api_first_call_end(vkasr_session *s, double call_ms) {
    if (s->called)
        return;
    s->called = true;
    struct be_pipelines p;
    be_device_pipelines(s->model->dev, &p);
    const struct logger *lg = &s->model->log;
    if (p.created > s->pipes0.created)
        LOG_INFO(lg, "start-up: %u pipelines created (%u found in the pipeline cache) in %.1f ms, summed over "
                 "the threads that created them (during the first transcription)", p.created - s->pipes0.created,
                 p.cache_hits - s->pipes0.cache_hits, p.create_ms - s->pipes0.create_ms);
    LOG_INFO(lg, "start-up: scratch memory %.1f MiB made in %.1f ms (during the first transcription)",
             s->be->scratch.reserved / 1048576.0, s->be->scratch.make_ms - s->scratch_ms0);
    LOG_INFO(lg, "start-up: first transcription %.1f ms", call_ms);
}

static vkasr_status begin(vkasr_session *s, const vkasr_result **out) {
    if (!s)
        return VKASR_ERR_INVALID_ARG;
    /* Checked first: a stream's worker uses the session's backend and result-free state; this call must
     * leave them alone (s->err is not used by streams). */
    if (s->stream) {
        if (out)
            *out = NULL;
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "the session is in use by a live stream (vkasr_stream_free() gives it back)");
    }
    s->call_start_ms = clock_ms();
    api_first_call_begin(s);
    err_clear(&s->err);
    api_result_clear(&s->result);
    batch_clear(s);
    if (out)
        *out = NULL;
    if (!out)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG, "out_result must not be NULL");
    return VKASR_OK;
}

vkasr_status vkasr_transcribe_pcm(vkasr_session *s, const float *samples, size_t n_frames, int sample_rate,
                                  int channels, const vkasr_transcribe_params *params, const vkasr_result **out) {
    TRY(begin(s, out));
    if ((!samples && n_frames) || sample_rate <= 0 || channels <= 0)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG,
                       "vkasr_transcribe_pcm: need samples (or n_frames 0), sample_rate > 0 and channels > 0");
    vkasr_transcribe_params p;
    READ_PARAMS(p, params, vkasr_transcribe_params_default());
    TRY(api_check_params(s, &p));
    struct audio a = {0};
    TRY(audio_from_pcm(samples, n_frames, sample_rate, channels, s->model->am->cfg.sample_rate, &a, &s->err));
    double load_ms = clock_ms() - s->call_start_ms;
    vkasr_status st = run(s, &a, &p, load_ms, out);
    audio_free(&a);
    return st;
}

vkasr_status vkasr_transcribe_file(vkasr_session *s, const char *path, const vkasr_transcribe_params *params,
                                   const vkasr_result **out) {
    TRY(begin(s, out));
    if (!path)
        return err_set(&s->err, VKASR_ERR_INVALID_ARG, "vkasr_transcribe_file: path must not be NULL");
    vkasr_transcribe_params p;
    READ_PARAMS(p, params, vkasr_transcribe_params_default());
    TRY(api_check_params(s, &p));
    struct audio a = {0};
    TRY(audio_load_file(path, s->model->am->cfg.sample_rate, &a, &s->err));
    double load_ms = clock_ms() - s->call_start_ms;
    vkasr_status st = run(s, &a, &p, load_ms, out);
    audio_free(&a);
    return st;
}

/* Hands decoded audio to the caller: a decoder's samples are malloc'd (never borrowed), so vkasr_free()
 * releases them. */
static vkasr_status give_samples(vkasr_status st, struct audio *a, float **out_samples, size_t *out_n,
                                 const struct err *e, vkasr_error *error) {
    if (st == VKASR_OK) {
        *out_samples = (float *)a->samples;
        *out_n = a->n;
    }
    err_export(e, error);
    return st;
}

vkasr_status vkasr_audio_load(const char *path, float **out_samples, size_t *out_n, vkasr_error *error) {
    struct err e = {0};
    if (out_samples)
        *out_samples = NULL;
    if (out_n)
        *out_n = 0;
    struct audio a = {0};
    vkasr_status st = !path || !out_samples || !out_n
                          ? err_set(&e, VKASR_ERR_INVALID_ARG,
                                    "vkasr_audio_load: path, out_samples and out_n must not be NULL")
                          : audio_load_file(path, VKASR_SAMPLE_RATE, &a, &e);
    return give_samples(st, &a, out_samples, out_n, &e, error);
}

vkasr_status vkasr_audio_load_memory(const void *data, size_t size, float **out_samples, size_t *out_n,
                                     vkasr_error *error) {
    static const char name[] = "audio bytes";
    struct err e = {0};
    if (out_samples)
        *out_samples = NULL;
    if (out_n)
        *out_n = 0;
    struct audio a = {0};
    vkasr_status st;
    if (!out_samples || !out_n)
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "%s: vkasr_audio_load_memory: out_samples and out_n must not be NULL",
                     name);
    else if (!data && size > 0)
        st = err_set(&e, VKASR_ERR_INVALID_ARG, "%s: NULL data with size %zu", name, size);
    else
        st = audio_load_memory(data, size, name, VKASR_SAMPLE_RATE, &a, &e);
    return give_samples(st, &a, out_samples, out_n, &e, error);
}

void vkasr_free(void *p) { free(p); }

#ifndef VKASR_DEFAULT_MODELS
#define VKASR_DEFAULT_MODELS ""
#endif

const char *vkasr_default_model_path(char *buf, size_t size) {
    if (!buf || size == 0)
        return NULL;
    const char *env = getenv("VKASR_MODEL");
    if (env && *env) {
        if (strlen(env) >= size)
            return NULL;
        memcpy(buf, env, strlen(env) + 1);
        return buf;
    }
    for (const char *p = VKASR_DEFAULT_MODELS; *p;) { /* ':'-separated, set by the build */
        size_t n = strcspn(p, ":");
        if (n > 0 && n < size) {
            memcpy(buf, p, n);
            buf[n] = '\0';
            if (access(buf, R_OK) == 0)
                return buf;
        }
        p += n + (p[n] == ':');
    }
    buf[0] = '\0';
    return NULL;
}

/* ---- results ----------------------------------------------------------------------------------- */

const char *vkasr_result_text(const vkasr_result *r) { return r && r->tr.text ? r->tr.text : ""; }
double vkasr_result_duration(const vkasr_result *r) { return r ? r->duration : 0.0; }
bool vkasr_result_partial(const vkasr_result *r) { return r && r->partial; }

const vkasr_token *vkasr_result_tokens(const vkasr_result *r, size_t *count) {
    if (count)
        *count = r ? r->tr.ntokens : 0;
    return r ? r->tr.tokens : NULL;
}

const vkasr_word *vkasr_result_words(const vkasr_result *r, size_t *count) {
    if (count)
        *count = r ? r->tr.nwords : 0;
    return r ? r->tr.words : NULL;
}

const vkasr_segment *vkasr_result_segments(const vkasr_result *r, size_t *count) {
    if (count)
        *count = r ? r->tr.nsegments : 0;
    return r ? r->tr.segments : NULL;
}

vkasr_timings vkasr_result_timings(const vkasr_result *r) { return r ? r->timings : (vkasr_timings){0}; }

vkasr_status vkasr_result_status(const vkasr_result *r) { return r ? r->status : VKASR_ERR_INVALID_ARG; }
const char *vkasr_result_error(const vkasr_result *r) { return r && r->error ? r->error : ""; }

const char *vkasr_result_language(const vkasr_result *r) { return r ? r->tr.language : NULL; }

const vkasr_event *vkasr_result_events(const vkasr_result *r, size_t *count) {
    if (count)
        *count = r ? r->tr.nevents : 0;
    return r ? r->tr.events : NULL;
}

vkasr_attention vkasr_result_attention(const vkasr_result *r, int *window) {
    const struct asr_plan *p = r ? &r->out.plan : NULL;
    vkasr_attention a = !p || p->attention == ASR_ATT_AUTO ? VKASR_ATTENTION_AUTO
                        : p->attention == ASR_ATT_FULL     ? VKASR_ATTENTION_FULL
                                                           : VKASR_ATTENTION_LOCAL;
    if (window)
        *window = a == VKASR_ATTENTION_LOCAL ? (int)p->window : 0;
    return a;
}

/* ---- profiling ---------------------------------------------------------------------------------- */

vkasr_status vkasr_session_profile(const vkasr_session *s, vkasr_op_profile *out, size_t capacity, size_t *count) {
    if (!s || !count || s->stream) /* a stream's worker owns the session's backend */
        return VKASR_ERR_INVALID_ARG;
    *count = api_profile_copy(s->be, out, capacity);
    return VKASR_OK;
}

void vkasr_session_profile_reset(vkasr_session *s) {
    if (s && !s->stream)
        s->be->vt->profile_reset(s->be);
}
