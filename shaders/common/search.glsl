// search.glsl — the state of a hypothesis of the device-resident greedy search (mirror of SEARCH_S_*
// in src/backend/ops.h). Include after core.glsl.
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
#define S_F0 11
#define S_ARRIVED 12

// Address of hypothesis hyp's state.
#define search_state(base, hyp) ((base) + uint64_t(hyp) * uint64_t(SEARCH_STATE_INTS * 4))
