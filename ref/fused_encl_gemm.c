/* fused_encl_gemm.c: the fused MoE layer's enclosure through one expert's row chunk
 * (ref/moects_encl_internal.h; proofs in docs/fused_moe_enclosure.md): GEMM1 by midpoint-radius,
 * the bias, the activation and the intermediate on intervals (ref/fused_encl_iv.c), GEMM2 with
 * interval inputs, and its epilogue.
 *
 * A GEMM element's exact value V = sum_k a_k b_k comes from OpenBLAS dgemms: d = a . b (signed) and
 * s = |a| . |b| (so S = sum |a_k b_k| <= s (1 + 2 dg)), GEMM2's radius R = r . |b| with r the inputs'
 * radii around their centres c (a = c there). A kernel of the claim's class returns fl32 of a value
 * within B = gamma(K + 1, u) S + U of its own exact sum, so within B + dg S + R of d: the interval is
 * fl32 of both ends of that real interval, computed in double and rounded outward. A row or column
 * holding a NaN or Inf is zeroed for the dgemms and decided by IEEE's special cases on its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_encl_internal.h"
#include "moects_fused_internal.h"
#include "moects_gemm_internal.h"

#define ETA 0x1p-149 /* binary32's subnormal unit: the absolute error of an underflowing rounding */

static double gamma_n(double n, double u) { return n * u < 1.0 ? n * u / (1.0 - n * u) : INFINITY; }

moects__encl_gemm moects__encl_gemm_consts(int64_t K, int terms, double nodes, const moects_layer_claim *cl)
{
    const double u = ldexp(1.0, cl->truncation ? 1 - (int)cl->bits : -(int)cl->bits);
    const double dg = gamma_n((double)K + 1.0, 0x1p-53);
    return (moects__encl_gemm){K, gamma_n((double)terms, u), gamma_n((double)K + nodes, u), dg, 1.0 + 2.0 * dg,
                               (int)cl->bits, 0.0};
}

moects__ivf moects__encl_gemm_iv(double d, double sabs, double rdg, int qexp, const moects__encl_gemm *g)
{
    if (sabs == 0.0) return moects__ivf_point(0.0f); /* every term 0: every order gives +0 */
    const double S = sabs * g->sup, R = rdg * g->sup;
    /* the grid: products and partial sums multiples of 2^qexp >= 2^-149 below 2^(bits + qexp) (and
     * 2^127: no overflow) are exact in the class, so the kernel returns fl32 of the exact sum V; d
     * is within dg S of V, the one multiple of 2^qexp that near when dg S < 2^(qexp - 1) */
    if (rdg == 0.0 && qexp >= -149 && qexp < 900 && S < ldexp(1.0, g->bits + qexp) && S < 0x1p127 &&
        g->dg * S < ldexp(0.5, qexp)) {
        const double m = nearbyint(ldexp(d, -qexp));
        return moects__ivf_point(m == 0.0 ? 0.0f : (float)ldexp(m, qexp)); /* exact in double; exact zero +0 */
    }
    if (!(S < 0x1p127)) return moects__ivf_top(); /* a partial sum may overflow */
    /* every subset sum of the kernel's terms is at most max(P, N) = (S' + |V'|) / 2 (P, N: the sums of
     * its positive and negative terms, S' = P + N <= S, |V'| <= |d| + dg S + R) */
    const double pn = 0.5 * (S + fabs(d) + g->dg * S + R);
    /* U: at most two underflowing roundings per term (the product, a scale product) and the
     * conversion, each below ETA, carried by the later roundings' (1 + gamma) <= 2 */
    const double U = 4.0 * ETA * ((double)g->K + 2.0) + g->uabs;
    const double B = g->gt * S + g->gn * (1.0 + g->gt) * pn + U;
    const double rad = (B + g->dg * S + R) * (1.0 + 0x1p-40); /* + 2^-40: this line's own roundings */
    if (!(rad < INFINITY)) return moects__ivf_top();
    const double lo = nextafter(d - rad, -INFINITY), hi = nextafter(d + rad, INFINITY);
    return (moects__ivf){(float)lo, (float)hi}; /* fl32 is monotone: RNE of the real ends' bounds */
}

float moects__encl_weight(const moects__ectx *c, int64_t slot)
{
    const float w = c->a->topk_weights[slot];
    return c->r->w_bf16 ? moects__bf16_to_f32(moects__bf16_from_f32(w)) : w;
}

/* Row n of expert e of a weight tensor [E][N][K] (BF16, or MXFP4 codes and UE8M0 scales), exact in
 * double (ref/fused_moe_gemm.c's decoding: a 0xFF scale makes its elements NaN). */
static void decode_row(const moects__ectx *c, int w2, int64_t n, double *out)
{
    static const double e2m1[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
    const int64_t N = w2 ? c->H : c->N1, K = w2 ? c->I : c->H, row = c->e * N + n;
    const void *w = w2 ? c->a->w2 : c->a->w13;
    if (c->s->format == MOECTS_LAYER_BF16) {
        const uint16_t *src = (const uint16_t *)w + row * K;
        for (int64_t k = 0; k < K; k++) { /* BF16: the upper half of an FP32 */
            const uint32_t u = (uint32_t)src[k] << 16;
            float f;
            memcpy(&f, &u, sizeof f);
            out[k] = f;
        }
        return;
    }
    if (c->s->format == MOECTS_LAYER_NVFP4) { /* e2m1 * dec(e4m3 scale): exact; a NaN scale NaN */
        const uint8_t *codes = (const uint8_t *)w + row * (K / 2);
        const uint8_t *sc = (w2 ? c->a->w2_scale : c->a->w13_scale) + row * (K / 16);
        for (int64_t k = 0; k < K; k++)
            out[k] = e2m1[(codes[k / 2] >> (4 * (k & 1))) & 0xF] * (double)moects__e4m3_decode(sc[k / 16]);
        return;
    }
    if (c->s->format == MOECTS_LAYER_FP8_128) { /* the value e4m3 * sb: exact (4 + 24 bits) */
        const uint8_t *codes = (const uint8_t *)w + row * K;
        const float *sb = (w2 ? c->a->w2_block_scale : c->a->w13_block_scale) +
                          (c->e * (N / MOECTS_FP8_BLOCK) + n / MOECTS_FP8_BLOCK) * (K / MOECTS_FP8_BLOCK);
        for (int64_t k = 0; k < K; k++) out[k] = (double)moects__e4m3_decode(codes[k]) * sb[k / MOECTS_FP8_BLOCK];
        return;
    }
    const uint8_t *codes = (const uint8_t *)w + row * (K / 2);
    const uint8_t *sc = (w2 ? c->a->w2_scale : c->a->w13_scale) + row * (K / 32);
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
        const double x = sc[k0 / 32] == 0xFF ? NAN : ldexp(1.0, sc[k0 / 32] - 127);
        for (int64_t k = k0; k < k0 + 32; k += 2) { /* exact: 2 significant bits times a power of two */
            out[k] = e2m1[codes[k / 2] & 0xF] * x;
            out[k + 1] = e2m1[codes[k / 2] >> 4] * x;
        }
    }
}

/* The exponent of v's lowest set bit (v finite, nonzero). */
static int low_bit(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    const int e = (int)((u >> 52) & 0x7FF);
    const uint64_t m = u & 0xFFFFFFFFFFFFFull;
    return (e ? e : 1) - 1075 + __builtin_ctzll(e ? m | (1ull << 52) : m);
}

/* out and |out| with the non-finite values zeroed; 1 when there was one. *low: every finite value
 * a multiple of 2^*low (the smallest exponent of a nonzero one plus the lowest significand bit set
 * in any, as ref/fused_moe_gemm.c's moects__fused_norm: at most each value's lowest set bit);
 * MOECTS_ENCL_NO_GRID when none is nonzero. */
static int split_finite(double *out, double *abs, int64_t K, int *low)
{
    int bad = 0, emin = 0x7FF;
    uint64_t bits = 1ull << 52;
    for (int64_t k = 0; k < K; k++) {
        const int fin = isfinite(out[k]);
        bad |= !fin;
        const double v = fin ? out[k] : 0.0;
        out[k] = v;
        abs[k] = fabs(v);
        uint64_t u;
        memcpy(&u, &v, sizeof u);
        const int e = (int)((u >> 52) & 0x7FF), nz = (u << 1) != 0, ee = e ? e : 1; /* subnormal: m 2^(1-1075) */
        emin = nz && ee < emin ? ee : emin;
        bits |= nz ? u & 0xFFFFFFFFFFFFFull : 0;
    }
    *low = emin == 0x7FF ? MOECTS_ENCL_NO_GRID : emin - 1075 + __builtin_ctzll(bits);
    return bad;
}

/* FP8_128, W4A8: the largest block scale of weight row n (NaN ignored; +Inf when one is), for the
 * check that no scale product sa * sb overflows. */
static double row_smax(const moects__ectx *c, int w2, int64_t n)
{
    const int64_t N = w2 ? c->H : c->N1, nkb = (w2 ? c->I : c->H) / c->blk;
    double mx = 0.0;
    if (c->s->format == MOECTS_LAYER_W4A8) { /* UE8M0 bytes, 0xFF NaN */
        const uint8_t *sb = (w2 ? c->a->w2_scale : c->a->w13_scale) + (c->e * N + n) * nkb;
        for (int64_t b = 0; b < nkb; b++) mx = sb[b] != 0xFF && ldexp(1.0, sb[b] - 127) > mx ? ldexp(1.0, sb[b] - 127) : mx;
        return mx;
    }
    const float *sb = (w2 ? c->a->w2_block_scale : c->a->w13_block_scale) + (c->e * (N / MOECTS_FP8_BLOCK) + n / MOECTS_FP8_BLOCK) * nkb;
    for (int64_t b = 0; b < nkb; b++) mx = fabs((double)sb[b]) > mx ? fabs((double)sb[b]) : mx;
    return mx;
}

static void decode_rows(void *p, int64_t id, int64_t nth)
{
    moects__ectx *c = p;
    const int64_t n0 = id * (c->N1 + c->H) / nth, n1 = (id + 1) * (c->N1 + c->H) / nth;
    for (int64_t n = n0; n < n1; n++) {
        const int w2 = n >= c->N1;
        const int64_t r = w2 ? n - c->N1 : n, K = w2 ? c->I : c->H;
        double *out = (w2 ? c->w2 : c->w1) + r * K, *abs = (w2 ? c->w2a : c->w1a) + r * K;
        decode_row(c, w2, r, out);
        (w2 ? c->w2bad : c->w1bad)[r] = (uint8_t)split_finite(out, abs, K, (w2 ? c->w2low : c->w1low) + r);
        if (c->blk) (w2 ? c->w2smax : c->w1smax)[r] = row_smax(c, w2, r);
    }
}

void moects__encl_decode(moects__ectx *c) { moects__parallel(c->N1 + c->H, decode_rows, c); }

/* h of slot `slot` (x[t], or bf16(x * w) under weight=input), exact in double; FP8_128, W4A8:
 * quantized per group of c->G (the exact reference's moects__fused_fp8_groups), e4m3 * sa exactly.
 * The largest scale sa: the return value (0 without FP8). */
static double h_row(const moects__ectx *c, int64_t slot, double *out)
{
    const uint16_t *x = c->a->x + (slot / c->k) * c->H;
    const float w = moects__encl_weight(c, slot);
    float v[MOECTS_FP8_BLOCK], sa;
    double smax = 0.0;
    for (int64_t h = 0; h < c->H; h++) {
        const float xv = moects__bf16_to_f32(x[h]);
        out[h] = c->r->weight == MOECTS_WEIGHT_INPUT ? moects__bf16_to_f32(moects__bf16_from_f32(xv * w)) : xv;
    }
    for (int64_t b = 0; c->blk && b < c->H; b += c->G) {
        for (int64_t i = 0; i < c->G; i++) v[i] = (float)out[b + i];
        moects__fused_fp8_groups(v, c->G, c->G, c->r->scale_ue8m0, out + b, &sa);
        for (int64_t i = 0; i < c->G; i++) out[b + i] *= sa;
        smax = fabs((double)sa) > smax ? fabs((double)sa) : smax;
    }
    return smax;
}

static void fill_a(void *p, int64_t id, int64_t nth)
{
    moects__ectx *c = p;
    for (int64_t q = id * c->nr / nth; q < (id + 1) * c->nr / nth; q++) {
        c->asmax[q] = h_row(c, c->rows[q], c->A + q * c->H);
        c->abad[q] = (uint8_t)split_finite(c->A + q * c->H, c->Aa + q * c->H, c->H, &c->alow[q]);
        if (c->blk) c->alow[q] = MOECTS_ENCL_NO_GRID; /* scale products round */
    }
}

/* IEEE's special cases of sum_k a_k w_k where an operand is not finite (a_k in [alo, ahi], strided
 * by st doubles; an interval with an infinite end that is not a point never comes here): NaN when
 * every admissible order gives NaN (a NaN product, +Inf and -Inf products), the Inf when the finite
 * terms (sum of |.| sfin) cannot overflow, top otherwise. */
static moects__ivf special_dot(const double *alo, const double *ahi, int64_t st, const double *w, int64_t K,
                               double sfin)
{
    int nan = 0, top = 0, pinf = 0, ninf = 0;
    for (int64_t k = 0; k < K; k++) {
        const double l = alo[k * st], h = ahi[k * st];
        if (isfinite(l) && isfinite(h) && isfinite(w[k])) continue;
        if (l != l || h != h || w[k] != w[k]) { /* a NaN operand: a NaN product */
            nan = 1;
        } else if (l == h) { /* a point */
            const double p = l * w[k];
            nan |= p != p;
            pinf |= p == INFINITY;
            ninf |= p == -INFINITY;
        } else if (l <= 0.0 && h >= 0.0) { /* finite interval through 0 times an Inf: NaN, or not */
            top = 1;
        } else {
            *((l > 0.0) == (w[k] > 0.0) ? &pinf : &ninf) = 1;
        }
    }
    if (nan || (pinf && ninf)) return moects__ivf_point(NAN);
    if (top) return moects__ivf_top();
    if (pinf || ninf) return sfin < 0x1p126 ? moects__ivf_point(pinf ? INFINITY : -INFINITY) : moects__ivf_top();
    return moects__ivf_top(); /* not reached: a row marked special has a non-finite operand */
}

/* A thread's buffer for two original rows (special cases): *buf, allocated on first use. */
static double *tmp_rows(moects__ectx *c, double **buf)
{
    if (!*buf) *buf = malloc((size_t)(c->H + (c->H > c->I ? c->H : c->I)) * sizeof **buf);
    if (!*buf) __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
    return *buf;
}

/* FP8_128, W4A8: 1 when a block's scale product sa * sb (sa <= amax, sb <= wmax) may overflow FP32
 * (or a scale is +Inf): p_b times it may be Inf or NaN (0 * Inf) where the values' sum is finite. */
int moects__encl_scale_may_overflow(const moects__ectx *c, double amax, double wmax)
{
    return c->blk && !(amax * wmax < 0x1p126);
}

/* The GEMM constants of a weight row whose largest block scale is wmax: under bscale=a_b_fma or
 * a_b_add, p * sa may underflow (absolute error below ETA / 2) and is then multiplied by sb <= wmax,
 * and (a_b_add) the product with sb may underflow: each block adds (wmax + 1) ETA, doubled by the
 * later roundings. */
moects__encl_gemm moects__encl_row_consts(const moects__ectx *c, const moects__encl_gemm *g, double wmax)
{
    moects__encl_gemm r = *g;
    if (c->blk && c->r->bscale != MOECTS_BSCALE_AB_FMA) r.uabs += (double)(g->K / c->blk) * (wmax + 1.0) * 2.0 * ETA;
    return r;
}

/* Row q's GEMM1 outputs (with the bias and g1's rounding) into c->g1. */
static void gemm1_row(moects__ectx *c, int64_t q, double **buf)
{
    const int64_t N1 = c->N1, H = c->H;
    for (int64_t n = 0; n < N1; n++) {
        const int64_t o = q * N1 + n;
        moects__ivf g;
        if (moects__encl_scale_may_overflow(c, c->asmax[q], c->w1smax[n])) {
            g = moects__ivf_top();
        } else if (c->abad[q] || c->w1bad[n]) {
            double *t = tmp_rows(c, buf);
            if (!t) return;
            h_row(c, c->rows[q], t);
            decode_row(c, 0, n, t + H);
            g = special_dot(t, t, 1, t + H, H, c->S1[o] * c->g1c.sup);
        } else {
            const moects__encl_gemm gc = moects__encl_row_consts(c, &c->g1c, c->blk ? c->w1smax[n] : 0.0);
            g = moects__encl_gemm_iv(c->D1[o], c->S1[o], 0.0, c->alow[q] + c->w1low[n], &gc);
        }
        if (c->mul1) g = moects__ivf_mul(g, moects__ivf_point(c->alpha1));
        if (c->s->has_bias) g = moects__ivf_add(g, moects__ivf_point(c->a->b13[c->e * N1 + n]));
        c->g1[o] = c->r->g1_bf16 ? moects__ivf_bf16(g) : g;
    }
}

/* Row q's intermediate m as GEMM2's inputs: centres, radii, max |end|, and the row's state. */
static void gemm2_inputs(moects__ectx *c, int64_t q)
{
    const int64_t I = c->I;
    const moects__ivd *m = c->m + q * I;
    double *mc = c->Mc + q * I, *mr = c->MRS + q * I, *ms = c->MRS + (c->nr + q) * I;
    int nan = 0, top = 0, special = 0, low = MOECTS_ENCL_NO_GRID, points = c->r->mid <= MOECTS_MID_F32;
    for (int64_t i = 0; i < I; i++) {
        const double lo = m[i].lo, hi = m[i].hi;
        mc[i] = mr[i] = ms[i] = 0.0;
        if (lo != lo) nan = 1;
        else if (lo == hi && !isfinite(lo)) special = 1;     /* a point +-Inf: its terms apart */
        else if (!isfinite(lo) || !isfinite(hi)) top = 1;  /* top, or an interval to an Inf */
        else {
            const double cm = lo == hi ? lo : 0.5 * (lo + hi), r = hi - cm > cm - lo ? hi - cm : cm - lo;
            mc[i] = cm;
            mr[i] = lo == hi ? 0.0 : nextafter(r, INFINITY); /* [lo, hi] within [c - r, c + r] */
            ms[i] = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
            points &= lo == hi;
            low = lo != 0.0 && low_bit(lo) < low ? low_bit(lo) : low;
        }
    }
    c->mlow[q] = points ? low : MOECTS_ENCL_NO_GRID; /* FP8: a kernel's scale products are not exact */
    /* fp8_128's scale s of a group is at most (its largest |m|) / 224 (its largest element's code is
     * at least 224: amax / s >= 224, div and ue8m0), or the scale of amax 0 (< 2^-32) */
    double mmax = 0.0;
    for (int64_t i = 0; i < I; i++) mmax = ms[i] > mmax ? ms[i] : mmax;
    c->msmax[q] = mmax / 224.0 + 0x1p-32;
    c->mrow[q] = nan ? MOECTS__ENCL_ROW_NAN : top ? MOECTS__ENCL_ROW_TOP : special ? MOECTS__ENCL_ROW_SPECIAL : 0;
}

/* Row q's g1, act and mid intervals into the stages wanted (c->st), at its slot's row. */
static void stages1(const moects__ectx *c, int64_t q)
{
    const moects_layer_stages *st = c->st;
    const int64_t N1 = c->N1, I = c->I, sl = c->rows[q];
    for (int64_t n = 0; st->g1_lo && n < N1; n++) st->g1_lo[sl * N1 + n] = c->g1[q * N1 + n].lo, st->g1_hi[sl * N1 + n] = c->g1[q * N1 + n].hi;
    for (int64_t i = 0; st->act_lo && i < I; i++) st->act_lo[sl * I + i] = c->act[q * I + i].lo, st->act_hi[sl * I + i] = c->act[q * I + i].hi;
    for (int64_t i = 0; st->mid_lo && i < I; i++) st->mid_lo[sl * I + i] = c->m[q * I + i].lo, st->mid_hi[sl * I + i] = c->m[q * I + i].hi;
}

/* Per row: GEMM1, the activation, the weight where the recipe puts it, the intermediate. */
static void stage1(void *p, int64_t id, int64_t nth)
{
    moects__ectx *c = p;
    const moects_layer_recipe *r = c->r;
    const int64_t I = c->I, N1 = c->N1;
    double *buf = NULL;
    for (int64_t q = id * c->nr / nth; q < (id + 1) * c->nr / nth; q++) {
        gemm1_row(c, q, &buf);
        const moects__ivf *g1 = c->g1 + q * N1;
        moects__ivf *act = c->act + q * I;
        const float w = moects__encl_weight(c, c->rows[q]);
        for (int64_t i = 0; i < I; i++) {
            int64_t gi = i, ui = i;
            if (c->s->activation != MOECTS_ACT_RELU2) moects__fused_gate_up(r->w13, I, i, &gi, &ui);
            act[i] = moects__encl_act(c->s, r, c->cl->fn_ulp, g1[gi], g1[ui]);
            if (r->weight == MOECTS_WEIGHT_ACT) act[i] = moects__ivf_mul(act[i], moects__ivf_point(w));
        }
        if (r->mid == MOECTS_MID_NVFP4) moects__encl_mid_nvfp4(I, act, c->a->mid_global_scale[c->e], c->m + q * I, c->scr + q * I);
        else moects__encl_mid(r, I, act, c->m + q * I, c->scr + q * I);
        gemm2_inputs(c, q);
        if (c->st) stages1(c, q);
    }
    free(buf);
}

/* GEMM2's output h of row q, before its epilogue. */
static moects__ivf gemm2_elem(moects__ectx *c, int64_t q, int64_t h, double **buf)
{
    const int64_t H = c->H, I = c->I, nr = c->nr;
    if (c->mrow[q] == MOECTS__ENCL_ROW_NAN) return moects__ivf_point(NAN);
    if (c->mrow[q] == MOECTS__ENCL_ROW_TOP) return moects__ivf_top();
    const double sabs = c->RS[(nr + q) * H + h];
    if (moects__encl_scale_may_overflow(c, c->msmax[q], c->w2smax[h])) return moects__ivf_top();
    if (c->mrow[q] == MOECTS__ENCL_ROW_SPECIAL || c->w2bad[h]) {
        double *t = tmp_rows(c, buf);
        if (!t) return moects__ivf_top();
        decode_row(c, 1, h, t);
        const moects__ivd *m = c->m + q * I;
        return special_dot(&m[0].lo, &m[0].hi, 2, t, I, sabs * c->g2c.sup);
    }
    const moects__encl_gemm gc = moects__encl_row_consts(c, &c->g2c, c->blk ? c->w2smax[h] : 0.0);
    return moects__encl_gemm_iv(c->D2[q * H + h], sabs, c->RS[q * H + h], c->mlow[q] + c->w2low[h], &gc);
}

/* Per row: GEMM2 with the bias, the weight in the epilogue and the slot's rounding, into c->y (and
 * the stages' y where wanted). */
static void stage2(void *p, int64_t id, int64_t nth)
{
    moects__ectx *c = p;
    const int64_t H = c->H;
    double *buf = NULL;
    for (int64_t q = id * c->nr / nth; q < (id + 1) * c->nr / nth; q++) {
        moects__ivf *y = c->y + (c->rows[q] - c->t0 * c->k) * H;
        const moects__ivf w = moects__ivf_point(moects__encl_weight(c, c->rows[q]));
        for (int64_t h = 0; h < H; h++) {
            moects__ivf v = gemm2_elem(c, q, h, &buf);
            if (c->mul2) v = moects__ivf_mul(v, moects__ivf_point(c->alpha2));
            if (c->s->has_bias) v = moects__ivf_add(v, moects__ivf_point(c->a->b2[c->e * H + h]));
            if (c->r->weight == MOECTS_WEIGHT_GEMM2) v = moects__ivf_mul(v, w);
            y[h] = c->r->slot_bf16 ? moects__ivf_bf16(v) : v;
            if (c->st && c->st->y_lo) c->st->y_lo[c->rows[q] * H + h] = y[h].lo, c->st->y_hi[c->rows[q] * H + h] = y[h].hi;
        }
    }
    free(buf);
}

int moects__encl_rows(moects__ectx *c)
{
    const int64_t nr = c->nr;
    moects__parallel(nr, fill_a, c);
    if (moects__fused_dgemm(nr, c->N1, c->H, c->A, c->w1, c->D1) ||
        moects__fused_dgemm(nr, c->N1, c->H, c->Aa, c->w1a, c->S1))
        return -1;
    moects__parallel(nr, stage1, c);
    if (c->failed || moects__fused_dgemm(nr, c->H, c->I, c->Mc, c->w2, c->D2) ||
        moects__fused_dgemm(2 * nr, c->H, c->I, c->MRS, c->w2a, c->RS))
        return -1;
    moects__parallel(nr, stage2, c);
    if (!c->failed && moects__encl_stats_wanted(c) && moects__encl_stats_rows(c)) return -1;
    return c->failed ? -1 : 0;
}
