/* test_ref_fused_formats.c: the fused MoE layer's NVFP4 intermediate, its block-scale orders and the
 * recipe keys of the newer formats (ref/moects_layer.h: mid=nvfp4, bscale=, situ=), on values worked
 * out by hand in this file's comments (FP32 roundings step by step; E2M1 and E4M3 grids from the OCP
 * spec tables). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "moects_fused_internal.h"
#include "moects_layer.h"

/* gs = 1, a group with amax 6: sf = 1 * (6 * fl(1/6)) = fl(1.0000000298) = 1 (half an ulp of 1 is
 * 5.96e-8), b = e4m3(1) = 1, o = 1 / (1 * 1) = 1: q = e2m1(v) RNE on 0, .5, 1, 1.5, 2, 3, 4, 6:
 * 6 -> 6, -2.5 -> -2 (tie, 2 even), 0.25 -> 0 (tie), 1.75 -> 2 (tie), 5 -> 4 (tie), 0.75 -> 1 (tie),
 * bf16(-0.3) = -0.30078125 -> -0.5, 3.5 -> 4 (tie); the rest 0. */
Test(fused_formats, nvfp4_mid_unit_global)
{
    float a[16] = {6.0f, -2.5f, 0.25f, 1.75f, 5.0f, 0.75f, -0.3f, 3.5f};
    const double want[16] = {6, -2, 0, 2, 4, 1, -0.5, 4};
    double m[16];
    moects__fused_nvfp4_groups(a, 16, 1.0f, m);
    for (int i = 0; i < 16; i++) cr_assert_eq(m[i], want[i], "m[%d] = %g, want %g", i, m[i], want[i]);
}

/* gs = 168 (448 * 6 / 16), amax 12: 12 * fl(1/6) = 2.0000000596 -> 2 (half an ulp of 2: 1.19e-7);
 * sf = 336, a tie of E4M3's 320 (1.010b 2^8, even) and 352: b = 320; o ~ 168 / 320 = 0.525:
 * 12 o ~ 6.3 -> 6 (saturating), 4 o ~ 2.1 -> 2, -1 o ~ -0.525 -> -0.5; m = q * 320. A NaN in the
 * second group makes all of it NaN and leaves the first alone. */
Test(fused_formats, nvfp4_mid_scale_tie_and_saturation)
{
    float a[32] = {12.0f, 4.0f, -1.0f};
    a[20] = NAN;
    double m[32];
    moects__fused_nvfp4_groups(a, 32, 168.0f, m);
    cr_assert_eq(m[0], 1920.0);
    cr_assert_eq(m[1], 640.0);
    cr_assert_eq(m[2], -160.0);
    cr_assert_eq(m[3], 0.0);
    for (int i = 16; i < 32; i++) cr_assert(isnan(m[i]), "m[%d] = %g, want NaN", i, m[i]);
    float o;
    cr_assert_eq(moects__fused_nvfp4_scale(12.0f, 168.0f, &o), 320.0f);
    cr_assert_eq(moects__fused_nvfp4_scale(0.0f, 168.0f, &o), 0.0f);
    cr_assert_eq(o, 0.0f, "a zero block scale gives the factor 0");
}

/* Two blocks, p = 3 then -3, sa = {1 + 2^-23, 1}, sb = {1 + 2^-23, 1 + 2^-23} (u = 2^-23):
 *   ab_fma:  s0 = fl(1 + 2^-22 + 2^-46) = 1 + 2^-22, acc = 3 + 3 2^-22 (exact); block 1:
 *            fma(-3, 1 + u, acc) = 3 + 6u - 3 - 3u = 3u.
 *   a_b_fma: fl(3 (1 + u)) = 3 + 1.5 ulp(3) -> the even 3 + 2^-21; fma(3 + 2^-21, 1 + u, 0) =
 *            fl(3 + 7u + 2^-44) = 3 + 8u; block 1: fma(-3, 1 + u, 3 + 8u) = 5u.
 *   a_b_add: the same 3 + 8u; block 1: fl(-3 (1 + u)) = -(3 + 4u) (the tie again), acc = 4u. */
Test(fused_formats, block_scale_orders)
{
    const double d[2] = {3.0, -3.0};
    const float u = 0x1p-23f, sa[2] = {1.0f + u, 1.0f}, sb[2] = {1.0f + u, 1.0f + u};
    const uint8_t none[2] = {0, 0}, nan1[2] = {0, 1};
    cr_assert_eq(moects__fused_block_chain(d, 2, sa, none, none, sb, MOECTS_BSCALE_AB_FMA), 3.0f * u);
    cr_assert_eq(moects__fused_block_chain(d, 2, sa, none, none, sb, MOECTS_BSCALE_A_B_FMA), 5.0f * u);
    cr_assert_eq(moects__fused_block_chain(d, 2, sa, none, none, sb, MOECTS_BSCALE_A_B_ADD), 4.0f * u);
    cr_assert(isnan(moects__fused_block_chain(d, 2, sa, none, nan1, sb, MOECTS_BSCALE_A_B_ADD)));
}

/* W4A8's inputs: groups of 128 (mid=fp8_128) give each 32-block its group's scale; groups of 32 their
 * own. x = 448 in column 0 and 0.5 in column 128: div scales 448 / 448 = 1 and 0.5 / 448. */
Test(fused_formats, w4a8_block_scales_per_group)
{
    float x[256] = {448.0f};
    x[128] = 0.5f;
    double q[256];
    float sa[8];
    moects__fused_block_quant(x, 256, 128, 32, 0, q, sa);
    for (int b = 0; b < 4; b++) cr_assert_eq(sa[b], 1.0f, "block %d", b);
    for (int b = 4; b < 8; b++) cr_assert_eq(sa[b], 0.5f / 448.0f, "block %d", b);
    cr_assert_eq(q[0], 448.0);
    cr_assert_eq(q[128], 448.0);
    moects__fused_block_quant(x, 256, 32, 32, 1, q, sa); /* ue8m0: 1 for 448, 2^-9 >= 0.5 / 448 */
    cr_assert_eq(sa[0], 1.0f);
    cr_assert_eq(sa[1], 0x1p-127f, "an all-zero group: 2^-127");
    cr_assert_eq(sa[4], 0x1p-9f);
    cr_assert_eq(q[128], 256.0);
}

Test(fused_formats, recipe_keys)
{
    moects_layer_recipe r;
    char err[200], buf[400];
    cr_assert_eq(moects__layer_recipe_parse("fused_moe.layer_v1(mid=nvfp4,situ=div,bscale=a_b_add)", &r, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(r.mid, MOECTS_MID_NVFP4);
    cr_assert_eq(r.situ_div, 1);
    cr_assert_eq(r.bscale, MOECTS_BSCALE_A_B_ADD);
    moects__layer_recipe_format(&r, buf, sizeof buf);
    cr_assert(strstr(buf, "mid=nvfp4") && strstr(buf, "situ=div") && strstr(buf, "bscale=a_b_add"), "%s", buf);
    cr_assert_eq(moects__layer_recipe_parse("fused_moe.layer_v1(bscale=ba)", &r, err, sizeof err), -1);
    cr_assert(strstr(err, "ab_fma|a_b_fma|a_b_add"), "%s", err);
    moects_fused_moe_shape s = {1, 1, 256, 48, 2, 2, 0, MOECTS_LAYER_W4A8, MOECTS_ACT_SILU, 0, 0, 0, MOECTS_BF16};
    moects__layer_recipe_parse("fused_moe.layer_v1", &r, err, sizeof err);
    cr_assert(moects__layer_recipe_inexact(&r, &s) != NULL, "W4A8 with mid=bf16 is refused");
    moects__layer_recipe_parse("fused_moe.layer_v1(mid=nvfp4)", &r, err, sizeof err);
    s.format = MOECTS_LAYER_BF16, s.inter = 40;
    cr_assert(moects__layer_recipe_inexact(&r, &s) != NULL, "nvfp4 over I = 40 is refused");
}
