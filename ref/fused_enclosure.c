/* fused_enclosure.c: the fused MoE layer's enclosure reference, moects__ref_fused_moe_enclosure
 * (ref/moects_layer.h; DESIGN.md "The fused MoE layer", the second reference; the proof sketch of
 * every stage is docs/fused_moe_enclosure.md). The exact reference's stage chain (ref/fused_moe.c)
 * run on intervals: per element the smallest and largest value any admissible implementation of
 * the recipe under the claim can have there.
 *
 * Work order as the exact reference's: tokens in chunks whose per-slot intervals fit Y_BUDGET; in a
 * chunk the valid slots grouped by expert, one expert's weights decoded once, its slots in row
 * chunks through both GEMMs (ref/fused_encl_gemm.c); then the combine of the chunk's tokens in slot
 * order (f32_slots, bf16_chain: interval arithmetic of the same operations) or in any order
 * (f32_any: the sum's real interval widened by the forward error bound of summation in any order),
 * and the out_dtype rounding of both ends. moects__ref_fused_moe_enclosure_stages also hands out each
 * stage's intervals per slot (ref/fused_encl_gemm.c) and its GEMMs' accumulation check inputs
 * (ref/fused_encl_stats.c), computed in the same row chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_encl_internal.h"
#include "moects_fused_internal.h"
#include "moects_gemm_internal.h"

#define Y_BUDGET ((int64_t)1 << 30)   /* bytes of per-slot intervals held at once */
#define ROW_BUDGET ((int64_t)96 << 20) /* bytes of one row chunk's buffers */
#define ROWS_MAX 256

/* A recipe the shape cannot take; combine=f32_any is defined here. */
static int refused(const moects_layer_recipe *r, const moects_fused_moe_shape *s)
{
    moects_layer_recipe q = *r;
    if (q.combine == MOECTS_COMBINE_F32_ANY) q.combine = MOECTS_COMBINE_F32_SLOTS;
    return moects__layer_recipe_inexact(&q, s) != NULL;
}

static double gamma_n(double n, double u) { return n * u < 1.0 ? n * u / (1.0 - n * u) : INFINITY; }

/* combine=f32_any of token t, column h: the n valid slots' terms z_j (y_j, or y_j w_j exactly
 * under weight=combine) have a real sum V in [sum lo_j, sum hi_j]. FP32 additions in any order
 * from acc = 0 (n - 1 roundings of subset sums; under weight=combine n fmaf, or a rounded product
 * per term and n - 1 additions) stay within gt S + gn (1 + gt) max(P, N) (+ n ETA for the
 * products' underflow) of V (docs/fused_moe_enclosure.md, "The combine"). */
static moects__ivf combine_any(const moects__ectx *c, int64_t t, int64_t h)
{
    const int fma_w = c->r->weight == MOECTS_WEIGHT_COMBINE;
    double slo = 0.0, shi = 0.0, sabs = 0.0;
    int nan = 0, top = 0, n = 0;
    for (int64_t j = 0; j < c->k; j++) {
        if (c->slot_e[t * c->k + j] < 0) continue;
        const moects__ivf y = c->y[((t - c->t0) * c->k + j) * c->H + h];
        const double w = fma_w ? moects__encl_weight(c, t * c->k + j) : 1.0;
        const double p0 = y.lo * w, p1 = y.hi * w; /* exact: two floats */
        nan |= moects__ivf_is_nan(y) || w != w;
        top |= !isfinite(y.lo) || !isfinite(y.hi) || !isfinite(w);
        if (nan || top) continue;
        slo += p0 < p1 ? p0 : p1;
        shi += p0 < p1 ? p1 : p0;
        sabs += fabs(p0) > fabs(p1) ? fabs(p0) : fabs(p1);
        n++;
    }
    if (nan) return moects__ivf_point(NAN);
    if (top) return moects__ivf_top(); /* an Inf in a sum in any order: no claim */
    if (n == 0) return moects__ivf_point(0.0f);
    const double dg = gamma_n(n, 0x1p-53), S = sabs * (1.0 + 2.0 * dg); /* this double sum's error */
    const double gt = fma_w ? 0x1p-24 : 0.0, gn = gamma_n(fma_w ? n : n - 1, 0x1p-24), U = fma_w ? n * 0x1p-149 : 0.0;
    const double pn = 0.5 * (S + fmax(fabs(slo), fabs(shi)) + dg * S); /* max(P, N) of the actual terms */
    if (!(S * (1.0 + gt) * (1.0 + gn) + U < 0x1.fffffep127)) return moects__ivf_top(); /* may overflow */
    const double rad = (gt * S + gn * (1.0 + gt) * pn + U + dg * S) * (1.0 + 0x1p-40);
    return (moects__ivf){(float)nextafter(slo - rad, -INFINITY), (float)nextafter(shi + rad, INFINITY)};
}

/* The combine of token t, column h, before the out_dtype rounding. */
static moects__ivf combine_elem(const moects__ectx *c, int64_t t, int64_t h)
{
    if (c->r->combine == MOECTS_COMBINE_F32_ANY) return combine_any(c, t, h);
    const int fma_w = c->r->weight == MOECTS_WEIGHT_COMBINE, chain = c->r->combine == MOECTS_COMBINE_BF16_CHAIN;
    moects__ivf acc = moects__ivf_point(0.0f);
    for (int64_t j = 0; j < c->k; j++) {
        if (c->slot_e[t * c->k + j] < 0) continue;
        const moects__ivf y = c->y[((t - c->t0) * c->k + j) * c->H + h];
        const moects__ivf v = fma_w ? moects__ivf_fma(y, moects__encl_weight(c, t * c->k + j), acc)
                                    : moects__ivf_add(acc, y);
        acc = chain ? moects__ivf_bf16(v) : v;
    }
    return acc;
}

typedef struct {
    moects__ectx *c;
    void *lo, *hi;
} comb_ctx;

static void combine(void *p, int64_t id, int64_t nth)
{
    comb_ctx *cc = p;
    const moects__ectx *c = cc->c;
    const int64_t H = c->H, n = c->t1 - c->t0;
    const int bf16 = c->s->out_dtype == MOECTS_BF16;
    for (int64_t t = c->t0 + id * n / nth; t < c->t0 + (id + 1) * n / nth; t++)
        for (int64_t h = 0; h < H; h++) {
            moects__ivf v = combine_elem(c, t, h);
            if (bf16) {
                v = moects__ivf_bf16(v);
                ((uint16_t *)cc->lo)[t * H + h] = moects__bf16_from_f32(v.lo);
                ((uint16_t *)cc->hi)[t * H + h] = moects__bf16_from_f32(v.hi);
            } else {
                ((float *)cc->lo)[t * H + h] = v.lo;
                ((float *)cc->hi)[t * H + h] = v.hi;
            }
        }
}

/* Tokens [c->t0, c->t1): the slots by expert (order: [nslots], cnt: [E + 1]), each expert's rows in
 * row chunks, then the combine into lo, hi. 0, or -1 out of memory. */
static int run_chunk(moects__ectx *c, int64_t *order, int64_t *cnt, void *lo, void *hi)
{
    const moects_fused_moe_shape *s = c->s;
    const int64_t sl0 = c->t0 * c->k, sl1 = c->t1 * c->k;
    moects__fused_group(c->slot_e, sl0, sl1, s->E, order, cnt);
    for (int64_t e = 0, first = 0; e < s->E; first = cnt[e++]) {
        if (cnt[e] == first) continue;
        c->e = e;
        const int nv = s->format == MOECTS_LAYER_NVFP4, nvm = c->r->mid == MOECTS_MID_NVFP4;
        const float rg = nvm ? 1.0f / c->a->mid_global_scale[e] : 1.0f; /* the exact reference's factors */
        c->mul1 = nv, c->mul2 = nv || nvm, c->alpha1 = nv ? c->a->w13_alpha[e] : 1.0f;
        c->alpha2 = nv && nvm ? rg * c->a->w2_alpha[e] : nv ? c->a->w2_alpha[e] : rg;
        moects__encl_decode(c);
        moects__encl_stats_decode(c);
        for (int64_t r0 = first; r0 < cnt[e]; r0 += c->rc) {
            c->rows = order + r0;
            c->nr = cnt[e] - r0 < c->rc ? cnt[e] - r0 : c->rc;
            if (moects__encl_rows(c)) return -1;
        }
    }
    comb_ctx cc = {c, lo, hi};
    moects__parallel(c->t1 - c->t0, combine, &cc);
    return 0;
}

/* n elements of sz bytes at *base + *used (base NULL: counting only); *used grows by their size
 * rounded up to 8 bytes. */
static void *carve(char **base, size_t *used, int64_t n, size_t sz)
{
    void *r = *base ? *base + *used : NULL;
    *used += ((size_t)n * sz + 7) & ~(size_t)7;
    return r;
}

/* Every buffer of the run in one block at base (NULL: just its size, returned). */
static size_t layout(moects__ectx *c, char *base, int64_t tc, int64_t **order, int64_t **cnt)
{
    const int64_t H = c->H, I = c->I, N1 = c->N1, rc = c->rc, iv = sizeof(moects__ivf);
    size_t u = 0;
    c->w1 = carve(&base, &u, N1 * H, 8), c->w1a = carve(&base, &u, N1 * H, 8);
    c->w2 = carve(&base, &u, H * I, 8), c->w2a = carve(&base, &u, H * I, 8);
    c->w1bad = carve(&base, &u, N1, 1), c->w2bad = carve(&base, &u, H, 1);
    c->w1low = carve(&base, &u, N1, sizeof(int)), c->w2low = carve(&base, &u, H, sizeof(int));
    c->w1smax = carve(&base, &u, N1, 8), c->w2smax = carve(&base, &u, H, 8);
    c->asmax = carve(&base, &u, rc, 8), c->msmax = carve(&base, &u, rc, 8);
    c->alow = carve(&base, &u, rc, sizeof(int)), c->mlow = carve(&base, &u, rc, sizeof(int));
    c->A = carve(&base, &u, rc * H, 8), c->Aa = carve(&base, &u, rc * H, 8);
    c->D1 = carve(&base, &u, rc * N1, 8), c->S1 = carve(&base, &u, rc * N1, 8);
    c->abad = carve(&base, &u, rc, 1), c->mrow = carve(&base, &u, rc, 1);
    c->g1 = carve(&base, &u, rc * N1, iv), c->act = carve(&base, &u, rc * I, iv);
    c->scr = carve(&base, &u, rc * I, iv), c->m = carve(&base, &u, rc * I, sizeof(moects__ivd));
    c->Mc = carve(&base, &u, rc * I, 8), c->MRS = carve(&base, &u, 2 * rc * I, 8);
    c->D2 = carve(&base, &u, rc * H, 8), c->RS = carve(&base, &u, 2 * rc * H, 8);
    c->y = carve(&base, &u, tc * c->k * H, iv);
    const int64_t sw = moects__encl_stats_wanted(c); /* the stages' statistics: 0 elements when not wanted */
    c->w1q = carve(&base, &u, sw * N1 * H, 8), c->w2q = carve(&base, &u, sw * H * I, 8);
    c->Aq = carve(&base, &u, sw * rc * H, 8), c->Q1 = carve(&base, &u, sw * rc * N1, 8);
    c->Mk = carve(&base, &u, sw * rc * I, 8), c->Mka = carve(&base, &u, sw * rc * I, 8);
    c->Mkq = carve(&base, &u, sw * rc * I, 8), c->mkbad = carve(&base, &u, sw * rc, 1);
    c->Dk = carve(&base, &u, sw * rc * H, 8), c->Sk = carve(&base, &u, sw * rc * H, 8);
    c->Qk = carve(&base, &u, sw * rc * H, 8);
    c->slot_e = carve(&base, &u, c->s->T * c->k, 4);
    *order = carve(&base, &u, tc * c->k, 8), *cnt = carve(&base, &u, c->s->E + 1, 8);
    return u;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Row and token chunk sizes and every buffer: the block to free, or NULL. */
static void *alloc_all(moects__ectx *c, int64_t *tc, int64_t **order, int64_t **cnt)
{
    const int64_t H = c->H, N1 = c->N1, I = c->I;
    const int64_t per_row = (6 * H + 2 * N1 + 4 * I) * 8 + (N1 + 2 * I) * 8 + I * 16 + 26 +
                            moects__encl_stats_wanted(c) * (4 * H + N1 + 3 * I + 1) * 8;
    c->rc = clamp64(ROW_BUDGET / per_row, 1, ROWS_MAX);
    *tc = clamp64(Y_BUDGET / (c->k * H * (int64_t)sizeof(moects__ivf)), 1, c->s->T);
    char *block = malloc(layout(c, NULL, *tc, order, cnt));
    if (block) layout(c, block, *tc, order, cnt);
    return block;
}

/* Ordered distance of lo and hi in out_dtype units (bf16: in its own ULPs). */
static int64_t dist(float lo, float hi, int bf16) { return (moects__encl_ord(hi) - moects__encl_ord(lo)) >> (bf16 ? 16 : 0); }

static float out_at(const void *p, int64_t i, int bf16)
{
    return bf16 ? moects__bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static int cmp64(const void *x, const void *y)
{
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The output type's ULP at magnitude v >= 0 (binary32's exponent range, as ref/bound.c's ulp_out). */
static double ulp_out(double v, int bf16)
{
    const int e = v > 0.0 ? ilogb(v) : -126;
    return ldexp(1.0, (e > -126 ? e : -126) - (bf16 ? 7 : 23));
}

/* *t over lo, hi [T, H]. 0, or -1 out of memory. */
static int tightness(const moects_fused_moe_shape *s, const void *lo, const void *hi, moects_layer_tightness *t)
{
    const int bf16 = s->out_dtype == MOECTS_BF16;
    const int64_t H = s->H;
    memset(t, 0, sizeof *t);
    t->elements = s->T * H;
    int64_t *w = malloc((size_t)(t->elements + 1) * sizeof *w), n = 0;
    if (!w) return -1;
    for (int64_t r = 0; r < s->T; r++) {
        double rowmax = 0.0;
        for (int64_t h = 0; h < H; h++) {
            const double l = fabs(out_at(lo, r * H + h, bf16)), u = fabs(out_at(hi, r * H + h, bf16));
            rowmax = isfinite(l) && l > rowmax ? l : rowmax;
            rowmax = isfinite(u) && u > rowmax ? u : rowmax;
        }
        const double ulp = ulp_out(rowmax, bf16);
        for (int64_t i = r * H; i < (r + 1) * H; i++) {
            const float l = out_at(lo, i, bf16), u = out_at(hi, i, bf16);
            if (l != l) t->nan++;
            else if (l == -INFINITY && u == INFINITY) t->unbounded++;
            else {
                w[n] = dist(l, u, bf16);
                t->wide += w[n] > 1;
                t->narrow_rowmax += (double)u - (double)l < ulp;
                n++;
            }
        }
    }
    qsort(w, (size_t)n, sizeof *w, cmp64);
    t->median_ulps = n ? (double)w[(n - 1) / 2] : 0.0;
    t->max_ulps = n ? (double)w[n - 1] : 0.0;
    free(w);
    return 0;
}

static int bad_claim(const moects_layer_claim *cl)
{
    return cl->bits < 2 || cl->bits > 64 || (cl->truncation != 0 && cl->truncation != 1);
}

/* The GEMMs' constants (docs/fused_moe_enclosure.md "The GEMMs"): block-scaled formats (FP8_128,
 * W4A8) a scale product per term and up to 3 nodes a block (bscale's chain: fl(sa sb) or fl(p sa),
 * fl(. sb), the add); an FP8 intermediate a scale product per term and one per group of 32; NVFP4
 * weights and an NVFP4 intermediate a block scale per operand (term and node, per 16). */
static void consts(moects__ectx *c)
{
    const int64_t H = c->H, I = c->I;
    const int nv = c->s->format == MOECTS_LAYER_NVFP4, fp8m = c->r->mid >= MOECTS_MID_FP8_TOKEN && c->r->mid != MOECTS_MID_NVFP4;
    const int nvm = c->r->mid == MOECTS_MID_NVFP4;
    if (c->blk) {
        const double n1 = 3.0 * (double)(H / c->blk), n2 = 3.0 * (double)(I / c->blk); /* FP8_128: as before, */
        const double f1 = (double)((H + 31) / 32), f2 = (double)((I + 31) / 32);        /* ceil(K / 32) */
        c->g1c = moects__encl_gemm_consts(H, 2, n1 > f1 ? n1 : f1, c->cl);
        c->g2c = moects__encl_gemm_consts(I, 2, n2 > f2 ? n2 : f2, c->cl);
        /* a block's scale product sa * sb may underflow: ETA/2 times |p_b| < 2^25, doubled */
        c->g1c.uabs = (double)(H / c->blk) * 0x1p-124, c->g2c.uabs = (double)(I / c->blk) * 0x1p-124;
        return;
    }
    c->g1c = moects__encl_gemm_consts(H, nv ? 2 : 1, nv ? (double)((H + 15) / 16) : 0.0, c->cl);
    c->g2c = moects__encl_gemm_consts(I, 1 + (fp8m || nvm) + nv,
                                      (fp8m ? (double)((I + 31) / 32) : 0.0) + (double)(nv + nvm) * (double)((I + 15) / 16),
                                      c->cl);
}

/* Every output +0 (no slot). */
static void zeros(const moects_fused_moe_shape *s, void *lo, void *hi)
{
    const size_t n = (size_t)(s->T * s->H) * (s->out_dtype == MOECTS_BF16 ? 2 : 4);
    memset(lo, 0, n);
    memset(hi, 0, n);
}

int moects__ref_fused_moe_enclosure(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                                    const moects_layer_recipe *r, const moects_layer_claim *cl, void *lo,
                                    void *hi, moects_layer_tightness *tight)
{
    return moects__ref_fused_moe_enclosure_stages(s, a, r, cl, lo, hi, tight, NULL);
}

int moects__ref_fused_moe_enclosure_stages(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                                           const moects_layer_recipe *r, const moects_layer_claim *cl, void *lo,
                                           void *hi, moects_layer_tightness *tight, const moects_layer_stages *st)
{
    if (!s || !a || !r || !cl || moects__fused_bad_recipe(r) || moects__fused_bad_shape(s, a, 0) || refused(r, s) ||
        bad_claim(cl))
        return -1; /* the exact reference's checks, a->out aside (lo and hi are the outputs) */
    if (s->T > 0 && (!lo || !hi)) return -1;
    moects__ectx c = {.s = s, .a = a, .r = r, .cl = cl, .H = s->H, .I = s->inter, .k = s->k, .st = st};
    c.N1 = s->activation == MOECTS_ACT_RELU2 ? s->inter : 2 * s->inter;
    c.blk = moects__fused_blk(s->format), c.G = c.blk ? moects__fused_in_group(s->format, r) : 0;
    consts(&c);
    int rc = 0;
    if (s->T > 0 && s->k == 0) zeros(s, lo, hi);
    if (s->T > 0 && s->k > 0) {
        int64_t tc, *order, *cnt;
        void *block = alloc_all(&c, &tc, &order, &cnt);
        if (!block) return -1;
        rc = moects__fused_route(c.s, c.a, c.slot_e);
        for (int64_t t0 = 0; rc == 0 && t0 < s->T; t0 += tc) {
            c.t0 = t0;
            c.t1 = s->T - t0 < tc ? s->T : t0 + tc;
            rc = run_chunk(&c, order, cnt, lo, hi);
        }
        free(block);
    }
    if (rc == 0 && tight) rc = tightness(s, lo, hi, tight);
    return rc;
}
