/* nocuda.c: moects_device.h for builds without nvcc: there is never a device. */
#include "moects_device.h"

#include <stdio.h>

int moects__cuda_device_count(char *why, size_t why_len)
{
    if (why && why_len) snprintf(why, why_len, "built without CUDA: nvcc not found at configure time");
    return 0;
}
int moects__cuda_set_device(int dev, char *err, size_t err_len)
{
    (void)dev;
    if (err && err_len) snprintf(err, err_len, "built without CUDA");
    return -1;
}
void *moects__cuda_malloc(size_t bytes) { (void)bytes; return NULL; }
void moects__cuda_free(void *p) { (void)p; }
int moects__cuda_h2d(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return -1; }
int moects__cuda_d2h(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; return -1; }
int moects__cuda_memset(void *dst, int value, size_t bytes) { (void)dst; (void)value; (void)bytes; return -1; }
void *moects__cuda_stream(void) { return NULL; }
int moects__cuda_sync(void *stream, char *err, size_t err_len)
{
    (void)stream;
    if (err && err_len) snprintf(err, err_len, "built without CUDA");
    return -1;
}
int moects__cuda_mem_free(size_t *free_bytes)
{
    *free_bytes = 0;
    return -1;
}
int moects__cuda_device_name(char *name, size_t len)
{
    if (name && len) snprintf(name, len, "none");
    return -1;
}
int moects__cuda_time(int (*fn)(void *ctx), void *ctx, int warmup, int iters, double *median_ms)
{
    (void)fn; (void)ctx; (void)warmup; (void)iters; (void)median_ms;
    return -1;
}
int moects__cuda_copy_gbps(size_t bytes, double *gbps, char *err, size_t err_len)
{
    (void)bytes; (void)gbps;
    if (err && err_len) snprintf(err, err_len, "built without CUDA");
    return -1;
}
int moects__cuda_cublas_bf16_tflops(long M, long N, long K, double *tflops, char *err, size_t err_len)
{
    (void)M; (void)N; (void)K; (void)tflops;
    if (err && err_len) snprintf(err, err_len, "built without CUDA");
    return -1;
}
int moects__cuda_cublas_available(char *why, size_t why_len)
{
    if (why && why_len) snprintf(why, why_len, "built without CUDA");
    return 0;
}
int moects__cuda_cublas_moe_bf16_tflops(long E, const long *rows, long N, long K, double *tflops, char *err,
                                       size_t err_len)
{
    (void)E; (void)rows; (void)N; (void)K; (void)tflops;
    if (err && err_len) snprintf(err, err_len, "built without CUDA");
    return -1;
}
int moects__cuda_fill_random(void *p, size_t bytes, unsigned seed) { (void)p; (void)bytes; (void)seed; return -1; }
