/* moects_exact.h: exact summation of doubles and correct rounding of the exact sum to FP32 or
 * BF16: the engine of the exact_v1 recipes (ref/exact.c). */
#ifndef MOECTS_EXACT_H
#define MOECTS_EXACT_H
#include <stdint.h>

#define MOECTS_XSUM_CAP 80 /* components: enough for the whole double exponent range */

/* An exact sum: a nonoverlapping expansion of doubles (Shewchuk 1997) plus NaN/Inf flags. */
typedef struct {
    double c[MOECTS_XSUM_CAP];
    int n;
    int nan, pos_inf, neg_inf;
} moects_xsum;

void moects__xsum_init(moects_xsum *s);
/* s += v exactly (v finite: exact; Inf/NaN: recorded in the flags). */
void moects__xsum_add(moects_xsum *s, double v);
/* s += a * b exactly (TwoProduct by fma). */
void moects__xsum_add_product(moects_xsum *s, double a, double b);
/* s *= a exactly. */
void moects__xsum_scale(moects_xsum *s, double a);
/* The exact sum rounded once, to nearest even: FP32 (overflow -> Inf), BF16 bits, double. */
float moects__xsum_round_f32(const moects_xsum *s);
uint16_t moects__xsum_round_bf16(const moects_xsum *s);
#endif
