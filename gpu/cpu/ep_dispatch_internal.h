/* ep_dispatch_internal.h: the CPU ep_dispatch_combine kernel's rank loop (gpu/cpu/ep_dispatch.c) and the
 * descriptor macro its honest kernels and mutants (ep_dispatch_mutants.c) share. */
#ifndef MOECTS_EP_DISPATCH_INTERNAL_H
#define MOECTS_EP_DISPATCH_INTERNAL_H
#include <stdio.h>

#include "moects_kernel.h"

/* One known bug of a mutant (ep_dispatch_mutants.c). */
typedef enum {
    MOECTS__ED_BUG_NONE = 0,
    MOECTS__ED_BUG_COUNT_PLUS_ONE,    /* every non-zero send count one more, the window's next record sent too */
    MOECTS__ED_BUG_DROP_LAST_CHUNK,   /* rows packed in chunks of 8, a last partial chunk never sent */
    MOECTS__ED_BUG_WEIGHTS_ON_SENDER, /* the expert's rank applies the weight (BF16), the token's rank adds */
    MOECTS__ED_BUG_WEIGHTS_TWICE      /* the expert's rank applies the weight and the token's rank again */
} moects__ed_bug;

typedef struct {
    int any_order; /* received rows in arrival order (source rank, token, slot): order=any */
    moects__ed_bug bug;
} moects__ed_kernel;

/* One rank's run (moects_kernel.run's contract) of kernel kk on shape s (moects_ep_dispatch_combine_shape*)
 * and args a (moects_ep_dispatch_combine_args*): counts, then rows all-to-all, the transform, the rows
 * back, the combine (fma). 0, or -1 (a transport failure, more rows than recv_cap, out of memory). */
int moects__ed_run(const moects__ed_kernel *kk, const void *s, const void *a);
int moects__ed_supports(const void *s, char *why, size_t len);

#define MOECTS__ED_DESCRIPTOR(sym, nm, rec, anyv, bugv, bugtext)                        \
    static const moects__ed_kernel sym##_k = {anyv, bugv};                               \
    static int sym##_run(const void *s, const void *a, void *st)                        \
    {                                                                                   \
        (void)st;                                                                       \
        return moects__ed_run(&sym##_k, s, a);                                          \
    }                                                                                   \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = nm,    \
                               .op = MOECTS_OP_EP_DISPATCH_COMBINE,                     \
                               .device = MOECTS_DEVICE_CPU, .recipe = rec, .bug = bugtext, \
                               .supports = moects__ed_supports, .run = sym##_run}
#endif
