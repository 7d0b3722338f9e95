/* fused_moe_internal.h: internals of the CPU fused MoE layer kernels under test (gpu/cpu/fused_moe*.c,
 * DESIGN.md "The fused MoE layer"): one generic layer kernel, parameterised by a layer recipe
 * (ref/moects_layer.h, its string parsed once) and a bug, and the stage arithmetic it is built of.
 * Written apart from ref/fused_moe.c (same definition, own code): straight per-token, per-slot loops. */
#ifndef MOECTS_FUSED_MOE_INTERNAL_H
#define MOECTS_FUSED_MOE_INTERNAL_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "moects_kernel.h"
#include "moects_layer.h"

/* The one bug a layer kernel carries (MOECTS__FML_BUG_NONE: an honest kernel). */
typedef enum {
    MOECTS__FML_BUG_NONE = 0,
    MOECTS__FML_BUG_GATE_UP_SWAPPED,    /* declares gate_up, reads rows [I, 2I) as the gate, [0, I) as up */
    MOECTS__FML_BUG_INTERLEAVE_GRANULE, /* declares interleave8, reads granules of 4 rows */
    MOECTS__FML_BUG_GPT_OSS_NO_PLUS1,   /* gpt_oss: a = u' * glu, without the + 1 */
    MOECTS__FML_BUG_ACT_ON_UP,          /* a = act(u') * g': the activation on the (clamped) up half */
    MOECTS__FML_BUG_WEIGHT_TWICE,       /* weight=gemm2 declared: w in GEMM2's epilogue and again in the combine */
    MOECTS__FML_BUG_EXPERT_MAP_IGNORED, /* EP: the global id taken as the local index when < E, else skipped */
    MOECTS__FML_BUG_COMBINE_BF16,       /* combine=f32_slots declared: slots summed in BF16 (bf16_chain) */
    MOECTS__FML_BUG_FP8_SCALE_PER_ROW,  /* FP8_128 weights: row n's block scale read at block row n mod
                                           (N / 128) (a per-row scale layout) instead of n / 128 */
    MOECTS__FML_BUG_SPLIT_K_BATCH,      /* a batch of more than MOECTS__FML_SPLIT_T tokens: GEMM2's K in two
                                           halves, each partial rounded to BF16, then added in FP32 (exact up
                                           to that T) */
    MOECTS__FML_BUG_NVFP4_ALPHA_TWICE,  /* NVFP4 weights: GEMM1's per-expert alpha (1 / global scale) applied
                                           twice (folded into the dequantized weights and again in the epilogue) */
    MOECTS__FML_BUG_W4A8_SCALE_NEXT,    /* W4A8: the weights' UE8M0 scale of K-block kb read at kb + 1 (the last
                                           block keeps its own): a block scale index off by one */
    MOECTS__FML_BUG_GEMM2_BF16_ACC      /* a bounded claim of FP32 accumulation: GEMM2 sums in a BF16
                                           accumulator (moects__fml_dot_bf16) */
} moects__fml_bug;

/* What a kernel takes beyond its recipe (moects__fml_kernel.scope; 0: every format and activation). */
#define MOECTS__FML_SCOPE_FORMAT(f) (1u << (f)) /* only these weight formats (moects_layer_format) */
#define MOECTS__FML_SCOPE_SITU (1u << 16)       /* only situ layers */

/* The SPLIT_K_BATCH mutant's tile choice: batches of more tokens split GEMM2's K (the smoke tier's
 * fused_moe cases hold at most 4 tokens, their batch-invariance batches 2T + 3 >= 5). */
#define MOECTS__FML_SPLIT_T 4

/* A layer kernel's parameters: its declared recipe string (parsed once, on first use) and its bug. */
typedef struct {
    const char *recipe;
    moects__fml_bug bug;
    unsigned scope; /* MOECTS__FML_SCOPE_*: 0 all */
    pthread_mutex_t mu;
    int state; /* 0: not parsed yet, 1: r holds the recipe, -1: err says why it does not parse */
    moects_layer_recipe r;
    char err[160];
} moects__fml_kernel;

/* The bounded kernels' recipe: vLLM's, with exp/tanh/erf within 2 ulps (libm's). */
#define MOECTS_FML_FAST_RECIPE "fused_moe.layer_v1(fn=ulp2)"

#define MOECTS__FML_KERNEL_INIT(rec, bugv, scopev) {rec, bugv, scopev, PTHREAD_MUTEX_INITIALIZER, 0, {0}, ""}

/* FP32 -> BF16, round to nearest even (NaN stays NaN), as a float. */
static inline float moects__fml_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
    else u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A layer kernel descriptor `sym` named nm over the generic loop: recipe rec, bug bugv (bugtext its
 * one line, NULL for an honest kernel), accumulation class bits (0: exact; 24: judged by the
 * enclosure, the fn=ulpN kernels), flags (MOECTS_KERNEL_*). The honest kernels declare batch
 * invariance: the loop computes each token alone, in the same order whatever the batch. Of the
 * mutants only SPLIT_K_BATCH declares it (falsely): the others' bugs are per token, so their batch
 * runs would repeat the honest kernels' (the same loop) and cost the smoke tier time for nothing. */
#define MOECTS__FML_DESCRIPTOR(sym, nm, rec, bugv, bugtext, bits, flagv)                           \
    MOECTS__FML_SCOPED(sym, nm, rec, bugv, bugtext, bits, flagv, 0)
/* The same, taking only the shapes of scope (MOECTS__FML_SCOPE_*; others refused "scope: ..."). */
#define MOECTS__FML_SCOPED(sym, nm, rec, bugv, bugtext, bits, flagv, scopev)                       \
    static moects__fml_kernel sym##_k = MOECTS__FML_KERNEL_INIT(rec, bugv, scopev);                \
    static int sym##_sup(const void *s, char *w, size_t l) { return moects__fml_supports(&sym##_k, s, w, l); } \
    static int sym##_run(const void *s, const void *a, void *st)                                   \
    {                                                                                              \
        (void)st;                                                                                  \
        return moects__fml_run(&sym##_k, s, a);                                                    \
    }                                                                                              \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = nm,               \
                               .op = MOECTS_OP_FUSED_MOE, .device = MOECTS_DEVICE_CPU,             \
                               .recipe = rec, .bug = bugtext, .supports = sym##_sup,               \
                               .run = sym##_run, .acc = {bits, 0}, .flags = (flagv)}

/* ---- fused_moe.c: the generic kernel ---- */
/* 1 when kernel k (its recipe, its bug) takes layer shape s (moects_fused_moe_shape*), else 0 with a
 * one-line reason in why: a recipe that does not parse, an unknown format (MXFP4: H and I multiples
 * of 32; FP8_128: of 128, and mid=fp8_128), combine=f32_any (no exact result), weight=input with k != 1, mxfp8 with I % 32,
 * fp8_128 with I % 128, interleave8 with I % 8, relu2 with a W13 order other than gate_up, and the
 * shapes the bug cannot show on. */
int moects__fml_supports(moects__fml_kernel *k, const void *shape, char *why, size_t why_len);
/* The layer (moects_fused_moe_shape / moects_fused_moe_args, host pointers) under k's recipe with
 * k's bug: out [T, H] out_dtype. 0, or -1 for a shape k does not support, a missing pointer, an
 * expert_map entry >= E, or out of memory. */
int moects__fml_run(moects__fml_kernel *k, const void *shape, const void *args);

/* ---- fused_moe_math.c: the stages' arithmetic ---- */
/* fp32_rne of the exact real sum_k a[k] * b[k] (K >= 0; every product exact in double, as BF16,
 * MXFP4 and E4M3-times-scale operands make them). A double sum decides it when its error bound
 * (K + 2) 2^-52 sum|a b| keeps the sum strictly between the FP32 rounding boundaries around it;
 * otherwise (and for a zero, an overflow or a non-finite term) moects_xsum (ref/moects_exact.h). */
float moects__fml_dot(const double *a, const double *b, int64_t K);
/* The same sum as an FP32 kernel accumulates it (the bounded kernels, fn=ulpN): each product rounded
 * to FP32, eight FP32 running sums over k mod 8, added pairwise: within the enclosure of class
 * (24, RNE). */
float moects__fml_dot_f32(const double *a, const double *b, int64_t K);
/* The same sum in a BF16 accumulator (the GEMM2_BF16_ACC mutant's): each product rounded to FP32,
 * added in K order to a running sum rounded to BF16 after every addition. */
float moects__fml_dot_bf16(const double *a, const double *b, int64_t K);
/* The activation of one pair (g gate, u up; relu2 reads g only), act rounding as r says, FP32 op by
 * op, exp/tanh/erf correctly rounded (ref/moects_crmath.h), or libm's under fn=ulpN; situ takes a =
 * act_alpha and squashes up by L = act_limit when L > 0 (ref/moects_layer.h's order). bug:
 * GPT_OSS_NO_PLUS1 drops the + 1 on up; ACT_ON_UP swaps g and u after each half's clamp or squash (so
 * it differs from reading the halves swapped, GATE_UP_SWAPPED, only where a clamp bites or situ
 * squashes: on silu and gelu the two are the same mutant). */
float moects__fml_act(const moects_fused_moe_shape *s, const moects_layer_recipe *r, moects__fml_bug bug, float g,
                      float u);
/* The intermediate GEMM2 reads: m[I] (double, exact) from a[I] under r->mid (bf16, f32, or E4M3 times
 * a scale per group of I, 128 or 32 columns: amax / 448 or its next power of two; a NaN in a group
 * makes its scale NaN). */
void moects__fml_mid(const moects_layer_recipe *r, const float *a, int64_t I, double *m);
/* FP8 groups of G along a [n] (n a multiple of G): per group v = bf16(a), amax, the scale (div:
 * fmaxf(amax, 1e-10f) / 448.0f; ue8m0: the smallest power of two >= amax / 448), q = e4m3(v / s):
 * q [n] the E4M3 values (NaN for a NaN group), sc [n / G] the FP32 scales. W8A8's inputs. */
void moects__fml_quant(const float *a, int64_t n, int64_t G, int ue8m0, double *q, float *sc);
/* The NVFP4 intermediate (ref/moects_layer.h MOECTS_MID_NVFP4) of a [I] under the expert's global
 * scale gs: per 16, v = bf16(a), amax, sf = gs * (amax * (1 / 6)), b = e4m3(sf),
 * o = b ? 1 / (b * (1 / gs)) : 0, m = e2m1(v * o) * b exactly (the 1 / gs is GEMM2's); NaN group: NaN. */
void moects__fml_nvfp4(const float *a, int64_t I, float gs, double *m);
/* The OCP E4M3FN value of a code (0x7F, 0xFF: NaN). */
double moects__fml_e4m3(uint8_t code);
#endif
