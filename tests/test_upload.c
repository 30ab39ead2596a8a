/* test_upload.c — host-to-device uploads of every size, checked byte for byte: pieces of 1 byte to 40
 * MiB, 150 MiB in all, into one device tensor (downloads between them, reading what the pieces before
 * wrote), then the whole tensor downloaded and compared. Under VKASR_FORCE_STAGING the pieces cross the
 * staging buffer's halves many times (vk_backend.c: a full half goes to the device while the other one
 * fills). The device: op_harness.h's device under test (th_open). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

#define TOTAL (150ull << 20)

static unsigned char pattern(uint64_t i) { return (unsigned char)((i * 2654435761u) >> 13); }

int main(void) {
    struct th h;
    th_open(&h, false); /* the device under test as the op tests pick it; exits when it cannot open */
    struct backend *b = h.be[TH_DEV];
    uint64_t addr = 0;
    if (be_alloc(b, BE_POOL_SCRATCH, TOTAL, &addr)) {
        printf("FAIL: %llu MiB of device memory: %s\n", (unsigned long long)(TOTAL >> 20), b->err.msg);
        th_close(&h);
        return 1;
    }
    unsigned char *src = malloc(TOTAL), *got = malloc(TOTAL);
    int failures = 0, pieces = 0;
    for (uint64_t i = 0; src && i < TOTAL; i++)
        src[i] = pattern(i);
    static const uint64_t sizes[] = {1, 40ull << 20, 4096, (3ull << 20) + 5, 17ull << 20, 33ull << 20, 7, 1ull << 20};
    for (uint64_t at = 0, k = 0; src && got && at < TOTAL && !failures; k++, pieces++) {
        uint64_t n = sizes[k % (sizeof sizes / sizeof *sizes)];
        n = n < TOTAL - at ? n : TOTAL - at;
        if (be_upload(b, addr + at, src + at, n)) {
            printf("FAIL: upload of %llu bytes at %llu: %s\n", (unsigned long long)n, (unsigned long long)at, b->err.msg);
            failures++;
        }
        at += n;
        if (k % 5 == 4) { /* a download between uploads: the bytes so far */
            if (be_download(b, got, addr, at) || memcmp(got, src, at) != 0) {
                printf("FAIL: download of the first %llu bytes after %d uploads: %s\n", (unsigned long long)at,
                       pieces + 1, b->err.msg[0] ? b->err.msg : "bytes differ");
                failures++;
            }
        }
    }
    if (src && got && !failures) {
        memset(got, 0, TOTAL);
        if (be_download(b, got, addr, TOTAL)) {
            printf("FAIL: download: %s\n", b->err.msg);
            failures++;
        }
        for (uint64_t i = 0; i < TOTAL && failures < 10; i++)
            if (got[i] != src[i])
                printf("FAIL: byte %llu is %u, uploaded %u\n", (unsigned long long)i, got[i], src[i]), failures++;
    }
    if (!src || !got)
        printf("FAIL: out of host memory\n"), failures++;
    printf("%s: %d uploads, %llu MiB on %s, %d failure(s)\n", failures ? "FAIL" : "PASS", pieces,
           (unsigned long long)(TOTAL >> 20), h.dev[TH_DEV]->info.name, failures);
    free(src);
    free(got);
    const int rc = th_close(&h); /* also fails on validation reports */
    return failures ? 1 : rc;
}
