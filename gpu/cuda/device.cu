/* device.cu: gpu/moects_device.h on the CUDA runtime (linked statically) and cuBLAS (dlopen'ed). */
#include "moects_device.h"

#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.cuh"

static void put(char *buf, size_t len, const char *what, cudaError_t e)
{
    if (buf && len) snprintf(buf, len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int moects__cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) { /* the runtime's words alone: the harness says "no CUDA device (...)" */
        if (why && why_len) snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return 0;
    }
    if (n == 0 && why && why_len) snprintf(why, why_len, "cudaGetDeviceCount: 0 devices visible");
    return n;
}

int moects__cuda_set_device(int dev, char *err, size_t err_len)
{
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaFree(0); /* create the context now */
    /* Kernels take workspaces from cudaMallocAsync; the default pool's release threshold of 0 hands
     * the memory back at every synchronisation, so each timed call mapped it again (dequant_cublas at
     * DeepSeek-V3 gemm1 TP8 M=4096, 73 MB: 0.280 ms before, 0.132 ms after, H200 --perf medians).
     * Keep it, as serving engines' caching allocators do. */
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, dev);
    if (e == cudaSuccess) e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (e != cudaSuccess) {
        put(err, err_len, "cudaSetDevice", e);
        return -1;
    }
    return 0;
}

void *moects__cuda_malloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) return NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* an OOM is not sticky: clear it */
        return NULL;
    }
    return p;
}

void moects__cuda_free(void *p)
{
    if (p) (void)cudaFree(p);
}

/* Copies and fills run on the kernels' stream and are waited for. Not cudaMemcpy/cudaMemset: they go
 * to the legacy default stream, which a cudaStreamNonBlocking stream does not wait for, and both can
 * return before the device has the data (a pageable H2D copy returns once staged; a device memset is
 * asynchronous): the kernel then read half-copied inputs or had its output overwritten by the NaN
 * fill (the first full-tier run on a loaded H200, 2026-11-30). */
static int on_stream(cudaError_t e)
{
    if (MOECTS_CU(e)) return -1;
    return MOECTS_CU(cudaStreamSynchronize((cudaStream_t)moects__cuda_stream())) ? -1 : 0;
}

int moects__cuda_h2d(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return 0;
    return on_stream(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)moects__cuda_stream()));
}

int moects__cuda_d2h(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return 0;
    return on_stream(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)moects__cuda_stream()));
}

int moects__cuda_memset(void *dst, int value, size_t bytes)
{
    if (bytes == 0) return 0;
    return on_stream(cudaMemsetAsync(dst, value, bytes, (cudaStream_t)moects__cuda_stream()));
}

void *moects__cuda_stream(void)
{
    static cudaStream_t s;
    static int made;
    if (!made) {
        if (MOECTS_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) return NULL;
        made = 1;
    }
    return (void *)s;
}

int moects__cuda_sync(void *stream, char *err, size_t err_len)
{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize(); /* sticky errors from any stream */
    if (e != cudaSuccess) {
        put(err, err_len, "CUDA", e);
        return -1;
    }
    return 0;
}

int moects__cuda_mem_free(size_t *free_bytes)
{
    size_t total = 0;
    return cudaMemGetInfo(free_bytes, &total) == cudaSuccess ? 0 : -1;
}

int moects__cuda_device_name(char *name, size_t len)
{
    int dev = 0;
    cudaDeviceProp p;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        if (name && len) snprintf(name, len, "unknown");
        return -1;
    }
    if (name && len) snprintf(name, len, "%s", p.name);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int moects__cuda_time(int (*fn)(void *ctx), void *ctx, int warmup, int iters, double *median_ms)
{
    cudaStream_t s = (cudaStream_t)moects__cuda_stream();
    if (iters < 1) iters = 1;
    double *t = (double *)malloc(sizeof(double) * (size_t)iters);
    cudaEvent_t ev[2];
    int rc = -1;
    if (!t) return -1;
    if (MOECTS_CU(cudaEventCreate(&ev[0]))) goto out_t;
    if (MOECTS_CU(cudaEventCreate(&ev[1]))) goto out_e0;
    for (int i = 0; i < warmup; i++)
        if (fn(ctx)) goto out;
    if (MOECTS_CU(cudaStreamSynchronize(s))) goto out;
    for (int i = 0; i < iters; i++) {
        float ms = 0;
        if (MOECTS_CU(cudaEventRecord(ev[0], s))) goto out;
        if (fn(ctx)) goto out;
        if (MOECTS_CU(cudaEventRecord(ev[1], s))) goto out;
        if (MOECTS_CU(cudaEventSynchronize(ev[1]))) goto out;
        if (MOECTS_CU(cudaEventElapsedTime(&ms, ev[0], ev[1]))) goto out;
        t[i] = ms;
    }
    qsort(t, (size_t)iters, sizeof t[0], cmp_double);
    *median_ms = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    rc = 0;
out:
    cudaEventDestroy(ev[1]);
out_e0:
    cudaEventDestroy(ev[0]);
out_t:
    free(t);
    return rc;
}

/* Fill with a hash of the index: non-zero, finite, different per element (METHOD.md: never time
 * on zeros). */
__global__ void fill_bf16_kernel(__nv_bfloat16 *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = __float2bfloat16_rn(((float)(h & 0xFFFF) - 32768.0f) * (1.0f / 32768.0f));
    }
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    cudaStream_t s;
} copy_ctx;

static int copy_once(void *c)
{
    copy_ctx *x = (copy_ctx *)c;
    return MOECTS_CU(cudaMemcpyAsync(x->dst, x->src, x->bytes, cudaMemcpyDeviceToDevice, x->s)) ? -1 : 0;
}

int moects__cuda_copy_gbps(size_t bytes, double *gbps, char *err, size_t err_len)
{
    copy_ctx c;
    double ms = 0;
    int rc = -1;
    size_t n = bytes / 2;
    c.bytes = n * 2;
    c.s = (cudaStream_t)moects__cuda_stream();
    c.src = moects__cuda_malloc(c.bytes);
    c.dst = moects__cuda_malloc(c.bytes);
    if (!c.src || !c.dst || !c.s) {
        if (err && err_len) snprintf(err, err_len, "copy ceiling: cannot allocate 2 x %zu bytes", c.bytes);
        goto out;
    }
    fill_bf16_kernel<<<1024, 256, 0, c.s>>>((__nv_bfloat16 *)c.src, n, 1u);
    if (MOECTS_CU_LAUNCH("fill_bf16_kernel") || moects__cuda_time(copy_once, &c, 3, 21, &ms) || ms <= 0) {
        if (err && err_len) snprintf(err, err_len, "copy ceiling: timing failed");
        goto out;
    }
    *gbps = 2.0 * (double)c.bytes / (ms * 1e-3) / 1e9; /* read + written */
    rc = 0;
out:
    moects__cuda_free((void *)c.src);
    moects__cuda_free(c.dst);
    return rc;
}

typedef struct {
    const moects__cublas *cb;
    long M, N, K;
    void *a, *b, *d;
    cudaStream_t s;
    char why[256];
} gemm_ctx;

static int gemm_once(void *c)
{
    gemm_ctx *g = (gemm_ctx *)c;
    return moects__cublas_gemm_nt_bf16(g->cb, g->s, g->M, g->N, g->K, 1.0f, g->a, g->b, g->d,
                                       MOECTS__CUDA_R_16BF, g->why, sizeof g->why);
}

int moects__cuda_cublas_bf16_tflops(long M, long N, long K, double *tflops, char *err, size_t err_len)
{
    gemm_ctx g;
    double ms = 0;
    int rc = -1;
    memset(&g, 0, sizeof g);
    if (M <= 0 || N <= 0 || K <= 0) {
        if (err && err_len) snprintf(err, err_len, "cuBLAS ceiling: M, N, K must be > 0");
        return -1;
    }
    g.cb = moects__cublas_get(err, err_len);
    if (!g.cb) return -1;
    g.M = M, g.N = N, g.K = K;
    g.s = (cudaStream_t)moects__cuda_stream();
    g.a = moects__cuda_malloc((size_t)M * (size_t)K * 2);
    g.b = moects__cuda_malloc((size_t)N * (size_t)K * 2);
    g.d = moects__cuda_malloc((size_t)M * (size_t)N * 2);
    if (!g.a || !g.b || !g.d || !g.s) {
        if (err && err_len) snprintf(err, err_len, "cuBLAS ceiling: cannot allocate operands");
        goto out;
    }
    fill_bf16_kernel<<<1024, 256, 0, g.s>>>((__nv_bfloat16 *)g.a, (size_t)M * (size_t)K, 2u);
    fill_bf16_kernel<<<1024, 256, 0, g.s>>>((__nv_bfloat16 *)g.b, (size_t)N * (size_t)K, 3u);
    if (MOECTS_CU_LAUNCH("fill_bf16_kernel")) goto out;
    if (moects__cuda_time(gemm_once, &g, 5, 31, &ms) || ms <= 0) {
        if (err && err_len) snprintf(err, err_len, "cuBLAS ceiling: %s", g.why[0] ? g.why : "timing failed");
        goto out;
    }
    *tflops = 2.0 * (double)M * (double)N * (double)K / (ms * 1e-3) / 1e12;
    rc = 0;
out:
    moects__cuda_free(g.a);
    moects__cuda_free(g.b);
    moects__cuda_free(g.d);
    return rc;
}

typedef struct {
    const moects__cublas *cb;
    moects__moe_seg *seg;
    int nseg;
    long N, K;
    void *a, *b, *d, **ptrs;
    cudaStream_t s;
    char why[256];
} moe_ctx;

static int moe_once(void *c)
{
    moe_ctx *g = (moe_ctx *)c;
    return moects__cublas_moe_gemm(g->cb, g->s, g->seg, g->nseg, g->N, g->K, MOECTS__CUDA_R_16BF, g->a, g->b, g->d,
                                   MOECTS__CUDA_R_16BF, g->ptrs, g->why, sizeof g->why);
}

int moects__cuda_cublas_moe_bf16_tflops(long E, const long *rows, long N, long K, double *tflops, char *err,
                                       size_t err_len)
{
    moe_ctx g;
    double ms = 0;
    long total = 0;
    int rc = -1;
    memset(&g, 0, sizeof g);
    if (E <= 0 || N <= 0 || K <= 0 || E > 2147483647L) {
        if (err && err_len) snprintf(err, err_len, "cuBLAS grouped ceiling: E, N, K must be > 0");
        return -1;
    }
    g.cb = moects__cublas_get(err, err_len);
    if (!g.cb) return -1;
    g.seg = (moects__moe_seg *)malloc((size_t)E * sizeof *g.seg);
    if (!g.seg) return -1;
    for (long e = 0; e < E; e++) {
        g.seg[e].row0 = total, g.seg[e].rows = rows[e], g.seg[e].expert = (int)e, g.seg[e].alpha = 1.0f;
        total += rows[e];
    }
    g.nseg = (int)E, g.N = N, g.K = K;
    g.s = (cudaStream_t)moects__cuda_stream();
    g.a = moects__cuda_malloc((size_t)(total > 0 ? total : 1) * (size_t)K * 2);
    g.b = moects__cuda_malloc((size_t)E * (size_t)N * (size_t)K * 2);
    g.d = moects__cuda_malloc((size_t)(total > 0 ? total : 1) * (size_t)N * 2);
    g.ptrs = (void **)moects__cuda_malloc((size_t)E * 3 * sizeof(void *));
    if (!g.a || !g.b || !g.d || !g.ptrs || !g.s) {
        if (err && err_len) snprintf(err, err_len, "cuBLAS grouped ceiling: cannot allocate operands");
        goto out;
    }
    fill_bf16_kernel<<<1024, 256, 0, g.s>>>((__nv_bfloat16 *)g.a, (size_t)total * (size_t)K, 2u);
    fill_bf16_kernel<<<1024, 256, 0, g.s>>>((__nv_bfloat16 *)g.b, (size_t)E * (size_t)N * (size_t)K, 3u);
    if (MOECTS_CU_LAUNCH("fill_bf16_kernel")) goto out;
    if (moects__cuda_time(moe_once, &g, 3, 21, &ms) || ms <= 0) {
        if (err && err_len) snprintf(err, err_len, "cuBLAS grouped ceiling: %s", g.why[0] ? g.why : "timing failed");
        goto out;
    }
    *tflops = 2.0 * (double)total * (double)N * (double)K / (ms * 1e-3) / 1e12;
    rc = 0;
out:
    moects__cuda_free(g.a), moects__cuda_free(g.b), moects__cuda_free(g.d), moects__cuda_free(g.ptrs);
    free(g.seg);
    return rc;
}

__global__ void fill_bytes_kernel(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed ^ (uint32_t)(i >> 32) * 40503u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = (uint8_t)h;
    }
}

int moects__cuda_fill_random(void *p, size_t bytes, unsigned seed)
{
    if (!bytes) return 0;
    fill_bytes_kernel<<<4096, 256, 0, (cudaStream_t)moects__cuda_stream()>>>((uint8_t *)p, bytes, seed);
    return MOECTS_CU_LAUNCH("fill_bytes_kernel") ? -1 : 0;
}

int moects__cuda_cublas_available(char *why, size_t why_len)
{
    return moects__cublas_probe(why, why_len);
}
