/* moects_device.h: host-side CUDA helpers the harness calls (gpu/cuda/device.cu), so that the
 * harness itself needs no CUDA headers. A build without nvcc links gpu/nocuda.c, where every
 * call reports that no device is present. All functions return 0 on success, else non-zero
 * with a one-line message in the caller's buffer where there is one. */
#ifndef MOECTS_DEVICE_H
#define MOECTS_DEVICE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Number of visible CUDA devices (>= 0); 0 with the reason in why when none (no driver, no GPU,
 * built without CUDA): "cudaGetDeviceCount: <cudaGetErrorString>", "cudaGetDeviceCount: 0 devices
 * visible" or "built without CUDA: ...", which the harness puts after "no CUDA device (". Initialises
 * CUDA: call it in a worker, never in the parent. */
int moects__cuda_device_count(char *why, size_t why_len);
int moects__cuda_set_device(int dev, char *err, size_t err_len);
void *moects__cuda_malloc(size_t bytes); /* NULL on failure (or bytes == 0) */
void moects__cuda_free(void *p);
int moects__cuda_h2d(void *dst, const void *src, size_t bytes);
int moects__cuda_d2h(void *dst, const void *src, size_t bytes);
int moects__cuda_memset(void *dst, int value, size_t bytes);
void *moects__cuda_stream(void); /* the worker's stream (cudaStream_t) */
/* Synchronise the stream and fetch any pending error (sticky errors included). */
int moects__cuda_sync(void *stream, char *err, size_t err_len);
/* Free memory of the current device in bytes (cudaMemGetInfo): the runner's device-leak check.
 * 0, or -1 (no device, or a sticky error). */
int moects__cuda_mem_free(size_t *free_bytes);
/* Name of the current device, e.g. "NVIDIA H200". */
int moects__cuda_device_name(char *name, size_t len);
/* Time fn(ctx) with CUDA events: warmup runs, then iters runs; writes the median in ms. */
int moects__cuda_time(int (*fn)(void *ctx), void *ctx, int warmup, int iters, double *median_ms);
/* --perf ceilings, measured in the same run on the current device:
 * device-to-device cudaMemcpy bandwidth in GB/s (bytes read + written) over `bytes` bytes,
 * and cuBLAS BF16 GEMM (FP32 accumulate, NT layout, bf16 out) rate in TFLOP/s for M, N, K. */
int moects__cuda_copy_gbps(size_t bytes, double *gbps, char *err, size_t err_len);
int moects__cuda_cublas_bf16_tflops(long M, long N, long K, double *tflops, char *err, size_t err_len);
/* cuBLAS BF16 grouped GEMM of a MoE layer (FP32 compute, bf16 out): expert e multiplies rows[e] rows
 * of A [sum rows, K] by its own B_e [N, K]^T, all experts in one cublasGemmGroupedBatchedEx call (one
 * cublasGemmEx per expert where the library lacks it); TFLOP/s over 2 * sum(rows) * N * K. The
 * --perf ceiling of the grouped moe_gemm kernels. */
int moects__cuda_cublas_moe_bf16_tflops(long E, const long *rows, long N, long K, double *tflops, char *err,
                                       size_t err_len);
/* Fill bytes of device memory with a hash of the byte index and seed (perf operands, never zeros). */
int moects__cuda_fill_random(void *p, size_t bytes, unsigned seed);
/* 1 if cuBLAS (libcublas.so.13, dlopen'ed, never linked) can be loaded, else 0 with the reason in
 * why. dlopen/dlsym only, no CUDA call: safe in the parent. A kernel that needs cuBLAS
 * ("cuda.fp4_gemm.dequant_cublas") also refuses in supports() with this reason when it is missing;
 * the harness may report those cases as SKIP. */
int moects__cuda_cublas_available(char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
