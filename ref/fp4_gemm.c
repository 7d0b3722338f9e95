/* fp4_gemm.c: the FP4 GEMM reference, recipes fp4_gemm.blockwise_v1 and fp4_gemm.exact_v1
 * (DESIGN.md "Numeric recipes"), MXFP4 x MXFP4 and NVFP4 x NVFP4, NT layout, both scale layouts,
 * either recipe or both at once from the same block partials (moects__ref_fp4_gemm_recipes).
 *
 * Conventions: K not a multiple of the block g: the last block is zero-padded (its missing
 * elements count as 0; its scale is read as usual); the high nibble of a row's last byte is ignored
 * when K is odd. NVFP4 scales are decoded as E4M3 (a set sign bit, which UE4M3 inputs never have,
 * gives a negative scale). A NaN scale (UE8M0 0xFF, E4M3 0x7F/0xFF) makes every output it touches
 * NaN, in exact_v1 too (0 * NaN = NaN).
 *
 * How (DESIGN.md): every product of two E2M1 values is a multiple of 1/4 of magnitude <= 36, so a
 * block partial p = sum of g of them is exact in FP32 in any order. OpenBLAS cblas_sgemm computes
 * the partials for a 256 x 256 tile of (m, n) at once on the decoded E2M1 values, then the scales
 * are applied in block order:
 *   blockwise_v1: acc = fmaf(p, sA * sB, acc) (FP32), D = out_rne(acc * alpha);
 *   exact_v1:     the terms p * sA * sB (exact in double) are summed exactly (TwoSum into a double,
 *                 rounding errors into a moects_xsum), times alpha exactly, rounded once to out.
 * Both recipes at once: per row of a tile, the exact pass then the blockwise pass read the same
 * partials, each into its own state, each in its own order (a result does not depend on the tile).
 * Two blocks per sgemm: K-blocks go in pairs (b, b+1) with B's block b+1 decoded times 2^12. In
 * quarter units (q = 4p, integers) one sgemm over the 2g columns gives Q = q_b + 4096 q_{b+1},
 * exact in any order when |q_b| + 4096 |q_{b+1}| < 2^24; and q_{b+1} = round(Q / 4096), q_b =
 * Q - 4096 q_{b+1} when |q_b| < 2048. Both are checked per tile and pair with exact integer bounds
 * (Cauchy-Schwarz and max * sum over the tile's rows); a pair that fails them gets two sgemms
 * (the 2^12 factor removed exactly). Either way p_b and p_{b+1} are the exact partials.
 * The tiles are spread over openblas_get_num_threads() threads of our own, OpenBLAS being set to one
 * thread meanwhile and restored after (so do not run OpenBLAS from another thread during a call);
 * each tile's result does not depend on the split. The FP32 steps use AVX-512 or AVX2 when the CPU
 * has them: IEEE fused multiply-add, multiply and exact integer-valued steps per lane, bit-identical
 * to the scalar fmaf() and '*'. */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moects_exact.h"
#include "moects_gemm_internal.h"
#include "moects_quant.h"
#include "moects_ref.h"

#define TILE_BW 256     /* blockwise tile: 256 x 256 partials + accumulators, in L2 */
#define TILE_EX 64      /* exact_v1 tile: 64 x 64 xsum states, 2.6 MiB */
#define KFULL_MAX 65536 /* K up to this is decoded whole (a multiple of 64) */
#define KCHUNK 8192     /* else elements of K decoded at once (a multiple of 64) */
#define BFULL_MAX ((int64_t)1 << 26) /* decoded B kept whole up to 256 MiB */
#define HI_SCALE 4096.0f /* B's second block of a pair is decoded times 2^12 */

/* pair modes: one block (the last, odd one); two packed in one partial; two in two partials */
enum { MODE_SINGLE, MODE_PACKED, MODE_SPLIT };

typedef struct {
    const moects__gemm_job *j;
    const uint8_t *acodes, *bcodes; /* packed E2M1 [M][ceil(K/2)], [N][ceil(K/2)] */
    int want_bw, want_ex;   /* which recipes to compute (j->out_bw, j->out_ex not NULL) */
    int64_t g, nkb, Kq, kc; /* block, K-blocks, K padded to whole pairs, K chunk (kc == Kq: one) */
    int64_t mt, nt, tiles_m, tiles_n;
    const float *bfull;     /* decoded B, pair-major over all of K, when it fits; else NULL */
    const uint16_t *st_b;   /* [N][nkb][3] B row stats (row_stats) */
    float lut[256][2], lut_hi[256][2]; /* packed byte -> two E2M1 values (times 2^12) */
    pthread_mutex_t lock;
    int failed;
} ctx;

#define cdiv moects__cdiv

/* rows [r0, r0+nr) of a packed operand, elements [k0, k0+kc) -> dst, pair-major: element k of row
 * r at dst[(k'/2g)*nr*2g + r*2g + k'%2g], k' = k - k0, so a pair of K-blocks of all the rows is a
 * contiguous [nr][2g] panel (lda = 2g). With hi, the second block of each pair is times 2^12
 * (exact). Elements past K are 0. k0 is a multiple of 2g. */
static void decode_rows(const ctx *c, const uint8_t *codes, int64_t r0, int64_t nr, int64_t k0,
                        int64_t kc, int hi, float *dst)
{
    const int64_t K = c->j->K, rb = cdiv(K, 2), g = c->g, w = 2 * g;
    const int64_t have = K - k0 < kc ? K - k0 : kc;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *src = codes + (r0 + r) * rb + k0 / 2;
        for (int64_t w0 = 0; w0 < kc; w0 += w)
            for (int h = 0; h < 2; h++) {
                const float(*lut)[2] = hi && h ? c->lut_hi : c->lut;
                const int64_t e0 = w0 + h * g;
                int64_t n = have - e0 < g ? have - e0 : g, j = 0;
                float *d = dst + w0 * nr + r * w + h * g;
                for (; j + 1 < n; j += 2) memcpy(d + j, lut[src[(e0 + j) / 2]], 2 * sizeof(float));
                if (j < n) {
                    d[j] = lut[src[(e0 + j) / 2]][0];
                    j++;
                }
                if (j < g) memset(d + j, 0, (size_t)(g - j) * sizeof(float));
            }
    }
}

/* Per row and K-block, over the elements present, in half units x = |2 * value| (0..12): max x,
 * sum x, sum x^2 -> st [nr][nkb][3]. They bound the block partials (pair_packable). */
static void row_stats(const ctx *c, const uint8_t *codes, int64_t r0, int64_t nr, uint16_t *st)
{
    static const uint8_t x2[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    const int64_t K = c->j->K, rb = cdiv(K, 2), g = c->g, nkb = c->nkb, full = K / 2; /* whole bytes */
    uint8_t bmx[256], bsm[256];
    uint16_t bsq[256];
    for (int v = 0; v < 256; v++) {
        unsigned lo = x2[v & 7], hi = x2[(v >> 4) & 7];
        bmx[v] = (uint8_t)(lo > hi ? lo : hi);
        bsm[v] = (uint8_t)(lo + hi);
        bsq[v] = (uint16_t)(lo * lo + hi * hi);
    }
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *src = codes + (r0 + r) * rb;
        uint16_t *u = st + r * nkb * 3;
        for (int64_t b = 0; b < nkb; b++) {
            int64_t j0 = b * g / 2, j1 = (b + 1) * g / 2 < full ? (b + 1) * g / 2 : full;
            unsigned mx = 0, sm = 0, sq = 0;
            for (int64_t j = j0; j < j1; j++) {
                uint8_t v = src[j];
                mx = bmx[v] > mx ? bmx[v] : mx;
                sm += bsm[v];
                sq += bsq[v];
            }
            if ((K & 1) && b == nkb - 1) { /* the odd last element: low nibble only */
                unsigned lo = x2[src[full] & 7];
                mx = lo > mx ? lo : mx;
                sm += lo;
                sq += lo * lo;
            }
            u[3 * b] = (uint16_t)mx;
            u[3 * b + 1] = (uint16_t)sm;
            u[3 * b + 2] = (uint16_t)sq;
        }
    }
}

/* t[e] = max over the rows of st[r][e], e < ne. */
static void tile_max(const uint16_t *st, int64_t rows, int64_t ne, uint32_t *t)
{
    memset(t, 0, (size_t)ne * sizeof *t);
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *x = st + r * ne;
        for (int64_t e = 0; e < ne; e++) t[e] = x[e] > t[e] ? x[e] : t[e];
    }
}

/* Is sum_k |x_k y_k| <= lim for every row pair of the tile? a, b: the tile's maxima of the stats
 * of one block (quarter units: half units squared). Cauchy-Schwarz, or max * sum. */
static int bound_le(const uint32_t *a, const uint32_t *b, uint64_t lim)
{
    return (uint64_t)a[2] * b[2] <= lim * lim || (uint64_t)a[0] * b[1] <= lim ||
           (uint64_t)a[1] * b[0] <= lim;
}

/* The packed partial Q = q_b + 4096 q_{b+1} (quarter units) is exact and decodable when
 * |q_b| <= sum|..| <= 2047 and sum|..| of block b+1 <= 4094: then every partial sum sgemm forms is
 * an integer below 2047 + 4096 * 4094 < 2^24, and round(Q / 4096) = q_{b+1}. */
static int pair_packable(const uint32_t *ta, const uint32_t *tb, int64_t b)
{
    return bound_le(ta + 3 * b, tb + 3 * b, 2047) && bound_le(ta + 3 * (b + 1), tb + 3 * (b + 1), 4094);
}

/* One packed or split pair value -> the two exact partials (scalar; the vector code does the same
 * with exact per-lane steps). PACKED: Q = 4 v0 is an integer below 2^24; h = round(Q / 4096) =
 * floor((Q + 2048) / 4096) (|q_b| <= 2047, so no tie); q_b = Q - 4096 h. */
static void unpair(int mode, float v0, float v1, float *p0, float *p1)
{
    if (mode == MODE_PACKED) { /* floor division on a positive offset: |q| < 2^24 */
        int32_t q = (int32_t)(v0 * 4.0f), h = (q + 2048 + (1 << 24)) / 4096 - (1 << 12);
        *p0 = (float)(q - 4096 * h) * 0.25f;
        *p1 = (float)h * 0.25f;
    } else {
        *p0 = v0;
        *p1 = mode == MODE_SPLIT ? v1 * (1.0f / HI_SCALE) : 0.0f;
    }
}

/* The blockwise_v1 pass below in scalar C: the fallback, and the tail of pass_avx512/pass_avx2. */
static void pass_c(float *acc, float *q0, float *q1, int mode, int clear, float sa0, float sa1,
                   const float *sb0, const float *sb1, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        float p0, p1;
        unpair(mode, q0[j], mode == MODE_SPLIT ? q1[j] : 0.0f, &p0, &p1);
        if (clear) {
            q0[j] = 0.0f;
            if (mode == MODE_SPLIT) q1[j] = 0.0f;
        }
        acc[j] = fmaf(p0, sa0 * sb0[j], acc[j]);
        if (mode != MODE_SINGLE) acc[j] = fmaf(p1, sa1 * sb1[j], acc[j]);
    }
}

/* blockwise_v1 on one row of a tile for one pair, in block order: acc = fmaf(p_b, sa0 * sb0[j],
 * acc), then (two blocks) acc = fmaf(p_{b+1}, sa1 * sb1[j], acc): one FP32 multiply and one fused
 * multiply-add per block. With clear, the partial buffers are re-zeroed for the next sgemm
 * (beta = 1); without, they are left for the other recipe's pass. */
__attribute__((target("avx512f"))) static void pass_avx512(float *acc, float *q0, float *q1, int mode,
                                                            int clear, float sa0, float sa1,
                                                            const float *sb0, const float *sb1, int64_t n)
{
    const __m512 z = _mm512_setzero_ps(), four = _mm512_set1_ps(4.0f), quarter = _mm512_set1_ps(0.25f);
    const __m512 inv = _mm512_set1_ps(1.0f / 4096.0f), k4096 = _mm512_set1_ps(4096.0f);
    const __m512 unhi = _mm512_set1_ps(1.0f / HI_SCALE), va0 = _mm512_set1_ps(sa0), va1 = _mm512_set1_ps(sa1);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(q0 + j), p0 = v, p1 = z, acc_v = _mm512_loadu_ps(acc + j);
        if (clear) _mm512_storeu_ps(q0 + j, z);
        if (mode == MODE_PACKED) {
            __m512 q = _mm512_mul_ps(v, four);
            __m512 h = _mm512_roundscale_ps(_mm512_mul_ps(q, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            h = _mm512_add_ps(h, z); /* -0 (round of a small negative) -> +0, as unpair's integer h */
            p0 = _mm512_mul_ps(_mm512_fnmadd_ps(h, k4096, q), quarter);
            p1 = _mm512_mul_ps(h, quarter);
        } else if (mode == MODE_SPLIT) {
            p1 = _mm512_mul_ps(_mm512_loadu_ps(q1 + j), unhi);
            if (clear) _mm512_storeu_ps(q1 + j, z);
        }
        acc_v = _mm512_fmadd_ps(p0, _mm512_mul_ps(va0, _mm512_loadu_ps(sb0 + j)), acc_v);
        if (mode != MODE_SINGLE) acc_v = _mm512_fmadd_ps(p1, _mm512_mul_ps(va1, _mm512_loadu_ps(sb1 + j)), acc_v);
        _mm512_storeu_ps(acc + j, acc_v);
    }
    pass_c(acc + j, q0 + j, q1 + j, mode, clear, sa0, sa1, sb0 + j, sb1 + j, n - j);
}

__attribute__((target("avx2,fma"))) static void pass_avx2(float *acc, float *q0, float *q1, int mode,
                                                          int clear, float sa0, float sa1,
                                                          const float *sb0, const float *sb1, int64_t n)
{
    const __m256 z = _mm256_setzero_ps(), four = _mm256_set1_ps(4.0f), quarter = _mm256_set1_ps(0.25f);
    const __m256 inv = _mm256_set1_ps(1.0f / 4096.0f), k4096 = _mm256_set1_ps(4096.0f);
    const __m256 unhi = _mm256_set1_ps(1.0f / HI_SCALE), va0 = _mm256_set1_ps(sa0), va1 = _mm256_set1_ps(sa1);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(q0 + j), p0 = v, p1 = z, acc_v = _mm256_loadu_ps(acc + j);
        if (clear) _mm256_storeu_ps(q0 + j, z);
        if (mode == MODE_PACKED) {
            __m256 q = _mm256_mul_ps(v, four);
            __m256 h = _mm256_round_ps(_mm256_mul_ps(q, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            h = _mm256_add_ps(h, z); /* -0 (round of a small negative) -> +0, as unpair's integer h */
            p0 = _mm256_mul_ps(_mm256_fnmadd_ps(h, k4096, q), quarter);
            p1 = _mm256_mul_ps(h, quarter);
        } else if (mode == MODE_SPLIT) {
            p1 = _mm256_mul_ps(_mm256_loadu_ps(q1 + j), unhi);
            if (clear) _mm256_storeu_ps(q1 + j, z);
        }
        acc_v = _mm256_fmadd_ps(p0, _mm256_mul_ps(va0, _mm256_loadu_ps(sb0 + j)), acc_v);
        if (mode != MODE_SINGLE) acc_v = _mm256_fmadd_ps(p1, _mm256_mul_ps(va1, _mm256_loadu_ps(sb1 + j)), acc_v);
        _mm256_storeu_ps(acc + j, acc_v);
    }
    pass_c(acc + j, q0 + j, q1 + j, mode, clear, sa0, sa1, sb0 + j, sb1 + j, n - j);
}

typedef void (*pass_fn)(float *, float *, float *, int, int, float, float, const float *, const float *,
                        int64_t);
/* The widest the CPU has; MOECTS_FP4_REF_ISA=avx2|c (tests) caps it. All give the same bits. */
static pass_fn pick_pass(void)
{
    const char *cap = getenv("MOECTS_FP4_REF_ISA");
    int allow512 = !cap || !strcmp(cap, "avx512"), allow2 = allow512 || (cap && !strcmp(cap, "avx2"));
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512f")) return pass_avx512;
    if (allow2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return pass_avx2;
    return pass_c;
}

/* A worker's buffers. abuf / st_a hold m-tile a_tile (whole K) when kc == Kq / always. */
typedef struct {
    float *abuf, *bbuf, *q0, *q1, *acc;
    uint16_t *st_a;    /* [mt][nkb][3] */
    uint32_t *ta, *tb; /* [nkb][3] tile maxima of the stats */
    double *hi;
    moects_xsum *xs;
    int64_t a_tile, st_tile;
    pass_fn pass;
    void (*exact_row)(double *, moects_xsum *, float *, float *, int, int, double, double, const float *,
                      const float *, int64_t);
} work;

/* exact_v1 for one pair on one row: hi[j] += t exactly for t = p * sA * sB of each block (exact
 * in double), the rounding error of each addition into the element's xsum. The exact sum does not
 * depend on the order, so lanes may go in any order. Non-finite t only comes from a NaN scale,
 * whose outputs are NaN anyway (set at the end). clear: as in pass_avx512. */
static void exact_row_c(double *hi, moects_xsum *xs, float *q0, float *q1, int mode, int clear, double sa0,
                        double sa1, const float *sb0, const float *sb1, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        float p[2];
        unpair(mode, q0[j], mode == MODE_SPLIT ? q1[j] : 0.0f, &p[0], &p[1]);
        if (clear) {
            q0[j] = 0.0f;
            if (mode == MODE_SPLIT) q1[j] = 0.0f;
        }
        double t[2] = {(double)p[0] * (sa0 * (double)sb0[j]), (double)p[1] * (sa1 * (double)sb1[j])};
        for (int q = 0; q < (mode == MODE_SINGLE ? 1 : 2); q++) {
            if (t[q] == 0.0 || !isfinite(t[q])) continue;
            double e;
            moects__two_sum(hi[j], t[q], &hi[j], &e);
            if (e != 0.0) moects__xsum_add(&xs[j], e);
        }
    }
}

__attribute__((target("avx512f,avx2,fma"))) static void exact_row_avx512(double *hi, moects_xsum *xs,
                                                                         float *q0, float *q1, int mode,
                                                                         int clear, double sa0, double sa1,
                                                                         const float *sb0,
                                                                         const float *sb1, int64_t n)
{
    const __m256 z = _mm256_setzero_ps(), four = _mm256_set1_ps(4.0f), quarter = _mm256_set1_ps(0.25f);
    const __m256 inv = _mm256_set1_ps(1.0f / 4096.0f), k4096 = _mm256_set1_ps(4096.0f);
    const __m256 unhi = _mm256_set1_ps(1.0f / HI_SCALE);
    const __m512d va0 = _mm512_set1_pd(sa0), va1 = _mm512_set1_pd(sa1), zd = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(q0 + j), p0 = v, p1 = z;
        if (clear) _mm256_storeu_ps(q0 + j, z);
        if (mode == MODE_PACKED) { /* as pass_avx2: exact integer-valued steps */
            __m256 q = _mm256_mul_ps(v, four);
            __m256 h = _mm256_round_ps(_mm256_mul_ps(q, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            h = _mm256_add_ps(h, z); /* -0 (round of a small negative) -> +0, as unpair's integer h */
            p0 = _mm256_mul_ps(_mm256_fnmadd_ps(h, k4096, q), quarter);
            p1 = _mm256_mul_ps(h, quarter);
        } else if (mode == MODE_SPLIT) {
            p1 = _mm256_mul_ps(_mm256_loadu_ps(q1 + j), unhi);
            if (clear) _mm256_storeu_ps(q1 + j, z);
        }
        __m512d h = _mm512_loadu_pd(hi + j), e1 = zd;
        __m512d t = _mm512_mul_pd(_mm512_cvtps_pd(p0), _mm512_mul_pd(va0, _mm512_cvtps_pd(_mm256_loadu_ps(sb0 + j))));
        __m512d s = _mm512_add_pd(h, t), bv = _mm512_sub_pd(s, h), av = _mm512_sub_pd(s, bv);
        __m512d e0 = _mm512_add_pd(_mm512_sub_pd(h, av), _mm512_sub_pd(t, bv));
        if (mode != MODE_SINGLE) {
            h = s;
            t = _mm512_mul_pd(_mm512_cvtps_pd(p1), _mm512_mul_pd(va1, _mm512_cvtps_pd(_mm256_loadu_ps(sb1 + j))));
            s = _mm512_add_pd(h, t);
            bv = _mm512_sub_pd(s, h);
            av = _mm512_sub_pd(s, bv);
            e1 = _mm512_add_pd(_mm512_sub_pd(h, av), _mm512_sub_pd(t, bv));
        }
        _mm512_storeu_pd(hi + j, s);
        __mmask8 m = (__mmask8)(_mm512_cmp_pd_mask(e0, zd, _CMP_NEQ_UQ) | _mm512_cmp_pd_mask(e1, zd, _CMP_NEQ_UQ));
        if (m) {
            double ea[8], eb[8];
            _mm512_storeu_pd(ea, e0);
            _mm512_storeu_pd(eb, e1);
            for (int l = 0; l < 8; l++) {
                if (ea[l] != 0.0) moects__xsum_add(&xs[j + l], ea[l]);
                if (eb[l] != 0.0) moects__xsum_add(&xs[j + l], eb[l]);
            }
        }
    }
    exact_row_c(hi + j, xs + j, q0 + j, q1 + j, mode, clear, sa0, sa1, sb0 + j, sb1 + j, n - j);
}

typedef void (*exact_row_fn)(double *, moects_xsum *, float *, float *, int, int, double, double,
                             const float *, const float *, int64_t);
static exact_row_fn pick_exact_row(void)
{
    const char *cap = getenv("MOECTS_FP4_REF_ISA");
    __builtin_cpu_init();
    if ((!cap || !strcmp(cap, "avx512")) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return exact_row_avx512;
    return exact_row_c;
}

/* One tile of D: m-tile tm, n-tile tn. */
static void do_tile(const ctx *c, work *w, int64_t tm, int64_t tn)
{
    const moects__gemm_job *jb = c->j;
    const int64_t N = jb->N, nkb = c->nkb, g = c->g, kc = c->kc;
    const int64_t m0 = tm * c->mt, n0 = tn * c->nt;
    const int64_t mt = jb->M - m0 < c->mt ? jb->M - m0 : c->mt;
    const int64_t nt = N - n0 < c->nt ? N - n0 : c->nt;
    if (c->want_ex)
        for (int64_t i = 0; i < mt * nt; i++) {
            w->hi[i] = 0.0;
            moects__xsum_init(&w->xs[i]);
        }
    if (c->want_bw) memset(w->acc, 0, (size_t)(mt * nt) * sizeof(float));
    /* the tile's maxima of the row stats, per K-block */
    if (w->st_tile != tm) {
        row_stats(c, c->acodes, m0, mt, w->st_a);
        w->st_tile = tm;
    }
    tile_max(w->st_a, mt, nkb * 3, w->ta);
    tile_max(c->st_b + n0 * nkb * 3, nt, nkb * 3, w->tb);

    for (int64_t k0 = 0; k0 < c->Kq; k0 += kc) {
        if (kc != c->Kq || w->a_tile != tm) {
            decode_rows(c, c->acodes, m0, mt, k0, kc, 0, w->abuf);
            w->a_tile = kc == c->Kq ? tm : -1;
        }
        const float *bp = w->bbuf; /* pair panels: A at abuf + w0*mt, B at bp + w0*nrows_b */
        int64_t nrows_b = nt;
        if (c->bfull) {
            bp = c->bfull + n0 * 2 * g;
            nrows_b = N;
        } else {
            decode_rows(c, c->bcodes, n0, nt, k0, kc, 1, w->bbuf);
        }
        for (int64_t w0 = 0; w0 < kc && (k0 + w0) / g < nkb; w0 += 2 * g) {
            const int64_t b = (k0 + w0) / g;
            const float *ap = w->abuf + w0 * mt, *bq = bp + w0 * nrows_b;
            int mode = b + 1 >= nkb ? MODE_SINGLE : pair_packable(w->ta, w->tb, b) ? MODE_PACKED : MODE_SPLIT;
            /* q0 (zero on entry) += A * B^T over g or 2g columns: exact, see the top of the file */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mt, (int)nt,
                        (int)(mode == MODE_PACKED ? 2 * g : g), 1.0f, ap, (int)(2 * g), bq, (int)(2 * g),
                        1.0f, w->q0, (int)nt);
            if (mode == MODE_SPLIT)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mt, (int)nt, (int)g, 1.0f, ap + g,
                            (int)(2 * g), bq + g, (int)(2 * g), 1.0f, w->q1, (int)nt);
            const float *sb0 = jb->sbt + b * N + n0, *sb1 = mode == MODE_SINGLE ? sb0 : sb0 + N;
            /* per row: exact_v1 (leaving the partials when blockwise_v1 follows), then
             * blockwise_v1; the last pass re-zeroes the partials */
            for (int64_t i = 0; i < mt; i++) {
                const float *sa = jb->sa + (m0 + i) * nkb + b;
                if (c->want_ex)
                    w->exact_row(w->hi + i * nt, w->xs + i * nt, w->q0 + i * nt, w->q1 + i * nt, mode,
                                 !c->want_bw, sa[0], mode == MODE_SINGLE ? 0.0 : sa[1], sb0, sb1, nt);
                if (c->want_bw)
                    w->pass(w->acc + i * nt, w->q0 + i * nt, w->q1 + i * nt, mode, 1, sa[0],
                            mode == MODE_SINGLE ? 0.0f : sa[1], sb0, sb1, nt);
            }
        }
    }
    moects__store_tile(jb, m0, n0, mt, nt, w->acc, w->hi, w->xs);
}

/* Worker id takes the tiles [id*U/nth, (id+1)*U/nth) of the U tiles in m-major order: a
 * contiguous run, so each A tile is decoded once per worker. */
static void worker(void *arg, int64_t id, int64_t nth)
{
    ctx *c = arg;
    const int64_t U = c->tiles_m * c->tiles_n, t0 = id * U / nth, t1 = (id + 1) * U / nth;
    const size_t tile = (size_t)(c->mt * c->nt);
    work w = {0};
    w.a_tile = w.st_tile = -1;
    w.pass = pick_pass();
    w.exact_row = pick_exact_row();
    w.abuf = malloc((size_t)(c->mt * c->kc + 1) * sizeof(float));
    w.bbuf = c->bfull ? NULL : malloc((size_t)(c->nt * c->kc + 1) * sizeof(float));
    w.q0 = calloc(tile, sizeof(float));
    w.q1 = calloc(tile, sizeof(float));
    w.st_a = malloc((size_t)(c->mt * c->nkb * 3 + 1) * sizeof(uint16_t));
    w.ta = malloc((size_t)(c->nkb * 3 + 1) * sizeof(uint32_t));
    w.tb = malloc((size_t)(c->nkb * 3 + 1) * sizeof(uint32_t));
    if (c->want_ex) {
        w.hi = malloc(tile * sizeof(double));
        w.xs = malloc(tile * sizeof(moects_xsum));
    }
    if (c->want_bw) w.acc = malloc(tile * sizeof(float));
    int ok = w.abuf && (c->bfull || w.bbuf) && w.q0 && w.q1 && w.st_a && w.ta && w.tb &&
             (!c->want_ex || (w.hi && w.xs)) && (!c->want_bw || w.acc);
    if (ok)
        for (int64_t t = t0; t < t1; t++) do_tile(c, &w, t / c->tiles_n, t % c->tiles_n);
    if (!ok) {
        pthread_mutex_lock(&c->lock);
        c->failed = 1;
        pthread_mutex_unlock(&c->lock);
    }
    free(w.abuf);
    free(w.bbuf);
    free(w.q0);
    free(w.q1);
    free(w.st_a);
    free(w.ta);
    free(w.tb);
    free(w.acc);
    free(w.hi);
    free(w.xs);
}

int moects__fp4_gemm_job(const moects__gemm_job *j, const uint8_t *a, const uint8_t *b)
{
    const int64_t M = j->M, N = j->N, K = j->K;
    if (M == 0 || N == 0) return 0;
    ctx c;
    memset(&c, 0, sizeof c);
    c.j = j;
    c.acodes = a;
    c.bcodes = b;
    c.want_bw = j->out_bw != NULL;
    c.want_ex = j->out_ex != NULL;
    c.g = j->g;
    c.nkb = cdiv(K, c.g);
    c.Kq = cdiv(c.nkb, 2) * 2 * c.g;
    c.kc = c.Kq <= KFULL_MAX ? c.Kq : KCHUNK;
    int64_t tile = c.want_ex ? TILE_EX : TILE_BW; /* both: the exact tile (results do not depend on it) */
    c.mt = M < tile ? M : tile;
    c.nt = N < tile ? N : tile;
    c.tiles_m = cdiv(M, c.mt);
    c.tiles_n = cdiv(N, c.nt);
    for (int i = 0; i < 256; i++)
        for (int h = 0; h < 2; h++) {
            c.lut[i][h] = moects__e2m1_decode((uint8_t)((i >> (4 * h)) & 0xF));
            c.lut_hi[i][h] = c.lut[i][h] * HI_SCALE;
        }
    uint16_t *st_b = malloc((size_t)(N * c.nkb * 3 + 1) * sizeof(uint16_t));
    float *bfull = NULL;
    if (!st_b) return -1;
    row_stats(&c, b, 0, N, st_b);
    c.st_b = st_b;
    /* B decoded once for all tiles when K is one chunk and it is not too big. */
    if (c.kc == c.Kq && c.Kq > 0 && N * c.Kq <= BFULL_MAX && c.tiles_m > 1 &&
        (bfull = malloc((size_t)(N * c.Kq) * sizeof(float))) != NULL) {
        decode_rows(&c, b, 0, N, 0, c.Kq, 1, bfull);
        c.bfull = bfull;
    }
    pthread_mutex_init(&c.lock, NULL);
    moects__parallel(c.tiles_m * c.tiles_n, worker, &c);
    pthread_mutex_destroy(&c.lock);
    free(st_b);
    free(bfull);
    return c.failed ? -1 : 0;
}

static float dec_scale(moects_fp4_format f, uint8_t x)
{
    return f == MOECTS_FP4_NVFP4 ? moects__e4m3_decode(x) : moects__ue8m0_decode(x);
}

/* The one code path of both entry points: scales decoded from their layout, then one job into
 * out_bw / out_ex (NULL: not wanted; a->d unused). Returns 0 (M or N zero: nothing written,
 * pointers unchecked), or -1. */
static int fp4_gemm(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, int want_bw, void *out_bw,
                    int want_ex, void *out_ex, const moects__bound_req *bq)
{
    if (!s || !a || s->M < 0 || s->N < 0 || s->K < 0) return -1;
    if (s->format != MOECTS_FP4_MXFP4 && s->format != MOECTS_FP4_NVFP4) return -1;
    if (s->scale_layout != MOECTS_SCALES_LINEAR && s->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        return -1;
    if (s->out_dtype != MOECTS_F32 && s->out_dtype != MOECTS_BF16) return -1;
    if (!want_bw && !want_ex && !bq) return -1;
    const int64_t M = s->M, N = s->N, K = s->K, g = moects_fp4_block(s->format), nkb = cdiv(K, g);
    if (M == 0 || N == 0) return 0;
    if ((want_bw && !out_bw) || (want_ex && !out_ex) || (bq && !bq->bound) ||
        (K > 0 && (!a->a || !a->b || !a->sa || !a->sb)))
        return -1;

    float slut[256];
    for (int i = 0; i < 256; i++) slut[i] = dec_scale(s->format, (uint8_t)i);
    float *sa, *sbt;
    uint8_t *nan_a, *nan_b;
    void *buf = moects__job_scales(M, N, nkb, &sa, &sbt, &nan_a, &nan_b);
    if (!buf) return -1;
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < nkb; b++) {
            float v = slut[a->sa[moects__scale_offset(m, b, nkb, s->scale_layout)]];
            sa[m * nkb + b] = v;
            if (isnan(v)) nan_a[m] = 1;
        }
    for (int64_t n = 0; n < N; n++)
        for (int64_t b = 0; b < nkb; b++) {
            float v = slut[a->sb[moects__scale_offset(n, b, nkb, s->scale_layout)]];
            sbt[b * N + n] = v;
            if (isnan(v)) nan_b[n] = 1;
        }
    moects__gemm_job j = {M, N, K, g, s->out_dtype, sa, sbt, nan_a, nan_b, a->alpha,
                          want_bw ? out_bw : NULL, want_ex ? out_ex : NULL};
    int rc = bq ? moects__bound_job(&j, a->a, MOECTS__A_FP4, a->b, bq, 0)
                : moects__fp4_gemm_job(&j, a->a, a->b);
    free(buf);
    return rc;
}

int moects__ref_fp4_gemm_recipes(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                                void *out_blockwise, void *out_exact)
{
    return fp4_gemm(s, a, out_blockwise != NULL, out_blockwise, out_exact != NULL, out_exact, NULL);
}

int moects__ref_fp4_gemm(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                        moects_recipe recipe)
{
    if (!a || (recipe != MOECTS_RECIPE_FP4_BLOCKWISE_V1 && recipe != MOECTS_RECIPE_EXACT_V1)) return -1;
    const int bw = recipe == MOECTS_RECIPE_FP4_BLOCKWISE_V1;
    return fp4_gemm(s, a, bw, bw ? a->d : NULL, !bw, bw ? NULL : a->d, NULL);
}

int moects__ref_fp4_gemm_bound_class(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                                    const moects_acc_class *c, double *bound, const moects_bound_stats *st)
{
    if (!c) return -1;
    moects__bound_req bq = {c->bits, c->truncation, c->bf16_splits, bound, st};
    return moects__bound_req_ok(&bq) ? fp4_gemm(s, a, 0, NULL, 0, NULL, &bq) : -1;
}

int moects__ref_fp4_gemm_bound_stats(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, uint32_t bits,
                                    int truncation, double *bound, const moects_bound_stats *st)
{
    const moects_acc_class c = {bits, truncation, 0};
    return moects__ref_fp4_gemm_bound_class(s, a, &c, bound, st);
}

int moects__ref_fp4_gemm_bound(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, uint32_t bits,
                              int truncation, double *bound)
{
    return moects__ref_fp4_gemm_bound_stats(s, a, bits, truncation, bound, NULL);
}
