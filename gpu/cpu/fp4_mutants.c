/* fp4_mutants.c: CPU FP4 GEMM kernels with one known bug each (DESIGN.md "GPU side"), and the
 * fp4_gemm half of the mutant pool (gpu/cpu/pool.def). Each declares fp4_gemm.blockwise_v1 and
 * otherwise computes it exactly (the loop of fp4_blockwise.c with one mutation, mutation.h), so
 * the suite must catch the bug as a mismatch. They take every shape their bug can show on. */
#include <stdio.h>

#include "fp4_internal.h"

static int supports_any(const void *shape, char *why, size_t why_len)
{
    return moects__fp4_shape_ok(shape, why, why_len);
}

/* The format confusion exists only on the NVFP4 path: MXFP4 would be computed correctly. */
static int supports_nvfp4(const void *shape, char *why, size_t why_len)
{
    if (!moects__fp4_shape_ok(shape, why, why_len)) return 0;
    if (((const moects_fp4_gemm_shape *)shape)->format == MOECTS_FP4_NVFP4) return 1;
    if (why && why_len) snprintf(why, why_len, "scope: mutant of the NVFP4 scale decode only");
    return 0;
}

#define MUTANT(sym, opv, par, nm, bugtext, sup)                                                    \
    static int run_##sym(const void *s, const void *a, void *st)                                   \
    {                                                                                              \
        static const moects__mut m = {opv, par};                                                   \
        (void)st;                                                                                  \
        return moects__fp4_blockwise_run(&m, s, a);                                                \
    }                                                                                              \
    const moects_kernel sym = {.abi_version = MOECTS_KERNEL_ABI_VERSION,                           \
                               .name = nm,                                                         \
                               .op = MOECTS_OP_FP4_GEMM,                                           \
                               .device = MOECTS_DEVICE_CPU,                                        \
                               .recipe = "fp4_gemm.blockwise_v1",                                  \
                               .bug = bugtext,                                                     \
                               .supports = sup,                                                    \
                               .run = run_##sym};

MUTANT(moects_cpu_mutant_fp4_gemm_nibble_swap, MOECTS__FP4_NIBBLE_SWAP_B, 0, "cpu.mutant.fp4_gemm.nibble_swap",
       "B's E2M1 nibbles read in swapped order (element 2j from the high nibble)", supports_any)
MUTANT(moects_cpu_mutant_fp4_gemm_tail_scale, MOECTS__FP4_TAIL_SCALE, 0, "cpu.mutant.fp4_gemm.tail_scale",
       "the last K-block reads the scales of block nkb-2 (tail-block scale index off by one)", supports_any)
MUTANT(moects_cpu_mutant_fp4_gemm_e4m3_as_ue8m0, MOECTS__FP4_E4M3_AS_UE8M0, 0, "cpu.mutant.fp4_gemm.e4m3_as_ue8m0",
       "NVFP4 E4M3 block scales decoded as UE8M0 (2^(x-127)): format confusion", supports_nvfp4)
MUTANT(moects_cpu_mutant_fp4_gemm_scale_ftz, MOECTS__FP4_SCALE_FTZ, 0, "cpu.mutant.fp4_gemm.scale_ftz",
       "subnormal scales flushed to zero (UE8M0 code 0 = 2^-127, E4M3 codes 0x01-0x07)", supports_any)

/* the pool's fp4_gemm mutants (gpu/cpu/pool.def); every shape is taken (a mutant of an NVFP4-only
 * path is caught on NVFP4 cases and equals the honest kernel on MXFP4 ones) */
#define MOECTS_POOL_EPG(sym, opv, par, nm, text)
#define MOECTS_POOL_FP4(sym, opv, par, nm, text) MUTANT(sym, opv, par, nm, text, supports_any)
#define MOECTS_POOL_MOE(sym, fn, sup, nm, text)
#include "pool.def"
