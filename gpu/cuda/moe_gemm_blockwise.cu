/* moe_gemm_blockwise.cu: kernel "cuda.moe_gemm.blockwise" (recipe moe_gemm.blockwise_v1, bit-exact) and
 * its five mutants: the grouped MoE GEMM (DESIGN.md "Grouped MoE GEMM") in MXFP4 x MXFP4 and NVFP4 x
 * NVFP4, contiguous, masked and offsets row layouts, on the warp-specialized E4M3 wgmma path of
 * fp4_gemm_fp8ws.cuh (sm_90a).
 *
 * Stages on the caller's stream:
 * 1. tiles: the list of 128-row tiles, each of one expert (Tile: rows [row0, row_end), expert), built
 *    by moe_tiles.cuh: contiguous: tile t is rows 128t .. 128t+127 (groups padded to a multiple of 128,
 *    so a tile never straddles two experts), its expert the id of its first valid row, -1 when it has
 *    none; groups padded otherwise (align 64, say): one thread walks m_indices, tiles of each run of
 *    one id; masked: ceil(max_m/128) tiles per expert, rows e*max_m + 128j .. up to masked_m[e];
 *    offsets: ceil(rows/128) tiles per expert from expert_offsets (any row start; A's scales linear).
 * 2. prep: A's and every expert's B codes to E4M3 (fp8ws::prep_codes; masked rows past masked_m[e] are
 *    never converted nor read), A's scales to FP32 [rows][nkbp] and each expert's B scales to
 *    FP32 [E][nkbp][Np] (expert e's scale bytes start at e * the layout's bytes for [N][nkb]).
 * 3. gemm: fp8ws::gemm<true>: the dense kernel's CTA (128x128, producer + 2 consumer warpgroups,
 *    p from a zero-accumulator wgmma per K-block, acc = fmaf(p, sA*sB, acc)) on tile blockIdx.y with
 *    expert e's B, B scales and alpha[e]; rows past the tile's end are zero-filled and never written;
 *    in the contiguous layout only rows whose m_indices is the tile's expert are written (padding rows
 *    of id -1 are computed from whatever A holds there and dropped).
 * Workspace from cudaMallocAsync (the pool keeps it), freed stream-ordered. */
#define MOECTS_FP4_NS moects_moe_fp4
#include "fp4_gemm_blockwise.cuh"
#include "moe_tiles.cuh"

namespace moects_moe_fp4 {

/* Mutants (one bug each; the descriptors below say it in words). */
enum { MB_NONE = 0, MB_SCALE_STRIDE = 1, MB_PAD_ROWS = 2, MB_MASKED_M = 3, MB_ONE_ALPHA = 4, MB_STRADDLE = 5 };

static const char *g_err = "";
static const char *last_error() { return g_err; }

/* Bytes of one expert's [rows][nkb] scales in the layout (ref/quant.c moects__scale_bytes). */
static int64_t scale_bytes(int64_t rows, int64_t nkb, int swizzled)
{
    return swizzled ? (rows + 127) / 128 * 128 * ((nkb + 3) / 4) * 4 : rows * nkb;
}

/* Tile slots of the layout for variant bug: the honest list of 128-aligned contiguous groups has one
 * slot per 128 rows; the mutants' tilings the upper bound of moe_tiles.cuh. */
static int64_t tile_slots(const moects_moe_gemm_shape *s, int bug)
{
    return moects_moe_tiles::tile_slots(s, bug == MB_NONE);
}

/* Scales of `groups` groups of grows rows each (group g's bytes at g * gbytes) -> FP32: dst[g][r][kb]
 * (grows_p = grows), or dst[g][kb][r] when kb_major (rows padded to grows_p with 0); 0 past nkb. */
template <int G>
__global__ void prep_scales_grouped(const uint8_t *s, int64_t groups, int64_t grows, int64_t grows_p, int64_t gbytes,
                                    int64_t nkb, int swizzled, float *dst, int64_t nkbp, int kb_major)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t per = grows_p * nkbp;
    if (i >= groups * per) return;
    const int64_t g = i / per, r = (i % per) / nkbp, kb = i % nkbp;
    float v = 0.0f;
    if (kb < nkb && r < grows) {
        const int64_t off = swizzled ? (r / 128) * ((nkb + 3) / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 +
                                           (kb / 4) * 512 + kb % 4
                                     : r * nkb + kb;
        v = decode_scale<G>(__ldg(s + g * gbytes + off));
    }
    dst[kb_major ? g * per + kb * grows_p + r : i] = v;
}

static int moe_supports(const void *shape, char *why, size_t why_len)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    if (s->format != MOECTS_MOE_MXFP4 && s->format != MOECTS_MOE_NVFP4) {
        snprintf(why, why_len, "format: takes MXFP4 x MXFP4 and NVFP4 x NVFP4 only (W4A8 and W4A16 have other kernels)");
        return 0;
    }
    const moects_fp4_format f = s->format == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
    if (s->b_format != f) {
        snprintf(why, why_len, "format: b_format must match the format (%s)", f == MOECTS_FP4_NVFP4 ? "NVFP4" : "MXFP4");
        return 0;
    }
    if (s->E < 1 || s->M < 0) {
        snprintf(why, why_len, "shape: E=%lld M=%lld: need E >= 1, M >= 0", (long long)s->E, (long long)s->M);
        return 0;
    }
    if (s->rows != MOECTS_ROWS_CONTIGUOUS && s->rows != MOECTS_ROWS_MASKED && s->rows != MOECTS_ROWS_OFFSETS) {
        snprintf(why, why_len, "layout: unknown row layout %d", (int)s->rows);
        return 0;
    }
    /* dimensions, formats, scale layout and output type as the dense kernel checks them */
    const int64_t rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M;
    const moects_fp4_gemm_shape fs = {rows < 0 ? -1 : 0, s->N, s->K, f, s->scale_layout, s->out_dtype};
    if (!supports(&fs, why, why_len)) return 0;
    if (tile_slots(s, MB_STRADDLE) > 65535 || (s->N + 127) / 128 > 65535) {
        snprintf(why, why_len, "shape: more than 65535 row tiles or column tiles (grid limit)");
        return 0;
    }
    return 1;
}

static bool on_sm90()
{
    static int sm90 = -1;
    if (sm90 < 0) {
        int dev = 0, major = 0, minor = 0;
        sm90 = cudaGetDevice(&dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 &&
               minor == 0;
    }
    return sm90 == 1;
}

static unsigned blocks(int64_t n) { return (unsigned)((n + 255) / 256); }

/* Stage 1: the tile list into t (slots entries); the mutants' tilings by their Mode. */
static void make_tiles(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int bug, fp8ws::Tile *t,
                       int64_t slots, cudaStream_t st)
{
    const moects_moe_tiles::Mode m = {bug == MB_STRADDLE ? 64 : 0, bug == MB_PAD_ROWS, bug == MB_MASKED_M, 0};
    moects_moe_tiles::make_tiles<fp8ws::Tile>(s, a, m, t, slots, st);
}

/* Stages 2 and 3 for scale block G. */
template <int G>
static int prep_and_gemm(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int bug, const fp8ws::Tile *t,
                         int64_t slots, uint8_t *ws, cudaStream_t st)
{
    using namespace fp8ws;
    const int64_t rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M, E = s->E, N = s->N, K = s->K;
    const int64_t nkb = (K + G - 1) / G, nstage = (nkb + NBS - 1) / NBS, Kp = nstage * BKC, nkbp = nstage * NBS;
    const int64_t Np = (N + BN - 1) / BN * BN, rb = (K + 1) / 2;
    const int swz = s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4, masked = s->rows == MOECTS_ROWS_MASKED;
    const int aswz = swz && s->rows != MOECTS_ROWS_OFFSETS; /* offsets: A's scales are linear */
    uint8_t *a8 = ws, *b8 = a8 + rows * Kp;
    float *sa = reinterpret_cast<float *>(b8 + E * N * Kp), *sb = sa + rows * nkbp;
    if (Kp > 0) {
        const int64_t per = Kp / (G == 32 ? 32 : 64);
        prep_codes<G><<<blocks(rows * per), 256, 0, st>>>(static_cast<const uint8_t *>(a->a), rows, K, rb, a8, Kp, 0,
                                                          masked ? a->masked_m : NULL, s->M, bug == MB_MASKED_M);
        prep_codes<G><<<blocks(E * N * per), 256, 0, st>>>(a->b, E * N, K, rb, b8, Kp, 0);
        const int64_t ag = masked ? E : 1, arows = masked ? s->M : rows;
        prep_scales_grouped<G><<<blocks(rows * nkbp), 256, 0, st>>>(static_cast<const uint8_t *>(a->sa), ag, arows,
                                                                    arows, scale_bytes(arows, nkb, aswz), nkb, aswz, sa,
                                                                    nkbp, 0);
        /* the mutant's stride: N * nkb bytes per expert, the unpadded size, whatever the layout */
        const int64_t bstride = bug == MB_SCALE_STRIDE ? N * nkb : scale_bytes(N, nkb, swz);
        prep_scales_grouped<G><<<blocks(E * Np * nkbp), 256, 0, st>>>(a->sb, E, N, Np, bstride, nkb, swz, sb, nkbp, 1);
        if (MOECTS_CU_LAUNCH("moe_gemm prep")) return -1;
    }
    const size_t smem = sizeof(fp8ws::Smem) + 1024;
    static bool attr_set;
    if (!attr_set) {
        if (MOECTS_CU(cudaFuncSetAttribute(gemm<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)))
            return -1;
        attr_set = true;
    }
    const bool contig = s->rows == MOECTS_ROWS_CONTIGUOUS && bug != MB_PAD_ROWS;
    GemmParams GP = {a8, b8, sa, sb, a->d, 1.0f, rows, N, Np, Kp, nkb, nkbp, s->out_dtype == MOECTS_BF16,
                     t, a->alpha, contig ? a->m_indices : NULL, bug == MB_ONE_ALPHA, bug == MB_STRADDLE};
    const dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)slots);
    gemm<true><<<grid, NTHR, smem, st>>>(GP);
    return MOECTS_CU_LAUNCH("moe_gemm fp8ws gemm") ? -1 : 0;
}

template <int BUG> static int moe_run(const void *shape, const void *args, void *stream)
{
    const moects_moe_gemm_shape *s = static_cast<const moects_moe_gemm_shape *>(shape);
    const moects_moe_gemm_args *a = static_cast<const moects_moe_gemm_args *>(args);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    g_err = "";
    if (s->M == 0 || s->N == 0) return 0;
    if (!on_sm90()) {
        g_err = "needs an sm_90a GPU (wgmma): compute capability 9.0";
        return -1;
    }
    const int G = s->format == MOECTS_MOE_NVFP4 ? 16 : 32;
    const int64_t rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M;
    const int64_t nkb = (s->K + G - 1) / G, nkbp = (nkb + fp8ws::NBS - 1) / fp8ws::NBS * fp8ws::NBS;
    const int64_t Kp = nkbp * 32, Np = (s->N + fp8ws::BN - 1) / fp8ws::BN * fp8ws::BN, slots = tile_slots(s, BUG);
    const size_t parts = (size_t)(rows * Kp + s->E * s->N * Kp) + (size_t)(rows * nkbp + s->E * Np * nkbp) * 4;
    const size_t tiles_at = (parts + 15) & ~(size_t)15, bytes = tiles_at + (size_t)slots * sizeof(fp8ws::Tile);
    uint8_t *ws = NULL;
    if (MOECTS_CU(cudaMallocAsync(reinterpret_cast<void **>(&ws), bytes, st))) {
        g_err = "cudaMallocAsync of the workspace failed";
        return -1;
    }
    fp8ws::Tile *t = reinterpret_cast<fp8ws::Tile *>(ws + tiles_at); /* after the operands, 16-byte aligned */
    make_tiles(s, a, BUG, t, slots, st);
    int rc = MOECTS_CU_LAUNCH("moe_gemm tiles") ? -1 : 0;
    if (rc == 0) rc = G == 16 ? prep_and_gemm<16>(s, a, BUG, t, slots, ws, st) : prep_and_gemm<32>(s, a, BUG, t, slots, ws, st);
    if (rc) g_err = "CUDA launch failed (see stderr)";
    if (MOECTS_CU(cudaFreeAsync(ws, st))) rc = -1;
    return rc;
}

} // namespace moects_moe_fp4

extern "C" {
#define MOE_KERNEL(sym, name, bug, text)                                                                              \
    extern const moects_kernel sym;                                                                                   \
    const moects_kernel sym = {MOECTS_KERNEL_ABI_VERSION, name, MOECTS_OP_MOE_GEMM, MOECTS_DEVICE_CUDA,             \
                               "moe_gemm.blockwise_v1", {0, 0}, text, moects_moe_fp4::moe_supports,                   \
                               moects_moe_fp4::moe_run<bug>, {0, 0}, moects_moe_fp4::last_error};
MOE_KERNEL(moects_cuda_moe_gemm_blockwise, "cuda.moe_gemm.blockwise", moects_moe_fp4::MB_NONE, NULL)
MOE_KERNEL(moects_cuda_mutant_moe_gemm_scale_stride, "cuda.mutant.moe_gemm.scale_stride", moects_moe_fp4::MB_SCALE_STRIDE,
           "expert e > 0 reads its B scales at e * N * nkb bytes, expert 0's unpadded stride, not the layout's "
           "per-expert size (swizzled: rows padded to 128, K-blocks to 4)")
MOE_KERNEL(moects_cuda_mutant_moe_gemm_padding_rows, "cuda.mutant.moe_gemm.padding_rows", moects_moe_fp4::MB_PAD_ROWS,
           "contiguous: places each expert's rows at the sum of the earlier experts' valid rows, as if the padding "
           "rows (id -1) were not there, so from expert 1 on it reads padding rows and writes the wrong rows")
MOE_KERNEL(moects_cuda_mutant_moe_gemm_masked_m, "cuda.mutant.moe_gemm.masked_m", moects_moe_fp4::MB_MASKED_M,
           "masked: every expert's valid-row count is read as masked_m[0] (the per-expert masked_m ignored)")
MOE_KERNEL(moects_cuda_mutant_moe_gemm_one_alpha, "cuda.mutant.moe_gemm.one_alpha", moects_moe_fp4::MB_ONE_ALPHA,
           "alpha[0] (expert 0's) applied to every expert")
MOE_KERNEL(moects_cuda_mutant_moe_gemm_straddle, "cuda.mutant.moe_gemm.straddle", moects_moe_fp4::MB_STRADDLE,
           "contiguous: 128-row tiles start 64 rows early, so a tile straddles two experts; every valid row of a tile "
           "is computed with the expert of its first valid row")
#undef MOE_KERNEL
}
