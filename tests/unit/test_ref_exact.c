/* test_ref_exact.c: moects_xsum (ref/exact.c) against MPFR: the exact sum accumulated at 2600
 * bits (enough for every double and every product of two doubles in [2^-500, 2^500]), then one
 * rounding to binary32 (24 bits, emin -148, emax 128, subnormalized) or bfloat16 (8 bits,
 * emin -132, emax 128), as the MPFR manual's mpfr_subnormalize example prescribes. */
#include <criterion/criterion.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "moects_exact.h"
#include "moects_gemm_internal.h"
#include "test_mpfr_round.h"
#include "test_rng.h"

#define ACC_PREC 2600

static int rnd_int(int lo, int hi) { return lo + (int)(rnd64() % (uint64_t)(hi - lo + 1)); }
/* Random double with a random 53-bit (or short) significand and binary exponent in [elo, ehi]. */
static double rnd_double(int elo, int ehi)
{
    uint64_t m = rnd64() >> 11 | (1ull << 52);
    int bits = rnd_int(1, 53); /* short significands make exact ties and cancellations likely */
    m >>= 53 - bits;
    double v = ldexp((double)m, rnd_int(elo, ehi) - (bits - 1));
    return (rnd64() & 1) ? -v : v;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float mpfr_f32(mpfr_t acc) { return ref_round(acc, 24, -148); }
static uint16_t mpfr_bf16(mpfr_t acc) { return (uint16_t)(f32_bits(ref_round(acc, 8, -132)) >> 16); }

/* Both engines hold the same terms; compare both roundings bit for bit. MPFR gives -0 for a
 * sum that cancels to 0 only when every term was -0; xsum gives +0 for an exact zero (as
 * x + (-x) = +0 in RNE); the term lists here never hold -0. */
static void check(const moects_xsum *s, mpfr_t acc, const char *what, int iter)
{
    float want = mpfr_f32(acc), got = moects__xsum_round_f32(s);
    if (mpfr_zero_p(acc)) want = 0.0f;
    cr_assert_eq(f32_bits(got), f32_bits(want), "%s #%d f32: got %a (0x%08x) want %a (0x%08x)",
                 what, iter, (double)got, f32_bits(got), (double)want, f32_bits(want));
    uint16_t wb = mpfr_zero_p(acc) ? 0 : mpfr_bf16(acc), gb = moects__xsum_round_bf16(s);
    cr_assert_eq(gb, wb, "%s #%d bf16: got 0x%04x want 0x%04x", what, iter, gb, wb);
}

static void add_both(moects_xsum *s, mpfr_t acc, double v)
{
    moects__xsum_add(s, v);
    cr_assert_eq(mpfr_add_d(acc, acc, v, MPFR_RNDN), 0, "MPFR accumulation not exact");
}
static void add_product_both(moects_xsum *s, mpfr_t acc, double a, double b)
{
    mpfr_t p;
    mpfr_init2(p, 106);
    cr_assert_eq(mpfr_set_d(p, a, MPFR_RNDN), 0);
    cr_assert_eq(mpfr_mul_d(p, p, b, MPFR_RNDN), 0);
    cr_assert_eq(mpfr_add(acc, acc, p, MPFR_RNDN), 0, "MPFR accumulation not exact");
    mpfr_clear(p);
    moects__xsum_add_product(s, a, b);
}

/* A sum of n doubles whose exact total is v (v finite): big random parts that cancel. */
static void add_split(moects_xsum *s, mpfr_t acc, double v, int n)
{
    double rest = v;
    for (int i = 0; i < n; i++) {
        double big = rnd_double(ilogb(v == 0 ? 1.0 : v) - 20, ilogb(v == 0 ? 1.0 : v) + 40);
        add_both(s, acc, big);
        add_both(s, acc, -big); /* exact pair: cancels */
    }
    add_both(s, acc, rest);
}

static void run_random(const char *what, int iters, int nterm_max, int elo, int ehi)
{
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC);
    for (int it = 0; it < iters; it++) {
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        int n = rnd_int(1, nterm_max);
        for (int i = 0; i < n; i++) add_both(&s, acc, rnd_double(elo, ehi));
        check(&s, acc, what, it);
    }
    mpfr_clear(acc);
}

Test(exact, random_float_range)
{
    rng_state = 1;
    run_random("float range", 4000, 40, -160, 130);
}

Test(exact, random_full_double_range)
{
    rng_state = 2;
    run_random("double range", 3000, 60, -1074, 1000);
}

Test(exact, random_long_sums)
{
    rng_state = 3;
    run_random("long", 200, 3000, -200, 200);
}

Test(exact, random_subnormal_results)
{
    rng_state = 4;
    run_random("subnormal", 4000, 8, -160, -120);
}

/* x_1..x_n then -x_n..-x_1 plus a small residue: massive cancellation to a tiny result. */
Test(exact, cancellation)
{
    rng_state = 5;
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC);
    for (int it = 0; it < 2000; it++) {
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        double xs[32];
        int n = rnd_int(1, 32);
        for (int i = 0; i < n; i++) add_both(&s, acc, xs[i] = rnd_double(-300, 300));
        if (rnd64() & 1) add_both(&s, acc, rnd_double(-1074, 0));
        for (int i = n - 1; i >= 0; i--) add_both(&s, acc, -xs[i] * ((rnd64() & 3) ? 1.0 : 0.5));
        check(&s, acc, "cancel", it);
    }
    mpfr_clear(acc);
}

/* Exact midpoints between adjacent binary32 (and bf16) values, split into many terms, then
 * nudged by 0 or +-2^-1074 or a far-away tiny term: ties to even vs. the remainder's sign. */
Test(exact, midpoints)
{
    rng_state = 6;
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC);
    for (int it = 0; it < 4000; it++) {
        int bf = it & 1;
        int sig = bf ? 8 : 24;
        /* a value with sig+1 significant bits whose last bit is 1: a midpoint at precision sig */
        int e = rnd_int(-150, 127);
        uint64_t m = (rnd64() & ((1ull << sig) - 1)) | (1ull << sig);
        m |= 1;
        double mid = ldexp((double)m, e - sig);
        if (rnd64() & 1) mid = -mid;
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        add_split(&s, acc, mid, rnd_int(0, 4));
        switch (rnd_int(0, 3)) {
        case 0: break;
        case 1: add_both(&s, acc, 0x1p-1074); break;
        case 2: add_both(&s, acc, -0x1p-1074); break;
        default: add_both(&s, acc, rnd_double(-1074, -400)); break;
        }
        check(&s, acc, bf ? "bf16 midpoint" : "f32 midpoint", it);
    }
    mpfr_clear(acc);
}

Test(exact, products)
{
    rng_state = 7;
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC);
    for (int it = 0; it < 3000; it++) {
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        int n = rnd_int(1, 40);
        for (int i = 0; i < n; i++) {
            int narrow = it % 3 == 0; /* products in the float range, many of them ties */
            double a = narrow ? rnd_double(-80, 60) : rnd_double(-500, 500);
            double b = narrow ? rnd_double(-80, 60) : rnd_double(-500, 500);
            add_product_both(&s, acc, a, b);
        }
        check(&s, acc, "products", it);
    }
    /* Tiny products (below 2^-969): the slow path, still exact while >= 2^-1074 bits. */
    for (int it = 0; it < 1000; it++) {
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        double a = ldexp((double)(rnd64() >> 40 | 1), -520 - rnd_int(0, 17));
        double b = ldexp((double)(rnd64() >> 40 | 1), -520 - rnd_int(0, 17));
        add_product_both(&s, acc, a, b);
        add_both(&s, acc, rnd_double(-1000, -990));
        /* compare at double range: scale up by 2^1000 exactly and round to f32 there */
        moects__xsum_scale(&s, 0x1p1000);
        mpfr_mul_2si(acc, acc, 1000, MPFR_RNDN);
        check(&s, acc, "tiny products", it);
    }
    mpfr_clear(acc);
}

Test(exact, scale)
{
    rng_state = 8;
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC + 60);
    for (int it = 0; it < 3000; it++) {
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        int n = rnd_int(1, 30);
        for (int i = 0; i < n; i++) add_both(&s, acc, rnd_double(-400, 300));
        double a = rnd_double(-150, 150);
        moects__xsum_scale(&s, a);
        cr_assert_eq(mpfr_mul_d(acc, acc, a, MPFR_RNDN), 0);
        check(&s, acc, "scale", it);
    }
    mpfr_clear(acc);
}

/* Hand-worked values (each cross-checked by MPFR as well). */
static float sum_f32(const double *v, int n)
{
    moects_xsum s;
    moects__xsum_init(&s);
    for (int i = 0; i < n; i++) moects__xsum_add(&s, v[i]);
    return moects__xsum_round_f32(&s);
}
static uint16_t sum_bf16(const double *v, int n)
{
    moects_xsum s;
    moects__xsum_init(&s);
    for (int i = 0; i < n; i++) moects__xsum_add(&s, v[i]);
    return moects__xsum_round_bf16(&s);
}

Test(exact, hand_worked)
{
    /* 1 + 2^-24 is the midpoint of 1 and 1 + 2^-23: ties to even -> 1. */
    cr_assert_eq(sum_f32((double[]){1.0, 0x1p-24}, 2), 1.0f);
    /* ... plus 2^-1074 is above the midpoint -> 1 + 2^-23 (rounding to double first would lose
     * the 2^-1074 and give 1: the double-rounding trap). */
    cr_assert_eq(sum_f32((double[]){1.0, 0x1p-24, 0x1p-1074}, 3), 1.0f + 0x1p-23f);
    cr_assert_eq(sum_f32((double[]){1.0, 0x1p-24, -0x1p-1074}, 3), 1.0f);
    /* 1 + 3*2^-24: midpoint of 1+2^-23 (odd) and 1+2^-22 (even) -> 1 + 2^-22. */
    cr_assert_eq(sum_f32((double[]){1.0, 0x3p-24}, 2), 1.0f + 0x1p-22f);
    /* 1e300 + 1 - 1e300 = 1 exactly. */
    cr_assert_eq(sum_f32((double[]){1e300, 1.0, -1e300}, 3), 1.0f);
    /* Subnormal: 2^-150 is half the smallest subnormal: tie -> 0; 3*2^-151 -> 2^-149. */
    cr_assert_eq(f32_bits(sum_f32((double[]){0x1p-150}, 1)), 0u);
    cr_assert_eq(f32_bits(sum_f32((double[]){-0x1p-150}, 1)), 0x80000000u); /* -0 */
    cr_assert_eq(f32_bits(sum_f32((double[]){0x1p-150, 0x1p-1074}, 2)), 1u);
    cr_assert_eq(f32_bits(sum_f32((double[]){0x3p-151}, 1)), 1u); /* 0.75*2^-149 -> 2^-149 */
    cr_assert_eq(f32_bits(sum_f32((double[]){0x1p-149, 0x1p-150}, 2)), 2u);
    /* Overflow: FLT_MAX + half its ulp (2^103) is the midpoint to 2^128: ties to even -> Inf;
     * one 2^-1074 less -> FLT_MAX. */
    cr_assert_eq(sum_f32((double[]){0x1.fffffep127, 0x1p103}, 2), INFINITY);
    cr_assert_eq(sum_f32((double[]){0x1.fffffep127, 0x1p103, -0x1p-1074}, 3), 0x1.fffffep127f);
    cr_assert_eq(sum_f32((double[]){-0x1p200}, 1), -INFINITY);
    /* Exact zero is +0. */
    cr_assert_eq(f32_bits(sum_f32((double[]){5.5, -5.5}, 2)), 0u);
    cr_assert_eq(f32_bits(sum_f32(NULL, 0)), 0u);
    /* BF16: 1 + 2^-8 ties to 1 (0x3F80); 1 + 3*2^-8 ties to 1 + 2^-6 (0x3F82); 1 + 2^-8 +
     * 2^-1074 -> 1 + 2^-7 (0x3F81). */
    cr_assert_eq(sum_bf16((double[]){1.0, 0x1p-8}, 2), 0x3F80);
    cr_assert_eq(sum_bf16((double[]){1.0, 0x3p-8}, 2), 0x3F82);
    cr_assert_eq(sum_bf16((double[]){1.0, 0x1p-8, 0x1p-1074}, 3), 0x3F81);
    /* BF16 smallest subnormal 2^-133 = 0x0001; 2^-134 ties to 0; bf16 max 0x7F7F = (2-2^-7)2^127,
     * + 2^119 (half ulp) -> Inf. */
    cr_assert_eq(sum_bf16((double[]){0x1p-133}, 1), 0x0001);
    cr_assert_eq(sum_bf16((double[]){0x1p-134}, 1), 0x0000);
    cr_assert_eq(sum_bf16((double[]){0x1p-134, 0x1p-1074}, 2), 0x0001);
    cr_assert_eq(sum_bf16((double[]){0x1.fep127, 0x1p119}, 2), 0x7F80);
    cr_assert_eq(sum_bf16((double[]){0x1.fep127, 0x1p119, -0x1p-600}, 3), 0x7F7F);
}

Test(exact, nan_inf)
{
    cr_assert(isnan(sum_f32((double[]){INFINITY, -INFINITY}, 2)));
    cr_assert(isnan(sum_f32((double[]){1.0, NAN}, 2)));
    cr_assert_eq(sum_f32((double[]){INFINITY, -1e300, 5.0}, 3), INFINITY);
    cr_assert_eq(sum_f32((double[]){-INFINITY, 1e300}, 2), -INFINITY);
    cr_assert_eq(sum_bf16((double[]){-INFINITY, 1.0}, 2), 0xFF80);
    uint16_t nb = sum_bf16((double[]){NAN}, 1);
    cr_assert((nb & 0x7F80) == 0x7F80 && (nb & 0x7F) != 0, "bf16 NaN 0x%04x", nb);
    moects_xsum s;
    moects__xsum_init(&s);
    moects__xsum_add_product(&s, 0.0, INFINITY); /* 0 * Inf = NaN */
    cr_assert(isnan(moects__xsum_round_f32(&s)));
    moects__xsum_init(&s);
    moects__xsum_add_product(&s, -2.0, INFINITY);
    moects__xsum_add(&s, 1e308);
    cr_assert_eq(moects__xsum_round_f32(&s), -INFINITY);
    moects__xsum_scale(&s, -1.0);
    cr_assert_eq(moects__xsum_round_f32(&s), INFINITY);
    moects__xsum_scale(&s, 0.0); /* Inf * 0 = NaN */
    cr_assert(isnan(moects__xsum_round_f32(&s)));
    moects__xsum_init(&s);
    moects__xsum_add(&s, 3.0);
    moects__xsum_scale(&s, -INFINITY);
    cr_assert_eq(moects__xsum_round_f32(&s), -INFINITY);
    /* Products that overflow double are +-Inf, as IEEE multiplication gives. */
    moects__xsum_init(&s);
    moects__xsum_add_product(&s, 1e300, -1e300);
    cr_assert_eq(moects__xsum_round_f32(&s), -INFINITY);
}

/* The expansion stays short (the CAP bound) under adversarial growth: one bit in every
 * 60th binade of the whole double range, added in random order, then removed. */
Test(exact, expansion_length_bounded)
{
    rng_state = 9;
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC);
    for (int it = 0; it < 200; it++) {
        moects_xsum s;
        moects__xsum_init(&s);
        mpfr_set_zero(acc, 1);
        for (int i = 0; i < 400; i++) {
            add_both(&s, acc, ldexp(rnd64() & 1 ? 1.0 : -1.0, rnd_int(-1074, 1000)));
            cr_assert(s.n < MOECTS_XSUM_CAP, "n = %d", s.n);
        }
        check(&s, acc, "length", it);
    }
    mpfr_clear(acc);
}

/* moects__exact_store's fast path (the sum is the double h, h * alpha exact): one rounding of
 * h * alpha to BF16 by its bits and to FP32 by the cast, against MPFR; random significands of 1 to
 * 53 bits (ties to 8 bits are frequent), binary exponents from BF16's subnormals to past its
 * overflow, alpha 1 or 2^-3. */
Test(exact, store_fast_path)
{
    rng_state = 9;
    mpfr_t acc;
    mpfr_init2(acc, ACC_PREC);
    for (int it = 0; it < 200000; it++) {
        const double h = rnd_double(-140, 130);
        const float alpha = (it & 1) ? 1.0f : 0.125f;
        moects_xsum x;
        moects__xsum_init(&x);
        uint16_t gb;
        float gf;
        moects__exact_store(h, &x, alpha, 0, 1, &gb, 0);
        moects__xsum_init(&x);
        moects__exact_store(h, &x, alpha, 0, 0, &gf, 0);
        mpfr_set_d(acc, h * (double)alpha, MPFR_RNDN); /* exact: a power-of-two scale */
        const uint16_t wb = mpfr_bf16(acc);
        const float wf = mpfr_f32(acc);
        cr_assert_eq(gb, wb, "#%d %a * %g bf16: got 0x%04x want 0x%04x", it, h, (double)alpha, gb, wb);
        cr_assert_eq(f32_bits(gf), f32_bits(wf), "#%d %a * %g f32: got 0x%08x want 0x%08x", it, h, (double)alpha,
                     f32_bits(gf), f32_bits(wf));
    }
    mpfr_clear(acc);
}
