/* moects_ref.h: bit-exact CPU references and numeric codecs (DESIGN.md "Number formats",
 * "Numeric recipes"). Depends on libc, libm and OpenBLAS only. No I/O. */
#ifndef MOECTS_REF_H
#define MOECTS_REF_H
#include "moects_types.h"

/* ---- BF16 (ref/bf16.c) ---- */
/* float -> bf16 bits, round to nearest even; NaN stays NaN (quiet bit set), Inf stays Inf. */
uint16_t moects__bf16_from_f32(float f);
float moects__bf16_to_f32(uint16_t b);

/* ---- E2M1 (ref/e2m1.c), OCP MX v1.0 sec. 5.3.3 ---- */
float moects__e2m1_decode(uint8_t code); /* code 0..15 */
uint8_t moects__e2m1_encode(float v, moects_rounding r); /* saturates to +-6; NaN -> +6 (0x7) */
void moects__e2m1_pack(const uint8_t *codes, size_t n, uint8_t *packed); /* ceil(n/2) bytes */
void moects__e2m1_unpack(const uint8_t *packed, size_t n, uint8_t *codes);

/* ---- UE8M0 (ref/ue8m0.c), OCP MX v1.0 sec. 5.4.1 ---- */
float moects__ue8m0_decode(uint8_t x); /* 2^(x-127); 0xFF -> NaN */

/* ---- E4M3 fn (ref/e4m3.c), OCP FP8 spec / cuda_fp8.h __NV_E4M3 ---- */
float moects__e4m3_decode(uint8_t x);
uint8_t moects__e4m3_encode(float v); /* RNE, saturate to +-448, NaN -> 0x7F */

/* ---- recipes ---- */
typedef enum {
    MOECTS_RECIPE_EXACT_V1 = 0,          /* ep_gather.exact_v1 / fp4_gemm.exact_v1 */
    MOECTS_RECIPE_EPG_FMA_V1 = 1,        /* ep_gather.fma_v1 */
    MOECTS_RECIPE_EPG_MULADD_V1 = 2,     /* ep_gather.muladd_v1 */
    MOECTS_RECIPE_FP4_BLOCKWISE_V1 = 3,  /* fp4_gemm.blockwise_v1, moe_gemm.blockwise_v1 */
    MOECTS_RECIPE_LAYER_BASE = 4,        /* fused_moe layer recipes: 4 + their index (ref/moects_layer.h) */
    MOECTS_RECIPE_ROUTE_BASE = 28,       /* moe_route recipes: 28 + ties_any + 2 slots_any (ref/moects_route.h;
                                            fn= and sum= are read from the string by the judge) */
    MOECTS_RECIPES_MAX = 32              /* every recipe value is below: caches indexed by recipe */
} moects_recipe;

/* Parse "ep_gather.fma_v1" etc., a fused_moe layer recipe (interned, ref/moects_layer.h) and a
 * moe_route recipe (ref/moects_route.h).
 * Returns 0, or -1 for an unknown name. */
int moects__recipe_parse(const char *name, moects_op op, moects_recipe *out);

/* ep_gather reference (ref/ep_gather.c). Host pointers. recipe: EXACT_V1, EPG_FMA_V1,
 * EPG_MULADD_V1. Returns 0, or -1 for an invalid shape (negative dims, bad dtype) or an
 * input_index of a valid slot outside [0, M_sum). */
int moects__ref_ep_gather(const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                         moects_recipe recipe);

/* FP4 GEMM reference (ref/fp4_gemm.c). Host pointers. recipe: FP4_BLOCKWISE_V1 or EXACT_V1.
 * K % block != 0: the last K-block is zero-padded (missing elements count as 0, its scale is
 * read); with odd K the high nibble of each row's last byte is ignored. A NaN scale gives NaN.
 * Returns 0, or -1 for an invalid shape or out of memory. */
int moects__ref_fp4_gemm(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                        moects_recipe recipe);

/* Both FP4 GEMM recipes from one pass of block partials (ref/fp4_gemm.c; DESIGN.md "Numeric
 * recipes"): out_blockwise gets fp4_gemm.blockwise_v1, out_exact fp4_gemm.exact_v1, each [M, N]
 * s->out_dtype (F32 or BF16) and bit-identical to moects__ref_fp4_gemm with that recipe; a NULL
 * output is skipped; a->d is ignored. Returns 0 (M or N = 0: nothing written), or -1 when both
 * outputs are NULL and on the errors of moects__ref_fp4_gemm. */
int moects__ref_fp4_gemm_recipes(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                                void *out_blockwise, void *out_exact);

/* ---- grouped MoE GEMM (ref/moe_gemm.c; DESIGN.md "Grouped MoE GEMM") ----
 * Host pointers. recipe: FP4_BLOCKWISE_V1 (MXFP4, NVFP4, W4A8: block partials from OpenBLAS sgemm,
 * or exact in double for E4M3 x E2M1 (ref/wxa_gemm.c), rounded once to FP32) or EXACT_V1 (every format). Writes only valid
 * rows of a->d (rows of id -1, rows >= masked_m[e] untouched). Each valid row is computed as in
 * moects__ref_fp4_gemm (zero-padded K tail, its scale read; a->alpha NULL means 1): a NaN scale
 * (UE8M0 0xFF, E4M3 0x7F/0xFF, a non-finite FP32 A scale) makes exact_v1 NaN on its row (A) or on
 * its expert's column (B), never elsewhere; blockwise_v1 propagates it as IEEE arithmetic does.
 * b_format must match format (MXFP4 for MXFP4 and W4A8, NVFP4 for NVFP4). Returns 0, or -1 for an invalid shape,
 * inconsistent row metadata (m_indices outside [-1, E), masked_m outside [0, M], offsets not
 * non-decreasing from 0 to M), a recipe the format has no definition of (W4A16 blockwise), or out of
 * memory. */
int moects__ref_moe_gemm(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, moects_recipe recipe);
/* Both moe_gemm recipes at once (a->d ignored): out_blockwise (blockwise_v1; must be NULL for
 * W4A16) and out_exact (exact_v1), each [rows, N] out_dtype, bit-identical to moects__ref_moe_gemm
 * with that recipe; a NULL output is skipped, not both. Same errors as moects__ref_moe_gemm. */
int moects__ref_moe_gemm_recipes(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                                void *out_blockwise, void *out_exact);

/* Per-element forward error bound (DESIGN.md "Bounded verdicts"; Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., sec. 2.2, 3.1, 4.2) of a kernel of accumulation class (bits,
 * truncation) against the exact result, for the output of moects__ref_moe_gemm(EXACT_V1): bound[i]
 * (double, [rows, N], same indexing as d).
 * Verdict of element i, x = exact_v1 output, y = the kernel's: x NaN: y must be NaN; x +-Inf: y must
 * equal x; else PASS when |y - x| <= bound[i] (so y NaN fails, y Inf passes only where bound[i] is
 * +Inf). Invalid rows get 0 and are not compared.
 * Kernel model covered: each term A'_k B'_k (A'_k = dec(A_k) * sA, B'_k = dec(B_k) * sB, block
 * scales of k's block) formed with at most 4 FP32 roundings (dequantizing A and B, the block-scale
 * product sA * sB, the product itself), and alpha's FP32 multiply; the K terms summed in any order and
 * grouping (split-K, blockwise partials, tensor-core trees) with every addition and every
 * product/fma rounded to p = bits bits, u = 2^-p (RNE) or 2^(1-p) (truncation); binary32's exponent
 * range with gradual underflow (no flush-to-zero); then one rounding to out_dtype. Bound:
 *   B = |alpha| * (((1 + gamma(K+1, u)) (1 + gamma(4, 2^-24)) - 1) * S + U) + 2^-149
 *   bound = (B + ulp_out(|alpha| S + B)) * (1 + 2^-40)
 * gamma(n, u) = n u / (1 - n u); S = sum_k |A'_k B'_k| (one dgemm on absolute values, times
 * 1 + 2 gamma(K, 2^-53) for its own rounding); U = 2^-148 (sum|A'| + sum|B'| + K + max|dec A| *
 * sum|dec B| + 1), the absolute error of underflowing dequantizations, products and scale products;
 * ulp_out(v) the output type's ULP at v (2^-149 / 2^-133 at 0): half an output ULP for each side of
 * the comparison; 1 + 2^-40 covers this formula's own double rounding. bound[i] = +Inf where S is not
 * finite, S >= 2^127 (an intermediate sum may overflow) or |alpha| S + B reaches the output's largest
 * finite value; 0 where exact_v1 is NaN (a NaN scale or alpha).
 * Returns 0, or -1 for bits outside [2, 64], truncation not 0/1, and the errors of
 * moects__ref_moe_gemm. */
int moects__ref_moe_gemm_bound(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, uint32_t bits,
                              int truncation, double *bound);
/* The same for the dense FP4 GEMM (ref/fp4_gemm.c): bound [M, N], as moects__ref_moe_gemm_bound of
 * one expert holding every row. */
int moects__ref_fp4_gemm_bound(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, uint32_t bits,
                              int truncation, double *bound);

/* Per-element inputs of the accumulation check (DESIGN.md "Bounded verdicts"), [rows, N] like the
 * bound. A kernel of class (bits, truncation) outputs y = rnd(x + a + d), where
 *   x      alpha * sum_k A'_k B'_k, here in double (from a dgemm, like S; two more dgemms in all);
 *   d      the deterministic rest: |d| <= det (underflow allowances, x's own error);
 *   a      the accumulation error: with B's signs independent fair coins (the generator's draw)
 *          and a summation order that does not depend on them, E[a^2] <= sigma^2,
 *          sigma = |alpha| (gamma(K+1, u) + gamma(5, 2^-24)) sqrt(sum_k (A'_k B'_k)^2)
 *          (Cauchy-Schwarz over the at most K+1 roundings |delta| <= u, each of a partial sum whose
 *          expected square is at most that sum of squares; the per-term roundings and alpha's, by
 *          the same independence; cf. Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019).
 * So |a| >= |y - x| - half an output ULP at |y| - det for every element. det and sigma are rounded
 * up to float; det = +Inf where the check does not apply (invalid rows, exact_v1 NaN, bound +Inf). */
typedef struct {
    double *x;
    float *det, *sigma;
} moects_bound_stats;
/* moects__ref_moe_gemm_bound and, when st is not NULL, st's three arrays. Same errors; st's
 * pointers must all be set. */
int moects__ref_moe_gemm_bound_stats(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, uint32_t bits,
                                    int truncation, double *bound, const moects_bound_stats *st);
int moects__ref_fp4_gemm_bound_stats(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, uint32_t bits,
                                    int truncation, double *bound, const moects_bound_stats *st);

/* An accumulation class (DESIGN.md "Bounded verdicts"): the accumulator (bits, truncation) as above,
 * and optionally split-K with a BF16 reduction: K cut into at most bf16_splits pieces (any cut that
 * does not depend on the data's signs), each piece's partial formed in the accumulator class, times
 * alpha in FP32, and the partials added in BF16 with RNE after every addition (cuBLASLt's
 * REDUCTION_SCHEME_OUTPUT_TYPE on a BF16 output; torch's allow_bf16_reduced_precision_reduction).
 * bf16_splits 0 or 1: no such reduction. */
typedef struct {
    uint32_t bits;
    int truncation;
    uint32_t bf16_splits; /* 0..256: gamma(s - 1, 2^-8) is infinite from s = 257 on */
} moects_acc_class;

/* The bound and check inputs of moects_ref_*_gemm_bound_stats for class c. With s = c->bf16_splits
 * >= 2 the s - 1 BF16 roundings before the output's own give each partial a factor of at most
 * 1 + gamma(s - 1, 2^-8) (Higham, sec. 4.2: recursive summation of the s partials), so both
 *   rel   = (1 + gamma(K+1, u)) (1 + gamma(4, 2^-24)) - 1     (the bound's factor of S) and
 *   sig   = gamma(K+1, u) + gamma(5, 2^-24)                   (sigma's factor)
 * become (1 + r) (1 + gamma(s - 1, 2^-8)) - 1 (for sigma by Minkowski over the s - 1 roundings, each
 * of a running sum whose expected square is at most sum term^2), and the absolute allowance gains
 * (s - 1) 2^-133 (a BF16 rounding in the subnormal range). Returns 0, or -1 for c NULL, bits outside
 * 2..64, truncation not 0/1, bf16_splits over 256, and the errors of the functions above. */
int moects__ref_moe_gemm_bound_class(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                                    const moects_acc_class *c, double *bound, const moects_bound_stats *st);
int moects__ref_fp4_gemm_bound_class(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                                    const moects_acc_class *c, double *bound, const moects_bound_stats *st);
/* sigma's factor for class c at reduction length K (sigma = |alpha| factor sqrt(sum term^2), above):
 * what the accumulation check's diagnostics compare classes by. NaN for a class the bound refuses. */
double moects__ref_acc_sigma_factor(int64_t K, const moects_acc_class *c);

#endif
