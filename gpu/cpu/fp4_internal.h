/* fp4_internal.h: internals shared by the CPU FP4 GEMM kernels under test (gpu/cpu/fp4_*.c). */
#ifndef MOECTS_FP4_INTERNAL_H
#define MOECTS_FP4_INTERNAL_H
#include <stddef.h>

#include "moects_kernel.h"

/* The one bug a blockwise kernel carries (MOECTS__FP4_BUG_NONE: the honest cpu.fp4_gemm.blockwise). */
typedef enum {
    MOECTS__FP4_BUG_NONE = 0,
    MOECTS__FP4_BUG_NIBBLE_SWAP,    /* B's element 2j read from the high nibble, 2j+1 from the low */
    MOECTS__FP4_BUG_TAIL_SCALE,     /* the last K-block (nkb >= 2) reads the scales of block nkb-2 */
    MOECTS__FP4_BUG_E4M3_AS_UE8M0,  /* NVFP4 scales decoded as UE8M0: 2^(x-127) */
    MOECTS__FP4_BUG_SCALE_FTZ       /* subnormal scales read as 0: UE8M0 code 0, E4M3 codes 0x01-0x07 */
} moects__fp4_bug;

/* Checks the shape fields every FP4 kernel needs (dims >= 0, known format, layout, out dtype);
 * 1, or 0 with a one-line reason. */
int moects__fp4_shape_ok(const moects_fp4_gemm_shape *s, char *why, size_t why_len);

/* fp4_gemm.blockwise_v1 by a per-(m, n) loop (gpu/cpu/fp4_blockwise.c), with `bug` injected.
 * Host pointers. Returns 0, or -1 for a bad shape or out of memory. */
int moects__fp4_blockwise_run(moects__fp4_bug bug, const void *shape, const void *args);
#endif
