/* bf16.c: float <-> bfloat16 (the upper 16 bits of IEEE binary32). */
#include <string.h>

#include "moects_ref.h"

/* Round to nearest, ties to even, on the bit pattern: add 0x7FFF plus the lowest kept bit; the
 * carry propagates into the exponent, so overflow rounds to Inf exactly as IEEE requires.
 * NaN: keep sign and payload's top bits, force the quiet bit (0x0040) so it cannot become Inf. */
uint16_t moects__bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float moects__bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
