/* cli_common.c — helpers every vkasr command uses: exit codes, stdout checks,
 * logging, the progress bar and Ctrl-C handling. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int exit_code_for(vkasr_status st, int model_stage) {
    switch (st) {
    case VKASR_OK: return EXIT_OK;
    case VKASR_ERR_NO_DEVICE: return EXIT_DEVICE;
    case VKASR_ERR_AUDIO: return EXIT_AUDIO;
    case VKASR_ERR_IO: return model_stage ? EXIT_MODEL : EXIT_AUDIO;
    case VKASR_ERR_MODEL: return EXIT_MODEL;
    default: return model_stage ? EXIT_MODEL : EXIT_FAIL;
    }
}

int exit_code_for_load(vkasr_status st, const vkasr_model_params *mp) {
    /* the one invalid argument a model decides: a --lookahead it was not trained with (a usage error) */
    if (st == VKASR_ERR_INVALID_ARG && mp && mp->lookahead_ms != 0)
        return EXIT_USAGE;
    return exit_code_for(st, 1);
}

int cli_check_language(const vkasr_model *m, const char *language) {
    vkasr_error err;
    if (vkasr_model_check_language(m, language, NULL, &err) == VKASR_OK)
        return EXIT_OK;
    fprintf(stderr, "vkasr: --language: %s\n", err.message);
    return EXIT_USAGE;
}

int check_device_backend(const char *device) {
    const char *from = "--device";
    if (!device || !*device) {
        device = getenv("VKASR_DEVICE");
        from = "$VKASR_DEVICE";
    }
    if (device && strncmp(device, "cuda", 4) == 0 && (device[4] == '\0' || device[4] == ':') &&
        !vkasr_has_backend("cuda")) {
        fprintf(stderr, "vkasr: %s %s: this vkasr was built without the CUDA backend (configure with "
                        "-DVKASR_CUDA=ON); devices here: cpu[:THREADS], ref, vulkan[:N|NAME], N, NAME\n", from, device);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* Flushes stdout and reports a failed write once (a full disk, a closed pipe): a transcript that did not
 * reach its destination must not exit 0. Returns EXIT_AUDIO (I/O error) on failure. */
int stdout_check(void) {
    static bool reported;
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return EXIT_OK;
    if (!reported)
        fprintf(stderr, "vkasr: cannot write to standard output: %s\n", errno ? strerror(errno) : "write error");
    reported = true;
    return EXIT_AUDIO;
}

int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

void log_to_stderr(vkasr_log_level level, const char *msg, void *ud) {
    static const char *const names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "vkasr: %s: %s\n", level < 4 ? names[level] : "log", msg);
}

/* ---- progress bar ---- */

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void on_progress(const vkasr_progress *p, void *ud) {
    struct progress_ctx *c = ud;
    int pct = (int)(p->fraction * 100.0f + 0.5f);
    if (!c->enabled || pct == c->last_pct)
        return;
    c->last_pct = pct;
    double el = now_s() - c->t0;
    double rtf = p->audio_seconds_done > 0 ? el / p->audio_seconds_done : 0.0;
    int fill = pct / 4;
    fprintf(stderr, "\r[%.*s%*s] %3d%%  %.1f/%.1f s  RTF %.3f  %-8s", fill, "=========================", 25 - fill, "",
            pct, p->audio_seconds_done, p->audio_seconds_total, rtf, p->stage);
    fflush(stderr);
}

/* ---- interruption ---- */

/* The first SIGINT or SIGTERM asks the library to stop (its abort callback) so that what was transcribed
 * so far is still printed and written; a second one ends the process at once. */
volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    if (interrupted) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    interrupted = sig;
}

bool cli_should_abort(void *ud) { return interrupted != 0; }

void cli_test_hold_exit(void) {
    const char *v = getenv("VKASR_TEST_HOLD_EXIT_MS");
    const long ms = v && *v ? strtol(v, NULL, 10) : 0;
    if (ms <= 0 || ms > 60000)
        return;
    fprintf(stderr, "vkasr: VKASR_TEST_HOLD_EXIT_MS: holding %ld ms before exit\n", ms);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (!interrupted && nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

void catch_interrupts(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
