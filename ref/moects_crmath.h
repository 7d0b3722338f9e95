/* moects_crmath.h: correctly rounded binary32 exp, tanh and erf (ref/crmath.c, its table of hard
 * cases ref/crmath_table.c, generated and checked by tools/crmath_scan.c). Depends on libc and
 * libm only; no I/O but the message before an abort (see below).
 * Table (glibc 2.36, x86-64): exp 68 entries, tanh 32, erf 250 (206 of erf's share one
 * significand, 0x2a320c, across the binades of tiny x, where erf(x) ~ 2x/sqrt(pi)). Scanning all 2^32 inputs of one
 * function through the double path takes 20-45 s on 2 cores; the CTests crmath_exhaustive and
 * crmath_exhaustive_sse2 take about 100 s each, `moects_crmath_scan gen` about 4 min. */
#ifndef MOECTS_CRMATH_H
#define MOECTS_CRMATH_H
#include <stddef.h>
#include <stdint.h>

/* The binary32 value nearest (ties to even) to exp(x), tanh(x), erf(x) of the real x, for every
 * binary32 x, in the default rounding mode (round to nearest). Special values (IEEE 754-2019
 * sec. 9.2): NaN -> quiet NaN; exp(+inf) = +inf, exp(-inf) = +0, exp(+-0) = 1; exp overflows to
 * +inf from x = 0x1.62e43p+6 (88.722839) on, and its results below 2^-126 are the correctly
 * rounded subnormals, or +0 from x = -0x1.9fe36ap+6 (-103.972084, exp(x) < 2^-150) down;
 * tanh(+-inf) = +-1, erf(+-inf) = +-1, tanh(+-0) = +-0, erf(+-0) = +-0.
 * Method (Ziv's strategy with one step and a table): y = exp/tanh/erf((double)x) from the C
 * library; when y lies more than MOECTS_CR_MARGIN double ulps away from every binary32
 * rounding boundary (a midpoint between adjacent binary32 values, subnormals and FLT_MAX + ulp/2
 * included) the true value lies on the same side as y and the result is (float)y; otherwise x is
 * looked up in ref/crmath_table.c (MPFR's correctly rounded values of every input whose double
 * result on the generating machine was within 2 * MOECTS_CR_MARGIN of a boundary). An
 * ambiguous input missing from the table is a bug: the program prints it and aborts, never
 * returning a possibly wrong value. Correct on a C library whose double exp/tanh/erf err by at
 * most MOECTS_CR_MARGIN / 2 double ulps (ref/crmath.c says why). */
float moects_cr_expf(float x);
float moects_cr_tanhf(float x);
float moects_cr_erff(float x);

/* ---- internals, shared with tools/crmath_scan.c and the tests ---- */
/* M, in double ulps of the boundary. glibc documents 1 ulp for exp and erf and 2 for tanh
 * (sysdeps/x86_64/fpu/libm-test-ulps; over all binary32 inputs 2.36 errs up to 0.509, 2.176 and
 * 1.207). With M = 16 a result is decided while the C library errs <= 16 ulps, and the table
 * covers one that errs <= 8, 3.6x the worst measured (ref/crmath.c). */
#define MOECTS_CR_MARGIN 16.0

typedef enum { MOECTS_CR_EXP = 0, MOECTS_CR_TANH = 1, MOECTS_CR_ERF = 2, MOECTS_CR_NFN = 3 } moects_cr_fn;

/* One hard case: input bits, correctly rounded result bits. */
typedef struct {
    uint32_t x, r;
} moects_cr_entry;
/* Per function (moects_cr_fn): its hard cases sorted by x, and their count (ref/crmath_table.c). */
extern const moects_cr_entry *const moects__cr_table[MOECTS_CR_NFN];
extern const size_t moects__cr_count[MOECTS_CR_NFN];

/* exp, tanh or erf of the C library, in double. */
double moects__cr_libm(moects_cr_fn fn, double x);
/* Distance from |y| to the nearest binary32 rounding boundary b, in double ulps of b (2^(e-52)
 * for b in [2^e, 2^(e+1))); +inf for an infinite or NaN y. */
double moects__cr_boundary_ulps(double y);
/* The result of function fn at x given y = moects__cr_libm(fn, x): (float)y when decided, else
 * the table's entry (or the abort). moects_cr_expf(x) = moects__cr_round(MOECTS_CR_EXP, x,
 * exp((double)x)). */
float moects__cr_round(moects_cr_fn fn, float x, double y);
/* The table's entry of x for fn: 1 and *r set, or 0 when absent. */
int moects__cr_lookup(moects_cr_fn fn, uint32_t x, uint32_t *r);
#endif
