/* test_ref_quant_act.c: the activation quantizers of a grouped-GEMM pipeline (ref/quant.c): E4M3 per
 * 1 x block with the OCP, round-up and FP32 scale rules, and NVFP4 with one global scale per expert.
 * Every expected value is worked by hand from the E4M3 table (OCP OFP8 v1.0: bias 7, 3 mantissa bits,
 * max 448) and the rules' definitions; the arithmetic is written next to each. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "moects_quant.h"
#include "moects_ref.h"

/* One row of K elements (x[0..n) given, rest 0), blocks of `block`, UE8M0 scales. */
static void e4(const float *v, int n, int K, int block, moects_e4m3_scale_rule rule, uint8_t *codes, void *scales)
{
    float x[256] = {0};
    memcpy(x, v, sizeof(float) * (size_t)n);
    cr_assert_eq(moects__quant_e4m3(x, 1, K, block, rule, 0.0f, codes, scales), 0);
}

Test(quant_e4m3, ocp_rule_hand_examples)
{
    uint8_t c[32], s;
    /* amax 448: floor(log2 448) - 8 = 0, X = 1 (code 127); 448 = 1.75 * 2^8 -> 0x7E; 1 -> 0x38;
     * -2 -> 0xC0 */
    e4((const float[]){448.0f, 1.0f, -2.0f}, 3, 32, 32, MOECTS_E4M3_SCALE_UE8M0_OCP, c, &s);
    cr_assert_eq(s, 127);
    cr_assert_eq(c[0], 0x7E);
    cr_assert_eq(c[1], 0x38);
    cr_assert_eq(c[2], 0xC0);
    cr_assert_eq(c[3], 0x00);
    /* amax 500: still X = 1 (floor(log2 500) = 8): 500 saturates to 448 (0x7E); 3 = 1.5 * 2 -> 0x44 */
    e4((const float[]){500.0f, 3.0f}, 2, 32, 32, MOECTS_E4M3_SCALE_UE8M0_OCP, c, &s);
    cr_assert_eq(s, 127);
    cr_assert_eq(c[0], 0x7E);
    cr_assert_eq(c[1], 0x44);
    /* amax 1: X = 2^-8 (code 119): 1 * 256 = 2^8 -> 0x78; 0.001 * 256 = 0.256 = 1.024 * 2^-2 -> 0.25 (0x28) */
    e4((const float[]){1.0f, 0.001f}, 2, 32, 32, MOECTS_E4M3_SCALE_UE8M0_OCP, c, &s);
    cr_assert_eq(s, 119);
    cr_assert_eq(c[0], 0x78);
    cr_assert_eq(c[1], 0x28);
}

Test(quant_e4m3, round_up_rule_hand_examples)
{
    uint8_t c[32], s;
    /* amax 500 > 448: X = 2 (code 128); 250 lies between 240 and 256 (step 16 in [128, 256)): 256 =
     * 2^8 (0x78); 1.5 -> 0x3C */
    e4((const float[]){500.0f, 3.0f}, 2, 32, 32, MOECTS_E4M3_SCALE_UE8M0_ROUND_UP, c, &s);
    cr_assert_eq(s, 128);
    cr_assert_eq(c[0], 0x78);
    cr_assert_eq(c[1], 0x3C);
    /* amax 448 exactly: X = 1 (448 * 2^0 >= 448), no saturation needed */
    e4((const float[]){-448.0f}, 1, 32, 32, MOECTS_E4M3_SCALE_UE8M0_ROUND_UP, c, &s);
    cr_assert_eq(s, 127);
    cr_assert_eq(c[0], 0xFE);
    /* amax 1.8: 448 * 2^-8 = 1.75 < 1.8, so X = 2^-7 (code 120); 1.8 * 128 = 230.4 -> 224 = 1.75 * 2^7
     * (0x76); with amax 1.75 X stays 2^-8 (code 119) */
    e4((const float[]){1.8f}, 1, 32, 32, MOECTS_E4M3_SCALE_UE8M0_ROUND_UP, c, &s);
    cr_assert_eq(s, 120);
    cr_assert_eq(c[0], 0x76);
    e4((const float[]){1.75f}, 1, 32, 32, MOECTS_E4M3_SCALE_UE8M0_ROUND_UP, c, &s);
    cr_assert_eq(s, 119);
    cr_assert_eq(c[0], 0x7E);
}

Test(quant_e4m3, fp32_rule_hand_examples)
{
    uint8_t c[32];
    float s;
    /* amax 896: X = 2 exactly, 1/X = 0.5; 896 -> 448 (0x7E), 7 -> 3.5 = 1.75 * 2 (0x46) */
    e4((const float[]){896.0f, 7.0f}, 2, 32, 32, MOECTS_E4M3_SCALE_F32, c, &s);
    cr_assert_eq(s, 2.0f);
    cr_assert_eq(c[0], 0x7E);
    cr_assert_eq(c[1], 0x46);
    /* amax 1: X = FP32(1/448) = 2^-9 * 8/7; 8/7 = 0x1.249249249...: 23 fraction bits 0x1.249248 with
     * the rest 0x0.0000012.. > half an ulp, so X = 0x1.24924ap-9. 1/X = 448 * (1 - 0.75 * 2^-24)
     * rounds to 448 - 2^-15; 1 * that -> E4M3 448 (0x7E) */
    e4((const float[]){1.0f}, 1, 32, 32, MOECTS_E4M3_SCALE_F32, c, &s);
    cr_assert_eq(s, 0x1.24924ap-9f, "got %a", s);
    cr_assert_eq(c[0], 0x7E);
    /* an all-zero block: scale 0, codes 0; with amax_min 1e-4 (DeepGEMM's clamp): 1e-4f / 448 */
    e4((const float[]){0.0f}, 1, 32, 32, MOECTS_E4M3_SCALE_F32, c, &s);
    cr_assert_eq(s, 0.0f);
    cr_assert_eq(c[0], 0);
    float x[32] = {0};
    cr_assert_eq(moects__quant_e4m3(x, 1, 32, 32, MOECTS_E4M3_SCALE_F32, 1e-4f, c, &s), 0);
    cr_assert_eq(s, 1e-4f / 448.0f);
}

/* K = 160 with 1 x 128 blocks: two scales, the second over elements 128..159 only; with 1 x 32
 * blocks five. A NaN makes its own block's scale NaN (0xFF) and codes 0, nothing else. */
Test(quant_e4m3, blocks_tail_and_nan)
{
    float x[160] = {0};
    x[5] = 448.0f;   /* block 0 (of 128): X = 1 */
    x[130] = 3.5f;   /* block 1: floor(log2 3.5) - 8 = -7: code 120, 3.5 * 128 = 448 (0x7E) */
    x[40] = NAN;     /* a 1x32 block 1 (elements 32..63) */
    uint8_t c[160], s[5];
    cr_assert_eq(moects__quant_e4m3(x, 1, 160, 128, MOECTS_E4M3_SCALE_UE8M0_OCP, 0.0f, c, s), 0);
    cr_assert_eq(s[0], 0xFF, "the NaN is in the first 128-block");
    cr_assert_eq(s[1], 120);
    cr_assert_eq(c[130], 0x7E);
    cr_assert_eq(c[5], 0x00, "codes of a NaN block are 0");
    cr_assert_eq(moects__quant_e4m3(x, 1, 160, 32, MOECTS_E4M3_SCALE_UE8M0_OCP, 0.0f, c, s), 0);
    cr_assert_eq(s[0], 127);
    cr_assert_eq(s[1], 0xFF);
    cr_assert_eq(s[2], 0, "all-zero block: 2^-127");
    cr_assert_eq(s[4], 120);
    cr_assert_eq(c[5], 0x7E);
    cr_assert_eq(moects__quant_e4m3(x, 1, 160, 0, MOECTS_E4M3_SCALE_F32, 0.0f, c, s), -1);
    cr_assert_eq(moects__quant_e4m3(x, 1, 160, 32, MOECTS_E4M3_SCALE_F32, -1.0f, c, s), -1);
}

/* Three rows: expert 0, padding, expert 1. Expert 0's amax 6 gives gs = 2688 / 6 = 448; its block:
 * sf = 448 * (6 * FP32(1/6)) = 448 * 1 (6 * 0x1.555556p-3 = 1 + 2^-25 rounds to 1) -> E4M3 448 (0x7E);
 * oscl = 1 / (448 * FP32(1/448)) = 1 (448 * 0x1.24924ap-9 = 1 + 0.75 * 2^-24 rounds to 1): codes
 * 6 -> 0x7, 3 -> 0x5, -1.5 -> 0xB. Expert 1's amax 2688 gives gs = 1: sf = 2688 * FP32(1/6) =
 * 448.0000134 -> 448 (0x7E); oscl = FP32(1/448); 2688 * oscl = 6 (1 + 0.75 * 2^-24) -> 6 (0x7), 1 *
 * oscl = 0.0022 -> 0. The padding row: codes 0, scale 0. */
Test(quant_nvfp4, per_expert_global_scales)
{
    float x[3][16] = {{6.0f, 3.0f, -1.5f}, {100.0f, 100.0f}, {2688.0f, 1.0f}};
    const int32_t ids[3] = {0, -1, 1};
    uint8_t codes[3 * 8], scales[3];
    float gs[2];
    cr_assert_eq(moects__quant_nvfp4_experts(&x[0][0], 3, 16, 2, ids, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes,
                                            scales, gs),
                 0);
    cr_assert_eq(gs[0], 448.0f);
    cr_assert_eq(gs[1], 1.0f);
    cr_assert_eq(scales[0], 0x7E);
    cr_assert_eq(scales[1], 0x00);
    cr_assert_eq(scales[2], 0x7E);
    cr_assert_eq(codes[0], 0x57); /* 6 (low nibble), 3 (high) */
    cr_assert_eq(codes[1], 0x0B); /* -1.5, 0 */
    for (int i = 8; i < 16; i++) cr_assert_eq(codes[i], 0, "padding row");
    cr_assert_eq(codes[16], 0x07);
    /* an expert without rows gets 1; a NaN in an expert's rows is refused; ids out of range too */
    const int32_t ids2[3] = {0, -1, 0};
    cr_assert_eq(moects__quant_nvfp4_experts(&x[0][0], 3, 16, 2, ids2, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes,
                                            scales, gs),
                 0);
    cr_assert_eq(gs[0], 1.0f);
    cr_assert_eq(gs[1], 1.0f);
    x[2][3] = NAN;
    cr_assert_eq(moects__quant_nvfp4_experts(&x[0][0], 3, 16, 2, ids, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes,
                                            scales, gs),
                 -1);
    const int32_t ids3[3] = {0, -1, 2};
    x[2][3] = 0.0f;
    cr_assert_eq(moects__quant_nvfp4_experts(&x[0][0], 3, 16, 2, ids3, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, codes,
                                            scales, gs),
                 -1);
}
