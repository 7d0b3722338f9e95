/* ep_split.c: which experts an EP rank holds (vLLM FusedMoE determine_expert_map, linear placement). */
#include "moects_cases.h"

int64_t moects__ep_local_experts(int64_t E, int ep_size, int ep_rank, int64_t *first)
{
    if (E < 1 || ep_size < 1 || ep_rank < 0 || ep_rank >= ep_size) return -1;
    int64_t base = E / ep_size, rem = E % ep_size;
    int64_t n = base + (ep_rank < rem ? 1 : 0);
    if (first) *first = (int64_t)ep_rank * base + (ep_rank < rem ? ep_rank : rem);
    return n;
}

int64_t moects__expert_map(int64_t E, int ep_size, int ep_rank, int32_t *map)
{
    int64_t first;
    int64_t n = moects__ep_local_experts(E, ep_size, ep_rank, &first);
    if (n < 0 || E > INT32_MAX) return -1;
    for (int64_t i = 0; i < E; i++) map[i] = (i >= first && i < first + n) ? (int32_t)(i - first) : -1;
    return n;
}
