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
 *   norm=recip  (a declared key) SOFTMAX's p_i = e_i * (1 / S), two roundings, for e_i / S (vLLM's
 *               topkGatingSoftmax and moeSoftmax: reciprocal_row_sum / normalizing_factor)
 *   renorm=recip  (a declared key) every division after the top-k (SOFTMAX, SIGMOID with
 *               renormalize; TOPK_SOFTMAX) becomes w_j = v_j * (c / D), D the denominator above (with
 *               its 1e-20), c the scale (SOFTMAX, SIGMOID) or 1 (TOPK_SOFTMAX), so the scale is folded
 *               in and not applied again: vLLM's current topkGating epilogue (scale = routed_scaling_factor;
 *               scale /= denom; output *= scale). Without renormalize, w = p * scale as above
 * The sums of the weights run in the canonical slot order whatever order a kernel writes its slots
 * in, so a set of ids has one set of weights. A row holding a NaN (logit or bias) has no defined
 * result: the reference refuses it. */
#ifndef MOECTS_ROUTE_H
#define MOECTS_ROUTE_H
#include <stddef.h>
#include <stdint.h>

#include "moects_ref.h"
#include "moects_types.h"

/* A kernel's route recipe, string form moe_route.v1[(ties=low|any,slots=sorted|any,fn=..,sum=..,norm=..,renorm=..)]:
 *   ties=low    equal selection scores go to the lower id (vLLM's kernels); any: any of them
 *   slots=sorted  slots in the selection order; any: any order (torch.topk(sorted=False)), ids
 *                 compared as a set
 *   fn=cr       exp (softmax's and sigmoid's) correctly rounded; ulp1|ulp2|ulp4|ulp8: within that
 *               many floats of the correctly rounded value (a fast exp, libm's expf)
 *   sum=ordered the softmax denominator and the renormalization sums in the order above; any: FP32
 *               additions in any order (a tree, a warp shuffle, reversed)
 *   norm=div    softmax's p_i = e_i / S; recip: e_i * (1 / S) (vLLM's topkGatingSoftmax)
 *   renorm=div  the divisions after the top-k as above; recip: times (scale / sum), the scale folded in
 *               (vLLM's topkGating since it took routed_scaling_factor)
 * norm and renorm are exact recipes (the reference computes them; the judge reads them from the
 * string like fn and sum), and combine with a bounded claim (the enclosure follows them).
 * fn != cr or sum=any is a bounded claim (moects__route_bounded): the weights are judged by their
 * enclosure and the ids by the scores' enclosure (moects__route_encl_check; docs/moe_route.md
 * "Bounded claims"). The recipe value (moects__route_recipe_value) holds ties and slots only: the
 * reference is the exact one (fn=cr, sum=ordered) whatever the kernel claims, and the judge reads
 * fn and sum from the kernel's recipe string, so the four values 28..31 stay all there are. */
typedef struct {
    int ties_any, slots_any;
    int fn;      /* 0 cr; 1..4 ulp1, ulp2, ulp4, ulp8 (moects__route_fn_ulp) */
    int sum_any; /* the sums in any order */
    int norm_recip;   /* softmax: e_i * (1 / S) */
    int renorm_recip; /* after the top-k: v_j * (scale / sum) */
} moects_route_recipe;

/* The exp's allowance in floats (0: correctly rounded), and whether r's claim is bounded. */
static inline uint32_t moects__route_fn_ulp(const moects_route_recipe *r) { return r->fn ? 1u << (r->fn - 1) : 0; }
static inline int moects__route_bounded(const moects_route_recipe *r) { return r->fn != 0 || r->sum_any; }

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
/* The same, a row without a defined result (moects__route_load_row) given ids -1 and weights NaN and
 * counted in *undefined: 0, or -1 for an invalid shape or out of memory. The op's reference: such rows
 * are not judged (their ids only checked to be valid, moects__route_check_row). */
int moects__ref_moe_route_rows(const moects_moe_route_shape *s, const moects_moe_route_args *a, int64_t *undefined);

/* Row t's reference ids [k] (selection order) and weights [k] under recipe r's arithmetic (norm,
 * renorm; fn and sum read as cr and ordered), ties=low: 0, 1 for a row without a defined result, -1
 * for an invalid shape or out of memory. */
int moects__route_ref_row(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                          const moects_route_recipe *r, int64_t t, int32_t *ids, float *w);

/* What one row of a kernel's output is, judged under recipe r (moects__route_check_row). */
typedef enum {
    MOECTS_ROUTE_ROW_SAME = 0,   /* the reference's ids (as a set under slots=any) and weights */
    MOECTS_ROUTE_ROW_TIE = 1,    /* other ids that tie with the reference's (ties=any), their weights */
    MOECTS_ROUTE_ROW_BAD_ID = 2, /* an id outside [0, E) or given twice */
    MOECTS_ROUTE_ROW_IDS = 3,    /* ids that are not a top-k of the recipe's scores (under its tie rule) */
    MOECTS_ROUTE_ROW_ORDER = 4,  /* slots=sorted, but the slots are not in the selection order */
    MOECTS_ROUTE_ROW_WEIGHT = 5, /* the right ids, a weight not the recipe's bits */
    MOECTS_ROUTE_ROW_NAN = 6     /* the row holds a NaN: not judged (no defined result), its ids valid */
} moects_route_row;

/* Row t of a kernel's output (ids [k], w [k]) against the recipe (the inputs in a, its outputs
 * ignored): which of the above, and in *slot the first slot at fault (-1 for SAME, TIE, NAN).
 * Returns -1 for an invalid shape or out of memory. */
int moects__route_check_row(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                            const moects_route_recipe *r, int64_t t, const int32_t *ids, const float *w,
                            int *slot);
/* Row t's logits in FP32 into x [E]: 0, or 1 when the row has no defined result (a NaN or +Inf logit
 * or bias, or every logit -Inf). */
int moects__route_load_row(const moects_moe_route_shape *s, const moects_moe_route_args *a, int64_t t, float *x);

/* ---- the enclosure of a bounded claim (ref/moe_route_encl.c; proof: docs/moe_route.md) ---- */

/* The weights' enclosure of row t for the set ids [k] (any order, distinct, in [0, E)) under the
 * bounded recipe r: lo [k], hi [k] (FP32, ids' slot order) hold the weight every admissible
 * implementation gives each id when it chose that set: exp within moects__route_fn_ulp(r) floats of
 * the correctly rounded value, every other operation the recipe's FP32 RNE one, the sums in any order.
 * lo = -Inf, hi = +Inf where it makes no claim. 0, 1 for a row without a defined result, -1 for an
 * invalid shape or out of memory. */
int moects__route_encl_weights(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                               const moects_route_recipe *r, int64_t t, const int32_t *ids, float *lo, float *hi);

/* A kernel's row (ids [k] valid and distinct, w [k]) under the bounded recipe r, x [E] the row's
 * logits, ref_ids [k] the exact reference's: MOECTS_ROUTE_ROW_SAME (the reference's set), _TIE (another
 * set some admissible scores select: a tie within the enclosure), _IDS, _ORDER (slots=sorted that no
 * admissible scores sort so), _WEIGHT (a weight outside its enclosure); *slot the first slot at fault
 * (-1 when none). -1 out of memory. */
int moects__route_encl_check(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                             const moects_route_recipe *r, const float *x, const int32_t *ref_ids,
                             const int32_t *ids, const float *w, int *slot);
#endif
