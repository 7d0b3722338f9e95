/* moects_route.h: the router (moe_route, DESIGN.md "Routing", docs/moe_route.md): its recipe (what a
 * kernel declares: tie rule, slot order) and its exact reference, with the per-row check the judge
 * asks. ref/ only: libc, libm.
 *
 * The methods' arithmetic (moects_route_method in moects_types.h), every operation FP32 RNE in this
 * order, exp correctly rounded (ref/crmath.c):
 *   sigmoid(x)  = 1 / (1 + exp(-x))                     (three roundings: exp, add, divide)
 *   softmax     m = max x; e_i = exp(x_i - m); S = e_0 + e_1 + ... in index order; p_i = e_i / S
 *   selection   top-k on the selection score (SOFTMAX: p, or p + b with a bias; TOPK_SOFTMAX, LLAMA4:
 *               x; SIGMOID: s, or s + b), a higher score first, equal scores by the lower id (ties=low);
 *               SOFTMAX and SIGMOID with n_group > 1: a group's score is the sum of its two best selection scores
 *               with a bias (one FP32 add), its best without; the topk_group best groups (equal by
 *               the lower group index) are kept and top-k runs over their experts only
 *   slots       sorted: the selection order above (score descending, then id ascending)
 *   weights     over the k selected in slot order:
 *               SOFTMAX: w = p (never p + b), renormalize: w_j = p_j / (p_0 + p_1 + ...); then
 *                        w_j = w_j * scale
 *               TOPK_SOFTMAX: w_j = exp(x_j - x_0) / (sum of those in slot order)
 *               SIGMOID: w = s (never s + b); renormalize: w_j = s_j / ((s_0 + s_1 + ...) + 1e-20f);
 *                        then w_j = w_j * scale. The 1e-20 is transformers' DeepseekV3 router, the
 *                        HF MoEGate and vLLM's CUDA noaux_tc kernel (which starts its sum at 1e-20);
 *                        vLLM's Python grouped_topk and DeepSeek's inference Gate divide by the bare
 *                        sum (the same bits unless the sum is below ~1.7e-13; 0 / 0 = NaN there).
 *                        Groups not kept are out of the choice (-Inf: vLLM, DeepSeek's Gate), not
 *                        filled with 0.0 (transformers), which a negative s + b would lose to
 *               LLAMA4: w = sigmoid(x_0)
 * The sums of the weights run in the canonical slot order whatever order a kernel writes its slots
 * in, so a set of ids has one set of weights. A row holding a NaN (logit or bias) has no defined
 * result: the reference refuses it. */
#ifndef MOECTS_ROUTE_H
#define MOECTS_ROUTE_H
#include <stddef.h>

#include "moects_ref.h"
#include "moects_types.h"

/* A kernel's route recipe, string form moects_route.v1[(ties=low|any,slots=sorted|any)]:
 *   ties=low    equal selection scores go to the lower id (vLLM's kernels); any: any of them
 *   slots=sorted  slots in the selection order; any: any order (torch.topk(sorted=False)), ids
 *                 compared as a set */
typedef struct {
    int ties_any, slots_any;
} moects_route_recipe;

#define MOECTS_ROUTE_RECIPE_V1 "moe_route.v1"

/* Parse s into r: 0, or -1 with what is wrong in err ("ties: \"x\" is not one of low|any"). */
int moects__route_recipe_parse(const char *s, moects_route_recipe *r, char *err, size_t errlen);
/* r's moects_recipe value (MOECTS_RECIPE_ROUTE_BASE + ties_any + 2 slots_any), and back: 0, or -1
 * for a value that is not a route recipe. */
moects_recipe moects__route_recipe_value(const moects_route_recipe *r);
int moects__route_recipe_of(moects_recipe v, moects_route_recipe *r);

/* Why shape s is not a routing problem (E, k, groups, dtype), or NULL; the text opens with its
 * refusal class ("shape: ", "format: ", "routing: "; moects_refusal), as kernels refuse with it. */
const char *moects__route_shape_invalid(const moects_moe_route_shape *s);

/* The exact reference: a->topk_ids and a->topk_weights [T, k] under the method's recipe with ties=low
 * and sorted slots. Host pointers. 0, or -1 for an invalid shape, a row holding a NaN, or out of
 * memory. */
int moects__ref_moe_route(const moects_moe_route_shape *s, const moects_moe_route_args *a);

/* What one row of a kernel's output is, judged under recipe r (moects__route_check_row). */
typedef enum {
    MOECTS_ROUTE_ROW_SAME = 0,   /* the reference's ids (as a set under slots=any) and weights */
    MOECTS_ROUTE_ROW_TIE = 1,    /* other ids that tie with the reference's (ties=any), their weights */
    MOECTS_ROUTE_ROW_BAD_ID = 2, /* an id outside [0, E) or given twice */
    MOECTS_ROUTE_ROW_IDS = 3,    /* ids that are not a top-k of the recipe's scores (under its tie rule) */
    MOECTS_ROUTE_ROW_ORDER = 4,  /* slots=sorted, but the slots are not in the selection order */
    MOECTS_ROUTE_ROW_WEIGHT = 5, /* the right ids, a weight not the recipe's bits */
    MOECTS_ROUTE_ROW_NAN = 6     /* the row holds a NaN: not judged (no defined result) */
} moects_route_row;

/* Row t of a kernel's output (ids [k], w [k]) against the recipe (the inputs in a, its outputs
 * ignored): which of the above, and in *slot the first slot at fault (-1 for SAME, TIE, NAN).
 * Returns -1 for an invalid shape or out of memory. */
int moects__route_check_row(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                            const moects_route_recipe *r, int64_t t, const int32_t *ids, const float *w,
                            int *slot);
#endif
