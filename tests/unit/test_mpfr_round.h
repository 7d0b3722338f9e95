/* test_mpfr_round.h: the MPFR oracle's final rounding, for tests only. */
#ifndef TEST_MPFR_ROUND_H
#define TEST_MPFR_ROUND_H
#include <mpfr.h>

/* MPFR's correctly rounded binary32 / bf16 value of acc (RNE, subnormals, overflow to Inf):
 * prec bits (24 / 8), emin as the MPFR manual's mpfr_subnormalize example prescribes (-148 for
 * binary32's subnormals, -132 for bf16), emax 128. */
static float ref_round(mpfr_t acc, int prec, int emin)
{
    mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
    mpfr_t r;
    mpfr_init2(r, prec);
    int t = mpfr_set(r, acc, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(128);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    float f = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_set_emin(old_min);
    mpfr_set_emax(old_max);
    mpfr_clear(r);
    return f;
}
#endif
