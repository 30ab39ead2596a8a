/* fuzz_nemo_pickle.c — the restricted unpickler (pickle.c) on arbitrary bytes: it accepts only state
 * dicts of tensor descriptors, refuses the rest with a message naming the file, and never executes
 * anything. Seeds: tests/data/fuzz/nemo_pickle (data.pkl files of the .nemo fixtures). */
#include "fuzz.h"
#include "model/pickle.h"

#define NAME "fuzz/data.pkl"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pk_tensor *t = NULL;
    int n = 0;
    struct err e = {0};
    vkasr_status st = pickle_state_dict(NAME, data, size, &t, &n, &e);
    if (st != VKASR_OK) {
        FUZZ_CHECK(st == VKASR_ERR_MODEL || st == VKASR_ERR_NO_MEMORY, "status %d: %s", (int)st, e.msg);
        FUZZ_CHECK(strstr(e.msg, NAME) != NULL, "the message names no file: %s", e.msg);
        FUZZ_CHECK(t == NULL && n == 0, "output after an error");
        return 0;
    }
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(t[i].name && t[i].storage && t[i].nd >= 0 && t[i].nd <= PK_MAX_DIMS, "entry %d", i);
        FUZZ_CHECK(t[i].offset >= 0 && t[i].storage_numel >= 0, "entry %d: negative offset or size", i);
    }
    pickle_free(t, n);
    return 0;
}
