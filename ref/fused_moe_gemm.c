/* fused_moe_gemm.c: the fused MoE layer's exact GEMMs (ref/moects_fused_internal.h): every output
 * element is fp32_rne of the exact real dot product (moe_gemm.exact_v1's rounding), fast.
 *
 * Ziv's strategy: a cheap approximation with a proven error bound, exact arithmetic only where the
 * bound cannot decide. Every product of the layer's GEMMs is exact in double:
 *   GEMM1  h * W13:  h BF16 (8 significant bits), W13 BF16 (8) or e2m1 * 2^(x-127) (2): <= 16 bits;
 *   GEMM2  m * W2:   m BF16 (8), FP32 (24), or e4m3 * scale (4 + 24 with an FP32 scale, 4 with a
 *                    power of two): <= 28 bits, times W2's 8 (or 2): <= 36 bits;
 * and every nonzero magnitude lies in [2^-282, 2^266] (FP32 subnormal 2^-149 times BF16 subnormal
 * 2^-133; 448 * (FLT_MAX / 448) times 6 * 2^127), so products, squares and sums stay far inside
 * double's normal range: the bounds below (Higham, Accuracy and Stability of Numerical Algorithms,
 * 2nd ed., sec. 3.1 and 4.2; u = 2^-53, gamma(n) = n u / (1 - n u)) hold without underflow terms.
 *
 * 1. dgemm in K-chunks. d = sum over chunks c of d_c, d_c = one OpenBLAS dgemm over <= KC columns
 *    (any order, any kernel: |d_c - V_c| <= gamma(KC - 1) S_c, S_c = sum |a_k b_k| over the chunk),
 *    the nc chunks added in order in double (error <= gamma(nc - 1) sum |d_c|). So
 *    |d - V| <= (gamma(KC - 1) + gamma(nc - 1)(1 + gamma(KC))) S <= (KC + nc) u S (1 + 2^-40): the
 *    chunking makes the bound ~25x tighter than one dgemm's gamma(K - 1) S at K = 7168.
 *    S <= ||a|| ||b|| (Cauchy-Schwarz; per chunk, then over chunks): s = na nb with na, nb the
 *    computed norms (moects__fused_norm: relative error below (K + 3) 2^-53 each, so s >= S
 *    (1 - 2^-21) for K <= 2^30: covered by the factor below). V lies in [d - err, d + err] with
 *      err = ((KC' + nc + 2) 2^-52 s + 2^-50 |d| + 2^-1000) (1 + 2^-20),  KC' = min(K, KC):
 *    more than twice the bound, the slack covering err's own roundings; 2^-50 |d| covers the
 *    rounding of d - err and d + err. d or s not finite (a NaN or Inf operand): not decided; s = 0:
 *    every product is 0, V = +0. Then, in turn:
 *    a. The grid. With a_k = A 2^la_k, b_k = B 2^lb_k (A, B integers) and la_k >= la, lb_k >= lb for
 *       the rows' lows (moects__fused_norm), every product, so V, is a multiple of q = 2^(la + lb).
 *       When err < q / 2, V is the one multiple of q within err of d: nearbyint(d / q) q, exact in
 *       double, rounded once to FP32 by the conversion. BF16 and FP8 data have so few bits that V
 *       is often exactly a rounding midpoint (1 in 100 outputs of a BF16 layer): this settles those
 *       ties without exact arithmetic.
 *    b. The interval: when both computed ends round to the same FP32 bits, so does V (rounding is
 *       monotone; +0 and -0 differ, so an interval straddling zero is not decided).
 * 2. A 128-bit integer: each product M 2^(x-1075) (M its 53-bit significand; products are normal
 *    doubles or 0) shifted to the lowest bit present and summed in __int128 when the bits span at
 *    most 125 - bitlen(K) binades (no overflow), then one RNE rounding to FP32 on the integer.
 * 3. Otherwise (a wider span, a NaN or Inf): IEEE's special cases (a NaN product, or +Inf and -Inf
 *    products: NaN; else an Inf product: that Inf), then moects_xsum (exact, one rounding).
 * An exact zero is +0 on every path. The result never depends on the dgemm's order, kernel or
 * threads: only how often 2 and 3 run.
 *
 * MOECTS_LAYER_FP8_128 (W8A8 block FP8): both operands are E4M3 values, unscaled (the FP32 block
 * scales are applied by the recipe's own FP32 operations, moects__fused_block_chain). An E4M3 value
 * is a multiple of 2^-9 below 2^9, so a product is a multiple of 2^-18 of at most 8 significant bits
 * and a block of 128 sums below 128 * 448^2 < 2^25: every partial sum of every order is a multiple of
 * 2^-18 below 2^25, 43 bits, exact in double. One OpenBLAS dgemm per 128-block
 * (moects__fused_dgemm_blocks) is therefore the exact block dot, in any order and kernel, and one
 * conversion rounds it to FP32. NaN codes are zeroed for the dgemm and flagged per block
 * (moects__fused_fp8_nans): a flagged block's dot is NaN, as IEEE's sum with a NaN term.
 *
 * MOECTS_LAYER_W4A8 (MXFP4 weights, E4M3 inputs): the same per 32-block of the E4M3 input values and
 * the E2M1 codes' values (unscaled; the UE8M0 scales apart): a product is a multiple of 2^-10 below
 * 448 * 6 < 2^12, a block of 32 sums below 2^17: multiples of 2^-10 below 2^17, exact in double.
 *
 * MOECTS_LAYER_NVFP4: a weight is e2m1 * dec(e4m3 scale), 2 + 4 significant bits, exact in double,
 * between 2^-10 and 6 * 448: the products' bounds above hold with room to spare. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_exact.h"
#include "moects_fused_internal.h"
#include "moects_gemm_internal.h"

#define KC 256 /* columns of one dgemm chunk */

typedef struct {
    const void *w;
    const uint8_t *scale;
    moects_layer_format f;
    int64_t e, N, K;
    double *b, *nb;
    int *lb;
    double e2m1[16], ue8m0[256], e4m3[256];
} dctx;

/* Row `row`'s decoded values into b: codes [K/2] with one scale per gk elements (sc: a byte
 * table of 256, NULL: unscaled). */
static void fp4_row(const dctx *c, int64_t row, int64_t gk, const double *sc, double *b)
{
    const int64_t K = c->K;
    const uint8_t *codes = (const uint8_t *)c->w + row * (K / 2), *s = c->scale + row * (K / gk);
    for (int64_t k = 0; k < K; k++) /* exact: 2 significant bits times a scale of at most 4 */
        b[k] = c->e2m1[(codes[k / 2] >> (4 * (k & 1))) & 0xF] * (sc ? sc[s[k / gk]] : 1.0);
}

double moects__fused_norm(const double *x, int64_t K, int *low)
{
    double q[4] = {0.0, 0.0, 0.0, 0.0}; /* in any order: the bound holds for every order */
    int emin = 0x7FF;
    uint64_t bits = 1ull << 52; /* the OR of the finite nonzero significands */
    for (int64_t k = 0; k < K; k++) {
        q[k & 3] += x[k] * x[k];
        uint64_t u;
        memcpy(&u, &x[k], sizeof u);
        const int e = (int)((u >> 52) & 0x7FF);
        const uint64_t m = u & 0xFFFFFFFFFFFFFull;
        const int use = e != 0x7FF && (e | m) != 0, ee = e ? e : 1; /* a subnormal: m 2^(1-1075) */
        emin = use && ee < emin ? ee : emin;
        bits |= use ? m : 0;
    }
    /* x_k = (its significand) 2^(e_k - 1075), a multiple of 2^(e_k - 1075 + ctz(significand)) */
    *low = emin == 0x7FF ? MOECTS_FUSED_NO_BITS : emin - 1075 + __builtin_ctzll(bits);
    return sqrt((q[0] + q[1]) + (q[2] + q[3]));
}

static void decode_rows(void *p, int64_t id, int64_t nth)
{
    const dctx *c = p;
    const int64_t K = c->K, n0 = id * c->N / nth, n1 = (id + 1) * c->N / nth;
    for (int64_t n = n0; n < n1; n++) {
        double *b = c->b + n * K;
        const int64_t row = c->e * c->N + n;
        if (c->f == MOECTS_LAYER_BF16) {
            const uint16_t *src = (const uint16_t *)c->w + row * K;
            for (int64_t k = 0; k < K; k++) { /* BF16: the upper half of an FP32 */
                const uint32_t u = (uint32_t)src[k] << 16;
                float f;
                memcpy(&f, &u, sizeof f);
                b[k] = f;
            }
        } else if (c->f == MOECTS_LAYER_FP8_128) { /* the codes' values, unscaled (the block scales apart) */
            const uint8_t *codes = (const uint8_t *)c->w + row * K;
            for (int64_t k = 0; k < K; k++) b[k] = c->e4m3[codes[k]];
        } else if (c->f == MOECTS_LAYER_NVFP4) { /* e2m1 * dec(e4m3 scale): 0x7F/0xFF NaN */
            fp4_row(c, row, 16, c->e4m3, b);
        } else { /* MXFP4 e2m1 * 2^(x - 127); W4A8 the codes' values, the scales apart */
            fp4_row(c, row, 32, c->f == MOECTS_LAYER_W4A8 ? NULL : c->ue8m0, b);
        }
        c->nb[n] = moects__fused_norm(b, K, &c->lb[n]);
    }
}

void moects__fused_decode(const void *w, const uint8_t *scale, moects_layer_format f, int64_t e, int64_t N,
                          int64_t K, double *b, double *nb, int *lb)
{
    dctx c = {w, scale, f, e, N, K, b, nb, lb, {0}, {0}, {0}};
    for (int i = 0; i < 16; i++) c.e2m1[i] = moects__e2m1_decode((uint8_t)i);
    for (int i = 0; i < 256; i++) c.e4m3[i] = moects__e4m3_decode((uint8_t)i);
    for (int i = 0; i < 256; i++) c.ue8m0[i] = i == 0xFF ? NAN : ldexp(1.0, i - 127); /* 2^127: not a float */
    moects__parallel(N, decode_rows, &c);
}

typedef struct {
    int64_t M, N, K;
    const double *a, *b;
    double *d;
    int failed;
    int64_t blk; /* moects__fused_dgemm_blocks: the block along K */
} gctx;

/* Columns [n0, n1) of d: chunk 0 straight into d, every later chunk into tmp, then added. */
static void gemm_slab(void *p, int64_t id, int64_t nth)
{
    gctx *c = p;
    const int64_t M = c->M, N = c->N, K = c->K, n0 = id * N / nth, nn = (id + 1) * N / nth - n0;
    double *tmp = K > KC && nn > 0 ? malloc((size_t)(M * nn) * sizeof *tmp) : NULL;
    if (K > KC && nn > 0 && !tmp) {
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t k0 = 0; nn > 0 && k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC, ldc = k0 ? nn : N;
        double *dst = k0 ? tmp : c->d + n0;
        for (int64_t i = 0; i < M; i++) memset(dst + i * ldc, 0, (size_t)nn * sizeof *dst); /* beta = 0 anyway */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nn, (int)kc, 1.0, c->a + k0, (int)K,
                    c->b + n0 * K + k0, (int)K, 0.0, dst, (int)ldc);
        for (int64_t i = 0; k0 && i < M; i++)
            for (int64_t j = 0; j < nn; j++) c->d[i * N + n0 + j] += tmp[i * nn + j];
    }
    free(tmp);
}

int moects__fused_dgemm(int64_t M, int64_t N, int64_t K, const double *a, const double *b, double *d)
{
    memset(d, 0, (size_t)(M * N) * sizeof *d);
    if (M == 0 || N == 0 || K == 0) return 0;
    gctx c = {M, N, K, a, b, d, 0, 0};
    moects__parallel(moects__cdiv(N, 64), gemm_slab, &c); /* slabs of >= 64 columns */
    return c.failed ? -1 : 0;
}

/* Thread id's share of the blocks: block kb's dot products into d[(i N + j) nkb + kb]. */
static void gemm_block(void *p, int64_t id, int64_t nth)
{
    gctx *c = p; /* the dgemm's context: a, b, d, the shape and the block */
    const int64_t M = c->M, N = c->N, blk = c->blk, nkb = c->K / blk;
    double *tmp = malloc((size_t)(M * N) * sizeof *tmp);
    if (!tmp) {
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t kb = id * nkb / nth; kb < (id + 1) * nkb / nth; kb++) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)blk, 1.0, c->a + kb * blk, (int)c->K,
                    c->b + kb * blk, (int)c->K, 0.0, tmp, (int)N);
        for (int64_t i = 0; i < M * N; i++) c->d[i * nkb + kb] = tmp[i];
    }
    free(tmp);
}

int moects__fused_dgemm_blocks(int64_t M, int64_t N, int64_t K, int64_t blk, const double *a, const double *b,
                               double *d)
{
    if (M == 0 || N == 0 || K == 0) return 0;
    gctx c = {M, N, K, a, b, d, 0, blk};
    moects__parallel(K / blk, gemm_block, &c); /* blocks split over the threads */
    return c.failed ? -1 : 0;
}

void moects__fused_fp8_nans(double *x, int64_t rows, int64_t K, int64_t blk, uint8_t *flags)
{
    const int64_t nkb = K / blk;
    memset(flags, 0, (size_t)(rows * nkb));
    for (int64_t i = 0; i < rows * K; i++)
        if (x[i] != x[i]) x[i] = 0.0, flags[(i / K) * nkb + (i % K) / blk] = 1;
}

void moects__fused_block_scales(const moects_fused_moe_shape *s, const moects_fused_moe_args *a, int w2, int64_t e,
                                float *sb)
{
    const int64_t N = w2 ? s->H : (s->activation == MOECTS_ACT_RELU2 ? s->inter : 2 * s->inter);
    const int64_t K = w2 ? s->inter : s->H, blk = moects__fused_blk(s->format), nkb = K / blk;
    for (int64_t n = 0; n < N; n++) {
        float *dst = sb + n * nkb;
        if (s->format == MOECTS_LAYER_FP8_128) {
            const float *src = (w2 ? a->w2_block_scale : a->w13_block_scale) + (e * (N / blk) + n / blk) * nkb;
            memcpy(dst, src, (size_t)nkb * sizeof *dst);
            continue;
        }
        const uint8_t *src = (w2 ? a->w2_scale : a->w13_scale) + (e * N + n) * nkb; /* UE8M0: 2^-127..2^127 */
        for (int64_t kb = 0; kb < nkb; kb++) dst[kb] = src[kb] == 0xFF ? NAN : ldexpf(1.0f, (int)src[kb] - 127);
    }
}

void moects__fused_block_quant(const float *a, int64_t n, int64_t G, int64_t blk, int ue8m0, double *q, float *sa)
{
    moects__fused_fp8_groups(a, n, G, ue8m0, q, sa); /* sa[0 .. n / G) the groups' scales */
    for (int64_t kb = n / blk - 1; kb >= 0; kb--) sa[kb] = sa[kb * blk / G]; /* kb * blk / G <= kb */
}

float moects__fused_block_chain(const double *d, int64_t nkb, const float *sa, const uint8_t *anan,
                                const uint8_t *bnan, const float *sb, moects_bscale_order o)
{
    float acc = 0.0f;
    for (int64_t kb = 0; kb < nkb; kb++) {
        const float p = anan[kb] || bnan[kb] ? NAN : d[kb] == 0.0 ? 0.0f : (float)d[kb]; /* d exact: RNE once */
        if (o == MOECTS_BSCALE_AB_FMA) acc = fmaf(p, sa[kb] * sb[kb], acc);
        else if (o == MOECTS_BSCALE_A_B_FMA) acc = fmaf(p * sa[kb], sb[kb], acc);
        else acc = acc + (p * sa[kb]) * sb[kb];
    }
    return acc;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* 1 and *out when [v - err, v + err] rounds to one FP32 value (bits). */
static int rounds_to_one(double v, double err, float *out)
{
    const float lo = (float)(v - err), hi = (float)(v + err); /* RNE, overflow to Inf */
    if (bits(lo) != bits(hi)) return 0;
    *out = lo;
    return 1;
}

/* Step 1 (see the top): V is within err of d and a multiple of 2^qexp. */
static int decided(double d, double s, int qexp, int64_t K, float *out)
{
    if (!isfinite(d) || !isfinite(s)) return 0;
    if (s == 0.0) {
        *out = 0.0f;
        return 1;
    }
    const double n = (double)((K < KC ? K : KC) + moects__cdiv(K, KC) + 2);
    const double err = (n * 0x1p-52 * s + 0x1p-50 * fabs(d) + 0x1p-1000) * (1.0 + 0x1p-20);
    if (qexp < 1024 && err < ldexp(0.5, qexp)) { /* one multiple of q within err of d: it is V */
        const double m = nearbyint(ldexp(d, -qexp)), v = ldexp(m, qexp); /* exact (the top) */
        *out = m == 0.0 ? 0.0f : (float)v;
        return 1;
    }
    return rounds_to_one(d, err, out);
}

/* The exact value m * 2^q (m a signed 128-bit integer) rounded to FP32, RNE: the bits below the
 * quantum 2^max(E - 23, -149) (E = floor(log2 |value|)) dropped with ties to even; overflow to Inf;
 * a negative value that rounds to 0 gives -0, as IEEE's rounding does. */
static float round_i128(__int128 acc, int q)
{
    if (acc == 0) return 0.0f;
    const int neg = acc < 0;
    unsigned __int128 m = neg ? -(unsigned __int128)acc : (unsigned __int128)acc;
    const uint64_t top = (uint64_t)(m >> 64);
    const int L = top ? 128 - __builtin_clzll(top) : 64 - __builtin_clzll((uint64_t)m); /* bit length */
    const int drop = L - 24 > -149 - q ? L - 24 : -149 - q;
    if (drop > L) {
        m = 0; /* below half the quantum */
    } else if (drop > 0) {
        const unsigned __int128 half = (unsigned __int128)1 << (drop - 1), rem = m & ((half << 1) - 1);
        m >>= drop;
        if (rem > half || (rem == half && (m & 1))) m++;
    }
    const double v = ldexp((double)(uint64_t)m, drop > 0 ? q + drop : q); /* m <= 2^24: exact */
    return (float)(neg ? -v : v);                                          /* exact, or Inf */
}

/* Step 2: the exact sum in a 128-bit integer (see the top). p = M 2^(x-1075) has its lowest set
 * bit at x - 1075 + ctz(M) and its top below x - 1075 + 53. 1 and *out, or 0 (too wide, or a
 * product not finite). */
static int i128_dot(const double *a, const double *b, int64_t K, float *out)
{
    int lo = INT_MAX, hi = INT_MIN;
    for (int64_t k = 0; k < K; k++) {
        const double p = a[k] * b[k];
        uint64_t u;
        memcpy(&u, &p, sizeof u);
        const int x = (int)((u >> 52) & 0x7FF);
        if (x == 0x7FF) return 0;
        if (x == 0) continue; /* +-0 (no product is subnormal) */
        const uint64_t M = (u & 0xFFFFFFFFFFFFFull) | (1ull << 52);
        lo = x - 1075 + __builtin_ctzll(M) < lo ? x - 1075 + __builtin_ctzll(M) : lo;
        hi = x - 1075 + 53 > hi ? x - 1075 + 53 : hi;
    }
    if (lo == INT_MAX) return *out = 0.0f, 1;
    if (hi - lo + 64 - __builtin_clzll((uint64_t)K) > 125) return 0;
    __int128 acc = 0;
    for (int64_t k = 0; k < K; k++) {
        const double p = a[k] * b[k];
        uint64_t u;
        memcpy(&u, &p, sizeof u);
        const int x = (int)((u >> 52) & 0x7FF), sh = x - 1075 - lo;
        if (x == 0) continue;
        const uint64_t M = (u & 0xFFFFFFFFFFFFFull) | (1ull << 52);
        const __int128 v = sh >= 0 ? (__int128)M << sh : (__int128)(M >> -sh); /* exact: lo <= lowest bit */
        acc += (u >> 63) ? -v : v;
    }
    *out = round_i128(acc, lo);
    return 1;
}

/* IEEE's special cases of the sum of products: 1 and *out when a product is not finite. */
static int special(const double *a, const double *b, int64_t K, float *out)
{
    int nan = 0, pinf = 0, ninf = 0;
    for (int64_t k = 0; k < K; k++) {
        const double p = a[k] * b[k]; /* not finite only for a NaN or Inf operand (no overflow) */
        if (isnan(p)) nan = 1;
        else if (isinf(p)) *(p > 0 ? &pinf : &ninf) = 1;
    }
    if (!nan && !pinf && !ninf) return 0;
    *out = nan || (pinf && ninf) ? NAN : pinf ? INFINITY : -INFINITY;
    return 1;
}

/* Step 3's exact sum of finite products. */
static float xsum_dot(const double *a, const double *b, int64_t K)
{
    moects_xsum x;
    moects__xsum_init(&x);
    for (int64_t k = 0; k < K; k++) moects__xsum_add_product(&x, a[k], b[k]);
    return moects__xsum_round_f32(&x);
}

float moects__fused_dot_exact(const double *a, const double *b, int64_t K)
{
    float v;
    return special(a, b, K, &v) ? v : xsum_dot(a, b, K);
}

float moects__fused_dot(double d, double s, int qexp, const double *a, const double *b, int64_t K)
{
    float v;
    if (decided(d, s, qexp, K, &v) || i128_dot(a, b, K, &v) || special(a, b, K, &v)) return v;
    return xsum_dot(a, b, K);
}
