/* e2m1.c: FP4 E2M1 codec. Format: OCP Microscaling Formats (MX) v1.0, sec. 5.3.3 (FP4 E2M1:
 * 1 sign, 2 exponent bits with bias 1, 1 mantissa bit, no Inf/NaN, max normal 6.0). The float ->
 * E2M1 rounding mirrors CUDA 13 cuda_fp4.hpp __nv_cvt_double_to_fp4 (cudaRoundNearest):
 * round to nearest even, saturate to +-6, NaN -> +6 (code 0x7), sign kept on underflow (-0.1 -> 0x8). */
#include <math.h>

#include "moects_ref.h"

/* Magnitudes of codes 0..7, read off the format definition: subnormals 0 and 0.5 (exponent field 0),
 * then 1.0 * 2^(e-1) and 1.5 * 2^(e-1) for e = 1, 2, 3. */
static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* code 0..15 (the high bits of a larger value are ignored): bit 3 is the sign, 0x8 is -0. */
float moects__e2m1_decode(uint8_t code)
{
    float m = e2m1_mag[code & 7u];
    return (code & 8u) ? -m : m;
}

/* Round v to the nearest E2M1 value. A tie (the midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) goes
 * to the code with an even mantissa bit under MOECTS_ROUND_RNE (0.25->0, 0.75->1, 1.25->1, 1.75->2,
 * 2.5->2, 3.5->4, 5->4) and to the smaller magnitude under MOECTS_ROUND_TIES_TO_ZERO. |v| > 6 and
 * +-Inf saturate to +-6 (cvt.rn.satfinite). NaN has no E2M1 code: it gives +6 (0x7), as
 * cuda_fp4.hpp does. The sign is kept for zero and underflow: -0.0 and -0.2 give 0x8 (-0). */
uint8_t moects__e2m1_encode(float v, moects_rounding r)
{
    if (isnan(v)) return 0x7u;
    uint8_t sign = signbit(v) ? 0x8u : 0x0u;
    float a = fabsf(v);
    if (a >= 6.0f) return (uint8_t)(sign | 0x7u);
    unsigned i = 0;
    while (i < 6 && a >= e2m1_mag[i + 1]) i++; /* e2m1_mag[i] <= a < e2m1_mag[i + 1] */
    float mid = 0.5f * (e2m1_mag[i] + e2m1_mag[i + 1]); /* exact: two significant bits */
    unsigned c;
    if (a < mid) c = i;
    else if (a > mid) c = i + 1;
    else if (r == MOECTS_ROUND_TIES_TO_ZERO) c = i;
    else c = (i & 1u) ? i + 1 : i; /* the even code: mantissa bit 0 */
    return (uint8_t)(sign | c);
}

/* Two codes per byte: codes[2j] in the low nibble of packed[j], codes[2j+1] in the high nibble;
 * an odd n leaves the last high nibble 0. Codes are masked to 4 bits. */
void moects__e2m1_pack(const uint8_t *codes, size_t n, uint8_t *packed)
{
    for (size_t j = 0; 2 * j < n; j++) {
        uint8_t lo = codes[2 * j] & 0xFu;
        uint8_t hi = (2 * j + 1 < n) ? (uint8_t)(codes[2 * j + 1] & 0xFu) : 0u;
        packed[j] = (uint8_t)(lo | (hi << 4));
    }
}

void moects__e2m1_unpack(const uint8_t *packed, size_t n, uint8_t *codes)
{
    for (size_t i = 0; i < n; i++) codes[i] = (uint8_t)((packed[i / 2] >> (4 * (i & 1))) & 0xFu);
}
