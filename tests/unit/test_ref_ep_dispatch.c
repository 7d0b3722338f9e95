/* test_ref_ep_dispatch.c: the ep_dispatch_combine reference (ref/moects_edc.h) on problems worked out by
 * hand: two ranks of two experts each, three tokens; what each rank receives and in which order; every
 * combined output; and one token whose two slots cancel, where fma and mul-add part:
 * (1 + 2^-7)(1 + 2^-23) = 1 + 2^-7 + 2^-23 + 2^-30 rounds to 1 + 2^-7 + 2^-23 in FP32 (2^-30 is below
 * half an ulp, 2^-24), so fma of the negated product onto it leaves -2^-30 (BF16 0xb080: sign, exponent
 * 97 = 0x61), and mul-add leaves +0. */
#include <criterion/criterion.h>
#include <math.h>

#include "moects_edc.h"

/* Rank 0: tokens 0, 1 and experts 0, 1; rank 1: token 2 and experts 2, 3.
 * ids {3, 0}, {-1, 1}, {2, 3}; weights {1/2, 1/4}, {NaN, 3/4}, {1, 1/2}; scales 2, -1, 1/2, 4;
 * x {1, 3}, {-2, 1/2}, {3/2, -1}. */
static const int64_t TF[] = {0, 2, 3}, EF[] = {0, 2, 4};
static const int32_t IDS[] = {3, 0, -1, 1, 2, 3};
static const float SC[] = {2.0f, -1.0f, 0.5f, 4.0f};
static const uint16_t X[] = {0x3f80, 0x4040, 0xc000, 0x3f00, 0x3fc0, 0xbf80};

static moects_edc_problem two_ranks(const float *w)
{
    return (moects_edc_problem){.world = 2, .T_total = 3, .H = 2, .k = 2, .E = 4, .token_first = TF,
                                .expert_first = EF, .x = X, .topk_ids = IDS, .topk_weights = w, .expert_scale = SC};
}

/* Rank 0 gets the slots on experts 0 and 1: slot 1 (token 0) and slot 3 (token 1); rank 1 those on 2 and
 * 3: slot 4 (expert 2), then slots 0 and 5 (expert 3, tokens 0 and 2). */
Test(ref_ep_dispatch, received_rows_and_order)
{
    const float w[] = {0.5f, 0.25f, NAN, 0.75f, 1.0f, 0.5f};
    moects_edc_problem p = two_ranks(w);
    int64_t rf[3], src[5];
    cr_assert_eq(moects__edc_recv_first(&p, rf), 0);
    cr_expect_eq(rf[0], 0);
    cr_expect_eq(rf[1], 2);
    cr_expect_eq(rf[2], 5);
    cr_assert_eq(moects__edc_recv_order(&p, rf, src), 0);
    const int64_t want[] = {1, 3, 4, 0, 5};
    for (int i = 0; i < 5; i++) cr_expect_eq(src[i], want[i], "row %d: %lld", i, (long long)src[i]);
    cr_expect_eq(moects__edc_rank_of(&p, 1), 0);
    cr_expect_eq(moects__edc_rank_of(&p, 2), 1);
    cr_expect_eq(moects__edc_rank_of(&p, -1), -1);
    cr_expect_eq(moects__edc_rank_of(&p, 4), -1);
}

/* token 0: 4 * 1/2 + 2 * 1/4 = 5/2 and 12 * 1/2 + 6 * 1/4 = 15/2; token 1 (its -1 slot and NaN weight
 * skipped): 2 * 3/4 = 3/2 and -1/2 * 3/4 = -3/8; token 2: 3/4 * 1 + 6 * 1/2 = 15/4 and -1/2 - 2 = -5/2. */
Test(ref_ep_dispatch, combined_outputs)
{
    const float w[] = {0.5f, 0.25f, NAN, 0.75f, 1.0f, 0.5f};
    moects_edc_problem p = two_ranks(w);
    uint16_t out[6];
    const float want[] = {2.5f, 7.5f, 1.5f, -0.375f, 3.75f, -2.5f};
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(moects__ref_edc_combine(&p, r ? MOECTS_RECIPE_EPG_MULADD_V1 : MOECTS_RECIPE_EPG_FMA_V1, out), 0);
        for (int i = 0; i < 6; i++) cr_expect_eq(moects__bf16_to_f32(out[i]), want[i], "%d: %g", i, (double)moects__bf16_to_f32(out[i]));
    }
    cr_expect_eq(moects__ref_edc_combine(&p, MOECTS_RECIPE_EXACT_V1, out), -1);
}

Test(ref_ep_dispatch, fma_and_muladd_part_on_cancellation)
{
    static const int64_t tf[] = {0, 1}, ef[] = {0, 2};
    static const int32_t ids[] = {0, 1};
    static const float sc[] = {1.0f, -1.0f}, w[] = {0x1.000002p0f, 0x1.000002p0f};
    static const uint16_t x[] = {0x3f81}; /* 1 + 2^-7 */
    moects_edc_problem p = {.world = 1, .T_total = 1, .H = 1, .k = 2, .E = 2, .token_first = tf, .expert_first = ef,
                            .x = x, .topk_ids = ids, .topk_weights = w, .expert_scale = sc};
    uint16_t out;
    cr_assert_eq(moects__ref_edc_combine(&p, MOECTS_RECIPE_EPG_FMA_V1, &out), 0);
    cr_expect_eq(out, 0xb080, "fma: 0x%04x", out);
    cr_assert_eq(moects__ref_edc_combine(&p, MOECTS_RECIPE_EPG_MULADD_V1, &out), 0);
    cr_expect_eq(out, 0x0000, "muladd: 0x%04x", out);
}

Test(ref_ep_dispatch, recipes_and_contract)
{
    moects_recipe r;
    int any = -1;
    cr_expect_eq(moects__edc_recipe_parse("ep_dispatch_combine.fma_v1(order=any)", &r, &any), 0);
    cr_expect_eq(r, MOECTS_RECIPE_EPG_FMA_V1);
    cr_expect_eq(any, 1);
    cr_expect_eq(moects__edc_recipe_parse("ep_dispatch_combine.muladd_v1(order=expert)", &r, &any), 0);
    cr_expect_eq(r, MOECTS_RECIPE_EPG_MULADD_V1);
    cr_expect_eq(any, 0);
    cr_expect_eq(moects__edc_recipe_parse("ep_dispatch_combine.fma_v1", &r, &any), -1);
    static const int64_t bad_tf[] = {0, 3, 2};
    const float w[] = {0.5f, 0.25f, NAN, 0.75f, 1.0f, 0.5f};
    moects_edc_problem p = two_ranks(w);
    p.token_first = bad_tf;
    int64_t rf[3];
    cr_expect_eq(moects__edc_recv_first(&p, rf), -1);
}
