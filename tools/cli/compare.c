/* compare.c — the stage comparison of `vkasr compare`: the baseline device's stages are kept as they
 * arrive through the stage taps; every other device's stages are measured against them on arrival
 * (max-abs and relative L2 error), decoder logits step by step while the decoding paths agree, then
 * tokens and transcripts; the tolerances; the report as a table or one JSON object. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

/* ---- tolerances --------------------------------------------------------------------------------- */

/* Every stage past the front end where either device ran int8 products (docs/compare.md). */
#define CMP_TOL_INT8 5e-2

/* The bound on a stage's relative L2 error between two devices: twice the parity tests' bound on each
 * device against transformers; where a device ran int8 products (W8A8), the int8 path's measured error
 * with a margin, in either precision (derived in docs/compare.md). */
double cmp_tolerance(const char *stage, vkasr_precision precision, bool int8) {
    if (!strcmp(stage, "mel"))
        return 5e-4;
    if (int8)
        return CMP_TOL_INT8;
    return precision == VKASR_PRECISION_F16 ? 1e-2 : 2e-4;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np)
        return false;
    *p = np;
    *cap = c;
    return true;
}

/* sqrt(se / sa); NaN when either is (a NaN anywhere in either tensor), which no tolerance accepts. */
static double rel(double se, double sa) {
    if (isnan(se) || isnan(sa))
        return NAN;
    return sa > 0 ? sqrt(se / sa) : se > 0 ? INFINITY : 0.0;
}

/* Accumulates the error of b against a over n values. */
static void accumulate(const float *a, const float *b, size_t n, double *se, double *sa, double *max_abs) {
    for (size_t i = 0; i < n; i++) {
        double d = (double)b[i] - a[i];
        *se += d * d;
        *sa += (double)a[i] * a[i];
        if (!(fabs(d) <= *max_abs) && !isnan(*max_abs)) /* a NaN, once seen, stays */
            *max_abs = fabs(d);
    }
}

/* Whether column c is a maximum of row[lo, hi) (ties allowed: any maximum is an argmax). */
static bool is_max(const float *row, size_t lo, size_t hi, long long c) {
    if (c < (long long)lo || c >= (long long)hi || isnan(row[c]))
        return false;
    for (size_t j = lo; j < hi; j++)
        if (row[j] > row[c])
            return false;
    return true;
}

static int duration_index(const vkasr_model_info *mi, int32_t d) {
    for (int j = 0; j < mi->n_durations; j++)
        if (mi->durations[j] == d)
            return j;
    return -1;
}

/* Whether a step's choice is the argmax of its own logits (token over [0, V], blank = V; for TDT also
 * the duration); a device whose choice is not is wrong whatever its logits. */
static bool choice_is_argmax(const vkasr_model_info *mi, const float *row, size_t cols, const vkasr_decoder_step *s) {
    const size_t V1 = (size_t)mi->vocab_size + 1;
    if (cols < V1 || !is_max(row, 0, V1, s->token))
        return false;
    if (mi->head != VKASR_HEAD_TDT)
        return true;
    return is_max(row, V1, cols, (long long)V1 + duration_index(mi, s->duration));
}

static bool same_choice(const vkasr_decoder_step *a, const vkasr_decoder_step *b) {
    return a->frame == b->frame && a->token == b->token && a->duration == b->duration;
}

/* The baseline's logit margin between its choice a and the other device's b at one step. */
static double margin(const vkasr_model_info *mi, const float *row, size_t cols, const vkasr_decoder_step *a,
                     const vkasr_decoder_step *b) {
    const int V1 = mi->vocab_size + 1;
    if (a->token != b->token)
        return b->token >= 0 && b->token < V1 && a->token >= 0 && a->token < V1 ? row[a->token] - row[b->token] : NAN;
    int ja = duration_index(mi, a->duration), jb = duration_index(mi, b->duration);
    if (ja < 0 || jb < 0 || (size_t)(V1 + (ja > jb ? ja : jb)) >= cols)
        return NAN;
    return row[V1 + ja] - row[V1 + jb];
}

/* ---- the baseline ------------------------------------------------------------------------------- */

void cmp_baseline_tap(const vkasr_stage *s, void *ud) {
    struct cmp_baseline *b = ud;
    if (b->out_of_memory)
        return;
    if (!strcmp(s->name, "logits")) {
        if ((b->nsteps && s->cols != b->logit_cols) || (uint64_t)s->index != b->nsteps) {
            fprintf(stderr, "vkasr: compare: unexpected decoder step %lld (%zu columns)\n", (long long)s->index,
                    s->cols);
            b->out_of_memory = true; /* not memory, but the capture is unusable: fail the same way */
            return;
        }
        size_t n = b->nsteps + s->rows;
        if (!grow((void **)&b->steps, &b->capsteps, n, sizeof *b->steps) ||
            !grow((void **)&b->logits, &b->caplogits, n, s->cols * sizeof *b->logits)) {
            b->out_of_memory = true;
            return;
        }
        b->logit_cols = s->cols;
        memcpy(b->logits + b->nsteps * s->cols, s->data, s->rows * s->cols * sizeof *s->data);
        memcpy(b->steps + b->nsteps, s->steps, s->rows * sizeof *s->steps);
        b->nsteps = n;
        return;
    }
    float *copy = malloc(s->rows * s->cols * sizeof *copy + sizeof *copy);
    if (!copy || !grow((void **)&b->stages, &b->capstages, b->nstages + 1, sizeof *b->stages)) {
        free(copy);
        b->out_of_memory = true;
        return;
    }
    memcpy(copy, s->data, s->rows * s->cols * sizeof *copy);
    struct cmp_tensor *t = &b->stages[b->nstages++];
    snprintf(t->name, sizeof t->name, "%s", s->name);
    t->index = s->index;
    t->rows = s->rows;
    t->cols = s->cols;
    t->data = copy;
}

static bool copy_tokens(const vkasr_result *r, struct cmp_token **out, size_t *n, char **text) {
    const vkasr_token *t = vkasr_result_tokens(r, n);
    *out = malloc(*n * sizeof **out + sizeof **out);
    *text = strdup(vkasr_result_text(r));
    if (!*out || !*text)
        return false;
    for (size_t i = 0; i < *n; i++)
        (*out)[i] = (struct cmp_token){t[i].id, t[i].duration, t[i].frame};
    return true;
}

bool cmp_baseline_finish(struct cmp_baseline *b, const vkasr_result *r) {
    if (!copy_tokens(r, &b->tokens, &b->ntokens, &b->text))
        b->out_of_memory = true;
    return !b->out_of_memory;
}

void cmp_baseline_free(struct cmp_baseline *b) {
    for (size_t i = 0; i < b->nstages; i++)
        free(b->stages[i].data);
    free(b->stages);
    free(b->logits);
    free(b->steps);
    free(b->tokens);
    free(b->text);
    memset(b, 0, sizeof *b);
}

/* ---- another device ------------------------------------------------------------------------------ */

static void logits_reset(struct cmp_logits *l, double tol, bool forced) {
    *l = (struct cmp_logits){.forced = forced, .worst_step = -1, .first_past_tol = -1, .first_past_int8 = -1,
                             .part_step = -1, .part_frame = -1, .part_margin = NAN, .not_argmax_step = -1,
                             .tol = tol};
}

bool cmp_result_init(struct cmp_result *c, const struct cmp_baseline *b, const char *device,
                     const vkasr_model_info *info) {
    memset(c, 0, sizeof *c);
    c->device = device;
    c->info = *info;
    c->base = b;
    c->agree = true;
    c->first_token_diff = -1;
    c->stages = calloc(b->nstages + 1, sizeof *c->stages);
    if (!c->stages)
        return false;
    c->nstages = b->nstages;
    for (size_t i = 0; i < b->nstages; i++) {
        struct cmp_stage *s = &c->stages[i];
        snprintf(s->name, sizeof s->name, "%s", b->stages[i].name);
        s->index = b->stages[i].index;
        s->rows = b->stages[i].rows;
        s->cols = b->stages[i].cols;
        s->tol = cmp_tolerance(s->name, b->info.precision, b->int8_products > 0);
    }
    c->int8 = b->int8_products > 0;
    logits_reset(&c->logits, cmp_tolerance("logits", b->info.precision, c->int8), false);
    return true;
}

void cmp_result_set_int8(struct cmp_result *c, uint64_t products) {
    c->int8_products = products;
    if (c->int8 || !products)
        return;
    c->int8 = true;
    for (size_t i = 0; i < c->nstages; i++)
        c->stages[i].tol = cmp_tolerance(c->stages[i].name, c->base->info.precision, true);
    c->logits.tol = cmp_tolerance("logits", c->base->info.precision, true);
    c->logits.first_past_tol = c->logits.first_past_int8;
}

/* One decoder step of this device against the baseline's step of the same number. */
static void compare_step(struct cmp_result *c, int64_t step, const float *row, size_t cols,
                         const vkasr_decoder_step *mine) {
    const struct cmp_baseline *b = c->base;
    struct cmp_logits *l = &c->logits;
    const bool path_dependent = b->info.head != VKASR_HEAD_CTC; /* CTC logits do not depend on choices */
    l->steps++;
    if (l->not_argmax_step < 0 && !choice_is_argmax(&c->info, row, cols, mine))
        l->not_argmax_step = step;
    if ((uint64_t)step >= b->nsteps || cols != b->logit_cols || (path_dependent && !c->agree))
        return;
    const float *a = b->logits + (size_t)step * cols;
    const vkasr_decoder_step *theirs = &b->steps[step];
    if (l->not_argmax_step < 0 && !choice_is_argmax(&b->info, a, cols, theirs)) {
        l->not_argmax_step = step;
        l->not_argmax_baseline = true;
    }
    double se = 0, sa = 0;
    accumulate(a, row, cols, &se, &sa, &l->max_abs);
    l->se += se;
    l->sa += sa;
    l->compared++;
    double r = rel(se, sa);
    if (!(r <= l->worst_rel) && !isnan(l->worst_rel)) { /* a NaN, once seen, stays */
        l->worst_rel = r;
        l->worst_step = step;
    }
    if (l->first_past_tol < 0 && !(r <= l->tol))
        l->first_past_tol = step;
    if (l->first_past_int8 < 0 && !(r <= cmp_tolerance("logits", b->info.precision, true)))
        l->first_past_int8 = step;
    if (!same_choice(mine, theirs)) {
        l->choices_differ++;
        if (l->part_step < 0) {
            l->part_step = step;
            l->part_frame = theirs->frame;
            l->part_margin = margin(&b->info, a, cols, theirs, mine);
        }
        if (!l->forced)
            c->agree = false; /* free runs: the next steps have other inputs */
    }
}

void cmp_result_tap(const vkasr_stage *s, void *ud) {
    struct cmp_result *c = ud;
    if (!strcmp(s->name, "logits")) {
        for (size_t i = 0; i < s->rows; i++)
            compare_step(c, s->index + (int64_t)i, s->data + i * s->cols, s->cols, &s->steps[i]);
        return;
    }
    if (c->logits.forced)
        return; /* the teacher-forced rerun is for the decoder only */
    for (size_t i = 0; i < c->nstages; i++) {
        struct cmp_stage *st = &c->stages[i];
        if (st->seen || strcmp(st->name, s->name) || st->index != s->index)
            continue;
        st->seen = true;
        st->same_shape = st->rows == s->rows && st->cols == s->cols;
        if (st->same_shape)
            accumulate(c->base->stages[i].data, s->data, s->rows * s->cols, &st->se, &st->sa, &st->max_abs);
        return;
    }
}

bool cmp_result_finish(struct cmp_result *c, const vkasr_result *r) {
    struct cmp_token *tok = NULL;
    if (!copy_tokens(r, &tok, &c->ntokens, &c->text)) {
        free(tok);
        c->out_of_memory = true;
        return false;
    }
    const struct cmp_baseline *b = c->base;
    size_t n = c->ntokens < b->ntokens ? c->ntokens : b->ntokens;
    for (size_t i = 0; i < n && c->first_token_diff < 0; i++)
        if (tok[i].id != b->tokens[i].id || tok[i].frame != b->tokens[i].frame ||
            tok[i].duration != b->tokens[i].duration)
            c->first_token_diff = (int64_t)i;
    if (c->first_token_diff < 0 && c->ntokens != b->ntokens)
        c->first_token_diff = (int64_t)n;
    free(tok);
    return true;
}

bool cmp_paths_parted(const struct cmp_result *c) {
    return c->base->info.head != VKASR_HEAD_CTC && (!c->agree || c->logits.steps != c->base->nsteps);
}

void cmp_result_force(struct cmp_result *c) {
    logits_reset(&c->logits, c->logits.tol, true);
    c->agree = true;
}

void cmp_result_free(struct cmp_result *c) {
    free(c->stages);
    free(c->text);
    memset(c, 0, sizeof *c);
}

/* ---- verdicts ---------------------------------------------------------------------------------- */

static bool stage_ok(const struct cmp_stage *s) { return s->seen && s->same_shape && rel(s->se, s->sa) <= s->tol; }

/* The logits pass when every step was compared (a transducer whose path parted: in the teacher-forced
 * rerun), each within the tolerance, and every choice is its row's argmax. */
static bool logits_ok(const struct cmp_result *c) {
    const struct cmp_logits *l = &c->logits;
    return l->not_argmax_step < 0 && l->worst_rel <= l->tol && l->steps == c->base->nsteps && l->compared == l->steps;
}

static const char *stage_label(const struct cmp_stage *s, char *buf, size_t size) {
    if (!strcmp(s->name, "layer"))
        snprintf(buf, size, "layer %lld", (long long)s->index);
    else
        snprintf(buf, size, "%s", s->name);
    return buf;
}

const char *cmp_first_failure(const struct cmp_result *c, char *buf, size_t size) {
    for (size_t i = 0; i < c->nstages; i++)
        if (!stage_ok(&c->stages[i]))
            return stage_label(&c->stages[i], buf, size);
    if (!logits_ok(c)) {
        snprintf(buf, size, "logits");
        return buf;
    }
    return NULL;
}

/* ---- report ------------------------------------------------------------------------------------- */

static const char *head_name(vkasr_head h) {
    return h == VKASR_HEAD_TDT ? "TDT" : h == VKASR_HEAD_RNNT ? "RNN-T" : "CTC";
}
static const char *prec_name(vkasr_precision p) { return p == VKASR_PRECISION_F16 ? "f16" : "f32"; }

/* Which tolerances a comparison takes: "int8" where either device ran int8 products, else the precision's. */
static const char *tol_name(const struct cmp_result *c) { return c->int8 ? "int8" : prec_name(c->base->info.precision); }

/* Why the logits failed, in words (NULL when they pass). */
static const char *logits_problem(const struct cmp_result *c, char *buf, size_t size) {
    const struct cmp_logits *l = &c->logits;
    if (l->not_argmax_step >= 0)
        snprintf(buf, size, "step %lld: %s's choice is not the argmax of its own logits", (long long)l->not_argmax_step,
                 l->not_argmax_baseline ? c->base->device : c->device);
    else if (l->first_past_tol >= 0 || !(l->worst_rel <= l->tol))
        snprintf(buf, size, "step %lld: relative L2 error %.2e > %.1e",
                 (long long)(l->first_past_tol >= 0 ? l->first_past_tol : l->worst_step), l->worst_rel, l->tol);
    else if (logits_ok(c))
        return NULL;
    else
        snprintf(buf, size, "%zu steps (%zu compared) against the baseline's %zu", l->steps, l->compared,
                 c->base->nsteps);
    return buf;
}

void cmp_report_text(FILE *f, const struct cmp_run_info *ri, const struct cmp_baseline *b,
                     const struct cmp_result *c, size_t n) {
    const vkasr_model_info *mi = &b->info;
    fprintf(f, "model      %s (%s, %d layers, d_model %d, %.2f M parameters), %s\n", ri->model, head_name(mi->head),
            mi->n_layers, mi->d_model, mi->n_params / 1e6, prec_name(ri->precision));
    fprintf(f, "audio      %s (%.2f s)\n", ri->audio, ri->duration);
    fprintf(f, "baseline   %s: %s\n", b->device, mi->device_name);
    if (ri->left_out)
        fprintf(f, "left out   %s\n", ri->left_out);
    for (size_t k = 0; k < n; k++) {
        const struct cmp_result *r = &c[k];
        char label[32], why[256];
        fprintf(f, "\n%s (%s) against %s\n", r->device, r->info.device_name, b->device);
        if (r->int8)
            fprintf(f, "  %-12s int8 products: %s ran %llu linear products on an int8 path (W8A8), %s %llu\n",
                    "tolerances", r->device, (unsigned long long)r->int8_products, b->device,
                    (unsigned long long)b->int8_products);
        else
            fprintf(f, "  %-12s %s (no int8 products)\n", "tolerances", prec_name(b->info.precision));
        fprintf(f, "  %-12s %-13s %-9s %-9s %-9s %s\n", "stage", "rows x cols", "max-abs", "rel L2", "tolerance",
                "result");
        for (size_t i = 0; i < r->nstages; i++) {
            const struct cmp_stage *s = &r->stages[i];
            char shape[32];
            snprintf(shape, sizeof shape, "%zu x %zu", s->rows, s->cols);
            if (!s->seen || !s->same_shape)
                fprintf(f, "  %-12s %-13s %-9s %-9s %-9.1e %s\n", stage_label(s, label, sizeof label), shape, "-", "-",
                        s->tol, s->seen ? "FAIL: shapes differ" : "FAIL: missing");
            else
                fprintf(f, "  %-12s %-13s %-9.2e %-9.2e %-9.1e %s\n", stage_label(s, label, sizeof label), shape,
                        s->max_abs, rel(s->se, s->sa), s->tol, stage_ok(s) ? "ok" : "FAIL");
        }
        const struct cmp_logits *l = &r->logits;
        char shape[32];
        snprintf(shape, sizeof shape, "%zu x %zu", b->nsteps, b->logit_cols);
        const char *problem = logits_problem(r, why, sizeof why);
        fprintf(f, "  %-12s %-13s %-9.2e %-9.2e %-9.1e %s%s\n", "logits", shape, l->max_abs, l->worst_rel, l->tol,
                problem ? "FAIL: " : "ok", problem ? problem : "");
        fprintf(f, "  %-12s %zu steps compared (relative L2 of the worst step; %.2e over all)%s\n", "", l->compared,
                rel(l->se, l->sa), l->forced ? ", teacher-forced with the baseline's choices" : "");
        if (l->part_step >= 0)
            fprintf(f, "  %-12s choices differ at %zu step(s), first at step %lld (frame %lld), where the baseline's "
                       "logits put its choice %.2e above the other's%s\n",
                    "", l->choices_differ, (long long)l->part_step, (long long)l->part_frame, l->part_margin,
                    problem ? "" : " (a near tie, within the logits' error)");
        if (r->first_token_diff < 0)
            fprintf(f, "  %-12s %zu / %zu equal\n", "tokens", r->ntokens, b->ntokens);
        else
            fprintf(f, "  %-12s differ from token %lld (%zu against %zu tokens)\n", "tokens",
                    (long long)r->first_token_diff, r->ntokens, b->ntokens);
        fprintf(f, "  %-12s %s\n", "transcript", strcmp(r->text, b->text) ? "differs" : "equal");
        const char *fail = cmp_first_failure(r, label, sizeof label);
        if (fail)
            fprintf(f, "  result       FAIL: the devices part at %s\n", fail);
        else
            fprintf(f, "  result       every stage within its tolerance%s\n",
                    strcmp(r->text, b->text) ? " (the transcripts differ by a near tie)" : "");
    }
}

/* A JSON number, null when not finite. */
static void jnum(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.4g", v);
    else
        fprintf(f, "null");
}

static void jint_or_null(FILE *f, int64_t v) {
    if (v >= 0)
        fprintf(f, "%lld", (long long)v);
    else
        fprintf(f, "null");
}

void cmp_report_json(FILE *f, const struct cmp_run_info *ri, const struct cmp_baseline *b,
                     const struct cmp_result *c, size_t n) {
    const vkasr_model_info *mi = &b->info;
    char label[32], why[256];
    fprintf(f, "{\"model\":");
    json_str(f, ri->model);
    fprintf(f, ",\"head\":\"%s\",\"layers\":%d,\"d_model\":%d,\"parameters\":%llu,\"precision\":\"%s\",\"audio\":",
            head_name(mi->head), mi->n_layers, mi->d_model, (unsigned long long)mi->n_params, prec_name(ri->precision));
    json_str(f, ri->audio);
    fprintf(f, ",\"duration\":");
    jnum(f, ri->duration);
    fprintf(f, ",\"baseline\":{\"device\":");
    json_str(f, b->device);
    fprintf(f, ",\"name\":");
    json_str(f, mi->device_name);
    fprintf(f, ",\"steps\":%zu,\"tokens\":%zu,\"int8_products\":%llu,\"text\":", b->nsteps, b->ntokens,
            (unsigned long long)b->int8_products);
    json_str(f, b->text);
    fprintf(f, "},\"left_out\":");
    if (ri->left_out)
        json_str(f, ri->left_out);
    else
        fprintf(f, "null");
    char first_fail[32] = "";
    const char *first_dev = NULL;
    for (size_t k = 0; k < n && !first_dev; k++)
        if (cmp_first_failure(&c[k], first_fail, sizeof first_fail))
            first_dev = c[k].device;
    fprintf(f, ",\"comparisons\":[");
    for (size_t k = 0; k < n; k++) {
        const struct cmp_result *r = &c[k];
        const char *fail = cmp_first_failure(r, label, sizeof label);
        fprintf(f, "%s{\"device\":", k ? "," : "");
        json_str(f, r->device);
        fprintf(f, ",\"name\":");
        json_str(f, r->info.device_name);
        fprintf(f, ",\"int8_products\":%llu,\"tolerances\":\"%s\",\"ok\":%s,\"failed_stage\":",
                (unsigned long long)r->int8_products, tol_name(r), fail ? "false" : "true");
        if (fail)
            json_str(f, fail);
        else
            fprintf(f, "null");
        fprintf(f, ",\"stages\":[");
        for (size_t i = 0; i < r->nstages; i++) {
            const struct cmp_stage *s = &r->stages[i];
            fprintf(f, "%s{\"stage\":\"%s\",\"index\":%lld,\"label\":", i ? "," : "", s->name, (long long)s->index);
            json_str(f, stage_label(s, label, sizeof label));
            fprintf(f, ",\"rows\":%zu,\"cols\":%zu,\"present\":%s,\"same_shape\":%s,\"max_abs\":", s->rows, s->cols,
                    s->seen ? "true" : "false", s->same_shape ? "true" : "false");
            jnum(f, s->seen && s->same_shape ? s->max_abs : NAN);
            fprintf(f, ",\"rel_l2\":");
            jnum(f, s->seen && s->same_shape ? rel(s->se, s->sa) : NAN);
            fprintf(f, ",\"tolerance\":");
            jnum(f, s->tol);
            fprintf(f, ",\"ok\":%s}", stage_ok(s) ? "true" : "false");
        }
        const struct cmp_logits *l = &r->logits;
        const char *problem = logits_problem(r, why, sizeof why);
        fprintf(f, "%s{\"stage\":\"logits\",\"index\":0,\"label\":\"logits\",\"rows\":%zu,\"cols\":%zu,\"max_abs\":",
                r->nstages ? "," : "", b->nsteps, b->logit_cols);
        jnum(f, l->max_abs);
        fprintf(f, ",\"rel_l2\":");
        jnum(f, l->worst_rel);
        fprintf(f, ",\"rel_l2_all_steps\":");
        jnum(f, rel(l->se, l->sa));
        fprintf(f, ",\"worst_step\":");
        jint_or_null(f, l->worst_step);
        fprintf(f, ",\"tolerance\":");
        jnum(f, l->tol);
        fprintf(f, ",\"ok\":%s,\"problem\":", problem ? "false" : "true");
        if (problem)
            json_str(f, problem);
        else
            fprintf(f, "null");
        fprintf(f, ",\"steps\":%zu,\"compared_steps\":%zu,\"teacher_forced\":%s,\"first_step_past_tolerance\":",
                l->steps, l->compared, l->forced ? "true" : "false");
        jint_or_null(f, l->first_past_tol);
        fprintf(f, ",\"choices_differ\":%zu,\"paths_part_at_step\":", l->choices_differ);
        jint_or_null(f, l->part_step);
        fprintf(f, ",\"part_frame\":");
        jint_or_null(f, l->part_frame);
        fprintf(f, ",\"baseline_margin\":");
        jnum(f, l->part_margin);
        fprintf(f, ",\"not_argmax_step\":");
        jint_or_null(f, l->not_argmax_step);
        fprintf(f, "},{\"stage\":\"tokens\",\"label\":\"tokens\",\"count\":%zu,\"baseline_count\":%zu,"
                   "\"equal\":%s,\"first_difference\":",
                r->ntokens, b->ntokens, r->first_token_diff < 0 ? "true" : "false");
        jint_or_null(f, r->first_token_diff);
        fprintf(f, "},{\"stage\":\"transcript\",\"label\":\"transcript\",\"equal\":%s,\"text\":",
                strcmp(r->text, b->text) ? "false" : "true");
        json_str(f, r->text);
        fprintf(f, "}]}");
    }
    fprintf(f, "],\"ok\":%s,\"failed\":", first_dev ? "false" : "true");
    if (first_dev) {
        fprintf(f, "{\"device\":");
        json_str(f, first_dev);
        fprintf(f, ",\"stage\":");
        json_str(f, first_fail);
        fprintf(f, "}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, "}\n");
}
