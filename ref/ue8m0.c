/* ue8m0.c: the MX scale format E8M0 (OCP Microscaling Formats (MX) v1.0, sec. 5.4.1: an unsigned
 * 8-bit exponent, bias 127, no mantissa, no zero, no sign; 0xFF is NaN). CUDA: __nv_fp8_e8m0. */
#include <math.h>

#include "moects_ref.h"

/* 2^(x-127) for x = 0..254, exact in float: code 0 is 2^-127, a float subnormal (kept, never
 * flushed); code 254 is 2^127. 0xFF -> NaN. */
float moects__ue8m0_decode(uint8_t x)
{
    if (x == 0xFFu) return NAN;
    return ldexpf(1.0f, (int)x - 127);
}
