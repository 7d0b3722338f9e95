/* test_ref_moe_oracle.h: an independent MPFR oracle for the grouped MoE GEMM recipes (DESIGN.md
 * "Grouped MoE GEMM"), for tests only. It finds each row's expert from the row metadata itself,
 * decodes every operand and scale from the format definitions (test_ref_fp4_oracle.h's decoders,
 * never ref/), forms each block partial exactly at OR_PREC bits and emulates each FP32 step of
 * blockwise_v1 as "exact value, one rounding to binary32"; exact_v1 sums everything exactly and
 * rounds once. One element at a time, in the obvious order: slow, so tests keep shapes small. */
#ifndef TEST_REF_MOE_ORACLE_H
#define TEST_REF_MOE_ORACLE_H
#include "test_ref_fp4_oracle.h"

/* Expert of row r, or -1 (padding, masked-out): the local row (masked) in *local. */
static inline int64_t mo_expert(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int64_t r,
                         int64_t *local)
{
    *local = r;
    if (s->rows == MOECTS_ROWS_CONTIGUOUS) return a->m_indices[r];
    if (s->rows == MOECTS_ROWS_MASKED) {
        *local = r % s->M;
        return *local < a->masked_m[r / s->M] ? r / s->M : -1;
    }
    for (int64_t e = 0; e < s->E; e++)
        if (a->expert_offsets[e] <= r && r < a->expert_offsets[e + 1]) return e;
    return -1;
}

static inline int64_t mo_g(const moects_moe_gemm_shape *s)
{
    if (s->format == MOECTS_MOE_NVFP4 || (s->format == MOECTS_MOE_W4A16 && s->b_format == MOECTS_FP4_NVFP4))
        return 16;
    return 32;
}

/* Byte offset of (row r, K-block kb) in a [rows][nkb] scale tensor (DESIGN.md "Number formats"). */
static inline int64_t mo_off(int64_t r, int64_t kb, int64_t nkb, moects_scale_layout l)
{
    if (l == MOECTS_SCALES_LINEAR) return r * nkb + kb;
    return ((r / 128) * ((nkb + 3) / 4) + kb / 4) * 512 + (r % 32) * 16 + ((r / 32) % 4) * 4 + kb % 4;
}

static inline int64_t mo_bytes(int64_t rows, int64_t nkb, moects_scale_layout l)
{
    return l == MOECTS_SCALES_LINEAR ? rows * nkb : (rows + 127) / 128 * 128 * ((nkb + 3) / 4) * 4;
}

/* A element (row r, k) -> exact value in v. */
static inline void mo_a(mpfr_t v, const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int64_t r, int64_t k)
{
    if (s->format == MOECTS_MOE_W4A8) {
        or_scale(v, MOECTS_FP4_NVFP4, ((const uint8_t *)a->a)[r * s->K + k]); /* E4M3 fn, signed */
    } else if (s->format == MOECTS_MOE_W4A16) {
        uint32_t u = (uint32_t)((const uint16_t *)a->a)[r * s->K + k] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        mpfr_set_flt(v, f, MPFR_RNDN);
    } else {
        mpfr_set_si_2exp(v, or_e2m1_x2(or_code((const uint8_t *)a->a + r * ((s->K + 1) / 2), k)), -1, MPFR_RNDN);
    }
}

/* A's scale for row r (local row lr, expert e), K-block b of mo_g -> v; returns 1 when it is NaN
 * (or an FP32 Inf, which exact_v1 treats as NaN too). */
static inline int mo_sa(mpfr_t v, const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int64_t r, int64_t lr,
                 int64_t e, int64_t b, int64_t nkb)
{
    if (s->format == MOECTS_MOE_W4A16) {
        mpfr_set_ui(v, 1, MPFR_RNDN);
        return 0;
    }
    if (s->format == MOECTS_MOE_W4A8) {
        int64_t nsa = (s->K + s->a_scale_block - 1) / s->a_scale_block, i = r * nsa + b * 32 / s->a_scale_block;
        if (!s->a_scale_f32) return or_scale(v, MOECTS_FP4_MXFP4, ((const uint8_t *)a->sa)[i]);
        float f = ((const float *)a->sa)[i];
        mpfr_set_flt(v, f, MPFR_RNDN);
        return !isfinite(f);
    }
    const uint8_t *base = a->sa;
    moects_scale_layout l = s->scale_layout;
    if (s->rows == MOECTS_ROWS_MASKED) {
        base += e * mo_bytes(s->M, nkb, l);
        r = lr;
    } else if (s->rows == MOECTS_ROWS_OFFSETS) {
        l = MOECTS_SCALES_LINEAR;
    }
    return or_scale(v, s->b_format, base[mo_off(r, b, nkb, l)]);
}

/* Expected element (r, n) of a valid row: f32 or bf16 value as a double, or NaN. */
static inline double mo_element(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, int exact, int64_t r,
                         int64_t n)
{
    int64_t lr, e = mo_expert(s, a, r, &lr);
    const int64_t g = mo_g(s), nkb = (s->K + g - 1) / g, rb = (s->K + 1) / 2;
    const uint8_t *sbe = a->sb + e * mo_bytes(s->N, nkb, s->scale_layout);
    const uint8_t *brow = a->b + (e * s->N + n) * rb;
    float alpha = a->alpha ? a->alpha[e] : 1.0f;
    mpfr_t sa, sb, t, p, acc, u;
    mpfr_inits2(OR_PREC, sa, sb, t, p, acc, u, (mpfr_ptr)0);
    mpfr_set_zero(acc, 1);
    int nan = 0;
    for (int64_t b = 0; b < nkb; b++) {
        nan |= mo_sa(sa, s, a, r, lr, e, b, nkb);
        nan |= or_scale(sb, s->b_format, sbe[mo_off(n, b, nkb, s->scale_layout)]);
        mpfr_set_zero(p, 1);
        for (int64_t k = b * g; k < (b + 1) * g && k < s->K; k++) {
            mo_a(t, s, a, r, k);
            mpfr_mul_si(t, t, or_e2m1_x2(or_code(brow, k)), MPFR_RNDN);
            mpfr_div_2ui(t, t, 1, MPFR_RNDN);
            mpfr_add(p, p, t, MPFR_RNDN); /* exact */
        }
        if (exact) {
            mpfr_mul(t, sa, sb, MPFR_RNDN);
            mpfr_mul(t, t, p, MPFR_RNDN);
            mpfr_add(acc, acc, t, MPFR_RNDN);
            continue;
        }
        if (s->format == MOECTS_MOE_W4A8) mpfr_set_d(p, or_round(p, 24), MPFR_RNDN); /* (float)p */
        mpfr_mul(t, sa, sb, MPFR_RNDN);
        mpfr_set_d(t, or_round(t, 24), MPFR_RNDN); /* s = FP32(sA * sB) */
        mpfr_mul(u, p, t, MPFR_RNDN);
        mpfr_add(u, u, acc, MPFR_RNDN);
        mpfr_set_d(acc, or_round(u, 24), MPFR_RNDN); /* fmaf */
    }
    int prec_out = s->out_dtype == MOECTS_BF16 ? 8 : 24;
    double result;
    mpfr_set_flt(t, alpha, MPFR_RNDN);
    mpfr_mul(u, acc, t, MPFR_RNDN);
    if (exact) {
        if (mpfr_zero_p(u)) mpfr_set_zero(u, 1); /* the exact value 0 is +0 */
        result = nan || isnan(alpha) ? NAN : or_round(u, prec_out);
    } else {
        result = or_round(u, 24);
        if (prec_out == 8) {
            mpfr_set_d(u, result, MPFR_RNDN);
            result = or_round(u, 8);
        }
    }
    mpfr_clears(sa, sb, t, p, acc, u, (mpfr_ptr)0);
    return result;
}

static inline uint32_t mo_bits(const moects_moe_gemm_shape *s, const void *d, int64_t i)
{
    if (s->out_dtype == MOECTS_BF16) return ((const uint16_t *)d)[i];
    uint32_t u;
    memcpy(&u, (const float *)d + i, sizeof u);
    return u;
}

/* Compare d with the oracle on every valid row, and check every invalid row still holds the
 * sentinel byte `fill`. Returns mismatches; the first in *first, *got, *want. */
static inline int64_t mo_check(const moects_moe_gemm_shape *s, const moects_moe_gemm_args *a, const void *d, int exact,
                        uint8_t fill, int64_t *first, double *got, double *want)
{
    const int64_t rows = s->rows == MOECTS_ROWS_MASKED ? s->E * s->M : s->M;
    const size_t elt = s->out_dtype == MOECTS_BF16 ? 2 : 4;
    int64_t bad = 0, lr;
    for (int64_t r = 0; r < rows; r++) {
        int valid = mo_expert(s, a, r, &lr) >= 0;
        for (int64_t n = 0; n < s->N; n++) {
            int64_t i = r * s->N + n;
            uint32_t gb = mo_bits(s, d, i);
            double w = NAN, gv;
            int ok;
            if (!valid) {
                const uint8_t *p = (const uint8_t *)d + i * (int64_t)elt;
                ok = 1;
                for (size_t q = 0; q < elt; q++) ok &= p[q] == fill;
            } else {
                w = mo_element(s, a, exact, r, n);
                float wf = (float)w;
                uint32_t wb;
                memcpy(&wb, &wf, sizeof wb);
                if (elt == 2) wb >>= 16;
                uint32_t expo = elt == 2 ? 0x7F80u : 0x7F800000u, mant = elt == 2 ? 0x7Fu : 0x7FFFFFu;
                int gnan = (gb & expo) == expo && (gb & mant);
                ok = isnan(w) ? gnan : gb == wb;
            }
            if (elt == 2) {
                uint32_t u = gb << 16;
                float f;
                memcpy(&f, &u, sizeof f);
                gv = f;
            } else {
                float f;
                memcpy(&f, &gb, sizeof f);
                gv = f;
            }
            if (!ok && bad++ == 0) {
                *first = i;
                *got = gv;
                *want = w;
            }
        }
    }
    return bad;
}
#endif
