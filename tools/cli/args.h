/* args.h — the CLI's option tables: each option declared once (names, the commands that take it, its
 * argument kind, its help); cli_parse() parses a command line and prints --help from the tables. */
#ifndef VKASR_CLI_ARGS_H
#define VKASR_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vkasr.h"

/* The commands that parse options through the tables. */
enum cli_cmd {
    CMD_TRANSCRIBE, CMD_LIVE, CMD_BENCH, CMD_COMPARE, CMD_CONVERT, CMD_DEVICES, CMD_SERVE, CMD_PULL, CMD_MODELS, CMD_COUNT
};
#define CMD_BIT(c) (1u << (c))

enum arg_kind {
    ARG_FLAG,   /* no value: sets the bool at `field`                         */
    ARG_ACTION, /* no value: calls parse(opt, NULL, field)                    */
    ARG_STRING, /* a value, kept as given in the const char * at `field`      */
    ARG_VALUE,  /* a value, converted by parse(opt, value, field)             */
    ARG_HELP,   /* prints the command's help                                  */
};

/* Converts or applies one option; EXIT_OK, or EXIT_USAGE after a message naming the option. */
typedef int (*arg_parse_fn)(const char *opt, const char *value, void *field);

struct cli_opt {
    const char *names;  /* every spelling, as help shows them: "-m, --model"; NULL: see below         */
    const char *meta;   /* the value's name in help ("PATH"); NULL without a value                   */
    enum arg_kind kind;
    size_t field;       /* offset of the destination in the table's options struct                    */
    arg_parse_fn parse; /* ARG_VALUE, ARG_ACTION                                                      */
    const char *help;   /* help lines, separated by '\n'                                              */
    unsigned cmds;      /* shared options: the CMD_BIT()s of the commands that take it                */
    const char *help_for[CMD_COUNT];           /* shared options: a command's own help text         */
    void (*describe)(char *buf, size_t size); /* help made at run time (defaults), instead of help  */
};
/* A command's table may hold, besides options, a heading (names NULL, help the heading's text) and
 * the place where the shared options other than -m are listed (ARGS_SHARED; default: at the end). */
#define ARGS_SHARED {0}
#define ARG_FIELD(type, member) offsetof(type, member)
/* Table entries: names, the value's name, the field's offset, the parser, the help. */
#define OPT_FLAG(n, f, h) {.names = (n), .kind = ARG_FLAG, .field = (f), .help = (h)}
#define OPT_ACTION(n, f, fn, h) {.names = (n), .kind = ARG_ACTION, .field = (f), .parse = (fn), .help = (h)}
#define OPT_STRING(n, m, f, h) {.names = (n), .meta = (m), .kind = ARG_STRING, .field = (f), .help = (h)}
#define OPT_VALUE(n, m, f, fn, h) \
    {.names = (n), .meta = (m), .kind = ARG_VALUE, .field = (f), .parse = (fn), .help = (h)}
#define OPT_HEADING(h) {.help = (h)}

/* The shared options' values (-m, -d, -p, -v, -np, --json). */
struct cli_common {
    const char *model;          /* -m; default $VKASR_MODEL              */
    const char *device;         /* -d; NULL: $VKASR_DEVICE or the best     */
    vkasr_precision precision;  /* -p; default AUTO                        */
    vkasr_decoder decoder;      /* --decoder; default AUTO                 */
    int threads;                /* --threads (0: the CPU backend's default) */
    int lookahead_ms;           /* --lookahead; 0: the model's first       */
    vkasr_subtitle_params subs; /* --max-line-chars ... --cue-pause (SRT, WebVTT) */
    const char *language;       /* --language; NULL: auto                  */
    bool verbose, no_prints, json;
};

struct cli_command {
    enum cli_cmd id;
    const char *name;               /* as typed after vkasr                                           */
    void (*intro)(FILE *f);         /* help before the options: usage lines and what the command does */
    void (*outro)(FILE *f);         /* help after them (NULL: none)                                    */
    const struct cli_opt *opts;     /* the command's own options                                       */
    size_t n_opts;
    int (*positional)(void *ctx, const char *arg); /* NULL: the command takes none                     */
};

enum { ARGS_HELP = -1 };

/* How a command uses the tables (cmd_bench.c, cmd_serve.c):
 *   1. its id in enum cli_cmd; CMD_BIT(id) in the `cmds` of the shared options it takes (args.c), with a
 *      help_for[id] text where their meaning differs for it;
 *   2. its own options in a table of OPT_* entries whose fields are offsets into its own options struct;
 *   3. cli_parse(&command, &common, &own, argc, argv); ARGS_HELP: exit 0; EXIT_USAGE: exit 2. */

/* The shared options' defaults. */
struct cli_common cli_common_default(void);
/* Parses argv (the arguments after the command's name) into common and ctx, the command's options
 * struct. EXIT_OK, ARGS_HELP (help printed on stdout) or EXIT_USAGE (a message on stderr). */
int cli_parse(const struct cli_command *c, struct cli_common *common, void *ctx, int argc, char **argv);
/* The command's help, from its tables. */
void cli_usage(const struct cli_command *c, FILE *f);
/* Model parameters from the shared options: device, precision, log level and callback. */
vkasr_model_params cli_model_params(const struct cli_common *common);

/* Parsers for options of several commands. */
int arg_precision(const char *opt, const char *value, void *field); /* f32|f16 -> vkasr_precision */
int arg_clear(const char *opt, const char *value, void *field);     /* sets a bool to false      */
/* --devices: a comma-separated list of non-empty device strings (each checked as -d when opened). */
int arg_devices(const char *opt, const char *value, void *field);
/* A byte count: a number with an optional K, M, G or T (binary units, optionally followed by B or iB). */
bool cli_parse_size(const char *s, uint64_t *out);
/* A decimal integer in [lo, hi], nothing after it (false otherwise, *out untouched). */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
int arg_decoder(const char *opt, const char *value, void *field);   /* auto|tdt|rnnt|ctc          */
/* f32|f16|q8_0|q6_k|q5_k|q4_k -> vkasr_weight_type (cmd_convert.c) */
int arg_weight_type(const char *opt, const char *value, void *field);
int arg_threads(const char *opt, const char *value, void *field);   /* 1..256, sets $VKASR_THREADS */
int arg_lookahead(const char *opt, const char *value, void *field); /* MS >= 1                    */
/* The subtitle limits' checks (vkasr_subtitle_cues()'s): EXIT_OK, or EXIT_USAGE after a message. */
int cli_check_subtitles(const vkasr_subtitle_params *p);

#endif
