/* plugin_faults_cuda.cu: CUDA kernels with resource faults for `moects run --kernel-lib` on a GPU
 * host (issue 15; tests/resource_faults_cuda.sh runs them on the H200). Each computes ep_gather
 * (recipe ep_gather.fma_v1: per (t, d) an fmaf chain over the valid slots, ascending, bf16 RNE) with
 * a plain one-thread-per-element kernel, and on cases with T >= 2 also
 *   cuda.fault.leak     cudaMalloc's 512 MiB and never frees it (a device memory leak);
 *   cuda.fault.exhaust  cudaMalloc's until the device is full (halving the block), keeps it all and
 *                       returns -1 (a mutant: FAIL_CRASH);
 *   cuda.fault.sticky   writes through an invalid device address first: cudaErrorIllegalAddress, a
 *                       sticky error that poisons the context (a mutant: FAIL_CRASH);
 *   cuda.fault.warmup   not a fault: on its first call in a process it takes a 512 MiB device and a
 *                       256 MiB host workspace and keeps them for later calls (as cuBLAS, torch and
 *                       Triton do on a first call). It passes with no note: only a run() that keeps
 *                       memory on the case's last call is named.
 * Built with the CUDA build as build/lib/libmoects_plugin_faults_cuda.so (cudart linked statically). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "moects_kernel.h"

namespace {

__global__ void ep_gather_plain(moects_ep_gather_shape s, moects_ep_gather_args a)
{
    int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= s.T * s.H) return;
    int64_t t = e / s.H, d = e % s.H;
    float acc = 0.0f;
    for (int64_t j = 0; j < s.k; j++) {
        int64_t i = t * s.k + j;
        int64_t id = s.id_dtype == MOECTS_I64 ? ((const int64_t *)a.topk_ids)[i] : ((const int32_t *)a.topk_ids)[i];
        if (id < 0) continue;
        if (s.has_expert_map && (id >= s.E_global || a.expert_map[id] < 0)) continue;
        int64_t row = a.input_index[i];
        if (row < 0 || row >= s.M_sum) continue;
        acc = fmaf(__uint_as_float((uint32_t)a.x[row * s.H + d] << 16), a.topk_weights[i], acc);
    }
    if (s.out_dtype == MOECTS_F32) ((float *)a.out)[e] = acc;
    else ((__nv_bfloat16 *)a.out)[e] = __float2bfloat16_rn(acc);
}

__global__ void write_invalid(float *p) { p[threadIdx.x] = 1.0f; }

int gather(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = (const moects_ep_gather_shape *)shape;
    int64_t n = s->T * s->H;
    if (n == 0) return 0;
    ep_gather_plain<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        *s, *(const moects_ep_gather_args *)args);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

int run_leak(const void *shape, const void *args, void *stream)
{
    void *p;
    if (((const moects_ep_gather_shape *)shape)->T >= 2) (void)cudaMalloc(&p, (size_t)512 << 20);
    return gather(shape, args, stream);
}

int run_exhaust(const void *shape, const void *args, void *stream)
{
    if (((const moects_ep_gather_shape *)shape)->T < 2) return gather(shape, args, stream);
    for (size_t block = (size_t)1 << 34; block >= (1u << 20); block /= 2)
        for (void *p; cudaMalloc(&p, block) == cudaSuccess;) {}
    (void)cudaGetLastError(); /* cudaErrorMemoryAllocation is not sticky */
    return -1;
}

int run_sticky(const void *shape, const void *args, void *stream)
{
    if (((const moects_ep_gather_shape *)shape)->T >= 2)
        write_invalid<<<1, 32, 0, (cudaStream_t)stream>>>((float *)(uintptr_t)0x10);
    return gather(shape, args, stream);
}

int run_warmup(const void *shape, const void *args, void *stream)
{
    static void *dev, *host;
    if (!dev && cudaMalloc(&dev, (size_t)512 << 20) != cudaSuccess) return -1;
    if (!host) {
        const size_t bytes = (size_t)256 << 20;
        if (!(host = malloc(bytes))) return -1;
        for (size_t i = 0; i < bytes; i += 4096) ((volatile char *)host)[i] = 1; /* resident, as a workspace */
    }
    return gather(shape, args, stream);
}

int supports(const void *, char *, size_t) { return 1; }

#define FAULT(var, nm, fn, bg)                                                                                   \
    const moects_kernel var = {MOECTS_KERNEL_ABI_VERSION, nm, MOECTS_OP_EP_GATHER, MOECTS_DEVICE_CUDA,          \
                               "ep_gather.fma_v1", {0, 0}, bg, supports, fn}
FAULT(leak, "cuda.fault.leak", run_leak, NULL);
FAULT(exhaust, "cuda.fault.exhaust", run_exhaust, "takes all device memory it can get and returns -1 (T >= 2)");
FAULT(sticky, "cuda.fault.sticky", run_sticky, "writes through an invalid address: a sticky CUDA error (T >= 2)");
FAULT(warmup, "cuda.fault.warmup", run_warmup, NULL);
const moects_kernel *const kernels[] = {&exhaust, &leak, &sticky, &warmup};

} // namespace

extern "C" __attribute__((visibility("default"))) const moects_kernel *const *moects_plugin_kernels(size_t *count)
{
    *count = sizeof kernels / sizeof kernels[0];
    return kernels;
}
