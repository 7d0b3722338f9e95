/* test_harness_fused_enclosure.c: on every fused_moe case of the smoke tier, built as a run builds it,
 * the enclosure of each built-in layer kernel's recipe under the FP32 claim (24, RNE) contains the exact
 * reference of that recipe element by element (DESIGN.md "The fused MoE layer": the exact result is
 * one admissible implementation, so an enclosure that leaves it out is a bug of the bound, the false
 * alarm the issue forbids). The exact reference is computed independently of the enclosure (ref/
 * fused_moe.c against ref/fused_enclosure.c; their own tests check each against hand values). Every
 * activation, Kimi K3's situ included. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_judge.h"
#include "moects_op.h"
#include "moects_registry.h"

static double value(moects_dtype dt, const void *p, int64_t i)
{
    return dt == MOECTS_F32 ? ((const float *)p)[i] : moects__bf16_to_f32(((const uint16_t *)p)[i]);
}

/* Elements of the exact output outside [lo, hi] under the judge's rule (NaN expected takes NaN only). */
static int64_t outside(const moects_inputs *in, const void *x, const void *lo, const void *hi)
{
    int64_t n = 0;
    for (int64_t i = 0; i < in->out_elems; i++) {
        double v = value(in->out_dtype, x, i), l = value(in->out_dtype, lo, i), h = value(in->out_dtype, hi, i);
        int ok = isnan(l) ? isnan(v) : (l == -INFINITY && h == INFINITY) || (l <= v && v <= h);
        n += !ok;
    }
    return n;
}

Test(fused_enclosure, holds_the_exact_reference_on_every_smoke_case, .timeout = 1200)
{
    moects_case_list all = {0};
    char err[512] = "";
    cr_assert_eq(moects__cases_builtin(MOECTS_SOURCE_DIR, &all, err, sizeof err), 0, "%s", err);
    size_t nk, checked = 0, situ = 0;
    const moects_kernel *const *k = moects__builtin_kernels(&nk);
    const moects__op_def *op = moects__op(MOECTS_OP_FUSED_MOE);
    const moects_acc_class cls = {24, 0, 0};
    for (size_t i = 0; i < all.n; i++) {
        const moects_case *c = &all.v[i];
        if (c->op != MOECTS_OP_FUSED_MOE || !(c->tiers & MOECTS_TIER_SMOKE)) continue;
        moects_inputs in;
        cr_assert_eq(moects__inputs_build(c, 1, &in, err, sizeof err), 0, "%s", err);
        void *x = malloc(in.out_bytes + 1), *lo = malloc(in.out_bytes + 1), *hi = malloc(in.out_bytes + 1);
        for (size_t j = 0; j < nk; j++) {
            moects_recipe r;
            char why[160];
            if (k[j]->op != MOECTS_OP_FUSED_MOE || k[j]->bug || !k[j]->supports(&in.fm, why, sizeof why) ||
                moects__recipe_parse(k[j]->recipe, MOECTS_OP_FUSED_MOE, &r))
                continue;
            cr_assert_eq(moects__reference(&in, r, x), 0, "%s: %s", c->id, k[j]->recipe);
            moects_op_args a;
            moects__host_args(&in, lo, &a);
            cr_assert_eq(op->enclosure(&in, &a, r, &cls, lo, hi, NULL), 0, "%s: %s", c->id, k[j]->recipe);
            cr_expect_eq(outside(&in, x, lo, hi), 0, "%s: %s: the exact reference leaves its enclosure", c->id,
                         k[j]->recipe);
            checked++;
            situ += c->activation == MOECTS_ACT_SITU;
        }
        free(x), free(lo), free(hi);
        moects__inputs_free(&in);
    }
    cr_expect_gt(checked, 200, "%zu (case, recipe) pairs", checked);
    cr_expect_gt(situ, 0, "Kimi K3's situ cases are checked too");
    moects__case_list_free(&all);
}
