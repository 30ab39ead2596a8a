/* cu_search.cu — the device-resident greedy search's ops on CUDA (ops.h: search_joint, search_step),
 * the same loops as shaders/search.comp: the joint input of a window (with the commit of the last
 * emission's LSTM state), and one block per hypothesis taking the rows' token and duration argmaxes
 * (op_argmax's rule: first index on ties, NaN never wins, all NaN -> 0; the block's warps split each
 * row's columns, and as the rule picks one column whatever the order, so does any reduction) and
 * walking them to the first emission on one thread. The search's LSTM steps are lstm_step with its gate (cu_lstm.cu). */
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

/* The block's partial argmax of x[c0 .. c1): each thread strides the columns (ARGMAX_UNROLL loads in
 * flight), then each warp's best goes to pv / pi [warp] (pi -1 if none). Every thread must call it. */
#define ARGMAX_UNROLL 4
static __device__ void block_argmax_part(const float *x, int c0, int c1, float *pv, int *pi) {
    float best = 0;
    int bi = -1;
    const int nt = blockDim.x;
    for (int c = c0 + (int)threadIdx.x; c < c1; c += ARGMAX_UNROLL * nt) {
        float v[ARGMAX_UNROLL];
#pragma unroll
        for (int u = 0; u < ARGMAX_UNROLL; u++)
            v[u] = c + u * nt < c1 ? x[c + u * nt] : 0.0f;
#pragma unroll
        for (int u = 0; u < ARGMAX_UNROLL; u++)
            if (c + u * nt < c1 && better(v[u], c + u * nt, best, bi)) {
                best = v[u];
                bi = c + u * nt;
            }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, best, bi)) {
            best = ov;
            bi = oi;
        }
    }
    if ((threadIdx.x & 31) == 0) {
        pv[threadIdx.x / 32] = best;
        pi[threadIdx.x / 32] = bi;
    }
}

/* The best of the warps' partial results: the index relative to c0, -1 if none. */
static __device__ int argmax_join(const float *pv, const int *pi, int c0) {
    float best = 0;
    int bi = -1;
    for (int w = 0; w < SEARCH_WARPS; w++)
        if (better(pv[w], pi[w], best, bi)) {
            best = pv[w];
            bi = pi[w];
        }
    return bi < 0 ? -1 : bi - c0;
}

static __global__ void __launch_bounds__(SEARCH_THREADS)
    search_step_kernel(const float *y, int32_t *state, int32_t *tokens, const int32_t *durations, const float *embed,
                       float *x0, int64_t B, int W, int V, int J, int nd, int max_symbols, int64_t capacity,
                       int64_t P) {
    __shared__ int row_tok[SEARCH_MAX_WINDOW], row_dur[SEARCH_MAX_WINDOW];
    __shared__ float tok_v[SEARCH_MAX_WINDOW][SEARCH_WARPS], dur_v[SEARCH_MAX_WINDOW][SEARCH_WARPS];
    __shared__ int tok_i[SEARCH_MAX_WINDOW][SEARCH_WARPS], dur_i[SEARCH_MAX_WINDOW][SEARCH_WARPS];
    __shared__ int emitted;
    for (int64_t hyp = blockIdx.x; hyp < B; hyp += gridDim.x) {
        int32_t *st = state + hyp * SEARCH_STATE_INTS;
        if (st[SEARCH_S_DONE]) { /* the same value for the whole block */
            if (threadIdx.x == 0)
                st[SEARCH_S_EMIT] = 0;
            continue;
        }
        const int t0 = st[SEARCH_S_T], T = st[SEARCH_S_FRAMES];
        const int n = T - t0 < W ? T - t0 : W;
        for (int r = 0; r < n; r++) { /* the whole block per row: the warps split the columns */
            const float *row = y + (hyp * W + r) * (int64_t)J;
            block_argmax_part(row, 0, V + 1, tok_v[r], tok_i[r]);
            if (nd)
                block_argmax_part(row, V + 1, J, dur_v[r], dur_i[r]);
        }
        __syncthreads();
        if ((int)threadIdx.x < n) { /* a thread per row joins the warps' results */
            const int r = threadIdx.x;
            const int k = argmax_join(tok_v[r], tok_i[r], 0), d = nd ? argmax_join(dur_v[r], dur_i[r], V + 1) : 0;
            row_tok[r] = k < 0 ? 0 : k;
            row_dur[r] = d < 0 ? 0 : d;
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
            st[SEARCH_S_EMIT] = token >= 0;
            st[SEARCH_S_DONE] = t >= T;
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
    const int64_t B = s->state.ne[0];
    const int nd = s->durations.addr ? (int)s->durations.ne[0] : 0;
    search_step_kernel<<<cu_grid(b, (uint64_t)B, 1), SEARCH_THREADS, 0, b->stream>>>(
        cu_ptr<float>(s->y), cu_ptr<int32_t>(s->state), cu_ptr<int32_t>(s->tokens), cu_ptr<int32_t>(s->durations),
        cu_ptr<float>(s->embed), cu_ptr<float>(s->x0), B, a->window, (int)(s->embed.ne[0] - 1), (int)s->y.ne[1], nd,
        s->max_symbols, s->tokens.ne[1], s->f.ne[1]);
    CU_LAUNCHED(b);
    return VKASR_OK;
}
