/* fp4_dequant_sgemm.c: cpu.fp4_gemm.dequant_sgemm, the common "dequantize, then one GEMM" route:
 * A and B dequantized to FP32 (E2M1 value * block scale, one FP32 multiply), one cblas_sgemm over
 * the whole K, then * alpha (FP32) and RNE to the output type. It declares no recipe but its
 * accumulation class (DESIGN.md "Bounded verdicts"): FP32, round to nearest even, order any (bits 24,
 * RNE), so each element is judged against its own bound around fp4_gemm.exact_v1 (PASS_BOUNDED).
 * Why that class is honest: where every dequantized value and product stays in the FP32 normal range,
 * each is exact (E2M1 has 2 significant bits, UE8M0 1, E4M3 4: products of at most 12 bits), so the
 * only roundings are sgemm's FP32 additions, in whatever order (and with whatever FMA use) its kernel
 * takes, the alpha multiply and the output rounding. Until ABI 2 it was judged by a global tolerance
 * (calc_diff <= 1e-5, ULPs unbounded); docs/checks.md "Bounded verdicts" compares the two.
 * It is expected to fail on adversarial inputs: UE8M0 codes 253/254 overflow the dequantized value
 * (6 * 2^127 > FLT_MAX) where the exact result is finite, and codes near 0 underflow it, which is the point of
 * measuring it against exact_v1. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fp4_internal.h"
#include "moects_quant.h"
#include "moects_ref.h"

#define CHUNK_ELEMS ((int64_t)1 << 26) /* dequantized rows per sgemm: at most 256 MiB per operand */

int moects__fp4_sgemm_supports(const void *shape, char *why, size_t why_len)
{
    const moects_fp4_gemm_shape *s = shape;
    if (!moects__fp4_shape_ok(s, why, why_len)) return 0;
    if (s->M > INT32_MAX || s->N > INT32_MAX || s->K > INT32_MAX) {
        if (why && why_len) snprintf(why, why_len, "shape: M, N or K above INT32_MAX (cblas_sgemm takes int)");
        return 0;
    }
    return 1;
}

void moects__fp4_luts_init(moects_fp4_format f, moects__fp4_luts *l)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int c = 0; c < 16; c++) l->e2m1[c] = c & 8 ? -mag[c & 7] : mag[c & 7];
    for (int x = 0; x < 256; x++) {
        int e = (x >> 3) & 15, m = x & 7;
        float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
        if (f == MOECTS_FP4_MXFP4) l->scale[x] = x == 0xFF ? NAN : ldexpf(1.0f, x - 127);
        else l->scale[x] = e == 15 && m == 7 ? NAN : x & 0x80 ? -v : v;
    }
}

void moects__fp4_dequant_rows(const moects__fp4_luts *l, const uint8_t *codes, const uint8_t *sc,
                              moects_scale_layout layout, int64_t g, int64_t r0, int64_t nr, int64_t K, float *out)
{
    const int64_t nkb = (K + g - 1) / g, rb = (K + 1) / 2;
    for (int64_t r = r0; r < r0 + nr; r++, out += K) {
        const uint8_t *row = codes + r * rb;
        for (int64_t b = 0; b < nkb; b++) {
            const float x = l->scale[sc[moects__scale_offset(r, b, nkb, layout)]];
            const int64_t k1 = (b + 1) * g < K ? (b + 1) * g : K;
            int64_t k = b * g; /* even: g is 16 or 32 */
            for (; k + 1 < k1; k += 2) {
                out[k] = l->e2m1[row[k / 2] & 0xF] * x;
                out[k + 1] = l->e2m1[row[k / 2] >> 4] * x;
            }
            if (k < k1) out[k] = l->e2m1[row[k / 2] & 0xF] * x;
        }
    }
}

static int run(const void *shape, const void *args, void *stream)
{
    (void)stream;
    const moects_fp4_gemm_shape *s = shape;
    const moects_fp4_gemm_args *a = args;
    if (!moects__fp4_sgemm_supports(s, NULL, 0)) return -1;
    const int64_t M = s->M, N = s->N, K = s->K;
    if (M == 0 || N == 0) return 0;
    int64_t mc = K ? CHUNK_ELEMS / K : M, nc = K ? CHUNK_ELEMS / K : N;
    if (mc < 1) mc = 1;
    if (nc < 1) nc = 1;
    if (mc > M) mc = M;
    if (nc > N) nc = N;
    float *fa = malloc((size_t)(mc * K + 1) * sizeof(float)), *fb = malloc((size_t)(nc * K + 1) * sizeof(float));
    float *c = malloc((size_t)(mc * nc) * sizeof(float));
    moects__fp4_luts l;
    moects__fp4_luts_init(s->format, &l);
    const int64_t g = moects_fp4_block(s->format);
    int rc = -1;
    if (!fa || !fb || !c) goto out;
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        int64_t nn = N - n0 < nc ? N - n0 : nc;
        moects__fp4_dequant_rows(&l, a->b, a->sb, s->scale_layout, g, n0, nn, K, fb);
        for (int64_t m0 = 0; m0 < M; m0 += mc) {
            int64_t mm = M - m0 < mc ? M - m0 : mc;
            moects__fp4_dequant_rows(&l, a->a, a->sa, s->scale_layout, g, m0, mm, K, fa);
            if (K > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mm, (int)nn, (int)K, 1.0f, fa,
                            (int)K, fb, (int)K, 0.0f, c, (int)nn);
            for (int64_t i = 0; i < mm; i++)
                moects__store_scaled(s->out_dtype, a->d, (m0 + i) * N + n0, K > 0 ? c + i * nn : NULL, nn, a->alpha);
        }
    }
    rc = 0;
out:
    free(fa);
    free(fb);
    free(c);
    return rc;
}

void moects__store_scaled(moects_dtype dt, void *out, int64_t o, const float *c, int64_t n, float alpha)
{
    for (int64_t j = 0; j < n; j++) {
        float v = (c ? c[j] : 0.0f) * alpha;
        if (dt == MOECTS_BF16) ((uint16_t *)out)[o + j] = moects__bf16_from_f32(v);
        else ((float *)out)[o + j] = v;
    }
}

const moects_kernel moects_cpu_fp4_gemm_dequant_sgemm = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.fp4_gemm.dequant_sgemm",
    .op = MOECTS_OP_FP4_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .recipe = NULL,
    .acc = {.bits = 24, .truncation = 0},
    .bug = NULL,
    .supports = moects__fp4_sgemm_supports,
    .run = run,
};
