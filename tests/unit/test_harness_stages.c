/* test_harness_stages.c: the exposed intermediates' rule (moects__judge_stages, harness/judge/stages.c;
 * docs/fused_moe.md "Exposed intermediates") called directly on stage tables made by hand: two stages of
 * 2 rows (slots of one token each) by 64 columns, "gemm1" a GEMM's output with accumulation check inputs,
 * "act" not. Each verdict and reason below follows from the rule's text: the first stage, in order,
 * with an element off its reference names it; a stage left at the poison is not exposed; a GEMM stage
 * whose implied accumulation error has an RMS over 2 sigma (DESIGN.md "Bounded verdicts") fails a
 * passing output. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "moects_judge.h"

#define R 2
#define C 64

static float want[2][R * C], lo[2][R * C], hi[2][R * C], got[2][R * C], det[R * C], sig[R * C];
static double x[R * C];
static uint8_t valid[R] = {1, 1};
static moects__stages st;

/* Stage references of 1.0 everywhere (exact), or [1, 1] intervals (bounded); gemm1's check inputs x 1,
 * det 0, sigma 2^-20; got equal to the reference. */
static void table(int bounded)
{
    memset(&st, 0, sizeof st);
    st.n = 2, st.rows = R, st.group = 1, st.valid = valid;
    for (int s = 0; s < 2; s++) {
        st.s[s] = (moects__stage){.name = s ? "act" : "gemm1", .arg = s ? "act_out" : "g1_out", .cols = C,
                                  .round = s ? 0 : MOECTS_F32, .K = s ? 0 : 256};
        for (int i = 0; i < R * C; i++) want[s][i] = lo[s][i] = hi[s][i] = got[s][i] = 1.0f;
        if (bounded) st.s[s].lo = lo[s], st.s[s].hi = hi[s];
        else st.s[s].want = want[s];
    }
    for (int i = 0; i < R * C; i++) x[i] = 1.0, det[i] = 0.0f, sig[i] = 0x1p-20f;
    st.s[0].st = (moects_bound_stats){x, det, sig};
}

static int judge(moects_verdict v, const moects_acc_class *cls, moects_result *r)
{
    memset(r, 0, sizeof *r);
    r->verdict = v;
    const void *g[2] = {got[0], got[1]};
    return moects__judge_stages(&st, g, cls, r);
}

static const moects_acc_class FP32 = {24, 0, 0};

/* Exact: act's element (row 1, column 3) moved to 5 is the first stage off; gemm1 left at the poison
 * bytes is not exposed, and names nothing; a passing output gets no note. */
Test(stages, exact_first_stage_off)
{
    moects_result r;
    table(0);
    got[1][C + 3] = 5.0f;
    cr_assert_eq(judge(MOECTS_FAIL_MISMATCH, NULL, &r), 0);
    cr_expect_str_eq(r.reason, "first stage off: act, slot (t 1, j 0), column 3: got 5, exact 1");
    got[1][C + 3] = 1.0f, got[0][7] = 2.0f;
    judge(MOECTS_FAIL_MISMATCH, NULL, &r);
    cr_expect_str_eq(r.reason, "first stage off: gemm1, slot (t 0, j 0), column 7: got 2, exact 1");
    memset(got[0], MOECTS__STAGE_POISON, sizeof got[0]);
    judge(MOECTS_FAIL_MISMATCH, NULL, &r);
    cr_expect_str_eq(r.reason, "first stage off: none of the exposed stages (act): the layer after them");
    judge(MOECTS_PASS_EXACT, NULL, &r);
    cr_expect_str_eq(r.reason, "");
}

/* Bounded: act outside [1, 1] at (row 0, column 0) named with its interval; every stage inside, and
 * gemm1's values 1 + 2^-22 (implied error |2^-22| less FP32's half ULP at 1, 2^-24: 3 2^-24, 3/16
 * sigma, RMS 0.1875 over 128): the output keeps PASS_BOUNDED and a note of that RMS. */
Test(stages, bounded_first_stage_outside)
{
    moects_result r;
    table(1);
    got[1][0] = 0.5f;
    cr_assert_eq(judge(MOECTS_FAIL_MISMATCH, &FP32, &r), 0);
    cr_expect(strstr(r.reason, "first stage outside its enclosure: act, slot (t 0, j 0), column 0: got 0.5, "
                               "enclosure [1, 1]") == r.reason, "%s", r.reason);
    table(1);
    for (int i = 0; i < R * C; i++) got[0][i] = hi[0][i] = 1.0f + 0x1p-22f;
    cr_assert_eq(judge(MOECTS_PASS_BOUNDED, &FP32, &r), 0);
    cr_expect_eq(r.verdict, MOECTS_PASS_BOUNDED);
    cr_expect_str_eq(r.reason, "accumulation check of the stages (RMS): gemm1 0.188 sigma over 128");
    cr_expect(r.acc_n == 128 && fabs(r.acc_rms - 0.1875) < 1e-12, "%g over %lld", r.acc_rms, (long long)r.acc_n);
}

/* gemm1's values 1 + 2^-16, inside their (widened) enclosure: implied 2^-16 - 2^-24 = 255 2^-24,
 * 255/16 = 15.94 sigma on each of 128 elements: over 2, so the passing output fails, its reason the
 * check's, its mismatches the 128 elements over 2 sigma. */
Test(stages, accumulation_check_fails_a_pass)
{
    moects_result r;
    table(1);
    for (int i = 0; i < R * C; i++) got[0][i] = hi[0][i] = 1.0f + 0x1p-16f;
    cr_assert_eq(judge(MOECTS_PASS_BOUNDED, &FP32, &r), 1);
    cr_expect_eq(r.verdict, MOECTS_FAIL_MISMATCH);
    cr_expect(strstr(r.reason, "no element outside its enclosure, but the accumulation check of stage gemm1 (a GEMM's "
                               "output, exposed) fails: ") == r.reason, "%s", r.reason);
    cr_expect(strstr(r.reason, "an RMS of 15.9 sigma over 128 elements"), "%s", r.reason);
    cr_expect(r.mismatches == 128 && fabs(r.acc_rms - 255.0 / 16.0) < 1e-9, "%lld, %g", (long long)r.mismatches, r.acc_rms);
}
