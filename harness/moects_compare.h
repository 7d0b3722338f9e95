/* moects_compare.h: bit comparison of a kernel's output with the reference (DESIGN.md
 * "Verdicts"): mismatch count, max ULP distance, first mismatch, calc_diff. */
#ifndef MOECTS_COMPARE_H
#define MOECTS_COMPARE_H
#include <stdint.h>

#include "moects_types.h"

typedef struct {
    int64_t mismatches;     /* elements whose bits differ; any NaN equals any NaN */
    uint64_t max_ulp;       /* max ordered-integer distance; UINT64_MAX (unbounded) where a NaN or
                             * an Inf meets another value (Inf vs a finite value or the other Inf) */
    double calc_diff;       /* sum (x-y)^2 / sum (x^2+y^2) over finite pairs, double; 0 if 0/0 */
    int64_t first_index;    /* element index of the first mismatch, -1 when none */
    int64_t first_unbounded; /* element index of the first unbounded distance, -1 when none */
    char got[64], want[64]; /* first mismatch as "0x3f80 (1)"; "" when none */
} moects_compare_result;

/* Ordered-integer distance of two BF16 / FP32 bit patterns: the number of representable values
 * between them (+0 and -0 are 0 apart). NaN vs NaN is 0; NaN vs anything else, and an infinity vs
 * anything but itself, is UINT64_MAX (unbounded: DESIGN.md "Verdicts"). */
uint64_t moects__ulp_distance_bf16(uint16_t a, uint16_t b);
uint64_t moects__ulp_distance_f32(uint32_t a, uint32_t b);

/* Element i of an output of dt (BF16 or FP32) as a double, its bits (BF16 in the low 16) in *bits
 * (harness/model/values.c). */
double moects__value_at(moects_dtype dt, const void *p, int64_t i, uint32_t *bits);
/* "0x3f80 (1)": the bits of element i of a BF16 or FP32 array in hex, then its value (%.9g). */
void moects__format_value(moects_dtype dt, const void *data, int64_t i, char *buf, size_t len);
/* For people (TAP, reasons): a value as moects__format_value wrote it, with ", the poison: never
 * written" inside its parentheses when its bits are an output's poison (moects__is_poison). */
void moects__value_noted(const char *text, char *buf, size_t len);

/* Compare n elements of got with want, both of dtype dt (MOECTS_BF16 or MOECTS_F32), host
 * pointers. A pair with a NaN or an Inf whose bits differ (NaN vs NaN aside) has an unbounded
 * distance (max_ulp UINT64_MAX): an overflow to Inf is not a number of ULPs away from a finite
 * reference, and calc_diff (finite pairs only) cannot see it. Returns 0, or -1 for another dtype
 * or n < 0 (r zeroed, first_index and first_unbounded -1). */
int moects__compare(moects_dtype dt, const void *got, const void *want, int64_t n,
                   moects_compare_result *r);

/* Whether r is within a declared tolerance (calc_diff <= max_calc_diff and max_ulp <= max_ulp,
 * DESIGN.md "Verdicts"): 1, or 0 with the reason in buf naming only the bounds that were exceeded,
 * e.g. "outside the declared tolerance: max_ulp 9 > 4", or "...: a NaN or Inf against another value
 * (first at element 3)" for an unbounded distance. */
int moects__within_tolerance(const moects_compare_result *r, double max_calc_diff, uint32_t max_ulp, char *buf,
                            size_t len);

#endif
