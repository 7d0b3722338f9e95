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

const moects_kernel *const *moects_builtin_kernels(size_t *count)
{
    *count = sizeof builtin / sizeof builtin[0];
    return builtin;
}
