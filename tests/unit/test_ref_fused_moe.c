/* test_ref_fused_moe.c: the fused MoE layer's exact reference (moects__ref_fused_moe, ref/fused_moe.c)
 * on layers worked out by hand (gate/up orders, activations, weight positions, combines, EP map,
 * bias; situ against MPFR, every FP32 step rounded by MPFR), its FP8 intermediate on hand values, its exact dot's decision on a rounding tie, and bit for
 * bit against a second, independent method written here from the definition (ref/moects_layer.h):
 * straight loops, every dot product by moects_xsum, no dgemm, on random layers of every activation,
 * intermediate, weight position and format, with EP maps, cancellation that defeats the fast path,
 * NaN/Inf inputs and small chunk sizes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_crmath.h"
#include "moects_exact.h"
#include "moects_fused_internal.h"
#include "moects_layer.h"
#include "test_fused_layer.h"
#include "test_mpfr_round.h"

static float out_f(const layer *L, int64_t i)
{
    return L->s.out_dtype == MOECTS_F32 ? ((const float *)L->out)[i] : moects__bf16_to_f32(((const uint16_t *)L->out)[i]);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Run the reference and check out [T*H] against want (bits: -0 and +0 differ). */
static void expect(layer *L, const float *want, const char *what)
{
    cr_assert_eq(moects__ref_fused_moe(&L->s, &L->a, &L->r), 0, "%s: the reference failed", what);
    for (int64_t i = 0; i < L->s.T * L->s.H; i++)
        cr_assert_eq(f32_bits(out_f(L, i)), f32_bits(want[i]), "%s: out[%lld] = %a, want %a", what, (long long)i,
                     (double)out_f(L, i), (double)want[i]);
}

/* ---- hand-worked layers ---- */
/* gelu_erf(f) = (f * 0.5f) * (1 + erff(f / sqrt 2)): erff of x >= 5.6 is 1 (1 - erf < 2^-25), so
 * gelu(8) = 4 * 2 = 8, gelu(32) = 32; of x <= -5.6 it is -1, so gelu(-16) = -8 * 0 = -0.
 * H = 2, I = 2, x = [1, 0], W13 rows [v, 0] give g1 = [32, -32, -16, 8] (exact); W2 = identity.
 *   gate_up:     gate [32, -32], up [-16, 8]: a = [32 * -16, -0 * 8] = [-512, -0]
 *   up_gate:     up [32, -32], gate [-16, 8]: a = [-0 * 32, 8 * -32] = [-0, -256]
 *   interleave1: gate rows 0, 2 = [32, -16], up rows 1, 3 = [-32, 8]: a = [-1024, -0]
 * y = W2 a: the exact sum -0 * 1 + x * 0 is 0, +0 (the reference's exact zero). */
static void gelu_orders_layer(layer *L)
{
    lay_init(L, 1, 1, 2, 2, 1, MOECTS_ACT_GELU_ERF, MOECTS_LAYER_BF16);
    set_x(L, 0, 0, 1.0f);
    const float g1[4] = {32, -32, -16, 8};
    for (int n = 0; n < 4; n++) set_w13(L, 0, n, 0, g1[n]);
    set_w2(L, 0, 0, 0, 1.0f);
    set_w2(L, 0, 1, 1, 1.0f);
    L->w[0] = 1.0f;
}

Test(fused_moe_hand, gate_up_orders)
{
    static const struct {
        const char *r;
        float want[2];
    } C[] = {{MOECTS_LAYER_RECIPE_V1 "(w13=gate_up)", {-512.0f, 0.0f}},
             {MOECTS_LAYER_RECIPE_V1 "(w13=up_gate)", {0.0f, -256.0f}},
             {MOECTS_LAYER_RECIPE_V1 "(w13=interleave1)", {-1024.0f, 0.0f}}};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        layer L;
        gelu_orders_layer(&L);
        set_recipe(&L, C[i].r);
        expect(&L, C[i].want, C[i].r);
        lay_free(&L);
    }
}

/* interleave8, I = 16: gate i on row 16 (i / 8) + i % 8, up i 8 rows further. Rows set to g1 = 32 on
 * gate rows and i + 1 on up rows (x = e_0, H = 16); gelu_erf(32) = 32, so a_i = 32 (i + 1) (BF16
 * exact up to 512); W2 = identity: out = a. */
Test(fused_moe_hand, interleave8)
{
    layer L;
    lay_init(&L, 1, 1, 16, 16, 1, MOECTS_ACT_GELU_ERF, MOECTS_LAYER_BF16);
    set_recipe(&L, MOECTS_LAYER_RECIPE_V1 "(w13=interleave8)");
    set_x(&L, 0, 0, 1.0f);
    L.w[0] = 1.0f;
    float want[16];
    for (int i = 0; i < 16; i++) {
        set_w13(&L, 0, 16 * (i / 8) + i % 8, 0, 32.0f);
        set_w13(&L, 0, 16 * (i / 8) + i % 8 + 8, 0, (float)(i + 1));
        set_w2(&L, 0, i, i, 1.0f);
        want[i] = 32.0f * (float)(i + 1);
    }
    expect(&L, want, "interleave8");
    lay_free(&L);
}

/* silu(32) = 32 / (1 + expf(-32)) = 32 (expf(-32) ~ 1.3e-14 < 2^-24, so 1 + e = 1), under div and
 * rcp (32 * (1 / 1)); silu(0) = 0 / 2 = 0. g1 = [32, 0 | 3, 5]: a = [96, 0]; W2 = identity. */
Test(fused_moe_hand, silu_zero_and_saturated)
{
    const char *R[2] = {MOECTS_LAYER_RECIPE_V1 "(sig=div)", MOECTS_LAYER_RECIPE_V1 "(sig=rcp)"};
    for (int v = 0; v < 2; v++) {
        layer L;
        lay_init(&L, 1, 1, 2, 2, 1, MOECTS_ACT_SILU, MOECTS_LAYER_BF16);
        set_recipe(&L, R[v]);
        set_x(&L, 0, 0, 1.0f);
        const float g1[4] = {32, 0, 3, 5};
        for (int n = 0; n < 4; n++) set_w13(&L, 0, n, 0, g1[n]);
        set_w2(&L, 0, 0, 0, 1.0f);
        set_w2(&L, 0, 1, 1, 1.0f);
        L.w[0] = 1.0f;
        const float want[2] = {96.0f, 0.0f};
        expect(&L, want, R[v]);
        lay_free(&L);
    }
}

/* relu2: x = [1, 2], W13 rows [1, 1] and [-2, 0.5]: g1 = [3, -1], a = [9, 0]; W2 rows [1, 1] and
 * [0.5, 2]: y = [9, 4.5]. */
Test(fused_moe_hand, relu2)
{
    layer L;
    lay_init(&L, 1, 1, 2, 2, 1, MOECTS_ACT_RELU2, MOECTS_LAYER_BF16);
    set_x(&L, 0, 0, 1.0f), set_x(&L, 0, 1, 2.0f);
    set_w13(&L, 0, 0, 0, 1.0f), set_w13(&L, 0, 0, 1, 1.0f);
    set_w13(&L, 0, 1, 0, -2.0f), set_w13(&L, 0, 1, 1, 0.5f);
    set_w2(&L, 0, 0, 0, 1.0f), set_w2(&L, 0, 0, 1, 1.0f);
    set_w2(&L, 0, 1, 0, 0.5f), set_w2(&L, 0, 1, 1, 2.0f);
    L.w[0] = 1.0f;
    const float want[2] = {9.0f, 4.5f};
    expect(&L, want, "relu2");
    lay_free(&L);
}

/* The router weight's four places, relu2 with H = I = 1: x = 1, W13 = 39/32, W2 = 1, w = 1.5;
 * g1=f32, act=f32, mid=bf16, slot=bf16, out FP32. g^2 = 1521/1024 = 1.4853515625 (exact in FP32).
 *   input:   h = bf16(1.5) = 1.5, g1 = 117/64, a = 13689/4096 = 3.341796875, m = bf16: 3.341796875
 *            / 2^-6 = 213.875 -> 214: 3.34375; y = out = 3.34375
 *   act:     a = 1521/1024 * 1.5 = 4563/2048 = 2.22802734375 (exact), m = bf16: 142.59375 ulps ->
 *            143: 2.234375
 *   gemm2:   m = bf16(1.4853515625): 190.125 ulps of 2^-7 -> 1.484375; y = 1.484375 * 1.5 =
 *            2.2265625, slot bf16: 142.5 ulps of 2^-6, a tie -> even 142: 2.21875
 *   combine: y = 1.484375, out = fmaf(1.484375, 1.5, 0) = 2.2265625
 * wdtype: w = 1.5 + 2^-10 under gemm2: bf16(w) = 1.5 gives 2.21875 again; FP32 w gives 1.484375 *
 *   1537/1024 = 146015/65536 = 2.22804260..., slot bf16: 142.594 ulps -> 143: 2.234375. */
Test(fused_moe_hand, weight_positions)
{
    static const struct {
        const char *pos, *wd;
        float w, want;
    } C[] = {{"input", "f32", 1.5f, 3.34375f},       {"act", "f32", 1.5f, 2.234375f},
             {"gemm2", "f32", 1.5f, 2.21875f},       {"combine", "f32", 1.5f, 2.2265625f},
             {"gemm2", "bf16", 1.5f + 0x1p-10f, 2.21875f}, {"gemm2", "f32", 1.5f + 0x1p-10f, 2.234375f}};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        layer L;
        lay_init(&L, 1, 1, 1, 1, 1, MOECTS_ACT_RELU2, MOECTS_LAYER_BF16);
        char r[200];
        snprintf(r, sizeof r, MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=bf16,slot=bf16,weight=%s,wdtype=%s)", C[i].pos,
                 C[i].wd);
        set_recipe(&L, r);
        set_x(&L, 0, 0, 1.0f);
        set_w13(&L, 0, 0, 0, 39.0f / 32.0f);
        set_w2(&L, 0, 0, 0, 1.0f);
        L.w[0] = C[i].w;
        expect(&L, &C[i].want, r);
        lay_free(&L);
    }
}

/* Combine order: relu2, H = I = 1, expert 0 gives y = 16^2 = 256, expert 1 y = 1; w = 1; out BF16.
 * Token 0 slots (256, 1, 1): f32_slots 258 (exact in BF16); bf16_chain 256 + 1 = 257, a tie between
 * 256 and 258 -> even 256, twice: 256. Token 1 slots (1, 1, 256): 2, then 258 both ways. The same
 * with the weight in the combine (fmaf(y, 1, acc) = acc + y). */
Test(fused_moe_hand, combine_f32_vs_bf16_chain)
{
    static const struct {
        const char *r;
        float want[2];
    } C[] = {{MOECTS_LAYER_RECIPE_V1 "(combine=f32_slots)", {258.0f, 258.0f}},
             {MOECTS_LAYER_RECIPE_V1 "(combine=bf16_chain)", {256.0f, 258.0f}},
             {MOECTS_LAYER_RECIPE_V1 "(combine=f32_slots,weight=combine)", {258.0f, 258.0f}},
             {MOECTS_LAYER_RECIPE_V1 "(combine=bf16_chain,weight=combine)", {256.0f, 258.0f}}};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        layer L;
        lay_init(&L, 2, 3, 1, 1, 2, MOECTS_ACT_RELU2, MOECTS_LAYER_BF16);
        L.s.out_dtype = MOECTS_BF16;
        set_recipe(&L, C[i].r);
        set_x(&L, 0, 0, 1.0f), set_x(&L, 1, 0, 1.0f);
        set_w13(&L, 0, 0, 0, 16.0f), set_w13(&L, 1, 0, 0, 1.0f);
        set_w2(&L, 0, 0, 0, 1.0f), set_w2(&L, 1, 0, 0, 1.0f);
        const int32_t ids[6] = {0, 1, 1, 1, 1, 0};
        for (int j = 0; j < 6; j++) L.ids[j] = ids[j], L.w[j] = 1.0f;
        expect(&L, C[i].want, C[i].r);
        lay_free(&L);
    }
}

/* EP: E_global 4, E = 2, map [-1, 0, -1, 1]; relu2 H = I = 1, x = 1, local expert 0: W13 = 2 (y 4),
 * local 1: W13 = 3 (y 9); W2 = 1. Invalid slots carry weight NaN: read, it would show.
 *   token 0 ids [0, 1]: id 0 on another rank, id 1 -> local 0: 4
 *   token 1 ids [3, 1]: 9 + 4 = 13
 *   token 2 ids [2, 4]: other rank, past E_global: no valid slot, +0 */
static void ep_layer(layer *L)
{
    lay_init(L, 3, 2, 1, 1, 2, MOECTS_ACT_RELU2, MOECTS_LAYER_BF16);
    use_map(L, 4);
    const int32_t map[4] = {-1, 0, -1, 1}, ids[6] = {0, 1, 3, 1, 2, 4};
    memcpy(L->map, map, sizeof map);
    for (int j = 0; j < 6; j++) {
        L->ids[j] = ids[j];
        L->w[j] = (j == 0 || j == 4 || j == 5) ? NAN : 1.0f;
    }
    for (int t = 0; t < 3; t++) set_x(L, t, 0, 1.0f);
    set_w13(L, 0, 0, 0, 2.0f), set_w13(L, 1, 0, 0, 3.0f);
    set_w2(L, 0, 0, 0, 1.0f), set_w2(L, 1, 0, 0, 1.0f);
}

Test(fused_moe_hand, expert_map_and_empty_token)
{
    layer L;
    ep_layer(&L);
    L.s.out_dtype = MOECTS_BF16;
    memset(L.out, 0xFF, 6);
    const float want[3] = {4.0f, 13.0f, 0.0f};
    expect(&L, want, "ep");
    cr_assert_eq(((uint16_t *)L.out)[2], 0x0000, "an empty token is +0");
    L.map[3] = 2; /* a local index >= E: bad input */
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1);
    lay_free(&L);
    /* without a map, ids are local: id 2 >= E = 2 names no expert */
    ep_layer(&L);
    L.s.has_expert_map = 0, L.a.expert_map = NULL;
    const int32_t ids[6] = {2, 1, 0, -1, -5, 7};
    for (int j = 0; j < 6; j++) L.ids[j] = ids[j], L.w[j] = (j == 1 || j == 2) ? 1.0f : NAN;
    const float want2[3] = {9.0f, 4.0f, 0.0f};
    expect(&L, want2, "no map");
    lay_free(&L);
}

/* Bias: relu2, H = I = 1, x = 1, W2 = 1. Expert 0: W13 = 2, b13 = 0.5: g1 = 2.5, a = 6.25; b2 =
 * -0.25: y = 6. Expert 1: W13 = 2, b13 = -3: g1 = -1, a = 0; b2 = 0.75: y = 0.75. */
Test(fused_moe_hand, bias)
{
    layer L;
    lay_init(&L, 2, 1, 1, 1, 2, MOECTS_ACT_RELU2, MOECTS_LAYER_BF16);
    use_bias(&L);
    for (int t = 0; t < 2; t++) set_x(&L, t, 0, 1.0f), L.ids[t] = t, L.w[t] = 1.0f;
    set_w13(&L, 0, 0, 0, 2.0f), set_w13(&L, 1, 0, 0, 2.0f);
    set_w2(&L, 0, 0, 0, 1.0f), set_w2(&L, 1, 0, 0, 1.0f);
    L.b13[0] = 0.5f, L.b13[1] = -3.0f, L.b2[0] = -0.25f, L.b2[1] = 0.75f;
    const float want[2] = {6.0f, 0.75f};
    expect(&L, want, "bias");
    L.a.b2 = NULL; /* has_bias with a NULL bias: invalid */
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1);
    lay_free(&L);
}

/* Clamps: g1 = [32, u] (x = [1, 0]); mid=f32, g1=f32, act=f32, W2 = [1; 0.5]. expf(-g) for g >= 20 is
 * below 2^-24, so sigmoid's 1 + e is 1 and g * sigmoid = g exactly (div and rcp).
 *   gpt_oss, alpha 1, L 64, u = 100: g' = 32, u' = 64: (64 + 1) * 32 = 2080
 *   gpt_oss, alpha 1, L 20, u = 100: g' = 20, u' = 20: 21 * 20 = 420
 *   silu_clamp, L 20, u = -100: silu(20) * -20 = -400 */
Test(fused_moe_hand, clamps)
{
    static const struct {
        moects_activation act;
        float L, u, a;
    } C[] = {{MOECTS_ACT_GPT_OSS, 64.0f, 100.0f, 2080.0f},
             {MOECTS_ACT_GPT_OSS, 20.0f, 100.0f, 420.0f},
             {MOECTS_ACT_SILU_CLAMP, 20.0f, -100.0f, -400.0f}};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        layer L;
        lay_init(&L, 1, 1, 2, 1, 1, C[i].act, MOECTS_LAYER_BF16);
        set_recipe(&L, MOECTS_LAYER_RECIPE_V1 "(w13=interleave1,g1=f32,act=f32,mid=f32,sig=rcp)");
        L.s.act_limit = C[i].L, L.s.act_alpha = 1.0f;
        set_x(&L, 0, 0, 1.0f);
        set_w13(&L, 0, 0, 0, 32.0f), set_w13(&L, 0, 1, 0, C[i].u);
        set_w2(&L, 0, 0, 0, 1.0f), set_w2(&L, 0, 1, 0, 0.5f);
        L.w[0] = 1.0f;
        const float want[2] = {C[i].a, C[i].a * 0.5f};
        expect(&L, want, "clamp");
        lay_free(&L);
    }
}

/* ---- situ against MPFR: each FP32 operation of the recipe (ref/moects_layer.h) computed by MPFR
 * from its FP32 operands at 320 bits and rounded once to binary32 (BF16 for act=bf16); tanh and exp
 * likewise (mpfr_tanh, mpfr_exp), independent of ref/crmath.c. ---- */
static float mp_done(mpfr_t v, int prec)
{
    const float f = ref_round(v, prec, prec == 24 ? -148 : -132);
    mpfr_clear(v);
    return f;
}

/* fl(x op y), op one of + * / ; 't' tanh(x); 'e' exp(x) (y unused). */
static float mp_op(float x, char op, float y)
{
    mpfr_t a, b;
    mpfr_init2(a, 320), mpfr_init2(b, 320);
    mpfr_set_flt(a, x, MPFR_RNDN), mpfr_set_flt(b, y, MPFR_RNDN);
    switch (op) {
    case '+': mpfr_add(a, a, b, MPFR_RNDN); break;
    case '*': mpfr_mul(a, a, b, MPFR_RNDN); break;
    case '/': mpfr_div(a, a, b, MPFR_RNDN); break;
    case 't': mpfr_tanh(a, a, MPFR_RNDN); break;
    default: mpfr_exp(a, a, MPFR_RNDN); break;
    }
    mpfr_clear(b);
    return mp_done(a, 24);
}

static float mp_bf16(float x)
{
    mpfr_t a;
    mpfr_init2(a, 24);
    mpfr_set_flt(a, x, MPFR_RNDN);
    return mp_done(a, 8);
}

/* situ(g, u): t = tanh(g * fl(1 / a)), x = a * t, gate = x / (1 + exp(-g)) or x * (1 / (1 + exp(-g)))
 * (rcp), act=bf16 rounding; up' = L * tanh(u * fl(1 / L)) when L > 0; gate * up'. */
static float mp_situ(float g, float u, float a, float L, int rcp, int act_bf16)
{
    const float x = mp_op(a, '*', mp_op(mp_op(g, '*', mp_op(1.0f, '/', a)), 't', 0.0f));
    const float d = mp_op(1.0f, '+', mp_op(-g, 'e', 0.0f));
    float gate = rcp ? mp_op(x, '*', mp_op(1.0f, '/', d)) : mp_op(x, '/', d);
    if (act_bf16) gate = mp_bf16(gate);
    const float up = L > 0.0f ? mp_op(L, '*', mp_op(mp_op(u, '*', mp_op(1.0f, '/', L)), 't', 0.0f)) : u;
    return mp_op(gate, '*', up);
}

/* W13 rows [v, 0] with x = [1, 0, ...] give g1 = v exactly; W2 = identity, g1, mid, slot and out FP32,
 * weight 1: out = a. Pairs (g, u) over the curve's parts: saturated (64, 500: by hand, tanh(16) and
 * tanh(fl(500 fl(1/25))) = tanh(20) round to 1 and exp(-64) < 2^-24, so a = 4 * 25 = 100), the
 * gate's negative dip (-1.25), both signs of up, up past L; a = 4 (Kimi K3) and 1.702 (1 / a not a
 * power of two), L = 25 and 0 (up unchanged), sig div and rcp, act f32 and bf16. */
Test(fused_moe_hand, situ_against_mpfr)
{
    static const float G[6] = {64, 1.5f, -2.5f, 0.75f, -1.25f, -64}, U[6] = {500, 3, -7.25f, 40, 0.375f, -500};
    cr_assert_eq(mp_situ(64, 500, 4, 25, 0, 0), 100.0f, "the MPFR oracle against the hand value");
    for (int v = 0; v < 16; v++) {
        const float a = v & 1 ? 1.702f : 4.0f, Lim = v & 2 ? 0.0f : 25.0f;
        const int rcp = (v >> 2) & 1, act_bf16 = (v >> 3) & 1;
        char rs[160];
        snprintf(rs, sizeof rs, MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=%s,mid=f32,slot=f32,sig=%s)",
                 act_bf16 ? "bf16" : "f32", rcp ? "rcp" : "div");
        layer L;
        lay_init(&L, 1, 1, 6, 6, 1, MOECTS_ACT_SITU, MOECTS_LAYER_BF16);
        set_recipe(&L, rs);
        L.s.act_alpha = a, L.s.act_limit = Lim;
        set_x(&L, 0, 0, 1.0f);
        L.w[0] = 1.0f;
        float want[6];
        for (int i = 0; i < 6; i++) {
            set_w13(&L, 0, i, 0, G[i]), set_w13(&L, 0, 6 + i, 0, U[i]);
            set_w2(&L, 0, i, i, 1.0f);
            want[i] = mp_situ(G[i], U[i], a, Lim, rcp, act_bf16);
        }
        char what[220];
        snprintf(what, sizeof what, "situ a %g L %g %s", (double)a, (double)Lim, rs);
        expect(&L, want, what);
        lay_free(&L);
    }
}

/* ---- the FP8 intermediate on hand values ---- */
Test(fused_moe_fp8, scales)
{
    cr_assert_eq(moects__fused_fp8_scale(448.0f, 0), 1.0);
    cr_assert_eq(moects__fused_fp8_scale(448.0f, 1), 1.0);
    cr_assert_eq(moects__fused_fp8_scale(0.0f, 0), (double)(1e-10f / 448.0f), "amax 0: eps / 448");
    cr_assert_eq(moects__fused_fp8_scale(1e-11f, 0), (double)(1e-10f / 448.0f), "amax below eps: eps / 448");
    cr_assert_eq(moects__fused_fp8_scale(0.0f, 1), 0x1p-127);
    cr_assert_eq(moects__fused_fp8_scale(449.0f, 1), 2.0, "449 / 448 > 1: up to 2");
    cr_assert_eq(moects__fused_fp8_scale(224.0f, 1), 0.5);
    cr_assert_eq(moects__fused_fp8_scale(896.0f, 1), 2.0);
    cr_assert_eq(moects__fused_fp8_scale(896.5f, 1), 4.0);
    cr_assert_eq(moects__fused_fp8_scale(1.0f, 1), 0x1p-8, "448 * 2^-9 = 0.875 < 1 <= 448 * 2^-8 = 1.75");
    cr_assert_eq(moects__fused_fp8_scale(0x1p-140f, 1), 0x1p-127, "2^-149 clamped to 2^-127");
    cr_assert_eq(moects__fused_fp8_scale(0x1.fffffep127f, 1), 0x1p120, "FLT_MAX / 448 = 2^119.19...: 2^120");
    cr_assert_eq(moects__fused_fp8_scale(INFINITY, 1), 0x1p127);
    cr_assert(isnan(moects__fused_fp8_scale(NAN, 0)) && isnan(moects__fused_fp8_scale(NAN, 1)));
}

static void mid_row(const char *recipe, int64_t I, const float *a, double *m)
{
    moects_layer_recipe r;
    char err[160];
    cr_assert_eq(moects__layer_recipe_parse(recipe, &r, err, sizeof err), 0, "%s", err);
    moects__fused_mid(&r, I, a, m);
}

/* fp8_token div: amax 448, s = 1: m = a. ue8m0: a = [3.12890625, 0.5] is first rounded to BF16:
 * 3.125 (200.25 ulps of 2^-6 -> 200); amax 3.125: 448 * 2^-8 = 1.75 < 3.125 <= 448 * 2^-7 = 3.5, s =
 * 2^-7; 3.125 / s = 400, E4M3 in [256, 512) steps by 32: 12.5 steps, a tie -> even 384 (1.100b), m =
 * 3.0 (without the BF16 step 400.5 would give 416, m = 3.25); 0.5 / s = 64: m = 0.5. */
Test(fused_moe_fp8, intermediate_hand_values)
{
    double m[256];
    const float a1[2] = {448.0f, -1.5f};
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=fp8_token)", 2, a1, m);
    cr_assert(m[0] == 448.0 && m[1] == -1.5);
    const float a2[2] = {3.12890625f, 0.5f};
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=fp8_token,scale=ue8m0)", 2, a2, m);
    cr_assert(m[0] == 3.0 && m[1] == 0.5, "m = [%a, %a]", m[0], m[1]);
    /* mxfp8, two groups of 32: ones (s = 2^-8, m = 1); 1000 and ones: s = 4 (448 * 2 = 896 < 1000
     * <= 1792), 1000 / 4 = 250 -> E4M3 in [128, 256) steps by 16: 15.625 -> 16 steps = 256, m = 1024;
     * 1 / 4 = 0.25 exact, m = 1 */
    float a3[64];
    for (int i = 0; i < 64; i++) a3[i] = 1.0f;
    a3[32] = 1000.0f;
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=mxfp8)", 64, a3, m);
    for (int i = 0; i < 64; i++) cr_assert_eq(m[i], i == 32 ? 1024.0 : 1.0, "m[%d] = %a", i, m[i]);
    /* amax 0 (div): s = eps / 448, codes +-0, m = +0 and -0 */
    const float a4[2] = {0.0f, -0.0f};
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=fp8_token)", 2, a4, m);
    cr_assert(m[0] == 0.0 && !signbit(m[0]) && m[1] == 0.0 && signbit(m[1]));
    /* fp8_128: a NaN makes its group NaN, the next group keeps its own scale: 2 -> s = 2^-7, 256 */
    float a5[256];
    for (int i = 0; i < 256; i++) a5[i] = 2.0f;
    a5[5] = NAN;
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=fp8_128,scale=ue8m0)", 256, a5, m);
    for (int i = 0; i < 256; i++) cr_assert(i < 128 ? isnan(m[i]) : m[i] == 2.0, "m[%d] = %a", i, m[i]);
    /* bf16 and f32 */
    const float a6[1] = {1.0f + 0x1p-10f};
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=bf16)", 1, a6, m);
    cr_assert_eq(m[0], 1.0);
    mid_row(MOECTS_LAYER_RECIPE_V1 "(mid=f32)", 1, a6, m);
    cr_assert_eq(m[0], 1.0 + 0x1p-10);
}

/* ---- the exact GEMM's pieces ---- */
/* MXFP4 decode: code 7 (6) and 0xF (-6) under UE8M0 254 are +-6 * 2^127, beyond FP32, exact in
 * double; a 0xFF scale makes its 32 elements NaN. */
Test(fused_moe_gemm, decode_mxfp4)
{
    uint8_t codes[32] = {0}, sc[2] = {254, 0xFF};
    codes[0] = 0xF7;  /* element 0: 7, element 1: 0xF */
    codes[16] = 0x21; /* row 1: 0.5, 1.0 */
    double b[64], nb[2];
    int lb[2];
    moects__fused_decode(codes, sc, MOECTS_LAYER_MXFP4, 0, 2, 32, b, nb, lb);
    cr_assert_eq(lb[0], 128, "6 * 2^127 = 3 * 2^128");
    cr_assert(b[0] == 6.0 * 0x1p127 && b[1] == -6.0 * 0x1p127 && b[2] == 0.0);
    cr_assert_eq(nb[0], sqrt(72.0) * 0x1p127, "row norm sqrt(36 + 36) * 2^127");
    for (int k = 32; k < 64; k++) cr_assert(isnan(b[k]));
    cr_assert(isnan(nb[1]));
}

/* moects__fused_dot with its bound inputs taken from the rows themselves. */
static float dot(double d, const double *a, const double *b, int64_t K)
{
    int la, lb;
    const double s = moects__fused_norm(a, K, &la) * moects__fused_norm(b, K, &lb);
    return moects__fused_dot(d, s, la + lb, a, b, K);
}

/* Each way to decide. 1 + 2^-24 is the midpoint between 1 and 1 + 2^-23: an exact tie goes to even
 * (1), found on the grid of 2^-24 even from a d one double ulp off; 1 + 2^-24 + 2^-60 (which a dgemm
 * would round to the midpoint) goes up, found in the 128-bit integer; terms 2^900 apart leave both
 * to the exact sum. */
Test(fused_moe_gemm, dot_ties_cancellation_specials)
{
    const double one[3] = {1, 1, 1};
    const double t1[2] = {1, 0x1p-24}, t2[3] = {1, 0x1p-24, 0x1p-60};
    cr_assert_eq(dot(1 + 0x1p-24, t1, one, 2), 1.0f);
    cr_assert_eq(dot(1 + 0x1p-24 + 0x1p-52, t1, one, 2), 1.0f);
    cr_assert_eq(dot(1 + 0x1p-24, t2, one, 3), 1.0f + 0x1p-23f);
    const double w1[3] = {1, 0x1p-24, 0x1p-950}, w2[3] = {1, 0x1p-24, -0x1p-950};
    cr_assert_eq(dot(1 + 0x1p-24, w1, one, 3), 1.0f + 0x1p-23f, "above the tie by 2^-950");
    cr_assert_eq(dot(1 + 0x1p-24, w2, one, 3), 1.0f, "below the tie by 2^-950");
    const double t3[3] = {1, 0x1p-24, 0x1p-24};
    cr_assert_eq(dot(1 + 0x1p-23 - 0x1p-52, t3, one, 3), 1.0f + 0x1p-23f, "the grid point nearest d, below it");
    const double c[3] = {0x1p40, -0x1p40, 3};
    cr_assert_eq(dot(3, c, one, 3), 3.0f, "cancellation");
    /* S = 2^45: any d within 2 * 2^-53 * S = 2^-7 of V is a valid dgemm result; 0.75 grid steps off
     * it must not be taken for the grid point 2^-9 */
    const double c2[3] = {0x1p44, -0x1p44, 0x1p-10};
    cr_assert_eq(dot(0x1p-10 + 0x1.8p-11, c2, one, 3), 0x1p-10f, "err >= q / 2: not the grid");
    /* 2^-150 + 2^-220: 71 bits in the integer, just above the tie between 0 and 2^-149 */
    const double fine[2] = {0x1p-150, 0x1p-220};
    cr_assert_eq(dot(0x1p-150, fine, one, 2), 0x1p-149f, "subnormal rounding on the integer, once");
    const double p[2] = {1, 0.5}, q[2] = {1.5, 1};
    cr_assert_eq(dot(2, p, q, 2), 2.0f);
    const double z[2] = {1e-30, -1e-30};
    cr_assert_eq(f32_bits(dot(0, z, one, 2)), 0u, "exact zero: +0");
    const double nz[2] = {-0.0, 0.0}, mo[2] = {1, -1};
    cr_assert_eq(f32_bits(dot(-0.0, nz, mo, 2)), 0u, "all-zero terms: +0");
    const double sub[2] = {0x1p-149, 0x1p-150}, nsub[1] = {-0x1p-150};
    cr_assert_eq(dot(0x1.8p-149, sub, one, 2), 0x1p-148f, "a subnormal tie: 1.5 * 2^-149 -> 2^-148 (even)");
    cr_assert_eq(f32_bits(dot(-0x1p-150, nsub, one, 1)), 0x80000000u, "-2^-150: a tie -> -0");
    const double big[2] = {0x1p127, 0x1p127}, edge[2] = {0x1.fffffep127, 0x1p103};
    cr_assert_eq(dot(0x1p128, big, one, 2), INFINITY, "overflow rounds to Inf");
    cr_assert_eq(dot(0x1.fffffep127 + 0x1p103, edge, one, 2), INFINITY, "FLT_MAX + half an ulp: a tie -> Inf");
    cr_assert_eq(moects__fused_dot_exact(big, one, 2), INFINITY);
    const double s1[2] = {NAN, 1}, s2[2] = {INFINITY, 1}, s3[2] = {INFINITY, -INFINITY}, s4[2] = {-INFINITY, 5};
    const double zero1[2] = {0, 1};
    cr_assert(isnan(dot(NAN, s1, one, 2)));
    cr_assert_eq(dot(INFINITY, s2, one, 2), INFINITY);
    cr_assert(isnan(dot(NAN, s3, one, 2)));
    cr_assert(isnan(dot(NAN, s2, zero1, 2)), "Inf * 0");
    cr_assert_eq(dot(-INFINITY, s4, one, 2), -INFINITY);
}

/* Every path of moects__fused_dot against moects_xsum alone (moects__fused_dot_exact) on random
 * BF16 rows, narrow (ties: the grid, the 128-bit integer) and wide (2^-120 .. 2^120: the exact
 * sum), with d from a plain double loop (a valid dgemm result). */
Test(fused_moe_gemm, dot_against_xsum)
{
    rng_state = 4242;
    double a[300], b[300];
    for (int it = 0; it < 3000; it++) {
        const int64_t K = 1 + (int64_t)(rnd() % 300);
        const int wide = it % 3 == 0;
        for (int64_t k = 0; k < K; k++) {
            a[k] = moects__bf16_to_f32(wide ? r_bf16(-120, 120) : r_bf16(-3, 1));
            b[k] = moects__bf16_to_f32(wide ? r_bf16(-120, 120) : r_bf16(-6, -3));
        }
        double d = 0.0;
        for (int64_t k = 0; k < K; k++) d += a[k] * b[k];
        cr_assert_eq(f32_bits(dot(d, a, b, K)), f32_bits(moects__fused_dot_exact(a, b, K)), "it %d K %lld", it,
                     (long long)K);
    }
}

/* ---- the second method: the definition in straight loops, every dot product by moects_xsum ---- */
static float bfr(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

/* Element (n, k) of expert e of W13 (which 0) or W2 (1), as the exact real (double). */
static double wval(const layer *L, int which, int64_t e, int64_t n, int64_t k)
{
    const int64_t N = which ? L->s.H : L->N1, K = which ? L->s.inter : L->s.H, idx = (e * N + n) * K + k;
    const uint8_t *W = which ? L->w2 : L->w13, *S = which ? L->w2s : L->w13s;
    if (L->s.format == MOECTS_LAYER_BF16) return moects__bf16_to_f32(((const uint16_t *)W)[idx]);
    const uint8_t code = (uint8_t)((W[idx / 2] >> (idx % 2 ? 4 : 0)) & 0xF), sc = S[idx / 32];
    return sc == 0xFF ? NAN : (double)moects__e2m1_decode(code) * ldexp(1.0, sc - 127);
}

static float xdot(const layer *L, int which, int64_t e, int64_t n, const double *v, int64_t K)
{
    moects_xsum x;
    moects__xsum_init(&x);
    for (int64_t k = 0; k < K; k++) moects__xsum_add_product(&x, v[k], wval(L, which, e, n, k));
    return moects__xsum_round_f32(&x);
}

/* The local expert of slot sl, or -1. */
static int64_t o_expert(const layer *L, int64_t sl)
{
    const int64_t id = L->ids[sl];
    if (!L->s.has_expert_map) return id >= 0 && id < L->s.E ? id : -1;
    if (id < 0 || id >= L->s.E_global) return -1;
    return L->map[id] >= 0 ? L->map[id] : -1;
}

/* Which half and index row n of W13 is under order o (the inverse of "gate i is on row ..."). */
static void o_row(moects_w13_order o, int64_t I, int64_t n, int *is_gate, int64_t *i)
{
    switch (o) {
    case MOECTS_W13_GATE_UP: *is_gate = n < I, *i = n < I ? n : n - I; break;
    case MOECTS_W13_UP_GATE: *is_gate = n >= I, *i = n < I ? n : n - I; break;
    case MOECTS_W13_INTERLEAVE1: *is_gate = n % 2 == 0, *i = n / 2; break;
    default: *is_gate = (n / 8) % 2 == 0, *i = (n / 16) * 8 + n % 8; break;
    }
}

static float o_sigmul(const layer *L, float x, float z)
{
    float e = moects_cr_expf(-z);
    return L->r.sig_rcp ? x * (1.0f / (1.0f + e)) : x / (1.0f + e);
}

static float o_act(const layer *L, float g, float u)
{
    const moects_fused_moe_shape *s = &L->s;
    const float Lm = s->act_limit;
    float ga;
    switch (s->activation) {
    case MOECTS_ACT_RELU2: {
        float m = g > 0.0f ? g : (g == g ? 0.0f : g);
        return L->r.act_bf16 ? bfr(m * m) : m * m;
    }
    case MOECTS_ACT_GELU_TANH: {
        const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5);
        float cube = g * g;
        cube = cube * g;
        float t = moects_cr_tanhf(beta * (g + 0.044715f * cube));
        ga = (0.5f * g) * (1.0f + t);
        break;
    }
    case MOECTS_ACT_GELU_ERF: ga = (g * 0.5f) * (1.0f + moects_cr_erff(g * (float)M_SQRT1_2)); break;
    case MOECTS_ACT_GPT_OSS: {
        float gc = g > Lm ? Lm : g, uc = u > Lm ? Lm : u < -Lm ? -Lm : u;
        float glu = o_sigmul(L, gc, gc * s->act_alpha);
        if (L->r.act_bf16) glu = bfr(glu);
        return (uc + 1.0f) * glu;
    }
    case MOECTS_ACT_SILU_CLAMP:
        g = g > Lm ? Lm : g;
        u = u > Lm ? Lm : u < -Lm ? -Lm : u;
        ga = o_sigmul(L, g, g);
        break;
    case MOECTS_ACT_SITU: {
        const float inv_a = 1.0f / s->act_alpha, inv_l = 1.0f / Lm;
        ga = o_sigmul(L, s->act_alpha * moects_cr_tanhf(g * inv_a), g);
        if (Lm > 0.0f) u = Lm * moects_cr_tanhf(u * inv_l);
        break;
    }
    default: ga = o_sigmul(L, g, g); break;
    }
    if (L->r.act_bf16) ga = bfr(ga);
    return ga * u;
}

/* The scale of an FP8 group: div as the engines' quantizer; ue8m0 by doubling from 2^-127. */
static double o_scale(float amax, int ue8m0)
{
    if (amax != amax) return NAN;
    if (!ue8m0) return (amax > 1e-10f ? amax : 1e-10f) / 448.0f;
    int x = -127;
    while (x < 127 && 448.0 * ldexp(1.0, x) < (double)amax) x++;
    return ldexp(1.0, x);
}

static void o_mid(const layer *L, const float *a, double *m)
{
    const int64_t I = L->s.inter;
    const moects_mid_format f = L->r.mid;
    if (f == MOECTS_MID_BF16 || f == MOECTS_MID_F32) {
        for (int64_t i = 0; i < I; i++) m[i] = f == MOECTS_MID_BF16 ? bfr(a[i]) : a[i];
        return;
    }
    const int64_t G = f == MOECTS_MID_FP8_TOKEN ? I : f == MOECTS_MID_FP8_128 ? 128 : 32;
    for (int64_t g0 = 0; g0 < I; g0 += G) {
        float amax = 0.0f;
        for (int64_t i = g0; i < g0 + G; i++) {
            float v = fabsf(bfr(a[i]));
            amax = (v != v || amax != amax) ? NAN : v > amax ? v : amax;
        }
        const double sc = o_scale(amax, L->r.scale_ue8m0 || f == MOECTS_MID_MXFP8);
        for (int64_t i = g0; i < g0 + G; i++)
            m[i] = (double)moects__e4m3_decode(moects__e4m3_encode(bfr(a[i]) / (float)sc)) * sc;
    }
}

/* y [H] of slot sl with local expert e. */
static void o_slot(const layer *L, int64_t sl, int64_t e, float w, float *y)
{
    const int64_t H = L->s.H, I = L->s.inter, N1 = L->N1;
    double *h = malloc((size_t)H * 8), *m = malloc((size_t)I * 8);
    float *gate = malloc((size_t)I * 4), *up = malloc((size_t)I * 4), *a = malloc((size_t)I * 4);
    for (int64_t k = 0; k < H; k++) {
        float xv = moects__bf16_to_f32(L->x[(sl / L->s.k) * H + k]);
        h[k] = L->r.weight == MOECTS_WEIGHT_INPUT ? bfr(xv * w) : xv;
    }
    for (int64_t n = 0; n < N1; n++) {
        float v = xdot(L, 0, e, n, h, H);
        if (L->s.has_bias) v += L->b13[e * N1 + n];
        if (L->r.g1_bf16) v = bfr(v);
        int is_gate = 1;
        int64_t i = n;
        if (L->s.activation != MOECTS_ACT_RELU2) o_row(L->r.w13, I, n, &is_gate, &i);
        (is_gate ? gate : up)[i] = v;
    }
    for (int64_t i = 0; i < I; i++) {
        a[i] = o_act(L, gate[i], L->s.activation == MOECTS_ACT_RELU2 ? 0.0f : up[i]);
        if (L->r.weight == MOECTS_WEIGHT_ACT) a[i] *= w;
    }
    o_mid(L, a, m);
    for (int64_t n = 0; n < H; n++) {
        float v = xdot(L, 1, e, n, m, I);
        if (L->s.has_bias) v += L->b2[e * H + n];
        if (L->r.weight == MOECTS_WEIGHT_GEMM2) v *= w;
        y[n] = L->r.slot_bf16 ? bfr(v) : v;
    }
    free(h), free(m), free(gate), free(up), free(a);
}

/* The whole layer into out (out_dtype). */
static void oracle(const layer *L, void *out)
{
    const int64_t H = L->s.H, k = L->s.k;
    float *acc = malloc((size_t)H * 4), *y = malloc((size_t)H * 4);
    for (int64_t t = 0; t < L->s.T; t++) {
        for (int64_t n = 0; n < H; n++) acc[n] = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            const int64_t e = o_expert(L, t * k + j);
            if (e < 0) continue;
            const float w = L->r.w_bf16 ? bfr(L->w[t * k + j]) : L->w[t * k + j];
            o_slot(L, t * k + j, e, w, y);
            for (int64_t n = 0; n < H; n++) {
                float v = L->r.weight == MOECTS_WEIGHT_COMBINE ? fmaf(y[n], w, acc[n]) : acc[n] + y[n];
                acc[n] = L->r.combine == MOECTS_COMBINE_BF16_CHAIN ? bfr(v) : v;
            }
        }
        for (int64_t n = 0; n < H; n++) {
            if (L->s.out_dtype == MOECTS_BF16) ((uint16_t *)out)[t * H + n] = moects__bf16_from_f32(acc[n]);
            else ((float *)out)[t * H + n] = acc[n];
        }
    }
    free(acc), free(y);
}

/* ---- random layers ---- */
typedef struct {
    moects_activation act;
    moects_mid_format mid;
    moects_weight_pos wp;
    moects_layer_format f;
    int map, cancel, special;
    int64_t T, k, H, I, E; /* 0: random */
} cfg;

static void gen_recipe(layer *L, const cfg *c)
{
    moects_layer_recipe *r = &L->r;
    r->w13 = c->act == MOECTS_ACT_RELU2 ? MOECTS_W13_GATE_UP : (moects_w13_order)(rnd() % 4);
    r->g1_bf16 = (int)(rnd() % 2), r->act_bf16 = (int)(rnd() % 2), r->sig_rcp = (int)(rnd() % 2);
    r->mid = c->mid, r->scale_ue8m0 = (int)(rnd() % 2) || c->mid == MOECTS_MID_MXFP8;
    r->weight = c->wp, r->w_bf16 = (int)(rnd() % 2), r->slot_bf16 = (int)(rnd() % 2);
    r->combine = (moects_combine)(rnd() % 2);
}

static void gen_weights(layer *L)
{
    const int64_t n13 = L->s.E * L->N1 * L->s.H, n2 = L->s.E * L->s.H * L->s.inter;
    if (L->s.format == MOECTS_LAYER_BF16) {
        for (int64_t i = 0; i < n13; i++) ((uint16_t *)L->w13)[i] = r_bf16(-4, 0);
        for (int64_t i = 0; i < n2; i++) ((uint16_t *)L->w2)[i] = r_bf16(-4, 0);
        return;
    }
    for (int64_t i = 0; i < n13 / 2; i++) L->w13[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < n2 / 2; i++) L->w2[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < n13 / 32; i++) L->w13s[i] = (uint8_t)(123 + rnd() % 5);
    for (int64_t i = 0; i < n2 / 32; i++) L->w2s[i] = (uint8_t)(123 + rnd() % 5);
}

static void gen_layer(layer *L, const cfg *c)
{
    const int64_t I = pick(c->I, c->mid == MOECTS_MID_FP8_128 ? 128 : 32 * (1 + (int64_t)(rnd() % 2)));
    lay_init(L, pick(c->T, 1 + rnd() % 4), c->wp == MOECTS_WEIGHT_INPUT ? 1 : pick(c->k, 1 + rnd() % 3),
             pick(c->H, 32 * (1 + (int64_t)(rnd() % 2))), I, pick(c->E, 3), c->act, c->f);
    moects_fused_moe_shape *s = &L->s;
    s->out_dtype = rnd() % 2 ? MOECTS_BF16 : MOECTS_F32;
    s->act_limit = c->act == MOECTS_ACT_GPT_OSS ? 7.0f : 10.0f;
    s->act_alpha = 1.702f;
    if (c->act == MOECTS_ACT_SITU) /* Kimi K3's a and L, or a 1 / a not a power of two, or no L */
        s->act_alpha = rnd() % 2 ? 4.0f : 1.702f, s->act_limit = rnd() % 3 ? 25.0f : 0.0f;
    gen_recipe(L, c);
    if (c->map) {
        use_map(L, s->E + 2);
        for (int64_t i = 0; i < s->E_global; i++) L->map[i] = (int32_t)(rnd() % (uint32_t)(s->E + 1)) - 1;
    }
    if (rnd() % 2) {
        use_bias(L);
        for (int64_t i = 0; i < s->E * L->N1; i++) L->b13[i] = (float)((int)(rnd() % 2001) - 1000) / 1024.0f;
        for (int64_t i = 0; i < s->E * s->H; i++) L->b2[i] = (float)((int)(rnd() % 2001) - 1000) / 1024.0f;
    }
    const int xlo = -9 + (int)(rnd() % 8); /* GEMM1 outputs from ~0.01 (activations' curved parts) to ~50 */
    for (int64_t i = 0; i < s->T * s->H; i++) L->x[i] = r_bf16(xlo, xlo + 3);
    const int64_t span = c->map ? s->E_global + 2 : s->E + 2; /* ids from -1 to past the end */
    for (int64_t i = 0; i < s->T * s->k; i++) {
        L->ids[i] = (int32_t)(rnd() % (uint32_t)span) - 1;
        L->w[i] = 0.05f + (float)(rnd() >> 8) * 0x1p-24f; /* 24 random bits */
    }
    gen_weights(L);
}

/* Row n of expert e of W13 (which 0) or W2 (1): columns 0 and 1 become +-2^ce and its negative
 * (MXFP4: codes 4 and -4 under scale 2^(ce-2), the rest of block 0 zero). */
static void cancel_row(layer *L, int which, int64_t e, int64_t n, int ce)
{
    const int64_t N = which ? L->s.H : L->N1, K = which ? L->s.inter : L->s.H, row = e * N + n;
    const int neg = (int)(rnd() % 2);
    if (L->s.format == MOECTS_LAYER_BF16) {
        uint16_t *W = (uint16_t *)(which ? L->w2 : L->w13) + row * K;
        W[0] = (uint16_t)((neg << 15) | (127 + ce) << 7);
        W[1] = (uint16_t)(W[0] ^ 0x8000);
        return;
    }
    uint8_t *W = (which ? L->w2 : L->w13) + row * K / 2, *S = (which ? L->w2s : L->w13s) + row * K / 32;
    S[0] = (uint8_t)(127 + ce - 2);
    memset(W, 0, 16);
    W[0] = (uint8_t)(neg ? 0x6E : 0xE6); /* element 0 in the low nibble, element 1 the other sign */
}

/* Copy W13 row n0 of expert e over row n1 (and its bias). */
static void copy_row(layer *L, int64_t e, int64_t n0, int64_t n1)
{
    const int64_t H = L->s.H, N1 = L->N1;
    if (L->s.format == MOECTS_LAYER_BF16) {
        memcpy((uint16_t *)L->w13 + (e * N1 + n1) * H, (uint16_t *)L->w13 + (e * N1 + n0) * H, (size_t)H * 2);
    } else {
        memcpy(L->w13 + (e * N1 + n1) * H / 2, L->w13 + (e * N1 + n0) * H / 2, (size_t)H / 2);
        memcpy(L->w13s + (e * N1 + n1) * H / 32, L->w13s + (e * N1 + n0) * H / 32, (size_t)H / 32);
    }
    L->b13[e * N1 + n1] = L->b13[e * N1 + n0];
}

/* Sums that defeat the interval: x columns 0, 1 = 2^ce against W13 columns +-2^ce (products
 * +-2^(2 ce) cancel exactly); intermediate columns 0 and 1 made equal (W13's gate and up rows of
 * i = 1 copied from i = 0) against W2 columns +-2^ce. ce = 20 leaves the bits within the 128-bit
 * integer's reach, ce = 50 takes GEMM1's past it (to moects_xsum). */
static void make_cancel(layer *L)
{
    const int64_t I = L->s.inter;
    const int ce = rnd() % 2 ? 20 : 50;
    for (int64_t t = 0; t < L->s.T; t++) L->x[t * L->s.H] = L->x[t * L->s.H + 1] = (uint16_t)((127 + ce) << 7);
    for (int64_t e = 0; e < L->s.E; e++) {
        for (int64_t n = 0; n < L->N1; n++) cancel_row(L, 0, e, n, ce);
        for (int64_t n = 0; n < L->s.H; n++) cancel_row(L, 1, e, n, ce);
        int64_t rows[2][2] = {{0, 0}, {1, 1}}; /* [i][gate, up] */
        for (int64_t n = 0; n < L->N1 && L->s.activation != MOECTS_ACT_RELU2; n++) {
            int is_gate;
            int64_t i;
            o_row(L->r.w13, I, n, &is_gate, &i);
            if (i < 2) rows[i][is_gate ? 0 : 1] = n;
        }
        copy_row(L, e, rows[0][0], rows[1][0]);
        if (L->s.activation != MOECTS_ACT_RELU2) copy_row(L, e, rows[0][1], rows[1][1]);
    }
}

/* An Inf and a NaN in x, a NaN in expert 1's W13 row 2, a -Inf (BF16) or NaN scale in expert 2's W2. */
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

static int is_nan_at(const layer *L, const void *p, int64_t i)
{
    if (L->s.out_dtype == MOECTS_BF16) return (((const uint16_t *)p)[i] & 0x7FFF) > 0x7F80;
    return isnan(((const float *)p)[i]);
}

static uint32_t bits_at(const layer *L, const void *p, int64_t i)
{
    return L->s.out_dtype == MOECTS_BF16 ? ((const uint16_t *)p)[i] : f32_bits(((const float *)p)[i]);
}

/* The reference against the oracle, bit for bit (any NaN equals any NaN). */
static void check_layer(layer *L, const char *what)
{
    char rs[256];
    moects__layer_recipe_format(&L->r, rs, sizeof rs);
    cr_assert_eq(moects__ref_fused_moe(&L->s, &L->a, &L->r), 0, "%s %s: the reference failed", what, rs);
    oracle(L, L->out2);
    for (int64_t i = 0; i < L->s.T * L->s.H; i++) {
        const uint32_t got = bits_at(L, L->out, i), want = bits_at(L, L->out2, i);
        cr_assert(got == want || (is_nan_at(L, L->out, i) && is_nan_at(L, L->out2, i)),
                  "%s %s act %d fmt %d T %lld k %lld H %lld I %lld map %d bias %d out %s: out[%lld] = %#x, "
                  "oracle %#x",
                  what, rs, (int)L->s.activation, (int)L->s.format, (long long)L->s.T, (long long)L->s.k,
                  (long long)L->s.H, (long long)L->s.inter, L->s.has_expert_map, L->s.has_bias,
                  L->s.out_dtype == MOECTS_BF16 ? "bf16" : "f32", (long long)i, got, want);
    }
}

static void run_cfg(const cfg *c, uint64_t seed, const char *what)
{
    layer L;
    rng_state = seed;
    gen_layer(&L, c);
    if (c->cancel) make_cancel(&L);
    if (c->special) make_special(&L);
    check_layer(&L, what);
    lay_free(&L);
}

/* Every activation x intermediate x weight position x format, twice; recipes' other keys, maps,
 * biases, shapes, input scales and out dtypes drawn at random; one in three with cancelling sums. */
Test(fused_moe_oracle, every_stage_variant)
{
    uint64_t seed = 1000;
    for (int round = 0; round < 2; round++)
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid++)
            for (int wp = 0; wp <= MOECTS_WEIGHT_COMBINE; wp++)
                for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_MXFP4; f++) {
                    rng_state = ++seed * 7919;
                    cfg c = {(moects_activation)act, (moects_mid_format)mid, (moects_weight_pos)wp,
                             (moects_layer_format)f, (int)(rnd() % 2), rnd() % 3 == 0, 0, 0, 0, 0, 0, 0};
                    run_cfg(&c, seed, "random");
                }
}

/* The same with every sum cancelling (the exact path for nearly every element). */
Test(fused_moe_oracle, cancellation)
{
    uint64_t seed = 5000;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid++) {
            cfg c = {(moects_activation)act, (moects_mid_format)mid, (moects_weight_pos)(mid % 4),
                     (moects_layer_format)(1 + act % 2), act % 2, 1, 0, 0, 0, 0, 0, 0};
            run_cfg(&c, ++seed, "cancel");
        }
}

/* NaN and Inf in x, a NaN weight element (BF16) or scale (MXFP4), a -Inf weight element. */
Test(fused_moe_oracle, nan_and_inf)
{
    uint64_t seed = 9000;
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int f = MOECTS_LAYER_BF16; f <= MOECTS_LAYER_MXFP4; f++)
            for (int mid = 0; mid <= MOECTS_MID_MXFP8; mid += 2) {
                cfg c = {(moects_activation)act, (moects_mid_format)mid, MOECTS_WEIGHT_GEMM2, (moects_layer_format)f,
                         0, 0, 1, 3, 3, 64, 0, 3};
                run_cfg(&c, ++seed, "special");
            }
}

/* More rows per expert (the dgemm path at work), then the same layer in chunks of 2 tokens and 3
 * rows: identical bits. */
Test(fused_moe_oracle, larger_and_chunked)
{
    cfg c = {MOECTS_ACT_SILU, MOECTS_MID_FP8_128, MOECTS_WEIGHT_GEMM2, MOECTS_LAYER_BF16, 1, 0, 0, 48, 4, 256, 128, 4};
    layer L;
    rng_state = 77;
    gen_layer(&L, &c);
    check_layer(&L, "larger");
    const size_t bytes = (size_t)(L.s.T * L.s.H) * (L.s.out_dtype == MOECTS_BF16 ? 2 : 4);
    void *first = malloc(bytes);
    memcpy(first, L.out, bytes);
    setenv("MOECTS_FUSED_REF_CHUNK", "2,3", 1);
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    unsetenv("MOECTS_FUSED_REF_CHUNK");
    cr_assert_eq(memcmp(first, L.out, bytes), 0, "chunked run differs");
    free(first);
    lay_free(&L);
    c = (cfg){MOECTS_ACT_GPT_OSS, MOECTS_MID_MXFP8, MOECTS_WEIGHT_COMBINE, MOECTS_LAYER_MXFP4, 0, 1, 0, 24, 3, 128, 64, 5};
    rng_state = 78;
    gen_layer(&L, &c);
    make_cancel(&L);
    setenv("MOECTS_FUSED_REF_CHUNK", "5,7", 1);
    check_layer(&L, "chunked");
    unsetenv("MOECTS_FUSED_REF_CHUNK");
    lay_free(&L);
}

/* The activations in FP32 seen directly: W2 = identity, so out = y = a (g1, act, mid, slot, out all
 * FP32, weight 1 in the combine); GEMM1 outputs spread over the activations' curved parts (each
 * token its own input scale). */
Test(fused_moe_oracle, activation_values)
{
    for (int act = MOECTS_ACT_SILU; act <= MOECTS_ACT_SITU; act++)
        for (int sig = 0; sig < 2; sig++) {
            cfg c = {(moects_activation)act, MOECTS_MID_F32, MOECTS_WEIGHT_COMBINE, MOECTS_LAYER_BF16,
                     0, 0, 0, 32, 1, 128, 128, 2};
            layer L;
            rng_state = 300 + (uint64_t)(act * 2 + sig);
            gen_layer(&L, &c);
            set_recipe(&L, sig ? MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=combine,sig=rcp)"
                               : MOECTS_LAYER_RECIPE_V1 "(g1=f32,act=f32,mid=f32,slot=f32,weight=combine)");
            L.s.out_dtype = MOECTS_F32;
            L.s.has_bias = 0, L.a.b13 = L.a.b2 = NULL;
            memset(L.w2, 0, (size_t)(2 * 128 * 128 * 2));
            for (int64_t t = 0; t < L.s.T; t++) {
                L.ids[t] = (int32_t)(t % 2), L.w[t] = 1.0f;
                for (int64_t h = 0; h < L.s.H; h++) L.x[t * L.s.H + h] = r_bf16(-7 + (int)(t % 7), -4 + (int)(t % 7));
            }
            for (int e = 0; e < 2; e++)
                for (int i = 0; i < 128; i++) set_w2(&L, e, i, i, 1.0f);
            check_layer(&L, "activation values");
            lay_free(&L);
        }
}

/* Invalid shapes and recipes without an exact result. */
Test(fused_moe, refusals)
{
    layer L;
    lay_init(&L, 2, 2, 64, 32, 2, MOECTS_ACT_SILU, MOECTS_LAYER_MXFP4);
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    L.r.combine = MOECTS_COMBINE_F32_ANY;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "combine in any order");
    L.r.combine = MOECTS_COMBINE_F32_SLOTS;
    L.r.weight = MOECTS_WEIGHT_INPUT;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "weight on the input with k = 2");
    L.r.weight = MOECTS_WEIGHT_GEMM2;
    L.s.H = 48;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "MXFP4 with H % 32");
    L.s.H = 64, L.s.E = 0;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "E = 0");
    L.s.E = 2, L.s.activation = (moects_activation)9;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "bad activation");
    L.s.activation = MOECTS_ACT_SITU, L.s.act_alpha = 4.0f, L.s.act_limit = 0.0f;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0, "situ without L");
    const float bad[4][2] = {{0.0f, 25.0f}, {INFINITY, 25.0f}, {4.0f, -1.0f}, {4.0f, NAN}};
    for (int i = 0; i < 4; i++) {
        L.s.act_alpha = bad[i][0], L.s.act_limit = bad[i][1];
        cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "situ a %g L %g", (double)bad[i][0],
                     (double)bad[i][1]);
    }
    L.s.activation = MOECTS_ACT_SILU, L.r.mid = (moects_mid_format)7;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "bad mid");
    L.r.mid = MOECTS_MID_BF16, L.a.w13_scale = NULL;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "MXFP4 without scales");
    L.a.w13_scale = L.w13s, L.s.T = -1;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1, "T < 0");
    L.s.T = 0;
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0, "T = 0: nothing to do");
    lay_free(&L);
}

/* ---- FP8 block-128 weights (W8A8), worked by hand ----
 * T 1, E 1, top-1 (w 0.75), H 256, I 256, relu2 (N1 = I), recipe mid=fp8_128, slot=f32, out FP32.
 * x is 1.0 on block 0 and 2.0 on block 1: each block's amax/448 scale is sa_b = fl(b + 1 / 448) and
 * every x/sa rounds to the E4M3 value 448. Every weight code is 0x38 (1.0), so each block dot is
 * 128 * 448 = 57344 exactly, and an element is the scale chain alone:
 *   acc = fl(57344 * fl(sa_0 * sb_0)); acc = fl(acc + 57344 * fl(sa_1 * sb_1))
 * (fmaf: one rounding each), the exact products and sums taken in long double (27 + 24 bits: exact)
 * and rounded once to float. The block scales differ per row block, so the two halves of GEMM1's
 * rows and of GEMM2's columns differ, and each intermediate group of 128 has its own scale. */
static float ld_fma(float p, float s, float acc) { return (float)((long double)p * (long double)s + (long double)acc); }

static float hand_bf16(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

typedef struct {
    moects_fused_moe_shape s;
    moects_fused_moe_args a;
    moects_layer_recipe r;
    uint16_t x[256];
    uint8_t w13[256 * 256], w2[256 * 256];
    float sb1[4], sb2[4], out[256], tw, gs;
    int32_t id;
} fp8_layer;

static const float SB1[4] = {0x1p-10f, 0x3p-12f, 0x1p-11f, 0x5p-13f}; /* [row block][k block] */
static const float SB2[4] = {0x1p-7f, 0x1p-8f, 0x3p-9f, 0x1p-6f};

static void fp8_layer_init(fp8_layer *L)
{
    memset(L, 0, sizeof *L);
    L->s = (moects_fused_moe_shape){.T = 1, .k = 1, .H = 256, .inter = 256, .E = 1, .E_global = 1,
                                    .format = MOECTS_LAYER_FP8_128, .activation = MOECTS_ACT_RELU2,
                                    .out_dtype = MOECTS_F32};
    for (int i = 0; i < 256; i++) L->x[i] = moects__bf16_from_f32(i < 128 ? 1.0f : 2.0f);
    memset(L->w13, 0x38, sizeof L->w13), memset(L->w2, 0x38, sizeof L->w2);
    memcpy(L->sb1, SB1, sizeof SB1), memcpy(L->sb2, SB2, sizeof SB2);
    L->tw = 0.75f, L->gs = 1.0f, L->id = 0;
    L->a = (moects_fused_moe_args){.x = L->x, .topk_ids = &L->id, .topk_weights = &L->tw, .w13 = L->w13,
                                   .w2 = L->w2, .mid_global_scale = &L->gs, .out = L->out,
                                   .w13_block_scale = L->sb1, .w2_block_scale = L->sb2};
    char err[160];
    cr_assert_eq(moects__layer_recipe_parse("fused_moe.layer_v1(mid=fp8_128,slot=f32)", &L->r, err, sizeof err), 0);
}

/* The hand chain's output column h (row block h / 128). */
static float fp8_hand(int h)
{
    const float sa0 = 1.0f / 448.0f, sa1 = 2.0f / 448.0f, P = 57344.0f;
    float s2[2];
    for (int g = 0; g < 2; g++) { /* GEMM1 rows of block g, relu2, g1 and act rounded to BF16 */
        const float g1 = hand_bf16(ld_fma(P, sa1 * SB1[2 * g + 1], ld_fma(P, sa0 * SB1[2 * g], 0.0f)));
        const float a = hand_bf16(g1 * g1);
        s2[g] = a / 448.0f; /* the group's amax is a; its code 448 again */
    }
    const int hb = h / 128;
    const float y = ld_fma(P, s2[1] * SB2[2 * hb + 1], ld_fma(P, s2[0] * SB2[2 * hb], 0.0f));
    return y * 0.75f;
}

Test(ref_fused_moe, fp8_128_block_chain_by_hand)
{
    fp8_layer L;
    fp8_layer_init(&L);
    cr_assert_eq(moects__e4m3_encode(1.0f / (1.0f / 448.0f)), moects__e4m3_encode(448.0f)); /* the codes: 448 */
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    for (int h = 0; h < 256; h++) cr_expect_eq(L.out[h], fp8_hand(h), "h %d: %a, hand %a", h, L.out[h], fp8_hand(h));
    cr_expect_neq(fp8_hand(0), fp8_hand(128)); /* the row blocks' scales show */
    L.sb2[3] = NAN; /* W2's row block 1, k block 1: columns 128.. NaN, the others as before */
    cr_assert_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), 0);
    cr_expect(isnan(L.out[200]) && L.out[5] == fp8_hand(5));
}

/* The format's refusals: a recipe without mid=fp8_128, H or I not a multiple of 128, no block scales. */
Test(ref_fused_moe, fp8_128_refusals)
{
    fp8_layer L;
    fp8_layer_init(&L);
    moects_layer_recipe r = L.r;
    r.mid = MOECTS_MID_BF16;
    cr_expect_not_null(moects__layer_recipe_inexact(&r, &L.s));
    cr_expect_eq(moects__ref_fused_moe(&L.s, &L.a, &r), -1);
    L.a.w2_block_scale = NULL;
    cr_expect_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1);
    fp8_layer_init(&L);
    L.s.H = 192;
    cr_expect_eq(moects__ref_fused_moe(&L.s, &L.a, &L.r), -1);
}
