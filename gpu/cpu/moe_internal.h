/* moe_internal.h: internals shared by the CPU grouped MoE GEMM kernels under test (gpu/cpu/moe_*.c). */
#ifndef MOECTS_MOE_INTERNAL_H
#define MOECTS_MOE_INTERNAL_H
#include <stddef.h>

#include "moects_kernel.h"

/* The one bug a blockwise moe kernel carries (MOECTS__MOE_BUG_NONE: the honest cpu.moe_gemm.blockwise). */
typedef enum {
    MOECTS__MOE_BUG_NONE = 0,
    MOECTS__MOE_BUG_SCALE_STRIDE, /* expert e's B scales at e * N * nkb (the unpadded stride), not e * layout bytes */
    MOECTS__MOE_BUG_PAD_ROWS,     /* a 128-row tile is rescaled by its largest A scale, padding rows (id -1) included */
    MOECTS__MOE_BUG_MASKED_M,     /* masked_m ignored: every expert computes the mean count of rows */
    MOECTS__MOE_BUG_ALPHA0,       /* alpha[0] for every expert */
    MOECTS__MOE_BUG_STRADDLE,     /* a 128-row tile takes the expert of its first valid row for all its rows */
    MOECTS__MOE_BUG_A_PER32,      /* W4A8: per-128 A scale read at index b (per 32) instead of b*32/128 */
    /* the pool's (gpu/cpu/pool.def, issue 13) */
    MOECTS__MOE_BUG_BOUND_NEXT,   /* a valid row takes the expert of row r + 1 (a padding or invalid one: not computed) */
    MOECTS__MOE_BUG_BOUND_PREV,   /* a valid row takes the expert of row r - 1 */
    MOECTS__MOE_BUG_MASKED_M0,    /* masked_m[0] rows for every expert */
    MOECTS__MOE_BUG_MASKED_M_OFF, /* masked_m[e] - 1 rows: each expert's last valid row not computed */
    MOECTS__MOE_BUG_SWZ_STRIDE_N, /* swizzled B scales: expert stride from N, not N padded to 128 */
    MOECTS__MOE_BUG_SPLIT_K_ROWS  /* an expert of more than MOECTS__MOE_SPLIT_ROWS rows: its K-blocks in two
                                     halves, two FP32 chains added at the end (exact for fewer rows) */
} moects__moe_bug;

/* The SPLIT_K_ROWS mutant's tile choice: experts with more rows split K (the smoke tier's moe_gemm cases
 * hold at most 130 rows an expert; a batch-invariance batch gives an expert of c rows 2c + 3). */
#define MOECTS__MOE_SPLIT_ROWS 256

/* Shape fields every CPU moe kernel needs (dims, format, row layout, W4A8 fields, out dtype); 1, or 0
 * with a one-line reason. */
int moects__moe_shape_ok(const moects_moe_gemm_shape *s, char *why, size_t why_len);

/* Bytes of expert e's B scales ([N][nkb] in s->scale_layout) and its block g; *nkb set. */
size_t moects__moe_b_scale_bytes(const moects_moe_gemm_shape *s, int64_t *nkb, int64_t *g);

/* The expert of each row of A (-1: not valid): rows(A) entries in *expert (malloc'd). bug
 * MASKED_M and STRADDLE change it as their bug says. 0, or -1 for bad metadata or no memory. */
int moects__moe_row_experts(moects__moe_bug bug, const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                            int64_t rows, int32_t **expert);

/* moe_gemm.blockwise_v1 (MXFP4, NVFP4, W4A8) by one loop per output element, `bug` injected
 * (gpu/cpu/moe_blockwise.c). Host pointers. 0, or -1 for a bad shape or out of memory. */
int moects__moe_blockwise_run(moects__moe_bug bug, const void *shape, const void *args);
#endif
