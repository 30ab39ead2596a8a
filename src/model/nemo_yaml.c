/* nemo_yaml.c — a YAML document (NeMo's model_config.yaml, an OmegaConf dump) as a small tree of
 * scalars, sequences and mappings, through libyaml's event parser. Anchors and aliases, which
 * OmegaConf does not write, are refused; depth and node count are bounded.
 */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "nemo_internal.h"

#define NY_MAX_DEPTH 64
#define NY_MAX_NODES (1 << 20)

void ny_free(struct ny_node *n) {
    if (!n)
        return;
    for (int i = 0; i < n->n; i++) {
        ny_free(n->kids[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    free(n->kids);
    free(n->keys);
    free(n->str);
    free(n);
}

const struct ny_node *ny_get(const struct ny_node *map, const char *key) {
    if (!map || map->kind != NY_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0)
            return map->kids[i];
    return NULL;
}

bool ny_is_null(const struct ny_node *n) {
    if (!n || n->kind != NY_SCALAR || !n->plain)
        return false;
    const char *s = n->str;
    return !s[0] || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL") || !strcmp(s, "~");
}

struct ny_parser {
    const char *src;
    yaml_parser_t p;
    int nodes;
    struct err *e;
};

static vkasr_status next(struct ny_parser *y, yaml_event_t *ev) {
    if (!yaml_parser_parse(&y->p, ev))
        return err_set(y->e, VKASR_ERR_MODEL, "%s: line %zu: not valid YAML: %s", y->src,
                       y->p.problem_mark.line + 1, y->p.problem ? y->p.problem : "parse error");
    return VKASR_OK;
}

static struct ny_node *new_node(enum ny_kind k, int line) {
    struct ny_node *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = k;
        n->line = line;
    }
    return n;
}

static vkasr_status add_kid(struct ny_parser *y, struct ny_node *parent, char *key, struct ny_node *kid) {
    if (parent->n == parent->cap) {
        int nc = parent->cap ? parent->cap * 2 : 8;
        struct ny_node **k = realloc(parent->kids, (size_t)nc * sizeof *k);
        if (k)
            parent->kids = k;
        char **ks = parent->kind == NY_MAP ? realloc(parent->keys, (size_t)nc * sizeof *ks) : NULL;
        if (ks)
            parent->keys = ks;
        if (!k || (parent->kind == NY_MAP && !ks)) {
            free(key);
            ny_free(kid);
            return err_set(y->e, VKASR_ERR_NO_MEMORY, "out of memory");
        }
        parent->cap = nc;
    }
    parent->kids[parent->n] = kid;
    if (parent->kind == NY_MAP)
        parent->keys[parent->n] = key;
    parent->n++;
    return VKASR_OK;
}

/* Reads the node whose first event is ev (consumed here) into *out. */
static vkasr_status read_node(struct ny_parser *y, yaml_event_t *ev, int depth, struct ny_node **out) {
    *out = NULL;
    int line = (int)ev->start_mark.line + 1;
    if (++y->nodes > NY_MAX_NODES || depth > NY_MAX_DEPTH) {
        yaml_event_delete(ev);
        return err_set(y->e, VKASR_ERR_MODEL, "%s: line %d: the document is too large or too deeply nested", y->src,
                       line);
    }
    if (ev->type == YAML_ALIAS_EVENT) {
        yaml_event_delete(ev);
        return err_set(y->e, VKASR_ERR_MODEL, "%s: line %d: YAML aliases are not supported", y->src, line);
    }
    if (ev->type == YAML_SCALAR_EVENT) {
        struct ny_node *n = new_node(NY_SCALAR, line);
        if (n) {
            n->str = strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
            n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        }
        yaml_event_delete(ev);
        if (!n || !n->str) {
            ny_free(n);
            return err_set(y->e, VKASR_ERR_NO_MEMORY, "out of memory");
        }
        *out = n;
        return VKASR_OK;
    }
    if (ev->type != YAML_SEQUENCE_START_EVENT && ev->type != YAML_MAPPING_START_EVENT) {
        yaml_event_delete(ev);
        return err_set(y->e, VKASR_ERR_MODEL, "%s: line %d: unexpected YAML event", y->src, line);
    }
    const bool map = ev->type == YAML_MAPPING_START_EVENT;
    const yaml_event_type_t end = map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    yaml_event_delete(ev);
    struct ny_node *n = new_node(map ? NY_MAP : NY_SEQ, line);
    if (!n)
        return err_set(y->e, VKASR_ERR_NO_MEMORY, "out of memory");
    vkasr_status st = VKASR_OK;
    for (;;) {
        yaml_event_t k;
        if ((st = next(y, &k)) != VKASR_OK)
            break;
        if (k.type == end) {
            yaml_event_delete(&k);
            break;
        }
        char *key = NULL;
        if (map) {
            if (k.type != YAML_SCALAR_EVENT) {
                st = err_set(y->e, VKASR_ERR_MODEL, "%s: line %zu: a mapping key that is not a scalar", y->src,
                             k.start_mark.line + 1);
                yaml_event_delete(&k);
                break;
            }
            key = strndup((const char *)k.data.scalar.value, k.data.scalar.length);
            yaml_event_delete(&k);
            if (!key) {
                st = err_set(y->e, VKASR_ERR_NO_MEMORY, "out of memory");
                break;
            }
            if (ny_get(n, key)) {
                st = err_set(y->e, VKASR_ERR_MODEL, "%s: line %d: key '%s' appears twice in one mapping", y->src, line,
                             key);
                free(key);
                break;
            }
            if ((st = next(y, &k)) != VKASR_OK) {
                free(key);
                break;
            }
        }
        struct ny_node *kid;
        if ((st = read_node(y, &k, depth + 1, &kid)) != VKASR_OK) {
            free(key);
            break;
        }
        if ((st = add_kid(y, n, key, kid)) != VKASR_OK)
            break;
    }
    if (st != VKASR_OK) {
        ny_free(n);
        return st;
    }
    *out = n;
    return VKASR_OK;
}

vkasr_status ny_parse(const char *src, const char *text, size_t len, struct ny_node **root, struct err *e) {
    *root = NULL;
    struct ny_parser y = {.src = src, .e = e};
    if (!yaml_parser_initialize(&y.p))
        return err_set(e, VKASR_ERR_NO_MEMORY, "out of memory");
    yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
    vkasr_status st = VKASR_OK;
    yaml_event_t ev;
    /* STREAM-START, DOCUMENT-START, the root node, DOCUMENT-END; one document only */
    for (int i = 0; i < 2 && st == VKASR_OK; i++) {
        if ((st = next(&y, &ev)) != VKASR_OK)
            break;
        yaml_event_type_t want = i == 0 ? YAML_STREAM_START_EVENT : YAML_DOCUMENT_START_EVENT;
        if (ev.type != want)
            st = err_set(e, VKASR_ERR_MODEL, "%s: not a YAML document", src);
        yaml_event_delete(&ev);
    }
    if (st == VKASR_OK && (st = next(&y, &ev)) == VKASR_OK)
        st = read_node(&y, &ev, 0, root);
    if (st == VKASR_OK && (st = next(&y, &ev)) == VKASR_OK) {
        if (ev.type != YAML_DOCUMENT_END_EVENT)
            st = err_set(e, VKASR_ERR_MODEL, "%s: more than one YAML document", src);
        yaml_event_delete(&ev);
    }
    if (st == VKASR_OK && (*root)->kind != NY_MAP)
        st = err_set(e, VKASR_ERR_MODEL, "%s: the document is not a mapping", src);
    yaml_parser_delete(&y.p);
    if (st != VKASR_OK) {
        ny_free(*root);
        *root = NULL;
    }
    return st;
}
