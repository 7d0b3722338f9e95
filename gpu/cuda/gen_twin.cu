/* gen_twin.cu: the input generator's twin on the device (gpu/moects_gen.h): gpu/gpuref/gen_elem.h, one
 * thread an element (grid-stride), integer operations and exact FP32 scalings only, so its bytes are
 * the host's (tests/unit/test_gpu_gentwin.c checks them on a CUDA host). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gpuref/gen_elem.h"
#include "moects_device.h"
#include "moects_gen.h"

__global__ void gen_twin_kernel(moects_gen_stream s, unsigned char *out, int es)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < s.n; i += (uint64_t)gridDim.x * blockDim.x)
        ge_elem(s.kind, s.key, s.d, s.fmt, s.cols, i, out + i * (uint64_t)es);
}

extern "C" int moects__gen_fill_cuda(const moects_gen_stream *s, void *dev_out, char *why, size_t whylen)
{
    const size_t es = moects__gen_elem_bytes(s->kind);
    if (!es || s->cols < 1) return snprintf(why, whylen, "generator twin: kind %d, cols %lld", s->kind, (long long)s->cols), -1;
    if (!s->n) return 0;
    cudaStream_t st = (cudaStream_t)moects__cuda_stream();
    const uint64_t blocks = (s->n + 255) / 256;
    gen_twin_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, st>>>(*s, (unsigned char *)dev_out, (int)es);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) return snprintf(why, whylen, "generator twin: %s", cudaGetErrorString(e)), -1;
    return 0;
}
