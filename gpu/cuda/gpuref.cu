/* gpuref.cu: the GPU references on the device (gpu/moects_gpuref.h, docs/gpu_reference.md): the inputs
 * copied to the device, one thread per output element running gpu/gpuref/gpuref_elem.h (grid-stride),
 * the elements' flags ORed into one word, the output copied back. Built like every kernel here: no
 * fast-math, no flush-to-zero; the element code spells its roundings (fmaf, __fadd_rn, __fmul_rn), so
 * -fmad=true cannot contract them. Plain cudaMalloc, the worker's stream, synchronous. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_util.cuh"
#include "gpuref/gpuref_elem.h"
#include "moects_device.h"
#include "moects_gpuref.h"

__global__ void gpuref_eg_kernel(gr_eg p, unsigned *flags)
{
    const int64_t n = p.T * p.H;
    unsigned f = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        f |= gr_eg_elem(&p, i / p.H, i % p.H);
    if (f) atomicOr(flags, f);
}

__global__ void gpuref_fg_kernel(gr_fg p, unsigned *flags)
{
    const int64_t n = p.M * p.N;
    unsigned f = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        f |= gr_fg_elem(&p, i / p.N, i % p.N); /* neighbours share A's row: its bytes come from L1/L2 */
    if (f) atomicOr(flags, f);
}

/* Device copies of up to 6 host buffers and a flags word; freed together. */
typedef struct {
    void *d[6];
    int n;
    unsigned *flags;
} dev_set;

static void set_free(dev_set *s)
{
    for (int i = 0; i < s->n; i++) cudaFree(s->d[i]);
    if (s->flags) cudaFree(s->flags);
}

/* A device copy of bytes at host (NULL, 0 bytes: NULL). 0, or -1 with why. */
static int put(dev_set *s, const void *host, size_t bytes, const void **dev, char *why, size_t whylen)
{
    *dev = NULL;
    if (!host || !bytes) return 0;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) s->d[s->n++] = p, e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return snprintf(why, whylen, "GPU reference: %s", cudaGetErrorString(e)), -1;
    *dev = p;
    return 0;
}

/* The output buffer and the flags word, zeroed. 0, or -1 with why. */
static int alloc_out(dev_set *s, size_t out_bytes, void **dev_out, char *why, size_t whylen)
{
    *dev_out = NULL;
    cudaError_t e = cudaMalloc((void **)&s->flags, sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMemset(s->flags, 0, sizeof(unsigned));
    if (e == cudaSuccess && out_bytes) e = cudaMalloc(dev_out, out_bytes);
    if (e == cudaSuccess && out_bytes) s->d[s->n++] = *dev_out;
    if (e != cudaSuccess) return snprintf(why, whylen, "GPU reference: %s", cudaGetErrorString(e)), -1;
    return 0;
}

/* After the launch: its error, the sync, the output and flags copied back. 0, or -1 with why. */
static int fetch(dev_set *s, cudaStream_t st, void *host_out, const void *dev_out, size_t out_bytes,
                 unsigned *flags, char *why, size_t whylen)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e == cudaSuccess && out_bytes) e = cudaMemcpy(host_out, dev_out, out_bytes, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(flags, s->flags, sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return snprintf(why, whylen, "GPU reference: %s", cudaGetErrorString(e)), -1;
    return 0;
}

#define GRID 1024 /* blocks of 256 threads, grid-stride over the elements */

extern "C" int moects__gpuref_cuda_eg(const void *params, size_t x_bytes, size_t ids_bytes, size_t map_bytes,
                                      unsigned *flags, char *why, size_t whylen)
{
    const gr_eg *h = (const gr_eg *)params;
    gr_eg p = *h;
    dev_set s = {};
    const size_t slots = (size_t)(h->T * h->k), out_bytes = (size_t)(h->T * h->H) * (h->out_bf16 ? 2 : 4);
    const void *x, *ids, *w, *idx, *map;
    int rc = put(&s, h->x, x_bytes, &x, why, whylen) || put(&s, h->ids, ids_bytes, &ids, why, whylen) ||
             put(&s, h->w, slots * 4, &w, why, whylen) || put(&s, h->idx, slots * 4, &idx, why, whylen) ||
             put(&s, h->map, map_bytes, &map, why, whylen) || alloc_out(&s, out_bytes, &p.out, why, whylen);
    if (!rc) {
        p.x = (const uint16_t *)x, p.ids = ids, p.w = (const float *)w, p.idx = (const int32_t *)idx;
        p.map = (const int32_t *)map;
        cudaStream_t st = (cudaStream_t)moects__cuda_stream();
        if (out_bytes) gpuref_eg_kernel<<<GRID, 256, 0, st>>>(p, s.flags);
        rc = fetch(&s, st, h->out, p.out, out_bytes, flags, why, whylen);
    }
    set_free(&s);
    return rc ? -1 : 0;
}

extern "C" int moects__gpuref_cuda_fg(const void *params, size_t sa_bytes, size_t sb_bytes, unsigned *flags,
                                      char *why, size_t whylen)
{
    const gr_fg *h = (const gr_fg *)params;
    gr_fg p = *h;
    dev_set s = {};
    const size_t rb = (size_t)(h->K + 1) / 2, out_bytes = (size_t)(h->M * h->N) * (h->out_bf16 ? 2 : 4);
    const void *a, *b, *sa, *sb;
    int rc = put(&s, h->a, (size_t)h->M * rb, &a, why, whylen) || put(&s, h->b, (size_t)h->N * rb, &b, why, whylen) ||
             put(&s, h->sa, sa_bytes, &sa, why, whylen) || put(&s, h->sb, sb_bytes, &sb, why, whylen) ||
             alloc_out(&s, out_bytes, &p.d, why, whylen);
    if (!rc) {
        p.a = (const uint8_t *)a, p.b = (const uint8_t *)b, p.sa = (const uint8_t *)sa, p.sb = (const uint8_t *)sb;
        cudaStream_t st = (cudaStream_t)moects__cuda_stream();
        if (out_bytes) gpuref_fg_kernel<<<GRID, 256, 0, st>>>(p, s.flags);
        rc = fetch(&s, st, h->d, p.d, out_bytes, flags, why, whylen);
    }
    set_free(&s);
    return rc ? -1 : 0;
}
