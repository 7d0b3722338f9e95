/* cuda_util.cuh: internals shared by the CUDA kernels (not installed, not part of any ABI):
 * error-to-stderr helpers and the cuBLAS loader (cuBLAS is dlopen'ed at first use, never
 * linked: the build machine has no static cuBLAS). */
#ifndef MOECTS_CUDA_UTIL_CUH
#define MOECTS_CUDA_UTIL_CUH
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "moects_types.h"

/* Report a failed CUDA runtime call on stderr as "file:line: what: cudaError text"; returns
 * non-zero when e != cudaSuccess. */
int moects__cuda_check(cudaError_t e, const char *what, const char *file, int line);
#define MOECTS_CU(call) moects__cuda_check((call), #call, __FILE__, __LINE__)

/* The last launch's error (cudaGetLastError), reported like MOECTS_CU. */
#define MOECTS_CU_LAUNCH(name) moects__cuda_check(cudaGetLastError(), name, __FILE__, __LINE__)

/* cuBLAS through dlopen("libcublas.so.13"). The few entry points moects uses, typed with
 * plain C types so that no cuBLAS header is needed at link time. */
typedef struct moects__cublas {
    void *lib;
    int (*create)(void **handle);                     /* cublasCreate_v2 */
    int (*destroy)(void *handle);                     /* cublasDestroy_v2 */
    int (*set_stream)(void *handle, cudaStream_t s);  /* cublasSetStream_v2 */
    /* cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta,
     * C, Ctype, ldc, computeType, algo) */
    int (*gemm_ex)(void *handle, int transa, int transb, int m, int n, int k, const void *alpha,
                   const void *A, int Atype, int lda, const void *B, int Btype, int ldb,
                   const void *beta, void *C, int Ctype, int ldc, int computeType, int algo);
    /* cublasGemmGroupedBatchedEx (cuBLAS >= 12.5; NULL when the library lacks it): per group g the host
     * arrays transa, transb, m, n, k, alpha (float), lda, ldb, beta, ldc, group_size; device arrays of
     * A, B, C pointers (sum of group sizes). */
    int (*grouped)(void *handle, const int *transa, const int *transb, const int *m, const int *n, const int *k,
                   const void *alpha, const void *const *A, int Atype, const int *lda, const void *const *B,
                   int Btype, const int *ldb, const void *beta, void *const *C, int Ctype, const int *ldc,
                   int group_count, const int *group_size, int computeType);
    /* cublasSetMathMode: the handle gets CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
     * so split-K partial sums are reduced in the compute type (FP32), never in a BF16 output's type
     * (cuBLASLt's REDUCTION_SCHEME_OUTPUT_TYPE), which the kernels' declared class (FP32 accumulation)
     * excludes; TF32 stays off. */
    int (*set_math_mode)(void *handle, int mode);
    /* cublasSetWorkspace_v2 (optional): the handle's workspace, zeroed once (see bind_stream). */
    int (*set_workspace)(void *handle, void *ws, size_t bytes);
    void *handle; /* created on first use, one per process (the worker) */
    void *ws;     /* MOECTS__CUBLAS_WS_BYTES of zeroed device memory, or NULL (cuBLAS's own pool) */
} moects__cublas;
#define MOECTS__CUBLAS_WS_BYTES ((size_t)32 << 20) /* the size cuBLAS recommends on Hopper */

/* 1 if libcublas.so.13 loads and has the entry points (dlopen/dlsym only: no CUDA call, so a
 * parent that forks workers may ask), else 0 with the reason in why. */
int moects__cublas_probe(char *why, size_t why_len);

/* Load cuBLAS and create the process's handle once, in math mode MOECTS__CUBLAS_MATH_FP32_REDUCTION.
 * Returns the loader, or NULL with a one-line reason in why (library missing, symbol missing,
 * cublasCreate or cublasSetMathMode failed). */
const moects__cublas *moects__cublas_get(char *why, size_t why_len);

/* cuBLAS constants (cublas_api.h, library_types.h; stable across CUDA 11-13). */
enum {
    MOECTS__CUBLAS_OP_N = 0,
    MOECTS__CUBLAS_OP_T = 1,
    MOECTS__CUDA_R_32F = 0,
    MOECTS__CUDA_R_16BF = 14,
    MOECTS__CUBLAS_COMPUTE_32F = 68,
    MOECTS__CUBLAS_MATH_FP32_REDUCTION = 0 | 16, /* CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION */
    MOECTS__CUBLAS_GEMM_DEFAULT = -1
};

/* D[M,N] (row-major, ld N) = alpha * A[M,K] * B[N,K]^T, BF16 operands (K-contiguous), FP32
 * accumulate, d_type MOECTS__CUDA_R_16BF or MOECTS__CUDA_R_32F. Returns 0 or non-zero with why. */
int moects__cublas_gemm_nt_bf16(const moects__cublas *cb, cudaStream_t s, long M, long N, long K,
                                float alpha, const void *A, const void *B, void *D, int d_type,
                                char *why, size_t why_len);

/* One GEMM of a grouped MoE problem: rows [row0, row0 + rows) of A and D, with expert's B and alpha. */
typedef struct {
    long row0, rows;
    int expert;
    float alpha;
} moects__moe_seg;

/* For every segment: D[row0 + i][:] = alpha * A[row0 + i][:] * B[expert]^T, A [rows][K] and B [E][N][K]
 * of in_type (MOECTS__CUDA_R_16BF, or MOECTS__CUDA_R_32F: FP32 arithmetic, no TF32), K-contiguous, D
 * [rows][N] of d_type (BF16 or FP32), FP32 compute; one cublasGemmGroupedBatchedEx call when the
 * library has it (ptrs: device room for 3 * nseg pointers), else one cublasGemmEx per segment.
 * Segments of 0 rows are skipped. Returns 0 or non-zero with why. */
int moects__cublas_moe_gemm(const moects__cublas *cb, cudaStream_t s, const moects__moe_seg *seg, int nseg, long N,
                            long K, int in_type, const void *A, const void *B, void *D, int d_type, void **ptrs,
                            char *why, size_t why_len);
/* How many moects__cublas_moe_gemm calls of this process ran as one cublasGemmGroupedBatchedEx (the
 * rest: per-expert cublasGemmEx). The grouped call logs no cuBLASLt algorithm; tools/cublas_schemes.cu
 * tells its calls apart by this count. */
extern unsigned long moects__cublas_grouped_calls;

/* Scale layout (linear or 128x4-swizzled) and output type (BF16 or FP32) of a block-scaled GEMM, dense
 * or grouped: 1, or 0 with the reason in why. */
int moects__scales_out_check(moects_scale_layout scale_layout, moects_dtype out_dtype, char *why, size_t why_len);

/* Shape checks of the grouped MoE GEMM kernels (moe_gemm_w4a16.cu), 1 or 0 with the reason in why:
 * E >= 1, M, N, K >= 0, N and K below 2^31, a known row layout, scale layout and output type (BF16 or
 * FP32); _w4a16_shape adds format W4A16 with MXFP4 or NVFP4 weights. */
int moects__moe_gemm_shape_common(const moects_moe_gemm_shape *s, char *why, size_t why_len);
int moects__moe_gemm_w4a16_shape(const moects_moe_gemm_shape *s, char *why, size_t why_len);

#endif
