/* fuzz.h — what the fuzz targets of tests/fuzz share: the libFuzzer entry point, FUZZ_CHECK (an
 * invariant of the code under test; a violation aborts, which libFuzzer and the replay driver report
 * as a finding) and a reader that turns input bytes into structured values.
 * Each target is one fuzz_<name>.c; replay_main.c runs them on files outside libFuzzer (CTest). */
#ifndef VKASR_FUZZ_H
#define VKASR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                          \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                              \
            fputc('\n', stderr);                                                                       \
            abort();                                                                                   \
        }                                                                                              \
    } while (0)

/* Keeps a value the target computed only to read memory (so the reads are not optimised away). */
#define FUZZ_SINK(v) __asm__ volatile("" : : "r"((unsigned)(v)))

/* Consumes the input front to back; past the end every value is 0 / empty. */
struct fuzz_reader {
    const uint8_t *p;
    size_t n;
};

static inline uint32_t fuzz_u8(struct fuzz_reader *r) {
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static inline uint32_t fuzz_u16(struct fuzz_reader *r) {
    uint32_t lo = fuzz_u8(r);
    return lo | fuzz_u8(r) << 8;
}

/* A string of up to `max` bytes: its length is the next byte, then that many bytes (fewer at the end).
 * Returned malloc'd and NUL-terminated; NUL bytes in the input end the string early, as C strings do. */
static inline char *fuzz_str(struct fuzz_reader *r, size_t max) {
    size_t len = fuzz_u8(r);
    if (len > max)
        len = max;
    if (len > r->n)
        len = r->n;
    char *s = malloc(len + 1);
    FUZZ_CHECK(s != NULL, "out of memory");
    memcpy(s, r->p, len);
    s[len] = '\0';
    r->p += len;
    r->n -= len;
    return s;
}

/* Well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF): an oracle written apart from
 * the library's and the CLI's own checks. */
static inline int fuzz_utf8_ok(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || i + len > n)
            return 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

#endif
