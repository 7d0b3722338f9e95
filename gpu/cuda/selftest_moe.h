/* selftest_moe.h: the moe_gemm part of moects_gpu_selftest (selftest_moe.c). Internal. */
#ifndef MOECTS_SELFTEST_MOE_H
#define MOECTS_SELFTEST_MOE_H
#include <stddef.h>

#include "moects_kernel.h"

/* Every moe_gemm case kernel k supports, against moects__ref_moe_gemm: one PASS/FAIL line each; *fails
 * counts the failed ones. Returns the number of cases run (0: k took none). Needs a device. */
int moects__selftest_moe(const moects_kernel *k, int *fails);
/* TFLOP/s (2 * valid rows * N * K) of cuda.moe_gemm.blockwise (MXFP4, NVFP4),
 * cuda.moe_gemm.w4a16_cublas (MXFP4) and cuda.moe_gemm.w4a16_mma (MXFP4, NVFP4) on DeepSeek-V3 and
 * Kimi K3 prefill routing (T = 4096; DeepSeek-V3 also 16384) at TP8 and EP8, gemm1 and gemm2,
 * contiguous layout, beside cuBLAS BF16 grouped GEMM of the same per-expert problems, on stdout. */
void moects__selftest_moe_perf(const moects_kernel *const *ks, size_t nk);

#endif
