/* ref_search.c — reference of the device-resident greedy search's ops (ops.h: search_joint and
 * search_step), read from the argument block like the kernels (shaders/search.comp). */
#include <math.h>
#include <string.h>

#include "../search.h"
#include "ref_internal.h"

static const struct search_args *args_of(const struct be_search *s) {
    return (const struct search_args *)(uintptr_t)s->args.addr;
}

static int32_t *state_of(const struct search_args *a, int64_t hyp) {
    return (int32_t *)(uintptr_t)a->state + hyp * SEARCH_STATE_INTS;
}

static float *f32_at(uint64_t base, uint64_t i) { return (float *)(uintptr_t)base + i; }

vkasr_status ref_search_joint(struct backend *b, const struct op_search_joint *op) {
    const struct search_args *a = args_of(op->s);
    const int64_t W = op->window, P = a->P;
    for (int64_t h = 0; h < a->hyps; h++) {
        const int32_t *st = state_of(a, h);
        if (st[SEARCH_S_DONE])
            continue;
        if (st[SEARCH_S_EMIT]) /* commit the last emission's LSTM step */
            for (int64_t l = 0; l < a->layers; l++)
                memcpy(f32_at(a->h_old, (uint64_t)((l * a->hyps + h) * P)), f32_at(a->h_new, (uint64_t)((l * a->hyps + h) * P)),
                       (size_t)P * sizeof(float));
        for (int64_t r = 0; r < W; r++) {
            int64_t fr = st[SEARCH_S_T] + r < st[SEARCH_S_FRAMES] ? st[SEARCH_S_T] + r : st[SEARCH_S_FRAMES] - 1;
            const float *f = f32_at(a->f, (uint64_t)((h * a->frames + fr) * P)), *q = f32_at(a->q, (uint64_t)(h * P));
            float *z = f32_at(a->z, (uint64_t)((h * W + r) * P));
            for (int64_t p = 0; p < P; p++) /* as op_binary ADD with ReLU, alpha = beta = 1 */
                z[p] = (float)ref_act((double)f[p] + (double)q[p], ACT_RELU);
        }
    }
    return VKASR_OK;
}

/* op_argmax over columns [c0, c1) of a row: first index of the maximum, NaN never wins, all NaN -> 0. */
static int32_t argmax(const float *row, int64_t c0, int64_t c1) {
    int64_t best = -1;
    for (int64_t c = c0; c < c1; c++)
        if (!isnan(row[c]) && (best < 0 || row[c] > row[best]))
            best = c;
    return best < 0 ? 0 : (int32_t)(best - c0);
}

vkasr_status ref_search_step(struct backend *b, const struct op_search_step *op) {
    const struct search_args *a = args_of(op->s);
    const int64_t W = op->window, J = a->J;
    const int32_t V = a->V, *durations = (const int32_t *)(uintptr_t)a->durations;
    for (int64_t h = 0; h < a->hyps; h++) {
        int32_t *st = state_of(a, h);
        if (st[SEARCH_S_DONE]) {
            st[SEARCH_S_EMIT] = 0;
            continue;
        }
        const int32_t t0 = st[SEARCH_S_T], T = st[SEARCH_S_FRAMES];
        const int32_t n = T - t0 < W ? T - t0 : (int32_t)W;
        int32_t t = t0, emit = 0, te = t0;
        while (t < t0 + n) {
            const float *row = f32_at(a->y, (uint64_t)((h * W + (t - t0)) * J));
            const int32_t k = argmax(row, 0, V + 1);
            const int32_t d = a->n_durations ? durations[argmax(row, V + 1, J)] : 1;
            st[SEARCH_S_STEPS]++;
            if (k == V) { /* blank: TDT skips d frames (at least one), RNN-T one */
                if (a->n_durations)
                    t += d > 0 ? d : 1;
                else {
                    t += 1;
                    st[SEARCH_S_RUN] = 0;
                }
                continue;
            }
            int32_t *slot = (int32_t *)(uintptr_t)a->tokens + (h * a->capacity + st[SEARCH_S_NTOK] % a->capacity) * 3;
            te = t;
            slot[0] = k;
            slot[1] = t;
            slot[2] = d;
            st[SEARCH_S_NTOK]++;
            if (a->n_durations) {
                st[SEARCH_S_RUN] = t == st[SEARCH_S_LAST_T] ? st[SEARCH_S_RUN] + 1 : 1;
                st[SEARCH_S_LAST_T] = t;
                t += d;
                if (d == 0 && st[SEARCH_S_RUN] >= a->max_symbols)
                    t += 1;
            } else if (++st[SEARCH_S_RUN] >= a->max_symbols) {
                t += 1;
                st[SEARCH_S_RUN] = 0;
            }
            st[SEARCH_S_TOKEN] = k;
            memcpy(f32_at(a->x0, (uint64_t)(h * a->P)), f32_at(a->embed, (uint64_t)k * (uint64_t)a->P),
                   (size_t)a->P * sizeof(float));
            emit = 1;
            break;
        }
        st[SEARCH_S_T] = t;
        st[SEARCH_S_EMIT] = emit;
        st[SEARCH_S_DONE] = t >= T;
        st[SEARCH_S_ITERS]++;
        st[SEARCH_S_SPAN] += emit ? te - t0 + 1 : n;
    }
    return VKASR_OK;
}
