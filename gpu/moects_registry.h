/* moects_registry.h: the built-in kernels under test (gpu/cpu/kernels.def, gpu/cuda/kernels.def). */
#ifndef MOECTS_REGISTRY_H
#define MOECTS_REGISTRY_H
#include "moects_kernel.h"

/* All built-in kernels, CPU stand-ins first; *count set. The CUDA ones only in CUDA builds. */
const moects_kernel *const *moects_builtin_kernels(size_t *count);

#endif
