/* fp4_gemm_blockwise.cuh: the tensor-core FP4 GEMM that implements fp4_gemm.blockwise_v1
 * (DESIGN.md "Numeric recipes") bit-exactly, as a template included by fp4_gemm_blockwise.cu (the
 * kernel and two mutants) and fp4_gemm_ftz.cu (the same source built with --use_fast_math, a mutant).
 * Define MOECTS_FP4_NS to a distinct namespace name before including.
 *
 * NT layout: D[M,N] = alpha * A[M,K] * B[N,K]^T, A and B packed E2M1 (element 2j low nibble), rows
 * of ceil(K/2) bytes; block scales along K (g = 32 UE8M0 for MXFP4, g = 16 UE4M3 for NVFP4), linear
 * [rows][nkb] or the 128x4 swizzle. Per output element and K-block b in ascending order:
 *     p   = block partial from a tensor-core MMA starting from a ZERO accumulator: FP16 mma.sync
 *           m16n8k16 here (g = 32: two chained k16 steps), E4M3 wgmma k32 in fp4_gemm_fp8ws.cuh.
 *           E2M1 values are exact in FP16 and E4M3, their products exact in FP32, and a partial (a
 *           multiple of 1/4, |p| <= g*36) needs at most 13 significant bits, so the tensor core
 *           returns it exactly.
 *     s   = __fmul_rn(sA[m][b], sB[n][b])          one FP32 multiply, RNE, subnormals kept
 *     acc = __fmaf_rn(p, s, acc)
 * D = out_rne(__fmul_rn(acc, alpha)). The K tail is a zero-padded last block (codes past K read as 0,
 * padding nibbles ignored); blocks past ceil(K/g) are never accumulated.
 *
 * Why FP16 and not FP8: on sm_90 mma.sync with .e4m3 is not native (ptxas emits F2FP unpacks to
 * FP16 plus HMMA.16816, seen in the SASS), so E2M1 is converted straight to FP16 once per CTA.
 * Data path: FP4 goes global -> shared by cp.async (4 raw stages, 3 in flight, each thread converting
 * the 16-byte items it copied; byte loads when rows are not 16-byte aligned), then E2M1 -> FP16 (byte
 * permutes) into two FP16 stages of 64 codes whose 16-byte chunks are XOR-swizzled by row (the
 * 128-byte swizzle of TMA/wgmma). Block scales are decoded into shared memory per stage.
 * Compute: mma.sync m16n8k16 from ldmatrix fragments, CTA tile 64x64 (4 warps), 128x64 (8) or
 * 128x128 (16), warp tile 32x32. On sm_90a, shapes that fill the GPU take the warp-specialized E4M3
 * wgmma path of fp4_gemm_fp8ws.cuh (run() picks). All paths give the same bits (the recipe fixes
 * every rounding). */
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.cuh"
#include "mma_util.cuh"
#include "moects_kernel.h"

namespace MOECTS_FP4_NS {

using namespace moects_mma; /* prmt, cp.async, ldmatrix, mma16816, decode_scale, store2 */

enum { BK = 64 };        /* codes per stage; a stage row is BK FP16 = 128 bytes = 8 chunks */
enum { ROWB = 2 * BK };  /* bytes per FP16 row in shared memory */
enum { RAW_STAGES = 4 }; /* raw FP4 stages; RAW_STAGES - 1 in flight */
enum { BUG_NONE = 0, BUG_TAIL_SCALE = 1, BUG_NIBBLE_ORDER = 2 };

struct Params {
    const uint8_t *a, *b, *sa, *sb;
    void *d;
    float alpha;
    int64_t M, N, K;
    int64_t rowbytes; /* ceil(K/2) */
    int64_t nkb;      /* ceil(K/g) */
    int swizzled;
    int out_bf16;
    int aligned;    /* rowbytes % 16 == 0 and a, b 16-byte aligned: cp.async 16-byte copies */
    int sc_aligned; /* sa, sb 4-byte aligned: swizzled scales read as words */
};

/* Eight E2M1 codes (nibble i = element i) -> eight FP16 values in out[0..3] (element 2i in the low
 * half of out[i]). The FP16 of an E2M1 value has a zero low byte; its high byte comes from an 8-entry
 * table (0, 0.5, 1, 1.5, 2, 3, 4, 6 = 0x00 38 3C 3E 40 42 44 46) by byte permute with the sign bits
 * masked off. Sign: a permute over 0x80 bytes in prmt's sign-replicate mode gives 0xFF where the
 * code's bit 3 is set and 0x80 where not; its bit 6 moved to bit 7 is the sign. Then the high bytes
 * are interleaved with zero bytes. */
__device__ __forceinline__ void e2m1x8_to_f16(uint32_t w, uint32_t *out)
{
    const uint32_t T0 = 0x3E3C3800u, T1 = 0x46444240u, K80 = 0x80808080u;
    const uint32_t m = w & 0x77777777u;
    const uint32_t hb_lo = prmt(T0, T1, m) | ((prmt(K80, K80, w) << 1) & 0x80808080u);
    const uint32_t hb_hi = prmt(T0, T1, m >> 16) | ((prmt(K80, K80, w >> 16) << 1) & 0x80808080u);
    out[0] = prmt(hb_lo, 0u, 0x1404u);
    out[1] = prmt(hb_lo, 0u, 0x3424u);
    out[2] = prmt(hb_hi, 0u, 0x1404u);
    out[3] = prmt(hb_hi, 0u, 0x3424u);
}

template <int BM, int BN, int G> struct Smem {
    uint8_t a[2][BM * ROWB];                      /* FP16, swizzled 16-byte chunks */
    uint8_t b[2][BN * ROWB];
    uint8_t raw[RAW_STAGES][(BM + BN) * BK / 2]; /* FP4 as loaded; thread-private 16-byte items */
    float sa[2][BK / G][BM];
    float sb[2][BK / G][BN];
};

/* One thread's share of a tile's stages: its raw FP4 items (A's, then B's) and, for threads below
 * BM + BN, one row's scales with the next stage's bytes in rs (byte j = block kb0 + j). */
template <int BM, int BN, int G, int BUG, bool ALIGNED> struct Stager {
    static constexpr int WARPS_N = BN / 32, NTHR = (BM / 32) * WARPS_N * 32;
    static constexpr int NB = BK / G; /* K-blocks per stage */
    static constexpr int A_ITEMS = BM * (BK / 32), B_ITEMS = BN * (BK / 32);
    static constexpr int A_PER = (A_ITEMS + NTHR - 1) / NTHR, B_PER = (B_ITEMS + NTHR - 1) / NTHR;
    static constexpr int NIT = A_PER + B_PER; /* this thread's raw items: A's, then B's */

    const Params &P;
    Smem<BM, BN, G> &S;
    int tid;
    int64_t nstage;
    /* Raw items: A item j (j = tid + c * NTHR < A_ITEMS) is row j / 2, 32-code half j % 2 of the stage;
     * B's likewise. Item i sits at raw + soff[i]; its row pointer (at the half's first byte of stage
     * 0) and row validity are computed once. */
    const uint8_t *gp[NIT];
    bool gv[NIT];
    int soff[NIT], srw[NIT], shalf[NIT];
    bool srow_a, srow_on, srow_in;
    const uint8_t *sptr;
    uint32_t rs;

    __device__ __forceinline__ Stager(const Params &p, Smem<BM, BN, G> &s, int tid_, int64_t m0, int64_t n0)
        : P(p), S(s), tid(tid_), nstage((p.K + BK - 1) / BK), rs(0)
    {
#pragma unroll
        for (int i = 0; i < NIT; i++) {
            const bool isa = i < A_PER;
            const int j = tid + (isa ? i : i - A_PER) * NTHR;
            const bool exists = isa ? (A_ITEMS % NTHR == 0 || j < A_ITEMS) : (B_ITEMS % NTHR == 0 || j < B_ITEMS);
            const int64_t r = (isa ? m0 : n0) + j / 2;
            gv[i] = exists && r < (isa ? P.M : P.N);
            gp[i] = (isa ? P.a : P.b) + (gv[i] ? r * P.rowbytes + (j % 2) * 16 : 0);
            soff[i] = exists ? ((isa ? 0 : A_ITEMS) + j) * 16 : -1;
            srw[i] = j / 2;
            shalf[i] = j % 2;
        }
        srow_a = tid < BM, srow_on = tid < BM + BN;
        const int64_t srow = srow_a ? m0 + tid : n0 + (tid - BM);
        srow_in = srow_on && srow < (srow_a ? P.M : P.N);
        sptr = srow_a ? P.sa : P.sb;
        if (srow_in) {
            if (P.swizzled) sptr += (srow / 128) * ((P.nkb + 3) / 4) * 512 + (srow % 32) * 16 + ((srow / 32) % 4) * 4;
            else sptr += srow * P.nkb;
        }
    }

    /* Stage st's raw items into S.raw (cp.async, committed as one group). */
    __device__ __forceinline__ void issue_stage(int64_t st)
    {
        if (st < nstage) {
            uint8_t *raw = S.raw[st % RAW_STAGES];
#pragma unroll
            for (int i = 0; i < NIT; i++) {
                if (soff[i] < 0) continue;
                const int64_t k0c = st * BK + shalf[i] * 32;
                const bool in = gv[i] && k0c < P.K;
                const uint8_t *src = in ? gp[i] + st * (BK / 2) : gp[i];
                if (ALIGNED) {
                    cp16(raw + soff[i], src, in);
                } else {
                    uint4 v = make_uint4(0, 0, 0, 0);
                    if (in) {
                        uint8_t *bv = reinterpret_cast<uint8_t *>(&v);
                        const int64_t left = P.rowbytes - (k0c >> 1);
#pragma unroll
                        for (int q = 0; q < 16; q++)
                            if (q < left) bv[q] = __ldg(src + q);
                    }
                    *reinterpret_cast<uint4 *>(raw + soff[i]) = v;
                }
            }
        }
        cp_async_commit();
    }

    __device__ __forceinline__ void load_scales(int64_t st)
    {
        const int64_t kb0 = st * NB;
        rs = 0;
        if (!srow_in || kb0 >= P.nkb) return;
        if (P.swizzled && P.sc_aligned && BUG != BUG_TAIL_SCALE) {
            /* the word of 4 consecutive blocks (padded to 4 in this layout) holding kb0 .. kb0+NB-1 */
            rs = __ldg(reinterpret_cast<const uint32_t *>(sptr + (kb0 / 4) * 512)) >> (8 * (kb0 % 4));
        } else {
#pragma unroll
            for (int j = 0; j < NB; j++) {
                int64_t kb = kb0 + j;
                if (kb >= P.nkb) break;
                if (BUG == BUG_TAIL_SCALE && kb == P.nkb - 1 && P.K % G && kb > 0) kb -= 1;
                const int64_t off = P.swizzled ? (kb / 4) * 512 + kb % 4 : kb;
                rs |= (uint32_t)__ldg(sptr + off) << (8 * j);
            }
        }
    }

    /* Own raw items of stage st -> FP16 in buffer buf (8-code chunk c of row r at
     * r * ROWB + ((c ^ (r & 7)) * 16)); scale bytes -> floats. */
    __device__ __forceinline__ void convert_stage(int64_t st, int buf)
    {
        const uint8_t *raw = S.raw[st % RAW_STAGES];
        const bool tail = (st + 1) * BK > P.K; /* the last stage: codes past K are masked */
#pragma unroll
        for (int i = 0; i < NIT; i++) {
            if (soff[i] < 0) continue;
            const bool isa = i < A_PER;
            uint4 v = *reinterpret_cast<const uint4 *>(raw + soff[i]);
            if (tail) {
                const int64_t k0c = st * BK + shalf[i] * 32;
                mask_codes(v, (int)(P.K - k0c < 0 ? 0 : P.K - k0c));
            }
            const int r = srw[i], c0 = shalf[i] * 4;
            uint8_t *row = (isa ? S.a[buf] : S.b[buf]) + r * ROWB;
            uint32_t wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                if (BUG == BUG_NIBBLE_ORDER && !isa) /* the bug: B's nibbles swapped */
                    wv[q] = ((wv[q] >> 4) & 0x0F0F0F0Fu) | ((wv[q] << 4) & 0xF0F0F0F0u);
                uint4 o;
                e2m1x8_to_f16(wv[q], reinterpret_cast<uint32_t *>(&o));
                *reinterpret_cast<uint4 *>(row + (((c0 + q) ^ (r & 7)) * 16)) = o;
            }
        }
        if (srow_on) {
            float *dst = srow_a ? &S.sa[buf][0][tid] : &S.sb[buf][0][tid - BM];
            const int stride = srow_a ? BM : BN;
#pragma unroll
            for (int j = 0; j < NB; j++) dst[j * stride] = decode_scale<G>((rs >> (8 * j)) & 0xFFu);
        }
    }
};

/* One K-block blk of buffer buf: the warp's 32 x 32 block partials p (FP16 MMAs, FP32 accumulate over
 * G / 16 k16 steps), each scaled by sa * sb and added into acc with one FMA (blockwise_v1). */
template <int BM, int BN, int G>
__device__ __forceinline__ void mma_block(float (&acc)[2][4][4], const Smem<BM, BN, G> &S, uint32_t a_base,
                                          uint32_t b_base, int buf, int blk, int wm, int wn, int lane)
{
    const int g = lane >> 2, t4 = lane & 3;
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float p[2][4][4];
#pragma unroll
    for (int h = 0; h < G / 16; h++) {
        const int kk = blk * (G / 16) + h; /* k16 step within the stage: chunks 2kk, 2kk+1 */
        uint32_t af[2][4], bfr[4][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
            const int r = wm * 32 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            const int ch = kk * 2 + (lane >> 4);
            ldsm_x4(a_base + r * ROWB + ((ch ^ (r & 7)) * 16), af[mt][0], af[mt][1], af[mt][2], af[mt][3]);
        }
#pragma unroll
        for (int np = 0; np < 2; np++) {
            const int r = wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8;
            const int ch = kk * 2 + ((lane >> 3) & 1);
            ldsm_x4(b_base + r * ROWB + ((ch ^ (r & 7)) * 16), bfr[2 * np][0], bfr[2 * np][1], bfr[2 * np + 1][0],
                    bfr[2 * np + 1][1]);
        }
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++) mma16816(af[mt], bfr[nt], h == 0 ? zero : p[mt][nt], p[mt][nt]);
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
        const float sa0 = S.sa[buf][blk][wm * 32 + mt * 16 + g];
        const float sa1 = S.sa[buf][blk][wm * 32 + mt * 16 + g + 8];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const float2 sb = *reinterpret_cast<const float2 *>(&S.sb[buf][blk][wn * 32 + nt * 8 + 2 * t4]);
            float *c = acc[mt][nt];
            const float *q = p[mt][nt];
            c[0] = __fmaf_rn(q[0], __fmul_rn(sa0, sb.x), c[0]);
            c[1] = __fmaf_rn(q[1], __fmul_rn(sa0, sb.y), c[1]);
            c[2] = __fmaf_rn(q[2], __fmul_rn(sa1, sb.x), c[2]);
            c[3] = __fmaf_rn(q[3], __fmul_rn(sa1, sb.y), c[3]);
        }
    }
}

/* D = out_rne(acc * alpha). Thread holds rows g, g+8 and columns 2*t4, 2*t4+1 of each 16x8 tile. */
__device__ __forceinline__ void store_tile(const Params &P, const float (&acc)[2][4][4], int64_t m0, int64_t n0, int wm,
                                           int wn, int lane)
{
    const int g = lane >> 2, t4 = lane & 3;
    const bool pair = (P.N % 2 == 0) && ((uintptr_t)P.d % (P.out_bf16 ? 4 : 8) == 0);
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int64_t r = m0 + wm * 32 + mt * 16 + g + hr * 8;
            if (r >= P.M) continue;
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int64_t c = n0 + wn * 32 + nt * 8 + 2 * t4;
                const float v0 = __fmul_rn(acc[mt][nt][2 * hr], P.alpha);
                const float v1 = __fmul_rn(acc[mt][nt][2 * hr + 1], P.alpha);
                store2(P.d, P.out_bf16, pair, P.N, r, c, v0, v1);
            }
        }
    }
}

template <int BM, int BN, int G, int BUG, bool ALIGNED>
__global__ void __launch_bounds__(BM * BN / 32, 65536 / 128 / (BM * BN / 32)) fp4_gemm_kernel(Params P)
{
    using St = Stager<BM, BN, G, BUG, ALIGNED>;
    static_assert(BM + BN <= St::NTHR && St::NB >= 1, "tile does not fit the thread count");
    extern __shared__ __align__(128) unsigned char smem_raw[];
    /* 1024-byte aligned (the 128-byte swizzle repeats every 8 rows of 128 bytes); 1 KiB extra allocated */
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem_raw);
    Smem<BM, BN, G> &S = *reinterpret_cast<Smem<BM, BN, G> *>(smem_raw + ((1024u - (sbase & 1023u)) & 1023u));

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / St::WARPS_N, wn = warp % St::WARPS_N;
    const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
    St sg(P, S, tid, m0, n0);
    const int64_t nstage = sg.nstage;

    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    /* Prologue: stages 0..RAW_STAGES-2 in flight, stage 0 converted, stage 1's scales in rs. */
#pragma unroll
    for (int i = 0; i < RAW_STAGES - 1; i++) sg.issue_stage(i);
    if (nstage > 0) {
        sg.load_scales(0);
        cp_async_wait<RAW_STAGES - 2>();
        sg.convert_stage(0, 0);
        sg.load_scales(1);
    }
    __syncthreads();

    for (int64_t st = 0; st < nstage; st++) {
        const int buf = (int)(st & 1);
        sg.issue_stage(st + RAW_STAGES - 1);
        const uint32_t a_base = (uint32_t)__cvta_generic_to_shared(&S.a[buf][0]);
        const uint32_t b_base = (uint32_t)__cvta_generic_to_shared(&S.b[buf][0]);
#pragma unroll 1
        for (int blk = 0; blk < St::NB; blk++) {
            if (st * St::NB + blk >= P.nkb) break;
            mma_block<BM, BN, G>(acc, S, a_base, b_base, buf, blk, wm, wn, lane);
        }
        if (st + 1 < nstage) {
            cp_async_wait<RAW_STAGES - 2>(); /* this thread's items of stage st + 1 have landed */
            sg.convert_stage(st + 1, buf ^ 1);
            sg.load_scales(st + 2);
        }
        __syncthreads();
    }
    cp_async_wait<0>();
    store_tile(P, acc, m0, n0, wm, wn, lane);
}

#include "fp4_gemm_fp8ws.cuh"

/* Shape checks shared by every variant. */
static int supports(const void *shape, char *why, size_t why_len)
{
    const moects_fp4_gemm_shape *s = static_cast<const moects_fp4_gemm_shape *>(shape);
    if (s->M < 0 || s->N < 0 || s->K < 0) {
        snprintf(why, why_len, "shape: negative dimension (M=%lld N=%lld K=%lld)", (long long)s->M,
                 (long long)s->N, (long long)s->K);
        return 0;
    }
    if (s->format != MOECTS_FP4_MXFP4 && s->format != MOECTS_FP4_NVFP4) {
        snprintf(why, why_len, "format: format must be MXFP4 or NVFP4");
        return 0;
    }
    if (!moects__scales_out_check(s->scale_layout, s->out_dtype, why, why_len)) return 0;
    if ((s->M + 63) / 64 > 65535) {
        snprintf(why, why_len, "shape: M=%lld exceeds the grid's y limit (65535 tiles of 64 rows)", (long long)s->M);
        return 0;
    }
    return 1;
}

template <int BM, int BN, int G, int BUG, bool ALIGNED>
static int launch_cfg(const Params &P, cudaStream_t st)
{
    const size_t smem = sizeof(Smem<BM, BN, G>) + 1024;
    auto kern = fp4_gemm_kernel<BM, BN, G, BUG, ALIGNED>;
    static bool attr_set; /* per instantiation; the worker uses one device */
    if (!attr_set) {
        if (MOECTS_CU(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem))) return -1;
        attr_set = true;
    }
    const dim3 grid((unsigned)((P.N + BN - 1) / BN), (unsigned)((P.M + BM - 1) / BM));
    kern<<<grid, BM * BN / 32, smem, st>>>(P);
    return MOECTS_CU_LAUNCH("fp4_gemm_kernel") ? -1 : 0;
}

template <int BM, int BN, int G, int BUG> static int launch_al(const Params &P, cudaStream_t st)
{
    return P.aligned ? launch_cfg<BM, BN, G, BUG, true>(P, st) : launch_cfg<BM, BN, G, BUG, false>(P, st);
}

template <int G, int BUG> static int launch_tile(int tile, const Params &P, cudaStream_t st)
{
    if (tile == 5) return fp8ws::launch<G, BUG>(P, st);
    if (tile == 3) return launch_al<128, 128, G, BUG>(P, st);
    if (tile == 2) return launch_al<128, 64, G, BUG>(P, st);
    return launch_al<64, 64, G, BUG>(P, st);
}

/* Run variant BUG on the tile/path chosen below. */
template <int BUG> static int run(const void *shape, const void *args, void *stream)
{
    const moects_fp4_gemm_shape *s = static_cast<const moects_fp4_gemm_shape *>(shape);
    const moects_fp4_gemm_args *a = static_cast<const moects_fp4_gemm_args *>(args);
    if (s->M == 0 || s->N == 0) return 0;
    Params P;
    P.a = a->a, P.b = a->b, P.sa = a->sa, P.sb = a->sb, P.d = a->d, P.alpha = a->alpha;
    P.M = s->M, P.N = s->N, P.K = s->K;
    P.rowbytes = (s->K + 1) / 2;
    const int gsz = s->format == MOECTS_FP4_NVFP4 ? 16 : 32;
    P.nkb = (s->K + gsz - 1) / gsz;
    P.swizzled = s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4;
    P.out_bf16 = s->out_dtype == MOECTS_BF16;
    P.aligned = P.rowbytes % 16 == 0 && (uintptr_t)a->a % 16 == 0 && (uintptr_t)a->b % 16 == 0;
    P.sc_aligned = (uintptr_t)a->sa % 4 == 0 && (uintptr_t)a->sb % 4 == 0;
    static int nsm;
    if (!nsm) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            nsm = 132;
    }
    /* MOECTS_FP4_TILE=fp8ws|128x128|128x64|64x64 forces a path (tuning runs, and the other paths'
     * conformance on this GPU; fp8ws needs sm_90a). */
    static int force = -1, sm90 = -1;
    if (force < 0) {
        const char *e = getenv("MOECTS_FP4_TILE");
        force = !e ? 0 : !strcmp(e, "64x64") ? 1 : !strcmp(e, "128x64") ? 2 : !strcmp(e, "128x128") ? 3
                : !strcmp(e, "fp8ws") ? 5 : 0;
        int dev = 0, major = 0, minor = 0;
        sm90 = cudaGetDevice(&dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
               major == 9 && minor == 0;
    }
    /* Default, from H200 timings (gpu/cuda/PERF.md): on sm_90a, the warp-specialized E4M3 path when
     * its 128x128 tiles fill at least half of the multiprocessors (it won on all 8 M = 4096 prefill
     * shapes measured, both formats); else 64x64 mma.sync tiles when 128x64 tiles would not fill the
     * multiprocessors or K <= 512, and 128x64 mma.sync tiles otherwise. */
    const bool big = ((P.M + 127) / 128) * ((P.N + 63) / 64) >= (int64_t)nsm && P.K > 512;
    const bool ws = sm90 && ((P.M + 127) / 128) * ((P.N + 127) / 128) * 2 >= (int64_t)nsm;
    int tile = force ? force : ws ? 5 : !big ? 1 : 2;
    if (tile == 5 && !sm90) tile = !big ? 1 : 2; /* sm_90a */
    cudaStream_t st = (cudaStream_t)stream;
    return gsz == 32 ? launch_tile<32, BUG>(tile, P, st) : launch_tile<16, BUG>(tile, P, st);
}

} // namespace MOECTS_FP4_NS
