/* fmcu_host.h: host shims for the CUDA intrinsics that gpu/cuda/fused_moe_math.cuh and the stage
 * headers use, so that the same device source compiles for the host as C++ (one thread, blockDim 1:
 * every grid-stride loop runs sequentially). __f*_rn become plain FP32 operations: include this only
 * from a file built with -ffp-contract=off, so that no product and sum are fused. The device's double
 * exp/tanh/erf become the C library's (ref/crmath.c's method holds for both). Users:
 * tests/fixtures/plugins/fused_moe_cuda_emu.cpp and gpu/gpuref_layer.cpp (the GPU reference's host
 * twin). Internal to gpu/, no ABI. */
#ifndef MOECTS_FMCU_HOST_H
#define MOECTS_FMCU_HOST_H
#define FMCU_HOST_EMU 1
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __shared__ static
struct uint2 {
    unsigned x, y;
};
struct fmcu_dim {
    unsigned x;
};
static const fmcu_dim blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __double2float_rn(double d) { return (float)d; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int atomicExch(int *p, int v) { int o = *p; *p = v; return o; }
static inline unsigned atomicOr(unsigned *p, unsigned v) { unsigned o = *p; *p = o | v; return o; }
static inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }
static inline void __syncthreads() {}
#endif
