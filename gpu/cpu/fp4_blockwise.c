/* fp4_blockwise.c: cpu.fp4_gemm.blockwise, a second implementation of fp4_gemm.blockwise_v1
 * (DESIGN.md "Numeric recipes"), written apart from ref/fp4_gemm.c: no BLAS, its own decoders
 * (from the format definitions: OCP MX v1.0 sec. 5.3.3 E2M1 and 5.4.1 E8M0; E4M3 as cuda_fp8.h),
 * one straightforward loop per output element. Block partials are integer dot products in
 * quarter units (E2M1 values times 2 are the integers 0, 1, 2, 3, 4, 6, 8, 12), exact, then
 *   acc = fmaf(p, sA * sB, acc) in block order; D = out_rne(acc * alpha).
 * The CPU mutants (fp4_mutants.c) run this same loop with one bug switched on. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4_internal.h"
#include "moects_ref.h" /* moects_bf16_from_f32 only (a codec, DESIGN.md) */

int moects__fp4_shape_ok(const moects_fp4_gemm_shape *s, char *why, size_t why_len)
{
    const char *r = NULL;
    if (s->M < 0 || s->N < 0 || s->K < 0) r = "negative M, N or K";
    else if (s->format != MOECTS_FP4_MXFP4 && s->format != MOECTS_FP4_NVFP4) r = "unknown FP4 format";
    else if (s->scale_layout != MOECTS_SCALES_LINEAR && s->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        r = "unknown scale layout";
    else if (s->out_dtype != MOECTS_F32 && s->out_dtype != MOECTS_BF16) r = "output dtype not f32/bf16";
    if (!r) return 1;
    if (why && why_len) snprintf(why, why_len, "%s", r);
    return 0;
}

/* 2 * E2M1 value of a code: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign. */
static const int8_t e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static int64_t scale_off(const moects_fp4_gemm_shape *s, int64_t r, int64_t kb, int64_t nkb)
{
    if (s->scale_layout == MOECTS_SCALES_LINEAR) return r * nkb + kb;
    int64_t ktiles = (nkb + 3) / 4; /* 128x4 tiles: rows padded to 128, K-blocks to 4 */
    return ((r / 128) * ktiles + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

static float dec_scale(moects__fp4_bug bug, moects_fp4_format f, uint8_t x)
{
    if (f == MOECTS_FP4_MXFP4 || bug == MOECTS__FP4_BUG_E4M3_AS_UE8M0) {
        if (x == 0xFF) return NAN;
        if (bug == MOECTS__FP4_BUG_SCALE_FTZ && x == 0) return 0.0f;
        return ldexpf(1.0f, (int)x - 127);
    }
    int e = (x >> 3) & 15, m = x & 7;
    if (e == 15 && m == 7) return NAN;
    float v = e == 0 ? (bug == MOECTS__FP4_BUG_SCALE_FTZ ? 0.0f : ldexpf((float)m, -9))
                     : ldexpf((float)(8 + m), e - 10);
    return (x & 0x80) ? -v : v;
}

/* One row of packed codes -> 2 * values, [Kp] with zeros past K (the zero-padded last block).
 * swap: element 2j from the high nibble (the nibble_swap mutant). */
static void unpack_row(const uint8_t *row, int64_t K, int64_t Kp, int swap, int8_t *out)
{
    int lo = swap ? 4 : 0, hi = swap ? 0 : 4;
    int64_t k = 0;
    for (; k + 1 < K; k += 2) {
        out[k] = e2m1_x2[(row[k / 2] >> lo) & 0xF];
        out[k + 1] = e2m1_x2[(row[k / 2] >> hi) & 0xF];
    }
    if (k < K) out[k] = e2m1_x2[(row[k / 2] >> lo) & 0xF];
    memset(out + K, 0, (size_t)(Kp - K));
}

static int32_t dot16(const int8_t *a, const int8_t *b)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++) s += (int32_t)a[j] * b[j];
    return s;
}

static int32_t dot32(const int8_t *a, const int8_t *b)
{
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += (int32_t)a[j] * b[j];
    return s;
}

int moects__fp4_blockwise_run(moects__fp4_bug bug, const void *shape, const void *args)
{
    const moects_fp4_gemm_shape *s = shape;
    const moects_fp4_gemm_args *a = args;
    if (!moects__fp4_shape_ok(s, NULL, 0)) return -1;
    const int64_t M = s->M, N = s->N, K = s->K, g = moects_fp4_block(s->format);
    const int64_t nkb = (K + g - 1) / g, Kp = nkb * g, rb = (K + 1) / 2;
    if (M == 0 || N == 0) return 0;
    int8_t *arow = malloc((size_t)Kp + 1), *bv = malloc((size_t)(N * Kp) + 1);
    float *sa = malloc((size_t)nkb * sizeof(float) + 1), *sb = malloc((size_t)(N * nkb) * sizeof(float) + 1);
    float slut[256];
    for (int i = 0; i < 256; i++) slut[i] = dec_scale(bug, s->format, (uint8_t)i);
    int rc = -1;
    if (!arow || !bv || !sa || !sb) goto out;
    for (int64_t n = 0; n < N; n++) {
        unpack_row(a->b + n * rb, K, Kp, bug == MOECTS__FP4_BUG_NIBBLE_SWAP, bv + n * Kp);
        for (int64_t kb = 0; kb < nkb; kb++) sb[n * nkb + kb] = slut[a->sb[scale_off(s, n, kb, nkb)]];
    }
    for (int64_t m = 0; m < M; m++) {
        unpack_row(a->a + m * rb, K, Kp, 0, arow);
        for (int64_t kb = 0; kb < nkb; kb++) sa[kb] = slut[a->sa[scale_off(s, m, kb, nkb)]];
        for (int64_t n = 0; n < N; n++) {
            const int8_t *br = bv + n * Kp;
            float acc = 0.0f;
            for (int64_t kb = 0; kb < nkb; kb++) {
                int32_t q = g == 16 ? dot16(arow + kb * g, br + kb * g) : dot32(arow + kb * g, br + kb * g);
                float p = (float)q * 0.25f; /* exact: |q| <= 32 * 144 */
                int64_t sk = kb;
                if (bug == MOECTS__FP4_BUG_TAIL_SCALE && nkb >= 2 && kb == nkb - 1) sk = nkb - 2;
                float sc = sa[sk] * sb[n * nkb + sk];
                acc = fmaf(p, sc, acc);
            }
            float v = acc * a->alpha;
            if (s->out_dtype == MOECTS_BF16) ((uint16_t *)a->d)[m * N + n] = moects_bf16_from_f32(v);
            else ((float *)a->d)[m * N + n] = v;
        }
    }
    rc = 0;
out:
    free(arow);
    free(bv);
    free(sa);
    free(sb);
    return rc;
}

static int supports(const void *shape, char *why, size_t why_len)
{
    return moects__fp4_shape_ok(shape, why, why_len);
}

static int run(const void *shape, const void *args, void *stream)
{
    (void)stream;
    return moects__fp4_blockwise_run(MOECTS__FP4_BUG_NONE, shape, args);
}

const moects_kernel moects_cpu_fp4_gemm_blockwise = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.fp4_gemm.blockwise",
    .op = MOECTS_OP_FP4_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .recipe = "fp4_gemm.blockwise_v1",
    .bug = NULL,
    .supports = supports,
    .run = run,
};
