/* test_ref_crmath.c: the correctly rounded binary32 exp, tanh and erf (ref/crmath.c,
 * moects_crmath.h). Hand-worked values near 1, the boundary distance on hand-worked doubles,
 * special values, thresholds (overflow, underflow to subnormals and +0, saturation to +-1) whose
 * bit patterns a throwaway MPFR program found (mpfr_exp/tanh/erf to 24 bits, RNDN, emin -148,
 * emax 128, subnormalized; each also checked here against MPFR), every entry of the hard-case
 * table, and random inputs, against MPFR computed the same way here. The exhaustive check of all
 * 2^32 inputs is the CTest crmath_exhaustive (tools/crmath_scan.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "moects_crmath.h"
#include "test_rng.h"

static float fb(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float (*const cr_fn[MOECTS_CR_NFN])(float) = {moects_cr_expf, moects_cr_tanhf, moects_cr_erff};
static const char *const name[MOECTS_CR_NFN] = {"exp", "tanh", "erf"};

/* MPFR's binary32 value nearest to fn(x): straight to 24 bits in binary32's exponent range. */
static uint32_t mpfr_cr(moects_cr_fn fn, uint32_t x)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t a, r;
    mpfr_inits2(24, a, r, (mpfr_ptr)0);
    mpfr_set_flt(a, fb(x), MPFR_RNDN);
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    int t = fn == MOECTS_CR_EXP    ? mpfr_exp(r, a, MPFR_RNDN)
            : fn == MOECTS_CR_TANH ? mpfr_tanh(r, a, MPFR_RNDN)
                                   : mpfr_erf(r, a, MPFR_RNDN);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    float f = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_clears(a, r, (mpfr_ptr)0);
    return bf(f);
}

/* fn(x) must be `want`, and MPFR must agree. */
static void expect(moects_cr_fn fn, uint32_t x, uint32_t want)
{
    uint32_t got = bf(cr_fn[fn](fb(x))), m = mpfr_cr(fn, x);
    cr_expect_eq(m, want, "%s(0x%08x): MPFR 0x%08x, test constant 0x%08x", name[fn], x, m, want);
    cr_expect_eq(got, want, "%s(0x%08x = %a): got 0x%08x (%a) want 0x%08x (%a)", name[fn], x,
                 (double)fb(x), got, (double)fb(got), want, (double)fb(want));
}

Test(crmath, hand_worked_near_one)
{
    expect(MOECTS_CR_EXP, 0x00000000u, 0x3F800000u); /* exp(+0) = 1 */
    expect(MOECTS_CR_EXP, 0x80000000u, 0x3F800000u); /* exp(-0) = 1 */
    /* exp(2^-24) = 1 + 2^-24 + 2^-49 + ...: just above the midpoint 1 + 2^-24 -> 1 + 2^-23 */
    expect(MOECTS_CR_EXP, 0x33800000u, 0x3F800001u);
    /* exp(2^-24 - 2^-48) = 1 + 2^-24 - 2^-48 + 2^-49 + ... < 1 + 2^-24 -> 1 */
    expect(MOECTS_CR_EXP, 0x337FFFFFu, 0x3F800000u);
    /* below 1 the spacing is 2^-24: exp(-2^-25) = 1 - 2^-25 + 2^-51 - ... above the midpoint
     * 1 - 2^-25 -> 1; exp(-2^-25 - 2^-48) = 1 - 2^-25 - 2^-48 + 2^-51 + ... below it -> 1 - 2^-24 */
    expect(MOECTS_CR_EXP, 0xB3000000u, 0x3F800000u);
    expect(MOECTS_CR_EXP, 0xB3000001u, 0x3F7FFFFFu);
    /* tiny x: tanh(x) = x - x^3/3 rounds to x; erf(x) = 2x/sqrt(pi) (1.1283...x): 2^-149 -> 2^-149,
     * 3 * 2^-149 -> 3.385 * 2^-149 -> 3 * 2^-149 */
    expect(MOECTS_CR_TANH, 0x00000001u, 0x00000001u);
    expect(MOECTS_CR_TANH, 0x80000001u, 0x80000001u);
    expect(MOECTS_CR_ERF, 0x00000001u, 0x00000001u);
    expect(MOECTS_CR_ERF, 0x00000003u, 0x00000003u);
}

Test(crmath, landmarks_from_mpfr)
{
    expect(MOECTS_CR_EXP, 0x3F800000u, 0x402DF854u); /* exp(1) = 2.7182817f */
    expect(MOECTS_CR_EXP, 0xBF800000u, 0x3EBC5AB2u); /* exp(-1) = 0.36787945f */
    expect(MOECTS_CR_EXP, 0x41200000u, 0x46AC14EEu); /* exp(10) = 22026.465f */
    expect(MOECTS_CR_EXP, 0xC1200000u, 0x383E6BCEu); /* exp(-10) */
    expect(MOECTS_CR_EXP, 0xC2C80000u, 0x0000001Bu); /* exp(-100) = 27 * 2^-149 (subnormal) */
    expect(MOECTS_CR_TANH, 0x3F000000u, 0x3EEC9A9Fu); /* tanh(0.5) = 0.46211717f */
    expect(MOECTS_CR_TANH, 0xBF000000u, 0xBEEC9A9Fu);
    expect(MOECTS_CR_TANH, 0x3F800000u, 0x3F42F7D6u); /* tanh(1) */
    expect(MOECTS_CR_TANH, 0x40000000u, 0x3F76CA83u); /* tanh(2) */
    expect(MOECTS_CR_ERF, 0x3F000000u, 0x3F053F7Bu); /* erf(0.5) = 0.5204999f */
    expect(MOECTS_CR_ERF, 0xBF000000u, 0xBF053F7Bu);
    expect(MOECTS_CR_ERF, 0x3F800000u, 0x3F57BB3Du); /* erf(1) */
    expect(MOECTS_CR_ERF, 0x40000000u, 0x3F7ECD71u); /* erf(2) */
}

Test(crmath, thresholds)
{
    /* overflow: exp(88.72283172607421875) = 0x1.ffff08p127 < FLT_MAX; from 88.72283935546875
     * (0x1.62e43p+6) exp(x) > FLT_MAX + 2^103 -> +inf */
    expect(MOECTS_CR_EXP, 0x42B17217u, 0x7F7FFF84u);
    expect(MOECTS_CR_EXP, 0x42B17218u, 0x7F800000u);
    expect(MOECTS_CR_EXP, 0x7F7FFFFFu, 0x7F800000u);
    /* the normal/subnormal edge: exp(-87.33654) = 2^-126 + 38 * 2^-149, next float down gives
     * the subnormal 0x007fffe6 */
    expect(MOECTS_CR_EXP, 0xC2AEAC4Fu, 0x00800026u);
    expect(MOECTS_CR_EXP, 0xC2AEAC50u, 0x007FFFE6u);
    /* underflow: exp(-103.972076) > 2^-150 -> 2^-149; exp(-103.972084) < 2^-150 -> +0 */
    expect(MOECTS_CR_EXP, 0xC2CFF1B4u, 0x00000001u);
    expect(MOECTS_CR_EXP, 0xC2CFF1B5u, 0x00000000u);
    expect(MOECTS_CR_EXP, 0xFF7FFFFFu, 0x00000000u);
    /* saturation: tanh(x) >= 1 - 2^-25 from 9.0109138 on, erf(x) from 3.9192059 on */
    expect(MOECTS_CR_TANH, 0x41102CB3u, 0x3F7FFFFFu);
    expect(MOECTS_CR_TANH, 0x41102CB4u, 0x3F800000u);
    expect(MOECTS_CR_TANH, 0xC1102CB4u, 0xBF800000u);
    expect(MOECTS_CR_TANH, 0x7F7FFFFFu, 0x3F800000u);
    expect(MOECTS_CR_ERF, 0x407AD444u, 0x3F7FFFFFu);
    expect(MOECTS_CR_ERF, 0x407AD445u, 0x3F800000u);
    expect(MOECTS_CR_ERF, 0xC07AD445u, 0xBF800000u);
    expect(MOECTS_CR_ERF, 0xFF7FFFFFu, 0xBF800000u);
}

Test(crmath, hard_cases_from_the_table)
{
    /* within 2M = 32 double ulps of a boundary, resolved by the table (MPFR's values) */
    expect(MOECTS_CR_EXP, 0x37FE7F03u, 0x3F8000FFu);
    expect(MOECTS_CR_EXP, 0x383A3EF1u, 0x3F800175u);
    expect(MOECTS_CR_TANH, 0x3AC37DE2u, 0x3AC37DD9u);
    expect(MOECTS_CR_TANH, 0x3F20B67Fu, 0x3F0E786Bu);
    expect(MOECTS_CR_ERF, 0x00AA320Cu, 0x00C00B88u);
    expect(MOECTS_CR_ERF, 0x042A320Cu, 0x04400B88u);
    /* and every entry of the three tables */
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++) {
        cr_expect_gt(moects__cr_count[fn], 0, "%s: empty table", name[fn]);
        for (size_t i = 0; i < moects__cr_count[fn]; i++)
            expect((moects_cr_fn)fn, moects__cr_table[fn][i].x, moects__cr_table[fn][i].r);
    }
}

Test(crmath, special_values)
{
    uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu};
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++)
        for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
            float r = cr_fn[fn](fb(nans[i]));
            cr_expect(isnan(r) && (bf(r) & 0x00400000u), "%s(0x%08x) = 0x%08x: not a quiet NaN",
                      name[fn], nans[i], bf(r));
        }
    expect(MOECTS_CR_EXP, 0x7F800000u, 0x7F800000u);  /* exp(+inf) = +inf */
    expect(MOECTS_CR_EXP, 0xFF800000u, 0x00000000u);  /* exp(-inf) = +0 */
    expect(MOECTS_CR_TANH, 0x7F800000u, 0x3F800000u); /* tanh(+-inf) = +-1 */
    expect(MOECTS_CR_TANH, 0xFF800000u, 0xBF800000u);
    expect(MOECTS_CR_ERF, 0x7F800000u, 0x3F800000u); /* erf(+-inf) = +-1 */
    expect(MOECTS_CR_ERF, 0xFF800000u, 0xBF800000u);
    expect(MOECTS_CR_TANH, 0x00000000u, 0x00000000u); /* signed zeros kept */
    expect(MOECTS_CR_TANH, 0x80000000u, 0x80000000u);
    expect(MOECTS_CR_ERF, 0x00000000u, 0x00000000u);
    expect(MOECTS_CR_ERF, 0x80000000u, 0x80000000u);
}

/* Distances in double ulps of the boundary's binade (2^-52 in [1, 2), 2^-53 in [0.5, 1)). */
Test(crmath, boundary_ulps_hand_worked)
{
    cr_expect_eq(moects__cr_boundary_ulps(1 + 0x1p-24), 0.0); /* midpoint of 1, 1 + 2^-23 */
    cr_expect_eq(moects__cr_boundary_ulps(-(1 + 0x1p-24)), 0.0);
    cr_expect_eq(moects__cr_boundary_ulps(1 + 0x1p-24 + 0x1p-52), 1.0);
    cr_expect_eq(moects__cr_boundary_ulps(1 + 0x1p-24 - 0x5p-52), 5.0);
    cr_expect_eq(moects__cr_boundary_ulps(1 - 0x1p-25), 0.0); /* midpoint of 1 - 2^-24, 1 */
    cr_expect_eq(moects__cr_boundary_ulps(1 - 0x1p-25 + 0x1p-53), 1.0);
    cr_expect_eq(moects__cr_boundary_ulps(1.0), 0x1p28); /* 2^-25 from 1 - 2^-25 */
    /* subnormals: 2^-150 between 0 and 2^-149, 3 * 2^-150 between 2^-149 and 2^-148 */
    cr_expect_eq(moects__cr_boundary_ulps(0x1p-150), 0.0);
    cr_expect_eq(moects__cr_boundary_ulps(0x1p-150 + 0x3p-202), 3.0);
    cr_expect_eq(moects__cr_boundary_ulps(0x1p-150 - 0x3p-203), 1.5); /* half-ulps below 2^-150 */
    cr_expect_eq(moects__cr_boundary_ulps(0x3p-150), 0.0);
    cr_expect_eq(moects__cr_boundary_ulps(0.0), 0x1p52); /* 2^-150 away */
    /* overflow: FLT_MAX + 2^103 = 2^128 - 2^103, ulp 2^75 */
    cr_expect_eq(moects__cr_boundary_ulps(0x1p128 - 0x1p103), 0.0);
    cr_expect_eq(moects__cr_boundary_ulps(0x1p128 - 0x1p103 + 0x7p75), 7.0);
    cr_expect_eq(moects__cr_boundary_ulps(0x1p128 - 0x1p103 - 0x7p75), 7.0);
    cr_expect_eq(moects__cr_boundary_ulps(0x1p128), 0x1p28);
    cr_expect_eq(moects__cr_boundary_ulps(INFINITY), INFINITY);
    cr_expect(isinf(moects__cr_boundary_ulps(NAN)));
    cr_expect_gt(moects__cr_boundary_ulps(0x1p1000), 0x1p52);
}

/* Random bit patterns, and random inputs where the results are not saturated. */
Test(crmath, random_vs_mpfr)
{
    static const float hi[MOECTS_CR_NFN] = {104.0f, 9.1f, 4.0f};
    rng_state = 20240611;
    for (int fn = 0; fn < MOECTS_CR_NFN; fn++)
        for (int i = 0; i < 20000; i++) {
            uint32_t x = rnd();
            if (i % 2) x = bf((float)ldexp((double)(rnd() >> 8), -24) * 2 * hi[fn] - hi[fn]);
            if (isnan(fb(x))) continue;
            uint32_t got = bf(cr_fn[fn](fb(x))), want = mpfr_cr((moects_cr_fn)fn, x);
            cr_expect_eq(got, want, "%s(0x%08x): got 0x%08x, MPFR 0x%08x", name[fn], x, got, want);
        }
}

/* An input whose C library result is within M of a boundary and that is not in the table must
 * abort, never return a guess: y = 1 + 2^-24 exactly (a midpoint) for x = 1 (not in the table). */
Test(crmath, missing_hard_case_aborts, .signal = SIGABRT)
{
    moects__cr_round(MOECTS_CR_EXP, 1.0f, 1 + 0x1p-24);
}
