/* op_harness.h — runs an op on the device under test and on the C reference with identical random
 * inputs and compares: normalized MSE against a per-op bound, NaN/Inf agreement, and sentinel guard
 * regions around every device tensor (out-of-bounds writes). The device under test is Vulkan (the
 * Khronos validation layer on; any validation message fails the run), or the CUDA backend when
 * VKASR_TEST_DEVICE names it ("cuda", "cuda:N"; builds with -DVKASR_CUDA=ON). */
#ifndef VKASR_OP_HARNESS_H
#define VKASR_OP_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

enum { TH_REF = 0, TH_DEV = 1 }; /* the reference, the device under test */

struct th_tensor {
    be_dtype type;
    int nd;
    int64_t ne[BE_MAX_DIMS];
    void *host;            /* the input data, or the reference output after a run            */
    be_tensor side[2];     /* the tensor on the reference and on the device under test       */
    uint64_t dev_base;     /* start of the device allocation, guard included                 */
    uint64_t guard;        /* guard bytes on each side                                       */
};

struct th {
    struct be_device *dev[2];
    struct backend *be[2];
    bool vulkan;           /* the device under test is a Vulkan device (else CUDA)            */
    const char *dev_name;  /* "Vulkan" or "CUDA", for messages                               */
    uint64_t rng;
    int failures, checks, skipped;
    double f16_differ;     /* largest fraction of differing elements th_check_f16 saw         */
    char name[160];
    struct th_tensor *tensors[64];
    int ntensors;
};

/* Opens both backends; exits the test program (status 1) if the device under test cannot be opened. */
/* Registers the lab (tests/vk_lab.c: emulated tensor-core twins, older kernels) with the Vulkan
 * backend; th_open calls it, benchmarks call it first. Idempotent. */
void th_lab_register(void);
void th_open(struct th *h, bool want_f16);
/* Closes both; returns the process exit status (0 when every check passed and the validation layer
 * stayed silent). */
int th_close(struct th *h);
/* A group of checks that does not apply to the device under test (Vulkan kernel configurations on
 * CUDA, ...): printed as SKIP and counted apart, never as a pass. */
void th_skip(struct th *h, const char *what);

/* Starts a case (frees the previous case's tensors, resets scratch). */
void th_case(struct th *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Random input in [lo, hi) (I32, I64: integers in [lo, hi)), the same on both backends. */
struct th_tensor *th_input(struct th *h, be_dtype type, int nd, const int64_t *ne, float lo, float hi);
/* Input with given host data (copied). */
struct th_tensor *th_input_data(struct th *h, be_dtype type, int nd, const int64_t *ne, const void *data);
/* Output tensor (filled with a NaN pattern on the reference and sentinel pattern on the device). */
struct th_tensor *th_output(struct th *h, be_dtype type, int nd, const int64_t *ne);

#define TH_T(t, s) ((t)->side[s])

/* A linear op's case (the quantized and int8 tests' shapes and options). */
struct th_linear_case {
    int64_t M, N, K;
    be_dtype xt, yt;         /* x's and y's types (f32 or f16)                                      */
    bool bias, res, glu;     /* an f32 bias [N]; a residual [M, Ny] of y's type; GLU (Ny = N / 2)   */
    int act;
    float alpha;
    bool matvec;             /* the decoder's hint                                                  */
};
/* Its tensors and the op's arguments on both sides. */
struct th_linear {
    struct th_tensor *x, *w, *b, *r, *y;
    struct op_linear a[2];   /* [TH_REF], [TH_DEV] */
};
/* Makes a case's tensors around a given weight w [N, K]: x [M, K] uniform in [-1, 1), then the bias
 * and the residual (uniform in [-1, 1)) where asked, y [M, Ny]; fills l. */
void th_linear_setup(struct th *h, const struct th_linear_case *c, struct th_tensor *w, struct th_linear *l);

/* Runs the op on both sides (args[TH_REF], args[TH_DEV]); a failure to run counts as a failed check. */
bool th_run(struct th *h, enum op_id id, const void *args_ref, const void *args_dev);
/* Records an op on the Vulkan backend with a kernel configuration chosen by the test (vk_gemm_record,
 * vk_att_record, ...): Vulkan devices under test only. */
typedef vkasr_status (*th_record_fn)(struct backend *vk, const void *args, const void *cfg);
/* th_run with the device side validated by the op table and recorded by `record` with `cfg`. */
bool th_run_forced(struct th *h, enum op_id id, const void *args_ref, const void *args_dev, th_record_fn record,
                   const void *cfg);
/* Compares an output: NaN/Inf positions, NMSE <= tol (tol 0: bit-exact), device guards intact. */
bool th_check(struct th *h, struct th_tensor *out, double tol);
/* Compares an output elementwise: NaN/Inf positions, max |device - reference| <= max_abs, guards. */
bool th_check_abs(struct th *h, struct th_tensor *out, double max_abs);
/* Checks an F16 output rounded once from f32 (ops.h): NMSE <= tol as th_check, and at most max_frac of
 * the elements (plus one) differing from the reference's at all: rounded alike, the device's f32
 * result and the reference's double one part only where they fall on either side of a rounding
 * boundary, while a rounding other than to nearest (or a missing one) differs on about half. */
bool th_check_f16(struct th *h, struct th_tensor *out, double tol, double max_frac);
/* Checks that the guard regions of every tensor in the case are intact (inputs included). */
bool th_check_guards(struct th *h);

uint64_t th_rand(struct th *h);
float th_uniform(struct th *h, float lo, float hi);

#define TH_SHAPE(...) ((const int64_t[]){__VA_ARGS__})

#endif
