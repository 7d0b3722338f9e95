/* values.c: how an output value is spelled in results, reports and diagnostics (its bits in hex
 * and its value; ", the poison: never written" where the bits are an output's poison), and the poison
 * patterns themselves (DESIGN.md "Harness": outputs get fresh poison before each run). */
#include <stdio.h>
#include <string.h>

#include "moects_compare.h"
#include "moects_diag.h"
#include "moects_guard.h"
#include "moects_ref.h"

/* run 0: all ones (NaN in BF16 and FP32); then quiet NaNs with a run-dependent payload */
uint32_t moects__poison_value(moects_dtype dt, int run)
{
    const uint32_t pay = 0xA5u ^ (uint32_t)(run * 0x3B);
    if (run == 0) return dt == MOECTS_F32 ? 0xFFFFFFFFu : 0xFFFFu;
    return dt == MOECTS_F32 ? 0x7FC00000u | (pay << 14) | pay : 0x7FC0u | (pay & 0x3F);
}

int moects__is_poison(moects_dtype dt, uint32_t bits)
{
    if (bits == (dt == MOECTS_F32 ? 0x7FA5A5A5u : 0x7FA5u)) return 1; /* python/moects/case.py _POISON */
    for (int run = 0; run < 2; run++)
        if (bits == moects__poison_value(dt, run)) return 1;
    return 0;
}

double moects__value_at(moects_dtype dt, const void *p, int64_t i, uint32_t *bits)
{
    if (dt == MOECTS_BF16) {
        uint16_t b = ((const uint16_t *)p)[i];
        *bits = b;
        return moects__bf16_to_f32(b);
    }
    uint32_t u;
    memcpy(&u, (const char *)p + 4 * i, 4);
    *bits = u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void moects__format_value(moects_dtype dt, const void *data, int64_t i, char *buf, size_t len)
{
    uint32_t bits;
    double v = moects__value_at(dt, data, i, &bits);
    if (dt == MOECTS_BF16)
        snprintf(buf, len, "0x%04x (%.9g)", (unsigned)bits, v);
    else
        snprintf(buf, len, "0x%08x (%.9g)", (unsigned)bits, v);
}

void moects__value_noted(const char *text, char *buf, size_t len)
{
    unsigned bits;
    int n = 0;
    const size_t l = strlen(text);
    if (sscanf(text, "0x%x%n", &bits, &n) == 1 && (n == 6 || n == 10) && l > 0 && text[l - 1] == ')' &&
        moects__is_poison(n == 6 ? MOECTS_BF16 : MOECTS_F32, bits))
        snprintf(buf, len, "%.*s, the poison: never written)", (int)(l - 1), text);
    else
        snprintf(buf, len, "%s", text);
}

void moects__diag_value(const moects_diag *d, uint32_t bits, char *buf, size_t len)
{
    uint16_t h = (uint16_t)bits;
    if (d->dtype == MOECTS_BF16) moects__format_value(MOECTS_BF16, &h, 0, buf, len);
    else moects__format_value(MOECTS_F32, &bits, 0, buf, len);
}

