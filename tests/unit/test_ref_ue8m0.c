/* test_ref_ue8m0.c: UE8M0 decode (ref/ue8m0.c) against the format (OCP MX v1.0 sec. 5.4.1): every
 * code, worked out on the FP32 bit pattern (biased exponent field = code for 1..254; code 0 is the
 * subnormal 2^-127 = 0x00400000), 0xFF NaN. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "moects_ref.h"

Test(ue8m0, every_code)
{
    for (int x = 0; x < 255; x++) {
        uint32_t want = x == 0 ? 0x00400000u : (uint32_t)x << 23;
        float v = moects__ue8m0_decode((uint8_t)x);
        uint32_t got;
        memcpy(&got, &v, sizeof got);
        cr_assert_eq(got, want, "code %d: got 0x%08x want 0x%08x", x, got, want);
    }
    cr_assert(isnan(moects__ue8m0_decode(0xFF)));
}

Test(ue8m0, landmarks)
{
    cr_assert_eq(moects__ue8m0_decode(127), 1.0f);
    cr_assert_eq(moects__ue8m0_decode(128), 2.0f);
    cr_assert_eq(moects__ue8m0_decode(126), 0.5f);
    cr_assert_eq(moects__ue8m0_decode(254), 0x1p127f);
    cr_assert_eq(moects__ue8m0_decode(1), 0x1p-126f);
    cr_assert_eq(fpclassify(moects__ue8m0_decode(0)), FP_SUBNORMAL, "2^-127 must not be flushed");
    cr_assert_eq(moects__ue8m0_decode(0), 0x1p-127f);
}
