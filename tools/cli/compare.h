/* compare.h — the stage-by-stage comparison behind `vkasr compare`: compare.c keeps the baseline
 * device's stages (received through the library's stage taps), measures each other device against them
 * as its stages arrive, applies the tolerances and writes the report; cmd_compare.c runs the devices. */
#ifndef VKASR_CLI_COMPARE_H
#define VKASR_CLI_COMPARE_H

#include "cli.h"
#include "vkasr_debug.h"

struct cmp_tensor {
    char name[16];
    int64_t index;
    size_t rows, cols;
    float *data;
};

struct cmp_token {
    int32_t id, duration;
    int64_t frame;
};

/* What the first device computed: every stage, every decoder step, the tokens and the transcript. */
struct cmp_baseline {
    const char *device;            /* as given in --devices                                     */
    vkasr_model_info info;
    struct cmp_tensor *stages;
    size_t nstages, capstages;
    float *logits;                 /* nsteps x logit_cols                                       */
    vkasr_decoder_step *steps;
    size_t nsteps, logit_cols, capsteps, caplogits;
    struct cmp_token *tokens;
    size_t ntokens;
    char *text;
    uint64_t int8_products;        /* linear products its device ran on an int8 path             */
    bool out_of_memory;
};

/* One tensor stage of another device against the baseline's. */
struct cmp_stage {
    char name[16];
    int64_t index;
    size_t rows, cols;             /* the baseline's shape                                      */
    bool seen, same_shape;
    double se, sa, max_abs;        /* sum (b - a)^2, sum a^2, max |b - a|                       */
    double tol;                    /* bound on the relative L2 error sqrt(se / sa)              */
};

/* The decoder's logits of another device against the baseline's, step by step. */
struct cmp_logits {
    bool forced;                   /* from a run teacher-forced with the baseline's choices      */
    size_t steps, compared;        /* steps the device took; steps compared with the baseline's */
    double se, sa, max_abs;        /* over the compared steps                                   */
    double worst_rel;              /* the largest relative L2 error of one step (what is judged) */
    int64_t worst_step;
    int64_t first_past_tol;        /* first step whose relative error exceeds tol, or -1        */
    int64_t first_past_int8;       /* the same against the int8 tolerance (cmp_result_set_int8)  */
    int64_t part_step, part_frame; /* first step where the choices differ, or -1                */
    double part_margin;            /* there: the baseline's logit margin between the two choices */
    size_t choices_differ;         /* compared steps whose choices differ                       */
    int64_t not_argmax_step;       /* first step whose choice is not the argmax of its own row  */
    bool not_argmax_baseline;      /* ... and whether that was the baseline's                   */
    double tol;
};

/* Another device measured against the baseline. */
struct cmp_result {
    const char *device;
    vkasr_model_info info;
    struct cmp_stage *stages;      /* in the baseline's order                                   */
    size_t nstages;
    struct cmp_logits logits;
    size_t ntokens;
    int64_t first_token_diff;      /* index of the first token that differs, or -1              */
    char *text;
    uint64_t int8_products;        /* linear products this device ran on an int8 path            */
    bool int8;                     /* the int8 tolerances apply (either device ran such products) */
    bool out_of_memory;
    /* while a run is in progress */
    const struct cmp_baseline *base;
    bool agree;                    /* the decoding paths have not parted yet                    */
};

/* Tolerance (bound on the relative L2 error) of a stage in a precision, and where either device ran
 * linear products on an int8 path (int8); docs/compare.md derives them. */
double cmp_tolerance(const char *stage, vkasr_precision precision, bool int8);

/* Stage callbacks (vkasr_debug_params.stage_callback): ud is the cmp_baseline / the cmp_result. */
void cmp_baseline_tap(const vkasr_stage *stage, void *ud);
void cmp_result_tap(const vkasr_stage *stage, void *ud);

/* After the baseline's run: its tokens and transcript. false when out of memory. */
bool cmp_baseline_finish(struct cmp_baseline *b, const vkasr_result *r);
void cmp_baseline_free(struct cmp_baseline *b);

/* Before another device's run: stage slots in the baseline's order, with the int8 tolerances when the
 * baseline ran int8 products. false when out of memory. */
bool cmp_result_init(struct cmp_result *c, const struct cmp_baseline *b, const char *device,
                     const vkasr_model_info *info);
/* After its run: tokens and transcript against the baseline's. */
bool cmp_result_finish(struct cmp_result *c, const vkasr_result *r);
/* Whether its decoding path parted from the baseline's (a transducer then reruns teacher-forced). */
bool cmp_paths_parted(const struct cmp_result *c);
/* Before the teacher-forced rerun: forget the logits of the free run. */
void cmp_result_force(struct cmp_result *c);
/* After its runs: the linear products its device ran on an int8 path (vkasr_model_int8_products); any
 * (or the baseline's) give the comparison the int8 tolerances. */
void cmp_result_set_int8(struct cmp_result *c, uint64_t products);
/* The first stage past its tolerance ("layer 3", "logits", ...), written into buf, or NULL. */
const char *cmp_first_failure(const struct cmp_result *c, char *buf, size_t size);
void cmp_result_free(struct cmp_result *c);

/* The report of every comparison: a table per device, or one JSON object. */
struct cmp_run_info {
    const char *model, *audio;
    double duration;
    vkasr_precision precision;
    const char *left_out;          /* a note on a default device left out, or NULL             */
};
void cmp_report_text(FILE *f, const struct cmp_run_info *ri, const struct cmp_baseline *b,
                     const struct cmp_result *c, size_t n);
void cmp_report_json(FILE *f, const struct cmp_run_info *ri, const struct cmp_baseline *b,
                     const struct cmp_result *c, size_t n);

#endif
