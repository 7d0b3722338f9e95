/* moe_route_encl.c: the router's enclosure for a bounded claim (fn=ulpN or sum=any, ref/moects_route.h):
 * per row the interval of every score and weight any admissible implementation computes, the check
 * of a kernel's ids against the scores' intervals (a tie within the enclosure) and of its weights
 * against theirs. Proof sketch: docs/moe_route.md "Bounded claims". One FP32 operation on intervals:
 * ref/fused_encl_iv.c (the hull of the native operation at the corners; points give the exact
 * reference's bits); exp: the correctly rounded value stepped fn_ulp floats each way; a sum in any
 * order: gamma(n - 1) times the sum of magnitudes, rounded outward. Values used twice (S in e_i / S
 * and in the sum it came from) are taken as independent intervals: wider, never narrower. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_crmath.h"
#include "moects_encl_internal.h"
#include "moects_route.h"

typedef moects__ivf iv;

static iv pt(float v) { return moects__ivf_point(v); }

/* exp of the FP32 argument v: within ulp floats of the correctly rounded value. */
static iv iv_exp(float v, uint32_t ulp)
{
    const float c = moects_cr_expf(v);
    return (iv){moects__encl_step(c, -(int64_t)ulp), moects__encl_step(c, ulp)};
}

static iv iv_sigmoid(float x, uint32_t ulp)
{
    return moects__ivf_div(pt(1.0f), moects__ivf_add(pt(1.0f), iv_exp(-x, ulp)));
}

static float down(double d)
{
    const float f = (float)d;
    return (double)f > d ? nextafterf(f, -INFINITY) : f;
}

static float up(double d)
{
    const float f = (float)d;
    return (double)f < d ? nextafterf(f, INFINITY) : f;
}

/* The FP32 sum of v [n] in any order (any tree of n - 1 RNE additions): every term passes at most
 * n - 1 of them and an addition that underflows is exact, so |sum - exact| <= gamma(n - 1) sum |t|
 * (Higham, Accuracy and Stability, 2nd ed., 4.2). Over intervals: [sum lo - g A, sum hi + g A], A the
 * sum of each term's larger end magnitude, in double with 2^-40 of A added to g for double's own
 * roundings (n < 2^12: at most n 2^-53 A), ends rounded outward to FP32. One term: itself. A NaN
 * state or top term, n >= 2^12, or an end that is not finite: top. */
static iv iv_sum(const iv *v, int64_t n)
{
    if (n == 1) return v[0];
    double lo = 0.0, hi = 0.0, A = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (moects__ivf_is_nan(v[i]) || moects__ivf_is_top(v[i])) return moects__ivf_top();
        lo += v[i].lo, hi += v[i].hi;
        A += fmax(fabs((double)v[i].lo), fabs((double)v[i].hi));
    }
    const double u = 0x1p-24, m = (double)(n - 1) * u;
    if (n >= 4096) return moects__ivf_top();
    const double g = m / (1.0 - m) + 0x1p-40;
    const iv r = {down(lo - g * A), up(hi + g * A)};
    return isfinite(r.lo) && isfinite(r.hi) ? r : moects__ivf_top();
}

/* Scratch of one row. */
typedef struct {
    iv *sc;             /* [E] SOFTMAX p, SIGMOID s, LLAMA4 sigmoid(x); TOPK_SOFTMAX unused */
    iv *sel;            /* [E] the selection score */
    iv *gs;             /* [n_group] the group scores */
    iv *w;              /* [k] weights */
    unsigned char *in;  /* [E] 1: an expert of the kernel's set */
    unsigned char *gok; /* [n_group] 1: the group's experts left out are all below every chosen one */
} encl_ws;

static void ews_free(encl_ws *ws) { free(ws->sc), free(ws->sel), free(ws->gs), free(ws->w), free(ws->in), free(ws->gok); }

static int ews_alloc(const moects_moe_route_shape *s, encl_ws *ws)
{
    const size_t E = (size_t)s->E, G = (size_t)s->n_group;
    *ws = (encl_ws){malloc(E * sizeof(iv)), malloc(E * sizeof(iv)), malloc(G * sizeof(iv)),
                    malloc((size_t)s->k * sizeof(iv)), malloc(E), malloc(G)};
    if (ws->sc && ws->sel && ws->gs && ws->w && ws->in && ws->gok) return 0;
    ews_free(ws);
    return -1;
}

/* ws->sc and ws->sel of a row x [E] (ref/moects_route.h's arithmetic on intervals; norm=recip: e
 * times the interval of 1 / S). */
static void row_scores(const moects_moe_route_shape *s, const moects_moe_route_args *a, const moects_route_recipe *r,
                       const float *x, encl_ws *ws)
{
    const int64_t E = s->E;
    const uint32_t ulp = moects__route_fn_ulp(r);
    if (s->method == MOECTS_ROUTE_SOFTMAX) {
        float m = x[0];
        for (int64_t e = 1; e < E; e++) m = x[e] > m ? x[e] : m;
        for (int64_t e = 0; e < E; e++) ws->sc[e] = iv_exp(x[e] - m, ulp);
        const iv S = iv_sum(ws->sc, E), R = moects__ivf_div(pt(1.0f), S);
        for (int64_t e = 0; e < E; e++)
            ws->sc[e] = r->norm_recip ? moects__ivf_mul(ws->sc[e], R) : moects__ivf_div(ws->sc[e], S);
    }
    for (int64_t e = 0; e < E; e++) {
        const int scored = s->method == MOECTS_ROUTE_SOFTMAX || s->method == MOECTS_ROUTE_SIGMOID;
        if (s->method == MOECTS_ROUTE_SIGMOID || s->method == MOECTS_ROUTE_LLAMA4) ws->sc[e] = iv_sigmoid(x[e], ulp);
        ws->sel[e] = !scored ? pt(x[e]) : s->has_bias ? moects__ivf_add(ws->sc[e], pt(a->bias[e])) : ws->sc[e];
    }
}

/* ws->gs: a group's score is the sum of its two best selection scores (with a bias), else its best;
 * the j-th largest of values in intervals lies between the j-th largest low end and the j-th largest
 * high end, and FP32 addition is monotone and commutative. */
static void group_scores(const moects_moe_route_shape *s, encl_ws *ws)
{
    const int64_t n = s->E / s->n_group;
    for (int64_t g = 0; g < s->n_group; g++) {
        float l1 = -INFINITY, l2 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY;
        for (int64_t e = g * n; e < (g + 1) * n; e++) {
            const iv v = ws->sel[e];
            if (v.lo > l1) l2 = l1, l1 = v.lo;
            else if (v.lo > l2) l2 = v.lo;
            if (v.hi > h1) h2 = h1, h1 = v.hi;
            else if (v.hi > h2) h2 = v.hi;
        }
        ws->gs[g] = s->has_bias ? (iv){l1 + l2, h1 + h2} : (iv){l1, h1};
    }
}

/* Whether some admissible values put a (index ia) ahead of b (index ib): above it, or equal with the
 * tie rule giving it to a. */
static int ahead(iv a, int64_t ia, iv b, int64_t ib, int ties_any)
{
    return a.hi > b.lo || (a.hi == b.lo && (ties_any || ia < ib));
}

/* ws->gok of the set marked in ws->in. */
static void groups_ok(const moects_moe_route_shape *s, const moects_route_recipe *r, const int32_t *ids, encl_ws *ws)
{
    const int64_t n = s->E / s->n_group;
    for (int64_t g = 0; g < s->n_group; g++) {
        ws->gok[g] = 1;
        for (int64_t e = g * n; e < (g + 1) * n && ws->gok[g]; e++)
            for (int64_t j = 0; j < s->k && !ws->in[e]; j++)
                if (!ahead(ws->sel[ids[j]], ids[j], ws->sel[e], e, r->ties_any)) ws->gok[g] = 0;
    }
}

/* Whether groups kept (bit g) can be the kept ones: every kept group's experts left out below the
 * set, every kept group ahead of every other. */
static int kept_ok(const moects_moe_route_shape *s, const moects_route_recipe *r, const encl_ws *ws, uint32_t kept)
{
    for (int64_t g = 0; g < s->n_group; g++) {
        if (!(kept >> g & 1)) continue;
        if (!ws->gok[g]) return 0;
        for (int64_t h = 0; h < s->n_group; h++)
            if (!(kept >> h & 1) && !ahead(ws->gs[g], g, ws->gs[h], h, r->ties_any)) return 0;
    }
    return 1;
}

/* Whether some admissible scores select the set ids [k] (ws->in marks it): without groups, every
 * expert left out is below every chosen one; with groups, some topk_group groups holding the set
 * (every such choice tried: n_group <= 24) pass kept_ok. Pairs are checked independently: the chosen
 * at their high ends and the rest at their low ends realize every pair at once. */
static int set_admissible(const moects_moe_route_shape *s, const moects_route_recipe *r, const int32_t *ids,
                          encl_ws *ws)
{
    const int64_t n = s->E / s->n_group, G = s->n_group;
    if (G > 24) return 1; /* no claim on the groups of such a shape: every set accepted */
    groups_ok(s, r, ids, ws);
    if (G == 1) return ws->gok[0];
    uint32_t need = 0;
    for (int64_t j = 0; j < s->k; j++) need |= 1u << (ids[j] / n);
    for (uint32_t m = 0; m < (1u << G); m++)
        if ((m & need) == need && __builtin_popcount(m) == s->topk_group && kept_ok(s, r, ws, m)) return 1;
    return 0;
}

/* The weights' intervals ws->w [k] of the set ids [k], x [E] the logits (renorm=recip: times the
 * interval of c / P, the scale folded into c). */
static void set_weights(const moects_moe_route_shape *s, const moects_route_recipe *r, const float *x,
                        const int32_t *ids, encl_ws *ws)
{
    const int64_t k = s->k;
    const uint32_t ulp = moects__route_fn_ulp(r);
    const int tk = s->method == MOECTS_ROUTE_TOPK_SOFTMAX;
    float m = x[ids[0]];
    for (int64_t j = 1; j < k; j++) m = x[ids[j]] > m ? x[ids[j]] : m;
    for (int64_t j = 0; j < k; j++) ws->w[j] = tk ? iv_exp(x[ids[j]] - m, ulp) : ws->sc[ids[j]];
    if (s->method == MOECTS_ROUTE_LLAMA4) return;
    if (tk || s->renormalize) {
        iv P = iv_sum(ws->w, k);
        if (s->method == MOECTS_ROUTE_SIGMOID) P = moects__ivf_add(P, pt(1e-20f));
        const iv C = moects__ivf_div(pt(tk ? 1.0f : s->scale), P);
        for (int64_t j = 0; j < k; j++)
            ws->w[j] = r->renorm_recip ? moects__ivf_mul(ws->w[j], C) : moects__ivf_div(ws->w[j], P);
        if (r->renorm_recip) return;
    }
    for (int64_t j = 0; j < k && !tk; j++) ws->w[j] = moects__ivf_mul(ws->w[j], pt(s->scale));
}

int moects__route_encl_weights(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                               const moects_route_recipe *r, int64_t t, const int32_t *ids, float *lo, float *hi)
{
    encl_ws ws;
    float *x = malloc((size_t)s->E * sizeof *x);
    if (moects__route_shape_invalid(s) || !x || ews_alloc(s, &ws)) return free(x), -1;
    const int undefined = moects__route_load_row(s, a, t, x);
    if (!undefined) {
        row_scores(s, a, r, x, &ws);
        set_weights(s, r, x, ids, &ws);
        for (int64_t j = 0; j < s->k; j++) lo[j] = ws.w[j].lo, hi[j] = ws.w[j].hi;
    }
    ews_free(&ws), free(x);
    return undefined;
}

/* The first slot j of ids [k] that no admissible scores put after every earlier slot (a
 * non-increasing sequence in the intervals exists iff each slot can follow each earlier one), or -1. */
static int bad_order(const moects_moe_route_shape *s, const moects_route_recipe *r, const int32_t *ids,
                     const encl_ws *ws)
{
    for (int64_t j = 1; j < s->k; j++)
        for (int64_t i = 0; i < j; i++)
            if (!ahead(ws->sel[ids[i]], ids[i], ws->sel[ids[j]], ids[j], r->ties_any)) return (int)j;
    return -1;
}

static int check(const moects_moe_route_shape *s, const moects_moe_route_args *a, const moects_route_recipe *r,
                 const float *x, const int32_t *ref_ids, const int32_t *ids, const float *w, int *slot, encl_ws *ws)
{
    int same = 1;
    row_scores(s, a, r, x, ws);
    if (s->n_group > 1) group_scores(s, ws);
    memset(ws->in, 0, (size_t)s->E);
    for (int64_t j = 0; j < s->k; j++) ws->in[ids[j]] = 1;
    for (int64_t j = 0; j < s->k; j++) same &= ws->in[ref_ids[j]];
    *slot = -1;
    if (!same && !set_admissible(s, r, ids, ws)) {
        for (int64_t j = 0; j < s->k; j++) ws->in[ref_ids[j]] = 2;
        for (*slot = 0; *slot < s->k - 1 && ws->in[ids[*slot]] == 2;) ++*slot; /* an id not the reference's */
        return MOECTS_ROUTE_ROW_IDS;
    }
    if (!r->slots_any && (*slot = bad_order(s, r, ids, ws)) >= 0) return MOECTS_ROUTE_ROW_ORDER;
    set_weights(s, r, x, ids, ws);
    for (int64_t j = 0; j < s->k; j++)
        if (!(w[j] >= ws->w[j].lo && w[j] <= ws->w[j].hi)) return *slot = (int)j, MOECTS_ROUTE_ROW_WEIGHT;
    *slot = -1;
    return same ? MOECTS_ROUTE_ROW_SAME : MOECTS_ROUTE_ROW_TIE;
}

int moects__route_encl_check(const moects_moe_route_shape *s, const moects_moe_route_args *a,
                             const moects_route_recipe *r, const float *x, const int32_t *ref_ids,
                             const int32_t *ids, const float *w, int *slot)
{
    encl_ws ws;
    if (ews_alloc(s, &ws)) return -1;
    const int rc = check(s, a, r, x, ref_ids, ids, w, slot, &ws);
    ews_free(&ws);
    return rc;
}
