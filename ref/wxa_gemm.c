/* wxa_gemm.c: E4M3 (W4A8) or BF16 (W4A16) activations against E2M1 weights with block scales:
 * the double-partial path of the grouped reference (DESIGN.md "Grouped MoE GEMM").
 *
 * Block partials p = sum over a K-block of dec(A) * dec(B) are summed in double on the decoded
 * values, for a register block of 4 rows x 8 columns at once (AVX2 FMA; plain C without AVX2),
 * exact whatever the order (so with or without FMA) when:
 *   E4M3 x E2M1: always. Products are multiples of 2^-10 (2^-9 * 0.5) below 448 * 6 < 2^12, so a sum
 *     of <= 32 of them, in any order and grouping, is a multiple of 2^-10 below 2^17: 27 bits.
 *   BF16 x E2M1: when the block's nonzero A values span at most 36 binades (exponent fields
 *     emax - emin <= 36, a subnormal counting as field 1): products are multiples of 2^(emin-135)
 *     below 2^(emax-126) * 6 and sums of <= 32 below 2^(emax-118), so 53 bits hold every
 *     partial sum.
 * A (row, K-block) that fails this, or holds a NaN or Inf, takes the slow path: exact_v1 adds its
 * products one by one into the element's exact sum (moects__xsum_add_product), blockwise_v1 sums
 * them in double in ascending k (exact for E4M3 unless a NaN is there, and NaN is NaN in any order).
 *   blockwise_v1 (E4M3 only): acc = fmaf((float)p, sA * sB, acc) (p rounded once, RNE; the scale
 *                             product one FP32 multiply), D = out(acc * alpha);
 *   exact_v1: the terms p * (sA * sB) (sA * sB exact in double; TwoProduct by fma) summed exactly,
 *             times alpha, rounded once (moects__exact_store).
 * Elements of the last K-block past K are 0. Tiles are split over moects__parallel's threads; a
 * tile's result does not depend on the split.
 * Per element the steps are those of the scalar code (group_scalar), block after block: the AVX2
 * path does 4 lanes at once with the same IEEE operations (fmsub = fma(p, s, -t), cvtpd_ps = the
 * (float) cast, both RNE) and keeps a lane group's vector result only when every lane is "clean"
 * (TwoSum error 0 and TwoProduct error 0: t finite, hi += t exact, nothing for the xsum); else the
 * group is redone by group_scalar from the same state. So hi, xs and acc hold the same bits as
 * the scalar code's, whatever the ISA (MOECTS_FP4_REF_ISA=c forces the scalar code). */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moects_gemm_internal.h"
#include "moects_ref.h"

#define TILE_EX 64  /* exact tile: 64 x 64 xsum states */
#define TILE_BW 128 /* blockwise-only tile */
#define BF16_SPAN 36
#define RB 4 /* rows of a register block */
#define CB 8 /* columns of a register block: two 4-lane vectors */

typedef struct {
    const moects__gemm_job *j;
    const uint8_t *a8;   /* E4M3 [M][K] or NULL */
    const uint16_t *a16; /* BF16 [M][K] or NULL */
    const uint8_t *b;    /* E2M1 [N][ceil(K/2)] */
    int64_t nkb, mt, nt, mtp, ntp, tiles_m, tiles_n; /* mtp, ntp: mt, nt rounded up to RB, CB */
    int avx2;
    double lut_a[256], lut_b[16];
    uint8_t top16[2][16]; /* bits 48..55 and 56..63 of lut_b's doubles (the rest are 0) */
    pthread_mutex_t lock;
    int failed;
} wctx;

typedef struct {
    double *abuf;  /* [nkb][mtp][g]: the m-tile's A, block-major, rows past mr 0 */
    double *bblk;  /* [g][ntp]: one K-block of the n-tile's B, transposed, columns past nt 0 */
    float *sb;     /* [ntp]: that block's B scales, 0 past nt */
    uint8_t *slow; /* [mtp][nkb] */
    float *acc;    /* [mtp][ntp] (rows / columns past the tile: scratch) */
    double *hi;    /* [mtp][ntp] */
    moects_xsum *xs;
    int64_t a_tile;
} wwork;

static double bf16_value(uint16_t x)
{
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rows [m0, m0+mr) of A -> block-major doubles, and each (row, block)'s slow flag (see the top);
 * rows [mr, mtp) zero and not slow. */
static void decode_a(const wctx *c, wwork *w, int64_t m0, int64_t mr)
{
    const int64_t K = c->j->K, g = c->j->g, mtp = c->mtp;
    for (int64_t i = 0; i < mtp; i++)
        for (int64_t b = 0; b < c->nkb; b++) {
            double *d = w->abuf + (b * mtp + i) * g;
            const int64_t k0 = b * g, n = i >= mr ? 0 : K - k0 < g ? K - k0 : g;
            int emin = 255, emax = 0, special = 0;
            if (n > 0 && c->a8) {
                const uint8_t *x = c->a8 + (m0 + i) * K + k0;
                for (int64_t kk = 0; kk < n; kk++) {
                    d[kk] = c->lut_a[x[kk]];
                    special |= (x[kk] & 0x7F) == 0x7F;
                }
            } else if (n > 0) {
                const uint16_t *x = c->a16 + (m0 + i) * K + k0;
                for (int64_t kk = 0; kk < n; kk++) {
                    int e = (x[kk] >> 7) & 0xFF;
                    d[kk] = bf16_value(x[kk]);
                    special |= e == 0xFF;
                    if (x[kk] & 0x7FFF) { /* nonzero: a subnormal counts as field 1 */
                        e = e ? e : 1;
                        emin = e < emin ? e : emin;
                        emax = e > emax ? e : emax;
                    }
                }
            }
            for (int64_t kk = n; kk < g; kk++) d[kk] = 0.0;
            w->slow[i * c->nkb + b] = (uint8_t)(special || (emax > emin && emax - emin > BF16_SPAN));
        }
}

/* K-block b of B's rows [n0, n0+nt) -> w->bblk [g][ntp] (transposed, zero past K and past nt),
 * and the block's scales -> w->sb [ntp] (0 past nt). Rows from r0 on (the AVX2 path did those
 * before), one element at a time. */
static void decode_b_block(const wctx *c, wwork *w, int64_t n0, int64_t nt, int64_t b, int64_t r0)
{
    const moects__gemm_job *j = c->j;
    const int64_t K = j->K, g = j->g, rb = moects__cdiv(K, 2), ntp = c->ntp;
    const int64_t k0 = b * g, n = K - k0 < g ? K - k0 : g;
    double *d = w->bblk;
    for (int64_t r = r0; r < nt; r++) {
        const uint8_t *src = c->b + (n0 + r) * rb + k0 / 2; /* k0 and g are even: whole bytes */
        int64_t kk = 0;
        for (; kk + 1 < n; kk += 2) {
            uint8_t v = src[kk / 2];
            d[kk * ntp + r] = c->lut_b[v & 0xF];
            d[(kk + 1) * ntp + r] = c->lut_b[v >> 4];
        }
        if (kk < n) {
            d[kk * ntp + r] = c->lut_b[src[kk / 2] & 0xF];
            kk++;
        }
        for (; kk < g; kk++) d[kk * ntp + r] = 0.0;
    }
    for (int64_t kk = 0; kk < g; kk++)
        for (int64_t r = nt; r < ntp; r++) d[kk * ntp + r] = 0.0;
    for (int64_t r = 0; r < ntp; r++) w->sb[r] = r < nt ? j->sbt[b * j->N + n0 + r] : 0.0f;
}

/* The same for a whole K-block (k0 + g <= K) and rows in fours, AVX2: E2M1 codes -> the top 16
 * bits of their doubles (every E2M1 value has at most 2 significant bits, so the other 48 are 0;
 * c->top16 holds the table's low and high bytes) by byte shuffles, 4 rows transposed as 16-bit
 * words, widened to 64 bits and shifted into place. Same bits as lut_b (-0 included). */
__attribute__((target("avx2,fma"))) static void decode_b_block_avx2(const wctx *c, wwork *w, int64_t n0,
                                                                   int64_t nt, int64_t b)
{
    const int64_t K = c->j->K, g = c->j->g, rb = moects__cdiv(K, 2), ntp = c->ntp, k0 = b * g;
    int64_t r = 0;
    if (k0 + g <= K && (g == 16 || g == 32)) {
        const __m128i tlo = _mm_loadu_si128((const __m128i *)c->top16[0]);
        const __m128i thi = _mm_loadu_si128((const __m128i *)c->top16[1]), m4 = _mm_set1_epi8(0x0F);
        for (; r + 4 <= nt; r += 4) {
            __m128i wv[4][4]; /* [row][k octet]: 8 words */
            for (int q = 0; q < 4; q++) {
                const uint8_t *src = c->b + (n0 + r + q) * rb + k0 / 2;
                const __m128i x = g == 32 ? _mm_loadu_si128((const __m128i *)src) : _mm_loadl_epi64((const __m128i *)src);
                const __m128i lo = _mm_and_si128(x, m4), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m4);
                const __m128i cd[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)}; /* k order */
                for (int h = 0; h < 2; h++) {
                    const __m128i bl = _mm_shuffle_epi8(tlo, cd[h]), bh = _mm_shuffle_epi8(thi, cd[h]);
                    wv[q][2 * h] = _mm_unpacklo_epi8(bl, bh);
                    wv[q][2 * h + 1] = _mm_unpackhi_epi8(bl, bh);
                }
            }
            for (int o = 0; o < g / 8; o++) {
                const __m128i t01l = _mm_unpacklo_epi16(wv[0][o], wv[1][o]), t23l = _mm_unpacklo_epi16(wv[2][o], wv[3][o]);
                const __m128i t01h = _mm_unpackhi_epi16(wv[0][o], wv[1][o]), t23h = _mm_unpackhi_epi16(wv[2][o], wv[3][o]);
                const __m128i qv[4] = {_mm_unpacklo_epi32(t01l, t23l), _mm_unpackhi_epi32(t01l, t23l),
                                       _mm_unpacklo_epi32(t01h, t23h), _mm_unpackhi_epi32(t01h, t23h)};
                for (int h = 0; h < 4; h++) { /* qv[h]: elements 2h, 2h+1 of the octet, 4 rows each */
                    double *d = w->bblk + (o * 8 + 2 * h) * ntp + r;
                    _mm256_storeu_si256((__m256i *)d, _mm256_slli_epi64(_mm256_cvtepu16_epi64(qv[h]), 48));
                    _mm256_storeu_si256((__m256i *)(d + ntp),
                                        _mm256_slli_epi64(_mm256_cvtepu16_epi64(_mm_unpackhi_epi64(qv[h], qv[h])), 48));
                }
            }
        }
    }
    decode_b_block(c, w, n0, nt, b, r);
}

/* exact_v1's step for one element and one block: t = p * s added exactly (hi by TwoSum, the
 * errors of the sum and of the product into the xsum). */
static inline void ex_step(double *hi, moects_xsum *xs, double pr, double s)
{
    const double t = pr * s;
    if (t == 0.0) return;
    if (!isfinite(t)) { /* only from a NaN scale: the element is NaN at the end */
        moects__xsum_add(xs, t);
        return;
    }
    double lo = fma(pr, s, -t), e;
    moects__two_sum(*hi, t, hi, &e);
    if (e != 0.0) moects__xsum_add(xs, e);
    if (lo != 0.0) moects__xsum_add(xs, lo);
}

/* Block b for rows [i0, i0+RB) x columns [j0, j0+CB) of the tile (those < mr, nt), scalar:
 * P [RB][CB]: the exact partials of the rows that are not slow. A slow row takes the slow path
 * (blockwise partials in double, ascending k; exact_v1's products one by one into the xsum),
 * blockwise step before exact step, as the block-serial code always did. do_bw / do_ex: which
 * recipes' steps to do for rows that are not slow (a slow row does every wanted recipe). */
static void group_scalar(const wctx *c, wwork *w, int64_t b, int64_t m0, int64_t mr, int64_t nt, int64_t i0,
                         int64_t j0, const double *P, int do_bw, int do_ex)
{
    const moects__gemm_job *j = c->j;
    const int64_t g = j->g, mtp = c->mtp, ntp = c->ntp, nkb = c->nkb;
    const int64_t ie = i0 + RB < mr ? i0 + RB : mr, je = j0 + CB < nt ? j0 + CB : nt;
    for (int64_t i = i0; i < ie; i++) {
        const float saf = j->sa[(m0 + i) * nkb + b];
        float *acc = w->acc + i * ntp;
        double *hi = w->hi + i * ntp;
        moects_xsum *xs = w->xs + i * ntp;
        if (w->slow[i * nkb + b]) {
            const double *ar = w->abuf + (b * mtp + i) * g;
            for (int64_t jn = j0; jn < je; jn++) {
                double sum = 0.0;
                for (int64_t kk = 0; kk < g; kk++) sum += ar[kk] * w->bblk[kk * ntp + jn];
                if (j->out_bw) acc[jn] = fmaf((float)sum, saf * w->sb[jn], acc[jn]);
                if (j->out_ex) {
                    const double s = saf * (double)w->sb[jn];
                    for (int64_t kk = 0; kk < g; kk++)
                        moects__xsum_add_product(&xs[jn], ar[kk], w->bblk[kk * ntp + jn] * s);
                }
            }
            continue;
        }
        const double *pr = P + (i - i0) * CB - j0;
        for (int64_t jn = j0; jn < je; jn++) {
            if (do_bw && j->out_bw) acc[jn] = fmaf((float)pr[jn], saf * w->sb[jn], acc[jn]);
            if (do_ex && j->out_ex) ex_step(&hi[jn], &xs[jn], pr[jn], (double)saf * (double)w->sb[jn]);
        }
    }
}

/* Block b of the tile, plain C: partials by register block (exact in any order), then
 * group_scalar. */
static void block_c(const wctx *c, wwork *w, int64_t b, int64_t m0, int64_t mr, int64_t nt)
{
    const int64_t g = c->j->g, mtp = c->mtp, ntp = c->ntp;
    double P[RB * CB];
    for (int64_t i0 = 0; i0 < mr; i0 += RB)
        for (int64_t j0 = 0; j0 < nt; j0 += CB) {
            for (int r = 0; r < RB; r++) {
                const double *ar = w->abuf + (b * mtp + i0 + r) * g;
                for (int q = 0; q < CB; q++) {
                    double sum = 0.0;
                    for (int64_t kk = 0; kk < g; kk++) sum += ar[kk] * w->bblk[kk * ntp + j0 + q];
                    P[r * CB + q] = sum;
                }
            }
            group_scalar(c, w, b, m0, mr, nt, i0, j0, P, 1, 1);
        }
}

/* Rows [i0, i0+RR) of block b, AVX2: each 8-column register block's partials by FMA, in S
 * interleaved K-splits so that RR x 2 x S = 8 independent chains (exact in any order and grouping,
 * see the top), then both recipes' steps lane-wise (see the top). Columns past nt are zero in B and
 * get scale 0: their lanes are clean (t = 0) and land in scratch. RR is a constant (inlined). */
static inline __attribute__((always_inline, target("avx2,fma"))) void
group_avx2(const wctx *c, wwork *w, int64_t b, int64_t m0, int64_t mr, int64_t nt, int64_t i0, const int RR)
{
    const moects__gemm_job *j = c->j;
    const int64_t g = j->g, mtp = c->mtp, ntp = c->ntp, nkb = c->nkb;
    const int S = RR == 1 ? 4 : RR == 2 ? 2 : 1; /* g is 16 or 32: a multiple of S */
    const __m256d zero = _mm256_setzero_pd();
    const double *ab = w->abuf + (b * mtp + i0) * g;
    int slow = 0;
    float saf[RB];
    for (int r = 0; r < RR; r++) {
        saf[r] = j->sa[(m0 + i0 + r) * nkb + b];
        slow |= w->slow[(i0 + r) * nkb + b];
    }
    for (int64_t j0 = 0; j0 < nt; j0 += CB) {
        __m256d p[4][RB][2];
        for (int q = 0; q < S; q++)
            for (int r = 0; r < RR; r++) p[q][r][0] = p[q][r][1] = zero;
        const double *bb = w->bblk + j0;
        for (int64_t kk = 0; kk < g; kk += S)
            for (int q = 0; q < S; q++) {
                const __m256d b0 = _mm256_loadu_pd(bb + (kk + q) * ntp), b1 = _mm256_loadu_pd(bb + (kk + q) * ntp + 4);
                for (int r = 0; r < RR; r++) {
                    const __m256d av = _mm256_broadcast_sd(ab + r * g + kk + q);
                    p[q][r][0] = _mm256_fmadd_pd(av, b0, p[q][r][0]);
                    p[q][r][1] = _mm256_fmadd_pd(av, b1, p[q][r][1]);
                }
            }
        for (int q = 1; q < S; q++)
            for (int r = 0; r < RR; r++)
                for (int h = 0; h < 2; h++) p[0][r][h] = _mm256_add_pd(p[0][r][h], p[q][r][h]);
        if (slow) {
            double P[RB * CB];
            for (int r = 0; r < RR; r++) {
                _mm256_storeu_pd(P + r * CB, p[0][r][0]);
                _mm256_storeu_pd(P + r * CB + 4, p[0][r][1]);
            }
            group_scalar(c, w, b, m0, mr, nt, i0, j0, P, 1, 1);
            continue;
        }
        if (j->out_bw)
            for (int r = 0; r < RR; r++)
                for (int h = 0; h < 2; h++) {
                    float *acc = w->acc + (i0 + r) * ntp + j0 + 4 * h;
                    const __m128 pf = _mm256_cvtpd_ps(p[0][r][h]);
                    const __m128 sab = _mm_mul_ps(_mm_set1_ps(saf[r]), _mm_loadu_ps(w->sb + j0 + 4 * h));
                    _mm_storeu_ps(acc, _mm_fmadd_ps(pf, sab, _mm_loadu_ps(acc)));
                }
        if (!j->out_ex) continue;
        __m256d x[RB][2], ok = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
        for (int r = 0; r < RR; r++) {
            const __m256d sa = _mm256_set1_pd((double)saf[r]);
            for (int h = 0; h < 2; h++) {
                const __m256d pv = p[0][r][h];
                const __m256d s = _mm256_mul_pd(sa, _mm256_cvtps_pd(_mm_loadu_ps(w->sb + j0 + 4 * h)));
                const __m256d t = _mm256_mul_pd(pv, s), lo = _mm256_fmsub_pd(pv, s, t);
                const __m256d hv = _mm256_loadu_pd(w->hi + (i0 + r) * ntp + j0 + 4 * h);
                const __m256d xv = _mm256_add_pd(hv, t), bv = _mm256_sub_pd(xv, hv), av = _mm256_sub_pd(xv, bv);
                const __m256d e = _mm256_add_pd(_mm256_sub_pd(hv, av), _mm256_sub_pd(t, bv));
                ok = _mm256_and_pd(ok, _mm256_and_pd(_mm256_cmp_pd(e, zero, _CMP_EQ_OQ),
                                                     _mm256_cmp_pd(lo, zero, _CMP_EQ_OQ)));
                x[r][h] = xv;
            }
        }
        if (_mm256_movemask_pd(ok) == 0xF) {
            for (int r = 0; r < RR; r++)
                for (int h = 0; h < 2; h++) _mm256_storeu_pd(w->hi + (i0 + r) * ntp + j0 + 4 * h, x[r][h]);
        } else { /* some lane has an error term or a non-finite t: redo the exact step */
            double P[RB * CB];
            for (int r = 0; r < RR; r++) {
                _mm256_storeu_pd(P + r * CB, p[0][r][0]);
                _mm256_storeu_pd(P + r * CB + 4, p[0][r][1]);
            }
            group_scalar(c, w, b, m0, mr, nt, i0, j0, P, 0, 1);
        }
    }
}

/* Block b of the tile, AVX2: rows in fours, the last 1-3 rows by a narrower register block. */
__attribute__((target("avx2,fma"))) static void block_avx2(const wctx *c, wwork *w, int64_t b, int64_t m0,
                                                          int64_t mr, int64_t nt)
{
    int64_t i0 = 0;
    for (; i0 + RB <= mr; i0 += RB) group_avx2(c, w, b, m0, mr, nt, i0, 4);
    switch (mr - i0) {
    case 3: group_avx2(c, w, b, m0, mr, nt, i0, 3); break;
    case 2: group_avx2(c, w, b, m0, mr, nt, i0, 2); break;
    case 1: group_avx2(c, w, b, m0, mr, nt, i0, 1); break;
    default: break;
    }
}

static void do_tile(const wctx *c, wwork *w, int64_t tm, int64_t tn)
{
    const moects__gemm_job *j = c->j;
    const int64_t N = j->N, nkb = c->nkb, m0 = tm * c->mt, n0 = tn * c->nt;
    const int64_t nt = N - n0 < c->nt ? N - n0 : c->nt, ntp = c->ntp;
    const int64_t mr = j->M - m0 < c->mt ? j->M - m0 : c->mt; /* rows of this tile */
    const size_t tile = (size_t)(c->mtp * ntp);
    if (w->a_tile != tm) {
        decode_a(c, w, m0, mr);
        w->a_tile = tm;
    }
    if (j->out_bw) memset(w->acc, 0, tile * sizeof(float));
    if (j->out_ex)
        for (size_t i = 0; i < tile; i++) {
            w->hi[i] = 0.0;
            moects__xsum_init(&w->xs[i]);
        }
    for (int64_t b = 0; b < nkb; b++) {
        if (c->avx2) {
            decode_b_block_avx2(c, w, n0, nt, b);
            block_avx2(c, w, b, m0, mr, nt);
        } else {
            decode_b_block(c, w, n0, nt, b, 0);
            block_c(c, w, b, m0, mr, nt);
        }
    }
    for (int64_t i = 0; i < mr; i++)
        moects__store_tile(j, m0 + i, n0, 1, nt, j->out_bw ? w->acc + i * ntp : NULL,
                           j->out_ex ? w->hi + i * ntp : NULL, j->out_ex ? w->xs + i * ntp : NULL);
}

static void worker(void *arg, int64_t id, int64_t nth)
{
    wctx *c = arg;
    const int64_t U = c->tiles_m * c->tiles_n, t0 = id * U / nth, t1 = (id + 1) * U / nth;
    const int64_t g = c->j->g;
    const size_t tile = (size_t)(c->mtp * c->ntp);
    wwork w = {0};
    w.a_tile = -1;
    w.abuf = malloc((size_t)(c->mtp * c->nkb * g + 1) * sizeof(double));
    w.bblk = malloc((size_t)(g * c->ntp + 1) * sizeof(double));
    w.sb = malloc((size_t)(c->ntp + 1) * sizeof(float));
    w.slow = malloc((size_t)(c->mtp * c->nkb + 1));
    if (c->j->out_bw) w.acc = malloc(tile * sizeof(float));
    if (c->j->out_ex) {
        w.hi = malloc(tile * sizeof(double));
        w.xs = malloc(tile * sizeof(moects_xsum));
    }
    int ok = w.abuf && w.bblk && w.sb && w.slow && (!c->j->out_bw || w.acc) && (!c->j->out_ex || (w.hi && w.xs));
    if (ok)
        for (int64_t t = t0; t < t1; t++) do_tile(c, &w, t / c->tiles_n, t % c->tiles_n);
    else {
        pthread_mutex_lock(&c->lock);
        c->failed = 1;
        pthread_mutex_unlock(&c->lock);
    }
    free(w.abuf);
    free(w.bblk);
    free(w.sb);
    free(w.slow);
    free(w.acc);
    free(w.hi);
    free(w.xs);
}

/* AVX2 with FMA when the CPU has them and MOECTS_FP4_REF_ISA (tests) does not say "c". */
static int pick_avx2(void)
{
    const char *cap = getenv("MOECTS_FP4_REF_ISA");
    __builtin_cpu_init();
    return !(cap && !strcmp(cap, "c")) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int moects__wxa_gemm_job(const moects__gemm_job *j, const void *a, moects__a_kind kind, const uint8_t *b)
{
    if (j->M == 0 || j->N == 0) return 0;
    wctx c;
    memset(&c, 0, sizeof c);
    c.j = j;
    c.a8 = kind == MOECTS__A_E4M3 ? a : NULL;
    c.a16 = kind == MOECTS__A_BF16 ? a : NULL;
    c.b = b;
    c.nkb = moects__cdiv(j->K, j->g);
    const int64_t tile = j->out_ex ? TILE_EX : TILE_BW;
    c.mt = j->M < tile ? j->M : tile;
    c.nt = j->N < tile ? j->N : tile;
    c.tiles_m = moects__cdiv(j->M, c.mt);
    c.tiles_n = moects__cdiv(j->N, c.nt);
    const int64_t th = openblas_get_num_threads(); /* moects__parallel's threads */
    if (c.tiles_m * c.tiles_n < th && c.nt > CB) { /* few rows: narrower n-tiles, one per thread */
        const int64_t parts = moects__cdiv(th, c.tiles_m), nt = moects__cdiv(moects__cdiv(j->N, parts), CB) * CB;
        c.nt = nt < c.nt ? nt : c.nt;
        c.tiles_n = moects__cdiv(j->N, c.nt);
    }
    c.mtp = moects__cdiv(c.mt, RB) * RB;
    c.ntp = moects__cdiv(c.nt, CB) * CB;
    c.avx2 = pick_avx2();
    for (int i = 0; i < 256; i++) c.lut_a[i] = moects__e4m3_decode((uint8_t)i);
    for (int i = 0; i < 16; i++) {
        c.lut_b[i] = moects__e2m1_decode((uint8_t)i);
        uint64_t u;
        memcpy(&u, &c.lut_b[i], sizeof u);
        c.top16[0][i] = (uint8_t)(u >> 48);
        c.top16[1][i] = (uint8_t)(u >> 56);
        if (u << 16) c.avx2 = 0; /* not 16 bits (impossible for E2M1): the plain C path */
    }
    pthread_mutex_init(&c.lock, NULL);
    moects__parallel(c.tiles_m * c.tiles_n, worker, &c);
    pthread_mutex_destroy(&c.lock);
    return c.failed ? -1 : 0;
}
