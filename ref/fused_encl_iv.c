/* fused_encl_iv.c: the fused MoE layer's enclosure between the GEMMs (ref/moects_encl_internal.h;
 * the proof sketch of each step is docs/fused_moe_enclosure.md): interval arithmetic on FP32 values,
 * the activation and the intermediate on intervals.
 *
 * Every elementwise operation of the layer is one IEEE FP32 operation rounded to nearest even,
 * monotone in each argument for fixed signs of the others, and every admissible implementation
 * performs that same operation (moects_layer_claim). So an operation on intervals is the hull of its
 * corners computed with the native operation: no outward rounding, and point intervals give exactly
 * the exact reference's value (ref/fused_moe_act.c). exp, tanh and erf (increasing) take the
 * correctly rounded value of each end stepped fn_ulp floats outward. A variable used twice (g in
 * g / (1 + exp(-g))) is treated as two independent intervals: wider, never narrower. */
#include <math.h>
#include <string.h>

#include "moects_crmath.h"
#include "moects_encl_internal.h"
#include "moects_fused_internal.h"

moects__ivf moects__ivf_point(float v) { return (moects__ivf){v, v}; }
moects__ivf moects__ivf_top(void) { return (moects__ivf){-INFINITY, INFINITY}; }
int moects__ivf_is_nan(moects__ivf x) { return x.lo != x.lo; }
int moects__ivf_is_top(moects__ivf x) { return x.lo == -INFINITY && x.hi == INFINITY; }

static const moects__ivf NAN_IV = {NAN, NAN};

static int is_point(moects__ivf x) { return x.lo == x.hi; }

/* The corners' hull: c[n] computed from inputs that are all points (pts) or not. */
static moects__ivf hull(const float *c, int n, int pts)
{
    moects__ivf r = {c[0], c[0]};
    int nan = 0;
    for (int i = 0; i < n; i++) {
        nan |= c[i] != c[i];
        r.lo = c[i] < r.lo ? c[i] : r.lo;
        r.hi = c[i] > r.hi ? c[i] : r.hi;
    }
    if (nan) return pts ? NAN_IV : moects__ivf_top();
    return r;
}

/* The special states of a binary operation's inputs: 1 and *out when they decide it. */
static int special2(moects__ivf x, moects__ivf y, moects__ivf *out)
{
    if (moects__ivf_is_nan(x) || moects__ivf_is_nan(y)) return *out = NAN_IV, 1;
    if (moects__ivf_is_top(x) || moects__ivf_is_top(y)) return *out = moects__ivf_top(), 1;
    return 0;
}

moects__ivf moects__ivf_add(moects__ivf x, moects__ivf y)
{
    moects__ivf r;
    if (special2(x, y, &r)) return r;
    const float c[4] = {x.lo + y.lo, x.lo + y.hi, x.hi + y.lo, x.hi + y.hi};
    return hull(c, 4, is_point(x) && is_point(y));
}

moects__ivf moects__ivf_mul(moects__ivf x, moects__ivf y)
{
    moects__ivf r;
    if (special2(x, y, &r)) return r;
    const float c[4] = {x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi};
    return hull(c, 4, is_point(x) && is_point(y));
}

moects__ivf moects__ivf_div(moects__ivf x, moects__ivf y)
{
    moects__ivf r;
    if (special2(x, y, &r)) return r;
    if (!is_point(y) && y.lo <= 0.0f && y.hi >= 0.0f) return moects__ivf_top(); /* x / y unbounded */
    const float c[4] = {x.lo / y.lo, x.lo / y.hi, x.hi / y.lo, x.hi / y.hi};
    return hull(c, 4, is_point(x) && is_point(y));
}

moects__ivf moects__ivf_fma(moects__ivf y, float w, moects__ivf acc)
{
    moects__ivf r;
    if (w != w) return NAN_IV;
    if (special2(y, acc, &r)) return r;
    const float c[4] = {fmaf(y.lo, w, acc.lo), fmaf(y.lo, w, acc.hi), fmaf(y.hi, w, acc.lo), fmaf(y.hi, w, acc.hi)};
    return hull(c, 4, is_point(y) && is_point(acc));
}

/* f of both ends, f non-decreasing. */
static moects__ivf mono(moects__ivf x, float (*f)(float))
{
    if (moects__ivf_is_nan(x)) return NAN_IV;
    if (moects__ivf_is_top(x)) return x;
    const float c[2] = {f(x.lo), f(x.hi)};
    return hull(c, 2, is_point(x));
}

static float bf(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

moects__ivf moects__ivf_bf16(moects__ivf x) { return mono(x, bf); }

static moects__ivf neg(moects__ivf x) { return moects__ivf_is_nan(x) ? x : (moects__ivf){-x.hi, -x.lo}; }

static moects__ivf pt(float v) { return moects__ivf_point(v); }

int64_t moects__encl_ord(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 31 ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}

float moects__encl_step(float v, int64_t n)
{
    if (v != v) return v;
    int64_t o = moects__encl_ord(v) + n;
    o = o > 0x7F800000 ? 0x7F800000 : o < -0x7F800000 ? -0x7F800000 : o;
    const uint32_t u = o >= 0 ? (uint32_t)o : 0x80000000u | (uint32_t)(-o);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp, tanh or erf (increasing) of x within fn_ulp floats of the correctly rounded values. */
static moects__ivf fn(moects__ivf x, float (*f)(float), uint32_t ulp)
{
    moects__ivf r = mono(x, f);
    if (moects__ivf_is_nan(r) || moects__ivf_is_top(r) || ulp == 0) return r;
    return (moects__ivf){moects__encl_step(r.lo, -(int64_t)ulp), moects__encl_step(r.hi, ulp)};
}

/* x * sigmoid with e = exp(-z): x / (1 + e) (div) or x * (1 / (1 + e)) (rcp). */
static moects__ivf sig_mul(moects__ivf x, moects__ivf e, int rcp)
{
    const moects__ivf d = moects__ivf_add(pt(1.0f), e);
    return rcp ? moects__ivf_mul(x, moects__ivf_div(pt(1.0f), d)) : moects__ivf_div(x, d);
}

static float cube(float g) { return g * g * g; } /* non-decreasing: fl(g * g) grows with |g| */

/* The gate's activation before act=bf16 and the product with up: silu(g) = g sigmoid(g), gelu(g),
 * gpt_oss's glu = g sigmoid(alpha g) (g clamped already), or situ's (a tanh(g (1 / a))) sigmoid(g):
 * its x = a t and its sigmoid's 1 + exp(-g) taken as independent intervals (not monotone in g). */
static moects__ivf gate1(const moects_fused_moe_shape *s, int rcp, uint32_t ulp, moects__ivf g)
/* rcp: bit 0 sig=rcp, bit 1 situ=div */
{
    const float BETA = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), KAPPA = 0.044715f, ALPHA = (float)M_SQRT1_2;
    if (s->activation == MOECTS_ACT_GELU_TANH) {
        const moects__ivf inner = moects__ivf_mul(pt(BETA), moects__ivf_add(g, moects__ivf_mul(pt(KAPPA), mono(g, cube))));
        return moects__ivf_mul(moects__ivf_mul(pt(0.5f), g), moects__ivf_add(pt(1.0f), fn(inner, moects_cr_tanhf, ulp)));
    }
    if (s->activation == MOECTS_ACT_GELU_ERF) {
        const moects__ivf er = fn(moects__ivf_mul(g, pt(ALPHA)), moects_cr_erff, ulp);
        return moects__ivf_mul(moects__ivf_mul(g, pt(0.5f)), moects__ivf_add(pt(1.0f), er));
    }
    const moects__ivf e = fn(neg(s->activation == MOECTS_ACT_GPT_OSS ? moects__ivf_mul(g, pt(s->act_alpha)) : g),
                             moects_cr_expf, ulp);
    if (s->activation == MOECTS_ACT_SITU) {
        const moects__ivf z = rcp & 2 ? moects__ivf_div(g, pt(s->act_alpha)) : moects__ivf_mul(g, pt(1.0f / s->act_alpha));
        const moects__ivf t = fn(z, moects_cr_tanhf, ulp); /* g / a and g (1 / a): non-decreasing (a > 0) */
        return sig_mul(moects__ivf_mul(pt(s->act_alpha), t), e, rcp & 1);
    }
    return sig_mul(g, e, rcp & 1); /* silu, gpt_oss */
}

/* gate1 on a finite interval cut into GATE_PIECES pieces, the hull of theirs: g enters the gate
 * twice (g / (1 + exp(-g))), and corners treat the two as independent, which widens by up to ~6x
 * where the function falls (silu near g = -1); a piece of 1/16 the width widens 16 times less. The
 * pieces cover [lo, hi] (ends exact, cuts non-decreasing), so the hull holds every value. */
#define GATE_PIECES 16
static moects__ivf gate(const moects_fused_moe_shape *s, int rcp, uint32_t ulp, moects__ivf g)
{
    if (is_point(g) || moects__ivf_is_nan(g) || !isfinite(g.lo) || !isfinite(g.hi)) return gate1(s, rcp, ulp, g);
    moects__ivf r = {INFINITY, -INFINITY};
    float p0 = g.lo;
    for (int i = 1; i <= GATE_PIECES; i++) {
        const float p1 = i == GATE_PIECES ? g.hi : (float)(g.lo + ((double)g.hi - g.lo) * i / GATE_PIECES);
        const moects__ivf v = gate1(s, rcp, ulp, (moects__ivf){p0, p1});
        if (moects__ivf_is_nan(v) || moects__ivf_is_top(v)) return moects__ivf_top();
        r.lo = v.lo < r.lo ? v.lo : r.lo;
        r.hi = v.hi > r.hi ? v.hi : r.hi;
        p0 = p1;
    }
    return r;
}

static float relu(float g) { return g > 0.0f ? g : (g == g ? 0.0f : g); }
static float sq(float m) { return m * m; } /* non-decreasing on m >= 0 (relu's output) */

/* x clamped: g' = min(g, L) (gate) or u' = clamp(u, -L, L), as the engines' comparisons. */
static moects__ivf clamp(moects__ivf x, float L, int both)
{
    if (moects__ivf_is_nan(x) || moects__ivf_is_top(x)) return x; /* top may be NaN: kept */
    moects__ivf r = {x.lo > L ? L : x.lo, x.hi > L ? L : x.hi};
    if (both) r.lo = r.lo < -L ? -L : r.lo, r.hi = r.hi < -L ? -L : r.hi;
    return r;
}

moects__ivf moects__encl_act(const moects_fused_moe_shape *s, const moects_layer_recipe *r, uint32_t ulp,
                             moects__ivf g, moects__ivf u)
{
    const float L = s->act_limit;
    if (s->activation == MOECTS_ACT_RELU2) {
        const moects__ivf m = mono(mono(g, relu), sq);
        return r->act_bf16 ? moects__ivf_bf16(m) : m;
    }
    if (s->activation == MOECTS_ACT_SILU_CLAMP || s->activation == MOECTS_ACT_GPT_OSS) {
        g = clamp(g, L, 0);
        u = clamp(u, L, 1);
    }
    if (s->activation == MOECTS_ACT_SITU && L > 0.0f) { /* L tanh(u (1 / L)) or L tanh(u / L): non-decreasing */
        const moects__ivf z = r->situ_div ? moects__ivf_div(u, pt(L)) : moects__ivf_mul(u, pt(1.0f / L));
        u = moects__ivf_mul(pt(L), fn(z, moects_cr_tanhf, ulp));
    }
    moects__ivf ga = gate(s, r->sig_rcp | r->situ_div << 1, ulp, g);
    if (r->act_bf16) ga = moects__ivf_bf16(ga);
    if (s->activation == MOECTS_ACT_GPT_OSS) return moects__ivf_mul(moects__ivf_add(u, pt(1.0f)), ga);
    return moects__ivf_mul(ga, u);
}

/* ---- the intermediate ---- */
static const moects__ivd NAN_IVD = {NAN, NAN}, TOP_IVD = {-INFINITY, INFINITY};

static moects__ivd to_d(moects__ivf x) { return (moects__ivd){x.lo, x.hi}; }

/* m = m hull x, with the states: NaN and NaN stay NaN; NaN with anything else, or top: top. */
static void hull_d(moects__ivd *m, moects__ivd x)
{
    const int mn = m->lo != m->lo, xn = x.lo != x.lo;
    if (mn && xn) return;
    if (mn || xn || (m->lo == -INFINITY && m->hi == INFINITY)) {
        *m = TOP_IVD;
        return;
    }
    m->lo = x.lo < m->lo ? x.lo : m->lo;
    m->hi = x.hi > m->hi ? x.hi : m->hi;
}

/* The candidate scales of a group whose amax lies in [alo, ahi] (BF16 values): every scale an amax
 * there gives (ue8m0: the powers of two from scale(alo) to scale(ahi); div: scale(A) of each BF16
 * A in [alo, ahi]) into s; their count, or 0 when there are more than MOECTS_ENCL_AMAX_CANDIDATES. */
static int candidates(float alo, float ahi, int ue8m0, double *s)
{
    const double s0 = moects__fused_fp8_scale(alo, ue8m0), s1 = moects__fused_fp8_scale(ahi, ue8m0);
    if (ue8m0) {
        const int n = ilogb(s1) - ilogb(s0) + 1; /* both powers of two in [2^-127, 2^127] */
        if (n > MOECTS_ENCL_AMAX_CANDIDATES) return 0;
        for (int j = 0; j < n; j++) s[j] = ldexp(s0, j);
        return n;
    }
    const int b0 = moects__bf16_from_f32(alo), b1 = moects__bf16_from_f32(ahi); /* >= 0: ordered */
    if (b1 - b0 + 1 > MOECTS_ENCL_AMAX_CANDIDATES) return 0;
    for (int j = 0; j <= b1 - b0; j++) s[j] = moects__fused_fp8_scale(moects__bf16_to_f32((uint16_t)(b0 + j)), 0);
    return b1 - b0 + 1;
}

/* m of v under the one scale s: [dec(e4m3(v.lo / s)) s, dec(e4m3(v.hi / s)) s] (monotone in v for
 * s > 0; exact in double). */
static moects__ivd at_scale(moects__ivf v, double s)
{
    const float sf = (float)s; /* exact: an FP32 quotient or a power of two in [2^-127, 2^127] */
    const double lo = (double)moects__e4m3_decode(moects__e4m3_encode(v.lo / sf)) * s;
    const double hi = (double)moects__e4m3_decode(moects__e4m3_encode(v.hi / sf)) * s;
    if (lo != lo || hi != hi) return v.lo == v.hi ? NAN_IVD : TOP_IVD;
    return (moects__ivd){lo, hi};
}

/* m of v with the scale anywhere in [s0, s1] (the fallback: q and s taken apart). */
static moects__ivd at_scales(moects__ivf v, double s0, double s1)
{
    const moects__ivf q = moects__ivf_div(v, (moects__ivf){(float)s0, (float)s1});
    if (moects__ivf_is_nan(q) || moects__ivf_is_top(q)) return moects__ivf_is_nan(q) ? NAN_IVD : TOP_IVD;
    const double ql = moects__e4m3_decode(moects__e4m3_encode(q.lo)), qh = moects__e4m3_decode(moects__e4m3_encode(q.hi));
    const double c[4] = {ql * s0, ql * s1, qh * s0, qh * s1};
    moects__ivd m = {c[0], c[0]};
    for (int i = 0; i < 4; i++) {
        if (c[i] != c[i]) return TOP_IVD;
        m.lo = c[i] < m.lo ? c[i] : m.lo;
        m.hi = c[i] > m.hi ? c[i] : m.hi;
    }
    return m;
}

/* A group of n: v = bf16(a) (into scratch), whether one holds a NaN or the top interval, and the
 * interval [alo, ahi] of the group's amax. */
static void group_amax(const moects__ivf *a, int64_t n, moects__ivf *v, int *nan, int *top, float *alo, float *ahi)
{
    *nan = 0, *top = 0, *alo = 0.0f, *ahi = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        v[i] = moects__ivf_bf16(a[i]);
        *nan |= moects__ivf_is_nan(v[i]);
        *top |= moects__ivf_is_top(v[i]);
        const float l = fabsf(v[i].lo), h = fabsf(v[i].hi);
        const float lower = v[i].lo <= 0.0f && v[i].hi >= 0.0f ? 0.0f : (l < h ? l : h), upper = l > h ? l : h;
        *alo = lower > *alo ? lower : *alo;
        *ahi = upper > *ahi ? upper : *ahi;
    }
}

/* One FP8 group of n: v = bf16(a) (into scratch), the amax interval, m over its candidates. */
static void fp8_group(const moects__ivf *a, int64_t n, int ue8m0, moects__ivd *m, moects__ivf *v)
{
    int nan, top;
    float alo, ahi;
    group_amax(a, n, v, &nan, &top, &alo, &ahi);
    if (nan || top) { /* a NaN makes the group's scale NaN: all of it NaN; top may be NaN */
        for (int64_t i = 0; i < n; i++) m[i] = nan ? NAN_IVD : TOP_IVD;
        return;
    }
    double s[MOECTS_ENCL_AMAX_CANDIDATES];
    const int nc = candidates(alo, ahi, ue8m0, s);
    for (int64_t i = 0; i < n; i++) {
        if (nc == 0) {
            m[i] = at_scales(v[i], moects__fused_fp8_scale(alo, ue8m0), moects__fused_fp8_scale(ahi, ue8m0));
            continue;
        }
        m[i] = at_scale(v[i], s[0]);
        for (int c = 1; c < nc; c++) hull_d(&m[i], at_scale(v[i], s[c]));
    }
}

void moects__encl_mid(const moects_layer_recipe *r, int64_t I, const moects__ivf *a, moects__ivd *m,
                      moects__ivf *scratch)
{
    if (r->mid == MOECTS_MID_BF16 || r->mid == MOECTS_MID_F32) {
        for (int64_t i = 0; i < I; i++) m[i] = to_d(r->mid == MOECTS_MID_BF16 ? moects__ivf_bf16(a[i]) : a[i]);
        return;
    }
    const int64_t G = r->mid == MOECTS_MID_FP8_TOKEN ? I : r->mid == MOECTS_MID_FP8_128 ? 128 : 32;
    const int ue8m0 = r->scale_ue8m0 || r->mid == MOECTS_MID_MXFP8;
    for (int64_t i0 = 0; i0 < I; i0 += G) fp8_group(a + i0, I - i0 < G ? I - i0 : G, ue8m0, m + i0, scratch);
}

/* m of v under one NVFP4 block scale b with its factor o: [dec(e2m1(v.lo o)) b, dec(e2m1(v.hi o)) b]
 * (v -> fl(v o) non-decreasing for o >= 0, e2m1's RNE too; exact in double: 2 + 4 bits). */
static moects__ivd at_nvfp4(moects__ivf v, float b, float o)
{
    const double lo = (double)moects__e2m1_decode(moects__e2m1_encode(v.lo * o, MOECTS_ROUND_RNE)) * b;
    const double hi = (double)moects__e2m1_decode(moects__e2m1_encode(v.hi * o, MOECTS_ROUND_RNE)) * b;
    return (moects__ivd){lo, hi};
}

/* One NVFP4 group of n: v = bf16(a) (into scratch), the amax interval, m over its candidates. */
static void nvfp4_group(const moects__ivf *a, int64_t n, float gs, moects__ivd *m, moects__ivf *v)
{
    int nan, top;
    float alo, ahi;
    group_amax(a, n, v, &nan, &top, &alo, &ahi);
    if (nan || top || !(ahi < INFINITY)) { /* a NaN: the group NaN; top or an Inf amax: no claim */
        for (int64_t i = 0; i < n; i++) m[i] = nan ? NAN_IVD : TOP_IVD;
        return;
    }
    const int b0 = moects__bf16_from_f32(alo), b1 = moects__bf16_from_f32(ahi); /* >= 0: ordered */
    for (int64_t i = 0; i < n; i++) {
        if (b1 - b0 + 1 > MOECTS_ENCL_AMAX_CANDIDATES) { /* |dec(q)| <= 6, the sign of v (or 0) */
            float o;
            const double bmax = moects__fused_nvfp4_scale(ahi, gs, &o); /* b is non-decreasing in amax */
            m[i] = (moects__ivd){v[i].lo < 0.0f ? -6.0 * bmax : 0.0, v[i].hi > 0.0f ? 6.0 * bmax : 0.0};
            continue;
        }
        for (int j = 0; j <= b1 - b0; j++) {
            float o;
            const float b = moects__fused_nvfp4_scale(moects__bf16_to_f32((uint16_t)(b0 + j)), gs, &o);
            const moects__ivd x = at_nvfp4(v[i], b, o);
            if (j == 0) m[i] = x;
            else hull_d(&m[i], x);
        }
    }
}

void moects__encl_mid_nvfp4(int64_t I, const moects__ivf *a, float gs, moects__ivd *m, moects__ivf *scratch)
{
    for (int64_t i0 = 0; i0 < I; i0 += 16) nvfp4_group(a + i0, I - i0 < 16 ? I - i0 : 16, gs, m + i0, scratch);
}
