/* moe_mutants.c: CPU grouped MoE GEMM kernels with one known bug each (DESIGN.md "Grouped MoE GEMM":
 * most real bugs sit at the group boundaries; bug-reports.md rows 21-30). Each declares
 * moe_gemm.blockwise_v1 and otherwise computes it exactly (the loop of moe_blockwise.c), so the suite
 * must catch the bug as a mismatch. Each takes the shapes its bug can show on. */
#include <stdio.h>

#include "moe_internal.h"

#define RUNNER(fn, bug)                                                                            \
    static int fn(const void *s, const void *a, void *st)                                          \
    {                                                                                              \
        (void)st;                                                                                  \
        return moects__moe_blockwise_run(bug, s, a);                                               \
    }
RUNNER(run_stride, MOECTS__MOE_BUG_SCALE_STRIDE)
RUNNER(run_pad, MOECTS__MOE_BUG_PAD_ROWS)
RUNNER(run_masked, MOECTS__MOE_BUG_MASKED_M)
RUNNER(run_alpha0, MOECTS__MOE_BUG_ALPHA0)
RUNNER(run_straddle, MOECTS__MOE_BUG_STRADDLE)
RUNNER(run_per32, MOECTS__MOE_BUG_A_PER32)
RUNNER(run_bound_next, MOECTS__MOE_BUG_BOUND_NEXT)
RUNNER(run_bound_prev, MOECTS__MOE_BUG_BOUND_PREV)
RUNNER(run_masked_m0, MOECTS__MOE_BUG_MASKED_M0)
RUNNER(run_masked_m_off, MOECTS__MOE_BUG_MASKED_M_OFF)
RUNNER(run_swz_stride_n, MOECTS__MOE_BUG_SWZ_STRIDE_N)
RUNNER(run_split_k_rows, MOECTS__MOE_BUG_SPLIT_K_ROWS)

/* The blockwise kernel's shapes, narrowed to a row layout (rows != 0) or a format (fmt != 0). */
static int takes(const void *shape, char *why, size_t why_len, moects_row_layout rows, moects_moe_format fmt,
                 const char *what)
{
    const moects_moe_gemm_shape *s = shape;
    if (!moects__moe_shape_ok(s, why, why_len)) return 0;
    if (s->format != MOECTS_MOE_W4A16 && (!rows || s->rows == rows) && (!fmt || s->format == fmt)) return 1;
    if (why && why_len) snprintf(why, why_len, "scope: mutant of %s only", what);
    return 0;
}
static int sup_any(const void *s, char *w, size_t l) { return takes(s, w, l, 0, 0, "MXFP4, NVFP4, W4A8"); }
static int sup_contiguous(const void *s, char *w, size_t l) { return takes(s, w, l, MOECTS_ROWS_CONTIGUOUS, 0, "the contiguous layout"); }
static int sup_masked(const void *s, char *w, size_t l) { return takes(s, w, l, MOECTS_ROWS_MASKED, 0, "the masked layout"); }
static int sup_nvfp4(const void *s, char *w, size_t l) { return takes(s, w, l, 0, MOECTS_MOE_NVFP4, "NVFP4 (per-expert alpha)"); }
static int sup_w4a8(const void *s, char *w, size_t l) { return takes(s, w, l, 0, MOECTS_MOE_W4A8, "W4A8"); }

#define MUTANT(sym, nm, bugtext, sup, fn)                                                          \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION,                           \
                               .name = nm,                                                         \
                               .op = MOECTS_OP_MOE_GEMM,                                           \
                               .device = MOECTS_DEVICE_CPU,                                        \
                               .recipe = "moe_gemm.blockwise_v1",                                  \
                               .bug = bugtext,                                                     \
                               .supports = sup,                                                    \
                               .run = fn}

MUTANT(moects_cpu_mutant_moe_gemm_scale_stride, "cpu.mutant.moe_gemm.scale_stride",
       "expert e > 0 reads its B scales at e * N * nkb, expert 0's unpadded stride, not the swizzled layout's "
       "(vllm PR 35497)",
       sup_any, run_stride);
MUTANT(moects_cpu_mutant_moe_gemm_pad_rows, "cpu.mutant.moe_gemm.pad_rows",
       "padding rows (id -1) are read: each 128-row tile is rescaled by its largest A scale, padding included, "
       "so their NaN reaches the valid rows",
       sup_contiguous, run_pad);
MUTANT(moects_cpu_mutant_moe_gemm_masked_m_ignored, "cpu.mutant.moe_gemm.masked_m_ignored",
       "masked_m ignored: every expert computes the mean row count (an expected_m hint), a fuller expert's "
       "last rows are never written",
       sup_masked, run_masked);
MUTANT(moects_cpu_mutant_moe_gemm_alpha0, "cpu.mutant.moe_gemm.alpha0",
       "expert 0's alpha (1 / (gs_a * gs_b)) applied to every expert", sup_nvfp4, run_alpha0);
MUTANT(moects_cpu_mutant_moe_gemm_tile_straddle, "cpu.mutant.moe_gemm.tile_straddle",
       "a 128-row tile that straddles two experts computes all its rows with the first one's weights "
       "(groups aligned to less than the tile)",
       sup_contiguous, run_straddle);
/* declares batch invariance: only the same rows inside a larger batch (FAIL_BATCH_VARIANT) catch it */
const moects_kernel moects_cpu_mutant_moe_gemm_split_k_rows = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "cpu.mutant.moe_gemm.split_k_rows", .op = MOECTS_OP_MOE_GEMM,
    .device = MOECTS_DEVICE_CPU, .recipe = "moe_gemm.blockwise_v1",
    .bug = "declares batch invariance, but an expert of more than 256 rows sums its K-blocks in two FP32 chains "
           "added at the end (split-K picked by the expert's rows): exact for smaller experts only",
    .supports = sup_any, .run = run_split_k_rows, .flags = MOECTS_KERNEL_BATCH_INVARIANT};
MUTANT(moects_cpu_mutant_moe_gemm_w4a8_scale_per32, "cpu.mutant.moe_gemm.w4a8_scale_per32",
       "W4A8: the per-128 activation scale is indexed per 32-wide K-block (sa[r][b], not sa[r][b * 32 / 128])",
       sup_w4a8, run_per32);

/* the pool's moe_gemm mutants (gpu/cpu/pool.def) */
#define MOECTS_POOL_EPG(sym, opv, par, nm, text)
#define MOECTS_POOL_FP4(sym, opv, par, nm, text)
#define MOECTS_POOL_MOE(sym, fn, sup, nm, text) MUTANT(sym, nm, text, sup, fn);
#include "pool.def"
