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

/* ---- block-scaled GEMMs (MOECTS_LAYER_FP8_128, MOECTS_LAYER_W4A8; ref/fused_moe_gemm.c's opening
 * comment proves them exact) ---- */
#define MOECTS_FP8_BLOCK 128
#define MOECTS_W4A8_BLOCK 32
/* The K-block of a block-scaled format (128, 32), 0 for the others. */
static inline int64_t moects__fused_blk(moects_layer_format f)
{
    return f == MOECTS_LAYER_FP8_128 ? MOECTS_FP8_BLOCK : f == MOECTS_LAYER_W4A8 ? MOECTS_W4A8_BLOCK : 0;
}
/* The group of a block-scaled format's inputs (x and the intermediate): 128 (FP8_128; W4A8 with
 * mid=fp8_128) or 32 (W4A8 with mid=mxfp8). */
static inline int64_t moects__fused_in_group(moects_layer_format f, const moects_layer_recipe *r)
{
    return f == MOECTS_LAYER_W4A8 && r->mid == MOECTS_MID_MXFP8 ? 32 : 128;
}
/* Expert e's weight block scales as FP32, sb [N][K / blk] (row n's K-blocks): FP8_128 block (n / 128,
 * kb); W4A8 the UE8M0 byte of (n, kb), 2^(x - 127) (0xFF NaN). w2: W2's, else W13's. */
void moects__fused_block_scales(const moects_fused_moe_shape *s, const moects_fused_moe_args *a, int w2, int64_t e,
                                float *sb);
/* Quantize a [n] per group of G as moects__fused_fp8_groups (q the unscaled E4M3 values), then give
 * each blk-block its group's scale: sa [n / blk]. G a multiple of blk, n of G. */
void moects__fused_block_quant(const float *a, int64_t n, int64_t G, int64_t blk, int ue8m0, double *q, float *sa);
/* d [M][N][K/blk]: per blk-block kb of K (K a multiple of blk) the dot products of a [M][K] and
 * b [N][K], E4M3 (or E2M1) values with no NaN: exact. One dgemm per block on moects__parallel's
 * threads. Returns 0, or -1 out of memory. */
int moects__fused_dgemm_blocks(int64_t M, int64_t N, int64_t K, int64_t blk, const double *a, const double *b,
                               double *d);
/* x [rows][K]: every NaN zeroed, flags [rows][K/blk] 1 for a block that held one. */
void moects__fused_fp8_nans(double *x, int64_t rows, int64_t K, int64_t blk, uint8_t *flags);
/* One output element of a block-scaled GEMM under the recipe (ref/moects_layer.h): acc = +0, then per
 * block kb in order, p = fp32_rne(d[kb]) (NaN when anan[kb] or bnan[kb]; an exact zero +0) and the
 * recipe's bscale order: fmaf(p, sa * sb, acc), fmaf(p * sa, sb, acc) or acc + (p * sa) * sb. d [nkb]
 * exact block dots, sa, sb [nkb] the FP32 scales of the activation's and the weight's block. */
float moects__fused_block_chain(const double *d, int64_t nkb, const float *sa, const uint8_t *anan,
                                const uint8_t *bnan, const float *sb, moects_bscale_order o);

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
/* The NVFP4 intermediate's block scale of a group with amax (>= 0, a BF16 value) under the static
 * global scale gs (ref/moects_layer.h MOECTS_MID_NVFP4): dec(e4m3(gs * (amax * fl(1 / 6)))), and into
 * *o the factor the elements are multiplied by before their E2M1 rounding (0 when the scale is 0). */
float moects__fused_nvfp4_scale(float amax, float gs, float *o);
/* mid=nvfp4 of a [n] (n a multiple of 16 or not: the last group shorter) under gs: m [n] = dec(q) *
 * dec(b) exactly (the 1 / gs factor is GEMM2's, not here); a group holding a NaN: all NaN. */
void moects__fused_nvfp4_groups(const float *a, int64_t n, float gs, double *m);
/* The intermediate of one row: a [inter] (the activation, times the weight where the recipe puts it
 * there) -> m [inter], the exact value GEMM2 multiplies (BF16, FP32, or e4m3 * scale in double). */
void moects__fused_mid(const moects_layer_recipe *r, int64_t inter, const float *a, double *m);
#endif
