/* hub.h — models by name: the alias index and name parsing (hub_index.c), and finding a name's files in
 * the Hugging Face hub's cache (hub_cache.c). No network here: `vkasr pull` (tools/cli) downloads into
 * the cache; the library only reads it. The public face is vkasr_hub_* in vkasr.h (src/api/hub.c). */
#ifndef VKASR_MODEL_HUB_H
#define VKASR_MODEL_HUB_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Parses a name (an alias of the index, "org/repo", "org/repo:FILE" or "org/repo:QUANT"). */
vkasr_status hub_lookup(const char *name, vkasr_hub_model *out, struct err *e);
/* The index's entries ($VKASR_PULL_INDEX's first, then the built-in ones) into out (up to max; out may
 * be NULL), their count in *count. */
vkasr_status hub_index(vkasr_hub_model *out, size_t max, size_t *count, struct err *e);
/* Whether s has the shape of an org/repo name (one '/', hub-legal characters, an optional ":x"). */
bool hub_is_repo_name(const char *s);

/* The cache directory (vkasr_hub_cache_dir's rule); NULL when it does not fit or no home is known. */
const char *hub_cache_dir(char *buf, size_t size);
/* vkasr_hub_pick's rule. */
int hub_pick(const char *const *files, size_t n, const char *quant);
/* The cached path (malloc'd) of the model a name stands for. */
vkasr_status hub_resolve(const char *name, char **out, struct err *e);

#endif
