/* moects_encl_internal.h: what the fused MoE layer's enclosure reference shares between its files
 * (ref/fused_enclosure.c: routing, the GEMMs' intervals, combine, tightness; ref/fused_encl_iv.c:
 * interval arithmetic, activation and intermediate) and with its tests. ref/ only, not installed.
 *
 * An interval [lo, hi] holds every value an admissible implementation can have at that point of the
 * stage chain. Two special states: NaN in both ends (every admissible implementation has NaN there),
 * and lo = -Inf, hi = +Inf ("top": no claim, NaN included). Every other interval holds no NaN. */
#ifndef MOECTS_ENCL_INTERNAL_H
#define MOECTS_ENCL_INTERNAL_H
#include <stdint.h>

#include "moects_layer.h"

typedef struct {
    float lo, hi;
} moects__ivf;

/* An intermediate's interval: dec(q) * s is not always a float, its ends are exact in double. */
typedef struct {
    double lo, hi;
} moects__ivd;

moects__ivf moects__ivf_point(float v); /* [v, v]; NaN v: the NaN state */
moects__ivf moects__ivf_top(void);
int moects__ivf_is_nan(moects__ivf x);
int moects__ivf_is_top(moects__ivf x);

/* One FP32 operation (RNE) on intervals: the hull of its values at the corners (fl is monotone in
 * each argument for a fixed sign of the other, so the extremes sit at corners). A NaN state in: NaN
 * state out; top in: top; a corner NaN: the NaN state if every input is a point, else top; a divisor
 * interval holding 0 (not a point): top. */
moects__ivf moects__ivf_add(moects__ivf x, moects__ivf y);
moects__ivf moects__ivf_mul(moects__ivf x, moects__ivf y);
moects__ivf moects__ivf_div(moects__ivf x, moects__ivf y);
/* fmaf(y, w, acc) with w a point. */
moects__ivf moects__ivf_fma(moects__ivf y, float w, moects__ivf acc);
/* Both ends rounded to BF16 (RNE, monotone: an interval across a rounding boundary keeps both). */
moects__ivf moects__ivf_bf16(moects__ivf x);
/* v stepped n floats up (n > 0) or down (n < 0) in the ordered-integer sense (+0 and -0 one
 * point), clamped at +-Inf; NaN stays NaN. */
float moects__encl_step(float v, int64_t n);
/* The ordered integer of v's bits: -(|bits|) for a negative v, so +0 and -0 are both 0. */
int64_t moects__encl_ord(float v);

/* The activation of one (gate, up) pair (relu2: of g alone) on intervals, every operation as
 * moects__fused_act does it (act=bf16 included, the router weight not), exp/tanh/erf widened by
 * fn_ulp floats each way around the correctly rounded values of the ends. */
moects__ivf moects__encl_act(const moects_fused_moe_shape *s, const moects_layer_recipe *r, uint32_t fn_ulp,
                             moects__ivf g, moects__ivf u);

/* The intermediate of one row: a [inter] (activation intervals, times the weight where the recipe
 * puts it) -> m [inter], the interval of what GEMM2 multiplies (moects__fused_mid's value). FP8: per
 * group, the amax interval's candidate values (BF16 amaxes, or UE8M0 scales, at most
 * MOECTS_ENCL_AMAX_CANDIDATES) each with its exact scale, q and m of every element, m the hull over
 * the candidates; more candidates: the scale as an interval, q and m from its ends. scratch: [inter]
 * of the caller's (the BF16 values v of a group). */
#define MOECTS_ENCL_AMAX_CANDIDATES 16
void moects__encl_mid(const moects_layer_recipe *r, int64_t inter, const moects__ivf *a, moects__ivd *m,
                      moects__ivf *scratch);
/* mid=nvfp4 of a [inter] under the expert's global scale gs (moects__fused_nvfp4_groups on
 * intervals): per group of 16 the amax interval's BF16 candidates (at most
 * MOECTS_ENCL_AMAX_CANDIDATES), each with its exact block scale and factor, m the hull over them;
 * more: |m| <= 6 times the largest candidate's block scale, with v's sign. */
void moects__encl_mid_nvfp4(int64_t inter, const moects__ivf *a, float gs, moects__ivd *m, moects__ivf *scratch);

/* ---- the run (ref/fused_enclosure.c drives, ref/fused_encl_gemm.c computes the GEMM stages) ---- */
/* The GEMMs' constants of a reduction length K under the claim (docs/fused_moe_enclosure.md, "The
 * GEMMs"): gt = gamma(terms, u), the roundings of one term (its product; and an FP8 intermediate's
 * scale product: 2), gn = gamma(K + nodes, u), the roundings of subset sums (the additions, and an
 * FP8 scale applied to a group's partial sum, ceil(K / 32) groups at most), dg = gamma(K + 1, 2^-53)
 * (a dgemm's own error), sup = 1 + 2 dg (a dgemm's sum of nonnegative terms to an upper bound of the
 * exact one), bits = the class's. */
typedef struct {
    int64_t K;
    double gt, gn, dg, sup;
    int bits;
    double uabs; /* FP8_128 weights: the absolute error of underflowing block-scale products (else 0) */
} moects__encl_gemm;
#define MOECTS_ENCL_NO_GRID 4096 /* a row's grid exponent when it has no finite nonzero value */

typedef struct {
    const moects_fused_moe_shape *s;
    const moects_fused_moe_args *a;
    const moects_layer_recipe *r;
    const moects_layer_claim *cl;
    int64_t N1, H, I, k;
    moects__encl_gemm g1c, g2c;   /* GEMM1 (K = H), GEMM2 (K = I) */
    int32_t *slot_e;              /* [T*k] local expert of each slot, -1: not valid */
    double *w1, *w1a, *w2, *w2a;  /* expert e's W13 [N1][H], W2 [H][I]: finite values (others 0), |.| */
    uint8_t *w1bad, *w2bad;       /* [N1], [H]: the row holds a NaN or Inf */
    int *w1low, *w2low;           /* [N1], [H]: every finite value of the row a multiple of 2^low */
    double *w1smax, *w2smax;      /* FP8_128, W4A8: [N1], [H] the row's largest block scale (Inf: an Inf one) */
    double *asmax, *msmax;        /* FP8_128, W4A8: [rc] bounds of h's and m's largest block scale */
    int64_t blk, G;               /* block-scaled formats: the K-block, the inputs' group; else 0 */
    int mul1, mul2;               /* GEMM1's, GEMM2's result times alpha1, alpha2 (expert e's) */
    float alpha1, alpha2;
    int64_t e, t0, t1;            /* the expert; the chunk's tokens */
    const int64_t *rows;          /* the row chunk's slots (global slot index) */
    int64_t nr, rc;               /* rows in the row chunk; its capacity */
    double *A, *Aa, *D1, *S1;     /* [rc][H] h (finite, others 0), |h|; [rc][N1] h W13^T, |h| |W13|^T */
    uint8_t *abad;                /* [rc]: h holds a NaN or Inf */
    int *alow, *mlow;             /* [rc]: h's grid exponent; m's (all points, BF16 or FP32 mid) or NO_GRID */
    moects__ivf *g1, *act, *scr;  /* [rc][N1], [rc][I], [rc][I] */
    moects__ivd *m;               /* [rc][I] the intermediate */
    double *Mc, *MRS, *D2, *RS;   /* [rc][I] centres; [2 rc][I] radii then max |end|; [rc][H]; [2 rc][H] */
    uint8_t *mrow;                /* [rc]: 0, MOECTS__ENCL_ROW_NAN, _TOP, _SPECIAL (a point +-Inf) */
    moects__ivf *y;               /* [(t1 - t0) k][H] per-slot GEMM2 outputs */
    int failed;                   /* out of memory in a thread */
    /* the stages (moects__ref_fused_moe_enclosure_stages), NULL: none; their accumulation check's
     * inputs (ref/fused_encl_stats.c), when st->g1_st.x or st->y_st.x (NULL buffers otherwise): */
    const moects_layer_stages *st;
    double *w1q, *w2q;            /* expert e's W13 [N1][H], W2 [H][I] finite values squared */
    double *Aq, *Q1;              /* [rc][H] h squared; [rc][N1] h^2 (W13^2)^T */
    double *Mk, *Mka, *Mkq;       /* [rc][I] the kernel's intermediate (finite values, others 0), |.|, squared */
    double *Dk, *Sk, *Qk;         /* [rc][H] its GEMM2 sums: signed, |.|, squared */
    uint8_t *mkbad;               /* [rc]: the kernel's intermediate row holds a NaN or Inf */
} moects__ectx;
enum { MOECTS__ENCL_ROW_NAN = 1, MOECTS__ENCL_ROW_TOP = 2, MOECTS__ENCL_ROW_SPECIAL = 3 };

/* The GEMM constants of K under cl: terms roundings on a term's own path (its product, and scale
 * products applied to it: 1 to 3), nodes rounding nodes beyond K (scale products applied to a block's
 * partial sum: ceil(K / 32) for an FP8 intermediate, ceil(K / 16) per NVFP4 operand, up to 3 per
 * block of a block-scaled format's chain). */
moects__encl_gemm moects__encl_gemm_consts(int64_t K, int terms, double nodes, const moects_layer_claim *cl);
/* The router weight of a slot (bf16 under wdtype=bf16). */
float moects__encl_weight(const moects__ectx *c, int64_t slot);
/* Expert c->e's weights into w1, w1a, w1bad, w2, w2a, w2bad. */
void moects__encl_decode(moects__ectx *c);
/* The row chunk (c->rows, c->nr of expert c->e): GEMM1, activation, intermediate, GEMM2 and its
 * epilogue into c->y. 0, or -1 out of memory. */
int moects__encl_rows(moects__ectx *c);
/* The GEMM constants of a weight row whose largest block scale is wmax (ref/fused_encl_gemm.c):
 * g's, with bscale=a_b_fma / a_b_add's underflow allowance added. */
moects__encl_gemm moects__encl_row_consts(const moects__ectx *c, const moects__encl_gemm *g, double wmax);
/* FP8_128, W4A8: 1 when a block's scale product sa * sb (sa <= amax, sb <= wmax) may overflow FP32. */
int moects__encl_scale_may_overflow(const moects__ectx *c, double amax, double wmax);
/* Whether the stages' accumulation check inputs are wanted (ref/fused_encl_stats.c). */
int moects__encl_stats_wanted(const moects__ectx *c);
/* Expert c->e's W13 and W2 squared into w1q, w2q (after moects__encl_decode), when stats are wanted. */
void moects__encl_stats_decode(moects__ectx *c);
/* The row chunk's stage statistics (after its GEMM dgemms and stage1): GEMM1's from h into
 * st->g1_st, GEMM2's from the kernel's st->mid_in into st->y_st. 0, or -1 out of memory. */
int moects__encl_stats_rows(moects__ectx *c);

/* The interval of an FP32 GEMM result whose exact value lies within rad of the dgemm's d, given the
 * dgemm's sum of nonnegative terms sabs (>= S up to g->sup) and radius sum rdg (0 for GEMM1):
 * [fl(d - (B + e + R)), fl(d + (B + e + R))] rounded outward (docs/fused_moe_enclosure.md). With
 * point inputs (rdg 0) whose every product is a multiple of 2^qexp (MOECTS_ENCL_NO_GRID: not
 * known) and S below 2^(bits + qexp), every partial sum of every order is exact: the point
 * fl32(exact sum) when d pins it (the dgemm's error below 2^(qexp - 1)). */
moects__ivf moects__encl_gemm_iv(double d, double sabs, double rdg, int qexp, const moects__encl_gemm *g);
#endif
