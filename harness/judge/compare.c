/* compare.c: bit comparison of kernel output and reference (DESIGN.md "Verdicts"). */
#include "moects_compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "moects_guard.h"
#include "moects_ref.h"

/* Map a sign-magnitude pattern of `bits` bits to a signed integer that is monotonic in the
 * value: +x -> x, -x -> -x (so +0 and -0 both map to 0). */
static int64_t ordered(uint64_t u, int bits)
{
    uint64_t sign = 1ull << (bits - 1);
    int64_t mag = (int64_t)(u & (sign - 1));
    return (u & sign) ? -mag : mag;
}

static uint64_t dist(int64_t a, int64_t b) { return a > b ? (uint64_t)(a - b) : (uint64_t)(b - a); }

/* The distance of two patterns of `bits` bits whose exponent-all-ones magnitude is inf. */
static uint64_t ulp_distance(uint32_t a, uint32_t b, int bits, uint32_t inf)
{
    const uint32_t mag = (uint32_t)((1ull << (bits - 1)) - 1);
    const int na = (a & mag) > inf, nb = (b & mag) > inf;
    if (na || nb) return (na && nb) ? 0 : UINT64_MAX;
    if (a != b && ((a & mag) == inf || (b & mag) == inf)) return UINT64_MAX;
    return dist(ordered(a, bits), ordered(b, bits));
}

uint64_t moects__ulp_distance_bf16(uint16_t a, uint16_t b) { return ulp_distance(a, b, 16, 0x7f80); }

uint64_t moects__ulp_distance_f32(uint32_t a, uint32_t b) { return ulp_distance(a, b, 32, 0x7f800000u); }

int moects__compare(moects_dtype dt, const void *got, const void *want, int64_t n,
                   moects_compare_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_index = r->first_unbounded = -1;
    if ((dt != MOECTS_BF16 && dt != MOECTS_F32) || n < 0) return -1;
    /* Bit-identical (the usual pass): the loop below would give 0 mismatches, max_ulp 0 and
     * calc_diff 0; memcmp is ~50x faster on the large tier's 2^31-element outputs. */
    if (n == 0 || !memcmp(got, want, (size_t)n * (dt == MOECTS_BF16 ? 2 : 4))) return 0;
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t gb, wb;
        double x = moects__value_at(dt, got, i, &gb), y = moects__value_at(dt, want, i, &wb);
        uint64_t d = dt == MOECTS_BF16 ? moects__ulp_distance_bf16((uint16_t)gb, (uint16_t)wb)
                                       : moects__ulp_distance_f32(gb, wb);
        int both_nan = isnan(x) && isnan(y);
        if (d == UINT64_MAX && r->first_unbounded < 0) r->first_unbounded = i;
        if (gb != wb && !both_nan) {
            if (r->mismatches++ == 0) {
                r->first_index = i;
                moects__format_value(dt, got, i, r->got, sizeof r->got);
                moects__format_value(dt, want, i, r->want, sizeof r->want);
            }
        }
        if (d > r->max_ulp) r->max_ulp = d;
        if (isfinite(x) && isfinite(y)) {
            num += (x - y) * (x - y);
            den += x * x + y * y;
        }
    }
    r->calc_diff = den > 0.0 ? num / den : 0.0;
    return 0;
}

int moects__within_tolerance(const moects_compare_result *r, double max_calc_diff, uint32_t max_ulp, char *buf,
                            size_t len)
{
    const int cd_ok = r->calc_diff <= max_calc_diff, ulp_ok = r->max_ulp <= max_ulp;
    if (cd_ok && ulp_ok) return 1;
    int n = snprintf(buf, len, "outside the declared tolerance: ");
    if (!cd_ok && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "calc_diff %.3g > %.3g%s", r->calc_diff, max_calc_diff,
                      ulp_ok ? "" : "; ");
    if (!ulp_ok && n >= 0 && (size_t)n < len) {
        if (r->max_ulp == UINT64_MAX)
            snprintf(buf + n, len - (size_t)n, "a NaN or Inf against another value (first at element %lld)",
                     (long long)r->first_unbounded);
        else
            snprintf(buf + n, len - (size_t)n, "max_ulp %llu > %u", (unsigned long long)r->max_ulp, max_ulp);
    }
    return 0;
}
