/* moects_registry.h: the built-in kernels under test (gpu/cpu/kernels.def, gpu/cuda/kernels.def). */
#ifndef MOECTS_REGISTRY_H
#define MOECTS_REGISTRY_H
#include "moects_kernel.h"

/* All built-in kernels, CPU stand-ins first; *count set. The CUDA ones only in CUDA builds. */
const moects_kernel *const *moects__builtin_kernels(size_t *count);

/* The CPU mutant pool (gpu/cpu/pool.def, issue 13): mutants named "pool.<op>.<operator>[.<param>]",
 * each one mutation operator on the honest CPU loops. Not in moects__builtin_kernels: `moects run`
 * runs them when a --kernel glob names them. *count set. */
const moects_kernel *const *moects__pool_kernels(size_t *count);

#endif
