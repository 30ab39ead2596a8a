/* cmd_compare.c — `vkasr compare`: one audio file through the same model on several devices, each
 * measured stage by stage against the first (compare.c); exit 1 names the first stage past its tolerance. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "compare.h"

#define MAX_DEVICES 8

/* ref joins the default devices when params x frames + 5 x layers x d_model x frames^2 (x4 in f16) is
 * at most this: about a minute on one core (docs/compare.md). */
#define CPU_DEFAULT_BUDGET 5e10

static void intro(FILE *f) {
    fputs("usage: vkasr compare [-m MODEL] [--devices A,B[,C...]] [--precision f32|f16] [--json] AUDIO\n"
          "\n"
          "Runs AUDIO through the same model on several devices and compares what they compute, stage by\n"
          "stage: the mel features, the subsampling output, each conformer layer's output, the encoder\n"
          "output, the decoder's logits at every step (joint logits for TDT and RNN-T, frame logits for\n"
          "CTC), the tokens and the transcript. The first device is the baseline; every other one is\n"
          "measured against it. Use it to check a GPU and its driver against the C reference or another\n"
          "backend.\n",
          f);
}

static void outro(FILE *f) {
    fputs("\n"
          "Each stage gets its max-abs error, its relative L2 error ||b - a|| / ||a|| and a tolerance on the\n"
          "latter: mel 5e-4; every encoder tensor and the logits 2e-4 in f32, 1e-2 in f16. The logits are\n"
          "judged step by step. Where a near tie makes a transducer's choices differ, the other device runs\n"
          "again teacher-forced with the baseline's choices, so that every step is compared with the same\n"
          "token history; the tokens and transcripts shown are those of the free runs.\n"
          "\n"
          "exit codes: 0 every stage within its tolerance, 1 a stage past it (named on stderr) or a run\n"
          "            failed, 2 usage error, 3 model error, 4 audio error, 5 a device missing or unusable\n",
          f);
}

/* compare's own options and its one input. */
struct compare_opts {
    const char *devices, *audio;
};

static int take_audio(void *ctx, const char *arg) {
    struct compare_opts *o = ctx;
    if (o->audio) {
        fprintf(stderr, "vkasr: compare takes one audio file ('%s' and '%s' given)\n", o->audio, arg);
        return EXIT_USAGE;
    }
    o->audio = arg;
    return EXIT_OK;
}

static const struct cli_opt compare_table[] = {
    OPT_STRING("--devices", "LIST", ARG_FIELD(struct compare_opts, devices),
     "comma-separated devices, the baseline first: vulkan (the best Vulkan\n"
     "device), vulkan:N or vulkan:NAME, cuda or cuda:N (builds with CUDA),\n"
     "cpu (the CPU backend), ref (the plain-C reference backend). Default:\n"
     "vulkan where a Vulkan device is usable, then cuda when this build has\n"
     "it and finds a GPU, then cpu, then ref when the model and audio\n"
     "are small enough for it: parameters x frames + 5 x layers x d_model x\n"
     "frames^2 <= 5e10 (a quarter of that in f16; about a minute; frames:\n"
     "encoder frames, 12.5 a second)"),
};

static const struct cli_command compare_command = {
    CMD_COMPARE, "compare", intro, outro, compare_table, sizeof compare_table / sizeof compare_table[0], take_audio,
};

struct device_list {
    const char *name[MAX_DEVICES];
    bool optional[MAX_DEVICES];    /* a default device: skipped when absent                    */
    size_t n;
};

/* --devices A,B,...: split in place. */
static int parse_devices(char *list, struct device_list *d) {
    d->n = 0;
    for (char *p = list;; p++) {
        char *end = strchr(p, ',');
        if (end)
            *end = '\0';
        if (!*p || d->n == MAX_DEVICES) {
            fprintf(stderr, "vkasr: --devices needs 2 to %d comma-separated devices\n", MAX_DEVICES);
            return EXIT_USAGE;
        }
        d->name[d->n++] = p;
        if (!end)
            break;
        p = end;
    }
    if (d->n < 2) {
        fprintf(stderr, "vkasr: --devices needs at least two devices to compare (e.g. cpu,ref)\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The default: the best Vulkan device, CUDA, the CPU backend and the reference, each where available
 * (ref: by size, decided once the first device has run). */
static void default_devices(struct device_list *d) {
    vkasr_device_info info[16];
    size_t n = 0;
    vkasr_error err;
    bool vulkan = false;
    if (vkasr_list_devices(info, 16, &n, &err) == VKASR_OK)
        for (size_t i = 0; i < n && i < 16; i++)
            vulkan |= info[i].usable && !strcmp(info[i].backend, "vulkan");
    d->n = 0;
    if (vulkan)
        d->name[d->n++] = "vulkan";
    d->optional[d->n] = true;
    d->name[d->n++] = "cuda";
    d->name[d->n++] = "cpu";
    d->optional[d->n] = true;
    d->name[d->n++] = "ref";
}

static bool cpu_affordable(const vkasr_model_info *mi, double frames, vkasr_precision prec) {
    double units = (double)mi->n_params * frames + 5.0 * mi->n_layers * mi->d_model * frames * frames;
    return units * (prec == VKASR_PRECISION_F16 ? 4 : 1) <= CPU_DEFAULT_BUDGET;
}

static double encoder_frames(const struct cmp_baseline *b) {
    for (size_t i = 0; i < b->nstages; i++)
        if (!strcmp(b->stages[i].name, "encoder"))
            return (double)b->stages[i].rows;
    return 0;
}

/* One device: model and session. Returns EXIT_OK, or (after a message) an exit code; *absent: an
 * optional device that is not there (left out, no error). */
static int open_device(const char *model, const char *device, vkasr_precision prec, vkasr_decoder dec,
                       bool optional, bool *absent, vkasr_model **m, vkasr_session **s) {
    vkasr_model_params mp = vkasr_model_params_default();
    mp.device = device;
    mp.precision = prec;
    mp.decoder = dec;
    mp.log_callback = log_to_stderr;
    vkasr_error err;
    *absent = false;
    vkasr_status st = vkasr_model_load(model, &mp, m, &err);
    if (st != VKASR_OK && optional && (st == VKASR_ERR_UNSUPPORTED || st == VKASR_ERR_NO_DEVICE)) {
        *absent = true;
        return EXIT_OK;
    }
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s: %s\n", device, err.message);
        /* a device this build cannot serve ("cuda" without the CUDA build) is a usage error */
        return st == VKASR_ERR_UNSUPPORTED && !strncmp(device, "cuda", 4) ? EXIT_USAGE : exit_code_for(st, 1);
    }
    st = vkasr_session_create(*m, s, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s: %s\n", device, err.message);
        vkasr_model_free(*m);
        return exit_code_for(st, 1);
    }
    return EXIT_OK;
}

/* Transcribes with the stage taps on (and teacher forcing when forced is set). */
static int run(vkasr_session *s, const char *device, const char *audio, vkasr_stage_callback tap, void *ud,
               const struct cmp_baseline *forced, const vkasr_result **r) {
    vkasr_debug_params dp = vkasr_debug_params_default();
    dp.stage_callback = tap;
    dp.stage_user_data = ud;
    if (forced) {
        dp.forced_steps = forced->steps;
        dp.n_forced_steps = forced->nsteps;
    }
    vkasr_transcribe_params tp = vkasr_transcribe_params_default();
    tp.abort_callback = cli_should_abort;
    vkasr_status st = vkasr_session_set_debug(s, &dp);
    if (st == VKASR_OK)
        st = vkasr_transcribe_file(s, audio, &tp, r);
    if (st == VKASR_ABORTED)
        return 128 + interrupted;
    if (st != VKASR_OK) {
        const char *msg = vkasr_session_last_error(s);
        fprintf(stderr, "vkasr: %s: %s\n", device, msg);
        return exit_code_for(st, 0);
    }
    return EXIT_OK;
}

/* Runs the devices in order: the first becomes the baseline, each other is compared against it. */
static int compare_devices(const char *model, const char *audio, const struct device_list *dl, vkasr_precision prec,
                           vkasr_decoder dec, bool verbose, struct cmp_baseline *base, struct cmp_result *res,
                           size_t *nres, struct cmp_run_info *ri, char *note, size_t note_size) {
    bool have_base = false;
    *nres = 0;
    for (size_t i = 0; i < dl->n; i++) {
        const char *dev = dl->name[i];
        if (dl->optional[i] && !strcmp(dev, "ref")) {
            double frames = encoder_frames(base);
            if (!have_base)
                continue; /* nothing to compare it with */
            if (!cpu_affordable(&base->info, frames, prec)) {
                snprintf(note, note_size, "ref (the reference backend would need well over a minute for %.1fM "
                         "parameters and %.0f frames; name it in --devices to run it anyway)",
                         base->info.n_params / 1e6, frames);
                ri->left_out = note;
                continue;
            }
        }
        vkasr_model *m = NULL;
        vkasr_session *s = NULL;
        bool absent;
        double t0 = now_s();
        int rc = open_device(model, dev, prec, dec, dl->optional[i], &absent, &m, &s);
        if (rc != EXIT_OK)
            return rc;
        if (absent) {
            if (verbose)
                fprintf(stderr, "vkasr: compare: no %s device here; left out\n", dev);
            continue;
        }
        vkasr_model_info info;
        vkasr_model_get_info(m, &info);
        const vkasr_result *r = NULL;
        struct cmp_result *c = &res[*nres];
        if (!have_base) {
            base->device = dev;
            base->info = info;
            rc = run(s, dev, audio, cmp_baseline_tap, base, NULL, &r);
            if (rc == EXIT_OK && !cmp_baseline_finish(base, r))
                rc = EXIT_FAIL;
            base->int8_products = vkasr_model_int8_products(m);
            if (rc == EXIT_OK) {
                ri->duration = vkasr_result_duration(r);
                have_base = true;
            }
        } else if (!cmp_result_init(c, base, dev, &info)) {
            rc = EXIT_FAIL;
        } else {
            ++*nres;
            rc = run(s, dev, audio, cmp_result_tap, c, NULL, &r);
            if (rc == EXIT_OK && !cmp_result_finish(c, r))
                rc = EXIT_FAIL;
            if (rc == EXIT_OK && cmp_paths_parted(c)) {
                if (verbose)
                    fprintf(stderr, "vkasr: compare: %s: decoding parts from %s's at step %lld; running it again "
                                    "teacher-forced\n", dev, base->device, (long long)c->logits.part_step);
                cmp_result_force(c);
                rc = run(s, dev, audio, cmp_result_tap, c, base, &r);
            }
            cmp_result_set_int8(c, vkasr_model_int8_products(m));
            if (c->out_of_memory)
                rc = EXIT_FAIL;
        }
        if (base->out_of_memory) {
            fprintf(stderr, "vkasr: compare: out of host memory keeping %s's stages\n", base->device);
            rc = EXIT_FAIL;
        }
        if (verbose && rc == EXIT_OK)
            fprintf(stderr, "vkasr: compare: %s (%s): %.1f s\n", dev, info.device_name, now_s() - t0);
        vkasr_session_free(s);
        vkasr_model_free(m);
        if (rc != EXIT_OK)
            return rc;
    }
    if (*nres == 0) {
        fprintf(stderr, "vkasr: compare needs two devices; %s%s%s (use --devices, e.g. --devices cpu,ref)\n",
                have_base ? "only one was available" : "none was available", ri->left_out ? "; left out: " : "",
                ri->left_out ? ri->left_out : "");
        return EXIT_DEVICE;
    }
    return EXIT_OK;
}

int cmd_compare(int argc, char **argv) {
    char default_path[4096];
    struct cli_common c = cli_common_default();
    c.precision = VKASR_PRECISION_F32;
    struct compare_opts o = {0};
    int rc = cli_parse(&compare_command, &c, &o, argc, argv);
    if (rc == ARGS_HELP)
        return EXIT_OK;
    const char *model = c.model, *audio = o.audio;
    char *devices = (char *)o.devices; /* split in place: an argv string */
    vkasr_precision prec = c.precision;
    bool json = c.json, verbose = c.verbose;
    if (rc == EXIT_OK && !audio) {
        fprintf(stderr, "vkasr: no audio input given (see vkasr compare --help)\n");
        rc = EXIT_USAGE;
    }
    struct device_list dl = {0};
    if (rc == EXIT_OK && devices)
        rc = parse_devices(devices, &dl);
    if (rc == EXIT_OK)
        rc = model_or_default(model, default_path, sizeof default_path, &model);
    if (rc != EXIT_OK)
        return rc;
    if (!devices)
        default_devices(&dl);

    catch_interrupts();
    struct cmp_baseline base = {0};
    struct cmp_result res[MAX_DEVICES];
    size_t nres = 0;
    char note[256];
    struct cmp_run_info ri = {.model = model, .audio = audio, .precision = prec};
    rc = compare_devices(model, audio, &dl, prec, c.decoder, verbose, &base, res, &nres, &ri, note, sizeof note);
    if (rc == EXIT_OK) {
        if (json)
            cmp_report_json(stdout, &ri, &base, res, nres);
        else
            cmp_report_text(stdout, &ri, &base, res, nres);
        for (size_t k = 0; k < nres; k++) {
            char label[32];
            if (cmp_first_failure(&res[k], label, sizeof label)) {
                fprintf(stderr, "vkasr: compare: %s and %s part at stage %s (past its tolerance)\n", res[k].device,
                        base.device, label);
                rc = EXIT_FAIL;
            }
        }
    }
    for (size_t k = 0; k < nres; k++)
        cmp_result_free(&res[k]);
    cmp_baseline_free(&base);
    return rc;
}
