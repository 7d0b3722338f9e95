/* quant.c: MXFP4 / NVFP4 quantizers and the 128x4 scale swizzle (API and sources in
 * moects_quant.h). */
#include <math.h>
#include <string.h>

#include "moects_quant.h"
#include "moects_ref.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t moects__scale_bytes(int64_t rows, int64_t nkb, moects_scale_layout layout)
{
    if (rows < 0 || nkb < 0) return -1;
    if (layout == MOECTS_SCALES_LINEAR) return rows * nkb;
    if (layout == MOECTS_SCALES_SWIZZLED_128X4) return cdiv(rows, 128) * 128 * cdiv(nkb, 4) * 4;
    return -1;
}

int64_t moects__scale_offset(int64_t r, int64_t kb, int64_t nkb, moects_scale_layout layout)
{
    if (layout == MOECTS_SCALES_LINEAR) return r * nkb + kb;
    return ((r / 128) * cdiv(nkb, 4) + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

int moects__scales_swizzle(const uint8_t *linear, int64_t rows, int64_t nkb, uint8_t *swizzled)
{
    int64_t n = moects__scale_bytes(rows, nkb, MOECTS_SCALES_SWIZZLED_128X4);
    if (n < 0) return -1;
    memset(swizzled, 0, (size_t)n);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kb = 0; kb < nkb; kb++)
            swizzled[moects__scale_offset(r, kb, nkb, MOECTS_SCALES_SWIZZLED_128X4)] = linear[r * nkb + kb];
    return 0;
}

int moects__scales_unswizzle(const uint8_t *swizzled, int64_t rows, int64_t nkb, uint8_t *linear)
{
    if (rows < 0 || nkb < 0) return -1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kb = 0; kb < nkb; kb++)
            linear[r * nkb + kb] = swizzled[moects__scale_offset(r, kb, nkb, MOECTS_SCALES_SWIZZLED_128X4)];
    return 0;
}

static int bad_common(int64_t rows, int64_t K, moects_rounding rd, moects_scale_layout layout)
{
    return rows < 0 || K < 0 || (rd != MOECTS_ROUND_RNE && rd != MOECTS_ROUND_TIES_TO_ZERO) ||
           (layout != MOECTS_SCALES_LINEAR && layout != MOECTS_SCALES_SWIZZLED_128X4);
}

/* Zero the code bytes and (swizzled) the scale padding, so every output byte is defined. */
static void clear_outputs(int64_t rows, int64_t K, int64_t nkb, moects_scale_layout layout,
                          uint8_t *codes, uint8_t *scales)
{
    memset(codes, 0, (size_t)(rows * cdiv(K, 2)));
    memset(scales, 0, (size_t)moects__scale_bytes(rows, nkb, layout));
}

static void put_code(uint8_t *row, int64_t k, uint8_t c)
{
    row[k / 2] = (uint8_t)(row[k / 2] | (c & 0xFu) << (4 * (k & 1)));
}

/* Unbiased exponent of the scale for a block with finite amax > 0. */
static int mx_scale_exp(float amax, moects_mx_scale_rule rule)
{
    int e;
    (void)frexp((double)amax, &e); /* amax = f * 2^e, f in [0.5, 1): floor(log2 amax) = e - 1 */
    if (rule == MOECTS_MX_SCALE_OCP) return e - 1 - 2;
    /* smallest s with 6 * 2^s >= amax; exact in double. */
    int s = e - 3; /* 6 * 2^(e-3) = 0.75 * 2^e < amax? then s = e - 2 */
    if (6.0 * ldexp(1.0, s) < (double)amax) s++;
    return s;
}

int moects__quant_mxfp4(const float *x, int64_t rows, int64_t K, moects_mx_scale_rule rule,
                       moects_rounding rounding, moects_scale_layout layout, uint8_t *codes,
                       uint8_t *scales)
{
    if (bad_common(rows, K, rounding, layout) ||
        (rule != MOECTS_MX_SCALE_OCP && rule != MOECTS_MX_SCALE_ROUND_UP))
        return -1;
    const int64_t g = 32, nkb = cdiv(K, g), rb = cdiv(K, 2);
    clear_outputs(rows, K, nkb, layout, codes, scales);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * K;
        for (int64_t b = 0; b < nkb; b++) {
            int64_t k0 = b * g, k1 = k0 + g < K ? k0 + g : K;
            float amax = 0.0f;
            int finite = 1;
            for (int64_t k = k0; k < k1; k++) {
                if (!isfinite(xr[k])) finite = 0;
                else if (fabsf(xr[k]) > amax) amax = fabsf(xr[k]);
            }
            uint8_t sc;
            if (!finite) {
                sc = 0xFFu; /* codes stay 0 */
            } else {
                int s = amax > 0.0f ? mx_scale_exp(amax, rule) : -127;
                if (s < -127) s = -127;
                if (s > 127) s = 127; /* unreachable for float input; kept for clarity */
                sc = (uint8_t)(s + 127);
                for (int64_t k = k0; k < k1; k++) {
                    double q = ldexp((double)xr[k], -s); /* exact: a power-of-two division */
                    put_code(codes + r * rb, k, moects__e2m1_encode((float)q, rounding));
                }
            }
            scales[moects__scale_offset(r, b, nkb, layout)] = sc;
        }
    }
    return 0;
}

/* 2688 / amax (one FP32 division); 1 for amax 0; NaN for a NaN amax. */
static float gs_from_amax(float amax)
{
    if (isnan(amax)) return NAN;
    return amax == 0.0f ? 1.0f : 2688.0f / amax;
}

float moects__nvfp4_global_scale(const float *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) return NAN;
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    }
    return gs_from_amax(amax);
}

/* One row r of K elements -> its codes (zeroed before) and its scales at (r, b) in `layout`. */
static void nvfp4_row(const float *xr, int64_t r, int64_t K, float gs, moects_rounding rounding,
                      moects_scale_layout layout, uint8_t *codes_row, uint8_t *scales)
{
    const int64_t g = 16, nkb = cdiv(K, g);
    const float rcp6 = 1.0f / 6.0f, rcp_gs = 1.0f / gs;
    for (int64_t b = 0; b < nkb; b++) {
        int64_t k0 = b * g, k1 = k0 + g < K ? k0 + g : K;
        float amax = 0.0f;
        for (int64_t k = k0; k < k1; k++) {
            float a = fabsf(xr[k]);
            if (isnan(a)) amax = NAN; /* fmaxf would drop it */
            else if (a > amax) amax = a;
        }
        float sf = gs * (amax * rcp6);
        uint8_t sc = moects__e4m3_encode(sf);
        float dsc = moects__e4m3_decode(sc);
        float oscl = sf != 0.0f && dsc != 0.0f ? 1.0f / (dsc * rcp_gs) : 0.0f;
        for (int64_t k = k0; k < k1; k++) put_code(codes_row, k, moects__e2m1_encode(xr[k] * oscl, rounding));
        scales[moects__scale_offset(r, b, nkb, layout)] = sc;
    }
}

int moects__quant_nvfp4(const float *x, int64_t rows, int64_t K, float gs, moects_rounding rounding,
                       moects_scale_layout layout, uint8_t *codes, uint8_t *scales)
{
    if (bad_common(rows, K, rounding, layout) || !isfinite(gs) || !(gs > 0.0f)) return -1;
    clear_outputs(rows, K, cdiv(K, 16), layout, codes, scales);
    for (int64_t r = 0; r < rows; r++) nvfp4_row(x + r * K, r, K, gs, rounding, layout, codes + r * cdiv(K, 2), scales);
    return 0;
}

int moects__quant_nvfp4_experts(const float *x, int64_t rows, int64_t K, int64_t E, const int32_t *row_expert,
                               moects_rounding rounding, moects_scale_layout layout, uint8_t *codes,
                               uint8_t *scales, float *gs)
{
    if (bad_common(rows, K, rounding, layout) || E < 1 || (rows > 0 && !row_expert)) return -1;
    for (int64_t e = 0; e < E; e++) gs[e] = 0.0f; /* amax first */
    for (int64_t r = 0; r < rows; r++) {
        int32_t e = row_expert[r];
        if (e < -1 || e >= E) return -1;
        for (int64_t k = 0; k < K && e >= 0; k++) {
            float v = fabsf(x[r * K + k]);
            if (isnan(v) || v > gs[e]) gs[e] = v;
            if (isnan(v)) break;
        }
    }
    for (int64_t e = 0; e < E; e++) {
        gs[e] = gs_from_amax(gs[e]);
        if (!isfinite(gs[e]) || !(gs[e] > 0.0f)) return -1;
    }
    clear_outputs(rows, K, cdiv(K, 16), layout, codes, scales);
    for (int64_t r = 0; r < rows; r++)
        if (row_expert[r] >= 0)
            nvfp4_row(x + r * K, r, K, gs[row_expert[r]], rounding, layout, codes + r * cdiv(K, 2), scales);
    return 0;
}

/* Unbiased exponent s of an E4M3 block's UE8M0 scale 2^s for a finite amax > 0 (block `rule`). */
static int e4m3_scale_exp(float amax, moects_e4m3_scale_rule rule)
{
    int s0 = ilogb(amax) - 8; /* OCP: floor(log2 amax) - emax_elem, emax_elem = 8 (448 = 1.75 * 2^8) */
    if (rule == MOECTS_E4M3_SCALE_UE8M0_OCP) return s0;
    /* round up: the smallest s with 448 * 2^s >= amax; amax in [2^(s0+8), 2^(s0+9)), exact */
    return 448.0 * ldexp(1.0, s0) >= (double)amax ? s0 : s0 + 1;
}

int moects__quant_e4m3(const float *x, int64_t rows, int64_t K, int64_t block, moects_e4m3_scale_rule rule,
                      float amax_min, uint8_t *codes, void *scales)
{
    if (rows < 0 || K < 0 || block < 1 || !(amax_min >= 0.0f) || !isfinite(amax_min) ||
        (rule != MOECTS_E4M3_SCALE_UE8M0_OCP && rule != MOECTS_E4M3_SCALE_UE8M0_ROUND_UP &&
         rule != MOECTS_E4M3_SCALE_F32))
        return -1;
    const int64_t nsb = cdiv(K, block);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nsb; b++) {
            const int64_t k0 = b * block, k1 = k0 + block < K ? k0 + block : K;
            const float *xr = x + r * K;
            float amax = 0.0f, fs = 0.0f, mul = 0.0f;
            int finite = 1, s = -127;
            for (int64_t k = k0; k < k1; k++) {
                if (!isfinite(xr[k])) finite = 0;
                else if (fabsf(xr[k]) > amax) amax = fabsf(xr[k]);
            }
            amax = amax > amax_min ? amax : amax_min;
            if (!finite) {
                fs = NAN;
            } else if (rule == MOECTS_E4M3_SCALE_F32) {
                fs = amax / 448.0f;                     /* FP32 division */
                mul = fs != 0.0f ? 1.0f / fs : 0.0f;    /* FP32 reciprocal (DeepGEMM: x * (1 / sf)) */
            } else if (amax > 0.0f) {
                s = e4m3_scale_exp(amax, rule);
                s = s < -127 ? -127 : s > 127 ? 127 : s;
            }
            for (int64_t k = k0; k < k1; k++) {
                float v = !finite ? 0.0f
                          : rule == MOECTS_E4M3_SCALE_F32 ? xr[k] * mul
                                                          : (float)ldexp((double)xr[k], -s); /* exact */
                codes[r * K + k] = moects__e4m3_encode(v);
            }
            if (rule == MOECTS_E4M3_SCALE_F32) ((float *)scales)[r * nsb + b] = fs;
            else ((uint8_t *)scales)[r * nsb + b] = finite ? (uint8_t)(s + 127) : 0xFFu;
        }
    return 0;
}

void moects__fp4_dequant_row(const uint8_t *codes, const uint8_t *scales, int64_t r, int64_t K,
                            moects_fp4_format fmt, moects_scale_layout layout, float *out)
{
    const int64_t g = moects_fp4_block(fmt), nkb = cdiv(K, g);
    const uint8_t *row = codes + r * cdiv(K, 2);
    float lut[16];
    for (int c = 0; c < 16; c++) lut[c] = moects__e2m1_decode((uint8_t)c);
    for (int64_t b = 0; b < nkb; b++) {
        uint8_t sc = scales[moects__scale_offset(r, b, nkb, layout)];
        float s = fmt == MOECTS_FP4_NVFP4 ? moects__e4m3_decode(sc) : moects__ue8m0_decode(sc);
        int64_t k1 = (b + 1) * g < K ? (b + 1) * g : K;
        for (int64_t k = b * g; k < k1; k++) out[k] = lut[(row[k / 2] >> (4 * (k & 1))) & 0xF] * s;
    }
}
