/* exact.c: exact summation of doubles and one correct rounding of the exact sum to FP32/BF16
 * (the engine of the exact_v1 recipes, DESIGN.md "Numeric recipes").
 *
 * Representation: a nonoverlapping expansion in increasing magnitude with no zero components
 * (J. R. Shewchuk, "Adaptive Precision Floating-Point Arithmetic and Fast Robust Geometric
 * Predicates", DCG 18, 1997): Grow-Expansion with zero elimination (his Fig. 7) for every term,
 * Compress (his Fig. 15) when the expansion gets long. After Compress, consecutive components
 * are at least 52 binades apart, so the whole double range fits in ~42 components (< CAP).
 *
 * Exact as long as every term is a multiple of 2^-1074 and every partial sum stays below 2^1023
 * in magnitude (always true for the recipes: their terms are products of bf16/fp32/E2M1/UE8M0/
 * E4M3 values, all within [2^-600, 2^600]). A partial sum that overflows the double range is
 * recorded as +-Inf, as IEEE addition would; a product below 2^-1074 is rounded to nearest.
 *
 * Rounding (round_f32/round_bf16): the exponent E of the exact value and the floor n of
 * V / q (q the target's quantum at E) are found by exact comparisons on the expansion, then the
 * exact remainder V - n q is compared with q / 2: one rounding, ties to even, no double
 * rounding. Binary32 and BF16 share emin = -126 and emax = 127 (IEEE 754-2019 sec. 3.6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_exact.h"
#include "moects_gemm_internal.h"
#include "moects_ref.h"

#define COMPRESS_AT 12 /* compress when the expansion reaches this many components */

/* Knuth's TwoSum: s = RN(a + b), *err = (a + b) - s exactly (no precondition on magnitudes). */
static inline double two_sum(double a, double b, double *err)
{
    double s = a + b;
    double bv = s - a;
    double av = s - bv;
    *err = (a - av) + (b - bv);
    return s;
}

/* Shewchuk's Compress (Fig. 15), in place. Keeps the value; output nonoverlapping (in fact
 * nonadjacent), increasing, with no zero components. */
static void compress(double *e, int *n)
{
    int m = *n;
    if (m < 2) return;
    double g[MOECTS_XSUM_CAP + 1];
    int bottom = m - 1;
    double Q = e[m - 1], q;
    for (int i = m - 2; i >= 0; i--) {
        Q = two_sum(Q, e[i], &q);
        if (q != 0.0) {
            g[bottom--] = Q;
            Q = q;
        }
    }
    g[bottom] = Q;
    int top = 0;
    for (int i = bottom + 1; i < m; i++) {
        Q = two_sum(g[i], Q, &q);
        if (q != 0.0) e[top++] = q;
    }
    if (Q != 0.0) e[top++] = Q;
    *n = top;
}

/* Grow-Expansion with zero elimination (Fig. 7), in place: e += b exactly. */
static void grow(moects_xsum *s, double b)
{
    double Q = b, h;
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        Q = two_sum(Q, s->c[i], &h);
        if (h != 0.0) s->c[k++] = h;
    }
    if (!isfinite(Q)) { /* a partial sum left the double range: saturate, IEEE-like */
        if (Q > 0) s->pos_inf = 1;
        else if (Q < 0) s->neg_inf = 1;
        else s->nan = 1;
        s->n = 0;
        return;
    }
    if (Q != 0.0) s->c[k++] = Q;
    s->n = k;
    if (s->n >= COMPRESS_AT) {
        compress(s->c, &s->n);
        if (s->n >= MOECTS_XSUM_CAP - 1) abort(); /* impossible after Compress (see top) */
    }
}

void moects__xsum_init(moects_xsum *s)
{
    s->n = 0;
    s->nan = s->pos_inf = s->neg_inf = 0;
}

void moects__xsum_add(moects_xsum *s, double v)
{
    if (isnan(v)) s->nan = 1;
    else if (isinf(v)) (v > 0 ? (s->pos_inf = 1) : (s->neg_inf = 1));
    else if (v != 0.0) grow(s, v);
}

void moects__xsum_add_product(moects_xsum *s, double a, double b)
{
    double p = a * b;
    if (!isfinite(p)) { /* NaN operand, 0 * Inf, Inf operand, or an overflowing product */
        if (isnan(p)) s->nan = 1;
        else (p > 0 ? (s->pos_inf = 1) : (s->neg_inf = 1));
        return;
    }
    if (a == 0.0 || b == 0.0) return;
    if (fabs(p) >= 0x1p-969) { /* TwoProduct (Dekker) via fma: exact, the error is >= 2^-1074 */
        double err = fma(a, b, -p);
        grow(s, p);
        if (err != 0.0) grow(s, err);
        return;
    }
    /* Tiny product: TwoProduct on scaled operands (exact), then scale back (exact unless bits
     * fall below 2^-1074). */
    int ea, eb;
    double fa = frexp(a, &ea), fb = frexp(b, &eb); /* |fa|, |fb| in [0.5, 1) */
    double ps = fa * fb, es = fma(fa, fb, -ps);
    grow(s, ldexp(ps, ea + eb));
    if (es != 0.0) {
        double e2 = ldexp(es, ea + eb);
        if (e2 != 0.0) grow(s, e2);
    }
}

void moects__xsum_scale(moects_xsum *s, double a)
{
    int special = s->nan || s->pos_inf || s->neg_inf;
    if (isnan(a) || s->nan || (s->pos_inf && s->neg_inf)) {
        s->nan = 1;
        s->n = 0;
        return;
    }
    if (special) { /* the value is +-Inf */
        int neg = s->neg_inf;
        if (a == 0.0) {
            s->nan = 1;
        } else {
            if (a < 0) neg = !neg;
            s->pos_inf = !neg;
            s->neg_inf = neg;
        }
        s->n = 0;
        return;
    }
    if (isinf(a)) { /* finite value times Inf */
        if (s->n == 0) s->nan = 1;
        else if ((s->c[s->n - 1] > 0) == (a > 0)) s->pos_inf = 1;
        else s->neg_inf = 1;
        s->n = 0;
        return;
    }
    moects_xsum t;
    moects__xsum_init(&t);
    for (int i = 0; i < s->n; i++) moects__xsum_add_product(&t, s->c[i], a);
    *s = t;
}

/* Sign of the exact finite value: the sign of the largest component (nonoverlapping). */
static int xsign(const moects_xsum *s)
{
    if (s->n == 0) return 0;
    return s->c[s->n - 1] > 0 ? 1 : -1;
}

/* sign(V - d) for the finite value V of s, exactly. */
static int cmp_with(const moects_xsum *s, double d)
{
    moects_xsum t = *s;
    moects__xsum_add(&t, -d);
    return xsign(&t);
}

/* Correctly rounded value (RNE) of the finite exact value with p significant bits, binary
 * exponent range emin..127 (subnormals below 2^emin), overflow to Inf. Returned as a double
 * that is exactly representable in the target (or +-Inf, or +0 for an exact zero). */
static double round_p(const moects_xsum *s, int p, int emin)
{
    if (s->nan || (s->pos_inf && s->neg_inf)) return NAN;
    if (s->pos_inf) return INFINITY;
    if (s->neg_inf) return -INFINITY;
    if (s->n == 0) return 0.0; /* an exact zero sum is +0, as x + (-x) is under RNE */
    moects_xsum v = *s;
    compress(v.c, &v.n); /* top component now approximates V to 2^-52 relative */
    int neg = v.c[v.n - 1] < 0;
    if (neg)
        for (int i = 0; i < v.n; i++) v.c[i] = -v.c[i];
    double A = v.c[v.n - 1];
    /* E = floor(log2 V), exactly. */
    int E = ilogb(A);
    while (E > -1074 && cmp_with(&v, ldexp(1.0, E)) < 0) E--;
    while (E < 1023 && cmp_with(&v, ldexp(1.0, E + 1)) >= 0) E++;
    if (E >= 128) return neg ? -INFINITY : INFINITY;
    double q = ldexp(1.0, (E > emin ? E : emin) - (p - 1));
    /* m = floor(V / q), D = V - m q >= 0, exactly. */
    double m = floor(A / q);
    moects_xsum D = v;
    moects__xsum_add(&D, -m * q);
    while (xsign(&D) < 0) {
        m -= 1;
        moects__xsum_add(&D, q);
    }
    while (cmp_with(&D, q) >= 0) {
        m += 1;
        moects__xsum_add(&D, -q);
    }
    int c = cmp_with(&D, 0.5 * q);
    if (c > 0 || (c == 0 && fmod(m, 2.0) != 0.0)) m += 1;
    double r = m * q; /* exact: m <= 2^p */
    if (r >= 0x1p128) r = INFINITY;
    return neg ? -r : r;
}

float moects__xsum_round_f32(const moects_xsum *s) { return (float)round_p(s, 24, -126); }

uint16_t moects__xsum_round_bf16(const moects_xsum *s)
{
    float f = (float)round_p(s, 8, -126);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u; /* canonical quiet NaN */
    return (uint16_t)(u >> 16);                          /* exact: at most 8 significant bits */
}

/* RNE of a finite double p (0 or |p| >= 2^-1000) to BF16: 8 significant bits, subnormals below
 * 2^-126, overflow to Inf; an exact zero is +0. Same result as moects__xsum_round_bf16 of the value
 * p. In BF16's normal range on the bits: the low 45 of the 52 fraction bits dropped with RNE (adding
 * 2^44 - 1 plus the lowest kept bit; a carry moves into the exponent, as it should). Below 2^-126:
 * p / q and m * q scale by powers of two, nearbyint rounds to even (default rounding mode). */
static uint16_t bf16_from_double(double p)
{
    if (p == 0.0) return 0x0000u;
    uint64_t u;
    memcpy(&u, &p, sizeof u);
    double r;
    if ((int)((u >> 52) & 0x7FF) - 1023 >= -126) {
        u += ((uint64_t)1 << 44) - 1 + ((u >> 45) & 1);
        u &= ~(((uint64_t)1 << 45) - 1);
        memcpy(&r, &u, sizeof r);
    } else {
        const double q = 0x1p-133;
        r = nearbyint(p / q) * q;
    }
    if (fabs(r) >= 0x1p128) return r < 0 ? 0xFF80u : 0x7F80u;
    float f = (float)r; /* exact: at most 8 significant bits, >= 2^-133 */
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return (uint16_t)(b >> 16);
}

void moects__exact_store(double h, moects_xsum *x, float alpha, int nan, int bf16, void *out, int64_t o)
{
    float v = 0.0f;
    uint16_t vb = 0;
    double p = h * (double)alpha;
    if (nan) {
        v = NAN;
        vb = moects__bf16_from_f32(v);
    } else if (x->n == 0 && !x->nan && !x->pos_inf && !x->neg_inf && isfinite(p) &&
               fma(h, (double)alpha, -p) == 0.0 && (p == 0.0 || fabs(p) >= 0x1p-1000)) {
        /* fast path: the sum is the double h and h * alpha is exact (TwoProduct error 0, finite):
         * one correct rounding of the double p to the output type */
        if (bf16) vb = bf16_from_double(p);
        else v = p == 0.0 ? 0.0f : (float)p; /* an exact zero is +0 */
    } else {
        moects__xsum_add(x, h);
        moects__xsum_scale(x, (double)alpha);
        if (bf16) vb = moects__xsum_round_bf16(x);
        else v = moects__xsum_round_f32(x);
    }
    if (bf16) ((uint16_t *)out)[o] = vb;
    else ((float *)out)[o] = v;
}
