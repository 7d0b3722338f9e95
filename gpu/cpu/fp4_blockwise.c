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
#include "moects_ref.h" /* moects__bf16_from_f32 only (a codec, DESIGN.md) */

int moects__fp4_shape_ok(const moects_fp4_gemm_shape *s, char *why, size_t why_len)
{
    const char *r = NULL;
    if (s->M < 0 || s->N < 0 || s->K < 0) r = "shape: negative M, N or K";
    else if (s->format != MOECTS_FP4_MXFP4 && s->format != MOECTS_FP4_NVFP4) r = "format: unknown FP4 format";
    else if (s->scale_layout != MOECTS_SCALES_LINEAR && s->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        r = "layout: unknown scale layout";
    else if (s->out_dtype != MOECTS_F32 && s->out_dtype != MOECTS_BF16) r = "format: output dtype not f32/bf16";
    if (!r) return 1;
    if (why && why_len) snprintf(why, why_len, "%s", r);
    return 0;
}

/* 2 * E2M1 value of a code: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign. */
/* Inlined where mu is a constant (blockwise()): the mutation tests fold away. */
#define SPECIALISE __attribute__((always_inline)) inline

static const int8_t e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

SPECIALISE static int64_t scale_off(const moects__mut *mu, const moects_fp4_gemm_shape *s, int64_t r, int64_t kb, int64_t nkb)
{
    if (s->scale_layout == MOECTS_SCALES_LINEAR) return r * nkb + kb;
    int64_t ktiles = mu->op == MOECTS__FP4_SWZ_KTILES ? nkb / 4 : (nkb + 3) / 4; /* rows padded to 128, K-blocks to 4 */
    if (mu->op == MOECTS__FP4_SWZ_ROW) return ((r / 128) * ktiles + kb / 4) * 512 + ((r / 32) % 4) * 16 + (r % 32) * 4 + kb % 4;
    return ((r / 128) * ktiles + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

static float dec_scale(const moects__mut *mu, moects_fp4_format f, uint8_t x)
{
    moects__mut_op op = mu->op;
    if (f == MOECTS_FP4_MXFP4 || op == MOECTS__FP4_E4M3_AS_UE8M0) {
        if (x == 0xFF) return op == MOECTS__FP4_UE8M0_FF_INF ? INFINITY : op == MOECTS__FP4_UE8M0_FF_ZERO ? 0.0f : NAN;
        if (op == MOECTS__FP4_SCALE_FTZ && x == 0) return 0.0f;
        return ldexpf(1.0f, (int)x - 127);
    }
    int e = (x >> 3) & 15, m = x & 7;
    if (e == 15 && m == 7 && op != MOECTS__FP4_E4M3_7F_480) return NAN;
    float v = e == 0 ? (op == MOECTS__FP4_SCALE_FTZ ? 0.0f : ldexpf((float)m, -9)) : ldexpf((float)(8 + m), e - 10);
    return (x & 0x80) ? -v : v;
}

/* One row of packed codes -> 2 * values, [Kp] with zeros past K (the zero-padded last block).
 * swap: element 2j from the high nibble; kodd: an odd K's last element dropped (mutants). */
static void unpack_row(const uint8_t *row, int64_t K, int64_t Kp, int swap, int kodd, int8_t *out)
{
    int lo = swap ? 4 : 0, hi = swap ? 0 : 4;
    int64_t k = 0;
    for (; k + 1 < K; k += 2) {
        out[k] = e2m1_x2[(row[k / 2] >> lo) & 0xF];
        out[k + 1] = e2m1_x2[(row[k / 2] >> hi) & 0xF];
    }
    if (k < K) out[k] = kodd ? 0 : e2m1_x2[(row[k / 2] >> lo) & 0xF];
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

/* The end of a loop over n items under the boundary mutants: n - 1 (off), min(n, cap). */
SPECIALISE static int64_t loop_end(const moects__mut *mu, moects__mut_op off, moects__mut_op cap, int64_t n)
{
    if (mu->op == off) return n > 0 ? n - 1 : 0;
    if (mu->op == cap && n > mu->p) return mu->p;
    return n;
}

/* sum over K-blocks of p * sA * sB in block order (fp4_gemm.blockwise_v1), mutated. */
SPECIALISE static float accumulate(const moects__mut *mu, const int8_t *arow, const int8_t *br, const float *sa,
                        const float *sb, int64_t nkb, int64_t g, float alpha, float init)
{
    int64_t kb0 = mu->op == MOECTS__FP4_OFF_KB0 ? 1 : 0, kb1 = loop_end(mu, MOECTS__FP4_OFF_KB, MOECTS__FP4_CAP_K, nkb);
    if (mu->op == MOECTS__FP4_CAP_K) kb1 = nkb * g > mu->p ? mu->p / g : nkb;
    float acc = mu->op == MOECTS__FP4_ACC_NEGZERO ? -0.0f : init;
    double dacc = 0.0;
    for (int64_t i = kb0; i < kb1; i++) {
        int64_t kb = mu->op == MOECTS__FP4_REVERSE ? kb1 - 1 - (i - kb0) : i;
        int32_t q = g == 16 ? dot16(arow + kb * g, br + kb * g) : dot32(arow + kb * g, br + kb * g);
        float p = (float)q * 0.25f; /* exact: |q| <= 32 * 144 */
        int64_t sk = kb;
        if (mu->op == MOECTS__FP4_TAIL_SCALE && nkb >= 2 && kb == nkb - 1) sk = nkb - 2;
        float sc = sa[sk] * sb[sk];
        if (mu->op == MOECTS__FP4_ALPHA_PER_BLOCK) sc *= alpha;
        if (mu->op == MOECTS__FP4_ACC_DOUBLE) {
            dacc = fma((double)p, (double)sc, dacc);
        } else if (mu->op == MOECTS__FP4_MULADD) {
            volatile float ps = p * sc; /* rounded here, never fused */
            acc = acc + ps;
        } else {
            acc = fmaf(p, sc, acc);
        }
    }
    return mu->op == MOECTS__FP4_ACC_DOUBLE ? (float)dacc : acc;
}

SPECIALISE static void store(const moects__mut *mu, const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, int64_t m,
                  int64_t n, float v)
{
    int64_t off = m * s->N + n;
    if (mu->op == MOECTS__FP4_DOFF32) off = (int32_t)(uint32_t)((uint32_t)m * (uint32_t)s->N + (uint32_t)n);
    if (s->out_dtype == MOECTS_BF16)
        ((uint16_t *)a->d)[off] = mu->op == MOECTS__FP4_ROUND ? moects__bf16_round(v, (int)mu->p) : moects__bf16_from_f32(v);
    else
        ((float *)a->d)[off] = mu->op == MOECTS__FP4_F32_VIA_BF16 ? moects__bf16_to_f32(moects__bf16_from_f32(v)) : v;
}

/* The kernel, mutated by mu. Inlined into the honest run(), where mu is a constant: every mutation
 * test folds away there (the shared loop tested mu->op per K-block; the honest kernel, run twice per
 * case, took about twice as long). */
SPECIALISE static int blockwise(const moects__mut *mu, const void *shape, const void *args)
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
    for (int i = 0; i < 256; i++) slut[i] = dec_scale(mu, s->format, (uint8_t)i);
    int kodd = mu->op == MOECTS__FP4_OFF_KODD, rc = -1;
    if (!arow || !bv || !sa || !sb) goto out;
    for (int64_t n = 0; n < N; n++) {
        int64_t nr = mu->op == MOECTS__FP4_NARROW_N ? moects__wrap_bits(n, mu->p) : n;
        unpack_row(a->b + nr * rb, K, Kp, mu->op == MOECTS__FP4_NIBBLE_SWAP_B, kodd, bv + n * Kp);
        for (int64_t kb = 0; kb < nkb; kb++) sb[n * nkb + kb] = slut[a->sb[scale_off(mu, s, nr, kb, nkb)]];
    }
    const int64_t mend = loop_end(mu, MOECTS__FP4_OFF_M, MOECTS__FP4_CAP_M, M);
    const int64_t nend = loop_end(mu, MOECTS__FP4_OFF_N, MOECTS__FP4_CAP_N, N);
    for (int64_t m = 0; m < mend; m++) {
        int64_t mr = mu->op == MOECTS__FP4_NARROW_M ? moects__wrap_bits(m, mu->p) : m;
        unpack_row(a->a + mr * rb, K, Kp, mu->op == MOECTS__FP4_NIBBLE_SWAP_A, kodd, arow);
        for (int64_t kb = 0; kb < nkb; kb++) sa[kb] = slut[a->sa[scale_off(mu, s, mr, kb, nkb)]];
        float carry = 0.0f;
        for (int64_t n = 0; n < nend; n++) {
            float acc = accumulate(mu, arow, bv + n * Kp, sa, sb + n * nkb, nkb, g, a->alpha,
                                   mu->op == MOECTS__FP4_ACC_CARRY ? carry : 0.0f);
            carry = acc;
            int no_alpha = mu->op == MOECTS__FP4_NO_ALPHA || mu->op == MOECTS__FP4_ALPHA_PER_BLOCK;
            store(mu, s, a, m, n, no_alpha ? acc : acc * a->alpha);
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

int moects__fp4_blockwise_run(const moects__mut *mu, const void *shape, const void *args)
{
    static const moects__mut honest = {MOECTS__MUT_NONE, 0};
    return blockwise(mu ? mu : &honest, shape, args);
}

static int supports(const void *shape, char *why, size_t why_len)
{
    return moects__fp4_shape_ok(shape, why, why_len);
}

static int run(const void *shape, const void *args, void *stream)
{
    (void)stream;
    const moects__mut honest = {MOECTS__MUT_NONE, 0};
    return blockwise(&honest, shape, args);
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
