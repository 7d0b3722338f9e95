/* moects_fused_internal.h: what the fused MoE layer's exact reference shares between its files
 * (ref/fused_moe.c: routing, stages, combine; ref/fused_moe_gemm.c: the exact GEMMs;
 * ref/fused_moe_act.c: activation and intermediate) and with its tests. ref/ only, not installed. */
#ifndef MOECTS_FUSED_INTERNAL_H
#define MOECTS_FUSED_INTERNAL_H
#include <stdint.h>

#include "moects_layer.h"

/* ---- exact GEMM (ref/fused_moe_gemm.c; its opening comment proves the steps) ---- */
/* Rows [0, N) of expert e of a weight tensor W [E][N][K] (BF16, or MXFP4: codes [E][N][K/2] and
 * UE8M0 scales [E][N][K/32], K a multiple of 32; or FP8_128: E4M3 [E][N][K], decoded unscaled, the
 * block scales not read) decoded to doubles b [N][K] (exact: a BF16 value, e2m1 * 2^(x-127), up to
 * 6 * 2^127, or an E4M3 value; an element of a 0xFF scale, or a NaN code, is NaN) and each row's
 * moects__fused_norm into nb [N] and lb [N]. Rows split over moects__parallel's threads. */
void moects__fused_decode(const void *w, const uint8_t *scale, moects_layer_format f, int64_t e, int64_t N,
                          int64_t K, double *b, double *nb, int *lb);
/* What the dot products' bound needs of a row x [K]: sqrt(sum x_k^2) in double (the Cauchy-Schwarz
 * factor), and into *low an exponent with every finite x_k a multiple of 2^*low (the smallest
 * exponent of a nonzero one and the lowest significand bit set in any; MOECTS_FUSED_NO_BITS when
 * none is finite and nonzero). */
double moects__fused_norm(const double *x, int64_t K, int *low);
#define MOECTS_FUSED_NO_BITS 4096

/* d = a b^T, [M][N] (a [M][K], b [N][K]): OpenBLAS dgemms over K-chunks of 256 added in order in
 * double, column slabs on moects__parallel's threads; an approximation whose error
 * moects__fused_dot bounds. Returns 0, or -1 out of memory. */
int moects__fused_dgemm(int64_t M, int64_t N, int64_t K, const double *a, const double *b, double *d);

/* ---- FP8 block-128 GEMMs (MOECTS_LAYER_FP8_128; ref/fused_moe_gemm.c's opening comment proves
 * them exact) ---- */
#define MOECTS_FP8_BLOCK 128
/* d [M][N][K/128]: per 128-block kb of K (K a multiple of 128) the dot products of a [M][K] and
 * b [N][K], E4M3 values with no NaN: exact. One dgemm per block on moects__parallel's threads.
 * Returns 0, or -1 out of memory. */
int moects__fused_dgemm_blocks(int64_t M, int64_t N, int64_t K, const double *a, const double *b, double *d);
/* x [rows][K]: every NaN zeroed, flags [rows][K/128] 1 for a block that held one. */
void moects__fused_fp8_nans(double *x, int64_t rows, int64_t K, uint8_t *flags);
/* One output element of an FP8_128 GEMM under the recipe (ref/moects_layer.h): acc = +0, then per
 * block kb in order, p = fp32_rne(d[kb]) (NaN when anan[kb] or bnan[kb]; an exact zero +0) and
 * acc = fmaf(p, sa[kb] * sb[kb], acc) (the scale product one FP32 multiply). d [nkb] exact block
 * dots, sa, sb [nkb] the FP32 scales of the activation's and the weight's block. */
float moects__fused_block_chain(const double *d, int64_t nkb, const float *sa, const uint8_t *anan,
                                const uint8_t *bnan, const float *sb);

/* fp32_rne of the exact sum_k a[k] b[k] (every product exact in double; an exact zero is +0; NaN
 * if a product is NaN or +Inf and -Inf are both there, else the Inf), given this element's d of
 * moects__fused_dgemm, s = the product of a's and b's moects__fused_norm (so s >= sum |a_k b_k| up
 * to a relative 2^-21 the bound allows for) and qexp = the sum of their lows (every product, so the
 * sum, is a multiple of 2^qexp): decided from d's error bound, else in a 128-bit integer, else by
 * moects_xsum. */
float moects__fused_dot(double d, double s, int qexp, const double *a, const double *b, int64_t K);
/* The same by the exact path alone (IEEE's special cases, then moects_xsum). */
float moects__fused_dot_exact(const double *a, const double *b, int64_t K);

/* ---- what both references check and share (ref/fused_moe.c) ---- */
/* 1 when r holds a value outside its enum or flag range. */
int moects__fused_bad_recipe(const moects_layer_recipe *r);
/* 1 for a shape or args the references refuse (moects__ref_fused_moe's errors; need_out: a->out too;
 * situ with a not in (0, Inf) or L negative, NaN or infinite). */
int moects__fused_bad_shape(const moects_fused_moe_shape *s, const moects_fused_moe_args *a, int need_out);
/* slot_e[T*k]: the local expert of each slot, -1 when it is not valid; 0, or -1 for a map entry >= E. */
int moects__fused_route(const moects_fused_moe_shape *s, const moects_fused_moe_args *a, int32_t *slot_e);
/* The valid slots of [sl0, sl1) grouped by expert (a counting sort): order[] lists them expert by
 * expert, slot order within one; after it, expert e's slots are order[cnt[e-1] .. cnt[e]) (cnt[-1]
 * read as 0), cnt [E + 1]. */
void moects__fused_group(const int32_t *slot_e, int64_t sl0, int64_t sl1, int64_t E, int64_t *order, int64_t *cnt);

/* ---- activation and intermediate (ref/fused_moe_act.c) ---- */
/* W13's rows holding gate i and up i (i in [0, inter)) in order o. */
void moects__fused_gate_up(moects_w13_order o, int64_t inter, int64_t i, int64_t *gate, int64_t *up);
/* The activation of one (gate, up) pair (relu2: of g alone, u unused), in FP32 as the recipe says,
 * act=bf16 rounding included; the router weight is not applied here. */
float moects__fused_act(const moects_fused_moe_shape *s, const moects_layer_recipe *r, float g, float u);
/* An FP8 group's scale from its amax (the largest |v|; NaN when the group holds a NaN): div:
 * fmaxf(amax, 1e-10f) / 448.0f; ue8m0: the smallest power of two >= amax / 448 (real arithmetic),
 * exponent clamped to [-127, 127] (amax 0: 2^-127, +Inf: 2^127). NaN for a NaN amax. */
double moects__fused_fp8_scale(float amax, int ue8m0);
/* FP8 quantization per group of G (the last may be shorter) of a [n]: v = bf16(a) (the identity on
 * BF16 values), amax, scale (moects__fused_fp8_scale), q = e4m3(v / s) (FP32 division, RNE,
 * saturating): q [n] the decoded E4M3 values (NaN for a NaN code), sc [ceil(n / G)] the FP32 scales.
 * The intermediate's FP8 formats, and x under MOECTS_LAYER_FP8_128 (G = 128). */
void moects__fused_fp8_groups(const float *a, int64_t n, int64_t G, int ue8m0, double *q, float *sc);
/* The intermediate of one row: a [inter] (the activation, times the weight where the recipe puts it
 * there) -> m [inter], the exact value GEMM2 multiplies (BF16, FP32, or e4m3 * scale in double). */
void moects__fused_mid(const moects_layer_recipe *r, int64_t inter, const float *a, double *m);
#endif
