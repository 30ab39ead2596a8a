/* hub_index.c — models by name: the built-in alias index (NVIDIA's checkpoints whose GGUF vkasr reads:
 * repository, file, pinned revision, size and sha256, as NeMo-Speech.cpp's models/index.json lists
 * them), the JSON file $VKASR_PULL_INDEX that extends or overrides it, and the parsing of a name
 * ("alias", "org/repo", "org/repo:FILE", "org/repo:QUANT") into a vkasr_hub_model. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "model_file.h"

/* Aliases: the repository's name first, then NeMo-Speech.cpp's short ones. */
static const struct builtin {
    const char *aliases, *repo, *file, *revision, *sha256;
    uint64_t size;
} builtin[] = {
    {"parakeet-tdt-0.6b-v3,parakeet-tdt", "nvidia/parakeet-tdt-0.6b-v3", "parakeet-tdt-0.6b-v3.q8_0.gguf",
     "541d1f99c6b0c3cd0b11a95167540bb8edefd82b", "e3880d0aaaaf2c308ea2c35016b2b895c423eb3fda924c1b463d1c19b7f4d32e",
     713975456},
    {"parakeet-ctc-1.1b,parakeet-ctc", "nvidia/parakeet-ctc-1.1b", "parakeet-ctc-1.1b.q8_0.gguf",
     "20e63a0fed6aedba145b74b826dbd41df0941730", "6584fc0fdacf1c220401ea4c3a1d5b44454b655c141cb8672178072c203d92b8",
     1178100960},
    {"nemotron-speech-streaming-en-0.6b,nemotron-en", "nvidia/nemotron-speech-streaming-en-0.6b",
     "nemotron-speech-streaming-en-0.6b.q8_0.gguf", "ebe59e5a817142986528bbbee5dba8db7b38ed50",
     "d9a01898d2a611c8764e23a1c2f45e70bbd5a425dc4de93692ac951dd603812d", 699872960},
    {"nemotron-3.5-asr-streaming-0.6b,nemotron-3.5,nemotron-asr", "nvidia/nemotron-3.5-asr-streaming-0.6b",
     "nemotron-3.5-asr-streaming-0.6b.q8_0.gguf", "1c8deaecc64b91f034d73e08dd8b64625eb3395d",
     "a5c435f294eea8f88ce68dd27b8c3bfea7f777cb2fbba04fcd30eaa555f429ae", 741548352},
};
#define N_BUILTIN (sizeof builtin / sizeof builtin[0])

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

static bool repo_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'; }

/* One part of org/name as the hub allows it: 1..96 of [A-Za-z0-9._-], not starting or ending with '.'
 * or '-', no ".." and no "--" (which the cache's models--ORG--NAME keeps for the separator). */
static bool repo_part(const char *s, size_t n) {
    if (n == 0 || n > 96 || strchr(".-", s[0]) || strchr(".-", s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!repo_char(s[i]) || (i > 0 && (s[i] == '.' || s[i] == '-') && s[i - 1] == s[i]))
            return false;
    return true;
}

bool hub_is_repo_name(const char *s) {
    const char *slash = strchr(s, '/');
    if (!slash)
        return false;
    size_t end = strcspn(slash + 1, ":");
    return repo_part(s, (size_t)(slash - s)) && repo_part(slash + 1, end) &&
           (slash[1 + end] == '\0' || slash[2 + end] != '\0');
}

static bool is_sha256(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n]) || isupper((unsigned char)s[n]))
            return false;
    return n == 64;
}

/* One entry of an index file (NeMo-Speech.cpp's schema: repo, aliases, revision, artifacts[] with
 * filename, size, sha256, role); its first artifact of role "asr" (or none) and type "file" (or none).
 * false when the entry has none (a diarization or TTS model). */
static vkasr_status from_json(const char *file, int i, const cJSON *m, vkasr_hub_model *out, bool *used,
                              struct err *e) {
    *used = false;
    memset(out, 0, sizeof *out);
    const cJSON *repo = cJSON_GetObjectItemCaseSensitive(m, "repo");
    const cJSON *aliases = cJSON_GetObjectItemCaseSensitive(m, "aliases");
    const cJSON *rev = cJSON_GetObjectItemCaseSensitive(m, "revision");
    const cJSON *arts = cJSON_GetObjectItemCaseSensitive(m, "artifacts");
    if (!cJSON_IsString(repo) || !hub_is_repo_name(repo->valuestring) || strchr(repo->valuestring, ':'))
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d].repo must be an \"org/name\" string", file, i);
    if (!cJSON_IsArray(arts))
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d].artifacts must be an array", file, i);
    if (rev && !cJSON_IsString(rev))
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d].revision must be a string", file, i);
    const cJSON *a;
    cJSON_ArrayForEach(a, arts) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(a, "role");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(a, "type");
        if ((role && (!cJSON_IsString(role) || strcmp(role->valuestring, "asr"))) ||
            (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "file"))))
            continue;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(a, "filename");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(a, "size");
        const cJSON *sha = cJSON_GetObjectItemCaseSensitive(a, "sha256");
        if (!cJSON_IsString(fn) || !fn->valuestring[0] || strlen(fn->valuestring) >= sizeof out->file)
            return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d]: an artifact's filename must be a string", file,
                           i);
        if (size && (!cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > 9e15))
            return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d] (%s): size must be a byte count", file, i,
                           fn->valuestring);
        if (sha && !(cJSON_IsString(sha) && (!sha->valuestring[0] || is_sha256(sha->valuestring))))
            return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d] (%s): sha256 must be 64 lowercase hex digits",
                           file, i, fn->valuestring);
        COPY(out->repo, repo->valuestring);
        COPY(out->file, fn->valuestring);
        COPY(out->revision, rev && rev->valuestring[0] ? rev->valuestring : "main");
        COPY(out->sha256, sha ? sha->valuestring : "");
        out->size = size ? (uint64_t)size->valuedouble : 0;
        /* the repository's name is always an alias */
        size_t k = (size_t)snprintf(out->aliases, sizeof out->aliases, "%s", strchr(out->repo, '/') + 1);
        const cJSON *al;
        cJSON_ArrayForEach(al, aliases) {
            if (!cJSON_IsString(al) || !al->valuestring[0] || strchr(al->valuestring, ','))
                return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d].aliases must hold names without ','",
                               file, i);
            if (k < sizeof out->aliases)
                k += (size_t)snprintf(out->aliases + k, sizeof out->aliases - k, ",%s", al->valuestring);
        }
        if (k >= sizeof out->aliases)
            return err_set(e, VKASR_ERR_INVALID_ARG, "%s: models[%d]: the aliases exceed %zu characters", file, i,
                           sizeof out->aliases - 1);
        *used = true;
        return VKASR_OK;
    }
    return VKASR_OK;
}

/* $VKASR_PULL_INDEX's entries into out[0..max), their count in *count (0 when the variable is unset). */
static vkasr_status env_index(vkasr_hub_model *out, size_t max, size_t *count, struct err *e) {
    *count = 0;
    const char *file = getenv("VKASR_PULL_INDEX");
    if (!file || !*file)
        return VKASR_OK;
    char *text = NULL;
    size_t len = 0;
    vkasr_status st = read_small_file(file, 0, &text, &len, e);
    if (st != VKASR_OK)
        return err_prefix(e, "$VKASR_PULL_INDEX");
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    size_t at = end ? (size_t)(end - text) : 0;
    free(text);
    if (!root)
        return err_set(e, VKASR_ERR_INVALID_ARG, "%s ($VKASR_PULL_INDEX): not valid JSON (error near byte %zu)",
                       file, at);
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(root, "models");
    if (!cJSON_IsArray(models))
        st = err_set(e, VKASR_ERR_INVALID_ARG, "%s ($VKASR_PULL_INDEX): expected an object with a \"models\" array",
                     file);
    int i = 0;
    const cJSON *m;
    if (st != VKASR_OK)
        models = NULL;
    cJSON_ArrayForEach(m, models) {
        vkasr_hub_model h;
        bool used = false;
        if ((st = from_json(file, i++, m, &h, &used, e)) != VKASR_OK)
            break;
        if (used && *count < max && out)
            out[*count] = h;
        *count += used;
    }
    cJSON_Delete(root);
    return st;
}

static void from_builtin(const struct builtin *b, vkasr_hub_model *out) {
    memset(out, 0, sizeof *out);
    COPY(out->aliases, b->aliases);
    COPY(out->repo, b->repo);
    COPY(out->file, b->file);
    COPY(out->revision, b->revision);
    COPY(out->sha256, b->sha256);
    out->size = b->size;
}

vkasr_status hub_index(vkasr_hub_model *out, size_t max, size_t *count, struct err *e) {
    size_t n = 0;
    TRY(env_index(out, max, &n, e));
    for (size_t b = 0; b < N_BUILTIN; b++, n++)
        if (out && n < max)
            from_builtin(&builtin[b], &out[n]);
    *count = n;
    return VKASR_OK;
}

/* Whether name is one of the comma-separated aliases. */
static bool has_alias(const char *aliases, const char *name) {
    size_t n = strlen(name);
    for (const char *p = aliases; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n))
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

static vkasr_status parse_repo(const char *name, vkasr_hub_model *out, struct err *e) {
    if (!hub_is_repo_name(name))
        return err_set(e, VKASR_ERR_INVALID_ARG,
                       "'%s' is neither an alias of the model index nor org/repo[:FILE|:QUANT] (org and repo: "
                       "letters, digits, '.', '_' and '-')",
                       name);
    size_t rn = strcspn(name, ":");
    if (rn >= sizeof out->repo)
        return err_set(e, VKASR_ERR_INVALID_ARG, "'%s': the repository name is too long", name);
    memcpy(out->repo, name, rn);
    out->repo[rn] = '\0';
    COPY(out->revision, "main");
    const char *x = name[rn] ? name + rn + 1 : "";
    if (!*x)
        return VKASR_OK;
    if (strchr(x, '.') || strchr(x, '/')) { /* a file name */
        if (strlen(x) >= sizeof out->file || x[0] == '/' || strstr(x, ".."))
            return err_set(e, VKASR_ERR_INVALID_ARG, "'%s': '%s' is not a file name vkasr takes", name, x);
        COPY(out->file, x);
        return VKASR_OK;
    }
    size_t qn = strlen(x);
    if (qn >= sizeof out->quant)
        return err_set(e, VKASR_ERR_INVALID_ARG, "'%s': ':%s' is too long for a GGUF type", name, x);
    for (size_t i = 0; i <= qn; i++)
        out->quant[i] = (char)tolower((unsigned char)x[i]);
    return VKASR_OK;
}

vkasr_status hub_lookup(const char *name, vkasr_hub_model *out, struct err *e) {
    if (!name || !*name || !out)
        return err_set(e, VKASR_ERR_INVALID_ARG, "vkasr_hub_lookup: empty name or NULL out");
    memset(out, 0, sizeof *out);
    if (!strchr(name, '/')) {
        size_t n = 0;
        TRY(hub_index(NULL, 0, &n, e));
        vkasr_hub_model *all = calloc(n ? n : 1, sizeof *all);
        if (!all)
            return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
        vkasr_status st = hub_index(all, n, &n, e);
        for (size_t i = 0; st == VKASR_OK && i < n; i++)
            if (has_alias(all[i].aliases, name)) {
                *out = all[i];
                free(all);
                return VKASR_OK;
            }
        free(all);
        TRY(st);
    }
    return parse_repo(name, out, e);
}
