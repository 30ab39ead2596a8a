/* main.c — the vkasr command-line tool: dispatches `vkasr <command>` to cmd_<command>.c.
 * Transcripts go to stdout; logs and the progress bar to stderr. Exit codes: 0 ok, 1 transcription
 * failure, 2 usage, 3 model, 4 audio/IO, 5 no device. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The commands, in the order --help lists them. */
static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"transcribe", cmd_transcribe, "transcribe audio files (vkasr transcribe --help)"},
    {"live", cmd_live, "transcribe audio as it arrives on standard input (vkasr live --help)"},
    {"pull", cmd_pull, "download a model by name into the Hugging Face cache (vkasr pull --help)"},
    {"models", cmd_models, "list the models in the Hugging Face cache"},
    {"devices", cmd_devices, "list Vulkan devices and the features vkasr uses"},
    {"convert", cmd_convert, "convert a Hugging Face model directory to vkasr's GGUF file"},
    {"compare", cmd_compare, "run one file on several devices and compare them stage by stage"},
    {"bench", cmd_bench, "time transcriptions of synthetic audio (vkasr bench --help)"},
#ifdef VKASR_SERVE
    {"serve", cmd_serve, "an OpenAI-compatible transcription server (vkasr serve --help)"},
#endif
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage_main(FILE *f) {
    fprintf(f, "usage: vkasr <command> [options]\n"
               "\n"
               "Speech recognition with NVIDIA Parakeet models (TDT, RNN-T, CTC) on any Vulkan GPU.\n"
               "\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n"
               "  --version    print the version\n"
               "  --help       print this help\n"
               "\n"
               "exit codes: 0 success, 1 transcription failed, 2 usage error, 3 model error,\n"
               "            4 audio or I/O error, 5 no usable Vulkan device\n");
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage_main(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("vkasr %s\n", vkasr_version_string());
        return EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "vkasr: unknown command '%s'\n\n", cmd);
    usage_main(stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    /* Every command's output must have reached stdout; fclose catches errors reported only on close.
     * EBADF: the caller closed stdout and nothing was written (a write would have failed the flush). */
    if (stdout_check() != EXIT_OK)
        return EXIT_AUDIO;
    if (fclose(stdout) != 0 && errno != EBADF) {
        fprintf(stderr, "vkasr: cannot write to standard output: %s\n", strerror(errno));
        return EXIT_AUDIO;
    }
    return rc;
}
