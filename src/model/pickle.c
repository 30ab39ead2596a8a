/* pickle.c — the restricted unpickler for PyTorch state dicts: a stack machine over the opcodes
 * torch.save writes (protocol 2, plus protocol 4's framing and short forms), whose only callables are
 * OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the typed storage classes
 * (as persistent ids). Any other opcode or global is an error naming it; nothing is executed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"
#include "tokenizer.h"

/* Bounds on the work a hostile pickle can cause (a 42-layer model's state dict has ~2000 entries and
 * some 20000 objects). */
#define PK_MAX_OBJECTS (1 << 22)
#define PK_MAX_MEMO (1 << 22)
#define PK_MAX_STACK (1 << 20)

enum pv_kind { PV_MARK, PV_NONE, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_TUPLE, PV_LIST, PV_DICT, PV_GLOBAL,
               PV_STORAGE, PV_TENSOR };
enum pk_global { G_ORDERED_DICT, G_REBUILD_TENSOR_V2, G_REBUILD_PARAMETER, G_STORAGE };

struct pv {
    enum pv_kind kind;
    int64_t i;               /* INT, BOOL; GLOBAL: enum pk_global; STORAGE: numel                   */
    const char *s;           /* STR (into the pickle, not NUL-terminated); STORAGE: the record key   */
    size_t slen;
    enum mt_dtype type;      /* GLOBAL G_STORAGE, STORAGE, TENSOR                                    */
    struct pv **items;       /* TUPLE, LIST; DICT: key, value pairs                                  */
    size_t n, cap;
    struct pk_tensor *t;     /* TENSOR (its name and storage unset until the dict is read)          */
    const struct pv *store;  /* TENSOR: its storage                                                  */
};

struct pk {
    const char *src;
    const uint8_t *d;
    size_t n, pos, op_pos;
    struct pv **objs; /* every object, freed at the end */
    size_t nobjs, capobjs;
    struct pv **stack;
    size_t sp, capstack;
    struct pv **memo;
    size_t nmemo;
    struct err *e;
};

static struct pv mark_obj = {.kind = PV_MARK};

static vkasr_status bad(struct pk *p, const char *what) {
    return err_set(p->e, VKASR_ERR_MODEL, "%s: pickle byte %zu: %s", p->src, p->op_pos, what);
}

static vkasr_status oom(struct pk *p) {
    return err_set(p->e, VKASR_ERR_NO_MEMORY, "%s: out of memory reading the pickle", p->src);
}

static int grow(void *pp, size_t *cap, size_t need, size_t esz) {
    if (need <= *cap)
        return 1;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*(void **)pp, nc * esz);
    if (!q)
        return 0;
    *(void **)pp = q;
    *cap = nc;
    return 1;
}

static struct pv *new_obj(struct pk *p, enum pv_kind k) {
    if (p->nobjs >= PK_MAX_OBJECTS || !grow(&p->objs, &p->capobjs, p->nobjs + 1, sizeof *p->objs))
        return NULL;
    struct pv *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->kind = k;
    p->objs[p->nobjs++] = v;
    return v;
}

static vkasr_status push(struct pk *p, struct pv *v) {
    if (!v)
        return p->nobjs >= PK_MAX_OBJECTS ? bad(p, "too many objects") : oom(p);
    if (p->sp >= PK_MAX_STACK)
        return bad(p, "stack too deep");
    if (!grow(&p->stack, &p->capstack, p->sp + 1, sizeof *p->stack))
        return oom(p);
    p->stack[p->sp++] = v;
    return VKASR_OK;
}

static vkasr_status pop(struct pk *p, struct pv **v) {
    *v = NULL;
    if (p->sp == 0 || p->stack[p->sp - 1]->kind == PV_MARK)
        return bad(p, "stack underflow");
    *v = p->stack[--p->sp];
    return VKASR_OK;
}

/* The index of the topmost MARK. */
static vkasr_status find_mark(struct pk *p, size_t *at) {
    for (size_t i = p->sp; i > 0; i--)
        if (p->stack[i - 1]->kind == PV_MARK) {
            *at = i - 1;
            return VKASR_OK;
        }
    return bad(p, "no MARK on the stack");
}

static vkasr_status add_item(struct pk *p, struct pv *c, struct pv *v) {
    if (!grow(&c->items, &c->cap, c->n + 1, sizeof *c->items))
        return oom(p);
    c->items[c->n++] = v;
    return VKASR_OK;
}

static vkasr_status take(struct pk *p, size_t k, const uint8_t **out) {
    if (p->n - p->pos < k)
        return bad(p, "truncated (an operand runs past the end)");
    *out = p->d + p->pos;
    p->pos += k;
    return VKASR_OK;
}

static uint64_t le(const uint8_t *b, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static vkasr_status push_int(struct pk *p, int64_t v) {
    struct pv *o = new_obj(p, PV_INT);
    if (o)
        o->i = v;
    return push(p, o);
}

static vkasr_status push_str(struct pk *p, size_t len) {
    const uint8_t *b = NULL;
    TRY(take(p, len, &b));
    if (!utf8_valid((const char *)b, len) || memchr(b, 0, len))
        return bad(p, "string is not valid UTF-8 (or holds a NUL)");
    struct pv *o = new_obj(p, PV_STR);
    if (o) {
        o->s = (const char *)b;
        o->slen = len;
    }
    return push(p, o);
}

static int str_is(const struct pv *v, const char *s) {
    return v->kind == PV_STR && v->slen == strlen(s) && memcmp(v->s, s, v->slen) == 0;
}

/* The globals a state dict needs; anything else is refused by name. */
static vkasr_status resolve_global(struct pk *p, const char *mod, size_t ml, const char *name, size_t nl) {
    static const struct {
        const char *mod, *name;
        enum pk_global g;
        enum mt_dtype type;
    } ok[] = {
        {"collections", "OrderedDict", G_ORDERED_DICT, MT_F32},
        {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_TENSOR_V2, MT_F32},
        {"torch._utils", "_rebuild_parameter", G_REBUILD_PARAMETER, MT_F32},
        {"torch", "FloatStorage", G_STORAGE, MT_F32},
        {"torch", "HalfStorage", G_STORAGE, MT_F16},
        {"torch", "BFloat16Storage", G_STORAGE, MT_BF16},
        {"torch", "DoubleStorage", G_STORAGE, MT_F64},
        {"torch", "LongStorage", G_STORAGE, MT_I64},
        {"torch", "IntStorage", G_STORAGE, MT_I32},
        {"torch", "ShortStorage", G_STORAGE, MT_I16},
        {"torch", "CharStorage", G_STORAGE, MT_I8},
        {"torch", "ByteStorage", G_STORAGE, MT_U8},
        {"torch", "BoolStorage", G_STORAGE, MT_BOOL},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strlen(ok[i].mod) == ml && memcmp(ok[i].mod, mod, ml) == 0 && strlen(ok[i].name) == nl &&
            memcmp(ok[i].name, name, nl) == 0) {
            struct pv *o = new_obj(p, PV_GLOBAL);
            if (o) {
                o->i = ok[i].g;
                o->type = ok[i].type;
            }
            return push(p, o);
        }
    return err_set(p->e, VKASR_ERR_MODEL,
                   "%s: pickle byte %zu: refused global '%.*s.%.*s' (only the globals of a tensor state dict are "
                   "accepted)",
                   p->src, p->op_pos, (int)(ml > 200 ? 200 : ml), mod, (int)(nl > 200 ? 200 : nl), name);
}

/* GLOBAL: "module\nname\n" */
static vkasr_status op_global(struct pk *p) {
    const char *s = (const char *)p->d + p->pos;
    size_t left = p->n - p->pos;
    const char *nl1 = memchr(s, '\n', left);
    const char *nl2 = nl1 ? memchr(nl1 + 1, '\n', left - (size_t)(nl1 + 1 - s)) : NULL;
    if (!nl2)
        return bad(p, "GLOBAL without its two newline-terminated names");
    p->pos += (size_t)(nl2 + 1 - s);
    return resolve_global(p, s, (size_t)(nl1 - s), nl1 + 1, (size_t)(nl2 - nl1 - 1));
}

static vkasr_status op_stack_global(struct pk *p) {
    struct pv *name = NULL, *mod = NULL;
    TRY(pop(p, &name));
    TRY(pop(p, &mod));
    if (name->kind != PV_STR || mod->kind != PV_STR)
        return bad(p, "STACK_GLOBAL on values that are not strings");
    return resolve_global(p, mod->s, mod->slen, name->s, name->slen);
}

/* BINPERSID: ('storage', <storage class>, key, location, numel) */
static vkasr_status op_persid(struct pk *p) {
    struct pv *t = NULL;
    TRY(pop(p, &t));
    if (t->kind != PV_TUPLE || t->n != 5 || !str_is(t->items[0], "storage") || t->items[1]->kind != PV_GLOBAL ||
        t->items[1]->i != G_STORAGE || t->items[2]->kind != PV_STR || t->items[3]->kind != PV_STR ||
        t->items[4]->kind != PV_INT || t->items[4]->i < 0)
        return bad(p, "persistent id is not ('storage', <typed storage class>, key, location, numel)");
    struct pv *o = new_obj(p, PV_STORAGE);
    if (o) {
        o->type = t->items[1]->type;
        o->s = t->items[2]->s;
        o->slen = t->items[2]->slen;
        o->i = t->items[4]->i;
    }
    return push(p, o);
}

static vkasr_status int_tuple(struct pk *p, const struct pv *t, const char *what, int64_t *out, int *nd) {
    if (t->kind != PV_TUPLE || t->n > PK_MAX_DIMS)
        return err_set(p->e, VKASR_ERR_MODEL, "%s: pickle byte %zu: tensor %s is not a tuple of at most %d integers",
                       p->src, p->op_pos, what, PK_MAX_DIMS);
    for (size_t i = 0; i < t->n; i++) {
        if (t->items[i]->kind != PV_INT || t->items[i]->i < 0)
            return err_set(p->e, VKASR_ERR_MODEL, "%s: pickle byte %zu: tensor %s entry %zu is not a non-negative integer",
                           p->src, p->op_pos, what, i);
        out[i] = t->items[i]->i;
    }
    *nd = (int)t->n;
    return VKASR_OK;
}

static vkasr_status rebuild_tensor(struct pk *p, const struct pv *a, struct pv **res) {
    /* (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
    if (a->n < 6 || a->n > 7 || a->items[0]->kind != PV_STORAGE || a->items[1]->kind != PV_INT ||
        a->items[1]->i < 0 || a->items[4]->kind != PV_BOOL || a->items[5]->kind != PV_DICT)
        return bad(p, "_rebuild_tensor_v2 arguments are not (storage, offset, size, stride, requires_grad, hooks)");
    struct pk_tensor *t = calloc(1, sizeof *t);
    struct pv *o = new_obj(p, PV_TENSOR);
    if (!t || !o) {
        free(t);
        return oom(p);
    }
    o->t = t;
    o->store = a->items[0];
    t->type = a->items[0]->type;
    t->storage_numel = a->items[0]->i;
    t->offset = a->items[1]->i;
    int nds = 0;
    TRY(int_tuple(p, a->items[2], "size", t->size, &t->nd));
    TRY(int_tuple(p, a->items[3], "stride", t->stride, &nds));
    if (nds != t->nd)
        return bad(p, "tensor size and stride differ in length");
    *res = o;
    return VKASR_OK;
}

static vkasr_status op_reduce(struct pk *p) {
    struct pv *args = NULL, *fn = NULL, *res = NULL;
    TRY(pop(p, &args));
    TRY(pop(p, &fn));
    if (fn->kind != PV_GLOBAL || args->kind != PV_TUPLE)
        return bad(p, "REDUCE on something that is not an accepted global with a tuple of arguments");
    switch ((enum pk_global)fn->i) {
    case G_ORDERED_DICT:
        if (args->n != 0)
            return bad(p, "OrderedDict called with arguments");
        res = new_obj(p, PV_DICT);
        break;
    case G_REBUILD_TENSOR_V2:
        TRY(rebuild_tensor(p, args, &res));
        break;
    case G_REBUILD_PARAMETER:
        if (args->n < 1 || args->items[0]->kind != PV_TENSOR)
            return bad(p, "_rebuild_parameter without a tensor");
        res = args->items[0];
        break;
    case G_STORAGE:
        return bad(p, "a storage class called directly (legacy storage pickling)");
    }
    return push(p, res);
}

static vkasr_status op_setitems(struct pk *p, size_t from) {
    if (from == 0 || p->stack[from - 1]->kind != PV_DICT)
        return bad(p, "SETITEM(S) on something that is not a dict");
    if ((p->sp - from) % 2)
        return bad(p, "SETITEMS with an odd number of values");
    struct pv *d = p->stack[from - 1];
    for (size_t i = from; i < p->sp; i++)
        TRY(add_item(p, d, p->stack[i]));
    p->sp = from;
    return VKASR_OK;
}

static vkasr_status op_tuple_n(struct pk *p, size_t k) {
    if (p->sp < k)
        return bad(p, "stack underflow");
    struct pv *t = new_obj(p, PV_TUPLE);
    if (!t)
        return push(p, t);
    for (size_t i = p->sp - k; i < p->sp; i++) {
        if (p->stack[i]->kind == PV_MARK)
            return bad(p, "stack underflow");
        TRY(add_item(p, t, p->stack[i]));
    }
    p->sp -= k;
    return push(p, t);
}

static vkasr_status memo_put(struct pk *p, uint64_t idx) {
    if (p->sp == 0 || p->stack[p->sp - 1]->kind == PV_MARK)
        return bad(p, "memo store from an empty stack");
    if (idx >= PK_MAX_MEMO)
        return bad(p, "memo index too large");
    if (idx >= p->nmemo) {
        struct pv **m = realloc(p->memo, (size_t)(idx + 1) * sizeof *m);
        if (!m)
            return oom(p);
        memset(m + p->nmemo, 0, (size_t)(idx + 1 - p->nmemo) * sizeof *m);
        p->memo = m;
        p->nmemo = (size_t)idx + 1;
    }
    p->memo[idx] = p->stack[p->sp - 1];
    return VKASR_OK;
}

static vkasr_status memo_get(struct pk *p, uint64_t idx) {
    if (idx >= p->nmemo || !p->memo[idx])
        return bad(p, "memo get of an index never stored");
    return push(p, p->memo[idx]);
}

/* One opcode; *stop set at STOP. */
static vkasr_status step(struct pk *p, int *stop) {
    const uint8_t *b = NULL;
    size_t at = 0;
    struct pv *v = NULL, *w = NULL;
    p->op_pos = p->pos;
    TRY(take(p, 1, &b));
    uint8_t op = b[0];
    switch (op) {
    case 0x80: /* PROTO */
        TRY(take(p, 1, &b));
        if (b[0] < 2 || b[0] > 5)
            return bad(p, "unsupported pickle protocol");
        return VKASR_OK;
    case 0x95: /* FRAME: a length only; frames need no handling in memory */
        return take(p, 8, &b);
    case '.': /* STOP */
        *stop = 1;
        return VKASR_OK;
    case '(': /* MARK */
        return push(p, &mark_obj);
    case '}': /* EMPTY_DICT */
        return push(p, new_obj(p, PV_DICT));
    case ']': /* EMPTY_LIST */
        return push(p, new_obj(p, PV_LIST));
    case ')': /* EMPTY_TUPLE */
        return push(p, new_obj(p, PV_TUPLE));
    case 'N':
        return push(p, new_obj(p, PV_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        v = new_obj(p, PV_BOOL);
        if (v)
            v->i = op == 0x88;
        return push(p, v);
    case 'J': /* BININT */
        TRY(take(p, 4, &b));
        return push_int(p, (int32_t)(uint32_t)le(b, 4));
    case 'K': /* BININT1 */
        TRY(take(p, 1, &b));
        return push_int(p, b[0]);
    case 'M': /* BININT2 */
        TRY(take(p, 2, &b));
        return push_int(p, (int64_t)le(b, 2));
    case 0x8a: { /* LONG1 */
        TRY(take(p, 1, &b));
        int k = b[0];
        if (k > 8)
            return bad(p, "LONG1 wider than 64 bits");
        TRY(take(p, (size_t)k, &b));
        uint64_t u = le(b, k);
        if (k > 0 && k < 8 && (b[k - 1] & 0x80))
            u |= ~(uint64_t)0 << (8 * k);
        return push_int(p, (int64_t)u);
    }
    case 'G': { /* BINFLOAT (big-endian); kept only as a value */
        TRY(take(p, 8, &b));
        v = new_obj(p, PV_FLOAT);
        return push(p, v);
    }
    case 'X': /* BINUNICODE */
        TRY(take(p, 4, &b));
        return push_str(p, (size_t)le(b, 4));
    case 0x8c: /* SHORT_BINUNICODE */
        TRY(take(p, 1, &b));
        return push_str(p, b[0]);
    case 0x8d: /* BINUNICODE8 */
        TRY(take(p, 8, &b));
        if (le(b, 8) > p->n)
            return bad(p, "string longer than the pickle");
        return push_str(p, (size_t)le(b, 8));
    case 'q': /* BINPUT */
        TRY(take(p, 1, &b));
        return memo_put(p, b[0]);
    case 'r': /* LONG_BINPUT */
        TRY(take(p, 4, &b));
        return memo_put(p, le(b, 4));
    case 0x94: /* MEMOIZE */
        return memo_put(p, p->nmemo);
    case 'h': /* BINGET */
        TRY(take(p, 1, &b));
        return memo_get(p, b[0]);
    case 'j': /* LONG_BINGET */
        TRY(take(p, 4, &b));
        return memo_get(p, le(b, 4));
    case 'c':
        return op_global(p);
    case 0x93:
        return op_stack_global(p);
    case 't': /* TUPLE */
        TRY(find_mark(p, &at));
        v = new_obj(p, PV_TUPLE);
        if (!v)
            return push(p, v);
        for (size_t i = at + 1; i < p->sp; i++)
            TRY(add_item(p, v, p->stack[i]));
        p->sp = at;
        return push(p, v);
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */
        return op_tuple_n(p, (size_t)(op - 0x84));
    case 'a': /* APPEND */
        TRY(pop(p, &v));
        if (p->sp == 0 || p->stack[p->sp - 1]->kind != PV_LIST)
            return bad(p, "APPEND to something that is not a list");
        return add_item(p, p->stack[p->sp - 1], v);
    case 'e': /* APPENDS */
        TRY(find_mark(p, &at));
        if (at == 0 || p->stack[at - 1]->kind != PV_LIST)
            return bad(p, "APPENDS to something that is not a list");
        for (size_t i = at + 1; i < p->sp; i++)
            TRY(add_item(p, p->stack[at - 1], p->stack[i]));
        p->sp = at;
        return VKASR_OK;
    case 's': /* SETITEM */
        if (p->sp < 3)
            return bad(p, "stack underflow");
        for (size_t i = p->sp - 2; i < p->sp; i++)
            if (p->stack[i]->kind == PV_MARK)
                return bad(p, "stack underflow");
        return op_setitems(p, p->sp - 2);
    case 'u': /* SETITEMS */
        TRY(find_mark(p, &at));
        memmove(p->stack + at, p->stack + at + 1, (p->sp - at - 1) * sizeof *p->stack);
        p->sp--;
        return op_setitems(p, at);
    case 'Q':
        return op_persid(p);
    case 'R':
        return op_reduce(p);
    case 'b': /* BUILD: only a dict's attribute state (OrderedDict._metadata), which is dropped */
        TRY(pop(p, &v));
        if (p->sp == 0 || p->stack[p->sp - 1]->kind != PV_DICT || v->kind != PV_DICT)
            return bad(p, "BUILD on something other than a dict");
        return VKASR_OK;
    case '0': /* POP */
        return pop(p, &w);
    default: {
        char msg[96];
        snprintf(msg, sizeof msg, "opcode 0x%02x is not accepted in a state dict", op);
        return bad(p, msg);
    }
    }
}

/* The final dict into the output list. */
static vkasr_status collect(struct pk *p, const struct pv *d, struct pk_tensor **out, int *count) {
    int n = (int)(d->n / 2);
    struct pk_tensor *t = calloc(n ? (size_t)n : 1, sizeof *t);
    if (!t)
        return oom(p);
    vkasr_status st = VKASR_OK;
    int k = 0;
    for (; k < n && st == VKASR_OK; k++) {
        const struct pv *key = d->items[2 * k], *val = d->items[2 * k + 1];
        if (key->kind != PV_STR) {
            st = err_set(p->e, VKASR_ERR_MODEL, "%s: state dict entry %d has a key that is not a string", p->src, k);
            break;
        }
        if (val->kind != PV_TENSOR) {
            st = err_set(p->e, VKASR_ERR_MODEL, "%s: state dict entry '%.*s' is not a tensor", p->src,
                         (int)(key->slen > 200 ? 200 : key->slen), key->s);
            break;
        }
        t[k] = *val->t;
        t[k].name = strndup(key->s, key->slen);
        t[k].storage = strndup(val->store->s, val->store->slen);
        if (!t[k].name || !t[k].storage) {
            k++;
            st = oom(p);
        }
    }
    if (st != VKASR_OK) {
        pickle_free(t, k);
        return st;
    }
    *out = t;
    *count = n;
    return VKASR_OK;
}

vkasr_status pickle_state_dict(const char *src, const uint8_t *data, size_t n, struct pk_tensor **out, int *count,
                               struct err *e) {
    *out = NULL;
    *count = 0;
    struct pk p = {.src = src, .d = data, .n = n, .e = e};
    vkasr_status st = VKASR_OK;
    int stop = 0;
    if (n < 2 || data[0] != 0x80)
        st = err_set(e, VKASR_ERR_MODEL, "%s: not a pickle of protocol 2 or later", src);
    while (st == VKASR_OK && !stop)
        st = step(&p, &stop);
    if (st == VKASR_OK) {
        if (p.sp != 1 || p.stack[0]->kind != PV_DICT)
            st = err_set(e, VKASR_ERR_MODEL, "%s: the pickle's result is not a dict (a state dict of tensors)", src);
        else
            st = collect(&p, p.stack[0], out, count);
    }
    for (size_t i = 0; i < p.nobjs; i++) {
        free(p.objs[i]->items);
        free(p.objs[i]->t);
        free(p.objs[i]);
    }
    free(p.objs);
    free(p.stack);
    free(p.memo);
    return st;
}

void pickle_free(struct pk_tensor *t, int count) {
    if (!t)
        return;
    for (int i = 0; i < count; i++) {
        free(t[i].name);
        free(t[i].storage);
    }
    free(t);
}
