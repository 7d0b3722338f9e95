/* mma_util.cuh: device helpers shared by the mma.sync kernels (fp4_gemm_blockwise.cuh, which also
 * builds the FP4 mutants and the grouped blockwise kernel, and moe_gemm_w4a16_mma.cu): byte permutes,
 * cp.async, ldmatrix, m16n8k16 MMAs, block-scale decoding and the pairwise output store. Inline device
 * functions only: every translation unit compiles them under its own flags (the fast-math mutant's
 * included). Not installed, not part of any ABI. */
#ifndef MOECTS_MMA_UTIL_CUH
#define MOECTS_MMA_UTIL_CUH
#include <cuda_bf16.h>
#include <stdint.h>

namespace moects_mma {

__device__ __forceinline__ uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
    return r;
}

/* Keep the first n (0..32) codes of a 32-code item, zero the rest. */
__device__ __forceinline__ void mask_codes(uint4 &v, int n)
{
    uint32_t *w = reinterpret_cast<uint32_t *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int c = n - 8 * i;
        w[i] &= c >= 8 ? 0xFFFFFFFFu : c <= 0 ? 0u : (1u << (4 * c)) - 1u;
    }
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, asynchronous; zero-filled when !in (src must still be a valid address). */
__device__ __forceinline__ void cp16(void *dst, const void *src, bool in)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)),
                 "l"(__cvta_generic_to_global(src)), "r"(in ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* UE8M0: 2^(x-127), x = 0 is the subnormal 2^-127, 0xFF NaN. UE4M3 (E4M3 fn bits, sign honoured as
 * moects__e4m3_decode does): 0x7F/0xFF NaN, exponent 0 subnormal m * 2^-9. Exact, bit-built. */
template <int G> __device__ __forceinline__ float decode_scale(uint32_t x)
{
    if (G == 32) {
        if (x == 0xFFu) return __uint_as_float(0x7FC00000u);
        return __uint_as_float(x == 0 ? 0x00400000u : x << 23);
    } else {
        const uint32_t s = (x & 0x80u) << 24, e = (x >> 3) & 15u, m = x & 7u;
        if (e == 15u && m == 7u) return __uint_as_float(0x7FC00000u);
        if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
        return __uint_as_float(s | (e + 120u) << 23 | m << 20);
    }
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}

/* d = A(16x16 f16) * B(16x8 f16) + c, FP32. */
__device__ __forceinline__ void mma16816(const uint32_t *a, const uint32_t *b, const float *c, float *d)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}

/* d += A(16x16 bf16) * B(16x8 bf16), FP32 accumulator in place. */
__device__ __forceinline__ void mma16816_bf16(const uint32_t *a, const uint32_t *b, float *d)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* D[r][c] = out_rne(v0) and D[r][c+1] = out_rne(v1), BF16 or FP32 (columns >= N skipped); pair: N even
 * and D aligned, so the two go as one 4- or 8-byte store. */
__device__ __forceinline__ void store2(void *d, int out_bf16, bool pair, int64_t N, int64_t r, int64_t c, float v0,
                                       float v1)
{
    const int64_t o = r * N + c;
    if (out_bf16) {
        __nv_bfloat16 *D = static_cast<__nv_bfloat16 *>(d);
        if (pair && c + 1 < N) {
            *reinterpret_cast<__nv_bfloat162 *>(D + o) = __floats2bfloat162_rn(v0, v1);
        } else {
            if (c < N) D[o] = __float2bfloat16_rn(v0);
            if (c + 1 < N) D[o + 1] = __float2bfloat16_rn(v1);
        }
    } else {
        float *D = static_cast<float *>(d);
        if (pair && c + 1 < N) {
            *reinterpret_cast<float2 *>(D + o) = make_float2(v0, v1);
        } else {
            if (c < N) D[o] = v0;
            if (c + 1 < N) D[o + 1] = v1;
        }
    }
}

} // namespace moects_mma

#endif
