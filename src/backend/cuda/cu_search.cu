/* cu_search.cu — the device-resident greedy search's ops on CUDA (ops.h: search_joint, search_step),
 * the same loops as shaders/search.comp: the joint input of a window (with the commit of the last
 * emission's LSTM state), and blocks taking chunks of the rows' token and duration argmaxes (op_argmax's
 * rule: first index on ties, NaN never wins, all NaN -> 0; as the rule picks one column whatever the
 * order, so does any reduction), the last of a hypothesis's blocks walking them to the first emission on
 * one thread. The search's LSTM steps are lstm_step with its gate (cu_lstm.cu). */
#include "cu_internal.h"

#define SEARCH_THREADS 256
#define SEARCH_WARPS (SEARCH_THREADS / 32)

static __global__ void search_joint_kernel(const float *f, const float *q, float *z, float *h_old, const float *h_new,
                                           const int32_t *state, int64_t B, int64_t Tf, int64_t P, int64_t W,
                                           int64_t L) {
    for (int64_t hyp = blockIdx.y; hyp < B; hyp += gridDim.y) {
        const int32_t *st = state + hyp * SEARCH_STATE_INTS;
        if (st[SEARCH_S_DONE])
            continue;
        if (st[SEARCH_S_EMIT]) /* commit: the LSTM state after the last emission becomes current */
            CU_GRID_STRIDE(i, L * P) {
                int64_t l = i / P, o = (l * B + hyp) * P + (i - l * P);
                h_old[o] = h_new[o];
            }
        const int64_t t = st[SEARCH_S_T], Tb = st[SEARCH_S_FRAMES], f0 = st[SEARCH_S_F0];
        CU_GRID_STRIDE(i, W * P) {
            int64_t r = i / P, p = i - r * P, fr = f0 + (t + r < Tb ? t + r : Tb - 1);
            fr = fr < 0 ? 0 : fr >= Tf ? Tf - 1 : fr; /* a bad state never reads outside f */
            float v = f[fr * P + p] + q[hyp * P + p]; /* op_binary ADD, alpha = beta = 1 */
            z[(hyp * W + r) * P + p] = cu_act(v, ACT_RELU);
        }
    }
}

/* (v, i) beats (w, j): a valid index, not NaN, larger, or equal and earlier. */
static __device__ __forceinline__ bool better(float v, int i, float w, int j) {
    return i >= 0 && !isnan(v) && (j < 0 || v > w || (v == w && i < j));
}

/* The step's token argmax: columns per chunk at least, chunks per hypothesis at most (as search.comp's). */
#define ARGMAX_UNROLL 8

/* Each row's candidates (v, i, dv, di [tid], tpr threads per row) to its lane 0 by a tree. Called by the
 * whole block after the candidates are written. */
static __device__ void reduce_rows(float *v, int *i, float *dv, int *di, int tid, int lane, int tpr) {
    __syncthreads();
    for (int s = tpr >> 1; s > 0; s >>= 1) {
        if (lane < s) {
            if (better(v[tid + s], i[tid + s], v[tid], i[tid])) {
                v[tid] = v[tid + s];
                i[tid] = i[tid + s];
            }
            if (better(dv[tid + s], di[tid + s], dv[tid], di[tid])) {
                dv[tid] = dv[tid + s];
                di[tid] = di[tid + s];
            }
        }
        __syncthreads();
    }
}

/* G blocks per hypothesis (x: chunks of the token columns, y: hypotheses; both grid-stride), as
 * search.comp's step: each takes its chunk of every row of the window (SEARCH_THREADS / W threads per
 * row; chunk 0 also the durations); with G > 1 it writes its winners to part [B, W, G], counts itself
 * in S_ARRIVED after a fence, and the last to arrive merges the G winners of each row (the same rule:
 * the result does not depend on G), sets the count back to 0, walks the rows to the first emission and
 * writes x0. */
static __global__ void __launch_bounds__(SEARCH_THREADS)
    search_step_kernel(const float *y, int32_t *state, int32_t *tokens, const int32_t *durations, const float *embed,
                       float *x0, int4 *part, int *live, int64_t B, int W, int G, int V, int J, int nd,
                       int max_symbols, int64_t capacity, int64_t P) {
    __shared__ int row_tok[SEARCH_MAX_WINDOW], row_dur[SEARCH_MAX_WINDOW];
    __shared__ float red_v[SEARCH_THREADS], red_dv[SEARCH_THREADS];
    __shared__ int red_i[SEARCH_THREADS], red_di[SEARCH_THREADS];
    __shared__ int emitted, last_block;
    const int tid = threadIdx.x, tpr = SEARCH_THREADS / W, r = tid / tpr, lane = tid % tpr;
    const int cw = (V + G) / G; /* token columns per chunk */
    for (int64_t hyp = blockIdx.y; hyp < B; hyp += gridDim.y)
    for (int g = blockIdx.x; g < G; g += gridDim.x) {
        int32_t *st = state + hyp * SEARCH_STATE_INTS;
        if (st[SEARCH_S_DONE]) { /* the same value for the whole block */
            if (tid == 0 && g == 0)
                st[SEARCH_S_EMIT] = 0;
            continue;
        }
        const int t0 = st[SEARCH_S_T], T = st[SEARCH_S_FRAMES];
        const int n = T - t0 < W ? T - t0 : W;
        const int c_lo = g * cw, c_hi = c_lo + cw < V + 1 ? c_lo + cw : V + 1;
        float bv = 0, dv = 0;
        int bi = -1, di = -1;
        if (r < n) { /* this row's columns in increasing order per thread, ARGMAX_UNROLL loads in flight */
            const float *row = y + (hyp * W + r) * (int64_t)J;
            for (int c = c_lo + lane; c < c_hi; c += ARGMAX_UNROLL * tpr) {
                float v[ARGMAX_UNROLL];
#pragma unroll
                for (int u = 0; u < ARGMAX_UNROLL; u++)
                    v[u] = c + u * tpr < c_hi ? row[c + u * tpr] : 0.0f;
#pragma unroll
                for (int u = 0; u < ARGMAX_UNROLL; u++)
                    if (c + u * tpr < c_hi && better(v[u], c + u * tpr, bv, bi)) {
                        bv = v[u];
                        bi = c + u * tpr;
                    }
            }
            for (int c = lane; g == 0 && c < nd; c += tpr)
                if (better(row[V + 1 + c], c, dv, di)) {
                    dv = row[V + 1 + c];
                    di = c;
                }
        }
        red_v[tid] = bv;
        red_i[tid] = bi;
        red_dv[tid] = dv;
        red_di[tid] = di;
        reduce_rows(red_v, red_i, red_dv, red_di, tid, lane, tpr);
        if (G > 1) { /* the chunk's winners out, then the count; the last to arrive merges them */
            int4 *pr = part + (hyp * W + r) * G;
            if (lane == 0 && r < n)
                __stcg(pr + g, make_int4(__float_as_int(red_v[tid]), red_i[tid], __float_as_int(red_dv[tid]),
                                         red_di[tid]));
            __threadfence();
            __syncthreads();
            if (tid == 0) {
                last_block = atomicAdd(&st[SEARCH_S_ARRIVED], 1) == G - 1;
                __threadfence();
            }
            __syncthreads();
            if (!last_block) /* the same value for the whole block */
                continue;
            __threadfence();
            bv = dv = 0;
            bi = di = -1;
            for (int k = lane; r < n && k < G; k += tpr) {
                const int4 q = __ldcg(pr + k);
                if (better(__int_as_float(q.x), q.y, bv, bi)) {
                    bv = __int_as_float(q.x);
                    bi = q.y;
                }
                if (better(__int_as_float(q.z), q.w, dv, di)) {
                    dv = __int_as_float(q.z);
                    di = q.w;
                }
            }
            red_v[tid] = bv;
            red_i[tid] = bi;
            red_dv[tid] = dv;
            red_di[tid] = di;
            reduce_rows(red_v, red_i, red_dv, red_di, tid, lane, tpr);
            if (tid == 0)
                st[SEARCH_S_ARRIVED] = 0; /* every block of the hypothesis has counted itself */
        }
        if (lane == 0 && r < n) { /* all NaN -> 0; clamped: an index read back from memory stays inside */
            row_tok[r] = red_i[tid] < 0 ? 0 : red_i[tid] > V ? V : red_i[tid];
            row_dur[r] = red_di[tid] < 0 ? 0 : red_di[tid] >= nd ? (nd > 0 ? nd - 1 : 0) : red_di[tid];
        }
        __syncthreads();
        if (threadIdx.x == 0) { /* the walk to the first emission (spec §6.4 TDT, §6.5 RNN-T) */
            int t = t0, token = -1, te = t0;
            while (t < t0 + n) {
                const int k = row_tok[t - t0], d = nd ? durations[row_dur[t - t0]] : 1;
                st[SEARCH_S_STEPS]++;
                if (k == V) {
                    if (nd) {
                        t += d > 0 ? d : 1; /* a blank with duration 0 advances one frame */
                    } else {
                        t += 1;
                        st[SEARCH_S_RUN] = 0;
                    }
                    continue;
                }
                int32_t *slot = tokens + (hyp * capacity + st[SEARCH_S_NTOK] % capacity) * 3;
                te = t;
                slot[0] = k;
                slot[1] = t;
                slot[2] = d;
                st[SEARCH_S_NTOK]++;
                if (nd) {
                    st[SEARCH_S_RUN] = t == st[SEARCH_S_LAST_T] ? st[SEARCH_S_RUN] + 1 : 1;
                    st[SEARCH_S_LAST_T] = t;
                    t += d;
                    if (d == 0 && st[SEARCH_S_RUN] >= max_symbols)
                        t += 1;
                } else if (++st[SEARCH_S_RUN] >= max_symbols) {
                    t += 1;
                    st[SEARCH_S_RUN] = 0;
                }
                st[SEARCH_S_TOKEN] = k;
                token = k;
                break;
            }
            st[SEARCH_S_T] = t;
            st[SEARCH_S_EMIT] = token >= 0 && t < T; /* no LSTM step after the last frame */
            st[SEARCH_S_DONE] = t >= T;
            if (t >= T && live)
                atomicSub(live, 1);
            st[SEARCH_S_ITERS]++;
            st[SEARCH_S_SPAN] += token >= 0 ? te - t0 + 1 : n;
            emitted = token;
        }
        __syncthreads();
        if (emitted >= 0) /* the first LSTM layer's input */
            for (int64_t p = threadIdx.x; p < P; p += blockDim.x)
                x0[hyp * P + p] = embed[(int64_t)emitted * P + p];
        __syncthreads();
    }
}

vkasr_status cu_op_search_joint(struct cu_backend *b, const struct op_search_joint *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0], T = s->f.ne[0], P = s->f.ne[1], L = s->h_old.ne[0], W = a->window;
    dim3 grid(cu_grid(b, (uint64_t)((W > L ? W : L) * P), 256), (unsigned)(B < 65535 ? B : 65535));
    search_joint_kernel<<<grid, 256, 0, b->stream>>>(cu_ptr<float>(s->f), cu_ptr<float>(s->q), cu_ptr<float>(s->z),
                                                      cu_ptr<float>(s->h_old), cu_ptr<float>(s->h_new),
                                                      cu_ptr<int32_t>(s->state), B, T, P, W, L);
    CU_LAUNCHED(b);
    return VKASR_OK;
}

vkasr_status cu_op_search_step(struct cu_backend *b, const struct op_search_step *a) {
    const struct be_search *s = a->s;
    const int64_t B = s->state.ne[0], V = s->embed.ne[0] - 1;
    const int nd = s->durations.addr ? (int)s->durations.ne[0] : 0;
    if (a->window > SEARCH_THREADS)
        return err_set(&b->base.err, VKASR_ERR_UNSUPPORTED, "op search_step: window %d exceeds the block (%d)",
                       a->window, SEARCH_THREADS);
    const int64_t G = op_search_step_chunks(b->d->prop.multiProcessorCount, B, V); /* blocks per hypothesis */
    const uint64_t mark = be_mark(&b->base);
    void *part = NULL;
    vkasr_status st = G > 1 ? cu_scratch(b, (uint64_t)B * (uint64_t)a->window * (uint64_t)G * sizeof(int4), &part)
                            : VKASR_OK;
    if (st == VKASR_OK) {
        const unsigned gy = cu_grid(b, (uint64_t)B, 1);
        dim3 grid(cu_grid(b, (uint64_t)G, 1), gy < 65535 ? gy : 65535);
        search_step_kernel<<<grid, SEARCH_THREADS, 0, b->stream>>>(
            cu_ptr<float>(s->y), cu_ptr<int32_t>(s->state), cu_ptr<int32_t>(s->tokens),
            cu_ptr<int32_t>(s->durations), cu_ptr<float>(s->embed), cu_ptr<float>(s->x0), (int4 *)part,
            cu_ptr<int>(s->live), B,
            a->window, (int)G, (int)V, (int)s->y.ne[1], nd, s->max_symbols, s->tokens.ne[1], s->f.ne[1]);
        cudaError_t r = cudaGetLastError();
        if (r != cudaSuccess)
            st = cu_fail(&b->base.err, r, "search_step_kernel", __FILE__, __LINE__);
    }
    be_release(&b->base, mark);
    return st;
}
