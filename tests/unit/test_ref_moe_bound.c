/* Bounded verdicts (moects__ref_moe_gemm_bound, moects__ref_fp4_gemm_bound; DESIGN.md "Bounded
 * verdicts"): a simulated kernel of the declared accumulation class (terms rounded to p bits, summed
 * in a random order with every addition rounded to p bits, RNE or truncation, binary32 exponent
 * range; then times alpha in FP32 and rounded to the output) stays within the bound of every element
 * and differs from exact_v1; a result whose one scale is one ULP off lands outside the bound on every
 * element it touches and nowhere else. The simulated kernel is MPFR arithmetic on the operands as
 * the oracle decodes them (test_ref_moe_oracle.h), independent of ref/. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "moects_ref.h"
#include "test_ref_moe_gen.h"

/* x rounded in place to p bits in the binary32 exponent range (subnormals, overflow to Inf), mode
 * MPFR_RNDN or MPFR_RNDZ. */
static void round_p(mpfr_t x, int p, mpfr_rnd_t mode)
{
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_t t;
    mpfr_init2(t, p);
    mpfr_set_emin(-124 - p);
    mpfr_set_emax(128);
    int inex = mpfr_set(t, x, mode);
    inex = mpfr_check_range(t, inex, mode);
    mpfr_subnormalize(t, inex, mode);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    mpfr_set(x, t, MPFR_RNDN);
    mpfr_clear(t);
}

/* The K terms A'_k B'_k of element (r, n), exact (OR_PREC bits), in t[K] (initialised here); *alpha:
 * its expert's alpha. */
static void exact_terms(const prob *p, int64_t r, int64_t n, mpfr_t *t, double *alpha)
{
    const moects_moe_gemm_shape *s = &p->s;
    const moects_moe_gemm_args *a = &p->a;
    int64_t lr, e = mo_expert(s, a, r, &lr), K = s->K, g = mo_g(s), nkb = (K + g - 1) / g;
    const uint8_t *sbe = a->sb + e * mo_bytes(s->N, nkb, s->scale_layout), *brow = a->b + (e * s->N + n) * ((K + 1) / 2);
    mpfr_t sa, sb;
    mpfr_inits2(OR_PREC, sa, sb, (mpfr_ptr)0);
    for (int64_t k = 0; k < K; k++) {
        mpfr_init2(t[k], OR_PREC);
        mo_sa(sa, s, a, r, lr, e, k / g, nkb);
        or_scale(sb, s->b_format, sbe[mo_off(n, k / g, nkb, s->scale_layout)]);
        mo_a(t[k], s, a, r, k);
        mpfr_mul(t[k], t[k], sa, MPFR_RNDN);
        mpfr_mul_si(t[k], t[k], or_e2m1_x2(or_code(brow, k)), MPFR_RNDN);
        mpfr_div_2ui(t[k], t[k], 1, MPFR_RNDN);
        mpfr_mul(t[k], t[k], sb, MPFR_RNDN);
    }
    *alpha = a->alpha ? a->alpha[e] : 1.0f;
    mpfr_clears(sa, sb, (mpfr_ptr)0);
}

/* The simulated kernel's element (r, n), as a double holding the out_dtype value. */
static double kernel_element(const prob *p, int64_t r, int64_t n, int bits, int trunc)
{
    const moects_moe_gemm_shape *s = &p->s;
    const int64_t K = s->K;
    mpfr_rnd_t mode = trunc ? MPFR_RNDZ : MPFR_RNDN;
    mpfr_t *t = malloc((size_t)(K + 1) * sizeof *t);
    mpfr_t acc;
    mpfr_init2(acc, OR_PREC);
    double alpha;
    exact_terms(p, r, n, t, &alpha);
    for (int64_t k = 0; k < K; k++) round_p(t[k], bits, mode); /* the terms, each rounded once (the product) */
    for (int64_t k = K - 1; k > 0; k--) { /* a random order */
        int64_t q = (int64_t)(rnd64() % (uint64_t)(k + 1));
        mpfr_swap(t[k], t[q]);
    }
    mpfr_set_zero(acc, 1);
    for (int64_t k = 0; k < K; k++) {
        mpfr_add(acc, acc, t[k], MPFR_RNDN);
        round_p(acc, bits, mode);
        mpfr_clear(t[k]);
    }
    free(t);
    mpfr_mul_d(acc, acc, alpha, MPFR_RNDN);
    round_p(acc, 24, MPFR_RNDN);
    if (s->out_dtype == MOECTS_BF16) round_p(acc, 8, MPFR_RNDN);
    double v = mpfr_get_d(acc, MPFR_RNDN);
    mpfr_clear(acc);
    return v;
}

static double out_at(const prob *p, const void *d, int64_t i)
{
    if (p->s.out_dtype == MOECTS_F32) return ((const float *)d)[i];
    uint32_t u = (uint32_t)((const uint16_t *)d)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exact_v1 and the bound of every element of p. */
static void exact_and_bound(prob *p, double **bound, int bits, int trunc)
{
    *bound = malloc((size_t)(p->rows * p->s.N + 1) * sizeof(double));
    cr_assert_eq(moects__ref_moe_gemm(&p->s, &p->a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(moects__ref_moe_gemm_bound(&p->s, &p->a, (uint32_t)bits, trunc, *bound), 0);
}

/* The simulated kernel against exact_v1 and its bound on every valid element: returns how many
 * elements differ from exact_v1; fails the test when one is outside its bound. */
static int64_t run_kernel(prob *p, int bits, int trunc, const char *what)
{
    double *bound;
    exact_and_bound(p, &bound, bits, trunc);
    int64_t differ = 0, lr;
    for (int64_t r = 0; r < p->rows; r++) {
        if (mo_expert(&p->s, &p->a, r, &lr) < 0) continue;
        for (int64_t n = 0; n < p->s.N; n++) {
            int64_t i = r * p->s.N + n;
            double x = out_at(p, p->D, i), y = kernel_element(p, r, n, bits, trunc);
            cr_assert(isfinite(x) && isfinite(bound[i]), "%s: element %lld: exact %a bound %a", what, (long long)i, x,
                      bound[i]);
            cr_assert(fabs(y - x) <= bound[i], "%s p=%d%s: element %lld: kernel %a exact %a, |diff| %a > bound %a",
                      what, bits, trunc ? " trunc" : "", (long long)i, y, x, fabs(y - x), bound[i]);
            differ += y != x;
        }
    }
    free(bound);
    return differ;
}

Test(moe_bound, random_order_kernel_within_bound_and_not_exact, .timeout = 300)
{
    static const struct {
        moects_moe_format f;
        moects_fp4_format bf;
        int64_t asb;
        int af32;
    } F[] = {{MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, 0, 0}, {MOECTS_MOE_NVFP4, MOECTS_FP4_NVFP4, 0, 0},
             {MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, 128, 0}, {MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, 32, 1},
             {MOECTS_MOE_W4A16, MOECTS_FP4_MXFP4, 0, 0}, {MOECTS_MOE_W4A16, MOECTS_FP4_NVFP4, 0, 0}};
    const int64_t counts[3] = {5, 0, 4};
    rng_state = 100;
    for (size_t fi = 0; fi < sizeof F / sizeof F[0]; fi++)
        for (int cls = 0; cls < 3; cls++) {
            /* FP32 RNE (24), an FP8-MMA-like 13-bit truncating accumulator, BF16 out at 12 bits */
            int bits = cls == 0 ? 24 : cls == 1 ? 13 : 12, trunc = cls == 1;
            moects_dtype od = cls == 2 ? MOECTS_BF16 : MOECTS_F32;
            prob p;
            gen(&p, F[fi].f, F[fi].bf, (moects_row_layout)(1 + (fi + (size_t)cls) % 3), 3, counts, 8, 200,
                cls ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR, od, F[fi].asb, F[fi].af32, 0);
            char what[64];
            snprintf(what, sizeof what, "format %d b %d asb %lld", (int)F[fi].f, (int)F[fi].bf, (long long)F[fi].asb);
            int64_t differ = run_kernel(&p, bits, trunc, what);
            /* at 24 bits FP4 sums are often exact in any order; the narrow accumulators are not */
            if (bits < 24) cr_assert_gt(differ, 0, "%s p=%d: the reordered kernel should fail exact_v1", what, bits);
            drop(&p);
        }
}

/* Subnormal and wide scales: the bound's underflow allowances keep a correct kernel inside. */
Test(moe_bound, wide_scales_kernel_within_bound, .timeout = 300)
{
    const int64_t counts[2] = {3, 2};
    rng_state = 110;
    for (int f = 0; f < 3; f++) {
        prob p;
        moects_moe_format fm = f == 0 ? MOECTS_MOE_MXFP4 : f == 1 ? MOECTS_MOE_W4A8 : MOECTS_MOE_W4A16;
        gen(&p, fm, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 2, counts, 6, 96, MOECTS_SCALES_LINEAR, MOECTS_F32, 32, 1, 1);
        /* keep exact_v1 well inside FP32: UE8M0 codes below 140 (2^12), BF16 exponents below 2^40;
         * codes near 0 (2^-127) and FP32 A scales down to 2^-150 stay */
        for (int64_t i = 0; i < mo_bytes(6, 3, MOECTS_SCALES_LINEAR) * 2; i++) p.SB[i] %= 140;
        if (fm == MOECTS_MOE_MXFP4)
            for (int64_t i = 0; i < p.rows * 3; i++) ((uint8_t *)p.SA)[i] %= 140;
        if (fm == MOECTS_MOE_W4A16)
            for (int64_t i = 0; i < p.rows * 96; i++) {
                uint16_t *x = (uint16_t *)p.A + i;
                if (((*x >> 7) & 0xFF) > 167) *x = (uint16_t)((*x & 0x807F) | 167 << 7);
            }
        run_kernel(&p, 24, 0, "wide scales");
        drop(&p);
    }
}

/* One scale one ULP off (UE8M0 or E4M3 code + 1) in expert 1's block 1: the affected block's partial
 * is made 32 (or 16) ones times ones, so every touched element moves by at least 1/16 of that
 * block's term; the bound (p = 24, RNE) must exclude each touched element and every other element
 * must be unchanged. */
Test(moe_bound, one_scale_ulp_off_lands_outside)
{
    const int64_t counts[3] = {3, 4, 2};
    for (int f = 0; f < 4; f++) {
        moects_moe_format fm = f == 0 ? MOECTS_MOE_MXFP4 : f == 1 ? MOECTS_MOE_NVFP4 : f == 2 ? MOECTS_MOE_W4A8 : MOECTS_MOE_W4A16;
        moects_fp4_format bf = f == 1 || f == 3 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        prob p;
        rng_state = 120 + (uint64_t)f;
        gen(&p, fm, bf, (moects_row_layout)(1 + f % 3), 3, counts, 5, 96, MOECTS_SCALES_SWIZZLED_128X4, MOECTS_F32, 32,
            0, 0);
        const int64_t g = mo_g(&p.s), K = 96, rb = 48, col = 2, blk = 1;
        int64_t lr;
        for (int64_t r = 0; r < p.rows; r++) { /* A of expert 1, block 1: ones */
            if (mo_expert(&p.s, &p.a, r, &lr) != 1) continue;
            for (int64_t k = blk * g; k < (blk + 1) * g; k++) {
                if (fm == MOECTS_MOE_W4A8) ((uint8_t *)p.A)[r * K + k] = 0x38;
                else if (fm == MOECTS_MOE_W4A16) ((uint16_t *)p.A)[r * K + k] = 0x3F80;
                else ((uint8_t *)p.A)[r * rb + k / 2] = 0x22;
            }
        }
        for (int64_t k = blk * g; k < (blk + 1) * g; k++) p.B[(1 * 5 + col) * rb + k / 2] = 0x22; /* B: ones */
        double *bound;
        exact_and_bound(&p, &bound, 24, 0);
        size_t dbytes = (size_t)(p.rows * 5) * 4;
        float *exact = malloc(dbytes);
        memcpy(exact, p.D, dbytes);
        /* W4A8: A's UE8M0 scale of expert 1's first row; else B's scale of (expert 1, col, blk) */
        uint8_t *sc;
        int64_t touched_row = -1;
        if (fm == MOECTS_MOE_W4A8) {
            for (int64_t r = 0; r < p.rows && touched_row < 0; r++)
                if (mo_expert(&p.s, &p.a, r, &lr) == 1) touched_row = r;
            sc = (uint8_t *)p.SA + touched_row * 3 + blk;
        } else {
            sc = p.SB + mo_bytes(5, K / g, MOECTS_SCALES_SWIZZLED_128X4) + mo_off(col, blk, K / g, MOECTS_SCALES_SWIZZLED_128X4);
        }
        *sc = (uint8_t)(*sc + 1);
        cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), 0);
        int64_t outside = 0;
        for (int64_t r = 0; r < p.rows; r++) {
            if (mo_expert(&p.s, &p.a, r, &lr) < 0) continue;
            for (int64_t n = 0; n < 5; n++) {
                int64_t i = r * 5 + n;
                int touched = fm == MOECTS_MOE_W4A8 ? r == touched_row : mo_expert(&p.s, &p.a, r, &lr) == 1 && n == col;
                double diff = fabs((double)((float *)p.D)[i] - (double)exact[i]);
                if (touched) {
                    cr_assert_gt(diff, bound[i], "format %d: touched element %lld inside its bound (%a <= %a)", f,
                                 (long long)i, diff, bound[i]);
                    outside++;
                } else {
                    cr_assert_eq(diff, 0.0, "format %d: element %lld changed", f, (long long)i);
                }
            }
        }
        cr_assert_gt(outside, 0);
        free(exact);
        free(bound);
        drop(&p);
    }
}

/* The dense FP4 GEMM's bound is the grouped one of a single expert; a simulated FP32 kernel stays in. */
Test(moe_bound, dense_fp4_bound_is_one_expert)
{
    const int64_t counts[1] = {6};
    rng_state = 130;
    for (int f = 0; f < 2; f++) {
        prob p;
        moects_moe_format fm = f ? MOECTS_MOE_NVFP4 : MOECTS_MOE_MXFP4;
        moects_fp4_format bf = f ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        gen(&p, fm, bf, MOECTS_ROWS_OFFSETS, 1, counts, 7, 100, MOECTS_SCALES_LINEAR, MOECTS_F32, 0, 0, 0);
        run_kernel(&p, 24, 0, "dense");
        double bm[42], bd[42];
        cr_assert_eq(moects__ref_moe_gemm_bound(&p.s, &p.a, 24, 0, bm), 0);
        moects_fp4_gemm_shape ds = {6, 7, 100, bf, MOECTS_SCALES_LINEAR, MOECTS_F32};
        moects_fp4_gemm_args da = {p.A, p.B, p.SA, p.SB, p.alpha[0], p.D};
        cr_assert_eq(moects__ref_fp4_gemm_bound(&ds, &da, 24, 0, bd), 0);
        for (int i = 0; i < 42; i++) cr_assert_eq(bm[i], bd[i], "element %d", i);
        cr_assert_eq(moects__ref_fp4_gemm_bound(&ds, &da, 1, 0, bd), -1, "bits < 2");
        cr_assert_eq(moects__ref_fp4_gemm_bound(&ds, &da, 24, 2, bd), -1, "truncation not 0/1");
        drop(&p);
    }
}

/* The accumulation check's inputs (moects__ref_moe_gemm_bound_stats, ref/moects_ref.h) against the
 * MPFR terms: x within det of alpha * sum t_k; sigma the formula |alpha| (gamma(K+1, u) +
 * gamma(5, 2^-24)) sqrt(sum t_k^2), rounded up to float. Then the check as the harness runs it
 * (RMS over the elements of max(0, |y - x| - half an output ULP at |y| - det) / sigma, at most 2):
 * a simulated kernel of the declared class (24 bits, truncation, a random order) passes it with a
 * wide margin, one of 14 bits fails it. K 2048: the 14-bit kernel errs by about u K / sqrt(12)
 * relative (the truncation bias of a random walk, u = 2^-13: 5%, some 10 to 20 BF16 ULPs), while
 * sigma is about 2^-23 K sqrt(sum t^2) (0.02%, 0.06 BF16 ULP); the 24-bit kernel's error is some
 * 2^-24 K / sqrt(12) relative, a fifth of sigma or less, and none where BF16 rounding hides it. */
static double gamma_k(double n, double u) { return n * u / (1 - n * u); }

Test(moe_bound, accumulation_check_inputs_and_verdicts, .timeout = 300)
{
    const int64_t counts[2] = {4, 4}, N = 12, K = 2048;
    rng_state = 140;
    for (int f = 0; f < 3; f++) { /* MXFP4 and W4A16 to BF16, W4A16 to FP32 */
        prob p;
        const moects_dtype od = f == 2 ? MOECTS_F32 : MOECTS_BF16;
        gen(&p, f ? MOECTS_MOE_W4A16 : MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 2, counts, N, K,
            MOECTS_SCALES_LINEAR, od, 0, 0, 0);
        const int64_t n_el = p.rows * N;
        double *bound = malloc((size_t)n_el * sizeof(double)), *x = malloc((size_t)n_el * sizeof(double));
        float *det = malloc((size_t)n_el * sizeof(float)), *sigma = malloc((size_t)n_el * sizeof(float));
        moects_bound_stats st = {x, det, sigma};
        cr_assert_eq(moects__ref_moe_gemm_bound_stats(&p.s, &p.a, 24, 1, bound, &st), 0);
        double sum24 = 0, sum14 = 0;
        int64_t lr, n_checked = 0;
        mpfr_t *t = malloc((size_t)K * sizeof *t);
        mpfr_t sum, sq;
        mpfr_inits2(OR_PREC, sum, sq, (mpfr_ptr)0);
        for (int64_t r = 0; r < p.rows; r++) {
            if (mo_expert(&p.s, &p.a, r, &lr) < 0) continue;
            for (int64_t n = 0; n < N; n++) {
                const int64_t i = r * N + n;
                double alpha;
                exact_terms(&p, r, n, t, &alpha);
                mpfr_set_zero(sum, 1);
                mpfr_set_zero(sq, 1);
                for (int64_t k = 0; k < K; k++) {
                    mpfr_add(sum, sum, t[k], MPFR_RNDN);
                    mpfr_fma(sq, t[k], t[k], sq, MPFR_RNDN);
                    mpfr_clear(t[k]);
                }
                mpfr_mul_d(sum, sum, alpha, MPFR_RNDN);
                double xo = mpfr_get_d(sum, MPFR_RNDN), qo = mpfr_get_d(sq, MPFR_RNDN);
                cr_assert(isfinite(det[i]) && fabs(x[i] - xo) <= det[i], "element %lld: x %a, oracle %a, det %a",
                          (long long)i, x[i], xo, (double)det[i]);
                double so = fabs(alpha) * (gamma_k(K + 1, 0x1p-23) + gamma_k(5, 0x1p-24)) * sqrt(qo);
                cr_assert(sigma[i] >= so && sigma[i] <= so * (1 + 0x1p-20), "element %lld: sigma %a, formula %a",
                          (long long)i, (double)sigma[i], so);
                for (int bits = 24; bits >= 14; bits -= 10) {
                    double y = kernel_element(&p, r, n, bits, 1), half = ldexp(1.0, ilogb(fabs(y)) - (od == MOECTS_F32 ? 24 : 8));
                    double a = fmax(0.0, fabs(y - xo) - half - det[i]) / sigma[i];
                    *(bits == 24 ? &sum24 : &sum14) += a * a;
                }
                n_checked++;
            }
        }
        double rms24 = sqrt(sum24 / (double)n_checked), rms14 = sqrt(sum14 / (double)n_checked);
        cr_assert_eq(n_checked, 8 * N);
        cr_assert_lt(rms24, 0.5, "format %d: the declared class's kernel: RMS %g sigma", f, rms24);
        cr_assert_gt(rms14, 2.0, "format %d: the 14-bit kernel: RMS %g sigma", f, rms14);
        mpfr_clears(sum, sq, (mpfr_ptr)0);
        free(t);
        free(bound);
        free(x);
        free(det);
        free(sigma);
        drop(&p);
    }
}

/* A split-K kernel with a BF16 reduction, MPFR-simulated (cuBLASLt's REDUCTION_SCHEME_OUTPUT_TYPE,
 * the issue-25 shape: K 2688 in 132 pieces): each piece's terms summed with 24-bit RNE in a random
 * order, times alpha in FP32, then the partials added in BF16 (RNE after every addition, the first
 * partial rounded too) to a BF16 output. Against moects__ref_moe_gemm_bound_class: every element
 * inside the class (24, RNE, 132 splits) bound; the accumulation check passes under that class (RMS
 * a small fraction of sigma) and fails under plain FP32 accumulation (RMS > 2), as it did on the H200;
 * moects__ref_acc_sigma_factor is the formula (1 + g)(1 + gamma(131, 2^-8)) - 1, g = gamma(2689,
 * 2^-24) + gamma(5, 2^-24), worked out here in double. */
static double splitk_element(const prob *p, int64_t r, int64_t n, int splits)
{
    const int64_t K = p->s.K, per = (K + splits - 1) / splits;
    mpfr_t *t = malloc((size_t)(K + 1) * sizeof *t);
    mpfr_t part, red;
    mpfr_inits2(OR_PREC, part, red, (mpfr_ptr)0);
    double alpha;
    exact_terms(p, r, n, t, &alpha);
    for (int64_t k = 0; k < K; k++) round_p(t[k], 24, MPFR_RNDN);
    mpfr_set_zero(red, 1);
    for (int64_t k0 = 0; k0 < K; k0 += per) {
        const int64_t k1 = k0 + per < K ? k0 + per : K;
        for (int64_t k = k1 - 1; k > k0; k--) { /* a random order within the piece */
            int64_t q = k0 + (int64_t)(rnd64() % (uint64_t)(k - k0 + 1));
            mpfr_swap(t[k], t[q]);
        }
        mpfr_set_zero(part, 1);
        for (int64_t k = k0; k < k1; k++) {
            mpfr_add(part, part, t[k], MPFR_RNDN);
            round_p(part, 24, MPFR_RNDN);
        }
        mpfr_mul_d(part, part, alpha, MPFR_RNDN);
        round_p(part, 24, MPFR_RNDN);
        mpfr_add(red, red, part, MPFR_RNDN);
        round_p(red, 8, MPFR_RNDN); /* BF16 */
    }
    for (int64_t k = 0; k < K; k++) mpfr_clear(t[k]);
    free(t);
    double v = mpfr_get_d(red, MPFR_RNDN);
    mpfr_clears(part, red, (mpfr_ptr)0);
    return v;
}

Test(moe_bound, bf16_split_k_class_holds_its_kernel, .timeout = 300)
{
    const int64_t counts[2] = {4, 4}, N = 12, K = 2688;
    const int S = 132;
    rng_state = 150;
    prob p;
    gen(&p, MOECTS_MOE_W4A16, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 2, counts, N, K, MOECTS_SCALES_LINEAR,
        MOECTS_BF16, 0, 0, 0);
    const int64_t n_el = p.rows * N;
    double *bound = malloc((size_t)n_el * sizeof(double)), *x[2], *bound0 = malloc((size_t)n_el * sizeof(double));
    float *det[2], *sigma[2];
    moects_bound_stats st[2];
    for (int c = 0; c < 2; c++) {
        x[c] = malloc((size_t)n_el * sizeof(double));
        det[c] = malloc((size_t)n_el * sizeof(float)), sigma[c] = malloc((size_t)n_el * sizeof(float));
        st[c] = (moects_bound_stats){x[c], det[c], sigma[c]};
    }
    const moects_acc_class split = {24, 0, (uint32_t)S}, fp32 = {24, 0, 0}, bad = {24, 0, 257};
    cr_assert_eq(moects__ref_moe_gemm_bound_class(&p.s, &p.a, &split, bound, &st[0]), 0);
    cr_assert_eq(moects__ref_moe_gemm_bound_class(&p.s, &p.a, &fp32, bound0, &st[1]), 0);
    cr_assert_eq(moects__ref_moe_gemm_bound_class(&p.s, &p.a, &bad, bound0, NULL), -1, "more than 256 splits");
    const double g = gamma_k(K + 1, 0x1p-24) + gamma_k(5, 0x1p-24);
    const double want = (1 + g) * (1 + gamma_k(S - 1, 0x1p-8)) - 1, got = moects__ref_acc_sigma_factor(K, &split);
    cr_assert(fabs(got - want) <= 1e-12 * want, "sigma factor %a, by hand %a", got, want);
    cr_assert(fabs(moects__ref_acc_sigma_factor(K, &fp32) - g) <= 1e-12 * g);
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), 0);
    double sum[2] = {0, 0};
    int64_t lr, n_checked = 0, differ = 0;
    for (int64_t r = 0; r < p.rows; r++) {
        if (mo_expert(&p.s, &p.a, r, &lr) < 0) continue;
        for (int64_t n = 0; n < N; n++) {
            const int64_t i = r * N + n;
            const double y = splitk_element(&p, r, n, S), ex = out_at(&p, p.D, i);
            cr_assert(fabs(y - ex) <= bound[i], "element %lld: kernel %a exact %a, |diff| %a > bound %a", (long long)i, y,
                      ex, fabs(y - ex), bound[i]);
            differ += y != ex;
            const double half = ldexp(1.0, ilogb(fabs(y)) - 8);
            for (int c = 0; c < 2; c++) {
                const double a = fmax(0.0, fabs(y - x[c][i]) - half - det[c][i]) / sigma[c][i];
                sum[c] += a * a;
            }
            n_checked++;
        }
    }
    const double rms_split = sqrt(sum[0] / (double)n_checked), rms_fp32 = sqrt(sum[1] / (double)n_checked);
    cr_assert_eq(n_checked, 8 * N);
    cr_log_info("split-K BF16: %lld of %lld elements off exact_v1; RMS %g sigma (split class), %g (FP32)",
                (long long)differ, (long long)n_checked, rms_split, rms_fp32);
    cr_assert_gt(differ, 0, "the BF16 reduction moved some element off exact_v1");
    cr_assert_lt(rms_split, 0.5, "under the split-K class: RMS %g sigma", rms_split);
    cr_assert_gt(rms_fp32, 2.0, "under plain FP32 accumulation: RMS %g sigma", rms_fp32);
    for (int c = 0; c < 2; c++) free(x[c]), free(det[c]), free(sigma[c]);
    free(bound);
    free(bound0);
    drop(&p);
}
