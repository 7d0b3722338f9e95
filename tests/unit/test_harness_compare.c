/* Tests of harness/judge/compare.c. Expected values worked out by hand from the bit layouts
 * (BF16 = sign|8 exp|7 mantissa, FP32 = sign|8 exp|23 mantissa) and from the calc_diff formula. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "moects_compare.h"

Test(ulp, bf16_neighbours_and_signs)
{
    cr_assert_eq(moects__ulp_distance_bf16(0x3f80, 0x3f80), 0);
    cr_assert_eq(moects__ulp_distance_bf16(0x3f80, 0x3f81), 1);    /* 1.0 and 1.0078125 */
    cr_assert_eq(moects__ulp_distance_bf16(0x3f81, 0x3f80), 1);    /* symmetric */
    cr_assert_eq(moects__ulp_distance_bf16(0x3f7f, 0x3f80), 1);    /* across a binade */
    cr_assert_eq(moects__ulp_distance_bf16(0x0000, 0x8000), 0);    /* +0, -0 */
    cr_assert_eq(moects__ulp_distance_bf16(0x0001, 0x8001), 2);    /* +-min subnormal */
    cr_assert_eq(moects__ulp_distance_bf16(0x3f80, 0xbf80), 2 * 0x3f80); /* 1 vs -1: 32512 */
    cr_assert_eq(moects__ulp_distance_bf16(0x7f7f, 0x7f80), UINT64_MAX); /* max finite vs +Inf: unbounded */
    cr_assert_eq(moects__ulp_distance_bf16(0xff80, 0x7f80), UINT64_MAX); /* -Inf vs +Inf */
    cr_assert_eq(moects__ulp_distance_bf16(0x7f80, 0x7f80), 0);          /* +Inf vs itself */
    cr_assert_eq(moects__ulp_distance_f32(0x7f7fffffu, 0x7f800000u), UINT64_MAX);
    cr_assert_eq(moects__ulp_distance_f32(0xff800000u, 0xff800000u), 0);
    cr_assert_eq(moects__ulp_distance_bf16(0x7fc0, 0xffc1), 0);    /* NaN matches any NaN */
    cr_assert_eq(moects__ulp_distance_bf16(0x7fc0, 0x3f80), UINT64_MAX);
    cr_assert_eq(moects__ulp_distance_bf16(0x7f80, 0x7f81), UINT64_MAX); /* Inf vs NaN */
}

Test(ulp, f32)
{
    cr_assert_eq(moects__ulp_distance_f32(0x3f800000u, 0x3f800003u), 3);
    cr_assert_eq(moects__ulp_distance_f32(0x00000000u, 0x80000000u), 0);
    cr_assert_eq(moects__ulp_distance_f32(0x00000002u, 0x80000003u), 5);
    /* 1.0f vs -1.0f: 2 * 0x3f800000 = 2130706432 */
    cr_assert_eq(moects__ulp_distance_f32(0x3f800000u, 0xbf800000u), 2130706432ull);
    /* -Inf vs +Inf: unbounded, like an infinity against any other value */
    cr_assert_eq(moects__ulp_distance_f32(0xff800000u, 0x7f800000u), UINT64_MAX);
    cr_assert_eq(moects__ulp_distance_f32(0x7fc00000u, 0xffffffffu), 0);
    cr_assert_eq(moects__ulp_distance_f32(0x7fc00000u, 0x00000000u), UINT64_MAX);
}

Test(compare, identical_bf16)
{
    uint16_t a[3] = {0x3f80, 0x7fc0, 0x0000}, b[3] = {0x3f80, 0xffff, 0x0000};
    moects_compare_result r;
    cr_assert_eq(moects__compare(MOECTS_BF16, a, b, 3, &r), 0);
    cr_assert_eq(r.mismatches, 0);
    cr_assert_eq(r.max_ulp, 0);
    cr_assert_eq(r.first_index, -1);
    cr_assert_str_empty(r.got);
    /* finite pairs (1,1), (0,0): num 0, den 2 */
    cr_assert_eq(r.calc_diff, 0.0);
}

Test(compare, signed_zero_is_a_mismatch_of_zero_ulp)
{
    uint16_t a[2] = {0x3f80, 0x8000}, b[2] = {0x3f80, 0x0000};
    moects_compare_result r;
    moects__compare(MOECTS_BF16, a, b, 2, &r);
    cr_assert_eq(r.mismatches, 1);
    cr_assert_eq(r.max_ulp, 0);
    cr_assert_eq(r.first_index, 1);
    cr_assert_str_eq(r.got, "0x8000 (-0)");
    cr_assert_str_eq(r.want, "0x0000 (0)");
}

Test(compare, first_mismatch_and_calc_diff_bf16)
{
    /* got = [1, 2, 2], want = [1, 3, 2.5]: 0x4040 = 3, 0x4020 = 2.5.
     * num = 0 + 1 + 0.25 = 1.25; den = 2 + (4+9) + (4+6.25) = 25.25 */
    uint16_t got[3] = {0x3f80, 0x4000, 0x4000}, want[3] = {0x3f80, 0x4040, 0x4020};
    moects_compare_result r;
    moects__compare(MOECTS_BF16, got, want, 3, &r);
    cr_assert_eq(r.mismatches, 2);
    cr_assert_eq(r.first_index, 1);
    cr_assert_str_eq(r.got, "0x4000 (2)");
    cr_assert_str_eq(r.want, "0x4040 (3)");
    cr_assert_eq(r.max_ulp, 0x40);  /* 2 -> 3 is 64 BF16 steps (mantissa 0x00 -> 0x40) */
    cr_assert_float_eq(r.calc_diff, 1.25 / 25.25, 1e-15);
}

Test(compare, nan_vs_number_and_finite_only_calc_diff)
{
    /* got = [1, NaN, Inf, NaN], want = [2, 5, Inf, NaN]: finite pair only (1,2): 1/5. */
    float g[4] = {1.0f, NAN, INFINITY, NAN}, w[4] = {2.0f, 5.0f, INFINITY, -NAN};
    moects_compare_result r;
    moects__compare(MOECTS_F32, g, w, 4, &r);
    cr_assert_eq(r.mismatches, 2);
    cr_assert_eq(r.max_ulp, UINT64_MAX);
    cr_assert_eq(r.first_index, 0);
    cr_assert_str_eq(r.got, "0x3f800000 (1)");
    cr_assert_str_eq(r.want, "0x40000000 (2)");
    cr_assert_float_eq(r.calc_diff, 0.2, 1e-15);
}

Test(compare, all_zero_gives_zero_calc_diff)
{
    float g[2] = {0.0f, -0.0f}, w[2] = {0.0f, -0.0f};
    moects_compare_result r;
    moects__compare(MOECTS_F32, g, w, 2, &r);
    cr_assert_eq(r.mismatches, 0);
    cr_assert_eq(r.calc_diff, 0.0);
    cr_assert_eq(moects__compare(MOECTS_F32, g, w, 0, &r), 0);
    cr_assert_eq(r.calc_diff, 0.0);
}

Test(compare, opposite_signs_calc_diff_is_two)
{
    /* x = -y: sum (2y)^2 / sum 2y^2 = 2 */
    float g[2] = {1.5f, -3.0f}, w[2] = {-1.5f, 3.0f};
    moects_compare_result r;
    moects__compare(MOECTS_F32, g, w, 2, &r);
    cr_assert_float_eq(r.calc_diff, 2.0, 1e-15);
}

Test(compare, rejects_other_dtypes)
{
    int32_t a = 0;
    moects_compare_result r;
    cr_assert_eq(moects__compare(MOECTS_I32, &a, &a, 1, &r), -1);
    cr_assert_eq(r.first_index, -1);
}

/* The verdict of a tolerance kernel and its reason, bounds worked out by hand: only exceeded bounds
 * are named, an unbounded ULP distance (NaN against a number) in words. */
Test(compare, tolerance_reason_names_the_exceeded_bounds)
{
    char buf[256] = "";
    moects_compare_result r = {.calc_diff = 0.1, .max_ulp = 4, .first_index = -1};
    cr_assert_eq(moects__within_tolerance(&r, 0.1, 4, buf, sizeof buf), 1); /* both bounds inclusive */
    cr_assert_str_eq(buf, "");
    r.calc_diff = 0.5, r.max_ulp = 2;
    cr_assert_eq(moects__within_tolerance(&r, 0.1, 4, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "outside the declared tolerance: calc_diff 0.5 > 0.1");
    r.calc_diff = 0.0, r.max_ulp = 9;
    cr_assert_eq(moects__within_tolerance(&r, 1e-3, 4, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "outside the declared tolerance: max_ulp 9 > 4");
    r.calc_diff = 0.25;
    cr_assert_eq(moects__within_tolerance(&r, 0.01, 4, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "outside the declared tolerance: calc_diff 0.25 > 0.01; max_ulp 9 > 4");
    r.calc_diff = 0.0, r.max_ulp = UINT64_MAX, r.first_index = 1, r.first_unbounded = 3; /* NaN fill */
    cr_assert_eq(moects__within_tolerance(&r, INFINITY, 4, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "outside the declared tolerance: a NaN or Inf against another value (first at element 3)");
}

/* An overflow to Inf is no number of ULPs from a finite reference: a tolerance that gates only on
 * calc_diff (max_ulp UINT32_MAX, as cpu.ep_gather.saxpy) must still fail it. By hand, BF16:
 * 0xff80 is -Inf, 0xe4ad is -2.553e22 (the H200 host's saxpy case), 0x7f80 +Inf, 0x3f80 1.0. Before,
 * -Inf vs -2.553e22 was 0xff80 - 0xe4ad = 6867 ordered steps and +Inf vs -Inf 65280, both under
 * UINT32_MAX, and calc_diff skipped both pairs: the result passed. */
Test(compare, inf_against_another_value_is_unbounded)
{
    const uint16_t want[4] = {0x3f80, 0xe4ad, 0xff80, 0xff80}, inf_for_number[4] = {0x3f80, 0xff80, 0xff80, 0xff80},
                   opposite_inf[4] = {0x3f80, 0xe4ad, 0xff80, 0x7f80};
    char buf[256] = "";
    moects_compare_result r;
    moects__compare(MOECTS_BF16, want, want, 4, &r); /* -Inf vs -Inf: identical bits */
    cr_assert_eq(r.max_ulp, 0);
    cr_assert_eq(r.first_unbounded, -1);
    moects__compare(MOECTS_BF16, inf_for_number, want, 4, &r);
    cr_assert_eq(r.mismatches, 1);
    cr_assert_eq(r.max_ulp, UINT64_MAX);
    cr_assert_eq(r.first_unbounded, 1);
    cr_assert_eq(r.calc_diff, 0.0); /* the only finite pair is 1.0 vs 1.0 */
    cr_assert_eq(moects__within_tolerance(&r, 1e-4, UINT32_MAX, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "outside the declared tolerance: a NaN or Inf against another value (first at element 1)");
    moects__compare(MOECTS_BF16, opposite_inf, want, 4, &r);
    cr_assert_eq(r.max_ulp, UINT64_MAX);
    cr_assert_eq(r.first_unbounded, 3);
    const float wf[2] = {1e30f, -INFINITY}, gf[2] = {1e30f, -FLT_MAX}; /* FP32: a finite value for -Inf */
    moects__compare(MOECTS_F32, gf, wf, 2, &r);
    cr_assert_eq(r.max_ulp, UINT64_MAX);
    cr_assert_eq(r.first_unbounded, 1);
}

/* Bit-identical outputs holding NaN, -0, +-Inf and a subnormal: nothing differs (by definition of
 * the verdicts); one ULP in the last of 4099 elements is still found, at index 4098. */
Test(compare, identical_specials_and_a_difference_in_the_last_element_f32)
{
    enum { n = 4099 };
    static uint32_t a[n], b[n];
    const uint32_t specials[] = {0x7fc00000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x00000001u, 0x3f800000u};
    for (int i = 0; i < n; i++) a[i] = b[i] = specials[i % 6];
    moects_compare_result r;
    cr_assert_eq(moects__compare(MOECTS_F32, a, b, n, &r), 0);
    cr_assert_eq(r.mismatches, 0);
    cr_assert_eq(r.max_ulp, 0);
    cr_assert_eq(r.calc_diff, 0.0);
    cr_assert_eq(r.first_index, -1);
    a[n - 1] = 0x3f800000u; /* 1.0 against the next float up: one ULP */
    b[n - 1] = 0x3f800001u;
    cr_assert_eq(moects__compare(MOECTS_F32, a, b, n, &r), 0);
    cr_assert_eq(r.mismatches, 1);
    cr_assert_eq(r.first_index, n - 1);
    cr_assert_eq(r.max_ulp, 1);
}

/* For people, a value still holding an output's poison is named as never written: run 0's all-ones
 * NaNs, run 1's quiet NaNs (payload 0xA5 ^ 0x3B = 0x9E: BF16 0x7FC0 | 0x1E, F32 0x7FC00000 | 0x9E << 14
 * | 0x9E) and the Python package's 0x7FA5 / 0x7FA5A5A5; a NaN a kernel computes (0x7FC0) is not, and
 * moects__format_value itself (what results.json stores) stays plain. */
Test(compare, poison_is_named_never_written)
{
    const uint16_t b[] = {0xFFFF, 0x7FDE, 0x7FA5, 0x7FC0};
    const uint32_t f[] = {0xFFFFFFFFu, 0x7FE7809Eu, 0x7FA5A5A5u, 0x7FC00000u};
    const char *bp[] = {"0xffff (-nan)", "0x7fde (nan)", "0x7fa5 (nan)", "0x7fc0 (nan)"};
    const char *fp[] = {"0xffffffff (-nan)", "0x7fe7809e (nan)", "0x7fa5a5a5 (nan)", "0x7fc00000 (nan)"};
    char buf[96], noted[128];
    for (int i = 0; i < 4; i++) {
        const char *note = i < 3 ? ", the poison: never written)" : ")";
        moects__format_value(MOECTS_BF16, b, i, buf, sizeof buf);
        cr_assert_str_eq(buf, bp[i]);
        moects__value_noted(buf, noted, sizeof noted);
        cr_assert(!strncmp(noted, bp[i], strlen(bp[i]) - 1) && !strcmp(noted + strlen(bp[i]) - 1, note), "%s", noted);
        moects__format_value(MOECTS_F32, f, i, buf, sizeof buf);
        cr_assert_str_eq(buf, fp[i]);
        moects__value_noted(buf, noted, sizeof noted);
        cr_assert(!strncmp(noted, fp[i], strlen(fp[i]) - 1) && !strcmp(noted + strlen(fp[i]) - 1, note), "%s", noted);
    }
}
