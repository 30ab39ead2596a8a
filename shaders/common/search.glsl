// search.glsl — the argument block and state layout of the device-resident greedy search (mirror of
// struct search_args in src/backend/search.h and SEARCH_S_* in src/backend/ops.h). Include after
// core.glsl.
layout(buffer_reference, std430, buffer_reference_align = 8) restrict readonly buffer SearchArgs {
    uint64_t f, q, z, y, x0, embed, h_old, h_new, durations, state, tokens;
    int hyps, frames, P, V, J, n_durations, layers, max_symbols, capacity;
};

#define SEARCH_STATE_INTS 16
#define S_T 0
#define S_FRAMES 1
#define S_LAST_T 2
#define S_RUN 3
#define S_DONE 4
#define S_EMIT 5
#define S_TOKEN 6
#define S_NTOK 7
#define S_STEPS 8
#define S_ITERS 9
#define S_SPAN 10

// Address of hypothesis hyp's state.
#define search_state(a, hyp) ((a).state + uint64_t(hyp) * uint64_t(SEARCH_STATE_INTS * 4))
