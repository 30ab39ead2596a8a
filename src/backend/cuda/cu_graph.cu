/* cu_graph.cu — recorded sequences of ops (backend.h be_graph_*) as CUDA graphs: the ops between
 * graph_begin and graph_end are captured from the backend's stream (thread-local capture mode), the
 * graph is instantiated once, and each replay is a cudaGraphLaunch on the same stream, behind the work
 * queued before it. The ops the device-resident search records only launch kernels and cuBLASLt
 * products on scratch that exists already (planned) with the backend's own workspace: nothing that
 * allocates or waits. Anything that would (an upload, a download, a sync) is refused while capturing. */
#include <stdlib.h>

#include "cu_internal.h"

struct be_graph {
    cudaGraphExec_t exec;
};

vkasr_status cu_not_capturing(struct cu_backend *b, const char *what) {
    if (!b->capturing)
        return VKASR_OK;
    return err_set(&b->base.err, VKASR_ERR_INTERNAL, "CUDA backend: %s while an op sequence is being recorded", what);
}

void cu_graph_abort(struct cu_backend *b) {
    if (!b->capturing)
        return;
    cudaGraph_t g = NULL;
    cudaStreamEndCapture(b->stream, &g); /* an invalidated capture ends with an error and no graph */
    if (g)
        cudaGraphDestroy(g);
    cudaGetLastError(); /* the capture's own error is not sticky; the op's error is what gets reported */
    b->capturing = false;
    b->capture_failed = true;
}

/* A predicate is accepted and not used: every replay runs its ops (conditional graph nodes could skip
 * them). */
vkasr_status cu_graph_begin(struct backend *bb, const be_tensor *predicate) {
    (void)predicate;
    struct cu_backend *b = (struct cu_backend *)bb;
    if (b->capturing)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "an op sequence is already being recorded");
    if (b->d->profile) /* per-op events would become graph nodes whose times cannot be read */
        return err_set(&bb->err, VKASR_ERR_UNSUPPORTED, "op sequences are not recorded while profiling");
    TRY(cu_use_device(b->d, &bb->err));
    CU_CHECK(&bb->err, cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal));
    b->capturing = true;
    b->capture_failed = false;
    return VKASR_OK;
}

vkasr_status cu_graph_end(struct backend *bb, struct be_graph **out) {
    struct cu_backend *b = (struct cu_backend *)bb;
    *out = NULL;
    if (b->capture_failed) { /* an op failed while recording: its error stays the one reported */
        b->capture_failed = false;
        if (bb->err.code != VKASR_OK)
            return bb->err.code;
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "CUDA graph: the recording was abandoned after an op failed");
    }
    if (!b->capturing)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "no op sequence is being recorded");
    b->capturing = false;
    cudaGraph_t g = NULL;
    cudaError_t r = cudaStreamEndCapture(b->stream, &g);
    if (r != cudaSuccess) {
        if (g)
            cudaGraphDestroy(g);
        return cu_fail(&bb->err, r, "cudaStreamEndCapture (an op of the sequence was not capturable)", __FILE__,
                       __LINE__);
    }
    if (!g)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "cudaStreamEndCapture returned no graph");
    struct be_graph *out_g = (struct be_graph *)calloc(1, sizeof *out_g);
    if (!out_g) {
        cudaGraphDestroy(g);
        return err_set(&bb->err, VKASR_ERR_NO_MEMORY, "out of host memory");
    }
    r = cudaGraphInstantiate(&out_g->exec, g, 0);
    cudaGraphDestroy(g); /* the executable graph is independent of it */
    if (r != cudaSuccess) {
        free(out_g);
        return cu_fail(&bb->err, r, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
    *out = out_g;
    return VKASR_OK;
}

vkasr_status cu_graph_run(struct backend *bb, struct be_graph *g, uint32_t times) {
    struct cu_backend *b = (struct cu_backend *)bb;
    if (!g || b->capturing)
        return err_set(&bb->err, VKASR_ERR_INTERNAL, "replay of %s", g ? "a graph while recording one" : "no graph");
    TRY(cu_use_device(b->d, &bb->err));
    for (uint32_t i = 0; i < times; i++)
        CU_CHECK(&bb->err, cudaGraphLaunch(g->exec, b->stream));
    return VKASR_OK;
}

void cu_graph_free(struct backend *bb, struct be_graph *g) {
    struct cu_backend *b = (struct cu_backend *)bb;
    if (!g)
        return;
    /* pending replays finish first; on a failure here there is nothing better to do than destroy */
    if (!b->capturing && cu_use_device(b->d, &bb->err) == VKASR_OK && cu_stream_sync(b) != VKASR_OK)
        LOG_WARN(b->d->base.log, "CUDA graph: waiting for its replays before destroying it failed: %s", bb->err.msg);
    cudaGraphExecDestroy(g->exec);
    free(g);
}
