/* Grouped MoE GEMM reference (ref/moe_gemm.c) against the MPFR oracle (test_ref_moe_oracle.h) and
 * hand-worked values: every format x row layout, expert boundaries, zero-row experts, a NaN scale in
 * one expert, W4A8 partials wider than 24 bits, W4A16 at the edge of the BF16 range, subnormal
 * scales, K tails. */
#include <cblas.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "moects_quant.h"
#include "moects_ref.h"
#include "test_ref_moe_gen.h"

/* Run one recipe and compare with the oracle on every valid row; invalid rows untouched. */
static void check(prob *p, int exact, const char *what)
{
    size_t dbytes = (size_t)(p->rows * p->s.N) * (p->s.out_dtype == MOECTS_BF16 ? 2 : 4);
    memset(p->D, FILL, dbytes);
    cr_assert_eq(moects__ref_moe_gemm(&p->s, &p->a, exact ? MOECTS_RECIPE_EXACT_V1 : MOECTS_RECIPE_FP4_BLOCKWISE_V1),
                 0, "%s", what);
    int64_t first = -1;
    double got = 0, want = 0;
    int64_t bad = mo_check(&p->s, &p->a, p->D, exact, FILL, &first, &got, &want);
    cr_assert_eq(bad, 0, "%s %s: %lld mismatches, first at %lld: got %a want %a", what,
                 exact ? "exact_v1" : "blockwise_v1", (long long)bad, (long long)first, got, want);
}

static const char *fmt_name(moects_moe_format f, moects_fp4_format bf)
{
    switch (f) {
    case MOECTS_MOE_MXFP4: return "mxfp4";
    case MOECTS_MOE_NVFP4: return "nvfp4";
    case MOECTS_MOE_W4A8: return "w4a8";
    default: return bf == MOECTS_FP4_NVFP4 ? "w4a16-nvfp4" : "w4a16-mxfp4";
    }
}

/* Every format x row layout x scale layout x out dtype, both recipes where defined. */
static void sweep(int64_t E, const int64_t *counts, int64_t N, int64_t K, int wide, uint64_t seed)
{
    static const struct {
        moects_moe_format f;
        moects_fp4_format bf;
        int64_t asb;
        int af32;
    } F[] = {{MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, 0, 0}, {MOECTS_MOE_NVFP4, MOECTS_FP4_NVFP4, 0, 0},
             {MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, 128, 0}, {MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, 32, 1},
             {MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, 128, 1}, {MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, 32, 0},
             {MOECTS_MOE_W4A16, MOECTS_FP4_MXFP4, 0, 0}, {MOECTS_MOE_W4A16, MOECTS_FP4_NVFP4, 0, 0}};
    rng_state = seed;
    for (size_t fi = 0; fi < sizeof F / sizeof F[0]; fi++)
        for (int rl = 1; rl <= 3; rl++)
            for (int v = 0; v < 2; v++) {
                prob p;
                moects_scale_layout sl = v ? MOECTS_SCALES_SWIZZLED_128X4 : MOECTS_SCALES_LINEAR;
                moects_dtype od = (v ^ (rl & 1)) ? MOECTS_BF16 : MOECTS_F32;
                gen(&p, F[fi].f, F[fi].bf, (moects_row_layout)rl, E, counts, N, K, sl, od, F[fi].asb, F[fi].af32,
                    wide);
                char what[160];
                snprintf(what, sizeof what, "%s asb %lld f32 %d rows %d sl %d out %s K %lld", fmt_name(F[fi].f, F[fi].bf),
                         (long long)F[fi].asb, F[fi].af32, rl, (int)sl, od == MOECTS_BF16 ? "bf16" : "f32", (long long)K);
                check(&p, 1, what);
                if (F[fi].f != MOECTS_MOE_W4A16) check(&p, 0, what);
                drop(&p);
            }
}

Test(moe_gemm_oracle, every_format_and_layout)
{
    const int64_t counts[5] = {3, 0, 5, 1, 2}; /* a zero-row expert, odd group sizes */
    sweep(5, counts, 7, 96, 0, 1);
    sweep(5, counts, 5, 77, 0, 2); /* K tail: 77 = 2*32 + 13 = 4*16 + 13, odd */
}

Test(moe_gemm_oracle, wide_and_subnormal_scales)
{
    const int64_t counts[3] = {2, 4, 1};
    sweep(3, counts, 6, 160, 1, 3);
}

Test(moe_gemm_oracle, single_expert_and_tile_crossing, .timeout = 600)
{
    const int64_t one[1] = {5};
    sweep(1, one, 9, 64, 0, 4);
    /* experts straddling the 64-row tiles of the exact path, N across a 64-column tile */
    const int64_t counts[3] = {65, 0, 3};
    prob p;
    rng_state = 5;
    gen(&p, MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, MOECTS_ROWS_CONTIGUOUS, 3, counts, 67, 64, MOECTS_SCALES_SWIZZLED_128X4,
        MOECTS_F32, 0, 0, 0);
    check(&p, 1, "mxfp4 tiles");
    check(&p, 0, "mxfp4 tiles");
    drop(&p);
    gen(&p, MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, MOECTS_ROWS_MASKED, 3, counts, 67, 64, MOECTS_SCALES_LINEAR,
        MOECTS_BF16, 128, 0, 0);
    check(&p, 1, "w4a8 tiles");
    check(&p, 0, "w4a8 tiles");
    drop(&p);
}

/* One B scale of expert 1 is NaN: exact_v1 gives NaN in that expert's rows of that column only;
 * blockwise_v1 too (NaN * p, p any). Every other element stays a number. */
Test(moe_gemm, nan_scale_in_one_expert)
{
    const int64_t counts[3] = {4, 3, 5};
    for (int fi = 0; fi < 3; fi++) {
        moects_moe_format f = fi == 0 ? MOECTS_MOE_MXFP4 : fi == 1 ? MOECTS_MOE_NVFP4 : MOECTS_MOE_W4A8;
        moects_fp4_format bf = f == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
        for (int rl = 1; rl <= 3; rl++) {
            prob p;
            rng_state = 10 + (uint64_t)(fi * 3 + rl);
            gen(&p, f, bf, (moects_row_layout)rl, 3, counts, 6, 64, MOECTS_SCALES_SWIZZLED_128X4, MOECTS_F32, 128, 0, 0);
            int64_t per = mo_bytes(6, p.nkb, MOECTS_SCALES_SWIZZLED_128X4);
            p.SB[per + mo_off(2, 1, p.nkb, MOECTS_SCALES_SWIZZLED_128X4)] = bf == MOECTS_FP4_NVFP4 ? 0x7F : 0xFF;
            for (int ex = 0; ex < 2; ex++) {
                check(&p, ex, "nan scale");
                int64_t lr;
                for (int64_t r = 0; r < p.rows; r++) {
                    int64_t e = mo_expert(&p.s, &p.a, r, &lr);
                    if (e < 0) continue;
                    for (int64_t n = 0; n < 6; n++)
                        cr_assert_eq(isnan(((float *)p.D)[r * 6 + n]), e == 1 && n == 2, "row %lld col %lld",
                                     (long long)r, (long long)n);
                }
            }
            drop(&p);
        }
    }
}

/* W4A8 partial wider than 24 bits, by hand: block 0 = 31 products 448 * 6 plus 2^-9 * 0.5, block 1
 * = -31 * 448 * 6; scales 1 (UE8M0 127). Partial 0 = 83328 + 2^-10 needs 27 bits: blockwise_v1
 * rounds it to 83328 (FP32 ulp there 2^-7), so acc ends at 0; exact_v1 keeps 2^-10. */
Test(moe_gemm, w4a8_partial_wider_than_fp32)
{
    const int64_t counts[1] = {1};
    prob p;
    rng_state = 20;
    gen(&p, MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 1, counts, 1, 64, MOECTS_SCALES_LINEAR, MOECTS_F32,
        32, 0, 0);
    uint8_t *A = p.A, *SA = p.SA;
    for (int k = 0; k < 64; k++) A[k] = k < 31 ? 0x7E : k == 31 ? 0x01 : 0xFE; /* 448, 2^-9, -448 */
    A[63] = 0x00;
    memset(p.B, 0x77, 32); /* E2M1 6, 6 */
    p.B[15] = 0x17;        /* elements 30: 6, 31: 0.5 */
    p.B[31] = 0x07;        /* element 63: 0 (A is 0 there too) */
    SA[0] = SA[1] = 127;
    p.SB[0] = p.SB[1] = 127;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), 0);
    cr_assert_eq(((float *)p.D)[0], 0.0f, "blockwise_v1: got %a", ((float *)p.D)[0]);
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(((float *)p.D)[0], 0x1p-10f, "exact_v1: got %a", ((float *)p.D)[0]);
    check(&p, 0, "w4a8 wide partial");
    check(&p, 1, "w4a8 wide partial");
    drop(&p);
}

/* W4A16 at the edge of the BF16 range: per block, the largest finite BF16 (0x7F7F = 0x1.fep127) next
 * to subnormals (0x0001 = 2^-133), so the partial needs the exact slow path; and results that
 * overflow the output (exact_v1 gives Inf) or cancel exactly to a subnormal remainder. */
Test(moe_gemm, w4a16_bf16_range_edges)
{
    const int64_t counts[2] = {3, 2};
    for (int bfi = 0; bfi < 2; bfi++)
        for (int rl = 1; rl <= 3; rl++) {
            moects_fp4_format bf = bfi ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
            prob p;
            rng_state = 30 + (uint64_t)(bfi * 3 + rl);
            gen(&p, MOECTS_MOE_W4A16, bf, (moects_row_layout)rl, 2, counts, 4, 48, MOECTS_SCALES_LINEAR,
                rl == 2 ? MOECTS_BF16 : MOECTS_F32, 0, 0, 0);
            uint16_t *A = p.A;
            static const uint16_t edge[] = {0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x0080, 0x7F00, 0x3F80, 0x007F};
            for (int64_t i = 0; i < p.rows * 48; i++) A[i] = edge[rnd() % 8];
            for (int64_t i = 0; i < mo_bytes(4, p.nkb, MOECTS_SCALES_LINEAR) * 2; i++)
                p.SB[i] = bf == MOECTS_FP4_NVFP4 ? (uint8_t)(1 + rnd() % 0x30) : (uint8_t)(100 + rnd() % 30);
            check(&p, 1, bfi ? "w4a16-nvfp4 edges" : "w4a16-mxfp4 edges");
            drop(&p);
        }
}

/* Hand-worked MXFP4: A row all 1.0 (code 2), expert 0's B all 0.5 (code 1) with scale 2^0, expert
 * 1's all -1.5 (code 0xB) with scale 2^1; K = 40 (a 32-block and an 8-element tail, the tail's scale
 * A's 2^-1; B's 2^0 in expert 0, 2^-1 in expert 1): expert 0: 32 * 0.5 + (8 * 0.5) / 2 = 18;
 * expert 1: (32 * -1.5) * 2 + (8 * -1.5) / 4 = -99. Contiguous, align 4: rows 0 (e0), 1-3 padding, 4 (e1). */
Test(moe_gemm, hand_worked_mxfp4_contiguous)
{
    const int64_t counts[2] = {1, 1};
    prob p;
    rng_state = 40;
    gen(&p, MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, MOECTS_ROWS_CONTIGUOUS, 2, counts, 1, 40, MOECTS_SCALES_LINEAR,
        MOECTS_F32, 0, 0, 0);
    cr_assert_eq(p.s.M, 8);
    memset(p.A, 0x22, 8 * 20);
    memset(p.SA, 126, 16);                    /* every A scale 2^-1 ... */
    for (int r = 0; r < 8; r++) ((uint8_t *)p.SA)[2 * r] = 127; /* ... but block 0's: 2^0 */
    memset(p.B, 0x11, 20);
    memset(p.B + 20, 0xBB, 20);
    uint8_t sb[4] = {127, 127, 128, 126}; /* [e][n=0][kb]: e0 (1, 1), e1 (2, 1/2) */
    memcpy(p.SB, sb, 4);
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), 0);
    cr_assert_eq(((float *)p.D)[0], 18.0f, "got %a", ((float *)p.D)[0]);
    cr_assert_eq(((float *)p.D)[4], -99.0f, "got %a", ((float *)p.D)[4]);
    uint32_t u;
    memcpy(&u, (float *)p.D + 1, 4);
    cr_assert_eq(u, 0xA5A5A5A5u, "padding row written");
    drop(&p);
}

/* Edge shapes return 0 and write nothing: M = 0, every expert empty, N = 0; K = 0 writes +0. */
Test(moe_gemm, empty_shapes)
{
    const int64_t none[3] = {0, 0, 0}, one[1] = {2};
    for (int rl = 1; rl <= 3; rl++) {
        prob p;
        rng_state = 50;
        gen(&p, MOECTS_MOE_NVFP4, MOECTS_FP4_NVFP4, (moects_row_layout)rl, 3, none, 4, 32, MOECTS_SCALES_LINEAR,
            MOECTS_F32, 0, 0, 0);
        check(&p, 1, "no rows");
        check(&p, 0, "no rows");
        drop(&p);
        gen(&p, MOECTS_MOE_W4A8, MOECTS_FP4_MXFP4, (moects_row_layout)rl, 1, one, 3, 0, MOECTS_SCALES_LINEAR,
            MOECTS_F32, 128, 0, 0);
        check(&p, 1, "K = 0");
        check(&p, 0, "K = 0");
        cr_assert_eq(((float *)p.D)[0], 0.0f);
        drop(&p);
    }
}

/* Bad metadata and undefined recipes are refused (-1) with nothing written. */
Test(moe_gemm, refusals)
{
    const int64_t counts[2] = {2, 1};
    prob p;
    rng_state = 60;
    gen(&p, MOECTS_MOE_W4A16, MOECTS_FP4_MXFP4, MOECTS_ROWS_CONTIGUOUS, 2, counts, 3, 32, MOECTS_SCALES_LINEAR,
        MOECTS_F32, 0, 0, 0);
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_FP4_BLOCKWISE_V1), -1, "W4A16 has no blockwise_v1");
    p.mi[0] = 2;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "m_indices >= E");
    p.mi[0] = -2;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "m_indices < -1");
    drop(&p);
    gen(&p, MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, MOECTS_ROWS_MASKED, 2, counts, 3, 32, MOECTS_SCALES_LINEAR,
        MOECTS_F32, 0, 0, 0);
    p.mm[1] = (int32_t)p.s.M + 1;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "masked_m > M");
    p.mm[1] = -1;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "masked_m < 0");
    drop(&p);
    gen(&p, MOECTS_MOE_MXFP4, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 2, counts, 3, 32, MOECTS_SCALES_LINEAR,
        MOECTS_F32, 0, 0, 0);
    p.off[1] = 4;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "offsets decreasing");
    p.off[1] = 2;
    p.off[2] = 2;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "off[E] != M");
    p.off[2] = 3;
    p.s.b_format = MOECTS_FP4_NVFP4;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "MXFP4 with NVFP4 B");
    p.s.b_format = MOECTS_FP4_MXFP4;
    p.s.E = 0;
    cr_assert_eq(moects__ref_moe_gemm(&p.s, &p.a, MOECTS_RECIPE_EXACT_V1), -1, "E = 0");
    uint32_t u;
    memcpy(&u, p.D, 4);
    cr_assert_eq(u, 0xA5A5A5A5u, "written on refusal");
    drop(&p);
}

/* BF16 blocks at the dgemm path's exactness limit: full-mantissa A values whose exponent fields span
 * up to 36 binades (the dgemm partial is exact) or more (the exact slow path): large ones of
 * alternating sign that cancel exactly, small positive ones between them, B all 6. A double partial
 * summed in k order would lose the small ones at spans 45 and 60; each must equal the oracle to the
 * last bit. */
Test(moe_gemm, w4a16_bf16_span_limit)
{
    const int64_t counts[1] = {4};
    static const int spans[] = {30, 36, 37, 45, 60};
    for (int si = 0; si < 5; si++) {
        const int span = spans[si];
        prob p;
        rng_state = 70 + (uint64_t)span;
        gen(&p, MOECTS_MOE_W4A16, MOECTS_FP4_MXFP4, MOECTS_ROWS_OFFSETS, 1, counts, 3, 64, MOECTS_SCALES_LINEAR,
            MOECTS_F32, 0, 0, 0);
        uint16_t *A = p.A;
        for (int64_t i = 0; i < 4 * 64; i++) {
            int e = i % 2 ? 150 - span : 150, neg = i % 2 == 0 && (i / 2) % 2;
            A[i] = (uint16_t)(neg << 15 | e << 7 | 0x7F);
        }
        memset(p.B, 0x77, 3 * 32); /* 6, 6 */
        check(&p, 1, "bf16 span");
        drop(&p);
    }
}

/* The result does not depend on the thread count (our split of tiles and runs). */
Test(moe_gemm, thread_count_invariance)
{
    const int64_t counts[4] = {70, 0, 3, 130};
    int saved = openblas_get_num_threads();
    for (int f = 0; f < 2; f++) {
        prob p;
        rng_state = 80 + (uint64_t)f;
        gen(&p, f ? MOECTS_MOE_W4A8 : MOECTS_MOE_NVFP4, f ? MOECTS_FP4_MXFP4 : MOECTS_FP4_NVFP4, MOECTS_ROWS_CONTIGUOUS,
            4, counts, 70, 96, MOECTS_SCALES_SWIZZLED_128X4, MOECTS_F32, 128, 0, 0);
        size_t bytes = (size_t)(p.rows * 70) * 4;
        void *one = malloc(bytes * 2), *two = malloc(bytes * 2);
        memset(one, FILL, bytes * 2);
        memset(two, FILL, bytes * 2);
        openblas_set_num_threads(1);
        cr_assert_eq(moects__ref_moe_gemm_recipes(&p.s, &p.a, one, (uint8_t *)one + bytes), 0);
        openblas_set_num_threads(4);
        cr_assert_eq(moects__ref_moe_gemm_recipes(&p.s, &p.a, two, (uint8_t *)two + bytes), 0);
        cr_assert_eq(memcmp(one, two, bytes * 2), 0);
        memcpy(p.D, one, bytes); /* and the fused call equals the oracle */
        int64_t first = -1;
        double got = 0, want = 0;
        cr_assert_eq(mo_check(&p.s, &p.a, p.D, 0, FILL, &first, &got, &want), 0, "blockwise at %lld", (long long)first);
        free(one);
        free(two);
        drop(&p);
    }
    openblas_set_num_threads(saved);
}

/* The scalar code of ref/wxa_gemm.c and ref/bound.c (MOECTS_FP4_REF_ISA=c; the default on an AVX2
 * CPU is the vector code): against the oracle too, and its bounds bit-equal to the vector code's
 * (the same IEEE operations in the same order per element). Groups of 9 rows and N = 11: full and
 * partial 4 x 8 register blocks. */
Test(moe_gemm_oracle, scalar_path)
{
    const int64_t counts[4] = {9, 0, 6, 1};
    setenv("MOECTS_FP4_REF_ISA", "c", 1);
    sweep(4, counts, 11, 77, 0, 11);
    sweep(4, counts, 11, 160, 1, 12);
    unsetenv("MOECTS_FP4_REF_ISA");
    for (int f = 0; f < 2; f++) {
        prob p;
        rng_state = 90 + (uint64_t)f;
        gen(&p, f ? MOECTS_MOE_W4A8 : MOECTS_MOE_W4A16, MOECTS_FP4_MXFP4, MOECTS_ROWS_CONTIGUOUS, 4, counts, 11, 160,
            MOECTS_SCALES_LINEAR, MOECTS_BF16, 128, 0, 1);
        size_t n = (size_t)(p.rows * 11);
        double *vec = malloc(n * sizeof(double)), *sc = malloc(n * sizeof(double));
        cr_assert_eq(moects__ref_moe_gemm_bound(&p.s, &p.a, 24, 1, vec), 0);
        setenv("MOECTS_FP4_REF_ISA", "c", 1);
        cr_assert_eq(moects__ref_moe_gemm_bound(&p.s, &p.a, 24, 1, sc), 0);
        unsetenv("MOECTS_FP4_REF_ISA");
        cr_assert_eq(memcmp(vec, sc, n * sizeof(double)), 0, "format %d: scalar and vector bounds differ", f);
        free(vec);
        free(sc);
        drop(&p);
    }
}
