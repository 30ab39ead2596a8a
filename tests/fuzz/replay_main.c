/* replay_main.c — runs a fuzz target outside libFuzzer: each file named on the command line, and each
 * regular file in a directory named there, goes once through LLVMFuzzerTestOneInput. CTest uses it to
 * replay the seed corpora and the regression inputs of tests/data/fuzz with any compiler; a finding
 * aborts (FUZZ_CHECK) or trips a sanitizer. Replaying nothing is an error, so a test cannot pass empty.
 * usage: replay_<target> FILE|DIR... */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            fprintf(stderr, "%s: out of memory\n", path);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *p = realloc(buf, cap * 2);
        if (!p)
            free(buf);
        buf = p;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    /* an exact-size copy, as libFuzzer passes: a sanitizer then sees a read one byte past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files of dir, in name order (a stable replay order). */
static int replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p)
                break;
            names = p;
        }
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(len)))
            break;
        snprintf(names[n], len, "%s/%s", dir, de->d_name);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (count >= 0 && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) {
            int r = replay_file(names[i]);
            count = r < 0 ? -1 : count + r;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        int r = S_ISDIR(sb.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
        if (r < 0)
            return 1;
        total += r;
    }
    printf("%d input(s) replayed\n", total);
    if (total == 0) {
        fprintf(stderr, "no inputs: nothing was tested\n");
        return 1;
    }
    return 0;
}
