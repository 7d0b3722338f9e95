/* moects_edc.h: the ep_dispatch_combine reference (ref/ep_dispatch.c; docs/ep_dispatch_combine.md): the
 * whole problem of all R ranks at once on the host, what every rank receives and every token's combined
 * output. Depends on libc and libm only. Internal: moects__ names. */
#ifndef MOECTS_EDC_H
#define MOECTS_EDC_H
#include <stddef.h>
#include <stdint.h>

#include "moects_ref.h"
#include "moects_types.h"

#define MOECTS_EDC_MAX_WORLD 64 /* the most ranks a case has (the derivation's EP sizes go to 64) */

/* The problem of all ranks: the ranks' tokens stacked in rank order (rank r's token t is global token
 * token_first[r] + t), host pointers. */
typedef struct {
    int64_t world, T_total, H, k, E;
    const int64_t *token_first;  /* [world + 1], token_first[0] = 0, token_first[world] = T_total */
    const int64_t *expert_first; /* [world + 1], expert_first[0] = 0, expert_first[world] = E */
    const uint16_t *x;           /* [T_total, H] bf16 */
    const int32_t *topk_ids;     /* [T_total, k] global ids, -1 (or anything outside [0, E)): no expert */
    const float *topk_weights;   /* [T_total, k] */
    const float *expert_scale;   /* [E] */
} moects_edc_problem;

/* The rank holding expert e, or -1 when e is outside [0, E) (the slot goes nowhere). */
int64_t moects__edc_rank_of(const moects_edc_problem *p, int64_t e);

/* recv_first [world + 1]: rank r receives recv_first[r + 1] - recv_first[r] rows, one per valid slot
 * routed to one of its experts. 0, or -1 for a problem out of its contract (world outside
 * [1, MOECTS_EDC_MAX_WORLD], offsets not monotone from 0 to T_total / E). */
int moects__edc_recv_first(const moects_edc_problem *p, int64_t *recv_first);

/* src [recv_first[world]]: each rank's received slots in the declared order (order=expert): by local
 * expert ascending, then source rank, then token, as (global token) * k + slot. 0, or -1 (as above, or
 * out of memory). */
int moects__edc_recv_order(const moects_edc_problem *p, const int64_t *recv_first, int64_t *src);

/* out [T_total, H] bf16: per token g and column d, y_j = bf16(x[g][d] * expert_scale[e_j]) for its valid
 * slots j ascending, acc = fmaf(y_j, w_j, acc) (recipe EPG_FMA_V1) or acc + y_j * w_j in two roundings
 * (EPG_MULADD_V1) from +0, then bf16(acc) (DESIGN.md "Numeric recipes", ep_gather's). 0, or -1 for
 * another recipe or a problem out of its contract. */
int moects__ref_edc_combine(const moects_edc_problem *p, moects_recipe recipe, uint16_t *out);

/* A kernel's recipe "ep_dispatch_combine.fma_v1(order=expert)" (or muladd_v1; order=expert or any):
 * the combine's recipe (EPG_FMA_V1, EPG_MULADD_V1) and whether the received rows may come in any order.
 * 0, or -1 for any other string. */
int moects__edc_recipe_parse(const char *name, moects_recipe *r, int *order_any);

#endif
