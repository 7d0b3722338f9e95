/* test_ref_moe_route.c: the router's reference (moects__ref_moe_route) and its per-row check
 * (moects__route_check_row, ref/moe_route.c) on rows worked out by hand: selection with exact ties
 * under both tie rules, a grouped top-k with a correction bias on 8 experts in 4 groups, and
 * renormalization. Every expected value is derived in the comments: exps of 0 and -Inf (1 and 0),
 * sigmoid(0) = 1 / (1 + 1) = 1/2, binary fractions, and thirds: 1/3 = 0x1.5555555...p-2 keeps
 * 0x1.555554p-2 in 24 bits with a remainder of 0x0.0000015... above half an ulp (0x0.000001), so
 * FP32 gives 0x1.555556p-2. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "moects_route.h"

static const moects_route_recipe LOW = {0}, ANY = {.ties_any = 1}, ANY_UNSORTED = {.ties_any = 1, .slots_any = 1};

static moects_moe_route_shape shape(int64_t E, int64_t k, moects_route_method m)
{
    return (moects_moe_route_shape){.T = 1, .E = E, .k = k, .method = m, .n_group = 1, .topk_group = 1,
                                    .renormalize = 0, .scale = 1.0f, .has_bias = 0, .logits_dtype = MOECTS_F32};
}

/* Row 0's check of ids/w under r. */
static int check(const moects_moe_route_shape *s, const float *x, const float *b, const moects_route_recipe *r,
                 const int32_t *ids, const float *w)
{
    moects_moe_route_args a = {.logits = x, .bias = b};
    int slot;
    return moects__route_check_row(s, &a, r, 0, ids, w, &slot);
}

static void route(const moects_moe_route_shape *s, const float *x, const float *b, int32_t *ids, float *w)
{
    moects_moe_route_args a = {.logits = x, .bias = b, .topk_ids = ids, .topk_weights = w};
    cr_assert_eq(moects__ref_moe_route(s, &a), 0);
}

/* Top-2 on the logits {1, 3, 3, 2, 3, 0}: three experts tie at 3. ties=low takes 1 and 2; the weights
 * are a softmax over two equal logits: exp(0) / (1 + 1) = 1/2 each. */
Test(ref_moe_route, ties_on_logits)
{
    const float x[6] = {1, 3, 3, 2, 3, 0};
    const moects_moe_route_shape s = shape(6, 2, MOECTS_ROUTE_TOPK_SOFTMAX);
    int32_t ids[2];
    float w[2];
    route(&s, x, NULL, ids, w);
    cr_assert(ids[0] == 1 && ids[1] == 2 && w[0] == 0.5f && w[1] == 0.5f);
    const float half[2] = {0.5f, 0.5f};
    cr_assert_eq(check(&s, x, NULL, &LOW, (int32_t[]){1, 2}, half), MOECTS_ROUTE_ROW_SAME);
    cr_assert_eq(check(&s, x, NULL, &LOW, (int32_t[]){1, 4}, half), MOECTS_ROUTE_ROW_IDS);   /* tied, but ties=low */
    cr_assert_eq(check(&s, x, NULL, &ANY, (int32_t[]){4, 2}, half), MOECTS_ROUTE_ROW_TIE);   /* equal scores: any order */
    cr_assert_eq(check(&s, x, NULL, &ANY, (int32_t[]){0, 1}, half), MOECTS_ROUTE_ROW_IDS);   /* 1 < 3: not a top-2 */
    cr_assert_eq(check(&s, x, NULL, &LOW, (int32_t[]){2, 1}, half), MOECTS_ROUTE_ROW_ORDER); /* ties=low: 1 first */
    cr_assert_eq(check(&s, x, NULL, &ANY, (int32_t[]){1, 1}, half), MOECTS_ROUTE_ROW_BAD_ID);
    cr_assert_eq(check(&s, x, NULL, &ANY, (int32_t[]){1, 6}, half), MOECTS_ROUTE_ROW_BAD_ID);
    cr_assert_eq(check(&s, x, NULL, &LOW, (int32_t[]){1, 2}, (float[]){0.5f, nextafterf(0.5f, 1)}),
                 MOECTS_ROUTE_ROW_WEIGHT);
}

/* Slots in any order: {3, 1} for the top-2 of {0, 5, 1, 4} is the reference's set {1, 3}; sorted, it
 * is out of order. Llama 4's top-1 on the logits with the weight sigmoid(0) = 1/2 for the tie at 0. */
Test(ref_moe_route, unsorted_slots_and_llama4)
{
    const float x[4] = {0, 5, 1, 4};
    const moects_moe_route_shape s = shape(4, 2, MOECTS_ROUTE_TOPK_SOFTMAX);
    int32_t ids[2];
    float w[2];
    route(&s, x, NULL, ids, w);
    cr_assert(ids[0] == 1 && ids[1] == 3);
    const float wu[2] = {w[1], w[0]};
    cr_assert_eq(check(&s, x, NULL, &ANY_UNSORTED, (int32_t[]){3, 1}, wu), MOECTS_ROUTE_ROW_SAME);
    cr_assert_eq(check(&s, x, NULL, &ANY, (int32_t[]){3, 1}, wu), MOECTS_ROUTE_ROW_ORDER);
    const float z[3] = {0, 0, -INFINITY};
    const moects_moe_route_shape l4 = shape(3, 1, MOECTS_ROUTE_LLAMA4);
    route(&l4, z, NULL, ids, w);
    cr_assert(ids[0] == 0 && w[0] == 0.5f);
    cr_assert_eq(check(&l4, z, NULL, &ANY, (int32_t[]){1}, (float[]){0.5f}), MOECTS_ROUTE_ROW_TIE);
}

/* DeepSeek-V3's grouped top-k by hand: 8 experts in 4 groups of 2, keep 2 groups, top-2, bias,
 * renormalize, scale 2. Logits 0: s = 1/2 everywhere, so s + b = 1/2 + b exactly:
 *   b   = {1/4, -1/4, 1/8, 1/8, 0, 0, 3/16, -1/2}
 *   sel = {3/4, 1/4, 5/8, 5/8, 1/2, 1/2, 11/16, 0}
 * group scores (sum of the top 2): g0 1, g1 5/4, g2 1, g3 11/16: g1 first, then g0 and g2 tie at 1 and
 * g0, the lower, is kept. Experts 0..3: 3/4 (e0), then e2 and e3 tie at 5/8: e2. Weights from the
 * unbiased s: 1/2 / (1/2 + 1/2 + 1e-20) = 1/2 (1e-20 is far below half an ulp of 1), times 2 = 1.
 * Ranked by their best score instead (g0 3/4, g3 11/16, ...) the groups would be g0, g3 and the ids
 * {0, 6}: not a top-k of the recipe under any tie rule. */
Test(ref_moe_route, grouped_topk_8_experts_4_groups)
{
    const float x[8] = {0}, b[8] = {0.25f, -0.25f, 0.125f, 0.125f, 0, 0, 0.1875f, -0.5f};
    moects_moe_route_shape s = shape(8, 2, MOECTS_ROUTE_SIGMOID);
    s.n_group = 4, s.topk_group = 2, s.has_bias = 1, s.renormalize = 1, s.scale = 2.0f;
    int32_t ids[2];
    float w[2];
    route(&s, x, b, ids, w);
    cr_assert(ids[0] == 0 && ids[1] == 2, "ids %d %d", ids[0], ids[1]);
    cr_assert(w[0] == 1.0f && w[1] == 1.0f, "w %a %a", (double)w[0], (double)w[1]);
    const float one[2] = {1.0f, 1.0f};
    cr_assert_eq(check(&s, x, b, &ANY, (int32_t[]){0, 3}, one), MOECTS_ROUTE_ROW_TIE);  /* e3 ties e2 */
    cr_assert_eq(check(&s, x, b, &LOW, (int32_t[]){0, 3}, one), MOECTS_ROUTE_ROW_IDS);
    cr_assert_eq(check(&s, x, b, &ANY, (int32_t[]){0, 6}, one), MOECTS_ROUTE_ROW_IDS);  /* groups by max */
    cr_assert_eq(check(&s, x, b, &ANY, (int32_t[]){0, 4}, one), MOECTS_ROUTE_ROW_IDS);  /* g0, g2 leave g1 out */
    cr_assert_eq(check(&s, x, b, &ANY, (int32_t[]){2, 3}, one), MOECTS_ROUTE_ROW_IDS);  /* e0 (3/4) left out */
    cr_assert_eq(check(&s, x, b, &ANY, (int32_t[]){0, 2}, (float[]){0.5f, 0.5f}), MOECTS_ROUTE_ROW_WEIGHT);
}

/* Two places where engines disagree on DeepSeek-V3's grouped top-k, pinned to the reference's
 * choice. (1) The + 1e-20 of the denominator (transformers DeepseekV3 / HF MoEGate, vLLM's CUDA
 * noaux_tc kernel; vLLM's Python grouped_topk and DeepSeek's inference Gate have none). Logits
 * {-Inf, -Inf, 0, 0}, bias {1, 1, 0, 0}: s = {1 / (1 + exp(+Inf)) = 1 / Inf = 0, 0, 1/2, 1/2}, the
 * choice s + b = {1, 1, 1/2, 1/2} takes e0 and e1 (equal: the lower first), whose unbiased s sum to
 * 0: 0 / (0 + 1e-20) = 0, times 5/2 = 0; without the epsilon 0 / 0 would be NaN. (2) Groups left out
 * are out (-Inf, as vLLM and DeepSeek's Gate mask them; transformers fills them with 0.0). 8 experts
 * in 2 groups of 4, keep 1, top-2, logits 0 so s = 1/2 and s + b exact:
 *   b   = {1, -1, -1, -1, -3/4, -3/4, -3/4, -3/4}
 *   sel = {3/2, -1/2, -1/2, -1/2, -1/4, -1/4, -1/4, -1/4}
 * group scores (top-2 sums): g0 3/2 - 1/2 = 1, g1 -1/4 - 1/4 = -1/2: g0 kept. Its top-2: e0 (3/2),
 * then e1, e2, e3 tie at -1/2: e1. A 0.0 fill would make g1's experts (0 > -1/2) win the second slot.
 * Weights 1/2 / (1/2 + 1/2 + 1e-20) = 1/2, scale 1. */
Test(ref_moe_route, grouped_topk_epsilon_and_masked_groups)
{
    const float x[4] = {-INFINITY, -INFINITY, 0, 0}, b[4] = {1, 1, 0, 0};
    moects_moe_route_shape s = shape(4, 2, MOECTS_ROUTE_SIGMOID);
    s.has_bias = 1, s.renormalize = 1, s.scale = 2.5f;
    int32_t ids[2];
    float w[2];
    route(&s, x, b, ids, w);
    cr_assert(ids[0] == 0 && ids[1] == 1, "ids %d %d", ids[0], ids[1]);
    cr_assert(w[0] == 0.0f && w[1] == 0.0f && !signbit(w[0]) && !signbit(w[1]), "w %a %a", (double)w[0],
              (double)w[1]);
    cr_assert_eq(check(&s, x, b, &LOW, (int32_t[]){0, 1}, (float[]){NAN, NAN}), MOECTS_ROUTE_ROW_WEIGHT);

    const float y[8] = {0}, c[8] = {1, -1, -1, -1, -0.75f, -0.75f, -0.75f, -0.75f};
    moects_moe_route_shape g = shape(8, 2, MOECTS_ROUTE_SIGMOID);
    g.n_group = 2, g.topk_group = 1, g.has_bias = 1, g.renormalize = 1;
    route(&g, y, c, ids, w);
    cr_assert(ids[0] == 0 && ids[1] == 1, "ids %d %d", ids[0], ids[1]);
    cr_assert(w[0] == 0.5f && w[1] == 0.5f, "w %a %a", (double)w[0], (double)w[1]);
    const float half[2] = {0.5f, 0.5f};
    cr_assert_eq(check(&g, y, c, &ANY, (int32_t[]){0, 3}, half), MOECTS_ROUTE_ROW_TIE);
    cr_assert_eq(check(&g, y, c, &ANY, (int32_t[]){0, 4}, half), MOECTS_ROUTE_ROW_IDS); /* 0.0 fill */
}

/* Renormalization. Softmax of {0, 0, 0, -Inf}: exp gives 1, 1, 1, 0, the sum 3, p = 1/3 =
 * 0x1.555556p-2 each (rounded up, see the header). Top-2 without renormalization: p itself, times a
 * scale 5/2: 0x1.555556p-2 * 5/2 = 0x1.aaaaacp-1 exactly representable (24 bits), so that. With
 * renormalization: p / (p + p) = 1/2 exactly. Top-3 then softmax over {5, 5, 5}: 1 / (1 + 1 + 1) =
 * 0x1.555556p-2. */
Test(ref_moe_route, renormalization)
{
    const float x[4] = {0, 0, 0, -INFINITY};
    moects_moe_route_shape s = shape(4, 2, MOECTS_ROUTE_SOFTMAX);
    int32_t ids[3];
    float w[3];
    s.scale = 2.5f;
    route(&s, x, NULL, ids, w);
    cr_assert(ids[0] == 0 && ids[1] == 1 && w[0] == 0x1.aaaaacp-1f && w[1] == 0x1.aaaaacp-1f);
    s.scale = 1.0f, s.renormalize = 1;
    route(&s, x, NULL, ids, w);
    cr_assert(w[0] == 0.5f && w[1] == 0.5f);
    const float y[4] = {5, 1, 5, 5};
    const moects_moe_route_shape t = shape(4, 3, MOECTS_ROUTE_TOPK_SOFTMAX);
    route(&t, y, NULL, ids, w);
    cr_assert(ids[0] == 0 && ids[1] == 2 && ids[2] == 3);
    for (int j = 0; j < 3; j++) cr_assert_eq(w[j], 0x1.555556p-2f);
}

/* A NaN logit has no defined result: the reference refuses the row, the check says so. */
Test(ref_moe_route, nan_row_refused)
{
    const float x[4] = {0, NAN, 1, 2};
    const moects_moe_route_shape s = shape(4, 1, MOECTS_ROUTE_TOPK_SOFTMAX);
    int32_t ids[1];
    float w[1];
    moects_moe_route_args a = {.logits = x, .topk_ids = ids, .topk_weights = w};
    cr_assert_eq(moects__ref_moe_route(&s, &a), -1);
    cr_assert_eq(check(&s, x, NULL, &ANY, (int32_t[]){3}, (float[]){1.0f}), MOECTS_ROUTE_ROW_NAN);
}

/* The op's reference over rows of which one holds a NaN: rows {0, NaN, 1, 2} and {1, 3, 2, 0}, top-1 on
 * the logits. Row 0 has no defined result: ids -1, weight NaN, counted; row 1 takes expert 1 (3 is the
 * largest) with weight exp(0) / exp(0) = 1. The check still wants valid ids in the NaN row: id 4 of
 * E = 4 is BAD_ID there, id 3 is NAN (not judged). */
Test(ref_moe_route, nan_row_ids_checked)
{
    const float x[8] = {0, NAN, 1, 2, 1, 3, 2, 0};
    moects_moe_route_shape s = shape(4, 1, MOECTS_ROUTE_TOPK_SOFTMAX);
    s.T = 2;
    int32_t ids[2];
    float w[2];
    int64_t undefined = 0;
    moects_moe_route_args a = {.logits = x, .topk_ids = ids, .topk_weights = w};
    cr_assert_eq(moects__ref_moe_route_rows(&s, &a, &undefined), 0);
    cr_assert(undefined == 1 && ids[0] == -1 && isnan(w[0]) && ids[1] == 1 && w[1] == 1.0f);
    cr_assert_eq(check(&s, x, NULL, &LOW, (int32_t[]){4}, (float[]){1.0f}), MOECTS_ROUTE_ROW_BAD_ID);
    cr_assert_eq(check(&s, x, NULL, &LOW, (int32_t[]){3}, (float[]){1.0f}), MOECTS_ROUTE_ROW_NAN);
}

Test(ref_moe_route, recipe_strings)
{
    moects_route_recipe r;
    char err[200];
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(slots=any,ties=any)", &r, err, sizeof err), 0);
    cr_assert(r.ties_any && r.slots_any);
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(ties=high)", &r, err, sizeof err), -1);
    cr_assert_eq(moects__route_recipe_parse("moe_route.v2", &r, err, sizeof err), -1);
    moects_route_recipe back;
    cr_assert_eq(moects__route_recipe_of(moects__route_recipe_value(&ANY), &back), 0);
    cr_assert(back.ties_any && !back.slots_any);
}
