/* moects_quant.h: FP4 quantizers (MXFP4, NVFP4) and the scale layouts (ref/quant.c).
 * DESIGN.md "Number formats". Host memory, no I/O. Element codes are packed two per byte (element 2j
 * in the low nibble); a row of K elements takes ceil(K/2) bytes, the high nibble of an odd row's
 * last byte is 0. A row's last K-block may be partial (K % block != 0): its scale is computed over
 * the elements present. */
#ifndef MOECTS_QUANT_H
#define MOECTS_QUANT_H
#include "moects_types.h"

typedef enum {
    /* OCP MX v1.0 sec. 6.3: X = 2^(floor(log2 amax) - emax_elem), emax_elem = 2 for E2M1. */
    MOECTS_MX_SCALE_OCP = 0,
    /* "round up": X = 2^ceil(log2(amax / 6)), exact, so no element exceeds 6 (TensorRT-LLM
     * __nv_cvt_float_to_e8m0(..., cudaRoundPosInf), several GPU libraries). */
    MOECTS_MX_SCALE_ROUND_UP = 1
} moects_mx_scale_rule;

/* Scale of an E4M3 activation block (W4A8, DESIGN.md "Grouped MoE GEMM"). */
typedef enum {
    /* OCP MX v1.0 sec. 6.3 with emax_elem = 8 (E4M3 max 448 = 1.75 * 2^8): X = 2^(floor(log2 amax) - 8),
     * UE8M0; elements up to 1.99 * 2^8 saturate to 448 */
    MOECTS_E4M3_SCALE_UE8M0_OCP = 0,
    /* "round up": X = 2^ceil(log2(amax / 448)), UE8M0, computed exactly (the smallest 2^s with
     * 448 * 2^s >= amax): DeepGEMM per_token_cast_to_fp8(use_ue8m0=True), ceil_to_ue8m0 */
    MOECTS_E4M3_SCALE_UE8M0_ROUND_UP = 1,
    /* FP32 scale X = amax / 448 (FP32 division), elements e4m3(x * (1 / X)) with the reciprocal
     * rounded to FP32 (DeepGEMM per_token_cast_to_fp8 without ue8m0) */
    MOECTS_E4M3_SCALE_F32 = 2
} moects_e4m3_scale_rule;

/* ---- scale layouts ---- */
/* Bytes of a [rows][nkb] scale tensor in `layout`: rows*nkb (linear); for the 128x4 swizzle rows
 * are padded to a multiple of 128 and nkb to a multiple of 4. Returns -1 for negative sizes or a
 * bad layout. */
int64_t moects__scale_bytes(int64_t rows, int64_t nkb, moects_scale_layout layout);
/* Byte offset of the scale of (row r, K-block kb), 0 <= r, 0 <= kb < nkb. Linear: r*nkb + kb.
 * 128x4 (cuBLASLt / CUTLASS / TensorRT-LLM get_sf_out_offset_128x4):
 * ((r/128)*ceil(nkb/4) + kb/4)*512 + (r%32)*16 + ((r/32)%4)*4 + kb%4. */
int64_t moects__scale_offset(int64_t r, int64_t kb, int64_t nkb, moects_scale_layout layout);
/* linear [rows][nkb] -> 128x4 swizzled (moects__scale_bytes bytes; padding written as 0), and back.
 * Returns 0, or -1 for negative sizes. */
int moects__scales_swizzle(const uint8_t *linear, int64_t rows, int64_t nkb, uint8_t *swizzled);
int moects__scales_unswizzle(const uint8_t *swizzled, int64_t rows, int64_t nkb, uint8_t *linear);

/* ---- MXFP4 (OCP MX v1.0 sec. 6.3) ----
 * x [rows][K] fp32 -> codes [rows][ceil(K/2)] and UE8M0 scales [rows][ceil(K/32)] in `layout`
 * (buffer of moects__scale_bytes bytes). Per 32-element block: amax = max |x|; scale exponent by
 * `rule`, clamped to the UE8M0 range [-127, 127]; an all-zero block gets code 0 (2^-127);
 * element = e2m1(x / X, rounding) (x / X is exact), saturating at +-6 (the OCP rule can give up to
 * 7.99 / X: clamped, as the spec says). A block holding a NaN or +-Inf gets scale 0xFF (NaN) and
 * element codes 0 (OCP leaves it to the implementation; moects' choice, so a NaN input stays NaN
 * after the GEMM). Returns 0, or -1 for rows < 0, K < 0 or a bad rule/rounding/layout. */
int moects__quant_mxfp4(const float *x, int64_t rows, int64_t K, moects_mx_scale_rule rule,
                       moects_rounding rounding, moects_scale_layout layout, uint8_t *codes,
                       uint8_t *scales);

/* ---- NVFP4 (TensorRT-LLM cpp/tensorrt_llm/kernels/quantization.cuh cvt_warp_fp16_to_fp4, which
 * FlashInfer and vLLM copy) ----
 * The per-tensor encode scale gs = 2688.0f / amax (448 * 6 / amax, one FP32 division) over x [n];
 * the GEMM's alpha is 1 / (gs_a * gs_b). amax == 0 (or n == 0) gives 1.0f; a NaN in x gives NaN,
 * an Inf 0, an amax below 2688 / FLT_MAX +Inf: moects__quant_nvfp4 refuses those. */
float moects__nvfp4_global_scale(const float *x, size_t n);
/* x [rows][K] -> codes [rows][ceil(K/2)] and E4M3 scales [rows][ceil(K/16)] in `layout`. Per
 * 16-element block, in FP32 with correctly rounded reciprocals:
 *   sf    = gs * (amax_block * (1/6))            (TRT-LLM: SFScaleVal * (vecMax * rcp(6)))
 *   code  = e4m3(sf) (RNE, saturating; cuda_fp8.h __nv_fp8_e4m3(float))
 *   oscl  = sf != 0 ? 1 / (dec(code) * (1 / gs)) : 0   (also 0 when dec(code) == 0: a scale
 *           that underflowed to 0 zeroes its block; TRT-LLM would multiply by rcp(0) = Inf)
 *   elem  = e2m1(x * oscl, rounding)             (cvt.rn.satfinite.e2m1x2.f32 for RNE)
 * TRT-LLM uses rcp.approx.ftz.f32 for the reciprocals, which may differ by an ulp from 1/x and
 * flushes subnormals: a GPU quantizer can thus differ from this one in rare last-bit cases. The
 * GEMM reference never depends on it (it takes codes and scales as given).
 * A NaN x gives e2m1 code 0x7 (+6, cuda_fp4.hpp) and its block the E4M3 NaN scale 0x7F;
 * an Inf amax saturates the scale to 448.
 * Returns 0, or -1 for rows < 0, K < 0, gs not finite or <= 0, a bad rounding or layout. */
int moects__quant_nvfp4(const float *x, int64_t rows, int64_t K, float gs, moects_rounding rounding,
                       moects_scale_layout layout, uint8_t *codes, uint8_t *scales);

/* NVFP4 activations of a grouped GEMM, one global scale per expert (vLLM / FlashInfer
 * cutlass_moe_fp4's per-expert a1_gscale): x [rows][K], row_expert [rows] (expert of each row, -1 =
 * padding: codes and scales left 0, as m_indices). gs[e] = 2688 / amax over expert e's rows (1 for an
 * expert without rows or all zero), then each row as moects__quant_nvfp4 with its expert's gs; scales
 * indexed by the global row (the contiguous/offsets layouts' one A scale tensor). Returns 0, or -1
 * for the errors of moects__quant_nvfp4, E < 1, an id outside [-1, E), or an expert whose gs is not
 * finite and > 0 (a NaN or Inf among its rows, an amax below 2688 / FLT_MAX). */
int moects__quant_nvfp4_experts(const float *x, int64_t rows, int64_t K, int64_t E, const int32_t *row_expert,
                               moects_rounding rounding, moects_scale_layout layout, uint8_t *codes,
                               uint8_t *scales, float *gs);

/* ---- E4M3 activations with one scale per 1 x block along K (W4A8; DeepGEMM per_token_cast_to_fp8
 * with block 128, per_block 32) ----
 * x [rows][K] fp32 -> codes [rows][K] E4M3 (RNE, saturating at +-448, cuda_fp8.h __NV_SATFINITE) and
 * scales [rows][ceil(K/block)], linear: UE8M0 bytes, or floats for MOECTS_E4M3_SCALE_F32. Per block
 * (a last partial one over the elements present): amax = max(max |x|, amax_min) (amax_min 0: none;
 * DeepGEMM clamps at 1e-4); UE8M0 rules: exponent clamped to [-127, 127], amax 0 gives 2^-127 and
 * codes 0, elements e4m3(x / X) with x / X exact; F32: amax 0 gives scale 0 and codes 0. A block
 * holding a NaN or Inf gets the NaN scale (0xFF or NaN) and codes 0. Returns 0, or -1 for rows < 0,
 * K < 0, block < 1, amax_min negative or not finite, or a bad rule. */
int moects__quant_e4m3(const float *x, int64_t rows, int64_t K, int64_t block, moects_e4m3_scale_rule rule,
                      float amax_min, uint8_t *codes, void *scales);

/* Decode one quantized row back to fp32: out[k] = dec(code k) * dec(scale of block k/block)
 * (FP32 multiply; * (1/gs) not applied). fmt picks block 32/UE8M0 or 16/E4M3; `scales` is the whole
 * scale tensor in `layout`, row r of `rows`. Used by tests and round trips. */
void moects__fp4_dequant_row(const uint8_t *codes, const uint8_t *scales, int64_t r, int64_t K,
                            moects_fp4_format fmt, moects_scale_layout layout, float *out);
#endif
