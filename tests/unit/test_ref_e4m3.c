/* test_ref_e4m3.c: the E4M3 "fn" codec (ref/e4m3.c) against the format definition (OCP OFP8 v1.0;
 * cuda_fp8.h __NV_E4M3): a hand table of all 128 positive codes (row = exponent field, column =
 * mantissa), the negatives by the sign bit; encoding of every value, every midpoint and its float
 * neighbours, saturation, NaN, -0, subnormal boundaries. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "moects_ref.h"

/* code = e << 3 | m: e = 0 -> m * 2^-9 (subnormal); e >= 1 -> (1 + m/8) * 2^(e-7); 0x7F NaN. */
static const float pos[128] = {
    0.0f, 0x1p-9f, 0x2p-9f, 0x3p-9f, 0x4p-9f, 0x5p-9f, 0x6p-9f, 0x7p-9f,
    0x1.0p-6f, 0x1.2p-6f, 0x1.4p-6f, 0x1.6p-6f, 0x1.8p-6f, 0x1.ap-6f, 0x1.cp-6f, 0x1.ep-6f,
    0x1.0p-5f, 0x1.2p-5f, 0x1.4p-5f, 0x1.6p-5f, 0x1.8p-5f, 0x1.ap-5f, 0x1.cp-5f, 0x1.ep-5f,
    0x1.0p-4f, 0x1.2p-4f, 0x1.4p-4f, 0x1.6p-4f, 0x1.8p-4f, 0x1.ap-4f, 0x1.cp-4f, 0x1.ep-4f,
    0x1.0p-3f, 0x1.2p-3f, 0x1.4p-3f, 0x1.6p-3f, 0x1.8p-3f, 0x1.ap-3f, 0x1.cp-3f, 0x1.ep-3f,
    0x1.0p-2f, 0x1.2p-2f, 0x1.4p-2f, 0x1.6p-2f, 0x1.8p-2f, 0x1.ap-2f, 0x1.cp-2f, 0x1.ep-2f,
    0x1.0p-1f, 0x1.2p-1f, 0x1.4p-1f, 0x1.6p-1f, 0x1.8p-1f, 0x1.ap-1f, 0x1.cp-1f, 0x1.ep-1f,
    0x1.0p+0f, 0x1.2p+0f, 0x1.4p+0f, 0x1.6p+0f, 0x1.8p+0f, 0x1.ap+0f, 0x1.cp+0f, 0x1.ep+0f,
    0x1.0p+1f, 0x1.2p+1f, 0x1.4p+1f, 0x1.6p+1f, 0x1.8p+1f, 0x1.ap+1f, 0x1.cp+1f, 0x1.ep+1f,
    0x1.0p+2f, 0x1.2p+2f, 0x1.4p+2f, 0x1.6p+2f, 0x1.8p+2f, 0x1.ap+2f, 0x1.cp+2f, 0x1.ep+2f,
    0x1.0p+3f, 0x1.2p+3f, 0x1.4p+3f, 0x1.6p+3f, 0x1.8p+3f, 0x1.ap+3f, 0x1.cp+3f, 0x1.ep+3f,
    0x1.0p+4f, 0x1.2p+4f, 0x1.4p+4f, 0x1.6p+4f, 0x1.8p+4f, 0x1.ap+4f, 0x1.cp+4f, 0x1.ep+4f,
    0x1.0p+5f, 0x1.2p+5f, 0x1.4p+5f, 0x1.6p+5f, 0x1.8p+5f, 0x1.ap+5f, 0x1.cp+5f, 0x1.ep+5f,
    0x1.0p+6f, 0x1.2p+6f, 0x1.4p+6f, 0x1.6p+6f, 0x1.8p+6f, 0x1.ap+6f, 0x1.cp+6f, 0x1.ep+6f,
    0x1.0p+7f, 0x1.2p+7f, 0x1.4p+7f, 0x1.6p+7f, 0x1.8p+7f, 0x1.ap+7f, 0x1.cp+7f, 0x1.ep+7f,
    0x1.0p+8f, 0x1.2p+8f, 0x1.4p+8f, 0x1.6p+8f, 0x1.8p+8f, 0x1.ap+8f, 0x1.cp+8f, NAN,
};

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

Test(e4m3, decode_every_code)
{
    for (int c = 0; c < 256; c++) {
        float v = moects__e4m3_decode((uint8_t)c), want = (c & 0x80) ? -pos[c & 0x7F] : pos[c & 0x7F];
        if ((c & 0x7F) == 0x7F) {
            cr_assert(isnan(v), "code 0x%02x must be NaN", c);
            continue;
        }
        cr_assert_eq(bits(v), bits(want), "code 0x%02x: got %a want %a", c, v, want);
    }
    cr_assert_eq(moects__e4m3_decode(0x7E), 448.0f);
    cr_assert_eq(moects__e4m3_decode(0x01), 0x1p-9f);
    cr_assert_eq(moects__e4m3_decode(0x08), 0x1p-6f);
    cr_assert(signbit(moects__e4m3_decode(0x80)));
}

Test(e4m3, encode_every_value)
{
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F) continue;
        float v = (c & 0x80) ? -pos[c & 0x7F] : pos[c & 0x7F];
        cr_assert_eq(moects__e4m3_encode(v), c, "%a", v);
    }
}

/* Between adjacent codes c and c+1 (positive, 0..0x7D): the midpoint goes to the even code (the
 * one whose mantissa's last bit is 0; across an exponent step c+1 has m = 0, even), values just
 * below to c and just above to c+1. */
Test(e4m3, every_midpoint_and_neighbours)
{
    for (int c = 0; c < 0x7E; c++) {
        float lo = pos[c], hi = pos[c + 1], mid = 0.5f * (lo + hi); /* exact: 5 significant bits */
        int even = (c % 2 == 0) ? c : c + 1;
        cr_assert_eq(moects__e4m3_encode(mid), even, "mid %a", mid);
        cr_assert_eq(moects__e4m3_encode(-mid), 0x80 | even, "mid %a", -mid);
        cr_assert_eq(moects__e4m3_encode(nextafterf(mid, 0.0f)), c, "below %a", mid);
        cr_assert_eq(moects__e4m3_encode(nextafterf(mid, 1000.0f)), c + 1, "above %a", mid);
        cr_assert_eq(moects__e4m3_encode(-nextafterf(mid, 1000.0f)), 0x80 | (c + 1));
    }
}

Test(e4m3, saturation_nan_zero_subnormal)
{
    const float big[] = {448.0f, nextafterf(448.0f, 1e9f), 464.0f, 480.0f, 1e9f, 0x1.fffffep127f, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        cr_assert_eq(moects__e4m3_encode(big[i]), 0x7E, "%a", big[i]);
        cr_assert_eq(moects__e4m3_encode(-big[i]), 0xFE, "%a", -big[i]);
    }
    cr_assert_eq(moects__e4m3_encode(NAN), 0x7F);
    cr_assert_eq(moects__e4m3_encode(-NAN), 0x7F); /* cuda_fp8.hpp canonicalises NaN first */
    cr_assert_eq(moects__e4m3_encode(0.0f), 0x00);
    cr_assert_eq(moects__e4m3_encode(-0.0f), 0x80);
    cr_assert_eq(moects__e4m3_encode(0x1p-10f), 0x00);                  /* tie 0 / 2^-9: even */
    cr_assert_eq(moects__e4m3_encode(nextafterf(0x1p-10f, 1.0f)), 0x01); /* just above */
    cr_assert_eq(moects__e4m3_encode(-0x1p-10f), 0x80);
    cr_assert_eq(moects__e4m3_encode(0x1p-149f), 0x00);                   /* float subnormal */
    cr_assert_eq(moects__e4m3_encode(-0x1p-149f), 0x80);
    cr_assert_eq(moects__e4m3_encode(0x1.ep-7f), 0x08); /* 15 * 2^-10: tie 7*2^-9 / 2^-6 -> even 0x08 */
    cr_assert_eq(moects__e4m3_encode(0x1.cp-7f), 0x07); /* 7 * 2^-9 exactly */
}
