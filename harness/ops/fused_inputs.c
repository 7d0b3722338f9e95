/* fused_inputs.c: the inputs of a fused_moe case from (seed, case id) (DESIGN.md "The fused MoE
 * layer": inputs that exercise the semantics). Magnitudes are set so that GEMM1's outputs are of
 * order 1 (the activations' interesting range) and GEMM2's of the order of the input; adversarial
 * data scales GEMM1 up 8x, so outputs pass the activation's limit on both halves, and puts FP4 scale
 * bytes of every value class (2^-127, 2^127 and 1 beside the usual) into expert 0's weights; NaN
 * data gives expert 0 a NaN scale (UE8M0 0xFF, FP32 NaN) or NaN weights and token 0 one NaN input.
 * FP8 block-128 weights: E4M3 codes times FP32 block scales (gen_fp8_weights). NVFP4 weights: E2M1
 * codes with E4M3 block scales of [1, 16) and a per-expert FP32 alpha (gen_alphas); adversarial data
 * puts a scale byte of every E4M3 class (+0, -0, the smallest subnormal, the smallest normal, 448)
 * into expert 0, NaN data the NaN byte 0x7F. W4A8 weights are MXFP4's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_harness.h"
#include "moects_op.h"
#include "ops_internal.h"

/* A BF16 of magnitude [1, 2) * 2^e with a random sign and random mantissa bits: all 7, or (exact
 * data) the top 3, so that GEMM1's products (x and W13 both so) lie on a grid 2^-8 of their largest
 * and H < 2^16 of them sum exactly in FP32 in any order: GEMM1 is then one point for every
 * admissible kernel, and the enclosure as tight as GEMM2 and the recipe allow. */
static uint16_t bf16_draw(uint64_t u, int e, int exact)
{
    return (uint16_t)(((u >> 8) & 1) << 15 | (uint16_t)((127 + e) << 7) | (u >> 16 & (exact ? 0x70 : 0x7f)));
}

/* floor(log2(sqrt(n))) for n >= 1: the exponent that makes a sum of n random-sign terms of order 1. */
static int half_log2(int64_t n)
{
    int e = 0;
    while ((int64_t)1 << (2 * (e + 1)) <= n) e++;
    return e;
}

/* The weights of one GEMM, [E, rows, K], of the experts some slot routes to (used[e]; the others
 * stay zero, untouched pages: a kernel that reads one instead of the routed expert gets zeros): BF16
 * of magnitude ~2^-sh, or MXFP4 codes with UE8M0 block scales around 2^-(sh + 1) (E2M1 magnitudes
 * average ~2). Expert 0 carries the data mode's specials. */
static void gen_weights(const moects_case *c, const uint8_t *used, uint64_t key, uint64_t kscale, int64_t rows,
                        int64_t K, int sh, int exact, void *w, uint8_t *sc)
{
    const int nv = c->layer_format == MOECTS_LAYER_NVFP4;
    const int64_t E = c->E, per = rows * K, nb = rows * (K / (nv ? 16 : 32)); /* one expert's elements, scale blocks */
    for (int64_t e = 0; e < E; e++) {
        if (!used[e]) continue;
        if (c->layer_format == MOECTS_LAYER_BF16) {
            uint16_t *b = (uint16_t *)w + e * per;
            for (int64_t i = 0; i < per; i++)
                b[i] = bf16_draw(moects__draw(key, (uint64_t)(e * per + i)), -sh - 1, exact);
            continue;
        }
        if (c->layer_format == MOECTS_LAYER_FP8_128) continue; /* gen_fp8_weights */
        uint8_t *q = (uint8_t *)w + e * per / 2;
        for (int64_t i = 0; i < per / 2; i++) q[i] = (uint8_t)(moects__draw(key, (uint64_t)(e * per / 2 + i) / 8) >> (8 * (i % 8)));
        for (int64_t i = 0; i < nb; i++) {
            const uint64_t u = moects__draw(kscale, (uint64_t)(e * nb + i));
            sc[e * nb + i] = nv ? (uint8_t)((7 + u % 4) << 3 | (u >> 2 & 7)) /* E4M3 in [1, 16) */
                                : (uint8_t)(127 - sh - 2 + (int)(u % 3));
        }
    }
    if (!used[0]) return;
    if (c->layer_format == MOECTS_LAYER_FP8_128) return;
    if (c->layer_format == MOECTS_LAYER_BF16) {
        uint16_t *b = w;
        if (c->data == MOECTS_DATA_NAN && per > 0) b[0] = 0x7fc1, b[per / 2] = 0xff80; /* NaN, -Inf */
        return;
    }
    if (nv && c->data == MOECTS_DATA_ADVERSARIAL && nb >= 6)
        sc[1] = 0x00, sc[nb / 5] = 0x80, sc[nb / 4] = 0x01, sc[nb / 3] = 0x08, sc[nb / 2] = 0x7E;
    else if (c->data == MOECTS_DATA_ADVERSARIAL && nb >= 4) sc[1] = 0, sc[nb / 3] = 254, sc[nb / 2] = 127, sc[nb - 1] = 1;
    if (c->data == MOECTS_DATA_NAN && nb >= 2) sc[nb / 2] = nv ? 0x7F : 0xff;
}

/* FP8_128 weights [E, rows, K] of the routed experts (used[e]): E4M3 codes of magnitude [1/4, 4)
 * (exponent fields 5..8, random sign and fraction: no NaN code) and FP32 block scales [E, rows/128,
 * K/128] of 2^-(sh + 1) times [1, 2) with a full significand (as amax / 448 gives). Expert 0 carries
 * the data mode's specials: adversarial (w2: 1) puts a scale of every FP32 class (+0, subnormal
 * 2^-140, 2^20, and in W2, where it spoils only its 128 columns, +Inf) into its blocks; NaN data a
 * NaN scale and a NaN code (0x7F) into W2. */
static void gen_fp8_weights(const moects_case *c, const uint8_t *used, uint64_t key, uint64_t kscale, int64_t rows,
                            int64_t K, int sh, int w2, void *w, float *sc)
{
    const int64_t per = rows * K, nb = (rows / 128) * (K / 128);
    for (int64_t e = 0; e < c->E; e++) {
        if (!used[e]) continue;
        uint8_t *q = (uint8_t *)w + e * per;
        for (int64_t i = 0; i < per; i++) {
            const uint64_t u = moects__draw(key, (uint64_t)(e * per + i) / 4) >> (16 * (i % 4));
            q[i] = (uint8_t)((u & 0x80) | (5 + (u >> 8 & 3)) << 3 | (u >> 10 & 7));
        }
        for (int64_t i = 0; i < nb; i++) {
            const uint64_t u = moects__draw(kscale, (uint64_t)(e * nb + i));
            sc[e * nb + i] = ldexpf(1.0f + (float)(u >> 40) * 0x1p-24f, -sh - 1); /* [1, 2) * 2^-(sh + 1) */
        }
    }
    if (!used[0] || nb < 4) return;
    if (c->data == MOECTS_DATA_ADVERSARIAL) {
        sc[1] = 0.0f, sc[nb / 3] = 0x1p-140f, sc[nb / 2] = 0x1p20f;
        if (w2) sc[nb - 1] = INFINITY;
    }
    if (c->data == MOECTS_DATA_NAN && w2) sc[nb / 2] = NAN, ((uint8_t *)w)[0] = 0x7F;
}

/* NVFP4: the per-expert alphas [E] of one GEMM, 2^-(sh + 3) times [1, 2) with a full significand (1 /
 * a global scale 448 * 6 / amax; the E4M3 block scales average ~4): every expert's differs. */
static void gen_alphas(const moects_case *c, uint64_t key, int sh, float *alpha)
{
    for (int64_t e = 0; alpha && e < c->E; e++)
        alpha[e] = ldexpf(1.0f + (float)(moects__draw(key, (uint64_t)e) >> 40) * 0x1p-24f, -sh - 3);
}

/* topk ids by the case's routing over the global experts (rank 0's are [first, first + n_local)), and
 * the router weights: FP32 in [1/8, 1) with full significands (never 1, also for top-1). */
static int gen_routing(const moects_case *c, uint64_t seed, moects_inputs *in, char *err, size_t errlen)
{
    const int64_t T = c->T, k = c->k, fl = in->first_local, nl = in->n_local;
    int32_t *ids = in->t[MOECTS_FM_IDS].host;
    float *w = in->t[MOECTS_FM_W].host;
    uint64_t kid = moects__input_key(seed, c->id, "topk_ids"), kch = moects__input_key(seed, c->id, "routing");
    uint64_t kw = moects__input_key(seed, c->id, "topk_weights");
    int64_t hot = nl ? fl + (int64_t)(moects__draw(kch, 1) % (uint64_t)nl) : -1;
    int64_t zero = nl ? fl + (int64_t)(moects__draw(kch, 0) % (uint64_t)nl) : -1;
    int64_t *prev = malloc((size_t)k * sizeof *prev);
    if (!prev) return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id), -2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int rt = c->routing;
            int64_t e = rt == MOECTS_ROUTE_ONE_EXPERT && j == 0 ? hot
                        : rt == MOECTS_ROUTE_DISPATCHED && j == 0 ? fl + (int64_t)(moects__draw(kch, (uint64_t)(2 + t)) % (uint64_t)nl)
                        : moects__pick_expert(c, kid, prev, t, j, fl,
                                              rt == MOECTS_ROUTE_ZERO_EXPERT ? zero : rt == MOECTS_ROUTE_ONE_EXPERT ? hot : -1,
                                              rt == MOECTS_ROUTE_NO_LOCAL ? fl : 0, rt == MOECTS_ROUTE_NO_LOCAL ? fl + nl : 0);
            prev[j] = e;
            ids[t * k + j] = (int32_t)e;
            uint32_t m = (uint32_t)(moects__draw(kw, (uint64_t)(t * k + j)) & 0x7fffff);
            w[t * k + j] = moects__f32_bits((uint32_t)(126 - (int)(moects__draw(kw, (uint64_t)(t * k + j)) >> 40) % 3) << 23 | m);
        }
    free(prev);
    return 0;
}

/* A bias: a signed 24-bit draw over 2^24, |b| < 1/2 (full significands). */
static float bias_draw(uint64_t u) { return (float)((int32_t)(u >> 40) - (1 << 23)) / 16777216.0f; }

/* x [c->T, H] (NaN data: token 0 holds one NaN). */
static void gen_x(const moects_case *c, uint64_t seed, moects_inputs *in)
{
    uint16_t *x = in->t[MOECTS_FM_X].host;
    const int64_t H = in->fm.H;
    uint64_t kx = moects__input_key(seed, c->id, "x");
    for (int64_t i = 0; i < c->T * H; i++) x[i] = bf16_draw(moects__draw(kx, (uint64_t)i), -1, c->data == MOECTS_DATA_EXACT);
    if (c->data == MOECTS_DATA_NAN && c->T > 0) x[H / 2] = 0x7fc0;
}

/* x [T, H], biases [E, N1] and [E, H] (|b| < 1/2, full significands), the intermediate's global
 * scales [E] (448 * 6 / amax, amax in [1, 16]), the expert_map. */
static void gen_small(const moects_case *c, uint64_t seed, moects_inputs *in)
{
    const moects_fused_moe_shape *s = &in->fm;
    const int64_t N1 = s->activation == MOECTS_ACT_RELU2 ? s->inter : 2 * s->inter;
    uint64_t kb = moects__input_key(seed, c->id, "bias");
    gen_x(c, seed, in);
    float *b13 = in->t[MOECTS_FM_B13].host, *b2 = in->t[MOECTS_FM_B2].host, *gs = in->t[MOECTS_FM_MID_GS].host;
    for (int64_t i = 0; b13 && i < s->E * N1; i++)
        b13[i] = bias_draw(moects__draw(kb, (uint64_t)i));
    for (int64_t i = 0; b2 && i < s->E * s->H; i++)
        b2[i] = bias_draw(moects__draw(kb, (uint64_t)(s->E * N1 + i)));
    uint64_t kg = moects__input_key(seed, c->id, "mid_global_scale");
    for (int64_t e = 0; e < s->E; e++) gs[e] = 448.0f * 6.0f / (1.0f + (float)(moects__draw(kg, (uint64_t)e) % 241) / 16.0f);
    int32_t *map = in->t[MOECTS_FM_MAP].host;
    for (int64_t g = 0; map && g < s->E_global; g++)
        map[g] = g >= in->first_local && g < in->first_local + in->n_local ? (int32_t)(g - in->first_local) : -1;
}

/* [E]: 1 for each local expert some slot routes to (expert 0 always: it carries the data's specials). */
static uint8_t *routed_experts(const moects_case *c, const moects_inputs *in)
{
    uint8_t *used = calloc((size_t)c->E + 1, 1);
    const int32_t *ids = in->t[MOECTS_FM_IDS].host;
    if (!used) return NULL;
    used[0] = 1;
    for (int64_t i = 0; i < c->T * c->k; i++)
        if (ids[i] >= in->first_local && ids[i] < in->first_local + in->n_local) used[ids[i] - in->first_local] = 1;
    return used;
}

static int fm_check(const moects_case *c, char *err, size_t errlen)
{
    const char *id = c->id;
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), -1
    if (c->T < 0 || c->k < 1 || c->k > c->E_global) BAD("case %s: T/k: T %lld, topk %lld of %lld", id, (long long)c->T, (long long)c->k, (long long)c->E_global);
    if (c->H < 1 || c->inter < 1) BAD("case %s: H/inter: H %lld, I %lld", id, (long long)c->H, (long long)c->inter);
    if (c->layer_format < MOECTS_LAYER_BF16 || c->layer_format > MOECTS_LAYER_W4A8) BAD("case %s: layer_format: unknown", id);
    if (c->layer_format == MOECTS_LAYER_NVFP4 && (c->H % 16 || c->inter % 16))
        BAD("case %s: H/inter: NVFP4 needs multiples of 16 (H %lld, I %lld)", id, (long long)c->H, (long long)c->inter);
    if (c->layer_format == MOECTS_LAYER_FP8_128 && (c->H % 128 || c->inter % 128))
        BAD("case %s: H/inter: FP8 block-128 needs multiples of 128 (H %lld, I %lld)", id, (long long)c->H, (long long)c->inter);
    if ((c->layer_format == MOECTS_LAYER_MXFP4 || c->layer_format == MOECTS_LAYER_W4A8) && (c->H % 32 || c->inter % 32))
        BAD("case %s: H/inter: MXFP4 needs multiples of 32 (H %lld, I %lld)", id, (long long)c->H, (long long)c->inter);
    if (c->activation < MOECTS_ACT_SILU || c->activation > MOECTS_ACT_SITU) BAD("case %s: activation: unknown", id);
    if (c->out_dtype != MOECTS_BF16 && c->out_dtype != MOECTS_F32) BAD("case %s: out_dtype: not bf16/f32", id);
    if (c->routing > MOECTS_ROUTE_ONE_EXPERT && c->routing != MOECTS_ROUTE_NO_LOCAL && c->routing != MOECTS_ROUTE_DISPATCHED)
        BAD("case %s: routing: not a fused_moe routing", id);
    if ((c->routing == MOECTS_ROUTE_NO_LOCAL || c->routing == MOECTS_ROUTE_DISPATCHED) && !c->has_map)
        BAD("case %s: routing: %s needs EP", id, moects__routing_name(c->routing));
    if (c->ep_size < 1 || c->ep_rank < 0 || c->ep_rank >= c->ep_size || (c->ep_size > 1) != (c->has_map != 0))
        BAD("case %s: ep_size/ep_rank: rank %d of %d", id, c->ep_rank, c->ep_size);
#undef BAD
    return 0;
}

/* The shape from the case; the rank's experts into in. -1 with err when it has none to route to. */
static int fm_shape_of(const moects_case *c, moects_inputs *in, char *err, size_t errlen)
{
    in->n_local = moects__ep_local_experts(c->E_global, c->ep_size, c->ep_rank, &in->first_local);
    if (in->n_local != c->E)
        return snprintf(err, errlen, "case %s: E: %lld local experts, but rank %d of %d holds %lld", c->id,
                        (long long)c->E, c->ep_rank, c->ep_size, (long long)in->n_local), -1;
    moects__fused_case_shape(c, &in->fm);
    return 0;
}

int moects__fused_build(const moects_case *c, uint64_t seed, int64_t pool_min, moects_inputs *in, char *err,
                        size_t errlen)
{
    (void)pool_min;
    int rc = fm_check(c, err, errlen);
    if (rc || (rc = fm_shape_of(c, in, err, errlen))) return rc;
    const moects_fused_moe_shape *s = &in->fm;
    const int64_t T = s->T, k = s->k, H = s->H, I = s->inter, E = s->E;
    const int64_t N1 = s->activation == MOECTS_ACT_RELU2 ? I : 2 * I;
    const int nv = s->format == MOECTS_LAYER_NVFP4, f8 = s->format == MOECTS_LAYER_FP8_128;
    const int mx = s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_W4A8 || nv; /* E2M1 codes */
    const int64_t g = nv ? 16 : 32;
    const size_t el2 = mx ? 1 : f8 ? 2 : 4; /* bytes of two weights */
    const size_t w13b = (size_t)(E * N1 * H / 2) * el2, w2b = (size_t)(E * H * I / 2) * el2;
    const size_t s13b = mx ? (size_t)(E * N1 * H / g) : f8 ? (size_t)(E * (N1 / 128) * (H / 128)) * 4 : 0;
    const size_t s2b = mx ? (size_t)(E * H * I / g) : f8 ? (size_t)(E * (H / 128) * (I / 128)) * 4 : 0;
    in->op = MOECTS_OP_FUSED_MOE;
    if ((rc = moects__input_alloc(in, MOECTS_FM_X, "x", (size_t)(T * H) * 2, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_IDS, "topk_ids", (size_t)(T * k) * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_W, "topk_weights", (size_t)(T * k) * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_MAP, "expert_map", c->has_map ? (size_t)s->E_global * 4 : 0, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_W13, "w13", w13b, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_W13S, f8 ? "w13_block_scale" : "w13_scale", s13b, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_W2, "w2", w2b, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_W2S, f8 ? "w2_block_scale" : "w2_scale", s2b, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_B13, "b13", s->has_bias ? (size_t)(E * N1) * 4 : 0, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_B2, "b2", s->has_bias ? (size_t)(E * H) * 4 : 0, c->id, err, errlen)) ||
        (rc = moects__input_alloc(in, MOECTS_FM_MID_GS, "mid_global_scale", (size_t)E * 4, c->id, err, errlen)))
        return rc;
    /* NVFP4's alphas; other formats leave the slots unnamed (no tensor, no input hash: their results
     * keep the inputs they had before the slots existed) */
    if (nv && ((rc = moects__input_alloc(in, MOECTS_FM_W13A, "w13_alpha", (size_t)E * 4, c->id, err, errlen)) ||
               (rc = moects__input_alloc(in, MOECTS_FM_W2A, "w2_alpha", (size_t)E * 4, c->id, err, errlen))))
        return rc;
    if ((rc = gen_routing(c, seed, in, err, errlen))) return rc;
    gen_small(c, seed, in);
    int sh1 = half_log2(H) - (c->data == MOECTS_DATA_ADVERSARIAL ? 3 : 0), sh2 = half_log2(I) + 1;
    uint8_t *used = routed_experts(c, in);
    if (!used) return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM, c->id), -2;
    gen_weights(c, used, moects__input_key(seed, c->id, "w13"), moects__input_key(seed, c->id, "w13_scale"), N1, H,
                sh1, c->data == MOECTS_DATA_EXACT, in->t[MOECTS_FM_W13].host, in->t[MOECTS_FM_W13S].host);
    gen_weights(c, used, moects__input_key(seed, c->id, "w2"), moects__input_key(seed, c->id, "w2_scale"), H, I, sh2,
                0, in->t[MOECTS_FM_W2].host, in->t[MOECTS_FM_W2S].host);
    if (f8) {
        gen_fp8_weights(c, used, moects__input_key(seed, c->id, "w13"), moects__input_key(seed, c->id, "w13_scale"), N1,
                        H, sh1, 0, in->t[MOECTS_FM_W13].host, in->t[MOECTS_FM_W13S].host);
        gen_fp8_weights(c, used, moects__input_key(seed, c->id, "w2"), moects__input_key(seed, c->id, "w2_scale"), H, I,
                        sh2, 1, in->t[MOECTS_FM_W2].host, in->t[MOECTS_FM_W2S].host);
    }
    gen_alphas(c, moects__input_key(seed, c->id, "w13_alpha"), sh1, in->t[MOECTS_FM_W13A].host);
    gen_alphas(c, moects__input_key(seed, c->id, "w2_alpha"), sh2, in->t[MOECTS_FM_W2A].host);
    free(used);
    in->out_dtype = s->out_dtype;
    in->out_elems = T * H;
    in->out_bytes = (size_t)in->out_elems * (s->out_dtype == MOECTS_F32 ? 4 : 2);
    return 0;
}

/* ---- batch invariance (moects__op_def.batch) ---- */

/* The filler tokens of a batch: x, topk ids and weights of T + 3 tokens of c's routing from the batch
 * seed, into fill (its other tensors absent). 0, -1 or -2 with err. */
static int fused_filler(const moects_case *c, uint64_t seed, const moects_inputs *in, moects_inputs *fill, char *err,
                        size_t errlen)
{
    moects_case fc = *c;
    fc.T = c->T + 3;
    fill->op = MOECTS_OP_FUSED_MOE;
    fill->fm = in->fm, fill->fm.T = fc.T;
    fill->first_local = in->first_local, fill->n_local = in->n_local;
    int rc;
    if ((rc = moects__input_alloc(fill, MOECTS_FM_X, "x", (size_t)(fc.T * fc.H) * 2, c->id, err, errlen)) ||
        (rc = moects__input_alloc(fill, MOECTS_FM_IDS, "topk_ids", (size_t)(fc.T * fc.k) * 4, c->id, err, errlen)) ||
        (rc = moects__input_alloc(fill, MOECTS_FM_W, "topk_weights", (size_t)(fc.T * fc.k) * 4, c->id, err, errlen)) ||
        (rc = gen_routing(&fc, moects__batch_seed(seed), fill, err, errlen)))
        return rc;
    gen_x(&fc, moects__batch_seed(seed), fill);
    return 0;
}

/* Token rows of a [T, row] tensor into big's [2T + 3, row]: the case's token t at 2t + 1, the filler's
 * tokens in order at the other places. */
static void interleave(const uint8_t *cas, const uint8_t *fill, uint8_t *big, int64_t T, size_t row)
{
    for (int64_t t2 = 0, f = 0; t2 < 2 * T + 3; t2++) {
        const int mine = t2 % 2 == 1 && t2 < 2 * T;
        memcpy(big + (size_t)t2 * row, mine ? cas + (size_t)(t2 / 2) * row : fill + (size_t)(f++) * row, row);
    }
}

/* The case's T tokens at rows 2t + 1 of a batch of 2T + 3, the other T + 3 drawn from the batch seed
 * with the case's routing: every expert sees other co-batched tokens. Weights, biases, scales and the
 * map are in's tensors themselves (moects__input_borrow: in outlives big). */
int moects__fused_batch(const moects_case *c, uint64_t seed, const moects_inputs *in, moects_inputs *big,
                        moects__batch *b, char *err, size_t errlen)
{
    const int64_t T = in->fm.T, T2 = 2 * T + 3;
    moects_inputs fill = {0};
    int rc = fused_filler(c, seed, in, &fill, err, errlen);
    big->op = MOECTS_OP_FUSED_MOE;
    big->fm = in->fm, big->fm.T = T2;
    big->first_local = in->first_local, big->n_local = in->n_local;
    for (int i = 0; i < in->nt && !rc; i++) {
        const int tok = i == MOECTS_FM_X || i == MOECTS_FM_IDS || i == MOECTS_FM_W;
        const size_t row = i == MOECTS_FM_X ? (size_t)in->fm.H * 2 : (size_t)in->fm.k * 4; /* of a token tensor */
        if (!tok) { /* weights, scales, biases, map: in's own (read-only) bytes */
            moects__input_borrow(big, i, in);
            continue;
        }
        rc = moects__input_alloc(big, i, in->t[i].name, row * (size_t)T2, c->id, err, errlen);
        if (!rc && big->t[i].host) interleave(in->t[i].host, fill.t[i].host, big->t[i].host, T, row);
    }
    moects__inputs_free(&fill);
    if (rc) return rc;
    big->out_dtype = in->out_dtype;
    big->out_elems = T2 * in->fm.H;
    big->out_bytes = (size_t)big->out_elems * (in->out_dtype == MOECTS_F32 ? 4 : 2);
    if (!(b->row_of = malloc(((size_t)T + 1) * sizeof *b->row_of)))
        return snprintf(err, errlen, "case %s: " MOECTS_HOST_OOM " (batch rows)", c->id), -2;
    for (int64_t t = 0; t < T; t++) b->row_of[t] = 2 * t + 1;
    b->rows = b->n = T, b->n_big = T2, b->unit = "tokens";
    return 0;
}
