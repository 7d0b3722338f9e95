/* fused_encl_stats.c: the accumulation check's inputs of the fused MoE layer's two GEMMs
 * (moects_layer_stages g1_st and y_st, ref/moects_layer.h; DESIGN.md "Bounded verdicts"), computed in
 * the enclosure's row chunks (ref/fused_enclosure.c) beside its intervals.
 *
 * A GEMM element is moe_gemm's model (ref/bound.c, moects__acc_stats): terms t_k exact in double (h or
 * the kernel's intermediate times the decoded weights), a kernel of the class returning fl32(V + a)
 * with E[a^2] <= sigma^2 for weights of random signs (the generator's draw), three dgemms giving
 * sum t_k, sum |t_k| and sum t_k^2. The stage a kernel exposes is that result through its epilogue:
 * g1 = rnd_g1(fl(fl(G alpha1) + b13)), y = rnd_slot(fl(fl(fl(G alpha2) + b2) w)) (each step where the
 * recipe and format have it). x is that chain in real arithmetic. G's own rounding to FP32 is one of
 * the K + 1 roundings sigma counts; every epilogue rounding adds at most half an FP32 ULP of its
 * value's bound z (z 2^-24 + 2^-150) to det, scaled by the factors after it, so that got = rnd(x + a' +
 * d) with |d| <= det and a' = a times those factors (sigma scaled with it); the last rounding to the
 * stage's type is the judge's half output ULP (for an FP32 stage also in det: conservative). A value's
 * bound z is |x| + eb + det, eb the enclosure's bound of |G - V| (docs/fused_moe_enclosure.md, "The
 * GEMMs") scaled as x is. */
#include <math.h>
#include <string.h>

#include "moects_encl_internal.h"
#include "moects_fused_internal.h"
#include "moects_gemm_internal.h"

#define ETA 0x1p-149

int moects__encl_stats_wanted(const moects__ectx *c) { return c->st && (c->st->g1_st.x || (c->st->y_st.x && c->st->mid_in)); }

static void squares(const double *v, int64_t n, double *q)
{
    for (int64_t i = 0; i < n; i++) q[i] = v[i] * v[i];
}

void moects__encl_stats_decode(moects__ectx *c)
{
    if (!moects__encl_stats_wanted(c)) return;
    squares(c->w1, c->N1 * c->H, c->w1q);
    squares(c->w2, c->H * c->I, c->w2q);
}

static float up_f(double v)
{
    const float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

static double half_ulp32(double z) { return z * 0x1p-24 + 0x1p-150; }

/* The stage's value through the epilogue: x (exact chain), det, sigma, and eb the bound of |G - V| an
 * admissible kernel keeps (the enclosure's, scaled as x is): every value on the way lies within
 * |x| + eb + det of 0. */
typedef struct {
    double x, det, sig, eb;
} chain;

/* Times m, then that product's FP32 rounding. */
static void times(chain *ch, double m)
{
    const double a = fabs(m);
    ch->x *= m, ch->det *= a, ch->sig *= a, ch->eb *= a;
    ch->det += half_ulp32(fabs(ch->x) + ch->eb + ch->det);
}

/* Element o of st from the GEMM's sums (S the upper bound of sum |t_k|, d the signed sum, q the sum of
 * squares) and g its constants, then the epilogue: times alpha (mul), plus b (bias), times w (wmul).
 * G's own rounding to FP32 is one of the K + 1 roundings sigma counts (ref/bound.c, as moe_gemm's). */
static void element(const moects__encl_gemm *g, double sig_rel, double d, double S, double q, int mul, float alpha,
                    int bias, float b, int wmul, float w, const moects_bound_stats *st, int64_t o)
{
    const double U = 4.0 * ETA * ((double)g->K + 2.0) + g->uabs;
    const double pn = 0.5 * (S + fabs(d) + g->dg * S); /* max(P, N): docs/fused_moe_enclosure.md */
    chain ch = {0, 0, 0, g->gt * S + g->gn * (1.0 + g->gt) * pn + U};
    moects__acc_stats(g->K, sig_rel, 1.0f, S, d, q, U, &ch.x, &ch.det, &ch.sig);
    if (mul) times(&ch, alpha);
    if (bias) ch.x += b, ch.det += half_ulp32(fabs(ch.x) + ch.eb + ch.det);
    if (wmul) times(&ch, w);
    ch.det += fabs(ch.x) * 0x1p-50; /* x's epilogue in double */
    if (!(ch.det < INFINITY) || !(S < 0x1p127)) {
        moects__stats_unchecked(st, o);
        return;
    }
    st->x[o] = ch.x, st->det[o] = up_f(ch.det * (1.0 + 0x1p-40)), st->sigma[o] = up_f(ch.sig);
}

/* GEMM1's stats of the row chunk: h squared, one dgemm against W13 squared, then per element. */
static int gemm1_stats(moects__ectx *c)
{
    const int64_t nr = c->nr, H = c->H, N1 = c->N1;
    const moects_bound_stats *st = &c->st->g1_st;
    squares(c->A, nr * H, c->Aq);
    if (moects__fused_dgemm(nr, N1, H, c->Aq, c->w1q, c->Q1)) return -1;
    const moects_acc_class cls = {c->cl->bits, c->cl->truncation, 0};
    const double sig = moects__ref_acc_sigma_factor(H, &cls);
    for (int64_t q = 0; q < nr; q++)
        for (int64_t n = 0; n < N1; n++) {
            const int64_t o = c->rows[q] * N1 + n, i = q * N1 + n;
            if (c->abad[q] || c->w1bad[n] || moects__encl_scale_may_overflow(c, c->asmax[q], c->w1smax[n])) {
                moects__stats_unchecked(st, o);
                continue;
            }
            const moects__encl_gemm g = moects__encl_row_consts(c, &c->g1c, c->blk ? c->w1smax[n] : 0.0);
            element(&g, sig, c->D1[i], c->S1[i] * g.sup, c->Q1[i], c->mul1, c->alpha1, c->s->has_bias,
                    c->s->has_bias ? c->a->b13[c->e * N1 + n] : 0.0f, 0, 1.0f, st, o);
        }
    return 0;
}

/* The kernel's intermediate rows of the chunk into Mk, Mka, Mkq (non-finite rows zeroed, marked in
 * mkbad); the largest |value| of each row's into *mx (for the scale-overflow test). */
static void gather_mid(moects__ectx *c, double *mx)
{
    const int64_t I = c->I;
    for (int64_t q = 0; q < c->nr; q++) {
        const double *m = c->st->mid_in + c->rows[q] * I;
        int bad = 0;
        mx[q] = 0.0;
        for (int64_t i = 0; i < I; i++) bad |= !isfinite(m[i]);
        c->mkbad[q] = (uint8_t)bad;
        for (int64_t i = 0; i < I; i++) {
            const double v = bad ? 0.0 : m[i];
            c->Mk[q * I + i] = v, c->Mka[q * I + i] = fabs(v), c->Mkq[q * I + i] = v * v;
            mx[q] = fabs(v) > mx[q] ? fabs(v) : mx[q];
        }
    }
}

/* GEMM2's stats of the row chunk from the kernel's intermediate: three dgemms, then per element
 * with the epilogue (alpha2, b2, weight=gemm2). */
static int gemm2_stats(moects__ectx *c)
{
    const int64_t nr = c->nr, H = c->H, I = c->I;
    const moects_bound_stats *st = &c->st->y_st;
    double *mx = c->Q1; /* [rc] of GEMM1's sums, done with */
    gather_mid(c, mx);
    if (moects__fused_dgemm(nr, H, I, c->Mk, c->w2, c->Dk) || moects__fused_dgemm(nr, H, I, c->Mka, c->w2a, c->Sk) ||
        moects__fused_dgemm(nr, H, I, c->Mkq, c->w2q, c->Qk))
        return -1;
    const moects_acc_class cls = {c->cl->bits, c->cl->truncation, 0};
    const double sig = moects__ref_acc_sigma_factor(I, &cls);
    for (int64_t q = 0; q < nr; q++) {
        const float w = moects__encl_weight(c, c->rows[q]);
        const double smax = mx[q] / 224.0 + 0x1p-32; /* a group's scale bound, as gemm2_inputs */
        for (int64_t h = 0; h < H; h++) {
            const int64_t o = c->rows[q] * H + h, i = q * H + h;
            if (c->mkbad[q] || c->w2bad[h] || moects__encl_scale_may_overflow(c, smax, c->w2smax[h])) {
                moects__stats_unchecked(st, o);
                continue;
            }
            const moects__encl_gemm g = moects__encl_row_consts(c, &c->g2c, c->blk ? c->w2smax[h] : 0.0);
            element(&g, sig, c->Dk[i], c->Sk[i] * g.sup, c->Qk[i], c->mul2, c->alpha2, c->s->has_bias,
                    c->s->has_bias ? c->a->b2[c->e * H + h] : 0.0f, c->r->weight == MOECTS_WEIGHT_GEMM2, w, st, o);
        }
    }
    return 0;
}

int moects__encl_stats_rows(moects__ectx *c)
{
    if (c->st->g1_st.x && gemm1_stats(c)) return -1;
    return c->st->y_st.x && c->st->mid_in ? gemm2_stats(c) : 0;
}
