/* fp4_gemm_fp8ws.cuh: the warp-specialized path of cuda.fp4_gemm.blockwise (blockwise_v1, DESIGN.md
 * "Numeric recipes") for MXFP4 and NVFP4 on sm_90a, included inside namespace MOECTS_FP4_NS by
 * fp4_gemm_blockwise.cuh; the default for shapes whose 128x128 tiles fill half of the GPU (run()).
 *
 * Two kernels on the caller's stream:
 * 1. prep: E2M1 codes -> E4M3 bytes (exact: E2M1 values are E4M3 values), one 32-byte chunk per K-block:
 *    the block's 32 codes (MXFP4), or its 16 codes and 16 zeros (NVFP4: a k32 MMA over the chunk is
 *    exactly the g = 16 partial); codes past K are 0, as in the recipe's zero-padded tail block; rows
 *    padded to Kp = ceil(nkb/4)*128 bytes. Block scales (UE8M0 or UE4M3, linear or 128x4-swizzled) ->
 *    FP32, A's [M][nkbp] and B's [nkbp][Np], nkbp = Kp/32, zero past nkb and N. Workspace from
 *    cudaMallocAsync, freed stream-ordered after the GEMM.
 * 2. gemm: CTA tile 128x128, 3 warpgroups. Warpgroup 2 (producer, 40 registers by setmaxnreg, which
 *    gives the consumers 232) copies 4-block stages of A, B (128-byte rows, 16-byte chunk c of row r
 *    at ((c ^ (r & 7)) * 16): the 128-byte swizzle), the stage's 4 A scales per row and 4 B-scale
 *    rows (B's scales are stored K-block-major, so a consumer reads two adjacent columns' scales as
 *    one float2) with cp.async into STAGES slots, each signalled by an mbarrier
 *    (cp.async.mbarrier.arrive.noinc). Warpgroups 0 and 1 (consumers) each own 64 rows: per K-block
 *    b, wgmma m64n128k32 E4M3 from a zero accumulator gives the exact partial p (|p| <= 1152, a
 *    multiple of 1/4), then acc = fmaf(p, sA*sB, acc) with one RNE multiply, in block order. Two
 *    register sets: block b+1's wgmma runs while block b is scaled, over NST stages unrolled. A slot
 *    is released through a second mbarrier once its last block is scaled.
 * Mutants: BUG_NIBBLE_ORDER swaps B's nibbles in prep, BUG_TAIL_SCALE takes the last partial block's
 * scale from the block before it in prep. */
namespace fp8ws {

enum { BM = 128, BN = 128, BKC = 128 /* E4M3 bytes per stage row: 4 K-blocks */, NBS = BKC / 32, STAGES = 6 };
/* Stages per unrolled consumer step: the wgmma pipeline drains once per step. H200, DSv3 gemm1 TP8
 * M=4096 MXFP4: 232 / 240 / 245 TFLOP/s for 1 / 2 / 4 (gpu/cuda/PERF.md). */
enum { NST = 4 };
enum { NCONS = 256, NPROD = 128, NTHR = NCONS + NPROD }; /* 2 consumer warpgroups, 1 producer warpgroup */
/* setmaxnreg: the producer gives registers to the consumers' two partial sets (128*40 + 256*232 <= 64 Ki) */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MOECTS_SETMAXNREG(op, n) asm volatile("setmaxnreg." op ".sync.aligned.u32 " #n ";" ::: "memory")
#else
#define MOECTS_SETMAXNREG(op, n) ((void)0)
#endif

struct Smem {
    uint8_t a[STAGES][BM * BKC]; /* 1024-byte aligned slots (16 KiB each) */
    uint8_t b[STAGES][BN * BKC];
    float sa[STAGES][BM][NBS];
    float sb[STAGES][NBS][BN];
    uint64_t full[STAGES], empty[STAGES];
};

/* Grouped GEMM (moe_gemm_blockwise.cu): one 128-row tile of one expert, rows [row0, row_end) of A
 * and D; expert < 0: an empty slot (the CTA exits). */
struct Tile {
    int64_t row0, row_end;
    int32_t expert, pad;
};

struct GemmParams {
    const uint8_t *a8, *b8;  /* [M][Kp], [N][Kp] E4M3 (grouped: B [E][N][Kp]) */
    const float *sa, *sb;    /* [M][nkbp]; [nkbp][Np], Np = N rounded up to BN, zero past N (grouped: [E] of those) */
    void *d;
    float alpha;
    int64_t M, N, Np, Kp, nkb, nkbp;
    int out_bf16;
    /* grouped only (gemm<true>): tile blockIdx.y is tiles[blockIdx.y]; alpha_e[expert] (alpha_e[0] when
     * alpha_first, a mutant; alpha when alpha_e is NULL); rows of D written: all rows of the tile (m_idx NULL), rows whose
     * m_idx == expert (write_any 0) or rows whose m_idx >= 0 (write_any 1, a mutant) */
    const Tile *tiles;
    const float *alpha_e;
    const int32_t *m_idx;
    int alpha_first, write_any;
};

__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
/* Wait until the phase of parity `parity` has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
/* Arrive on b once all of this thread's earlier cp.async copies have landed. */
__device__ __forceinline__ void mbar_arrive_cp_async(uint64_t *b)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(b)) : "memory");
}
/* ---- wgmma (sm_90a), operands in shared memory in the 128-byte-swizzled K-major layout (16-byte
 * chunk c of row r at ((c ^ (r & 7)) * 16) within 1024-byte-aligned 8-row groups). ---- */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr)
{
    /* start address >> 4 (bits 0-13), leading byte offset 16 >> 4 (unused for swizzled K-major),
     * stride byte offset 1024 >> 4 (8-row groups), swizzle mode 1 = 128 bytes (bits 62-63) */
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
#else /* compute_90 PTX (no sm_90a features): never launched, see wgmma_m64n128k32_e4m3 */
__device__ __forceinline__ void wg_fence() {}
__device__ __forceinline__ void wg_commit() {}
template <int N> __device__ __forceinline__ void wg_wait() {}
#endif
/* Keeps the compiler from moving accesses of the N accumulators d across the asynchronous region. */
template <int N> __device__ __forceinline__ void wg_reg_fence(float *d)
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* d[64] (=)+= A[64x32] * B[128x32]^T, E4M3 operands in the swizzled K-major shared layout above. */
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float *d, uint64_t da, uint64_t db, int accumulate)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
                 "%64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
#else
    (void)d, (void)da, (void)db, (void)accumulate;
    __trap(); /* never launched: the host picks this path only on compute capability 9.0 */
#endif
}

/* Eight E2M1 codes (nibble i = element i, bit 3 the sign) -> eight E4M3 bytes (byte i % 4 of
 * out[i / 4]): the magnitude byte by permute from the table 0, 0.5, 1, 1.5, 2, 3, 4, 6 =
 * 0x00 30 38 3C 40 44 48 4C, the sign as in e2m1x8_to_f16. */
__device__ __forceinline__ void e2m1x8_to_e4m3(uint32_t w, uint32_t *out)
{
    const uint32_t T0 = 0x3C383000u, T1 = 0x4C484440u, K80 = 0x80808080u;
    const uint32_t m = w & 0x77777777u;
    out[0] = prmt(T0, T1, m) | ((prmt(K80, K80, w) << 1) & 0x80808080u);
    out[1] = prmt(T0, T1, m >> 16) | ((prmt(K80, K80, w >> 16) << 1) & 0x80808080u);
}

/* One thread: 32 codes of row r, k0 = 32 q, to E4M3. Output 32-byte chunk b is K-block b: codes
 * 32b .. 32b+31 for G = 32; codes 16b .. 16b+15 then 16 zeros for G = 16, so that a k32 MMA over the
 * chunk is exactly block b's partial. Codes past K are 0 (the padding nibble is ignored). Whole
 * 16-byte-aligned groups inside K take one 16-byte load. masked_m (grouped masked layout, rows =
 * E * max_m): rows past masked_m[e] (masked_m[0] when masked_first, a mutant) are skipped. */
template <int G>
__global__ void prep_codes(const uint8_t *src, int64_t rows, int64_t K, int64_t rowbytes, uint8_t *dst, int64_t Kp,
                           int swap_nibbles, const int32_t *masked_m = NULL, int64_t max_m = 0, int masked_first = 0)
{
    const int64_t per_row = Kp / (G == 32 ? 32 : 64);
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * per_row) return;
    const int64_t r = i / per_row, q = i % per_row, k0 = 32 * q;
    if (masked_m && r % max_m >= masked_m[masked_first ? 0 : r / max_m]) return; /* masked rows: never read */
    const uint8_t *s = src + r * rowbytes + k0 / 2;
    uint32_t w[4];
    if (k0 + 32 <= K && (uintptr_t)s % 16 == 0) {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(s));
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        if (swap_nibbles)
            for (int j = 0; j < 4; j++) w[j] = ((w[j] >> 4) & 0x0F0F0F0Fu) | ((w[j] << 4) & 0xF0F0F0F0u);
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            w[j] = 0;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const int64_t k = k0 + 8 * j + 2 * b;
                uint32_t byte = k < K ? __ldg(s + 4 * j + b) : 0u;
                if (swap_nibbles) byte = ((byte >> 4) | (byte << 4)) & 0xFFu;
                if (k + 1 >= K) byte &= 15u; /* the padding nibble */
                w[j] |= byte << (8 * b);
            }
        }
    }
    uint32_t o[8];
#pragma unroll
    for (int j = 0; j < 4; j++) e2m1x8_to_e4m3(w[j], &o[2 * j]);
    uint4 *d = reinterpret_cast<uint4 *>(dst + r * Kp + (G == 32 ? 32 : 64) * q);
    if (G == 32) {
        d[0] = make_uint4(o[0], o[1], o[2], o[3]);
        d[1] = make_uint4(o[4], o[5], o[6], o[7]);
    } else {
        const uint4 z = make_uint4(0, 0, 0, 0);
        d[0] = make_uint4(o[0], o[1], o[2], o[3]), d[1] = z;
        d[2] = make_uint4(o[4], o[5], o[6], o[7]), d[3] = z;
    }
}

/* One thread: the FP32 scale of (row, kb), row < rows_p (0 past rows), kb < nkbp (0 past nkb): UE8M0
 * (G = 32) or UE4M3 (G = 16), to dst[row][kb], or dst[kb][row] when kb_major. */
template <int G, int BUG>
__global__ void prep_scales(const uint8_t *s, int64_t rows, int64_t rows_p, int64_t nkb, int swizzled, int64_t K,
                            float *dst, int64_t nkbp, int kb_major)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows_p * nkbp) return;
    const int64_t r = i / nkbp, kb0 = i % nkbp;
    int64_t kb = kb0;
    float v = 0.0f;
    if (kb < nkb && r < rows) {
        if (BUG == BUG_TAIL_SCALE && kb == nkb - 1 && K % G && kb > 0) kb -= 1; /* the mutant's bug */
        const int64_t off = swizzled ? (r / 128) * ((nkb + 3) / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 +
                                           (kb / 4) * 512 + kb % 4
                                     : r * nkb + kb;
        v = decode_scale<G>(__ldg(s + off));
    }
    dst[kb_major ? kb0 * rows_p + r : i] = v;
}

/* Consumer warpgroup wg: wgmma of block blk of slot into pn, committed. */
__device__ __forceinline__ void wg_issue(Smem &S, int slot, int blk, float *pn, int wg)
{
    const uint32_t a_addr = smem_u32(&S.a[slot][0]) + wg * 64 * BKC, b_addr = smem_u32(&S.b[slot][0]);
    wg_reg_fence<64>(pn);
    wg_fence();
    wgmma_m64n128k32_e4m3(pn, wg_desc(a_addr + blk * 32), wg_desc(b_addr + blk * 32), 0);
    wg_commit();
}
/* acc = fmaf(p, sA*sB, acc) for block blk of slot, unless the block is past the last (kb >= nkb: its
 * zero-padded partial is not accumulated, as in the recipe; fmaf(0, 0, -0) would be +0). */
__device__ __forceinline__ void wg_scale(const Smem &S, int slot, int blk, bool live, float *pc, float *acc, int ra,
                                         int t4)
{
    wg_reg_fence<64>(pc);
    if (!live) return;
    const float sa0 = S.sa[slot][ra][blk], sa1 = S.sa[slot][ra + 8][blk];
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const float2 sb = *reinterpret_cast<const float2 *>(&S.sb[slot][blk][j * 8 + 2 * t4]);
        acc[4 * j + 0] = __fmaf_rn(pc[4 * j + 0], __fmul_rn(sa0, sb.x), acc[4 * j + 0]);
        acc[4 * j + 1] = __fmaf_rn(pc[4 * j + 1], __fmul_rn(sa0, sb.y), acc[4 * j + 1]);
        acc[4 * j + 2] = __fmaf_rn(pc[4 * j + 2], __fmul_rn(sa1, sb.x), acc[4 * j + 2]);
        acc[4 * j + 3] = __fmaf_rn(pc[4 * j + 3], __fmul_rn(sa1, sb.y), acc[4 * j + 3]);
    }
}

__device__ __forceinline__ void wait_full(Smem &S, int64_t s)
{
    mbar_wait(&S.full[s % STAGES], (unsigned)((s / STAGES) & 1));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* cp.async writes -> wgmma reads */
}
/* Consumer warpgroup wg, stages s0 .. s0+NS-1 (K-blocks from NBS*s0), two register sets: block i+1's
 * wgmma runs while block i is scaled. Unrolled, so that no wgmma is in flight across a branch or the
 * caller's loop edge (ptxas would serialize them); the pipeline drains once per call. */
template <int NS>
__device__ __forceinline__ void stages(Smem &S, const GemmParams &P, int64_t s0, float *p0, float *p1, float *acc,
                                       int wg, int ra, int t4)
{
    enum { NB = NS * NBS };
    wait_full(S, s0);
    wg_issue(S, (int)(s0 % STAGES), 0, p0, wg);
#pragma unroll
    for (int i = 0; i < NB; i++) {
        if (i + 1 < NB) {
            const int64_t sn = s0 + (i + 1) / NBS;
            if ((i + 1) % NBS == 0) wait_full(S, sn);
            wg_issue(S, (int)(sn % STAGES), (i + 1) % NBS, (i + 1) & 1 ? p1 : p0, wg);
            wg_wait<1>();
        } else {
            wg_wait<0>();
        }
        const int64_t si = s0 + i / NBS;
        const int slot = (int)(si % STAGES);
        wg_scale(S, slot, i % NBS, NBS * s0 + i < P.nkb, i & 1 ? p1 : p0, acc, ra, t4);
        if (i % NBS == NBS - 1) mbar_arrive(&S.empty[slot]);
    }
}

/* GROUPED: the CTA's rows, expert, B and alpha come from P.tiles[blockIdx.y] (moe_gemm). */
template <bool GROUPED> __global__ void __launch_bounds__(NTHR, 1) gemm(GemmParams P)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const uint32_t sbase = smem_u32(smem_raw);
    Smem &S = *reinterpret_cast<Smem *>(smem_raw + ((1024u - (sbase & 1023u)) & 1023u));
    const int tid = threadIdx.x;
    int64_t m0 = (int64_t)blockIdx.y * BM, mend = P.M;
    const int64_t n0 = (int64_t)blockIdx.x * BN;
    int32_t expert = 0;
    if (GROUPED) {
        const Tile t = P.tiles[blockIdx.y];
        if (t.expert < 0) return; /* uniform: before any barrier */
        m0 = t.row0, mend = t.row_end, expert = t.expert;
        P.b8 += (int64_t)expert * P.N * P.Kp;
        P.sb += (int64_t)expert * P.nkbp * P.Np;
        if (P.alpha_e) P.alpha = P.alpha_e[P.alpha_first ? 0 : expert];
    }
    const int64_t nstage = P.Kp / BKC;
    if (tid == 0) {
        for (int i = 0; i < STAGES; i++) {
            mbar_init(&S.full[i], NPROD);
            mbar_init(&S.empty[i], NCONS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (tid >= NCONS) { /* producer warpgroup */
        MOECTS_SETMAXNREG("dec", 40);
        const int l = tid - NCONS;
        for (int64_t s = 0; s < nstage; s++) {
            const int slot = (int)(s % STAGES);
            mbar_wait(&S.empty[slot], (unsigned)((s / STAGES) & 1) ^ 1u); /* a fresh slot passes at once */
#pragma unroll 4
            for (int i = 0; i < BM * BKC / 16 / NPROD; i++) {
                const int c = l + i * NPROD, r = c >> 3, ch = c & 7;
                const bool ina = m0 + r < mend, inb = n0 + r < P.N;
                const int64_t col = s * BKC + ch * 16;
                cp16(&S.a[slot][r * BKC + ((ch ^ (r & 7)) * 16)], P.a8 + (ina ? (m0 + r) * P.Kp + col : 0), ina);
                cp16(&S.b[slot][r * BKC + ((ch ^ (r & 7)) * 16)], P.b8 + (inb ? (n0 + r) * P.Kp + col : 0), inb);
            }
            const bool ina = m0 + l < mend;
            cp16(&S.sa[slot][l][0], P.sa + (ina ? (m0 + l) * P.nkbp + s * NBS : 0), ina);
            /* B scales: K-block l / 32 of the stage, columns 4 (l % 32) .. +3 (Np pads with zeros) */
            cp16(&S.sb[slot][l >> 5][4 * (l & 31)], P.sb + (s * NBS + (l >> 5)) * P.Np + n0 + 4 * (l & 31), true);
            mbar_arrive_cp_async(&S.full[slot]);
        }
        asm volatile("cp.async.wait_all;" ::: "memory"); /* commit + wait: copies not in a group too */
        return;
    }
    MOECTS_SETMAXNREG("inc", 232);

    /* consumers: warpgroup wg owns rows 64*wg .. 64*wg+63; D fragment element 4j+e of a thread: row
     * 16*wl + g + 8*(e >> 1), column 8j + 2*t4 + (e & 1) */
    const int wg = tid >> 7, wl = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    float acc[64], p0[64], p1[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f, p0[i] = 0.0f, p1[i] = 0.0f;
    const int ra = wg * 64 + wl * 16 + g;
    int64_t s = 0;
    for (; s + NST <= nstage; s += NST) stages<NST>(S, P, s, p0, p1, acc, wg, ra, t4);
    for (; s < nstage; s++) stages<1>(S, P, s, p0, p1, acc, wg, ra, t4);

    /* D = out_rne(acc * alpha) */
    const bool pair = (P.N % 2 == 0) && ((uintptr_t)P.d % (P.out_bf16 ? 4 : 8) == 0);
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int64_t r = m0 + ra + hr * 8;
        if (r >= mend) continue;
        if (GROUPED && P.m_idx && (P.write_any ? P.m_idx[r] < 0 : P.m_idx[r] != expert)) continue;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int64_t c = n0 + j * 8 + 2 * t4;
            const float v0 = __fmul_rn(acc[4 * j + 2 * hr], P.alpha);
            const float v1 = __fmul_rn(acc[4 * j + 2 * hr + 1], P.alpha);
            store2(P.d, P.out_bf16, pair, P.N, r, c, v0, v1);
        }
    }
}

/* sm_90a only. G = 32 (MXFP4) or 16 (NVFP4); P: the caller's parameters (P.nkb = ceil(K/G)). */
template <int G, int BUG> static int launch(const Params &P, cudaStream_t st)
{
    const int64_t nstage = (P.nkb + NBS - 1) / NBS, Kp = nstage * BKC, nkbp = nstage * NBS;
    const size_t a_bytes = (size_t)(P.M * Kp), b_bytes = (size_t)(P.N * Kp);
    const int64_t Np = (P.N + BN - 1) / BN * BN;
    const size_t sa_bytes = (size_t)(P.M * nkbp) * 4, sb_bytes = (size_t)(Np * nkbp) * 4;
    uint8_t *ws = NULL;
    const size_t total = a_bytes + b_bytes + sa_bytes + sb_bytes + 64;
    if (MOECTS_CU(cudaMallocAsync(reinterpret_cast<void **>(&ws), total, st))) return -1;
    uint8_t *a8 = ws, *b8 = ws + a_bytes;
    float *sa = reinterpret_cast<float *>(ws + ((a_bytes + b_bytes + 15) & ~(size_t)15));
    float *sb = sa + P.M * nkbp;
    int rc = 0;
    if (Kp > 0) {
        const int T = 256;
        const int64_t groups = Kp / (G == 32 ? 32 : 64); /* prep_codes threads per row */
        prep_codes<G><<<(unsigned)((P.M * groups + T - 1) / T), T, 0, st>>>(P.a, P.M, P.K, P.rowbytes, a8, Kp, 0);
        prep_codes<G><<<(unsigned)((P.N * groups + T - 1) / T), T, 0, st>>>(P.b, P.N, P.K, P.rowbytes, b8, Kp,
                                                                            BUG == BUG_NIBBLE_ORDER);
        prep_scales<G, BUG><<<(unsigned)((P.M * nkbp + T - 1) / T), T, 0, st>>>(P.sa, P.M, P.M, P.nkb, P.swizzled, P.K,
                                                                                  sa, nkbp, 0);
        prep_scales<G, BUG><<<(unsigned)((Np * nkbp + T - 1) / T), T, 0, st>>>(P.sb, P.N, Np, P.nkb, P.swizzled, P.K,
                                                                                 sb, nkbp, 1);
        rc = MOECTS_CU_LAUNCH("fp4_gemm fp8ws prep") ? -1 : 0;
    }
    if (rc == 0) {
        const size_t smem = sizeof(Smem) + 1024;
        static bool attr_set;
        if (!attr_set) {
            if (MOECTS_CU(cudaFuncSetAttribute(gemm<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
                rc = -1;
            else attr_set = true;
        }
        if (rc == 0) {
            GemmParams GP = {a8, b8, sa, sb, P.d, P.alpha, P.M, P.N, Np, Kp, P.nkb, nkbp, P.out_bf16,
                             NULL, NULL, NULL, 0, 0};
            const dim3 grid((unsigned)((P.N + BN - 1) / BN), (unsigned)((P.M + BM - 1) / BM));
            gemm<false><<<grid, NTHR, smem, st>>>(GP);
            rc = MOECTS_CU_LAUNCH("fp4_gemm fp8ws gemm") ? -1 : 0;
        }
    }
    if (MOECTS_CU(cudaFreeAsync(ws, st))) rc = -1;
    return rc;
}

} // namespace fp8ws
