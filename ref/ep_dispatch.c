/* ep_dispatch.c: the ep_dispatch_combine reference (ref/moects_edc.h, docs/ep_dispatch_combine.md): what
 * each of R ranks receives from the all-to-all dispatch, in the declared order, and each token's
 * combined output after the experts' exact transform, under ep_gather's combine recipes. Plain C, built
 * with -ffp-contract=off (a*b+c below is two roundings). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_edc.h"

static int problem_ok(const moects_edc_problem *p)
{
    if (!p || p->world < 1 || p->world > MOECTS_EDC_MAX_WORLD || p->T_total < 0 || p->H < 0 || p->k < 1 || p->E < 1)
        return 0;
    if (!p->token_first || !p->expert_first || p->token_first[0] || p->expert_first[0] ||
        p->token_first[p->world] != p->T_total || p->expert_first[p->world] != p->E)
        return 0;
    for (int64_t r = 0; r < p->world; r++)
        if (p->token_first[r + 1] < p->token_first[r] || p->expert_first[r + 1] < p->expert_first[r]) return 0;
    return p->T_total == 0 || (p->x && p->topk_ids && p->topk_weights && p->expert_scale);
}

int64_t moects__edc_rank_of(const moects_edc_problem *p, int64_t e)
{
    if (e < 0 || e >= p->E) return -1;
    int64_t lo = 0, hi = p->world - 1; /* the last rank whose first expert is <= e */
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (p->expert_first[mid] <= e) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int moects__edc_recv_first(const moects_edc_problem *p, int64_t *recv_first)
{
    if (!problem_ok(p)) return -1;
    memset(recv_first, 0, (size_t)(p->world + 1) * sizeof *recv_first);
    for (int64_t s = 0; s < p->T_total * p->k; s++) {
        const int64_t r = moects__edc_rank_of(p, p->topk_ids[s]);
        if (r >= 0) recv_first[r + 1]++;
    }
    for (int64_t r = 0; r < p->world; r++) recv_first[r + 1] += recv_first[r];
    return 0;
}

/* A counting sort of the valid slots by expert: the experts are contiguous per rank in rank order, so
 * expert order is (rank, local expert); inside one expert the slots stay in global token order, which
 * is (source rank, token). */
int moects__edc_recv_order(const moects_edc_problem *p, const int64_t *recv_first, int64_t *src)
{
    if (!problem_ok(p)) return -1;
    int64_t *next = calloc((size_t)p->E + 1, sizeof *next);
    if (!next) return -1;
    for (int64_t s = 0; s < p->T_total * p->k; s++)
        if (p->topk_ids[s] >= 0 && p->topk_ids[s] < p->E) next[p->topk_ids[s] + 1]++;
    for (int64_t e = 0; e < p->E; e++) next[e + 1] += next[e];
    for (int64_t s = 0; s < p->T_total * p->k; s++)
        if (p->topk_ids[s] >= 0 && p->topk_ids[s] < p->E) src[next[p->topk_ids[s]]++] = s;
    free(next);
    (void)recv_first; /* sorted by expert, rank r's rows land at [recv_first[r], recv_first[r + 1]) */
    return 0;
}

int moects__ref_edc_combine(const moects_edc_problem *p, moects_recipe recipe, uint16_t *out)
{
    if (recipe != MOECTS_RECIPE_EPG_FMA_V1 && recipe != MOECTS_RECIPE_EPG_MULADD_V1) return -1;
    if (!problem_ok(p)) return -1;
    const int64_t H = p->H, k = p->k;
    for (int64_t g = 0; g < p->T_total; g++) {
        const int32_t *ids = p->topk_ids + g * k;
        const float *w = p->topk_weights + g * k;
        for (int64_t d = 0; d < H; d++) {
            const float xv = moects__bf16_to_f32(p->x[g * H + d]);
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                if (ids[j] < 0 || ids[j] >= p->E) continue;
                const float y = moects__bf16_to_f32(moects__bf16_from_f32(xv * p->expert_scale[ids[j]]));
                acc = recipe == MOECTS_RECIPE_EPG_FMA_V1 ? fmaf(y, w[j], acc) : acc + y * w[j];
            }
            out[g * H + d] = moects__bf16_from_f32(acc);
        }
    }
    return 0;
}

int moects__edc_recipe_parse(const char *name, moects_recipe *r, int *order_any)
{
    static const struct {
        const char *name;
        moects_recipe r;
        int any;
    } table[] = {
        {"ep_dispatch_combine.fma_v1(order=expert)", MOECTS_RECIPE_EPG_FMA_V1, 0},
        {"ep_dispatch_combine.fma_v1(order=any)", MOECTS_RECIPE_EPG_FMA_V1, 1},
        {"ep_dispatch_combine.muladd_v1(order=expert)", MOECTS_RECIPE_EPG_MULADD_V1, 0},
        {"ep_dispatch_combine.muladd_v1(order=any)", MOECTS_RECIPE_EPG_MULADD_V1, 1},
    };
    for (size_t i = 0; name && i < sizeof table / sizeof *table; i++)
        if (!strcmp(name, table[i].name)) {
            *r = table[i].r;
            if (order_any) *order_any = table[i].any;
            return 0;
        }
    return -1;
}
