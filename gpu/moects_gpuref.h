/* moects_gpuref.h: the GPU references (issue 31, docs/gpu_reference.md): ep_gather's three recipes,
 * fp4_gemm.exact_v1, moe_gemm.exact_v1 and fused_moe's exact layer recipes computed on the CUDA device,
 * bit-identical to ref/ where the per-element checks of gpu/gpuref/ prove it, else refused so that the
 * case takes the CPU path. The same element code runs on the host as a test stand-in (CTest has no
 * GPU), and a broken stand-in (one output bit flipped) lets the tests see the cross-check catch a wrong
 * GPU reference (FAIL_REFERENCE). Inputs are host pointers (the reference's own copies go to the device
 * and back); the output is the host buffer in the args (out / d). Internal (moects__ names). */
#ifndef MOECTS_GPUREF_H
#define MOECTS_GPUREF_H
#include <stddef.h>

#include "moects_layer.h"
#include "moects_ref.h"
#include "moects_types.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOECTS_GPUREF_CUDA = 0,    /* on the CUDA device (gpu/cuda/gpuref.cu) */
    MOECTS_GPUREF_STANDIN = 1, /* test only: the same element code on the host */
    MOECTS_GPUREF_BROKEN = 2   /* test only: the stand-in with bit 0 of the output's first byte flipped */
} moects_gpuref_mode;

/* ep_gather under recipe r (EXACT_V1, EPG_FMA_V1, EPG_MULADD_V1) into a->out ([T, H] out_dtype, host).
 * Returns 0 done; 1 this case is not exact on this path (why: which check failed, e.g. "NaN output":
 * take the CPU path); -1 an error (why: CUDA error, no device, out of memory; also the CPU path). */
int moects__gpuref_ep_gather(moects_gpuref_mode mode, const moects_ep_gather_shape *s, const moects_ep_gather_args *a,
                             moects_recipe r, char *why, size_t whylen);
/* fp4_gemm under exact_v1 (any other recipe: 1) into a->d ([M, N] out_dtype, host); MXFP4 or NVFP4, both
 * scale layouts. Returns as moects__gpuref_ep_gather (1: an element whose FP64 sum or alpha product is
 * not proven exact, docs/gpu_reference.md). */
int moects__gpuref_fp4_gemm(moects_gpuref_mode mode, const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a,
                            moects_recipe r, char *why, size_t whylen);
/* moe_gemm under exact_v1 (any other recipe: 1) into a->d ([rows, N] out_dtype, host; rows not valid in
 * the layout left as they are): every format, row layout and scale layout. Returns as
 * moects__gpuref_fp4_gemm (1 also for metadata the CPU reference decides, K = 0, and W4A8/W4A16 with a
 * non-finite scale or term). */
int moects__gpuref_moe_gemm(moects_gpuref_mode mode, const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                            moects_recipe r, char *why, size_t whylen);

/* fused_moe under a layer recipe r (ref/moects_layer.h; the exact point of a bounded recipe, as
 * harness/ops/fused_moe.c's reference: combine=f32_any summed in slot order, fn=cr) into a->out
 * ([T, H] out_dtype, host): ref/fused_moe.c's stages on the device (gpu/gpuref/gpuref_layer.cuh).
 * Returns as moects__gpuref_ep_gather (1: a recipe or shape the CPU reference decides (refuses), H or I
 * above 2^20, a NaN output, an expert_map entry >= E, an exp/tanh/erf input missing from the hard-case
 * table). */
int moects__gpuref_fused_moe(moects_gpuref_mode mode, const moects_fused_moe_shape *s,
                             const moects_fused_moe_args *a, moects_recipe r, char *why, size_t whylen);

/* ---- the layer's element code run (moects_layer_recipe r exact, the shape valid: the callers check) --- */
/* On the host (gpu/gpuref_layer.cpp: the stand-ins) and on the device (gpu/cuda/gpuref.cu): a->out
 * written, *flags the elements' flags (gpuref_elem.h GR_*). 0, or -1 (why). */
int moects__gpuref_host_fm(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                           const moects_layer_recipe *r, unsigned *flags, char *why, size_t whylen);
int moects__gpuref_cuda_fm(const moects_fused_moe_shape *s, const moects_fused_moe_args *a,
                           const moects_layer_recipe *r, unsigned *flags, char *why, size_t whylen);

/* ---- gpu/cuda/gpuref.cu (CUDA builds; gpu/gpuref.c answers "built without CUDA" otherwise) ---- */
/* The element code of gpuref_elem.h over every element on the current device; the parameters as the
 * stand-in's (struct gr_eg / gr_fg, passed opaquely). *flags: the elements' flags ORed. 0, or -1 (why). */
int moects__gpuref_cuda_eg(const void *params, size_t x_bytes, size_t ids_bytes, size_t map_bytes, unsigned *flags,
                           char *why, size_t whylen);
int moects__gpuref_cuda_fg(const void *params, size_t sa_bytes, size_t sb_bytes, unsigned *flags, char *why,
                           size_t whylen);
/* gpuref_elem.h's gr_mg_elem over every element of the struct gr_mg at params; sizes: the bytes of A, B,
 * A's scales, B's scales, alpha (0: none) and D (copied in: rows not valid keep their bytes). */
int moects__gpuref_cuda_mg(const void *params, const size_t sizes[6], unsigned *flags, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
