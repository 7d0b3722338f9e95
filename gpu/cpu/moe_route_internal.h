/* moe_route_internal.h: the CPU router kernels' generic loop (gpu/cpu/moe_route.c) and the descriptor
 * macro its honest kernels and mutants (moe_route_mutants.c) share. */
#ifndef MOECTS_MOE_ROUTE_INTERNAL_H
#define MOECTS_MOE_ROUTE_INTERNAL_H
#include <stdio.h>

#include "moects_kernel.h"
#include "moects_ref.h"
#include "moects_route.h"

/* One known bug of a mutant (moe_route_mutants.c says which declared convention each breaks). */
typedef enum {
    MOECTS__MR_BUG_NONE = 0,
    MOECTS__MR_BUG_SOFTMAX_AFTER_TOPK, /* softmax method: top-k on the logits, softmax over the k */
    MOECTS__MR_BUG_BIAS_IN_WEIGHTS,    /* the weights from s + b, not s */
    MOECTS__MR_BUG_GROUP_MAX,          /* groups ranked by their best score, not the sum of their top 2 */
    MOECTS__MR_BUG_SCALE_TWICE,        /* the routed scaling factor applied twice */
    MOECTS__MR_BUG_SUM_BF16,           /* the renormalization sum rounded to BF16 after each addition */
    MOECTS__MR_BUG_WEIGHTS_BF16        /* the weights rounded to BF16 (declared FP32) */
} moects__mr_bug;

typedef struct {
    int ties_high; /* equal scores to the higher id (groups and experts) */
    int unsorted;  /* slots in ascending id order */
    int fast;      /* libm's expf (within 1 ulp) and the sums in reverse order: moe_route.v1(fn=ulp2,sum=any) */
    int recip;     /* softmax e * (1 / S), renormalization v * (scale / sum): moe_route.v1(norm=recip,renorm=recip) */
    moects__mr_bug bug;
} moects__mr_kernel;

/* 1 when the kernel takes route shape s (moects_moe_route_shape*): every valid one (ref's
 * moects__route_shape_invalid), else 0 with its reason in why. */
int moects__mr_supports(const moects__mr_kernel *k, const void *shape, char *why, size_t why_len);
/* The router (moects_moe_route_shape / moects_moe_route_args, host pointers) as k computes it: ids and
 * weights [T, k]. 0, or -1 for an invalid shape or out of memory. */
int moects__mr_run(const moects__mr_kernel *k, const void *shape, const void *args);

/* A router kernel descriptor `sym` named nm: recipe rec, ties_high, unsorted, fast, recip, bug bugv
 * (bugtext its one line, NULL for an honest kernel). */
#define MOECTS__MR_DESCRIPTOR(sym, nm, rec, high, unsort, fst, rcp, bugv, bugtext)                    \
    static const moects__mr_kernel sym##_k = {high, unsort, fst, rcp, bugv};                               \
    static int sym##_sup(const void *s, char *w, size_t l) { return moects__mr_supports(&sym##_k, s, w, l); } \
    static int sym##_run(const void *s, const void *a, void *st)                                      \
    {                                                                                                 \
        (void)st;                                                                                     \
        return moects__mr_run(&sym##_k, s, a);                                                        \
    }                                                                                                 \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = nm,                  \
                               .op = MOECTS_OP_MOE_ROUTE, .device = MOECTS_DEVICE_CPU,                \
                               .recipe = rec, .bug = bugtext, .supports = sym##_sup, .run = sym##_run}
#endif
