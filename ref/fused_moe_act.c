/* fused_moe_act.c: the fused MoE layer's elementwise stages between the GEMMs (ref/moects_layer.h,
 * ref/moects_fused_internal.h): W13's gate/up rows, the activation, the intermediate.
 *
 * Every operation is one FP32 operation rounded to nearest even, in the order written (ref/ is
 * built with -ffp-contract=off: nothing is fused behind our back); exp, tanh and erf are correctly
 * rounded (ref/moects_crmath.h). NaN and Inf go through as IEEE arithmetic takes them; the clamps
 * keep a NaN (g > L ? L : g), as the engines' comparisons do. Sources of each form:
 *   silu       vLLM csrc/activation_kernels.cu silu_kernel: x / (1 + expf(-x)) (sig=div);
 *   gelu_tanh  vLLM gelu_tanh_kernel: BETA = M_SQRT2 * M_2_SQRTPI * 0.5 (to float), KAPPA = 0.044715f,
 *              cube = f * f * f, inner = BETA * (f + KAPPA * cube), 0.5f * f * (1 + tanhf(inner));
 *   gelu_erf   vLLM gelu_kernel: f * 0.5f * (1 + erff(f * M_SQRT1_2));
 *   gpt_oss    vLLM swigluoai_and_mul: g' = min(g, L), u' = clamp(u, -L, L),
 *              glu = g' * (1 / (1 + expf(-g' * alpha))) (sig=rcp), (u' + 1) * glu;
 *   relu2      Nemotron-H: m = max(x, 0), m * m;
 *   situ       vLLM situ_and_mul_kernel (Kimi K3; a = activation_situ_beta, L = its linear_beta):
 *              ia = 1 / a, gate = (a * tanhf(g * ia)) / (1 + expf(-g)) (sig=div; rcp: times
 *              1 / (1 + e)), and when L > 0, iL = 1 / L, u' = L * tanhf(u * iL) (else u' = u);
 *              gate * u'. No clamp. The reciprocals are FP32 divisions, as the kernel's; situ=div
 *              divides instead (g / a, u / L: PyTorch's SituAndMul.forward_native).
 * act=bf16 rounds the gate's activation (silu(g), gelu(g), gpt_oss's glu, situ's gate; relu2's
 * square, the whole activation there: a recipe decision) to BF16 before the product with up.
 *
 * FP8 intermediates (a recipe decision, as the engines do it): the activation is first rounded to
 * BF16 (the engines quantize the BF16 tensor the activation kernel wrote), then per group (the row
 * of I, 128 or 32 columns) amax = max |v|, the scale s (moects__fused_fp8_scale), q = e4m3(v / s)
 * (FP32 division, then RNE saturating to +-448) and m = dec(q) * s exactly (GEMM2 takes q and s
 * apart; in double the product is exact: 4 + 24 bits). A NaN in a group makes its scale NaN, so
 * every m of the group NaN. */
#include <math.h>

#include "moects_crmath.h"
#include "moects_fused_internal.h"

static float bf(float v) { return moects__bf16_to_f32(moects__bf16_from_f32(v)); }

void moects__fused_gate_up(moects_w13_order o, int64_t I, int64_t i, int64_t *gate, int64_t *up)
{
    switch (o) {
    case MOECTS_W13_UP_GATE: *up = i, *gate = I + i; break;
    case MOECTS_W13_INTERLEAVE1: *gate = 2 * i, *up = 2 * i + 1; break;
    case MOECTS_W13_INTERLEAVE8: *gate = 16 * (i / 8) + i % 8, *up = *gate + 8; break;
    default: *gate = i, *up = I + i; break;
    }
}

/* x * sigmoid with e = exp(-z) given: x / (1 + e) (div) or x * (1 / (1 + e)) (rcp). */
static float sig_mul(float x, float e, int rcp) { return rcp ? x * (1.0f / (1.0f + e)) : x / (1.0f + e); }

/* The gate's activation of the gated forms (silu, gelu, situ with its a), before the product with up. */
static float gate_act(moects_activation act, float a, float g, int rcp, int div)
{
    const float BETA = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), KAPPA = 0.044715f, ALPHA = (float)M_SQRT1_2;
    if (act == MOECTS_ACT_GELU_TANH) {
        const float cube = g * g * g;
        const float inner = BETA * (g + KAPPA * cube);
        return 0.5f * g * (1.0f + moects_cr_tanhf(inner));
    }
    if (act == MOECTS_ACT_GELU_ERF) return g * 0.5f * (1.0f + moects_cr_erff(g * ALPHA));
    if (act == MOECTS_ACT_SITU) return sig_mul(a * moects_cr_tanhf(div ? g / a : g * (1.0f / a)), moects_cr_expf(-g), rcp);
    return sig_mul(g, moects_cr_expf(-g), rcp); /* silu */
}

float moects__fused_act(const moects_fused_moe_shape *s, const moects_layer_recipe *r, float g, float u)
{
    const float L = s->act_limit;
    if (s->activation == MOECTS_ACT_RELU2) {
        const float m = g > 0.0f ? g : (g == g ? 0.0f : g);
        const float sq = m * m;
        return r->act_bf16 ? bf(sq) : sq;
    }
    if (s->activation == MOECTS_ACT_SILU_CLAMP || s->activation == MOECTS_ACT_GPT_OSS) {
        g = g > L ? L : g;
        u = u > L ? L : (u < -L ? -L : u);
    }
    if (s->activation == MOECTS_ACT_SITU && L > 0.0f) u = L * moects_cr_tanhf(r->situ_div ? u / L : u * (1.0f / L));
    if (s->activation == MOECTS_ACT_GPT_OSS) {
        float glu = sig_mul(g, moects_cr_expf(-(g * s->act_alpha)), r->sig_rcp);
        if (r->act_bf16) glu = bf(glu);
        return (u + 1.0f) * glu;
    }
    const moects_activation ga_act = s->activation == MOECTS_ACT_SILU_CLAMP ? MOECTS_ACT_SILU : s->activation;
    float ga = gate_act(ga_act, s->act_alpha, g, r->sig_rcp, r->situ_div);
    if (r->act_bf16) ga = bf(ga);
    return ga * u;
}

double moects__fused_fp8_scale(float amax, int ue8m0)
{
    if (isnan(amax)) return NAN;
    if (!ue8m0) return (double)(fmaxf(amax, 1e-10f) / 448.0f); /* FP32 division */
    if (amax == 0.0f) return 0x1p-127;
    if (isinf(amax)) return 0x1p127;
    /* amax in [2^(x+8), 2^(x+9)): 448 * 2^x = 1.75 * 2^(x+8) may reach it, 448 * 2^(x-1) cannot */
    int x = ilogb(amax) - 8;
    if (448.0 * ldexp(1.0, x) < (double)amax) x++;
    x = x < -127 ? -127 : x > 127 ? 127 : x;
    return ldexp(1.0, x);
}

void moects__fused_fp8_groups(const float *a, int64_t n, int64_t G, int ue8m0, double *q, float *sc)
{
    for (int64_t g0 = 0; g0 < n; g0 += G) {
        const int64_t len = n - g0 < G ? n - g0 : G;
        float amax = 0.0f;
        int nan = 0;
        for (int64_t i = g0; i < g0 + len; i++) {
            const float v = fabsf(bf(a[i]));
            nan |= v != v;
            amax = v > amax ? v : amax;
        }
        const float sf = (float)moects__fused_fp8_scale(nan ? NAN : amax, ue8m0); /* exact: an FP32 quotient,
                                                                                     or 2^-127..2^127 */
        sc[g0 / G] = sf;
        for (int64_t i = g0; i < g0 + len; i++) q[i] = moects__e4m3_decode(moects__e4m3_encode(bf(a[i]) / sf));
    }
}

void moects__fused_mid(const moects_layer_recipe *r, int64_t I, const float *a, double *m)
{
    if (r->mid == MOECTS_MID_BF16 || r->mid == MOECTS_MID_F32) {
        for (int64_t i = 0; i < I; i++) m[i] = r->mid == MOECTS_MID_BF16 ? bf(a[i]) : a[i];
        return;
    }
    const int64_t G = r->mid == MOECTS_MID_FP8_TOKEN ? I : r->mid == MOECTS_MID_FP8_128 ? 128 : 32;
    const int ue8m0 = r->scale_ue8m0 || r->mid == MOECTS_MID_MXFP8;
    float sc[1]; /* one group at a time: the scale */
    for (int64_t i0 = 0; i0 < I; i0 += G) {
        const int64_t len = I - i0 < G ? I - i0 : G;
        moects__fused_fp8_groups(a + i0, len, G, ue8m0, m + i0, sc);
        for (int64_t i = i0; i < i0 + len; i++) m[i] *= sc[0]; /* exact: 4 + 24 bits */
    }
}

float moects__fused_nvfp4_scale(float amax, float gs, float *o)
{
    const float sf = gs * (amax * (1.0f / 6.0f)); /* TRT-LLM: SFScaleVal * (vecMax * rcp(6)) */
    const float b = moects__e4m3_decode(moects__e4m3_encode(sf)); /* RNE, saturating at 448; NaN stays */
    *o = b != 0.0f ? 1.0f / (b * (1.0f / gs)) : 0.0f;
    return b;
}

void moects__fused_nvfp4_groups(const float *a, int64_t n, float gs, double *m)
{
    for (int64_t g0 = 0; g0 < n; g0 += 16) {
        const int64_t len = n - g0 < 16 ? n - g0 : 16;
        float amax = 0.0f;
        int nan = 0;
        for (int64_t i = g0; i < g0 + len; i++) {
            const float v = fabsf(bf(a[i]));
            nan |= v != v;
            amax = v > amax ? v : amax;
        }
        float o;
        const float b = moects__fused_nvfp4_scale(amax, gs, &o);
        for (int64_t i = g0; i < g0 + len; i++) /* exact: 2 + 4 bits */
            m[i] = nan ? NAN : (double)moects__e2m1_decode(moects__e2m1_encode(bf(a[i]) * o, MOECTS_ROUND_RNE)) * b;
    }
}
