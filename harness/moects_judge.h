/* moects_judge.h: the judge (harness/judge/): a kernel's outputs, the case's reference (with its
 * per-element bounds for a bounded claim) and the kernel's claim -> the verdict and its diagnostics
 * (DESIGN.md "Verdicts", "Bounded verdicts"). Pure: no worker state, no I/O, no timing; every verdict
 * rule lives here. The runner computes what it takes (harness/run/runner.c). */
#ifndef MOECTS_JUDGE_H
#define MOECTS_JUDGE_H
#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_kernel.h"
#include "moects_layer.h"
#include "moects_op.h"
#include "moects_ref.h"

/* What a case's outputs are judged against. */
typedef struct {
    const moects_inputs *in;      /* the case: op, shape, output dtype and element count, valid rows */
    const void *want;             /* the reference output [out_elems] out_dtype under the claim's recipe
                                     (exact_v1 for a bound or a tolerance) */
    const double *bound;          /* a bounded claim: per-element bounds [out_elems] (moects_ref_*_bound_class
                                     for the kernel's class); NULL otherwise */
    const moects_bound_stats *st; /* the accumulation check's inputs, NULL where the check does not apply */
    /* a bounded claim of a layer recipe (fused_moe): every element in [lo, hi] (out_dtype; NaN in lo:
     * NaN expected; lo -Inf and hi +Inf: anything); tight their widths; any_order: the recipe sums in
     * any order, so runs may differ (no FAIL_NONDETERMINISTIC). lo NULL otherwise. */
    const void *lo, *hi;
    const moects_layer_tightness *tight;
    int any_order;
} moects_judge_ref;

/* Whether kernel k's claim is bounded: an accumulation class without a recipe (per-element bounds),
 * or with a layer recipe (an op with an enclosure, fused_moe). */
int moects__judge_claim_bounded(const moects_kernel *k);

/* The verdict of kernel k's runs got[0..nruns) (each [out_elems] out_dtype; invalid moe_gemm rows are
 * overwritten with the reference's bytes): run 1 judged under k's claim (recipe: identical bits;
 * acc: every element within its bound, then the accumulation check; else k->tol against exact_v1); a
 * later run with run 1's bits keeps its verdict, one that differs is judged in full (the first failure
 * is the verdict), and a kernel declaring a recipe must give the same bits every run
 * (FAIL_NONDETERMINISTIC). Fills r's verdict, reason, mismatch counts, first mismatch, max ULP,
 * calc_diff, acc_rms/acc_n and diag. Returns the index of the run r's verdict is about (the failing
 * run, what --dump writes). */
int moects__judge_runs(const moects_judge_ref *ref, const moects_kernel *k, void *const *got, int nruns,
                      moects_result *r);

/* The batch-invariance rule (harness/judge/batch.c): got, a kernel's output of the case (in: rows x
 * cols of out_dtype, invalid rows as judged), against big, its output of the same rows inside the
 * larger batch b describes (b->row_of[r]: big's row holding row r; -1 not compared; big [b->n_big
 * ...] rows of the same width). Every compared element must keep its bits (a NaN equals any NaN, as
 * moects__compare); else r's verdict becomes FAIL_BATCH_VARIANT with the elements that differ, the
 * first one (got: the batch's value, want: the case's own), the diagnostics in the case's
 * coordinates, and a reason naming both batch sizes and the first element's (row, col) and batch row.
 * r unchanged when all agree. 0, or -1 out of memory (r unchanged). */
int moects__judge_batch(const moects_inputs *in, const void *got, const void *big, const moects__batch *b,
                        moects_result *r);

/* Whether the accumulation check applies to case c: not to negzero data (B rows with fixed signs: the
 * check's premise, fair random signs, does not hold). */
int moects__judge_acc_check_applies(const moects_case *c);

/* Whether kernel k's claim can be judged on case c at all: 1, or 0 with r's verdict FAIL_CRASH and
 * the reason (a blockwise_v1 claim on a W4A16 case, which has no such recipe: BF16 x E2M1 block
 * partials are not exact). */
int moects__judge_claim_ok(const moects_case *c, const moects_kernel *k, moects_recipe recipe, moects_result *r);

/* ---- the pieces of the bounded rules the stage judge (harness/judge/stages.c) shares ---- */
/* The least accumulation error |a| that explains value g of element i under the accumulation check's
 * inputs st (ref/moects_ref.h moects_bound_stats): |g - x| less half an ULP at |g| of the last
 * rounding's type (bf16: BF16, else FP32) and det; -1 where the check does not apply (det +Inf, sigma
 * 0 or not finite, g not finite). DESIGN.md "Bounded verdicts". */
double moects__judge_implied_acc(const moects_bound_stats *st, int64_t i, double g, int bf16);
/* The text of a failed accumulation check into buf: "HEAD fails: the accumulation error the NOUN
 * implies ... has an RMS of RMS sigma over N elements; ... consistent with ..." (the classes whose
 * error would explain rms at reduction length K, against the declared class cls). */
void moects__judge_acc_text(int64_t K, const moects_acc_class *cls, double rms, int64_t n, const char *head,
                            const char *noun, char *buf, size_t len);
/* Whether value g lies in an enclosure [l, h]: NaN expected (l NaN) takes only NaN, an unbounded one
 * (-Inf, +Inf) anything, else l <= g <= h. */
int moects__judge_in_enclosure(double g, double l, double h);

/* The exposed intermediates' rule (harness/judge/stages.c; docs/fused_moe.md "Exposed intermediates"):
 * the kernel's stages got[i] (ref's geometry; NULL, or no valid element written (every byte
 * MOECTS__STAGE_POISON): not exposed) against ref's reference, after r's verdict on the output.
 * Exact (ref's want): the first stage, in the op's order, with an element whose bits differ is named
 * in r's reason ("first stage off: act, slot (t 0, j 1), column 5: got ..., exact ..."). Bounded
 * (ref's lo, hi; cls the claim's class): a failed output's reason names the first stage with an
 * element outside its enclosure, its place, value and interval ("first stage outside its enclosure:
 * ..."), or that every exposed stage lies inside; and every stage with accumulation check inputs
 * (ref's st) is checked as the output of a bounded GEMM is (its RMS in r's acc_rms, acc_n: the larger
 * one's): a stage over the limit makes a passing verdict FAIL_MISMATCH (its reason the check's, its
 * mismatches the stage's elements over MOECTS_ACC_CHECK_LIMIT sigma), and is named in a failing one's.
 * Returns 1 when it changed r's verdict, else 0. */
int moects__judge_stages(const moects__stages *ref, const void *const *got, const moects_acc_class *cls,
                         moects_result *r);

/* dst = src cut to n - 1 bytes (no format-truncation warnings on fixed fields). */
void moects__copy_str(char *dst, size_t n, const char *src);

#endif
