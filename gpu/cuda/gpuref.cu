/* gpuref.cu: the GPU references on the device (gpu/moects_gpuref.h, docs/gpu_reference.md): the inputs
 * copied to the device, one thread per output element running gpu/gpuref/gpuref_elem.h (grid-stride),
 * the elements' flags ORed into one word, the output copied back; the fused MoE layer's reference
 * (gpuref_layer.cuh) stage by stage, one launch per stage. Built like every kernel here: no
 * fast-math, no flush-to-zero; the element code spells its roundings (fmaf, __fadd_rn, __fmul_rn), so
 * -fmad=true cannot contract them. Plain cudaMalloc; every copy, fill and launch on the worker's stream
 * (moects__cuda_stream, non-blocking: cudaMemcpy and cudaMemset on the legacy stream would race with
 * the launches, and did: stale device memory read as a reference, FAIL_REFERENCE on the H100 at
 * 63d9eea), waited for before the output is read. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_util.cuh"
#include "gpuref/gpuref_elem.h"
#include "gpuref/gpuref_layer.cuh"
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

/* Device copies of up to 16 host buffers and a flags word; freed together. */
typedef struct {
    void *d[16];
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
    if (e == cudaSuccess)
        s->d[s->n++] = p, e = cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)moects__cuda_stream());
    if (e != cudaSuccess) return snprintf(why, whylen, "GPU reference: %s", cudaGetErrorString(e)), -1;
    *dev = p;
    return 0;
}

/* The output buffer and the flags word, zeroed. 0, or -1 with why. */
static int alloc_out(dev_set *s, size_t out_bytes, void **dev_out, char *why, size_t whylen)
{
    *dev_out = NULL;
    cudaError_t e = cudaMalloc((void **)&s->flags, sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMemsetAsync(s->flags, 0, sizeof(unsigned), (cudaStream_t)moects__cuda_stream());
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
    if (e == cudaSuccess && out_bytes) e = cudaMemcpyAsync(host_out, dev_out, out_bytes, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaMemcpyAsync(flags, s->flags, sizeof(unsigned), cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
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

/* ---- the fused MoE layer (gpu/gpuref/gpuref_layer.cuh) ---- */

__global__ void gpuref_layer_kernel(int st, int64_t n, grl::Lp p, moects_fused_moe_args a, grl::Ws w,
                                    fmcu::CrTab tb, unsigned *flags)
{
    unsigned f = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        f |= grl::elem(st, p, a, w, tb, i);
    if (f) atomicOr(flags, f);
}

/* The layer's inputs on the device: d's pointers replaced by device copies (sizes from the shape,
 * moects_fused_moe_args' comments). 0, or -1 with why. */
static int fm_inputs(dev_set *s, const grl::Lp &p, const moects_fused_moe_args *h, moects_fused_moe_args *d,
                     char *why, size_t whylen)
{
    const size_t P = (size_t)(p.T * p.k), E = (size_t)p.E, N1 = (size_t)p.N1, H = (size_t)p.H, I = (size_t)p.I;
    const size_t w13 = E * N1 * H, w2 = E * H * I; /* elements */
    const size_t wb = p.mx ? 0 : p.fp8 ? 1 : 2;  /* bytes per element (MXFP4: half a byte) */
    const void *v[10];
    int rc = put(s, h->x, (size_t)p.T * H * 2, &v[0], why, whylen) || put(s, h->topk_ids, P * 4, &v[1], why, whylen) ||
             put(s, h->topk_weights, P * 4, &v[2], why, whylen) ||
             put(s, p.has_map ? h->expert_map : NULL, (size_t)p.Eg * 4, &v[3], why, whylen) ||
             put(s, h->w13, wb ? w13 * wb : w13 / 2, &v[4], why, whylen) ||
             put(s, h->w2, wb ? w2 * wb : w2 / 2, &v[5], why, whylen) ||
             put(s, p.mx ? h->w13_scale : NULL, w13 / 32, &v[6], why, whylen) ||
             put(s, p.mx ? h->w2_scale : NULL, w2 / 32, &v[7], why, whylen) ||
             put(s, p.has_bias ? h->b13 : NULL, E * N1 * 4, &v[8], why, whylen) ||
             put(s, p.has_bias ? h->b2 : NULL, E * H * 4, &v[9], why, whylen);
    if (rc) return -1;
    *d = *h;
    d->x = (const uint16_t *)v[0], d->topk_ids = (const int32_t *)v[1], d->topk_weights = (const float *)v[2];
    d->expert_map = (const int32_t *)v[3], d->w13 = v[4], d->w2 = v[5];
    d->w13_scale = (const uint8_t *)v[6], d->w2_scale = (const uint8_t *)v[7];
    d->b13 = (const float *)v[8], d->b2 = (const float *)v[9];
    if (!p.fp8) return 0;
    const void *bs[2];
    if (put(s, h->w13_block_scale, w13 / (128 * 128) * 4, &bs[0], why, whylen) ||
        put(s, h->w2_block_scale, w2 / (128 * 128) * 4, &bs[1], why, whylen))
        return -1;
    d->w13_block_scale = (const float *)bs[0], d->w2_block_scale = (const float *)bs[1];
    return 0;
}

/* The stages' workspace (grl::Ws) in one device block, zeroed. 0, or -1 with why. */
static int fm_workspace(dev_set *s, const grl::Lp &p, grl::Ws *w, char *why, size_t whylen)
{
    const size_t P = (size_t)(p.T * p.k);
    const size_t n[9] = {P * 4, p.fp8 ? P * (size_t)p.H * 4 : 0, P * (size_t)p.kb1 * 4, P * (size_t)p.N1 * 4,
                         P * (size_t)p.I * 4, P * (size_t)p.I * 8, P * (size_t)p.ng * 4, P * (size_t)p.H * 4, 4};
    size_t off[9], total = 0;
    for (int i = 0; i < 9; i++) off[i] = total, total += (n[i] + 255) & ~(size_t)255;
    char *b = NULL;
    cudaError_t e = cudaMalloc((void **)&b, total);
    if (e == cudaSuccess) s->d[s->n++] = b, e = cudaMemsetAsync(b, 0, total, (cudaStream_t)moects__cuda_stream());
    if (e != cudaSuccess) return snprintf(why, whylen, "GPU reference: %s", cudaGetErrorString(e)), -1;
    *w = grl::Ws{(int *)(b + off[0]), (float *)(b + off[1]), (float *)(b + off[2]), (float *)(b + off[3]),
                 (float *)(b + off[4]), (double *)(b + off[5]), (float *)(b + off[6]), (float *)(b + off[7]),
                 (int *)(b + off[8])};
    return 0;
}

extern "C" int moects__gpuref_cuda_fm(const moects_fused_moe_shape *shape, const moects_fused_moe_args *args,
                                      const moects_layer_recipe *r, unsigned *flags, char *why, size_t whylen)
{
    const grl::Lp p = grl::params(shape, r);
    dev_set s = {};
    fmcu::CrTab tb;
    moects_fused_moe_args d;
    grl::Ws w;
    const size_t out_bytes = (size_t)(p.T * p.H) * (p.out_f32 ? 4 : 2);
    int rc = fmcu::device_cr_table(&tb) ? (snprintf(why, whylen, "GPU reference: the exp/tanh/erf table"), -1) : 0;
    void *out = NULL;
    rc = rc || fm_inputs(&s, p, args, &d, why, whylen) || fm_workspace(&s, p, &w, why, whylen) ||
         alloc_out(&s, out_bytes, &out, why, whylen);
    if (!rc) {
        d.out = out;
        cudaStream_t st = (cudaStream_t)moects__cuda_stream();
        for (int stage = 0; stage < grl::ST_N; stage++) {
            const int64_t n = grl::stage_count(p, stage);
            if (n > 0) gpuref_layer_kernel<<<GRID, 256, 0, st>>>(stage, n, p, d, w, tb, s.flags);
        }
        rc = fetch(&s, st, args->out, out, out_bytes, flags, why, whylen);
        int err = 0;
        if (!rc && (cudaMemcpyAsync(&err, w.err, sizeof err, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                    cudaStreamSynchronize(st) != cudaSuccess))
            rc = -1;
        if (err) *flags |= GR_CRMISS;
    }
    set_free(&s);
    return rc ? -1 : 0;
}

/* ---- moe_gemm exact_v1, FP4 x FP4 (gpuref_elem.h gr_mg_elem) ---- */

__global__ void gpuref_mg_kernel(gr_mg p, unsigned *flags)
{
    const int64_t n = p.rows * p.N;
    unsigned f = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        f |= gr_mg_elem(&p, i / p.N, i % p.N);
    if (f) atomicOr(flags, f);
}

extern "C" int moects__gpuref_cuda_mg(const void *params, const size_t sizes[6], unsigned *flags, char *why,
                                      size_t whylen)
{
    const gr_mg *h = (const gr_mg *)params;
    gr_mg p = *h;
    dev_set s = {};
    const size_t rows = (size_t)h->rows;
    const void *re, *sb0, *sr, *a, *b, *sa, *sb, *al, *d;
    void *none;
    int rc = put(&s, h->row_e, rows * 4, &re, why, whylen) || put(&s, h->sa_base, rows * 8, &sb0, why, whylen) ||
             put(&s, h->sa_row, rows * 8, &sr, why, whylen) || put(&s, h->a, sizes[0], &a, why, whylen) ||
             put(&s, h->b, sizes[1], &b, why, whylen) || put(&s, h->sa, sizes[2], &sa, why, whylen) ||
             put(&s, h->sb, sizes[3], &sb, why, whylen) || put(&s, h->alpha, sizes[4], &al, why, whylen) ||
             put(&s, h->d, sizes[5], &d, why, whylen) || alloc_out(&s, 0, &none, why, whylen);
    if (!rc) {
        p.row_e = (const int32_t *)re, p.sa_base = (const int64_t *)sb0, p.sa_row = (const int64_t *)sr;
        p.a = (const uint8_t *)a, p.b = (const uint8_t *)b, p.sa = (const uint8_t *)sa, p.sb = (const uint8_t *)sb;
        p.alpha = (const float *)al, p.d = (void *)d;
        cudaStream_t st = (cudaStream_t)moects__cuda_stream();
        gpuref_mg_kernel<<<GRID, 256, 0, st>>>(p, s.flags);
        rc = fetch(&s, st, h->d, p.d, sizes[5], flags, why, whylen);
    }
    set_free(&s);
    return rc ? -1 : 0;
}
