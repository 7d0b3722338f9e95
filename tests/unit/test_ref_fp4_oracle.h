/* test_ref_fp4_oracle.h: an independent MPFR oracle for the FP4 GEMM recipes (DESIGN.md "Numeric
 * recipes"), for tests only. It decodes codes and scales itself from the format definitions (never
 * through ref/), forms the block partials in integers (quarter units), and emulates each FP32
 * operation of blockwise_v1 as "exact value, then one rounding to 24 bits in the binary32 exponent
 * range" (MPFR with subnormalize); exact_v1 sums everything exactly at 2048 bits and rounds once. */
#ifndef TEST_REF_FP4_ORACLE_H
#define TEST_REF_FP4_ORACLE_H
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "moects_types.h"

#define OR_PREC 2048 /* exact for every sum here: terms span < 700 binades */

/* E2M1 code -> 2 * value, an integer: exponent field 0 gives m (0 or 0.5 * 2), else (2+m) * 2^(e-1)
 * / ... i.e. 1, 1.5, 2, 3, 4, 6 times 2 (OCP MX v1.0 sec. 5.3.3). */
static int or_e2m1_x2(unsigned c)
{
    int e = (c >> 1) & 3, m = c & 1;
    int v = e == 0 ? m : (2 + m) << (e - 1);
    return (c & 8) ? -v : v;
}

static unsigned or_code(const uint8_t *row, int64_t k) { return (row[k / 2] >> (4 * (k & 1))) & 0xFu; }

/* scale code -> exact value in r; returns 0, or 1 for NaN (r set to NaN). */
static int or_scale(mpfr_t r, moects_fp4_format f, unsigned x)
{
    if (f == MOECTS_FP4_MXFP4) { /* UE8M0: 2^(x-127), 0xFF NaN */
        if (x == 0xFF) {
            mpfr_set_nan(r);
            return 1;
        }
        mpfr_set_ui_2exp(r, 1, (long)x - 127, MPFR_RNDN);
        return 0;
    }
    if ((x & 0x7F) == 0x7F) { /* E4M3 fn NaN */
        mpfr_set_nan(r);
        return 1;
    }
    unsigned e = (x >> 3) & 15, m = x & 7;
    if (e == 0) mpfr_set_ui_2exp(r, m, -9, MPFR_RNDN);
    else mpfr_set_ui_2exp(r, 8 + m, (long)e - 10, MPFR_RNDN);
    if (x & 0x80) mpfr_neg(r, r, MPFR_RNDN);
    return 0;
}

/* Round x to `prec` bits in the binary32 exponent range (emin -126, subnormals down to
 * 2^(-126-prec+1), overflow to Inf), to nearest even: prec 24 = FP32, prec 8 = BF16. */
static double or_round(const mpfr_t x, int prec)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t t;
    mpfr_init2(t, prec);
    /* MPFR exponents: x = 0.1b... * 2^E; FP32 max < 2^128 -> emax 128; min subnormal
     * 2^(-126-prec+1) = 0.1 * 2^(-126-prec+2) -> emin = -124 - prec. */
    mpfr_set_emin(-124 - prec);
    mpfr_set_emax(128);
    int inex = mpfr_set(t, x, MPFR_RNDN);
    inex = mpfr_check_range(t, inex, MPFR_RNDN);
    mpfr_subnormalize(t, inex, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    double d = mpfr_get_d(t, MPFR_RNDN); /* exact: t has <= 24 bits in range */
    mpfr_clear(t);
    return d;
}

static uint16_t or_bf16_bits(double v)
{
    float f = (float)v; /* exact: v is a bf16 value */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

typedef struct {
    const moects_fp4_gemm_shape *s;
    const moects_fp4_gemm_args *a;
    int64_t g, nkb, rb;
} or_ctx;

static unsigned or_sa(const or_ctx *c, const uint8_t *sc, int64_t r, int64_t b)
{
    int64_t off = c->s->scale_layout == MOECTS_SCALES_LINEAR
                      ? r * c->nkb + b
                      : ((r / 128) * ((c->nkb + 3) / 4) + b / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + b % 4;
    return sc[off];
}

/* Block partial in quarter units: sum of (2 dec a)(2 dec b) over the block's elements < K. */
static long or_partial_q(const or_ctx *c, int64_t m, int64_t n, int64_t b)
{
    long q = 0;
    const uint8_t *ar = c->a->a + m * c->rb, *br = c->a->b + n * c->rb;
    for (int64_t k = b * c->g; k < (b + 1) * c->g && k < c->s->K; k++)
        q += (long)or_e2m1_x2(or_code(ar, k)) * or_e2m1_x2(or_code(br, k));
    return q;
}

/* The expected output element (m, n) as a double (f32 or bf16 value, or NaN). */
static double or_element(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, int exact,
                         int64_t m, int64_t n)
{
    or_ctx c = {s, a, moects_fp4_block(s->format), 0, (s->K + 1) / 2};
    c.nkb = (s->K + c.g - 1) / c.g;
    int prec_out = s->out_dtype == MOECTS_BF16 ? 8 : 24;
    mpfr_t sa, sb, t, acc, u;
    mpfr_inits2(OR_PREC, sa, sb, t, acc, u, (mpfr_ptr)0);
    mpfr_set_zero(acc, 1);
    double result;
    if (!exact) {
        for (int64_t b = 0; b < c.nkb; b++) {
            or_scale(sa, s->format, or_sa(&c, a->sa, m, b));
            or_scale(sb, s->format, or_sa(&c, a->sb, n, b));
            mpfr_mul(t, sa, sb, MPFR_RNDN);          /* exact */
            mpfr_set_d(t, or_round(t, 24), MPFR_RNDN); /* s = FP32(sA * sB) */
            mpfr_set_si(u, or_partial_q(&c, m, n, b), MPFR_RNDN);
            mpfr_div_2ui(u, u, 2, MPFR_RNDN);          /* p, exact */
            mpfr_mul(u, u, t, MPFR_RNDN);              /* p * s exact (Inf, NaN as IEEE) */
            mpfr_add(u, u, acc, MPFR_RNDN);            /* + acc exact */
            mpfr_set_d(acc, or_round(u, 24), MPFR_RNDN); /* fmaf: one rounding */
        }
        mpfr_set_flt(t, a->alpha, MPFR_RNDN);
        mpfr_mul(u, acc, t, MPFR_RNDN);
        double v = or_round(u, 24); /* acc * alpha in FP32 */
        if (prec_out == 8) {
            mpfr_set_d(u, v, MPFR_RNDN);
            v = or_round(u, 8); /* then to bf16 */
        }
        result = v;
    } else {
        int nan = isnan(a->alpha);
        for (int64_t b = 0; b < c.nkb; b++) {
            nan |= or_scale(sa, s->format, or_sa(&c, a->sa, m, b));
            nan |= or_scale(sb, s->format, or_sa(&c, a->sb, n, b));
            if (nan) break;
            mpfr_mul(t, sa, sb, MPFR_RNDN);
            mpfr_set_si(u, or_partial_q(&c, m, n, b), MPFR_RNDN);
            mpfr_div_2ui(u, u, 2, MPFR_RNDN);
            mpfr_mul(u, u, t, MPFR_RNDN);
            mpfr_add(acc, acc, u, MPFR_RNDN); /* exact at OR_PREC bits */
        }
        if (nan) {
            result = NAN;
        } else {
            mpfr_set_flt(t, a->alpha, MPFR_RNDN);
            mpfr_mul(u, acc, t, MPFR_RNDN); /* exact; 0 * Inf = NaN */
            if (mpfr_zero_p(u)) mpfr_set_zero(u, 1); /* the exact value 0 is +0 */
            result = or_round(u, prec_out);
        }
    }
    mpfr_clears(sa, sb, t, acc, u, (mpfr_ptr)0);
    return result;
}

/* Compare the whole output with the oracle: returns the number of mismatches (NaN matches any
 * NaN; otherwise bits must be equal, so -0 != +0) and fills the first one. */
static inline int64_t or_check(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, int exact,
                        int64_t *first, double *got, double *want)
{
    int64_t bad = 0;
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
            double w = or_element(s, a, exact, m, n), gv;
            int ok;
            if (s->out_dtype == MOECTS_BF16) {
                uint16_t gb = ((const uint16_t *)a->d)[m * s->N + n];
                uint32_t u = (uint32_t)gb << 16;
                float f;
                memcpy(&f, &u, sizeof f);
                gv = f;
                ok = isnan(w) ? isnan(f) : (!isnan(f) && gb == or_bf16_bits(w));
            } else {
                float f = ((const float *)a->d)[m * s->N + n], wf = (float)w;
                gv = f;
                uint32_t ug, uw;
                memcpy(&ug, &f, sizeof ug);
                memcpy(&uw, &wf, sizeof uw);
                ok = isnan(w) ? isnan(f) : ug == uw;
            }
            if (!ok && bad++ == 0) {
                *first = m * s->N + n;
                *got = gv;
                *want = w;
            }
        }
    return bad;
}
#endif
