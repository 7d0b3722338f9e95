/* fp4_gemm_ftz.cu: mutant "cuda.mutant.fp4_gemm.fast_math_ftz": the blockwise kernel's source
 * (fp4_gemm_blockwise.cuh) built with --use_fast_math (-ftz=true) by gpu/CMakeLists.txt. Its scale
 * product __fmul_rn(sA, sB) and the __fmaf_rn accumulation then flush subnormals to zero, so an MXFP4
 * scale code near 0 (2^-127 is subnormal in FP32) zeroes the block's contribution. */
#define MOECTS_FP4_NS moects_fp4_ftz
#include "fp4_gemm_blockwise.cuh"

extern "C" {
extern const moects_kernel moects_cuda_mutant_fp4_gemm_fast_math_ftz;

const moects_kernel moects_cuda_mutant_fp4_gemm_fast_math_ftz = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.mutant.fp4_gemm.fast_math_ftz", MOECTS_OP_FP4_GEMM,
    MOECTS_DEVICE_CUDA, "fp4_gemm.blockwise_v1", {0, 0},
    "built with --use_fast_math (-ftz=true): the FP32 scale product and accumulation flush subnormals "
    "(UE8M0 code 0 = 2^-127, tiny sA*sB) to zero",
    moects_fp4_ftz::supports, moects_fp4_ftz::run<moects_fp4_ftz::BUG_NONE>};
}
