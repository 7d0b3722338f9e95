/* moe_blockwise.c: cpu.moe_gemm.blockwise, moe_gemm.blockwise_v1 (DESIGN.md "Grouped MoE GEMM") for
 * MXFP4, NVFP4 and W4A8 in the three row layouts, written apart from ref/moe_gemm.c: no BLAS, its own
 * decoders (OCP MX v1.0 sec. 5.3.3 E2M1, 5.4.1 E8M0; E4M3 as cuda_fp8.h), one loop per output
 * element of each valid row, its expert's weights decoded once:
 *   p   = the K-block's dot product: FP4 x FP4 in quarter units (exact integers); E4M3 x E2M1 in
 *         double (exact: 6-bit products within 2^-10 .. 2^11), rounded once to FP32
 *   acc = fmaf(p, sA[b] * sB[e][n][b], acc) in block order;  D[r][n] = out_rne(acc * alpha[e])
 * W4A8: the A scale of 32-wide K-block b is sa[r][b * 32 / a_scale_block]. W4A16 has no blockwise
 * recipe: refused. The CPU mutants (moe_mutants.c) run this loop with one bug switched on. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_internal.h"
#include "moects_ref.h" /* moects__bf16_from_f32 only (a codec, DESIGN.md) */

int moects__moe_shape_ok(const moects_moe_gemm_shape *s, char *why, size_t why_len)
{
    const char *r = NULL;
    if (s->E < 1 || s->M < 0 || s->N < 0 || s->K < 0) r = "shape: E < 1 or negative M, N, K";
    else if (s->format < MOECTS_MOE_MXFP4 || s->format > MOECTS_MOE_W4A16) r = "format: unknown moe format";
    else if ((s->format == MOECTS_MOE_NVFP4) != (s->b_format == MOECTS_FP4_NVFP4) && s->format != MOECTS_MOE_W4A16)
        r = "format: b_format does not match the format";
    else if (s->b_format != MOECTS_FP4_MXFP4 && s->b_format != MOECTS_FP4_NVFP4) r = "format: unknown b_format";
    else if (s->rows < MOECTS_ROWS_CONTIGUOUS || s->rows > MOECTS_ROWS_OFFSETS) r = "layout: unknown row layout";
    else if (s->rows == MOECTS_ROWS_CONTIGUOUS && s->align < 1) r = "layout: align < 1";
    else if (s->format == MOECTS_MOE_W4A8 && s->a_scale_block != 32 && s->a_scale_block != 128)
        r = "format: W4A8 a_scale_block not 32 or 128";
    else if (s->scale_layout != MOECTS_SCALES_LINEAR && s->scale_layout != MOECTS_SCALES_SWIZZLED_128X4)
        r = "layout: unknown scale layout";
    else if (s->out_dtype != MOECTS_F32 && s->out_dtype != MOECTS_BF16) r = "format: output dtype not f32/bf16";
    if (!r) return 1;
    if (why && why_len) snprintf(why, why_len, "%s", r);
    return 0;
}

static int64_t swz_bytes(int64_t rows, int64_t nkb) { return rows ? (rows + 127) / 128 * 128 * ((nkb + 3) / 4 * 4) : 0; }

static int64_t scale_off(moects_scale_layout l, int64_t r, int64_t kb, int64_t nkb)
{
    if (l == MOECTS_SCALES_LINEAR) return r * nkb + kb;
    return ((r / 128) * ((nkb + 3) / 4) + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

size_t moects__moe_b_scale_bytes(const moects_moe_gemm_shape *s, int64_t *nkb, int64_t *g)
{
    *g = moects_fp4_block(s->b_format);
    *nkb = (s->K + *g - 1) / *g;
    return (size_t)(s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4 ? swz_bytes(s->N, *nkb) : s->N * *nkb);
}

int moects__moe_row_experts(moects__moe_bug bug, const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a,
                            int64_t rows, int32_t **expert)
{
    int32_t *x = malloc((size_t)rows * sizeof *x + 1);
    if (!x) return -1;
    for (int64_t r = 0; r < rows; r++) x[r] = -1;
    *expert = x;
    const int64_t E = s->E, M = s->M;
    if (s->rows == MOECTS_ROWS_CONTIGUOUS) {
        for (int64_t r = 0; r < rows; r++) {
            if (a->m_indices[r] < -1 || a->m_indices[r] >= E) return -1;
            x[r] = a->m_indices[r];
        }
        if (bug == MOECTS__MOE_BUG_STRADDLE)
            for (int64_t t = 0; t < rows; t += 128) {
                int64_t end = t + 128 < rows ? t + 128 : rows, first = t;
                while (first < end && x[first] < 0) first++;
                for (int64_t r = t; first < end && r < end; r++)
                    if (x[r] >= 0) x[r] = x[first];
            }
    } else if (s->rows == MOECTS_ROWS_MASKED) {
        int64_t sum = 0;
        for (int64_t e = 0; e < E; e++) {
            if (a->masked_m[e] < 0 || a->masked_m[e] > M) return -1;
            sum += a->masked_m[e];
        }
        int64_t mean = (sum + E - 1) / E;
        for (int64_t e = 0; e < E; e++) {
            int64_t n = bug == MOECTS__MOE_BUG_MASKED_M ? (mean < M ? mean : M)
                        : bug == MOECTS__MOE_BUG_MASKED_M0 ? a->masked_m[0]
                        : bug == MOECTS__MOE_BUG_MASKED_M_OFF && a->masked_m[e] > 0 ? a->masked_m[e] - 1 : a->masked_m[e];
            for (int64_t i = 0; i < n; i++) x[e * M + i] = (int32_t)e;
        }
    } else {
        if (a->expert_offsets[0] != 0 || a->expert_offsets[E] != M) return -1;
        for (int64_t e = 0; e < E; e++) {
            if (a->expert_offsets[e + 1] < a->expert_offsets[e]) return -1;
            for (int64_t r = a->expert_offsets[e]; r < a->expert_offsets[e + 1]; r++) x[r] = (int32_t)e;
        }
    }
    if (bug == MOECTS__MOE_BUG_BOUND_NEXT) /* ascending: x[r + 1] is still the honest one */
        for (int64_t r = 0; r + 1 < rows; r++)
            if (x[r] >= 0) x[r] = x[r + 1];
    if (bug == MOECTS__MOE_BUG_BOUND_PREV)
        for (int64_t r = rows - 1; r > 0; r--)
            if (x[r] >= 0) x[r] = x[r - 1];
    return 0;
}

/* 2 * E2M1 value of a code: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign. */
static const int8_t e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float dec_ue8m0(uint8_t x) { return x == 0xFF ? NAN : ldexpf(1.0f, (int)x - 127); }

static float dec_e4m3(uint8_t x)
{
    int e = (x >> 3) & 15, m = x & 7;
    if (e == 15 && m == 7) return NAN;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return (x & 0x80) ? -v : v;
}

static float dec_scale(moects_fp4_format f, uint8_t x) { return f == MOECTS_FP4_NVFP4 ? dec_e4m3(x) : dec_ue8m0(x); }

/* Packed E2M1 row -> 2 * values, [Kp] zero-padded past K. */
static void unpack_row(const uint8_t *row, int64_t K, int64_t Kp, int8_t *out)
{
    for (int64_t k = 0; k < K; k++) out[k] = e2m1_x2[(row[k / 2] >> (k % 2 * 4)) & 0xF];
    memset(out + K, 0, (size_t)(Kp - K));
}

typedef struct {
    const moects_moe_gemm_shape *s;
    const moects_moe_gemm_args *a;
    moects__moe_bug bug;
    int64_t rows, g, nkb, Kp;
    int split; /* SPLIT_K_ROWS on the expert in hand: K-blocks [nkb/2, nkb) in a second chain */
} ctx;

/* A's scale of row r, K-block kb (g wide). */
static float a_scale(const ctx *c, int64_t r, int64_t kb)
{
    const moects_moe_gemm_shape *s = c->s;
    if (s->format == MOECTS_MOE_W4A8) {
        int64_t nsa = (s->K + s->a_scale_block - 1) / s->a_scale_block;
        int64_t i = r * nsa + (c->bug == MOECTS__MOE_BUG_A_PER32 ? kb : kb * 32 / s->a_scale_block);
        if (i >= c->rows * nsa) i = c->rows * nsa - 1; /* the mutant's overrun, kept inside the tensor */
        if (s->a_scale_f32) return ((const float *)c->a->sa)[i];
        return dec_ue8m0(((const uint8_t *)c->a->sa)[i]);
    }
    const uint8_t *sa = c->a->sa;
    int64_t o;
    if (s->rows == MOECTS_ROWS_OFFSETS) o = r * c->nkb + kb;
    else if (s->rows == MOECTS_ROWS_MASKED) {
        int64_t gb = s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4 ? swz_bytes(s->M, c->nkb) : s->M * c->nkb;
        o = (r / s->M) * gb + scale_off(s->scale_layout, r % s->M, kb, c->nkb);
    } else o = scale_off(s->scale_layout, r, kb, c->nkb);
    return dec_scale(s->b_format, sa[o]);
}

/* The PAD_ROWS bug's factor for row r: t / t, t the largest K-block-0 A scale of r's 128-row tile
 * (padding rows included; a NaN wins): 1 unless a row of the tile has a NaN scale. */
static float pad_factor(const ctx *c, int64_t r)
{
    if (c->bug != MOECTS__MOE_BUG_PAD_ROWS || c->s->rows != MOECTS_ROWS_CONTIGUOUS || c->nkb == 0) return 1.0f;
    int64_t t0 = r / 128 * 128, t1 = t0 + 128 < c->rows ? t0 + 128 : c->rows;
    float t = 0.0f;
    for (int64_t q = t0; q < t1; q++) {
        float v = a_scale(c, q, 0);
        if (isnan(v) || v > t) t = v;
    }
    return t / t;
}

/* Row r of expert e against the decoded weights bv [N][Kp] (x2 values) and scales sb [N][nkb]. */
static void one_row(const ctx *c, int64_t r, int64_t e, const int8_t *bv, const float *sb, int8_t *a4, double *a8,
                    float *sa)
{
    const moects_moe_gemm_shape *s = c->s;
    const int64_t N = s->N, K = s->K, g = c->g, nkb = c->nkb, Kp = c->Kp;
    int w4a8 = s->format == MOECTS_MOE_W4A8;
    if (w4a8) {
        const uint8_t *row = (const uint8_t *)c->a->a + r * K;
        for (int64_t k = 0; k < Kp; k++) a8[k] = k < K ? dec_e4m3(row[k]) : 0.0;
    } else {
        unpack_row((const uint8_t *)c->a->a + r * ((K + 1) / 2), K, Kp, a4);
    }
    for (int64_t kb = 0; kb < nkb; kb++) sa[kb] = a_scale(c, r, kb);
    float alpha = c->a->alpha[c->bug == MOECTS__MOE_BUG_ALPHA0 ? 0 : e], f = pad_factor(c, r);
    for (int64_t n = 0; n < N; n++) {
        const int8_t *br = bv + n * Kp;
        float acc = 0.0f, acc2 = 0.0f;
        for (int64_t kb = 0; kb < nkb; kb++) {
            float p;
            if (w4a8) {
                double q = 0;
                for (int64_t j = kb * g; j < kb * g + g; j++) q += a8[j] * (0.5 * br[j]);
                p = (float)q;
            } else {
                int32_t q = 0;
                for (int64_t j = kb * g; j < kb * g + g; j++) q += (int32_t)a4[j] * br[j];
                p = (float)q * 0.25f; /* exact: |q| <= 32 * 144 */
            }
            if (c->split && kb >= nkb / 2) acc2 = fmaf(p, sa[kb] * sb[n * nkb + kb], acc2);
            else acc = fmaf(p, sa[kb] * sb[n * nkb + kb], acc);
        }
        float v = (c->split ? acc + acc2 : acc) * alpha;
        if (f != 1.0f) v *= f;
        int64_t o = r * N + n;
        if (s->out_dtype == MOECTS_BF16) ((uint16_t *)c->a->d)[o] = moects__bf16_from_f32(v);
        else ((float *)c->a->d)[o] = v;
    }
}

int moects__moe_blockwise_run(moects__moe_bug bug, const void *shape, const void *args)
{
    const moects_moe_gemm_shape *s = shape;
    const moects_moe_gemm_args *a = args;
    if (!moects__moe_shape_ok(s, NULL, 0) || s->format == MOECTS_MOE_W4A16) return -1;
    ctx c = {s, a, bug, s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M, 0, 0, 0, 0};
    size_t ebytes = moects__moe_b_scale_bytes(s, &c.nkb, &c.g);
    c.Kp = c.nkb * c.g;
    const int64_t N = s->N, nkb = c.nkb, Kp = c.Kp, rb = (s->K + 1) / 2;
    size_t stride = bug == MOECTS__MOE_BUG_SCALE_STRIDE ? (size_t)(N * nkb)
                    : bug == MOECTS__MOE_BUG_SWZ_STRIDE_N && s->scale_layout == MOECTS_SCALES_SWIZZLED_128X4
                        ? (size_t)(N * ((nkb + 3) / 4 * 4)) : ebytes;
    if (c.rows == 0 || N == 0) return 0;
    int32_t *ex = NULL;
    int8_t *bv = malloc((size_t)(N * Kp) + 1), *a4 = malloc((size_t)Kp + 1);
    double *a8 = malloc((size_t)Kp * sizeof(double) + 1);
    float *sb = malloc((size_t)(N * nkb) * sizeof(float) + 1), *sa = malloc((size_t)nkb * sizeof(float) + 1);
    int rc = -1;
    if (!bv || !a4 || !a8 || !sb || !sa || moects__moe_row_experts(bug, s, a, c.rows, &ex)) goto out;
    for (int64_t e = 0; e < s->E; e++) {
        int64_t r = 0;
        while (r < c.rows && ex[r] != e) r++;
        if (r == c.rows) continue; /* no rows: its weights are not read */
        int64_t n_rows = 0;
        for (int64_t q = r; q < c.rows; q++) n_rows += ex[q] == e;
        c.split = bug == MOECTS__MOE_BUG_SPLIT_K_ROWS && n_rows > MOECTS__MOE_SPLIT_ROWS;
        for (int64_t n = 0; n < N; n++) {
            unpack_row(a->b + (e * N + n) * rb, s->K, Kp, bv + n * Kp);
            for (int64_t kb = 0; kb < nkb; kb++)
                sb[n * nkb + kb] = dec_scale(s->b_format, a->sb[(size_t)e * stride + (size_t)scale_off(s->scale_layout, n, kb, nkb)]);
        }
        for (; r < c.rows; r++)
            if (ex[r] == e) one_row(&c, r, e, bv, sb, a4, a8, sa);
    }
    rc = 0;
out:
    free(ex);
    free(bv);
    free(a4);
    free(a8);
    free(sb);
    free(sa);
    return rc;
}

static int supports(const void *shape, char *why, size_t why_len)
{
    const moects_moe_gemm_shape *s = shape;
    if (!moects__moe_shape_ok(s, why, why_len)) return 0;
    if (s->format != MOECTS_MOE_W4A16) return 1;
    if (why && why_len) snprintf(why, why_len, "format: W4A16 has no blockwise recipe (BF16 x E2M1 partials are not exact)");
    return 0;
}

static int run(const void *shape, const void *args, void *stream)
{
    (void)stream;
    return moects__moe_blockwise_run(MOECTS__MOE_BUG_NONE, shape, args);
}

const moects_kernel moects_cpu_moe_gemm_blockwise = {
    .abi_version = MOECTS_KERNEL_ABI_VERSION,
    .name = "cpu.moe_gemm.blockwise",
    .op = MOECTS_OP_MOE_GEMM,
    .device = MOECTS_DEVICE_CPU,
    .recipe = "moe_gemm.blockwise_v1",
    .bug = NULL,
    .supports = supports,
    .run = run,
    .flags = MOECTS_KERNEL_BATCH_INVARIANT, /* each row alone, K-blocks in order, whatever the rows beside it */
};
