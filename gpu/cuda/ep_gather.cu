/* ep_gather.cu: the MoE combine on CUDA, kernel "cuda.ep_gather" (recipe ep_gather.fma_v1,
 * DESIGN.md "ep_gather"), and its mutants (one known bug each, gpu/cuda/kernels.def).
 *
 * out[t][d] = bf16_rne(fmaf chain over the valid slots j = 0..k-1 ascending of
 *             (float)x[input_index[t][j]][d] * topk_weights[t][j]), +0 for a token with no valid slot.
 * A slot is valid when its id i >= 0 and, with an expert map, i < E_global and expert_map[i] >= 0;
 * invalid slots read neither input_index nor the weight. A valid slot whose input_index is outside
 * [0, M_sum) is skipped too (never read out of bounds; the reference rejects such input).
 *
 * Launch policy (works for every H >= 1, unlike BLOCK_D = min(H, 1024) with an assert, vLLM PR 50458):
 * a thread owns NV (1, 2 or 4) vectors of V consecutive columns of one token, V = 8 (16-byte loads)
 * when H % 8 == 0 and the pointers are 16-byte aligned, else 4, 2, 1 by the same rule; a block is TX
 * threads along the row times TY tokens; the row's ceil(H/V) vectors are split into G = ceil(nvec/1024)
 * column groups (see policy()), the tail guarded. One token's slot metadata (validity, row, weight) is
 * staged once in shared memory for the whole row. All offsets are 64-bit. T == 0 or H == 0: no launch. */
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_util.cuh"
#include "moects_kernel.h"

namespace {

enum { MODE_FMA = 0, MODE_MULADD = 1, MODE_INT32_OFFSET = 2 };
enum { KCHUNK = 32 }; /* slots staged in shared memory per pass */
#ifndef EPG_MINB4
#define EPG_MINB4 2 /* min blocks per SM for the NV = 4 kernels (register cap 128) */
#endif

struct Params {
    const uint16_t *x;
    const void *ids;
    const float *w;
    const int32_t *idx;
    const int32_t *map;
    void *out;
    int64_t T, k, M_sum, H, E_global;
    int64_t nvec; /* ceil(H / V) */
    int has_map;
};

template <int V> struct Vec;
template <> struct Vec<8> { typedef uint4 T; };
template <> struct Vec<4> { typedef uint2 T; };
template <> struct Vec<2> { typedef uint32_t T; };
template <> struct Vec<1> { typedef uint16_t T; };

template <int V> __device__ __forceinline__ void unpack(const typename Vec<V>::T &v, float *f);
template <> __device__ __forceinline__ void unpack<8>(const uint4 &v, float *f)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}
template <> __device__ __forceinline__ void unpack<4>(const uint2 &v, float *f)
{
    f[0] = __uint_as_float(v.x << 16), f[1] = __uint_as_float(v.x & 0xFFFF0000u);
    f[2] = __uint_as_float(v.y << 16), f[3] = __uint_as_float(v.y & 0xFFFF0000u);
}
template <> __device__ __forceinline__ void unpack<2>(const uint32_t &v, float *f)
{
    f[0] = __uint_as_float(v << 16), f[1] = __uint_as_float(v & 0xFFFF0000u);
}
template <> __device__ __forceinline__ void unpack<1>(const uint16_t &v, float *f)
{
    f[0] = __uint_as_float((uint32_t)v << 16);
}

__device__ __forceinline__ uint32_t bf16_bits(float f)
{
    __nv_bfloat16 b = __float2bfloat16_rn(f);
    return (uint32_t)*reinterpret_cast<uint16_t *>(&b);
}

template <int V> __device__ __forceinline__ void store_bf16(uint16_t *p, const float *a);
template <> __device__ __forceinline__ void store_bf16<8>(uint16_t *p, const float *a)
{
    uint4 v;
    v.x = bf16_bits(a[0]) | bf16_bits(a[1]) << 16;
    v.y = bf16_bits(a[2]) | bf16_bits(a[3]) << 16;
    v.z = bf16_bits(a[4]) | bf16_bits(a[5]) << 16;
    v.w = bf16_bits(a[6]) | bf16_bits(a[7]) << 16;
    __stcs(reinterpret_cast<uint4 *>(p), v);
}
template <> __device__ __forceinline__ void store_bf16<4>(uint16_t *p, const float *a)
{
    uint2 v;
    v.x = bf16_bits(a[0]) | bf16_bits(a[1]) << 16;
    v.y = bf16_bits(a[2]) | bf16_bits(a[3]) << 16;
    __stcs(reinterpret_cast<uint2 *>(p), v);
}
template <> __device__ __forceinline__ void store_bf16<2>(uint16_t *p, const float *a)
{
    *reinterpret_cast<uint32_t *>(p) = bf16_bits(a[0]) | bf16_bits(a[1]) << 16;
}
template <> __device__ __forceinline__ void store_bf16<1>(uint16_t *p, const float *a)
{
    *p = (uint16_t)bf16_bits(a[0]);
}

template <int V> __device__ __forceinline__ void store_f32(float *p, const float *a)
{
    if (V == 8) {
        __stcs(reinterpret_cast<float4 *>(p), make_float4(a[0], a[1], a[2], a[3]));
        __stcs(reinterpret_cast<float4 *>(p) + 1, make_float4(a[4], a[5], a[6], a[7]));
    } else if (V == 4) {
        __stcs(reinterpret_cast<float4 *>(p), make_float4(a[0], a[1], a[2], a[3]));
    } else if (V == 2) {
        __stcs(reinterpret_cast<float2 *>(p), make_float2(a[0], a[1]));
    } else {
        p[0] = a[0];
    }
}

/* One slot's id, read as its dtype and widened; any negative id is invalid. */
template <typename IdT>
__device__ __forceinline__ int64_t slot_row(const Params &P, int64_t s)
{
    const int64_t id = (int64_t)static_cast<const IdT *>(P.ids)[s];
    if (id < 0) return -1;
    if (P.has_map) {
        if (id >= P.E_global) return -1;
        if (P.map[id] < 0) return -1;
    }
    const int64_t r = (int64_t)P.idx[s];
    if (r < 0 || r >= P.M_sum) return -1;
    return r;
}

template <typename IdT, bool OUT_BF16, int V, int NV, int MODE>
__global__ void __launch_bounds__(256, NV >= 4 ? EPG_MINB4 : 3) ep_gather_kernel(Params P)
{
    constexpr int UNR = NV >= 4 ? 2 : NV == 2 ? 4 : 8; /* slots per round: UNR * NV loads in flight */
    extern __shared__ unsigned char smem_raw[];
    int64_t *srow = reinterpret_cast<int64_t *>(smem_raw); /* [TY][KCHUNK] */
    float *sw = reinterpret_cast<float *>(srow + blockDim.y * KCHUNK);

    const int64_t t = (int64_t)blockIdx.x * blockDim.y + threadIdx.y;
    const int64_t vbase = (int64_t)blockIdx.y * blockDim.x * NV + threadIdx.x; /* vector q: vbase + q * TX */
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int nthr = blockDim.x * blockDim.y;
    bool act[NV];
    int dq[NV]; /* column offset of vector q within a row (H < 2^31) */
#pragma unroll
    for (int q = 0; q < NV; q++) {
        act[q] = t < P.T && vbase + (int64_t)q * blockDim.x < P.nvec;
        dq[q] = (int)((vbase + (int64_t)q * blockDim.x) * V);
    }

    float acc[NV][V];
#pragma unroll
    for (int q = 0; q < NV; q++)
#pragma unroll
        for (int i = 0; i < V; i++) acc[q][i] = 0.0f;

    for (int64_t j0 = 0; j0 < P.k; j0 += KCHUNK) {
        const int kc = (int)(P.k - j0 < KCHUNK ? P.k - j0 : KCHUNK);
        if (j0) __syncthreads();
        for (int i = tid; i < (int)blockDim.y * KCHUNK; i += nthr) {
            const int ty = i / KCHUNK, j = i % KCHUNK;
            const int64_t tt = (int64_t)blockIdx.x * blockDim.y + ty;
            int64_t r = -1;
            float wt = 0.0f;
            if (tt < P.T && j < kc) {
                const int64_t s = tt * P.k + j0 + j;
                r = slot_row<IdT>(P, s);
                if (r >= 0) wt = P.w[s];
            }
            srow[i] = r;
            sw[i] = wt;
        }
        __syncthreads();
        if (t >= P.T) continue;
        const int64_t *rows = srow + threadIdx.y * KCHUNK;
        const float *ws = sw + threadIdx.y * KCHUNK;
        /* UNR slots x NV vectors of loads in flight before their (ordered) accumulation. */
        for (int j = 0; j < kc; j += UNR) {
            typename Vec<V>::T v[UNR][NV];
            bool ok[UNR];
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                ok[u] = j + u < kc && rows[j + u] >= 0;
                if (!ok[u]) continue;
                const int64_t r = rows[j + u];
                const uint16_t *rp = P.x + r * P.H;
#pragma unroll
                for (int q = 0; q < NV; q++) {
                    if (!act[q]) continue;
                    const uint16_t *src;
                    if (MODE == MODE_INT32_OFFSET) /* the bug: row * H + d in 32 bits */
                        src = P.x + (int)((unsigned)r * (unsigned)P.H + (unsigned)dq[q]);
                    else
                        src = rp + dq[q];
                    v[u][q] = __ldg(reinterpret_cast<const typename Vec<V>::T *>(src));
                }
            }
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                if (!ok[u]) continue;
                const float wt = ws[j + u];
#pragma unroll
                for (int q = 0; q < NV; q++) {
                    if (!act[q]) continue;
                    float f[V];
                    unpack<V>(v[u][q], f);
#pragma unroll
                    for (int i = 0; i < V; i++) {
                        if (MODE == MODE_MULADD)
                            acc[q][i] = __fadd_rn(acc[q][i], __fmul_rn(f[i], wt));
                        else
                            acc[q][i] = fmaf(f[i], wt, acc[q][i]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int q = 0; q < NV; q++) {
        if (!act[q]) continue;
        const int64_t o = MODE == MODE_INT32_OFFSET ? (int64_t)(int)((unsigned)t * (unsigned)P.H + (unsigned)dq[q])
                                                    : t * P.H + dq[q];
        if (OUT_BF16)
            store_bf16<V>(static_cast<uint16_t *>(P.out) + o, acc[q]);
        else
            store_f32<V>(static_cast<float *>(P.out) + o, acc[q]);
    }
}

int shape_ok(const moects_ep_gather_shape *s, char *why, size_t why_len)
{
    if (s->T < 0 || s->k < 0 || s->M_sum < 0 || s->H < 0 || s->E_global < 0) {
        snprintf(why, why_len, "shape: negative dimension (T=%lld k=%lld M_sum=%lld H=%lld E_global=%lld)",
                 (long long)s->T, (long long)s->k, (long long)s->M_sum, (long long)s->H,
                 (long long)s->E_global);
        return 0;
    }
    if (s->id_dtype != MOECTS_I32 && s->id_dtype != MOECTS_I64) {
        snprintf(why, why_len, "format: id_dtype must be int32 or int64");
        return 0;
    }
    if (s->out_dtype != MOECTS_BF16 && s->out_dtype != MOECTS_F32) {
        snprintf(why, why_len, "format: out_dtype must be bf16 or fp32");
        return 0;
    }
    return 1;
}

int pick_v(const moects_ep_gather_shape *s, const moects_ep_gather_args *a)
{
    const size_t osz = s->out_dtype == MOECTS_BF16 ? 2 : 4;
    for (int v = 8; v > 1; v /= 2) {
        if (s->H % v) continue;
        if ((uintptr_t)a->x % (2u * v)) continue;
        if ((uintptr_t)a->out % (osz * (v == 8 && osz == 4 ? 4 : v))) continue;
        return v;
    }
    return 1;
}

template <typename IdT, bool BF16, int NV, int MODE>
int launch_v(int v, dim3 grid, dim3 block, size_t smem, cudaStream_t st, const Params &P)
{
    switch (v) {
    case 8: ep_gather_kernel<IdT, BF16, 8, NV, MODE><<<grid, block, smem, st>>>(P); break;
    case 4: ep_gather_kernel<IdT, BF16, 4, NV, MODE><<<grid, block, smem, st>>>(P); break;
    case 2: ep_gather_kernel<IdT, BF16, 2, NV, MODE><<<grid, block, smem, st>>>(P); break;
    default: ep_gather_kernel<IdT, BF16, 1, NV, MODE><<<grid, block, smem, st>>>(P); break;
    }
    return MOECTS_CU_LAUNCH("ep_gather_kernel") ? -1 : 0;
}

template <typename IdT, bool BF16, int MODE>
int launch_nv(int nv, int v, dim3 grid, dim3 block, size_t smem, cudaStream_t st, const Params &P)
{
    if (nv == 4) return launch_v<IdT, BF16, 4, MODE>(v, grid, block, smem, st, P);
    if (nv == 2) return launch_v<IdT, BF16, 2, MODE>(v, grid, block, smem, st, P);
    return launch_v<IdT, BF16, 1, MODE>(v, grid, block, smem, st, P);
}

/* Block shape for a row of nvec vectors: G = ceil(nvec / 1024) column groups; a group's `per`
 * vectors are NV (1, 2 or 4) per thread over TX (a multiple of 32, <= 256) threads; TY tokens. */
struct Policy {
    int64_t G, per;
    int nv, tx, ty;
};
Policy policy(int64_t nvec)
{
    Policy p;
    p.G = (nvec + 1023) / 1024;
    p.per = (nvec + p.G - 1) / p.G;
    const int64_t nv = (p.per + 255) / 256;
    p.nv = nv >= 3 ? 4 : (int)nv;
    p.tx = (int)(((p.per + p.nv - 1) / p.nv + 31) / 32 * 32);
    p.ty = p.tx >= 256 ? 1 : 256 / p.tx;
    return p;
}

template <int MODE>
int run_mode(const moects_ep_gather_shape *s, const moects_ep_gather_args *a, cudaStream_t st)
{
    if (s->T == 0 || s->H == 0) return 0;
    const int v = pick_v(s, a);
    Params P;
    P.x = a->x, P.ids = a->topk_ids, P.w = a->topk_weights, P.idx = a->input_index;
    P.map = s->has_expert_map ? a->expert_map : NULL;
    P.out = a->out;
    P.T = s->T, P.k = s->k, P.M_sum = s->M_sum, P.H = s->H, P.E_global = s->E_global;
    P.has_map = s->has_expert_map && a->expert_map;
    P.nvec = (s->H + v - 1) / v;
    const Policy pol = policy(P.nvec);
    const int64_t gx = (s->T + pol.ty - 1) / pol.ty;
    if (pol.G > 65535 || gx > 2147483647) {
        fprintf(stderr, "cuda.ep_gather: grid too large (H=%lld T=%lld)\n", (long long)s->H, (long long)s->T);
        return -1;
    }
    const dim3 grid((unsigned)gx, (unsigned)pol.G), block((unsigned)pol.tx, (unsigned)pol.ty);
    const size_t smem = (size_t)pol.ty * KCHUNK * (sizeof(int64_t) + sizeof(float));
    const bool bf = s->out_dtype == MOECTS_BF16;
    if (s->id_dtype == MOECTS_I64)
        return bf ? launch_nv<int64_t, true, MODE>(pol.nv, v, grid, block, smem, st, P)
                  : launch_nv<int64_t, false, MODE>(pol.nv, v, grid, block, smem, st, P);
    return bf ? launch_nv<int32_t, true, MODE>(pol.nv, v, grid, block, smem, st, P)
              : launch_nv<int32_t, false, MODE>(pol.nv, v, grid, block, smem, st, P);
}

int supports(const void *shape, char *why, size_t why_len)
{
    const moects_ep_gather_shape *s = static_cast<const moects_ep_gather_shape *>(shape);
    if (!shape_ok(s, why, why_len)) return 0;
    if ((s->H + 1023) / 1024 > 65535) {
        snprintf(why, why_len, "shape: H=%lld too wide for the column grid", (long long)s->H);
        return 0;
    }
    return 1;
}

int run_fma(const void *shape, const void *args, void *stream)
{
    return run_mode<MODE_FMA>(static_cast<const moects_ep_gather_shape *>(shape),
                              static_cast<const moects_ep_gather_args *>(args), (cudaStream_t)stream);
}

int run_muladd(const void *shape, const void *args, void *stream)
{
    return run_mode<MODE_MULADD>(static_cast<const moects_ep_gather_shape *>(shape),
                                 static_cast<const moects_ep_gather_args *>(args), (cudaStream_t)stream);
}

int run_int32(const void *shape, const void *args, void *stream)
{
    return run_mode<MODE_INT32_OFFSET>(static_cast<const moects_ep_gather_shape *>(shape),
                                       static_cast<const moects_ep_gather_args *>(args), (cudaStream_t)stream);
}

/* vLLM before PR 50458: BLOCK_D = min(hidden, 1024) and `assert hidden % BLOCK_D == 0` on the host;
 * the assert kills the process (as the Python assert killed the engine at start-up). */
int run_min1024(const void *shape, const void *args, void *stream)
{
    const moects_ep_gather_shape *s = static_cast<const moects_ep_gather_shape *>(shape);
    const int64_t block_d = s->H < 1024 ? s->H : 1024;
    if (block_d > 0 && s->H % block_d != 0) {
        fprintf(stderr, "cuda.mutant.ep_gather.block_min1024: Assertion `hidden %% BLOCK_D == 0' failed "
                        "(hidden=%lld, BLOCK_D=%lld)\n", (long long)s->H, (long long)block_d);
        fflush(stderr);
        abort();
    }
    return run_fma(shape, args, stream);
}

} // namespace

extern "C" {
extern const moects_kernel moects_cuda_ep_gather;
extern const moects_kernel moects_cuda_mutant_ep_gather_block_min1024;
extern const moects_kernel moects_cuda_mutant_ep_gather_int32_offset;
extern const moects_kernel moects_cuda_mutant_ep_gather_muladd;

const moects_kernel moects_cuda_ep_gather = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.ep_gather", MOECTS_OP_EP_GATHER, MOECTS_DEVICE_CUDA,
    "ep_gather.fma_v1", {0, 0}, NULL, supports, run_fma};
const moects_kernel moects_cuda_mutant_ep_gather_block_min1024 = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.mutant.ep_gather.block_min1024", MOECTS_OP_EP_GATHER,
    MOECTS_DEVICE_CUDA, "ep_gather.fma_v1", {0, 0},
    "BLOCK_D = min(H, 1024) with a host assert H % BLOCK_D == 0: aborts on H = 3584, 2880 (vLLM PR 50458)",
    supports, run_min1024};
const moects_kernel moects_cuda_mutant_ep_gather_int32_offset = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.mutant.ep_gather.int32_offset", MOECTS_OP_EP_GATHER,
    MOECTS_DEVICE_CUDA, "ep_gather.fma_v1", {0, 0},
    "row * H + d computed in 32-bit int: wraps when M_sum * H > 2^31 (wrong rows or a bad address)",
    supports, run_int32};
const moects_kernel moects_cuda_mutant_ep_gather_muladd = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.mutant.ep_gather.muladd", MOECTS_OP_EP_GATHER, MOECTS_DEVICE_CUDA,
    "ep_gather.fma_v1", {0, 0},
    "accumulates with __fmul_rn + __fadd_rn (two roundings) while declaring ep_gather.fma_v1",
    supports, run_muladd};
}
