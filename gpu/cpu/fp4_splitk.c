/* fp4_splitk.c: cpu.fp4_gemm.dequant_splitk_bf16 and its mutant: the dequantize-then-GEMM route with
 * split-K whose partials are reduced in the output type, as cuBLASLt's REDUCTION_SCHEME_OUTPUT_TYPE
 * does on a BF16 output (seen on the H200 for cuBLAS's default math mode: issue 25). K is cut into
 * SPLITS pieces of whole 32-element blocks; each piece's partial is an OpenBLAS sgemm (FP32) times
 * alpha (FP32), and the partials are added in piece order in the output type: BF16 (RNE after every
 * addition, the first partial rounded too) or FP32. The honest kernel declares that class (24 bits,
 * RNE, bf16_split_k SPLITS) and must pass every case PASS_BOUNDED; the mutant declares plain FP32
 * accumulation and must be caught by the accumulation check (DESIGN.md "Bounded verdicts"). */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>

#include "fp4_internal.h"
#include "moects_ref.h"

#define SPLITS 16
#define CHUNK_ELEMS ((int64_t)1 << 24) /* dequantized elements per operand chunk: 64 MiB */

/* acc[i] = acc[i] + alpha * part[i] for the i < n of one chunk, rounded to the output type (the
 * first piece: alpha * part[i] alone). */
static void reduce(moects_dtype dt, float *acc, const float *part, int64_t n, float alpha, int first)
{
    for (int64_t i = 0; i < n; i++) {
        float v = part[i] * alpha;
        v = first ? v : acc[i] + v;
        if (dt == MOECTS_BF16) v = moects__bf16_to_f32(moects__bf16_from_f32(v));
        acc[i] = v;
    }
}

/* One chunk of rows x columns: the split-K partials of fa [mm][K] and fb [nn][K] reduced into acc. */
static void chunk(const moects_fp4_gemm_shape *s, float alpha, const float *fa, const float *fb, int64_t mm, int64_t nn,
                  float *part, float *acc)
{
    const int64_t K = s->K, nkb = (K + 31) / 32, per = (nkb + SPLITS - 1) / SPLITS * 32;
    for (int64_t k0 = 0, j = 0; k0 < K; k0 += per, j++) {
        const int64_t kk = K - k0 < per ? K - k0 : per;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mm, (int)nn, (int)kk, 1.0f, fa + k0, (int)K, fb + k0,
                    (int)K, 0.0f, part, (int)nn);
        reduce(s->out_dtype, acc, part, mm * nn, alpha, j == 0);
    }
}

static int run(const void *shape, const void *args, void *stream)
{
    (void)stream;
    const moects_fp4_gemm_shape *s = shape;
    const moects_fp4_gemm_args *a = args;
    if (!moects__fp4_sgemm_supports(s, NULL, 0)) return -1;
    const int64_t M = s->M, N = s->N, K = s->K, g = moects_fp4_block(s->format);
    if (M == 0 || N == 0) return 0;
    int64_t mc = K ? CHUNK_ELEMS / K : M, nc = K ? CHUNK_ELEMS / K : N;
    mc = mc < 1 ? 1 : mc > M ? M : mc;
    nc = nc < 1 ? 1 : nc > N ? N : nc;
    float *fa = malloc((size_t)(mc * K + 1) * sizeof(float)), *fb = malloc((size_t)(nc * K + 1) * sizeof(float));
    float *part = malloc((size_t)(mc * nc) * sizeof(float)), *acc = malloc((size_t)(mc * nc) * sizeof(float));
    moects__fp4_luts l;
    moects__fp4_luts_init(s->format, &l);
    int rc = -1;
    if (!fa || !fb || !part || !acc) goto out;
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        const int64_t nn = N - n0 < nc ? N - n0 : nc;
        moects__fp4_dequant_rows(&l, a->b, a->sb, s->scale_layout, g, n0, nn, K, fb);
        for (int64_t m0 = 0; m0 < M; m0 += mc) {
            const int64_t mm = M - m0 < mc ? M - m0 : mc;
            moects__fp4_dequant_rows(&l, a->a, a->sa, s->scale_layout, g, m0, mm, K, fa);
            for (int64_t i = 0; i < mm * nn; i++) acc[i] = 0.0f; /* K = 0: the empty sum */
            if (K > 0) chunk(s, a->alpha, fa, fb, mm, nn, part, acc);
            for (int64_t i = 0; i < mm; i++) moects__store_scaled(s->out_dtype, a->d, (m0 + i) * N + n0, acc + i * nn, nn, 1.0f);
        }
    }
    rc = 0;
out:
    free(fa);
    free(fb);
    free(part);
    free(acc);
    return rc;
}

const moects_kernel moects_cpu_fp4_gemm_dequant_splitk_bf16 = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.fp4_gemm.dequant_splitk_bf16",
    .op = MOECTS_OP_FP4_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .acc = {.bits = 24, .truncation = 0},
    .split_k = {.max_splits = SPLITS, .dtype = MOECTS_BF16},
    .supports = moects__fp4_sgemm_supports,
    .run = run,
};

const moects_kernel moects_cpu_mutant_fp4_gemm_bf16_split_k = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.mutant.fp4_gemm.bf16_split_k",
    .op = MOECTS_OP_FP4_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .acc = {.bits = 24, .truncation = 0},
    .bug = "split-K partials added in the BF16 output (cuBLAS's default math mode) while declaring FP32 accumulation",
    .supports = moects__fp4_sgemm_supports,
    .run = run,
};
