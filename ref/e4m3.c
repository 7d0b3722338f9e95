/* e4m3.c: FP8 E4M3 "fn" codec (OCP 8-bit Floating Point Specification (OFP8) v1.0 E4M3, as
 * cuda_fp8.h __NV_E4M3): 1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no Inf;
 * S.1111.111 (0x7F, 0xFF) is NaN; max normal 448 = 1.75 * 2^8; min normal 2^-6; subnormals
 * m * 2^-9, m = 1..7. NVFP4 block scales are this format read as unsigned (sign bit 0). */
#include <math.h>

#include "moects_ref.h"

float moects__e4m3_decode(uint8_t x)
{
    unsigned e = (x >> 3) & 0xFu, m = x & 7u;
    if (e == 0xFu && m == 7u) return NAN;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8u + m), (int)e - 10);
    return (x & 0x80u) ? -v : v;
}

/* Round q >= 0 to an integer, ties to even; q has few fraction bits, all steps exact. */
static double round_half_even(double q)
{
    double f = floor(q), d = q - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
    return f;
}

/* float -> E4M3 as cuda_fp8.hpp __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3): round to
 * nearest even; |v| > 448 and +-Inf saturate to +-448 (0x7E/0xFE); any NaN gives 0x7F; |v| <= 2^-10
 * rounds to a zero of v's sign (2^-10 is the tie between 0 and 2^-9: even wins). */
uint8_t moects__e4m3_encode(float v)
{
    if (isnan(v)) return 0x7Fu;
    uint8_t sign = signbit(v) ? 0x80u : 0x00u;
    double a = fabs((double)v);
    if (a > 448.0) return (uint8_t)(sign | 0x7Eu);
    if (a < 0x1p-6) { /* subnormal range: a = q * 2^-9; q rounds to 0..8 (8 = 2^-6, code 0x08) */
        double q = round_half_even(a * 0x1p9);
        return (uint8_t)(sign | (uint8_t)q);
    }
    int e;
    (void)frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): unbiased exponent e-1 */
    e -= 1;
    double q = round_half_even(ldexp(a, 3 - e)); /* in [8, 16] */
    if (q == 16.0) {
        q = 8.0;
        e += 1;
    }
    return (uint8_t)(sign | (uint8_t)(((e + 7) << 3) | ((int)q - 8)));
}
