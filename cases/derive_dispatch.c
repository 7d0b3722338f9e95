/* derive_dispatch.c: ep_dispatch_combine cases of one model under EP e (docs/ep_dispatch_combine.md
 * "Cases"): R = e ranks, each with its own tokens of the routed experts' input width (the latent width
 * for latent MoE, else hidden_size), k = the model's experts per token, E its routed experts split by
 * vLLM's linear rule (the first E % e ranks one more). EP sizes 2, 4 and 8 (those up to E).
 *
 * Ids: ep_dispatch_combine/<model>/ep<e>/t<T>[/<variant>], T the tokens of a rank.
 * Which cases (FULL): T in {1, 16, 128} with uniform routing; at T 16 the variants hot-rank (every
 * slot of every token on the last rank's experts, slots past its expert count -1), neg-ids (a quarter
 * of the slots and every slot of each rank's last token -1: tokens routed to no rank), empty-ranks (the
 * odd ranks hold no token, rank 0 one more) and mixed (neg-ids and empty-ranks). Smoke: mixed at T 8
 * under EP 4 (EP 2 for a model of fewer than 4 experts), and hot-rank at T 4 under EP 8 for models of
 * E <= 16 experts. */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

static const int64_t T_GRID[] = {1, 16, 128};

static int push(moects_case_list *out, moects_case c, int64_t T, moects_routing rt, int empty, const char *variant,
                int smoke)
{
    c.T = T, c.routing = rt, c.empty_ranks = empty;
    if (smoke) c.tiers |= MOECTS_TIER_SMOKE;
    int n = snprintf(c.id, sizeof c.id, "ep_dispatch_combine/%s/%s/t%lld%s%s", c.model, c.layout, (long long)T,
                     variant ? "/" : "", variant ? variant : "");
    return n < 0 || (size_t)n >= sizeof c.id ? -1 : moects__case_list_push(out, &c);
}

int moects__derive_dispatch_cases(const moects_model *m, const moects_case *base, int ep, moects_case_list *out)
{
    if (ep != 2 && ep != 4 && ep != 8) return 0;
    moects_case c = *base;
    c.op = MOECTS_OP_EP_DISPATCH_COMBINE;
    c.k = m->experts_per_token;
    c.H = m->latent_size > 0 ? m->latent_size : m->hidden_size;
    c.E_global = m->routed_experts;
    c.ep_size = ep;
    c.id_dtype = MOECTS_I32, c.out_dtype = MOECTS_BF16, c.data = MOECTS_DATA_EXACT;
    c.tiers = MOECTS_TIER_FULL;
    for (size_t i = 0; i < sizeof T_GRID / sizeof *T_GRID; i++)
        if (push(out, c, T_GRID[i], MOECTS_ROUTE_UNIFORM, 0, NULL, 0)) return -1;
    const int smoke_ep = m->routed_experts >= 4 ? 4 : 2;
    if (push(out, c, 16, MOECTS_ROUTE_ONE_EXPERT, 0, "hot-rank", 0) ||
        push(out, c, 16, MOECTS_ROUTE_NEG_IDS, 0, "neg-ids", 0) ||
        push(out, c, 16, MOECTS_ROUTE_UNIFORM, 1, "empty-ranks", 0) ||
        push(out, c, 16, MOECTS_ROUTE_NEG_IDS, 1, "mixed", 0) ||
        push(out, c, 8, MOECTS_ROUTE_NEG_IDS, 1, "mixed", ep == smoke_ep))
        return -1;
    if (ep == 8 && m->routed_experts <= 16 && push(out, c, 4, MOECTS_ROUTE_ONE_EXPERT, 0, "hot-rank", 1)) return -1;
    return 0;
}
