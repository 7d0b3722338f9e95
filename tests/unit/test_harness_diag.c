/* Tests of harness/judge/diag.c: planted mismatch masks and the pattern line and coordinates expected of
 * them, each worked out by hand from where the pattern was planted (the comment says how). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moects_diag.h"

/* BF16 outputs: want all 1.0 (0x3f80); got equal except where plant() flips them to 1.0078125 (0x3f81,
 * 1 ULP) or to a chosen pattern. */
typedef struct {
    uint16_t *got, *want;
    int64_t n;
} pair;

static pair mk(int64_t rows, int64_t cols)
{
    pair p = {calloc((size_t)(rows * cols), 2), calloc((size_t)(rows * cols), 2), rows * cols};
    for (int64_t i = 0; i < p.n; i++) p.got[i] = p.want[i] = 0x3f80;
    return p;
}
static void plant(pair *p, int64_t cols, int64_t r, int64_t c, uint16_t v) { p->got[r * cols + c] = v; }
static void drop(pair *p)
{
    free(p->got);
    free(p->want);
}

static moects_out_geom gemm_geom(int64_t M, int64_t N)
{
    moects_out_geom g = {.axis = {"m", "n"}, .row_word = "row", .col_word = "column", .col_extent = "N",
                         .rows = M, .cols = N, .col_tile = 128};
    return g;
}

Test(diag, one_element_in_the_last_tile_of_n)
{
    /* N = 4096: the last 128-column tile is 3968..4095 (31 * 128 = 3968); one element at m 5, n 4000 */
    pair p = mk(8, 4096);
    plant(&p, 4096, 5, 4000, 0x3f81);
    moects_out_geom g = gemm_geom(8, 4096);
    moects_diag d;
    cr_assert_eq(moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d), 0);
    cr_assert_eq(d.ndims, 2);
    cr_assert_str_eq(d.axes[0], "m");
    cr_assert_str_eq(d.axes[1], "n");
    cr_assert_eq(d.nfirst, 1);
    cr_assert_eq(d.first[0].index, 5 * 4096 + 4000);
    cr_assert_eq(d.first[0].at[0], 5);
    cr_assert_eq(d.first[0].at[1], 4000);
    cr_assert_eq(d.first[0].got, 0x3f81);
    cr_assert_eq(d.first[0].want, 0x3f80);
    cr_assert_eq(d.first[0].ulp, 1);
    cr_assert_str_eq(d.pattern, "one element: row 5, column 4000 (in the last 128-column tile of N: 3968..4095)");
    char at[64];
    moects__diag_at(&d, &d.first[0], at, sizeof at);
    cr_assert_str_eq(at, "(m 5, n 4000)");
    drop(&p);
}

Test(diag, column_onwards_every_row)
{
    /* H = 4096, the min(hidden, 1024) mutant's kind of damage: every token, columns 3584..4095 (512
     * wide: no tile of 16..256 is that wide, so "onwards") */
    pair p = mk(4, 4096);
    for (int r = 0; r < 4; r++)
        for (int c = 3584; c < 4096; c++) plant(&p, 4096, r, c, 0x3f81);
    moects_out_geom g = {.axis = {"t", "d"}, .row_word = "token", .col_word = "column", .col_extent = "H",
                         .rows = 4, .cols = 4096};
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "every token, column 3584 onwards (3584..4095 of 4096)");
    cr_assert_eq(d.nfirst, 5);
    cr_assert_eq(d.first[4].at[0], 0);
    cr_assert_eq(d.first[4].at[1], 3588); /* the first five, row-major: 3584..3588 of row 0 */
    drop(&p);
}

Test(diag, last_tile_of_n_every_row)
{
    /* N = 2880 (gpt-oss): 2880 = 22*128 + 64, the tail 2816..2879 is 64 wide and 2816 = 44*64: the
     * last 64-column tile */
    pair p = mk(3, 2880);
    for (int r = 0; r < 3; r++)
        for (int c = 2816; c < 2880; c++) plant(&p, 2880, r, c, 0x3f81);
    moects_out_geom g = gemm_geom(3, 2880);
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "every row, the last 64-column tile of N (columns 2816..2879)");
    drop(&p);
}

Test(diag, first_rows_only)
{
    pair p = mk(16, 32);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 32; c++) plant(&p, 32, r, c, 0x3f81);
    moects_out_geom g = gemm_geom(16, 32);
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "rows 0..3 only, every column");
    drop(&p);
}

Test(diag, strided_columns_and_runs)
{
    /* columns 8, 24, 40, 56 (step 16) of rows 2 and 3: a 2 x 4 rectangle */
    pair p = mk(6, 64);
    for (int r = 2; r < 4; r++)
        for (int c = 8; c < 64; c += 16) plant(&p, 64, r, c, 0x3f81);
    moects_out_geom g = gemm_geom(6, 64);
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "rows 2..3, columns 8..56 step 16 (4 of them)");
    drop(&p);
    /* columns 0..1, 5, 9..10, 20 of row 0 only: four runs, three shown */
    p = mk(2, 32);
    int cs[] = {0, 1, 5, 9, 10, 20};
    for (int i = 0; i < 6; i++) plant(&p, 32, 0, cs[i], 0x3f81);
    g = gemm_geom(2, 32);
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "row 0, 6 columns in 4 runs: 0..1, 5, 9..10, ...");
    drop(&p);
}

Test(diag, scattered_is_not_called_a_block)
{
    /* (0,0) and (1,1): hit rows {0,1} x hit cols {0,1} would be 4 cells, only 2 differ */
    pair p = mk(4, 4);
    plant(&p, 4, 0, 0, 0x3f81);
    plant(&p, 4, 1, 1, 0x3f81);
    moects_out_geom g = gemm_geom(4, 4);
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "scattered: 2 elements, 50% of rows 0..1 only x columns 0..1 only");
    drop(&p);
    /* all of a 100 x 100 output but (7, 9): 99.99%, which %.3g would print as 100% */
    p = mk(100, 100);
    for (int r = 0; r < 100; r++)
        for (int c = 0; c < 100; c++)
            if (r != 7 || c != 9) plant(&p, 100, r, c, 0x3f81);
    g = gemm_geom(100, 100);
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "scattered: 9999 elements, all but 1 of every row x every column");
    drop(&p);
}

Test(diag, worst_ten_by_ulp_and_nan)
{
    /* 12 mismatches in one row: element c gets c+1 ULP (0x3f80 + c + 1), element 11 a NaN against 1.0
     * (unbounded). Worst: 11 (NaN), then 10, 9, ..., 2 (ULP 11 .. 3). A NaN against a NaN is no mismatch. */
    pair p = mk(1, 16);
    for (int c = 0; c < 11; c++) plant(&p, 16, 0, c, (uint16_t)(0x3f80 + c + 1));
    plant(&p, 16, 0, 11, 0x7fc0);
    p.got[12] = 0x7fc1;
    p.want[12] = 0xffc0;
    moects_out_geom g = gemm_geom(1, 16);
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_eq(d.nworst, 10);
    cr_assert_eq(d.worst[0].at[1], 11);
    cr_assert_eq(d.worst[0].ulp, UINT64_MAX);
    for (int k = 1; k < 10; k++) {
        cr_assert_eq(d.worst[k].at[1], 11 - k);
        cr_assert_eq(d.worst[k].ulp, (uint64_t)(12 - k));
    }
    cr_assert_str_eq(d.pattern, "row 0 (the last), columns 0..11 only");
    drop(&p);
}

Test(diag, f32_and_no_mismatch)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
    moects_out_geom g = gemm_geom(2, 2);
    moects_diag d;
    cr_assert_eq(moects__diag_compute(&g, MOECTS_F32, a, b, &d), 0);
    cr_assert_eq(d.ndims, 0);
    cr_assert_str_eq(d.pattern, "");
    a[3] = 4.0000005f; /* 0x40800001: 1 ULP above 4 */
    moects__diag_compute(&g, MOECTS_F32, a, b, &d);
    cr_assert_eq(d.worst[0].got, 0x40800001u);
    cr_assert_eq(d.worst[0].ulp, 1);
    cr_assert_str_eq(d.pattern, "one element: row 1 (the last), column 1 (the last)");
}

/* Grouped, contiguous layout: 3 experts, rows [e0 e0 e0 pad | e1 e1 pad pad | e2 e2 e2 e2], 8 columns. */
static const int32_t groups_c[12] = {0, 0, 0, -1, 1, 1, -1, -1, 2, 2, 2, 2};
static moects_out_geom moe_geom(void)
{
    moects_out_geom g = {.axis = {"expert", "row", "col"}, .row_word = "row", .col_word = "column",
                         .col_extent = "N", .rows = 12, .cols = 8, .row_group = groups_c, .groups = 3,
                         .group_word = "expert"};
    return g;
}

Test(diag, every_row_of_one_expert)
{
    /* expert 1's two rows (global 4, 5) wrong in every column; padding rows 6, 7 differ too but are
     * not compared */
    pair p = mk(12, 8);
    for (int r = 4; r < 8; r++)
        for (int c = 0; c < 8; c++) plant(&p, 8, r, c, 0x3f81);
    moects_out_geom g = moe_geom();
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_eq(d.ndims, 3);
    cr_assert_str_eq(d.axes[0], "expert");
    cr_assert_eq(d.first[0].at[0], 1);
    cr_assert_eq(d.first[0].at[1], 0); /* global row 4 is expert 1's row 0 */
    cr_assert_eq(d.first[0].at[2], 0);
    cr_assert_eq(d.first[4].at[1], 0);
    cr_assert_eq(d.first[4].at[2], 4);
    cr_assert_str_eq(d.pattern, "every row of expert 1, every column");
    drop(&p);
}

Test(diag, rows_of_one_expert_and_every_expert)
{
    /* expert 2's local rows 2..3 (global 10, 11), column 7 */
    pair p = mk(12, 8);
    plant(&p, 8, 10, 7, 0x3f81);
    plant(&p, 8, 11, 7, 0x3f81);
    moects_out_geom g = moe_geom();
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "rows 2..3 of expert 2, column 7 (the last)");
    cr_assert_eq(d.first[1].at[0], 2);
    cr_assert_eq(d.first[1].at[1], 3);
    drop(&p);
    /* every compared row (0..2, 4..5, 8..11), column 0 */
    p = mk(12, 8);
    for (int r = 0; r < 12; r++) plant(&p, 8, r, 0, 0x3f81);
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_str_eq(d.pattern, "every row of every expert, column 0");
    drop(&p);
}

Test(diag, masked_layout)
{
    /* masked: 2 experts x max_m 4 rows, masked_m {1, 3}; expert 1's rows 0..2 wrong in column 1, its
     * row 3 (past masked_m) and expert 0's rows 1..3 differ but are not compared */
    int32_t valid[2] = {1, 3};
    pair p = mk(8, 2);
    for (int r = 1; r < 4; r++) plant(&p, 2, r, 0, 0x3f81);
    for (int r = 4; r < 8; r++) plant(&p, 2, r, 1, 0x3f81);
    moects_out_geom g = {.axis = {"expert", "row", "col"}, .row_word = "row", .col_word = "column",
                         .col_extent = "N", .rows = 8, .cols = 2, .group_rows = 4, .group_valid = valid,
                         .groups = 2, .group_word = "expert"};
    moects_diag d;
    moects__diag_compute(&g, MOECTS_BF16, p.got, p.want, &d);
    cr_assert_eq(d.nfirst, 3);
    cr_assert_eq(d.first[2].at[0], 1);
    cr_assert_eq(d.first[2].at[1], 2);
    cr_assert_str_eq(d.pattern, "every row of expert 1, column 1 (the last)");
    int64_t at[3];
    cr_assert_eq(moects__out_coords(&g, 7 * 2 + 1, at), 3);
    cr_assert_eq(at[0], 1);
    cr_assert_eq(at[1], 3);
    cr_assert_eq(at[2], 1);
    drop(&p);
}
