/* model_langs.c — a language-prompt model's language map (Nemotron 3.5: NeMo's
 * model_defaults.prompt_dictionary, transformers' processor prompt_dictionary, GGUF
 * parakeet.prompt_dictionary): its checks, lookup and listing. The readers fill it; src/api resolves
 * the language a call asks for through it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_types.h"

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n >= MODEL_LANG_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return true;
}

vkasr_status model_langs_add(struct model_langs *l, const char *name, long long slot, int n_prompts, const char *src,
                             const char *field, struct err *e) {
    if (!name_ok(name))
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: '%s' entry \"%.80s\": a language name is 1 to %d letters, digits, '-' or '_'", src, field,
                       name, MODEL_LANG_MAX - 1);
    if (slot < 0 || slot >= n_prompts)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: '%s' entry \"%s\" = %lld: the prompt slot must be in [0, %d) (num_prompts)", src, field,
                       name, slot, n_prompts);
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name))
            return err_set(e, VKASR_ERR_MODEL, "%s: '%s' lists \"%s\" twice", src, field, name);
    struct model_lang *v = realloc(l->v, (size_t)(l->n + 1) * sizeof *v);
    if (!v)
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    l->v = v;
    if (!(v[l->n].name = strdup(name)))
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    v[l->n++].slot = (int)slot;
    return VKASR_OK;
}

vkasr_status model_langs_check(const struct model_langs *l, const struct model_config *c, const char *src,
                               const char *field, struct err *e) {
    if (c->n_prompts > 0 && l->n == 0)
        return err_set(e, VKASR_ERR_MODEL,
                       "%s: '%s' is missing or empty: a language-prompt model (num_prompts = %d) needs its map of "
                       "languages to prompt slots",
                       src, field, c->n_prompts);
    return VKASR_OK;
}

static int ascii_ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a, y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
        if (x != y)
            return 0;
    }
    return *a == *b;
}

int model_langs_find(const struct model_langs *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name))
            return l->v[i].slot;
    for (int i = 0; i < l->n; i++)
        if (ascii_ieq(l->v[i].name, name))
            return l->v[i].slot;
    return -1;
}

void model_langs_list(const struct model_langs *l, char *buf, size_t size) {
    size_t n = 0;
    if (size)
        buf[0] = '\0';
    for (int i = 0; i < l->n && size; i++) {
        int w = snprintf(buf + n, size - n, "%s%s", i ? ", " : "", l->v[i].name);
        if (w < 0 || (size_t)w >= size - n) {
            if (size >= 4)
                memcpy(buf + size - 4, "...", 4);
            return;
        }
        n += (size_t)w;
    }
}

void model_langs_free(struct model_langs *l) {
    for (int i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    memset(l, 0, sizeof *l);
}
