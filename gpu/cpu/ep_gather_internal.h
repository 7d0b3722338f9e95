/* ep_gather_internal.h: internals of the CPU ep_gather mutants (gpu/cpu/ep_gather_mutants.c),
 * exposed for tests/test_gpu_ep_gather_kernels.c. */
#ifndef MOECTS_EP_GATHER_INTERNAL_H
#define MOECTS_EP_GATHER_INTERNAL_H
#include <stdint.h>

/* Element offset of x[row][d] in a [M_sum, H] row-major tensor: 64-bit (correct). */
int64_t moects__epg_offset64(int64_t row, int64_t H, int64_t d);
/* The same in 32-bit arithmetic, as the int32_offset mutant computes it: row*H + d wrapped
 * modulo 2^32 and read as int32 (negative past 2^31). */
int64_t moects__epg_offset32(int64_t row, int64_t H, int64_t d);
#endif
