/* test_ref_fp4_fused.c: moects__ref_fp4_gemm_recipes (ref/fp4_gemm.c), both FP4 GEMM recipes from
 * one pass of block partials. Each output is checked bit for bit against an independent oracle:
 * blockwise_v1 by a plain-C evaluation of the recipe per element (codes and scales decoded here,
 * partials summed in integers, then fmaf in block order; on small problems also against the MPFR
 * emulation of test_ref_fp4_oracle.h), exact_v1 by the MPFR oracle of test_ref_fp4_oracle.h.
 * Inputs: both formats, both scale layouts, f32 and bf16 out, K tails with garbage in the ignored
 * nibble, K = 0, M and N across the reference's tiles (64 and 256), zero-sized M or N, UE8M0 codes
 * 0/1/254/255, E4M3 subnormal, negative and NaN scales, large codes (the two-sgemm path), K past
 * the whole-K limit. Also: one output NULL, a->d untouched, argument errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_quant.h"
#include "moects_ref.h"
#include "test_ref_fp4_oracle.h"
#include "test_rng.h"

typedef enum { SC_NARROW, SC_WIDE, SC_UE8M0_EDGE, SC_E4M3_SUB, SC_NAN, SC_SIGNED } scale_kind;

typedef struct {
    moects_fp4_gemm_shape s;
    moects_fp4_gemm_args a;
    uint8_t *A, *B, *sa_lin, *sb_lin, *sa_sw, *sb_sw;
    int64_t nkb, rb;
} prob;

static uint8_t scale_code(moects_fp4_format f, scale_kind k)
{
    if (f == MOECTS_FP4_MXFP4) {
        static const uint8_t edge[] = {0, 1, 254, 255, 127, 2, 253, 126};
        switch (k) {
        case SC_NARROW: return (uint8_t)(122 + rnd() % 10);
        case SC_WIDE: return (uint8_t)(rnd() % 255);
        case SC_NAN: return rnd() % 12 == 0 ? 0xFF : (uint8_t)(118 + rnd() % 20);
        default: return edge[rnd() % 8]; /* 0 and 1: subnormal sA*sB in FP32; 254: overflow */
        }
    }
    switch (k) {
    case SC_NARROW: return (uint8_t)(0x30 + rnd() % 16);
    case SC_WIDE: return (uint8_t)(rnd() % 0x7F);
    case SC_NAN: return rnd() % 12 == 0 ? (rnd() & 1 ? 0x7F : 0xFF) : (uint8_t)(0x28 + rnd() % 24);
    case SC_SIGNED: return (uint8_t)((rnd() & 0x80) | (0x20 + rnd() % 40)); /* sign bit: negative */
    default: { /* subnormals 0x01..0x07, zero, the smallest normals, the largest finite */
        static const uint8_t sub[] = {0x00, 0x01, 0x02, 0x03, 0x05, 0x07, 0x08, 0x09, 0x7E, 0x7D, 0x38};
        return sub[rnd() % 11];
    }
    }
}

/* big: codes +-4/+-6 in 3 of every 4 K-blocks (partials past the packing bounds). */
static void make(prob *p, int64_t M, int64_t N, int64_t K, moects_fp4_format f, moects_dtype out,
                 scale_kind sk, int big)
{
    memset(p, 0, sizeof *p);
    p->s = (moects_fp4_gemm_shape){M, N, K, f, MOECTS_SCALES_LINEAR, out};
    int64_t g = moects_fp4_block(f);
    p->nkb = (K + g - 1) / g;
    p->rb = (K + 1) / 2;
    p->A = malloc((size_t)(M * p->rb + 1));
    p->B = malloc((size_t)(N * p->rb + 1));
    for (int64_t i = 0; i < M * p->rb; i++) p->A[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < N * p->rb; i++) p->B[i] = (uint8_t)rnd();
    if (big) {
        static const uint8_t bigc[4] = {0x6, 0x7, 0xE, 0xF};
        for (int op = 0; op < 2; op++)
            for (int64_t r = 0; r < (op ? N : M); r++)
                for (int64_t k = 0; k < K; k += 2)
                    if ((k / g) % 4 != 3)
                        (op ? p->B : p->A)[r * p->rb + k / 2] = (uint8_t)(bigc[rnd() % 4] | bigc[rnd() % 4] << 4);
    }
    p->sa_lin = malloc((size_t)(M * p->nkb + 1));
    p->sb_lin = malloc((size_t)(N * p->nkb + 1));
    for (int64_t i = 0; i < M * p->nkb; i++) p->sa_lin[i] = scale_code(f, sk);
    for (int64_t i = 0; i < N * p->nkb; i++) p->sb_lin[i] = scale_code(f, sk);
    p->sa_sw = malloc((size_t)moects__scale_bytes(M, p->nkb, MOECTS_SCALES_SWIZZLED_128X4) + 1);
    p->sb_sw = malloc((size_t)moects__scale_bytes(N, p->nkb, MOECTS_SCALES_SWIZZLED_128X4) + 1);
    moects__scales_swizzle(p->sa_lin, M, p->nkb, p->sa_sw);
    moects__scales_swizzle(p->sb_lin, N, p->nkb, p->sb_sw);
    float alpha = 1.0f;
    if (f == MOECTS_FP4_NVFP4) alpha = (float)ldexp(1.0 + (rnd() % 1000) / 1000.0, (int)(rnd() % 20) - 18);
    if (rnd() % 4 == 0) alpha = -alpha;
    p->a = (moects_fp4_gemm_args){p->A, p->B, p->sa_lin, p->sb_lin, alpha, NULL};
}

static void release(prob *p)
{
    free(p->A);
    free(p->B);
    free(p->sa_lin);
    free(p->sb_lin);
    free(p->sa_sw);
    free(p->sb_sw);
}

/* ---- the blockwise_v1 oracle in plain C (FP32 operations, -ffp-contract=off) ---- */

static float bw_scale(moects_fp4_format f, unsigned x) /* exact decode, NaN codes -> NaN */
{
    if (f == MOECTS_FP4_MXFP4) return x == 0xFF ? NAN : ldexpf(1.0f, (int)x - 127);
    if ((x & 0x7F) == 0x7F) return NAN;
    unsigned e = (x >> 3) & 15, m = x & 7;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), (int)e - 10);
    return (x & 0x80) ? -v : v;
}

static uint16_t bw_bf16(float f) /* RNE to bf16 bits (NaN: any NaN pattern) */
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f)) return 0x7FC0;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* D[m][n] of blockwise_v1 as FP32 (before any bf16 rounding). */
static float bw_element(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, int64_t m, int64_t n)
{
    or_ctx c = {s, a, moects_fp4_block(s->format), 0, (s->K + 1) / 2};
    c.nkb = (s->K + c.g - 1) / c.g;
    float acc = 0.0f;
    for (int64_t b = 0; b < c.nkb; b++) {
        float p = (float)or_partial_q(&c, m, n, b) * 0.25f; /* |q| <= 4608: exact */
        float sc = bw_scale(s->format, or_sa(&c, a->sa, m, b)) * bw_scale(s->format, or_sa(&c, a->sb, n, b));
        acc = fmaf(p, sc, acc);
    }
    return acc * a->alpha;
}

/* Mismatches of out (blockwise_v1) against bw_element: bits equal, or both NaN. */
static int64_t bw_check(const moects_fp4_gemm_shape *s, const moects_fp4_gemm_args *a, const void *out,
                        int64_t *first)
{
    int64_t bad = 0;
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
            float w = bw_element(s, a, m, n);
            int64_t o = m * s->N + n;
            int ok;
            if (s->out_dtype == MOECTS_BF16) {
                uint16_t gb = ((const uint16_t *)out)[o];
                int gnan = (gb & 0x7F80) == 0x7F80 && (gb & 0x7F);
                ok = isnan(w) ? gnan : (!gnan && gb == bw_bf16(w));
            } else {
                float gf = ((const float *)out)[o];
                uint32_t ug, uw;
                memcpy(&ug, &gf, sizeof ug);
                memcpy(&uw, &w, sizeof uw);
                ok = isnan(w) ? isnan(gf) : ug == uw;
            }
            if (!ok && bad++ == 0) *first = o;
        }
    return bad;
}

static const char *fmt_name(moects_fp4_format f) { return f == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4"; }

/* Fused call with both outputs, both layouts: blockwise against the C oracle (and the MPFR one
 * when small), exact against MPFR; then each output alone and the single-recipe entry point give
 * the same bytes; a->d is never written. */
static void check_fused(prob *p, const char *what)
{
    const int64_t M = p->s.M, N = p->s.N;
    const size_t esz = p->s.out_dtype == MOECTS_BF16 ? 2 : 4, bytes = (size_t)(M * N) * esz;
    uint8_t *ob = malloc(bytes + 1), *oe = malloc(bytes + 1), *o1 = malloc(bytes + 1), *o2 = malloc(bytes + 1);
    uint8_t sentinel[16];
    for (int lay = 0; lay < 2; lay++) {
        p->s.scale_layout = lay ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR;
        p->a.sa = lay ? p->sa_sw : p->sa_lin;
        p->a.sb = lay ? p->sb_sw : p->sb_lin;
        char desc[256];
        snprintf(desc, sizeof desc, "%s %s %s out=%s M=%ld N=%ld K=%ld", what, fmt_name(p->s.format),
                 lay ? "swizzled" : "linear", esz == 2 ? "bf16" : "f32", (long)M, (long)N, (long)p->s.K);
        memset(ob, 0xA5, bytes);
        memset(oe, 0x5A, bytes);
        memset(sentinel, 0x3C, sizeof sentinel);
        p->a.d = sentinel;
        int rc = moects__ref_fp4_gemm_recipes(&p->s, &p->a, ob, oe);
        cr_assert_eq(rc, 0, "%s: rc %d", desc, rc);
        for (size_t i = 0; i < sizeof sentinel; i++) cr_assert_eq(sentinel[i], 0x3C, "%s: a->d written", desc);

        int64_t first = -1;
        int64_t bad = bw_check(&p->s, &p->a, ob, &first);
        cr_assert_eq(bad, 0, "%s blockwise_v1: %ld mismatches vs fmaf oracle, first at %ld", desc, (long)bad,
                     (long)first);
        double got = 0, want = 0;
        moects_fp4_gemm_args chk = p->a;
        if (M * N * (p->nkb + 1) <= 20000) { /* the MPFR emulation of the FP32 steps agrees too */
            chk.d = ob;
            bad = or_check(&p->s, &chk, 0, &first, &got, &want);
            cr_assert_eq(bad, 0, "%s blockwise_v1: %ld mismatches vs MPFR, first at %ld got %a want %a", desc,
                         (long)bad, (long)first, got, want);
        }
        chk.d = oe;
        bad = or_check(&p->s, &chk, 1, &first, &got, &want);
        cr_assert_eq(bad, 0, "%s exact_v1: %ld mismatches vs MPFR, first at %ld got %a want %a", desc, (long)bad,
                     (long)first, got, want);

        /* one output at a time; and the single-recipe entry point */
        memset(o1, 0x11, bytes);
        memset(o2, 0x22, bytes);
        cr_assert_eq(moects__ref_fp4_gemm_recipes(&p->s, &p->a, o1, NULL), 0, "%s", desc);
        cr_assert_eq(moects__ref_fp4_gemm_recipes(&p->s, &p->a, NULL, o2), 0, "%s", desc);
        cr_assert(memcmp(o1, ob, bytes) == 0, "%s: blockwise alone differs from fused", desc);
        cr_assert(memcmp(o2, oe, bytes) == 0, "%s: exact alone differs from fused", desc);
        p->a.d = o1;
        memset(o1, 0x33, bytes);
        cr_assert_eq(moects__ref_fp4_gemm(&p->s, &p->a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0, "%s", desc);
        cr_assert(memcmp(o1, ob, bytes) == 0, "%s: moects__ref_fp4_gemm blockwise differs from fused", desc);
        memset(o1, 0x44, bytes);
        cr_assert_eq(moects__ref_fp4_gemm(&p->s, &p->a, MOECTS_RECIPE_EXACT_V1), 0, "%s", desc);
        cr_assert(memcmp(o1, oe, bytes) == 0, "%s: moects__ref_fp4_gemm exact differs from fused", desc);
    }
    free(ob);
    free(oe);
    free(o1);
    free(o2);
}

/* Small and odd shapes, K = 0 and K tails; every scale kind over the loop. */
Test(fp4_fused, shape_spread)
{
    rng_state = 101;
    const int64_t shapes[][3] = {{1, 1, 1},  {1, 1, 0},  {3, 5, 16},  {2, 3, 33},   {4, 7, 100}, {17, 9, 64},
                                 {5, 3, 7},  {9, 11, 48}, {6, 4, 257}, {1, 13, 96}, {2, 47, 200}, {8, 16, 31}};
    int kind = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, shapes[i][0], shapes[i][1], shapes[i][2], (moects_fp4_format)f,
                     o ? MOECTS_BF16 : MOECTS_F32, (scale_kind)(kind++ % 6), 0);
                check_fused(&p, "spread");
                release(&p);
            }
}

/* M and N across the 64 x 64 tile of the fused pass (and the 256 one of blockwise alone), with
 * tails; B decoded whole (several m-tiles), spread over the worker threads. */
Test(fp4_fused, tile_crossing, .timeout = 600)
{
    rng_state = 102;
    prob p;
    make(&p, 130, 70, 40, MOECTS_FP4_MXFP4, MOECTS_F32, SC_WIDE, 0);
    check_fused(&p, "tiles");
    release(&p);
    make(&p, 65, 129, 24, MOECTS_FP4_NVFP4, MOECTS_BF16, SC_E4M3_SUB, 0);
    check_fused(&p, "tiles");
    release(&p);
    make(&p, 258, 66, 33, MOECTS_FP4_NVFP4, MOECTS_F32, SC_NAN, 0);
    check_fused(&p, "tiles");
    release(&p);
    make(&p, 64, 257, 32, MOECTS_FP4_MXFP4, MOECTS_BF16, SC_UE8M0_EDGE, 0);
    check_fused(&p, "tiles");
    release(&p);
}

/* UE8M0 0/1/254/255 and the E4M3 subnormals, NaN codes (0x7F, 0xFF) and sign bits. */
Test(fp4_fused, adversarial_scales)
{
    rng_state = 103;
    const scale_kind kinds[] = {SC_UE8M0_EDGE, SC_E4M3_SUB, SC_NAN, SC_SIGNED, SC_WIDE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int f = 1; f <= 2; f++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, 7, 19, 161, (moects_fp4_format)f, o ? MOECTS_BF16 : MOECTS_F32, kinds[k], 0);
                check_fused(&p, "adversarial");
                release(&p);
            }
}

/* Large codes: partials past the packing bounds, so pairs of blocks take two sgemms in some
 * blocks and one in others, in the same tile. */
Test(fp4_fused, large_partials)
{
    rng_state = 104;
    const int64_t shapes[][3] = {{3, 40, 200}, {20, 17, 97}, {70, 9, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, shapes[i][0], shapes[i][1], shapes[i][2], (moects_fp4_format)f,
                     o ? MOECTS_BF16 : MOECTS_F32, SC_WIDE, 1);
                check_fused(&p, "large partials");
                release(&p);
            }
}

/* K above the whole-K limit (65536): K decoded in chunks; long sums with many TwoSum errors. */
Test(fp4_fused, k_chunked, .timeout = 300)
{
    rng_state = 105;
    for (int f = 1; f <= 2; f++) {
        prob p;
        make(&p, 3, 2, 70001, (moects_fp4_format)f, f == 1 ? MOECTS_F32 : MOECTS_BF16, SC_WIDE, 0);
        check_fused(&p, "chunked");
        release(&p);
    }
}

/* Hand-worked (DESIGN.md recipe): MXFP4, K = 96, one 1.0 x 1.0 product per block, scales 2^24, 1,
 * 1: blockwise fmaf(1, 1, 2^24) = 2^24 twice (ties to even); exact 2^24 + 2. */
Test(fp4_fused, hand_worked_order_matters)
{
    uint8_t A[48] = {0}, B[48] = {0}, sa[3] = {127 + 24, 127, 127}, sb[3] = {127, 127, 127};
    A[0] = B[0] = A[16] = B[16] = A[32] = B[32] = 0x02;
    float db = 0, de = 0;
    moects_fp4_gemm_shape s = {1, 1, 96, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, NULL};
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &a, &db, &de), 0);
    cr_assert_eq(db, 16777216.0f);
    cr_assert_eq(de, 16777218.0f);
}

/* M or N zero: 0, nothing written, even with NULL inputs; both outputs NULL is still an error. */
Test(fp4_fused, zero_sized)
{
    uint8_t out[8];
    memset(out, 0x77, sizeof out);
    moects_fp4_gemm_args none = {NULL, NULL, NULL, NULL, 1.0f, NULL};
    for (int which = 0; which < 2; which++) {
        moects_fp4_gemm_shape s = {which ? 4 : 0, which ? 0 : 4, 64, MOECTS_FP4_NVFP4, MOECTS_SCALES_SWIZZLED_128X4,
                                   MOECTS_BF16};
        cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &none, out, out + 4), 0);
        cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &none, out, NULL), 0);
        cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &none, NULL, out), 0);
        cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &none, NULL, NULL), -1);
    }
    for (size_t i = 0; i < sizeof out; i++) cr_assert_eq(out[i], 0x77);
    /* and a real problem with zero rows, through check_fused (empty buffers) */
    rng_state = 106;
    prob p;
    make(&p, 0, 9, 48, MOECTS_FP4_MXFP4, MOECTS_F32, SC_NARROW, 0);
    check_fused(&p, "M=0");
    release(&p);
    make(&p, 5, 0, 48, MOECTS_FP4_NVFP4, MOECTS_BF16, SC_NARROW, 0);
    check_fused(&p, "N=0");
    release(&p);
}

Test(fp4_fused, bad_arguments)
{
    uint8_t A[16] = {0}, B[16] = {0}, sa[1] = {127}, sb[1] = {127};
    float db = 5.0f, de = 5.0f;
    moects_fp4_gemm_shape s = {1, 1, 32, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, NULL};
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &a, NULL, NULL), -1, "both outputs NULL");
    cr_assert_eq(moects__ref_fp4_gemm_recipes(NULL, &a, &db, &de), -1);
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, NULL, &db, &de), -1);
    moects_fp4_gemm_shape bad = s;
    bad.N = -2;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&bad, &a, &db, &de), -1);
    bad = s;
    bad.format = (moects_fp4_format)7;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&bad, &a, &db, &de), -1);
    bad = s;
    bad.out_dtype = MOECTS_I64;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&bad, &a, &db, &de), -1);
    bad = s;
    bad.scale_layout = (moects_scale_layout)5;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&bad, &a, &db, &de), -1);
    moects_fp4_gemm_args nul = a;
    nul.a = NULL;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &nul, &db, &de), -1);
    nul = a;
    nul.sa = NULL;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &nul, &db, NULL), -1);
    cr_assert(db == 5.0f && de == 5.0f, "nothing written on error");
    /* K = 0: no blocks; blockwise +0 * alpha (-0 for alpha < 0), exact the exact 0, +0 */
    s.K = 0;
    a.alpha = -2.0f;
    cr_assert_eq(moects__ref_fp4_gemm_recipes(&s, &a, &db, &de), 0);
    cr_assert(db == 0.0f && signbit(db));
    cr_assert(de == 0.0f && !signbit(de));
}

/* exact_v1 to BF16 at round-to-nearest-even ties and at overflow, worked by hand. MXFP4, M = N = 1,
 * K = 64 (two blocks): block 0 holds A = a0, B = b0 at element 0, block 1 holds A = a1, B = b1 at
 * element 32; E2M1 codes 2 = 1.0, 3 = 1.5, 4 = 2.0, 7 = 6.0. */
static uint16_t one_bf16(uint8_t a0, uint8_t b0, uint8_t sa0, uint8_t a1, uint8_t b1, uint8_t sa1)
{
    uint8_t A[32] = {0}, B[32] = {0}, sa[2] = {sa0, sa1}, sb[2] = {127, 127};
    A[0] = a0, B[0] = b0, A[16] = a1, B[16] = b1;
    uint16_t d = 0xABCD;
    moects_fp4_gemm_shape s = {1, 1, 64, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_BF16};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, &d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    return d;
}

Test(fp4_fused, bf16_ties_and_overflow_by_hand)
{
    /* 1*1 + 1.5*2*2^-8 = 1 + 3*2^-8: halfway between 1 + 1/128 (0x3F81) and 1 + 2/128 (0x3F82): even */
    cr_assert_eq(one_bf16(2, 2, 127, 3, 4, 119), 0x3F82);
    /* 1*1 + 1*1*2^-8 = 1 + 2^-8: halfway between 1.0 (0x3F80) and 0x3F81: even is 1.0 */
    cr_assert_eq(one_bf16(2, 2, 127, 2, 2, 119), 0x3F80);
    /* -(1 + 3*2^-8) (A's codes negative: bit 3): -1.015625 = 0xBF82 */
    cr_assert_eq(one_bf16(0xA, 2, 127, 0xB, 4, 119), 0xBF82);
    /* 1 + 1.5*2^-8: above the midpoint of 1.0 and 1 + 1/128: up to 0x3F81 */
    cr_assert_eq(one_bf16(2, 2, 127, 3, 2, 119), 0x3F81);
    /* 6*6*2^127 = 1.125*2^132 overflows BF16 (and FP32): +Inf */
    cr_assert_eq(one_bf16(7, 7, 254, 0, 0, 127), 0x7F80);
    /* 6*6*2^-127 + 0 = 1.125*2^-122: 0x0290 = 1.125 * 2^-122 (normal, exact) */
    cr_assert_eq(one_bf16(7, 7, 0, 0, 0, 127), 0x0290);
}
