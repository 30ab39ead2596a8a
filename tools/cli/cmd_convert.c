/* cmd_convert.c — `vkasr convert`: a Hugging Face directory (or GGUF) to vkasr's GGUF file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static void intro(FILE *f) {
    fputs("usage: vkasr convert MODEL -o OUT.gguf [--type f32|f16|q8_0|q6_k|q5_k|q4_k]\n"
          "\n"
          "Converts a Hugging Face Parakeet directory (or an f32/f16 vkasr GGUF) into vkasr's single-file\n"
          "GGUF: batch norm folded, layouts ready for the kernels, hyper-parameters and vocabulary included.\n"
          "Needs no GPU.\n",
          f);
}

struct convert_opts {
    const char *src, *dst;
    vkasr_weight_type type;
};

int arg_weight_type(const char *opt, const char *v, void *field) {
    (void)opt;
    static const struct {
        const char *name;
        vkasr_weight_type type;
    } types[] = {{"f32", VKASR_WEIGHTS_F32},   {"f16", VKASR_WEIGHTS_F16},   {"q8_0", VKASR_WEIGHTS_Q8_0},
                 {"q6_k", VKASR_WEIGHTS_Q6_K}, {"q5_k", VKASR_WEIGHTS_Q5_K}, {"q4_k", VKASR_WEIGHTS_Q4_K}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (!strcmp(v, types[t].name)) {
            *(vkasr_weight_type *)field = types[t].type;
            return EXIT_OK;
        }
    fprintf(stderr, "vkasr: unknown --type '%s' (f32, f16, q8_0, q6_k, q5_k, q4_k)\n", v);
    return EXIT_USAGE;
}

static int take_model(void *ctx, const char *arg) {
    struct convert_opts *o = ctx;
    if (o->src) {
        fprintf(stderr, "vkasr: convert takes one model ('%s' is extra)\n", arg);
        return EXIT_USAGE;
    }
    o->src = arg;
    return EXIT_OK;
}

static const struct cli_opt convert_table[] = {
    OPT_STRING("-o, --output", "OUT.gguf", ARG_FIELD(struct convert_opts, dst), "the file to write"),
    OPT_VALUE("--type", "T", ARG_FIELD(struct convert_opts, type), arg_weight_type,
     "the matrix weights: f16 (default, about half the size of f32: the\n"
     "encoder's; the decoder's stay f32), or ggml's quantized q8_0 (8.5 bits\n"
     "per weight), q6_k (6.56), q5_k (5.5), q4_k (4.5): the encoder's and the\n"
     "decoder's and joint's; a matrix whose rows the block does not divide\n"
     "takes the nearest type that fits (k-quants: q8_0; q8_0: f16, the\n"
     "decoder's f32). Norms, biases, convolution kernels and the embedding\n"
     "stay f32. f32: all in f32"),
};

static const struct cli_command convert_command = {
    CMD_CONVERT, "convert", intro, NULL, convert_table, sizeof convert_table / sizeof convert_table[0], take_model,
};

int cmd_convert(int argc, char **argv) {
    struct cli_common c = cli_common_default();
    struct convert_opts o = {.type = VKASR_WEIGHTS_F16};
    int rc = cli_parse(&convert_command, &c, &o, argc, argv);
    if (rc != EXIT_OK)
        return rc == ARGS_HELP ? EXIT_OK : rc;
    const char *src = o.src, *dst = o.dst;
    if (!src || !dst) {
        fprintf(stderr, "vkasr: convert needs MODEL and -o OUT.gguf (see vkasr convert --help)\n");
        return EXIT_USAGE;
    }
    vkasr_error err;
    vkasr_status st = vkasr_convert_decoder(src, dst, o.type, c.decoder, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        /* vkasr_convert reports source problems as model errors (exit 3) and keeps VKASR_ERR_IO for the
         * destination (exit 4). */
        return st == VKASR_ERR_IO ? EXIT_AUDIO : exit_code_for(st, 1);
    }
    fprintf(stderr, "vkasr: wrote %s (%s)\n", dst, err.message);
    return EXIT_OK;
}
