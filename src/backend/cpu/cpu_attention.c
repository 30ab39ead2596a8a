/* cpu_attention.c — the CPU backend's relative-position attention (ops.h: op_relpos_attention; local
 * windows, packed batches and the chunked mask included): per head and chunk of query rows, the content
 * scores (q+u) k^T and the position scores (q+v) p^T over the chunk's band of p rows through the product
 * kernel (cpu_gemm.c), the masked softmax in f32 (max-subtracted, as the reference's) and the weights
 * times v over each row's own keys in key order: a row's result depends only on its position and its
 * keys, never on the chunk it lands in. Scores exist for one chunk of rows at a time per thread (QCHUNK
 * rows by the chunk's keys), never T x T. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define QCHUNK 64 /* query rows per task */

struct att {
    const struct op_relpos_attention *a;
    const float *k, *v, *p; /* [Tk|P, D] f32: the tensors themselves, or widened / rounded copies */
    int64_t Tq, Tk, D, H, dk, P, center, chunks;
    float scale;
    vkasr_status st;
};

static float as_input(float x, bool f16) { return f16 ? half_to_float(float_to_half(x)) : x; }

/* The key positions query position i may score: [*lo, *hi) (empty when hi <= lo). */
static void key_span(const struct att *A, int64_t i, int64_t *lo, int64_t *hi) {
    const struct op_relpos_attention *a = A->a;
    int64_t l = a->k_pos0, h = a->k_pos0 + A->Tk;
    h = h < a->n_valid ? h : a->n_valid;
    if (a->window > 0) {
        l = l > i - a->window ? l : i - a->window;
        h = h < i + a->window + 1 ? h : i + a->window + 1;
    }
    int64_t base = 0; /* the query's segment start: the chunked mask's anchor */
    if (a->seg.addr) {
        const int64_t sg = ref_seg_find(&a->seg, i), *o = ref_i64(&a->seg);
        l = l > o[sg] ? l : o[sg];
        h = h < o[sg + 1] ? h : o[sg + 1];
        base = o[sg];
    }
    if (a->chunk > 0) { /* chunked_limited: its own chunk and left_chunks before it */
        const int64_t ci = (i - base) / a->chunk;
        const int64_t c0 = base + a->chunk * (ci > a->left_chunks ? ci - a->left_chunks : 0);
        const int64_t c1 = base + a->chunk * (ci + 1);
        l = l > c0 ? l : c0;
        h = h < c1 ? h : c1;
    }
    /* p must hold row center - (i - j) */
    l = l > i - A->center ? l : i - A->center;
    h = h < i + (A->P - 1 - A->center) + 1 ? h : i + (A->P - 1 - A->center) + 1;
    *lo = l;
    *hi = h;
}

/* Task t: head t / chunks, query rows [c*QCHUNK, ..) of chunk c = t % chunks. */
CPU_KERNEL CPU_CLONES static void att_task(void *ctx, int64_t t0, int64_t t1) {
    struct att *A = ctx;
    const struct op_relpos_attention *a = A->a;
    const int64_t D = A->D, dk = A->dk;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t h = t / A->chunks, r0 = (t % A->chunks) * QCHUNK;
        const int64_t r1 = r0 + QCHUNK < A->Tq ? r0 + QCHUNK : A->Tq, rows = r1 - r0;
        /* the union of the rows' key spans (positions), and the rows with none get zeros */
        int64_t jlo = INT64_MAX, jhi = INT64_MIN;
        for (int64_t li = r0; li < r1; li++) {
            const int64_t i = a->q_pos0 + li;
            int64_t lo, hi;
            key_span(A, i, &lo, &hi);
            if (i < a->n_valid && lo < hi) {
                jlo = lo < jlo ? lo : jlo;
                jhi = hi > jhi ? hi : jhi;
            } else {
                for (int64_t d = 0; d < dk; d++)
                    cpu_put(&a->y, (uint64_t)(li * D + h * dk + d), 0.0f);
            }
        }
        if (jlo >= jhi)
            continue;
        /* p rows of the chunk: center - (i - j) over its rows and keys */
        const int64_t ilo = a->q_pos0 + r0, ihi = a->q_pos0 + r1 - 1;
        const int64_t plo = A->center - (ihi - jlo) > 0 ? A->center - (ihi - jlo) : 0;
        const int64_t phi = A->center - (ilo - (jhi - 1)) < A->P - 1 ? A->center - (ilo - (jhi - 1)) : A->P - 1;
        const int64_t nk = jhi - jlo, np = phi - plo + 1;
        const int64_t nmax = nk > np ? nk : np;
        const size_t need = (size_t)(2 * rows * dk + rows * nk + rows * np + rows * dk) + cpu_gemm_pack_floats(nmax);
        float *buf = cpu_scratch_floats(CPU_SCRATCH_PACK, need);
        if (!buf) {
            A->st = VKASR_ERR_NO_MEMORY; /* any task's store: the op fails */
            return;
        }
        float *pack = buf, *qu = pack + cpu_gemm_pack_floats(nmax), *qv = qu + rows * dk, *s = qv + rows * dk;
        float *bd = s + rows * nk, *o = bd + rows * np;
        const float *u = ref_f32(&a->bias_u) + h * dk, *bv = ref_f32(&a->bias_v) + h * dk;
        for (int64_t li = 0; li < rows; li++)
            for (int64_t d = 0; d < dk; d++) {
                const float q = cpu_get(&a->q, (uint64_t)((r0 + li) * D + h * dk + d));
                qu[li * dk + d] = as_input(q + u[d], a->f16);
                qv[li * dk + d] = as_input(q + bv[d], a->f16);
            }
        const int64_t kl = jlo - a->k_pos0; /* k's row of position jlo */
        const struct cpu_mat km = {A->k + kl * D + h * dk, D}, pm = {A->p + plo * D + h * dk, D};
        cpu_gemm_nt(rows, nk, dk, qu, dk, cpu_pack_f32, &km, s, nk, pack);
        cpu_gemm_nt(rows, np, dk, qv, dk, cpu_pack_f32, &pm, bd, np, pack);
        for (int64_t li = 0; li < rows; li++) {
            const int64_t i = a->q_pos0 + r0 + li;
            float *sr = s + li * nk, *orow = o + li * dk;
            int64_t lo, hi;
            key_span(A, i, &lo, &hi);
            if (i >= a->n_valid || lo >= hi)
                continue;
            /* the row's own keys only: scores, max, then exp and sum in key order */
            float mx = -INFINITY;
            for (int64_t j = lo; j < hi; j++) {
                float *x = sr + (j - jlo);
                *x = (*x + bd[li * np + (A->center - (i - j) - plo)]) * A->scale;
                mx = *x > mx ? *x : mx;
            }
            float sum = 0;
            for (int64_t j = lo; j < hi; j++) {
                sr[j - jlo] = expf(sr[j - jlo] - mx);
                sum += sr[j - jlo];
            }
            for (int64_t d = 0; d < dk; d++)
                orow[d] = 0.0f;
            for (int64_t j = lo; j < hi; j++) {
                const float wj = sr[j - jlo];
                const float *vr = A->v + (j - a->k_pos0) * D + h * dk;
                for (int64_t d = 0; d < dk; d++)
                    orow[d] += wj * vr[d];
            }
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < dk; d++)
                cpu_put(&a->y, (uint64_t)((r0 + li) * D + h * dk + d), orow[d] * inv);
        }
    }
}

/* t as f32 rows: itself when f32 and not rounded, else a copy (widened, rounded to f16 in f16 mode). */
static vkasr_status input_f32(struct backend *b, const be_tensor *t, bool f16, const float **out, float **owned,
                              const char *what) {
    *owned = NULL;
    if (t->type == BE_F32 && !f16) {
        *out = ref_f32(t);
        return VKASR_OK;
    }
    const uint64_t n = be_numel(t);
    float *c = malloc((size_t)(n ? n : 1) * sizeof *c);
    if (!c)
        return err_set(&b->err, VKASR_ERR_NO_MEMORY, "relpos_attention: out of host memory for %s in f32", what);
    for (uint64_t i = 0; i < n; i++)
        c[i] = as_input(cpu_get(t, i), f16);
    *out = *owned = c;
    return VKASR_OK;
}

vkasr_status cpu_relpos_attention(struct backend *b, const struct op_relpos_attention *a) {
    struct att A = {.a = a, .Tq = a->q.ne[0], .Tk = a->k.ne[0], .D = a->q.ne[1], .H = a->heads, .P = a->p.ne[0]};
    A.dk = A.D / A.H;
    A.center = (A.P - 1) / 2;
    A.scale = (float)(1.0 / sqrt((double)A.dk));
    A.chunks = (A.Tq + QCHUNK - 1) / QCHUNK;
    if (A.Tq == 0)
        return VKASR_OK;
    float *kc = NULL, *vc = NULL, *pc = NULL;
    vkasr_status st = input_f32(b, &a->k, a->f16, &A.k, &kc, "k");
    if (st == VKASR_OK)
        st = input_f32(b, &a->v, a->f16, &A.v, &vc, "v");
    if (st == VKASR_OK)
        st = input_f32(b, &a->p, a->f16, &A.p, &pc, "p");
    if (st == VKASR_OK) {
        cpu_pool_run(cpu_pool_of(b), A.H * A.chunks, 1, att_task, &A);
        if (A.st != VKASR_OK)
            st = err_set(&b->err, A.st, "relpos_attention: out of host memory for a chunk's scores (%d rows, %lld keys)",
                         QCHUNK, (long long)A.Tk);
    }
    free(kc);
    free(vc);
    free(pc);
    return st;
}
