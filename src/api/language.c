/* language.c — the language of a call to a language-prompt model (Nemotron 3.5): the name a caller
 * gives resolved through the model's language map into the prompt slot the network fuses, and the
 * public checks of it. Used by the single, batch and stream paths alike. */
#include <string.h>

#include "api/api.h"

vkasr_status api_language(const struct asr_model *am, const char *language, int *prompt, struct err *e) {
    const char *name = language && *language ? language : "auto";
    *prompt = 0;
    if (am->cfg.n_prompts == 0) {
        if (strcmp(name, "auto") != 0)
            return err_set(e, VKASR_ERR_INVALID_ARG,
                           "language \"%.64s\": the model has no language prompt (only language-prompt models such as "
                           "Nemotron 3.5 take a language; others take \"auto\")",
                           name);
        return VKASR_OK;
    }
    const int slot = model_langs_find(&am->langs, name);
    if (slot < 0) {
        char list[768];
        model_langs_list(&am->langs, list, sizeof list);
        return err_set(e, VKASR_ERR_INVALID_ARG, "unknown language \"%.64s\"; the model's languages: %s", name, list);
    }
    *prompt = slot + 1;
    return VKASR_OK;
}

vkasr_status vkasr_model_check_language(const vkasr_model *m, const char *language, size_t *n_languages,
                                        vkasr_error *error) {
    struct err e = {0};
    int prompt = 0;
    if (n_languages)
        *n_languages = m ? (size_t)m->am->langs.n : 0;
    vkasr_status st = !m ? err_set(&e, VKASR_ERR_INVALID_ARG, "vkasr_model_check_language: NULL model")
                         : api_language(m->am, language, &prompt, &e);
    err_export(&e, error);
    return st;
}

const char *vkasr_model_language(const vkasr_model *m, size_t i) {
    return m && i < (size_t)m->am->langs.n ? m->am->langs.v[i].name : NULL;
}
