/* test_ref_fused_enclosure.c: the fused MoE layer's enclosure reference
 * (moects__ref_fused_moe_enclosure, ref/fused_enclosure.c; docs/fused_moe_enclosure.md) on layers
 * worked out by hand (a GEMM interval, a tiny silu layer, an FP8 amax that may round either way,
 * situ's gate over an interval holding its dip, where the ends alone would not hold it),
 * and on random layers of every activation, intermediate, weight position, combine and format:
 * it holds the exact reference (moects__ref_fused_moe) and a simulated admissible kernel written
 * here from the definition (FP32 sums in random orders and split-K, exp/tanh/erf off by up to
 * fn_ulp, FP8 scales applied to group partials, f32_any in random slot orders); with a near-exact
 * class it is the exact reference's point almost everywhere; a value one ULP of its row's maximum
 * away from the exact output leaves it on most elements of an exact-friendly layer. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_crmath.h"
#include "moects_encl_internal.h"
#include "moects_fused_internal.h"
#include "moects_layer.h"
#include "test_fused_layer.h"

/* Element i of an output buffer of the layer's out_dtype, as a float. */
static float at(const layer *L, const void *p, int64_t i)
{
    return L->s.out_dtype == MOECTS_F32 ? ((const float *)p)[i] : moects__bf16_to_f32(((const uint16_t *)p)[i]);
}

static const moects_layer_claim FP32_CLAIM = {24, 0, 0};

static float bfr0(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

static void enclose(layer *L, const moects_layer_claim *cl, moects_layer_tightness *t)
{
    cr_assert_eq(moects__ref_fused_moe_enclosure(&L->s, &L->a, &L->r, cl, L->lo, L->hi, t), 0);
}

/* ---- the pieces, by hand ---- */
/* GEMM1's element d = 1 = S, K = 2: B = gamma(3, u) S. bits 24: u = 2^-24, B = 3 2^-24 (1 + 3 2^-24)
 * plus below 2^-60: below 1 floats are 2^-24 apart, so lo = fl(1 - B) = 1 - 3 2^-24; above 1 they
 * are 2^-23 apart and 1 + B lies just past the midpoint 1 + 1.5 2^-23: hi = 1 + 2^-22. Truncation:
 * u = 2^-23, B = 3 2^-23 (1 + ...): lo = 1 - 6 2^-24 (exact float, B just past it: the nearest),
 * hi = 1 + 3 2^-23. bits 40: B ~ 3 2^-40, far below half an ULP: [1, 1]. S = 0: every term 0: +0.
 * GEMM2 with a radius R = 2^-10 around d = 2 (K = 1, bits 40): [2 - 2^-10, 2 + 2^-10]. */
Test(fused_encl_pieces, gemm_interval)
{
    moects_layer_claim c24 = {24, 0, 0}, t24 = {24, 1, 0}, c40 = {40, 0, 0};
    moects__encl_gemm g = moects__encl_gemm_consts(2, 1, 0.0, &c24);
    moects__ivf v = moects__encl_gemm_iv(1.0, 1.0, 0.0, MOECTS_ENCL_NO_GRID, &g);
    cr_assert(v.lo == 1.0f - 0x3p-24f && v.hi == 1.0f + 0x1p-22f, "[%a, %a]", (double)v.lo, (double)v.hi);
    g = moects__encl_gemm_consts(2, 1, 0.0, &t24);
    v = moects__encl_gemm_iv(1.0, 1.0, 0.0, MOECTS_ENCL_NO_GRID, &g);
    cr_assert(v.lo == 1.0f - 0x6p-24f && v.hi == 1.0f + 0x3p-23f, "[%a, %a]", (double)v.lo, (double)v.hi);
    g = moects__encl_gemm_consts(2, 1, 0.0, &c40);
    v = moects__encl_gemm_iv(1.0, 1.0, 0.0, MOECTS_ENCL_NO_GRID, &g);
    cr_assert(v.lo == 1.0f && v.hi == 1.0f);
    v = moects__encl_gemm_iv(0.0, 0.0, 0.0, MOECTS_ENCL_NO_GRID, &g);
    cr_assert(v.lo == 0.0f && v.hi == 0.0f && !signbit(v.lo));
    v = moects__encl_gemm_iv(1.0, 0x1p127, 0.0, MOECTS_ENCL_NO_GRID, &g);
    cr_assert(moects__ivf_is_top(v), "a partial sum may overflow: no claim");
    g = moects__encl_gemm_consts(1, 1, 0.0, &c40);
    v = moects__encl_gemm_iv(2.0, 2.0, 0x1p-10, MOECTS_ENCL_NO_GRID, &g);
    cr_assert(v.lo == 2.0f - 0x1p-10f && v.hi == 2.0f + 0x1p-10f, "[%a, %a]", (double)v.lo, (double)v.hi);
    /* the grid: integer products (q = 0) summing to |partial sums| <= S = 3 < 2^24 are exact in every
     * order: the point, also from a d a dgemm left 2^-40 off, and +0 for 1 + 1 - 2 (S 4) */
    g = moects__encl_gemm_consts(2, 1, 0.0, &c24);
    v = moects__encl_gemm_iv(3.0 + 0x1p-40, 3.0, 0.0, 0, &g);
    cr_assert(v.lo == 3.0f && v.hi == 3.0f);
    v = moects__encl_gemm_iv(0.0, 4.0, 0.0, 0, &g);
    cr_assert(v.lo == 0.0f && v.hi == 0.0f && !signbit(v.lo) && !signbit(v.hi));
    v = moects__encl_gemm_iv(1.0, 1.0, 0.0, -30, &g); /* 1 + 2^-30 - 2^-30: S >= 2^(24 - 30) */
    cr_assert(v.lo < 1.0f && v.hi > 1.0f, "not on a 24-bit grid: the bound");
}

/* Interval operations: corners, the special states, steps in ordered floats. */
Test(fused_encl_pieces, interval_ops)
{
    const moects__ivf a = {-1.0f, 2.0f}, b = {3.0f, 4.0f}, z = {-1.0f, 1.0f}, inf = {INFINITY, INFINITY};
    moects__ivf v = moects__ivf_mul(a, b);
    cr_assert(v.lo == -4.0f && v.hi == 8.0f);
    v = moects__ivf_div(b, a);
    cr_assert(moects__ivf_is_top(v), "a divisor through 0");
    v = moects__ivf_div((moects__ivf){1.0f, 1.0f}, (moects__ivf){3.0f, 3.0f});
    cr_assert(v.lo == 1.0f / 3.0f && v.hi == v.lo, "points: the FP32 operation itself");
    cr_assert(moects__ivf_is_top(moects__ivf_mul(z, inf)), "0 * Inf for some, +-Inf for others");
    cr_assert(moects__ivf_is_nan(moects__ivf_mul((moects__ivf){0.0f, 0.0f}, inf)), "0 * Inf for all: NaN");
    cr_assert(moects__ivf_is_nan(moects__ivf_add(moects__ivf_top(), moects__ivf_point(NAN))), "NaN beats top");
    cr_assert(moects__ivf_is_top(moects__ivf_add(moects__ivf_top(), b)));
    v = moects__ivf_bf16((moects__ivf){1.0f + 0x1p-8f - 0x1p-20f, 1.0f + 0x1p-8f + 0x1p-20f});
    cr_assert(v.lo == 1.0f && v.hi == 1.0f + 0x1p-7f, "across a BF16 midpoint: both neighbours");
    v = moects__ivf_fma((moects__ivf){1.0f, 2.0f}, -2.0f, (moects__ivf){0.5f, 1.0f});
    cr_assert(v.lo == -3.5f && v.hi == -1.0f);
    cr_assert(moects__encl_step(1.0f, -1) == 1.0f - 0x1p-24f && moects__encl_step(1.0f, 2) == 1.0f + 0x1p-22f);
    cr_assert(moects__encl_step(0.0f, -1) == -0x1p-149f && moects__encl_step(-0.0f, 1) == 0x1p-149f);
    cr_assert(moects__encl_step(0x1.fffffep127f, 1) == INFINITY && moects__encl_step(INFINITY, 3) == INFINITY);
    cr_assert(moects__encl_step(INFINITY, -1) == 0x1.fffffep127f && isnan(moects__encl_step(NAN, 1)));
}

/* ---- tiny layers by hand ---- */
/* T = 1, k = 1, H = 3, I = 1, E = 1, silu, FP32 everywhere, weight 1 in the combine: x = [1, 2, 1],
 * gate row [0.5, 0.25, 2^-30] (g = 1 + 2^-30 exactly, FP32 1), up row [1, 1, 0] (u = 3), W2 rows
 * [1], [0.5], [0]. In FP32 with a correctly rounded exp (worked with Python's decimal module and float32
 * packing):
 *   e = expf(-1) = 0x1.78b564p-2, d = 1 + e = 0x1.5e2d58p+0, s = 1 / d = 0x1.764d5p-1,
 *   a = s * 3 = 0x1.18b9fcp+1; y = [a, a / 2, 0] (exact products), out = y (fmaf(y, 1, 0)).
 * bits 60: every GEMM's slack (gamma(4, 2^-60) S plus the dgemm's 2^-50 S) is far below half an
 * FP32 ULP of g, u, y, so the enclosure is that point. bits 24 (FP32): g within gamma(4, 2^-24) S
 * ~ 4 2^-24 of 1 + 2^-30, so g in [1 - 2^-22, 1 + 2^-22] (floats 2^-24 apart below 1, 2^-23
 * above); u's products 1, 2, 0 sit on a grid any order adds exactly: u = 3. silu is increasing
 * there, s' ~ 0.93: s within ~ 7.5 2^-24 plus 2 roundings (2^-25 each), a = 3 s within ~ 25 2^-24
 * plus a rounding of 2^-23: relative < 14 2^-24; GEMM2 (K = 1, an interval input) adds
 * gamma(2, 2^-24) each side and the output rounding: below 2^-19 relative; asserted: 2^-17. */
static void silu_layer(layer *L)
{
    lay_init(L, 1, 1, 3, 1, 1, MOECTS_ACT_SILU, MOECTS_LAYER_BF16);
    set_recipe(L, MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=combine)");
    set_x(L, 0, 0, 1.0f), set_x(L, 0, 1, 2.0f), set_x(L, 0, 2, 1.0f);
    set_w13(L, 0, 0, 0, 0.5f), set_w13(L, 0, 0, 1, 0.25f), set_w13(L, 0, 0, 2, 0x1p-30f);
    set_w13(L, 0, 1, 0, 1.0f), set_w13(L, 0, 1, 1, 1.0f);
    set_w2(L, 0, 0, 0, 1.0f), set_w2(L, 0, 1, 0, 0.5f);
    L->w[0] = 1.0f;
}

Test(fused_encl_hand, silu_layer)
{
    const float want[3] = {0x1.18b9fcp+1f, 0x1.18b9fcp+0f, 0.0f};
    layer L;
    silu_layer(&L);
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    for (int h = 0; h < 3; h++) cr_assert_eq(at(&L, L.out, h), want[h], "the exact reference agrees");
    moects_layer_claim c60 = {60, 0, 0};
    moects_layer_tightness t;
    enclose(&L, &c60, &t);
    for (int h = 0; h < 3; h++) cr_assert(at(&L, L.lo, h) == want[h] && at(&L, L.hi, h) == want[h]);
    cr_assert(t.elements == 3 && t.wide == 0 && t.max_ulps == 0.0 && t.nan == 0 && t.unbounded == 0,
              "%lld %lld %g %lld %lld %lld", (long long)t.elements, (long long)t.wide, t.max_ulps, (long long)t.nan,
              (long long)t.unbounded, (long long)t.narrow_rowmax);
    enclose(&L, &FP32_CLAIM, &t);
    for (int h = 0; h < 2; h++) {
        const float lo = at(&L, L.lo, h), hi = at(&L, L.hi, h);
        cr_assert(lo <= want[h] && want[h] <= hi, "[%a, %a] holds %a", (double)lo, (double)hi, (double)want[h]);
        cr_assert(hi - lo > 0.0f && hi - lo <= 0x1p-17f * want[h], "width %a", (double)(hi - lo));
    }
    cr_assert(at(&L, L.lo, 2) == 0.0f && at(&L, L.hi, 2) == 0.0f, "every term 0: +0 in every order");
    cr_assert(t.wide == 2 && t.max_ulps <= 128.0);
    lay_free(&L);
}

/* An FP8 intermediate whose amax element may round either way. relu2, fp8_token (one scale per
 * row, s = amax / 448), g1=bf16, act=bf16 (relu2's square), slot and out FP32, W2 = identity.
 * x = [1, 1, 1, 1]; W13 row 0 = [1, 2^-8, 2^-24, 2^-40], row 1 = [0.5, 0, 0, 0].
 * Row 0's exact sum 1 + 2^-8 + 2^-24 + 2^-40 lies just above the FP32 tie 1 + 2^-8 + 2^-24: the
 * exact GEMM gives FP32 1 + 2^-8 + 2^-23, BF16 1 + 2^-7. An FP32 kernel adding ((1 + 2^-24) +
 * 2^-40) + 2^-8 loses both small terms to ties-to-even: 1 + 2^-8, the BF16 tie, BF16 1. Worked
 * with Python (decimal, float32 packing):
 *   g0 = 1:        a = [1, 0.25], amax 1, s = fl(1/448) = 0x1.24924ap-9, q = [448, 112] (1/s =
 *                  447.99997, 0.25/s = 111.99999), y = fl(q s) = [1, 0.25];
 *   g0 = 1 + 2^-7: a0 = (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14, BF16 1.015625 = amax,
 *                  s = fl(1.015625/448) = 0x1.292492p-9, q = [448, e4m3(110.277) = 112],
 *                  y = [1.015625, 0.25390625].
 * The first is the FP32 kernel's (computed here in that order), the second the exact reference's.
 * Moving one group's amax one BF16 ULP moves the other element's m by 1.5%: the enclosure must
 * hold both, the scale as an interval. With bits 60 the GEMM is pinned: the exact outcome only. */
static void fp8_tie_layer(layer *L)
{
    lay_init(L, 1, 1, 4, 2, 1, MOECTS_ACT_RELU2, MOECTS_LAYER_BF16);
    set_recipe(L, MOECTS_LAYER_RECIPE_V1 "(mid=fp8_token,slot=f32)");
    for (int k = 0; k < 4; k++) set_x(L, 0, k, 1.0f);
    set_w13(L, 0, 0, 0, 1.0f), set_w13(L, 0, 0, 1, 0x1p-8f), set_w13(L, 0, 0, 2, 0x1p-24f);
    set_w13(L, 0, 0, 3, 0x1p-40f), set_w13(L, 0, 1, 0, 0.5f);
    set_w2(L, 0, 0, 0, 1.0f), set_w2(L, 0, 1, 1, 1.0f);
    L->w[0] = 1.0f;
}

Test(fused_encl_hand, fp8_amax_either_way)
{
    const float A[2] = {1.0f, 0.25f}, B[2] = {1.015625f, 0.25390625f};
    volatile float small = 0x1p-24f, tiny = 0x1p-40f, mid = 0x1p-8f;
    const float kernel_g0 = ((1.0f + small) + tiny) + mid;
    cr_assert(kernel_g0 == 1.0f + 0x1p-8f && bfr0(kernel_g0) == 1.0f, "the FP32 order: the BF16 tie, 1");
    layer L;
    fp8_tie_layer(&L);
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    for (int h = 0; h < 2; h++) cr_assert_eq(at(&L, L.out, h), B[h], "the exact reference: outcome B");
    moects_layer_tightness t;
    enclose(&L, &FP32_CLAIM, &t);
    for (int h = 0; h < 2; h++) {
        const float lo = at(&L, L.lo, h), hi = at(&L, L.hi, h);
        cr_assert(lo <= A[h] && B[h] <= hi, "out[%d] in [%a, %a] holds %a and %a", h, (double)lo, (double)hi,
                  (double)A[h], (double)B[h]);
        cr_assert(hi - lo < 2.0f * (B[h] - A[h]), "and not much more: [%a, %a]", (double)lo, (double)hi);
    }
    moects_layer_claim c60 = {60, 0, 0};
    enclose(&L, &c60, &t);
    for (int h = 0; h < 2; h++) cr_assert(at(&L, L.lo, h) == B[h] && at(&L, L.hi, h) == B[h], "pinned: B");
    lay_free(&L);
}

/* ---- random layers ---- */
typedef struct {
    moects_activation act;
    moects_mid_format mid;
    moects_weight_pos wp;
    moects_layer_format f;
    moects_combine comb;
    int64_t T, k, H, I, E; /* 0: random */
} cfg;

static void gen_recipe(layer *L, const cfg *c)
{
    moects_layer_recipe *r = &L->r;
    r->w13 = c->act == MOECTS_ACT_RELU2 ? MOECTS_W13_GATE_UP : (moects_w13_order)(rnd() % 4);
    r->g1_bf16 = (int)(rnd() % 2), r->act_bf16 = (int)(rnd() % 2), r->sig_rcp = (int)(rnd() % 2);
    r->mid = c->mid, r->scale_ue8m0 = (int)(rnd() % 2) || c->mid == MOECTS_MID_MXFP8;
    r->weight = c->wp, r->w_bf16 = (int)(rnd() % 2), r->slot_bf16 = (int)(rnd() % 2);
    r->combine = c->comb;
}

static void gen_weights(layer *L, int wlo, int whi)
{
    const int64_t n13 = L->s.E * L->N1 * L->s.H, n2 = L->s.E * L->s.H * L->s.inter;
    if (L->s.format == MOECTS_LAYER_BF16) {
        for (int64_t i = 0; i < n13; i++) ((uint16_t *)L->w13)[i] = r_bf16(wlo, whi);
        for (int64_t i = 0; i < n2; i++) ((uint16_t *)L->w2)[i] = r_bf16(wlo, whi);
        return;
    }
    for (int64_t i = 0; i < n13 / 2; i++) L->w13[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < n2 / 2; i++) L->w2[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < n13 / 32; i++) L->w13s[i] = (uint8_t)(125 + wlo + rnd() % (uint32_t)(whi - wlo + 1));
    for (int64_t i = 0; i < n2 / 32; i++) L->w2s[i] = (uint8_t)(125 + wlo + rnd() % (uint32_t)(whi - wlo + 1));
}

static void gen_layer(layer *L, const cfg *c)
{
    const int64_t I = pick(c->I, c->mid == MOECTS_MID_FP8_128 ? 128 : 32 * (1 + (int64_t)(rnd() % 2)));
    lay_init(L, pick(c->T, 1 + rnd() % 4), c->wp == MOECTS_WEIGHT_INPUT ? 1 : pick(c->k, 1 + rnd() % 4),
             pick(c->H, 32 * (1 + (int64_t)(rnd() % 2))), I, pick(c->E, 3), c->act, c->f);
    moects_fused_moe_shape *s = &L->s;
    s->out_dtype = rnd() % 2 ? MOECTS_BF16 : MOECTS_F32;
    s->act_limit = c->act == MOECTS_ACT_GPT_OSS ? 7.0f : 10.0f;
    s->act_alpha = 1.702f;
    if (c->act == MOECTS_ACT_SITU) /* Kimi K3's a and L, or a 1 / a not a power of two, or no L */
        s->act_alpha = rnd() % 2 ? 4.0f : 1.702f, s->act_limit = rnd() % 3 ? 25.0f : 0.0f;
    gen_recipe(L, c);
    if (rnd() % 3 == 0) {
        s->has_expert_map = 1, s->E_global = s->E + 2, L->a.expert_map = L->map;
        for (int64_t i = 0; i < s->E_global; i++) L->map[i] = (int32_t)(rnd() % (uint32_t)(s->E + 1)) - 1;
    }
    if (rnd() % 2) {
        use_bias(L);
        for (int64_t i = 0; i < s->E * L->N1; i++) L->b13[i] = (float)((int)(rnd() % 2001) - 1000) / 1024.0f;
        for (int64_t i = 0; i < s->E * s->H; i++) L->b2[i] = (float)((int)(rnd() % 2001) - 1000) / 1024.0f;
    }
    const int xlo = -9 + (int)(rnd() % 8); /* GEMM1 outputs from ~0.01 to past the clamps */
    for (int64_t i = 0; i < s->T * s->H; i++) L->x[i] = r_bf16(xlo, xlo + 3);
    const int64_t span = s->has_expert_map ? s->E_global + 2 : s->E + 2; /* ids from -1 to past the end */
    for (int64_t i = 0; i < s->T * s->k; i++) {
        L->ids[i] = (int32_t)(rnd() % (uint32_t)span) - 1;
        L->w[i] = 0.05f + (float)(rnd() >> 8) * 0x1p-24f;
    }
    gen_weights(L, -4, 0);
}

/* ---- a simulated admissible kernel, from the definition (ref/moects_layer.h), in FP32 ---- */
static float bfr(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

static float s_weight(const layer *L, int64_t slot) { return L->r.w_bf16 ? bfr(L->w[slot]) : L->w[slot]; }

static int64_t s_expert(const layer *L, int64_t slot)
{
    const int64_t id = L->ids[slot];
    if (!L->s.has_expert_map) return id >= 0 && id < L->s.E ? id : -1;
    return id >= 0 && id < L->s.E_global && L->map[id] >= 0 ? L->map[id] : -1;
}

/* W13 (which 0) or W2 (1) element [e][n][k] as a float (MXFP4: e2m1 * 2^(scale - 127), 0xFF NaN). */
static float s_wval(const layer *L, int which, int64_t e, int64_t n, int64_t k)
{
    static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const int64_t N = which ? L->s.H : L->N1, K = which ? L->s.inter : L->s.H, row = e * N + n;
    if (L->s.format == MOECTS_LAYER_BF16) return moects__bf16_to_f32(((const uint16_t *)(which ? L->w2 : L->w13))[row * K + k]);
    const uint8_t code = ((which ? L->w2 : L->w13)[row * K / 2 + k / 2] >> (4 * (k & 1))) & 0xF;
    const uint8_t sc = (which ? L->w2s : L->w13s)[row * K / 32 + k / 32];
    const float v = (code & 8) ? -e2m1[code & 7] : e2m1[code & 7];
    return sc == 0xFF ? NAN : ldexpf(v, sc - 127);
}

/* sum of t[K] in FP32 in a random order, split into 1 to 4 consecutive pieces summed apart (split-K),
 * the partials then added: one admissible order of class (24, RNE). t is shuffled in place. */
static float s_sum(float *t, int64_t K)
{
    for (int64_t i = K - 1; i > 0; i--) {
        const int64_t j = (int64_t)(rnd() % (uint32_t)(i + 1));
        const float v = t[i];
        t[i] = t[j], t[j] = v;
    }
    const int64_t pieces = 1 + rnd() % 4;
    float tot = 0.0f;
    for (int64_t p = 0; p < pieces; p++) {
        float acc = 0.0f;
        for (int64_t i = p * K / pieces; i < (p + 1) * K / pieces; i++) acc += t[i];
        tot += acc;
    }
    return tot;
}

/* f(x) correctly rounded, then moved up to ulp floats either way at random. */
static float s_fn(float (*f)(float), float x, uint32_t ulp)
{
    float v = f(x);
    const int steps = ulp ? (int)(rnd() % (2 * ulp + 1)) - (int)ulp : 0;
    for (int i = 0; i < abs(steps); i++) v = nextafterf(v, steps > 0 ? INFINITY : -INFINITY);
    return v;
}

static float s_sigmul(const layer *L, float x, float z, uint32_t ulp)
{
    const float e = s_fn(moects_cr_expf, -z, ulp);
    return L->r.sig_rcp ? x * (1.0f / (1.0f + e)) : x / (1.0f + e);
}

/* The activation (ref/moects_layer.h's definition) with the kernel's exp/tanh/erf. */
static float s_act(const layer *L, float g, float u, uint32_t ulp)
{
    const float Lim = L->s.act_limit;
    float ga;
    switch (L->s.activation) {
    case MOECTS_ACT_RELU2: {
        const float m = g > 0.0f ? g : (g == g ? 0.0f : g);
        return L->r.act_bf16 ? bfr(m * m) : m * m;
    }
    case MOECTS_ACT_GELU_TANH: {
        const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), cube = g * g * g;
        ga = (0.5f * g) * (1.0f + s_fn(moects_cr_tanhf, beta * (g + 0.044715f * cube), ulp));
        break;
    }
    case MOECTS_ACT_GELU_ERF: ga = (g * 0.5f) * (1.0f + s_fn(moects_cr_erff, g * (float)M_SQRT1_2, ulp)); break;
    case MOECTS_ACT_GPT_OSS: {
        g = g > Lim ? Lim : g;
        u = u > Lim ? Lim : (u < -Lim ? -Lim : u);
        float glu = s_sigmul(L, g, g * L->s.act_alpha, ulp);
        return (u + 1.0f) * (L->r.act_bf16 ? bfr(glu) : glu);
    }
    case MOECTS_ACT_SILU_CLAMP:
        g = g > Lim ? Lim : g;
        u = u > Lim ? Lim : (u < -Lim ? -Lim : u);
        ga = s_sigmul(L, g, g, ulp);
        break;
    case MOECTS_ACT_SITU: {
        const float a = L->s.act_alpha, inv_a = 1.0f / a;
        ga = s_sigmul(L, a * s_fn(moects_cr_tanhf, g * inv_a, ulp), g, ulp);
        if (Lim > 0.0f) {
            const float inv_l = 1.0f / Lim;
            u = Lim * s_fn(moects_cr_tanhf, u * inv_l, ulp);
        }
        break;
    }
    default: ga = s_sigmul(L, g, g, ulp); break;
    }
    return (L->r.act_bf16 ? bfr(ga) : ga) * u;
}

/* Rows of gate i and up i in W13's order. */
static void s_rows(moects_w13_order o, int64_t I, int64_t i, int64_t *gr, int64_t *ur)
{
    if (o == MOECTS_W13_UP_GATE) *ur = i, *gr = I + i;
    else if (o == MOECTS_W13_INTERLEAVE1) *gr = 2 * i, *ur = 2 * i + 1;
    else if (o == MOECTS_W13_INTERLEAVE8) *gr = 16 * (i / 8) + i % 8, *ur = *gr + 8;
    else *gr = i, *ur = I + i;
}

/* An FP8 group's scale: div fmaxf(amax, 1e-10f) / 448.0f; ue8m0 the smallest 2^x (x in [-127, 127])
 * with 448 2^x >= amax. NaN amax: NaN. */
static float s_scale(float amax, int ue8m0)
{
    if (amax != amax) return NAN;
    if (!ue8m0) return fmaxf(amax, 1e-10f) / 448.0f;
    for (int x = -127; x < 127; x++)
        if (448.0 * ldexp(1.0, x) >= (double)amax) return ldexpf(1.0f, x);
    return 0x1p127f;
}

/* GEMM2's y[H] of a slot from the activation a[I], as an FP8 kernel does it: per group the partial
 * sum of dec(q) W2 in FP32, times the group's scale, the groups added in a random order. */
static void s_gemm2_fp8(const layer *L, int64_t e, const float *a, float *y, float *t)
{
    const int64_t I = L->s.inter, H = L->s.H;
    const int64_t G = L->r.mid == MOECTS_MID_FP8_TOKEN ? I : L->r.mid == MOECTS_MID_FP8_128 ? 128 : 32, ng = I / G;
    const int ue8m0 = L->r.scale_ue8m0 || L->r.mid == MOECTS_MID_MXFP8;
    float *q = malloc((size_t)(I + 2 * ng) * sizeof *q), *sg = q + I, *part = sg + ng;
    for (int64_t g = 0; g < ng; g++) {
        float amax = 0.0f;
        int nan = 0;
        for (int64_t i = g * G; i < (g + 1) * G; i++) {
            const float v = fabsf(bfr(a[i]));
            nan |= v != v;
            amax = v > amax ? v : amax;
        }
        sg[g] = s_scale(nan ? NAN : amax, ue8m0);
        for (int64_t i = g * G; i < (g + 1) * G; i++) q[i] = moects__e4m3_decode(moects__e4m3_encode(bfr(a[i]) / sg[g]));
    }
    for (int64_t h = 0; h < H; h++) {
        for (int64_t g = 0; g < ng; g++) {
            for (int64_t i = 0; i < G; i++) t[i] = q[g * G + i] * s_wval(L, 1, e, h, g * G + i);
            part[g] = s_sum(t, G) * sg[g];
        }
        y[h] = s_sum(part, ng);
    }
    free(q);
}

/* One valid slot's per-slot output y[H] (epilogue included). */
static void s_slot(const layer *L, int64_t sl, int64_t e, uint32_t ulp, float *y)
{
    const int64_t H = L->s.H, I = L->s.inter, N1 = L->N1;
    const float w = s_weight(L, sl);
    float *t = calloc((size_t)(2 * H + 2 * I + N1), sizeof *t), *g1 = t + H + I, *a = g1 + N1, *hx = a + I;
    for (int64_t k = 0; k < H; k++) {
        const float v = moects__bf16_to_f32(L->x[(sl / L->s.k) * H + k]);
        hx[k] = L->r.weight == MOECTS_WEIGHT_INPUT ? bfr(v * w) : v;
    }
    for (int64_t n = 0; n < N1; n++) {
        for (int64_t k = 0; k < H; k++) t[k] = hx[k] * s_wval(L, 0, e, n, k);
        float v = s_sum(t, H);
        if (L->s.has_bias) v = v + L->b13[e * N1 + n];
        g1[n] = L->r.g1_bf16 ? bfr(v) : v;
    }
    for (int64_t i = 0; i < I; i++) {
        int64_t gr = i, ur = i;
        if (L->s.activation != MOECTS_ACT_RELU2) s_rows(L->r.w13, I, i, &gr, &ur);
        a[i] = s_act(L, g1[gr], g1[ur], ulp);
        if (L->r.weight == MOECTS_WEIGHT_ACT) a[i] = a[i] * w;
    }
    if (L->r.mid == MOECTS_MID_BF16 || L->r.mid == MOECTS_MID_F32) {
        for (int64_t h = 0; h < H; h++) {
            for (int64_t i = 0; i < I; i++) t[i] = (L->r.mid == MOECTS_MID_BF16 ? bfr(a[i]) : a[i]) * s_wval(L, 1, e, h, i);
            y[h] = s_sum(t, I);
        }
    } else {
        s_gemm2_fp8(L, e, a, y, t);
    }
    for (int64_t h = 0; h < H; h++) {
        float v = y[h];
        if (L->s.has_bias) v = v + L->b2[e * H + h];
        if (L->r.weight == MOECTS_WEIGHT_GEMM2) v = v * w;
        y[h] = L->r.slot_bf16 ? bfr(v) : v;
    }
    free(t);
}

/* The whole layer into L->sim: f32_any adds the slots in a random order. */
static void simulate(layer *L, uint32_t ulp)
{
    const int64_t T = L->s.T, k = L->s.k, H = L->s.H;
    float *y = malloc((size_t)(k * H + 1) * sizeof *y);
    int64_t *ord = malloc((size_t)(k + 1) * sizeof *ord);
    for (int64_t t = 0; t < T; t++) {
        int64_t n = 0;
        for (int64_t j = 0; j < k; j++) {
            const int64_t e = s_expert(L, t * k + j);
            if (e >= 0) s_slot(L, t * k + j, e, ulp, y + j * H), ord[n++] = j;
        }
        for (int64_t i = n - 1; i > 0 && L->r.combine == MOECTS_COMBINE_F32_ANY; i--) {
            const int64_t q = (int64_t)(rnd() % (uint32_t)(i + 1)), v = ord[i];
            ord[i] = ord[q], ord[q] = v;
        }
        for (int64_t h = 0; h < H; h++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < n; i++) {
                const float v = L->r.weight == MOECTS_WEIGHT_COMBINE ? fmaf(y[ord[i] * H + h], s_weight(L, t * k + ord[i]), acc)
                                                                     : acc + y[ord[i] * H + h];
                acc = L->r.combine == MOECTS_COMBINE_BF16_CHAIN ? bfr(v) : v;
            }
            if (L->s.out_dtype == MOECTS_BF16) ((uint16_t *)L->sim)[t * H + h] = moects__bf16_from_f32(acc);
            else ((float *)L->sim)[t * H + h] = acc;
        }
    }
    free(y), free(ord);
}

/* ---- checks ---- */
/* got [T*H] (out_dtype) inside [lo, hi] everywhere: NaN where the enclosure says NaN (and only
 * there or where it makes no claim); the count of elements checked against a bounded interval. */
static int64_t check_inside(layer *L, const void *got, const char *what, const moects_layer_claim *cl)
{
    char rs[256];
    moects__layer_recipe_format(&L->r, rs, sizeof rs);
    int64_t n = 0;
    for (int64_t i = 0; i < L->s.T * L->s.H; i++) {
        const float lo = at(L, L->lo, i), hi = at(L, L->hi, i), v = at(L, got, i);
        if (lo == -INFINITY && hi == INFINITY) continue;
        cr_assert((lo != lo) == (v != v) && (v != v || (lo <= v && v <= hi)),
                  "%s %s act %d fmt %d T %lld k %lld H %lld I %lld bias %d out %s claim (%u, %d, %u): out[%lld] = %a "
                  "outside [%a, %a]",
                  what, rs, (int)L->s.activation, (int)L->s.format, (long long)L->s.T, (long long)L->s.k,
                  (long long)L->s.H, (long long)L->s.inter, L->s.has_bias, L->s.out_dtype == MOECTS_BF16 ? "bf16" : "f32",
                  cl->bits, cl->truncation, cl->fn_ulp, (long long)i, (double)v, (double)lo, (double)hi);
        n++;
    }
    return n;
}

/* The exact reference's output (f32_any: the slot order, one admissible order) into L->out. */
static void exact(layer *L)
{
    moects_layer_recipe r = L->r;
    if (r.combine == MOECTS_COMBINE_F32_ANY) r.combine = MOECTS_COMBINE_F32_SLOTS;
    cr_assert_eq(moects__ref_fused_moe(&L->s, &L->a, &r), 0);
}

/* Every activation x intermediate x weight position x combine x format, with
 * the other recipe keys, EP maps, biases, shapes and out dtypes at random: the enclosure under
 * FP32 accumulation (RNE, or truncation to 22 bits) with exp/tanh/erf exact or 1-2 ulps off holds
 * the exact reference and two runs of the simulated kernel; the claims' slack is nonzero, so the
 * enclosure is wider than a point on most elements. */
Test(fused_encl_random, holds_exact_and_simulated)
{
    uint64_t seed = 4000;
    int64_t checked = 0, wide = 0, total = 0;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid++)
            for (int wp = 0; wp <= MOECTS_WEIGHT_COMBINE; wp++)
                for (int comb = 0; comb <= MOECTS_COMBINE_F32_ANY; comb++)
                    for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_MXFP4; f++) {
                        rng_state = ++seed * 7919;
                        cfg c = {(moects_activation)act, (moects_mid_format)mid, (moects_weight_pos)wp,
                                 (moects_layer_format)f, (moects_combine)comb, 0, 0, 0, 0, 0};
                        layer L;
                        gen_layer(&L, &c);
                        const moects_layer_claim cl = rnd() % 4 ? (moects_layer_claim){24, 0, rnd() % 3}
                                                                : (moects_layer_claim){22, 1, 1};
                        moects_layer_tightness t;
                        enclose(&L, &cl, &t);
                        exact(&L);
                        checked += check_inside(&L, L.out, "exact", &cl);
                        for (int run = 0; run < 2; run++) {
                            simulate(&L, cl.fn_ulp);
                            check_inside(&L, L.sim, "simulated", &cl);
                        }
                        wide += t.wide, total += t.elements;
                        lay_free(&L);
                    }
    cr_log_info("holds_exact_and_simulated: %lld elements checked of %lld, %lld wider than 1 ULP",
                (long long)checked, (long long)total, (long long)wide);
    cr_assert(checked > total / 2 && wide > 0);
}

/* A layer whose GEMMs are exact in any FP32 order: x and W13 small integers (|g| <= 64 * 16), W2
 * one 1 per row (y_h = m_(h mod I)), top-1, FP32 from GEMM1 on. Only exp/tanh/erf can move. */
static void exact_gemm_layer(layer *L, moects_activation act, int rcp)
{
    lay_init(L, 4, 1, 64, 32, 2, act, MOECTS_LAYER_BF16);
    set_recipe(L, rcp ? MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=combine,sig=rcp)"
                      : MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=combine)");
    L->s.act_limit = act == MOECTS_ACT_SITU ? 25.0f : 7.0f, L->s.act_alpha = act == MOECTS_ACT_SITU ? 4.0f : 1.702f;
    for (int64_t i = 0; i < L->s.T * L->s.H; i++) L->x[i] = bfx((float)((int)(rnd() % 9) - 4) / 8.0f);
    for (int64_t e = 0; e < 2; e++)
        for (int64_t n = 0; n < L->N1; n++)
            for (int64_t k = 0; k < L->s.H; k++) set_w13(L, e, n, k, (float)((int)(rnd() % 5) - 2));
    for (int64_t e = 0; e < 2; e++)
        for (int64_t h = 0; h < L->s.H; h++) set_w2(L, e, h, h % L->s.inter, 1.0f);
    for (int64_t t = 0; t < L->s.T; t++) L->ids[t] = (int32_t)(t % 2), L->w[t] = 1.0f;
}

/* On exact_gemm_layer: with bits 64 and fn_ulp 0 the enclosure is the exact reference's point on
 * every element; with fn_ulp 2 it holds a kernel whose exp/tanh/erf are 2 ulps off, and that kernel
 * leaves the fn_ulp 0 enclosure somewhere (the allowance is what admits it). */
Test(fused_encl_random, function_ulps)
{
    const moects_layer_claim c0 = {64, 0, 0}, c2 = {64, 0, 2};
    int64_t outside = 0;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int rcp = 0; rcp < 2; rcp++) {
            if (act == MOECTS_ACT_RELU2) continue;
            layer L;
            rng_state = 600 + (uint64_t)(act * 2 + rcp);
            exact_gemm_layer(&L, (moects_activation)act, rcp);
            exact(&L);
            enclose(&L, &c0, NULL);
            for (int64_t i = 0; i < L.s.T * L.s.H; i++)
                cr_assert(at(&L, L.lo, i) == at(&L, L.out, i) && at(&L, L.hi, i) == at(&L, L.out, i),
                          "act %d: [%a, %a] is not the point %a", act, (double)at(&L, L.lo, i), (double)at(&L, L.hi, i),
                          (double)at(&L, L.out, i));
            for (int run = 0; run < 4; run++) {
                simulate(&L, 2);
                for (int64_t i = 0; i < L.s.T * L.s.H; i++) outside += at(&L, L.sim, i) != at(&L, L.out, i);
            }
            enclose(&L, &c2, NULL);
            for (int run = 0; run < 4; run++) {
                simulate(&L, 2);
                check_inside(&L, L.sim, "fn 2 ulps", &c2);
            }
            lay_free(&L);
        }
    cr_log_info("function_ulps: %lld simulated outputs off the exact point", (long long)outside);
    cr_assert(outside > 0);
}

/* ---- how tight ---- */
/* Random layers under bits 64 (the GEMMs' slack ~2^-50 S, the dgemms' own) and fn_ulp 0: the
 * enclosure is the exact reference's point except where a GEMM's exact value lies within that
 * slack of an FP32 rounding boundary (BF16 data make exact ties common: 1 in ~100 sums) and the
 * flip travels to the output; at least 90% of the elements are that point. */
Test(fused_encl_tight, near_exact_class_is_the_point)
{
    const moects_layer_claim c64 = {64, 0, 0};
    uint64_t seed = 7000;
    int64_t point = 0, total = 0;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid++)
            for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_MXFP4; f++) {
                rng_state = ++seed * 7919;
                cfg c = {(moects_activation)act, (moects_mid_format)mid, (moects_weight_pos)(rnd() % 4),
                         (moects_layer_format)f, (moects_combine)(rnd() % 2), 0, 0, 0, 0, 0};
                layer L;
                gen_layer(&L, &c);
                enclose(&L, &c64, NULL);
                exact(&L);
                check_inside(&L, L.out, "exact", &c64);
                for (int64_t i = 0; i < L.s.T * L.s.H; i++) {
                    const float x = at(&L, L.out, i);
                    point += (at(&L, L.lo, i) == x && at(&L, L.hi, i) == x) || (x != x && at(&L, L.lo, i) != at(&L, L.lo, i));
                }
                total += L.s.T * L.s.H;
                lay_free(&L);
            }
    cr_log_info("near_exact_class_is_the_point: %lld of %lld elements", (long long)point, (long long)total);
    cr_assert(point >= total * 9 / 10, "%lld of %lld", (long long)point, (long long)total);
}

/* An exact-friendly layer: H 64, I 32, top-4 of 4 experts, BF16 everywhere (the default recipe),
 * FP32 accumulation. A priori: GEMM1's bound ~ (H/2) u S ~ 32 2^-24 * 5 |g| ~ 1e-5 |g| (S / |g| ~
 * 0.64 sqrt(64) for random signs), so g1's BF16 rounding flips for ~0.5% of g1 values; a flipped m
 * (one BF16 ULP, 2^-8 relative) moves y by ~2^-9 |m_i W2_i| ~ 2^-9 / 32 of S2 per flip, GEMM2's own
 * bound ~ 16 u S2: the output interval before its BF16 rounding is far below one ULP of the
 * element, so it rounds to one value or two neighbours (a straddle, with probability ~ width / ULP,
 * a few percent). Every element of width 0 or one ULP below the row maximum's binade is narrower
 * than one ULP of the row maximum: at least half the elements are, with a wide margin. There the
 * exact output moved by that ULP, either way, leaves the enclosure; a kernel summing the slots in
 * BF16 (combine=bf16_chain) where FP32 was declared lands outside on some elements. */
Test(fused_encl_tight, one_ulp_of_the_row_max_leaves)
{
    cfg c = {MOECTS_ACT_SILU, MOECTS_MID_BF16, MOECTS_WEIGHT_GEMM2, MOECTS_LAYER_BF16, MOECTS_COMBINE_F32_SLOTS,
             16, 4, 64, 32, 4};
    layer L;
    rng_state = 91;
    gen_layer(&L, &c);
    set_recipe(&L, MOECTS_LAYER_RECIPE_V1);
    L.s.out_dtype = MOECTS_BF16;
    for (int64_t t = 0; t < L.s.T; t++)
        for (int64_t j = 0; j < 4; j++) L.ids[t * 4 + j] = (int32_t)j; /* every slot valid */
    moects_layer_tightness tg;
    enclose(&L, &FP32_CLAIM, &tg);
    exact(&L);
    check_inside(&L, L.out, "exact", &FP32_CLAIM);
    int64_t caught = 0, n = L.s.T * L.s.H;
    for (int64_t t = 0; t < L.s.T; t++) {
        float rowmax = 0.0f;
        for (int64_t h = 0; h < L.s.H; h++) rowmax = fmaxf(rowmax, fabsf(at(&L, L.out, t * L.s.H + h)));
        const float ulp = ldexpf(1.0f, ilogbf(rowmax) - 7);
        for (int64_t i = t * L.s.H; i < (t + 1) * L.s.H; i++) {
            const float x = at(&L, L.out, i), lo = at(&L, L.lo, i), hi = at(&L, L.hi, i);
            const float p = hi - x < x - lo ? x + ulp : x - ulp; /* towards the nearer end */
            caught += p < lo || p > hi;
        }
    }
    L.r.combine = MOECTS_COMBINE_BF16_CHAIN;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    int64_t chain_out = 0;
    for (int64_t i = 0; i < n; i++) chain_out += !(at(&L, L.out, i) >= at(&L, L.lo, i) && at(&L, L.out, i) <= at(&L, L.hi, i));
    cr_log_info("one_ulp_of_the_row_max_leaves: median width %g ULPs, max %g, narrow %lld of %lld; moved by one ULP "
                "of the row max: %lld outside; BF16 running sum: %lld outside",
                tg.median_ulps, tg.max_ulps, (long long)tg.narrow_rowmax, (long long)n, (long long)caught,
                (long long)chain_out);
    cr_assert(tg.narrow_rowmax >= n / 2 && caught >= tg.narrow_rowmax && chain_out > 0);
    lay_free(&L);
}

/* ---- situ's gate, not monotone ---- */
/* situ's gate f(g) = 4 tanh(g / 4) sigmoid(g) falls from 0 at g = 0 to a dip near g = -1.3 (about
 * -0.27: 4 tanh(-0.325) sigmoid(-1.3) = 4 (-0.314) (0.214)) and rises back towards 0 (f(-3) = 4
 * tanh(-0.75) sigmoid(-3), about -0.12): not monotone, so the ends of [-3, 0] alone would miss the
 * dip. The enclosure of g in [-3, 0] (u the point 1, L = 0, act f32) holds the exact reference at
 * every 2^12-th float of it and at the sweep's minimum, whose value lies below both ends' values;
 * with fn_ulp 2 it holds the simulated kernel (tanh and exp up to 2 ulps off) there too; its lower
 * end is within a sixth of the dip's depth of the dip. */
Test(fused_encl_hand, situ_gate_dip)
{
    layer L;
    memset(&L, 0, sizeof L);
    L.s.activation = MOECTS_ACT_SITU, L.s.act_alpha = 4.0f, L.s.act_limit = 0.0f;
    char err[160];
    cr_assert_eq(moects__layer_recipe_parse(MOECTS_LAYER_RECIPE_V1 "(act=f32)", &L.r, err, sizeof err), 0);
    const moects__ivf g = {-3.0f, 0.0f}, u = moects__ivf_point(1.0f);
    const moects__ivf e0 = moects__encl_act(&L.s, &L.r, 0, g, u), e2 = moects__encl_act(&L.s, &L.r, 2, g, u);
    const float f_lo = moects__fused_act(&L.s, &L.r, -3.0f, 1.0f), f_hi = moects__fused_act(&L.s, &L.r, 0.0f, 1.0f);
    float fmin = 0.0f;
    rng_state = 77;
    for (int64_t o = moects__encl_ord(-3.0f); o <= 0; o += 4096) {
        const float x = moects__encl_step(0.0f, o), f = moects__fused_act(&L.s, &L.r, x, 1.0f);
        cr_assert(f >= e0.lo && f <= e0.hi, "g %a: %a outside [%a, %a]", (double)x, (double)f, (double)e0.lo,
                  (double)e0.hi);
        const float sim = s_act(&L, x, 1.0f, 2);
        cr_assert(sim >= e2.lo && sim <= e2.hi, "g %a, fn 2 ulps: %a outside [%a, %a]", (double)x, (double)sim,
                  (double)e2.lo, (double)e2.hi);
        fmin = f < fmin ? f : fmin;
    }
    cr_log_info("situ_gate_dip: f(-3) %a, f(0) %a, dip %a, enclosure [%a, %a], fn 2: [%a, %a]", (double)f_lo,
                (double)f_hi, (double)fmin, (double)e0.lo, (double)e0.hi, (double)e2.lo, (double)e2.hi);
    cr_assert(fmin < -0.26f && fmin > -0.28f && f_lo > -0.13f && f_lo < -0.11f && f_hi == 0.0f, "the hand values");
    cr_assert(e0.lo <= fmin && e0.lo > fmin * (7.0f / 6.0f) && e0.hi >= 0.0f && e2.lo <= e0.lo && e2.hi >= e0.hi);
}

/* ---- NaN, Inf, refusals ---- */
/* An Inf and a NaN in x, a NaN in expert 1's W13 row 2, a -Inf (BF16) or NaN scale (MXFP4) in
 * expert 2's W2 row 0. */
static void make_special(layer *L)
{
    const int64_t H = L->s.H, I = L->s.inter, N1 = L->N1;
    L->x[3] = 0x7F80;
    if (L->s.T > 1) L->x[H + 5] = 0xFFC0;
    if (L->s.format == MOECTS_LAYER_BF16) {
        ((uint16_t *)L->w13)[(1 * N1 + 2) * H + 7] = 0x7FC0;
        ((uint16_t *)L->w2)[(2 * H + 0) * I + 3] = 0xFF80;
    } else {
        L->w13s[(1 * N1 + 2) * H / 32] = 0xFF;
        L->w2s[(2 * H + 0) * I / 32] = 0xFF;
    }
}

/* NaN where every admissible implementation gives NaN, and only there or where no claim is made: the
 * exact reference and the simulated kernel agree with the NaN-expected elements, and the rest of
 * each output stays inside. Tokens 0 and 1 (x's Inf and NaN) are NaN nearly everywhere; tokens 2 and
 * 3 only where W2's row 0 reaches them (and combine=f32_any makes no claim on a sum holding an Inf). */
Test(fused_encl_special, nan_and_inf)
{
    uint64_t seed = 9000;
    int64_t nan = 0, unb = 0, total = 0;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_MXFP4; f++)
            for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid += 2) {
                cfg c = {(moects_activation)act, (moects_mid_format)mid, MOECTS_WEIGHT_GEMM2, (moects_layer_format)f,
                         (moects_combine)(seed % 3), 4, 3, 64, 0, 3};
                static const int32_t ids[12] = {0, 1, 2, 0, 2, -1, 0, 2, 0, 2, -1, 0};
                layer L;
                rng_state = ++seed;
                gen_layer(&L, &c);
                memcpy(L.ids, ids, sizeof ids); /* tokens 2, 3: finite but for W2's column 0 */
                L.s.has_expert_map = 0, L.a.expert_map = NULL;
                make_special(&L);
                const moects_layer_claim cl = {24, 0, 1};
                moects_layer_tightness t;
                enclose(&L, &cl, &t);
                exact(&L);
                check_inside(&L, L.out, "exact", &cl);
                simulate(&L, 1);
                check_inside(&L, L.sim, "simulated", &cl);
                nan += t.nan, unb += t.unbounded, total += t.elements;
                lay_free(&L);
            }
    cr_log_info("nan_and_inf: %lld NaN expected, %lld unbounded of %lld", (long long)nan, (long long)unb, (long long)total);
    cr_assert(nan > 0 && nan < total * 3 / 4, "tokens 2 and 3 are finite but for column 0");
}

/* Refused: invalid shapes and claims, recipes the shape cannot take, situ with a <= 0 or L < 0;
 * taken: situ with Kimi K3's a and L, combine=f32_any
 * (no exact result, an enclosure), T = 0, k = 0 (every output +0). */
Test(fused_encl_special, refusals)
{
    layer L;
    lay_init(&L, 2, 2, 64, 32, 2, MOECTS_ACT_SILU, MOECTS_LAYER_MXFP4);
    const moects_layer_claim ok = {24, 0, 0}, bits1 = {1, 0, 0}, bits65 = {65, 0, 0}, tr2 = {24, 2, 0};
    moects_layer_tightness t;
#define ENCL(cl) moects__ref_fused_moe_enclosure(&L.s, &L.a, &L.r, cl, L.lo, L.hi, &t)
    cr_assert_eq(ENCL(&ok), 0);
    cr_assert_eq(ENCL(&bits1), -1);
    cr_assert_eq(ENCL(&bits65), -1);
    cr_assert_eq(ENCL(&tr2), -1);
    cr_assert_eq(ENCL(NULL), -1);
    L.r.combine = MOECTS_COMBINE_F32_ANY;
    cr_assert_eq(ENCL(&ok), 0, "combine in any order: enclosed");
    L.r.weight = MOECTS_WEIGHT_INPUT;
    cr_assert_eq(ENCL(&ok), -1, "weight on the input with k = 2");
    L.r.weight = MOECTS_WEIGHT_GEMM2, L.r.mid = MOECTS_MID_FP8_128;
    cr_assert_eq(ENCL(&ok), -1, "fp8_128 with I = 32");
    L.r.mid = MOECTS_MID_BF16, L.s.activation = MOECTS_ACT_SITU, L.s.act_alpha = 4.0f, L.s.act_limit = 25.0f;
    cr_assert_eq(ENCL(&ok), 0, "situ, Kimi K3's a and L");
    L.s.act_alpha = 0.0f;
    cr_assert_eq(ENCL(&ok), -1, "situ with a = 0");
    L.s.act_alpha = 4.0f, L.s.act_limit = -1.0f;
    cr_assert_eq(ENCL(&ok), -1, "situ with L < 0");
    L.s.activation = MOECTS_ACT_SILU, L.s.H = 48;
    cr_assert_eq(ENCL(&ok), -1, "MXFP4 with H % 32");
    L.s.H = 64;
    cr_assert_eq(moects__ref_fused_moe_enclosure(&L.s, &L.a, &L.r, &ok, NULL, L.hi, &t), -1, "no lo");
    L.s.k = 0;
    memset(L.lo, 0xFF, 4 * 128), memset(L.hi, 0xFF, 4 * 128);
    cr_assert_eq(ENCL(&ok), 0);
    for (int i = 0; i < 128; i++) cr_assert(at(&L, L.lo, i) == 0.0f && at(&L, L.hi, i) == 0.0f, "no slot: +0");
    cr_assert(t.elements == 128 && t.wide == 0 && t.narrow_rowmax == 128);
    L.s.T = 0;
    cr_assert_eq(ENCL(&ok), 0, "T = 0: nothing to do");
#undef ENCL
    lay_free(&L);
}

/* ---- the stages (moects__ref_fused_moe_enclosure_stages) ---- */
/* Per-stage buffers of a layer: intervals [rows][n] of the four stages, the exact reference's stages,
 * the accumulation check's inputs of g1 and y. */
typedef struct {
    float *g1l, *g1h, *al, *ah, *yl, *yh, *g1x, *ax, *yx;
    double *ml, *mh, *mx, *sx[2];
    float *sd[2], *ss[2];
} stage_bufs;

static void stages_alloc(const layer *L, stage_bufs *b)
{
    const size_t R = (size_t)(L->s.T * L->s.k) + 1, N1 = (size_t)L->N1, I = (size_t)L->s.inter, H = (size_t)L->s.H;
    float **f[] = {&b->g1l, &b->g1h, &b->g1x}, **fi[] = {&b->al, &b->ah, &b->ax}, **fh[] = {&b->yl, &b->yh, &b->yx};
    for (int i = 0; i < 3; i++) *f[i] = calloc(R * N1, 4), *fi[i] = calloc(R * I, 4), *fh[i] = calloc(R * H, 4);
    b->ml = calloc(R * I, 8), b->mh = calloc(R * I, 8), b->mx = calloc(R * I, 8);
    for (int g = 0; g < 2; g++) {
        const size_t n = R * (g ? H : N1);
        b->sx[g] = calloc(n, 8), b->sd[g] = calloc(n, 4), b->ss[g] = calloc(n, 4);
    }
}

static void stages_free(stage_bufs *b)
{
    void *all[] = {b->g1l, b->g1h, b->al, b->ah, b->yl, b->yh, b->g1x, b->ax, b->yx, b->ml, b->mh, b->mx,
                   b->sx[0], b->sx[1], b->sd[0], b->sd[1], b->ss[0], b->ss[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

/* The enclosure's stages of L under cl, GEMM2's statistics from mid (NULL: none). */
static void enclose_stages(layer *L, const moects_layer_claim *cl, stage_bufs *b, const double *mid)
{
    const moects_layer_stages st = {b->g1l, b->g1h, b->al, b->ah, b->ml, b->mh, b->yl, b->yh,
                                    {b->sx[0], b->sd[0], b->ss[0]}, {b->sx[1], b->sd[1], b->ss[1]}, mid};
    cr_assert_eq(moects__ref_fused_moe_enclosure_stages(&L->s, &L->a, &L->r, cl, L->lo, L->hi, NULL, &st), 0);
}

/* The exact reference's stages into b's g1x, ax, mx, yx (the args' exposed intermediates). */
static void exact_stages(layer *L, stage_bufs *b)
{
    L->a.g1_out = b->g1x, L->a.act_out = b->ax, L->a.mid_out = b->mx, L->a.y_out = b->yx;
    exact(L);
    L->a.g1_out = NULL, L->a.act_out = NULL, L->a.mid_out = NULL, L->a.y_out = NULL;
}

static int inside(double v, double lo, double hi)
{
    return lo != lo ? v != v : (lo == -INFINITY && hi == INFINITY) || (lo <= v && v <= hi);
}

/* Random layers of every activation, intermediate and format: each stage of the exact reference
 * (one admissible implementation) lies in its stage's interval, on every valid slot's row. */
Test(fused_encl_stages, hold_the_exact_stages)
{
    uint64_t seed = 9000;
    int64_t n = 0;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid++)
            for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_MXFP4; f++) {
                rng_state = ++seed * 7919;
                cfg c = {(moects_activation)act, (moects_mid_format)mid, (moects_weight_pos)(rnd() % 4),
                         (moects_layer_format)f, (moects_combine)(rnd() % 3), 0, 0, 0, 0, 0};
                layer L;
                gen_layer(&L, &c);
                stage_bufs b;
                stages_alloc(&L, &b);
                const moects_layer_claim cl = {24, 0, (uint32_t)(rnd() % 3)};
                enclose_stages(&L, &cl, &b, NULL);
                exact_stages(&L, &b);
                const int64_t I = L.s.inter, H = L.s.H, N1 = L.N1;
                for (int64_t sl = 0; sl < L.s.T * L.s.k; sl++) {
                    if (s_expert(&L, sl) < 0) continue;
                    for (int64_t j = 0; j < N1; j++) cr_assert(inside(b.g1x[sl * N1 + j], b.g1l[sl * N1 + j], b.g1h[sl * N1 + j]), "g1");
                    for (int64_t j = 0; j < I; j++) {
                        cr_assert(inside(b.ax[sl * I + j], b.al[sl * I + j], b.ah[sl * I + j]), "act");
                        cr_assert(inside(b.mx[sl * I + j], b.ml[sl * I + j], b.mh[sl * I + j]), "mid");
                    }
                    for (int64_t j = 0; j < H; j++) cr_assert(inside(b.yx[sl * H + j], b.yl[sl * H + j], b.yh[sl * H + j]), "y");
                    n++;
                }
                stages_free(&b);
                lay_free(&L);
            }
    cr_assert(n > 100, "%lld slots checked", (long long)n);
}

/* gamma(n, u) of DESIGN.md "Bounded verdicts". */
static double gam(double n, double u) { return n * u / (1.0 - n * u); }

/* The silu layer by hand (silu_layer above): GEMM1's terms x_k w_k are [0.5, 0.5, 2^-30] for the
 * gate (x = 1 + 2^-30, sum of squares 0.5 + 2^-60) and [1, 2, 0] for up (x = 3, squares 5); sigma =
 * (gamma(K + 1, 2^-24) + gamma(5, 2^-24)) sqrt(squares) with K = H = 3 (DESIGN.md "Bounded
 * verdicts"); G's own FP32 rounding is one of sigma's K + 1, and this recipe has no epilogue (no
 * alpha, bias or weight=gemm2), so det is x's own error: gamma(3, 2^-53) S (S = sum |t_k|, the
 * dgemm's) + |x| 2^-52 (moe_gemm's alpha) + |x| 2^-50 (the epilogue in double) + 4 2^-149 (K + 2)
 * (underflow): for up, 9 2^-53 + 15 2^-53 + 15 2^-53 = 39 2^-53. GEMM2 from a given intermediate m = 2: terms [2 * 1], [2 * 0.5], [2 * 0]: x
 * = [2, 1, 0], sigma = (gamma(2, u) + gamma(5, u)) [2, 1, 0]; the zero row (S 0) has sigma 0. Under
 * weight=gemm2 with w 0.5 GEMM2's stage is y * w: x and sigma halve. With bits 60 every stage is
 * the exact value's point: g1 = [fl32(1 + 2^-30) = 1, 3], act = mid = a = 0x1.18b9fcp+1, y = [a,
 * a / 2, 0] (silu_layer's values). */
Test(fused_encl_stages, silu_layer_by_hand)
{
    const double u = 0x1p-24, a = 0x1.18b9fcp+1;
    layer L;
    silu_layer(&L);
    stage_bufs b;
    stages_alloc(&L, &b);
    const double mid[1] = {2.0};
    enclose_stages(&L, &FP32_CLAIM, &b, mid);
    const double sg[2] = {(gam(4, u) + gam(5, u)) * sqrt(0.5 + 0x1p-60), (gam(4, u) + gam(5, u)) * sqrt(5.0)};
    cr_expect(fabs(39 * 0x1p-53 - (gam(3, 0x1p-53) * 3 + 3 * (0x1p-52 + 0x1p-50))) < 0x1p-60, "the comment's sum");
    const double gx[2] = {1.0 + 0x1p-30, 3.0};
    for (int n = 0; n < 2; n++) {
        cr_expect(b.sx[0][n] == gx[n], "g1 x %a", b.sx[0][n]);
        cr_expect(b.ss[0][n] >= sg[n] && b.ss[0][n] <= sg[n] * (1 + 0x1p-20), "g1 sigma %a, %a", (double)b.ss[0][n], sg[n]);
        const double dt = gam(3, 0x1p-53) * (n ? 3.0 : 1.0 + 0x1p-30) + gx[n] * (0x1p-52 + 0x1p-50) + 20 * 0x1p-149;
        cr_expect(b.sd[0][n] >= dt && b.sd[0][n] <= dt * (1 + 0x1p-20), "g1 det %a, %a", (double)b.sd[0][n], dt);
    }
    const double yx[3] = {2.0, 1.0, 0.0}, g2 = gam(2, u) + gam(5, u);
    for (int h = 0; h < 3; h++) {
        cr_expect(b.sx[1][h] == yx[h], "y x %a", b.sx[1][h]);
        cr_expect(b.ss[1][h] >= g2 * yx[h] && b.ss[1][h] <= g2 * yx[h] * (1 + 0x1p-20), "y sigma %a", (double)b.ss[1][h]);
    }
    set_recipe(&L, MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=gemm2)");
    L.w[0] = 0.5f;
    enclose_stages(&L, &FP32_CLAIM, &b, mid);
    for (int h = 0; h < 2; h++) {
        cr_expect(b.sx[1][h] == yx[h] / 2, "y x under weight=gemm2 %a", b.sx[1][h]);
        cr_expect(b.ss[1][h] >= g2 * yx[h] / 2 && b.ss[1][h] <= g2 * yx[h] / 2 * (1 + 0x1p-20));
    }
    set_recipe(&L, MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=combine)");
    L.w[0] = 1.0f;
    const moects_layer_claim c60 = {60, 0, 0};
    enclose_stages(&L, &c60, &b, NULL);
    cr_expect(b.g1l[0] == 1.0f && b.g1h[0] == 1.0f && b.g1l[1] == 3.0f && b.g1h[1] == 3.0f);
    cr_expect(b.al[0] == (float)a && b.ah[0] == (float)a && b.ml[0] == a && b.mh[0] == a);
    cr_expect(b.yl[0] == (float)a && b.yh[0] == (float)a && b.yl[1] == (float)(a / 2) && b.yh[2] == 0.0f);
    stages_free(&b);
    lay_free(&L);
}
