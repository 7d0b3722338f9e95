/* test_ref_moe_route_recip.c: the route recipe keys norm=recip and renorm=recip (vLLM's
 * topkGatingSoftmax: p = e * (1 / S); its epilogue: w = v * (scale / sum)), ref/moe_route.c and
 * ref/moe_route_encl.c. Expected weights are worked out with MPFR at 24 bits, one correctly rounded
 * operation per FP32 operation of ref/moects_route.h (exp included), independently of the C float code;
 * the selection is re-done on those values (a higher score first, equal by the lower id). Rows are
 * drawn from a fixed LCG, so the test asserts, besides the bits, that some rows' weights differ from the
 * dividing recipe (the keys are not a no-op) and that the dividing recipe then rejects them. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <string.h>

#include "moects_route.h"

#define NE 16 /* experts */
#define NK 4  /* top-k */

/* One FP32 operation through MPFR: op(a, b) correctly rounded to 24 bits (normal range here). */
static float f32_op(int (*op)(mpfr_ptr, mpfr_srcptr, mpfr_srcptr, mpfr_rnd_t), float a, float b)
{
    mpfr_t x, y;
    mpfr_inits2(24, x, y, (mpfr_ptr)0);
    mpfr_set_flt(x, a, MPFR_RNDN), mpfr_set_flt(y, b, MPFR_RNDN);
    op(x, x, y, MPFR_RNDN);
    const float r = mpfr_get_flt(x, MPFR_RNDN);
    mpfr_clears(x, y, (mpfr_ptr)0);
    return r;
}

static float f32_exp(float a)
{
    mpfr_t x;
    mpfr_init2(x, 24);
    mpfr_set_flt(x, a, MPFR_RNDN);
    mpfr_exp(x, x, MPFR_RNDN);
    const float r = mpfr_get_flt(x, MPFR_RNDN);
    mpfr_clear(x);
    return r;
}

static float f32_sigmoid(float a) { return f32_op(mpfr_div, 1.0f, f32_op(mpfr_add, 1.0f, f32_exp(-a))); }

/* The k best of score [NE] (a higher score first, equal by the lower id) into ids [NK]. */
static void pick(const float *score, int32_t *ids)
{
    unsigned char taken[NE] = {0};
    for (int j = 0; j < NK; j++) {
        int b = -1;
        for (int e = 0; e < NE; e++)
            if (!taken[e] && (b < 0 || score[e] > score[b])) b = e;
        ids[j] = b, taken[b] = 1;
    }
}

/* The row's weights under norm=recip, renorm=recip by MPFR: SOFTMAX (renormalize, scale),
 * TOPK_SOFTMAX, SIGMOID (renormalize, + 1e-20f, scale). ids [NK] in selection order. */
static void mpfr_route(const moects_moe_route_shape *s, const float *x, int32_t *ids, float *w)
{
    float score[NE], m = x[0], S = 0.0f;
    for (int e = 1; e < NE; e++) m = x[e] > m ? x[e] : m;
    for (int e = 0; e < NE; e++)
        score[e] = s->method == MOECTS_ROUTE_SOFTMAX ? f32_exp(f32_op(mpfr_sub, x[e], m))
                   : s->method == MOECTS_ROUTE_SIGMOID ? f32_sigmoid(x[e]) : x[e];
    if (s->method == MOECTS_ROUTE_SOFTMAX) {
        for (int e = 0; e < NE; e++) S = f32_op(mpfr_add, S, score[e]);
        const float R = f32_op(mpfr_div, 1.0f, S);
        for (int e = 0; e < NE; e++) score[e] = f32_op(mpfr_mul, score[e], R);
    }
    pick(score, ids);
    float P = 0.0f;
    for (int j = 0; j < NK; j++) {
        w[j] = s->method == MOECTS_ROUTE_TOPK_SOFTMAX ? f32_exp(f32_op(mpfr_sub, x[ids[j]], x[ids[0]])) : score[ids[j]];
        P = f32_op(mpfr_add, P, w[j]);
    }
    if (s->method == MOECTS_ROUTE_SIGMOID) P = f32_op(mpfr_add, P, 1e-20f);
    const float c = f32_op(mpfr_div, s->method == MOECTS_ROUTE_TOPK_SOFTMAX ? 1.0f : s->scale, P);
    for (int j = 0; j < NK; j++) w[j] = f32_op(mpfr_mul, w[j], c);
}

/* Row `row` of the LCG: logits uniform in [-4, 4) on a 2^-12 grid. */
static void draw(int row, float *x)
{
    uint64_t u = 0x9E3779B97F4A7C15ull * (uint64_t)(row + 1);
    for (int e = 0; e < NE; e++) {
        u = u * 6364136223846793005ull + 1442695040888963407ull;
        x[e] = (float)((int)(u >> 49) - 16384) * 0x1p-12f;
    }
}

static const moects_route_recipe EXACT = {0}, RECIP = {.norm_recip = 1, .renorm_recip = 1};

/* 32 rows of one method: the reference under the keys is MPFR's, the check passes it under the keys
 * and (for the rows where the keys change a bit) fails it under the dividing recipe; at least one such
 * row. */
static void rows_of(moects_route_method method, float scale)
{
    const moects_moe_route_shape s = {.T = 1, .E = NE, .k = NK, .method = method, .n_group = 1, .topk_group = 1,
                                      .renormalize = 1, .scale = scale, .has_bias = 0, .logits_dtype = MOECTS_F32};
    int differ = 0;
    for (int row = 0; row < 32; row++) {
        float x[NE], w[NK], rw[NK], dw[NK];
        int32_t ids[NK], rid[NK], did[NK];
        int slot;
        draw(row, x);
        mpfr_route(&s, x, ids, w);
        const moects_moe_route_args a = {.logits = x};
        cr_assert_eq(moects__route_ref_row(&s, &a, &RECIP, 0, rid, rw), 0);
        cr_assert(!memcmp(rid, ids, sizeof ids) && !memcmp(rw, w, sizeof w), "method %d row %d: %a vs MPFR %a",
                  method, row, (double)rw[0], (double)w[0]);
        cr_assert_eq(moects__route_check_row(&s, &a, &RECIP, 0, ids, w, &slot), MOECTS_ROUTE_ROW_SAME);
        cr_assert_eq(moects__route_ref_row(&s, &a, &EXACT, 0, did, dw), 0);
        if (memcmp(did, ids, sizeof ids) || memcmp(dw, w, sizeof w)) {
            differ++;
            cr_assert_neq(moects__route_check_row(&s, &a, &EXACT, 0, ids, w, &slot), MOECTS_ROUTE_ROW_SAME);
            cr_assert_neq(moects__route_check_row(&s, &a, &RECIP, 0, did, dw, &slot), MOECTS_ROUTE_ROW_SAME);
        }
    }
    cr_assert(differ > 0, "method %d: the keys changed no bit on 32 rows", method);
}

Test(ref_moe_route_recip, softmax_renormalized_matches_mpfr) { rows_of(MOECTS_ROUTE_SOFTMAX, 1.0f); }
Test(ref_moe_route_recip, softmax_scaled_matches_mpfr) { rows_of(MOECTS_ROUTE_SOFTMAX, 2.5f); }
Test(ref_moe_route_recip, topk_softmax_matches_mpfr) { rows_of(MOECTS_ROUTE_TOPK_SOFTMAX, 1.0f); }
Test(ref_moe_route_recip, sigmoid_scaled_matches_mpfr) { rows_of(MOECTS_ROUTE_SIGMOID, 2.5f); }

/* By hand: softmax of {0, 0, 0, -Inf}, top-2, not renormalized, scale 2.5: 1 / 3 rounds to
 * 0x1.555556p-2 (test_ref_moe_route.c), and 1 * that is the same, so norm=recip keeps p; without
 * renormalization renorm=recip changes nothing: w = p * 2.5 = 0x1.aaaaacp-1 (exact). */
Test(ref_moe_route_recip, keys_without_renormalization)
{
    const float x[4] = {0, 0, 0, -INFINITY};
    const moects_moe_route_shape s = {.T = 1, .E = 4, .k = 2, .method = MOECTS_ROUTE_SOFTMAX, .n_group = 1,
                                      .topk_group = 1, .scale = 2.5f, .logits_dtype = MOECTS_F32};
    const moects_moe_route_args a = {.logits = x};
    int32_t ids[2];
    float w[2];
    cr_assert_eq(moects__route_ref_row(&s, &a, &RECIP, 0, ids, w), 0);
    cr_assert(ids[0] == 0 && ids[1] == 1 && w[0] == 0x1.aaaaacp-1f && w[1] == 0x1.aaaaacp-1f);
}

/* A bounded claim with the keys: the enclosure of fn=ulp4,sum=any,norm=recip,renorm=recip holds the
 * MPFR weights of the exact keys' recipe (a point of it), not always those of the dividing one. */
Test(ref_moe_route_recip, bounded_claim_holds_the_keys_weights)
{
    moects_route_recipe r;
    char err[200];
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(fn=ulp4,sum=any,norm=recip,renorm=recip)", &r, err,
                                            sizeof err), 0, "%s", err);
    cr_assert(r.fn == 3 && r.sum_any && r.norm_recip && r.renorm_recip && moects__route_bounded(&r));
    const moects_moe_route_shape s = {.T = 1, .E = NE, .k = NK, .method = MOECTS_ROUTE_SOFTMAX, .n_group = 1,
                                      .topk_group = 1, .renormalize = 1, .scale = 2.5f, .logits_dtype = MOECTS_F32};
    for (int row = 0; row < 8; row++) {
        float x[NE], w[NK], lo[NK], hi[NK];
        int32_t ids[NK];
        int slot;
        draw(row, x);
        mpfr_route(&s, x, ids, w);
        const moects_moe_route_args a = {.logits = x};
        cr_assert_eq(moects__route_encl_weights(&s, &a, &r, 0, ids, lo, hi), 0);
        for (int j = 0; j < NK; j++) cr_assert(lo[j] <= w[j] && w[j] <= hi[j] && lo[j] < hi[j]);
        cr_assert_eq(moects__route_check_row(&s, &a, &r, 0, ids, w, &slot), MOECTS_ROUTE_ROW_SAME);
    }
}

Test(ref_moe_route_recip, recipe_strings)
{
    moects_route_recipe r;
    char err[200];
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(norm=recip)", &r, err, sizeof err), 0);
    cr_assert(r.norm_recip && !r.renorm_recip && !moects__route_bounded(&r));
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(renorm=recip,norm=div)", &r, err, sizeof err), 0);
    cr_assert(!r.norm_recip && r.renorm_recip && !moects__route_bounded(&r));
    cr_assert_eq(moects__route_recipe_parse("moe_route.v1(norm=mul)", &r, err, sizeof err), -1);
    cr_assert(strstr(err, "norm div|recip"), "%s", err);
    /* the recipe value still holds ties and slots only */
    cr_assert_eq(moects__route_recipe_value(&r), moects__route_recipe_value(&EXACT));
}
