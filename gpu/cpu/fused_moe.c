/* fused_moe.c: the CPU fused MoE layer kernels under test (DESIGN.md "The fused MoE layer"): one
 * generic loop parameterised by a layer recipe (ref/moects_layer.h) and a bug (fused_moe_internal.h),
 * and the honest kernels of four engine conventions plus MXFP8. Written apart from ref/fused_moe.c,
 * from the definition in include/moects/moects_types.h: per token, per valid slot in slot order,
 *   h = x[t] (weight=input: bf16(x * w))  ->  g1 = fp32(exact h . W13[e][n]) (+ b13), g1=bf16 rounds
 *   -> a = act(gate, up) (weight=act: a * w)  ->  m = the intermediate of a
 *   -> y = fp32(exact m . W2[e][h]) (+ b2) (weight=gemm2: y * w), slot=bf16 rounds
 *   -> acc over the slots: f32_slots or bf16_chain, weight=combine as fmaf(y, w, acc); out = acc.
 * w is rounded to BF16 first under wdtype=bf16. Weights are decoded one row at a time into doubles
 * (BF16; MXFP4 e2m1 * 2^(scale - 127), scale 0xFF NaN; NVFP4 e2m1 * e4m3(scale); FP8_128 the E4M3
 * values and W4A8 the E2M1 values, unscaled); both GEMMs are moects__fml_dot, under FP8_128 and W4A8
 * per K-block (128, 32) with the block scales applied in the recipe's bscale order (block_dot), the
 * input quantized per group first (moects__fml_quant); NVFP4 weights times the expert's alpha, an
 * NVFP4 intermediate (moects__fml_nvfp4) GEMM2 times 1 / gs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_moe_internal.h"

/* k's recipe, parsed on first use; NULL with k->err when its string does not parse. */
static const moects_layer_recipe *recipe_of(moects__fml_kernel *k)
{
    pthread_mutex_lock(&k->mu);
    if (k->state == 0) k->state = moects__layer_recipe_parse(k->recipe, &k->r, k->err, sizeof k->err) ? -1 : 1;
    int ok = k->state == 1;
    pthread_mutex_unlock(&k->mu);
    return ok ? &k->r : NULL;
}

/* Why the recipe has no exact result on s, or NULL: the conditions of the layer's definition, checked
 * here on their own (ref/layer_recipe.c's moects__layer_recipe_inexact states the same). */
static const char *recipe_refuses(const moects_layer_recipe *r, const moects_fused_moe_shape *s)
{
    if (r->combine == MOECTS_COMBINE_F32_ANY && !r->fn) return "recipe: combine=f32_any has no exact result";
    if (r->weight == MOECTS_WEIGHT_INPUT && s->k != 1) return "recipe: weight=input needs top-1 (k = 1)";
    if (r->mid == MOECTS_MID_FP8_128 && s->inter % 128) return "recipe: mid=fp8_128 needs I a multiple of 128";
    if (r->mid == MOECTS_MID_MXFP8 && s->inter % 32) return "recipe: mid=mxfp8 needs I a multiple of 32";
    if (r->w13 == MOECTS_W13_INTERLEAVE8 && s->inter % 8) return "recipe: w13=interleave8 needs I a multiple of 8";
    if (s->format == MOECTS_LAYER_FP8_128 && r->mid != MOECTS_MID_FP8_128)
        return "recipe: FP8 block-128 weights (W8A8) need mid=fp8_128";
    if (s->format == MOECTS_LAYER_W4A8 && r->mid != MOECTS_MID_FP8_128 && r->mid != MOECTS_MID_MXFP8)
        return "recipe: W4A8 needs mid=fp8_128 or mxfp8 (the FP8 inputs' grouping)";
    if (s->format == MOECTS_LAYER_W4A8 && r->mid == MOECTS_MID_FP8_128 && s->H % 128)
        return "recipe: W4A8 with mid=fp8_128 needs H a multiple of 128";
    if (r->mid == MOECTS_MID_NVFP4 && s->inter % 16) return "recipe: mid=nvfp4 needs I a multiple of 16";
    if (s->activation == MOECTS_ACT_RELU2 && r->w13 != MOECTS_W13_GATE_UP)
        return "recipe: relu2 has no gate: W13 order other than gate_up";
    return NULL;
}

/* Why the bug cannot show on s (the mutant refuses it), or NULL. */
static const char *bug_refuses(const moects__fml_kernel *k, const moects_fused_moe_shape *s)
{
    switch (k->bug) {
    case MOECTS__FML_BUG_GATE_UP_SWAPPED:
    case MOECTS__FML_BUG_INTERLEAVE_GRANULE:
    case MOECTS__FML_BUG_ACT_ON_UP: return s->activation == MOECTS_ACT_RELU2 ? "scope: mutant of gated activations" : NULL;
    case MOECTS__FML_BUG_GPT_OSS_NO_PLUS1: return s->activation != MOECTS_ACT_GPT_OSS ? "scope: mutant of gpt_oss" : NULL;
    case MOECTS__FML_BUG_EXPERT_MAP_IGNORED: return !s->has_expert_map ? "scope: mutant of EP (an expert map)" : NULL;
    case MOECTS__FML_BUG_FP8_SCALE_PER_ROW:
        return s->format != MOECTS_LAYER_FP8_128 ? "scope: mutant of FP8 block-128 weights" : NULL;
    case MOECTS__FML_BUG_NVFP4_ALPHA_TWICE: return s->format != MOECTS_LAYER_NVFP4 ? "scope: mutant of NVFP4 weights" : NULL;
    case MOECTS__FML_BUG_W4A8_SCALE_NEXT: return s->format != MOECTS_LAYER_W4A8 ? "scope: mutant of W4A8 weights" : NULL;
    default: break;
    }
    if (k->scope & 0xFFFF && !(k->scope & MOECTS__FML_SCOPE_FORMAT(s->format)))
        return "scope: the kernel's engine path takes other weight formats";
    if (k->scope & MOECTS__FML_SCOPE_SITU && s->activation != MOECTS_ACT_SITU) return "scope: situ layers only";
    return NULL;
}

static const char *shape_refuses(const moects_fused_moe_shape *s)
{
    if (s->T < 0 || s->k < 0 || s->H < 1 || s->inter < 1 || s->E < 1) return "shape: T, k < 0 or H, I, E < 1";
    if (s->has_expert_map && s->E_global < 1) return "layout: an expert map of E_global < 1";
    if (s->format < MOECTS_LAYER_BF16 || s->format > MOECTS_LAYER_W4A8)
        return "format: not BF16, MXFP4, FP8_128, NVFP4 or W4A8";
    if ((s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_W4A8) && (s->H % 32 || s->inter % 32))
        return "shape: MXFP4 needs H and I multiples of 32";
    if (s->format == MOECTS_LAYER_NVFP4 && (s->H % 16 || s->inter % 16)) return "shape: NVFP4 needs H and I multiples of 16";
    if (s->format == MOECTS_LAYER_FP8_128 && (s->H % 128 || s->inter % 128))
        return "shape: FP8 block-128 needs H and I multiples of 128";
    if (s->activation < MOECTS_ACT_SILU || s->activation > MOECTS_ACT_SITU) return "activation: unknown";
    if (s->activation == MOECTS_ACT_SITU && !(s->act_alpha > 0.0f && s->act_alpha < INFINITY))
        return "activation: situ needs 0 < a (beta) < Inf";
    if (s->activation == MOECTS_ACT_SITU && !(s->act_limit >= 0.0f && s->act_limit < INFINITY))
        return "activation: situ needs L (linear_beta) 0 (none) or finite";
    if (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) return "format: output dtype not bf16/f32";
    return NULL;
}

int moects__fml_supports(moects__fml_kernel *k, const void *shape, char *why, size_t why_len)
{
    const moects_fused_moe_shape *s = shape;
    const moects_layer_recipe *r = recipe_of(k);
    const char *no = !r ? k->err : shape_refuses(s);
    if (!no) no = recipe_refuses(r, s);
    if (!no) no = bug_refuses(k, s);
    if (!no) return 1;
    if (why && why_len) snprintf(why, why_len, "%s", no);
    return 0;
}

/* One run's state: the shape, args, recipe and bug, and its row buffers. */
typedef struct {
    const moects_fused_moe_shape *s;
    const moects_fused_moe_args *a;
    const moects_layer_recipe *r;
    moects__fml_bug bug;
    int64_t N1;
    double *h, *wrow, *m; /* [H], [max(H, I)], [I] */
    float *sa;            /* FP8_128, W4A8: [max(H, I) / 32] the block scales of the GEMM's input (h, then m) */
    float *sb;            /* W4A8: [max(H, I) / 32] a weight row's block scales */
    float *g1, *act, *y, *acc; /* [N1], [I], [H], [H] */
    double e4m3[256], ue8m0[256]; /* every E4M3 code's value; every UE8M0 scale's (0xFF: NaN) */
} layer;

/* Row n of expert e of a weight of `rows` rows by K (W13: N1 x H; W2: H x I), decoded to doubles. */
static void weight_row(const layer *c, const void *w, const uint8_t *sc, int64_t rows, int64_t K, int64_t e,
                       int64_t n, double *dst)
{
    int64_t row = e * rows + n;
    if (c->s->format == MOECTS_LAYER_FP8_128) { /* E4M3 values, unscaled: the block scales apart */
        const uint8_t *p = (const uint8_t *)w + row * K;
        for (int64_t k = 0; k < K; k++) dst[k] = c->e4m3[p[k]];
        return;
    }
    if (c->s->format == MOECTS_LAYER_BF16) {
        const uint16_t *p = (const uint16_t *)w + row * K;
        for (int64_t k = 0; k < K; k++) {
            uint32_t u = (uint32_t)p[k] << 16;
            float f;
            memcpy(&f, &u, sizeof f);
            dst[k] = f;
        }
        return;
    }
    static const double e2m1[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
    const int nv = c->s->format == MOECTS_LAYER_NVFP4, bk = nv ? 16 : 32; /* NVFP4: e4m3 per 16 */
    const uint8_t *p = (const uint8_t *)w + row * (K / 2), *s = sc + row * (K / bk);
    for (int64_t b = 0; b < K / bk; b++) {
        double scale = nv ? c->e4m3[s[b]] : c->ue8m0[s[b]];
        if (c->s->format == MOECTS_LAYER_W4A8) scale = 1.0; /* the codes' values: the scales apart */
        const uint8_t *q = p + b * bk / 2;
        double *d = dst + b * bk;
        for (int i = 0; i < bk / 2; i++) d[2 * i] = e2m1[q[i] & 15] * scale, d[2 * i + 1] = e2m1[q[i] >> 4] * scale;
    }
}

/* W4A8: row n's UE8M0 K-block scales of a weight (W13's or W2's, `rows` by K) of expert e as FP32
 * into dst [K / 32] (0xFF NaN), or as the bug reads them. */
static const float *w4a8_scales(const layer *c, const uint8_t *sc, int64_t rows, int64_t K, int64_t e, int64_t n,
                                float *dst)
{
    const int64_t nkb = K / 32;
    const uint8_t *s = sc + (e * rows + n) * nkb;
    for (int64_t b = 0; b < nkb; b++) {
        int64_t j = c->bug == MOECTS__FML_BUG_W4A8_SCALE_NEXT && b + 1 < nkb ? b + 1 : b;
        dst[b] = s[j] == 0xFF ? NAN : ldexpf(1.0f, (int)s[j] - 127);
    }
    return dst;
}

/* FP8_128: row n's K-block scales of a weight of `rows` rows by K (W13's or W2's block_scale) of
 * expert e, at block row n / 128 (or as the bug reads it). */
static const float *block_scales(const layer *c, const float *sc, int64_t rows, int64_t K, int64_t e, int64_t n)
{
    const int64_t nbr = rows / 128, br = c->bug == MOECTS__FML_BUG_FP8_SCALE_PER_ROW ? n % nbr : n / 128;
    return sc + (e * nbr + br) * (K / 128);
}

/* Block-scaled GEMMs (W8A8 block FP8, W4A8): over the blk-blocks b in order, p_b the block's dot
 * product of the unscaled values exactly rounded to FP32, then the recipe's bscale order:
 * fmaf(p_b, sa_b * sb_b, acc) (DeepGEMM's promotion), fmaf(p_b * sa_b, sb_b, acc) or
 * acc + (p_b * sa_b) * sb_b (vLLM Triton's, with and without FP fusion). */
static float block_dot(const double *q, const float *sa, const double *w, const float *sb, int64_t K, int64_t blk,
                       moects_bscale_order o)
{
    float acc = 0.0f;
    for (int64_t b = 0; b < K / blk; b++) {
        float p = moects__fml_dot(q + blk * b, w + blk * b, blk);
        if (o == MOECTS_BSCALE_AB_FMA) {
            float s = sa[b] * sb[b];
            acc = fmaf(p, s, acc);
        } else if (o == MOECTS_BSCALE_A_B_FMA) {
            float pa = p * sa[b];
            acc = fmaf(pa, sb[b], acc);
        } else {
            float pa = p * sa[b], t = pa * sb[b];
            acc = acc + t;
        }
    }
    return acc;
}

/* The block-scaled formats' K-block (128, 32; 0: none) and their inputs' quantization group. */
static int64_t blk_of(const layer *c)
{
    return c->s->format == MOECTS_LAYER_FP8_128 ? 128 : c->s->format == MOECTS_LAYER_W4A8 ? 32 : 0;
}
static int64_t group_of(const layer *c) { return c->s->format == MOECTS_LAYER_W4A8 && c->r->mid == MOECTS_MID_MXFP8 ? 32 : 128; }

/* x (or the intermediate) a [n] quantized per group into q and the per-block scales c->sa. */
static void block_quant(layer *c, const float *a, int64_t n, double *q)
{
    const int64_t G = group_of(c), blk = blk_of(c);
    moects__fml_quant(a, n, G, c->r->scale_ue8m0, q, c->sa);
    for (int64_t b = n / blk - 1; b >= 0; b--) c->sa[b] = c->sa[b * blk / G]; /* a group's scale per block */
}

/* GEMM row n of expert e (W13: w2 0, W2: 1) on the block-scaled input q. */
static float block_row(layer *c, int w2, const double *q, int64_t e, int64_t n)
{
    const int64_t rows = w2 ? c->s->H : c->N1, K = w2 ? c->s->inter : c->s->H;
    const float *sb = c->s->format == MOECTS_LAYER_W4A8
                          ? w4a8_scales(c, w2 ? c->a->w2_scale : c->a->w13_scale, rows, K, e, n, c->sb)
                          : block_scales(c, w2 ? c->a->w2_block_scale : c->a->w13_block_scale, rows, K, e, n);
    return block_dot(q, c->sa, c->wrow, sb, K, blk_of(c), c->r->bscale);
}

/* W13's rows of the gate and the up half of column i, in the recipe's order (or as the bug reads it). */
static void gate_up_rows(const layer *c, int64_t i, int64_t *gate, int64_t *up)
{
    const int64_t I = c->s->inter;
    int64_t gran = c->bug == MOECTS__FML_BUG_INTERLEAVE_GRANULE ? 4 : 8;
    switch (c->r->w13) {
    case MOECTS_W13_UP_GATE: *up = i, *gate = I + i; break;
    case MOECTS_W13_INTERLEAVE1: *gate = 2 * i, *up = 2 * i + 1; break;
    case MOECTS_W13_INTERLEAVE8:
        *gate = 2 * gran * (i / gran) + i % gran;
        *up = *gate + gran;
        break;
    default: *gate = i, *up = I + i; break;
    }
    if (c->bug == MOECTS__FML_BUG_GATE_UP_SWAPPED) {
        int64_t t = *gate;
        *gate = *up, *up = t;
    }
}

/* The local expert of global id `id` into *e: 1 valid, 0 not (no expert here), -1 a map entry >= E. */
static int slot_expert(const layer *c, int32_t id, int64_t *e)
{
    const moects_fused_moe_shape *s = c->s;
    if (id < 0) return 0;
    if (!s->has_expert_map || c->bug == MOECTS__FML_BUG_EXPERT_MAP_IGNORED) {
        *e = id;
        return id < s->E;
    }
    if (id >= s->E_global || c->a->expert_map[id] < 0) return 0;
    *e = c->a->expert_map[id];
    return *e < s->E ? 1 : -1;
}

/* Slot sl's exposed intermediates (moects_fused_moe_args g1_out, act_out, mid_out, y_out), where
 * asked: g1, act and y as computed, the intermediate's value (FP8_128, W4A8: its E4M3 values times
 * their block's scale). */
static void expose(const layer *c, int64_t sl)
{
    const moects_fused_moe_args *a = c->a;
    const int64_t I = c->s->inter, blk = blk_of(c);
    if (a->g1_out) memcpy(a->g1_out + sl * c->N1, c->g1, (size_t)c->N1 * sizeof *c->g1);
    if (a->act_out) memcpy(a->act_out + sl * I, c->act, (size_t)I * sizeof *c->act);
    for (int64_t i = 0; a->mid_out && i < I; i++) a->mid_out[sl * I + i] = blk ? c->m[i] * (double)c->sa[i / blk] : c->m[i];
    if (a->y_out) memcpy(a->y_out + sl * c->s->H, c->y, (size_t)c->s->H * sizeof *c->y);
}

/* GEMM1 then the activation of expert e: act[I] (weight=act: times w). */
static void gemm1_act(layer *c, int64_t t, int64_t e, float w)
{
    const moects_fused_moe_shape *s = c->s;
    const moects_layer_recipe *r = c->r;
    const int64_t H = s->H, I = s->inter;
    for (int64_t k = 0; k < H; k++) {
        uint32_t u = (uint32_t)c->a->x[t * H + k] << 16;
        float x;
        memcpy(&x, &u, sizeof x);
        c->h[k] = r->weight == MOECTS_WEIGHT_INPUT ? moects__fml_bf16(x * w) : x;
    }
    const int f8 = blk_of(c) != 0;
    if (f8) { /* x quantized per group along H, the recipe's scale (vLLM per_token_group_quant_fp8) */
        float *xf = (float *)c->y; /* y [H] is free until GEMM2 */
        for (int64_t k = 0; k < H; k++) xf[k] = (float)c->h[k];
        block_quant(c, xf, H, c->h);
    }
    for (int64_t n = 0; n < c->N1; n++) {
        weight_row(c, c->a->w13, c->a->w13_scale, c->N1, H, e, n, c->wrow);
        float g = f8 ? block_row(c, 0, c->h, e, n)
                  : r->fn ? moects__fml_dot_f32(c->h, c->wrow, H) : moects__fml_dot(c->h, c->wrow, H);
        if (s->format == MOECTS_LAYER_NVFP4) {
            float al = c->a->w13_alpha[e];
            g = g * al;
            if (c->bug == MOECTS__FML_BUG_NVFP4_ALPHA_TWICE) g = g * al;
        }
        if (s->has_bias) g = g + c->a->b13[e * c->N1 + n];
        c->g1[n] = r->g1_bf16 ? moects__fml_bf16(g) : g;
    }
    for (int64_t i = 0; i < I; i++) {
        int64_t gr = i, ur = i;
        if (s->activation != MOECTS_ACT_RELU2) gate_up_rows(c, i, &gr, &ur);
        float a = moects__fml_act(s, r, c->bug, c->g1[gr], c->g1[ur]);
        c->act[i] = r->weight == MOECTS_WEIGHT_ACT ? a * w : a;
    }
}

/* The intermediate, GEMM2 of expert e and its epilogue: y[H]. */
static void mid_gemm2(layer *c, int64_t e, float w)
{
    const moects_fused_moe_shape *s = c->s;
    const moects_layer_recipe *r = c->r;
    const int64_t H = s->H, I = s->inter;
    const int f8 = blk_of(c) != 0;
    if (f8) block_quant(c, c->act, I, c->m); /* mid=fp8_128 or mxfp8: codes, scales */
    else if (r->mid == MOECTS_MID_NVFP4) moects__fml_nvfp4(c->act, I, c->a->mid_global_scale[e], c->m);
    else moects__fml_mid(r, c->act, I, c->m);
    /* GEMM2's factor: NVFP4 W2's alpha; the NVFP4 intermediate's 1 / gs (times that alpha) */
    const int nv = s->format == MOECTS_LAYER_NVFP4, nvm = r->mid == MOECTS_MID_NVFP4;
    float rg = nvm ? 1.0f / c->a->mid_global_scale[e] : 1.0f;
    float al2 = nv && nvm ? rg * c->a->w2_alpha[e] : nv ? c->a->w2_alpha[e] : rg;
    int w_here = r->weight == MOECTS_WEIGHT_GEMM2;
    const int split = c->bug == MOECTS__FML_BUG_SPLIT_K_BATCH && s->T > MOECTS__FML_SPLIT_T;
    for (int64_t n = 0; n < H; n++) {
        weight_row(c, c->a->w2, c->a->w2_scale, H, I, e, n, c->wrow);
        float y = f8                                        ? block_row(c, 1, c->m, e, n)
                  : c->bug == MOECTS__FML_BUG_GEMM2_BF16_ACC ? moects__fml_dot_bf16(c->m, c->wrow, I)
                  : r->fn                                    ? moects__fml_dot_f32(c->m, c->wrow, I)
                                                             : moects__fml_dot(c->m, c->wrow, I);
        if (split) /* split-K reduced in the output type (cuBLASLt's REDUCTION_SCHEME_OUTPUT_TYPE) */
            y = moects__fml_bf16(moects__fml_dot(c->m, c->wrow, I / 2)) + moects__fml_bf16(moects__fml_dot(c->m + I / 2, c->wrow + I / 2, I - I / 2));
        if (nv || nvm) y = y * al2;
        if (s->has_bias) y = y + c->a->b2[e * H + n];
        if (w_here) y = y * w;
        c->y[n] = r->slot_bf16 ? moects__fml_bf16(y) : y;
    }
}

/* acc[H] += the slot's y in the recipe's combine (or as the bug sums it). */
static void combine(layer *c, float w)
{
    const moects_layer_recipe *r = c->r;
    int fma_w = r->weight == MOECTS_WEIGHT_COMBINE || c->bug == MOECTS__FML_BUG_WEIGHT_TWICE;
    int chain = r->combine == MOECTS_COMBINE_BF16_CHAIN || c->bug == MOECTS__FML_BUG_COMBINE_BF16;
    for (int64_t n = 0; n < c->s->H; n++) {
        float v = fma_w ? fmaf(c->y[n], w, c->acc[n]) : c->acc[n] + c->y[n];
        c->acc[n] = chain ? moects__fml_bf16(v) : v;
    }
}

/* Token t: its valid slots in slot order into acc, then out[t]. 0, or -1 for a bad map entry. */
static int token(layer *c, int64_t t)
{
    const moects_fused_moe_shape *s = c->s;
    for (int64_t n = 0; n < s->H; n++) c->acc[n] = 0.0f;
    for (int64_t j = 0; j < s->k; j++) {
        int64_t e;
        int v = slot_expert(c, c->a->topk_ids[t * s->k + j], &e);
        if (v < 0) return -1;
        if (!v) continue;
        float w = c->a->topk_weights[t * s->k + j];
        if (c->r->w_bf16) w = moects__fml_bf16(w);
        gemm1_act(c, t, e, w);
        mid_gemm2(c, e, w);
        expose(c, t * s->k + j);
        combine(c, w);
    }
    for (int64_t n = 0; n < s->H; n++) {
        if (s->out_dtype == MOECTS_F32) ((float *)c->a->out)[t * s->H + n] = c->acc[n];
        else {
            float b = moects__fml_bf16(c->acc[n]);
            uint32_t u;
            memcpy(&u, &b, sizeof u);
            ((uint16_t *)c->a->out)[t * s->H + n] = (uint16_t)(u >> 16);
        }
    }
    return 0;
}

static int args_ok(const moects_fused_moe_shape *s, const moects_fused_moe_args *a)
{
    if (s->T == 0) return 1;
    if (!a->out || (s->k > 0 && (!a->x || !a->topk_ids || !a->topk_weights || !a->w13 || !a->w2))) return 0;
    if (s->has_expert_map && !a->expert_map) return 0;
    if ((s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_W4A8) && (!a->w13_scale || !a->w2_scale)) return 0;
    if (s->format == MOECTS_LAYER_NVFP4 && (!a->w13_scale || !a->w2_scale || !a->w13_alpha || !a->w2_alpha)) return 0;
    if (s->format == MOECTS_LAYER_FP8_128 && (!a->w13_block_scale || !a->w2_block_scale)) return 0;
    return !s->has_bias || (a->b13 && a->b2);
}

int moects__fml_run(moects__fml_kernel *k, const void *shape, const void *args)
{
    const moects_fused_moe_shape *s = shape;
    if (!moects__fml_supports(k, shape, NULL, 0) || !args_ok(s, args)) return -1;
    if (k->r.mid == MOECTS_MID_NVFP4 && s->T > 0 && s->k > 0 && !((const moects_fused_moe_args *)args)->mid_global_scale)
        return -1;
    layer c = {.s = s, .a = args, .r = &k->r, .bug = k->bug};
    c.N1 = s->activation == MOECTS_ACT_RELU2 ? s->inter : 2 * s->inter;
    for (int i = 0; i < 256; i++) c.e4m3[i] = moects__fml_e4m3((uint8_t)i), c.ue8m0[i] = i == 0xFF ? NAN : ldexp(1.0, i - 127);
    const size_t H = (size_t)s->H, I = (size_t)s->inter;
    c.h = malloc(H * sizeof *c.h);
    c.wrow = malloc((H > I ? H : I) * sizeof *c.wrow);
    c.m = malloc(I * sizeof *c.m);
    c.g1 = malloc((size_t)c.N1 * sizeof *c.g1);
    c.act = malloc(I * sizeof *c.act);
    c.y = malloc(H * sizeof *c.y);
    c.acc = malloc(H * sizeof *c.acc);
    c.sa = malloc(((H > I ? H : I) / 32 + 1) * sizeof *c.sa);
    c.sb = malloc(((H > I ? H : I) / 32 + 1) * sizeof *c.sb);
    int rc = c.h && c.wrow && c.m && c.g1 && c.act && c.y && c.acc && c.sa && c.sb ? 0 : -1;
    for (int64_t t = 0; t < s->T && rc == 0; t++) rc = token(&c, t);
    free(c.h), free(c.wrow), free(c.m), free(c.g1), free(c.act), free(c.y), free(c.acc), free(c.sa), free(c.sb);
    return rc;
}

/* ---- the honest kernels: one engine convention each ---- */
#define HONEST(sym, nm, rec) \
    MOECTS__FML_DESCRIPTOR(sym, nm, rec, MOECTS__FML_BUG_NONE, NULL, 0, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES)

/* vLLM TritonExperts, BF16 (the default recipe) */
HONEST(moects_cpu_fused_moe_vllm, "cpu.fused_moe.vllm", MOECTS_LAYER_RECIPE_V1);
/* CUTLASS fused MoE / trtllm-gen: [up, gate], FP32 GEMM1 and activation, FP8 per token, weight in the combine */
HONEST(moects_cpu_fused_moe_cutlass, "cpu.fused_moe.cutlass",
       "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=fp8_token,weight=combine,slot=bf16,combine=f32_slots)");
/* gpt-oss (vLLM swigluoai): interleaved rows, the sigmoid by its reciprocal, a BF16 router weight */
HONEST(moects_cpu_fused_moe_gpt_oss, "cpu.fused_moe.gpt_oss",
       "fused_moe.layer_v1(w13=interleave1,g1=f32,act=f32,sig=rcp,mid=bf16,weight=gemm2,wdtype=bf16,slot=bf16)");
/* DeepGEMM mega MoE: granules of 8 rows, BF16 GEMM1, FP8 per 128, weight after the activation, FP32 slots */
HONEST(moects_cpu_fused_moe_deepgemm, "cpu.fused_moe.deepgemm",
       "fused_moe.layer_v1(w13=interleave8,g1=bf16,act=f32,mid=fp8_128,weight=act,slot=f32,combine=f32_slots)");
/* vLLM TritonExperts under W8A8 block FP8 (DeepSeek-V3's release): its BF16 recipe with the
 * intermediate quantized per 128 (per_token_group_quant_fp8) and DeepGEMM's block-scale promotion */
HONEST(moects_cpu_fused_moe_vllm_fp8, "cpu.fused_moe.vllm_fp8", "fused_moe.layer_v1(mid=fp8_128)");
/* MXFP8 intermediate (E4M3, UE8M0 per 32) */
HONEST(moects_cpu_fused_moe_mxfp8, "cpu.fused_moe.mxfp8", "fused_moe.layer_v1(w13=gate_up,mid=mxfp8)");

#define SCOPED(sym, nm, rec, scope)                                                                      \
    MOECTS__FML_SCOPED(sym, nm, rec, MOECTS__FML_BUG_NONE, NULL, 0, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES, scope)
/* TRT-LLM / FlashInfer NVFP4 MoE (CUTLASS fused MoE): [up, gate], FP32 GEMM1 and activation, the
 * intermediate re-quantized to NVFP4 with the expert's static global scale, FP32 slots, the router
 * weight in the finalize; on NVFP4 weights (W4A16 here: x BF16) */
SCOPED(moects_cpu_fused_moe_trtllm_nvfp4, "cpu.fused_moe.trtllm_nvfp4",
       "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=nvfp4,weight=combine,slot=f32)",
       MOECTS__FML_SCOPE_FORMAT(MOECTS_LAYER_NVFP4));
/* W4A8 as trtllm-gen's MXFP4 x MXFP8 MoE (gpt-oss on SM100): MXFP4 weights, activations MXFP8 (E4M3,
 * UE8M0 per 32), [up, gate], FP32 GEMM1 and activation, weight in the finalize */
SCOPED(moects_cpu_fused_moe_w4a8, "cpu.fused_moe.w4a8",
       "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=mxfp8,weight=combine,slot=f32)",
       MOECTS__FML_SCOPE_FORMAT(MOECTS_LAYER_W4A8));
/* vLLM's Triton fused_moe_kernel with block FP8 scales and BLOCK_SIZE_N > 128: (dot * a_scale) *
 * b_scale, the last product and the add contracted; W8A8 block FP8, and W4A8 with FP8 per 128 */
SCOPED(moects_cpu_fused_moe_vllm_triton_fp8, "cpu.fused_moe.vllm_triton_fp8", "fused_moe.layer_v1(mid=fp8_128,bscale=a_b_fma)",
       MOECTS__FML_SCOPE_FORMAT(MOECTS_LAYER_FP8_128) | MOECTS__FML_SCOPE_FORMAT(MOECTS_LAYER_W4A8));
/* Kimi K3's SiTU-GLU as PyTorch's SituAndMul.forward_native computes it: FP32 throughout (gate, up
 * .float()), divisions by beta and linear_beta, torch.sigmoid's 1 / (1 + exp(-x)), then BF16 */
SCOPED(moects_cpu_fused_moe_situ_native, "cpu.fused_moe.situ_native", "fused_moe.layer_v1(act=f32,sig=rcp,situ=div)",
       MOECTS__FML_SCOPE_SITU);

/* vLLM's recipe as a GPU kernel computes it: FP32 accumulation in its own order, libm's exp, tanh and
 * erf (not correctly rounded): judged by the enclosure of class (24, RNE) with fn=ulp2 (PASS_BOUNDED) */
MOECTS__FML_DESCRIPTOR(moects_cpu_fused_moe_fast, "cpu.fused_moe.fast", MOECTS_FML_FAST_RECIPE,
                       MOECTS__FML_BUG_NONE, NULL, 24, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES);
/* The NVFP4 and W4A8 recipes above as bounded kernels: FP32 sums in their own order (the NVFP4 GEMMs),
 * libm's exp: their enclosures (the NVFP4 intermediate's candidate scales, W4A8's block chains) */
MOECTS__FML_SCOPED(moects_cpu_fused_moe_fast_nvfp4, "cpu.fused_moe.fast_nvfp4",
                   "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=nvfp4,weight=combine,slot=f32,fn=ulp2)",
                   MOECTS__FML_BUG_NONE, NULL, 24, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES,
                   MOECTS__FML_SCOPE_FORMAT(MOECTS_LAYER_NVFP4));
MOECTS__FML_SCOPED(moects_cpu_fused_moe_fast_w4a8, "cpu.fused_moe.fast_w4a8",
                   "fused_moe.layer_v1(w13=up_gate,g1=f32,act=f32,mid=mxfp8,weight=combine,slot=f32,fn=ulp2)",
                   MOECTS__FML_BUG_NONE, NULL, 24, MOECTS_KERNEL_BATCH_INVARIANT | MOECTS_KERNEL_INTERMEDIATES,
                   MOECTS__FML_SCOPE_FORMAT(MOECTS_LAYER_W4A8));
