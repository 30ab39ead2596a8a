/* cmd_convert.c — `vkasr convert`: a Hugging Face directory (or GGUF) to vkasr's GGUF file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage_convert(FILE *f) {
    fprintf(f, "usage: vkasr convert MODEL -o OUT.gguf [--type f32|f16]\n"
               "\n"
               "Converts a Hugging Face Parakeet directory (or a vkasr GGUF) into vkasr's single-file GGUF:\n"
               "batch norm folded, layouts ready for the kernels, hyper-parameters and vocabulary included.\n"
               "--type f16 (default) stores the encoder's matrix weights in f16 (about half the size);\n"
               "norms, biases and the decoder stay f32. Needs no GPU.\n");
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
            if (!strcmp(v, "f32"))
                type = VKASR_WEIGHTS_F32;
            else if (!strcmp(v, "f16"))
                type = VKASR_WEIGHTS_F16;
            else {
                fprintf(stderr, "vkasr: unknown --type '%s' (f32, f16)\n", v);
                return EXIT_USAGE;
            }
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
    fprintf(stderr, "vkasr: wrote %s\n", dst);
    return EXIT_OK;
}
