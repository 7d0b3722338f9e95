/* moe_gemm_w4a16.cu: kernels "cuda.moe_gemm.w4a16_cublas" and "cuda.moe_gemm.w4a8_cublas": the grouped MoE GEMM with BF16 activations
 * and MXFP4 or NVFP4 weights (W4A16, DESIGN.md "Grouped MoE GEMM"), the Hopper route of the engines
 * that have no FP4 tensor cores: dequantize every expert's weights to BF16, then one cuBLAS grouped
 * GEMM (cublasGemmGroupedBatchedEx, one group per expert segment; per-expert cublasGemmEx where the
 * library lacks it) with FP32 compute and alpha[e] applied by cuBLAS. Contiguous, masked and offsets
 * row layouts.
 *
 * Numerics: dec(E2M1) * block scale is computed in FP32 (exact: at most 6 significant bits) and
 * rounded to BF16, exact while it is in BF16's range (BF16 has FP32's exponent range; UE8M0 254 with
 * |code| >= 2 overflows to Inf, and so does the reference's value in FP32 output). Products of two BF16
 * are exact in the tensor cores; the sums are FP32 in cuBLAS's own order (split-K included), which no
 * recipe names, so the kernel declares its accumulation class instead: 24 bits, truncation (the
 * conservative reading of tensor-core accumulation), judged per element against the forward error
 * bound of DESIGN.md "Bounded verdicts" around exact_v1 (PASS_BOUNDED). No split-K reduction in BF16:
 * the handle's math mode has CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (cuda_util.cu), so a
 * split-K partial sum is added in FP32 (cuBLAS's default would let cuBLASLt add them in the BF16
 * output, REDUCTION_SCHEME_OUTPUT_TYPE, as it did for cuda.fp4_gemm.dequant_cublas at N 100, M 5,
 * K 2688 on the H200: issue 25); tools/h200_check.sh logs the scheme cuBLASLt picks.
 *
 * Row metadata (m_indices, masked_m or expert_offsets) and alpha are copied to the host first (one
 * stream synchronisation): cuBLAS takes the group sizes on the host. Contiguous: each run of rows with
 * one valid id is a segment; rows of id -1 are neither computed nor written.
 *
 * Kernel "cuda.moe_gemm.w4a8_cublas" (W4A8: E4M3 activations with UE8M0 scales per 1x128 or 1x32,
 * MXFP4 weights) takes the same route in FP32: A and B dequantized to FP32 (exact), cuBLAS FP32 grouped
 * GEMM (FP32 fused multiply-adds, no TF32), the same declared class. FP32 activation scales are refused
 * (E4M3 x an FP32 scale rounds). */
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.cuh"
#include "moects_kernel.h"

/* Dimensions, row layout, scale layout and output type of a grouped GEMM (the format is the caller's). */
int moects__moe_gemm_shape_common(const moects_moe_gemm_shape *s, char *why, size_t why_len)
{
    if (s->E < 1 || s->M < 0 || s->N < 0 || s->K < 0 || s->N > 2147483647LL || s->K > 2147483647LL) {
        snprintf(why, why_len, "shape: E=%lld M=%lld N=%lld K=%lld: need E >= 1, M, N, K >= 0, N and K below 2^31",
                 (long long)s->E, (long long)s->M, (long long)s->N, (long long)s->K);
        return 0;
    }
    if (s->rows != MOECTS_ROWS_CONTIGUOUS && s->rows != MOECTS_ROWS_MASKED && s->rows != MOECTS_ROWS_OFFSETS) {
        snprintf(why, why_len, "layout: unknown row layout %d", (int)s->rows);
        return 0;
    }
    if (!moects__scales_out_check(s->scale_layout, s->out_dtype, why, why_len)) return 0;
    return 1;
}

/* W4A16 (BF16 x MXFP4 or NVFP4) and the common checks: what every W4A16 kernel here takes. */
int moects__moe_gemm_w4a16_shape(const moects_moe_gemm_shape *s, char *why, size_t why_len)
{
    if (s->format != MOECTS_MOE_W4A16) {
        snprintf(why, why_len, "format: takes W4A16 only (BF16 activations x FP4 weights)");
        return 0;
    }
    if (s->b_format != MOECTS_FP4_MXFP4 && s->b_format != MOECTS_FP4_NVFP4) {
        snprintf(why, why_len, "format: b_format must be MXFP4 or NVFP4");
        return 0;
    }
    return moects__moe_gemm_shape_common(s, why, why_len);
}

namespace {

char g_err[256];
const char *last_error() { return g_err; }

/* E2M1 code -> float (bit-built, exact); block scale -> float: UE8M0 (g = 32: 0xFF NaN, 0 the subnormal
 * 2^-127) or UE4M3 (g = 16: 0x7F/0xFF NaN, exponent 0 subnormal). */
__device__ __forceinline__ float e2m1(uint32_t c)
{
    const uint32_t e = (c >> 1) & 3u, m = c & 1u;
    const uint32_t mag = e == 0 ? (m ? 0x3F000000u : 0u) : ((e + 126u) << 23 | m << 22);
    return __uint_as_float(mag | (c & 8u) << 28);
}
__device__ __forceinline__ float block_scale(uint32_t x, int g)
{
    if (g == 32) return x == 0xFFu ? __uint_as_float(0x7FC00000u) : __uint_as_float(x == 0 ? 0x00400000u : x << 23);
    const uint32_t s = (x & 0x80u) << 24, e = (x >> 3) & 15u, m = x & 7u;
    if (e == 15u && m == 7u) return __uint_as_float(0x7FC00000u);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
    return __uint_as_float(s | (e + 120u) << 23 | m << 20);
}

/* Scale of (expert e, row n, K-block kb): expert e's scales at sb + e * ebytes, linear or 128x4-swizzled. */
__device__ __forceinline__ float scale_at(const uint8_t *sb, int64_t ebytes, int64_t e, int64_t n, int64_t kb,
                                          int64_t nkb, int g, int swizzled)
{
    const int64_t off = swizzled ? (n / 128) * ((nkb + 3) / 4) * 512 + (n % 32) * 16 + ((n / 32) % 4) * 4 +
                                       (kb / 4) * 512 + kb % 4
                                 : n * nkb + kb;
    return block_scale(__ldg(sb + e * ebytes + off), g);
}

/* B [E][N][ceil(K/2)] codes -> out [E][N][K] BF16, dec(code) * scale (one exact FP32 multiply, then RNE).
 * VEC (K % 16 == 0): one thread per 8 packed bytes (16 codes of one K-block, g = 16 or 32), one 8-byte
 * load and two 16-byte stores; else one thread per packed byte (two codes of one K-block). */
template <bool VEC>
__global__ void dequant_b(const uint8_t *b, const uint8_t *sb, int64_t E, int64_t N, int64_t K, int g, int swizzled,
                          int64_t ebytes, __nv_bfloat16 *out)
{
    const int64_t rb = (K + 1) / 2, nkb = (K + g - 1) / g, per = VEC ? 8 : 1;
    const int64_t total = E * N * rb / per;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i * per / rb, j = i * per % rb, e = row / N, n = row % N, kb = 2 * j / g;
        const float s = scale_at(sb, ebytes, e, n, kb, nkb, g, swizzled);
        __nv_bfloat16 *o = out + row * K + 2 * j;
        if (VEC) {
            const uint2 w = __ldg(reinterpret_cast<const uint2 *>(b) + i);
            __align__(16) __nv_bfloat162 v[8];
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const uint32_t byte = ((q < 4 ? w.x : w.y) >> (8 * (q % 4))) & 0xFFu;
                v[q] = __floats2bfloat162_rn(__fmul_rn(e2m1(byte & 15u), s), __fmul_rn(e2m1(byte >> 4), s));
            }
            reinterpret_cast<uint4 *>(o)[0] = reinterpret_cast<const uint4 *>(v)[0];
            reinterpret_cast<uint4 *>(o)[1] = reinterpret_cast<const uint4 *>(v)[1];
        } else {
            const uint32_t byte = __ldg(b + i);
            o[0] = __float2bfloat16_rn(__fmul_rn(e2m1(byte & 15u), s));
            if (2 * j + 1 < K) o[1] = __float2bfloat16_rn(__fmul_rn(e2m1(byte >> 4), s));
        }
    }
}

/* The limits of the cuBLAS route, shared by both kernels. */
int cublas_limits(const moects_moe_gemm_shape *s, char *why, size_t why_len)
{
    if (s->M > 2147483647LL) {
        snprintf(why, why_len, "shape: rows per expert must fit in int (cuBLAS)");
        return 0;
    }
    return moects__cublas_probe(why, why_len);
}

int supports(const void *shape, char *why, size_t why_len)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    return moects__moe_gemm_w4a16_shape(s, why, why_len) && cublas_limits(s, why, why_len);
}

int supports_w4a8(const void *shape, char *why, size_t why_len)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    if (s->format != MOECTS_MOE_W4A8 || s->b_format != MOECTS_FP4_MXFP4) {
        snprintf(why, why_len, "format: takes W4A8 only (E4M3 activations x MXFP4 weights)");
        return 0;
    }
    if (s->a_scale_block != 32 && s->a_scale_block != 128) {
        snprintf(why, why_len, "format: a_scale_block must be 32 or 128 (is %lld)", (long long)s->a_scale_block);
        return 0;
    }
    if (s->a_scale_f32) {
        snprintf(why, why_len, "format: FP32 activation scales: E4M3 x an FP32 scale is not exact in FP32 (UE8M0 only)");
        return 0;
    }
    return moects__moe_gemm_shape_common(s, why, why_len) && cublas_limits(s, why, why_len);
}

/* The segments (row0, rows, expert, alpha) from the row metadata, on the host (seg: room for
 * max(M, E) entries). Returns the count, or -1 with g_err set. */
int segments(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, cudaStream_t st, moects__moe_seg *seg)
{
    const int64_t E = s->E, M = s->M;
    float *alpha = (float *)malloc((size_t)E * 4);
    int64_t *meta = (int64_t *)malloc((size_t)(M > E ? M : E + 1) * 8 + 8);
    int n = -1;
    if (!alpha || !meta) goto out;
    for (int64_t e = 0; e < E; e++) alpha[e] = 1.0f;
    if (a->alpha && MOECTS_CU(cudaMemcpyAsync(alpha, a->alpha, (size_t)E * 4, cudaMemcpyDeviceToHost, st))) goto out;
    if (s->rows == MOECTS_ROWS_OFFSETS) {
        if (MOECTS_CU(cudaMemcpyAsync(meta, a->expert_offsets, (size_t)(E + 1) * 8, cudaMemcpyDeviceToHost, st))) goto out;
    } else {
        const int64_t cnt = s->rows == MOECTS_ROWS_MASKED ? E : M;
        const int32_t *src = s->rows == MOECTS_ROWS_MASKED ? a->masked_m : a->m_indices;
        if (MOECTS_CU(cudaMemcpyAsync(meta, src, (size_t)cnt * 4, cudaMemcpyDeviceToHost, st))) goto out;
    }
    if (MOECTS_CU(cudaStreamSynchronize(st))) goto out;
    n = 0;
    if (s->rows == MOECTS_ROWS_OFFSETS) {
        for (int64_t e = 0; e < E; e++) {
            const int64_t lo = meta[e] < 0 ? 0 : meta[e] > M ? M : meta[e];
            const int64_t hi = meta[e + 1] < lo ? lo : meta[e + 1] > M ? M : meta[e + 1];
            seg[n++] = moects__moe_seg{(long)lo, (long)(hi - lo), (int)e, alpha[e]};
        }
    } else if (s->rows == MOECTS_ROWS_MASKED) {
        const int32_t *mm = (const int32_t *)meta;
        for (int64_t e = 0; e < E; e++) {
            const int64_t c = mm[e] < 0 ? 0 : mm[e] > M ? M : mm[e];
            seg[n++] = moects__moe_seg{(long)(e * M), (long)c, (int)e, alpha[e]};
        }
    } else {
        const int32_t *id = (const int32_t *)meta;
        for (int64_t r = 0; r < M;) {
            int64_t r1 = r + 1;
            while (r1 < M && id[r1] == id[r]) r1++;
            if (id[r] >= 0 && id[r] < E) seg[n++] = moects__moe_seg{(long)r, (long)(r1 - r), id[r], alpha[id[r]]};
            r = r1;
        }
    }
out:
    if (n < 0) snprintf(g_err, sizeof g_err, "row metadata download failed (see stderr)");
    free(alpha), free(meta);
    return n;
}

/* W4A8 operands in FP32 (exact: E4M3 x UE8M0 and E2M1 x UE8M0 have at most 4 significant bits and
 * stay in FP32's range but for UE8M0 254 with large codes: Inf, as in the reference's FP32 output).
 * B [E][N][K] from E2M1 and its block scales; A [rows][K] = E4M3 x its 1 x a_scale_block UE8M0 scale
 * (linear [rows][ceil(K/a_scale_block)]). One thread per element. */
__device__ __forceinline__ float e4m3(uint32_t x)
{
    const uint32_t s = (x & 0x80u) << 24, e = (x >> 3) & 15u, m = x & 7u;
    if (e == 15u && m == 7u) return __uint_as_float(0x7FC00000u);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
    return __uint_as_float(s | (e + 120u) << 23 | m << 20);
}
__global__ void dequant_b_f32(const uint8_t *b, const uint8_t *sb, int64_t E, int64_t N, int64_t K, int swizzled,
                              int64_t ebytes, float *out)
{
    const int64_t rb = (K + 1) / 2, nkb = (K + 31) / 32, total = E * N * K;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / K, k = i % K;
        const uint32_t byte = __ldg(b + row * rb + k / 2);
        out[i] = __fmul_rn(e2m1(k % 2 ? byte >> 4 : byte & 15u),
                           scale_at(sb, ebytes, row / N, row % N, k / 32, nkb, 32, swizzled));
    }
}
__global__ void dequant_a_f32(const uint8_t *a, const uint8_t *sa, int64_t rows, int64_t K, int64_t sblk, float *out)
{
    const int64_t ns = (K + sblk - 1) / sblk;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * K; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = __fmul_rn(e4m3(__ldg(a + i)), block_scale(__ldg(sa + (i / K) * ns + (i % K) / sblk), 32));
}

unsigned grid_for(int64_t n) { return (unsigned)(n / 256 + 1 < 1048576 ? n / 256 + 1 : 1048576); }

/* FP32 rows [row0, row0 + rows) of an [*][N] product to BF16 (RNE), as cuBLAS rounds its FP32
 * accumulator for a BF16 output: cublasGemmEx has no FP32-input BF16-output case (status 15). */
__global__ void rows_to_bf16(const float *in, __nv_bfloat16 *out, int64_t row0, int64_t rows, int64_t N)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * N; i += (int64_t)gridDim.x * blockDim.x)
        out[row0 * N + i] = __float2bfloat16_rn(in[row0 * N + i]);
}

/* Dequantize into a workspace and run the grouped cuBLAS GEMM over the n segments. */
int dequant_and_gemm(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, const moects__cublas *cb,
                     const moects__moe_seg *seg, int n, cudaStream_t st)
{
    const int w4a8 = s->format == MOECTS_MOE_W4A8, g = s->b_format == MOECTS_FP4_NVFP4 ? 16 : 32;
    const int swz = s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4;
    const int64_t nkb = (s->K + g - 1) / g, rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M;
    const int64_t ebytes = swz ? (s->N + 127) / 128 * 128 * ((nkb + 3) / 4) * 4 : s->N * nkb;
    const size_t wb = (size_t)(s->E * s->N * s->K) * (w4a8 ? 4 : 2), wa = w4a8 ? (size_t)(rows * s->K) * 4 : 0;
    const int f32_then_bf16 = w4a8 && s->out_dtype == MOECTS_BF16; /* FP32 product, then RNE to BF16 */
    const size_t wd = f32_then_bf16 ? (size_t)(rows * s->N) * 4 : 0;
    const size_t pb = (size_t)n * 3 * sizeof(void *), total = wb + wa + wd + pb + 48;
    uint8_t *ws = NULL;
    if (MOECTS_CU(cudaMallocAsync(reinterpret_cast<void **>(&ws), total, st))) {
        snprintf(g_err, sizeof g_err, "cudaMallocAsync of %zu bytes failed", total);
        return -1;
    }
    void *bq = ws, *aq = ws + ((wb + 15) & ~(size_t)15);
    void *dq = ws + ((((wb + 15) & ~(size_t)15) + wa + 15) & ~(size_t)15);
    void **ptrs = reinterpret_cast<void **>(static_cast<uint8_t *>(dq) + ((wd + 15) & ~(size_t)15));
    if (w4a8) {
        dequant_b_f32<<<grid_for(s->E * s->N * s->K), 256, 0, st>>>(a->b, a->sb, s->E, s->N, s->K, swz, ebytes,
                                                                   static_cast<float *>(bq));
        dequant_a_f32<<<grid_for(rows * s->K), 256, 0, st>>>(static_cast<const uint8_t *>(a->a),
                                                            static_cast<const uint8_t *>(a->sa), rows, s->K,
                                                            s->a_scale_block, static_cast<float *>(aq));
    } else if (s->K % 16 == 0 && (uintptr_t)a->b % 8 == 0) {
        dequant_b<true><<<grid_for(s->E * s->N * ((s->K + 1) / 2) / 8), 256, 0, st>>>(
            a->b, a->sb, s->E, s->N, s->K, g, swz, ebytes, static_cast<__nv_bfloat16 *>(bq));
    } else {
        dequant_b<false><<<grid_for(s->E * s->N * ((s->K + 1) / 2)), 256, 0, st>>>(
            a->b, a->sb, s->E, s->N, s->K, g, swz, ebytes, static_cast<__nv_bfloat16 *>(bq));
    }
    int rc = 0;
    if (MOECTS_CU_LAUNCH("moe_gemm dequant")) {
        snprintf(g_err, sizeof g_err, "dequant launch failed (see stderr)");
        rc = -1;
    } else if (moects__cublas_moe_gemm(cb, st, seg, n, (long)s->N, (long)s->K,
                                       w4a8 ? MOECTS__CUDA_R_32F : MOECTS__CUDA_R_16BF, w4a8 ? aq : a->a, bq,
                                       f32_then_bf16 ? dq : a->d,
                                       s->out_dtype == MOECTS_BF16 && !f32_then_bf16 ? MOECTS__CUDA_R_16BF
                                                                                     : MOECTS__CUDA_R_32F,
                                       ptrs, g_err, sizeof g_err)) {
        rc = -1;
    } else if (f32_then_bf16) {
        for (int i = 0; i < n; i++)
            if (seg[i].rows > 0)
                rows_to_bf16<<<grid_for(seg[i].rows * s->N), 256, 0, st>>>(
                    static_cast<const float *>(dq), static_cast<__nv_bfloat16 *>(a->d), seg[i].row0, seg[i].rows, s->N);
        if (n > 0 && MOECTS_CU_LAUNCH("moe_gemm FP32 to BF16")) {
            snprintf(g_err, sizeof g_err, "FP32 to BF16 launch failed (see stderr)");
            rc = -1;
        }
    }
    if (MOECTS_CU(cudaFreeAsync(ws, st))) rc = -1;
    return rc;
}

int run(const void *shape, const void *args, void *stream)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    const moects_moe_gemm_args *a = static_cast<const moects_moe_gemm_args *>(args);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    g_err[0] = 0;
    if (s->M == 0 || s->N == 0) return 0;
    const moects__cublas *cb = moects__cublas_get(g_err, sizeof g_err);
    if (!cb) return -1;
    const int64_t nmax = s->M > s->E ? s->M : s->E;
    moects__moe_seg *seg = (moects__moe_seg *)malloc((size_t)nmax * sizeof *seg);
    if (!seg) {
        snprintf(g_err, sizeof g_err, "host out of memory");
        return -1;
    }
    const int n = segments(s, a, st, seg);
    const size_t osz = s->out_dtype == MOECTS_BF16 ? 2 : 4;
    int rc = n < 0 ? -1 : 0;
    if (rc == 0 && s->K == 0) { /* an empty sum: +0 in every valid row */
        for (int i = 0; i < n && rc == 0; i++)
            rc = MOECTS_CU(cudaMemsetAsync((char *)a->d + (size_t)seg[i].row0 * (size_t)s->N * osz, 0,
                                           (size_t)seg[i].rows * (size_t)s->N * osz, st));
    } else if (rc == 0 && n > 0) {
        rc = dequant_and_gemm(s, a, cb, seg, n, st);
    }
    free(seg);
    return rc;
}

} // namespace

extern "C" {
extern const moects_kernel moects_cuda_moe_gemm_w4a16_cublas;
const moects_kernel moects_cuda_moe_gemm_w4a16_cublas = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.moe_gemm.w4a16_cublas", MOECTS_OP_MOE_GEMM, MOECTS_DEVICE_CUDA, NULL,
    {0, 0}, NULL, supports, run, {24, 1}, last_error};
extern const moects_kernel moects_cuda_moe_gemm_w4a8_cublas;
const moects_kernel moects_cuda_moe_gemm_w4a8_cublas = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.moe_gemm.w4a8_cublas", MOECTS_OP_MOE_GEMM, MOECTS_DEVICE_CUDA, NULL,
    {0, 0}, NULL, supports_w4a8, run, {24, 1}, last_error};
}
