/* search.h — the argument block of the device-resident greedy search (ops.h: struct be_search): the
 * tensors' addresses and the search's sizes, in device memory, read by the search kernels (mirror:
 * shaders/common/search.glsl) and by the reference backend. be_search_init (ops.c) writes it. Private
 * to the backends; the network code only sees struct be_search. */
#ifndef VKASR_SEARCH_H
#define VKASR_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

struct search_args {
    uint64_t f, q, z, y, x0, embed, h_old, h_new, durations, state, tokens;
    int32_t hyps;        /* B                                                      */
    int32_t frames;      /* T: f is [B, T, P]                                      */
    int32_t P, V, J;     /* prediction width, vocabulary (blank = V), joint width  */
    int32_t n_durations; /* ND (0: RNN-T)                                          */
    int32_t layers;      /* L: h_old and h_new are [L, B, P]                       */
    int32_t max_symbols;
    int32_t capacity;    /* token ring slots per hypothesis                        */
    int32_t pad;
};
_Static_assert(sizeof(struct search_args) == SEARCH_ARGS_BYTES, "mirror of search.glsl's SearchArgs");
_Static_assert(offsetof(struct search_args, hyps) == 88, "mirror of search.glsl's SearchArgs");

#endif
