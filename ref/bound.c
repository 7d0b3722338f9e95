/* bound.c: per-element forward error bounds of a block-scaled GEMM job (DESIGN.md "Bounded
 * verdicts"; Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 2.2, 3.1, 4.2).
 * The kernel model and the formula are stated in moects_ref.h (moects__ref_moe_gemm_bound); this file
 * computes them. S = sum_k |A'_k| |B'_k| over the dequantized operands A'_k = dec(A_k) * sA,
 * B'_k = dec(B_k) * sB (exact in double) comes from one cblas_dgemm on the absolute values, chunked
 * over A's and B's rows; as every term is >= 0 its own rounding is at most gamma_K(2^-53) * S
 * relative. The accumulation check's inputs (moects_bound_stats) take two more per chunk: on the
 * signed values (x) and on their squares (sum term^2, for sigma). */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_gemm_internal.h"
#include "moects_ref.h"

#define NCHUNK 256 /* rows of B per dgemm */
#define ETA 0x1p-149 /* binary32's subnormal unit: the absolute error of an underflowing operation */

/* gamma(n) = n u / (1 - n u); +Inf when n u >= 1. */
static double gamma_n(double n, double u) { return n * u < 1.0 ? n * u / (1.0 - n * u) : INFINITY; }

/* |dec(code)| as double (exact), one table per operand kind: E2M1 (16 codes) or E4M3 (256). */
typedef struct {
    double v[256];
} abs_lut;

static void abs_lut_init(abs_lut *t, moects__a_kind kind)
{
    for (int i = 0; i < 256; i++)
        t->v[i] = kind == MOECTS__A_E4M3 ? fabs((double)moects__e4m3_decode((uint8_t)i))
                                         : fabs((double)moects__e2m1_decode((uint8_t)(i & 0xF)));
}

/* |dec(x_k)| of row r of an operand, k < K (BF16 by its bits; E4M3 and E2M1 from the table). */
static inline double dec_abs(moects__a_kind kind, const abs_lut *t, const void *x, int64_t K, int64_t r, int64_t k)
{
    if (kind == MOECTS__A_E4M3) return t->v[((const uint8_t *)x)[r * K + k]];
    if (kind == MOECTS__A_BF16) {
        uint32_t u = (uint32_t)(((const uint16_t *)x)[r * K + k] & 0x7FFF) << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    const uint8_t *row = (const uint8_t *)x + r * moects__cdiv(K, 2);
    return t->v[(row[k / 2] >> (4 * (k & 1))) & 0xF];
}

/* Row r of an operand, dequantized in absolute value: out[k] = |dec| * |scale of k's block| (scale
 * sc[b * cs] for block b), and the row's sums in ascending k: sum |A'|, sum |dec|, max |dec|. */
static void abs_row(moects__a_kind kind, const abs_lut *t, const void *x, int64_t K, int64_t g, int64_t r,
                    const float *sc, int64_t cs, double *out, double st[3])
{
    st[0] = st[1] = st[2] = 0.0;
    for (int64_t b = 0, k = 0; k < K; b++) {
        const double s = fabs((double)sc[b * cs]);
        for (const int64_t k1 = K - k < g ? K : k + g; k < k1; k++) {
            double d = dec_abs(kind, t, x, K, r, k), v = d * s;
            out[k] = v;
            st[0] += v;
            st[1] += d;
            st[2] = d > st[2] ? d : st[2];
        }
    }
}

/* abs_row for an E2M1 row (kind FP4), AVX2, same results: |dec| by byte shuffles of the codes'
 * magnitudes into the top 16 bits of doubles (E2M1 values have at most 2 significant bits), times
 * the block's scale (exact); sum |dec| and max |dec| from integers 2|dec| (exact in any order);
 * sum |B'| as the sum of the blocks' exact products (sum 2|dec|) / 2 * s, which equals abs_row's
 * ascending sum when every term is a multiple of 2^q and the total is below 2^(52+q): then every
 * partial sum of either order is exact. Returns 0 where that does not hold (or a scale is not
 * finite, or g is not 16 or 32): the caller runs abs_row. */
__attribute__((target("avx2,fma"))) static int abs_row_fp4_avx2(const abs_lut *t, const uint8_t *x, int64_t K,
                                                               int64_t g, int64_t r, const float *sc, int64_t cs,
                                                               double *out, double st[3])
{
    if (g != 16 && g != 32) return 0;
    static const int8_t two[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12}; /* 2|dec| */
    uint8_t top[2][16];
    for (int i = 0; i < 16; i++) {
        uint64_t u;
        memcpy(&u, &t->v[i], sizeof u);
        if (u << 16) return 0; /* not 16 bits (impossible) */
        top[0][i] = (uint8_t)(u >> 48);
        top[1][i] = (uint8_t)(u >> 56);
    }
    const __m128i tlo = _mm_loadu_si128((const __m128i *)top[0]), thi = _mm_loadu_si128((const __m128i *)top[1]);
    const __m128i ttwo = _mm_loadu_si128((const __m128i *)two), m4 = _mm_set1_epi8(0x0F);
    const uint8_t *row = x + r * moects__cdiv(K, 2);
    int64_t isum = 0;
    int dmax = 0, q = INT32_MAX;
    double tot = 0.0;
    __m128i vmax = _mm_setzero_si128();
    for (int64_t b = 0, k0 = 0; k0 < K; b++, k0 += g) {
        const float sf = fabsf(sc[b * cs]);
        if (!isfinite(sf)) return 0;
        const double s = sf;
        int64_t bs = 0;
        if (k0 + g <= K) {
            const uint8_t *src = row + k0 / 2;
            const __m128i xv = g == 32 ? _mm_loadu_si128((const __m128i *)src) : _mm_loadl_epi64((const __m128i *)src);
            const __m128i lo = _mm_and_si128(xv, m4), hi = _mm_and_si128(_mm_srli_epi16(xv, 4), m4);
            const __m256d sv = _mm256_set1_pd(s);
            for (int h = 0; h < g / 16; h++) {
                const __m128i cd = h ? _mm_unpackhi_epi8(lo, hi) : _mm_unpacklo_epi8(lo, hi); /* k order */
                const __m128i tw = _mm_shuffle_epi8(ttwo, cd);
                vmax = _mm_max_epu8(vmax, tw);
                const __m128i sad = _mm_sad_epu8(tw, _mm_setzero_si128());
                bs += _mm_cvtsi128_si64(sad) + _mm_extract_epi64(sad, 1);
                const __m128i bl = _mm_shuffle_epi8(tlo, cd), bh = _mm_shuffle_epi8(thi, cd);
                const __m128i w[2] = {_mm_unpacklo_epi8(bl, bh), _mm_unpackhi_epi8(bl, bh)};
                for (int o = 0; o < 2; o++)
                    for (int e = 0; e < 2; e++) {
                        const __m128i w4 = e ? _mm_unpackhi_epi64(w[o], w[o]) : w[o];
                        const __m256d d = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_cvtepu16_epi64(w4), 48));
                        _mm256_storeu_pd(out + k0 + h * 16 + o * 8 + e * 4, _mm256_mul_pd(d, sv));
                    }
            }
        } else {
            for (int64_t k = k0; k < K; k++) {
                const int c = (row[k / 2] >> (4 * (k & 1))) & 0xF;
                out[k] = t->v[c] * s;
                bs += two[c];
                dmax = two[c] > dmax ? two[c] : dmax;
            }
        }
        if (bs > 0 && sf > 0.0f) { /* terms of this block: multiples of 2^(lowest bit of s) / 2 */
            uint32_t u;
            memcpy(&u, &sf, sizeof u);
            const uint32_t e = u >> 23, m = e ? (u & 0x7FFFFFu) | 0x800000u : u & 0x7FFFFFu;
            const int lb = (e ? (int)e - 150 : -149) + __builtin_ctz(m) - 1;
            q = lb < q ? lb : q;
            tot += (double)bs * 0.5 * s; /* exact: <= 384 / 2 times a float */
        }
        isum += bs;
    }
    uint8_t mx[16];
    _mm_storeu_si128((__m128i *)mx, vmax);
    for (int i = 0; i < 16; i++) dmax = mx[i] > dmax ? mx[i] : dmax;
    if (tot != 0.0 && !(tot < ldexp(1.0, 52 + q))) return 0;
    st[0] = tot;
    st[1] = (double)isum * 0.5;
    st[2] = dmax * 0.5;
    return 1;
}

/* Unit in the last place of the output type at magnitude v >= 0 (binary32 exponent range). */
static double ulp_out(double v, int bf16)
{
    int e = v > 0.0 ? ilogb(v) : -126;
    return ldexp(1.0, (e > -126 ? e : -126) - (bf16 ? 7 : 23));
}

/* The sign bit of element k of row r of an operand, in bit 63 (branch-free, per kind). */
static inline uint64_t sign_of(moects__a_kind kind, const void *x, int64_t K, int64_t r, int64_t k)
{
    if (kind == MOECTS__A_E4M3) return (uint64_t)(((const uint8_t *)x)[r * K + k] >> 7) << 63;
    if (kind == MOECTS__A_BF16) return (uint64_t)(((const uint16_t *)x)[r * K + k] >> 15) << 63;
    return (uint64_t)((((const uint8_t *)x)[r * moects__cdiv(K, 2) + k / 2] >> (4 * (k & 1) + 3)) & 1) << 63;
}

/* Row r of an operand with its signs: out[k] = abs[k] (abs_row's) times the signs of k's code and
 * of its block's scale; sq[k] = abs[k]^2. */
static void signed_row(moects__a_kind kind, const void *x, int64_t K, int64_t g, int64_t r, const float *sc, int64_t cs,
                       const double *abs, double *out, double *sq)
{
    for (int64_t b = 0, k = 0; k < K; b++) {
        const uint64_t ssc = (uint64_t)(signbit(sc[b * cs]) != 0) << 63;
        const int64_t k1 = K - k < g ? K : k + g;
#define SIGNED_LOOP(KIND)                                                                          \
    for (; k < k1; k++) {                                                                          \
        uint64_t u;                                                                                \
        memcpy(&u, &abs[k], sizeof u);                                                             \
        u ^= ssc ^ sign_of(KIND, x, K, r, k);                                                      \
        memcpy(&out[k], &u, sizeof u);                                                             \
        sq[k] = abs[k] * abs[k];                                                                   \
    }
        if (kind == MOECTS__A_FP4) SIGNED_LOOP(MOECTS__A_FP4)
        else if (kind == MOECTS__A_E4M3) SIGNED_LOOP(MOECTS__A_E4M3)
        else SIGNED_LOOP(MOECTS__A_BF16)
#undef SIGNED_LOOP
    }
}

int moects__bound_req_ok(const moects__bound_req *bq)
{
    const moects_bound_stats *st = bq->st;
    return bq->bits >= 2 && bq->bits <= 64 && (bq->truncation == 0 || bq->truncation == 1) &&
           bq->bf16_splits <= 256 && (!st || (st->x && st->det && st->sigma));
}

/* r with the split-K BF16 reduction's factor: (1 + r) (1 + gamma(s - 1, 2^-8)) - 1 (r for s < 2). */
static double with_splits(double r, uint32_t s) { return s < 2 ? r : (1.0 + r) * (1.0 + gamma_n(s - 1.0, 0x1p-8)) - 1.0; }

/* The relative bound's and sigma's factors of a class at reduction length K (moects_ref.h). */
static void class_factors(int64_t K, uint32_t bits, int truncation, uint32_t splits, double *rel, double *sig)
{
    const double u = ldexp(1.0, truncation ? 1 - (int)bits : -(int)bits), us = 0x1p-24;
    *rel = with_splits((1.0 + gamma_n((double)K + 1.0, u)) * (1.0 + gamma_n(4.0, us)) - 1.0, splits);
    *sig = with_splits(gamma_n((double)K + 1.0, u) + gamma_n(5.0, us), splits);
}

double moects__ref_acc_sigma_factor(int64_t K, const moects_acc_class *c)
{
    moects__bound_req bq = {c ? c->bits : 0, c ? c->truncation : 0, c ? c->bf16_splits : 0, NULL, NULL};
    if (!c || K < 0 || !moects__bound_req_ok(&bq)) return NAN;
    double rel, sig;
    class_factors(K, c->bits, c->truncation, c->bf16_splits, &rel, &sig);
    return sig;
}

void moects__stats_unchecked(const moects_bound_stats *st, int64_t o)
{
    st->x[o] = 0.0, st->det[o] = INFINITY, st->sigma[o] = 0.0f;
}

void moects__acc_stats(int64_t K, double sig_rel, float alpha, double S, double xm, double qm, double abs_err,
                       double *x, double *det, double *sigma)
{
    const double a = fabs((double)alpha), s_up = 1.0 + 2.0 * gamma_n((double)K, 0x1p-53);
    *x = (double)alpha * xm;
    /* x's error: the dgemm's (terms of either sign: gamma_K(2^-53) S) and the alpha multiply's */
    const double xerr = a * gamma_n((double)K, 0x1p-53) * S * s_up + fabs(*x) * 0x1p-52;
    *det = (abs_err + xerr) * (1.0 + 0x1p-40);
    *sigma = a * sig_rel * sqrt(qm * s_up) * (1.0 + 0x1p-40);
}

/* v rounded up to float. */
static float up_f(double v)
{
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

/* What every element of a job shares. */
typedef struct {
    double rel, s_up, alpha, max_out, sig_rel;
    double split_abs; /* the split-K BF16 roundings' absolute underflow allowance: (s - 1) 2^-133 */
    int bf16;
} elem_consts;

/* Element (m, n)'s bound (and with st, its check inputs) from its dgemm sums: sm = sum |A'||B'|,
 * xm = sum A'B', qm = sum (A'B')^2 (unused without st); sa, sb: the rows' abs_row stats. */
static void element(const moects__gemm_job *j, const elem_consts *c, double *bound, const moects_bound_stats *st,
                    int64_t m, int64_t n, int64_t o, double sm, double xm, double qm, const double *sa,
                    const double *sb)
{
    const int64_t K = j->K;
    const int nan = j->nan_a[m] || j->nan_b[n] || isnan(j->alpha); /* exact_v1 is NaN */
    if (nan) {
        bound[o] = 0.0;
        if (st->x) moects__stats_unchecked(st, o);
        return;
    }
    double S = sm * c->s_up;
    /* absolute underflow allowances: dequantizing either operand, each product, the block-scale
     * product (|p_b| <= max|dec A| * sum|dec B| over all blocks), alpha */
    double under = ETA * 2.0 * (sa[0] + sb[0] + (double)K + sa[2] * sb[1] + 1.0);
    double acc = c->alpha * (c->rel * S + under) + ETA + c->split_abs; /* the accumulation term */
    double e = acc + ulp_out(c->alpha * S + acc, c->bf16); /* half an output ULP on each side */
    e *= 1.0 + 0x1p-40;                                    /* the rounding of this formula in double */
    const int ok = isfinite(S) && S < 0x1p127 && c->alpha * S + e < c->max_out;
    bound[o] = ok ? e : INFINITY;
    if (!st->x) return;
    if (!ok) {
        moects__stats_unchecked(st, o);
        return;
    }
    double x, det, sigma;
    moects__acc_stats(K, c->sig_rel, j->alpha, S, xm, qm, c->alpha * under + ETA + c->split_abs, &x, &det, &sigma);
    st->x[o] = x;
    st->det[o] = up_f(det);
    st->sigma[o] = up_f(sigma);
}

/* One chunk's sums: pm[q] = A[q] B[q]^T for q < nmat (|.|, signed, squared), [mm][nn]. */
static void chunk_dgemms(int nmat, int64_t mm, int64_t nn, int64_t K, int64_t mc, int64_t nc, const double *ad,
                         const double *bd, double *pm)
{
    for (int q = 0; q < nmat; q++) {
        if (K > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mm, (int)nn, (int)K, 1.0, ad + q * mc * K, (int)K,
                        bd + q * nc * K, (int)K, 0.0, pm + q * mc * nc, (int)nn);
        else
            memset(pm + q * mc * nc, 0, (size_t)(mm * nn) * sizeof(double));
    }
}

int moects__bound_job(const moects__gemm_job *j, const void *a, moects__a_kind kind, const uint8_t *b,
                      const moects__bound_req *bq, int64_t row0)
{
    const int64_t M = j->M, N = j->N, K = j->K, g = j->g, nkb = moects__cdiv(K, g);
    if (M == 0 || N == 0) return 0;
    double rel, sig;
    class_factors(K, bq->bits, bq->truncation, bq->bf16_splits, &rel, &sig);
    const elem_consts c = {rel,
                           1.0 + 2.0 * gamma_n((double)K, 0x1p-53),
                           fabs((double)j->alpha),
                           j->out_dtype == MOECTS_BF16 ? 0x1.fep127 : 0x1.fffffep127,
                           sig,
                           bq->bf16_splits >= 2 ? (bq->bf16_splits - 1.0) * 0x1p-133 : 0.0,
                           j->out_dtype == MOECTS_BF16};
    /* the request's arrays from this job's first row */
    const moects_bound_stats *rs = bq->st;
    const int64_t o0 = row0 * N;
    moects_bound_stats out = {rs ? rs->x + o0 : NULL, rs ? rs->det + o0 : NULL, rs ? rs->sigma + o0 : NULL};
    const int nmat = rs ? 3 : 1;
    const int64_t mc = M < NCHUNK ? M : NCHUNK, nc = N < NCHUNK ? N : NCHUNK;
    double *ad = malloc((size_t)(nmat * mc * K + 1) * sizeof(double));
    double *bd = malloc((size_t)(nmat * nc * K + 1) * sizeof(double));
    double *pm = malloc((size_t)(nmat * mc * nc + 1) * sizeof(double));
    double *sta = malloc((size_t)(mc * 3 + 1) * sizeof(double)), *stb = malloc((size_t)(nc * 3 + 1) * sizeof(double));
    int rc = -1;
    if (!ad || !bd || !pm || !sta || !stb) goto out;
    abs_lut la, lb;
    const char *cap = getenv("MOECTS_FP4_REF_ISA"); /* "c": abs_row only (tests) */
    __builtin_cpu_init();
    const int avx2 = !(cap && !strcmp(cap, "c")) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    abs_lut_init(&la, kind);
    abs_lut_init(&lb, MOECTS__A_FP4);
    for (int64_t m0 = 0; m0 < M; m0 += mc) {
        const int64_t mm = M - m0 < mc ? M - m0 : mc;
        for (int64_t i = 0; i < mm; i++) {
            const float *sc = j->sa + (m0 + i) * nkb;
            abs_row(kind, &la, a, K, g, m0 + i, sc, 1, ad + i * K, sta + i * 3);
            if (rs) signed_row(kind, a, K, g, m0 + i, sc, 1, ad + i * K, ad + (mc + i) * K, ad + (2 * mc + i) * K);
        }
        for (int64_t n0 = 0; n0 < N; n0 += nc) {
            const int64_t nn = N - n0 < nc ? N - n0 : nc;
            for (int64_t jn = 0; jn < nn; jn++) {
                const float *sc = j->sbt + n0 + jn;
                if (!avx2 || !abs_row_fp4_avx2(&lb, b, K, g, n0 + jn, sc, N, bd + jn * K, stb + jn * 3))
                    abs_row(MOECTS__A_FP4, &lb, b, K, g, n0 + jn, sc, N, bd + jn * K, stb + jn * 3);
                if (rs)
                    signed_row(MOECTS__A_FP4, b, K, g, n0 + jn, sc, N, bd + jn * K, bd + (nc + jn) * K,
                               bd + (2 * nc + jn) * K);
            }
            chunk_dgemms(nmat, mm, nn, K, mc, nc, ad, bd, pm);
            for (int64_t i = 0; i < mm; i++)
                for (int64_t jn = 0; jn < nn; jn++) {
                    const int64_t p = i * nn + jn;
                    element(j, &c, bq->bound + o0, &out, m0 + i, n0 + jn, (m0 + i) * N + n0 + jn, pm[p],
                            rs ? pm[mc * nc + p] : 0.0, rs ? pm[2 * mc * nc + p] : 0.0, sta + i * 3, stb + jn * 3);
                }
        }
    }
    rc = 0;
out:
    free(ad);
    free(bd);
    free(pm);
    free(sta);
    free(stb);
    return rc;
}
