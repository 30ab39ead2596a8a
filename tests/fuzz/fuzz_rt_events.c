/* fuzz_rt_events.c — the Realtime WebSocket's client events (tools/cli/serve/serve_rt_events.c: the JSON
 * of session.update, input_audio_buffer.append's base64, binary PCM16, commit, clear) and the language
 * they name (serve_lang.c), fed one connection's messages. The stream and the model come through
 * stand-ins for the public calls defined here (the events use nothing else of the library): a stream
 * counts the samples pushed to it and reports a word per commit; the model is monolingual or has a
 * language map (en-US, en, de-DE, de, fr-FR, auto).
 * Input: the first byte picks the model ('P': the language map) and the turn detection (odd: off);
 * the rest is the messages, one a line; a line starting with byte 0x01 is a binary frame (its other
 * bytes), any other a text frame.
 * Checked after every message: each event sent is a JSON object with a string type and event_id (an
 * error with a string message); the stream holds exactly the samples the session counts; every sample
 * pushed lies in [-1, 1); the session's rate stays within 8-48 kHz and its language is one the model
 * takes. Seeds: tests/data/fuzz/rt_events. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#include "fuzz.h"
#include "serve_rt_session.h"

/* ---- stand-ins for the library --------------------------------------------------------------- */

struct vkasr_stream {
    vkasr_stream_params p;
    size_t samples;
    int rate;
};

static bool prompt_model; /* the current input's model has the language map */
static const char *const langs[] = {"en-US", "en", "de-DE", "de", "fr-FR", "auto"};

double now_s(void) { return 0.0; }

vkasr_stream_params vkasr_stream_params_default(void) {
    return (vkasr_stream_params){.struct_size = sizeof(vkasr_stream_params), .hop_seconds = 0.64,
                                 .left_context_seconds = 2.56, .right_context_seconds = 0.32, .catch_up = true};
}

vkasr_status vkasr_stream_create(vkasr_session *session, const vkasr_stream_params *params, vkasr_stream **out,
                                 vkasr_error *error) {
    FUZZ_CHECK(session != NULL && params != NULL && out != NULL && error != NULL, "bad arguments");
    if (params->language) { /* what the session resolved must be the model's */
        size_t i = 0;
        while (i < sizeof langs / sizeof *langs && strcmp(langs[i], params->language))
            i++;
        FUZZ_CHECK(prompt_model && i < sizeof langs / sizeof *langs, "stream language '%s'", params->language);
    }
    *out = calloc(1, sizeof **out);
    FUZZ_CHECK(*out != NULL, "out of memory");
    (*out)->p = *params;
    return VKASR_OK;
}

vkasr_status vkasr_stream_push(vkasr_stream *st, const float *x, size_t n, int rate) {
    FUZZ_CHECK(st && x && n > 0 && rate >= 8000 && rate <= 48000, "push of %zu samples at %d Hz", n, rate);
    FUZZ_CHECK(st->rate == 0 || st->rate == rate, "the rate changed within a stream: %d, then %d", st->rate, rate);
    st->rate = rate;
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(x[i] >= -1.0f && x[i] < 1.0f, "sample %zu is %g", i, (double)x[i]);
    st->samples += n;
    if (st->p.partial_callback) {
        vkasr_stream_update u = {.text = "partial", .audio_end = (double)st->samples / rate};
        st->p.partial_callback(&u, st->p.user_data);
    }
    return VKASR_OK;
}

vkasr_status vkasr_stream_finish(vkasr_stream *st) {
    FUZZ_CHECK(st != NULL, "finish of no stream");
    const double end = st->rate ? (double)st->samples / st->rate : 0.0;
    vkasr_word w = {.text = "word", .start = 0.0, .end = end};
    vkasr_stream_update u = {.text = "word", .words = &w, .n_words = 1, .segment_end = true, .audio_end = end};
    if (st->p.final_callback)
        st->p.final_callback(&u, st->p.user_data);
    return VKASR_OK;
}

void vkasr_stream_cancel(vkasr_stream *st) { FUZZ_CHECK(st != NULL, "cancel of no stream"); }
void vkasr_stream_free(vkasr_stream *st) { free(st); }
const char *vkasr_stream_last_error(vkasr_stream *st) { return st ? "" : "no stream"; }

vkasr_status vkasr_model_check_language(const vkasr_model *m, const char *language, size_t *n, vkasr_error *error) {
    FUZZ_CHECK(m != NULL && language != NULL, "bad arguments");
    if (n)
        *n = prompt_model ? sizeof langs / sizeof *langs : 0;
    if (!prompt_model) {
        if (error)
            snprintf(error->message, sizeof error->message, "language \"%.64s\": the model has no language prompt",
                     language);
        return strcmp(language, "auto") ? VKASR_ERR_INVALID_ARG : VKASR_OK;
    }
    for (size_t i = 0; i < sizeof langs / sizeof *langs; i++)
        if (!strcmp(langs[i], language))
            return VKASR_OK;
    if (error)
        snprintf(error->message, sizeof error->message, "unknown language \"%.64s\"", language);
    return VKASR_ERR_INVALID_ARG;
}

const char *vkasr_model_language(const vkasr_model *m, size_t i) {
    FUZZ_CHECK(m != NULL, "no model");
    return prompt_model && i < sizeof langs / sizeof *langs ? langs[i] : NULL;
}

/* ---- the connection ---------------------------------------------------------------------------- */

/* Every event queued since the last call: a JSON object with a string type and event_id; freed. */
static void check_events(struct rt_sess *s) {
    while (s->out_head) {
        struct out_msg *m = s->out_head;
        s->out_head = m->next;
        cJSON *o = cJSON_ParseWithLength(m->text, m->len);
        FUZZ_CHECK(cJSON_IsObject(o), "an event is not a JSON object: %.200s", m->text);
        const cJSON *t = cJSON_GetObjectItem(o, "type");
        FUZZ_CHECK(cJSON_IsString(t) && cJSON_IsString(cJSON_GetObjectItem(o, "event_id")), "event %.200s", m->text);
        if (!strcmp(t->valuestring, "error"))
            FUZZ_CHECK(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message")),
                       "an error without a message: %.200s", m->text);
        cJSON_Delete(o);
        free(m->text);
        free(m);
    }
    s->out_tail = NULL;
    s->out_bytes = 0;
    char drain[256];
    while (read(s->wake[0], drain, sizeof drain) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    prompt_model = data[0] == 'P';
    struct serve_opts o = {.model_name = "vkasr-test"};
    static int fake_model, fake_session; /* never dereferenced: the stand-ins take them */
    struct serve_realtime rt = {.o = &o, .model = (const vkasr_model *)&fake_model};
    struct rt_sess *s = calloc(1, sizeof *s);
    FUZZ_CHECK(s != NULL && pipe(s->wake) == 0, "setup");
    fcntl(s->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(s->wake[1], F_SETFL, O_NONBLOCK);
    pthread_mutex_init(&s->mu, NULL);
    s->rt = &rt;
    s->id = 1;
    s->rate = 24000;
    s->vad = !(data[0] & 1);
    s->vs = (vkasr_session *)&fake_session;
    snprintf(s->language, sizeof s->language, "en");
    for (size_t i = 1; i < size && !s->fatal;) {
        size_t j = i;
        while (j < size && data[j] != '\n')
            j++;
        const bool binary = data[i] == 0x01;
        rt_on_message(s, binary, data + i + binary, j - i - binary);
        check_events(s);
        FUZZ_CHECK(s->rate >= 8000 && s->rate <= 48000, "rate %d", s->rate);
        FUZZ_CHECK(!s->stream || s->stream->samples == s->stream_samples, "the stream has %zu samples, the session %zu",
                   s->stream ? s->stream->samples : 0, s->stream_samples);
        FUZZ_CHECK(!s->lang[0] || prompt_model, "language '%s' for a monolingual model", s->lang);
        i = j + 1;
    }
    // the connection closes: as serve_realtime.c ends a session
    if (s->stream) {
        vkasr_stream_cancel(s->stream);
        vkasr_stream_free(s->stream);
    }
    check_events(s);
    free(s->item_text);
    free(s->last_partial);
    cJSON_Delete(s->item_words);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return 0;
}
