/* serve_lang.c — a request's `language` (POST /v1/audio/transcriptions, the Realtime session.update)
 * resolved for the served model: a language-prompt model's name as vkasr_model_check_language takes it,
 * an OpenAI client's ISO-639-1 code mapped to the model's one locale of that language. A model without
 * a prompt takes any language as a hint it cannot follow: OpenAI's clients send one, and such models
 * transcribe what they hear (parakeet-tdt-0.6b-v3: 25 languages, no prompt). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "serve.h"

bool serve_language(const vkasr_model *m, const char *req, char *out, size_t out_size, char *msg, size_t msg_size) {
    out[0] = '\0';
    if (!req || !*req)
        return true;
    size_t n = 0;
    vkasr_error err;
    if (m)
        vkasr_model_check_language(m, "auto", &n, &err);
    if (n == 0) /* no prompt: a hint the model cannot follow (it transcribes what it hears) */
        return true;
    if (vkasr_model_check_language(m, req, NULL, &err) == VKASR_OK) {
        snprintf(out, out_size, "%s", req);
        return true;
    }
    // the same name in another case ("en-us"), or an ISO-639-1 code naming one locale ("de" -> "de-DE")
    const char *hit = NULL;
    size_t hits = 0, len = strlen(req);
    char list[512] = "";
    for (size_t i = 0; i < n; i++) {
        const char *name = vkasr_model_language(m, i);
        if (!strcasecmp(name, req)) {
            hit = name;
            hits = 1;
            break;
        }
        if (!strchr(req, '-') && !strncasecmp(name, req, len) && name[len] == '-') {
            hit = name;
            hits++;
            size_t k = strlen(list);
            snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", name);
        }
    }
    if (hits == 1) {
        snprintf(out, out_size, "%s", hit);
        return true;
    }
    if (hits > 1)
        snprintf(msg, msg_size, "language \"%.64s\" names several of the model's locales (%s): send one of them", req,
                 list);
    else
        snprintf(msg, msg_size, "%s", err.message);
    return false;
}
