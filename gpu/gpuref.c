/* gpuref.c: the GPU references' front (gpu/moects_gpuref.h): a case's shape and args into the element
 * parameters of gpu/gpuref/gpuref_elem.h, run on the CUDA device (gpu/cuda/gpuref.cu) or, for the tests,
 * on the host (the stand-in and the broken stand-in); the flags of its elements decide whether the
 * result stands (docs/gpu_reference.md). Built with -ffp-contract=off (gpu/CMakeLists.txt), like ref/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuref/gpuref_elem.h"
#include "moects_fused_internal.h"
#include "moects_gpuref.h"
#include "moects_quant.h"

#if !MOECTS_HAVE_CUDA
int moects__gpuref_cuda_eg(const void *params, size_t x_bytes, size_t ids_bytes, size_t map_bytes, unsigned *flags,
                           char *why, size_t whylen)
{
    (void)params, (void)x_bytes, (void)ids_bytes, (void)map_bytes, (void)flags;
    snprintf(why, whylen, "built without CUDA");
    return -1;
}
int moects__gpuref_cuda_fg(const void *params, size_t sa_bytes, size_t sb_bytes, unsigned *flags, char *why,
                           size_t whylen)
{
    (void)params, (void)sa_bytes, (void)sb_bytes, (void)flags;
    snprintf(why, whylen, "built without CUDA");
    return -1;
}
int moects__gpuref_cuda_mg(const void *params, const size_t sizes[6], unsigned *flags, char *why, size_t whylen)
{
    (void)params, (void)sizes, (void)flags;
    snprintf(why, whylen, "built without CUDA");
    return -1;
}
int moects__gpuref_cuda_fm(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                           const moects_layer_recipe *r, unsigned *flags, char *why, size_t whylen)
{
    (void)s, (void)a, (void)r, (void)flags;
    snprintf(why, whylen, "built without CUDA");
    return -1;
}
#endif

/* What the flags of a case's elements mean for it: 0 the result stands, else 1 with why. */
static int flags_verdict(unsigned f, char *why, size_t whylen)
{
    if (f & GR_REFUSE) snprintf(why, whylen, "a valid slot's row is out of range (the CPU reference decides)");
    else if (f & GR_NAN) snprintf(why, whylen, "NaN output (its payload is the CPU's to choose)");
    else if (f & GR_CRMISS) snprintf(why, whylen, "an exp/tanh/erf input near a rounding boundary is not in the table");
    else if (f & GR_INEXACT) snprintf(why, whylen, "FP64 accumulation not proven exact on some element");
    return f ? 1 : 0;
}

/* The broken stand-in's one wrong bit. */
static void break_bit(void *out, size_t bytes)
{
    if (bytes) ((unsigned char *)out)[0] ^= 1u;
}

int moects__gpuref_ep_gather(moects_gpuref_mode mode, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                             moects_recipe r, char *why, size_t whylen)
{
    if (r != MOECTS_RECIPE_EXACT_V1 && r != MOECTS_RECIPE_EPG_FMA_V1 && r != MOECTS_RECIPE_EPG_MULADD_V1)
        return snprintf(why, whylen, "no GPU reference of this recipe"), 1;
    if (s->T < 0 || s->k < 0 || s->H < 0 || s->M_sum < 0 || (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32))
        return snprintf(why, whylen, "shape the CPU reference decides"), 1;
    gr_eg p = {s->T, s->k, s->H, s->M_sum, s->E_global, s->id_dtype == MOECTS_I64, s->has_expert_map != 0,
               s->out_dtype == MOECTS_BF16, r == MOECTS_RECIPE_EPG_FMA_V1 ? GR_FMA : r == MOECTS_RECIPE_EXACT_V1 ? GR_EXACT : GR_MULADD,
               a->x, a->topk_ids, a->topk_weights, a->input_index, a->expert_map, a->out};
    unsigned f = 0;
    if (mode == MOECTS_GPUREF_CUDA) {
        size_t idb = (size_t)(s->T * s->k) * (p.id64 ? 8 : 4), mapb = p.has_map ? (size_t)s->E_global * 4 : 0;
        if (moects__gpuref_cuda_eg(&p, (size_t)(s->M_sum * s->H) * 2, idb, mapb, &f, why, whylen)) return -1;
        return flags_verdict(f, why, whylen);
    }
    for (int64_t t = 0; t < s->T; t++)
        for (int64_t d = 0; d < s->H; d++) f |= gr_eg_elem(&p, t, d);
    if (mode == MOECTS_GPUREF_BROKEN) break_bit(a->out, (size_t)(s->T * s->H) * (p.out_bf16 ? 2 : 4));
    return flags_verdict(f, why, whylen);
}

int moects__gpuref_fp4_gemm(moects_gpuref_mode mode, const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                            moects_recipe r, char *why, size_t whylen)
{
    if (r != MOECTS_RECIPE_EXACT_V1) return snprintf(why, whylen, "no GPU reference of this recipe"), 1;
    if (s->M < 0 || s->N < 0 || s->K < 0 || (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) ||
        (s->format != MOECTS_FP4_MXFP4 && s->format != MOECTS_FP4_NVFP4))
        return snprintf(why, whylen, "shape the CPU reference decides"), 1;
    gr_fg p = {s->M, s->N, s->K, s->format == MOECTS_FP4_NVFP4, s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4,
               s->out_dtype == MOECTS_BF16, a->a, a->b, a->sa, a->sb, a->alpha, a->d};
    unsigned f = 0;
    if (mode == MOECTS_GPUREF_CUDA) {
        const int64_t nkb = (s->K + moects_fp4_block(s->format) - 1) / moects_fp4_block(s->format);
        size_t sab = (size_t)moects__scale_bytes(s->M, nkb, s->scale_layout);
        size_t sbb = (size_t)moects__scale_bytes(s->N, nkb, s->scale_layout);
        if (moects__gpuref_cuda_fg(&p, sab, sbb, &f, why, whylen)) return -1;
        return flags_verdict(f, why, whylen);
    }
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) f |= gr_fg_elem(&p, m, n);
    if (mode == MOECTS_GPUREF_BROKEN) break_bit(a->d, (size_t)(s->M * s->N) * (p.out_bf16 ? 2 : 4));
    return flags_verdict(f, why, whylen);
}

/* 1 when r sets only the layer recipe keys this path implements: a key added later (at a value other
 * than its default) makes the formatted strings differ, and the case takes the CPU path. */
static int fm_keys_known(const moects_layer_recipe *r)
{
    moects_layer_recipe k;
    char err[160], a[512], b[512];
    if (moects__layer_recipe_parse(MOECTS_LAYER_RECIPE_V1, &k, err, sizeof err)) return 0;
    k.w13 = r->w13, k.g1_bf16 = r->g1_bf16, k.act_bf16 = r->act_bf16, k.sig_rcp = r->sig_rcp, k.mid = r->mid;
    k.scale_ue8m0 = r->scale_ue8m0, k.weight = r->weight, k.w_bf16 = r->w_bf16, k.slot_bf16 = r->slot_bf16;
    k.combine = r->combine, k.fn = r->fn;
    moects__layer_recipe_format(&k, a, sizeof a);
    moects__layer_recipe_format(r, b, sizeof b);
    return !strcmp(a, b);
}

/* 1 when the layer's weight format, activation and intermediate are ones gpuref_layer.cuh implements. */
static int fm_implemented(const moects_fused_moe_shape *s, const moects_layer_recipe *r)
{
    return (s->format == MOECTS_LAYER_BF16 || s->format == MOECTS_LAYER_MXFP4 || s->format == MOECTS_LAYER_FP8_128) &&
           s->activation >= MOECTS_ACT_SILU && s->activation <= MOECTS_ACT_SITU && r->mid >= MOECTS_MID_BF16 &&
           r->mid <= MOECTS_MID_MXFP8 && fm_keys_known(r);
}

int moects__gpuref_fused_moe(moects_gpuref_mode mode, const moects_fused_moe_shape *s,
                             const moects_fused_moe_args *a, moects_recipe r, char *why, size_t whylen)
{
    const moects_layer_recipe *lr = moects__layer_recipe_of(r);
    if (!lr) return snprintf(why, whylen, "not a layer recipe"), 1;
    moects_layer_recipe point = *lr; /* the exact point of a bounded recipe (harness/ops/fused_moe.c) */
    if (point.combine == MOECTS_COMBINE_F32_ANY) point.combine = MOECTS_COMBINE_F32_SLOTS;
    point.fn = 0;
    if (moects__fused_bad_recipe(&point) || moects__fused_bad_shape(s, a, 1) || moects__layer_recipe_inexact(&point, s))
        return snprintf(why, whylen, "recipe or shape the CPU reference decides"), 1;
    if (s->H > (1 << 20) || s->inter > (1 << 20)) return snprintf(why, whylen, "H or I above 2^20"), 1;
    if (!fm_implemented(s, &point)) return snprintf(why, whylen, "a weight format or recipe key not on the GPU"), 1;
    unsigned f = 0;
    const int rc = mode == MOECTS_GPUREF_CUDA ? moects__gpuref_cuda_fm(s, a, &point, &f, why, whylen)
                                              : moects__gpuref_host_fm(s, a, &point, &f, why, whylen);
    if (rc) return -1;
    if (mode == MOECTS_GPUREF_BROKEN) break_bit(a->out, (size_t)(s->T * s->H) * (s->out_dtype == MOECTS_BF16 ? 2 : 4));
    return flags_verdict(f, why, whylen);
}

/* moe_gemm's row tables (ref/moe_gemm.c make_runs' checks): each row's expert (-1 not valid), the byte
 * offset of its A scale tensor and its row there. 0, or 1 for metadata the CPU reference decides. */
static int mg_rows(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int64_t nkb, int32_t *row_e,
                   int64_t *base, int64_t *row)
{
    const int64_t E = s->E, M = s->M, rows = s->rows == MOECTS_ROWS_MASKED ? E * M : M;
    for (int64_t r = 0; r < rows; r++) row_e[r] = -1, base[r] = 0, row[r] = r;
    if (s->rows == MOECTS_ROWS_CONTIGUOUS) {
        if (M > 0 && !a->m_indices) return 1;
        for (int64_t i = 0; i < M; i++) {
            if (a->m_indices[i] < -1 || a->m_indices[i] >= E) return 1;
            row_e[i] = a->m_indices[i];
        }
    } else if (s->rows == MOECTS_ROWS_MASKED) {
        if (!a->masked_m) return 1;
        for (int64_t e = 0; e < E; e++) {
            if (a->masked_m[e] < 0 || a->masked_m[e] > M) return 1;
            for (int64_t i = 0; i < a->masked_m[e]; i++)
                row_e[e * M + i] = (int32_t)e, base[e * M + i] = e * moects__scale_bytes(M, nkb, s->scale_layout),
                              row[e * M + i] = i;
        }
    } else {
        const int64_t *off = a->expert_offsets;
        if (!off || off[0] != 0 || off[E] != M) return 1;
        for (int64_t e = 0; e < E; e++) {
            if (off[e + 1] < off[e]) return 1;
            for (int64_t i = off[e]; i < off[e + 1]; i++) row_e[i] = (int32_t)e;
        }
    }
    return 0;
}

/* A moe_gemm shape this path takes (ref/moe_gemm.c bad_shape's formats), K > 0, rows and columns. */
static int mg_shape_ok(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a)
{
    int fmt = 0;
    switch (s->format) {
    case MOECTS_MOE_MXFP4: fmt = s->b_format == MOECTS_FP4_MXFP4; break;
    case MOECTS_MOE_NVFP4: fmt = s->b_format == MOECTS_FP4_NVFP4; break;
    case MOECTS_MOE_W4A8:
        fmt = s->b_format == MOECTS_FP4_MXFP4 && (s->a_scale_block == 32 || s->a_scale_block == 128) &&
              (s->a_scale_f32 == 0 || s->a_scale_f32 == 1);
        break;
    case MOECTS_MOE_W4A16: fmt = s->b_format == MOECTS_FP4_MXFP4 || s->b_format == MOECTS_FP4_NVFP4; break;
    }
    return fmt && s->E >= 1 && s->M > 0 && s->N > 0 && s->K > 0 &&
           (s->out_dtype == MOECTS_BF16 || s->out_dtype == MOECTS_F32) &&
           (s->scale_layout == MOECTS_SCALES_LINEAR || s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4) &&
           (s->rows == MOECTS_ROWS_CONTIGUOUS || s->rows == MOECTS_ROWS_MASKED || s->rows == MOECTS_ROWS_OFFSETS) &&
           (s->rows != MOECTS_ROWS_CONTIGUOUS || s->align >= 1) && a->a && a->b && a->sb &&
           (a->sa || s->format == MOECTS_MOE_W4A16);
}

/* The bytes of A and of A's scales. */
static void mg_a_bytes(const moects_moe_gemm_shape *s, int64_t rows, int64_t nkb, size_t *ab, size_t *sab)
{
    const int64_t rb = (s->K + 1) / 2, nsa = (s->K + s->a_scale_block - 1) / (s->a_scale_block ? s->a_scale_block : 1);
    switch (s->format) {
    case MOECTS_MOE_W4A8: *ab = (size_t)(rows * s->K), *sab = (size_t)(rows * nsa * (s->a_scale_f32 ? 4 : 1)); return;
    case MOECTS_MOE_W4A16: *ab = (size_t)(rows * s->K * 2), *sab = 0; return;
    default: break;
    }
    *ab = (size_t)(rows * rb);
    *sab = (size_t)(s->rows == MOECTS_ROWS_MASKED  ? s->E * moects__scale_bytes(s->M, nkb, s->scale_layout)
                    : s->rows == MOECTS_ROWS_OFFSETS ? moects__scale_bytes(s->M, nkb, MOECTS_SCALES_LINEAR)
                                                     : moects__scale_bytes(s->M, nkb, s->scale_layout));
}

/* p's elements on the device or the host (mode); *f their flags. 0, or -1 (why). */
static int mg_run(moects_gpuref_mode mode, const moects_moe_gemm_shape *s, const gr_mg *p, int64_t nkb, unsigned *f,
                  char *why, size_t whylen)
{
    if (mode == MOECTS_GPUREF_CUDA) {
        const int64_t rows = p->rows, rb = (s->K + 1) / 2;
        size_t ab, sab;
        mg_a_bytes(s, rows, nkb, &ab, &sab);
        const size_t sizes[6] = {ab, (size_t)(s->E * s->N * rb), sab, (size_t)(s->E * p->sb_bytes),
                                 p->alpha ? (size_t)s->E * 4 : 0, (size_t)(rows * s->N) * (p->out_bf16 ? 2 : 4)};
        return moects__gpuref_cuda_mg(p, sizes, f, why, whylen);
    }
    for (int64_t r = 0; r < p->rows; r++)
        for (int64_t n = 0; n < p->N; n++) *f |= gr_mg_elem(p, r, n);
    return 0;
}

int moects__gpuref_moe_gemm(moects_gpuref_mode mode, const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                            moects_recipe r, char *why, size_t whylen)
{
    if (r != MOECTS_RECIPE_EXACT_V1) return snprintf(why, whylen, "no GPU reference of this recipe"), 1;
    if (!mg_shape_ok(s, a)) return snprintf(why, whylen, "a shape the CPU reference decides"), 1;
    const int nv = s->b_format == MOECTS_FP4_NVFP4;
    const int wxa = s->format == MOECTS_MOE_W4A8 || s->format == MOECTS_MOE_W4A16;
    const int64_t nkb = (s->K + (nv ? 15 : 31)) / (nv ? 16 : 32);
    const int64_t rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M;
    int32_t *row_e = malloc((size_t)rows * sizeof *row_e);
    int64_t *base = malloc((size_t)rows * sizeof *base), *row = malloc((size_t)rows * sizeof *row);
    int rc = !row_e || !base || !row ? (snprintf(why, whylen, "GPU reference: out of memory"), -1) : 0;
    if (!rc && mg_rows(s, a, nkb, row_e, base, row))
        rc = 1, snprintf(why, whylen, "row layout the CPU reference decides");
    gr_mg p = {rows, s->N, s->K, moects__scale_bytes(s->N, nkb, s->scale_layout), nv,
               s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4, s->out_dtype == MOECTS_BF16,
               s->rows != MOECTS_ROWS_OFFSETS && s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4,
               wxa, s->format == MOECTS_MOE_W4A16, s->a_scale_f32, s->a_scale_block, row_e, base, row,
               a->a, a->b, a->sa, a->sb, a->alpha, a->d};
    unsigned f = 0;
    if (!rc) rc = mg_run(mode, s, &p, nkb, &f, why, whylen);
    free(row_e), free(base), free(row);
    if (rc) return rc;
    if (mode == MOECTS_GPUREF_BROKEN) break_bit(a->d, (size_t)(rows * s->N) * (p.out_bf16 ? 2 : 4));
    return flags_verdict(f, why, whylen);
}
