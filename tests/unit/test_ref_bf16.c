/* test_ref_bf16.c: float <-> bf16 (ref/bf16.c). Hand-worked bit patterns, then MPFR (8 bits,
 * emin -132, emax 128, subnormalized: one RNE rounding to bfloat16) on every upper half with the
 * tie-critical lower halves and on random floats. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "moects_ref.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint16_t cvt(uint32_t u) { return moects__bf16_from_f32(from_bits(u)); }

Test(bf16, rne_ties_hand_worked)
{
    cr_assert_eq(cvt(0x3F800000u), 0x3F80); /* 1.0 */
    /* 1 + 2^-8: halfway between 0x3F80 (even) and 0x3F81 -> 0x3F80 */
    cr_assert_eq(cvt(0x3F808000u), 0x3F80);
    /* 1 + 3*2^-8: halfway between 0x3F81 (odd) and 0x3F82 (even) -> 0x3F82 */
    cr_assert_eq(cvt(0x3F818000u), 0x3F82);
    cr_assert_eq(cvt(0x3F808001u), 0x3F81); /* just above the tie */
    cr_assert_eq(cvt(0x3F807FFFu), 0x3F80); /* just below */
    cr_assert_eq(cvt(0xBF808000u), 0xBF80); /* sign-symmetric */
    cr_assert_eq(cvt(0xBF818000u), 0xBF82);
    /* carry into the exponent: 0x3FFF8000 (1.99609375..., tie, 0x3FFF odd) -> 0x4000 = 2.0 */
    cr_assert_eq(cvt(0x3FFF8000u), 0x4000);
}

Test(bf16, subnormals)
{
    cr_assert_eq(cvt(0x00000001u), 0x0000);  /* 2^-149 -> +0 */
    cr_assert_eq(cvt(0x80000001u), 0x8000);  /* -> -0 */
    cr_assert_eq(cvt(0x00008000u), 0x0000);  /* 2^-134: tie between 0 and 2^-133 -> 0 */
    cr_assert_eq(cvt(0x00008001u), 0x0001);  /* above the tie -> 2^-133 */
    cr_assert_eq(cvt(0x00018000u), 0x0002);  /* 3*2^-134: tie 0x0001/0x0002 -> even */
    cr_assert_eq(cvt(0x007F8000u), 0x0080);  /* largest subnormals round up to 2^-126 */
    cr_assert_eq(moects__bf16_to_f32(0x0001), 0x1p-133f);
    cr_assert_eq(moects__bf16_to_f32(0x807F), -0x7Fp-133f);
}

Test(bf16, overflow_inf_nan)
{
    cr_assert_eq(cvt(0x7F7F7FFFu), 0x7F7F); /* below the midpoint to 2^128 */
    cr_assert_eq(cvt(0x7F7F8000u), 0x7F80); /* tie, 0x7F7F odd -> 2^128 = Inf */
    cr_assert_eq(cvt(0x7F7FFFFFu), 0x7F80); /* FLT_MAX -> Inf */
    cr_assert_eq(cvt(0xFF7FFFFFu), 0xFF80);
    cr_assert_eq(cvt(0x7F800000u), 0x7F80); /* Inf */
    cr_assert_eq(cvt(0xFF800000u), 0xFF80);
    /* NaN stays NaN (quiet bit 0x0040 set), sign kept, even when the payload is only in the low
     * half (0x7F800001 would round to Inf as a plain bit pattern). */
    cr_assert_eq(cvt(0x7FC00000u), 0x7FC0);
    cr_assert_eq(cvt(0x7F800001u), 0x7FC0);
    cr_assert_eq(cvt(0xFF800001u), 0xFFC0);
    cr_assert_eq(cvt(0x7FFFFFFFu), 0x7FFF);
    cr_assert_eq(cvt(0x7FA00000u), 0x7FE0);
    cr_assert(isnan(moects__bf16_to_f32(0x7FC1)));
    cr_assert(isinf(moects__bf16_to_f32(0xFF80)) && moects__bf16_to_f32(0xFF80) < 0);
}

/* MPFR's bf16 rounding of a finite float. */
static uint16_t mpfr_bf16(float f)
{
    mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
    mpfr_t r;
    mpfr_init2(r, 8);
    int t = mpfr_set_flt(r, f, MPFR_RNDN);
    mpfr_set_emin(-132);
    mpfr_set_emax(128);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    float g = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_set_emin(old_min);
    mpfr_set_emax(old_max);
    mpfr_clear(r);
    uint32_t u;
    memcpy(&u, &g, sizeof u);
    return (uint16_t)(u >> 16);
}

Test(bf16, against_mpfr)
{
    static const uint16_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
    for (uint32_t hi = 0; hi < 0x10000u; hi++) {
        if ((hi & 0x7F80u) == 0x7F80u) continue; /* Inf/NaN: covered above */
        for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++) {
            uint32_t u = hi << 16 | lows[i];
            uint16_t want = mpfr_bf16(from_bits(u)), got = cvt(u);
            cr_assert_eq(got, want, "0x%08x: got 0x%04x want 0x%04x", u, got, want);
        }
    }
    uint64_t z = 12345;
    for (int i = 0; i < 200000; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(z >> 32);
        if ((u & 0x7F800000u) == 0x7F800000u) continue;
        cr_assert_eq(cvt(u), mpfr_bf16(from_bits(u)), "0x%08x", u);
    }
}

Test(bf16, roundtrip_exact)
{
    for (uint32_t b = 0; b < 0x10000u; b++) {
        float f = moects__bf16_to_f32((uint16_t)b);
        if (isnan(f)) continue;
        cr_assert_eq(moects__bf16_from_f32(f), b, "0x%04x", b);
    }
}
