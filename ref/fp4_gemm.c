/* fp4_gemm.c: the FP4 GEMM reference, recipes fp4_gemm.blockwise_v1 and fp4_gemm.exact_v1
 * (DESIGN.md "Numeric recipes"), MXFP4 x MXFP4 and NVFP4 x NVFP4, NT layout, both scale layouts.
 *
 * Conventions: K not a multiple of the block g: the last block is zero-padded (its missing
 * elements count as 0; its scale is read as usual); the high nibble of a row's last byte is ignored
 * when K is odd. NVFP4 scales are decoded as E4M3 (a set sign bit, which UE4M3 inputs never have,
 * gives a negative scale). A NaN scale (UE8M0 0xFF, E4M3 0x7F/0xFF) makes every output it touches
 * NaN, in exact_v1 too (0 * NaN = NaN).
 *
 * How (DESIGN.md): every product of two E2M1 values is a multiple of 1/4 of magnitude <= 36, so a
 * block partial p = sum of g of them is exact in FP32 in any order. OpenBLAS cblas_sgemm computes
 * the partials of one block for a 256 x 256 tile of (m, n) at once on the decoded E2M1 values
 * (exact, whatever its kernel or thread count; beta = 1 into a buffer the scale pass re-zeroes),
 * then the scales are applied in block order:
 *   blockwise_v1: acc = fmaf(p, sA * sB, acc) (FP32), D = out_rne(acc * alpha);
 *   exact_v1:     the terms p * sA * sB (exact in double) are summed exactly (TwoSum into a double,
 *                 rounding errors into a moects_xsum), times alpha exactly, rounded once to out.
 * The tiles are spread over openblas_get_num_threads() threads of our own, OpenBLAS being set to one
 * thread meanwhile and restored after (so do not run OpenBLAS from another thread during a call);
 * each tile's result does not depend on the split. The FP32 steps use AVX-512 or AVX2 when the CPU
 * has them: IEEE fused multiply-add and multiply per lane, bit-identical to fmaf() and '*'. */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moects_exact.h"
#include "moects_quant.h"
#include "moects_ref.h"

#define TILE_BW 256    /* blockwise tile: 256 x 256 partials + accumulators, 512 KiB, in L2 */
#define TILE_EX 64     /* exact_v1 tile: 64 x 64 xsum states, 2.6 MiB */
#define GROUP 2        /* blocks whose partials are applied in one pass over the accumulators */
#define KFULL_MAX 65536 /* K up to this is decoded whole (A tile: 64 MiB at most) */
#define KCHUNK 8192     /* else elements of K decoded at once (a multiple of 32) */
#define BFULL_MAX ((int64_t)1 << 26) /* decoded B kept whole up to 256 MiB */
#define MAX_THREADS 64

typedef struct {
    const moects_fp4_gemm_shape *s;
    const moects_fp4_gemm_args *a;
    int exact;
    int64_t g, nkb, Kp, kc; /* block, K-blocks, padded K, K chunk (kc == Kp: one chunk) */
    int64_t mt, nt, tiles_m, tiles_n, nth, group;
    const float *sa;              /* [M][nkb] decoded A scales */
    const float *sbt;             /* [nkb][N] decoded B scales, transposed */
    const float *bfull;           /* [N][Kp] decoded B when it fits, else NULL */
    const uint8_t *nan_a, *nan_b; /* row m / column n has a NaN scale (exact_v1) */
    float lut[256][2];            /* packed byte -> two E2M1 values */
    pthread_mutex_t lock;
    int failed;
} ctx;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* rows [r0, r0+nr) of a packed operand, elements [k0, k0+kc) -> dst in block-major order:
 * element k of row r at dst[((k-k0)/g)*nr*g + r*g + (k-k0)%g], so one block of all the rows is
 * a contiguous [nr][g] panel (lda = g). Elements past K are 0. k0 and g are even. */
static void decode_rows(const ctx *c, const uint8_t *codes, int64_t r0, int64_t nr, int64_t k0,
                        int64_t kc, float *dst)
{
    const int64_t K = c->s->K, rb = cdiv(K, 2), g = c->g;
    int64_t have = K - k0 < kc ? K - k0 : kc;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *src = codes + (r0 + r) * rb + k0 / 2;
        for (int64_t b0 = 0; b0 < kc; b0 += g) {
            float *d = dst + b0 * nr + r * g;
            int64_t n = have - b0 < g ? have - b0 : g, j = 0;
            if (n < 0) n = 0;
            for (; j + 1 < n; j += 2) memcpy(d + j, c->lut[src[(b0 + j) / 2]], 2 * sizeof(float));
            if (j < n) {
                d[j] = c->lut[src[(b0 + j) / 2]][0];
                j++;
            }
            if (j < g) memset(d + j, 0, (size_t)(g - j) * sizeof(float));
        }
    }
}

/* For the nq (<= GROUP) blocks of a group, in block order: acc[j] = fmaf(p_q[j], sa[q] * sb_q[j],
 * acc[j]) (one FP32 multiply, one fused multiply-add per block, as blockwise_v1), then p_q[j] = 0
 * for the next sgemm, which accumulates with beta = 1. p_q = p + q * ps, sb_q = sb + q * sbs. */
__attribute__((target("avx512f"))) static void fma_rows_avx512(float *acc, float *p, int64_t ps,
                                                                const float *sa, const float *sb,
                                                                int64_t sbs, int nq, int64_t n)
{
    const __m512 z = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(acc + j);
        for (int q = 0; q < nq; q++) {
            __m512 sc = _mm512_mul_ps(_mm512_set1_ps(sa[q]), _mm512_loadu_ps(sb + q * sbs + j));
            v = _mm512_fmadd_ps(_mm512_loadu_ps(p + q * ps + j), sc, v);
            _mm512_storeu_ps(p + q * ps + j, z);
        }
        _mm512_storeu_ps(acc + j, v);
    }
    for (; j < n; j++)
        for (int q = 0; q < nq; q++) {
            acc[j] = fmaf(p[q * ps + j], sa[q] * sb[q * sbs + j], acc[j]);
            p[q * ps + j] = 0.0f;
        }
}

__attribute__((target("avx2,fma"))) static void fma_rows_avx2(float *acc, float *p, int64_t ps,
                                                              const float *sa, const float *sb,
                                                              int64_t sbs, int nq, int64_t n)
{
    const __m256 z = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(acc + j);
        for (int q = 0; q < nq; q++) {
            __m256 sc = _mm256_mul_ps(_mm256_set1_ps(sa[q]), _mm256_loadu_ps(sb + q * sbs + j));
            v = _mm256_fmadd_ps(_mm256_loadu_ps(p + q * ps + j), sc, v);
            _mm256_storeu_ps(p + q * ps + j, z);
        }
        _mm256_storeu_ps(acc + j, v);
    }
    for (; j < n; j++)
        for (int q = 0; q < nq; q++) {
            acc[j] = fmaf(p[q * ps + j], sa[q] * sb[q * sbs + j], acc[j]);
            p[q * ps + j] = 0.0f;
        }
}

static void fma_rows_c(float *acc, float *p, int64_t ps, const float *sa, const float *sb, int64_t sbs,
                       int nq, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        for (int q = 0; q < nq; q++) {
            acc[j] = fmaf(p[q * ps + j], sa[q] * sb[q * sbs + j], acc[j]);
            p[q * ps + j] = 0.0f;
        }
}

typedef void (*fma_rows_fn)(float *, float *, int64_t, const float *, const float *, int64_t, int, int64_t);
/* The widest the CPU has; MOECTS_FP4_REF_ISA=avx2|c (tests) caps it. All give the same bits. */
static fma_rows_fn pick_fma_rows(void)
{
    const char *cap = getenv("MOECTS_FP4_REF_ISA");
    int allow512 = !cap || !strcmp(cap, "avx512"), allow2 = allow512 || (cap && !strcmp(cap, "avx2"));
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512f")) return fma_rows_avx512;
    if (allow2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return fma_rows_avx2;
    return fma_rows_c;
}

static void two_sum(double a, double b, double *s, double *e)
{
    double x = a + b, bv = x - a, av = x - bv;
    *s = x;
    *e = (a - av) + (b - bv);
}

/* A worker's buffers. abuf holds A's rows of m-tile a_tile (whole K) when kc == Kp. */
typedef struct {
    float *abuf, *bbuf, *p, *acc;
    double *hi;
    moects_xsum *xs;
    int64_t a_tile;
    fma_rows_fn fma_rows;
} work;

/* The exact_v1 step for one block: hi += t exactly, t = p * sA * sB (exact in double), the
 * rounding error of each addition into the element's xsum. NaN scales are handled at the end. */
static void exact_block(const ctx *c, work *w, float *p, int64_t m0, int64_t mt, int64_t nt,
                        int64_t b, const float *sb)
{
    for (int64_t i = 0; i < mt; i++) {
        double sa = c->sa[(m0 + i) * c->nkb + b];
        for (int64_t j = 0; j < nt; j++) {
            int64_t o = i * nt + j;
            double t = (double)p[o] * (sa * (double)sb[j]);
            p[o] = 0.0f;
            if (t == 0.0 || !isfinite(t)) continue;
            double e;
            two_sum(w->hi[o], t, &w->hi[o], &e);
            if (e != 0.0) moects_xsum_add(&w->xs[o], e);
        }
    }
}

/* One tile of D: m-tile tm, n-tile tn. */
static void do_tile(const ctx *c, work *w, int64_t tm, int64_t tn)
{
    const moects_fp4_gemm_shape *s = c->s;
    const moects_fp4_gemm_args *a = c->a;
    const int64_t N = s->N, nkb = c->nkb, g = c->g, kc = c->kc;
    const int64_t m0 = tm * c->mt, n0 = tn * c->nt;
    const int64_t mt = s->M - m0 < c->mt ? s->M - m0 : c->mt;
    const int64_t nt = N - n0 < c->nt ? N - n0 : c->nt;
    if (c->exact)
        for (int64_t i = 0; i < mt * nt; i++) {
            w->hi[i] = 0.0;
            moects_xsum_init(&w->xs[i]);
        }
    else
        memset(w->acc, 0, (size_t)(mt * nt) * sizeof(float));
    for (int64_t k0 = 0; k0 < c->Kp; k0 += kc) {
        if (kc != c->Kp || w->a_tile != tm) {
            decode_rows(c, a->a, m0, mt, k0, kc, w->abuf);
            w->a_tile = kc == c->Kp ? tm : -1;
        }
        /* block b's panels: A at abuf + (b*g-k0)*mt, B at bp + (b*g-k0)*nrows_b, both lda = g */
        const float *bp = w->bbuf;
        int64_t nrows_b = nt;
        if (c->bfull) {
            bp = c->bfull + n0 * g;
            nrows_b = N;
        } else {
            decode_rows(c, a->b, n0, nt, k0, kc, w->bbuf);
        }
        int64_t b_end = (k0 + kc) / g < nkb ? (k0 + kc) / g : nkb;
        for (int64_t b0 = k0 / g; b0 < b_end; b0 += c->group) {
            int nq = (int)(b_end - b0 < c->group ? b_end - b0 : c->group);
            for (int q = 0; q < nq; q++) {
                int64_t off = (b0 + q) * g - k0;
                /* p_q (zero on entry) += A_b * B_b^T: exact, see the top of the file */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mt, (int)nt, (int)g, 1.0f,
                            w->abuf + off * mt, (int)g, bp + off * nrows_b, (int)g, 1.0f,
                            w->p + q * mt * nt, (int)nt);
            }
            if (c->exact) {
                for (int q = 0; q < nq; q++)
                    exact_block(c, w, w->p + q * mt * nt, m0, mt, nt, b0 + q, c->sbt + (b0 + q) * N + n0);
                continue;
            }
            for (int64_t i = 0; i < mt; i++)
                w->fma_rows(w->acc + i * nt, w->p + i * nt, mt * nt, c->sa + (m0 + i) * nkb + b0,
                            c->sbt + b0 * N + n0, N, nq, nt);
        }
    }
    const int bf16 = s->out_dtype == MOECTS_BF16;
    for (int64_t i = 0; i < mt; i++)
        for (int64_t j = 0; j < nt; j++) {
            int64_t o = (m0 + i) * N + n0 + j;
            float v = 0.0f;
            uint16_t vb = 0;
            if (!c->exact) {
                v = w->acc[i * nt + j] * a->alpha;
                if (bf16) vb = moects_bf16_from_f32(v);
            } else if (c->nan_a[m0 + i] || c->nan_b[n0 + j]) {
                v = NAN;
                vb = moects_bf16_from_f32(v);
            } else {
                moects_xsum *x = &w->xs[i * nt + j];
                double h = w->hi[i * nt + j], p = h * (double)a->alpha;
                /* fast path: the sum is the double h and h * alpha is exact (TwoProduct error 0,
                 * finite): one IEEE double -> float conversion is the correct rounding */
                if (!bf16 && x->n == 0 && !x->nan && !x->pos_inf && !x->neg_inf && isfinite(p) &&
                    fma(h, (double)a->alpha, -p) == 0.0 && (p == 0.0 || fabs(p) >= 0x1p-1000)) {
                    v = p == 0.0 ? 0.0f : (float)p; /* an exact zero is +0 (moects_exact.h) */
                } else {
                    moects_xsum_add(x, h);
                    moects_xsum_scale(x, (double)a->alpha);
                    if (bf16) vb = moects_xsum_round_bf16(x);
                    else v = moects_xsum_round_f32(x);
                }
            }
            if (bf16) ((uint16_t *)a->d)[o] = vb;
            else ((float *)a->d)[o] = v;
        }
}

typedef struct {
    ctx *c;
    int64_t id;
} warg;

/* Worker id takes the tiles [id*U/nth, (id+1)*U/nth) of the U tiles in m-major order: a
 * contiguous run, so each A tile is decoded once per worker. */
static void *worker(void *arg)
{
    ctx *c = ((warg *)arg)->c;
    const int64_t id = ((warg *)arg)->id, U = c->tiles_m * c->tiles_n;
    const int64_t t0 = id * U / c->nth, t1 = (id + 1) * U / c->nth;
    work w = {0};
    w.a_tile = -1;
    w.fma_rows = pick_fma_rows();
    w.abuf = malloc((size_t)(c->mt * c->kc + 1) * sizeof(float));
    w.bbuf = c->bfull ? NULL : malloc((size_t)(c->nt * c->kc + 1) * sizeof(float));
    w.p = calloc((size_t)(c->group * c->mt * c->nt), sizeof(float));
    if (c->exact) {
        w.hi = malloc((size_t)(c->mt * c->nt) * sizeof(double));
        w.xs = malloc((size_t)(c->mt * c->nt) * sizeof(moects_xsum));
    } else {
        w.acc = malloc((size_t)(c->mt * c->nt) * sizeof(float));
    }
    int ok = w.abuf && (c->bfull || w.bbuf) && w.p && (c->exact ? (w.hi && w.xs) : w.acc != NULL);
    if (ok)
        for (int64_t t = t0; t < t1; t++) do_tile(c, &w, t / c->tiles_n, t % c->tiles_n);
    if (!ok) {
        pthread_mutex_lock(&c->lock);
        c->failed = 1;
        pthread_mutex_unlock(&c->lock);
    }
    free(w.abuf);
    free(w.bbuf);
    free(w.p);
    free(w.acc);
    free(w.hi);
    free(w.xs);
    return NULL;
}

static float dec_scale(moects_fp4_format f, uint8_t x)
{
    return f == MOECTS_FP4_NVFP4 ? moects_e4m3_decode(x) : moects_ue8m0_decode(x);
}

int moects_ref_fp4_gemm(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                        moects_recipe recipe)
{
    if (!s || !a || s->M < 0 || s->N < 0 || s->K < 0) return -1;
    if (s->format != MOECTS_FP4_MXFP4 && s->format != MOECTS_FP4_NVFP4) return -1;
    if (s->scale_layout != MOECTS_SCALES_LINEAR && s->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        return -1;
    if (s->out_dtype != MOECTS_F32 && s->out_dtype != MOECTS_BF16) return -1;
    if (recipe != MOECTS_RECIPE_FP4_BLOCKWISE_V1 && recipe != MOECTS_RECIPE_EXACT_V1) return -1;
    const int64_t M = s->M, N = s->N, K = s->K;
    if (M == 0 || N == 0) return 0;
    if (!a->d || (K > 0 && (!a->a || !a->b || !a->sa || !a->sb))) return -1;

    ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.a = a;
    c.exact = recipe == MOECTS_RECIPE_EXACT_V1;
    c.g = moects_fp4_block(s->format);
    c.nkb = cdiv(K, c.g);
    c.Kp = c.nkb * c.g;
    c.kc = c.Kp <= KFULL_MAX ? c.Kp : KCHUNK;
    int64_t tile = c.exact ? TILE_EX : TILE_BW;
    c.group = GROUP;
    c.mt = M < tile ? M : tile;
    c.nt = N < tile ? N : tile;
    c.tiles_m = cdiv(M, c.mt);
    c.tiles_n = cdiv(N, c.nt);
    for (int i = 0; i < 256; i++) {
        c.lut[i][0] = moects_e2m1_decode((uint8_t)(i & 0xF));
        c.lut[i][1] = moects_e2m1_decode((uint8_t)(i >> 4));
    }

    float slut[256];
    for (int i = 0; i < 256; i++) slut[i] = dec_scale(s->format, (uint8_t)i);
    float *sa = malloc((size_t)(M * c.nkb + 1) * sizeof(float));
    float *sbt = malloc((size_t)(N * c.nkb + 1) * sizeof(float));
    uint8_t *nan_a = calloc((size_t)M, 1), *nan_b = calloc((size_t)N, 1);
    float *bfull = NULL;
    int rc = -1;
    if (!sa || !sbt || !nan_a || !nan_b) goto out;
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < c.nkb; b++) {
            float v = slut[a->sa[moects_scale_offset(m, b, c.nkb, s->scale_layout)]];
            sa[m * c.nkb + b] = v;
            if (isnan(v)) nan_a[m] = 1;
        }
    for (int64_t n = 0; n < N; n++)
        for (int64_t b = 0; b < c.nkb; b++) {
            float v = slut[a->sb[moects_scale_offset(n, b, c.nkb, s->scale_layout)]];
            sbt[b * N + n] = v;
            if (isnan(v)) nan_b[n] = 1;
        }
    c.sa = sa;
    c.sbt = sbt;
    c.nan_a = nan_a;
    c.nan_b = nan_b;
    /* B decoded once for all tiles when K is one chunk and it is not too big. */
    if (c.kc == c.Kp && c.Kp > 0 && N * c.Kp <= BFULL_MAX && c.tiles_m > 1 &&
        (bfull = malloc((size_t)(N * c.Kp) * sizeof(float))) != NULL) {
        decode_rows(&c, a->b, 0, N, 0, c.Kp, bfull);
        c.bfull = bfull;
    }
    pthread_mutex_init(&c.lock, NULL);

    int blas_threads = openblas_get_num_threads();
    c.nth = blas_threads < 1 ? 1 : blas_threads;
    if (c.nth > MAX_THREADS) c.nth = MAX_THREADS;
    if (c.nth > c.tiles_m * c.tiles_n) c.nth = c.tiles_m * c.tiles_n;
    openblas_set_num_threads(1);
    pthread_t th[MAX_THREADS];
    warg wa[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int64_t i = 0; i < c.nth; i++) wa[i] = (warg){&c, i};
    for (int64_t i = 1; i < c.nth; i++) started[i] = pthread_create(&th[i], NULL, worker, &wa[i]) == 0;
    worker(&wa[0]);
    for (int64_t i = 1; i < c.nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else worker(&wa[i]); /* could not start a thread: do its share here */
    }
    openblas_set_num_threads(blas_threads);
    pthread_mutex_destroy(&c.lock);
    rc = c.failed ? -1 : 0;
out:
    free(sa);
    free(sbt);
    free(nan_a);
    free(nan_b);
    free(bfull);
    return rc;
}
