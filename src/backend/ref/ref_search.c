/* ref_search.c — reference of the device-resident greedy search's ops (ops.h: search_joint and
 * search_step): the same loops as the kernels (shaders/search.comp), on host memory. */
#include <math.h>
#include <string.h>

#include "ref_internal.h"

static int32_t *state_of(const struct be_search *s, int64_t hyp) {
    return ref_i32(&s->state) + hyp * SEARCH_STATE_INTS;
}

vkasr_status ref_search_joint(struct backend *b, const struct op_search_joint *op) {
    const struct be_search *s = op->s;
    const int64_t B = s->state.ne[0], Tf = s->f.ne[0], P = s->f.ne[1], L = s->h_old.ne[0], W = op->window;
    const float *f = ref_f32(&s->f), *q = ref_f32(&s->q), *h_new = ref_f32(&s->h_new);
    float *z = ref_f32(&s->z), *h_old = ref_f32(&s->h_old);
    for (int64_t h = 0; h < B; h++) {
        const int32_t *st = state_of(s, h);
        if (st[SEARCH_S_DONE])
            continue;
        if (st[SEARCH_S_EMIT]) /* commit the last emission's LSTM step */
            for (int64_t l = 0; l < L; l++)
                memcpy(h_old + (l * B + h) * P, h_new + (l * B + h) * P, (size_t)P * sizeof(float));
        for (int64_t r = 0; r < W; r++) {
            const int64_t fr = st[SEARCH_S_T] + r < st[SEARCH_S_FRAMES] ? st[SEARCH_S_T] + r : st[SEARCH_S_FRAMES] - 1;
            int64_t row = st[SEARCH_S_F0] + fr; /* clamped into f: a bad state never reads outside it */
            row = row < 0 ? 0 : row >= Tf ? Tf - 1 : row;
            const float *fr_row = f + row * P;
            for (int64_t p = 0; p < P; p++) /* as op_binary ADD with ReLU, alpha = beta = 1 */
                z[(h * W + r) * P + p] = (float)ref_act((double)fr_row[p] + (double)q[h * P + p], ACT_RELU);
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
    const struct be_search *s = op->s;
    const int64_t B = s->state.ne[0], W = op->window, J = s->y.ne[1], P = s->f.ne[1], cap = s->tokens.ne[1];
    const int32_t V = (int32_t)(s->embed.ne[0] - 1), nd = s->durations.addr ? (int32_t)s->durations.ne[0] : 0;
    const int32_t *durations = nd ? ref_i32(&s->durations) : NULL;
    const float *y = ref_f32(&s->y), *embed = ref_f32(&s->embed);
    for (int64_t h = 0; h < B; h++) {
        int32_t *st = state_of(s, h);
        if (st[SEARCH_S_DONE]) {
            st[SEARCH_S_EMIT] = 0;
            continue;
        }
        const int32_t t0 = st[SEARCH_S_T], T = st[SEARCH_S_FRAMES];
        const int32_t n = T - t0 < W ? T - t0 : (int32_t)W;
        int32_t t = t0, emit = 0, te = t0;
        while (t < t0 + n) {
            const float *row = y + (h * W + (t - t0)) * J;
            const int32_t k = argmax(row, 0, V + 1);
            const int32_t d = nd ? durations[argmax(row, V + 1, J)] : 1;
            st[SEARCH_S_STEPS]++;
            if (k == V) { /* blank: TDT skips d frames (at least one), RNN-T one */
                if (nd)
                    t += d > 0 ? d : 1;
                else {
                    t += 1;
                    st[SEARCH_S_RUN] = 0;
                }
                continue;
            }
            int32_t *slot = ref_i32(&s->tokens) + (h * cap + st[SEARCH_S_NTOK] % cap) * 3;
            te = t;
            slot[0] = k;
            slot[1] = t;
            slot[2] = d;
            st[SEARCH_S_NTOK]++;
            if (nd) {
                st[SEARCH_S_RUN] = t == st[SEARCH_S_LAST_T] ? st[SEARCH_S_RUN] + 1 : 1;
                st[SEARCH_S_LAST_T] = t;
                t += d;
                if (d == 0 && st[SEARCH_S_RUN] >= s->max_symbols)
                    t += 1;
            } else if (++st[SEARCH_S_RUN] >= s->max_symbols) {
                t += 1;
                st[SEARCH_S_RUN] = 0;
            }
            st[SEARCH_S_TOKEN] = k;
            memcpy(ref_f32(&s->x0) + h * P, embed + (int64_t)k * P, (size_t)P * sizeof(float));
            emit = 1;
            break;
        }
        st[SEARCH_S_T] = t;
        st[SEARCH_S_EMIT] = emit && t < T; /* no LSTM step after the last frame */
        st[SEARCH_S_DONE] = t >= T;
        if (t >= T && s->live.addr)
            ref_i32(&s->live)[0]--;
        st[SEARCH_S_ITERS]++;
        st[SEARCH_S_SPAN] += emit ? te - t0 + 1 : n;
    }
    return VKASR_OK;
}
