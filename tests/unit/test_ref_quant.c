/* test_ref_quant.c: MXFP4 / NVFP4 quantizers and the 128x4 scale swizzle (ref/quant.c). Small
 * examples worked by hand from OCP MX v1.0 sec. 6.3, the round-up rule and the TensorRT-LLM NVFP4
 * recipe; round trips (swizzle, dequantize-requantize). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_quant.h"
#include "moects_ref.h"

static uint8_t code_at(const uint8_t *row, int k) { return (uint8_t)((row[k / 2] >> (4 * (k & 1))) & 0xF); }

/* One 32-element MXFP4 block: x[0..n) given, rest 0. */
static void mx1(const float *v, int n, moects_mx_scale_rule rule, moects_rounding rd, uint8_t codes[16],
                uint8_t *scale)
{
    float x[32] = {0};
    memcpy(x, v, sizeof(float) * (size_t)n);
    cr_assert_eq(moects__quant_mxfp4(x, 1, 32, rule, rd, MOECTS_SCALES_LINEAR, codes, scale), 0);
}

Test(quant_mxfp4, ocp_hand_examples)
{
    uint8_t c[16], s;
    /* amax 6: floor(log2 6) = 2, X = 2^(2-2) = 1, scale code 127; 0.75 -> 1.0 (RNE), 0.25 -> 0 */
    const float a[] = {6.0f, 3.0f, -1.5f, 0.75f, 0.25f, -5.0f};
    mx1(a, 6, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 127);
    const uint8_t want_rne[6] = {0x7, 0x5, 0xB, 0x2, 0x0, 0xE}; /* -5 -> -4 (tie, even) */
    for (int k = 0; k < 6; k++) cr_assert_eq(code_at(c, k), want_rne[k], "k=%d", k);
    for (int k = 6; k < 32; k++) cr_assert_eq(code_at(c, k), 0);
    mx1(a, 6, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_TIES_TO_ZERO, c, &s);
    const uint8_t want_ttz[6] = {0x7, 0x5, 0xB, 0x1, 0x0, 0xE}; /* 0.75 -> 0.5 */
    for (int k = 0; k < 6; k++) cr_assert_eq(code_at(c, k), want_ttz[k], "k=%d", k);

    /* amax 7: OCP X = 1 and 7 clamps to 6 (the spec's saturation) */
    const float b[] = {7.0f};
    mx1(b, 1, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 127);
    cr_assert_eq(code_at(c, 0), 0x7);
    /* amax 0.75: floor(log2) = -1, X = 2^-3, 0.75 / X = 6: code 7, scale code 124 */
    const float d[] = {0.75f, -0.125f};
    mx1(d, 2, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 124);
    cr_assert_eq(code_at(c, 0), 0x7);
    cr_assert_eq(code_at(c, 1), 0xA); /* -1 */
}

Test(quant_mxfp4, round_up_hand_examples)
{
    uint8_t c[16], s;
    /* amax 7: ceil(log2(7/6)) = 1, X = 2: 7/2 = 3.5 -> 4 (RNE) or 3 (TTZ) */
    const float b[] = {7.0f, 1.0f};
    mx1(b, 2, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 128);
    cr_assert_eq(code_at(c, 0), 0x6);
    cr_assert_eq(code_at(c, 1), 0x1); /* 0.5 */
    mx1(b, 2, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_TIES_TO_ZERO, c, &s);
    cr_assert_eq(code_at(c, 0), 0x5);
    /* amax exactly 12 = 6 * 2: both rules give X = 2 */
    const float e[] = {12.0f};
    mx1(e, 1, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 128);
    cr_assert_eq(code_at(c, 0), 0x7);
    mx1(e, 1, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 128);
    /* just above 12: round-up moves to X = 4 (12.000001 / 4 -> 3), OCP stays at X = 2 (-> 6) */
    const float f[] = {nextafterf(12.0f, 13.0f)};
    mx1(f, 1, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 129);
    cr_assert_eq(code_at(c, 0), 0x5);
    mx1(f, 1, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 128);
    cr_assert_eq(code_at(c, 0), 0x7);
    /* amax 1: ceil(log2(1/6)) = -2: X = 1/4, 1 / X = 4 */
    const float g1[] = {1.0f};
    mx1(g1, 1, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 125);
    cr_assert_eq(code_at(c, 0), 0x6);
}

Test(quant_mxfp4, zero_tiny_nan_inf_blocks)
{
    uint8_t c[16], s;
    const float z[] = {0.0f, -0.0f};
    mx1(z, 2, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 0); /* all-zero block: 2^-127 */
    cr_assert_eq(code_at(c, 0), 0x0);
    cr_assert_eq(code_at(c, 1), 0x8); /* -0 keeps its sign */
    /* amax 2^-140: floor(log2) - 2 = -142, clamped to -127 (code 0); 2^-140 / 2^-127 = 2^-13 -> 0 */
    const float t[] = {0x1p-140f, 0x1p-125f};
    mx1(t, 1, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 0);
    cr_assert_eq(code_at(c, 0), 0x0);
    /* 2^-125: OCP exponent -127 exactly (code 0), element 4 */
    mx1(t + 1, 1, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 0);
    cr_assert_eq(code_at(c, 0), 0x6);
    /* largest float: floor(log2) = 127, exponent 125, code 252; element 0x1.fffffep127 / 2^125 -> 6 */
    const float big[] = {0x1.fffffep127f};
    mx1(big, 1, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 252);
    cr_assert_eq(code_at(c, 0), 0x7);
    mx1(big, 1, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 127 + 126); /* 6 * 2^125 < 2^128 - 2^104 <= 6 * 2^126 */
    const float n[] = {1.0f, NAN, 2.0f};
    mx1(n, 3, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 0xFF);
    for (int k = 0; k < 32; k++) cr_assert_eq(code_at(c, k), 0);
    const float i[] = {-INFINITY};
    mx1(i, 1, MOECTS_MX_SCALE_ROUND_UP, MOECTS_ROUND_RNE, c, &s);
    cr_assert_eq(s, 0xFF);
}

Test(quant_mxfp4, k_tail_and_odd_k)
{
    /* K = 33: blocks [0,32) and [32,33); 17 bytes per row, the last high nibble 0. */
    float x[2 * 33];
    for (int k = 0; k < 33; k++) {
        x[k] = 0.5f;        /* amax 0.5: X = 2^-3, elements 4 */
        x[33 + k] = 1.0f;   /* X = 2^-2, elements 4 */
    }
    x[32] = 24.0f;          /* tail block of row 0 alone: X = 2^2, element 6 */
    x[33 + 32] = -0.0625f;  /* tail of row 1: X = 2^-6, element -4 */
    uint8_t codes[2 * 17], sc[2 * 2];
    memset(codes, 0xEE, sizeof codes);
    cr_assert_eq(moects__quant_mxfp4(x, 2, 33, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE,
                                    MOECTS_SCALES_LINEAR, codes, sc), 0);
    const uint8_t want_sc[4] = {124, 129, 125, 121};
    cr_assert_arr_eq(sc, want_sc, 4);
    cr_assert_eq(codes[0], 0x66);
    cr_assert_eq(codes[16], 0x07);      /* element 32 = 6, high nibble 0 */
    cr_assert_eq(codes[17 + 16], 0x0E); /* element 32 of row 1 = -4 */
}

Test(quant, bad_arguments)
{
    float x[4] = {0};
    uint8_t c[4], s[4];
    cr_assert_eq(moects__quant_mxfp4(x, -1, 4, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c, s), -1);
    cr_assert_eq(moects__quant_mxfp4(x, 1, 4, (moects_mx_scale_rule)7, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c, s), -1);
    cr_assert_eq(moects__quant_nvfp4(x, 1, 4, INFINITY, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c, s), -1);
    cr_assert_eq(moects__quant_nvfp4(x, 1, 4, 0.0f, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c, s), -1);
    cr_assert_eq(moects__quant_nvfp4(x, 1, 4, 1.0f, (moects_rounding)3, MOECTS_SCALES_LINEAR, c, s), -1);
    cr_assert_eq(moects__quant_nvfp4(x, 1, 4, 1.0f, MOECTS_ROUND_RNE, (moects_scale_layout)5, c, s), -1);
}

Test(quant_nvfp4, global_scale)
{
    const float a[] = {1.0f, -2688.0f, 3.0f};
    cr_assert_eq(moects__nvfp4_global_scale(a, 3), 1.0f);
    const float b[] = {0.0f, -0.0f};
    cr_assert_eq(moects__nvfp4_global_scale(b, 2), 1.0f);
    const float c[] = {-5.25f};
    cr_assert_eq(moects__nvfp4_global_scale(c, 1), 2688.0f / 5.25f); /* = 512 exactly */
    cr_assert_eq(moects__nvfp4_global_scale(c, 1), 512.0f);
    const float d[] = {1.0f, NAN};
    cr_assert(isnan(moects__nvfp4_global_scale(d, 2)));
}

Test(quant_nvfp4, hand_examples)
{
    /* gs = 1. Block 0: amax 3 -> sf = 3 * fl(1/6) = 0.5000000149 -> FP32 0.5 (the error is under
     * half an ulp) -> E4M3 0.5 = 0x30 (e = 6, m = 0); oscl = 1 / (0.5 * 1) = 2: 3 -> 6, 1.5 -> 3,
     * -0.75 -> -1.5, 0.5 -> 1, 0.25 -> 0.5.
     * Block 1: amax 5 -> sf = 0.8333334 -> E4M3: 1.6667 * 2^-1 between 1.625 and 1.75 -> 1.625 * 2^-1
     * = 0.8125 = 0x35; oscl = 1/0.8125 = 1.2307693: 5 -> 6.15 -> 6; 2 -> 2.46 -> 2; 2.05 -> 2.52 -> 3;
     * -1.25 -> -1.538 -> -1.5. */
    float x[32] = {3.0f, 1.5f, -0.75f, 0.5f, 0.25f};
    x[16] = 5.0f;
    x[17] = 2.0f;
    x[18] = 2.05f;
    x[19] = -1.25f;
    uint8_t codes[16], sc[2];
    cr_assert_eq(moects__quant_nvfp4(x, 1, 32, 1.0f, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes, sc), 0);
    cr_assert_eq(sc[0], 0x30);
    cr_assert_eq(sc[1], 0x35);
    const uint8_t want0[5] = {0x7, 0x5, 0xB, 0x2, 0x1};
    for (int k = 0; k < 5; k++) cr_assert_eq(code_at(codes, k), want0[k], "k=%d", k);
    const uint8_t want1[4] = {0x7, 0x4, 0x5, 0xB};
    for (int k = 0; k < 4; k++) cr_assert_eq(code_at(codes, 16 + k), want1[k], "k=%d", 16 + k);
    /* gs = 2: block 0 sf = 1.0 -> 0x38, oscl = 1 / (1 * 0.5) = 2: same elements */
    cr_assert_eq(moects__quant_nvfp4(x, 1, 32, 2.0f, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes, sc), 0);
    cr_assert_eq(sc[0], 0x38);
    for (int k = 0; k < 5; k++) cr_assert_eq(code_at(codes, k), want0[k]);
}

Test(quant_nvfp4, zero_tiny_and_nan_blocks)
{
    float x[48] = {0};
    x[16] = 1e-6f;  /* block 1: sf = 1.7e-7 < 2^-10: scale code 0 -> the block is zeroed */
    x[32] = NAN;    /* block 2: NaN scale */
    x[33] = 1.0f;
    uint8_t codes[24], sc[3];
    cr_assert_eq(moects__quant_nvfp4(x, 1, 48, 1.0f, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes, sc), 0);
    cr_assert_eq(sc[0], 0x00);
    cr_assert_eq(sc[1], 0x00);
    cr_assert_eq(code_at(codes, 16), 0x0);
    cr_assert_eq(sc[2], 0x7F);
    for (int k = 0; k < 16; k++) cr_assert_eq(code_at(codes, k), 0);
}

Test(scales, swizzle_offsets_by_hand)
{
    /* rows 130 -> 256 padded, nkb 5 -> 8 padded: ceil(5/4) = 2 K-tiles of 512 bytes per 128 rows */
    cr_assert_eq(moects__scale_bytes(130, 5, MOECTS_SCALES_SWIZZLED_128X4), 2048);
    cr_assert_eq(moects__scale_bytes(130, 5, MOECTS_SCALES_LINEAR), 650);
    const moects_scale_layout S = MOECTS_SCALES_SWIZZLED_128X4;
    cr_assert_eq(moects__scale_offset(0, 0, 5, S), 0);
    cr_assert_eq(moects__scale_offset(0, 1, 5, S), 1);
    cr_assert_eq(moects__scale_offset(0, 4, 5, S), 512);
    cr_assert_eq(moects__scale_offset(1, 0, 5, S), 16);
    cr_assert_eq(moects__scale_offset(32, 0, 5, S), 4);
    cr_assert_eq(moects__scale_offset(127, 3, 5, S), 31 * 16 + 3 * 4 + 3); /* 511 */
    cr_assert_eq(moects__scale_offset(128, 0, 5, S), 1024);
    cr_assert_eq(moects__scale_offset(129, 4, 5, S), 1024 + 512 + 16);
    cr_assert_eq(moects__scale_offset(3, 2, 5, MOECTS_SCALES_LINEAR), 17);
}

Test(scales, swizzle_round_trip_and_padding)
{
    const int64_t dims[][2] = {{1, 1}, {130, 5}, {128, 4}, {257, 9}, {7, 224}};
    for (size_t t = 0; t < sizeof dims / sizeof dims[0]; t++) {
        int64_t rows = dims[t][0], nkb = dims[t][1];
        int64_t nb = moects__scale_bytes(rows, nkb, MOECTS_SCALES_SWIZZLED_128X4);
        uint8_t *lin = malloc((size_t)(rows * nkb)), *sw = malloc((size_t)nb), *back = malloc((size_t)(rows * nkb));
        for (int64_t i = 0; i < rows * nkb; i++) lin[i] = (uint8_t)(1 + (i * 37) % 255); /* never 0 */
        memset(sw, 0xAA, (size_t)nb);
        cr_assert_eq(moects__scales_swizzle(lin, rows, nkb, sw), 0);
        int64_t nonzero = 0;
        for (int64_t i = 0; i < nb; i++) nonzero += sw[i] != 0;
        cr_assert_eq(nonzero, rows * nkb, "padding must be zeros (every offset distinct)");
        cr_assert_eq(moects__scales_unswizzle(sw, rows, nkb, back), 0);
        cr_assert_arr_eq(back, lin, (size_t)(rows * nkb));
        free(lin);
        free(sw);
        free(back);
    }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* Quantizing into the swizzled layout gives the same scales as linear + swizzle; the dequantized
 * values are each one of the two grid neighbours of x (X * E2M1 grid); OCP quantization is
 * idempotent (X stays: a rounded amax keeps floor(log2) since q in [4, 8) rounds to 4 or 6). */
Test(quant_mxfp4, round_trips)
{
    const int64_t R = 5, K = 100, nkb = 4, rb = 50;
    float x[5 * 100], dq[100];
    for (int i = 0; i < R * K; i++) x[i] = (float)((urand() - 0.5) * ldexp(1.0, (int)(urand() * 40) - 20));
    uint8_t c1[5 * 50], s1[5 * 4], c2[5 * 50], sw[128 * 4], s2[5 * 4];
    cr_assert_eq(moects__quant_mxfp4(x, R, K, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c1, s1), 0);
    cr_assert_eq(moects__quant_mxfp4(x, R, K, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, MOECTS_SCALES_SWIZZLED_128X4, c2, sw), 0);
    cr_assert_arr_eq(c1, c2, sizeof c1);
    cr_assert_eq(moects__scales_unswizzle(sw, R, nkb, s2), 0);
    cr_assert_arr_eq(s1, s2, sizeof s1);
    float xq[5 * 100];
    for (int64_t r = 0; r < R; r++) {
        moects__fp4_dequant_row(c1, s1, r, K, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, dq);
        for (int64_t k = 0; k < K; k++) {
            double X = ldexp(1.0, s1[r * nkb + k / 32] - 127), q = x[r * K + k] / X, d = dq[k] / X;
            static const double grid[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
            double aq = fabs(q), lo = 0, hi = 6;
            for (int i = 0; i < 8; i++) {
                if (grid[i] <= aq) lo = grid[i];
                if (grid[7 - i] >= aq) hi = grid[7 - i];
            }
            cr_assert(fabs(d) == lo || fabs(d) == hi, "x %a: got %a, grid %g..%g", x[r * K + k], dq[k], lo, hi);
            xq[r * K + k] = dq[k];
        }
    }
    uint8_t c3[5 * 50], s3[5 * 4];
    cr_assert_eq(moects__quant_mxfp4(xq, R, K, MOECTS_MX_SCALE_OCP, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c3, s3), 0);
    cr_assert_arr_eq(s3, s1, sizeof s1);
    for (int64_t r = 0; r < R; r++)
        for (int64_t k = 0; k < K; k++) {
            uint8_t a = code_at(c1 + r * rb, (int)k), b = code_at(c3 + r * rb, (int)k);
            /* -0 requantizes as -0; +-0 are the same value */
            cr_assert(a == b || ((a & 7) == 0 && (b & 7) == 0), "r %ld k %ld: %x vs %x", (long)r, (long)k, a, b);
        }
}

Test(quant_nvfp4, round_trip_swizzled)
{
    const int64_t R = 3, K = 40;
    float x[3 * 40];
    for (int i = 0; i < R * K; i++) x[i] = (float)((urand() - 0.5) * 100.0);
    float gs = moects__nvfp4_global_scale(x, (size_t)(R * K));
    uint8_t c1[3 * 20], s1[3 * 3], c2[3 * 20], sw[128 * 4], s2[3 * 3];
    cr_assert_eq(moects__quant_nvfp4(x, R, K, gs, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, c1, s1), 0);
    cr_assert_eq(moects__quant_nvfp4(x, R, K, gs, MOECTS_ROUND_RNE, MOECTS_SCALES_SWIZZLED_128X4, c2, sw), 0);
    cr_assert_arr_eq(c1, c2, sizeof c1);
    cr_assert_eq(moects__scales_unswizzle(sw, R, 3, s2), 0);
    cr_assert_arr_eq(s1, s2, sizeof s1);
    /* dq / gs approximates x: the block unit u = dec(scale) / gs is amax/6 within the E4M3
     * rounding (2^-4 relative), and an element is off by at most half the largest E2M1 step (1)
     * times u, or by the saturation at 6u: |x - dq/gs| <= 0.1 amax; 0.26 leaves room. */
    float dq[40];
    for (int64_t r = 0; r < R; r++) {
        moects__fp4_dequant_row(c1, s1, r, K, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR, dq);
        for (int64_t k = 0; k < K; k++) {
            float amax = 0;
            for (int64_t j = k / 16 * 16; j < (k / 16 + 1) * 16 && j < K; j++)
                amax = fmaxf(amax, fabsf(x[r * K + j]));
            cr_assert(fabs(x[r * K + k] - dq[k] / gs) <= 0.26 * amax, "r %ld k %ld", (long)r, (long)k);
        }
    }
}
