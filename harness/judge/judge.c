/* judge.c: the verdict rules (harness/moects_judge.h; DESIGN.md "Verdicts", "Bounded verdicts"):
 * identical bits under a recipe, per-element bounds and the accumulation check under an accumulation
 * class, a tolerance against exact_v1, and the runs' determinism. Pure functions of the outputs, the
 * reference and the claim. */
#include "moects_judge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moects_compare.h"
#include "moects_diag.h"
#include "moects_op.h"

void moects__copy_str(char *dst, size_t n, const char *src)
{
    size_t l = strlen(src);
    if (l >= n) l = n - 1;
    memcpy(dst, src, l);
    dst[l] = '\0';
}

/* Rows that are not valid (moe_gemm: padding rows, rows >= masked_m) are not compared: they get the
 * reference's bytes in got. */
static void mask_invalid_rows(const moects_inputs *in, void *got, const void *want)
{
    if (!in->row_valid || in->rows <= 0) return;
    size_t row_bytes = (size_t)(in->out_elems / in->rows) * (in->out_dtype == MOECTS_F32 ? 4 : 2);
    for (int64_t r = 0; r < in->rows; r++)
        if (!in->row_valid[r])
            memcpy((char *)got + (size_t)r * row_bytes, (const char *)want + (size_t)r * row_bytes, row_bytes);
}

static double out_value(moects_dtype dt, const void *p, int64_t i)
{
    if (dt == MOECTS_F32) return ((const float *)p)[i];
    return moects__bf16_to_f32(((const uint16_t *)p)[i]);
}

/* Whether output element i is compared: every one but the invalid rows of an op with a row mask. */
static int compared(const moects_inputs *in, int64_t i)
{
    return !in->row_valid || in->row_valid[i / (in->out_elems / in->rows)];
}

/* What a bounded verdict judges got by: the bounds and the accumulation check's inputs (st NULL:
 * no check). share: the check failed, so an element whose implied accumulation error exceeds its
 * share, MOECTS_ACC_CHECK_LIMIT sigma, also counts as outside (what the diagnostics then show). */
typedef struct {
    const double *bound;
    const moects_bound_stats *st;
    int share;
} bound_judge;

/* The least accumulation error |a| that explains got's element i (ref/moects_ref.h,
 * moects_bound_stats): |got - x| less half an output ULP at |got| and det; -1 where the check does
 * not apply (det +Inf, sigma 0 or not finite, got not finite). */
double moects__judge_implied_acc(const moects_bound_stats *st, int64_t i, double g, int bf16)
{
    const double det = st->det[i], sg = st->sigma[i];
    if (!isfinite(det) || !isfinite(sg) || !(sg > 0) || !isfinite(g)) return -1;
    const int e = g != 0 ? ilogb(g) : -126;
    const double half = ldexp(1.0, (e > -126 ? e : -126) - (bf16 ? 8 : 24));
    const double a = fabs(g - st->x[i]) - half - det;
    return a > 0 ? a : 0;
}

static double implied_acc(const moects_inputs *in, const moects_bound_stats *st, double g, int64_t i)
{
    return moects__judge_implied_acc(st, i, g, in->out_dtype == MOECTS_BF16);
}

/* Whether compared element i of got is outside its bound of exact_v1 (NaN only against NaN, an
 * infinity only against the same one), or over its share (bj->share); *err = |got - exact|,
 * INFINITY for a kind mismatch. */
static int outside_bound(const moects_inputs *in, const void *got, const void *want, const bound_judge *bj, int64_t i,
                         double *err)
{
    if (!compared(in, i)) return 0;
    double g = out_value(in->out_dtype, got, i), w = out_value(in->out_dtype, want, i);
    int bad;
    if (isnan(g) || isnan(w)) bad = !(isnan(g) && isnan(w)), *err = bad ? INFINITY : 0;
    else if (isinf(g) || isinf(w)) bad = g != w, *err = bad ? INFINITY : 0;
    else *err = fabs(g - w), bad = !(*err <= bj->bound[i]); /* a NaN bound holds nothing */
    if (!bad && bj->share) bad = implied_acc(in, bj->st, g, i) > MOECTS_ACC_CHECK_LIMIT * bj->st->sigma[i];
    return bad;
}

/* The output as a bounded verdict sees it: got's elements outside their bounds, the reference's
 * bits elsewhere (malloc'ed; NULL when memory runs out). Compared with the reference, its
 * mismatches and diagnostics are the failing elements only, not the in-bound rounding differences
 * a bounded kernel is allowed. */
static void *outside_only(const moects_inputs *in, const void *got, const void *want, const bound_judge *bj)
{
    size_t esz = in->out_dtype == MOECTS_F32 ? 4 : 2;
    char *judged = malloc((size_t)in->out_elems * esz);
    if (!judged) return NULL;
    memcpy(judged, want, (size_t)in->out_elems * esz);
    double err;
    for (int64_t i = 0; i < in->out_elems; i++)
        if (outside_bound(in, got, want, bj, i, &err))
            memcpy(judged + (size_t)i * esz, (const char *)got + (size_t)i * esz, esz);
    return judged;
}

/* The accumulation check (DESIGN.md "Bounded verdicts"): over the compared elements it applies to,
 * the RMS of implied_acc / sigma, recorded in r (acc_rms, acc_n) whatever the verdict. The kernel's
 * accumulation error a is at least implied_acc, and E[a^2] <= sigma^2 for its declared class, so
 * an RMS above MOECTS_ACC_CHECK_LIMIT says it accumulates lossier than declared: returns 1 then. */
static int accumulation_check(const moects_inputs *in, const void *got, const moects_bound_stats *st,
                              moects_result *r)
{
    double sum = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < in->out_elems; i++) {
        if (!compared(in, i)) continue;
        const double a = implied_acc(in, st, out_value(in->out_dtype, got, i), i);
        if (a < 0) continue;
        n++, sum += (a / st->sigma[i]) * (a / st->sigma[i]);
    }
    r->acc_rms = n ? sqrt(sum / (double)n) : 0, r->acc_n = n;
    return n >= MOECTS_ACC_CHECK_MIN && r->acc_rms > MOECTS_ACC_CHECK_LIMIT;
}

/* The GEMM's reduction length K of a bounded case (the op's entry). */
static int64_t reduction_k(const moects_inputs *in) { return moects__op_of_inputs(in)->reduction_k(in); }

/* The classes whose expected accumulation error would explain an RMS of rms sigma under class cls
 * (sigma scales with moects__ref_acc_sigma_factor): the fewest BF16 split-K pieces over cls's
 * accumulator, and the most accumulator bits with RNE and with truncation, each within
 * MOECTS_ACC_CHECK_LIMIT; into buf as one clause. */
static void consistent_classes(int64_t K, const moects_acc_class *cls, double rms, char *buf, size_t len)
{
    const double t = rms * moects__ref_acc_sigma_factor(K, cls); /* RMS in |alpha| sqrt(sum term^2) */
    uint32_t splits = 0;
    int rne = 0, trunc = 0;
    for (uint32_t sp = 2; sp <= 256 && !splits; sp++) {
        const moects_acc_class c = {cls->bits, cls->truncation, sp};
        if (t <= MOECTS_ACC_CHECK_LIMIT * moects__ref_acc_sigma_factor(K, &c)) splits = sp;
    }
    for (int p = 2; p <= 24; p++) {
        const moects_acc_class cr = {(uint32_t)p, 0, 0}, ct = {(uint32_t)p, 1, 0};
        if (t <= MOECTS_ACC_CHECK_LIMIT * moects__ref_acc_sigma_factor(K, &cr)) rne = p;
        if (t <= MOECTS_ACC_CHECK_LIMIT * moects__ref_acc_sigma_factor(K, &ct)) trunc = p;
    }
    size_t n = (size_t)snprintf(buf, len, "consistent with");
    if (splits)
        n += (size_t)snprintf(buf + n, n < len ? len - n : 0, " a split-K BF16 reduction of %u or more pieces (declare "
                              "split_k; cuBLAS without CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, torch's "
                              "allow_bf16_reduced_precision_reduction)%s", splits, rne || trunc ? " or" : "");
    if (rne) n += (size_t)snprintf(buf + n, n < len ? len - n : 0, " an accumulator of %d bits or fewer (RNE)", rne);
    if (trunc)
        n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s %d bits or fewer (truncation)", rne ? "," : " an accumulator of",
                              trunc);
    if (!splits && !rne && !trunc) snprintf(buf, len, "consistent with no accumulation class moects knows");
}

void moects__judge_acc_text(int64_t K, const moects_acc_class *cls, double rms, int64_t n, const char *head,
                            const char *noun, char *buf, size_t len)
{
    char fit[400], split[48] = "";
    consistent_classes(K, cls, rms, fit, sizeof fit);
    if (cls->bf16_splits) snprintf(split, sizeof split, ", split-K in BF16 over at most %u", cls->bf16_splits);
    snprintf(buf, len,
             "%s fails: the accumulation error the %s implies (|got - exact| less the %s rounding) has an RMS of "
             "%.3g sigma over %lld elements; a kernel of the declared class (%u-bit, %s%s) stays within %g sigma "
             "(sigma: an upper estimate of each element's expected accumulation error for that class); %s",
             head, noun, noun, rms, (long long)n, cls->bits, cls->truncation ? "truncation" : "RNE", split,
             MOECTS_ACC_CHECK_LIMIT, fit);
}

/* The reason of a failed accumulation check, with the classes its error would fit. */
static void accumulation_reason(const moects_inputs *in, const moects_acc_class *cls, moects_result *r)
{
    char buf[1024];
    moects__judge_acc_text(reduction_k(in), cls, r->acc_rms, r->acc_n,
                           "no element outside its bound, but the accumulation check", "output", buf, sizeof buf);
    moects__copy_str(r->reason, sizeof r->reason, buf);
}

/* PASS_BOUNDED or FAIL_MISMATCH: every compared element within its own bound of exact_v1
 * (outside_bound), then the accumulation check (bj->st; its RMS recorded either way). A bound
 * failure's reason names the worst element (largest |got - exact| / bound) and its bound; a failed
 * check sets bj->share. */
static moects_verdict judge_bounded(const moects_inputs *in, const void *got, const void *want, bound_judge *bj,
                                    const moects_acc_class *cls, moects_result *r)
{
    int64_t outside = 0, worst = -1;
    double worst_ratio = -1, worst_err = 0;
    for (int64_t i = 0; i < in->out_elems; i++) {
        double err;
        if (!outside_bound(in, got, want, bj, i, &err)) continue;
        double ratio = bj->bound[i] > 0 ? err / bj->bound[i] : INFINITY;
        if (isnan(ratio)) ratio = INFINITY;
        outside++;
        if (ratio > worst_ratio || worst < 0) worst_ratio = ratio, worst = i, worst_err = err;
    }
    const int acc_fails = bj->st && accumulation_check(in, got, bj->st, r);
    if (!outside) {
        if (!acc_fails) return MOECTS_PASS_BOUNDED;
        accumulation_reason(in, cls, r);
        bj->share = 1;
        return MOECTS_FAIL_MISMATCH;
    }
    char g0[64], g[96], w[64], at[128];
    moects__format_value(in->out_dtype, got, worst, g0, sizeof g0);
    moects__value_noted(g0, g, sizeof g);
    moects__format_value(in->out_dtype, want, worst, w, sizeof w);
    moects_out_geom geo;
    moects__out_geom_of(in, &geo);
    moects__out_at(&geo, worst, at, sizeof at); /* as the diagnostics' at: lines */
    char buf[512];
    if (isinf(worst_err))
        snprintf(buf, sizeof buf,
                 "%lld elements outside their bounds; worst: %s, element %lld, got %s where exact_v1 is %s (a NaN "
                 "or an infinity only matches its own kind)",
                 (long long)outside, at, (long long)worst, g, w);
    else
        snprintf(buf, sizeof buf,
                 "%lld elements outside their bounds; worst: %s, element %lld, |got - exact| %.3g > bound %.3g (got "
                 "%s, exact %s)",
                 (long long)outside, at, (long long)worst, worst_err, bj->bound[worst], g, w);
    moects__copy_str(r->reason, sizeof r->reason, buf);
    return MOECTS_FAIL_MISMATCH;
}

/* A tolerance failure's reason gains where its first NaN or Inf against another value is, in the op's
 * coordinates, with both values: "...; there (t 14, d 21): got 0x7f80 (inf), want 0xeb7a (...)". */
static void unbounded_at(const moects_inputs *in, const void *got, const void *want, int64_t i, moects_result *r)
{
    moects_out_geom geo;
    moects__out_geom_of(in, &geo);
    char at[128], g[64], w[64];
    moects__out_at(&geo, i, at, sizeof at);
    moects__format_value(in->out_dtype, got, i, g, sizeof g);
    moects__format_value(in->out_dtype, want, i, w, sizeof w);
    size_t l = strlen(r->reason);
    snprintf(r->reason + l, sizeof r->reason - l, "; there %s: got %s, want %s", at, g, w);
}

/* The bounded verdict of got against ref's bounds: PASS_BOUNDED or FAIL_MISMATCH. Its mismatches and
 * first mismatch are the elements outside their bounds, or after a failed accumulation check those
 * over their share (none on a pass); on a failure *only is the outside_only output (NULL when memory
 * runs out: the diagnostics then read every differing element). */
static void judge_with_bound(const moects_judge_ref *ref, const moects_kernel *k, const void *got, moects_result *r,
                             void **only)
{
    const moects_inputs *in = ref->in;
    const moects_acc_class cls = {k->acc.bits, k->acc.truncation, k->split_k.max_splits};
    bound_judge bj = {ref->bound, ref->st, 0};
    r->verdict = judge_bounded(in, got, ref->want, &bj, &cls, r);
    moects_compare_result cr = {.first_index = -1}; /* a pass: nothing outside */
    if (r->verdict == MOECTS_FAIL_MISMATCH) {
        if (!(*only = outside_only(in, got, ref->want, &bj))) return; /* no memory: every differing element */
        moects__compare(in->out_dtype, *only, ref->want, in->out_elems, &cr);
    }
    r->mismatches = cr.mismatches;
    r->first_index = cr.first_index;
    snprintf(r->got, sizeof r->got, "%s", cr.got);
    snprintf(r->want, sizeof r->want, "%s", cr.want);
}

int moects__judge_in_enclosure(double g, double l, double h)
{
    if (isnan(l)) return isnan(g);
    if (l == -INFINITY && h == INFINITY) return 1;
    return !isnan(g) && l <= g && g <= h;
}

/* The enclosure's verdict (DESIGN.md "The fused MoE layer"): PASS_BOUNDED when every element lies in
 * its interval, else FAIL_MISMATCH with *near (malloc'd) holding, for the diagnostics, got inside
 * and the nearer end outside, so that comparing got with it counts and shows the elements outside
 * against the end they passed. The reason gives the enclosure's widths either way. */
static void judge_enclosure(const moects_judge_ref *ref, void *got, moects_result *r, void **near)
{
    const moects_inputs *in = ref->in;
    const size_t es = in->out_dtype == MOECTS_F32 ? 4 : 2;
    int64_t outside = 0;
    *near = malloc(in->out_bytes ? in->out_bytes : 1);
    for (int64_t i = 0; i < in->out_elems; i++) {
        double g = out_value(in->out_dtype, got, i), l = out_value(in->out_dtype, ref->lo, i);
        double h = out_value(in->out_dtype, ref->hi, i);
        int ok = moects__judge_in_enclosure(g, l, h);
        outside += !ok;
        if (*near)
            memcpy((char *)*near + (size_t)i * es, ok ? (const char *)got + (size_t)i * es
                   : (const char *)(isnan(l) || isnan(g) || g < l ? ref->lo : ref->hi) + (size_t)i * es, es);
    }
    r->verdict = outside ? MOECTS_FAIL_MISMATCH : MOECTS_PASS_BOUNDED;
    moects_compare_result cr = {.first_index = -1};
    if (*near) moects__compare(in->out_dtype, got, *near, in->out_elems, &cr);
    r->mismatches = *near ? cr.mismatches : outside;
    r->max_ulp = cr.max_ulp;
    r->first_index = cr.first_index;
    snprintf(r->got, sizeof r->got, "%s", cr.got);
    snprintf(r->want, sizeof r->want, "%s", cr.want);
    const moects_layer_tightness *t = ref->tight;
    size_t l = strlen(r->reason);
    if (t)
        snprintf(r->reason + l, sizeof r->reason - l, "%s%lld elements outside their enclosure; enclosure width median "
                 "%.0f, max %.0f output ULPs (%lld of %lld wider than 1 ULP, %lld unbounded, %lld NaN)",
                 l ? "; " : "", (long long)outside, t->median_ulps, t->max_ulps, (long long)t->wide,
                 (long long)t->elements, (long long)t->unbounded, (long long)t->nan);
}

/* One run's output against the reference: the op's own judge where it has one, else identical bits
 * under the kernel's recipe, its per-element bounds (acc), or its tolerance; moe_gemm: valid rows only
 * (got's other rows take the reference's bytes). A FAIL_MISMATCH gets its diagnostics. Returns 1 when
 * the claim lets runs differ (the op's judge says so), else 0. */
static int judge_one(const moects_judge_ref *ref, const moects_kernel *k, void *got, moects_result *r)
{
    const moects_inputs *in = ref->in;
    const moects__op_def *op = moects__op_of_inputs(in);
    if (op->judge) return op->judge(in, k->recipe, got, ref->want, r);
    moects_compare_result cr;
    void *only = NULL; /* a bounded failure's outside_only output, what the diagnostics read */
    mask_invalid_rows(in, got, ref->want);
    moects__compare(in->out_dtype, got, ref->want, in->out_elems, &cr);
    r->mismatches = cr.mismatches;
    r->max_ulp = cr.max_ulp;
    r->calc_diff = cr.calc_diff;
    r->first_index = cr.first_index;
    snprintf(r->got, sizeof r->got, "%s", cr.got);
    snprintf(r->want, sizeof r->want, "%s", cr.want);
    if (ref->lo) {
        judge_enclosure(ref, got, r, &only);
    } else if (k->recipe) {
        r->verdict = cr.mismatches == 0 ? MOECTS_PASS_EXACT : MOECTS_FAIL_MISMATCH;
    } else if (k->acc.bits) {
        judge_with_bound(ref, k, got, r, &only);
    } else {
        r->verdict = moects__within_tolerance(&cr, k->tol.max_calc_diff, k->tol.max_ulp, r->reason, sizeof r->reason)
                         ? MOECTS_PASS_TOLERANCE : MOECTS_FAIL_MISMATCH;
        if (r->verdict == MOECTS_FAIL_MISMATCH && cr.first_unbounded >= 0)
            unbounded_at(in, got, ref->want, cr.first_unbounded, r);
    }
    if (moects_verdict_is_pass(r->verdict) && in->row_valid && in->valid_rows == 0 &&
        !strstr(r->reason, "nothing compared")) {
        size_t l = strlen(r->reason);
        snprintf(r->reason + l, sizeof r->reason - l, "%snothing compared: no expert holds a row (the case checks "
                 "that an empty problem neither crashes nor writes where it must not)", l ? "; " : "");
    }
    if (r->verdict == MOECTS_FAIL_MISMATCH) {
        moects_out_geom geom;
        moects__out_geom_of(in, &geom);
        if (ref->lo && only) moects__diag_compute(&geom, in->out_dtype, got, only, &r->diag); /* against the end passed */
        else moects__diag_compute(&geom, in->out_dtype, only ? only : got, ref->want, &r->diag);
    }
    free(only);
    return 0;
}

int moects__judge_acc_check_applies(const moects_case *c) { return c->data != MOECTS_DATA_NEGZERO; }

int moects__judge_claim_bounded(const moects_kernel *k)
{
    const moects__op_def *op = moects__op(k->op);
    return k->acc.bits && (!k->recipe || (op && op->enclosure));
}

int moects__judge_claim_ok(const moects_case *c, const moects_kernel *k, moects_recipe recipe, moects_result *r)
{
    const moects__op_def *op = moects__op(c->op);
    const char *why = op && op->claim_refused ? op->claim_refused(c, recipe, moects__judge_claim_bounded(k)) : NULL;
    if (!why) return 1;
    r->verdict = MOECTS_FAIL_CRASH; /* the kernel's claim, not the case: no reference to compare with */
    snprintf(r->reason, sizeof r->reason, "the kernel claims %s, %s", k->recipe, why);
    return 0;
}

int moects__judge_runs(const moects_judge_ref *ref, const moects_kernel *k, void *const *got, int nruns,
                      moects_result *r)
{
    const moects_inputs *in = ref->in;
    int differ = 0, may_differ = ref->any_order;
    for (int run = 0; run < nruns; run++) {
        if (run > 0) { /* run 1's bits (valid rows): run 1's verdict */
            mask_invalid_rows(in, got[run], ref->want);
            if (in->out_bytes == 0 || memcmp(got[run], got[0], in->out_bytes) == 0) continue;
        }
        differ |= run > 0;
        may_differ |= judge_one(ref, k, got[run], r);
        if (r->verdict == MOECTS_FAIL_MISMATCH && run > 0) {
            size_t l = strlen(r->reason);
            snprintf(r->reason + l, sizeof r->reason - l, "%srun %d (fresh poison) failed where run 1 passed",
                     l ? "; " : "", run + 1);
        }
        if (!moects_verdict_is_pass(r->verdict)) return run;
    }
    if (!k->recipe || !differ || may_differ) return 0;
    moects_compare_result cr;
    moects__compare(in->out_dtype, got[1], got[0], in->out_elems, &cr);
    if (cr.mismatches) {
        r->verdict = MOECTS_FAIL_NONDETERMINISTIC;
        snprintf(r->reason, sizeof r->reason, "run 2 differs from run 1 in %lld elements, first at %lld: %s vs %s",
                 (long long)cr.mismatches, (long long)cr.first_index, cr.got, cr.want);
    }
    return 1;
}
