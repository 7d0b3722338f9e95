/* gpuref.c: the GPU references' front (gpu/moects_gpuref.h): a case's shape and args into the element
 * parameters of gpu/gpuref/gpuref_elem.h, run on the CUDA device (gpu/cuda/gpuref.cu) or, for the tests,
 * on the host (the stand-in and the broken stand-in); the flags of its elements decide whether the
 * result stands (docs/gpu_reference.md). Built with -ffp-contract=off (gpu/CMakeLists.txt), like ref/. */
#include <stdio.h>
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
    unsigned f = 0;
    const int rc = mode == MOECTS_GPUREF_CUDA ? moects__gpuref_cuda_fm(s, a, &point, &f, why, whylen)
                                              : moects__gpuref_host_fm(s, a, &point, &f, why, whylen);
    if (rc) return -1;
    if (mode == MOECTS_GPUREF_BROKEN) break_bit(a->out, (size_t)(s->T * s->H) * (s->out_dtype == MOECTS_BF16 ? 2 : 4));
    return flags_verdict(f, why, whylen);
}
