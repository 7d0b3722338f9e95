/* moects_layer.h: the fused MoE layer's recipe (every stage's convention as a named parameter,
 * DESIGN.md "The fused MoE layer") and its references. ref/ only: libc, libm, OpenBLAS. */
#ifndef MOECTS_LAYER_H
#define MOECTS_LAYER_H
#include <stddef.h>

#include "moects_ref.h"
#include "moects_types.h"

/* W13's row order: which of its N1 = 2I rows are the gate half and which the up half. interleave8:
 * gate i on row 16 (i / 8) + i % 8, up i on the row 8 further. */
typedef enum {
    MOECTS_W13_GATE_UP = 0,     /* rows [0, I) gate, [I, 2I) up: vLLM TritonExperts */
    MOECTS_W13_UP_GATE = 1,     /* rows [0, I) up, [I, 2I) gate: CUTLASS fused MoE, trtllm-gen */
    MOECTS_W13_INTERLEAVE1 = 2, /* row 2i gate, 2i+1 up: gpt-oss, vLLM swigluoai, triton_kernels swiglu */
    MOECTS_W13_INTERLEAVE8 = 3  /* granules of 8 rows alternate gate, up: DeepGEMM mega MoE */
} moects_w13_order;

/* The intermediate GEMM2 reads. FP8 formats quantize the activation rounded to BF16 first (the
 * tensor the engines' activation kernel writes), per group: amax = max |v|, scale s = max(amax,
 * 1e-10) / 448 (FP32 division; 1e-10 is vLLM's per-token-group quantizer's eps, so amax 0 gives
 * s = 1e-10f / 448) or the smallest power of two >= amax / 448 (scale_ue8m0; no eps, exponent
 * clamped to [-127, 127]), q = e4m3(v / s) (FP32 division, RNE, saturating); GEMM2 reads dec(q) * s
 * exactly. A NaN in a group makes its scale, so all of it, NaN. */
typedef enum {
    MOECTS_MID_BF16 = 0,      /* bf16(a) */
    MOECTS_MID_F32 = 1,       /* a itself (FP32) */
    MOECTS_MID_FP8_TOKEN = 2, /* E4M3, one FP32 scale per token row of I */
    MOECTS_MID_FP8_128 = 3,   /* E4M3, one FP32 scale per 128 columns (DeepSeek) */
    MOECTS_MID_MXFP8 = 4,     /* E4M3, one UE8M0 scale per 32 columns, 2^ceil(log2(amax / 448)) */
    MOECTS_MID_NVFP4 = 5      /* E2M1, one UE4M3 scale per 16 columns from the expert's static global scale
                                 gs = mid_global_scale[e] (TRT-LLM cvt_warp_fp16_to_fp4, IEEE reciprocals):
                                 v = bf16(a), amax = max |v|, sf = gs * (amax * fl(1 / 6)), b = e4m3(sf),
                                 o = b != 0 ? 1 / (dec(b) * fl(1 / gs)) : 0, q = e2m1(v * o) (RNE,
                                 saturating); GEMM2 reads dec(q) * dec(b) exactly and its FP32 result is
                                 multiplied by fl(1 / gs) (with NVFP4 weights: by fl(fl(1 / gs) * w2_alpha[e]),
                                 vLLM's g2_alphas = input_scale * weight_scale_2); a NaN in a group: all NaN */
} moects_mid_format;

/* The order of a block-scaled GEMM's scale products (FP8_128 and W4A8 weights), p the block's dot
 * rounded to FP32, sa and sb the input's and the weight's block scales (FP32). */
typedef enum {
    MOECTS_BSCALE_AB_FMA = 0,  /* acc = fmaf(p, sa * sb, acc): DeepGEMM's promotion; vLLM Triton
                                  fused_moe_kernel when BLOCK_SIZE_N <= group_n, `dot * (a_scale * b_scale)`
                                  contracted by Triton's default enable_fp_fusion */
    MOECTS_BSCALE_A_B_FMA = 1, /* acc = fmaf(p * sa, sb, acc): vLLM Triton when BLOCK_SIZE_N > group_n,
                                  `accumulator += tl.dot(a, b) * a_scale[:, None] * b_scale[None, :]` (left
                                  to right, the last multiply and the add contracted) */
    MOECTS_BSCALE_A_B_ADD = 2  /* acc = acc + (p * sa) * sb: the same with enable_fp_fusion=False */
} moects_bscale_order;

typedef enum {
    MOECTS_WEIGHT_INPUT = 0,   /* h = bf16(x * w) (top-1 only: Llama 4) */
    MOECTS_WEIGHT_ACT = 1,     /* a * w in FP32 before the intermediate (DeepGEMM mega MoE) */
    MOECTS_WEIGHT_GEMM2 = 2,   /* GEMM2's epilogue: slot(acc * w), FP32 (vLLM MUL_ROUTED_WEIGHT) */
    MOECTS_WEIGHT_COMBINE = 3  /* the combine: fmaf(y, w, acc) in slot order (ep_gather.fma_v1) */
} moects_weight_pos;

typedef enum {
    MOECTS_COMBINE_F32_SLOTS = 0,   /* FP32 sum over valid slots in slot order, then out (vLLM moe_sum) */
    MOECTS_COMBINE_BF16_CHAIN = 1,  /* BF16 running sum in slot order (vLLM before PR 46643, top-k 2-4) */
    MOECTS_COMBINE_F32_ANY = 2      /* FP32 atomics in any order: no exact recipe, judged by enclosure */
} moects_combine;

/* A kernel's layer recipe. The string form (moects__layer_recipe_parse) is
 *   fused_moe.layer_v1[(key=value,...)]
 * keys (default first):
 *   w13=gate_up|up_gate|interleave1|interleave8
 *   g1=bf16|f32        GEMM1's output (after the bias) rounded to BF16 or kept FP32
 *   act=bf16|f32       the gate's activation (silu, gelu, gpt_oss's g * sigmoid(alpha g), situ's
 *                      a tanh(g / a) sigmoid(g)) rounded to BF16 before the product with up (vLLM's
 *                      act_and_mul in the activation dtype) or kept FP32; relu2 (no up): its square
 *   sig=div|rcp        sigmoid as g / (1 + exp(-g)) (vLLM silu_kernel) or g * (1 / (1 + exp(-g)))
 *                      (vLLM swigluoai); situ's x = a * tanh(g * (1 / a)) takes g's place
 *   mid=bf16|f32|fp8_token|fp8_128|mxfp8|nvfp4
 *   scale=div|ue8m0    FP8 scale amax / 448, or its next power of two (mxfp8: always ue8m0)
 *   weight=gemm2|input|act|combine
 *   wdtype=f32|bf16    the router weight as given, or rounded to BF16 first (trtllm-gen, triton_kernels)
 *   slot=bf16|f32      GEMM2's per-slot output (with the weight, in GEMM2's epilogue) rounded to BF16
 *   combine=f32_slots|bf16_chain|f32_any
 *   situ=rcp|div      situ's 1 / a and 1 / L: multiplied by as FP32 reciprocals (vLLM's CUDA
 *                      situ_and_mul_kernel) or divided by (PyTorch SituAndMul.forward_native: g / a, u / L)
 *   bscale=ab_fma|a_b_fma|a_b_add   a block-scaled GEMM's scale order (moects_bscale_order)
 *   fn=cr|ulp1|ulp2|ulp4|ulp8   a bounded kernel's exp, tanh and erf: correctly rounded, or within
 *                      that many ulps (its enclosure's allowance, moects_layer_claim.fn_ulp; the exact
 *                      reference is always correctly rounded, so a kernel claiming exactness says cr)
 * GEMM accumulation: the exact dot product rounded once to FP32 (moe_gemm.exact_v1), then + bias
 * (FP32 add). Under MOECTS_LAYER_FP8_128 (W8A8 block FP8) each GEMM's input is FP8 per 128 along K
 * (GEMM1: x quantized as an FP8 group of 128 with the recipe's scale, div or ue8m0, as vLLM's
 * per_token_group_quant_fp8; GEMM2: the intermediate, mid=fp8_128 required) and an output element
 * is, with p_b = fp32_rne(exact dot of block b's E4M3 values, unscaled), sa_b and sb_b the FP32 scales
 * of the input's and the weight's block b:
 *   acc = +0; for b = 0, 1, ...: acc = fmaf(p_b, sa_b * sb_b, acc)      (sa_b * sb_b: one FP32 multiply)
 * DeepGEMM's promotion (sm90 fp8 gemm: scale = scale_a * scale_b; final_accum += scale * accum, which
 * nvcc contracts to one FFMA; accum the WGMMA sum of one 128-deep block). vLLM's Triton
 * w8a8_block_fp8_matmul and fused_moe_kernel order it (dot * a_scale) * b_scale, then add: not a
 * recipe value yet. A bounded claim widens p_b to any FP32 order (its enclosure: any order over K). exp, tanh, erf correctly rounded (ref/crmath.c); every other operation FP32 RNE.
 * situ (vLLM situ_and_mul_kernel; a = act_alpha, L = act_limit): t = tanh(g * fl(1 / a)), x = a * t,
 * gate = x / (1 + exp(-g)) (sig=div) or x * (1 / (1 + exp(-g))) (rcp), act rounding; up' = L *
 * tanh(u * fl(1 / L)) when L > 0, else u; a = gate * up'. No clamp. */
typedef struct {
    moects_w13_order w13;
    int g1_bf16, act_bf16, sig_rcp;
    moects_mid_format mid;
    int scale_ue8m0;
    moects_weight_pos weight;
    int w_bf16, slot_bf16;
    moects_combine combine;
    int fn; /* 0 cr, 1..4: ulp1, ulp2, ulp4, ulp8 (moects__layer_fn_ulp) */
    int situ_div;               /* situ=div */
    moects_bscale_order bscale; /* bscale= */
} moects_layer_recipe;

/* The ulps of r's fn: 0, 1, 2, 4 or 8. */
static inline uint32_t moects__layer_fn_ulp(const moects_layer_recipe *r) { return r->fn ? 1u << (r->fn - 1) : 0; }

/* The recipe's name prefix; the default recipe (vLLM's BF16 fused_experts) is that name alone. */
#define MOECTS_LAYER_RECIPE_V1 "fused_moe.layer_v1"

/* Parse s (the string form above) into r: 0, or -1 with "KEY: VALUE is not one of a|b|c" (or what
 * else is wrong) in err. Keys may come in any order, each at most once; missing keys default. */
int moects__layer_recipe_parse(const char *s, moects_layer_recipe *r, char *err, size_t errlen);
/* The canonical string of r (every key, in the order above) into buf: its length. */
int moects__layer_recipe_format(const moects_layer_recipe *r, char *buf, size_t len);

/* Layer recipes as moects_recipe values: MOECTS_RECIPE_LAYER_BASE + the index of r in a process-wide
 * table (equal recipes, one index). 0, or -1 when the table's MOECTS_LAYER_RECIPES_MAX are taken. */
#define MOECTS_LAYER_RECIPES_MAX 24 /* values 4..27; 28..31 are moe_route's */
int moects__layer_recipe_intern(const moects_layer_recipe *r, moects_recipe *out);
/* The recipe of an interned value, or NULL for a value that is not a layer recipe. */
const moects_layer_recipe *moects__layer_recipe_of(moects_recipe v);

/* Why recipe r cannot be computed exactly on a layer of shape s (a combine in any order, mxfp8 over
 * an I that is not a multiple of 32, ...), or NULL. */
const char *moects__layer_recipe_inexact(const moects_layer_recipe *r, const moects_fused_moe_shape *s);

/* The exact reference (ref/fused_moe.c): a->out under recipe r, for the struct comments of
 * moects_fused_moe_shape/args. Host pointers. Returns 0, or -1 for an invalid shape, a recipe the
 * shape has no exact definition of (moects__layer_recipe_inexact), or out of memory. */
int moects__ref_fused_moe(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                          const moects_layer_recipe *r);

/* ---- the enclosure reference (ref/fused_enclosure.c; DESIGN.md "The fused MoE layer": the second
 * reference; docs/fused_moe_enclosure.md proves each stage) ---- */
/* A bounded layer kernel's claim: its GEMMs accumulate in any order in the class (bits, truncation)
 * (24, 0 = FP32 RNE): every product, scale product and addition inside a GEMM rounded to bits bits,
 * u = 2^-bits (RNE) or 2^(1-bits) (truncation), binary32's exponent range, at most K + 1 roundings on
 * any term's path, then one rounding to FP32; and its exp/tanh/erf are within fn_ulp ulps (ordered
 * distance on the FP32 bit patterns) of the correctly rounded value (0: correctly rounded). Every
 * other operation is the recipe's own FP32 operation, rounded to nearest even. */
typedef struct {
    uint32_t bits;
    int truncation;
    uint32_t fn_ulp;
} moects_layer_claim;

/* How tight an enclosure is, over the T * H output elements. Widths are the ordered-integer distance
 * between lo's and hi's bit patterns in out_dtype (+0 and -0 are 0 apart), over the bounded
 * elements (neither NaN-expected nor unbounded); median: the lower middle one. */
typedef struct {
    int64_t elements;      /* T * H */
    int64_t nan;           /* NaN expected: every admissible implementation outputs NaN */
    int64_t unbounded;     /* lo = -Inf, hi = +Inf: no claim (some implementations may give NaN) */
    int64_t wide;          /* bounded elements whose width exceeds one output ULP */
    int64_t narrow_rowmax; /* bounded elements with hi - lo below one output ULP of their row's largest
                              finite |lo| or |hi|: a value moved by that ULP either way leaves them */
    double median_ulps, max_ulps;
} moects_layer_tightness;

/* The enclosure of recipe r under claim cl: per element of the [T, H] output, lo and hi (out_dtype:
 * BF16 bits or FP32) hold the smallest and largest value any admissible implementation can output:
 * the exact reference's stage chain (moects__ref_fused_moe) with GEMMs in any order of cl's class,
 * exp/tanh/erf within cl->fn_ulp, and combine=f32_any's additions in any order. NaN in both where
 * every admissible implementation outputs NaN (a NaN input, an Inf times 0, +Inf and -Inf in one
 * sum, a group of an FP8 intermediate holding a NaN); lo = -Inf, hi = +Inf where the enclosure makes
 * no claim (an implementation may give NaN, or a sum may overflow). A token without a valid slot
 * gets +0 in both. tight (may be NULL): the widths. Host pointers; threads as moects__ref_fused_moe.
 * Returns 0, or -1 for an invalid shape, recipe or claim (bits outside 2..64, truncation not 0/1), a
 * recipe the shape cannot take (moects__layer_recipe_inexact, combine=f32_any aside: defined here),
 * or out of memory. */
int moects__ref_fused_moe_enclosure(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                                    const moects_layer_recipe *r, const moects_layer_claim *cl, void *lo,
                                    void *hi, moects_layer_tightness *tight);

/* The enclosure's stages (docs/fused_moe.md "Exposed intermediates"): for each valid slot's row
 * t * k + j (other rows untouched), the interval every admissible implementation's stage lies in, the
 * stages as moects_fused_moe_args's exposed intermediates name them: g1 [T * k, N1] (GEMM1's output as
 * the activation reads it), act [T * k, I], mid [T * k, I] (the intermediate's value), y [T * k, H]
 * (GEMM2's per-slot output as the combine reads it); each interval the one the output's enclosure is
 * computed through (so a stage inside its interval is consistent with an output inside its own). And
 * the accumulation check's inputs (moects_bound_stats, ref/moects_ref.h; DESIGN.md "Bounded
 * verdicts") of the two GEMMs' stages, g1 and y, under the claim's class (bits, truncation): x the
 * stage's value with the GEMM exact and its epilogue (alpha, bias, weight=gemm2's weight) in real
 * arithmetic, det every FP32 rounding of that chain but the last one to the stage's type (and x's own
 * error), sigma moe_gemm's (ref/bound.c moects__acc_stats); GEMM1's inputs are h, GEMM2's the kernel's
 * own intermediate mid_in, so the check judges GEMM2 alone, whatever the stages before it did. Elements
 * the check does not judge (a NaN or an Inf among a term's operands, a sum that may overflow): det
 * +Inf. Every pointer may be NULL (not wanted); y_st needs mid_in. */
typedef struct {
    float *g1_lo, *g1_hi, *act_lo, *act_hi;
    double *mid_lo, *mid_hi;
    float *y_lo, *y_hi;
    moects_bound_stats g1_st, y_st;
    const double *mid_in; /* [T * k, I]: the kernel's intermediate (its mid_out), GEMM2's inputs for y_st */
} moects_layer_stages;

/* moects__ref_fused_moe_enclosure with the stages st (NULL: none) filled too. Same errors. */
int moects__ref_fused_moe_enclosure_stages(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                                           const moects_layer_recipe *r, const moects_layer_claim *cl, void *lo,
                                           void *hi, moects_layer_tightness *tight, const moects_layer_stages *st);
#endif
