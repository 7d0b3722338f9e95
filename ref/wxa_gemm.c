/* wxa_gemm.c: E4M3 (W4A8) or BF16 (W4A16) activations against E2M1 weights with block scales:
 * the double-partial path of the grouped reference (DESIGN.md "Grouped MoE GEMM").
 *
 * Block partials p = sum over a K-block of dec(A) * dec(B) come from OpenBLAS cblas_dgemm on the
 * decoded values, for a tile of (m, n) at once, exact whatever the order when:
 *   E4M3 x E2M1: always. Products are multiples of 2^-10 (2^-9 * 0.5) below 448 * 6 < 2^12, so a sum
 *     of <= 32 of them, in any order and grouping, is a multiple of 2^-10 below 2^17: 27 bits.
 *   BF16 x E2M1: when the block's nonzero A values span at most 36 binades (exponent fields
 *     emax - emin <= 36, a subnormal counting as field 1): products are multiples of 2^(emin-135)
 *     below 2^(emax-126) * 6 and sums of <= 32 below 2^(emax-118), so 53 bits hold every
 *     partial sum.
 * A (row, K-block) that fails this, or holds a NaN or Inf, takes the slow path: exact_v1 adds its
 * products one by one into the element's exact sum (moects_xsum_add_product), blockwise_v1 sums
 * them in double in ascending k (exact for E4M3 unless a NaN is there, and NaN is NaN in any order).
 *   blockwise_v1 (E4M3 only): acc = fmaf((float)p, sA * sB, acc) (p rounded once, RNE; the scale
 *                             product one FP32 multiply), D = out(acc * alpha);
 *   exact_v1: the terms p * (sA * sB) (sA * sB exact in double; TwoProduct by fma) summed exactly,
 *             times alpha, rounded once (moects__exact_store).
 * Elements of the last K-block past K are 0. Tiles are split over moects__parallel's threads; a
 * tile's result does not depend on the split. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moects_gemm_internal.h"
#include "moects_ref.h"

#define TILE_EX 64  /* exact tile: 64 x 64 xsum states */
#define TILE_BW 128 /* blockwise-only tile */
#define BF16_SPAN 36

typedef struct {
    const moects__gemm_job *j;
    const uint8_t *a8;   /* E4M3 [M][K] or NULL */
    const uint16_t *a16; /* BF16 [M][K] or NULL */
    const uint8_t *b;    /* E2M1 [N][ceil(K/2)] */
    int64_t nkb, Kp, mt, nt, tiles_m, tiles_n;
    double lut_a[256], lut_b[16];
    pthread_mutex_t lock;
    int failed;
} wctx;

typedef struct {
    double *abuf, *bbuf, *p; /* block-major [nkb][mt][g], [nkb][nt][g]; partials [mt][nt] */
    uint8_t *slow;           /* [mt][nkb] */
    float *acc;
    double *hi;
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

/* Rows [m0, m0+mr) of A -> block-major doubles, and each (row, block)'s slow flag (see the top). */
static void decode_a(const wctx *c, wwork *w, int64_t m0, int64_t mr)
{
    const int64_t K = c->j->K, g = c->j->g, mt = c->mt; /* panel stride: the full tile */
    for (int64_t i = 0; i < mr; i++)
        for (int64_t b = 0; b < c->nkb; b++) {
            double *d = w->abuf + (b * mt + i) * g;
            const int64_t k0 = b * g, n = K - k0 < g ? K - k0 : g;
            int emin = 255, emax = 0, special = 0;
            if (c->a8) {
                const uint8_t *x = c->a8 + (m0 + i) * K + k0;
                for (int64_t kk = 0; kk < n; kk++) {
                    d[kk] = c->lut_a[x[kk]];
                    special |= (x[kk] & 0x7F) == 0x7F;
                }
            } else {
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

static void decode_b(const wctx *c, double *dst, int64_t n0, int64_t nt)
{
    const int64_t K = c->j->K, g = c->j->g, rb = moects__cdiv(K, 2);
    for (int64_t r = 0; r < nt; r++) {
        const uint8_t *src = c->b + (n0 + r) * rb;
        for (int64_t b = 0; b < c->nkb; b++) {
            double *d = dst + (b * nt + r) * g;
            const int64_t k0 = b * g, n = K - k0 < g ? K - k0 : g;
            int64_t kk = 0;
            for (; kk + 1 < n; kk += 2) { /* k0 and g are even: whole bytes */
                uint8_t v = src[(k0 + kk) / 2];
                d[kk] = c->lut_b[v & 0xF];
                d[kk + 1] = c->lut_b[v >> 4];
            }
            if (kk < n) {
                d[kk] = c->lut_b[src[(k0 + kk) / 2] & 0xF];
                kk++;
            }
            for (; kk < g; kk++) d[kk] = 0.0;
        }
    }
}

/* Slow path of row i, block b: blockwise partials in pr (double sum, ascending k), and with
 * exact_v1 wanted the blockwise step too (before), then exact_v1's products straight into the
 * exact sums. */
static void slow_block(const wctx *c, wwork *w, int64_t i, int64_t b, int64_t nt, double *pr, double sa,
                       const float *sb)
{
    const int64_t g = c->j->g, mt = c->mt;
    const double *ar = w->abuf + (b * mt + i) * g;
    for (int64_t jn = 0; jn < nt; jn++) {
        const double *br = w->bbuf + (b * nt + jn) * g;
        double sum = 0.0;
        for (int64_t kk = 0; kk < g; kk++) sum += ar[kk] * br[kk];
        pr[jn] = sum;
    }
    if (!c->j->out_ex) return;
    if (c->j->out_bw) { /* blockwise first: it reads pr */
        for (int64_t jn = 0; jn < nt; jn++)
            w->acc[i * nt + jn] = fmaf((float)pr[jn], (float)sa * sb[jn], w->acc[i * nt + jn]);
    }
    for (int64_t jn = 0; jn < nt; jn++) {
        const double *br = w->bbuf + (b * nt + jn) * g, s = sa * (double)sb[jn];
        for (int64_t kk = 0; kk < g; kk++) moects_xsum_add_product(&w->xs[i * nt + jn], ar[kk], br[kk] * s);
    }
}

static void do_tile(const wctx *c, wwork *w, int64_t tm, int64_t tn)
{
    const moects__gemm_job *j = c->j;
    const int64_t N = j->N, g = j->g, nkb = c->nkb, m0 = tm * c->mt, n0 = tn * c->nt;
    const int64_t mt = c->mt, nt = N - n0 < c->nt ? N - n0 : c->nt;
    const int64_t mr = j->M - m0 < mt ? j->M - m0 : mt; /* rows of this tile */
    if (w->a_tile != tm) {
        decode_a(c, w, m0, mr);
        w->a_tile = tm;
    }
    decode_b(c, w->bbuf, n0, nt);
    if (j->out_bw) memset(w->acc, 0, (size_t)(mr * nt) * sizeof(float));
    if (j->out_ex)
        for (int64_t i = 0; i < mr * nt; i++) {
            w->hi[i] = 0.0;
            moects_xsum_init(&w->xs[i]);
        }
    for (int64_t b = 0; b < nkb; b++) {
        /* partials of the whole tile, exact (see the top); A panel [mr][g] at row stride g */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mr, (int)nt, (int)g, 1.0,
                    w->abuf + b * mt * g, (int)g, w->bbuf + b * nt * g, (int)g, 0.0, w->p, (int)nt);
        const float *sb = j->sbt + b * N + n0;
        for (int64_t i = 0; i < mr; i++) {
            double *pr = w->p + i * nt;
            const float saf = j->sa[(m0 + i) * nkb + b];
            int slow = w->slow[i * nkb + b];
            if (slow) slow_block(c, w, i, b, nt, pr, saf, sb);
            if (j->out_bw && !(slow && j->out_ex))
                for (int64_t jn = 0; jn < nt; jn++)
                    w->acc[i * nt + jn] = fmaf((float)pr[jn], saf * sb[jn], w->acc[i * nt + jn]);
            if (!j->out_ex || slow) continue;
            double *hi = w->hi + i * nt;
            moects_xsum *xs = w->xs + i * nt;
            for (int64_t jn = 0; jn < nt; jn++) {
                const double s = (double)saf * (double)sb[jn], t = pr[jn] * s;
                if (t == 0.0) continue;
                if (!isfinite(t)) { /* only from a NaN scale: the element is NaN at the end */
                    moects_xsum_add(&xs[jn], t);
                    continue;
                }
                double lo = fma(pr[jn], s, -t), e;
                moects__two_sum(hi[jn], t, &hi[jn], &e);
                if (e != 0.0) moects_xsum_add(&xs[jn], e);
                if (lo != 0.0) moects_xsum_add(&xs[jn], lo);
            }
        }
    }
    moects__store_tile(j, m0, n0, mr, nt, w->acc, w->hi, w->xs);
}

static void worker(void *arg, int64_t id, int64_t nth)
{
    wctx *c = arg;
    const int64_t U = c->tiles_m * c->tiles_n, t0 = id * U / nth, t1 = (id + 1) * U / nth;
    const size_t tile = (size_t)(c->mt * c->nt);
    wwork w = {0};
    w.a_tile = -1;
    w.abuf = malloc((size_t)(c->mt * c->Kp + 1) * sizeof(double));
    w.bbuf = malloc((size_t)(c->nt * c->Kp + 1) * sizeof(double));
    w.p = malloc(tile * sizeof(double));
    w.slow = malloc((size_t)(c->mt * c->nkb + 1));
    if (c->j->out_bw) w.acc = malloc(tile * sizeof(float));
    if (c->j->out_ex) {
        w.hi = malloc(tile * sizeof(double));
        w.xs = malloc(tile * sizeof(moects_xsum));
    }
    int ok = w.abuf && w.bbuf && w.p && w.slow && (!c->j->out_bw || w.acc) && (!c->j->out_ex || (w.hi && w.xs));
    if (ok)
        for (int64_t t = t0; t < t1; t++) do_tile(c, &w, t / c->tiles_n, t % c->tiles_n);
    else {
        pthread_mutex_lock(&c->lock);
        c->failed = 1;
        pthread_mutex_unlock(&c->lock);
    }
    free(w.abuf);
    free(w.bbuf);
    free(w.p);
    free(w.slow);
    free(w.acc);
    free(w.hi);
    free(w.xs);
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
    c.Kp = c.nkb * j->g;
    const int64_t tile = j->out_ex ? TILE_EX : TILE_BW;
    c.mt = j->M < tile ? j->M : tile;
    c.nt = j->N < tile ? j->N : tile;
    c.tiles_m = moects__cdiv(j->M, c.mt);
    c.tiles_n = moects__cdiv(j->N, c.nt);
    for (int i = 0; i < 256; i++) c.lut_a[i] = moects_e4m3_decode((uint8_t)i);
    for (int i = 0; i < 16; i++) c.lut_b[i] = moects_e2m1_decode((uint8_t)i);
    pthread_mutex_init(&c.lock, NULL);
    moects__parallel(c.tiles_m * c.tiles_n, worker, &c);
    pthread_mutex_destroy(&c.lock);
    return c.failed ? -1 : 0;
}
