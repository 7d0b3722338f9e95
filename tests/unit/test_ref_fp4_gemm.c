/* test_ref_fp4_gemm.c: moects__ref_fp4_gemm (ref/fp4_gemm.c), recipes blockwise_v1 and exact_v1,
 * against the independent MPFR oracle of test_ref_fp4_oracle.h: random and adversarial inputs
 * (cancellation, UE8M0 codes 0, 1, 254, 255, subnormal and NaN E4M3 scales, all-zero blocks, K
 * tails with a garbage ignored nibble), both formats, both scale layouts, f32 and bf16 outputs,
 * shapes crossing the reference's tiles; plus hand-worked values and argument errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_quant.h"
#include "moects_ref.h"
#include "test_ref_fp4_oracle.h"
#include "test_rng.h"

typedef enum { SC_NARROW, SC_WIDE, SC_EXTREME, SC_NAN } scale_kind;

/* A test problem: packed codes, linear scales (and their swizzled copy), output buffer. */
typedef struct {
    moects_fp4_gemm_shape s;
    moects_fp4_gemm_args a;
    uint8_t *A, *B, *sa_lin, *sb_lin, *sa_sw, *sb_sw;
    void *d;
    int64_t nkb, rb;
} prob;

static uint8_t scale_code(moects_fp4_format f, scale_kind k)
{
    if (f == MOECTS_FP4_MXFP4) {
        switch (k) {
        case SC_NARROW: return (uint8_t)(124 + rnd() % 7);
        case SC_WIDE: return (uint8_t)(rnd() % 255); /* 2^-127 .. 2^127 */
        case SC_EXTREME: {
            static const uint8_t ex[] = {0, 1, 2, 253, 254, 127};
            return ex[rnd() % 6];
        }
        case SC_NAN: return rnd() % 16 == 0 ? 0xFF : (uint8_t)(120 + rnd() % 16);
        }
    }
    switch (k) { /* E4M3 read as unsigned: sign bit 0 */
    case SC_NARROW: return (uint8_t)(0x30 + rnd() % 16);
    case SC_WIDE: return (uint8_t)(rnd() % 0x7F); /* 0 .. 448, subnormals included */
    case SC_EXTREME: {
        static const uint8_t ex[] = {0x00, 0x01, 0x02, 0x07, 0x08, 0x7E, 0x7D};
        return ex[rnd() % 7];
    }
    case SC_NAN: return rnd() % 16 == 0 ? 0x7F : (uint8_t)(0x30 + rnd() % 16);
    }
    return 0;
}

static void make(prob *p, int64_t M, int64_t N, int64_t K, moects_fp4_format f, moects_dtype out,
                 scale_kind sk, int zero_blocks)
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
    if (zero_blocks) /* every third block of every row all-zero codes (+0 and -0 mixed) */
        for (int64_t r = 0; r < M; r++)
            for (int64_t k = 0; k < K; k++)
                if ((k / g) % 3 == 1) {
                    uint8_t *byte = p->A + r * p->rb + k / 2;
                    uint8_t z = (uint8_t)((rnd() & 1) ? 8 : 0);
                    *byte = (uint8_t)((k & 1) ? ((*byte & 0x0F) | (z << 4)) : ((*byte & 0xF0) | z));
                }
    p->sa_lin = malloc((size_t)(M * p->nkb + 1));
    p->sb_lin = malloc((size_t)(N * p->nkb + 1));
    for (int64_t i = 0; i < M * p->nkb; i++) p->sa_lin[i] = scale_code(f, sk);
    for (int64_t i = 0; i < N * p->nkb; i++) p->sb_lin[i] = scale_code(f, sk);
    p->sa_sw = malloc((size_t)moects__scale_bytes(M, p->nkb, MOECTS_SCALES_SWIZZLED_128X4) + 1);
    p->sb_sw = malloc((size_t)moects__scale_bytes(N, p->nkb, MOECTS_SCALES_SWIZZLED_128X4) + 1);
    moects__scales_swizzle(p->sa_lin, M, p->nkb, p->sa_sw);
    moects__scales_swizzle(p->sb_lin, N, p->nkb, p->sb_sw);
    p->d = malloc((size_t)(M * N + 1) * 4);
    float alpha = 1.0f;
    if (f == MOECTS_FP4_NVFP4) alpha = (float)ldexp(1.0 + (rnd() % 1000) / 1000.0, (int)(rnd() % 20) - 18);
    if (rnd() % 4 == 0) alpha = -alpha; /* signed zeros: blockwise -0, exact +0 */
    p->a = (moects_fp4_gemm_args){p->A, p->B, p->sa_lin, p->sb_lin, alpha, p->d};
}

static void release(prob *p)
{
    free(p->A);
    free(p->B);
    free(p->sa_lin);
    free(p->sb_lin);
    free(p->sa_sw);
    free(p->sb_sw);
    free(p->d);
}

static const char *fmt_name(moects_fp4_format f) { return f == MOECTS_FP4_NVFP4 ? "nvfp4" : "mxfp4"; }

/* Run the reference with both recipes, both layouts, and check each against the oracle. */
static void check_all(prob *p, const char *what)
{
    for (int exact = 0; exact < 2; exact++)
        for (int lay = 0; lay < 2; lay++) {
            p->s.scale_layout = lay ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR;
            p->a.sa = lay ? p->sa_sw : p->sa_lin;
            p->a.sb = lay ? p->sb_sw : p->sb_lin;
            memset(p->d, 0xA5, (size_t)(p->s.M * p->s.N) * 4);
            int rc = moects__ref_fp4_gemm(&p->s, &p->a, exact ? MOECTS_RECIPE_EXACT_V1 : MOECTS_RECIPE_FP4_BLOCKWISE_V1);
            cr_assert_eq(rc, 0, "%s: rc %d", what, rc);
            int64_t first = -1;
            double got = 0, want = 0;
            int64_t bad = or_check(&p->s, &p->a, exact, &first, &got, &want);
            cr_assert_eq(bad, 0,
                         "%s %s %s %s out=%s M=%ld N=%ld K=%ld: %ld mismatches, first at %ld got %a want %a",
                         what, fmt_name(p->s.format), exact ? "exact_v1" : "blockwise_v1",
                         lay ? "swizzled" : "linear", p->s.out_dtype == MOECTS_BF16 ? "bf16" : "f32",
                         (long)p->s.M, (long)p->s.N, (long)p->s.K, (long)bad, (long)first, got, want);
        }
}

Test(fp4_gemm_oracle, random_small_shapes)
{
    rng_state = 1;
    const int64_t shapes[][3] = {{1, 1, 1},  {1, 1, 32}, {3, 5, 16},  {2, 3, 33},  {4, 7, 100},
                                 {17, 9, 64}, {5, 3, 7},  {9, 11, 48}, {6, 4, 257}, {1, 13, 96}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, shapes[i][0], shapes[i][1], shapes[i][2], (moects_fp4_format)f,
                     o ? MOECTS_BF16 : MOECTS_F32, SC_NARROW, 0);
                check_all(&p, "random");
                release(&p);
            }
}

/* Shapes crossing the 256 (blockwise) and 64 (exact) tiles, with tails in every dimension. */
Test(fp4_gemm_oracle, tile_crossing, .timeout = 600)
{
    rng_state = 2;
    prob p;
    make(&p, 258, 257, 40, MOECTS_FP4_MXFP4, MOECTS_F32, SC_WIDE, 0);
    check_all(&p, "tiles");
    release(&p);
    make(&p, 131, 66, 24, MOECTS_FP4_NVFP4, MOECTS_BF16, SC_WIDE, 1);
    check_all(&p, "tiles");
    release(&p);
}

Test(fp4_gemm_oracle, wide_and_extreme_scales)
{
    rng_state = 3;
    for (int f = 1; f <= 2; f++)
        for (int kind = SC_WIDE; kind <= SC_EXTREME; kind++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, 7, 9, 200, (moects_fp4_format)f, o ? MOECTS_BF16 : MOECTS_F32, (scale_kind)kind, 1);
                check_all(&p, kind == SC_WIDE ? "wide" : "extreme");
                release(&p);
            }
}

Test(fp4_gemm_oracle, nan_scales)
{
    rng_state = 4;
    for (int f = 1; f <= 2; f++) {
        prob p;
        make(&p, 6, 10, 130, (moects_fp4_format)f, MOECTS_F32, SC_NAN, 1);
        check_all(&p, "nan");
        release(&p);
    }
}

/* Widths that use the 16- and 8-lane fma paths and their scalar tails. */
Test(fp4_gemm_oracle, vector_widths)
{
    rng_state = 8;
    const int64_t ns[] = {16, 24, 40, 47};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, 5, ns[i], 300, (moects_fp4_format)f, o ? MOECTS_BF16 : MOECTS_F32, SC_WIDE, 1);
                check_all(&p, "widths");
                release(&p);
            }
}

/* Long K with scales spread over the whole range: many TwoSum errors go to the xsum. */
Test(fp4_gemm_oracle, long_k_wide_range)
{
    rng_state = 5;
    for (int f = 1; f <= 2; f++) {
        prob p;
        make(&p, 3, 4, 4096 + 17, (moects_fp4_format)f, MOECTS_F32, SC_WIDE, 0);
        check_all(&p, "longk");
        release(&p);
    }
}

/* Large codes (+-4, +-6) in some K-blocks: the block partials exceed the bounds under which the
 * reference packs two blocks into one sgemm, so it takes the two-sgemm path there (and the packed
 * path in the other blocks of the same tile). */
Test(fp4_gemm_oracle, large_partials_unpacked_path)
{
    rng_state = 11;
    static const uint8_t big[4] = {0x6, 0x7, 0xE, 0xF};
    const int64_t shapes[][3] = {{3, 40, 200}, {20, 17, 97}, {2, 2, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int f = 1; f <= 2; f++)
            for (int o = 0; o < 2; o++) {
                prob p;
                make(&p, shapes[i][0], shapes[i][1], shapes[i][2], (moects_fp4_format)f,
                     o ? MOECTS_BF16 : MOECTS_F32, SC_WIDE, 0);
                int64_t g = moects_fp4_block((moects_fp4_format)f);
                for (int op = 0; op < 2; op++) {
                    uint8_t *x = op ? p.B : p.A;
                    int64_t rows = op ? p.s.N : p.s.M;
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t k = 0; k < p.s.K; k += 2)
                            if ((k / g) % 4 != 3) /* blocks 0-2 of every 4 large, block 3 random */
                                x[r * p.rb + k / 2] = (uint8_t)(big[rnd() % 4] | big[rnd() % 4] << 4);
                }
                check_all(&p, "large partials");
                release(&p);
            }
}

/* K above the whole-K limit (65536): the reference decodes K in chunks. */
Test(fp4_gemm_oracle, k_chunked, .timeout = 300)
{
    rng_state = 9;
    for (int f = 1; f <= 2; f++) {
        prob p;
        make(&p, 3, 2, 70001, (moects_fp4_format)f, MOECTS_BF16, SC_WIDE, 1);
        check_all(&p, "chunked");
        release(&p);
    }
}

/* Cancellation: row 0 of A and B make block 0's partial +P, block 1's -P with the same scale, then
 * small blocks; in blockwise_v1 the big terms cancel exactly, in exact_v1 too; the small ones
 * survive. Also large-then-small magnitudes where blockwise rounding loses bits. */
Test(fp4_gemm_oracle, cancellation)
{
    rng_state = 6;
    for (int f = 1; f <= 2; f++)
        for (int o = 0; o < 2; o++) {
            prob p;
            make(&p, 4, 4, 4 * moects_fp4_block((moects_fp4_format)f), (moects_fp4_format)f,
                 o ? MOECTS_BF16 : MOECTS_F32, SC_NARROW, 0);
            int64_t g = moects_fp4_block((moects_fp4_format)f);
            for (int64_t r = 0; r < 4; r++) {
                for (int64_t k = 0; k < 2 * g; k += 2) {
                    p.A[r * p.rb + k / 2] = k < g ? 0x77 : 0xFF; /* +6 in block 0, -6 in block 1 */
                    p.B[r * p.rb + k / 2] = 0x77;
                }
                uint8_t big = f == 1 ? 200 : 0x7E, small = f == 1 ? 100 : 0x01;
                p.sa_lin[r * p.nkb + 0] = p.sa_lin[r * p.nkb + 1] = big;
                p.sb_lin[r * p.nkb + 0] = p.sb_lin[r * p.nkb + 1] = big;
                p.sa_lin[r * p.nkb + 2] = small;
                p.sb_lin[r * p.nkb + 3] = small;
            }
            moects__scales_swizzle(p.sa_lin, 4, p.nkb, p.sa_sw);
            moects__scales_swizzle(p.sb_lin, 4, p.nkb, p.sb_sw);
            check_all(&p, "cancel");
            release(&p);
        }
}

/* Zero sums: A all +-0 codes, alpha = -0.5. blockwise_v1: acc = +0, D = +0 * -0.5 = -0 (an FP32
 * multiply); exact_v1: the exact value 0, written +0. */
Test(fp4_gemm, zero_sum_signs)
{
    uint8_t A[16], B[16], sa[1] = {127}, sb[1] = {127};
    memset(A, 0x88, sizeof A);
    memset(B, 0x77, sizeof B);
    float d;
    moects_fp4_gemm_shape s = {1, 1, 32, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, -0.5f, &d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert(d == 0.0f && signbit(d));
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert(d == 0.0f && !signbit(d));
    prob p;
    rng_state = 10;
    make(&p, 5, 6, 64, MOECTS_FP4_NVFP4, MOECTS_BF16, SC_NARROW, 0);
    memset(p.A, 0x08, (size_t)(5 * p.rb));
    p.a.alpha = -3.0f;
    check_all(&p, "zero sums");
    release(&p);
}

/* Hand-worked: MXFP4, M = N = 1, K = 64 (two blocks). A = B = all 1.0 (code 2): p0 = p1 = 32.
 * sA = (2^0, 2^1), sB = (2^0, 2^-1): s0 = 1, s1 = 1: D = 64. Then with sB1 = 2^-30: D = 32 + 32 *
 * 2^-29 = 32 + 2^-24: FP32 spacing at 32 is 2^-18, so blockwise gives 32 (the fma rounds), exact
 * gives 32 too; with bf16 out, 32. Then K = 33 (tail of 1 element) with the high nibble of the last
 * byte set to 0xF (ignored): p1 = 1 * 1 -> D = 32 + 1 * s1. */
Test(fp4_gemm, hand_worked_mxfp4)
{
    uint8_t A[32], B[32], sa[2] = {127, 128}, sb[2] = {127, 126};
    memset(A, 0x22, sizeof A);
    memset(B, 0x22, sizeof B);
    float d;
    moects_fp4_gemm_shape s = {1, 1, 64, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, &d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d, 64.0f);
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(d, 64.0f);
    sb[1] = 127 - 30;
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d, 32.0f);
    /* three blocks where order matters: 2^25 - 2^25 + 1 with blockwise: acc = 2^25 * ... */
    s.K = 33;
    A[16] = 0xF2; /* element 32 = 1.0; the high nibble (element 33, absent) is garbage */
    B[16] = 0xA2;
    sb[1] = 127;
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d, 32.0f + 2.0f); /* 32 * 1 * 1 + 1 * (2^1 * 2^0) */
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(d, 34.0f);
}

/* Hand-worked blockwise vs exact difference: MXFP4, K = 96 (three blocks), one element per block:
 * a = 1, b = 1 in block 0 with s = 2^24 (sA = 2^24, sB = 1), block 1: 1 * 1 * s = 1 and block 2
 * likewise 1. blockwise: acc = 2^24, then fmaf(1, 1, 2^24) = 2^24 (tie to even), again 2^24.
 * exact: 2^24 + 2 = 16777218, representable: exact gives 16777218. */
Test(fp4_gemm, hand_worked_order_matters)
{
    uint8_t A[48] = {0}, B[48] = {0}, sa[3] = {127 + 24, 127, 127}, sb[3] = {127, 127, 127};
    A[0] = B[0] = 0x02;
    A[16] = B[16] = 0x02;
    A[32] = B[32] = 0x02;
    float d;
    moects_fp4_gemm_shape s = {1, 1, 96, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, &d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d, 16777216.0f);
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(d, 16777218.0f);
}

/* NVFP4 hand-worked: K = 16, a = 6 (code 7) * 16, b = 0.5 (code 1) * 16: p = 48; sA = 448 (0x7E),
 * sB = 2^-9 (0x01, subnormal): s = 448 * 2^-9 = 0.875; alpha = 2: D = 48 * 0.875 * 2 = 84. */
Test(fp4_gemm, hand_worked_nvfp4_subnormal_scale)
{
    uint8_t A[8], B[8], sa[1] = {0x7E}, sb[1] = {0x01};
    memset(A, 0x77, sizeof A);
    memset(B, 0x11, sizeof B);
    uint16_t d;
    moects_fp4_gemm_shape s = {1, 1, 16, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR, MOECTS_BF16};
    moects_fp4_gemm_args a = {A, B, sa, sb, 2.0f, &d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d, 0x42A8); /* 84 = 1.3125 * 2^6: bf16 0x42A8 */
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(d, 0x42A8);
    sb[0] = 0x7F; /* NaN scale propagates even with ... */
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d & 0x7F80, 0x7F80);
    cr_assert_neq(d & 0x007F, 0);
    memset(A, 0, sizeof A); /* ... an all-zero block: 0 * NaN = NaN */
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(d & 0x7F80, 0x7F80);
    cr_assert_neq(d & 0x007F, 0);
}

/* UE8M0 254 x 254: s = 2^254 overflows FP32 to Inf in blockwise_v1 (D = +Inf, or NaN when the
 * partial is 0), while exact_v1 rounds the exact value 2^254 * p to +Inf as well (> FP32 max);
 * codes 0 x 0: s = 2^-254 underflows to 0 in FP32: blockwise D = 0; exact: 2^-254 * p rounds to
 * +0 or -0 by sign. */
Test(fp4_gemm, ue8m0_extremes_by_hand)
{
    uint8_t A[16], B[16], sa[1] = {254}, sb[1] = {254};
    memset(A, 0x22, sizeof A);
    memset(B, 0x22, sizeof B);
    float d;
    moects_fp4_gemm_shape s = {1, 1, 32, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, &d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert(isinf(d) && d > 0);
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert(isinf(d) && d > 0);
    memset(A, 0, sizeof A);
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert(isnan(d), "0 * Inf in the fma");
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert(d == 0.0f && !signbit(d), "exact value 0");
    memset(A, 0xAA, sizeof A); /* -1 */
    sa[0] = sb[0] = 0;
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert(d == 0.0f && !signbit(d), "fmaf(-32, 0, +0) = +0");
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert(d == 0.0f && signbit(d), "-32 * 2^-254 rounds to -0");
}

Test(fp4_gemm, bad_arguments_and_empty)
{
    uint8_t A[16] = {0}, B[16] = {0}, sa[1] = {127}, sb[1] = {127};
    float d = 5.0f;
    moects_fp4_gemm_shape s = {1, 1, 32, MOECTS_FP4_MXFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {A, B, sa, sb, 1.0f, &d};
    moects_fp4_gemm_shape bad = s;
    bad.M = -1;
    cr_assert_eq(moects__ref_fp4_gemm(&bad, &a, MOECTS_RECIPE_EXACT_V1), -1);
    bad = s;
    bad.format = (moects_fp4_format)9;
    cr_assert_eq(moects__ref_fp4_gemm(&bad, &a, MOECTS_RECIPE_EXACT_V1), -1);
    bad = s;
    bad.out_dtype = MOECTS_I32;
    cr_assert_eq(moects__ref_fp4_gemm(&bad, &a, MOECTS_RECIPE_EXACT_V1), -1);
    bad = s;
    bad.scale_layout = (moects_scale_layout)3;
    cr_assert_eq(moects__ref_fp4_gemm(&bad, &a, MOECTS_RECIPE_EXACT_V1), -1);
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EPG_FMA_V1), -1);
    moects_fp4_gemm_args nul = a;
    nul.sb = NULL;
    cr_assert_eq(moects__ref_fp4_gemm(&s, &nul, MOECTS_RECIPE_EXACT_V1), -1);
    cr_assert_eq(moects__ref_fp4_gemm(NULL, &a, MOECTS_RECIPE_EXACT_V1), -1);
    /* K = 0: no blocks, D = 0 * alpha */
    s.K = 0;
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(d, 0.0f);
    d = 5.0f;
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(d, 0.0f);
    /* M = 0: nothing written, even with NULL pointers */
    s.M = 0;
    moects_fp4_gemm_args none = {NULL, NULL, NULL, NULL, 1.0f, NULL};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &none, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
}

/* The quantizers and the GEMM agree: quantize real-valued A and B, run exact_v1 with alpha =
 * 1/(gsA*gsB): the result is close to the fp64 product of the dequantized inputs (a sanity check
 * of the scale plumbing: a swapped scale or a wrong block index would be far off). */
Test(fp4_gemm, quantize_then_multiply)
{
    rng_state = 7;
    const int64_t M = 5, N = 6, K = 80;
    float x[5 * 80], y[6 * 80];
    for (int i = 0; i < M * K; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 100.0f;
    for (int i = 0; i < N * K; i++) y[i] = (float)((int)(rnd() % 2001) - 1000) / 100.0f;
    uint8_t ca[5 * 40], cb[6 * 40], sa[5 * 5], sb[6 * 5];
    float gx = moects__nvfp4_global_scale(x, (size_t)(M * K)), gy = moects__nvfp4_global_scale(y, (size_t)(N * K));
    cr_assert_eq(moects__quant_nvfp4(x, M, K, gx, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, ca, sa), 0);
    cr_assert_eq(moects__quant_nvfp4(y, N, K, gy, MOECTS_ROUND_RNE, MOECTS_SCALES_LINEAR, cb, sb), 0);
    float d[5 * 6];
    moects_fp4_gemm_shape s = {M, N, K, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR, MOECTS_F32};
    moects_fp4_gemm_args a = {ca, cb, sa, sb, 1.0f / (gx * gy), d};
    cr_assert_eq(moects__ref_fp4_gemm(&s, &a, MOECTS_RECIPE_EXACT_V1), 0);
    float rx[80], ry[80];
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            moects__fp4_dequant_row(ca, sa, m, K, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR, rx);
            moects__fp4_dequant_row(cb, sb, n, K, MOECTS_FP4_NVFP4, MOECTS_SCALES_LINEAR, ry);
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)rx[k] * ry[k];
                mag += fabs((double)rx[k] * ry[k]);
            }
            ref /= (double)gx * gy;
            mag /= (double)gx * gy;
            cr_assert(fabs(d[m * N + n] - ref) <= 1e-6 * mag + 1e-30, "(%ld,%ld) %a vs %a", (long)m, (long)n,
                      d[m * N + n], ref);
        }
}
