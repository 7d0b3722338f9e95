/* test_ref_e2m1.c: the E2M1 codec (ref/e2m1.c) against the format definition (OCP MX v1.0
 * sec. 5.3.3; DESIGN.md "Number formats"): every code's value from a hand table, every rounding
 * boundary (each midpoint and its float neighbours, both rules, both signs), saturation, NaN, -0,
 * nibble order; and a brute-force nearest-value oracle on many floats. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "moects_ref.h"

/* Hand table: code -> value. Exponent field 0: 0 and 0.5 (subnormal, 0.5 * m); then 1, 1.5 (e=1),
 * 2, 3 (e=2), 4, 6 (e=3). Bit 3 is the sign. */
static const float table[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

Test(e2m1, decode_every_code)
{
    for (int c = 0; c < 16; c++) {
        float v = moects__e2m1_decode((uint8_t)c);
        cr_assert_eq(bits(v), bits(table[c]), "code %d: got %a want %a", c, v, table[c]);
    }
    cr_assert(signbit(moects__e2m1_decode(0x8)), "0x8 is -0");
}

Test(e2m1, encode_every_value_round_trips)
{
    for (int c = 0; c < 16; c++) {
        cr_assert_eq(moects__e2m1_encode(table[c], MOECTS_ROUND_RNE), c);
        cr_assert_eq(moects__e2m1_encode(table[c], MOECTS_ROUND_TIES_TO_ZERO), c);
    }
}

/* Each midpoint between adjacent magnitudes, the code RNE picks (the even mantissa bit) and the
 * one ties-toward-zero picks (the smaller magnitude), worked out from the table. */
static const struct {
    float mid;
    int lo, hi, rne, ttz;
} mids[] = {
    {0.25f, 0, 1, 0, 0}, /* 0 (m=0) vs 0.5 (m=1) */
    {0.75f, 1, 2, 2, 1}, /* 0.5 (m=1) vs 1.0 (m=0) */
    {1.25f, 2, 3, 2, 2}, /* 1.0 vs 1.5 */
    {1.75f, 3, 4, 4, 3}, /* 1.5 vs 2.0 */
    {2.5f, 4, 5, 4, 4},  /* 2 vs 3 */
    {3.5f, 5, 6, 6, 5},  /* 3 vs 4 */
    {5.0f, 6, 7, 6, 6},  /* 4 vs 6 */
};

Test(e2m1, every_midpoint_and_neighbours)
{
    for (size_t i = 0; i < sizeof mids / sizeof mids[0]; i++) {
        float m = mids[i].mid, below = nextafterf(m, 0.0f), above = nextafterf(m, 100.0f);
        for (int neg = 0; neg < 2; neg++) {
            float sg = neg ? -1.0f : 1.0f;
            int s = neg ? 8 : 0;
            cr_assert_eq(moects__e2m1_encode(sg * m, MOECTS_ROUND_RNE), s | mids[i].rne, "RNE %a", sg * m);
            cr_assert_eq(moects__e2m1_encode(sg * m, MOECTS_ROUND_TIES_TO_ZERO), s | mids[i].ttz,
                         "TTZ %a", sg * m);
            for (int r = 0; r < 2; r++) {
                cr_assert_eq(moects__e2m1_encode(sg * below, (moects_rounding)r), s | mids[i].lo,
                             "below %a", sg * below);
                cr_assert_eq(moects__e2m1_encode(sg * above, (moects_rounding)r), s | mids[i].hi,
                             "above %a", sg * above);
            }
        }
    }
}

Test(e2m1, saturation_nan_zero)
{
    const float big[] = {6.0f, nextafterf(6.0f, 7.0f), 7.0f, 8.0f, 1e30f, 0x1.fffffep127f, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        for (int r = 0; r < 2; r++) {
            cr_assert_eq(moects__e2m1_encode(big[i], (moects_rounding)r), 0x7, "%a", big[i]);
            cr_assert_eq(moects__e2m1_encode(-big[i], (moects_rounding)r), 0xF, "%a", -big[i]);
        }
    /* NaN has no E2M1 code: +6 as cuda_fp4.hpp (any sign, any payload). */
    cr_assert_eq(moects__e2m1_encode(NAN, MOECTS_ROUND_RNE), 0x7);
    cr_assert_eq(moects__e2m1_encode(-NAN, MOECTS_ROUND_RNE), 0x7);
    cr_assert_eq(moects__e2m1_encode(NAN, MOECTS_ROUND_TIES_TO_ZERO), 0x7);
    /* zeros and underflow keep the sign */
    cr_assert_eq(moects__e2m1_encode(0.0f, MOECTS_ROUND_RNE), 0x0);
    cr_assert_eq(moects__e2m1_encode(-0.0f, MOECTS_ROUND_RNE), 0x8);
    cr_assert_eq(moects__e2m1_encode(-0.1f, MOECTS_ROUND_RNE), 0x8);
    cr_assert_eq(moects__e2m1_encode(0x1p-149f, MOECTS_ROUND_RNE), 0x0);
    cr_assert_eq(moects__e2m1_encode(-0x1p-149f, MOECTS_ROUND_TIES_TO_ZERO), 0x8);
}

/* Independent oracle: the nearest table value by distance in double; ties by the rule. */
static int oracle(float v, moects_rounding r)
{
    if (isnan(v)) return 7;
    int s = signbit(v) ? 8 : 0;
    double a = fabs((double)v);
    if (a >= 6.0) return s | 7;
    int best = 0;
    for (int c = 1; c < 8; c++) {
        double dc = fabs(a - table[c]), db = fabs(a - table[best]);
        if (dc < db) best = c;
        else if (dc == db) { /* tie between best (smaller) and c */
            if (r == MOECTS_ROUND_RNE) best = (c % 2 == 0) ? c : best;
        }
    }
    return s | best;
}

Test(e2m1, brute_force_oracle)
{
    /* every float in [0, 8) whose low 8 mantissa bits are 0 or 0xFF or 0x01 (~700k values),
     * both signs; covers each midpoint's neighbourhood at every binade. */
    for (uint32_t hi = 0; hi < (bits(8.0f) >> 8); hi++)
        for (int low = 0; low < 3; low++) {
            uint32_t u = (hi << 8) | (low == 0 ? 0u : low == 1 ? 1u : 0xFFu);
            float v;
            memcpy(&v, &u, sizeof v);
            for (int r = 0; r < 2; r++) {
                cr_assert_eq(moects__e2m1_encode(v, (moects_rounding)r), oracle(v, (moects_rounding)r),
                             "%a rule %d", v, r);
                cr_assert_eq(moects__e2m1_encode(-v, (moects_rounding)r), oracle(-v, (moects_rounding)r),
                             "%a rule %d", -v, r);
            }
        }
}

Test(e2m1, pack_unpack_nibble_order)
{
    const uint8_t codes[5] = {0x1, 0x2, 0xA, 0xF, 0x7};
    uint8_t packed[3] = {0xEE, 0xEE, 0xEE};
    moects__e2m1_pack(codes, 5, packed);
    /* element 2j in the low nibble, 2j+1 high; the odd tail's high nibble 0 */
    cr_assert_eq(packed[0], 0x21);
    cr_assert_eq(packed[1], 0xFA);
    cr_assert_eq(packed[2], 0x07);
    uint8_t back[5];
    moects__e2m1_unpack(packed, 5, back);
    cr_assert_arr_eq(back, codes, 5);
    /* exhaustive over byte values */
    for (int b = 0; b < 256; b++) {
        uint8_t p = (uint8_t)b, two[2];
        moects__e2m1_unpack(&p, 2, two);
        cr_assert_eq(two[0], b & 0xF);
        cr_assert_eq(two[1], b >> 4);
        uint8_t q;
        moects__e2m1_pack(two, 2, &q);
        cr_assert_eq(q, b);
    }
}
