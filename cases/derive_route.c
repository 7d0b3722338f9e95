/* derive_route.c: moe_route cases of one model (DESIGN.md "Routing", "Cases"). The router runs
 * replicated on every rank, so a model's cases do not depend on its TP/EP layout: logits [T, E] of
 * its routed experts, its method (scoring_func and topk_before_scoring), groups, routed scaling
 * factor, renormalization and correction bias (cases/models/NAME.json). A model whose scoring has no
 * method yet (DeepSeek-V4's sqrtsoftplus; a raw config: unknown) derives none.
 *
 * Ids: moe_route/<model>/t<T>[/<variant>]
 * Which cases (FULL): T in {1, 16, 128, 4096} (decode to prefill) with FP32 logits; at T 64 the
 * variants bf16 (BF16 logits), adversarial (rows of exact ties, near ties one ulp apart, one value,
 * -Inf and a NaN among the logits; bias multiples of 1/16), adversarial-bf16 and adversarial-tail (E
 * less n_group: each group one expert short, so E is not a multiple of 32 and no warp's lanes fill the
 * row's tail; synthetic, not the model's E); and at T 16 the model's router
 * with k in {1, 2, 4, 6, 8, 9, 16, 22} other than its own, where the method and the kept groups take
 * that k (Llama 4: top-1 only). Smoke: t16 and adversarial at T 40 (8 rows of each kind). */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"
#include "moects_cases.h"

static const int64_t T_GRID[] = {1, 16, 128, 4096};
static const int64_t K_SWEEP[] = {1, 2, 4, 6, 8, 9, 16, 22};

/* The method of model m's router, or 0 for one moects has none for. */
static moects_route_method method_of(const moects_model *m)
{
    if (m->scoring == MOECTS_SCORING_SOFTMAX) return m->topk_before_scoring ? MOECTS_ROUTE_TOPK_SOFTMAX : MOECTS_ROUTE_SOFTMAX;
    if (m->scoring == MOECTS_SCORING_SIGMOID) return m->topk_before_scoring ? MOECTS_ROUTE_LLAMA4 : MOECTS_ROUTE_SIGMOID;
    return (moects_route_method)0;
}

/* The model's plain case at T tokens (FULL tier, FP32 logits, exact data). */
static moects_case route_case(const moects_model *m, const moects_case *base, int64_t T)
{
    moects_case c = *base;
    c.op = MOECTS_OP_MOE_ROUTE;
    snprintf(c.layout, sizeof c.layout, "-");
    c.T = T;
    c.k = m->experts_per_token;
    c.E = c.E_global = m->routed_experts;
    c.route_method = method_of(m);
    c.n_group = m->n_group;
    c.topk_group = m->topk_group;
    c.renormalize = c.route_method == MOECTS_ROUTE_TOPK_SOFTMAX || (c.route_method != MOECTS_ROUTE_LLAMA4 && m->norm_topk_prob);
    c.route_scale = m->routed_scaling_factor;
    c.route_bias = m->e_score_correction_bias;
    c.logits_dtype = MOECTS_F32;
    c.data = MOECTS_DATA_EXACT;
    c.tiers = MOECTS_TIER_FULL;
    return c;
}

static int push(moects_case_list *out, moects_case *c, const char *variant, int smoke)
{
    int n = snprintf(c->id, sizeof c->id, "moe_route/%s/t%lld%s%s", c->model, (long long)c->T, variant ? "/" : "",
                     variant ? variant : "");
    if (smoke) c->tiers |= MOECTS_TIER_SMOKE;
    return n < 0 || (size_t)n >= sizeof c->id ? -1 : moects__case_list_push(out, c);
}

/* Whether the router of c takes k experts a token: within E and the kept groups' experts; top-1 only
 * for Llama 4. */
static int takes_k(const moects_case *c, int64_t k)
{
    if (c->route_method == MOECTS_ROUTE_LLAMA4) return k == 1;
    return k <= c->topk_group * (c->E / c->n_group);
}

int moects__derive_route_cases(const moects_model *m, const moects_case *base, moects_case_list *out)
{
    if (!method_of(m)) return 0;
    for (size_t i = 0; i < sizeof T_GRID / sizeof *T_GRID; i++) {
        moects_case c = route_case(m, base, T_GRID[i]);
        if (push(out, &c, NULL, T_GRID[i] == 16)) return -1;
    }
    static const struct { const char *name; moects_dtype dt; moects_data data; } V[] = {
        {"bf16", MOECTS_BF16, MOECTS_DATA_EXACT},
        {"adversarial", MOECTS_F32, MOECTS_DATA_ADVERSARIAL},
        {"adversarial-bf16", MOECTS_BF16, MOECTS_DATA_ADVERSARIAL},
    };
    for (size_t i = 0; i < sizeof V / sizeof *V; i++) {
        moects_case c = route_case(m, base, 64);
        c.logits_dtype = V[i].dt, c.data = V[i].data;
        if (push(out, &c, V[i].name, 0)) return -1;
    }
    moects_case c = route_case(m, base, 40);
    c.data = MOECTS_DATA_ADVERSARIAL;
    if (push(out, &c, "smoke-adversarial", 1)) return -1;
    c = route_case(m, base, 64);
    c.data = MOECTS_DATA_ADVERSARIAL;
    c.E = c.E_global = c.E - c.n_group; /* each group one expert short: the row's tail is no full warp */
    if (c.E % 32 && c.E / c.n_group >= 2 && takes_k(&c, c.k) && push(out, &c, "adversarial-tail", 0)) return -1;
    for (size_t i = 0; i < sizeof K_SWEEP / sizeof *K_SWEEP; i++) {
        c = route_case(m, base, 16);
        if (K_SWEEP[i] == c.k || !takes_k(&c, K_SWEEP[i])) continue;
        char name[16];
        snprintf(name, sizeof name, "k%lld", (long long)K_SWEEP[i]);
        c.k = K_SWEEP[i];
        if (push(out, &c, name, 0)) return -1;
    }
    return 0;
}
