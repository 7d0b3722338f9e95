/* fp4_gemm_blockwise.cu: kernel "cuda.fp4_gemm.blockwise" (recipe fp4_gemm.blockwise_v1, bit-exact,
 * FP8 tensor cores; see fp4_gemm_blockwise.cuh) and two of its mutants. Built without fast-math. */
#define MOECTS_FP4_NS moects_fp4_exact
#include "fp4_gemm_blockwise.cuh"

extern "C" {
extern const moects_kernel moects_cuda_fp4_gemm_blockwise;
extern const moects_kernel moects_cuda_mutant_fp4_gemm_tail_scale;
extern const moects_kernel moects_cuda_mutant_fp4_gemm_nibble_order;

const moects_kernel moects_cuda_fp4_gemm_blockwise = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.fp4_gemm.blockwise", MOECTS_OP_FP4_GEMM, MOECTS_DEVICE_CUDA,
    "fp4_gemm.blockwise_v1", {0, 0}, NULL, moects_fp4_exact::supports,
    moects_fp4_exact::run<moects_fp4_exact::BUG_NONE>};
const moects_kernel moects_cuda_mutant_fp4_gemm_tail_scale = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.mutant.fp4_gemm.tail_scale", MOECTS_OP_FP4_GEMM, MOECTS_DEVICE_CUDA,
    "fp4_gemm.blockwise_v1", {0, 0},
    "when K % g != 0 the partial last K-block uses the scale of the block before it (index off by one)",
    moects_fp4_exact::supports, moects_fp4_exact::run<moects_fp4_exact::BUG_TAIL_SCALE>};
const moects_kernel moects_cuda_mutant_fp4_gemm_nibble_order = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.mutant.fp4_gemm.nibble_order", MOECTS_OP_FP4_GEMM, MOECTS_DEVICE_CUDA,
    "fp4_gemm.blockwise_v1", {0, 0},
    "unpacks B's (the weights') element 2j from the high nibble and 2j+1 from the low one (swapped E2M1 "
    "nibble order; swapping both operands alike would cancel out)",
    moects_fp4_exact::supports, moects_fp4_exact::run<moects_fp4_exact::BUG_NIBBLE_ORDER>};
}
