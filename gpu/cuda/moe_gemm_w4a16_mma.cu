/* moe_gemm_w4a16_mma.cu: kernel "cuda.moe_gemm.w4a16_mma": the grouped MoE GEMM with BF16 activations and
 * MXFP4 or NVFP4 weights (W4A16, DESIGN.md "Grouped MoE GEMM") in one fused kernel that dequantizes the
 * weights inside its main loop, so they are read once, as 4-bit codes (cuda.moe_gemm.w4a16_cublas writes
 * every expert's BF16 weights to global memory and reads them back). Contiguous, masked and offsets row
 * layouts; linear or 128x4-swizzled scales; BF16 or FP32 output. gpu/cuda/PERF.md has its H200 numbers.
 *
 * Numerics, as w4a16_cublas: each weight is dec(E2M1) * block scale rounded to BF16, exact while in
 * range (at most 6 significant bits; Inf where UE8M0 254 or 253 meets a large code, as the FP32 product
 * overflows). The product is taken as a BF16 multiply (mul.rn.bf16x2) where it is exact and normal
 * (every NVFP4 scale; UE8M0 codes 2..254 and NaN), else in FP32 and rounded once (UE8M0 codes 0 and 1,
 * whose products can be BF16 subnormals). Products of two BF16 are exact in the tensor cores; the sums
 * are FP32 in the MMA's own order over the whole K (no per-block partials, no split-K), so the kernel
 * declares the class w4a16_cublas declares: 24 bits, truncation (PASS_BOUNDED). D = out_rne(acc *
 * alpha[e]) (alpha NULL: 1; K = 0: +0).
 *
 * Launch: the tile list (moe_tiles.cuh: 128-row tiles of one expert; contiguous tiles end after their
 * expert's last row) into a cudaMallocAsync workspace, then one grid of (tile slots x N/128) CTAs,
 * column tiles of one row tile adjacent (they share A in L2). CTA: 128 rows x 128 columns of one
 * expert, 8 warps (2 along M x 4 along N, warp tile 64 x 32), K in stages of 64:
 *   - cp.async ring of STAGES stages: A's 128 x 64 BF16 (16-byte chunks, XOR-swizzled by row) and B's
 *     128 x 32 bytes of codes (one 16-byte item per thread: row tid/2, codes 32*(tid%2) ..), zero-filled
 *     past the tile's rows, N and K; the item's 1 (MXFP4) or 2 (NVFP4) scale bytes are loaded into a
 *     register one stage ahead (never past nkb or N: no scale padding is read);
 *   - each thread converts its own item (codes past K masked to 0) to BF16 x scale into one of two BF16
 *     B buffers (the same swizzled layout), then one barrier per stage;
 *   - ldmatrix + mma.sync m16n8k16 BF16 with FP32 accumulators carried over K; a warp skips its 16-row
 *     blocks past the tile's last row (partial tiles cost less tensor time).
 * Epilogue: rows past the tile's end, and in the contiguous layout rows whose m_indices is not the
 * tile's expert, are never written; columns past N neither. Rows of A past the tile's end are never
 * read. K % 32 != 0 or misaligned A or B take the same kernel with synchronous element loads. */
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_util.cuh"
#include "mma_util.cuh"
#include "moe_tiles.cuh"
#include "moects_kernel.h"

namespace moects_w4a16_mma {

using namespace moects_mma;
using moects_moe_tiles::Tile;

enum { BM = 128, BN = 128, BK = 64, ROWB = 2 * BK, STAGES = 4, NTHR = 256 };

struct Smem {
    uint8_t a[STAGES][BM * ROWB];     /* BF16 A: 16-byte chunk c of row r at r * ROWB + (c ^ (r & 7)) * 16 */
    uint8_t b[2][BN * ROWB];          /* BF16 B (dequantized), row n = column n0 + n of D, same layout */
    uint8_t raw[STAGES][BN * BK / 2]; /* E2M1 codes as loaded: thread tid's item at tid * 16 */
    uint32_t rows_out[BM / 32];       /* bit r: D row m0 + r is written */
};

struct Params {
    const __nv_bfloat16 *a;
    const uint8_t *b, *sb;
    const float *alpha;    /* [E] or NULL (1) */
    const int32_t *m_idx;  /* contiguous: rows written are those of the tile's expert; else NULL */
    const Tile *tiles;
    void *d;
    int64_t N, K, rb, nkb; /* rb = ceil(K/2) bytes per B row; nkb = ceil(K/g) */
    int64_t ebytes;        /* B scale bytes per expert in the layout */
    int64_t ntn;           /* column tiles: ceil(N / BN) */
    int swizzled, out_bf16;
};

const char *g_err = "";
const char *last_error() { return g_err; }

/* Eight E2M1 codes (nibble i = element i) -> eight BF16 values, out[i] = elements 2i (low half) and
 * 2i+1. A BF16 of an E2M1 magnitude c takes its high byte from {00 3F 3F 3F 40 40 40 40} and its low
 * byte from {00 00 80 C0 00 40 80 C0} (0, 0.5, 1, 1.5, 2, 3, 4, 6), each an 8-byte table for prmt; the
 * sign (code bit 3) comes from a permute in prmt's sign-replicate mode (0xFF for a set bit 3, else
 * 0x80; bit 6 moved to bit 7), as in fp4_gemm_blockwise.cuh's FP16 version. */
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t w, uint32_t *out)
{
    const uint32_t H0 = 0x3F3F3F00u, H1 = 0x40404040u, L0 = 0xC0800000u, L1 = 0xC0804000u, K80 = 0x80808080u;
    const uint32_t m = w & 0x77777777u;
    const uint32_t h_lo = prmt(H0, H1, m) | ((prmt(K80, K80, w) << 1) & 0x80808080u);
    const uint32_t h_hi = prmt(H0, H1, m >> 16) | ((prmt(K80, K80, w >> 16) << 1) & 0x80808080u);
    const uint32_t l_lo = prmt(L0, L1, m), l_hi = prmt(L0, L1, m >> 16);
    out[0] = prmt(l_lo, h_lo, 0x5140u);
    out[1] = prmt(l_lo, h_lo, 0x7362u);
    out[2] = prmt(l_hi, h_hi, 0x5140u);
    out[3] = prmt(l_hi, h_hi, 0x7362u);
}

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t x, uint32_t y)
{
    uint32_t r;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    return r;
}

/* Eight codes of one K-block -> BF16 dec(code) * scale (x: the block's scale byte) in o. */
template <int G> __device__ __forceinline__ uint4 dequant8(uint32_t w, uint32_t x)
{
    uint32_t v[4];
    e2m1x8_to_bf16(w, v);
    if (G == 16 || x >= 2u) {
        /* the scale is exact in BF16 (UE8M0 2^(x-127) >= 2^-125, NaN for 0xFF; E4M3: 4 significant bits),
         * every product exact and normal or overflowing to Inf: one BF16 multiply per pair */
        const uint32_t sb = G == 32 ? (x == 0xFFu ? 0x7FC0u : x << 7) : __float_as_uint(decode_scale<16>(x)) >> 16;
        const uint32_t s2 = sb | sb << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = mul_bf16x2(v[i], s2);
    } else {
        /* UE8M0 2^-127 or 2^-126: products down to 2^-128, BF16 subnormals; FP32 product, rounded once */
        const float s = decode_scale<32>(x);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const __nv_bfloat162 p = __floats2bfloat162_rn(__fmul_rn(__uint_as_float(v[i] << 16), s),
                                                           __fmul_rn(__uint_as_float(v[i] & 0xFFFF0000u), s));
            v[i] = *reinterpret_cast<const uint32_t *>(&p);
        }
    }
    return make_uint4(v[0], v[1], v[2], v[3]);
}

/* One stage (BK = 64) of the warp's MMAs on its first MT 16-row blocks (rows 64 wm + 16 mt ..) and its
 * 32 columns (32 wn ..): ldmatrix fragments from the swizzled A and B tiles (as fp4_gemm_blockwise.cuh). */
template <int MT>
__device__ __forceinline__ void mma_stage(float (&acc)[4][4][4], uint32_t a_base, uint32_t b_base, int wm, int wn,
                                          int lane)
{
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
        uint32_t bfr[4][2], af[2][4]; /* A fragments double-buffered: block mt + 1 loads during mt's MMAs */
        auto load_a = [&](int mt, uint32_t *f) {
            const int r = wm * 64 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            const int ch = kk * 2 + (lane >> 4);
            ldsm_x4(a_base + r * ROWB + ((ch ^ (r & 7)) * 16), f[0], f[1], f[2], f[3]);
        };
#pragma unroll
        for (int np = 0; np < 2; np++) {
            const int r = wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8;
            const int ch = kk * 2 + ((lane >> 3) & 1);
            ldsm_x4(b_base + r * ROWB + ((ch ^ (r & 7)) * 16), bfr[2 * np][0], bfr[2 * np][1], bfr[2 * np + 1][0],
                    bfr[2 * np + 1][1]);
        }
        load_a(0, af[0]);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (mt + 1 < MT) load_a(mt + 1, af[(mt + 1) & 1]);
#pragma unroll
            for (int nt = 0; nt < 4; nt++) mma16816_bf16(af[mt & 1], bfr[nt], acc[mt][nt]);
        }
    }
}

/* One thread's share of a tile's stages: which A chunks and which B item it copies, its B row's
 * scales, and the scale bytes of the next stage (rs). AL: K % 32 == 0 and A, B 16-byte aligned: every
 * A chunk of 8 and B item of 32 codes is wholly inside or wholly past K, copied by cp.async; else
 * synchronous element loads into the same slots. */
template <int G, bool AL> struct Stager {
    const Params &P;
    Smem &S;
    int tid, vm, ac, ar, a_soff, bn, bh;
    bool b_in;
    int64_t K, nstage;
    const __nv_bfloat16 *a_row;
    const uint8_t *b_row, *s_row;
    uint32_t rs;

    /* The item's scale bytes of stage st (byte j: K-block kb0 + j); blocks not loaded read as 1.0
     * (their codes are zero). */
    static constexpr uint32_t ONE = G == 32 ? 127u : 0x38u;

    /* A: this thread copies chunk ac (8 elements) of rows ar + 32 i, i = 0..3; B: its item is row bn of
     * the column tile, codes 32 bh .. 32 bh + 31 of each stage. */
    __device__ __forceinline__ Stager(const Params &p, Smem &s, int tid_, int vm_, int32_t e, int64_t m0, int64_t n0)
        : P(p), S(s), tid(tid_), vm(vm_), ac(tid_ & 7), ar(tid_ >> 3), a_soff(0), bn(tid_ >> 1), bh(tid_ & 1),
          b_in(n0 + (tid_ >> 1) < p.N), K(p.K), nstage((p.K + BK - 1) / BK), rs(ONE | ONE << 8)
    {
        a_soff = ar * ROWB + ((ac ^ (ar & 7)) * 16); /* + 32 i * ROWB for row ar + 32 i */
        a_row = P.a + (m0 + ar) * K;                  /* + k below holds the chunk's ac * 8 */
        b_row = P.b + (b_in ? ((int64_t)e * P.N + n0 + bn) * P.rb : 0);
        s_row = P.sb;
        if (b_in) {
            const int64_t n = n0 + bn;
            s_row += (int64_t)e * P.ebytes +
                     (P.swizzled ? (n / 128) * ((P.nkb + 3) / 4) * 512 + (n % 32) * 16 + ((n / 32) % 4) * 4 : n * P.nkb);
        }
    }

    /* Stage st's A chunks and B item into slot st % STAGES (cp.async, committed as one group). */
    __device__ __forceinline__ void issue_stage(int64_t st)
    {
        if (st < nstage) {
            const int sl = (int)(st % STAGES);
            const int64_t k = st * BK + ac * 8;
#pragma unroll
            for (int i = 0; i < BM / 32; i++) {
                uint8_t *dst = S.a[sl] + a_soff + 32 * i * ROWB;
                const bool in = ar + 32 * i < vm && k < K;
                const __nv_bfloat16 *src = a_row + (int64_t)(32 * i) * K + k;
                if (AL) {
                    cp16(dst, in ? static_cast<const void *>(src) : static_cast<const void *>(P.a), in);
                } else {
                    uint4 v = make_uint4(0, 0, 0, 0);
                    if (in) {
                        uint16_t *h = reinterpret_cast<uint16_t *>(&v);
#pragma unroll
                        for (int q = 0; q < 8; q++)
                            if (k + q < K) h[q] = __ldg(reinterpret_cast<const unsigned short *>(src) + q);
                    }
                    *reinterpret_cast<uint4 *>(dst) = v;
                }
            }
            issue_b(st, sl);
        }
        cp_async_commit();
    }

    __device__ __forceinline__ void issue_b(int64_t st, int sl)
    {
        const int64_t kb_byte = st * (BK / 2) + bh * 16; /* the item's first byte in the row */
        const bool in = b_in && kb_byte < P.rb;
        uint8_t *dst = S.raw[sl] + tid * 16;
        if (AL) {
            cp16(dst, in ? b_row + kb_byte : P.b, in);
        } else {
            uint4 v = make_uint4(0, 0, 0, 0);
            if (in) {
                uint8_t *bv = reinterpret_cast<uint8_t *>(&v);
                const int64_t left = P.rb - kb_byte;
#pragma unroll
                for (int q = 0; q < 16; q++)
                    if (q < left) bv[q] = __ldg(b_row + kb_byte + q);
            }
            *reinterpret_cast<uint4 *>(dst) = v;
        }
    }

    __device__ __forceinline__ void load_scales(int64_t st)
    {
        rs = ONE | ONE << 8;
        const int64_t kb0 = st * (BK / G) + bh * (32 / G);
        if (!b_in) return;
#pragma unroll
        for (int j = 0; j < 32 / G; j++) {
            const int64_t kb = kb0 + j;
            if (kb < P.nkb) {
                const uint32_t x = __ldg(s_row + (P.swizzled ? (kb / 4) * 512 + kb % 4 : kb));
                rs = (rs & ~(0xFFu << (8 * j))) | x << (8 * j);
            }
        }
    }

    /* This thread's item of stage st -> BF16 row bn, chunks 4 bh .. 4 bh + 3 of buffer buf. */
    __device__ __forceinline__ void convert_stage(int64_t st, int buf)
    {
        uint4 v = *reinterpret_cast<const uint4 *>(S.raw[st % STAGES] + tid * 16);
        const int64_t k0c = st * BK + bh * 32;
        if (k0c + 32 > K) mask_codes(v, (int)(K - k0c < 0 ? 0 : K - k0c));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint8_t *row = S.b[buf] + bn * ROWB;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint32_t x = (rs >> (G == 16 ? 8 * (q >> 1) : 0)) & 0xFFu; /* NVFP4: words 0-1 block 0, 2-3 block 1 */
            *reinterpret_cast<uint4 *>(row + (((4 * bh + q) ^ (bn & 7)) * 16)) = dequant8<G>(w[q], x);
        }
    }
};

/* D = out_rne(acc * alpha[e]) on the rows the tile writes. Thread holds rows g, g+8 and columns 2 t4,
 * 2 t4 + 1 of each 16x8 tile. */
__device__ __forceinline__ void store_tile(const Params &P, const Smem &S, const float (&acc)[4][4][4], int32_t e,
                                           int64_t m0, int64_t n0, int wm, int wn, int lane)
{
    const int64_t N = P.N;
    const float al = P.K > 0 && P.alpha ? __ldg(P.alpha + e) : 1.0f;
    const int g = lane >> 2, t4 = lane & 3;
    const bool pair = (N % 2 == 0) && ((uintptr_t)P.d % (P.out_bf16 ? 4 : 8) == 0);
#pragma unroll
    for (int mt = 0; mt < 4; mt++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int rl = wm * 64 + mt * 16 + g + hr * 8;
            if (!((S.rows_out[rl >> 5] >> (rl & 31)) & 1u)) continue;
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int64_t c = n0 + wn * 32 + nt * 8 + 2 * t4;
                store2(P.d, P.out_bf16, pair, N, m0 + rl, c, __fmul_rn(acc[mt][nt][2 * hr], al),
                       __fmul_rn(acc[mt][nt][2 * hr + 1], al));
            }
        }
    }
}

template <int G, bool AL> __global__ void __launch_bounds__(NTHR, 2) gemm(Params P)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Smem &S = *reinterpret_cast<Smem *>(smem_raw);
    const int64_t slot = (int64_t)blockIdx.x / P.ntn, n0 = ((int64_t)blockIdx.x % P.ntn) * BN;
    const Tile t = P.tiles[slot];
    if (t.expert < 0 || t.row_end <= t.row0) return; /* uniform: before any barrier */
    const int32_t e = t.expert;
    const int64_t m0 = t.row0;
    const int vm = (int)(t.row_end - m0 < BM ? t.row_end - m0 : BM); /* valid rows of the tile, 1..128 */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    if (warp < BM / 32) { /* which rows of D are written */
        const int r = tid;
        const bool out = r < vm && (!P.m_idx || __ldg(P.m_idx + m0 + r) == e);
        const uint32_t bits = __ballot_sync(0xFFFFFFFFu, out);
        if (lane == 0) S.rows_out[warp] = bits;
    }
    Stager<G, AL> sg(P, S, tid, vm, e, m0, n0);
    const int64_t nstage = sg.nstage;

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) sg.issue_stage(i);
    if (nstage > 0) {
        sg.load_scales(0);
        cp_async_wait<STAGES - 2>();
        sg.convert_stage(0, 0);
        sg.load_scales(1);
    }
    __syncthreads();

    const int wm = warp >> 2, wn = warp & 3; /* warp tile: rows 64 wm .., columns 32 wn .. */
    /* 16-row blocks of the warp tile with a row before the tile's end (0..4): the others are skipped */
    const int nmt = vm <= wm * 64 ? 0 : vm - wm * 64 >= 64 ? 4 : (vm - wm * 64 + 15) / 16;
    for (int64_t st = 0; st < nstage; st++) {
        const int buf = (int)(st & 1);
        sg.issue_stage(st + STAGES - 1);
        if (nmt > 0) {
            const uint32_t a_base = smem_u32(S.a[st % STAGES]), b_base = smem_u32(S.b[buf]);
            /* branch-free bodies per count of 16-row blocks, so that ptxas can overlap ldmatrix and MMAs */
            switch (nmt) {
            case 4: mma_stage<4>(acc, a_base, b_base, wm, wn, lane); break;
            case 3: mma_stage<3>(acc, a_base, b_base, wm, wn, lane); break;
            case 2: mma_stage<2>(acc, a_base, b_base, wm, wn, lane); break;
            default: mma_stage<1>(acc, a_base, b_base, wm, wn, lane); break;
            }
        }
        if (st + 1 < nstage) {
            cp_async_wait<STAGES - 2>(); /* this thread's copies of stage st + 1 have landed */
            sg.convert_stage(st + 1, buf ^ 1);
            sg.load_scales(st + 2);
        }
        __syncthreads();
    }
    cp_async_wait<0>();
    store_tile(P, S, acc, e, m0, n0, wm, wn, lane);
}

int supports(const void *shape, char *why, size_t why_len)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    if (!moects__moe_gemm_w4a16_shape(s, why, why_len)) return 0;
    if (s->E > 2147483647LL) {
        snprintf(why, why_len, "shape: E=%lld: experts must fit in int32 (the tile list)", (long long)s->E);
        return 0;
    }
    const int64_t slots = moects_moe_tiles::tile_slots(s, true), ntn = (s->N + BN - 1) / BN;
    if (slots > 0 && ntn > 2147483647LL / slots) {
        snprintf(why, why_len, "shape: %lld row tiles x %lld column tiles exceed the grid (2^31 - 1 CTAs)", (long long)slots,
                 (long long)ntn);
        return 0;
    }
    return 1;
}

template <int G, bool AL> int launch(const Params &P, int64_t ctas, cudaStream_t st)
{
    static bool attr_set; /* per instantiation; the worker uses one device */
    if (!attr_set) {
        if (MOECTS_CU(cudaFuncSetAttribute(gemm<G, AL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)sizeof(Smem))) ||
            MOECTS_CU(cudaFuncSetAttribute(gemm<G, AL>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           (int)cudaSharedmemCarveoutMaxShared)))
            return -1;
        attr_set = true;
    }
    gemm<G, AL><<<(unsigned)ctas, NTHR, sizeof(Smem), st>>>(P);
    return MOECTS_CU_LAUNCH("moe_gemm w4a16_mma gemm") ? -1 : 0;
}

int run(const void *shape, const void *args, void *stream)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    const moects_moe_gemm_args *a = static_cast<const moects_moe_gemm_args *>(args);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    g_err = "";
    if (s->M == 0 || s->N == 0) return 0;
    const int G = s->b_format == MOECTS_FP4_NVFP4 ? 16 : 32;
    const int swz = s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4;
    const int64_t slots = moects_moe_tiles::tile_slots(s, true), nkb = (s->K + G - 1) / G;
    Tile *t = NULL;
    if (MOECTS_CU(cudaMallocAsync(reinterpret_cast<void **>(&t), (size_t)slots * sizeof(Tile), st))) {
        g_err = "cudaMallocAsync of the tile list failed";
        return -1;
    }
    const moects_moe_tiles::Mode mode = {0, 0, 0, 1}; /* contiguous tiles end after their expert's last row */
    moects_moe_tiles::make_tiles<Tile>(s, a, mode, t, slots, st);
    int rc = MOECTS_CU_LAUNCH("moe_gemm w4a16_mma tiles") ? -1 : 0;
    if (rc == 0) {
        Params P;
        P.a = static_cast<const __nv_bfloat16 *>(a->a), P.b = a->b, P.sb = a->sb, P.alpha = a->alpha;
        P.m_idx = s->rows == MOECTS_ROWS_CONTIGUOUS ? a->m_indices : NULL;
        P.tiles = t, P.d = a->d;
        P.N = s->N, P.K = s->K, P.rb = (s->K + 1) / 2, P.nkb = nkb;
        P.ebytes = swz ? (s->N + 127) / 128 * 128 * ((nkb + 3) / 4) * 4 : s->N * nkb;
        P.ntn = (s->N + BN - 1) / BN;
        P.swizzled = swz, P.out_bf16 = s->out_dtype == MOECTS_BF16;
        const bool al = s->K % 32 == 0 && (uintptr_t)a->a % 16 == 0 && (uintptr_t)a->b % 16 == 0;
        const int64_t ctas = slots * P.ntn;
        rc = G == 16 ? (al ? launch<16, true>(P, ctas, st) : launch<16, false>(P, ctas, st))
                     : (al ? launch<32, true>(P, ctas, st) : launch<32, false>(P, ctas, st));
    }
    if (rc) g_err = "CUDA launch failed (see stderr)";
    if (MOECTS_CU(cudaFreeAsync(t, st))) rc = -1;
    return rc;
}

} // namespace moects_w4a16_mma

extern "C" {
extern const moects_kernel moects_cuda_moe_gemm_w4a16_mma;
const moects_kernel moects_cuda_moe_gemm_w4a16_mma = {
    MOECTS_KERNEL_ABI_VERSION, "cuda.moe_gemm.w4a16_mma", MOECTS_OP_MOE_GEMM, MOECTS_DEVICE_CUDA, NULL,
    {0, 0}, NULL, moects_w4a16_mma::supports, moects_w4a16_mma::run, {24, 1}, moects_w4a16_mma::last_error};
}
