/* crmath.c: correctly rounded binary32 exp, tanh and erf from the C library's double ones and a
 * table of hard cases (moects_crmath.h; table ref/crmath_table.c, tools/crmath_scan.c).
 *
 * Why it is correct. Let t be the real f(x), y the C library's double result, E its error bound
 * in double ulps of t, b a binary32 rounding boundary (midpoint of two adjacent binary32 values;
 * 2^-150 between 0 and the least subnormal; FLT_MAX + 2^103 between FLT_MAX and +inf) and u(b)
 * the double ulp of b's binade. A boundary is never within 2^-25 relative of a power of two other
 * than itself, so near b the ulp of t, of y and of b agree (t below b = 2^-150 has half of it):
 * |y - t| <= E u(b).
 *  - Decided: |y - b| > M u(b) for both boundaries around y with M >= E: no boundary lies
 *    between y and t, so t rounds as y does, and (float)y is that one RNE rounding of y.
 *  - Covered: the table holds every x whose y_g (on the generating machine, one more error of E)
 *    is within 2M u(b) of a boundary; here |y - y_g| <= 2E u(b), so an x this machine finds
 *    within M is in the table when E <= M / 2.
 * M = 16 (MOECTS_CR_MARGIN). glibc documents 1 ulp for exp and erf and 2 for tanh
 * (sysdeps/x86_64/fpu/libm-test-ulps: the maxima its tests observed, not proven bounds);
 * tools/crmath_scan.c measured every binary32 input against the long double functions: glibc
 * 2.36 errs at most 0.509 ulps (exp), 2.176 (tanh) and 1.207 (erf), so M >= E with 7x to spare
 * and E <= M / 2 with 3.6x, in both of glibc's x86-64 variants. These are picked at load time by
 * ifunc: exp is __ieee754_exp_fma/_fma4/_avx/_sse2, tanh calls expm1 (__expm1_fma/_sse2), erf
 * calls exp; the FMA and SSE2 results differ in the last bit now and then (AVX = SSE2 here),
 * hence the table's twice wider margin; the table is the union over both variants. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_crmath.h"

static const char *const fn_name[MOECTS_CR_NFN] = {"exp", "tanh", "erf"};

double moects__cr_libm(moects_cr_fn fn, double x)
{
    return fn == MOECTS_CR_EXP ? exp(x) : fn == MOECTS_CR_TANH ? tanh(x) : erf(x);
}

/* The binary32 grid as doubles: bits u (0 <= u <= 0x7F800000) -> value, 0x7F800000 standing for
 * 2^128, where the next binade would start (the boundary FLT_MAX + 2^103 lies below it). */
static double grid(uint32_t u)
{
    float f;
    if (u >= 0x7F800000u) return 0x1p128;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* |a - b| in ulps of b's binade; b is a boundary, a double >= 2^-150, so u(b) is normal. */
static double ulps_from(double a, double b)
{
    uint64_t e;
    memcpy(&e, &b, sizeof e);
    e = ((e >> 52) - 52) << 52; /* biased exponent - 52: 2^(exponent(b) - 52) */
    double ulp;
    memcpy(&ulp, &e, sizeof ulp);
    return fabs(a - b) / ulp; /* a - b exact when a is near b (Sterbenz); ulp a power of 2 */
}

double moects__cr_boundary_ulps(double y)
{
    double a = fabs(y);
    if (!(a < INFINITY)) return INFINITY;
    float f = (float)a; /* RNE: the boundaries around a are those on either side of f */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    double d = INFINITY;
    /* (grid(u - 1) + grid(u)) / 2 is exact: two adjacent binary32 values, 26 bits at most */
    if (u > 0) d = ulps_from(a, (grid(u - 1) + grid(u)) / 2);
    if (u < 0x7F800000u) d = fmin(d, ulps_from(a, (grid(u) + grid(u + 1)) / 2));
    return d;
}

static int entry_cmp(const void *key, const void *elem)
{
    uint32_t k = *(const uint32_t *)key, x = ((const moects_cr_entry *)elem)->x;
    return k < x ? -1 : k > x;
}

int moects__cr_lookup(moects_cr_fn fn, uint32_t x, uint32_t *r)
{
    const moects_cr_entry *e =
        bsearch(&x, moects__cr_table[fn], moects__cr_count[fn], sizeof *e, entry_cmp);
    if (e) *r = e->r;
    return e != NULL;
}

float moects__cr_round(moects_cr_fn fn, float x, double y)
{
    if (isnan(x)) return x + x; /* quiet NaN */
    if (!(moects__cr_boundary_ulps(y) <= MOECTS_CR_MARGIN)) return (float)y;
    uint32_t xb, r;
    memcpy(&xb, &x, sizeof xb);
    if (!moects__cr_lookup(fn, xb, &r)) {
        fprintf(stderr,
                "moects_cr_%sf: input 0x%08x (%a): the C library's %s = %a is within %g double "
                "ulps of a binary32 rounding boundary and the input is not in ref/crmath_table.c "
                "(this C library errs more than the table allows): regenerate the table "
                "(tools/crmath_scan.c)\n",
                fn_name[fn], (unsigned)xb, (double)x, fn_name[fn], y, MOECTS_CR_MARGIN);
        abort();
    }
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

float moects_cr_expf(float x) { return moects__cr_round(MOECTS_CR_EXP, x, exp((double)x)); }
float moects_cr_tanhf(float x) { return moects__cr_round(MOECTS_CR_TANH, x, tanh((double)x)); }
float moects_cr_erff(float x) { return moects__cr_round(MOECTS_CR_ERF, x, erf((double)x)); }
