/* test_harness_bounded.c: moe_gemm through the runner (harness/run/runner.c, one task in this process):
 * the reference per recipe, only valid rows compared, the tolerance verdict's unbounded distances,
 * and the bounded verdict (DESIGN.md "Bounded verdicts"): a kernel with recipe NULL and acc.bits > 0
 * is PASS_BOUNDED when every element is within its own bound of exact_v1, and a failure names the
 * worst element's bound. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_registry.h"
#include "moects_runner.h"

static const moects_kernel *find(const char *name)
{
    size_t n;
    const moects_kernel *const *all = moects__builtin_kernels(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    cr_assert_fail("kernel %s not registered", name);
    return NULL;
}

/* E 3 with rows {1, 0, 130} (contiguous, align 128: rows 0 and 128..257 valid), N 40, K 96, F32 out. */
static moects_case small_case(moects_moe_format f)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "moe_gemm.test/bounded/%d", (int)f);
    snprintf(c.model, sizeof c.model, "regression");
    snprintf(c.layout, sizeof c.layout, "-");
    c.op = MOECTS_OP_MOE_GEMM;
    c.tiers = MOECTS_TIER_SMOKE;
    c.E = 3, c.N = 40, c.K = 96;
    c.moe_format = f;
    c.b_format = f == MOECTS_MOE_NVFP4 ? MOECTS_FP4_NVFP4 : MOECTS_FP4_MXFP4;
    c.rows = MOECTS_ROWS_CONTIGUOUS, c.align = 128;
    c.a_scale_block = f == MOECTS_MOE_W4A8 ? 128 : 0;
    c.out_dtype = MOECTS_F32;
    c.n_counts = 3, c.counts[0] = 1, c.counts[1] = 0, c.counts[2] = 130;
    return c;
}

/* What the wrapped kernels do after the honest one: write padding row 1 (not compared), or push
 * element 0 (row 0, valid) up by 2^-8 relative (far outside an FP32-accumulation bound). */
static int mode;
static int wrapped(const void *shape, const void *args, void *stream)
{
    const moects_moe_gemm_shape *s = shape;
    const moects_kernel *base = find(s->format == MOECTS_MOE_W4A16 ? "cpu.moe_gemm.dequant_sgemm" : "cpu.moe_gemm.blockwise");
    if (base->run(shape, args, stream)) return -1;
    float *d = ((const moects_moe_gemm_args *)args)->d;
    if (mode == 0) d[1 * s->N + 3] = 12345.0f;
    else if (mode == 1) d[0] = d[0] * (1.0f + 0x1p-8f) + 1.0f;
    else { /* 2: every nonzero element one ULP toward zero; 3: that, and one element of expert 2 far off */
        for (int64_t i = 0; i < s->rows * s->N; i++)
            if (isfinite(d[i]) && d[i] != 0) d[i] = nextafterf(d[i], 0.0f);
        if (mode == 3) d[133 * s->N + 7] = d[133 * s->N + 7] * (1.0f + 0x1p-8f) + 1.0f; /* row 133: expert 2 */
        if (mode == 4) d[133 * s->N + 7] = INFINITY;
    }
    return 0;
}
static int takes(const void *shape, char *why, size_t len)
{
    const moects_moe_gemm_shape *s = shape;
    return find(s->format == MOECTS_MOE_W4A16 ? "cpu.moe_gemm.dequant_sgemm" : "cpu.moe_gemm.blockwise")
        ->supports(shape, why, len);
}
static const moects_kernel exact_k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "test.exact",
                                      .op = MOECTS_OP_MOE_GEMM, .device = MOECTS_DEVICE_CPU,
                                      .recipe = "moe_gemm.blockwise_v1", .supports = takes, .run = wrapped};
static const moects_kernel tol_k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "test.tolerance",
                                    .op = MOECTS_OP_MOE_GEMM, .device = MOECTS_DEVICE_CPU, .supports = takes,
                                    .run = wrapped, .tol = {.max_calc_diff = 1e-4, .max_ulp = UINT32_MAX}};
static const moects_kernel bounded_k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "test.bounded",
                                        .op = MOECTS_OP_MOE_GEMM, .device = MOECTS_DEVICE_CPU, .supports = takes,
                                        .run = wrapped, .acc = {24, 0}};

Test(bounded, honest_kernels_pass_exact_or_bounded)
{
    moects_result r;
    for (int f = MOECTS_MOE_MXFP4; f <= MOECTS_MOE_W4A16; f++) {
        moects_case c = small_case((moects_moe_format)f);
        if (f != MOECTS_MOE_W4A16) {
            moects__runner_task(&c, find("cpu.moe_gemm.blockwise"), 1, 0, &r);
            cr_expect_eq(r.verdict, MOECTS_PASS_EXACT, "format %d: %s %s", f, moects__verdict_name(r.verdict), r.reason);
        }
        moects__runner_task(&c, find("cpu.moe_gemm.dequant_sgemm"), 1, 0, &r);
        cr_expect_eq(r.verdict, MOECTS_PASS_BOUNDED, "format %d: %s %s", f, moects__verdict_name(r.verdict), r.reason);
        cr_expect_str_eq(r.recipe, "moe_gemm.exact_v1+bound(p=24,rne)");
    }
}

/* Kernel k (wrapped ones in mode m) on case c: the result, whose verdict must be want. */
static moects_result judged(const moects_case *c, const moects_kernel *k, int m, moects_verdict want)
{
    moects_result r;
    mode = m;
    moects__runner_task(c, k, 1, 0, &r);
    cr_assert_eq(r.verdict, want, "%s %s", moects__verdict_name(r.verdict), r.reason);
    return r;
}

/* Writes into padding rows are the kernel's business: not compared, under either verdict. */
Test(bounded, invalid_rows_are_not_compared)
{
    moects_case c = small_case(MOECTS_MOE_MXFP4);
    judged(&c, &exact_k, 0, MOECTS_PASS_EXACT);
    judged(&c, &bounded_k, 0, MOECTS_PASS_BOUNDED);
}

/* One valid element 2^-8 relative (plus 1) off: outside its bound; the reason names element 0 (row 0:
 * expert 0's first row, column 0) and its bound. */
Test(bounded, a_failure_names_the_worst_element_and_its_bound)
{
    moects_case c = small_case(MOECTS_MOE_W4A16);
    moects_result r = judged(&c, &bounded_k, 1, MOECTS_FAIL_MISMATCH);
    cr_expect_not_null(strstr(r.reason, "1 elements outside their bounds; worst: (expert 0, row 0, col 0), element 0, "
                                                 "|got - exact| "), "%s",
                       r.reason);
    cr_expect_not_null(strstr(r.reason, " > bound "), "%s", r.reason);
}

/* A bounded kernel's in-bound differences are not mismatches. The honest output (exact_v1's bits on
 * this case) moved one ULP toward zero everywhere stays within every bound: bound >= ulp_out(|alpha|
 * S + B) >= the ULP of |exact| (ref/moects_ref.h), and the step toward zero is at most that. It
 * passes with 0 mismatches (max_ulp 1, the bit distance). With one element of expert 2 pushed out
 * of its bound besides (row 133 = expert 2's row 5, since expert 0 holds row 0 padded to 128 and
 * expert 1 none; column 7: flat index 133 * 40 + 7 = 5327), that element alone is the mismatch,
 * the first mismatch and what the pattern names. */
Test(bounded, mismatches_are_the_elements_outside_their_bounds)
{
    moects_case c = small_case(MOECTS_MOE_W4A16);
    moects_result r = judged(&c, &bounded_k, 2, MOECTS_PASS_BOUNDED);
    cr_expect_eq(r.max_ulp, 1);
    cr_expect_eq(r.mismatches, 0);
    cr_expect_eq(r.first_index, -1);
    r = judged(&c, &bounded_k, 3, MOECTS_FAIL_MISMATCH);
    cr_expect_eq(r.mismatches, 1);
    cr_expect_eq(r.first_index, 5327);
    cr_expect_eq(r.diag.nfirst, 1);
    cr_expect_eq(r.diag.first[0].at[0], 2);
    cr_expect_eq(r.diag.first[0].at[1], 5);
    cr_expect_eq(r.diag.first[0].at[2], 7);
    cr_expect_not_null(strstr(r.diag.pattern, "expert 2"), "%s", r.diag.pattern);
    cr_expect_not_null(strstr(r.reason, "1 elements outside their bounds; worst: (expert 2, row 5, col 7)"), "%s",
                       r.reason);
}

/* A tolerance kernel (calc_diff only, no ULP gate) with one +Inf where exact_v1 is finite: calc_diff
 * skips that pair, so only the unbounded distance fails it, and the reason says where: (expert 2,
 * row 5, col 7), got 0x7f800000 (inf). The other elements are one ULP off (mode 4 includes mode 2). */
Test(bounded, a_tolerance_failure_names_its_inf_and_where)
{
    moects_case c = small_case(MOECTS_MOE_W4A16);
    judged(&c, &tol_k, 2, MOECTS_PASS_TOLERANCE);
    moects_result r = judged(&c, &tol_k, 4, MOECTS_FAIL_MISMATCH);
    cr_expect_not_null(strstr(r.reason, "a NaN or Inf against another value (first at element 5327); there (expert "
                                        "2, row 5, col 7): got 0x7f800000 (inf), want "),
                       "%s", r.reason);
}

/* A kernel that declares FP32 accumulation (24 bits, truncation) but keeps 14 bits,
 * cpu.mutant.moe_gemm.fast_accum, on a BF16 case of K 7168: its error, some 1% (about u n / sqrt(12)
 * for n = 224 steps of 32, u = 2^-13), stays inside every element's bound, which holds half a BF16
 * ULP at sum |terms| (tens of ULPs of the result), but the accumulation check fails it; the honest
 * dequant_sgemm passes. The failure's mismatches are the elements over their share, and each
 * expert's rows show them. */
Test(bounded, the_accumulation_check_catches_a_lossy_accumulator, .timeout = 120)
{
    moects_case c = small_case(MOECTS_MOE_W4A16);
    c.K = 7168, c.N = 64, c.out_dtype = MOECTS_BF16;
    c.n_counts = 2, c.counts[0] = 8, c.counts[1] = 8, c.E = 2;
    moects_result h = judged(&c, find("cpu.moe_gemm.dequant_sgemm"), 0, MOECTS_PASS_BOUNDED);
    cr_expect_eq(h.acc_n, 16 * 64, "every valid element checked: 16 rows x 64 columns");
    cr_expect_lt(h.acc_rms, 2.0);
    moects_result r = judged(&c, find("cpu.mutant.moe_gemm.fast_accum"), 0, MOECTS_FAIL_MISMATCH);
    cr_expect_gt(r.acc_rms, 2.0);
    cr_expect_not_null(strstr(r.reason, "no element outside its bound, but the accumulation check fails: "), "%s",
                       r.reason);
    cr_expect_not_null(strstr(r.reason, " over 1024 elements; a kernel of the declared class (24-bit, truncation) "
                                        "stays within 2 sigma"),
                       "%s", r.reason);
    cr_expect_gt(r.mismatches, 0);
    /* the classes its error fits include its own: 14 bits, truncation (at most p bits for some p in
     * 14..23), and never the declared 24 */
    const char *t = strstr(r.reason, " bits or fewer (truncation)");
    cr_assert_not_null(t, "%s", r.reason);
    while (t > r.reason && t[-1] >= '0' && t[-1] <= '9') t--;
    const int p = atoi(t);
    cr_expect(p >= 14 && p < 24, "consistent with truncating accumulators of up to %d bits: %s", p, r.reason);
}

/* The split-K BF16 class (issue 25) through the runner on an fp4_gemm case of the H200's failing shape
 * family (M 5, K 2688, BF16 out): cpu.fp4_gemm.dequant_splitk_bf16 (16 pieces, declared) passes; the
 * same arithmetic declared as plain FP32 fails the accumulation check only, and the reason names the
 * split-K classes its error fits: from a count of at most its own 16 pieces. */
Test(bounded, a_bf16_split_k_reduction_is_a_declared_class, .timeout = 120)
{
    moects_case c;
    memset(&c, 0, sizeof c);
    snprintf(c.id, sizeof c.id, "fp4_gemm.test/split-k");
    snprintf(c.model, sizeof c.model, "regression");
    snprintf(c.layout, sizeof c.layout, "-");
    c.op = MOECTS_OP_FP4_GEMM, c.tiers = MOECTS_TIER_SMOKE;
    c.M = 5, c.N = 100, c.K = 2688, c.format = MOECTS_FP4_MXFP4, c.scale_layout = MOECTS_SCALES_LINEAR;
    c.out_dtype = MOECTS_BF16;
    moects_result h = judged(&c, find("cpu.fp4_gemm.dequant_splitk_bf16"), 0, MOECTS_PASS_BOUNDED);
    cr_expect_lt(h.acc_rms, 2.0);
    cr_expect_str_eq(h.recipe, "fp4_gemm.exact_v1+bound(p=24,rne,bf16-split-k<=16)");
    moects_result r = judged(&c, find("cpu.mutant.fp4_gemm.bf16_split_k"), 0, MOECTS_FAIL_MISMATCH);
    cr_expect_gt(r.acc_rms, 2.0);
    const char *t = strstr(r.reason, "consistent with a split-K BF16 reduction of ");
    cr_assert_not_null(t, "%s", r.reason);
    const int pieces = atoi(t + strlen("consistent with a split-K BF16 reduction of "));
    cr_expect(pieces >= 2 && pieces <= 16, "fits from %d pieces on: %s", pieces, r.reason);
}
