/* test_harness_judge.c: the judge called directly (harness/moects_judge.h), on an fp4_gemm case's
 * exact_v1 reference and bounds: outputs made from the reference by hand (itself, one element moved,
 * a second run that differs, the same rows inside a larger batch) and the verdict each must get by the
 * rules of DESIGN.md "Verdicts" and "Batch invariance". */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moects_judge.h"

static moects_inputs in;
static uint16_t *want, *got[2];
static double *bound;

/* M 4, N 64, K 256, MXFP4, BF16 output: exact_v1 into want, the (24, RNE) bounds into bound. */
static void setup(void)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "fp4_gemm.test/judge");
    c.op = MOECTS_OP_FP4_GEMM, c.M = 4, c.N = 64, c.K = 256, c.format = MOECTS_FP4_MXFP4;
    c.scale_layout = MOECTS_SCALES_LINEAR, c.out_dtype = MOECTS_BF16;
    char err[256];
    cr_assert_eq(moects__inputs_build(&c, 1, &in, err, sizeof err), 0, "%s", err);
    const size_t n = (size_t)in.out_elems;
    want = calloc(n, 2), got[0] = calloc(n, 2), got[1] = calloc(n, 2), bound = calloc(n, sizeof *bound);
    void *p[MOECTS_INPUTS_MAX] = {0};
    for (int i = 0; i < in.nt; i++) p[i] = in.t[i].host;
    moects_op_args a;
    moects__inputs_bind(&in, p, want, &a);
    cr_assert_eq(moects__ref_fp4_gemm(&in.fg, &a.fg, MOECTS_RECIPE_EXACT_V1), 0);
    const moects_acc_class cls = {24, 0, 0};
    cr_assert_eq(moects__ref_fp4_gemm_bound_class(&in.fg, &a.fg, &cls, bound, NULL), 0);
    memcpy(got[0], want, n * 2), memcpy(got[1], want, n * 2);
}
static void teardown(void)
{
    moects__inputs_free(&in);
    free(want), free(got[0]), free(got[1]), free(bound);
}
TestSuite(judge, .init = setup, .fini = teardown);

static const moects_kernel exact = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "t.exact",
                                    .op = MOECTS_OP_FP4_GEMM, .recipe = "fp4_gemm.exact_v1"};
static const moects_kernel bounded = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "t.bounded",
                                      .op = MOECTS_OP_FP4_GEMM, .acc = {24, 0}};
static const moects_kernel tol = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "t.tol", .op = MOECTS_OP_FP4_GEMM,
                                  .tol = {1e-5, UINT32_MAX}};

static moects_result judged(const moects_kernel *k, int runs, int *run)
{
    moects_result r;
    memset(&r, 0, sizeof r);
    const moects_judge_ref ref = {.in = &in, .want = want, .bound = k->acc.bits ? bound : NULL};
    *run = moects__judge_runs(&ref, k, (void *const *)got, runs, &r);
    return r;
}

/* The reference itself passes under each claim. */
Test(judge, the_reference_passes_every_claim)
{
    int run;
    cr_assert_eq(judged(&exact, 2, &run).verdict, MOECTS_PASS_EXACT);
    cr_assert_eq(judged(&bounded, 2, &run).verdict, MOECTS_PASS_BOUNDED);
    cr_assert_eq(judged(&tol, 2, &run).verdict, MOECTS_PASS_TOLERANCE);
}

/* Element 5 (m 0, n 5) set to 1e30 in both runs: one mismatch at index 5 under every claim. */
Test(judge, one_element_far_off_is_one_mismatch)
{
    got[0][5] = got[1][5] = 0x7149; /* BF16 ~9.95e29 */
    const moects_kernel *k[3] = {&exact, &bounded, &tol};
    for (int i = 0; i < 3; i++) {
        int run;
        moects_result r = judged(k[i], 2, &run);
        cr_assert_eq(r.verdict, MOECTS_FAIL_MISMATCH, "%s", k[i]->name);
        cr_assert_eq(run, 0);
        if (i < 2) cr_assert_eq(r.mismatches, 1, "%s: %lld", k[i]->name, (long long)r.mismatches);
        cr_assert_eq(r.first_index, 5, "%s", k[i]->name);
    }
}

/* Run 2 one BF16 ULP off at element 7: run 1 passes, run 2 differs from it and is judged in full, so
 * an exact claim fails on run 2, the reason says so, and the run returned (what --dump writes) is 2. */
Test(judge, a_second_run_that_differs)
{
    got[1][7] ^= 1;
    int run;
    moects_result r = judged(&exact, 2, &run);
    cr_assert_eq(r.verdict, MOECTS_FAIL_MISMATCH, "run 2 alone mismatches exact_v1: %s", r.reason);
    cr_assert_eq(run, 1, "the failing run is run 2");
    cr_assert(strstr(r.reason, "run 2 (fresh poison) failed where run 1 passed"), "%s", r.reason);
}

/* The enclosure rule (a bounded layer claim): intervals written by hand over the case's first four
 * output elements (BF16 bits), the rest [x, x] around the reference itself: 1.0 in [1.0, 1.5]
 * passes, 2.0 outside [1.0, 1.5] fails at the upper end 1.5, NaN-expected (lo NaN) takes only a NaN,
 * an unbounded element (-Inf, +Inf) takes anything, a NaN included. */
Test(judge, enclosure)
{
    const size_t n = (size_t)in.out_elems;
    uint16_t *lo = malloc(n * 2), *hi = malloc(n * 2);
    memcpy(lo, want, n * 2), memcpy(hi, want, n * 2);
    lo[0] = 0x3f80, hi[0] = 0x3fc0, got[0][0] = 0x3f80;          /* 1.0 in [1.0, 1.5] */
    lo[1] = 0x7fc0, hi[1] = 0x7fc0, got[0][1] = 0x7fc1;          /* NaN expected, a NaN */
    lo[2] = 0xff80, hi[2] = 0x7f80, got[0][2] = 0x7fc0;          /* unbounded: a NaN passes */
    lo[3] = 0x3f80, hi[3] = 0x3fc0, got[0][3] = 0x3fc0;          /* 1.5: the upper end itself */
    const moects_layer_tightness t = {.elements = (int64_t)n};
    const moects_kernel layer = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "t.layer",
                                 .op = MOECTS_OP_FP4_GEMM, .acc = {24, 0}};
    moects_judge_ref ref = {.in = &in, .want = want, .lo = lo, .hi = hi, .tight = &t};
    moects_result r;
    memset(&r, 0, sizeof r);
    moects__judge_runs(&ref, &layer, (void *const *)got, 1, &r);
    cr_expect_eq(r.verdict, MOECTS_PASS_BOUNDED, "%s", r.reason);
    got[0][0] = 0x4000; /* 2.0: above 1.5 */
    got[0][1] = 0x3f80; /* a number where NaN is expected */
    memset(&r, 0, sizeof r);
    moects__judge_runs(&ref, &layer, (void *const *)got, 1, &r);
    cr_expect_eq(r.verdict, MOECTS_FAIL_MISMATCH);
    cr_expect_eq(r.mismatches, 2, "%lld", (long long)r.mismatches);
    cr_expect_eq(r.first_index, 0);
    cr_expect(strstr(r.want, "0x3fc0") != NULL, "%s", r.want); /* named against the end it passed */
    cr_expect(strstr(r.reason, "2 elements outside their enclosure") != NULL, "%s", r.reason);
    free(lo), free(hi);
}

/* The batch-invariance rule (moects__judge_batch) on hand-made outputs: the case's output is the
 * reference ([4, 64] BF16), the batch's a [9, 64] output holding case row r at row 2r + 1 (what the
 * ops' batches do) and NaN in the other rows, which no rule reads. */
static uint16_t *batch_of(const uint16_t *rows, int64_t *row_of, moects__batch *b)
{
    uint16_t *big = malloc(9 * 64 * 2);
    for (int i = 0; i < 9 * 64; i++) big[i] = 0x7fc0;
    for (int64_t r = 0; r < 4; r++) row_of[r] = 2 * r + 1, memcpy(big + (2 * r + 1) * 64, rows + r * 64, 64 * 2);
    *b = (moects__batch){.row_of = row_of, .rows = 4, .n = 4, .n_big = 9, .unit = "tokens"};
    return big;
}

/* Every bit of the case's rows the same in the batch: the verdict is left as it was. */
Test(judge, batch_same_rows_keep_the_verdict)
{
    int64_t row_of[4];
    moects__batch b;
    uint16_t *big = batch_of(got[0], row_of, &b);
    moects_result r = {.verdict = MOECTS_PASS_EXACT, .first_index = -1};
    cr_assert_eq(moects__judge_batch(&in, got[0], big, &b, &r), 0);
    cr_expect_eq(r.verdict, MOECTS_PASS_EXACT);
    cr_expect_eq(r.mismatches, 0);
    free(big);
}

/* Case row 2, column 17 one BF16 ULP off at batch row 5: FAIL_BATCH_VARIANT, one element, index
 * 2 * 64 + 17 = 145, the reason naming both batch sizes, the element (m 2, n 17) and its batch row,
 * the diagnostics the element's coordinates. */
Test(judge, batch_one_bit_moved_is_batch_variant)
{
    int64_t row_of[4];
    moects__batch b;
    uint16_t *big = batch_of(got[0], row_of, &b);
    big[5 * 64 + 17] ^= 1;
    moects_result r = {.verdict = MOECTS_PASS_EXACT, .first_index = -1};
    cr_assert_eq(moects__judge_batch(&in, got[0], big, &b, &r), 0);
    cr_expect_eq(r.verdict, MOECTS_FAIL_BATCH_VARIANT);
    cr_expect_eq(r.mismatches, 1);
    cr_expect_eq(r.first_index, 145);
    cr_expect_eq(r.max_ulp, 1);
    cr_expect(strstr(r.reason, "batch of 4 tokens vs 9") && strstr(r.reason, "(m 2, n 17)") &&
              strstr(r.reason, "row 5 of the batch"), "%s", r.reason);
    cr_expect_eq(r.diag.nfirst, 1);
    cr_expect(r.diag.first[0].at[0] == 2 && r.diag.first[0].at[1] == 17);
    free(big);
}

/* A NaN whose payload differs still equals a NaN (as every comparison of the judge), and a row the
 * batch does not hold (row_of -1, a moe_gemm padding row) is not compared. */
Test(judge, batch_nan_payloads_and_uncompared_rows)
{
    int64_t row_of[4];
    moects__batch b;
    got[0][3] = 0x7fc1;
    uint16_t *big = batch_of(got[0], row_of, &b);
    big[1 * 64 + 3] = 0x7fc0;   /* case row 0: another NaN */
    big[3 * 64 + 9] ^= 0x8000;  /* case row 1: a sign flipped ... */
    row_of[1] = -1;             /* ... in a row not compared */
    moects_result r = {.verdict = MOECTS_PASS_EXACT, .first_index = -1};
    cr_assert_eq(moects__judge_batch(&in, got[0], big, &b, &r), 0);
    cr_expect_eq(r.verdict, MOECTS_PASS_EXACT, "%s", r.reason);
    free(big);
}
