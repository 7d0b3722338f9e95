/* registry.c: one table of built-in kernels, filled from the X-macro lists (libuv test-list.h
 * style): adding a kernel is one line in gpu/cpu/kernels.def or gpu/cuda/kernels.def. */
#include "moects_registry.h"

#define MOECTS_KERNEL(sym) extern const moects_kernel sym;
#include "cpu/kernels.def"
#if MOECTS_HAVE_CUDA
#include "cuda/kernels.def"
#endif
#undef MOECTS_KERNEL

#define MOECTS_KERNEL(sym) &sym,
static const moects_kernel *const builtin[] = {
#include "cpu/kernels.def"
#if MOECTS_HAVE_CUDA
#include "cuda/kernels.def"
#endif
};
#undef MOECTS_KERNEL

const moects_kernel *const *moects__builtin_kernels(size_t *count)
{
    *count = sizeof builtin / sizeof builtin[0];
    return builtin;
}

/* The CPU mutant pool (gpu/cpu/pool.def): not in the built-in table, run on request. */
#define MOECTS_POOL_EPG(sym, op, par, nm, text) extern const moects_kernel sym;
#define MOECTS_POOL_FP4(sym, op, par, nm, text) extern const moects_kernel sym;
#define MOECTS_POOL_MOE(sym, fn, sup, nm, text) extern const moects_kernel sym;
#include "cpu/pool.def"
#undef MOECTS_POOL_EPG
#undef MOECTS_POOL_FP4
#undef MOECTS_POOL_MOE
#define MOECTS_POOL_EPG(sym, op, par, nm, text) &sym,
#define MOECTS_POOL_FP4(sym, op, par, nm, text) &sym,
#define MOECTS_POOL_MOE(sym, fn, sup, nm, text) &sym,
static const moects_kernel *const pool[] = {
#include "cpu/pool.def"
};
#undef MOECTS_POOL_EPG
#undef MOECTS_POOL_FP4
#undef MOECTS_POOL_MOE

const moects_kernel *const *moects__pool_kernels(size_t *count)
{
    *count = sizeof pool / sizeof pool[0];
    return pool;
}
