/* moe_dequant_sgemm.c: cpu.moe_gemm.dequant_sgemm, the "dequantize, then one GEMM per expert" route
 * (and the honest kernel of W4A16, which has no blockwise recipe): per expert, its valid rows of A
 * and its weights B[e] dequantized to FP32 (E2M1 or E4M3 value * block scale, one FP32 multiply;
 * BF16 widened), one cblas_sgemm over the whole K, then * alpha[e] (FP32) and RNE to the output type.
 *
 * Accumulation class (DESIGN.md "Bounded verdicts"): FP32, round to nearest even, order any (bits 24,
 * RNE): every dequantized value and every product is exact while they stay in the FP32 normal range
 * (E2M1 has 2 significant bits, UE8M0 1, E4M3 4, BF16 8: products of at most 14 bits), so the only
 * roundings are sgemm's FP32 additions, in whatever order its kernel takes, the alpha multiply and
 * the output rounding. W4A8 with FP32 activation scales is refused: E4M3 x FP32 scale is a rounded
 * product the class does not declare. Expected to fail where dequantization overflows or underflows
 * (adversarial UE8M0 codes near 0 and 254), which exact_v1 does not. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4_internal.h"
#include "moe_internal.h"
#include "moects_quant.h"
#include "moects_ref.h"

static int supports(const void *shape, char *why, size_t why_len)
{
    const moects_moe_gemm_shape *s = shape;
    if (!moects__moe_shape_ok(s, why, why_len)) return 0;
    const char *r = NULL;
    if (s->format == MOECTS_MOE_W4A8 && s->a_scale_f32) r = "format: W4A8 with FP32 activation scales (a rounded dequantization)";
    else if (s->N > INT32_MAX || s->K > INT32_MAX || s->M > INT32_MAX) r = "shape: N, K or rows above INT32_MAX (cblas_sgemm takes int)";
    if (!r) return 1;
    if (why && why_len) snprintf(why, why_len, "%s", r);
    return 0;
}

static int64_t a_scale_off(const moects_moe_gemm_shape *s, int64_t r, int64_t kb, int64_t nkb)
{
    if (s->rows == MOECTS_ROWS_OFFSETS) return r * nkb + kb;
    if (s->rows == MOECTS_ROWS_MASKED)
        return (r / s->M) * moects__scale_bytes(s->M, nkb, s->scale_layout) +
               moects__scale_offset(r % s->M, kb, nkb, s->scale_layout);
    return moects__scale_offset(r, kb, nkb, s->scale_layout);
}

/* Row r of A dequantized to FP32 [K]; t: the decoding tables of MXFP4 (t[0].scale: UE8M0) and
 * NVFP4 (t[1].scale: E4M3, also W4A8's activations). */
static void dequant_a(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, const moects__fp4_luts t[2],
                      int64_t r, float *out)
{
    const int64_t K = s->K;
    if (s->format == MOECTS_MOE_W4A16) {
        const uint16_t *row = (const uint16_t *)a->a + r * K;
        for (int64_t k = 0; k < K; k++) out[k] = moects__bf16_to_f32(row[k]);
    } else if (s->format == MOECTS_MOE_W4A8) {
        const uint8_t *row = (const uint8_t *)a->a + r * K, *sa = a->sa;
        int64_t nsa = (K + s->a_scale_block - 1) / s->a_scale_block;
        for (int64_t k = 0; k < K; k++) out[k] = t[1].scale[row[k]] * t[0].scale[sa[r * nsa + k / s->a_scale_block]];
    } else {
        const moects__fp4_luts *l = &t[s->b_format == MOECTS_FP4_NVFP4];
        const int64_t g = moects_fp4_block(s->b_format), nkb = (K + g - 1) / g;
        const uint8_t *row = (const uint8_t *)a->a + r * ((K + 1) / 2);
        for (int64_t b = 0; b < nkb; b++) {
            const float sc = l->scale[((const uint8_t *)a->sa)[a_scale_off(s, r, b, nkb)]];
            for (int64_t k = b * g; k < K && k < (b + 1) * g; k++) out[k] = l->e2m1[(row[k / 2] >> (k % 2 * 4)) & 0xF] * sc;
        }
    }
}

/* c [m][N] = fa [m][K] fb [N][K]^T: one sgemm, or with fast_bits > 0 the mutant's accumulator: the
 * K-steps of 32 by sgemm, each added to c with the sum truncated to fast_bits significant bits
 * (cc [m][N] scratch). */
static void expert_gemm(int64_t m, int64_t N, int64_t K, const float *fa, const float *fb, float *c, float *cc,
                        int fast_bits)
{
    if (!fast_bits) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)N, (int)K, 1.0f, fa, (int)K, fb, (int)K,
                    0.0f, c, (int)N);
        return;
    }
    memset(c, 0, (size_t)(m * N) * sizeof(float));
    const uint32_t keep = ~((1u << (24 - fast_bits)) - 1u);
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
        const int kc = (int)(K - k0 < 32 ? K - k0 : 32);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)N, kc, 1.0f, fa + k0, (int)K, fb + k0, (int)K,
                    0.0f, cc, (int)N);
        for (int64_t i = 0; i < m * N; i++) {
            float v = c[i] + cc[i];
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            u &= keep;
            memcpy(&c[i], &u, sizeof u);
        }
    }
}

/* The kernel (fast_bits 0) or the fast_accum mutant (fast_bits 14). */
static int run_acc(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int fast_bits)
{
    if (!supports(s, NULL, 0)) return -1;
    const int64_t N = s->N, K = s->K, rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M;
    if (rows == 0 || N == 0) return 0;
    int64_t nkb, g;
    size_t ebytes = moects__moe_b_scale_bytes(s, &nkb, &g);
    int32_t *ex = NULL;
    int64_t *mine = malloc((size_t)rows * sizeof *mine + 1), *cnt = calloc((size_t)s->E, sizeof *cnt), most = 0;
    float *fb = NULL, *fa = NULL, *c = NULL, *cc = NULL;
    int rc = -1;
    if (!mine || !cnt || moects__moe_row_experts(MOECTS__MOE_BUG_NONE, s, a, rows, &ex)) goto out;
    for (int64_t r = 0; r < rows; r++)
        if (ex[r] >= 0 && ++cnt[ex[r]] > most) most = cnt[ex[r]];
    fb = malloc((size_t)(N * K) * sizeof(float) + 1);
    fa = malloc((size_t)(most * K) * sizeof(float) + 1);
    c = malloc((size_t)(most * N) * sizeof(float) + 1);
    cc = fast_bits ? malloc((size_t)(most * N) * sizeof(float) + 1) : NULL;
    if (!fb || !fa || !c || (fast_bits && !cc)) goto out;
    moects__fp4_luts t[2];
    moects__fp4_luts_init(MOECTS_FP4_MXFP4, &t[0]);
    moects__fp4_luts_init(MOECTS_FP4_NVFP4, &t[1]);
    for (int64_t e = 0; e < s->E; e++) {
        int64_t m = 0;
        for (int64_t r = 0; r < rows; r++)
            if (ex[r] == e) mine[m++] = r;
        if (!m) continue;
        moects__fp4_dequant_rows(&t[s->b_format == MOECTS_FP4_NVFP4], a->b + e * N * ((K + 1) / 2),
                                 a->sb + (size_t)e * ebytes, s->scale_layout, g, 0, N, K, fb);
        for (int64_t i = 0; i < m; i++) dequant_a(s, a, t, mine[i], fa + i * K);
        if (K > 0) expert_gemm(m, N, K, fa, fb, c, cc, fast_bits);
        for (int64_t i = 0; i < m; i++)
            moects__store_scaled(s->out_dtype, a->d, mine[i] * N, K > 0 ? c + i * N : NULL, N, a->alpha[e]);
    }
    rc = 0;
out:
    free(ex);
    free(mine);
    free(cnt);
    free(fb);
    free(fa);
    free(c);
    free(cc);
    return rc;
}

static int run(const void *shape, const void *args, void *stream)
{
    (void)stream;
    return run_acc(shape, args, 0);
}

static int run_fast_accum(const void *shape, const void *args, void *stream)
{
    (void)stream;
    return run_acc(shape, args, 14);
}

const moects_kernel moects_cpu_moe_gemm_dequant_sgemm = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.moe_gemm.dequant_sgemm",
    .op = MOECTS_OP_MOE_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .recipe = NULL,
    .acc = {.bits = 24, .truncation = 0},
    .bug = NULL,
    .supports = supports,
    .run = run,
    /* no MOECTS_KERNEL_BATCH_INVARIANT: OpenBLAS sgemm sums a row in an order that depends on the
     * expert's row count (declared, 12 smoke cases were FAIL_BATCH_VARIANT by 1 to 49 ULPs) */
};

/* The bug of accumulation precision (DESIGN.md "Bounded verdicts", the accumulation check): every
 * element within its FP32 bound where K is large, caught only in the aggregate. */
const moects_kernel moects_cpu_mutant_moe_gemm_fast_accum = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.mutant.moe_gemm.fast_accum",
    .op = MOECTS_OP_MOE_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .recipe = NULL,
    .acc = {.bits = 24, .truncation = 1},
    .bug = "declares FP32 accumulation but sums the whole K in a 14-bit truncating accumulator, one 32-deep step "
           "at a time (FP8 tensor cores without promotion to FP32: CUTLASS / torch._scaled_mm use_fast_accum; "
           "DeepSeek-V3 report, sec. 3.3.2)",
    .supports = supports,
    .run = run_fast_accum,
};
