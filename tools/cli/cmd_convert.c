/* cmd_convert.c — `vkasr convert`: a Hugging Face directory (or GGUF) to vkasr's GGUF file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage_convert(FILE *f) {
    fprintf(f, "usage: vkasr convert MODEL -o OUT.gguf [--type f32|f16|q8_0|q6_k|q5_k|q4_k]\n"
               "\n"
               "Converts a Hugging Face Parakeet directory (or an f32/f16 vkasr GGUF) into vkasr's single-file\n"
               "GGUF: batch norm folded, layouts ready for the kernels, hyper-parameters and vocabulary included.\n"
               "--type sets the encoder's matrix weights: f16 (default, about half the size of f32), or ggml's\n"
               "quantized q8_0 (8.5 bits per weight), q6_k (6.56), q5_k (5.5), q4_k (4.5); a matrix whose rows\n"
               "the block does not divide takes the nearest type that fits (k-quants: q8_0; q8_0: f16).\n"
               "Norms, biases, convolution kernels and the decoder stay f32. Needs no GPU.\n");
}

int cmd_convert(int argc, char **argv) {
    const char *src = NULL, *dst = NULL;
    vkasr_weight_type type = VKASR_WEIGHTS_F16;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_convert(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(dst = arg_value(argc, argv, &i, a)))
                return EXIT_USAGE;
        } else if (!strcmp(a, "--type")) {
            if (!(v = arg_value(argc, argv, &i, a)))
                return EXIT_USAGE;
            static const struct {
                const char *name;
                vkasr_weight_type type;
            } types[] = {{"f32", VKASR_WEIGHTS_F32},   {"f16", VKASR_WEIGHTS_F16},   {"q8_0", VKASR_WEIGHTS_Q8_0},
                         {"q6_k", VKASR_WEIGHTS_Q6_K}, {"q5_k", VKASR_WEIGHTS_Q5_K}, {"q4_k", VKASR_WEIGHTS_Q4_K}};
            size_t t = 0;
            while (t < sizeof types / sizeof types[0] && strcmp(v, types[t].name) != 0)
                t++;
            if (t == sizeof types / sizeof types[0]) {
                fprintf(stderr, "vkasr: unknown --type '%s' (f32, f16, q8_0, q6_k, q5_k, q4_k)\n", v);
                return EXIT_USAGE;
            }
            type = types[t].type;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vkasr: unknown option '%s' (see vkasr convert --help)\n", a);
            return EXIT_USAGE;
        } else if (!src) {
            src = a;
        } else {
            fprintf(stderr, "vkasr: convert takes one model ('%s' is extra)\n", a);
            return EXIT_USAGE;
        }
    }
    if (!src || !dst) {
        fprintf(stderr, "vkasr: convert needs MODEL and -o OUT.gguf (see vkasr convert --help)\n");
        return EXIT_USAGE;
    }
    vkasr_error err;
    vkasr_status st = vkasr_convert(src, dst, type, &err);
    if (st != VKASR_OK) {
        fprintf(stderr, "vkasr: %s\n", err.message);
        /* vkasr_convert reports source problems as model errors (exit 3) and keeps VKASR_ERR_IO for the
         * destination (exit 4). */
        return st == VKASR_ERR_IO ? EXIT_AUDIO : exit_code_for(st, 1);
    }
    fprintf(stderr, "vkasr: wrote %s (%s)\n", dst, err.message);
    return EXIT_OK;
}
